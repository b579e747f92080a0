#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# TERM-05 when a Terminate arrives right before a reset: a raw peer answers
# rsiw's RDMA Read with a Terminate and closes with a RST at once, as the
# C siw does after an FPDU it refuses (commit-siw, ext-siw). The Read must
# complete with the Terminate's error (REM_ACCESS_ERR), not WR_FLUSH_ERR,
# also when the Terminate came behind more bytes than rsiw reads in its
# data_ready callback, left to its work item when the reset reached the
# connection manager: rsiw is loaded with fault_work_delay_ms, so that its
# work item sleeps after each run and the reset comes first. The bytes
# before the Terminate (RDMA Writes) must land. Then the graceful close
# (56a0e8f): Writes and a Send right before a FIN, left to the work item
# the same way, must land and complete the receive. Both ends are in this
# VM (the stream over lo, one segment for the whole burst):
# tests/vm/py/term_rst.py.
. /rsiw/tests/vm/lib.sh

port=7830
load_driver rsiw fault_work_delay_ms=300
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0
rsiw_up veth0
python3 /rsiw/tests/vm/py/term_rst.py server 10.77.0.1 $port >"$RSIW_OUT/term_rst.log" 2>&1 &
srv=$!
wait_listen $port 30
rc=0
run python3 /rsiw/tests/vm/py/term_rst.py client 10.77.0.1 $port || rc=$?
wait "$srv" || rc=$?
cat "$RSIW_OUT/term_rst.log"
[ "$rc" = 0 ] || die "term_rst failed"
run rdma link delete "$DEV"
run modprobe -r rsiw
pass
