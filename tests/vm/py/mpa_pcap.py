#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Prints the MPA Request and Reply headers found in a pcap (tcpdump -w), one
# line each, in capture order:
#
#   req rev=2 flags=MCRS=0010 ird=0x8010 ord=0x4001
#
# flags are the M, C, R and S bits as 0/1; ird/ord are the raw enhanced-data
# words (with the A/B and C/D bits) when S=1, else "-". Usage:
# mpa_pcap.py FILE [EXPECT...], where each EXPECT is KIND:FIELD=VALUE (e.g.
# rep:rev=1, req:C=1, req:A=1, rep:R=0); all must hold for the first frame of
# that kind. Exits 1 with a message if one does not, or no frame was found.
#
# It also follows each direction's FPDUs after the MPA frames while their
# headers are in the capture (tcpdump -s 200 keeps the start of every
# segment; an FPDU that starts deeper inside a segment ends the walk) and
# prints the largest ULPDU_Length seen from the initiator ("ini", the sender
# of the Request) and the responder ("resp"):
#
#   ini fpdus=12 ulpdu_max=1440 first=write/14
#
# first is the RDMAP opcode and ULPDU_Length of the first FPDU in that
# direction (write, read_req, read_resp, send, send_inv, send_se,
# send_se_inv, term; "-" if not captured): a peer-to-peer initiator's RTR
# is write/14 (zero-length Write), read_req/46 or send/18.
#
# EXPECT may compare those with = or >=, e.g. ini:ulpdu_max>=4000 (FPDUs
# larger than one segment) or resp:ulpdu_max<=1460 (one FPDU per segment).

import bisect
import re
import struct
import sys

KEYS = {b'MPA ID Req Frame': 'req', b'MPA ID Rep Frame': 'rep'}


def segments(path):
    """(src, dst, seq, captured payload, payload length) of every TCP segment."""
    with open(path, 'rb') as f:
        data = f.read()
    magic = struct.unpack('<I', data[:4])[0]
    endian = '<' if magic in (0xa1b2c3d4, 0xa1b23c4d) else '>'
    linktype = struct.unpack(endian + 'I', data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        _, _, incl, orig = struct.unpack(endian + 'IIII', data[off:off + 16])
        pkt = data[off + 16:off + 16 + incl]
        off += 16 + incl
        lhdr = {1: 14, 113: 16}.get(linktype, 0)
        pkt = pkt[lhdr:]
        if not pkt:
            continue
        if pkt[0] >> 4 == 4:
            ihl = (pkt[0] & 15) * 4
            proto, l4, iplen = pkt[9], pkt[ihl:], orig - lhdr - ihl
            src, dst = pkt[12:16], pkt[16:20]
        elif pkt[0] >> 4 == 6:
            proto, l4, iplen = pkt[6], pkt[40:], orig - lhdr - 40
            src, dst = pkt[8:24], pkt[24:40]
        else:
            continue
        if proto != 6 or len(l4) < 20:
            continue
        thl = (l4[12] >> 4) * 4
        sport, dport, seq = struct.unpack('>HHI', l4[:8])
        yield (src, sport), (dst, dport), seq, l4[thl:], iplen - thl


OPCODES = ('write', 'read_req', 'read_resp', 'send', 'send_inv', 'send_se',
           'send_se_inv', 'term')


def fpdu_walk(segs, start, seq0):
    """(ULPDU_Length, RDMAP opcode or None) of the FPDUs from stream offset
    start (relative to seq0) while their length fields are in the capture."""
    have = {}
    for seq, cap, _ in segs:
        rel = (seq - seq0) % (1 << 32)
        if cap and (rel not in have or len(cap) > len(have[rel])):
            have[rel] = cap
    starts = sorted(have)
    lens, pos = [], start
    while True:
        i = bisect.bisect_right(starts, pos) - 1
        if i < 0:
            break
        cap = have[starts[i]][pos - starts[i]:]
        if len(cap) < 2:
            break
        n = struct.unpack('>H', cap[:2])[0]
        lens.append((n, cap[3] & 0x0f if len(cap) >= 4 else None))
        pos += 2 + n + (-(2 + n) % 4) + 4
    return lens


def streams(path):
    """Per direction ("ini", "resp"): the ULPDU_Lengths after the MPA frame."""
    flows, first = {}, {}
    for src, dst, seq, cap, plen in segments(path):
        flows.setdefault((src, dst), []).append((seq, cap, plen))
        for key, kind in KEYS.items():
            i = cap.find(key)
            if i >= 0 and len(cap) >= i + 20 and kind not in first:
                pdlen = struct.unpack('>H', cap[i + 18:i + 20])[0]
                first[kind] = ((src, dst), seq, i + 20 + pdlen, cap[i + 16] & 0x80)
    out = {}
    for kind, name in (('req', 'ini'), ('rep', 'resp')):
        if kind not in first:
            continue
        flow, seq0, start, markers = first[kind]
        fpdus = [] if markers else fpdu_walk(flows[flow], start, seq0)
        op1 = '-'
        if fpdus and fpdus[0][1] is not None:
            op = fpdus[0][1]
            op1 = f"{OPCODES[op] if op < len(OPCODES) else op}/{fpdus[0][0]}"
        out[name] = {'kind': name, 'fpdus': len(fpdus),
                     'ulpdu_max': max((n for n, _ in fpdus), default=0), 'first': op1}
    return out


def payloads(path):
    """The captured TCP payload of every segment."""
    for _, _, _, cap, _ in segments(path):
        yield cap


def frames(path):
    out = []
    for p in payloads(path):
        for key, kind in KEYS.items():
            i = p.find(key)
            if i < 0 or len(p) < i + 20:
                continue
            flags, rev, pdlen = p[i + 16], p[i + 17], struct.unpack('>H', p[i + 18:i + 20])[0]
            f = {'kind': kind, 'rev': rev, 'pd': pdlen}
            for name, bit in (('M', 0x80), ('C', 0x40), ('R', 0x20), ('S', 0x10)):
                f[name] = 1 if flags & bit else 0
            if f['S'] and len(p) >= i + 24:
                ird, ord_ = struct.unpack('>HH', p[i + 20:i + 24])
                f.update(ird=ird & 0x3fff, ord=ord_ & 0x3fff, A=ird >> 15 & 1,
                         B=ird >> 14 & 1, Cw=ord_ >> 15 & 1, D=ord_ >> 14 & 1)
            out.append(f)
    return out


def main():
    fs = frames(sys.argv[1])
    for f in fs:
        print(' '.join(f'{k}={v}' for k, v in f.items()), flush=True)
    if not fs:
        print('mpa_pcap: FAIL: no MPA frame in the capture')
        return 1
    st = streams(sys.argv[1])
    for f in st.values():
        print(' '.join(f'{k}={v}' for k, v in f.items()), flush=True)
    for e in sys.argv[2:]:
        kind, _, cond = e.partition(':')
        m = re.fullmatch(r'(\w+)(=|>=|<=)(.*)', cond)
        if not m:
            print(f'mpa_pcap: FAIL: bad expectation {e}')
            return 1
        field, op, want = m.groups()
        f = st.get(kind) or next((f for f in fs if f['kind'] == kind), None)
        if f is None:
            print(f'mpa_pcap: FAIL: no {kind} frame')
            return 1
        have = f.get(field, '-')
        if op == '=':
            ok = str(have) == want
        else:
            ok = isinstance(have, int) and (have >= int(want) if op == '>=' else have <= int(want))
        if not ok:
            print(f'mpa_pcap: FAIL: {kind} {field} is {have}, expected {op}{want}')
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
