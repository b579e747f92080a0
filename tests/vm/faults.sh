# SPDX-License-Identifier: GPL-2.0
#
# Fault helpers shared by the connection-fault cases (tests/vm/pending/
# conn-faults.sh, conn-faults-dev.sh); source after tests/vm/lib.sh and set
# $port (the last TCP port used) first.

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
