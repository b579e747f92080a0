#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300 kernel=debug
#
# rmmod under traffic while a connection work item still runs module code
# (issue 38, item 4). Connection work items run rsiw code up to the end of
# their function, after they dropped their last reference to the
# connection; Conn::stop cannot wait for that tail, only the queue they run
# on can. fault_work_delay_ms holds every work item there for 3 s (and logs
# it), so rmmod is started while one sleeps: an rping -v over rsiw0 (both
# ends on it, the stream over lo, as in netdev-del-traffic) with 32 KiB
# pings, so that bulk receive and the Read responses go through the work
# item. rmmod must wait for the sleeping work item: if rsiw is freed under
# it (the work on a system queue that nothing flushes), it wakes up in
# freed module text, a page fault oops on this debug kernel, which the
# runner's console check and the dmesg check below fail. Checked too: rmmod
# ends (no hang), the rpings end with an error, and rsiw loads and unloads
# again.
. /rsiw/tests/vm/lib.sh

DELAY_MS=3000
! lsmod | grep -q '^siw ' || die "siw is loaded; it cannot share a kernel with rsiw"
run modprobe rsiw fault_work_delay_ms=$DELAY_MS
veth_pair vetha0 vetha1
run ip addr add 10.9.1.1/24 dev vetha0
rsiw_up vetha0 rsiw0

sleeps() { dmesg | grep -c 'rsiw: fault_work_delay_ms: a work item sleeps' || true; }

rping_flood 10.9.1.1 7001 32768 280
assert_eq "$(rdma res show qp | grep -c '^link rsiw0/1 .*state RTS' || true)" 2 "connected QPs"

# Start rmmod right after a work item began its delay, with the rpings
# still connected.
n=$(sleeps)
[ "$n" -gt 0 ] || die "no work item ran (fault_work_delay_ms not honoured?)"
wait_for 60 eval "[ \$(sleeps) -gt $n ]" || die "no work item within 60 s"
run rmmod rsiw
! lsmod | grep -q '^rsiw ' || die "rsiw still loaded"
log "rmmod returned; $(sleeps) delayed work items so far"
# Any work item rmmod did not wait for wakes up within DELAY_MS.
nap $((DELAY_MS / 1000 + 3))
if dmesg | grep -E 'BUG:|Oops|KASAN:|general protection' | head -n 5 | grep .; then
	die "a work item ran after rmmod"
fi

for p in $cpid $spid; do
	wait_for 60 eval "! kill -0 $p 2>/dev/null" || {
		kill -9 $cpid $spid 2>/dev/null || true
		die "rping $p still running 60 s after rmmod"
	}
done
crc=0; wait $cpid || crc=$?
src=0; wait $spid || src=$?
[ "$crc" != 0 ] || die "the client rping succeeded although its device went away"
[ "$src" != 0 ] || die "the server rping succeeded although its device went away"

# The module is usable again.
load_driver
rsiw_up vetha0
run rdma link delete "$DEV"
wait_gone "$DEV"
run rmmod rsiw
pass
