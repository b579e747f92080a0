#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300
#
# A TX batch that cannot grow holds the send back instead of failing the QP
# (issue 38, the GFP_NOIO limit). A connection's TX batch stages headers,
# trailers and copied payload (all of it with MPA CRC, and all of a kernel
# ULP's) in pages it allocates as it needs them, from the send path, with
# GFP_NOIO | __GFP_NORETRY: such an allocation may fail under memory
# pressure, and a storage ULP sending from the reclaim path must not lose
# its connection then. fault_tx_nomem (testing only) fails every one of
# them: each batch has only the page it was created with. rping -V (both
# ends on rsiw0 over a veth pair) then moves 64 KiB Sends, Reads and Writes
# with MPA CRC and FPDUs of up to 64 KiB (fpdu_segments=45), each of which
# needs 17 pages: TX must send what the batch holds, then cut the FPDU to
# one page, and every byte must arrive (rping -V checks them). Before the
# fix the first FPDU that needed a second page moved the QP to ERROR: the
# QP terminated, the peer's "connection failed", a failed completion at the
# server, while rping still exited 0; so the case counts the pings each side
# validated (rping -v) and fails on any QP that terminated. Checked too:
# the fault fired, and rsiw unloads.
. /rsiw/tests/vm/lib.sh

! lsmod | grep -q '^siw ' || die "siw is loaded; it cannot share a kernel with rsiw"
run modprobe rsiw mpa_crc_required=1 fpdu_segments=45 fault_tx_nomem=1
veth_pair vetha0 vetha1
run ip addr add 10.9.2.1/24 dev vetha0
rsiw_up vetha0 rsiw0

ip=10.9.2.1
port=7201
size=65535
count=20
slog=$RSIW_OUT/server.log
clog=$RSIW_OUT/client.log
timeout 240 rping -s -a $ip -p $port -v -V -C $count -S $size >"$slog" 2>&1 &
spid=$!
wait_listen $port 30
rc=0
run timeout 200 rping -c -a $ip -p $port -v -V -C $count -S $size >"$clog" 2>&1 || rc=$?
src=0
wait $spid || src=$?
grep -av 'ping data' "$clog" | sed 's/^/  [client] /' | tail -n 20
grep -av 'ping data' "$slog" | sed 's/^/  [server] /' | tail -n 20
dmesg | grep -E 'rsiw: fault_tx_nomem|QP [0-9]+: (terminating|Terminate|connection failed)' | head -n 10
dmesg | grep -q 'rsiw: fault_tx_nomem: a TX batch cannot grow' ||
	die "fault_tx_nomem did not fire: no batch needed a second page"
# rping may exit 0 after an error (a failed completion, a disconnect): what
# counts is every ping validated on both sides and no QP failed.
! dmesg | grep -E 'QP [0-9]+: (terminating|Terminate received|connection failed)' ||
	die "a QP failed while its TX batch could not grow"
assert_eq "$(grep -ac 'ping data' "$clog")" $count "pings the client validated"
n=$(grep -ac 'ping data' "$slog")
[ "$n" -ge $count ] || die "the server read $n pings, not $count"
assert_eq "$rc" 0 "rping client status"
assert_eq "$src" 0 "rping server status"

run rdma link delete rsiw0
wait_gone rsiw0
run rmmod rsiw
pass
