# SPDX-License-Identifier: GPL-2.0
#
# Guest-side helpers for the VM test cases (tests/vm/cases/*.sh). Source it:
#
#   . /rsiw/tests/vm/lib.sh
#
# The guest init (scripts/rsiw/guest/init) exports:
#   RSIW_ROLE      this VM's role: a or b
#   RSIW_INDEX     1 for a, 2 for b
#   RSIW_DRIVER    the RDMA driver this VM uses: rsiw or siw
#   RSIW_VMS       number of VMs in the test; RSIW_ROLES: "a" or "a b"
#   RSIW_IP        169.254.0.<index> on eth0; RSIW_IP6: fe80::<index>
#   RSIW_PEER_IP   the peer's IPv4 (two VMs); RSIW_PEER_IP6, RSIW_PEER_DRIVER
#   RSIW_OUT       a writable directory kept on the host after the run
#   RSIW_RUN       the run directory shared by all VMs of the test
#
# Exit status of a case: 0 pass, 77 skip, anything else fails.

set -euo pipefail

: "${RSIW_ROLE:=a}" "${RSIW_DRIVER:=rsiw}" "${RSIW_RUN:=/tmp}" "${RSIW_OUT:=/tmp}"
: "${RSIW_ROLES:=a}" "${RSIW_VMS:=1}"
# The default RDMA device name: rsiw0 or siw0.
DEV=${RSIW_DRIVER}0

# Every fork+exec costs ~0.2 s of CPU in a KASAN kernel under TCG, so the
# helpers that run often (log, and every poll loop) use shell builtins only:
# a poll loop of "date" and "sleep" kept busy the one vCPU that the traffic
# under test needs.
log() {
	local up _
	read -r up _ </proc/uptime
	echo "[$up] $RSIW_ROLE: $*"
}

# nap SECONDS: sleep without a fork. The descriptor is a pipe that this shell
# holds open for writing too, so it never becomes readable and "read -t"
# returns at the timeout.
exec {_rsiw_nap_fd}<> <(:)
nap() { read -rt "$1" -u "$_rsiw_nap_fd" _ || true; }
die() { echo "FAIL: $RSIW_ROLE: $*"; exit 1; }

# On a failing exit (die, set -e, anything), tell the other VM, which may be
# waiting in a barrier or fetch. A case that sets its own EXIT trap should
# call _rsiw_exit from it.
_rsiw_exit() {
	local rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ "$RSIW_VMS" != 1 ]; then
		{ mkdir -p "$RSIW_RUN/.barrier" && : >"$RSIW_RUN/.barrier/failed.$RSIW_ROLE"; } 2>/dev/null
	fi
	return $rc
}
trap _rsiw_exit EXIT
skip() { echo "SKIP: $*"; exit 77; }
pass() { echo "PASS: $RSIW_ROLE"; exit 0; }

# run CMD...: log and run a command; a failure fails the test (set -e).
run() { echo "+ $*"; "$@"; }

# expect_fail CMD...: the command must fail. Its stderr is kept in $ERR.
expect_fail() {
	echo "+ (must fail) $*"
	local rc=0
	ERR=$("$@" 2>&1 >/dev/null) || rc=$?
	[ $rc -ne 0 ] || die "succeeded but should have failed: $*"
	echo "  failed as expected ($rc): $ERR"
}

assert_eq() { # ACTUAL EXPECTED [WHAT]
	[ "$1" = "$2" ] || die "${3:-value}: expected '$2', got '$1'"
}

assert_match() { # TEXT REGEX [WHAT]
	grep -Eq -- "$2" <<<"$1" || die "${3:-output} does not match /$2/: $1"
}

assert_no_match() { # TEXT REGEX [WHAT]
	! grep -Eq -- "$2" <<<"$1" || die "${3:-output} matches /$2/: $(grep -E -- "$2" <<<"$1" | head -3)"
}

# wait_for SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
	local end=$((EPOCHSECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$EPOCHSECONDS" -lt $end ] || return 1
		nap 0.2
	done
}

# --- drivers and RDMA devices -------------------------------------------------

# load_driver [DRIVER [PARAM...]]: modprobe rsiw or siw with PARAMs. They
# must never be loaded together (both are RDMA_DRIVER_SIW), so refuse that.
load_driver() {
	local drv=${1:-$RSIW_DRIVER} other
	case "$drv" in rsiw) other=siw ;; siw) other=rsiw ;; *) die "unknown driver $drv" ;; esac
	! lsmod | grep -q "^$other " || die "$other is loaded; it cannot share a kernel with $drv"
	[ "$drv" != siw ] || siw_sndbuf
	run modprobe "$drv" "${@:2}"
}

# load_ulp_driver: load_driver for the kernel ULP cases (NVMe-oF, NFS). rsiw
# whose peer is siw holds its connect reply back by 0.2 s
# (established_delay_ms), as the shim of the user-space clients does
# (RSIW_ESTABLISHED_DELAY_MS, rping-interop): siw_accept() sends the MPA
# Reply before siw_qp_socket_assoc() installs the QP's receive callback, and
# a first message that arrives in between stays unread. Seen in CI: rsiw's
# NVMe-oF host against siw's target, the Connect of I/O queue 1 timed out.
load_ulp_driver() {
	if [ "$RSIW_DRIVER" = rsiw ] && [ "${RSIW_PEER_DRIVER:-}" = siw ]; then
		load_driver rsiw established_delay_ms=200
	else
		load_driver
	fi
}

# siw_sndbuf: start TCP sockets of this kernel with a 4 MiB send buffer, so
# that C siw does not find its socket full while it sends a message of the
# tests. siw then sends the rest from its TX thread (siw_sq_resume(), woken by
# sk_write_space) while the post_send() call that started the message may
# still be in siw_qp_sq_process(): nothing keeps the two apart, both add the
# FPDU's length to the WQE's processed count, and every later FPDU of the
# message carries a Tagged Offset one FPDU ahead of its payload. The receiver
# places the rest of the Write one FPDU too far and the first one never
# (seen: rping -V -S 65535 with a siw server, "data mismatch!", ping 0,
# bytes 54264.. of the Write; siw logged processed 55692 against an SGE
# offset of 54264 when it built the next FPDU). A larger buffer avoids the
# pause, and with it the race, for messages of up to a few MiB. The
# sockets of rsiw are not affected: rsiw runs only in the other VM.
siw_sndbuf() {
	run sysctl -q -w net.ipv4.tcp_wmem="4096 4194304 8388608"
}

# rdma_devs: the names of all RDMA links, sorted, one per line.
rdma_devs() { rdma link show | awk '$1 == "link" { sub("/.*", "", $2); print $2 }' | sort; }

# rdma_state DEV: the port state of DEV/1 (ACTIVE, DOWN, ...); fails if absent.
rdma_state() {
	local out
	out=$(rdma link show "$1/1" 2>/dev/null) || return 1
	awk '{ for (i = 1; i < NF; i++) if ($i == "state") print $(i + 1) }' <<<"$out"
}

# rdma_netdev DEV: the netdev DEV is attached to.
rdma_netdev() { rdma link show "$1/1" | awk '{ for (i = 1; i < NF; i++) if ($i == "netdev") print $(i + 1) }'; }

has_dev() { rdma link show "$1/1" >/dev/null 2>&1; }
state_is() { [ "$(rdma_state "$1")" = "$2" ]; }

# hw_counter NAME [DEV]: the hardware counter NAME of DEV/1 (rdma statistic);
# empty if the device has no such counter.
hw_counter() {
	rdma statistic show link "${2:-$DEV}/1" | tr '\n' ' ' |
		grep -Eo "(^| )$1[[:space:]]+[0-9]+" | awk '{ print $2 }'
}

# wait_state DEV STATE [SECONDS]
wait_state() {
	wait_for "${3:-10}" state_is "$1" "$2" ||
		die "$1: state '$(rdma_state "$1" || echo absent)', expected $2 within ${3:-10} s"
	log "$1 is $2"
}

# wait_gone DEV [SECONDS]
wait_gone() {
	wait_for "${2:-10}" eval "! has_dev $1" || die "$1 still present after ${2:-10} s"
	log "$1 is gone"
}

# rsiw_up NETDEV [NAME]: add an RDMA device of $RSIW_DRIVER on NETDEV and
# wait until its port is ACTIVE. NAME defaults to $DEV (rsiw0 or siw0).
rsiw_up() {
	local name=${2:-$DEV}
	run rdma link add "$name" type "$RSIW_DRIVER" netdev "$1"
	wait_state "$name" ACTIVE
}

# rsiw_add NETDEV [NAME]: like rsiw_up, without waiting.
rsiw_add() { run rdma link add "${2:-$DEV}" type "$RSIW_DRIVER" netdev "$1"; }

# --- the user space provider ------------------------------------------------

# The guest root has two siw providers for libibverbs: Debian's stock libsiw,
# the default, and rdma-core's with the extended ABI of
# Documentation/infiniband/rsiw-abi.rst (patches/rdma-core, built by
# scripts/rsiw/rdma-core.sh into $RSIW_PROVIDER_DIR, with its siwdv library
# and unit test). A case picks the patched one for every VM with
# "provider=rsiw" in its rsiw-test header, or for one VM with provider_a= or
# provider_b=; RSIW_PROVIDER from the host (tests/vm/run passes it on) sets it
# for every VM of every case. RSIW_PROVIDER then says which one this VM has.
RSIW_PROVIDER_DIR=/opt/rsiw/rdma-core

# use_provider rsiw|stock: make libibverbs load that provider from now on.
use_provider() {
	local lib=/usr/lib/x86_64-linux-gnu
	case "$1" in
	rsiw)
		[ -e "$RSIW_PROVIDER_DIR/lib/libsiw.so.1" ] ||
			die "the guest root has no patched siw provider (scripts/rsiw/rdma-core.sh)"
		[ -e "$lib/libibverbs/libsiw-rdmav34.so.stock" ] ||
			mv "$lib/libibverbs/libsiw-rdmav34.so" "$lib/libibverbs/libsiw-rdmav34.so.stock"
		ln -sf "$RSIW_PROVIDER_DIR/lib/libsiw.so.1" "$lib/libibverbs/libsiw-rdmav34.so"
		ln -sf "$RSIW_PROVIDER_DIR/lib/libsiw.so.1" "$lib/libsiw.so.1" ;;
	stock)
		if [ -e "$lib/libibverbs/libsiw-rdmav34.so.stock" ]; then
			mv -f "$lib/libibverbs/libsiw-rdmav34.so.stock" "$lib/libibverbs/libsiw-rdmav34.so"
			rm -f "$lib/libsiw.so.1"
		fi ;;
	*) die "unknown provider $1 (rsiw or stock)" ;;
	esac
	RSIW_PROVIDER=$1
	log "siw provider: $1"
}

# _case_provider: set _provider to the provider this VM's case asks for in
# its header (no fork: this runs in every case).
_case_provider() {
	local line kv n=0
	_provider=stock
	[ -f "$0" ] || return 0
	while IFS= read -r line && [ $((n += 1)) -le 20 ]; do
		case "$line" in "# rsiw-test:"*) ;; *) continue ;; esac
		for kv in ${line#*:}; do
			case "$kv" in
			provider=*) _provider=${kv#*=} ;;
			"provider_$RSIW_ROLE="*) _provider=${kv#*=}; break 2 ;;
			esac
		done
	done <"$0"
}

_case_provider
[ -z "${RSIW_PROVIDER:-}" ] || _provider=$RSIW_PROVIDER
if [ "$_provider" != stock ]; then
	use_provider "$_provider"
else
	RSIW_PROVIDER=stock
fi

# --- netdevs ----------------------------------------------------------------

# veth_pair A B [MAC_A]: a veth pair, both ends up.
veth_pair() {
	run ip link add "$1" ${3:+address "$3"} type veth peer name "$2"
	run ip link set "$1" up
	run ip link set "$2" up
	wait_for 5 eval "ip link show $1 | grep -q LOWER_UP" || die "$1 has no carrier"
}

# mac_of NETDEV
mac_of() { cat "/sys/class/net/$1/address"; }

# cap_start TAG PORT: capture the TCP connection on PORT (eth0, the first 200
# bytes of each segment) into $RSIW_OUT/TAG.pcap; cap_stop ends it.
cap_start() {
	tcpdump -i eth0 -U -s 200 -w "$RSIW_OUT/$1.pcap" "tcp port $2" 2>"$RSIW_OUT/$1.tcpdump" &
	CAP_PID=$!
	wait_for 20 grep -q "listening on" "$RSIW_OUT/$1.tcpdump" || die "$1: tcpdump did not start"
}

cap_stop() {
	sleep 1
	kill "$CAP_PID" 2>/dev/null || true
	wait "$CAP_PID" || true
}

# cap_show TAG: print the segments of a stopped capture and its MPA summary
# (which FPDUs each side sent first: a Terminate is term/N), for the log of a
# check that failed on what the peer sent.
cap_show() {
	tcpdump -nn -r "$RSIW_OUT/$1.pcap" 2>/dev/null | tail -20 | sed "s/^/  [$1] /"
	python3 /rsiw/tests/vm/py/mpa_pcap.py "$RSIW_OUT/$1.pcap" 2>&1 | sed "s/^/  [$1 mpa] /" || true
}

# --- two VMs ----------------------------------------------------------------

# wait_peer [SECONDS]: until every peer answers a ping on eth0.
wait_peer() {
	local ip
	for ip in ${RSIW_PEER_IP:-}; do
		wait_for "${1:-30}" ping -c 1 -W 1 "$ip" || die "peer $ip unreachable"
		log "peer $ip is up"
	done
}

# peer_link_up: the start of a two-VM case, its driver loaded: the device on
# eth0, this VM's address published, both VMs at barrier "up", the peer
# reachable.
peer_link_up() {
	rsiw_up eth0
	publish ip "$RSIW_IP"
	barrier up
	wait_peer 30
}

# compare_peer PY JSON TABLE PENDING SECONDS [PREFIX] [SUFFIX]: the end of a
# case that runs a suite on both VMs: this VM's results (JSON) kept and
# published; VM b waits (up to SECONDS) until a has published its own, VM a
# waits up to SECONDS for b's and runs
# "PY compare B A TABLE PENDING", which fails when a test passes on b's driver
# but not on a's (SUFFIX: what else makes it fail).
compare_peer() {
	local py=$1 json=$2 table=$3 pending=$4 t=$5 prefix=${6:-} suffix=${7:-} other
	cp "$json" "$RSIW_OUT/"
	publish done "$(basename "$json")"
	if [ "$RSIW_ROLE" != a ]; then
		# Stay up until a has its results too: the rig stops a VM 60 s after
		# its peer exited, and a may take much longer (a group whose
		# tests fail early on siw: rnbd/).
		wait_for "$t" _published a done || true
		return 0
	fi
	other=$RSIW_RUN/$(fetch b done "$t")
	python3 "$py" compare "$other" "$json" "$table" "$pending" ||
		die "${prefix}tests pass on $(basename "$other" .json) but not on $RSIW_DRIVER$suffix (see the table)"
}

# veth_server SCRIPT PORT LOG: rsiw on veth0 (10.77.0.1) of a local veth
# pair, and "python3 SCRIPT server 10.77.0.1 PORT" in the background (its
# output in LOG, its PID in $srv), listening.
veth_server() {
	veth_pair veth0 veth1
	run ip addr add 10.77.0.1/24 dev veth0
	rsiw_up veth0
	python3 "$1" server 10.77.0.1 "$2" >"$3" 2>&1 &
	srv=$!
	wait_listen "$2" 30
}

# barrier NAME [SECONDS]: wait until every VM of the test reached NAME. It uses
# files in the run directory shared by all VMs, not the link under test.
barrier() {
	local name=$1 t=${2:-120} r
	mkdir -p "$RSIW_RUN/.barrier"
	: >"$RSIW_RUN/.barrier/$name.$RSIW_ROLE"
	log "barrier $name"
	for r in $RSIW_ROLES; do
		wait_for "$t" _arrived "$name" "$r" ||
			die "barrier $name: VM $r did not arrive within $t s"
		[ -e "$RSIW_RUN/.barrier/$name.$r" ] || die "barrier $name: VM $r failed"
	done
}
_arrived() { [ -e "$RSIW_RUN/.barrier/$1.$2" ] || [ -e "$RSIW_RUN/.barrier/failed.$2" ]; }
_published() { [ -e "$RSIW_RUN/.barrier/$1.$2" ] || [ -e "$RSIW_RUN/.barrier/failed.$1" ]; }

# publish KEY VALUE / fetch ROLE KEY [SECONDS]: pass small values between VMs.
publish() { mkdir -p "$RSIW_RUN/.barrier"; printf '%s\n' "$2" >"$RSIW_RUN/.barrier/$RSIW_ROLE.$1.tmp" && mv "$RSIW_RUN/.barrier/$RSIW_ROLE.$1.tmp" "$RSIW_RUN/.barrier/$RSIW_ROLE.$1"; }
fetch() {
	wait_for "${3:-60}" _published "$1" "$2" || die "VM $1 did not publish $2"
	[ -e "$RSIW_RUN/.barrier/$1.$2" ] || die "VM $1 failed before publishing $2"
	cat "$RSIW_RUN/.barrier/$1.$2"
}

# --- RDMA traffic between two VMs --------------------------------------------

# wait_listen PORT [SECONDS]: until a TCP socket listens on PORT (iWARP
# listeners, siw's and rsiw's alike, are kernel TCP sockets).
# A case may raise every wait to RSIW_LISTEN_WAIT seconds (slow servers).
wait_listen() {
	local hex t=${2:-30}
	[ "${RSIW_LISTEN_WAIT:-0}" -le "$t" ] || t=$RSIW_LISTEN_WAIT
	printf -v hex '%04X' "$1"
	wait_for "$t" _listening "$hex" ||
		die "nothing listens on port $1 after $t s"
}
# _listening HEXPORT: a TCP socket in state LISTEN (0A) has that local port.
_listening() {
	local f sl addr rem st rest
	for f in /proc/net/tcp /proc/net/tcp6; do
		while read -r sl addr rem st rest; do
			[ "$st" = 0A ] && [ "${addr##*:}" = "$1" ] && return 0
		done <"$f"
	done
	return 1
}

# rping_flood ADDR PORT SIZE SECONDS [PINGS]: an rping -v server and client
# on ADDR (both in this VM) moving SIZE-byte pings until they are stopped or
# SECONDS pass; returns once the client has logged PINGS (2) pings. Sets slog,
# clog (their logs in RSIW_OUT), spid and cpid.
rping_flood() {
	slog=$RSIW_OUT/server.log
	clog=$RSIW_OUT/client.log
	timeout "$4" rping -s -a "$1" -p "$2" -v -C 100000 -S "$3" >"$slog" 2>&1 &
	spid=$!
	wait_listen "$2" 30
	timeout "$4" rping -c -a "$1" -p "$2" -v -C 100000 -S "$3" >"$clog" 2>&1 &
	cpid=$!
	wait_for 120 eval "[ \$(grep -ac 'ping data' $clog) -ge ${5:-2} ]" ||
		die "no traffic"
}

# stall_watch TAG PID LIMIT: if PID still runs after 90 s (or 3/4 of LIMIT
# seconds if that is shorter), print the TCP sockets (queues, cwnd, rtt) and
# the QPs, so that a hang leaves its state in the console before the
# timeout kills it. perftest's own give-up is 120 s. Sets _stall_pid.
stall_watch() {
	local tag=$1 pid=$2 after=$(($3 * 3 / 4))
	[ "$after" -gt 90 ] && after=90
	(
		sleep "$after"
		kill -0 "$pid" 2>/dev/null || exit 0
		log "$tag: still running after ${after}s (slow or stuck); sockets and QPs:"
		ss -tanie 2>&1 | sed "s/^/  [$tag ss] /"
		rdma res show qp 2>&1 | sed "s/^/  [$tag qp] /"
	) &
	_stall_pid=$!
}

# serve_client TAG SERVER_ROLE PORT SERVER_CMD CLIENT_CMD [SECONDS]: one
# client/server exchange between the two VMs. The VM with role SERVER_ROLE
# runs SERVER_CMD (a string, run by bash) in the background, waits until PORT
# listens and tells the peer, which then runs CLIENT_CMD. Both must exit 0
# within SECONDS (default 120). Output goes to the console and to
# $RSIW_OUT/TAG.log; each side publishes its status, and both fail if either
# side failed.
#
# A perftest client (CLIENT_CMD ib_*_bw/lat) that lost perftest's own
# connection race (see perftest_refused) runs again, with a new server, up to
# twice.
serve_client() {
	local tag=$1 srole=$2 port=$3 scmd=$4 ccmd=$5 t=${6:-120} rc=0 peer prc
	local logf="$RSIW_OUT/$tag.log" try=1 tries=1 pid before verdict
	[[ $ccmd =~ ^ib_[a-z]+_(bw|lat)\  ]] && tries=3
	while :; do
		rc=0
		if [ "$RSIW_ROLE" = "$srole" ]; then
			log "$tag: server: $scmd"
			timeout "$t" bash -c "$scmd" >"$logf" 2>&1 &
			pid=$!
			stall_watch "$tag" "$pid" "$t"
			wait_listen "$port" 30
			publish "$tag.listening.$try" 1
			# A client that lost the race leaves this server waiting for a
			# connection that never comes: stop it.
			verdict=
			while [ -z "$verdict" ]; do
				_client_verdict "$tag" "$try"
				verdict=$_verdict
				[ -n "$verdict" ] || kill -0 "$pid" 2>/dev/null || break
				nap 0.2
			done
			[ "$verdict" != race ] || kill "$pid" 2>/dev/null || true
			# A client that failed leaves the server waiting out its timeout
			# (perftest's server waits for the test's exchange): a few
			# seconds to say what it saw, then it is stopped.
			if [ "$verdict" = done ] && _client_failed "$tag" &&
				! wait_for 15 _exited "$pid"; then
				log "$tag: the client failed; stopping the server"
				kill "$pid" 2>/dev/null || true
			fi
			wait "$pid" || rc=$?
			kill "$_stall_pid" 2>/dev/null || true
			wait "$_stall_pid" 2>/dev/null || true
			# Exited first: wait for the client's verdict all the same.
			[ -n "$verdict" ] || wait_for "$t" _client_verdict_any "$tag" "$try" || true
			_client_verdict "$tag" "$try"
			if [ "$_verdict" = race ]; then
				log "$tag: the client lost perftest's connection race; serving again"
				try=$((try + 1))
				continue
			fi
		else
			fetch "$srole" "$tag.listening.$try" "$t" >/dev/null
			log "$tag: client: $ccmd"
			before=$(_refused_lines)
			timeout "$t" bash -c "$ccmd" >"$logf" 2>&1 &
			pid=$!
			stall_watch "$tag" "$pid" "$t"
			wait "$pid" || rc=$?
			kill "$_stall_pid" 2>/dev/null || true
			wait "$_stall_pid" 2>/dev/null || true
			if [ "$rc" != 0 ] && [ $try -lt $tries ] && perftest_refused "$logf" "$before"; then
				log "$tag: perftest's connection race: the server did not listen yet (status $rc); again"
				sed "s/^/  [$tag try $try] /" "$logf" | tail -n 8
				publish "$tag.race.$try" 1
				try=$((try + 1))
				continue
			fi
		fi
		break
	done
	sed "s/^/  [$tag] /" "$logf" | tail -n 40
	publish "$tag.status" "$rc"
	for peer in $RSIW_ROLES; do
		[ "$peer" = "$RSIW_ROLE" ] && continue
		prc=$(fetch "$peer" "$tag.status" "$t")
		[ "$prc" = 0 ] || die "$tag: VM $peer exited with status $prc"
	done
	[ "$rc" = 0 ] || die "$tag: exited with status $rc"
	log "$tag: ok"
}

# _client_verdict TAG TRY: sets _verdict to "race" if the client of
# serve_client TAG asked for another try, "done" if it published its status,
# else to nothing (no subshell: it runs in a poll loop).
_client_verdict() {
	local d=$RSIW_RUN/.barrier c=a
	[ "$RSIW_ROLE" = a ] && c=b
	_verdict=
	if [ -e "$d/$c.$1.race.$2" ]; then
		_verdict=race
	elif [ -e "$d/$c.$1.status" ] || [ -e "$d/failed.$c" ]; then
		_verdict=done
	fi
}
_client_verdict_any() { _client_verdict "$@" && [ -n "$_verdict" ]; }
# _client_failed TAG: the client of serve_client TAG published a status other
# than 0, or its VM failed. _exited PID: the process is gone.
_client_failed() {
	local d=$RSIW_RUN/.barrier c
	c=$(peer_role)
	[ -e "$d/failed.$c" ] || { [ -e "$d/$c.$1.status" ] && [ "$(cat "$d/$c.$1.status")" != 0 ]; }
}
_exited() { ! kill -0 "$1" 2>/dev/null; }

# _refused_lines: how many times this kernel's rsiw logged a TCP connect
# refused by the peer (a RST answering the SYN; Error(111) without
# CONFIG_SYMBOLIC_ERRNAME).
_refused_lines() { dmesg 2>/dev/null | grep -cE 'rsiw: cm: connect failed: (ECONNREFUSED|Error\(111\))' || true; }

# perftest_refused LOG BEFORE: whether the perftest client whose output is LOG
# failed only because its test connection was refused at the TCP level: a RST
# answered the SYN, so nothing listened on the port yet. perftest's server
# listens for the test connection only after the handshake over its first
# rdma_cm connection, and its client connects as soon as the handshake is
# over (create_rdma_cm_connection()); the client's retry of that connection
# then crashes in librdmacm (linux-rdma/perftest#93). With rsiw the refusal is
# RDMA_CM_EVENT_REJECTED -111 and the kernel line counted by _refused_lines
# (BEFORE: the count before the run); an MPA reject logs other lines. With siw
# rdma_connect() itself fails with ECONNREFUSED.
perftest_refused() {
	case $RSIW_DRIVER in
	rsiw)
		grep -q 'RDMA_CM_EVENT_REJECTED; error: -111' "$1" &&
			[ "$(_refused_lines)" -gt "$2" ] ;;
	siw)
		grep -q 'Failed to connect through RDMA CM' "$1" &&
			grep -q 'ERRNO: Connection refused' "$1" ;;
	*) false ;;
	esac
}

# peer_role: the other VM's role.
peer_role() { [ "$RSIW_ROLE" = a ] && echo b || echo a; }

# kext_vs_siw PORT CHECK [PARAM=VALUE...]: rsiw_kext's peer= mode (VM a) against
# a siw server (tests/vm/py/ext_siw.py on VM b) that accepts with a page's
# address and rkey; a's module loads with PARAMs and must pass CHECK alone.
# a captures the connection; if CHECK fails, the log shows what siw sent
# (its Terminate before its FIN or RST, or not). ext-siw, commit-siw.
kext_vs_siw() {
	local port=$1 check=$2 rc=0 out srv
	shift 2
	if [ "$RSIW_ROLE" = b ]; then
		python3 /rsiw/tests/vm/py/ext_siw.py "$RSIW_IP" "$port" >"$RSIW_OUT/ext_siw.log" 2>&1 &
		srv=$!
		wait_listen "$port" 30
		publish listening 1
		wait "$srv" || rc=$?
		cat "$RSIW_OUT/ext_siw.log"
		[ "$rc" = 0 ] || die "ext_siw server failed"
		return
	fi
	fetch b listening 120 >/dev/null
	cap_start peer "$port"
	run modprobe rsiw_kext dev="$DEV" peer="$(fetch b ip)" port="$port" "$@" || rc=$?
	cap_stop
	out=$(dmesg | grep 'rsiw_kext: ' || true)
	printf '%s\n' "$out" >"$RSIW_OUT/kext.log"
	printf '%s\n' "$out"
	grep -q "PASS $check: " <<<"$out" || cap_show peer
	assert_match "$out" "PASS $check: " "$check"
	assert_match "$out" "summary: 1 passed, 0 failed" "rsiw_kext summary"
	[ "$rc" = 0 ] || die "modprobe rsiw_kext failed ($rc)"
	run rmmod rsiw_kext
}
