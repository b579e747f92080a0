# SPDX-License-Identifier: GPL-2.0
#
# Helpers for the two-VM interop cases (mpa-siw-interop, rsiw-pair): reload
# rsiw with module parameters inside one boot, capture the MPA exchange and
# check its header bits, and client/server rounds expected to be refused.
# Source after lib.sh.

: "${port:=9000}"

# reload_rsiw [PARAM=VALUE...]: on an rsiw VM, delete rsiw0, reload the module
# with PARAMs and bring rsiw0 up on eth0 again. No-op on a siw VM (siw's MPA
# knobs are compile-time constants).
reload_rsiw() {
	[ "$RSIW_DRIVER" = rsiw ] || return 0
	if has_dev "$DEV"; then
		run rdma link delete "$DEV"
		wait_gone "$DEV"
	fi
	if lsmod | grep -q '^rsiw '; then
		run rmmod rsiw
	fi
	run modprobe rsiw "$@"
	rsiw_up eth0
}

# variant NAME [PARAM=VALUE...]: every VM reaches variant NAME; rsiw VMs
# reload with PARAMs first. Use variant_on for per-role parameters.
variant() {
	local name=$1
	shift
	log "=== variant $name: $*"
	reload_rsiw "$@"
	barrier "v-$name" 120
}

# cap_check TAG EXPECT...: stop the capture (cap_start, lib.sh) and check the
# MPA frames in it (tests/vm/py/mpa_pcap.py: KIND:FIELD=VALUE, e.g. rep:C=1).
cap_check() {
	local tag=$1
	shift
	cap_stop
	python3 /rsiw/tests/vm/py/mpa_pcap.py "$RSIW_OUT/$tag.pcap" "$@" 2>&1 | sed "s/^/  [$tag mpa] /" ||
		die "$tag: MPA exchange not as expected: $*"
}

# rping_round TAG SERVER_ROLE SIZE COUNT [EXPECT...]: rping -V with SERVER_ROLE
# as server; VM a captures the exchange and checks EXPECTs (see cap_check).
# A client of a siw server preloads tests/vm/tools/rdma-connect-delay.c, as in
# rping-interop: a first Send that reaches a siw server before siw_accept()
# installed the QP's receive callback stays unread (seen: crc-a-client of
# mpa-siw-interop, 40 bytes in the siw server's Recv-Q, 2026-11-26). Clients of
# rsiw servers send at once, which rsiw must handle.
rping_round() {
	local tag=$1 srv=$2 size=$3 count=$4 ip pre=
	shift 4
	port=$((port + 1))
	ip=$(fetch "$srv" ip)
	if [ "${RSIW_PEER_DRIVER:-}" = siw ] && [ -r "$RSIW_RUN/tools/rdma-connect-delay.so" ]; then
		pre="LD_PRELOAD=$RSIW_RUN/tools/rdma-connect-delay.so "
	fi
	if [ "$RSIW_ROLE" = a ] && [ $# -gt 0 ]; then cap_start "$tag" "$port"; fi
	serve_client "$tag" "$srv" "$port" \
		"rping -s -a $ip -p $port -V -C $count -S $size" \
		"${pre}rping -c -a $ip -p $port -V -C $count -S $size" 180
	if [ "$RSIW_ROLE" = a ] && [ $# -gt 0 ]; then cap_check "$tag" "$@"; fi
}

# refused_round TAG SERVER_ROLE [EXPECT...]: an rping connection that the MPA
# negotiation must refuse: the client must fail (not time out); the server is
# stopped afterwards. VM a checks EXPECTs on the capture.
refused_round() {
	local tag=$1 srv=$2 ip rc=0 pid logf
	shift 2
	port=$((port + 1))
	ip=$(fetch "$srv" ip)
	logf="$RSIW_OUT/$tag.log"
	if [ "$RSIW_ROLE" = a ] && [ $# -gt 0 ]; then cap_start "$tag" "$port"; fi
	if [ "$RSIW_ROLE" = "$srv" ]; then
		log "$tag: server, expecting a refused connection"
		timeout 90 rping -s -a "$ip" -p "$port" -V -C 1 -S 64 >"$logf" 2>&1 &
		pid=$!
		wait_listen "$port" 30
		publish "$tag.listening" 1
		fetch "$(peer_role)" "$tag.status" 90 >/dev/null
		kill "$pid" 2>/dev/null || true
		wait "$pid" || true
	else
		fetch "$srv" "$tag.listening" 90 >/dev/null
		log "$tag: client, expecting a refused connection"
		timeout 60 rping -c -a "$ip" -p "$port" -V -C 1 -S 64 >"$logf" 2>&1 || rc=$?
		publish "$tag.status" "$rc"
	fi
	sed "s/^/  [$tag] /" "$logf" | tail -n 20
	if [ "$RSIW_ROLE" != "$srv" ]; then
		[ "$rc" != 0 ] || die "$tag: the connection was not refused"
		[ "$rc" != 124 ] || die "$tag: the client hung instead of being refused"
	fi
	if [ "$RSIW_ROLE" = a ] && [ $# -gt 0 ]; then cap_check "$tag" "$@"; fi
	log "$tag: refused as expected"
}

# perf_round TAG SERVER_ROLE TOOL SIZE ITERS [EXPECT...]: a perftest bw/lat tool
# over rdma_cm (-R) with SERVER_ROLE as server; VM a captures and checks
# EXPECTs as rping_round does.
perf_round() {
	local tag=$1 srv=$2 tool=$3 size=$4 n=$5 ip opts
	shift 5
	port=$((port + 1))
	ip=$(fetch "$srv" ip)
	opts="-R -d $DEV -p $port -F -n $n -s $size"
	if [ "$RSIW_ROLE" = a ] && [ $# -gt 0 ]; then cap_start "$tag" "$port"; fi
	serve_client "$tag" "$srv" "$port" "$tool $opts" "$tool $opts $ip" 300
	if [ "$RSIW_ROLE" = a ] && [ $# -gt 0 ]; then cap_check "$tag" "$@"; fi
}

# variant2 NAME "A_PARAMS" "B_PARAMS": like variant, with per-role rsiw
# module parameters (space separated).
variant2() {
	local name=$1 pa=$2 pb=$3
	if [ "$RSIW_ROLE" = a ]; then
		# shellcheck disable=SC2086
		variant "$name" $pa
	else
		# shellcheck disable=SC2086
		variant "$name" $pb
	fi
}

# cycles_round SERVER_ROLE N SECONDS [CLIENT_ENV]: N rdma_cm connect/send/
# disconnect cycles (tests/vm/py/cm_cycles.py) with SERVER_ROLE as server;
# CLIENT_ENV (e.g. RSIW_ESTABLISHED_DELAY_MS=200) goes before the client.
# pyverbs takes long to start under TCG on a loaded host (over 30 s seen):
# the servers get at least 150 s to listen (RSIW_LISTEN_WAIT).
cycles_round() {
	local srv=$1 n=$2 t=$3 pre=${4:+$4 } ip t0
	port=$((port + 1))
	ip=$(fetch "$srv" ip)
	t0=$EPOCHSECONDS
	# The tag names the round (its port): serve_client's "listening" key of
	# an earlier round with the same server must not start this round's
	# client before its server listens.
	RSIW_LISTEN_WAIT=150 serve_client "cycles-$srv-$port" "$srv" "$port" \
		"python3 /rsiw/tests/vm/py/cm_cycles.py server $ip $port $n" \
		"${pre}python3 /rsiw/tests/vm/py/cm_cycles.py client $ip $port $n" "$t"
	log "cycles-$srv: $n cycles in $((EPOCHSECONDS - t0)) s"
}

# pair_up: the opening of a two-VM case: load the driver, bring up eth0
# with the RDMA device, publish this VM's address and wait for the peer.
pair_up() {
	load_driver
	peer_link_up
}
