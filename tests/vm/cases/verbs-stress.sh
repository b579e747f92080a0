#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=900 long=part
#
# Create and destroy every verbs object type the driver implements many
# times through the stock provider, then try invalid arguments (empty,
# unmapped or wrongly flagged MRs; oversized CQ, QP and SRQ) and check each
# errno. The runner's kmemleak scan at the end must stay clean. Object types
# that are not implemented yet (EOPNOTSUPP) are reported as pending.
#
# Iterations: 2,000 PDs and MRs, 500 CQs, QPs and SRQs; the long part (make
# check-long, RSIW_LONG=1) 10,000 PDs and MRs, 2,000 of the others. Measured under
# TCG with the debug kernel: about 200 PDs/s, 80 MRs/s (a user MR's
# deregistration waits for an RCU grace period), 85 CQs/s, 50 QPs/s and
# 85 SRQs/s, so 10,000 of every type would take ten minutes; the rates are
# in stress.json.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
rsiw_up veth0
n=2000 m=500
[ "${RSIW_LONG:-0}" != 1 ] || { n=10000; m=2000; }
run python3 /rsiw/tests/vm/py/verbs_stress.py "$DEV" $n $m "$RSIW_OUT/stress.json" ||
	die "verbs_stress.py failed"
pass
