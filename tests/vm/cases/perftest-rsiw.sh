#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=1200 long=1
#
# perftest over rdma_cm (-R) between two rsiw VMs (the rsiw-with-rsiw
# pairing; perftest-interop pairs rsiw with siw): ib_send_bw, ib_write_bw and
# ib_read_bw at 1 B and 1 MiB and with 8 QPs (-q 8), the three latency tools
# at 1 B and 64 KiB, then Reads beyond the ORD and a fenced Send
# (tests/vm/py/read_fence.py), the data of large unsignalled Writes and Sends
# (bulk_data.py) and rping -V's exchange up to 1 MiB (ping_data.py), and all
# six tools at all sizes (-a: every power of two from 2 B to 8 MiB). A long
# case (make check-long): make check runs rsiw's requester and responder
# with every perftest tool against siw (perftest-interop), perftest's
# atomics and immediate data rsiw to rsiw (perftest-ext), and rsiw-pair's
# Writes and Reads rsiw to rsiw. Both VMs run the same code, so one
# direction suffices (VM b serves, a is the client). perftest checks the
# completions and their statuses and fails on errors; this is a correctness
# test with few iterations (speed: make bench).
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw with rsiw only"

load_driver
peer_link_up
port=18700
ip=$(fetch b ip)
# run TOOL SIZE ITERS [QPS]: one perftest run, VM b serving.
run() {
	port=$((port + 1))
	local opts="-R -d $DEV -p $port -F -n $3 -s $2${4:+ -q $4}"
	serve_client "$1-$2${4:+-q$4}" b "$port" "$1 $opts" "$1 $opts $ip" 300
}
for tool in ib_send_bw ib_write_bw ib_read_bw; do
	run $tool 1 5
	run $tool 1048576 5
	run $tool 65536 20 8
done
for tool in ib_send_lat ib_write_lat ib_read_lat; do
	run $tool 1 20
	run $tool 65536 20
done
# All sizes (-a: 2 B to 8 MiB), 5 iterations each, for all six tools.
for tool in ib_send_bw ib_write_bw ib_read_bw ib_send_lat ib_write_lat ib_read_lat; do
	port=$((port + 1))
	opts="-R -d $DEV -p $port -F -a -n 5"
	serve_client "$tool-all" b "$port" "$tool $opts" "$tool $opts $ip" 400
done
# Reads beyond ORD 1, then a fenced Send (RDMAP-07): the requester must be
# woken by each completed Read, and the data must arrive.
# Then every byte of large unsignalled Writes and Sends (bulk_data.py), and
# of rping's Read and Write echo at 64 B to 1 MiB (ping_data.py).
for t in read_fence bulk_data ping_data; do
	port=$((port + 1))
	serve_client "$t" b "$port" \
		"python3 /rsiw/tests/vm/py/$t.py server $ip $port" \
		"python3 /rsiw/tests/vm/py/$t.py client $ip $port" 90
done
barrier done
pass
