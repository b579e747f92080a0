#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=600 kernel=debug smp=2
#
# A QP destroyed between the iw_cm's iw_get_qp and iw_add_ref (issue 38,
# item 3). rsiw must hand the lookup's reference over to the iw_cm, so that
# ib_destroy_qp waits for iw_rem_ref; otherwise a destroy on another CPU
# frees the QP inside that window. The window is too narrow to hit through
# rdma_connect (a spinlock with interrupts off), so tests/kmod/rsiw_qprace.ko
# plays the iw_cm's part with the window held open for delay_ms and fails to
# load if the destroy returned inside it. On this KASAN kernel a use after
# free anywhere in the sequence also fails the run.
. /rsiw/tests/vm/lib.sh

load_driver
veth_pair veth0 veth1
rsiw_up veth0
modinfo rsiw_qprace >/dev/null 2>&1 ||
	die "rsiw_qprace.ko is not installed (scripts/rsiw/kernel.sh build builds tests/kmod)"
rc=0
run modprobe rsiw_qprace netdev=veth0 delay_ms=2000 || rc=$?
out=$(dmesg | grep 'rsiw_qprace: ' || true)
printf '%s\n' "$out"
grep -q 'rsiw_qprace: PASS race: ' <<<"$out" || die "rsiw_qprace did not pass (modprobe exit $rc)"
[ "$rc" = 0 ] || die "modprobe rsiw_qprace failed ($rc)"
run rmmod rsiw_qprace
pass
