#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=600
#
# Pending (not run by make check): device deletion and rmmod under traffic
# between rsiw (VM a) and siw (VM b); see conn-faults.sh for the helpers'
# contract.
#
#   devdel   rdma link delete rsiw0 under traffic (a is the client). Fails
#            today: the delete blocks in ib_uverbs_remove_one() (hung task
#            after 120 s) because rsiw has no disassociate_ucontext op, so
#            uverbs waits for rping to close its file.
#   rmmod    rmmod rsiw under traffic (a is the server): refused with EBUSY
#            while a process holds the device (uverbs holds the module), or
#            the device is torn down; if refused, rping is killed with its QP
#            connected and rmmod must then succeed. Not run yet.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/interop.sh

load_driver
rsiw_up eth0
publish ip "$RSIW_IP"
barrier up
wait_peer 30
port=8000

. /rsiw/tests/vm/faults.sh

# --- device deletion under traffic --------------------------------------------
fault_round devdel b a rsiw_devdel 60
if [ "$RSIW_ROLE" = a ]; then rsiw_up eth0; fi
barrier devdel-up 60
rping_round devdel-after b 4096 5

# --- rmmod under traffic ---------------------------------------------------------
fault_round rmmod a a rsiw_rmmod 60
if [ "$RSIW_ROLE" = a ]; then
	if ! lsmod | grep -q '^rsiw '; then run modprobe rsiw; fi
	if ! has_dev "$DEV"; then rsiw_up eth0; fi
	wait_state "$DEV" ACTIVE 20
fi
barrier rmmod-up 60
rping_round rmmod-after a 4096 5

barrier done
pass
