#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw provider=rsiw timeout=600
#
# rdma-core's pyverbs tests of atomics and of the ibv_wr_*() API
# (tests/test_atomic.py, tests/test_qpex.py) on QPs connected by rdma_cm
# (tests/vm/py/ext_pyverbs.py: their InfiniBand-style connect cannot work on
# iWARP), rsiw with rfc7306=1 and the patched siw provider: compare and swap
# and fetch and add through ibv_post_send() and ibv_wr_*(), their error
# cases (no remote atomic right on the QP or the MR, a misaligned address,
# a wrong lkey or rkey: the completion is in error), Send, Send with
# Immediate, RDMA Write (also of 0 bytes), Write with Immediate and RDMA
# Read (also of 0 bytes), and with commit=1 Flush (range and whole MR) and
# Atomic Write through ibv_wr_*(), each with the originals' iterations and
# expected values. Both players are in one process, as in the originals,
# connected over veth0's address (TCP over loopback, rsiw on both ends).
# Memory windows skip; test_qp_ex_rc_flush_type_violate's Flush to
# persistence of a region without that right gets the responder's refusal,
# as the test wants; every other test must pass. The table is in the log and
# in ext-pyverbs-table.txt, the outcomes in ext-pyverbs.json.
#
# This is a case of its own rather than rows of pyverbs-suite's table:
# that case compares rsiw with C siw, both through the stock provider, which
# has none of these operations.
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw only (siw has no RFC 7306)"
[ "$RSIW_PROVIDER" = rsiw ] || die "this case needs the patched provider"
[ -e /usr/share/doc/rdma-core/tests/run_tests.py ] ||
	skip "the guest root lacks the pyverbs suite (rebuild it: scripts/rsiw/mkroot.sh --force)"

run modprobe rsiw rfc7306=1 commit=1
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0
rsiw_up veth0

rc=0
python3 /rsiw/tests/vm/py/ext_pyverbs.py "$DEV" 10.77.0.1 19500 "$RSIW_OUT/ext-pyverbs.json" \
	>"$RSIW_OUT/ext-pyverbs.log" 2>&1 || rc=$?
sed -n '/^test  /,$p' "$RSIW_OUT/ext-pyverbs.log" | tee "$RSIW_OUT/ext-pyverbs-table.txt"
if [ "$rc" != 0 ]; then
	grep -E -A12 '^(ERROR|FAIL):' "$RSIW_OUT/ext-pyverbs.log" | head -80 || tail -40 "$RSIW_OUT/ext-pyverbs.log"
	die "ext_pyverbs.py: exit status $rc"
fi
pass
