#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=18000 long=1
#
# The soak (issue 38, make check-long): 10,000 rdma_cm connect/send/
# disconnect cycles rsiw to rsiw (tests/vm/py/cm_cycles.py, as in
# conn-faults and conn-cycles-siw), 5,000 with each VM as the server, each
# side disconnecting in turn. Each VM compares its unreclaimable slab and
# vmalloc memory after 20 warm-up cycles (what the first connections
# allocate for good: caches, work queues) and after the 10,000 (within
# 4 MiB, once the TIME_WAIT sockets of the last minute are gone: a leak of
# 512 bytes a cycle is more), and the runner checks kmemleak at exit (the
# light kernel has kmemleak and lockdep; KASAN would triple the hours).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/interop.sh

cycles=5000

# kmem: unreclaimable slab plus vmalloc, in KiB, after dropping what the
# kernel frees lazily (caches; shrinking the slab caches also empties
# KASAN's quarantine, if any).
kmem() {
	local k v _ s=0 c
	sync
	echo 3 >/proc/sys/vm/drop_caches
	for c in /sys/kernel/slab/*/shrink; do echo 1 >"$c" 2>/dev/null || true; done
	while read -r k v _; do
		case "$k" in SUnreclaim: | VmallocUsed:) s=$((s + v)) ;; esac
	done </proc/meminfo
	echo "$s"
}

pair_up
port=8300
cycles_round a 20 600
base=$(kmem)
log "before: $base KiB"

cycles_round a $cycles 9000
# Halfway (the first minute's TIME_WAIT sockets still there): whether what
# stays grows with the cycles or stops after the first thousands (caches).
log "after the first $cycles: $(kmem) KiB"
cycles_round b $cycles 9000
barrier done

# Sockets in TIME_WAIT live 60 s: wait until the last minute's are gone, so
# that what is left is what the cycles kept; RCU frees the rest.
tw() { ss -tanH state time-wait | wc -l; }
log "$(tw) sockets in TIME_WAIT"
wait_for 90 eval '[ "$(tw)" = 0 ]' || log "$(tw) sockets still in TIME_WAIT after 90 s"
limit=$((base + 4096))
for _ in $(seq 1 30); do
	now=$(kmem)
	[ "$now" -le "$limit" ] && break
	nap 5
done
log "after: $now KiB ($((now - base)) KiB against the baseline)"
[ "$now" -le "$limit" ] || die "$((now - base)) KiB more than before $((2 * cycles)) cycles: a leak"
pass
