#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Count the guest kernel's instructions per round trip of a bench test.

A callgrind for the bench guests: scripts/rsiw/tcg-count.c counts every
translated block the guest kernels execute. 'run' boots a bench pair with the
plugin, runs one latency test of scripts/rsiw/guest/bench with many
iterations, dumps both VMs' counters when the test has settled and again
some seconds later, and prints the difference per function, per segment
received (the calls of tcp_v4_rcv/tcp_v6_rcv in the window: a 2-byte
latency test receives one segment per message), and how the blocks end
(what TCG does after them). Unlike a time measurement under TCG this repeats
for the same code whatever else the host does (within a few percent: timer
ticks and other per-second work are divided by the round trips of the
window).

The plugin also timestamps the calls of a few kernel functions in both VMs
on the host's clock: 'timeline' prints the median time between them (post
send -> start_xmit is a VM's TX path, start_xmit -> the peer's interrupt the
host's part, ...). These are times under TCG with the plugin loaded: compare
drivers in one quiet run each, not with the bench's numbers.
RSIW_TRACE=sym,... traces up to 12 more functions: kernel ones by System.map
name, module ones as MODULE:PART (the first function of MODULE.ko whose
mangled name contains PART, e.g. rsiw:4Conn7tx_pass).

  scripts/rsiw/tcg-count.py run --driver rsiw [--test ib_send_lat-2] [--out DIR]
                                [--no-count] [--base OTHER_DIR] [--secs S]
  scripts/rsiw/tcg-count.py show DIR [--role a|b] [--top 40] [--base OTHER_DIR]
                                [--per b:start_xmit]
  scripts/rsiw/tcg-count.py timeline DIR

A bandwidth test runs for --secs seconds (perftest -D; e.g. --test
ib_read_bw-4096 --secs 40); its counts are per segment received too (a GRO
skb of many segments): '--per b:start_xmit' divides by the segments VM b
sent in the window instead (one FPDU each with one-segment FPDUs),
'--per b:ib_uverbs_post_send' by the messages posted. '--test tcp' counts
iperf3, the bench's reference.

'--base' compares two runs function by function (siw and rsiw, or main and
a branch). Each run keeps its System.map and modules, so 'show' still
resolves it after the bench kernel is rebuilt."""
import argparse
import bisect
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("RSIW_CACHE", Path.home() / ".cache/rsiw"))
BUILD = CACHE / "build-bench"
ENDS: dict[int, str] = {}
# Functions whose calls are timestamped (host clock, both VMs): a round trip's timeline.
# RSIW_TRACE=sym,sym adds kernel functions (System.map names, at most 12 more).
TRACE = ("ib_uverbs_post_send", "start_xmit", "vp_interrupt", "tcp_v4_rcv") + tuple(
    s for s in os.environ.get("RSIW_TRACE", "").split(",") if s)
MODBASE_RE = re.compile(r"RSIW-MODTEXT (\w+) (0x[0-9a-f]+)")


class Syms:
    def __init__(self, d: Path, modules: dict[str, int]):
        syms = []
        mod: set[str] = set()
        smap = d / "System.map" if (d / "System.map").exists() else BUILD / "System.map"
        for line in smap.read_text().splitlines():
            f = line.split()
            if len(f) >= 3 and f[1] in "tTwW":
                syms.append((int(f[0], 16), f[2]))
        for name, base in modules.items():
            # The run's copy of the modules (vm.py's), else the build's.
            ko = d / f"{name}.ko"
            if not ko.exists():
                ko = BUILD / f"drivers/infiniband/sw/{name}/{name}.ko"
            if not ko.exists():
                continue
            nm = subprocess.run(["nm", "-n", "--defined-only", str(ko)],
                                capture_output=True, text=True).stdout
            # .text only: nm's addresses are section offsets for a .ko, and
            # other text sections (.init.text, .exit.text) would collide.
            secs = subprocess.run(["objdump", "-t", "-j", ".text", str(ko)],
                                  capture_output=True, text=True).stdout
            text = {l.split()[-1] for l in secs.splitlines() if " .text" in l}
            for line in nm.splitlines():
                f = line.split()
                if len(f) >= 3 and f[1] in "tT" and f[2] in text:
                    syms.append((base + int(f[0], 16), f[2]))
                    mod.add(f[2])
        syms.sort()
        # Rust v0 names, demangled (binutils' c++filt knows them), crate hashes dropped.
        dem = subprocess.run(["c++filt"], input="\n".join(n for _, n in syms),
                             capture_output=True, text=True).stdout.splitlines()
        if len(dem) == len(syms):
            syms = [(a, ("mod:" if n in mod else "") + re.sub(r"\[[0-9a-f]{16}\]", "", d))
                    for (a, n), d in zip(syms, dem)]
        self.addr = [a for a, _ in syms]
        self.name = [n for _, n in syms]

    def __call__(self, a: int) -> str:
        i = bisect.bisect_right(self.addr, a) - 1
        return self.name[i] if i >= 0 else "?"


def ending(last: str) -> str:
    """How a block ends, from the first bytes of its last instruction: what TCG does next
    (a chained jump is cheap; a return or indirect jump looks the next block up; sti,
    popf and friends leave the translated code for QEMU's loop)."""
    b = bytes.fromhex(last)
    while b and (b[0] in (0x2e, 0x3e, 0x66, 0xf0) or 0x40 <= b[0] <= 0x4f):
        b = b[1:]  # prefixes, REX
    if not b:
        return "other"
    o = b[0]
    if o in (0xc3, 0xc2):
        return "ret"
    if o == 0xff and len(b) > 1 and (b[1] >> 3) & 7 in (2, 3):
        return "call indirect"
    if o == 0xff and len(b) > 1 and (b[1] >> 3) & 7 in (4, 5):
        return "jmp indirect"
    if o == 0xe8:
        return "call"
    if o in (0xe9, 0xeb) or 0x70 <= o <= 0x7f or (o == 0x0f and len(b) > 1 and 0x80 <= b[1] <= 0x8f):
        return "jump"
    names = {0xfb: "sti", 0xfa: "cli", 0x9d: "popf", 0xcf: "iret", 0xf4: "hlt",
             0xe6: "out", 0xe7: "out", 0xee: "out", 0xef: "out", 0xe4: "in", 0xe5: "in",
             0xec: "in", 0xed: "in"}
    if o in names:
        return names[o]
    if o == 0xf3 and len(b) > 1 and b[1] == 0x90:
        return "pause"
    if o == 0x0f and len(b) > 1:
        return {0x30: "wrmsr", 0x32: "rdmsr", 0x07: "sysret", 0x05: "syscall",
                0x01: "0f01 (swapgs, ...)", 0x22: "mov cr"}.get(b[1], "other")
    return "other (page end, length)"


# Data accesses per block (runs with --tlb), by address.
ACCESSES: dict[Path, dict[int, int]] = {}


def load(p: Path) -> tuple[dict[int, tuple[int, int]], tuple[int, int]]:
    tbs, user = {}, (0, 0)
    acc = ACCESSES.setdefault(p, {})
    for line in p.read_text().splitlines():
        f = line.split()
        if f[0] in ("records", "tlb"):
            continue
        if f[0] == "user":
            user = (int(f[1]), int(f[2]))
            continue
        va, n, c = int(f[0], 16), int(f[1]), int(f[2])
        if len(f) > 3:
            ENDS[va] = ending(f[3])
        # A block translated more than once has one record per translation.
        old = tbs.get(va, (n, 0))
        tbs[va] = (n, old[1] + c)
        if len(f) > 5:
            acc[va] = acc.get(va, 0) + int(f[5])
    return tbs, user


def window(d: Path, role: str):
    """Per-function (instructions, block executions) between dump 0 and 1."""
    pre = f"dump-{role}" if (d / f"dump-{role}.0").exists() else "dump"
    a, ua = load(d / f"{pre}.0")
    b, ub = load(d / f"{pre}.1")
    mods = {}
    for line in (d / f"console-{role}.log").read_text(errors="replace").splitlines():
        m = MODBASE_RE.search(line)
        if m:
            mods[m.group(1)] = int(m.group(2), 16)
    syms = Syms(d, mods)
    fn: dict[str, list[int]] = {}
    ends: dict[tuple[str, str], int] = {}
    acc_a, acc_b = ACCESSES.get(d / f"{pre}.0", {}), ACCESSES.get(d / f"{pre}.1", {})
    for va, (n, c) in b.items():
        dc = c - a.get(va, (n, 0))[1]
        if dc <= 0:
            continue
        s = syms(va)
        if va >= 0xffffffffa0000000 and va < 0xffffffffff000000 and not s.startswith("mod:"):
            s = "module:?"
        e = fn.setdefault(s, [0, 0, 0])
        e[0] += dc * n
        e[1] += dc
        e[2] += acc_b.get(va, 0) - acc_a.get(va, 0)
        k = (group(s), ENDS.get(va, "?"))
        ends[k] = ends.get(k, 0) + dc
    # Calls of a function: executions of the block at its first instruction.
    entry = {syms.addr[i] for i, s in enumerate(syms.name) if s in ("tcp_v4_rcv", "tcp_v6_rcv")}
    rt = sum(c - a.get(va, (n, 0))[1] for va, (n, c) in b.items() if va in entry)
    user = (ub[0] - ua[0], ub[1] - ua[1])
    return fn, rt, user, ends


def tlb_window(d: Path, role: str) -> dict:
    """The simulated TLB's (accesses, victim hits, misses) by (mode, entries) between
    dump 0 and 1 (runs with --tlb)."""
    pre = f"dump-{role}" if (d / f"dump-{role}.0").exists() else "dump"
    t = []
    for k in (0, 1):
        t.append({(f[1], int(f[2])): [int(x) for x in f[3:6]]
                  for f in (line.split() for line in (d / f"{pre}.{k}").read_text().splitlines())
                  if f and f[0] == "tlb"})
    return {k: [y - x for x, y in zip(t[0].get(k, [0, 0, 0]), v)] for k, v in t[1].items()}


# Timer interrupt work: its cost per message grows with the time a message takes.
TICK_RE = re.compile(r"^(__?)?(hrtimer|tick_|timekeeping|update_vsyscall|ktime_get|sched_tick|"
                     r"task_tick|update_load_avg|__update_load_avg|update_curr|update_se|"
                     r"update_deadline|update_rq_clock|rcu_sched_clock_irq|run_timer_softirq|"
                     r"__run_timers|clockevents_|lapic_|timerqueue_|ntp_|irq_work_tick|"
                     r"account_|calc_global_load|update_wall_time|rb_erase_linked|"
                     r"rb_insert_color|rb_erase$|raw_notifier_call_chain|"
                     r"add_interrupt_randomness|_find_next_bit)")


def group(s: str) -> str:
    if s.startswith("mod:") or s == "module:?":
        return "driver module"
    if TICK_RE.match(s):
        return "timer ticks (per second, not per message)"
    if s.startswith("rust_helper_") or s.startswith(("kernel::", "<kernel::", "core::", "<core::", "pin_init", "<pin_init", "alloc::", "<alloc::")):
        return "Rust (kernel crate, helpers)"
    return "kernel"


def events(d: Path, name: str) -> int:
    """Calls of the traced function NAME ("a:start_xmit") in the counting window."""
    names = (d / "trace-names").read_text().split() if (d / "trace-names").exists() else TRACE
    role, _, sym = name.partition(":")
    if sym not in names:
        sys.exit(f"{sym} is not traced in {d} (traced: {', '.join(names)})")
    idx = str(names.index(sym))
    w0, w1 = (int(x) for x in (d / "window").read_text().split())
    n = 0
    for line in (d / f"trace-{role}").read_text().split("\n"):
        f = line.split()
        if len(f) == 2 and f[1] == idx and w0 <= int(f[0]) <= w1:
            n += 1
    return n


def show(args):
    d = Path(args.dir)
    fn, rt, user, ends = window(d, args.role)
    base = None
    if args.base:
        base = window(Path(args.base), args.role)
    unit = "segment received"
    if args.per:
        # Per call of a traced function instead (a bandwidth test: "b:start_xmit", the segments
        # VM b sent, one FPDU each with one-segment FPDUs; "b:ib_uverbs_post_send", the
        # messages posted).
        rt, unit = events(d, args.per), args.per
        if base:
            base = (base[0], events(Path(args.base), args.per), *base[2:])
    if not rt:
        sys.exit(f"no {unit} in the window")
    print(f"{d}, VM {args.role}: {rt} x {unit} in the window; per {unit}:")
    groups: dict[str, list[int]] = {}
    for s, v in fn.items():
        g = groups.setdefault(group(s), [0, 0, 0])
        for k in range(3):
            g[k] += v[k]
    bg: dict[str, list[int]] = {}
    if base:
        for s, v in base[0].items():
            g = bg.setdefault(group(s), [0, 0, 0])
            for k in range(3):
                g[k] += v[k]
    # Data accesses per function: runs with --tlb (a rep-prefixed string instruction is one
    # instruction but one access per element).
    has_acc = any(v[2] for v in fn.values())
    hdr = f"{'':<{args.width}} {'insns':>9} {'blocks':>8}" + (f" {'access':>8}" if has_acc else "")
    if base:
        hdr += f" {'base ins':>9} {'base blk':>8}" + (f" {'base acc':>8}" if has_acc else "")
    print(hdr)

    def line(name, v, bv):
        s = f"{name:<{args.width}.{args.width}} {v[0] / rt:9.0f} {v[1] / rt:8.0f}"
        if has_acc:
            s += f" {v[2] / rt:8.0f}" if len(v) > 2 else f" {'':>8}"
        if base:
            s += f" {bv[0] / base[1]:9.0f} {bv[1] / base[1]:8.0f}"
            if has_acc:
                s += f" {bv[2] / base[1]:8.0f}" if len(bv) > 2 else f" {'':>8}"
        print(s)
    line("guest kernel, all", [sum(v[k] for v in fn.values()) for k in range(3)],
         [sum(v[k] for v in base[0].values()) for k in range(3)] if base else None)
    for g in sorted(set(groups) | set(bg)):
        line(f"  {g}", groups.get(g, [0, 0, 0]), bg.get(g, [0, 0, 0]))
    line("user space", [user[1], user[0]], [base[2][1], base[2][0]] if base else None)
    for (mode, size), (acc, vh, miss) in sorted(tlb_window(d, args.role).items()):
        print(f"simulated TLB, {mode} mode, {size:4} entries: {acc / rt:9.0f} data accesses, "
              f"{vh / rt:6.1f} victim hits, {miss / rt:6.1f} misses")
    print()
    print()
    print("blocks per segment by how they end (TCG: 'jump' and 'call' chain; 'ret' and")
    print("indirect jumps look the next block up; sti, popf, wrmsr, out... leave the loop)")
    kinds = sorted({k for _, k in ends} | ({k for _, k in base[3]} if base else set()))
    for g in ("driver module", "Rust (kernel crate, helpers)", "kernel"):
        for k in kinds:
            v = ends.get((g, k), 0)
            bv = base[3].get((g, k), 0) if base else 0
            if v / rt >= 0.5 or (base and bv / base[1] >= 0.5):
                s = f"  {g[:14] + ': ' + k:<{args.width - 2}.{args.width - 2}} {'':>9} {v / rt:8.1f}"
                if base:
                    s += f" {'':>9} {bv / base[1]:8.1f}"
                print(s)
    print()
    names = set(fn) | (set(base[0]) if base else set())
    key = lambda s: -fn.get(s, [0, 0, 0])[2 if args.by_access else 0] / rt
    for s in sorted(names, key=key)[:args.top]:
        line(s, fn.get(s, [0, 0, 0]), base[0].get(s, [0, 0, 0]) if base else None)


def run(args):
    out = Path(args.out or CACHE / "logs" / f"count-{time.strftime('%Y%m%d-%H%M%S')}-{args.driver}")
    out.mkdir(parents=True, exist_ok=True)
    so = out / "tcg-count.so"
    subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-fvisibility=hidden", "-o",
                    str(so), str(TOP / "scripts/rsiw/tcg-count.c"), "-lpthread"], check=True)
    (out / "tools").mkdir(exist_ok=True)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o",
                    str(out / "tools/rdma-connect-delay.so"),
                    str(TOP / "tests/vm/tools/rdma-connect-delay.c"), "-ldl"], check=True)
    # The symbols of this run's kernel, for 'show' after a rebuild.
    shutil.copy(BUILD / "System.map", out / "System.map")
    for m in ("rsiw", "siw"):
        shutil.copy(BUILD / f"drivers/infiniband/sw/{m}/{m}.ko", out / f"{m}.ko")
    for pat in ("dump*", "ctl.*", "trace*", "window", "console-*.log"):
        for p in out.glob(pat):
            p.unlink()
    env = dict(os.environ)
    smap = {}
    for line in (BUILD / "System.map").read_text().splitlines():
        f = line.split()
        if len(f) >= 3 and f[2] in TRACE:
            smap[f[2]] = f[0]
    # "MODULE:pattern": the first function of MODULE.ko whose (mangled) name contains
    # pattern, at the first module's address (0xffffffffa0000000; checked after the run).
    for n in TRACE:
        if ":" in n:
            mod, pat = n.split(":", 1)
            nm = subprocess.run(["nm", "--defined-only",
                                 str(BUILD / f"drivers/infiniband/sw/{mod}/{mod}.ko")],
                                capture_output=True, text=True).stdout
            hits = [f for f in (x.split() for x in nm.splitlines())
                    if len(f) == 3 and f[1] in "tT" and pat in f[2]]
            if not hits:
                sys.exit(f"no function matching {pat} in {mod}.ko")
            smap[n] = f"{0xffffffffa0000000 + int(hits[0][0], 16):x}"
    pcs = ":".join(smap[n] for n in TRACE)
    (out / "trace-names").write_text("\n".join(TRACE) + "\n")
    env["RSIW_QEMU_ARGS"] = (env.get("RSIW_QEMU_ARGS", "") +
                             f" -plugin {so},dir={out},trace={pcs}"
                             f",count={0 if args.no_count else 1}"
                             f",tlb={1 if args.tlb else 0}").strip()
    env["RSIW_VM_TSC"] = "1"
    if args.iters is None:
        args.iters = 60000 if args.no_count else 80000
    # The bench loads the driver; its address is known after.
    # A bandwidth test runs for a fixed time (RSIW_BENCH_SECS): long enough for the window.
    secs = f"RSIW_BENCH_SECS={args.secs} RSIW_BENCH_CPU= " if args.secs else ""
    cmd = (f"{secs}RSIW_BENCH_LAT_ITERS={args.iters} RSIW_BENCH_ONLY='^{args.test}$' "
           "/rsiw/guest/bench; rc=$?; for m in rsiw siw; do "
           "[ -r /sys/module/$m/sections/.text ] && "
           "echo RSIW-MODTEXT $m $(cat /sys/module/$m/sections/.text); done; exit $rc")
    kargs = ["--karg", args.karg] if args.karg else []
    vm = subprocess.Popen([str(TOP / "scripts/rsiw/vm.py"), "run", "--variant", "bench",
                           "--vms", "2", "--driver", args.driver, "--driver-b", args.driver,
                           *kargs, "--quiet", "--timeout", "900", "--out", str(out),
                           "--cmd", cmd], env=env)
    log = out / "console-b.log"
    t0 = time.time()
    started = None
    # The bench's "tcp" test is iperf3, which it logs as such.
    name = "iperf3" if args.test == "tcp" else args.test
    pat = re.compile(r"b: " + re.escape(name) + r": client")
    while vm.poll() is None:
        time.sleep(0.5)
        if started is None and log.exists() and pat.search(log.read_text(errors="replace")):
            started = time.time()
            print(f"[count] {args.test} started after {started - t0:.0f} s", flush=True)
        if started is not None and time.time() - started >= args.settle:
            break
    if vm.poll() is not None:
        sys.exit(f"the VMs exited before the window (status {vm.returncode}); logs in {out}")
    # The QEMU of each VM: the one whose kernel command line has its role.
    pids = {}
    for p in [*Path("/proc").iterdir(), *Path("/proc").iterdir()]:
        if not p.name.isdigit():
            continue
        try:
            cl = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cl and b"qemu-system" in cl[0] and any(str(out).encode() in a for a in cl):
            for role in "ab":
                if any(f"rsiwvm.role={role}".encode() in a for a in cl):
                    pids[role] = p.name
    if len(pids) != 2:
        sys.exit(f"cannot find the VMs' QEMUs ({pids})")
    def command(pid: str, cmd: str, src: str, dst: str) -> None:
        """Has a VM's plugin write `src` (polls for its .done file), renamed to `dst`."""
        # The control file is a FIFO: opening it blocks while nobody reads, as after the
        # VM exited.
        while True:
            try:
                fd = os.open(out / f"ctl.{pid}", os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
                if vm.poll() is not None:
                    sys.exit(f"the VMs exited before {dst} was written; more --iters? ({out})")
                time.sleep(0.1)
        try:
            os.write(fd, (cmd + "\n").encode())
        finally:
            os.close(fd)
        while not (out / f"{src}.done").exists():
            if vm.poll() is not None:
                sys.exit(f"the VMs exited before {dst} was written; more --iters? ({out})")
            time.sleep(0.1)
        (out / src).rename(out / dst)

    marks = []
    for i in range(2):
        marks.append(time.monotonic_ns())
        for role, pid in pids.items():
            command(pid, "dump", f"dump.{pid}.{i}", f"dump-{role}.{i}")
        print(f"[count] dumps {i} at {time.time() - started:.0f} s", flush=True)
        if i == 0:
            time.sleep(args.window)
    (out / "window").write_text(f"{marks[0]} {marks[1]}\n")
    for role, pid in pids.items():
        command(pid, "trace", f"trace.{pid}", f"trace-{role}")
    rc = vm.wait()
    print(f"[count] VMs exited with {rc}; logs in {out}")
    args.dir = str(out)
    if not args.no_count:
        show(args)
    timeline(args)


def timeline(args):
    """Median time from each traced event to the next one, both VMs on one clock."""
    d = Path(args.dir)
    names = (d / "trace-names").read_text().split() if (d / "trace-names").exists() else TRACE
    ev = []
    for role in "ab":
        p = d / f"trace-{role}"
        if not p.exists():
            sys.exit(f"no {p}")
        for line in p.read_text().split("\n"):
            f = line.split()
            if len(f) == 2:
                ev.append((int(f[0]), f"{role}:{names[int(f[1])]}"))
    ev.sort()
    # The counting window (CLOCK_MONOTONIC, as the plugin's timestamps).
    w0, w1 = (int(x) for x in (d / "window").read_text().split())
    ev = [e for e in ev if w0 <= e[0] <= w1]
    pairs: dict[tuple[str, str], list[int]] = {}
    for (t0, x), (t1, y) in zip(ev, ev[1:]):
        pairs.setdefault((x, y), []).append(t1 - t0)
    n = max(len(v) for v in pairs.values())
    print(f"{d}: {len(ev)} events in {(w1 - w0) / 1e9:.1f} s; transitions seen at least {n // 20} times:")
    for (x, y), v in sorted(pairs.items(), key=lambda kv: -len(kv[1])):
        if len(v) < n // 20:
            continue
        v.sort()
        print(f"  {x:>24} -> {y:<24} {len(v):6} x  median {v[len(v) // 2] / 1e3:9.1f} us"
              f"  p10 {v[len(v) // 10] / 1e3:9.1f}  p90 {v[len(v) * 9 // 10] / 1e3:9.1f}")


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("--driver", default="rsiw")
    p.add_argument("--test", default="ib_send_lat-2")
    p.add_argument("--iters", type=int,
                   help="iterations of the test (default 80000, 60000 with --no-count)")
    p.add_argument("--secs", type=int,
                   help="duration of a bandwidth test (perftest -D), e.g. 40 for ib_read_bw-4096:"
                   " the settle time and the window must fit in its measured part")
    p.add_argument("--settle", type=float, default=8)
    p.add_argument("--window", type=float, default=10)
    p.add_argument("--karg")
    p.add_argument("--out")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--base")
    p.add_argument("--width", type=int, default=60)
    p.add_argument("--role", default="b", help="the VM to show, a or b")
    p.add_argument("--per", help="divide by the calls of a traced function in the window "
                   "(ROLE:NAME, e.g. b:start_xmit) instead of the segments received")
    p.add_argument("--by-access", action="store_true",
                   help="order functions by data accesses (runs with --tlb)")
    p.add_argument("--tlb", action="store_true",
                   help="also simulate QEMU's softmmu TLB for data accesses (slow)")
    p.add_argument("--no-count", action="store_true",
                   help="timestamps only: the timeline with less overhead")
    p = sub.add_parser("show")
    p.add_argument("dir")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--base")
    p.add_argument("--width", type=int, default=60)
    p.add_argument("--role", default="b", help="the VM to show, a or b")
    p.add_argument("--per", help="divide by the calls of a traced function in the window "
                   "(ROLE:NAME, e.g. b:start_xmit) instead of the segments received")
    p.add_argument("--by-access", action="store_true",
                   help="order functions by data accesses (runs with --tlb)")
    p = sub.add_parser("timeline")
    p.add_argument("dir")
    args = ap.parse_args()
    if args.cmd == "timeline":
        return timeline(args)
    run(args) if args.cmd == "run" else show(args)


if __name__ == "__main__":
    main()
