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

# fault_round TAG SERVER_ROLE ACTOR ACTION [WAIT]: rping -v (long) with
# SERVER_ROLE as server; once traffic flows, VM ACTOR runs ACTION (a shell
# function). Both rpings must then exit within WAIT seconds (default 60);
# their status is not checked (they are expected to fail).
fault_round() {
	local tag=$1 srv=$2 actor=$3 action=$4 t=${5:-60} ip pid logf
	port=$((port + 1))
	ip=$(fetch "$srv" ip)
	logf="$RSIW_OUT/$tag.log"
	if [ "$RSIW_ROLE" = "$srv" ]; then
		timeout 600 rping -s -a "$ip" -p "$port" -v -C 100000 -S 4096 >"$logf" 2>&1 &
		pid=$!
		wait_listen "$port" 30
		publish "$tag.listening" 1
	else
		fetch "$srv" "$tag.listening" 60 >/dev/null
		timeout 600 rping -c -a "$ip" -p "$port" -v -C 100000 -S 4096 >"$logf" 2>&1 &
		pid=$!
		wait_for 60 eval "[ \$(grep -ac 'ping data' $logf) -ge 20 ]" || die "$tag: no traffic"
		publish "$tag.flowing" 1
	fi
	if [ "$RSIW_ROLE" = "$srv" ]; then fetch "$(peer_role)" "$tag.flowing" 90 >/dev/null; fi
	if [ "$RSIW_ROLE" = "$actor" ]; then
		log "$tag: $action"
		"$action"
		publish "$tag.acted" 1
	else
		fetch "$actor" "$tag.acted" 120 >/dev/null
	fi
	log "$tag: waiting for rping to end"
	wait_for "$t" eval "! kill -0 $pid 2>/dev/null" || {
		kill -9 "$pid" 2>/dev/null || true
		die "$tag: rping still running $t s after the fault"
	}
	wait "$pid" || true
	{ grep -av "ping data" "$logf" || true; } | sed "s/^/  [$tag] /" | tail -n 10
	log "$tag: $(grep -ac 'ping data' "$logf" || true) pings before the fault; rping ended"
	barrier "$tag-done" 180
}

peer_dies() {
	# b: the link goes away and the process dies without a FIN reaching a.
	run ip link set eth0 down
	pkill -9 -x rping || true
}
rsiw_devdel() {
	run rdma link delete "$DEV"
	wait_gone "$DEV" 30
}
rsiw_rmmod() {
	local rc=0
	rmmod rsiw 2>"$RSIW_OUT/rmmod.err" || rc=$?
	log "rmmod rsiw under traffic: status $rc $(cat "$RSIW_OUT/rmmod.err")"
	[ "$rc" = 0 ] && return 0
	grep -qi "in use\|busy" "$RSIW_OUT/rmmod.err" || die "rmmod failed: $(cat "$RSIW_OUT/rmmod.err")"
	# Refused while rping holds the device: kill it with its QP connected;
	# the module must then go.
	pkill -9 -x rping || true
	wait_for 30 rmmod rsiw || die "rmmod rsiw still refused after rping was killed"
	log "rsiw removed after the connected rping was killed"
}

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
