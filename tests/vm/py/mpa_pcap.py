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

import struct
import sys

KEYS = {b'MPA ID Req Frame': 'req', b'MPA ID Rep Frame': 'rep'}


def payloads(path):
    with open(path, 'rb') as f:
        data = f.read()
    magic = struct.unpack('<I', data[:4])[0]
    endian = '<' if magic in (0xa1b2c3d4, 0xa1b23c4d) else '>'
    linktype = struct.unpack(endian + 'I', data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + 'IIII', data[off:off + 16])
        pkt = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if linktype == 1:  # Ethernet
            pkt = pkt[14:]
        elif linktype == 113:  # Linux cooked
            pkt = pkt[16:]
        if not pkt:
            continue
        if pkt[0] >> 4 == 4:
            ihl = (pkt[0] & 15) * 4
            proto, l4 = pkt[9], pkt[ihl:]
        elif pkt[0] >> 4 == 6:
            proto, l4 = pkt[6], pkt[40:]
        else:
            continue
        if proto != 6 or len(l4) < 20:
            continue
        yield l4[(l4[12] >> 4) * 4:]


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
    for e in sys.argv[2:]:
        kind, _, cond = e.partition(':')
        field, _, want = cond.partition('=')
        f = next((f for f in fs if f['kind'] == kind), None)
        if f is None:
            print(f'mpa_pcap: FAIL: no {kind} frame')
            return 1
        if str(f.get(field, '-')) != want:
            print(f'mpa_pcap: FAIL: {kind} {field} is {f.get(field, "-")}, expected {want}')
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
