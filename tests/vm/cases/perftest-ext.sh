#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw provider=rsiw timeout=600 long=part
#
# perftest's RFC 7306 tests from user space, rsiw to rsiw over rdma_cm (-R),
# with rsiw loaded with rfc7306=1 and rdma-core's siw provider patched for
# the extended siw ABI in both VMs (Documentation/infiniband/rsiw-abi.rst).
# VM b serves, VM a is the client:
#
# - ib_atomic_bw and ib_atomic_lat with -A CMP_AND_SWAP and -A
#   FETCH_AND_ADD; ib_atomic_bw also with 4 QPs and bidirectional (-b: both
#   VMs are requester and responder at once);
# - ib_write_bw --write_with_imm at 64 B and 64 KiB (a Write of many FPDUs,
#   then its Immediate Data) and bidirectional, ib_write_lat
#   --write_with_imm at 2 B and 4 KiB (each side answers a receive
#   completion carrying the immediate).
#
# The long part (make check-long, RSIW_LONG=1) adds ib_atomic_lat with
# FETCH_AND_ADD, ib_write_bw --write_with_imm at 64 B and ib_write_lat
# --write_with_imm at 4 KiB.
#
# perftest fails on any completion in error and on a receive completion
# without the expected opcode. Each run's output is checked: the test's
# title, transport IW, rdma_cm QPs, and a result row with the message size
# (atomics: 8 bytes) and the iterations asked for (with -q, of all QPs).
# The figures are not checked (the light kernel has no TSC frequency:
# perftest prints 0.00 and inf); speed is make bench's. perftest posts through ibv_post_send() on
# siw devices (its ibv_wr_*() path is for a list of vendors' devices), so
# this is the provider's legacy-verbs path; the ibv_wr_*() path is
# tests/vm/py/ext_pyverbs.py's (pyverbs-ext).
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw only (siw has no RFC 7306)"
[ "$RSIW_PROVIDER" = rsiw ] || die "this case needs the patched provider"

run modprobe rsiw rfc7306=1
peer_link_up
ip=$(fetch b ip)

# check LOG TITLE SIZE ITERS: the sane output of a perftest run.
check() {
	local log=$1 title=$2 size=$3 iters=$4 row
	grep -qF " $title" "$log" || die "$log: no title \"$title\""
	grep -Eq 'Transport type *: IW' "$log" || die "$log: transport is not IW"
	grep -Eq 'rdma_cm QPs[[:space:]]*: ON' "$log" || die "$log: not rdma_cm QPs"
	row=$(awk -v s="$size" '$1 == s && NF >= 3 { r = $1 " " $2 } END { print r }' "$log")
	assert_eq "$row" "$size $iters" "$log: the result row's size and iterations"
	! grep -Eiq 'completion with error|failed status|error in poll|couldn.t post' "$log" ||
		die "$log: perftest reported an error"
}

port=19400
# pt TAG TOOL SIZE ITERS TITLE [OPTIONS...]: one run, VM b serving; the
# client's output is checked, and the server's where it prints a result (the
# bidirectional runs and Write with Immediate, whose server takes the
# receive completions).
pt() {
	local tag=$1 tool=$2 size=$3 iters=$4 title=$5 qps=1
	shift 5
	port=$((port + 1))
	local opts="-R -d $DEV -p $port -F -n $iters $*"
	serve_client "$tag" b "$port" "$tool $opts" "$tool $opts $ip" 120
	# A bandwidth test counts the iterations of all its QPs.
	[[ " $* " =~ \ -q\ ([0-9]+)\  ]] && qps=${BASH_REMATCH[1]}
	if [ "$RSIW_ROLE" = a ] || [[ " $* " =~ \ (--write_with_imm|-b)\  ]]; then
		check "$RSIW_OUT/$tag.log" "$title" "$size" $((iters * qps))
	fi
}

for a in CMP_AND_SWAP FETCH_AND_ADD; do
	pt "atomic_bw-$a" ib_atomic_bw 8 100 "Atomic $a BW Test" -A "$a"
done
pt atomic_lat-CMP_AND_SWAP ib_atomic_lat 8 50 "Atomic CMP_AND_SWAP Latency Test" -A CMP_AND_SWAP
[ "${RSIW_LONG:-0}" != 1 ] || pt atomic_lat-FETCH_AND_ADD ib_atomic_lat 8 50 "Atomic FETCH_AND_ADD Latency Test" -A FETCH_AND_ADD
pt atomic_bw-q4 ib_atomic_bw 8 50 "Atomic FETCH_AND_ADD BW Test" -A FETCH_AND_ADD -q 4
pt atomic_bw-bidir ib_atomic_bw 8 50 "Atomic CMP_AND_SWAP Bidirectional BW Test" -A CMP_AND_SWAP -b
# A Write with Immediate consumes a receive. iWARP has no RNR retry, and
# perftest's credits for the receiver's reposting are ib_send_bw's only
# (send_bw.c sets send_rcredit for IBV_TRANSPORT_IWARP; write_bw.c has no
# such thing): a longer ib_write_bw --write_with_imm run (-n above the
# receive queue, -r, default 512, or -D) can outrun the server, whose QP
# then answers Immediate Data without a receive with Terminate 1/2/02
# (rsiw-extensions.rst), as it answers a Send. So fewer iterations than
# the receive queue; ib_write_lat is a ping-pong and reposts in step.
[ "${RSIW_LONG:-0}" != 1 ] ||
	pt write_imm_bw-64 ib_write_bw 64 100 "RDMA_Write_imm BW Test" -s 64 --write_with_imm
pt write_imm_bw-64k ib_write_bw 65536 20 "RDMA_Write_imm BW Test" -s 65536 --write_with_imm
pt write_imm_bw-bidir ib_write_bw 4096 50 "RDMA_Write_imm Bidirectional BW Test" -s 4096 --write_with_imm -b
pt write_imm_lat-2 ib_write_lat 2 50 "RDMA_Write_imm Latency Test" -s 2 --write_with_imm
[ "${RSIW_LONG:-0}" != 1 ] ||
	pt write_imm_lat-4k ib_write_lat 4096 50 "RDMA_Write_imm Latency Test" -s 4096 --write_with_imm
barrier done
pass
