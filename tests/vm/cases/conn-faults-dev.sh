#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=600
#
# Device deletion and rmmod with connected user QPs, rsiw on both VMs (issue
# 5; the helpers' contract is in tests/vm/faults.sh). In each round rping -v
# runs between the VMs; once data flows, VM a removes its device. Both rpings
# must end within 60 s (no hang), a's with RDMA_CM_EVENT_DEVICE_REMOVAL, b's
# with a disconnect or an error completion; then a fresh rping -V must pass,
# and both consoles stay clean (kmemleak is scanned at the end).
#
#   devdel   "rdma link delete rsiw0" under traffic, a the client.
#   rmmod    "rmmod rsiw" under traffic, a the server. An open uverbs file
#            does not pin the module (rsiw implements disassociate_ucontext),
#            but on the lockdep test kernel every rsiw socket does (sk_owner),
#            so rmmod is refused (EBUSY) while the connection exists; then
#            a's rping is killed with its QP connected and rmmod must succeed
#            within 30 s. Without lockdep rmmod tears the device down and a's
#            rping must get DEVICE_REMOVAL (see rsiw_rmmod in faults.sh).
#            b's rping must end with a disconnect or an error either way.
#
# Before rsiw had disassociate_ucontext the delete blocked in
# ib_uverbs_remove_one() until rping closed its file (hung task after 120 s,
# and rping never got DEVICE_REMOVAL): that is what this case catches. C siw
# has no such op either, so "--driver siw" fails the same way. The case
# runs on the light kernel (lockdep, so the rmmod round is the same): what
# it catches is a hang, not a bad access, and on the full debug kernel it
# took 257 s on a slow host. Device deletion under traffic with KASAN is
# netdev-del-traffic's.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/interop.sh

pair_up
port=8000

. /rsiw/tests/vm/faults.sh

peer_err="DISCONNECT|completion failed|wc error|Failed to get cq event|cma event"

# --- device deletion under traffic --------------------------------------------
fault_round devdel b a rsiw_devdel 60
fault_log_has devdel a "device removal" "RDMA_CM_EVENT_DEVICE_REMOVAL"
fault_log_has devdel b "$peer_err" "disconnect or error"
if [ "$RSIW_ROLE" = a ]; then rsiw_up eth0; fi
barrier devdel-up 60
rping_round devdel-after b 4096 5

# --- rmmod under traffic ---------------------------------------------------------
fault_round rmmod a a rsiw_rmmod 60
if [ "$RSIW_ROLE" = a ] && [ "$(cat "$RSIW_OUT/rmmod.path")" = removed ]; then
	fault_log_has rmmod a "device removal" "RDMA_CM_EVENT_DEVICE_REMOVAL"
fi
fault_log_has rmmod b "$peer_err" "disconnect or error"
if [ "$RSIW_ROLE" = a ]; then
	load_driver
	rsiw_up eth0
fi
barrier rmmod-up 60
rping_round rmmod-after a 4096 5

barrier done
pass
