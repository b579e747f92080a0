# SPDX-License-Identifier: GPL-2.0
#
# Fault helpers shared by the connection-fault cases (tests/vm/cases/
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
	# With connected QPs. uverbs does not pin the module (rsiw can
	# disassociate user contexts), so without lockdep rmmod tears the
	# device down and the processes get DEVICE_REMOVAL. With lockdep
	# (CONFIG_DEBUG_LOCK_ALLOC, the test kernel) every rsiw socket holds
	# the module (sk_owner: its lock class keys live in rsiw), so rmmod is
	# refused while connections or listeners exist; then rping is killed
	# with its QP connected and the module must go once the sockets are
	# closed. Writes $RSIW_OUT/rmmod.path: "removed" or "refused".
	local rc=0
	rmmod "$RSIW_DRIVER" 2>"$RSIW_OUT/rmmod.err" || rc=$?
	log "rmmod $RSIW_DRIVER under traffic: status $rc $(cat "$RSIW_OUT/rmmod.err")"
	if [ "$rc" = 0 ]; then
		echo removed >"$RSIW_OUT/rmmod.path"
	else
		grep -qi "in use\|busy" "$RSIW_OUT/rmmod.err" || die "rmmod failed: $(cat "$RSIW_OUT/rmmod.err")"
		echo refused >"$RSIW_OUT/rmmod.path"
		pkill -9 -x rping || true
		wait_for 30 rmmod "$RSIW_DRIVER" || die "rmmod $RSIW_DRIVER still refused 30 s after rping was killed"
		log "$RSIW_DRIVER removed after the connected rping was killed"
	fi
	! lsmod | grep -q "^$RSIW_DRIVER " || die "$RSIW_DRIVER still loaded after rmmod"
}

# fault_log_has TAG ROLE REGEX WHAT: VM ROLE checks its rping log of round TAG.
fault_log_has() {
	[ "$RSIW_ROLE" = "$2" ] || return 0
	grep -aqE "$3" "$RSIW_OUT/$1.log" || die "$1: no $4 in rping's output"
	log "$1: rping reported $4"
}
