#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=900
#
# RFC 7306 atomics and immediate data from a kernel ULP: load rsiw with
# rfc7306=1 and tests/kmod/rsiw_kext.ko, which connects QPs over rdma_cm on
# veth0's address and, with each side as the requester in turn, posts every
# atomic (FetchAdd, CmpSwap, their masked forms with the vectors of ATOM-07
# and ATOM-08), a Write, FetchAdd and Send in order (ATOM-16), Writes with
# Immediate of 16 and 0 bytes into receives with no SGE (IMM-05, D-07), a
# Send with Immediate (one IB_WC_RECV with IB_WC_WITH_IMM, one receive) and
# a mix whose receives complete in order (IMM-03); a misaligned atomic
# (ATOM-11) and one to a region without remote atomic access (ATOM-12)
# complete in error, leave the word as it was and put both QPs in ERROR;
# then 4 QPs x 2 threads x 250 FetchAdds and 2 CPU threads x 20,000
# atomic64_inc() on one word end at the exact sum (ATOM-15). The device
# reports IB_ATOMIC_GLOB. The log gets the mean round trips of an 8-byte
# Read, a FetchAdd and a masked FetchAdd, and of 8-byte Write ping-pongs with
# and without immediate data (not a pass criterion: speed is measured by
# benchmarks). Last, rsiw is reloaded with rfc7306=0: no atomic capability,
# and every extension opcode is refused with EINVAL.
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "RFC 7306 is rsiw's"
modinfo rsiw_kext >/dev/null 2>&1 ||
	die "rsiw_kext.ko is not installed (scripts/rsiw/kernel.sh build builds tests/kmod)"
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

run modprobe rsiw rfc7306=1
rsiw_up veth0
# bench=300: mean round trips of an 8-byte Read, FetchAdd, masked FetchAdd
# and 8-byte Write ping-pongs without and with immediate data, for the log.
kext_run on bench=300
grep 'rsiw_kext: bench' "$RSIW_OUT/kext-on.log" || true
for c in ext_attrs atom_fetch_add atom_07_masked_fetch_add atom_08_masked_cmp_swap \
	atom_16_write_atomic_send_order imm_05_write_with_imm imm_05_write_with_imm_zero_length \
	send_with_imm_one_receive imm_03_receives_in_post_order atom_11_misaligned \
	atom_12_no_atomic_right atom_15_concurrent_fetch_add; do
	assert_match "$(cat "$RSIW_OUT/kext-on.log")" "PASS $c: " "$c"
done
# Both sides were the requester.
[ "$(grep -c 'PASS atom_fetch_add: ' "$RSIW_OUT/kext-on.log")" = 2 ] || die "atom_fetch_add ran once"

run rdma link delete "$DEV"
run modprobe -r rsiw
run modprobe rsiw rfc7306=0
rsiw_up veth0
kext_run off off=1
assert_match "$(cat "$RSIW_OUT/kext-off.log")" "PASS ext_off_refused: " "ext_off_refused"
pass
