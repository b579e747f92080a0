#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=400 kunit=1 kernel=debug
#
# The KUnit suites, from the kernel log (KTAP). Built-in suites run at boot
# (e.g. rust_rdma_mr in rust/kernel/rdma/mr.rs); rsiw's own run when the
# module loads (CONFIG_RDMA_RSIW_KUNIT_TEST=y). Both parts must pass: no
# "not ok" or fail:N anywhere, every suite a KTAP plan announces reports a
# result, and each expected suite below ran and passed. Skips (with the
# reason) when the module has no KUnit suites compiled in.
#
# Keep the lists in step with the #[kunit_tests(NAME)] in the tree:
#   git grep -h 'kunit_tests(' rust drivers/infiniband/sw/rsiw
# (the guest has no sources, so a new suite must be added here by hand).
. /rsiw/tests/vm/lib.sh

boot_suites="rust_kernel_fmt rust_mm_pmem rust_netlink rust_net_tcp rust_rdma_kva rust_rdma_mr rust_rdma_umem rust_spinlock_irq_condvar rust_sync_rcu_arc"
module_suites="rsiw_qp_state rsiw_wire rsiw_mem rsiw_wqe rsiw_ring rsiw_stag rsiw_device rsiw_batch"

# ktap_check WHAT KTAP SUITE...: every result in KTAP passed, the top-level
# plans (1..N) add up to the top-level results, and each SUITE passed.
ktap_check() {
	local what=$1 ktap=$2 planned ran bad s
	shift 2
	echo "$ktap" | grep -E '^\s*(KTAP|1\.\.|# Subtest|(not )?ok |# .*: pass:|# .*(EXPECTATION|ASSERTION) FAILED)' || true
	bad=$(grep -E '^\s*not ok |^\s*# [^ ]+: pass:[0-9]+ fail:[1-9]' <<<"$ktap" || true)
	[ -z "$bad" ] || die "KUnit ($what): $(head -5 <<<"$bad" | tr -s ' ')"
	planned=0
	for s in $(grep -Eo '^1\.\.[0-9]+' <<<"$ktap" | sed 's/^1\.\.//'); do
		planned=$((planned + s))
	done
	ran=$(grep -Ec '^ok [0-9]+ ' <<<"$ktap" || true)
	[ "$planned" -gt 0 ] || die "KUnit ($what): no KTAP plan in the kernel log"
	[ "$ran" -eq "$planned" ] || die "KUnit ($what): $planned suites planned, $ran passed"
	for s in "$@"; do
		grep -Eq "^ok [0-9]+ $s\$" <<<"$ktap" || die "KUnit ($what): suite $s did not run"
	done
	log "KUnit ($what): $ran suites, all passed ($*)"
}

[ "$RSIW_DRIVER" = rsiw ] || skip "the KUnit suites are rsiw's (driver is $RSIW_DRIVER)"
ko=$(modinfo -n rsiw 2>/dev/null) || die "no rsiw module for $(uname -r)"

# Does the module carry KUnit suites? (An ELF section .kunit_test_suites.)
has_kunit=$(python3 - "$ko" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
shoff, = struct.unpack_from("<Q", d, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3a)
def sh(i):
    return struct.unpack_from("<IIQQQQ", d, shoff + i * shentsize)
stroff = sh(shstrndx)[4]
names = set()
for i in range(shnum):
    n = sh(i)[0]
    names.add(d[stroff + n:d.index(b"\0", stroff + n)].decode())
print(1 if ".kunit_test_suites" in names else 0)
PY
)
[ "$has_kunit" = 1 ] || skip "$ko has no KUnit suites (CONFIG_RDMA_RSIW_KUNIT_TEST is off, or none written yet)"
[ -d /sys/kernel/debug/kunit ] || log "no /sys/kernel/debug/kunit (KUnit debugfs off); using dmesg only"

# Boot: the built-in suites ran before init, so their KTAP is at the start
# of the log, before anything this case does.
start=$(dmesg | wc -l)
ktap_check boot "$(dmesg --notime | head -n "$start")" $boot_suites

load_driver
sleep 1
ktap=$(dmesg --notime | tail -n +$((start + 1)))
ktap_check "rsiw load" "$ktap" $module_suites
# Each suite that started also finished and passed (a crash mid-suite
# leaves a "# Subtest:" without its result). The result line, not the
# "pass:N fail:0" summary, which KUnit leaves out for a suite of one test.
for s in $(sed -n 's/^    # Subtest: //p' <<<"$ktap"); do
	grep -Eq "^ok [0-9]+ $s\$" <<<"$ktap" || die "KUnit: suite $s started but did not pass"
done
run rmmod rsiw
pass
