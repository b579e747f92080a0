#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Adapt, read and compare blktests runs for the blktests-* VM cases.

  blktests.py adapt DIR DRIVER
      Point the blktests copy in DIR at DRIVER (rsiw or siw): the soft-RDMA
      driver that start_soft_rdma loads and binds to every netdev, that
      stop_soft_rdma unloads and that the nvme/ and srp/ groups require, and
      open the rnbd/ group (upstream: rdma_rxe only, USE_RXE=1) to DRIVER.
      Only exact, known lines are changed; if one is not found (another
      blktests version) it stops with an error instead of running the
      unadapted suite, which would load siw.

  blktests.py tests DIR GROUP_OR_TEST...
      List the tests (group/NNN) that the arguments name: a test, a group,
      or nodev:GROUP and dev:GROUP, the group's tests that need no test
      device and those that do (test_device(): TEST_DEVS).

  blktests.py parse DIR LOG JSON TEST...
      Read the output of ./check (LOG; one or more runs appended) and write
      {test id: [status, detail]} to JSON for the TESTs that were asked for.
      A test id is "nvme/010" or, for a test that blktests runs once per
      condition, "nvme/010 (tr=rdma bd=device)". Status: pass, fail or
      notrun; detail: the reasons of a "not run", the first lines of a
      failure. A device test (test_device(), which needs TEST_DEVS) that
      printed nothing is "notrun" with that reason; any other test that
      printed nothing is "fail" (no result: killed or hung). A test that
      failed only on its kernel log (blktests' CHECK_DMESG), where the log
      (results/*/TEST.dmesg) holds nothing but one lockdep report of
      upstream code that rsiw takes no part in (tests/vm/py/known_lockdep.py,
      also allowed on the consoles), is "known", which compare counts as a
      pass and shows.

  blktests.py compare SIW_JSON RSIW_JSON TABLE [PENDING]
      Print and write the per-test table (test, siw, rsiw, the reasons) and
      the counts; exit 1 if a test that passes on siw does not pass on rsiw,
      if a test (or group) listed in $BT_MUST_PASS does not pass on rsiw,
      or if an rsiw test failed on its kernel log or kmemleak (blktests'
      CHECK_DMESG), except for the tests (or groups) listed, space-separated,
      in PENDING: their differences are shown, not enforced.
"""

import glob
import json
import os
import re

from known_lockdep import KNOWN_LOCKDEP, circular_report_locks
import sys

# (file, exact line, replacement); DRV is the driver.
ADAPT = [
    ("common/multipath-over-rdma", "\t\tmodprobe siw || return $?", "\t\tmodprobe DRV || return $?"),
    ("common/multipath-over-rdma", "\t\ttype=siw", "\t\ttype=DRV"),
    ("common/multipath-over-rdma", "\t_patient_rmmod siw  || return 1", "\t_patient_rmmod DRV  || return 1"),
    ("common/nvme", "\t\t\t_have_driver siw", "\t\t\t_have_driver DRV"),
    ("tests/srp/rc", "\t\t_have_module siw", "\t\t_have_module DRV"),
    # Built into the rig's kernels (INFINIBAND=y); srp/ only modprobes them.
    ("tests/srp/rc", "\t_have_module ib_uverbs", "\t_have_driver ib_uverbs"),
    ("tests/srp/rc", "\t_have_module rdma_cm", "\t_have_driver rdma_cm"),
    ("tests/rnbd/rc", '\tif [[ "$USE_RXE" != 1 ]]; then',
     "\tif false; then # rsiw rig: rnbd/ runs on DRV (start_soft_rdma)"),
    ("tests/rnbd/rc", "\t_have_driver rdma_rxe", "\t_have_driver DRV"),
]


def adapt(top, driver):
    if driver not in ("rsiw", "siw"):
        raise SystemExit(f"unknown driver {driver}")
    files = {}
    for rel, old, new in ADAPT:
        path = os.path.join(top, rel)
        lines = files.setdefault(path, open(path).read().split("\n"))
        hits = [i for i, line in enumerate(lines) if line == old]
        if len(hits) != 1:
            raise SystemExit(f"blktests adapt: {rel}: expected one line {old.strip()!r}, found "
                             f"{len(hits)} (another blktests version?)")
        lines[hits[0]] = new.replace("DRV", driver)
        print(f"adapted {rel}: {old.strip()} -> {lines[hits[0]].strip()}")
    for path, lines in files.items():
        with open(path, "w") as f:
            f.write("\n".join(lines))


def expand(top, args):
    """group/NNN, GROUP, nodev:GROUP (its tests without a test device) or
    dev:GROUP (those with one) -> the list of group/NNN."""
    out = []
    for a in args:
        kind, _, a = a.rpartition(":")
        if "/" in a:
            tests = [a]
        else:
            d = os.path.join(top, "tests", a)
            tests = sorted(f"{a}/{n}" for n in os.listdir(d) if re.fullmatch(r"\d{3}", n))
        if kind:
            tests = [t for t in tests if is_device_test(top, t) == (kind == "dev")]
        out += tests
    return out


def is_device_test(top, test):
    try:
        text = open(os.path.join(top, "tests", test)).read()
    except OSError:
        return False
    return re.search(r"^test_device\(\)", text, re.M) is not None and \
        re.search(r"^test\(\)", text, re.M) is None


STATUS = {"passed": "pass", "failed": "fail", "not run": "notrun"}
LINE = re.compile(r"^(\w+/(?:\d{3}|\*\*\*))(?: => \S+)?\s+(.*?)\s*\[(passed|failed|not run)\]\s*$")
COND = re.compile(r"^\(([a-z_]+=[^()]*)\)")


def parse(top, log, out_json, tests):
    results = {}      # id -> [status, detail]
    group_skip = {}   # group -> reasons
    cur = None
    detail = []

    def flush():
        if cur is not None and detail:
            results[cur][1] = "; ".join(detail)

    for raw in open(log, errors="replace"):
        line = raw.rstrip("\n")
        m = LINE.match(line)
        if m:
            flush()
            test, rest, status = m.groups()
            c = COND.match(rest)
            tid = f"{test} ({c.group(1)})" if c else test
            cur, detail = tid, []
            if test.endswith("/***"):
                group_skip[test.split("/")[0]] = cur
            results[tid] = [STATUS[status], ""]
            continue
        if cur is None or not line.startswith("    "):
            if not line.startswith("    "):
                flush()
                cur = None
            continue
        text = line[4:]
        if re.match(r"^(runtime|start/stop success ratio)\b", text) or text.startswith("...") or \
                "(Run 'diff -u" in text or "(See '" in text or \
                re.match(r"^(--- |\+\+\+ |@@ )", text) or text.startswith(" "):
            continue  # diff headers and context: the +/- lines say what differed
        if len(detail) < 4:
            detail.append(re.sub(r"\s+", " ", text)[:160])
    flush()

    final = {}
    for t in tests:
        mine = {k: v for k, v in results.items() if k == t or k.startswith(t + " (")}
        if mine:
            final.update(mine)
            continue
        g = t.split("/")[0]
        if g in group_skip and results[group_skip[g]][0] == "notrun":
            final[t] = ["notrun", results[group_skip[g]][1]]
        elif is_device_test(top, t):
            final[t] = ["notrun", "device test: needs a test device (TEST_DEVS), none is configured"]
        else:
            final[t] = ["fail", "no result (killed at its time limit, or blktests stopped)"]
    for t, r in final.items():
        known = known_dmesg(top, t) if r[0] == "fail" and "something found in dmesg" in r[1] else None
        if known:
            final[t] = ["known", f"passed but for a known upstream lockdep report in dmesg: {known}"]
    with open(out_json, "w") as f:
        json.dump({"tests": final}, f, indent=1, sort_keys=True)
    counts = {}
    for s, _ in final.values():
        counts[s] = counts.get(s, 0) + 1
    print(f"blktests: {len(final)} results: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))


KLINE = re.compile(r"^\[\s*\d+\.\d+\]\s?(.*)$")
# The kernel log lines blktests' CHECK_DMESG fails a test on (common/rc,
# _check_dmesg), beside lockdep's own.
DMESG_BAD = re.compile(r"BUG:|WARNING:|Call Trace:|INFO:|Oops|kernel BUG|KASAN|UBSAN|"
                       r"circular locking|recursive locking|lock state|unreferenced object")


def known_dmesg(top, tid):
    """The KNOWN_LOCKDEP entry if the kernel log blktests kept of failed test
    TID holds exactly one circular-locking report, a known one, and nothing
    else that blktests flags; else None."""
    test, _, cond = tid.partition(" (")
    suffix = "".join(f"_{k}_{v}" for k, v in (c.split("=", 1) for c in cond.rstrip(")").split()))
    files = [f for f in glob.glob(os.path.join(top, "results", "*", test + ".dmesg"))
             if os.path.basename(os.path.dirname(os.path.dirname(f))).endswith(suffix)]
    if len(files) != 1:
        return None
    # dmesg prints the continuation lines of a message without a timestamp.
    msgs = [(m.group(1) if m else line).strip()
            for line in open(files[0], errors="replace")
            for m in [KLINE.match(line)]]
    reports = circular_report_locks(msgs)
    if len(reports) != 1 or len(reports[0]) != 2:
        return None
    known = KNOWN_LOCKDEP.get(frozenset(reports[0]))
    start = next(i for i, m in enumerate(msgs) if "possible circular locking dependency detected" in m)
    end = next((i for i in range(start, len(msgs)) if "</TASK>" in msgs[i]), len(msgs))
    others = [m for i, m in enumerate(msgs) if DMESG_BAD.search(m) and not start - 2 <= i <= end]
    return known if known and not others else None


def short(s, d):
    return {"pass": "passed", "fail": "FAILED", "notrun": "not run", "known": "known"}.get(s, s)


def listed(base, names):
    """Whether test base (e.g. nvme/004) or its group (nvme) is in names."""
    return base in names or base.split("/")[0] in names


def compare(siw_json, rsiw_json, table, pending=""):
    pending = set(pending.split())
    # Tests that must pass on rsiw whatever siw does (rnbd/ needs immediate
    # data, which siw does not have).
    must = set(os.environ.get("BT_MUST_PASS", "").split())
    siw = json.load(open(siw_json))["tests"]
    rsiw = json.load(open(rsiw_json))["tests"]
    ids = sorted(set(siw) | set(rsiw))
    w = max([len(i) for i in ids] + [4])
    lines = [f"{'test':{w}}  {'siw':8} {'rsiw':8} note"]
    worse, waived, splat = [], [], []
    for i in ids:
        s, r = siw.get(i, ["-", "no result"]), rsiw.get(i, ["-", "no result"])
        base = i.split(" ")[0]
        note = ""
        # (note if pending, note otherwise) when rsiw misses a pass it owes
        owed = None
        if r[0] == "known":
            # Passed but for an upstream lockdep report (parse): as a pass, shown.
            note = r[1] if s[0] == "pass" else f"siw: {s[1] or short(*s)} / rsiw: {r[1]}"
            lines.append(f"{i:{w}}  {short(*s):8} {short(*r):8} {note}".rstrip())
            continue
        if s[0] == "pass" and r[0] != "pass":
            owed = (f"pending: rsiw {r[1]}", f"REGRESSION: rsiw {r[1]}")
        elif r[0] != "pass" and listed(base, must):
            owed = (f"pending (must pass once it works): rsiw {r[1]}",
                    f"MUST PASS on rsiw: {r[1]}")
        if owed:
            is_pending = listed(base, pending)
            note = owed[0] if is_pending else owed[1]
            (waived if is_pending else worse).append(i)
        elif r[0] == "pass" and s[0] != "pass":
            note = f"better than siw: siw {s[1]}"
        elif s[0] == r[0] and s[1] == r[1]:
            note = r[1]
        elif s[1] or r[1]:
            note = f"siw: {s[1] or '-'} / rsiw: {r[1] or '-'}"
        if r[0] == "fail" and re.search(r"something found in dmesg|kmemleak detected", r[1]) \
                and i not in worse and base not in pending:
            splat.append(i)
            note = "KERNEL LOG: " + note
        lines.append(f"{i:{w}}  {short(*s):8} {short(*r):8} {note}".rstrip())

    def counts(d):
        c = {"pass": 0, "fail": 0, "notrun": 0, "known": 0}
        for o, _ in d.values():
            c[o] = c.get(o, 0) + 1
        k = f", {c['known']} known upstream reports" if c["known"] else ""
        return f"{c['pass']} passed, {c['fail']} failed, {c['notrun']} not run{k}"

    lines.append("")
    lines.append(f"siw:  {len(siw)} tests: {counts(siw)}")
    lines.append(f"rsiw: {len(rsiw)} tests: {counts(rsiw)}")
    lines.append(f"tests passing on siw (or required) but not on rsiw: {len(worse)}"
                 + (f" (+{len(waived)} pending: {' '.join(sorted(pending))})" if waived else ""))
    if splat:
        lines.append(f"rsiw tests failed on their kernel log or kmemleak: {len(splat)}")
    text = "\n".join(lines) + "\n"
    with open(table, "w") as f:
        f.write(text)
    print(text, end="")
    return 1 if worse or splat else 0


def main():
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "adapt":
        adapt(a[1], a[2])
        return 0
    if len(a) >= 3 and a[0] == "tests":
        print("\n".join(expand(a[1], a[2:])))
        return 0
    if len(a) >= 4 and a[0] == "parse":
        parse(a[1], a[2], a[3], expand(a[1], a[4:]))
        return 0
    if len(a) in (4, 5) and a[0] == "compare":
        return compare(*a[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
