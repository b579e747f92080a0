#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel_b=bench provider_a=rsiw timeout=900 kernel=debug
#
# RFC 7306 at rsiw's responder against a raw TCP peer, on the KASAN kernel:
# VM a loads rsiw with rfc7306=1 and runs an rdma_cm server with a page of
# remote atomic access and one without; VM b is a raw MPA peer
# (tests/vm/py/ext_faults.py). A FetchAdd gets its Atomic Response byte for
# byte and the word adds up (which needs iw_cm's remote atomic access, the
# patch in patches/); Immediate Data completes a receive, with the immediate
# (the server uses the patched provider, whose context takes Immediate Data:
# a QP of a legacy context refuses it, see provider-abi). Then each error
# gets its Terminate triple, the server's QP goes to ERROR, its receive is
# flushed and memory is untouched: an atomic to a wrong STag (0/1/00),
# without the right (0/1/02), past the region (0/1/01), misaligned (0/2/07),
# with a reserved AOpCode (0/2/06); Immediate Data of 9 and 7 bytes (0/2/07);
# a Read Request and Atomic Requests beyond the IRD they share (0/2/07); an
# Atomic Response with nothing outstanding (0/2/06). Last, a reloads rsiw
# with rfc7306=0: an Atomic Request and Immediate Data get 0/2/06. The
# console must stay clean.
. /rsiw/tests/vm/lib.sh

port=7700
[ "$RSIW_ROLE" = b ] || [ "$RSIW_DRIVER" = rsiw ] || skip "RFC 7306 is rsiw's"
if [ "$RSIW_ROLE" = a ]; then
	run modprobe rsiw rfc7306=1
else
	load_driver
fi
peer_link_up

# serve PORT [off]: the server on a, the raw peer on b.
serve() {
	if [ "$RSIW_ROLE" = a ]; then
		python3 /rsiw/tests/vm/py/ext_faults.py server "$RSIW_IP" "$@" \
			>"$RSIW_OUT/ext_faults-$1.log" 2>&1 &
		local srv=$! rc=0
		wait_listen "$1" 30
		publish "listening-$1" 1
		wait "$srv" || rc=$?
		cat "$RSIW_OUT/ext_faults-$1.log"
		[ "$rc" = 0 ] || die "ext_faults server failed"
	else
		fetch a "listening-$1" 300 >/dev/null
		run python3 /rsiw/tests/vm/py/ext_faults.py client "$(fetch a ip)" "$@" ||
			die "ext_faults client failed"
	fi
}

serve $port
barrier on-done
if [ "$RSIW_ROLE" = a ]; then
	run rdma link delete "$DEV"
	run modprobe -r rsiw
	run modprobe rsiw rfc7306=0
	rsiw_up eth0
fi
serve $((port + 1)) off
barrier done
pass
