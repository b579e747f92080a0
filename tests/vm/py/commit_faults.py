#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# The commit extensions (draft-talpey-rdma-commit-02) at rsiw's responder
# against a raw TCP peer: the responses of Flush, Atomic Write and Verify byte
# for byte, their ordering after Writes in one TCP segment, and the Terminate
# triple of every error (spec-map T-06, D-02, D-05). One connection per check;
# the rdma_cm server on rsiw (loaded with commit=1) registers four pages:
#   f   local write, remote read and write, IB_ACCESS_FLUSH_GLOBAL
#   rw  local write, remote read and write (no Flushable right)
#   ro  local write, remote read (no remote write)
#   wo  local write, remote write (no remote read)
#   op  like f, in another PD of the same context
#   big 2 MiB, local write and remote read
# and accepts with all six in its private data, IRD 4 (IRD 1 for "ird").
#
#   check             the raw peer sends                       rsiw answers
#   order             in ONE segment: Write A to f+0, Write B    Flush, Atomic Write
#                     to f+64, Flush(V) of f+0..128, Atomic      and Verify Responses
#                     Write D to f+128, Verify of f+0..136 with  (QN 3, MSN 1-3), the
#                     the CRC32c of A|B|D (FLUSH-03, AWRITE-04,  digest; f holds
#                     VERIFY-06: the digest rsiw computes after  A|B|D
#                     the Flush covers every earlier Write)
#   verify-digest     Verify of f+0..16, no Hash Value           the digest of f+0..16
#   flush-region      Flush(V|R), garbage Length and TO (FLUSH-02) Flush Response
#   flush-zero        Flush with Flags 0 (D-05)                TERM 0/2/FF
#   flush-unknown     Flush with Flags V|0x08 (D-05)            TERM 0/2/FF
#   flush-stag        Flush(V) to a wrong STag                  TERM 0/1/00
#   flush-right       Flush(V) of rw (FLUSH-04)                  TERM 0/1/02
#   flush-persistent  Flush(P) of f: DRAM is not pmem            TERM 0/1/02
#   flush-oob         Flush(V) one byte past f (CMT-04)          TERM 0/1/01
#   awrite-len        Atomic Write, Length 4 (AWRITE-01)         TERM 0/2/07
#   awrite-misaligned Atomic Write to f+4 (AWRITE-02)            TERM 0/2/07
#   awrite-right      Atomic Write to ro (AWRITE-02)             TERM 0/1/02
#   awrite-oob        Atomic Write to the 8 bytes after f        TERM 0/1/01
#   verify-mismatch   Verify with a wrong Hash Value, then an    TERM 0/2/FF; the
#                     Atomic Write, one segment (VERIFY-04)      Atomic Write not done
#   verify-right      Verify of wo (VERIFY-03)                   TERM 0/1/02
#   verify-long       Verify with a 65-byte Hash Value           TERM 0/2/07
#   response          a Flush Response, nothing outstanding      TERM 0/2/06
#   ird               a Flush and an Atomic Write in one         TERM 0/2/07 (D-08,
#                     segment, IRD 1                              CMT-02: IRD shared)
#   flush-wrap        Flush(V) whose TO + Length wraps           TERM 0/1/04
#   awrite-pd         Atomic Write to op (another PD)            TERM 0/1/03
#   verify-huge       Verify of 2 MiB of big (more than rsiw     TERM 0/2/FF
#                     digests in the RX path)
#
# With "off" (rsiw loaded with commit=0) the opcodes themselves are refused:
# a Flush Request and an Atomic Write Request get TERM 0/2/06.
#
# With "dram" (rsiw loaded with commit=1 fault_dram_persistent=1: DRAM may be
# registered flushable to persistence, a test knob) the deferred Flush to
# persistence (responder.rs DeferredFlush: a write-back of more than
# FLUSH_INLINE_MAX, 64 KiB, runs in the connection's work item while RX
# stops at the Flush) runs on the KASAN kernel, which has no pmem. The
# server registers one region p of 1 MiB with IBV_ACCESS_FLUSH_PERSISTENT
# and reads the port's Flush counters (hw_counters) around each connection:
#
#   check           the raw peer sends                       rsiw answers
#   deferred        Flush(P) of p+100..65636: 65,600 bytes   Flush Response; counters
#                   of lines, one line more than inline      +1 executed, persistent,
#                                                            deferred, +65600 bytes
#   deferred-order  in ONE segment: Flush(P) of 256 KiB,     Flush, Flush and Verify
#                   Write W to p+4096, Flush(P|V) of W,      Responses (MSN 1-3), the
#                   Verify of W with its digest (FLUSH-03,   digest of W; p holds W;
#                   VERIFY-06, T-01: RX stopped at the       +2 executed, +1 deferred
#                   first Flush goes on after it)
#   deferred-reset  in ONE segment: Flush(P|R) of all p,     nothing; the server's QP
#                   Write W, Flush(V); then a RST while the  in ERROR, p unchanged or
#                   work item may still write p back         with W, nothing leaks
#
# Except for order, verify-digest and flush-region, the server's QP must end
# in ERROR and no page may change (but the Writes of order).
#
#   commit_faults.py server ADDR PORT [off|dram]
#   commit_faults.py client ADDR PORT [off|dram]
#
# Exits 0 if all pass, 1 with a message otherwise.

import fcntl
import socket
import struct
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import ConnParam

import cmutil
from cmutil import fail, log
from mpa_raw import read_all
import rawpeer
from rawpeer import first_write, split_fpdus, untagged, write

cmutil.NAME = 'commit_faults'

SIZE = 4096
BIG = 2 << 20
INIT = 0x0102030405060708
# IBV_ACCESS_FLUSH_GLOBAL (rdma-core's verbs.h), in case pyverbs lacks it.
FLUSH_GLOBAL = getattr(e, 'IBV_ACCESS_FLUSH_GLOBAL', 1 << 8)
FLUSH_PERSISTENT = getattr(e, 'IBV_ACCESS_FLUSH_PERSISTENT', 1 << 9)
FLUSH_P, FLUSH_V, FLUSH_R = 0x1, 0x2, 0x4
A = bytes(range(64))
B = bytes(range(0x80, 0xc0))
D = bytes([0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef])
CHECKS = {
    # name: Terminate expected, or None
    'order': None,
    'verify-digest': None,
    'flush-region': None,
    'flush-zero': (0, 2, 0xff),
    'flush-unknown': (0, 2, 0xff),
    'flush-stag': (0, 1, 0),
    'flush-right': (0, 1, 2),
    'flush-persistent': (0, 1, 2),
    'flush-oob': (0, 1, 1),
    'awrite-len': (0, 2, 7),
    'awrite-misaligned': (0, 2, 7),
    'awrite-right': (0, 1, 2),
    'awrite-oob': (0, 1, 1),
    'verify-mismatch': (0, 2, 0xff),
    'verify-right': (0, 1, 2),
    'verify-long': (0, 2, 7),
    'response': (0, 2, 6),
    'ird': (0, 2, 7),
    'flush-wrap': (0, 1, 4),
    'awrite-pd': (0, 1, 3),
    'verify-huge': (0, 2, 0xff),
}
OFF_CHECKS = {'flush-disabled': (0, 2, 6), 'awrite-disabled': (0, 2, 6)}
# "dram": the region p, the Write W in it, and what each check adds to the
# Flush counters (COUNTERS), None where a reset races the write-back.
PSIZE = 1 << 20
W = bytes(range(0x40, 0x80))
W_AT = 4096
DEFER_LEN = 256 << 10
COUNTERS = ('flush_executed', 'flush_persistent', 'flush_writeback_bytes', 'flush_deferred')
DRAM_CHECKS = {
    'deferred': (1, 1, 65600, 1),
    'deferred-order': (2, 2, DEFER_LEN + len(W), 1),
    'deferred-reset': None,
}
SIOCOUTQNSD = 0x894B


def crc32c(data):
    """CRC-32C (Castagnoli), the digest rsiw's Verify uses."""
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def digest(data):
    """The Hash Value of rsiw's Verify: the CRC32c, as the MPA trailer puts it."""
    return struct.pack('<I', crc32c(data))


def flush(msn, stag, to, length, flags):
    return untagged(0xC, 1, msn, struct.pack('>IIQI', stag, length, to, flags))


def verify(msn, stag, to, length, hash_value=b''):
    return untagged(0xE, 1, msn, struct.pack('>IIQ', stag, length, to) + hash_value)


def awrite(msn, stag, to, data=D, length=8):
    return untagged(0x10, 1, msn, struct.pack('>IIQ', stag, length, to) + data)


def fpdus(check, mrs):
    (f, fk), (rw, rwk), (ro, rok), (wo, wok), (op, opk), (big, bigk) = mrs
    return [first_write()] + {
        'order': [write(fk, f, A) + write(fk, f + 64, B) + flush(1, fk, f, 128, FLUSH_V) +
                  awrite(2, fk, f + 128) + verify(3, fk, f, 136, digest(A + B + D))],
        'verify-digest': [verify(1, fk, f, 16)],
        'flush-region': [flush(1, fk, 0xdead0000, 0xfffffff0, FLUSH_V | FLUSH_R)],
        'flush-zero': [flush(1, fk, f, 8, 0)],
        'flush-unknown': [flush(1, fk, f, 8, FLUSH_V | 0x08)],
        'flush-stag': [flush(1, cmutil.BAD_STAG, f, 8, FLUSH_V)],
        'flush-right': [flush(1, rwk, rw, 8, FLUSH_V)],
        'flush-persistent': [flush(1, fk, f, 8, FLUSH_P)],
        'flush-oob': [flush(1, fk, f + SIZE - 63, 64, FLUSH_V)],
        'awrite-len': [awrite(1, fk, f, length=4)],
        'awrite-misaligned': [awrite(1, fk, f + 4)],
        'awrite-right': [awrite(1, rok, ro)],
        'awrite-oob': [awrite(1, fk, f + SIZE)],
        'verify-mismatch': [verify(1, fk, f, 16, bytes(4)) + awrite(2, fk, f)],
        'verify-right': [verify(1, wok, wo, 16)],
        'verify-long': [verify(1, fk, f, 16, bytes(65))],
        'response': [untagged(0xD, 3, 1, b'')],
        'ird': [flush(1, fk, f, 8, FLUSH_V) + awrite(2, fk, f)],
        'flush-wrap': [flush(1, fk, 2**64 - 8, 16, FLUSH_V)],
        'awrite-pd': [awrite(1, opk, op)],
        'verify-huge': [verify(1, bigk, big, BIG)],
        'flush-disabled': [flush(1, fk, f, 8, FLUSH_V)],
        'awrite-disabled': [awrite(1, fk, f)],
    }[check]


def dram_fpdus(check, p, pk):
    """The segments of a "dram" check, after the stream's first Write."""
    return [first_write()] + {
        'deferred': [flush(1, pk, p + 100, 65536, FLUSH_P)],
        'deferred-order': [flush(1, pk, p, DEFER_LEN, FLUSH_P) + write(pk, p + W_AT, W) +
                           flush(2, pk, p + W_AT, len(W), FLUSH_P | FLUSH_V) +
                           verify(3, pk, p + W_AT, len(W), digest(W))],
        'deferred-reset': [flush(1, pk, 0, 0, FLUSH_P | FLUSH_R) + write(pk, p + W_AT, W) +
                           flush(2, pk, p, 8, FLUSH_V)],
    }[check]


def expected(check):
    """The bytes rsiw must send for a check that succeeds."""
    qn3 = lambda op, msn, payload=b'': untagged(op, 3, msn, payload)
    init = struct.pack('<Q', INIT) * 2
    return {
        'order': qn3(0xD, 1) + qn3(0x11, 2) + qn3(0xF, 3, digest(A + B + D)),
        'verify-digest': qn3(0xF, 1, digest(init)),
        'flush-region': qn3(0xD, 1),
        'deferred': qn3(0xD, 1),
        'deferred-order': qn3(0xD, 1) + qn3(0xD, 2) + qn3(0xF, 3, digest(W)),
    }[check]


def server(addr, port, checks, off):
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    lst = cmutil.Listener(addr, port)
    # Keep every child until the end (see ext_faults.py).
    children = []
    lw, rr, rwr = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_READ, e.IBV_ACCESS_REMOTE_WRITE
    for check, term in checks.items():
        child, _ = lst.request(check)
        children.append(child)
        child.create_qp(cmutil.qp_attr(wr=4, sge=1))
        pd = child.pd
        # With commit=0 the device has no IB_DEVICE_FLUSH_GLOBAL: ib_core refuses the flag.
        fl = 0 if off else FLUSH_GLOBAL
        mrs = [MR(pd, SIZE, a) for a in (lw | rr | rwr | fl, lw | rr | rwr,
                                         lw | rr, lw | rwr)]
        opd = PD(child.context)
        mrs.append(MR(opd, SIZE, lw | rr | rwr | fl))
        for mr in mrs:
            mr.write(struct.pack('<Q', INIT) * (SIZE // 8), SIZE, 0)
        big = MR(pd, BIG, lw | rr)
        pdata = b''.join(struct.pack('<QI', mr.buf, mr.rkey) for mr in mrs + [big])
        ird = 1 if check == 'ird' else 4
        cp = ConnParam(resources=ird, depth=ird, qp_num=0, data_len=len(pdata))
        cp.set_private_data(pdata)
        child.accept(cp)
        lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, check)
        lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, check)
        pages = [bytes(mr.read(SIZE, 0)) for mr in mrs]
        attr, _ = child.query_qp(e.IBV_QP_STATE)
        log(f'{check}: QP state {attr.qp_state}')
        want = [struct.pack('<Q', INIT) * (SIZE // 8)] * len(mrs)
        if check == 'order':
            want[0] = A + B + D + want[0][136:]
        for i, (got, w) in enumerate(zip(pages, want)):
            if got != w:
                at = next(k for k in range(SIZE) if got[k] != w[k])
                fail(f'{check}: page {i} differs at {at}: {got[at:at + 16].hex()}, '
                     f'want {w[at:at + 16].hex()}')
        if term is not None and attr.qp_state != e.IBV_QPS_ERR:
            fail(f'{check}: server QP state {attr.qp_state}, want ERROR')
        cmutil.check_done(child, check, *mrs, big, opd)
    for child in children:
        child.close()


def client(addr, port, checks, off):
    port = int(port)
    for check, term in checks.items():
        s, pdata = rawpeer.connect(addr, port)
        mrs = [struct.unpack('<QI', pdata[12 * i:12 * i + 12]) for i in range(6)]
        time.sleep(0.2)
        for f in fpdus(check, mrs):
            # Each list item is one sendall(): with TCP_NODELAY and an idle
            # connection, one TCP segment.
            s.sendall(f)
            time.sleep(0.05)
        data, eof = read_all(s, 3)
        s.close()
        if term is None:
            want = expected(check)
            if data != want:
                fail(f'{check}: got {data.hex()}, want {want.hex()}')
            log(f'{check}: the responses, byte for byte')
            time.sleep(0.2)
            continue
        got = None
        for f in split_fpdus(check, data):
            # Beyond IRD: the Flush admitted before may be answered first.
            if check == 'ird' and f[3] & 0x1f == 0xD:
                continue
            if len(f) < 24 or f[3] & 0x1f != 7:
                fail(f'{check}: rsiw sent {f.hex()}, not a Terminate')
            got = (f[20] >> 4, f[20] & 0xf, f[21])
            break
        if got != term:
            fail(f'{check}: Terminate {got}, want {term} (got {data.hex()})')
        if not eof:
            fail(f'{check}: the connection stayed open after the Terminate')
        log(f'{check}: Terminate {got}')
        time.sleep(0.2)


def counters(dev):
    """The port's Flush counters (COUNTERS), from sysfs."""
    d = f'/sys/class/infiniband/{dev}/ports/1/hw_counters/'
    out = []
    for c in COUNTERS:
        with open(d + c) as f:
            out.append(int(f.read()))
    return out


def dram_server(addr, port):
    from pyverbs.mr import MR
    lst = cmutil.Listener(addr, port)
    children = []
    access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ |
              e.IBV_ACCESS_REMOTE_WRITE | FLUSH_GLOBAL | FLUSH_PERSISTENT)
    init = struct.pack('<Q', INIT) * (PSIZE // 8)
    with_w = init[:W_AT] + W + init[W_AT + len(W):]
    for check, want in DRAM_CHECKS.items():
        child, _ = lst.request(check)
        children.append(child)
        child.create_qp(cmutil.qp_attr(wr=4, sge=1))
        dev = child.context.name
        # DRAM flushable to persistence: only with fault_dram_persistent.
        mr = MR(child.pd, PSIZE, access)
        mr.write(init, PSIZE, 0)
        pdata = struct.pack('<QI', mr.buf, mr.rkey)
        cp = ConnParam(resources=4, depth=4, qp_num=0, data_len=len(pdata))
        cp.set_private_data(pdata)
        before = counters(dev)
        child.accept(cp)
        lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, check)
        lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, check)
        attr, _ = child.query_qp(e.IBV_QP_STATE)
        page = bytes(mr.read(PSIZE, 0))
        got = tuple(a - b for a, b in zip(counters(dev), before))
        log(f'{check}: QP state {attr.qp_state}, counters +{got} ({", ".join(COUNTERS)})')
        if want is not None and got != want:
            fail(f'{check}: the Flush counters rose by {got}, want {want}')
        if want is None:
            # The reset raced the work item: it wrote p back and answered, or
            # stopped between two parts, or never began.
            if attr.qp_state != e.IBV_QPS_ERR:
                fail(f'{check}: server QP state {attr.qp_state}, want ERROR')
            if got[3] > 1 or got[0] > 2:
                fail(f'{check}: the Flush counters rose by {got}')
            ok = (init, with_w)
        else:
            ok = (with_w if check == 'deferred-order' else init,)
        if page not in ok:
            w = ok[-1]
            at = next(k for k in range(PSIZE) if page[k] != w[k])
            fail(f'{check}: p differs at {at}: {page[at:at + 16].hex()}, '
                 f'want {w[at:at + 16].hex()}')
        cmutil.check_done(child, check, mr)
    for child in children:
        child.close()


def read_upto(s, n, limit):
    """Reads until n bytes, EOF or `limit` seconds, then whatever follows
    within 0.3 s (nothing, if rsiw sent only what was expected)."""
    s.settimeout(limit)
    data = b''
    try:
        while len(data) < n:
            b = s.recv(4096)
            if not b:
                return data
            data += b
        s.settimeout(0.3)
        while True:
            b = s.recv(4096)
            if not b:
                return data
            data += b
    except (socket.timeout, ConnectionResetError):
        return data


def dram_client(addr, port):
    port = int(port)
    for check in DRAM_CHECKS:
        s, pdata = rawpeer.connect(addr, port)
        p, pk = struct.unpack('<QI', pdata[:12])
        time.sleep(0.2)
        segs = dram_fpdus(check, p, pk)
        for i, f in enumerate(segs):
            s.sendall(f)
            if i + 1 < len(segs):
                time.sleep(0.05)
        if check == 'deferred-reset':
            # Reset as soon as the segment left: TCP sends a RST at once, and
            # rsiw's work item may be writing the 1 MiB back meanwhile.
            for _ in range(100):
                nsd = struct.unpack('i', fcntl.ioctl(s, SIOCOUTQNSD, bytes(4)))[0]
                if nsd == 0:
                    break
                time.sleep(0.01)
            else:
                fail(f'{check}: the segment was not sent within 1 s')
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
            s.close()
            log(f'{check}: reset after the Flush')
            time.sleep(0.2)
            continue
        want = expected(check)
        data = read_upto(s, len(want), 20)
        s.close()
        if data != want:
            fail(f'{check}: got {data.hex()}, want {want.hex()}')
        log(f'{check}: the responses, byte for byte')
        time.sleep(0.2)


def main():
    args = sys.argv[1:]
    if len(args) not in (3, 4) or args[0] not in ('server', 'client') or \
            args[3:] not in ([], ['off'], ['dram']):
        fail('usage: commit_faults.py server|client ADDR PORT [off|dram]')
    if args[3:] == ['dram']:
        (dram_server if args[0] == 'server' else dram_client)(args[1], args[2])
        log('ok')
        return
    off = args[3:] == ['off']
    checks = OFF_CHECKS if off else CHECKS
    (server if args[0] == 'server' else client)(args[1], args[2], checks, off)
    log('ok')


if __name__ == '__main__':
    main()
