#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=400
#
# Two VMs joined by a virtual Ethernet link: VM a runs rsiw, VM b the C siw.
# Each adds its device on eth0 and sees it ACTIVE; ping works both ways over
# IPv4 and IPv6 link-local.
. /rsiw/tests/vm/lib.sh

load_driver
rsiw_up eth0
run rdma link show
barrier devices-up
for ip in $RSIW_PEER_IP; do
	wait_peer 30
	run ping -c 3 -i 0.2 -W 2 "$ip"
done
for ip in $RSIW_PEER_IP6; do
	run ping -6 -c 3 -i 0.2 -W 2 "$ip%eth0"
done
state_is "$DEV" ACTIVE || die "$DEV not ACTIVE after the pings"
barrier done
pass
