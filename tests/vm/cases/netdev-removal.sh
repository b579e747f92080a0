#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# Deleting the netdev under a device removes the device.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
rsiw_up veth0
run ip link del veth0
wait_gone "$DEV" 10
assert_eq "$(rdma_devs)" "" "RDMA devices after removing the netdev"

# The driver still works afterwards.
veth_pair veth2 veth3
rsiw_up veth2
run rdma link delete "$DEV"
wait_gone "$DEV"
pass
