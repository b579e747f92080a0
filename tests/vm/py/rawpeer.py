# SPDX-License-Identifier: GPL-2.0
#
# A raw MPA peer's building blocks, for the scripts that check rsiw's
# responder byte for byte (ext_faults.py, commit_faults.py): FPDUs without
# CRC or Markers, the untagged and tagged messages of one segment, the
# splitting of what rsiw sends back, and the MPA Request that opens the
# stream (Rev 1, no CRC, no private data).

import socket
import struct

from cmutil import fail
from mpa_raw import KEY_REP, KEY_REQ
from mpa_responder import recv_exact


def fpdu(ulpdu):
    """An FPDU: ULPDU length, the ULPDU, padding, a zero CRC."""
    body = struct.pack('>H', len(ulpdu)) + ulpdu
    body += bytes(-len(body) % 4)
    return body + bytes(4)


def untagged(opcode, qn, msn, rest):
    """An untagged message of one segment (L=1, DV=1, RV=1); opcode has 5 bits,
    rest follows the fixed header."""
    return fpdu(bytes([0x41, 0x40 | opcode]) + struct.pack('>IIII', 0, qn, msn, 0) + rest)


def write(stag, to, data):
    """An RDMA Write of one segment (T=1, L=1)."""
    return fpdu(bytes([0xC1, 0x40]) + struct.pack('>IQ', stag, to) + data)


def first_write():
    """A zero-length Write: the stream's first message, which checks nothing."""
    return write(0, 0, b'')


def split_fpdus(check, data):
    """The FPDUs (no CRC, no Markers) in data."""
    out = []
    while data:
        if len(data) < 2:
            fail(f'{check}: {data.hex()} after the last whole FPDU')
        (n,) = struct.unpack('>H', data[:2])
        total = 2 + n + (-(2 + n) % 4) + 4
        out.append(data[:total])
        data = data[total:]
    return out


def connect(addr, port):
    """Opens the stream to rsiw's listener: an MPA Request, an accepting
    Reply. Returns (socket, the Reply's private data)."""
    s = socket.create_connection((addr, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(KEY_REQ + bytes([0, 1]) + struct.pack('>H', 0))
    hdr = recv_exact(s, 20)
    if hdr[:16] != KEY_REP or hdr[16] & 0x20:
        fail(f'not an accepting MPA Reply: {hdr!r}')
    (pd_len,) = struct.unpack('>H', hdr[18:20])
    return s, recv_exact(s, pd_len)
