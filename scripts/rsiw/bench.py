#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""make bench, host side: boot one VM pair per configuration (siw, rsiw,
rsiw with 64 KiB FPDUs) at the same time and hand out the tests in turns.

The speed of a TCG guest drifts by 20-30 % over minutes, with the host's load
and whatever else runs on the machine (Documentation/infiniband/
rsiw-testing.rst). Pairs measured one after the other, minutes apart, cannot
resolve a gap of that size. Here every test runs in each pair back to back
(a few seconds apart), round after round, with the order of the pairs
reversed every other round; the ratio rsiw/siw is taken per round, between
neighbours, and the table shows the median of those ratios beside the
medians of the figures. An idle pair only polls a file twice a second.

Each pair's VMs are pinned like the other pairs' (VM a on the first host CPU,
VM b on the second: RSIW_VM_PIN, scripts/rsiw/vm.py), so the pair being
measured has one host CPU per VM.

Every boot of a pair has its own speed: two pairs running the same code
differ by up to 30 % for the whole run. RSIW_BENCH_PAIRS=N boots N pairs per
configuration (named siw, siw.2, ...); a configuration's figure in a round
is then the geometric mean of its pairs', which averages that out.

RSIW_BENCH_SWAP=1 takes the boots out of the ratio: every pair boots the
same kernel and measures every configuration, swapping the driver between
turns (rdma link delete, rmmod, modprobe with the configuration's
module parameters, rdma link add: the guest's "driver" turn), each test run
with each driver back to back in the same QEMU processes. The order of the
drivers alternates round by round, so a pair swaps once per round; with three
or more configurations it rotates, so that each runs just after a swap.

Besides the figures of the tests, the table has two kinds of rows (issue
39): the bandwidth tools at 64 KiB with 8 QPs at once (size 65536q8,
perftest's -q 8), and cpu:TEST, the guest CPU time both VMs of the pair
spent per GB that TEST moved (s/GB, over the test's measured interval), with
kcpu:TEST, the kernel's part of it (perftest polls its CQ in user space, a
vCPU's worth whatever the driver costs); by default for the bandwidth tools
at 64 KiB and iperf3 (RSIW_BENCH_CPU, scripts/rsiw/guest/bench). For those,
as for latencies, lower is better: their ratios are siw/x and tcp/x, so that
> 1 means x is better in every ratio column.

Usage: bench.py OUT ROUNDS [ONLY]; OUT holds the tools directory (the
connect-delay shim) and receives one directory per pair and results.txt.
"""
import os
import random
import re
import shlex
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
# name, driver, module parameters. "rsiw-64k" is rsiw with FPDUs of up to
# 64 KiB (fpdu_segments=45) instead of one per TCP segment.
# rsiw runs with RFC 7306 on (rfc7306=1: the atomics and immediate data of the kext test
# and of the RFC 7306 perftest rows; the other tests use none of it).
CONFIGS = [("siw", "siw", ""), ("rsiw", "rsiw", "rfc7306=1"),
           ("rsiw-64k", "rsiw", "fpdu_segments=45 rfc7306=1")]
# RSIW_BENCH_CONFIGS=rsiw boots only the named configurations (comma-separated) besides
# siw, the reference: more rounds in the same time where rsiw-64k adds nothing (rsiw and
# rsiw-64k run the same code for messages of one MSS or less).
_only = {c for c in os.environ.get("RSIW_BENCH_CONFIGS", "").split(",") if c}
if _only:
    CONFIGS = [c for c in CONFIGS if c[0] == "siw" or c[0] in _only]
# RSIW_BENCH_EXTRA="NAME:PARAMS;..." adds rsiw configurations with other module parameters
# (e.g. "rsiw-nobh:rfc7306=1 bh_respond=0"), to measure one change against the default in the
# same run: the results then also give rsiw/NAME per round.
EXTRA = [("rsiw",) + tuple(e.split(":", 1)) for e in
         os.environ.get("RSIW_BENCH_EXTRA", "").split(";") if ":" in e]
CONFIGS += [(name, drv, params) for drv, name, params in EXTRA]
NAMES = [c[0] for c in CONFIGS]
SWAP = os.environ.get("RSIW_BENCH_SWAP", "") == "1"
TURN_TIMEOUT = 600
# Units of figures where lower is better: latencies, CPU time per GB (cpu: and kcpu: rows).
LOWER_BETTER = ("us", "s/GB")


def tests(only: str) -> list[tuple[str, str]]:
    """The bench's tests in their order, as (TOOL, SIZE); RSIW_BENCH_ONLY is
    a grep -E pattern over TOOL-SIZE, "tcp" and "connect". SIZE 65536q8: 64 KiB
    with 8 QPs (perftest's -q 8)."""
    t = [("tcp", "")]
    t += [(tool, str(s)) for tool in ("ib_write_bw", "ib_read_bw", "ib_send_bw")
          for s in (64, 4096, 65536, 1048576, "65536q8")]
    t += [(tool, str(s)) for tool in ("ib_write_lat", "ib_read_lat", "ib_send_lat")
          for s in (2, 4096)]
    # RFC 7306 from user space through the patched siw provider (the atomic and
    # immediate-data tools: rsiw only), next to what they are compared with.
    t += [(tool, "8") for tool in ("ib_read_lat", "ib_atomic_lat", "ib_write_lat",
                                   "ib_write_imm_lat", "ib_atomic_bw")]
    # RFC 7306 from a kernel ULP (rsiw only): latencies and the FetchAdd rate.
    t += [("kext", "8")]
    t += [("connect", "")]
    if only:
        # grep -E and Python's re agree on the patterns this takes.
        t = [x for x in t if re.search(only, f"{x[0]}-{x[1]}" if x[1] else x[0])]
    return t


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] bench: {msg}", file=sys.stderr, flush=True)


def pair_name(cfg: str, k: int) -> str:
    return cfg if k == 1 else f"{cfg}.{k}"


class Pair:
    def __init__(self, out: Path, cfg: str, drv: str, params: str, k: int = 1):
        self.cfg = cfg
        self.k = k
        self.name = pair_name(cfg, k)
        kargs = " ".join(f"{drv}.{x}" for x in params.split())
        self.dir, self.turn = out / self.name, 0
        self.dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-r", str(out / "tools"), str(self.dir)], check=True)
        (self.dir / ".turn").mkdir(exist_ok=True)
        # RSIW_BENCH_CPU (which tests get a cpu: row) only when set: the guest has the default.
        cpu = ""
        if "RSIW_BENCH_CPU" in os.environ:
            cpu = f"RSIW_BENCH_CPU={shlex.quote(os.environ['RSIW_BENCH_CPU'])} "
        argv = [str(SCRIPTS / "vm.py"), "run", "--variant", "bench", "--vms", "2",
                "--driver", drv, "--driver-b", drv, "--quiet", "--timeout", "86400",
                "--out", str(self.dir), "--cmd",
                f"RSIW_BENCH_TURNS=1 RSIW_BENCH_STATS={os.environ.get('RSIW_BENCH_STATS', '')} "
                f"RSIW_BENCH_LAT_ITERS={os.environ.get('RSIW_BENCH_LAT_ITERS', '')} "
                f"RSIW_BENCH_PT={shlex.quote(os.environ.get('RSIW_BENCH_PT', ''))} "
                f"RSIW_BENCH_BW_ITERS={os.environ.get('RSIW_BENCH_BW_ITERS', '')} "
                f"RSIW_BENCH_EVENTS={os.environ.get('RSIW_BENCH_EVENTS', '')} "
                f"RSIW_BENCH_SCHED={shlex.quote(os.environ.get('RSIW_BENCH_SCHED', ''))} "
                f"{cpu}/rsiw/guest/bench"]
        if kargs:
            argv += ["--karg", kargs]
        self.log = open(self.dir / "vm.log", "wb")
        self.paused = False
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     env=dict(os.environ, RSIW_VM_MONITOR="1"))

    def monitor(self, cmd: str) -> None:
        """Runs a QEMU monitor command in both VMs of the pair."""
        for role in "ab":
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(10)
                s.connect(str(self.dir / f"monitor-{role}.sock"))
                buf = b""
                # The banner ends with the first prompt; the command's output with the next.
                for send in (None, cmd):
                    if send:
                        s.sendall(send.encode() + b"\n")
                    while not buf.endswith(b"(qemu) "):
                        data = s.recv(4096)
                        if not data:
                            raise RuntimeError(f"the {self.name} pair's monitor closed")
                        buf += data
                    buf = b""

    def pause(self) -> None:
        """Stops both VMs (their clocks too): an idle TCG guest still takes 7-9 % of a
        host CPU (periodic ticks), which the pair being measured would lose."""
        if not self.paused and self.proc.poll() is None:
            self.monitor("stop")
            self.paused = True

    def resume(self) -> None:
        if self.paused and self.proc.poll() is None:
            self.monitor("cont")
            self.paused = False

    def give(self, what: str) -> int:
        """Hand the pair its next turn; returns the turn's number."""
        self.turn += 1
        t = self.dir / ".turn" / str(self.turn)
        tmp = t.with_suffix(".tmp")
        tmp.write_text(what + "\n")
        tmp.rename(t)
        return self.turn

    def wait(self, n: int, timeout: float) -> list[str]:
        """The result rows of turn n, once the pair has finished it."""
        done = self.dir / ".turn" / f"{n}.done"
        end = time.monotonic() + timeout
        while not done.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the {self.name} pair stopped (status {self.proc.returncode}); "
                                   f"logs in {self.dir}")
            if time.monotonic() > end:
                raise RuntimeError(f"the {self.name} pair did not finish turn {n} in {timeout:.0f} s; "
                                   f"logs in {self.dir}")
            time.sleep(0.2)
        return done.read_text().splitlines()

    def stop(self, timeout: float = 120) -> int:
        if self.proc.poll() is None:
            try:
                self.resume()
            except (OSError, RuntimeError):
                pass
            self.give("exit")
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            return self.proc.wait()


def main() -> int:
    out, rounds = Path(sys.argv[1]), int(sys.argv[2])
    only = sys.argv[3] if len(sys.argv) > 3 else ""
    todo = tests(only)
    if not todo:
        log(f"RSIW_BENCH_ONLY={only!r} selects no test")
        return 1
    npairs = max(1, int(os.environ.get("RSIW_BENCH_PAIRS", "1") or "1"))
    if SWAP:
        # Every pair measures every configuration; it boots with the first (siw).
        pairs = [Pair(out, "swap", "siw", "", k=k) for k in range(1, npairs + 1)]
        # (pair, configuration, name of its figures): a configuration's figures are
        # named as its own pairs' would be without swapping.
        runs = [(p, c, pair_name(c[0], p.k)) for p in pairs for c in CONFIGS]
    else:
        pairs = [Pair(out, *c, k=k) for k in range(1, npairs + 1) for c in CONFIGS]
        runs = [(p, None, p.name) for p in pairs]
    members = [(name, c[0] if c else p.cfg) for p, c, name in runs]
    # res[(test, size, unit)][pair name][round] = value
    res: dict = {}
    notes = []
    failed = None
    try:
        # A first turn that runs nothing: every pair has booted and set up its link, and
        # is paused until its turns.
        for p in pairs:
            p.wait(p.give("noop"), TURN_TIMEOUT * 3)
            p.pause()
        for test, size in todo:
            for r in range(1, rounds + 1):
                order = runs if r % 2 else runs[::-1]
                if SWAP and len(CONFIGS) > 2:
                    # Rotated instead: reversed, the middle configuration of three would
                    # always run just after a swap (a freshly loaded module), the others
                    # half the time; rotated, each takes every place and follows a swap.
                    k = (r - 1) % len(CONFIGS)
                    order = sorted(runs, key=lambda x: (CONFIGS.index(x[1]) - k) % len(CONFIGS))
                for p, c, name in order:
                    p.resume()
                    if c:
                        n = p.give(f"driver {c[1]} {c[2]}".strip())
                        p.wait(n, TURN_TIMEOUT)
                    n = p.give(f"{test} {size}".strip())
                    rows = p.wait(n, TURN_TIMEOUT)
                    p.pause()
                    log(f"round {r} {name}: " + "; ".join(rows))
                    for line in rows:
                        if line.startswith("#"):
                            notes.append(f"{name} round {r}: {line[1:].strip()}")
                            continue
                        f = line.split()
                        if len(f) == 4:
                            v = res.setdefault((f[0], f[1], f[3]), {}).setdefault(name, {})
                            v[r] = float(f[2])
    except (RuntimeError, OSError) as e:
        failed = str(e)
    finally:
        for p in pairs:
            rc = p.stop()
            if rc != 0 and not failed:
                failed = f"the {p.name} pair failed (status {rc}); logs in {p.dir}"
    if failed:
        log(failed)
        return 1
    report(out, rounds, by_config(members, res), res, notes)
    return 0


def by_config(members: list, res: dict) -> dict:
    """The figures per configuration and round: the geometric mean of its pairs'
    (members: (name of a pair's figures, configuration))."""
    out: dict = {}
    for key, v in res.items():
        for cfg in NAMES:
            names = [n for n, c in members if c == cfg]
            rounds = sorted({r for n in names for r in v.get(n, {})})
            for r in rounds:
                xs = [v[n][r] for n in names if r in v.get(n, {})]
                if xs and all(x > 0 for x in xs):
                    out.setdefault(key, {}).setdefault(cfg, {})[r] = statistics.geometric_mean(xs)
                elif xs:
                    out.setdefault(key, {}).setdefault(cfg, {})[r] = statistics.mean(xs)
    return out


def interval(xs: list, n: int = 4000) -> tuple[float, float, float]:
    """The geometric mean of xs and a 90 % bootstrap interval for it (resampling xs,
    seeded: the same figures give the same interval)."""
    rng = random.Random(len(xs))
    means = sorted(statistics.geometric_mean(rng.choices(xs, k=len(xs))) for _ in range(n))
    return statistics.geometric_mean(xs), means[n // 20], means[n - 1 - n // 20]


# Ratios within one configuration, for what siw cannot run (RFC 7306): (name, test, its
# reference), both latencies of the same pair taken in neighbouring turns.
SAME_CONFIG = [("atomic/read8", ("ib_atomic_lat", "8", "us"), ("ib_read_lat", "8", "us")),
               ("imm/plain", ("ib_write_imm_lat", "8", "us"), ("ib_write_lat", "8", "us")),
               ("kext fadd/read8", ("kext_fadd_lat", "8", "us"), ("kext_read_lat", "8", "us")),
               ("kext imm/plain", ("kext_wimm_lat", "8", "us"), ("kext_write_lat", "8", "us"))]


def same_config_ratios(res: dict) -> list[str]:
    """The SAME_CONFIG ratios per configuration: the median of the per-round ratios
    and the rounds' own (> 1: slower than the reference)."""
    lines = []
    for name, key, ref in SAME_CONFIG:
        x, r = res.get(key, {}), res.get(ref, {})
        for cfg in NAMES:
            rs = [x[cfg][n] / r[cfg][n] for n in x.get(cfg, {})
                  if r.get(cfg, {}).get(n)]
            if rs:
                lines.append(f"  {name:<16} {cfg:<9} {statistics.median(rs):6.2f}   rounds: "
                             + " ".join(f"{v:.2f}" for v in rs))
    if lines:
        lines.insert(0, "RFC 7306, in the same configuration (siw has none; median of the "
                        "per-round ratios, > 1: slower than the reference):")
    return lines


def report(out: Path, rounds: int, res: dict, raw: dict, notes: list) -> None:
    med = lambda v: statistics.median(v) if v else None
    fmt = lambda x: f"{x:10.2f}" if x is not None else f"{'-':>10}"
    rat = lambda x: f"{x:8.2f}" if x is not None else f"{'n/a':>8}"

    def better(unit, ref, x):
        # x relative to ref, > 1 when x is better: higher rates, lower latencies and
        # CPU costs.
        if not (ref and x):
            return None
        return ref / x if unit in LOWER_BETTER else x / ref

    tcp = res.get(("tcp", "131072", "MB/s"), {})
    lines = [f"{'test':<16} {'size':>7} {'siw':>10} {'rsiw':>10} {'rsiw-64k':>10} {'unit':<6} "
             f"{'rsiw/siw':>8} {'64k/siw':>8} {'siw/tcp':>8} {'rsiw/tcp':>8} {'64k/tcp':>8}"]
    for (test, size, unit), v in res.items():
        m = {d: med(list(v.get(d, {}).values())) for d in NAMES}

        def vs_siw(d):
            # The median of the per-round ratios: each round's figures were
            # measured seconds apart.
            rs = [better(unit, v["siw"][r], v[d][r]) for r in v.get(d, {})
                  if r in v.get("siw", {})]
            return med([x for x in rs if x is not None])

        def vs_tcp(d):
            # Bandwidth: RDMA's over TCP's; CPU per GB: TCP's over RDMA's (> 1: RDMA
            # costs less). Both from the same pair in the same round.
            if unit == "MB/s" and test != "tcp":
                rs = [v[d][r] / tcp[d][r] for r in v.get(d, {}) if tcp.get(d, {}).get(r)]
            elif unit == "s/GB" and not test.endswith(":tcp"):
                # cpu:TOOL against cpu:tcp, kcpu:TOOL against kcpu:tcp.
                ref = res.get((test.split(":")[0] + ":tcp", "131072", "s/GB"), {})
                rs = [ref[d][r] / v[d][r] for r in v.get(d, {})
                      if ref.get(d, {}).get(r) and v[d][r]]
            else:
                return None
            return med(rs)
        lines.append(f"{test:<16} {size:>7} {fmt(m.get('siw'))} {fmt(m.get('rsiw'))} {fmt(m.get('rsiw-64k'))} "
                     f"{unit:<6} {rat(vs_siw('rsiw'))} {rat(vs_siw('rsiw-64k'))} "
                     f"{rat(vs_tcp('siw'))} {rat(vs_tcp('rsiw'))} {rat(vs_tcp('rsiw-64k'))}")
    npairs = max((len(v) for v in raw.values()), default=len(NAMES)) // len(NAMES)
    if npairs > 1:
        lines.append(f"({npairs} pairs per configuration: each round's figure is the geometric "
                     "mean of its pairs')")
    lines += [f"(figures: medians of {rounds} round(s); ratios: medians of the per-round ratios,",
              " the pairs taking turns test by test; x/siw > 1: x is better, for latencies",
              " it is siw/x; x/tcp: RDMA bandwidth over iperf3's on the same pair's link;",
              " rsiw-64k: rsiw with fpdu_segments=45, FPDUs of up to 64 KiB)"]
    if any(k[1].endswith("q8") for k in res):
        lines.append("(65536q8: 64 KiB messages on 8 QPs at once, perftest's -q 8)")
    if any(k[2] == "s/GB" for k in res):
        lines += ["(cpu:TEST, s/GB: guest CPU seconds, both VMs of the pair, per GB that TEST",
                  " moved over its measured interval; kcpu:TEST: the kernel's part (system, irq,",
                  " softirq: without perftest's polling of its CQ, which keeps a vCPU busy).",
                  " LOWER IS BETTER, so their ratios are siw/x and, against cpu:tcp (kcpu:tcp:",
                  " iperf3's on the same pair), tcp/x: > 1, x costs less CPU per byte)"]
    lines += notes
    lines += same_config_ratios(res)
    # The per-round ratios, their geometric mean and how sure it is: a 90 % interval from
    # resampling the rounds (the host's speed swings, rsiw-testing.rst, make single rounds
    # range over 2x; with few rounds the interval is rough).
    spread = []
    pairs = [(d, "siw") for d in NAMES[1:]] + [("rsiw", e[1]) for e in EXTRA]
    for (test, size, unit), v in res.items():
        for d, ref in pairs:
            rs = [better(unit, v[ref][r], v[d][r]) for r in v.get(d, {})
                  if r in v.get(ref, {})]
            rs = [x for x in rs if x]
            if len(rs) < 2:
                continue
            g, lo, hi = interval(rs)
            spread.append(f"  {test:<16} {size:>7} {d + '/' + ref:<12} {' '.join(f'{x:.2f}' for x in rs)}"
                          f"  geomean {g:.2f} [{lo:.2f}, {hi:.2f}]")
    if spread:
        lines.append("ratios per round, geometric mean [90 % interval over rounds]:")
        lines += spread
    if SWAP:
        # Each boot's own ratio (its rounds' geometric mean): with the drivers swapped in
        # the same VMs, the boots should agree within their rounds' spread.
        lines.append("ratios per boot (RSIW_BENCH_SWAP=1), geometric mean of its rounds:")
        for (test, size, unit), v in raw.items():
            for d in NAMES[1:]:
                per = []
                for k in range(1, npairs + 1):
                    ref, x = v.get(pair_name("siw", k), {}), v.get(pair_name(d, k), {})
                    rs = [better(unit, ref[r], x[r]) for r in x if r in ref]
                    rs = [y for y in rs if y]
                    if rs:
                        per.append(f"{statistics.geometric_mean(rs):.2f}")
                lines.append(f"  {test:<16} {size:>7} {d + '/siw':<12} {' '.join(per)}")
    # Every round's figures, for the spread.
    lines.append("per round:")
    for (test, size, unit), v in raw.items():
        for d in v:
            vals = " ".join(f"{v.get(d, {}).get(r, float('nan')):.2f}" for r in range(1, rounds + 1))
            lines.append(f"  {test:<16} {size:>7} {d:<10} {vals} {unit}")
    lines.append(f"logs: {out}")
    text = "\n".join(lines) + "\n"
    (out / "results.txt").write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    sys.exit(main())
