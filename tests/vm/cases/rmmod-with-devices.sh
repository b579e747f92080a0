#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# Unloading the module with devices attached removes them; it loads again.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
veth_pair veth2 veth3
rsiw_up veth0 "${RSIW_DRIVER}0"
rsiw_up veth2 "${RSIW_DRIVER}1"
assert_eq "$(rdma_devs | tr '\n' ' ')" "${RSIW_DRIVER}0 ${RSIW_DRIVER}1 " "RDMA devices"

run rmmod "$RSIW_DRIVER"
! lsmod | grep -q "^$RSIW_DRIVER " || die "$RSIW_DRIVER still loaded"
assert_eq "$(rdma_devs)" "" "RDMA devices after rmmod"

load_driver
rsiw_up veth0
run rdma link delete "$DEV"
wait_gone "$DEV"
run rmmod "$RSIW_DRIVER"
pass
