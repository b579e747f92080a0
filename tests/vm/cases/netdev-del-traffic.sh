#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=300 kernel=debug
#
# Deleting a netdev under traffic (issue 5), one VM. rsiw0 on vetha0
# (10.9.1.1) carries both ends of an rping -v (client and server QPs on
# rsiw0; the TCP stream goes over lo: a client bound to another local device
# cannot resolve a local destination, ADDR_ERROR). rsiw1 on a second pair
# (vethb0, 10.9.2.1) must not be affected. Once data flows,
# "ip link del vetha0" removes rsiw0 with both QPs connected. Checked:
#   - rsiw0 goes away (no hang: uverbs disassociates the processes from the
#     device instead of waiting for them to close their files);
#   - the rpings get RDMA_CM_EVENT_DEVICE_REMOVAL and exit with an error
#     (with two CPUs one of them may be disconnected by its peer first);
#   - no QP is left; rsiw1 is still there and carries an rping -V;
#   - a clean console and kmemleak (checked by the runner).
# It fails on a driver without disassociate_ucontext (C siw: the removal
# blocks in ib_uverbs_remove_one() until the hung-task timeout, and rping
# never gets DEVICE_REMOVAL); that is how rsiw failed before it had the op.
# The peer's view of a removal (disconnect on a surviving device) is checked
# by conn-faults-dev.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair vetha0 vetha1
veth_pair vethb0 vethb1
run ip addr add 10.9.1.1/24 dev vetha0
run ip addr add 10.9.2.1/24 dev vethb0
rsiw_up vetha0 "${RSIW_DRIVER}0"
rsiw_up vethb0 "${RSIW_DRIVER}1"

rping_flood 10.9.1.1 7001 4096 300 20
res=$(rdma res show qp)
echo "$res"
assert_eq "$(grep -c "^link ${RSIW_DRIVER}0/1 .*state RTS" <<<"$res" || true)" 2 "connected QPs on ${RSIW_DRIVER}0"

t0=$(cut -d' ' -f1 /proc/uptime)
run ip link del vetha0
wait_gone "${RSIW_DRIVER}0" 30
for p in $cpid $spid; do
	wait_for 60 eval "! kill -0 $p 2>/dev/null" || {
		kill -9 $cpid $spid 2>/dev/null || true
		die "rping $p still running 60 s after the netdev was deleted"
	}
done
log "both rpings ended $(awk -v t="$t0" '{ print $1 - t }' /proc/uptime) s after the delete"
crc=0; wait $cpid || crc=$?
src=0; wait $spid || src=$?
for f in "$clog" "$slog"; do
	echo "--- $f ($(grep -ac 'ping data' "$f") pings)"
	grep -av "ping data" "$f" | cut -c1-100 | tail -n 5
done
# Each rping either got RDMA_CM_EVENT_DEVICE_REMOVAL (and failed), or, with
# more than one CPU, its peer reacted to its own removal event first and
# it got RDMA_CM_EVENT_DISCONNECTED (state 10) instead, which rping counts
# as success. The one that learned of the removal first had the event.
removed=0
for r in "client $crc $clog" "server $src $slog"; do
	set -- $r
	if grep -aq "device removal" "$3"; then
		[ "$2" != 0 ] || die "the $1 rping succeeded although its device went away"
		removed=$((removed + 1))
	elif ! grep -aq "state 10\$" "$3"; then
		die "$1: neither RDMA_CM_EVENT_DEVICE_REMOVAL nor a disconnection"
	fi
done
[ "$removed" -ge 1 ] || die "no rping got RDMA_CM_EVENT_DEVICE_REMOVAL"

assert_eq "$(rdma_devs)" "${RSIW_DRIVER}1" "RDMA devices after the delete"
assert_eq "$(rdma res show qp | grep -c . || true)" 0 "QPs left"
# The surviving device still carries traffic.
timeout 120 rping -s -a 10.9.2.1 -p 7002 -V -C 5 -S 4096 >"$RSIW_OUT/after-s.log" 2>&1 &
spid=$!
wait_listen 7002 30
run timeout 120 rping -c -a 10.9.2.1 -p 7002 -V -C 5 -S 4096
wait $spid || die "rping server on ${RSIW_DRIVER}1 failed after the delete"
run rdma link delete "${RSIW_DRIVER}1"
wait_gone "${RSIW_DRIVER}1"
run rmmod "$RSIW_DRIVER"
pass
