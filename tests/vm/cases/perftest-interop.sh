#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=900 kernel_b=bench long=part long_timeout=2400
#
# perftest over rdma_cm (-R) between rsiw (VM a) and the C siw (VM b), each
# VM the server in turn: ib_send_bw, ib_write_bw and ib_read_bw at 1 MiB
# (beyond the socket buffers) and with 8 QPs (-q 8, 64 KiB), and the three
# latency tools at 1 B (below any header). The long part (make check-long,
# RSIW_LONG=1) adds the bandwidth tools at 1 B and 4 KiB (one page, several
# FPDUs), the latency tools at 64 KiB, and every tool at all sizes (-a: every
# power of two from 2 B to 8 MiB) in both directions, the whole matrix (about
# 760 s of the 1064 s it took on a slow 2-core host).
# The servers listen on the wildcard address. Iteration counts are small
# (perftest's least for bw is 5): this is a correctness test (perftest checks
# completions and statuses, and fails on errors); speed is measured by make
# bench.
#
# The siw VM boots the non-debug bench kernel (kernel_b=bench; rsiw stays on
# the debug kernel): siw's TX sends one FPDU at a time in several sendmsg
# calls, and on a lockdep kernel under TCG it moved 0.2-0.8 MB/s on a slow
# 2-core host (2026-11-28), so that the half of the matrix where siw sends
# took about 22 minutes; rsiw's TX on the same kernel sent 8 MB/s.
#
# The clients run with tests/vm/tools/rdma-connect-delay.c preloaded: it
# holds perftest's test connection back until the server has listened again
# after its parameter exchange. siw as the server drops a connection that
# arrives while its listener is being set up and then frees that listener
# under its users (KASAN, lockdep); perftest's quick reconnect and rsiw's
# quick connect reach that window (perftest#93 is the same race seen as a
# refusal). It also delays a client's first Send by 0.2 s after ESTABLISHED:
# a siw server installs its QP's receive callback only after it sent the MPA
# Reply, and ignores bytes that arrive in between (the shim's comment).
. /rsiw/tests/vm/lib.sh

export LD_PRELOAD=$RSIW_RUN/tools/rdma-connect-delay.so
[ -r "$LD_PRELOAD" ] || die "no $LD_PRELOAD (built by tests/vm/run)"

load_driver
rsiw_up eth0
publish ip "$RSIW_IP"
publish driver "$RSIW_DRIVER"
barrier up
wait_peer 30
port=18500
# perf TOOL TAG OPTS...: one perftest run over rdma_cm, $srv serving at $ip.
perf() {
	local tool=$1 tag=$2 opts
	shift 2
	port=$((port + 1))
	opts="-R -d $DEV -p $port -F $*"
	serve_client "$tool-$tag-$srv" "$srv" "$port" "$tool $opts" "$tool $opts $ip" 400
}
for srv in a b; do
	ip=$(fetch "$srv" ip)
	for tool in ib_send_bw ib_write_bw ib_read_bw; do
		perf $tool 1048576 -n 5 -s 1048576
		perf $tool q8 -n 20 -q 8 -s 65536
	done
	for tool in ib_send_lat ib_write_lat ib_read_lat; do
		perf $tool 1 -n 20 -s 1
	done
	if [ "${RSIW_LONG:-0}" = 1 ]; then
		for tool in ib_send_bw ib_write_bw ib_read_bw; do
			for size in 1 4096; do
				perf $tool $size -n 5 -s $size
			done
		done
		for tool in ib_send_lat ib_write_lat ib_read_lat; do
			perf $tool 65536 -n 20 -s 65536
		done
		for tool in ib_send_bw ib_write_bw ib_read_bw ib_send_lat ib_write_lat ib_read_lat; do
			perf $tool all -n 5 -a
		done
	fi
done
barrier done
pass
