#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# Add a device with "rdma link add", check that its port state follows the
# netdev (ACTIVE when up, DOWN when down), delete it, re-add, delete again.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
assert_eq "$(rdma_devs)" "" "RDMA devices before the test"

rsiw_up veth0
assert_eq "$(rdma_devs)" "$DEV" "RDMA devices"
assert_eq "$(rdma_netdev "$DEV")" veth0 "netdev of $DEV"
run rdma link show

run ip link set veth0 down
wait_state "$DEV" DOWN
run rdma link show "$DEV/1"
run ip link set veth0 up
wait_state "$DEV" ACTIVE

run rdma link delete "$DEV"
wait_gone "$DEV"
assert_eq "$(rdma_devs)" "" "RDMA devices after delete"

# Re-adding the same name on the same netdev works.
rsiw_up veth0
run rdma link delete "$DEV"
wait_gone "$DEV"
assert_eq "$(rdma_devs)" "" "RDMA devices at the end"
pass
