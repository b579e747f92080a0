#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=900 long=part
#
# rping between rsiw (VM a) and the C siw (VM b) in both directions: each VM
# is the server once. rping -V checks every byte of the ping data, which
# travels as RDMA Send, Write and Read (the server reads the client's buffer
# and writes it back). Sizes 64 B and 65535 B (rping's largest: its buffers
# are below 64 KiB; larger ones: ping_data.py below; the long part, make
# check-long, adds 1 KiB and 4 KiB), over
# IPv4 and IPv6 link-local addresses. Then, each VM the server in turn,
# tests/vm/py/bulk_data.py checks every byte of large unsignalled Writes and
# Sends, read_fence.py Reads beyond ORD 1 followed by a fenced Send, and
# ping_data.py rping -V's exchange (Send, Read, Write, every byte checked)
# at 64 B to 1 MiB.
#
# siw offers MPA Rev 2 without CRC and without peer-to-peer mode (its knobs
# are compile-time constants); the rsiw side is reloaded with each of its MPA
# settings in turn (RSIW_MPA_CONFIGS; ignored with --driver siw).
#
# rping runs with tests/vm/tools/rping-check.c preloaded, which checks the
# data the server's Read brought and, when rping finds a mismatch, says which
# bytes of the echo are wrong and whose they are. The C siw in VM b starts
# its sockets with a large send buffer (siw_sndbuf in lib.sh): siw's TX races
# with itself when its socket fills during a large Write and then sends the
# rest of the Write with Tagged Offsets one FPDU ahead of the data.
#
# The rping clients run with tests/vm/tools/rdma-connect-delay.c preloaded,
# the python clients with RSIW_ESTABLISHED_DELAY_MS, which cmutil.py obeys
# (pyverbs loads librdmacm after a preloaded shim, which then finds no
# rdma_get_cm_event to wrap). Both hold a client's first Send back by 0.2 s
# after ESTABLISHED: a siw server moves its QP to RTS and sends the MPA Reply
# before it installs the QP's receive callback (siw_accept()), and bytes that
# arrive in between stay unread in its socket until more data comes. rping's
# ping-pong then waits forever (seen: rping6 with an rsiw client, 40 bytes in
# the siw server's Recv-Q, CI of 2026-11-25). It changes nothing on the wire.
. /rsiw/tests/vm/lib.sh

shim=$RSIW_RUN/tools/rdma-connect-delay.so
chk=$RSIW_RUN/tools/rping-check.so
[ -r "$shim" ] && [ -r "$chk" ] || die "no $shim or $chk (built by tests/vm/run)"

: "${RSIW_MPA_CONFIGS:=default}"
count=10
sizes="64 65535"
[ "${RSIW_LONG:-0}" != 1 ] || sizes="64 1024 4096 65535"

rounds() { # CONFIG
	local port=7200 srv size ip
	for srv in a b; do
		for size in $sizes; do
			port=$((port + 1))
			ip=$(fetch "$srv" ip)
			serve_client "rping-$1-$srv-$size" "$srv" "$port" \
				"RPING_CHECK_SIZE=$size LD_PRELOAD=$chk rping -s -a $ip -p $port -V -C $count -S $size" \
				"LD_PRELOAD=$shim:$chk rping -c -a $ip -p $port -V -C $count -S $size"
		done
	done
	# Data of large unsignalled Writes and Sends, then Reads beyond ORD 1
	# and a fenced Send (RDMAP-07): rping -V checks neither.
	for srv in a b; do
		ip=$(fetch "$srv" ip)
		for t in bulk_data read_fence ping_data; do
			port=$((port + 1))
			serve_client "$t-$1-$srv" "$srv" "$port" \
				"python3 /rsiw/tests/vm/py/$t.py server $ip $port" \
				"RSIW_ESTABLISHED_DELAY_MS=200 python3 /rsiw/tests/vm/py/$t.py client $ip $port" 90
		done
	done
	# IPv6 link-local: one round each way.
	for srv in a b; do
		port=$((port + 1))
		ip=$(fetch "$srv" ip6)
		serve_client "rping6-$1-$srv" "$srv" "$port" \
			"RPING_CHECK_SIZE=4096 LD_PRELOAD=$chk rping -s -a $ip%eth0 -p $port -V -C $count -S 4096" \
			"LD_PRELOAD=$shim:$chk rping -c -a $ip%eth0 -p $port -V -C $count -S 4096"
	done
}

load_driver
rsiw_up eth0
publish ip "$RSIW_IP"
publish ip6 "$RSIW_IP6"
barrier up
wait_peer 30
rounds default
barrier done
pass
