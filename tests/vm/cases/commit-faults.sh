#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel_b=bench timeout=900 kernel=debug
#
# The commit extensions at rsiw's responder against a raw TCP peer: VM a
# loads rsiw with commit=1 and runs an rdma_cm server with four pages (with
# the Flushable right, without it, without remote write, without remote
# read); VM b is a raw MPA peer (tests/vm/py/commit_faults.py). Two Writes,
# a Flush, an Atomic Write and a Verify in one TCP segment get their three
# responses byte for byte, the Verify's digest covering every earlier Write
# and the Atomic Write (FLUSH-03, AWRITE-04, VERIFY-06); a Verify without a
# Hash Value returns the digest; a whole-region Flush ignores its range.
# Then each error gets its Terminate triple, the server's QP goes to ERROR
# and no page changes: Flush Flags 0 or unknown (0/2/FF), a wrong STag
# (0/1/00), no Flushable right and Flush to persistence on DRAM (0/1/02), out
# of bounds (0/1/01); Atomic Write of Length 4 and misaligned (0/2/07), without
# remote write (0/1/02), out of bounds (0/1/01); Verify with a wrong Hash
# Value (0/2/FF, and the Atomic Write behind it is not done), without remote
# read (0/1/02), with a 65-byte Hash Value (0/2/07); a Flush Response with
# nothing outstanding (0/2/06); a Flush and an Atomic Write beyond IRD 1
# (0/2/07); a Flush whose TO + Length wraps (0/1/04), an Atomic Write to a page
# of another PD (0/1/03), a Verify of 2 MiB, more than rsiw digests in its RX
# path (0/2/FF). Then a reloads rsiw with commit=1 fault_dram_persistent=1, a
# test knob that lets DRAM be registered flushable to persistence, so that the
# deferred Flush to persistence (a write-back of more than 64 KiB, in the
# connection's work item while RX stops at the Flush) runs on this KASAN
# kernel, which has no pmem: a Flush(P) of 65,600 bytes of lines gets its
# response byte for byte and raises flush_deferred; a deferred Flush, a Write,
# a small Flush(P|V) and a Verify of the Write in one segment get their three
# responses in order (the Verify's digest covers the Write); a whole-region
# (1 MiB) deferred Flush followed by a RST while the work item may still write
# back leaves the server's QP in ERROR, and rsiw unloads (with no KASAN,
# lockdep or kmemleak report: the runner fails on any). Last, a reloads rsiw
# with commit=0: a Flush Request and an Atomic Write Request get 0/2/06.
. /rsiw/tests/vm/lib.sh

port=7720
[ "$RSIW_ROLE" = b ] || [ "$RSIW_DRIVER" = rsiw ] || skip "the commit extensions are rsiw's"
if [ "$RSIW_ROLE" = a ]; then
	run modprobe rsiw commit=1
else
	load_driver
fi
peer_link_up

# serve PORT [off|dram]: the server on a, the raw peer on b.
serve() {
	if [ "$RSIW_ROLE" = a ]; then
		python3 /rsiw/tests/vm/py/commit_faults.py server "$RSIW_IP" "$@" \
			>"$RSIW_OUT/commit_faults-$1.log" 2>&1 &
		local srv=$! rc=0
		wait_listen "$1" 30
		publish "listening-$1" 1
		wait "$srv" || rc=$?
		cat "$RSIW_OUT/commit_faults-$1.log"
		[ "$rc" = 0 ] || die "commit_faults server failed"
	else
		fetch a "listening-$1" 300 >/dev/null
		run python3 /rsiw/tests/vm/py/commit_faults.py client "$(fetch a ip)" "$@" ||
			die "commit_faults client failed"
	fi
}

# reload PARAMS...: a reloads rsiw with PARAMS on a fresh device.
reload() {
	[ "$RSIW_ROLE" = a ] || return 0
	run rdma link delete "$DEV"
	run modprobe -r rsiw
	run modprobe rsiw "$@"
	rsiw_up eth0
}

serve $port
barrier on-done
reload commit=1 fault_dram_persistent=1
serve $((port + 2)) dram
if [ "$RSIW_ROLE" = a ]; then
	# commit_faults.py checked each connection's counters; the totals too.
	stat=$(rdma statistic show link "$DEV/1" | tr '\n' ' ')
	log "rdma statistic: $stat"
	[[ $stat =~ flush_deferred[[:space:]]+([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -ge 2 ] ||
		die "flush_deferred below 2: the deferred path did not run"
	dmesg | grep -q 'rsiw: fault_dram_persistent: ' ||
		die "fault_dram_persistent did not apply: no DRAM region was registered"
fi
reload commit=0
serve $((port + 1)) off
barrier done
pass
