#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw provider=rsiw kernel=pmem nvdimm=128M timeout=900 long=1
#
# make bench's figures for the commit extensions on persistent memory (issue
# 37), run by scripts/rsiw/bench.sh (and by make check-long, where it only
# checks that every operation succeeds: it asserts no speed). As commit-pmem:
# an emulated NVDIMM made a devdax namespace, rsiw with commit=1 on a veth
# pair in one VM, tests/provider/siw_pmem.c's bench-server registering 4 MiB
# of the devdax mapping; its bench client measures, $ITERS times each after
# a warm-up, the latency of a 64-byte Write with a Flush to persistence of
# it, with a Flush to global visibility, with a 1-byte Read of it (the
# Read-after-Write idiom a Flush replaces), and of an Atomic Write alone;
# then the Atomic Write rate, 8 posted at once. It prints
# "siw_pmem bench: NAME MEDIAN_US MEAN_US" and "siw_pmem bench:
# atomic_write_rate OPS_PER_S". All of it three times each with
# bh_respond_qn3=1 (the default) and =0, alternating. The pmem kernel is the light debug kernel
# (lockdep, kmemleak) with NVDIMM drivers: compare the figures of one run
# with each other, not with the bench kernel's.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/pmem.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw only (siw has no RDMA Flush)"
[ "$RSIW_PROVIDER" = rsiw ] || die "this case needs the patched provider"
ITERS=1000

pmem_up
pmem_devdax
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0

# In the same boot, ROUNDS times each, alternating (so that the host's
# drift falls on both alike): as loaded by default (bh_respond_qn3=1, QN 3
# responses sent from the receive softirq), logs bench-R-*.log, and with
# bh_respond_qn3=0 (from the connection's work item, after a wake-up, as
# before issue 39's change), logs bench-wq-R-*.log: the A/B of that change.
ROUNDS=3
for r in $(seq "$ROUNDS"); do
	for qn3 in 1 0; do
		tag=bench-$r
		[ "$qn3" = 1 ] || tag=bench-wq-$r
		run modprobe rsiw commit=1 bh_respond_qn3=$qn3
		rsiw_up veth0
		siw_pmem_run "$tag" 600 bench-server 10.77.0.1 19601 "$PMEM_DAX" -- \
			bench 10.77.0.1 19601 "$ITERS"
		grep -q "siw_pmem bench: done" "$RSIW_OUT/$tag-client.log" ||
			die "the bench ($tag) did not finish"
		run rdma link delete "$DEV"
		wait_gone "$DEV"
		run rmmod rsiw
	done
done
pass
