#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# A raw TCP peer that talks (bad) MPA to an iWARP listener and checks how the
# listener answers: usage mpa_raw.py ADDR PORT. Each check opens its own
# connection. Exits 0 if all pass, 1 with a message otherwise.
#
# - MPA-01: a Request with a wrong key is answered by closing, without a Reply;
# - D-03:   a Request asking for Markers gets a Reply with R=1, then FIN;
# - MPA-07: PD_Length 513 is answered by closing;
# - timeout: a connection that never sends its Request is closed after the
#   responder's MPA timeout (5 s in rsiw and siw).

import socket
import struct
import sys
import time

KEY_REQ = b'MPA ID Req Frame'
KEY_REP = b'MPA ID Rep Frame'


def fail(msg):
    print(f'mpa_raw: FAIL: {msg}', flush=True)
    sys.exit(1)


def connect(addr, port):
    s = socket.create_connection((addr, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_all(s, limit):
    """Reads until EOF (or `limit` seconds); returns the bytes and whether EOF came."""
    s.settimeout(limit)
    data = b''
    try:
        while True:
            b = s.recv(4096)
            if not b:
                return data, True
            data += b
    except socket.timeout:
        return data, False
    except ConnectionResetError:
        return data, True


def request(flags, rev, pd, key=KEY_REQ, pd_len=None):
    n = len(pd) if pd_len is None else pd_len
    return key + bytes([flags, rev]) + struct.pack('>H', n) + pd


def main():
    addr, port = sys.argv[1], int(sys.argv[2])
    enh = struct.pack('>HH', 4, 4)

    s = connect(addr, port)
    s.sendall(request(0x10, 2, enh, key=b'MPA ID Req Framf'))
    data, eof = read_all(s, 20)
    if not eof or data:
        fail(f'bad key: got {data!r}, eof={eof}')
    print('mpa_raw: bad key: closed without a reply', flush=True)

    s = connect(addr, port)
    s.sendall(request(0x80 | 0x10, 2, enh))
    data, eof = read_all(s, 20)
    if not eof or len(data) < 20 or data[:16] != KEY_REP or not data[16] & 0x20:
        fail(f'markers: got {data!r}, eof={eof}')
    print(f'mpa_raw: markers: reject reply {data[16:20].hex()} then close', flush=True)

    s = connect(addr, port)
    s.sendall(request(0x10, 2, enh, pd_len=513))
    data, eof = read_all(s, 20)
    if not eof or data:
        fail(f'pd_len 513: got {data!r}, eof={eof}')
    print('mpa_raw: PD_Length 513: closed', flush=True)

    s = connect(addr, port)
    t = time.monotonic()
    data, eof = read_all(s, 30)
    dt = time.monotonic() - t
    if not eof or data or dt < 3:
        fail(f'timeout: got {data!r}, eof={eof} after {dt:.1f} s')
    print(f'mpa_raw: silent peer closed after {dt:.1f} s', flush=True)
    print('mpa_raw: ok', flush=True)


if __name__ == '__main__':
    main()
