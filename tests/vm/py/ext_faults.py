#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# RFC 7306 at rsiw's responder against a raw TCP peer: the Terminate triple
# of every extension error (spec-map T-06, D-02), the QP in ERROR, and the
# two requests done right, byte for byte. One connection per check; the
# rdma_cm server on rsiw registers a page with remote atomic access and one
# with remote write and read only, and accepts (IRD 1) with both in its
# private data.
#
#   check            the raw peer sends                      rsiw answers
#   fetch-add        FetchAdd +5 (ATOM-04, ATOM-05, ATOM-10)  Atomic Response: the
#                    to a word the server set                  original, its Request
#                                                              Identifier; word + 5
#   imm              Immediate Data (IMM-01)                  a receive completes
#                                                             with it
#   atom-stag        an Atomic Request to a wrong STag       TERM 0/1/00 (ATOM-12)
#   atom-right       ... to the page without remote atomic   TERM 0/1/02 (ATOM-12)
#   atom-oob         ... to the 8 bytes after the page       TERM 0/1/01 (ATOM-12)
#   atom-misaligned  ... to the page's address + 4           TERM 0/2/07 (ATOM-11)
#   atom-aopcode     AOpCode 0x1 (reserved)                  TERM 0/2/06 (ATOM-03)
#   imm-long         Immediate Data of 9 bytes               TERM 0/2/07 (IMM-02)
#   imm-short        Immediate Data of 7 bytes               TERM 0/2/07 (IMM-02)
#   atom-ird         a Read Request and 6 Atomic Requests    TERM 0/2/07 (D-08,
#                    in one segment, with IRD 1               ATOM-14: IRD is shared)
#   atom-response    an Atomic Response, nothing outstanding TERM 0/2/06 (ATOM-13)
#
# With "off" (rsiw loaded with rfc7306=0) the extension opcodes themselves are
# refused: Atomic Request and Immediate Data get TERM 0/2/06.
#
# Except for fetch-add and imm, the server's QP must end in ERROR and its
# posted receive flushed, and the target words stay as they were.
#
#   ext_faults.py server ADDR PORT [off]
#   ext_faults.py client ADDR PORT [off]
#
# Exits 0 if all pass, 1 with a message otherwise.

import socket
import struct
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e

import cmutil
from cmutil import conn_param, fail, log
from mpa_raw import read_all
import rawpeer
from rawpeer import first_write, fpdu, split_fpdus, untagged

cmutil.NAME = 'ext_faults'

SIZE = 4096
INIT = 0x0102030405060708
CHECKS = {
    # name: (Terminate expected, or None)
    'fetch-add': None,
    'imm': None,
    'atom-stag': (0, 1, 0),
    'atom-right': (0, 1, 2),
    'atom-oob': (0, 1, 1),
    'atom-misaligned': (0, 2, 7),
    'atom-aopcode': (0, 2, 6),
    'imm-long': (0, 2, 7),
    'imm-short': (0, 2, 7),
    'atom-ird': (0, 2, 7),
    'atom-response': (0, 2, 6),
}
OFF_CHECKS = {'atom-disabled': (0, 2, 6), 'imm-disabled': (0, 2, 6)}


def atomic_request(msn, stag, to, aop=0, add=5):
    """FetchAdd (aop 0) or CmpSwap (2) of 52 bytes: reserved/AOpCode, Request
    Identifier (the MSN), STag, TO, Add/Swap, its mask, Compare, its mask."""
    body = struct.pack('>IIIQQQQQ', aop, 0x5000 + msn, stag, to, add, 0, 0, 2**64 - 1)
    return untagged(0xA, 1, msn, body)


def read_request(msn, src_stag, src_to, size):
    """A Read Request to a sink that does not exist at the raw peer."""
    body = struct.pack('>IQIIQ', 0x99, 0, size, src_stag, src_to)
    return untagged(0x1, 1, msn, body)


def imm_data(msn, data):
    return untagged(0x8, 0, msn, data)


def fpdus(check, atomic, rw):
    (a, k), (ra, rk) = atomic, rw
    return [first_write()] + {
        'fetch-add': [atomic_request(1, k, a)],
        'imm': [imm_data(1, b'\x11\x22\x33\x44\0\0\0\0')],
        'atom-stag': [atomic_request(1, cmutil.BAD_STAG, a)],
        'atom-right': [atomic_request(1, rk, ra)],
        'atom-oob': [atomic_request(1, k, a + SIZE)],
        'atom-misaligned': [atomic_request(1, k, a + 4)],
        'atom-aopcode': [atomic_request(1, k, a, aop=1)],
        'imm-long': [imm_data(1, bytes(9))],
        'imm-short': [imm_data(1, bytes(7))],
        # One segment: rsiw takes them in one pass of its RX, before TX
        # answers the Read.
        'atom-ird': [read_request(1, k, a, 8) + b''.join(
            atomic_request(m, k, a + 8 * m) for m in range(2, 8))],
        'atom-response': [untagged(0xB, 3, 1, struct.pack('>IQ', 1, 7))],
        'atom-disabled': [atomic_request(1, k, a)],
        'imm-disabled': [imm_data(1, bytes(8))],
    }[check]


def server(addr, port, checks):
    lst = cmutil.Listener(addr, port)
    # pyverbs gives every child the listener's PD object, and closing a CMID
    # clears that object's pointer: a child freed before the next request
    # leaves the next one a NULL PD. Keep them all until the end.
    children = []
    for check, term in checks.items():
        child, _ = lst.request(check)
        children.append(child)
        child.create_qp(cmutil.qp_attr(wr=4, sge=1))
        pd = child.pd
        atomic = pyverbs_mr(pd, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_ATOMIC |
                            e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_WRITE)
        rw = pyverbs_mr(pd, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ |
                        e.IBV_ACCESS_REMOTE_WRITE)
        for mr in (atomic, rw):
            mr.write(struct.pack('<Q', INIT) * (SIZE // 8), SIZE, 0)
        rbuf = child.reg_msgs(64)
        child.post_recv(rbuf, 64)
        child.accept(conn_param(struct.pack('<QIQI', atomic.buf, atomic.rkey, rw.buf,
                                            rw.rkey)))
        lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, check)
        lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, check)
        wc = child.get_recv_comp()
        words = struct.unpack('<2Q', bytes(atomic.read(16, 0)))
        other = struct.unpack('<2Q', bytes(rw.read(16, 0)))
        attr, _ = child.query_qp(e.IBV_QP_STATE)
        log(f'{check}: receive status {wc.status}, words {words[0]:#x} {words[1]:#x}, '
            f'QP state {attr.qp_state}')
        if check == 'fetch-add':
            if words != (INIT + 5, INIT) or wc.status != e.IBV_WC_WR_FLUSH_ERR:
                fail(f'{check}: words {words}, receive {wc.status}')
        elif check == 'imm':
            # An extended context (the patched provider) sees the immediate alone.
            if (wc.status != e.IBV_WC_SUCCESS or wc.byte_len != 0 or
                    wc.opcode != e.IBV_WC_RECV_RDMA_WITH_IMM or
                    not wc.wc_flags & e.IBV_WC_WITH_IMM or
                    socket.ntohl(wc.imm_data) != 0x11223344):
                fail(f'{check}: receive status {wc.status} length {wc.byte_len} '
                     f'opcode {wc.opcode} flags {wc.wc_flags:#x} imm {wc.imm_data:#x}')
        elif check != 'atom-ird':
            if words != (INIT, INIT) or other != (INIT, INIT):
                fail(f'{check}: memory changed: {words} {other}')
        if term is not None:
            if attr.qp_state != e.IBV_QPS_ERR:
                fail(f'{check}: server QP state {attr.qp_state}, want ERROR')
            if wc.status != e.IBV_WC_WR_FLUSH_ERR:
                fail(f'{check}: receive status {wc.status}, want WR_FLUSH_ERR')
        cmutil.check_done(child, check, atomic, rw, rbuf)
    for child in children:
        child.close()


def pyverbs_mr(pd, access):
    from pyverbs.mr import MR
    return MR(pd, SIZE, access)


def client(addr, port, checks):
    port = int(port)
    for check, term in checks.items():
        s, pdata = rawpeer.connect(addr, port)
        a, k, ra, rk = struct.unpack('<QIQI', pdata[:24])
        atomic, rw = (a, k), (ra, rk)
        time.sleep(0.2)
        for f in fpdus(check, atomic, rw):
            s.sendall(f)
            time.sleep(0.05)
        data, eof = read_all(s, 3)
        s.close()
        if check == 'fetch-add':
            # Atomic Response: 12-byte header after the untagged DDP header
            # QN 3, MSN 1, L=1 (ATOM-05); the original in big-endian.
            want = fpdu(bytes([0x41, 0x4B]) + struct.pack('>IIII', 0, 3, 1, 0) +
                        struct.pack('>IQ', 0x5001, INIT))
            if data != want:
                fail(f'{check}: got {data.hex()}, want {want.hex()}')
            log(f'{check}: Atomic Response with the original and Request Identifier')
            time.sleep(0.2)
            continue
        got = None
        for f in split_fpdus(check, data):
            # Read Responses (atom-ird) may go out before the Terminate.
            if f[3] & 0x0f == 2:
                continue
            if len(f) < 24 or f[3] & 0x0f != 7:
                fail(f'{check}: rsiw sent {f.hex()}, not a Terminate')
            got = (f[20] >> 4, f[20] & 0xf, f[21])
            break
        if got != term:
            fail(f'{check}: Terminate {got}, want {term} (got {data.hex()})')
        if term is not None and not eof:
            fail(f'{check}: the connection stayed open after the Terminate')
        log(f'{check}: Terminate {got}')
        time.sleep(0.2)


def main():
    args = sys.argv[1:]
    if len(args) not in (3, 4) or args[0] not in ('server', 'client') or \
            args[3:] not in ([], ['off']):
        fail('usage: ext_faults.py server|client ADDR PORT [off]')
    checks = OFF_CHECKS if args[3:] == ['off'] else CHECKS
    (server if args[0] == 'server' else client)(args[1], args[2], checks)
    log('ok')


if __name__ == '__main__':
    main()
