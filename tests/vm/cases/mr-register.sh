#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=400
#
# User memory registration through the stock provider (pyverbs): every
# combination of access flags (remote write or atomic without local write
# fails with EINVAL), distinct non-zero STags with lkey == rkey, "rdma
# resource show mr" lists them and deregistration removes them, bad ranges
# fail (EFAULT), a re-registration gets a new STag, and a 256 MiB MR
# registers (timed: mr-timing.txt). See tests/vm/py/mr_register.py.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
rsiw_up veth0
run python3 /rsiw/tests/vm/py/mr_register.py "$DEV" "$RSIW_DRIVER" "$RSIW_OUT" ||
	die "mr_register.py failed"
pass
