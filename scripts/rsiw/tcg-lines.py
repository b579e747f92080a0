#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Attribute a tcg-count.py run's driver module instructions to source lines.

Per-function counts do not show where inside an inlined hot function the
instructions go (three moves of a large value, a match on every ring
access). This takes a run of scripts/rsiw/tcg-count.py whose module was
built with line tables, gives every executed instruction of the module its
block's count per segment received, and sums them per source line with
addr2line's inline frames:

  KRUSTFLAGS=-Cdebuginfo=1 make kernel-bench   # same code within ~1 %
  scripts/rsiw/tcg-count.py run --driver rsiw --out /tmp/cnt/dbg
  scripts/rsiw/tcg-lines.py /tmp/cnt/dbg [--role b] [--top 60] [--stacks REGEX]
  scripts/rsiw/tcg-lines.py /tmp/cnt/dbg --kernel 'SkbData.*copy_to_raw'  # vmlinux
  make kernel-bench                            # back to the plain build

'innermost' is the line that wrote the instruction (often core's
uint_macros.rs or ptr/mod.rs); 'project' is the first frame in the driver
or the kernel crate, which is usually where to look. --stacks prints the
inline stacks (six frames) of the instructions whose first two frames match
REGEX, e.g. 'refcount.rs|arc.rs' to find who takes references."""
import argparse
import bisect
import collections
import importlib.util
import re
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("tcg_count", HERE / "tcg-count.py")
tc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tc)


def text_addrs(ko: str, lo: int = 0, hi: int = 0) -> list[int]:
    """The start address of every instruction in the module's .text (of vmlinux in
    [lo, hi) if given)."""
    rng = [f"--start-address={lo:#x}", f"--stop-address={hi:#x}"] if hi else []
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", *rng, ko],
                         capture_output=True, text=True).stdout
    return [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):", out, re.M)]


def kernel_ranges(d: Path, regex: str) -> list[tuple[int, int]]:
    """The address ranges of the text symbols of the run's System.map matching regex."""
    syms = []
    for line in (d / "System.map").read_text().splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tT":
            syms.append((int(f[0], 16), f[2]))
    syms.sort()
    pat = re.compile(regex)
    return [(a, syms[i + 1][0]) for i, (a, n) in enumerate(syms[:-1]) if pat.search(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--role", default="b")
    ap.add_argument("--top", type=int, default=60)
    ap.add_argument("--stacks", help="print the inline stacks of matching instructions")
    ap.add_argument("--kernel", metavar="REGEX",
                    help="the kernel functions (System.map names) matching REGEX instead of "
                    "the module, resolved in the bench build's vmlinux (which must be the "
                    "run's: count right after building it)")
    ap.add_argument("--per", help="divide by the calls of a traced function in the window "
                    "(as tcg-count.py show --per, e.g. b:start_xmit)")
    a = ap.parse_args()
    d, role = a.dir, a.role
    before, _ = tc.load(d / f"dump-{role}.0")
    after, _ = tc.load(d / f"dump-{role}.1")
    _, rt, _, _ = tc.window(d, role)
    if a.per:
        rt = tc.events(d, a.per)
    if a.kernel:
        ko, ranges = str(tc.BUILD / "vmlinux"), kernel_ranges(d, a.kernel)
        base = 0
        addrs = sorted(o for lo, hi in ranges for o in text_addrs(ko, lo, hi))
        inside = lambda va: any(lo <= va < hi for lo, hi in ranges)  # noqa: E731
    else:
        mods = {}
        for line in (d / f"console-{role}.log").read_text(errors="replace").splitlines():
            m = tc.MODBASE_RE.search(line)
            if m:
                mods[m.group(1)] = int(m.group(2), 16)
        name = "rsiw" if "rsiw" in mods else "siw"
        base = mods[name]
        ko = str(d / f"{name}.ko")
        addrs = text_addrs(ko)
        end = addrs[-1] + 16 if addrs else 0
        inside = lambda va: base <= va < base + end  # noqa: E731
    ins = []  # (offset in .text, executions per segment)
    for va, (n, c) in after.items():
        dc = c - before.get(va, (n, 0))[1]
        if dc <= 0 or not inside(va):
            continue
        i = bisect.bisect_left(addrs, va - base)
        ins.extend((o, dc / rt) for o in addrs[i:i + n])
    want = sorted({o for o, _ in ins})
    res = subprocess.run(["addr2line", "-i", "-f", "-C", "-a", "-e", ko] + [hex(x) for x in want],
                         capture_output=True, text=True).stdout.splitlines()
    frames: dict[int, list[tuple[str, str]]] = {}
    cur, i = None, 0
    while i < len(res):
        if res[i].startswith("0x"):
            cur = int(res[i], 16)
            frames[cur] = []
            i += 1
            continue
        loc = re.sub(r" \(discriminator \d+\)", "", res[i + 1] if i + 1 < len(res) else "?")
        frames[cur].append((res[i], loc))
        i += 2
    inner, project, stacks = (collections.Counter() for _ in range(3))
    pat = re.compile(a.stacks) if a.stacks else None
    for o, per in ins:
        fr = frames.get(o, [])
        if not fr:
            continue
        inner[fr[0][1].rsplit("/", 1)[-1]] += per
        own = [f for f in fr if "/rsiw/" in f[1] or "rust/kernel/" in f[1]]
        key = own[0][1].rsplit("/", 1)[-1] + " " + own[0][0][:50] if own else fr[0][1]
        project[key] += per
        if pat and any(pat.search(f[1]) or pat.search(f[0]) for f in fr[:2]):
            stacks[" <- ".join(f[1].rsplit("/", 1)[-1] + ":" + f[0][:30] for f in fr[:6])] += per
    if not any(re.search(r"\.rs:\d+", f[1]) for fr in frames.values() for f in fr):
        print(f"{ko} has no line tables: build it with KRUSTFLAGS=-Cdebuginfo=1 (see --help)")
        return
    what = "kernel" if a.kernel else "module"
    print(f"{d}, VM {role}: {sum(p for _, p in ins):.0f} {what} instructions per segment")
    for title, cnt in (("innermost line", inner), ("first driver or kernel crate frame", project),
                       ("inline stacks", stacks)):
        if cnt:
            print(f"== {title}")
            for k, v in cnt.most_common(a.top):
                print(f"{v:8.1f} {k}")


if __name__ == "__main__":
    main()
