#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=600
#
# Connection faults between two rsiw VMs (issue 5). Each step must end with
# both processes gone within a bound (no hang), the surviving side usable
# again (a fresh rping -V passes) and a clean console on both VMs (any splat
# fails the run; kmemleak is scanned at the end).
#
#   cycles   100 rdma_cm connect/send/disconnect cycles (tests/vm/py/
#            cm_cycles.py), 50 with each VM as server; each side disconnects
#            in turn and both must see DISCONNECTED every time.
#   peer     the peer dies mid-transfer: b takes its link down and kills its
#            rping, so no FIN reaches a. a's TCP gives up, either through
#            retransmissions (tcp_retries2=3) or, if a's side is idle
#            waiting for b, through keepalive probes (rsiw enables
#            SO_KEEPALIVE; 5 s idle, 3 probes 1 s apart here): a's rping
#            must get a disconnect or an error completion and exit.
#
# The cycles run rsiw-rsiw here; conn-cycles-siw runs them against C siw.
#
# The peer-death step fails without keepalive when the fault hits while a
# waits for b (a's rping never returns); the cycles fail on any missed
# DISCONNECTED or refused connect (cm_cycles.py checks each event).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/interop.sh

pair_up
port=8000

# --- cycles ------------------------------------------------------------------
for srv in a b; do
	cycles_round "$srv" 50 300
done

. /rsiw/tests/vm/faults.sh

# --- peer death ----------------------------------------------------------------
if [ "$RSIW_ROLE" = a ]; then
	run sysctl -qw net.ipv4.tcp_retries2=3 net.ipv4.tcp_keepalive_time=5 \
		net.ipv4.tcp_keepalive_intvl=1 net.ipv4.tcp_keepalive_probes=3
fi
fault_round peer b b peer_dies 90
fault_log_has peer a "DISCONNECT|completion failed|wc error|cma event|error" "disconnect or error"
if [ "$RSIW_ROLE" = b ]; then
	run ip link set eth0 up
	wait_for 10 eval "ip link show eth0 | grep -q LOWER_UP" || die "eth0 has no carrier"
	if ! state_is "$DEV" ACTIVE; then wait_state "$DEV" ACTIVE 20; fi
fi
if [ "$RSIW_ROLE" = a ]; then
	run sysctl -qw net.ipv4.tcp_retries2=15 net.ipv4.tcp_keepalive_time=7200 \
		net.ipv4.tcp_keepalive_intvl=75 net.ipv4.tcp_keepalive_probes=9
fi
barrier peer-up 60
wait_peer 30
rping_round peer-after a 4096 5

barrier done
pass
