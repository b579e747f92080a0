#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Draw make bench's results: bandwidth against message size for each
perftest bandwidth tool (siw, rsiw, rsiw-64k, and TCP's bandwidth on the
same link as a line), and the latency tools' medians.

  bench-plot.py RESULTS.TXT OUT.PNG [--title TEXT]

RESULTS.TXT is the results.txt that scripts/rsiw/bench.py writes into the
bench's log directory (its table: TEST SIZE SIW RSIW RSIW-64K UNIT RATIOS...,
"-" where a configuration did not run). make bench (scripts/rsiw/bench.sh)
calls it and saves the picture as Documentation/infiniband/rsiw-bench.png.
Rows with 8 QPs (size 65536q8) are drawn as open markers at 64 KiB beside
the lines; the cpu: and kcpu: rows (CPU time per GB) are not drawn.

Runs with Debian's python3-matplotlib (hence /usr/bin/python3).
"""
import argparse
import math
import statistics
import sys
from pathlib import Path

CONFIGS = ("siw", "rsiw", "rsiw-64k")
STYLE = {"siw": ("tab:gray", "o"), "rsiw": ("tab:blue", "s"), "rsiw-64k": ("tab:orange", "^")}
BW_TOOLS = ("ib_write_bw", "ib_read_bw", "ib_send_bw")
LAT_TOOLS = ("ib_write_lat", "ib_read_lat", "ib_send_lat")


def parse(text: str) -> dict:
    """{(test, size): {config: value}} and {test: unit} from results.txt's table;
    size: bytes, or (bytes, QPs) for a size such as 65536q8."""
    rows, units = {}, {}
    lines = text.splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.split()[:3] == ["test", "size", "siw"])
    except StopIteration:
        raise SystemExit("no results table (a header line 'test size siw ...') in the input")
    for line in lines[start + 1:]:
        f = line.split()
        if len(f) < 6 or line.startswith("("):
            break
        test, size, vals, unit = f[0], parse_size(f[1]), f[2:5], f[5]
        rows[(test, size)] = {c: float(v) for c, v in zip(CONFIGS, vals) if v != "-"}
        units[test] = unit
    if not rows:
        raise SystemExit("the results table is empty")
    return {"rows": rows, "units": units}


def parse_size(s: str):
    """"65536" -> 65536, "65536q8" -> (65536, 8)."""
    if "q" in s:
        n, q = s.split("q", 1)
        return (int(n), int(q))
    return int(s)


def size_text(n: int) -> str:
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def plot(res: dict, out: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda y, _: f"{y:g}")

    rows = res["rows"]
    tcp = [v for (t, _), r in rows.items() if t == "tcp" for v in r.values()]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), constrained_layout=True)
    bw_axes = [axes[0][0], axes[0][1], axes[1][0]]
    for ax, tool in zip(bw_axes, BW_TOOLS):
        sizes = sorted(s for (t, s) in rows if t == tool and isinstance(s, int))
        # Several QPs at once (perftest's -q): open markers at the message size.
        multi = sorted(s for (t, s) in rows if t == tool and isinstance(s, tuple))
        for c in CONFIGS:
            pts = [(s, rows[(tool, s)][c]) for s in sizes if c in rows[(tool, s)]]
            color, marker = STYLE[c]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, marker=marker, label=c)
            for n, q in multi:
                if c in rows[(tool, (n, q))]:
                    ax.plot([n], [rows[(tool, (n, q))][c]], linestyle="none", marker=marker,
                            markerfacecolor="none", markeredgecolor=color, markersize=9,
                            label=f"{c}, -q {q}" if ax is bw_axes[0] else None)
        if tcp:
            ax.axhline(statistics.median(tcp), color="black", linestyle="--", linewidth=1,
                       label="TCP (iperf3)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        if sizes:
            ax.set_xticks(sizes, [size_text(s) for s in sizes])
        ax.set_title(tool)
        ax.set_xlabel("message size")
        ax.set_ylabel(f"bandwidth ({res['units'].get(tool, 'MB/s')})")
        ax.grid(True, which="both", alpha=0.3)
    bw_axes[0].legend(loc="lower right", fontsize="small")

    ax = axes[1][1]
    groups = [(t, s) for t in LAT_TOOLS
              for s in sorted(s for (u, s) in rows if u == t and isinstance(s, int))]
    width = 0.8 / len(CONFIGS)
    for i, c in enumerate(CONFIGS):
        xs = [g + (i - (len(CONFIGS) - 1) / 2) * width for g in range(len(groups))]
        ys = [rows[k].get(c, math.nan) for k in groups]
        if not all(math.isnan(y) for y in ys):
            ax.bar(xs, ys, width, color=STYLE[c][0], label=c)
    ax.set_xticks(range(len(groups)),
                  [f"{t.removeprefix('ib_').removesuffix('_lat')}\n{size_text(s)}" for t, s in groups])
    ax.set_title("latency (median), lower is better")
    ax.set_ylabel(f"latency ({res['units'].get(LAT_TOOLS[0], 'us')})")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.savefig(out, dpi=90, metadata={"Software": None})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    plot(parse(args.results.read_text()), args.out, args.title)
    print(f"plot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
