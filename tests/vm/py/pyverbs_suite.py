#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Run rdma-core's pyverbs test suite and record every test's outcome.

  pyverbs_suite.py run DEV SUITE_DIR JSON [NAME...]
      Copy the suite (/usr/share/doc/rdma-core/tests, partly gzipped) to a
      temporary directory, unpack it, run it against DEV (all tests, or the
      modules/tests NAMEs such as test_pd or test_mr.MRTest) and write
      {test id: [outcome, detail]} to JSON. Outcomes: pass, fail, error,
      skip, xfail, xpass. The unittest log goes to stdout.

  pyverbs_suite.py compare SIW_JSON RSIW_JSON TABLE [PENDING]
      Print and write the per-test table (test, siw, rsiw) and the counts;
      exit 1 if a test that passes on siw does not pass on rsiw, except in
      the test modules listed (space-separated) in PENDING, whose verbs rsiw
      does not implement yet: their differences are listed, not enforced.
"""

import gzip
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest


def unpack(src):
    top = tempfile.mkdtemp(prefix="pyverbs-")
    dst = os.path.join(top, "tests")
    os.mkdir(dst)
    for fn in os.listdir(src):
        p = os.path.join(src, fn)
        if not os.path.isfile(p):
            continue
        if fn.endswith(".gz"):
            with gzip.open(p, "rb") as f, open(os.path.join(dst, fn[:-3]), "wb") as g:
                shutil.copyfileobj(f, g)
        else:
            shutil.copy(p, dst)
    return top, dst


class Recorder(unittest.TextTestResult):
    outcomes = {}

    def _rec(self, test, outcome, detail=""):
        Recorder.outcomes[test.id()] = [outcome, detail]

    def addSuccess(self, test):
        super().addSuccess(test)
        self._rec(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._rec(test, "fail", str(err[1]).splitlines()[0][:200] if str(err[1]) else "")

    def addError(self, test, err):
        super().addError(test, err)
        # setUpClass errors come as _ErrorHolder, not a test case.
        self._rec(test, "error", f"{err[0].__name__}: {str(err[1])[:200]}")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._rec(test, "skip", reason[:200])

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._rec(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._rec(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "fail" if issubclass(err[0], test.failureException) else "error"
            self._rec(test, kind, f"subtest {subtest._subDescription()}: {str(err[1])[:160]}")


def run(dev, src, out, names):
    top, tdir = unpack(src)
    sys.path[:0] = [tdir, top]
    sys.argv = [sys.argv[0], "--dev", dev]
    from args_parser import parser  # noqa: E402 (the suite's own argument parser)
    parser.parse_args()
    import tests  # noqa: E402
    loader = unittest.TestLoader()
    if names:
        suite = loader.loadTestsFromNames(names, tests)
    else:
        suite = loader.loadTestsFromModule(tests)
    t0 = time.monotonic()
    res = unittest.TextTestRunner(stream=sys.stdout, verbosity=2,
                                  resultclass=Recorder).run(suite)
    dt = time.monotonic() - t0
    with open(out, "w") as f:
        json.dump({"dev": dev, "seconds": round(dt), "tests": Recorder.outcomes}, f, indent=1,
                  sort_keys=True)
    counts = {}
    for o, _ in Recorder.outcomes.values():
        counts[o] = counts.get(o, 0) + 1
    print(f"pyverbs on {dev}: {res.testsRun} tests in {dt:.0f} s: "
          + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    shutil.rmtree(top, ignore_errors=True)


def good(o):
    return o in ("pass", "xfail")


# pyverbs' create_qp_ex tests pick a random creation mask; libsiw (the stock
# provider, shared by both drivers) has no create_qp_ex, so libibverbs answers
# EOPNOTSUPP for some masks and the test skips with this reason, before any
# kernel driver is involved: pass or skip flips from run to run on either
# driver.
RANDOM_SKIP = re.compile(r"^Create \w+ QP (with|without) extended attrs is not supported")


def compare(siw_json, rsiw_json, table, pending=""):
    pending = set(pending.split())
    siw = json.load(open(siw_json))["tests"]
    rsiw = json.load(open(rsiw_json))["tests"]
    ids = sorted(set(siw) | set(rsiw))
    w = max([len(i) for i in ids] + [4])
    lines = [f"{'test':{w}}  {'siw':6} {'rsiw':6} note"]
    worse, waived = [], []
    for i in ids:
        s, r = siw.get(i, ["-", ""]), rsiw.get(i, ["-", ""])
        note = ""
        if good(s[0]) and not good(r[0]):
            if r[0] == "skip" and RANDOM_SKIP.search(r[1]):
                note = f"random in pyverbs, not a driver difference: {r[1]}"
                waived.append(i)
            elif i.split(".")[1] in pending:
                note = f"pending (verbs not implemented yet): {r[1]}"
                waived.append(i)
            else:
                note = f"REGRESSION: {r[1]}"
                worse.append(i)
        elif good(r[0]) and not good(s[0]):
            note = "better than siw"
        elif s[0] != r[0]:
            note = f"siw: {s[1]} / rsiw: {r[1]}"
        lines.append(f"{i:{w}}  {s[0]:6} {r[0]:6} {note}".rstrip())

    def counts(d):
        c = {k: 0 for k in ("pass", "fail", "error", "skip")}
        for o, _ in d.values():
            c[o] = c.get(o, 0) + 1
        return ", ".join(f"{n} {k}" for k, n in c.items() if n or k in ("pass", "fail", "skip"))

    lines.append("")
    lines.append(f"siw:  {len(siw)} tests: {counts(siw)}")
    lines.append(f"rsiw: {len(rsiw)} tests: {counts(rsiw)}")
    lines.append(f"tests passing on siw but not on rsiw: {len(worse)}"
                 + (f" (+{len(waived)} waived: random in pyverbs or pending modules"
                    f" {' '.join(sorted(pending)) or '(none)'})" if waived else ""))
    text = "\n".join(lines) + "\n"
    with open(table, "w") as f:
        f.write(text)
    print(text, end="")
    return 1 if worse else 0


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
        return 0
    if len(sys.argv) in (5, 6) and sys.argv[1] == "compare":
        return compare(*sys.argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
