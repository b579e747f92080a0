#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw provider=rsiw timeout=600
#
# RFC 7306 atomics and immediate data from user space, rsiw to rsiw, with
# rdma-core's siw provider patched for the extended siw ABI in both VMs
# (Documentation/infiniband/rsiw-abi.rst; rsiw loaded with rfc7306=1):
#
# - tests/provider/siw_ext.c (VM b serves, a is the client): compare and
#   swap (a match and a mismatch) and fetch and add, each returned value
#   checked, then Write with Immediate (16 bytes, and the immediate alone)
#   and Send with Immediate, each receive completion checked (opcode,
#   IBV_WC_WITH_IMM, the immediate in network order, byte_len) and the data
#   and the target word at the end;
# - tests/provider/siw_hostile.c: malformed RFC 7306 SQEs written straight
#   into a connected QP's send ring (a reserved byte, a mask or swap value
#   that does not belong, a wrong result SGE, too many SGEs, too much inline
#   data, a flag, an opcode the context did not get), one per connection:
#   each completes with its exact status (Documentation/infiniband/
#   rsiw-abi.rst, "What the driver checks"), and the console stays clean;
# - the Atomic Responses went from data_ready in softirq (VM b's hardware
#   counter bh_qn3_responses); siw_ext again with b reloaded with
#   bh_respond_qn3=0: they all go from the work item (the counter stays 0),
#   and the results are the same.
#
# perftest's atomic and Write with Immediate tests are in perftest-ext,
# rdma-core's pyverbs tests of them in pyverbs-ext; the stock provider
# against the patched one is in provider-abi.
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw only (siw has no RFC 7306)"
[ "$RSIW_PROVIDER" = rsiw ] || die "this case needs the patched provider"

run modprobe rsiw rfc7306=1
peer_link_up
ip=$(fetch b ip)

ctx=$("$RSIW_PROVIDER_DIR/bin/siw_ctx" "$DEV")
log "context: $ctx"
assert_match "$ctx" '^ext=0x1f ' "the context's extensions"

port=19300
serve_client siw_ext b "$port" \
	"$RSIW_PROVIDER_DIR/bin/siw_ext server $ip $port" \
	"$RSIW_PROVIDER_DIR/bin/siw_ext client $ip $port" 60

port=$((port + 1))
serve_client siw_hostile b "$port" \
	"$RSIW_PROVIDER_DIR/bin/siw_hostile server $ip $port" \
	"$RSIW_PROVIDER_DIR/bin/siw_hostile client $ip $port" 120

# The responder (b) sent the Atomic Responses from data_ready; then without.
if [ "$RSIW_ROLE" = b ]; then
	bh=$(hw_counter bh_qn3_responses)
	log "bh_qn3_responses=$bh bh_read_responses=$(hw_counter bh_read_responses)"
	[ -n "$bh" ] && [ "$bh" -gt 0 ] ||
		die "no Atomic Response was sent from data_ready (bh_qn3_responses=$bh)"
	run rdma link delete "$DEV"
	run modprobe -r rsiw
	run modprobe rsiw rfc7306=1 bh_respond_qn3=0
	rsiw_up eth0
fi
barrier qn3-off
port=$((port + 1))
serve_client siw_ext_tx b "$port" \
	"$RSIW_PROVIDER_DIR/bin/siw_ext server $ip $port" \
	"$RSIW_PROVIDER_DIR/bin/siw_ext client $ip $port" 60
if [ "$RSIW_ROLE" = b ]; then
	assert_eq "$(hw_counter bh_qn3_responses)" 0 "bh_qn3_responses with bh_respond_qn3=0"
fi
barrier done
pass
