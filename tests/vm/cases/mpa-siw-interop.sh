#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw timeout=900 kernel_b=bench long=part
#
# MPA variants between rsiw (VM a) and the C siw (VM b), with data: rping -V
# (Send, Write and Read, checked byte for byte) at 65535 B, each VM client and
# server where the variant allows it. rsiw is reloaded with module parameters
# for each variant within the one boot; siw's MPA settings are compile-time
# constants (Rev 2, enhanced, CRC only if asked, no peer-to-peer as initiator),
# so they do not vary. VM a captures each MPA exchange and checks the header
# bits on the wire (tests/vm/py/mpa_pcap.py). The default variant is
# rping-interop's; here it only runs ib_read_bw from rsiw to siw.
#
#   rev1      rsiw mpa_version=1: a Rev 1 rsiw client works (ib_write_bw and
#             ib_send_bw). No Reads: under Rev 1 siw reports IRD = ORD = 0 in
#             its CONNECT_REQUEST event, so a siw server whose ULP accepts
#             with rdma_cm's defaults (rping, perftest) has IRD and ORD 0 and
#             terminates the first Read (0/2/07; rsiw↔rsiw Rev 1 Reads are in
#             rsiw-pair);
#             a siw client (Rev 2, enhanced) gets a Rev 1 reply and must refuse
#             it (siw requires an enhanced Rev 2 reply to an enhanced request).
#   crc       rsiw mpa_crc_required=1: CRC on in both directions.
#   strict    rsiw mpa_crc_strict=1: siw never asks for CRC, so no CRC.
#   large     rsiw fpdu_segments=45: rsiw sends FPDUs of up to 64 KiB, which
#             siw must take (the capture must show one larger than a segment).
#   p2p-*     rsiw peer_to_peer=1 with rtr_type 1 (Write), 2 (Read) and 3
#             (both), rsiw the initiator: siw as responder answers with the
#             Write RTR if offered, else the Read RTR, and rsiw's first FPDU
#             is that RTR (the capture shows the Reply's choice).
#
# The long part (make check-long, RSIW_LONG=1) adds strict and p2p-write
# (the Reply's choice of the Write RTR is also p2p-both's).
#
# Not run: rsiw peer_to_peer=1 rtr_type=4 (the Send RTR only) against a siw
# responder. siw answers with the Write RTR it was not offered (it takes no
# Send RTR); rsiw refuses that Reply with TERM 2/0/07 (no matching RTR,
# MPA-19), and siw, whose QP waits for the RTR, reports the Terminate as a
# close of a connection it never reported established: iw_cm's
# cm_close_handler() hits BUG() (iwcm.c:966, state IW_CM_STATE_CONN_RECV),
# an oops of the siw host that any peer can cause (2026-11-28, bench kernel).
# rsiw's side of that refusal is checked between two rsiw VMs (rsiw-pair
# p2p-send-none) and byte for byte in cm-faults.
#
# VM b boots the non-debug bench kernel (kernel_b=bench), for the peer-to-peer
# rounds: as responder, siw's RTR path (siw_rtr_data_ready ->
# siw_qp_socket_assoc) takes sk_callback_lock with write_lock_bh in softirq,
# which lockdep reports as an inconsistent lock state on siw's side, so that a
# debug kernel fails the run on siw's account. siw never initiates
# peer-to-peer mode (its peer_to_peer is a constant false), so rsiw as the
# responder is covered between two rsiw VMs only (rsiw-pair).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/interop.sh

[ "$RSIW_DRIVER" = rsiw ] || [ "$RSIW_PEER_DRIVER" = rsiw ] ||
	skip "needs rsiw on one side (module parameters select the variants)"

pair_up
port=7600
size=65535

# Rev 2 default, Reads from rsiw to siw with perftest's maximum ORD (128):
# rsiw's ORD is bounded by siw's IRD from the Reply.
perf_round v2-a-read b ib_read_bw 65536 30 req:S=1 rep:S=1 rep:R=0

variant rev1 mpa_version=1
perf_round rev1-a-write b ib_write_bw 65536 20 req:rev=1 req:S=0 rep:rev=1 rep:R=0
perf_round rev1-a-send b ib_send_bw 65536 20 req:rev=1 rep:rev=1
refused_round rev1-b-client a rep:rev=1 rep:S=0

variant crc mpa_crc_required=1
rping_round crc-a-client b $size 5 req:C=1 rep:C=1 rep:S=1
rping_round crc-b-client a $size 5 req:C=0 rep:C=1

if [ "${RSIW_LONG:-0}" = 1 ]; then
	variant strict mpa_crc_strict=1
	rping_round strict-b-client a $size 5 req:C=0 rep:C=0
fi

variant large fpdu_segments=45
rping_round large-a-client b $size 5 ini:ulpdu_max\>=4000
rping_round large-b-client a $size 5 resp:ulpdu_max\>=4000

if [ "${RSIW_LONG:-0}" = 1 ]; then
	variant p2p-write peer_to_peer=1 rtr_type=1
	rping_round p2p-write-a-client b $size 5 req:A=1 req:Cw=1 req:D=0 rep:A=1 rep:Cw=1 rep:D=0 ini:first=write/14
fi
variant p2p-read peer_to_peer=1 rtr_type=2
rping_round p2p-read-a-client b $size 5 req:A=1 req:Cw=0 req:D=1 rep:A=1 rep:Cw=0 rep:D=1 ini:first=read_req/46 resp:first=read_resp/14
variant p2p-both peer_to_peer=1 rtr_type=3
rping_round p2p-both-a-client b $size 5 req:A=1 req:Cw=1 req:D=1 rep:A=1 rep:Cw=1 rep:D=0 ini:first=write/14

barrier done
pass
