#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=600
#
# The RX engine's whole path (a small FPDU that arrives in one piece is taken
# in one step: RxParser::feed_whole, the whole Write and whole Send) against
# its general path (event by event): a raw TCP peer on b sends the FPDUs of
# each scenario once whole and once cut into three segments 100 ms apart, to
# an rdma_cm server on a (tests/vm/py/rx_paths.py). Both must give the same
# receive completions, buffer contents and Terminate: Sends of 0, 5 and 8
# bytes, with Solicited Event, two in a row, too long for the receive
# (TERM 1/2/05), with a wrong MSN (1/2/03), without a receive (1/2/02), with
# a bad Invalidate STag (0/2/09); Writes that land, to a wrong STag (1/1/00),
# past the buffer (1/1/01) and to a read-only buffer (1/1/00); Writes and
# Sends mixed.
. /rsiw/tests/vm/lib.sh

port=7600
load_driver
peer_link_up

if [ "$RSIW_ROLE" = a ]; then
	python3 /rsiw/tests/vm/py/rx_paths.py server "$RSIW_IP" $port >"$RSIW_OUT/rx_paths.log" 2>&1 &
	srv=$!
	wait_listen $port 30
	publish listening 1
	rc=0
	wait "$srv" || rc=$?
	cat "$RSIW_OUT/rx_paths.log"
	[ "$rc" = 0 ] || die "rx_paths server failed"
else
	ip=$(fetch a ip)
	fetch a listening 120 >/dev/null
	run python3 /rsiw/tests/vm/py/rx_paths.py client "$ip" $port || die "rx_paths client failed"
fi
barrier done
pass
