#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=420 long=part long_timeout=1500
#
# Resource limits of the connection manager (issue 38, item 8;
# tests/vm/py/passive_flood.py). A raw TCP client opens 32 established
# connections (raw MPA Requests the server accepts), which must cost less
# than 120 KiB each: the TX batch grows as it is used. Then it opens 1,500
# connections (10,000 with RSIW_LONG=1) to the rdma_cm listener on rsiw and
# never sends an MPA Request. rsiw, loaded with max_mpa_pending=128, holds
# at most 128 of them in their MPA exchange and resets the others at once
# (and says so once in the kernel log); every connection is closed by the
# responder, and the unreclaimable slab and vmalloc memory return to their
# baseline. The runner checks kmemleak at exit. Memory and accept times are
# reported, not asserted.
. /rsiw/tests/vm/lib.sh

port=7440
cap=128
n=1500
[ "${RSIW_LONG:-0}" != 1 ] || n=10000
run modprobe rsiw max_mpa_pending=$cap
veth_server /rsiw/tests/vm/py/passive_flood.py $port "$RSIW_OUT/server.log"
rc=0
run python3 /rsiw/tests/vm/py/passive_flood.py client 10.77.0.1 $port $n $cap 32 || rc=$?
kill "$srv" 2>/dev/null || true
wait "$srv" 2>/dev/null || true
tail -n 5 "$RSIW_OUT/server.log"
[ "$rc" = 0 ] || die "passive_flood failed"
dmesg | grep -q 'wait for their MPA Request' || die "no kernel log line about the cap"
dmesg | grep 'wait for their MPA Request'
pass
