#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw provider_a=rsiw timeout=600
#
# The extended siw ABI from user space (Documentation/infiniband/rsiw-abi.rst)
# with rdma-core's siw provider patched for it (patches/rdma-core) in VM a,
# and Debian's stock provider in VM b:
#
# - VM a runs the provider's unit test (tests/provider/siw_unit.c): the bytes
#   of every SQE it writes for legacy and extended contexts, through
#   ibv_post_send, ibv_wr_* and siwdv, and how it reads CQEs, no device
#   involved;
# - what a context of an rsiw device got, as the patched provider reports it
#   (tests/provider/siw_ctx.c): the SIW_CTX_EXT_* bits, atomic_cap and the
#   FLUSH/ATOMIC_WRITE capability bits, the IBV_QP_EX_WITH_* bits and siwdv
#   operations a QP may ask for. rsiw is loaded with rfc7306=1 in both VMs:
#   the patched provider gets extended CQEs, atomics, masked atomics and
#   both immediate-data operations (ext=0x1f), the stock one a legacy
#   context (it asks for nothing);
# - the two providers talk: rping's Send/Read/Write echo with every byte
#   checked (tests/vm/py/ping_data.py) and perftest, each VM the server once;
#   then the patched provider's atomics (ib_atomic_bw/lat -R, both
#   operations) aimed at the memory of the stock provider's process in VM b,
#   a legacy context that is the target of atomics
#   (Documentation/infiniband/rsiw-abi.rst, "Legacy contexts"), and the
#   stock provider as the client of tests/provider/siw_ext.c (its legacy
#   mode: a plain Send) against the patched provider's server, and as its
#   server for the patched provider's Write with Immediate, which a legacy
#   context's QP refuses;
# - last, VM a reloads rsiw with rfc7306=0: the patched provider still gets
#   an extended context, with extended CQEs only (ext=0x1) and no atomics.
# - C siw (on lo, in both VMs) still works with each provider: the stock one
#   opens it (C siw refuses a reply buffer smaller than struct
#   siw_uresp_alloc_ctx, so that struct must keep its 8 bytes), and the
#   patched one gets a legacy context from it (before rsiw is loaded).
. /rsiw/tests/vm/lib.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw only (siw has no extended ABI)"

if [ "$RSIW_ROLE" = a ]; then
	[ "$RSIW_PROVIDER" = rsiw ] || die "VM a should have the patched provider"
	"$RSIW_PROVIDER_DIR/bin/siw_unit" >"$RSIW_OUT/siw_unit.log" 2>&1 ||
		{ cat "$RSIW_OUT/siw_unit.log"; die "the provider's unit test failed"; }
	tail -n 1 "$RSIW_OUT/siw_unit.log"
else
	[ "$RSIW_PROVIDER" = stock ] && [ ! -L /usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so ] ||
		die "VM b should have the stock provider"
fi

# C siw, which knows no extension, with this VM's provider.
run modprobe siw
run rdma link add siwlo type siw netdev lo
wait_for 10 state_is siwlo ACTIVE || die "siwlo did not become ACTIVE"
if [ "$RSIW_ROLE" = a ]; then
	ctx=$("$RSIW_PROVIDER_DIR/bin/siw_ctx" siwlo) || die "the patched provider cannot open C siw"
	log "C siw context: $ctx"
	assert_match "$ctx" '^ext=0x0 digest=0 atomic_cap=0 cap_ex=0x0 ' "the patched provider on C siw"
else
	ibv_devinfo -d siwlo >"$RSIW_OUT/devinfo-siwlo.log" 2>&1 ||
		{ cat "$RSIW_OUT/devinfo-siwlo.log"; die "the stock provider cannot open C siw"; }
fi
run rdma link delete siwlo
# Before rsiw is loaded: unloading siw removes every RDMA_DRIVER_SIW device.
run rmmod siw

run modprobe rsiw rfc7306=1
peer_link_up

if [ "$RSIW_ROLE" = a ]; then
	ctx=$("$RSIW_PROVIDER_DIR/bin/siw_ctx" "$DEV")
	log "context: $ctx"
	# Extended CQEs, atomics, masked atomics, Write and Send with
	# Immediate (no commit extension): ibv_query_device() shows
	# IBV_ATOMIC_GLOB (2); IBV_QP_EX_WITH_* Write, Write with Immediate,
	# Send, Send with Immediate, Read, both atomics and Send with
	# Invalidate (0x27f); siwdv's masked atomics (0x2), not Verify.
	assert_eq "$ctx" "ext=0x1f digest=0 atomic_cap=2 cap_ex=0x0 send_ops=0x27f dv_ops=0x2 refused=0x0" \
		"the context of the patched provider"
else
	# The stock provider sends no request: a legacy context. It shows the
	# device's attributes (the same for every context).
	ibv_devinfo -v -d "$DEV" >"$RSIW_OUT/devinfo-$DEV.log" 2>&1 ||
		{ cat "$RSIW_OUT/devinfo-$DEV.log"; die "the stock provider cannot open $DEV"; }
	grep -q "atomic_cap:.*ATOMIC_GLOB" "$RSIW_OUT/devinfo-$DEV.log" ||
		die "the stock provider does not show atomic_cap GLOB"
fi

port=18900
for srv in a b; do
	ip=$(fetch "$srv" ip)
	port=$((port + 1))
	serve_client "ping_data-$srv" "$srv" "$port" \
		"python3 /rsiw/tests/vm/py/ping_data.py server $ip $port" \
		"python3 /rsiw/tests/vm/py/ping_data.py client $ip $port" 120
	for tool in ib_send_bw ib_write_bw ib_read_lat; do
		port=$((port + 1))
		opts="-R -d $DEV -p $port -F -n 5 -s 4096"
		serve_client "$tool-$srv" "$srv" "$port" "$tool $opts" "$tool $opts $ip" 120
	done
done
# The stock provider's process (VM b, a legacy context) as the client of
# tests/provider/siw_ext.c, served by the patched provider in VM a: a plain
# Send, and the server's memory untouched.
port=$((port + 1))
ip=$(fetch a ip)
serve_client siw_ext-legacy a "$port" \
	"$RSIW_PROVIDER_DIR/bin/siw_ext server $ip $port" \
	"$RSIW_PROVIDER_DIR/bin/siw_ext client $ip $port legacy" 60

# A QP of the legacy context takes no Immediate Data (its CQ could not show
# it): the patched provider's Write with Immediate (VM a) ends the
# connection, as if RFC 7306 were off (Terminate 0/2/06); the stock
# provider's receive is flushed and a Read behind the Write fails.
port=$((port + 1))
ip=$(fetch b ip)
serve_client siw_ext-imm-to-legacy b "$port" \
	"$RSIW_PROVIDER_DIR/bin/siw_ext server $ip $port legacy-target" \
	"$RSIW_PROVIDER_DIR/bin/siw_ext client $ip $port imm-to-legacy" 60

# The patched provider's atomics (VM a, the perftest client) on the memory
# of the stock provider's process (VM b serves): a legacy context is the
# target of atomics. perftest fails on any completion in error.
ip=$(fetch b ip)
for tool in ib_atomic_bw ib_atomic_lat; do
	for a in CMP_AND_SWAP FETCH_AND_ADD; do
		port=$((port + 1))
		opts="-R -d $DEV -p $port -F -n 20 -A $a"
		serve_client "$tool-$a-b" b "$port" "$tool $opts" "$tool $opts $ip" 120
	done
done
barrier done

if [ "$RSIW_ROLE" = a ]; then
	# RFC 7306 off: still an extended context (the driver knows the
	# extensions), with only the extended CQEs; the legacy operations.
	run rdma link delete "$DEV"
	run rmmod rsiw
	run modprobe rsiw rfc7306=0
	rsiw_up eth0
	ctx=$("$RSIW_PROVIDER_DIR/bin/siw_ctx" "$DEV")
	log "context with rfc7306=0: $ctx"
	assert_eq "$ctx" "ext=0x1 digest=0 atomic_cap=0 cap_ex=0x0 send_ops=0x215 dv_ops=0x0 refused=0x0" \
		"the context of the patched provider with rfc7306=0"
fi
pass
