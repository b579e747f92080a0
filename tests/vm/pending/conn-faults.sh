#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=900
#
# Pending (flaky; not run by make check). Connection faults between rsiw
# (VM a) and the C siw (VM b). Passed once in full (cycles, peer death);
# a second run failed at cycle 27 of the siw-server half: siw rejected the
# connection (the rsiw client got REJECTED), and destroying siw's listener
# with a child still queued tripped lockdep in siw (inet_child_forget vs
# siw_cm_llp_data_ready, clock-AF_INET). Not yet understood. Each step must
# end with both rping processes gone within a bound (no hang), the rsiw side
# usable again (a fresh rping -V passes), and a clean console on both VMs
# (any splat fails the run; kmemleak is scanned at the end).
#
#   cycles   100 rdma_cm connect/send/disconnect cycles (tests/vm/py/
#            cm_cycles.py), 50 with each VM as server; each side disconnects
#            in turn.
#   peer     the peer dies mid-transfer: b takes its link down and kills its
#            rping; a's TCP gives up (tcp_retries2=3) and rsiw must fail the
#            connection: a's rping exits with an error.
#
# Deleting the device and rmmod under traffic are in
# tests/vm/pending/conn-faults-dev.sh: "rdma link delete rsiw0" with a
# connected rping blocks in ib_uverbs_remove_one() (hung task) because rsiw
# has no disassociate_ucontext op, so uverbs waits for the process to close
# its file.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/interop.sh

load_driver
rsiw_up eth0
publish ip "$RSIW_IP"
barrier up
wait_peer 30
port=8000

# --- cycles ------------------------------------------------------------------
for srv in a b; do
	port=$((port + 1))
	ip=$(fetch "$srv" ip)
	serve_client "cycles-$srv" "$srv" "$port" \
		"python3 /rsiw/tests/vm/py/cm_cycles.py server $ip $port 50" \
		"python3 /rsiw/tests/vm/py/cm_cycles.py client $ip $port 50" 600
done

. /rsiw/tests/vm/faults.sh

# --- peer death ----------------------------------------------------------------
if [ "$RSIW_ROLE" = a ]; then run sysctl -qw net.ipv4.tcp_retries2=3; fi
fault_round peer b b peer_dies 120
if [ "$RSIW_ROLE" = b ]; then
	run ip link set eth0 up
	wait_for 10 eval "ip link show eth0 | grep -q LOWER_UP" || die "eth0 has no carrier"
	if ! state_is "$DEV" ACTIVE; then wait_state "$DEV" ACTIVE 20; fi
fi
if [ "$RSIW_ROLE" = a ]; then run sysctl -qw net.ipv4.tcp_retries2=15; fi
barrier peer-up 60
wait_peer 30
rping_round peer-after a 4096 5

barrier done
pass
