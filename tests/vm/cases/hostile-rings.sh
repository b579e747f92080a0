#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300 kernel=debug
#
# A hostile user writes garbage into the mapped SQ, RQ and CQ rings of the
# siw user ABI and rings the doorbell; it also maps bad offsets and sizes.
# The kernel must refuse or flush every element (IBV_WC_WR_FLUSH_ERR),
# survive a CQ overflow, and leave a clean console (checked by the runner).
# See tests/vm/py/hostile_rings.py.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
rsiw_up veth0
run python3 /rsiw/tests/vm/py/hostile_rings.py "$DEV" "$RSIW_DRIVER"
# The objects went away with the process.
left=$(rdma resource show qp | grep -c " $DEV " || true)
assert_eq "$left" 0 "QPs left after the test"
pass
