#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=420
#
# rmmod while a connection work item still runs module code (issue 38,
# item 4). Connection work items run rsiw code up to the end of their
# function, after they dropped their last reference to the connection;
# Conn::stop cannot wait for that tail, only the queue they run on can.
# fault_work_delay_ms holds every work item there for 15 s (and logs it).
# An rping -v over rsiw0 (both ends on it, the stream over lo, as in
# netdev-del-traffic) with 32 KiB pings keeps work items coming; the rpings
# are killed right after one began its delay (their uverbs files hold the
# module), and rmmod starts as soon as nothing holds rsiw, while that work
# item (or one of the teardown) still sleeps: checked from the console
# timestamps, and the case fails if it missed the window. rmmod must wait
# for the sleeping work item: if rsiw is freed under it (the work on a
# system queue that nothing flushes), it wakes up in freed module text
# (unmapped when the module was freed: a page fault oops on any kernel, so
# the light one does; KASAN adds nothing here), which the runner's console
# check and the dmesg check below fail. From the kill to the module's last
# reference going took 10-12 s on the KASAN kernel beside other cases (one
# run missed the 9 s window); about 3 s on the light one, and the delay is
# 20 s: a 14 s window. Checked too: rmmod ends (no hang), and
# rsiw loads and unloads again.
. /rsiw/tests/vm/lib.sh

DELAY_MS=20000
! lsmod | grep -q '^siw ' || die "siw is loaded; it cannot share a kernel with rsiw"
run modprobe rsiw fault_work_delay_ms=$DELAY_MS
veth_pair vetha0 vetha1
run ip addr add 10.9.1.1/24 dev vetha0
rsiw_up vetha0 rsiw0

last_sleep() {
	dmesg | sed -n 's/^\[ *\([0-9.]*\)\] rsiw: fault_work_delay_ms: a work item sleeps.*/\1/p' | tail -n 1
}
sleeps() { dmesg | grep -c 'rsiw: fault_work_delay_ms: a work item sleeps' || true; }

rping_flood 10.9.1.1 7001 32768 280
assert_eq "$(rdma res show qp | grep -c '^link rsiw0/1 .*state RTS' || true)" 2 "connected QPs"

# A user context holds the module (uverbs), so the rpings go first: kill
# them right after a work item began its delay, wait until nothing holds
# rsiw, and rmmod while a work item still sleeps in module code (checked
# from the console timestamps: the window is DELAY_MS from the last sleep).
n=$(sleeps)
[ "$n" -gt 0 ] || die "no work item ran (fault_work_delay_ms not honoured?)"
wait_for 60 eval "[ \$(sleeps) -gt $n ]" || die "no work item within 60 s"
log "killing the rpings (a work item began its delay at $(last_sleep) s, now $(cut -d' ' -f1 /proc/uptime) s)"
pkill -9 -x rping || true # cpid and spid are timeout(1)'s: it does not pass SIGKILL on
wait $cpid $spid 2>/dev/null || true
wait_for 30 eval '! pgrep -x rping >/dev/null' || die "rping still running 30 s after SIGKILL"
wait_for 30 eval '[ "$(cat /sys/module/rsiw/refcnt)" = 0 ]' ||
	die "rsiw still in use 30 s after the rpings ended"
log "nothing holds rsiw at $(cut -d' ' -f1 /proc/uptime) s"
# A work item began its delay less than DELAY_MS - 6 s ago: under TCG, rmmod
# may take a few seconds from here to freeing the module.
asleep() {
	awk -v t="$(last_sleep)" -v now="$(cut -d' ' -f1 /proc/uptime)" \
		-v d="$DELAY_MS" 'BEGIN { exit !(t != "" && (now - t) * 1000 < d - 6000) }'
}
if ! asleep; then
	m=$(sleeps)
	wait_for 20 eval "[ \$(sleeps) -gt $m ]" ||
		die "no work item asleep when rmmod could start (window missed)"
fi
log "rmmod while a work item sleeps (last began at $(last_sleep) s, now $(cut -d' ' -f1 /proc/uptime) s)"
run rmmod rsiw
! lsmod | grep -q '^rsiw ' || die "rsiw still loaded"
log "rmmod returned; $(sleeps) delayed work items so far"
# Any work item rmmod did not wait for wakes up within DELAY_MS.
nap $((DELAY_MS / 1000 + 3))
if dmesg | grep -E 'BUG:|Oops|KASAN:|general protection' | head -n 5 | grep .; then
	die "a work item ran after rmmod"
fi

# The module is usable again.
load_driver
rsiw_up vetha0
run rdma link delete "$DEV"
wait_gone "$DEV"
run rmmod rsiw
pass
