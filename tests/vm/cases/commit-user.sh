#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw provider=rsiw timeout=900
#
# The RDMA commit extensions (draft-talpey-rdma-commit-02) from user space,
# rsiw to rsiw, rsiw loaded with rfc7306=1 commit=1 in both VMs and
# rdma-core's siw provider patched for the extended siw ABI
# (Documentation/infiniband/rsiw-abi.rst):
#
# - the patched provider's context gets Flush (global and to persistence),
#   Atomic Write and Verify (ext=0x1ff, verify_digest_len 4), and the
#   device shows IB_DEVICE_FLUSH_GLOBAL, _FLUSH_PERSISTENT and _ATOMIC_WRITE
#   (tests/provider/siw_ctx.c), ibv_create_qp_ex() takes
#   IBV_QP_EX_WITH_FLUSH and _ATOMIC_WRITE, siwdv_create_qp() Verify;
# - tests/provider/siw_commit.c (VM b serves, a is the client): Write then
#   ibv_wr_flush() (IBV_WC_FLUSH), a whole-region Flush, ibv_wr_atomic_write()
#   with the target's 8 bytes read back, siwdv_wr_verify() without a digest
#   and with the matching one (SIWDV_WC_VERIFY, the CRC32c in the sink), the
#   atomics, six commit requests and a Read with ORD 2 in order (CMT-02),
#   twelve Reads, atomics, Flushes, Atomic Writes and a Verify on one word
#   with ORD 2 against the server's IRD 2, in order and each result the
#   word as the requests before it left it (CMT-02: they share the credits;
#   one request beyond the server's IRD would get its Terminate);
#   the refusals: a misaligned Atomic Write (EINVAL when posted), a wrong
#   digest (IBV_WC_REM_OP_ERR, the Atomic Write behind it flushed and not
#   performed), a Flush without the Flush right (IBV_WC_REM_ACCESS_ERR), a
#   Flush to persistence of DRAM (IBV_WC_REM_ACCESS_ERR: the responder's
#   region is not persistent memory), and malformed Atomic Write
#   and Verify SQEs written into the ring (IBV_WC_LOC_QP_OP_ERR); the server
#   checks the words of its page;
# - the same again with the server in VM b on Debian's stock provider: a
#   legacy context (no extension asked for) is the target of Flush, Atomic
#   Write, Verify and the atomics, and they work (issue 36).
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw only (siw has no commit extensions)"
[ "$RSIW_PROVIDER" = rsiw ] || die "this case needs the patched provider"

run modprobe rsiw rfc7306=1 commit=1
peer_link_up
ip=$(fetch b ip)

ctx=$("$RSIW_PROVIDER_DIR/bin/siw_ctx" "$DEV")
log "context: $ctx"
# CQE, the RFC 7306 bits, FLUSH_GLOBAL (5), FLUSH_PERSISTENT (6),
# ATOMIC_WRITE (7), VERIFY (8); IB_DEVICE_FLUSH_GLOBAL (38),
# IB_DEVICE_FLUSH_PERSISTENT (39) and IB_DEVICE_ATOMIC_WRITE (40).
assert_match "$ctx" '^ext=0x1ff digest=4 atomic_cap=2 cap_ex=0x1c000000000 ' "the context's extensions"
send_ops=$(sed -n 's/.* send_ops=\(0x[0-9a-f]*\) .*/\1/p' <<<"$ctx")
dv_ops=$(sed -n 's/.* dv_ops=\(0x[0-9a-f]*\) .*/\1/p' <<<"$ctx")
# IBV_QP_EX_WITH_FLUSH (1 << 11), IBV_QP_EX_WITH_ATOMIC_WRITE (1 << 12),
# SIWDV_QP_EX_WITH_VERIFY (1 << 0).
[ -n "$send_ops" ] && [ $((send_ops & 0x1800)) = $((0x1800)) ] ||
	die "ibv_create_qp_ex() refuses Flush or Atomic Write (send_ops=$send_ops)"
[ -n "$dv_ops" ] && [ $((dv_ops & 1)) = 1 ] ||
	die "siwdv_create_qp() refuses Verify (dv_ops=$dv_ops)"
assert_match "$ctx" ' refused=0x0$' "no operation refused with another errno"

checks="FLUSH-03 FLUSH-02 AWRITE-03 AWRITE-02 VERIFY-05 VERIFY-06 ATOM-01 CMT-02
	VERIFY-04 FLUSH-04 AWRITE-01 VERIFY-01"

# commit_run TAG PORT: siw_commit, served by VM b, every check passed.
commit_run() {
	local tag=$1 port=$2 c w=
	if [ "$RSIW_ROLE" = b ]; then
		# Where a stuck server waits, for the log.
		(sleep 100; for p in $(pgrep -f siw_commit_server); do
			echo "siw_commit_server $p still running: wchan $(cat /proc/$p/wchan 2>/dev/null)"
			cat /proc/$p/stack 2>/dev/null
		done) &
		w=$!
	fi
	serve_client "$tag" b "$port" \
		"$RSIW_PROVIDER_DIR/bin/siw_commit_server $ip $port" \
		"$RSIW_PROVIDER_DIR/bin/siw_commit client $ip $port" 240
	[ -z "$w" ] || kill "$w" 2>/dev/null || true
	if [ "$RSIW_ROLE" = a ]; then
		for c in $checks; do
			grep -q "PASS $c: " "$RSIW_OUT/$tag.log" || die "$tag: no PASS for $c"
		done
		grep -q "all checks passed" "$RSIW_OUT/$tag.log" || die "$tag: the client did not finish"
	else
		grep -q "siw_commit server: 8 connections, all checks passed" "$RSIW_OUT/$tag.log" ||
			die "$tag: the server did not see its 8 connections"
	fi
}

commit_run commit-ext 19500

# The target a legacy context: VM b serves with the stock provider.
if [ "$RSIW_ROLE" = b ]; then
	use_provider stock
	[ ! -L /usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so ] ||
		die "VM b still has the patched provider"
fi
barrier legacy
commit_run commit-legacy 19501
barrier done
pass
