#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw provider=rsiw kernel=pmem nvdimm=128M timeout=600 long=1
#
# RDMA Flush to persistence on persistent memory (issue 37), rsiw to rsiw
# over a veth pair in one VM with an emulated NVDIMM: its namespace becomes
# a devdax namespace (tests/vm/pmem.sh), rsiw is loaded with commit=1 and
# the patched siw provider runs tests/provider/siw_pmem.c:
#
# - the device reports IB_DEVICE_FLUSH_PERSISTENT and the context got
#   SIW_CTX_EXT_FLUSH_PERSISTENT (siw_ctx);
# - the server registers DRAM with IBV_ACCESS_FLUSH_PERSISTENT: EINVAL, and
#   rsiw logs why; then 4 MiB of its devdax mapping with it: registered;
# - the client, with the responder's counters (ports/1/hw_counters) read
#   before and after each step: a Write and a Flush to persistence of its
#   100 bytes (192 bytes of cache lines written back), a Flush to
#   persistence of the whole region (4 MiB written back, by the connection's
#   work item: deferred), Flushes to persistence of 64 KiB of lines (in the
#   RX path) and of a line more (deferred), a Flush to global visibility
#   only (counted, nothing written back), Writes, a Flush and a Read in one
#   batch, a Write, a deferred Flush, an Atomic Write and a Read in one batch
#   (in order: RX goes on after the work item's write-back); every Flush
#   completes with IBV_WC_FLUSH;
# - the server finds the Writes in its mapping and in a second mapping;
# - rdma statistic shows the totals.
#
# Without the write-back (persist() doing nothing) the counters stay 0 and
# the client fails; without the deferral (every write-back in the RX path)
# flush_deferred stays 0 (or is missing) and the client fails. The deferred
# write-back yields the CPU between its parts (cond_resched()): run in
# atomic context it would be a "sleeping function called from invalid
# context" splat, which fails the case (DEBUG_ATOMIC_SLEEP).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/pmem.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw only (siw has no RDMA Flush)"
[ "$RSIW_PROVIDER" = rsiw ] || die "this case needs the patched provider"

pmem_up
pmem_devdax
pmem_is_persistent "$PMEM_DAX_START" "$PMEM_DAX_SIZE" ||
	die "$PMEM_DAX is not in a Persistent Memory range of /proc/iomem"

run modprobe rsiw commit=1
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0
rsiw_up veth0

ctx=$("$RSIW_PROVIDER_DIR/bin/siw_ctx" "$DEV")
log "context: $ctx"
ext=$(sed -n 's/^ext=\(0x[0-9a-f]*\) .*/\1/p' <<<"$ctx")
cap_ex=$(sed -n 's/.* cap_ex=\(0x[0-9a-f]*\) .*/\1/p' <<<"$ctx")
[ -n "$ext" ] && [ $((ext & (1 << 6))) != 0 ] ||
	die "the context did not get SIW_CTX_EXT_FLUSH_PERSISTENT (ext=$ext)"
[ -n "$cap_ex" ] && [ $((cap_ex & (1 << 39))) != 0 ] ||
	die "the device does not report IB_DEVICE_FLUSH_PERSISTENT (cap_ex=$cap_ex)"

# counters: the four Flush counters of port 1 as rdma statistic shows them.
counters() {
	local stat c v out=
	stat=$(rdma statistic show link "$DEV/1" | tr '\n' ' ')
	log "rdma statistic: $stat" >&2
	for c in flush_executed flush_persistent flush_writeback_bytes flush_deferred; do
		v=$(grep -Eo "(^| )$c[[:space:]]+[0-9]+" <<<"$stat" | awk '{ print $2 }')
		out+="$c=${v:-none} "
	done
	echo "${out% }"
}
before=$(counters)
assert_eq "$before" "flush_executed=0 flush_persistent=0 flush_writeback_bytes=0 flush_deferred=0" \
	"the counters before"

dmesg -C
siw_pmem_run siw_pmem 120 server 10.77.0.1 19600 "$PMEM_DAX" -- client 10.77.0.1 19600 "$DEV"
grep -q "siw_pmem client: all checks passed" "$RSIW_OUT/siw_pmem-client.log" ||
	die "the client did not finish"
grep -q "siw_pmem server: all checks passed" "$RSIW_OUT/siw_pmem-server.log" ||
	die "the server did not finish"
assert_match "$(dmesg)" "IB_ACCESS_FLUSH_PERSISTENT refused: the region is not persistent memory" \
	"the log line of the DRAM refusal"

# 7 Flushes, 6 to persistence: 192 + 4 MiB + 64 KiB + (64 KiB + 64) + 3072
# + 4 MiB bytes of cache lines; 3 deferred (both whole-region Flushes and
# the 64 KiB + 64).
assert_eq "$(counters)" "flush_executed=7 flush_persistent=6 flush_writeback_bytes=8523008 flush_deferred=3" \
	"the counters after"
pass
