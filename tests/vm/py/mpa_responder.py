#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# A raw TCP MPA responder that answers an iWARP initiator's Request with an
# enhanced Reply the initiator must refuse, then checks the Terminate FPDU the
# initiator sends before closing: usage mpa_responder.py PORT [strict]. Serves
# one connection per check, in this order (the initiator is
# tests/vm/py/cm_refused.py). Exits 0 if all pass, 1 with a message otherwise.
#
# - MPA-11: a Reply with ORD 0x3FFE (above any device's IRD) and no CRC: the
#   initiator sends TERM 2/0/06 (insufficient IRD), then FIN;
# - MPA-19: a Reply with A=1 (peer-to-peer) to a client-server Request (A=0,
#   which the responder must mirror) and C=1: the initiator sends TERM 2/0/07
#   (no matching RTR) with a valid MPA CRC, then FIN.
#
# With "strict" it runs one other check instead, for an rsiw initiator loaded
# with relaxed_ird_negotiation=0 that asks for ORD 1 (cm_refused.py does):
# - MPA-11 strict: a Reply with IRD 0, below the initiator's ORD. A relaxed
#   initiator lowers its ORD to 0 and goes on (no Terminate: the check
#   fails); a strict one sends TERM 2/0/06, then FIN.
# - then a valid Reply and a RST 0.3 s later, for an initiator loaded with
#   established_delay_ms=1000: its connect is refused (cm_refused.py).

import socket
import struct
import sys
import time

from mpa_raw import KEY_REP, KEY_REQ, read_all
FLAG_M, FLAG_C, FLAG_R, FLAG_S = 0x80, 0x40, 0x20, 0x10


def fail(msg):
    print(f'mpa_responder: FAIL: {msg}', flush=True)
    sys.exit(1)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def recv_exact(s, n):
    data = b''
    while len(data) < n:
        b = s.recv(n - len(data))
        if not b:
            fail(f'EOF after {len(data)} of {n} bytes')
        data += b
    return data


def read_request(s):
    """Reads a whole MPA Request. Returns (flags, rev, private data)."""
    hdr = recv_exact(s, 20)
    if hdr[:16] != KEY_REQ:
        fail(f'not an MPA Request: {hdr!r}')
    (pd_len,) = struct.unpack('>H', hdr[18:20])
    return hdr[16], hdr[17], recv_exact(s, pd_len)


def terminate_fpdu(layer, etype, ecode, crc):
    """The Terminate FPDU the initiator must send: untagged DDP header
    (L=1, DV=1), RDMAP RV=1 opcode 0x7, QN 2, MSN 1, MO 0, no echoed header."""
    ulpdu = bytes([0x41, 0x47]) + struct.pack('>IIII', 0, 2, 1, 0)
    ulpdu += bytes([(layer << 4) | etype, ecode, 0, 0])
    body = struct.pack('>H', len(ulpdu)) + ulpdu
    body += bytes(-len(body) % 4)
    return body + (struct.pack('<I', crc32c(body)) if crc else bytes(4))


def check(lsock, name, flags, ird_word, ord_word, term):
    s, peer = lsock.accept()
    s.settimeout(30)
    rflags, rev, pd = read_request(s)
    if rev != 2 or not rflags & FLAG_S or len(pd) < 4:
        fail(f'{name}: want an enhanced Rev 2 Request, got flags {rflags:#x} rev {rev}')
    req_ird, req_ord = struct.unpack('>HH', pd[:4])
    if req_ird & 0x8000:
        fail(f'{name}: the initiator asked for peer-to-peer (IRD word {req_ird:#x})')
    crc = bool((rflags | flags) & FLAG_C)
    s.sendall(KEY_REP + bytes([flags | FLAG_S, 2]) + struct.pack('>HHH', 4, ird_word, ord_word))
    data, eof = read_all(s, 20)
    want = terminate_fpdu(*term, crc)
    if data != want or not eof:
        fail(f'{name}: want {want.hex()} then EOF, got {data.hex()} eof={eof}')
    print(f'mpa_responder: {name}: request IRD {req_ird:#x} ORD {req_ord:#x} from {peer[0]}: '
          f'TERM {term[0]}/{term[1]}/{term[2]:02x} (crc {crc}) then FIN', flush=True)
    s.close()


def check_reset(lsock, name):
    """Answers with a valid Reply, then resets the connection 0.3 s later:
    inside the initiator's established_delay_ms (1 s), whose ULP must get its
    connect refused (the iw_cm's connect reply with -ECONNRESET: REJECTED),
    not an ESTABLISHED followed by a DISCONNECTED."""
    s, peer = lsock.accept()
    s.settimeout(30)
    rflags, rev, pd = read_request(s)
    if rev != 2 or not rflags & FLAG_S or len(pd) < 4:
        fail(f'{name}: want an enhanced Rev 2 Request, got flags {rflags:#x} rev {rev}')
    req_ird, req_ord = (v & 0x3FFF for v in struct.unpack('>HH', pd[:4]))
    # IRD for the initiator's ORD, ORD within its IRD: a Reply it accepts.
    s.sendall(KEY_REP + bytes([FLAG_S, 2]) + struct.pack('>HHH', 4, req_ord, req_ird))
    time.sleep(0.3)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    s.close()
    print(f'mpa_responder: {name}: valid Reply to {peer[0]}, RST 0.3 s later', flush=True)


def main():
    port = int(sys.argv[1])
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(('0.0.0.0', port))
    lsock.listen(4)
    lsock.settimeout(120)
    print('mpa_responder: listening', flush=True)
    if sys.argv[2:] == ['strict']:
        check(lsock, 'MPA-11 strict, IRD below our ORD', 0, 0, 1, (2, 0, 0x06))
        check_reset(lsock, 'reset while the connect reply is held')
    else:
        check(lsock, 'MPA-11 insufficient IRD', 0, 4, 0x3FFE, (2, 0, 0x06))
        check(lsock, 'MPA-19 no matching RTR', FLAG_C, 0x8000 | 4, 0x8000 | 4, (2, 0, 0x07))
    print('mpa_responder: ok', flush=True)


if __name__ == '__main__':
    main()
