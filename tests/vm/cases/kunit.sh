#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=400 kunit=1
#
# Load rsiw with its KUnit suites (CONFIG_RDMA_RSIW_KUNIT_TEST=y): they run
# at module load and print KTAP to the kernel log. Every suite must pass.
# Skips (with the reason) when the module has no KUnit suites compiled in.
. /rsiw/tests/vm/lib.sh

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

start=$(dmesg | wc -l)
load_driver
sleep 1
ktap=$(dmesg --notime | tail -n +$((start + 1)))
echo "$ktap" | grep -E '^\s*(KTAP|1\.\.|# Subtest|(not )?ok |# .*: pass:|# .*(EXPECTATION|ASSERTION) FAILED)' || true

suites=$(grep -Ec '^\s*# Subtest: ' <<<"$ktap" || true)
[ "$suites" -gt 0 ] || die "rsiw has KUnit suites but none ran at load (kunit.enable=0?)"
! grep -Eq '^\s*not ok ' <<<"$ktap" || die "KUnit: $(grep -E '^\s*not ok ' <<<"$ktap" | head -5 | tr -s ' ')"
summaries=$(grep -v '# Totals:' <<<"$ktap" | grep -Ec '^\s*# [^ ]+: pass:[0-9]+ fail:0 ' || true)
bad=$(grep -E '^\s*# [^ ]+: pass:[0-9]+ fail:[1-9]' <<<"$ktap" || true)
[ -z "$bad" ] || die "KUnit: $bad"
[ "$summaries" -eq "$suites" ] || die "KUnit: $suites (sub)tests started, $summaries finished with fail:0"
log "KUnit: $suites suites, all with fail:0"
run rmmod rsiw
pass
