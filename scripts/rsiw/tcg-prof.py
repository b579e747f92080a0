#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Resolve a host perf profile of a TCG guest to guest kernel functions.

Boot the guest with perf maps and a fixed kernel address, then record its
QEMU process with the host's perf:

  RSIW_QEMU_ARGS=-perfmap scripts/rsiw/vm.py run --karg nokaslr ... &
  perf record -F 2000 -o perf.data -p <pid of that QEMU> -- sleep 5
  scripts/rsiw/tcg-prof.py perf.data [--variant bench] [--top 40]

QEMU names every translated block "guest-0x<guest pc>"; this maps those to
System.map and to rsiw.ko's symbols (loaded at the first module address,
0xffffffffa0000000, when it is the first module; pass --module-base
otherwise, from /sys/module/rsiw/sections/.text). Time QEMU spends in its
own helpers and device emulation cannot be attributed to guest code and is
listed separately."""
import argparse
import bisect
import os
import re
import subprocess
from pathlib import Path


def symbols(build: Path, base: int) -> tuple[list[int], list[str]]:
    syms = []
    for line in (build / "System.map").read_text().splitlines():
        f = line.split()
        if len(f) >= 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16), f[2]))
    ko = build / "drivers/infiniband/sw/rsiw/rsiw.ko"
    nm = subprocess.run(["nm", "-n", "--defined-only", str(ko)],
                        capture_output=True, text=True).stdout
    for line in nm.splitlines():
        f = line.split()
        if len(f) >= 3 and f[1] in "tT":
            syms.append((base + int(f[0], 16), "rsiw:" + f[2]))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--variant", default="bench")
    ap.add_argument("--module-base", default="0xffffffffa0000000")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--tid", help="only these QEMU threads (perf script --tid), e.g. one vCPU;"
                    " percentages are of their time")
    ap.add_argument("--time", help="only this interval (perf script --time), e.g. the"
                    " steady state of a benchmark: 'start,stop' in perf's seconds")
    ap.add_argument("--iters", type=float, help="also print each symbol's time per iteration"
                    " (ns; period sum over ITERS, e.g. the messages of the interval)")
    a = ap.parse_args()
    cache = Path(os.environ.get("RSIW_CACHE", Path.home() / ".cache/rsiw"))
    addrs, names = symbols(cache / f"build-{a.variant}", int(a.module_base, 16))
    # perf script, not perf report: every guest PC is a symbol of its own, and
    # perf report rounds the long tail of them to 0.00%.
    cmd = ["perf", "script", "-i", a.data, "-F", "tid,period,ip,sym"]
    if a.tid:
        cmd += ["--tid", a.tid]
    if a.time:
        cmd += ["--time", a.time]
    rep = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    agg: dict[str, float] = {}
    total = 0
    for line in rep.splitlines():
        f = line.split()
        if len(f) < 2 or not f[1].isdigit():
            continue
        period, sym = int(f[1]), (f[3] if len(f) > 3 else "[unknown]")
        total += period
        g = re.match(r"guest-0x([0-9a-f]+)$", sym)
        if not g:
            name = "(qemu: TCG helpers)" if sym.startswith("helper_") else "(qemu and host)"
        elif int(g.group(1), 16) < 0xffff800000000000:
            name = "(guest user space)"
        else:
            i = bisect.bisect_right(addrs, int(g.group(1), 16)) - 1
            name = names[i] if i >= 0 else "(unknown guest kernel)"
        agg[name] = agg.get(name, 0.0) + period
    if a.iters:
        print(f"total {total / a.iters:10.0f} ns per iteration")
    for name, v in sorted(agg.items(), key=lambda x: -x[1])[:a.top]:
        per = f"{v / a.iters:10.0f} ns  " if a.iters else ""
        print(f"{100.0 * v / max(total, 1):6.2f}%  {per}{name}")


main()
