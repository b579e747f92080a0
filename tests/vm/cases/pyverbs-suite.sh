#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=900
#
# rdma-core's pyverbs test suite (/usr/share/doc/rdma-core/tests, shipped by
# python3-pyverbs) against rsiw (VM a) and, in an identical VM, against C siw
# (VM b); each VM runs it locally on its own device. VM a prints the per-test
# table (test, siw, rsiw) and writes it to its output dir (pyverbs-table.txt,
# with the raw results pyverbs-{siw,rsiw}.json and the logs). The case fails
# if a test that passes on siw does not pass on rsiw.
#
# PENDING lists the test modules whose verbs rsiw does not implement yet:
# their differences are shown but not enforced (none left). Skips that
# pyverbs decides at random before the driver is involved (create_qp_ex with
# a random mask, see RANDOM_SKIP in pyverbs_suite.py) are waived too.
#
# The whole suite takes about 25 s per driver under TCG (most tests skip:
# see the table), so make check runs all of it. To run a part by hand:
#   python3 tests/vm/py/pyverbs_suite.py run DEV SUITE OUT.json test_pd test_mr.MRTest
. /rsiw/tests/vm/lib.sh

PENDING=""
SUITE=/usr/share/doc/rdma-core/tests
PY=/rsiw/tests/vm/py/pyverbs_suite.py

[ -e "$SUITE/run_tests.py" ] ||
	skip "the guest root lacks the pyverbs suite (rebuild it: scripts/rsiw/mkroot.sh --force)"

load_driver
veth_pair veth0 veth1
rsiw_up veth0

json=$RSIW_RUN/pyverbs-$RSIW_DRIVER-$RSIW_ROLE.json
python3 "$PY" run "$DEV" "$SUITE" "$json" >"$RSIW_OUT/pyverbs.log" 2>&1
[ -s "$json" ] || { tail -30 "$RSIW_OUT/pyverbs.log"; die "the pyverbs suite did not complete"; }
grep "^pyverbs on" "$RSIW_OUT/pyverbs.log"
compare_peer "$PY" "$json" "$RSIW_OUT/pyverbs-table.txt" "$PENDING" 600
pass
