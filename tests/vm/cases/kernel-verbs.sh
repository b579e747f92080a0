#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw timeout=1200
#
# The kernel-consumer verbs test: load tests/kmod/rsiw_kverbs.ko, which uses
# the device through ib_core exactly like a ULP. It creates and destroys every
# object type 10,000 times (PD with its DMA MR, CQ, RC QP, SRQ, fast-reg MR),
# tries each invalid argument (oversized CQ, QP and SRQ caps above
# the limits, UD QP, too many SGEs, unknown opcode, bad and wrong-PD lkeys,
# max_num_sg above the limit) and checks each errno and bad_wr, checks that
# work requests posted in ERROR complete with IB_WC_WR_FLUSH_ERR in order,
# that ib_drain_qp() returns with each CQ poll context, and that a CQ
# overflow raises IB_EVENT_CQ_ERR. The module prints one line per check and
# a summary, and fails to load if a check failed; the runner's kmemleak scan
# at the end must stay clean. The SRQ gets the same receive checks as a QP.
# The post_send argument checks (too many SGEs, unknown opcode, inline data
# too long, bad and wrong-PD lkeys) run on a connected QP: the module
# connects two of its QPs over rdma_cm on veth0's address (addr=), then
# checks that a connected QP in ERROR flushes, that a graceful close in ERROR
# is a no-op (librdmacm's rdma_disconnect() after the peer closed) and that
# the server sees the disconnect.
# Then a user CQ resize must fail with EOPNOTSUPP (tests/vm/py/cq_resize.py).
#
# The module is built and installed with the kernel by scripts/rsiw/kernel.sh.
# KVERBS_CYCLES overrides the 10,000 cycles (one-off runs with vm.py).
. /rsiw/tests/vm/lib.sh

cycles=${KVERBS_CYCLES:-10000}
load_driver
veth_pair veth0 veth1
run ip addr add 10.77.0.1/24 dev veth0
rsiw_up veth0
modinfo rsiw_kverbs >/dev/null 2>&1 ||
	die "rsiw_kverbs.ko is not installed (scripts/rsiw/kernel.sh build builds tests/kmod)"

# rsiw checks lkeys at post time (strict_lkey=1: a bad lkey accepted is a
# failure). The C siw (tests/vm/run --driver siw, to check this test) checks
# them only when it processes the WR, and answers ENOMEM (12) instead of
# EINVAL for ib_alloc_mr above max_fast_reg_page_list_len.
args=(mr_limit_errno=22 strict_lkey=1 inline_fault=1)
[ "$RSIW_DRIVER" = siw ] && args=(mr_limit_errno=12 strict_lkey=0)
rc=0
run modprobe rsiw_kverbs dev="$DEV" cycles="$cycles" addr=10.77.0.1 "${args[@]}" || rc=$?
out=$(dmesg | grep 'rsiw_kverbs: ' || true)
printf '%s\n' "$out" >"$RSIW_OUT/kverbs.log"
summary=$(grep 'rsiw_kverbs: summary:' <<<"$out" | tail -1)
[ -n "$summary" ] || die "rsiw_kverbs printed no summary (modprobe exit $rc)"
log "$summary"
grep -E 'rsiw_kverbs: (FAIL|SKIP) ' <<<"$out" || true
assert_match "$summary" "summary: [1-9][0-9]* passed, 0 failed" "rsiw_kverbs summary"
[ "$rc" = 0 ] || die "modprobe rsiw_kverbs failed ($rc) with a clean summary"
# Each object type ran the full count.
for c in cycle_pd cycle_dma_mr cycle_cq cycle_qp cycle_srq cycle_fastreg_mr; do
	assert_match "$out" "PASS $c: $cycles x " "$c"
done
# The connected-QP checks ran (they are skipped without a connection).
for c in connect post_send_too_many_sge post_send_unknown_opcode_rts \
	post_send_inline_too_long post_send_flush_rts close_in_error close_in_error_rts \
	disconnect_peer_closed post_srq_recv_too_many_sge; do
	assert_match "$out" "PASS $c: " "$c"
done
# rsiw checks lkeys at post time: these pass on rsiw (skip on siw).
if [ "$RSIW_DRIVER" != siw ]; then
	for c in post_send_bad_lkey post_send_wrong_pd_lkey post_send_before_bad_wr \
		post_srq_recv_bad_lkey post_srq_recv_wrong_pd_lkey post_send_inline_bad_addr; do
		assert_match "$out" "PASS $c: " "$c"
	done
fi
run rmmod rsiw_kverbs

# CQ resize: Linux 7.3 has no kernel resize verb, and user CQs cannot be
# resized (libsiw has no resize_cq; rsiw leaves resize_user_cq unset), so
# both the library and the raw uverbs command must answer EOPNOTSUPP.
run python3 /rsiw/tests/vm/py/cq_resize.py "$DEV"
pass
