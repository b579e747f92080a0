#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=1200 long=part
#
# Two rsiw VMs: the rsiw-with-rsiw pairing of the interop matrix, with data
# (rping -V checks every byte; it moves Send, Write and Read; perftest checks
# completions). rsiw is reloaded with module parameters for each variant
# within the one boot (one direction per variant where both sides run the
# same code, to keep the case short); VM a captures each MPA exchange and checks the header
# bits on the wire (tests/vm/py/mpa_pcap.py).
#
#   default   rping -V at 65535 B (rping's largest), ucmatose (4
#             connections, 20 Sends each), ib_write_bw at 1 MiB, ib_read_bw at
#             64 KiB.
#   rev1      both mpa_version=1: Rev 1, no enhanced data, Reads both ways.
#   rev-mixed a mpa_version=1, b Rev 2: a's Rev 1 request gets a Rev 1 reply;
#             b's enhanced Rev 2 request gets a Rev 1 reply, which rsiw (unlike
#             siw) accepts with the ULP's IRD/ORD.
#   crc       both mpa_crc_required=1: CRC in both directions.
#   large-crc both fpdu_segments=45 and CRC: FPDUs of up to 64 KiB, each VM
#             client once; the capture must show an FPDU larger than one
#             segment (the default variant's are at most one, MPA-26).
#   crc-clash a mpa_crc_required=1, b mpa_crc_strict=1: refused both ways
#             (b rejects a's CRC request with R=1; b refuses a's CRC reply).
#   p2p-write both peer_to_peer=1 rtr_type=1: zero-length Write RTR.
#   p2p-read  both peer_to_peer=1 rtr_type=2: zero-length Read RTR.
#   p2p-none  a offers only Write RTR, b accepts only Read RTR: the initiator
#             finds no common RTR and refuses the connection.
#   p2p-send  both peer_to_peer=1 rtr_type=4: zero-length Send RTR (the only
#             kind offered), each side initiating once. The responder absorbs
#             it without a receive or CQE and expects MSN 2 next: rping -V
#             fails on a stray receive completion, a consumed receive or an
#             MSN mismatch (MPA-17, T-13).
#   p2p-send-none a offers only the Send RTR, b accepts Write and Read: the
#             initiator finds no common RTR, sends TERM 2/0/07 and refuses.
#   zerocopy  both zerocopy_min=4096: batches of user memory go to TCP by
#             reference and complete when TCP released them (ZC-01): rping
#             -V at 65535 B each VM client once, ib_write_bw at 1 MiB and
#             ib_read_bw at 64 KiB (Read Responses by reference); each
#             VM's tx_zc_batches must grow.
#
# make check runs default, rev-mixed, large-crc, crc-clash, p2p-read,
# p2p-send and zerocopy; the long part (make check-long, RSIW_LONG=1) adds rev1, crc,
# p2p-write, p2p-none and p2p-send-none (their paths are also taken by the
# mixed variants, by cm-connect and by mpa-siw-interop).
#
# In the peer-to-peer variants the capture also checks the initiator's first
# FPDU: the RTR the Reply chose (write/14, read_req/46 answered by
# read_resp/14, send/18), or the Terminate (term/22) of a refusal.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/interop.sh

[ "$RSIW_DRIVER" = rsiw ] || skip "rsiw with rsiw only"

pair_up
port=7700
big=65535

# Default (Rev 2, no CRC, client-server).
rping_round def-big b $big 10 req:rev=2 req:S=1 rep:S=1 rep:C=0 ini:ulpdu_max\<=1442
port=$((port + 1))
serve_client def-ucmatose b "$port" "ucmatose -p $port -c 4 -C 20" \
	"ucmatose -p $port -c 4 -C 20 -s $(fetch b ip)" 180
perf_round def-write a ib_write_bw 1048576 5
perf_round def-read b ib_read_bw 65536 50

if [ "${RSIW_LONG:-0}" = 1 ]; then
	variant rev1 mpa_version=1
	rping_round rev1-a-client b $big 5 req:rev=1 req:S=0 rep:rev=1 rep:S=0
fi

variant2 rev-mixed "mpa_version=1" ""
rping_round mixed-a-client b $big 5 req:rev=1 rep:rev=1
rping_round mixed-b-client a $big 5 req:rev=2 req:S=1 rep:rev=1 rep:S=0

if [ "${RSIW_LONG:-0}" = 1 ]; then
	variant crc mpa_crc_required=1
	rping_round crc-a-client b $big 5 req:C=1 rep:C=1
fi

variant large-crc mpa_crc_required=1 fpdu_segments=45
rping_round large-a-client b $big 5 req:C=1 rep:C=1 ini:ulpdu_max\>=4000
rping_round large-b-client a $big 5 req:C=1 rep:C=1 resp:ulpdu_max\>=4000

variant2 crc-clash "mpa_crc_required=1" "mpa_crc_strict=1"
refused_round clash-a-client b req:C=1 rep:R=1
refused_round clash-b-client a req:C=0 rep:C=1

if [ "${RSIW_LONG:-0}" = 1 ]; then
	variant p2p-write peer_to_peer=1 rtr_type=1
	rping_round p2p-write-a-client b $big 5 req:A=1 req:Cw=1 req:D=0 rep:A=1 rep:Cw=1 ini:first=write/14
fi

variant p2p-read peer_to_peer=1 rtr_type=2
rping_round p2p-read-a-client b $big 5 req:A=1 req:D=1 req:Cw=0 rep:A=1 rep:D=1 ini:first=read_req/46 resp:first=read_resp/14

if [ "${RSIW_LONG:-0}" = 1 ]; then
	variant2 p2p-none "peer_to_peer=1 rtr_type=1" "rtr_type=2"
	refused_round p2p-none-a-client b req:A=1 req:Cw=1 rep:Cw=0 rep:D=1 ini:first=term/22
fi

variant p2p-send peer_to_peer=1 rtr_type=4
rping_round p2p-send-a-client b $big 5 req:A=1 req:B=1 req:Cw=0 req:D=0 rep:A=1 rep:B=1 ini:first=send/18
rping_round p2p-send-b-client a $big 5 req:A=1 req:B=1 req:Cw=0 req:D=0 rep:A=1 rep:B=1 ini:first=send/18

if [ "${RSIW_LONG:-0}" = 1 ]; then
	variant2 p2p-send-none "peer_to_peer=1 rtr_type=4" "rtr_type=3"
	refused_round p2p-send-none-a-client b req:A=1 req:B=1 req:Cw=0 rep:B=0 rep:Cw=1 ini:first=term/22
fi

variant zerocopy zerocopy_min=4096
zc0=$(hw_counter tx_zc_batches)
rping_round zc-a-client b $big 5
rping_round zc-b-client a $big 5
perf_round zc-write a ib_write_bw 1048576 5
perf_round zc-read b ib_read_bw 65536 50
zc1=$(hw_counter tx_zc_batches)
log "tx_zc_batches $zc0 -> $zc1, tx_zc_copied $(hw_counter tx_zc_copied)"
[ "$zc1" -gt "$zc0" ] || die "zerocopy: no batch went by reference"

barrier done
pass
