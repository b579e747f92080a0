#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# Invalid "rdma link add" requests fail and leave the device list unchanged:
# an unknown netdev, a duplicate device name, a second device on a netdev.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
veth_pair veth2 veth3

expect_fail rdma link add "$DEV" type "$RSIW_DRIVER" netdev nosuch0
assert_eq "$(rdma_devs)" "" "RDMA devices after adding on an unknown netdev"

rsiw_up veth0
before=$(rdma link show)

# The same device name again, on another netdev.
expect_fail rdma link add "$DEV" type "$RSIW_DRIVER" netdev veth2
assert_eq "$(rdma link show)" "$before" "RDMA links after a duplicate name"

# A second device on the same netdev: EEXIST.
expect_fail rdma link add "${RSIW_DRIVER}9" type "$RSIW_DRIVER" netdev veth0
assert_match "$ERR" "File exists" "error for a second device on veth0"
assert_eq "$(rdma link show)" "$before" "RDMA links after a second device on veth0"

# The device still works, and can be removed.
state_is "$DEV" ACTIVE || die "$DEV not ACTIVE any more"
run rdma link delete "$DEV"
wait_gone "$DEV"
expect_fail rdma link delete "$DEV"
assert_eq "$(rdma_devs)" "" "RDMA devices at the end"
pass
