#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=400
#
# CQs, QPs and SRQs through rdma-core's stock siw provider (pyverbs):
# create/query/modify/destroy, the errno of bad arguments, the QP state
# machine, flushing to the CQ on a move to ERROR, completion events (normal
# and solicited-only arming), and "rdma resource show" listing the objects.
# tests/vm/py/verbs_objects.py has the details and the differences from siw.
#
# Then receives taken from an SRQ over rdma_cm connections on the device's own
# address (tests/vm/py/srq_pd.py, issue 38 item 6): with the SRQ in one PD and
# the QP in another, a receive on an MR of the SRQ's PD takes the Send, and
# one on an MR of the QP's PD completes with IBV_WC_LOC_PROT_ERR, writes
# nothing and terminates the connection.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0
rsiw_up veth0
export IBV_SHOW_WARNINGS=1
run python3 /rsiw/tests/vm/py/verbs_objects.py "$DEV" "$RSIW_DRIVER"
run python3 /rsiw/tests/vm/py/srq_pd.py 10.77.0.1 7420 "$RSIW_DRIVER"
# Everything was destroyed: no QP or CQ of the device is left.
left=$(rdma resource show qp | grep -c " $DEV " || true)
assert_eq "$left" 0 "QPs left after the test"
left=$(rdma resource show cq dev "$DEV" | grep -c "cqe" || true)
assert_eq "$left" 0 "CQs left after the test"
pass
