#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=600 kernel=debug
#
# The commit extensions (draft-talpey-rdma-commit-02) from a kernel ULP:
# load rsiw with commit=1 and tests/kmod/rsiw_kext.ko commit=1, which checks
# the device capabilities (FLUSH_GLOBAL, ATOMIC_WRITE and FLUSH_PERSISTENT:
# x86_64 can write caches back to persistent memory), that a fast
# registration with IB_ACCESS_FLUSH_PERSISTENT of DRAM fails with EINVAL (and
# rsiw logs why), and with each side as the
# requester: two Writes, a Flush over them and an Atomic Write posted together
# complete in order (IB_WC_FLUSH, IB_WC_ATOMIC_WRITE) with the data in the
# target (FLUSH-03, AWRITE-04); a whole-region Flush with a garbage range
# (FLUSH-02); 12 Flushes and Atomic Writes with ORD 4 (CMT-02). Then on
# connections of their own the responder's refusals: Flush to persistence on
# DRAM, Flush without the Flushable right, Flush one byte out of bounds
# (IB_WC_REM_ACCESS_ERR), a misaligned Atomic Write and one without remote
# write (an error); the target is unchanged and both QPs go to ERROR. Bad
# Flush flags and a 4-byte Atomic Write are refused when posted. The Flush and
# Atomic Write Responses went from data_ready in softirq (the hardware counter
# bh_qn3_responses counts them). Last, rsiw is reloaded with commit=0: no
# capability, and both opcodes refused.
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "the commit extensions are rsiw's"
modinfo rsiw_kext >/dev/null 2>&1 ||
	die "rsiw_kext.ko is not installed (scripts/rsiw/kernel.sh build builds tests/kmod)"
modinfo -p rsiw_kext | grep -q '^commit:' || die "rsiw_kext.ko has no commit= parameter"
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0

# kext_run NAME ARGS...: loads rsiw_kext with ARGS, checks its summary.
kext_run() {
	local name=$1 rc=0 out summary
	shift
	dmesg -C
	run modprobe rsiw_kext dev="$DEV" addr=10.77.0.1 "$@" || rc=$?
	out=$(dmesg | grep 'rsiw_kext: ' || true)
	printf '%s\n' "$out" >"$RSIW_OUT/kext-$name.log"
	summary=$(grep 'rsiw_kext: summary:' <<<"$out" | tail -1)
	grep -E 'rsiw_kext: (PASS|FAIL|SKIP) ' <<<"$out" || true
	[ -n "$summary" ] || die "rsiw_kext ($name) printed no summary (modprobe exit $rc)"
	assert_match "$summary" "summary: [1-9][0-9]* passed, 0 failed, 0 skipped" "rsiw_kext ($name)"
	[ "$rc" = 0 ] || die "modprobe rsiw_kext ($name) failed ($rc) with a clean summary"
	run rmmod rsiw_kext
}

run modprobe rsiw commit=1
rsiw_up veth0
kext_run commit commit=1
for c in commit_attrs commit_connect cmt_03_flush_persistent_refused \
	flush_03_write_flush_atomic_write flush_02_whole_region cmt_02_ord_shared \
	commit_post_refused flush_04_persistent_on_dram flush_04_no_flush_right \
	cmt_04_flush_out_of_bounds awrite_02_misaligned awrite_02_no_write_right; do
	assert_match "$(cat "$RSIW_OUT/kext-commit.log")" "PASS $c: " "$c"
done
# Both sides were the requester.
[ "$(grep -c 'PASS flush_03_write_flush_atomic_write: ' "$RSIW_OUT/kext-commit.log")" = 2 ] ||
	die "flush_03_write_flush_atomic_write ran once"
# The refusal of IB_ACCESS_FLUSH_PERSISTENT says why.
assert_match "$(dmesg)" "IB_ACCESS_FLUSH_PERSISTENT refused: the region is not persistent memory" \
	"the FLUSH_PERSISTENT log line"
# Responses sent from data_ready (tx::respond_bh), QN 3 ones among them.
bh=$(hw_counter bh_qn3_responses)
log "bh_qn3_responses=$bh bh_read_responses=$(hw_counter bh_read_responses)"
[ -n "$bh" ] && [ "$bh" -gt 0 ] || die "no QN 3 response was sent from data_ready (bh_qn3_responses=$bh)"

run rdma link delete "$DEV"
run modprobe -r rsiw
run modprobe rsiw commit=0
rsiw_up veth0
kext_run commit-off commit_off=1
assert_match "$(cat "$RSIW_OUT/kext-commit-off.log")" "PASS commit_off_refused: " "commit_off_refused"
pass
