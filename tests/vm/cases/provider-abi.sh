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
#   operations a QP may ask for. This driver does not negotiate the
#   extensions yet: it refuses request data in alloc_ucontext, and the
#   provider falls back to a legacy context;
# - the two providers talk: rping's Send/Read/Write echo with every byte
#   checked (tests/vm/py/ping_data.py) and perftest, each VM the server once.
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

load_driver
rsiw_up eth0
publish ip "$RSIW_IP"
barrier up
wait_peer 30

if [ "$RSIW_ROLE" = a ]; then
	ctx=$("$RSIW_PROVIDER_DIR/bin/siw_ctx" "$DEV")
	log "context: $ctx"
	# A legacy context: Write, Send, Read and Send with Invalidate only.
	assert_eq "$ctx" "ext=0x0 digest=0 atomic_cap=0 cap_ex=0x0 send_ops=0x215 dv_ops=0x0 refused=0x0" \
		"the context of the patched provider"
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
barrier done
pass
