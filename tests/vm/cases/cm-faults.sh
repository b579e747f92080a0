#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel_b=bench timeout=900 kernel=debug
#
# The connection manager against hostile and silent peers, then rmmod with a
# listener and a connection in its MPA exchange. VM a listens (ucmatose, on
# the wildcard address); VM b is a raw TCP peer (tests/vm/py/mpa_raw.py): a
# wrong key (MPA-01), Markers (D-03), PD_Length 513 (MPA-07) and a peer that
# never sends its Request (the MPA timeout). Then b is a raw peer-to-peer
# initiator (tests/vm/py/mpa_rtr.py) against a pyverbs listener on a: its
# Write RTR is taken, but a Send in place of the RTR gets TERM 2/0/07 (MPA-16,
# MPA-19); a client-server initiator's Send and FIN in one segment right
# behind the Reply are placed in the posted receive before the close, and
# the same right behind its Request (the peer gave up before the ULP
# accepted) make the accept fail with ECONNRESET. Then roles swap: b is a raw MPA
# responder (tests/vm/py/mpa_responder.py) whose Replies a's initiator
# (cm_refused.py) must refuse with a Terminate FPDU before closing: an ORD
# above our IRD (MPA-11, TERM 2/0/06) and A=1 to a client-server Request
# (MPA-19, TERM 2/0/07, with CRC). Then b opens a connection that
# stays in the MPA exchange and a unloads rsiw, which must tear both down
# cleanly (the runner checks the console and kmemleak). Last, a reloads rsiw
# with relaxed_ird_negotiation=0 and its initiator (ORD 1) must refuse a
# Reply with IRD 0 with TERM 2/0/06 (a relaxed one would lower its ORD);
# loaded with established_delay_ms=1000 too, it holds its connect reply, and a
# responder that resets the connection within that second gets the connect
# refused (REJECTED), not ESTABLISHED and DISCONNECTED (the iw_cm takes no
# close event for a connection it has not seen established).
. /rsiw/tests/vm/lib.sh

port=7400
load_driver
peer_link_up

if [ "$RSIW_ROLE" = a ]; then
	stdbuf -oL ucmatose -p $port -c 1 -C 0 >"$RSIW_OUT/ucmatose.log" 2>&1 &
	ucm=$!
	python3 /rsiw/tests/vm/py/mpa_rtr.py server "$RSIW_IP" $((port + 2)) >"$RSIW_OUT/mpa_rtr.log" 2>&1 &
	rtr=$!
	wait_listen $port 30
	wait_listen $((port + 2)) 30
	publish listening 1
	fetch b raw-done 300 >/dev/null
	rc=0
	wait "$rtr" || rc=$?
	cat "$RSIW_OUT/mpa_rtr.log"
	[ "$rc" = 0 ] || die "mpa_rtr server failed"
	fetch b responder 120 >/dev/null
	run python3 /rsiw/tests/vm/py/cm_refused.py "$(fetch b ip)" $((port + 1)) 2 ||
		die "cm_refused failed"
	fetch b pending 60 >/dev/null
	# The peer's connection is in the MPA exchange (unless its 5 s timeout hit first).
	run ss -tn
	[ -d /sys/module/rsiw ] || die "rsiw not loaded"
	run rdma link delete "$DEV"
	run modprobe -r rsiw
	[ ! -d /sys/module/rsiw ] || die "rsiw still loaded"
	publish unloaded 1
	cat "$RSIW_OUT/ucmatose.log"
	grep -q 'CONNECT_REQUEST\|connect request' "$RSIW_OUT/ucmatose.log" &&
		die "a bad request reached the ULP"
	kill "$ucm" 2>/dev/null || true
	wait "$ucm" 2>/dev/null || true
	run modprobe rsiw relaxed_ird_negotiation=0 established_delay_ms=1000
	rsiw_up eth0
	fetch b strict-responder 120 >/dev/null
	run python3 /rsiw/tests/vm/py/cm_refused.py "$(fetch b ip)" $((port + 3)) 1 ||
		die "cm_refused (strict IRD) failed"
	refused=$(dmesg | grep -c 'rsiw: cm: MPA Reply refused' || true)
	run python3 /rsiw/tests/vm/py/cm_refused.py "$(fetch b ip)" $((port + 3)) 1 ||
		die "cm_refused (reset while the connect reply is held) failed"
	# Refused by the reset, not by the MPA exchange: the Reply was taken.
	assert_eq "$(dmesg | grep -c 'rsiw: cm: MPA Reply refused' || true)" "$refused" \
		"MPA Replies refused"
else
	ip=$(fetch a ip)
	fetch a listening 120 >/dev/null
	run python3 /rsiw/tests/vm/py/mpa_raw.py "$ip" $port
	run python3 /rsiw/tests/vm/py/mpa_rtr.py client "$ip" $((port + 2))
	publish raw-done 1
	python3 /rsiw/tests/vm/py/mpa_responder.py $((port + 1)) >"$RSIW_OUT/mpa_responder.log" 2>&1 &
	resp=$!
	wait_listen $((port + 1)) 30
	publish responder 1
	rc=0
	wait "$resp" || rc=$?
	cat "$RSIW_OUT/mpa_responder.log"
	[ "$rc" = 0 ] || die "mpa_responder failed"
	# A connection that stays in the MPA exchange while rsiw is unloaded.
	exec 3<>"/dev/tcp/$ip/$port"
	printf 'MPA ID Req' >&3
	publish pending 1
	fetch a unloaded 120 >/dev/null
	exec 3<&-
	python3 /rsiw/tests/vm/py/mpa_responder.py $((port + 3)) strict >"$RSIW_OUT/mpa_strict.log" 2>&1 &
	resp=$!
	wait_listen $((port + 3)) 30
	publish strict-responder 1
	rc=0
	wait "$resp" || rc=$?
	cat "$RSIW_OUT/mpa_strict.log"
	[ "$rc" = 0 ] || die "mpa_responder (strict) failed"
fi
barrier done
pass
