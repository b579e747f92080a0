#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Zero-copy TX must not complete a work request while TCP still holds the
# user's pages: with zerocopy_min, rsiw hands FPDU batches whose payload lies
# in a registered user buffer to TCP by page reference, and a Send or Write
# may complete only once TCP released every skb carrying those pages, that
# is once the peer ACKed the bytes. A driver that completes the request as
# soon as sendmsg() returned lets the user rewrite the buffer while the bytes
# not yet transmitted still wait in the socket's write queue: they go out
# changed. No spec-map entry: the checks are ZC-01 and ZC-02 of this file
# only (tests/vm/cases/zc-reuse.sh).
#
#   zc_reuse.py server ADDR PORT   the raw TCP MPA peer (passive, no CRC)
#   zc_reuse.py client ADDR PORT   the rdma_cm (pyverbs) client on rsiw
#
# The raw peer listens with a small receive buffer (RCVBUF), reads the MPA
# Request, refuses CRC and Markers, and accepts with an MPA Reply of the
# Request's revision (Rev 2: enhanced, client-server, IRD and ORD mirrored;
# no RTR is due in that model) whose private data is a sink's Tagged Offset
# and STag ('<QI', as the scripts' servers advertise a buffer). It never
# places anything: it only parses the FPDUs and compares their payload.
#
#   ZC-01  the client sends one signalled 1 MiB Send from a buffer of
#          pattern A; as soon as it completed it fills the buffer with 0xEE.
#   ZC-02  the same with eight 128 KiB RDMA Writes from eight buffers into
#          the advertised sink, unsignalled but the last (sq_sig_all=0); all
#          eight buffers are filled with 0xEE once the last one completed.
#
# For each check the raw peer waits for the first byte, then reads nothing
# for PAUSE seconds: its window closes and the rest of the message stays in
# rsiw's TCP write queue (zc-reuse.sh raises the sockets' initial send
# buffer so that all of it fits), referencing the user's pages. Then it
# reads the message, reassembles it by MO (ZC-01: untagged Send, QN 0, MSN 1)
# or TO (ZC-02: tagged Writes to the STag it advertised) and compares it
# byte for byte with the pattern; a mismatch names the first bad offset
# (0xEE there: those bytes were transmitted after the overwrite).
#
# The client checks that each request completed with IBV_WC_SUCCESS within
# 30 s and that the device's hw counter tx_zc_batches grew during each
# check: otherwise zero-copy never engaged and the check proves nothing. It
# logs tx_zc_copied (batches TCP copied all the same, as when it delivers
# them to a local socket: the peer's). And the request must not have
# completed before EARLIEST after the post: its last batch sent by reference
# lies beyond the peer's window and can be ACKed only once the peer reads
# again, PAUSE after the first byte: a driver that completes the request
# when sendmsg() returned fails here even where the overwrite happens to
# miss the bytes still queued. Then it
# disconnects; the raw peer must see the close and nothing more.
#
# Exits 0 if all pass, 1 with a message otherwise.

import random
import socket
import struct
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QPCap, QPInitAttr

import cmutil
from cmutil import conn_param, fail, log, next_event
from mpa_raw import KEY_REP, KEY_REQ
from mpa_responder import FLAG_C, FLAG_M, FLAG_S

cmutil.NAME = 'zc_reuse'

SEND_SIZE = 1 << 20
WRITES = 8
WRITE_SIZE = 128 << 10
# The peer's SO_RCVBUF (the kernel doubles it): a window far below the
# messages, so that most of each stays in rsiw's write queue.
RCVBUF = 16 << 10
PAUSE = 1.5
# With zero-copy a request completes once the peer ACKed its last batch sent
# by reference, which lies beyond the peer's window: not before the peer
# read again, PAUSE after the first byte, itself after the post.
EARLIEST = PAUSE - 0.5
COMP_TIMEOUT = 30
# What the peer advertises: any STag will do, the peer checks bytes by TO.
SINK_STAG = 0x5a5a0100
SINK_TO = 0x7f0000000000
OVERWRITE = 0xEE
# DDP (RFC 5041): the T and L flags; RDMAP (RFC 5040): the opcodes.
DDP_T, DDP_L = 0x80, 0x40
OP_WRITE, OP_SEND, OP_SEND_SE = 0x0, 0x3, 0x5


def send_pattern():
    return random.Random(0x2c01).randbytes(SEND_SIZE)


def write_pattern(i):
    return random.Random(0x2c20 + i).randbytes(WRITE_SIZE)


def first_diff(got, want):
    """The first offset where got and want differ (their common length if
    one is a prefix of the other), or None."""
    if got == want:
        return None
    n = min(len(got), len(want))
    lo, hi = 0, n
    # Bisect on equal prefixes: byte-wise loops over 1 MiB are slow here.
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if got[lo:mid] == want[lo:mid]:
            lo = mid
        else:
            hi = mid
    for i in range(lo, hi):
        if got[i] != want[i]:
            return i
    return n


def report_diff(what, got, want):
    off = first_diff(got, want)
    if off is None:
        return
    bad = sum(1 for i in range(off, min(len(got), len(want)))
              if got[i] == OVERWRITE and want[i] != OVERWRITE)
    fail(f'{what}: payload differs from the pattern at offset {off} of {len(want)} '
         f'(got {got[off:off + 8].hex()}, want {want[off:off + 8].hex()}); from there '
         f'{bad} bytes are {OVERWRITE:#x} where the pattern is not: if many, they were '
         f'transmitted after the overwrite, the request completed while TCP held the pages')


# --- the raw peer --------------------------------------------------------------

class Stream:
    """Buffered reads of the TCP stream from rsiw."""

    def __init__(self, s):
        self.s = s
        self.buf = bytearray()
        self.pos = 0

    def take(self, n, what):
        while len(self.buf) - self.pos < n:
            try:
                b = self.s.recv(1 << 18)
            except socket.timeout:
                fail(f'{what}: nothing from rsiw for {self.s.gettimeout()} s '
                     f'({len(self.buf) - self.pos} of {n} bytes)')
            if not b:
                fail(f'{what}: EOF with {len(self.buf) - self.pos} of {n} bytes')
            if self.pos:
                del self.buf[:self.pos]
                self.pos = 0
            self.buf += b
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def wait_data(self, what):
        """Until a byte is there to read (read nothing)."""
        if self.pos < len(self.buf):
            return
        try:
            if not self.s.recv(1, socket.MSG_PEEK):
                fail(f'{what}: EOF before the first byte')
        except socket.timeout:
            fail(f'{what}: nothing from rsiw for {self.s.gettimeout()} s')

    def fpdu(self, what):
        """The ULPDU of the next FPDU (no Markers; the CRC field is not
        checked: CRC is off)."""
        (n,) = struct.unpack('>H', self.take(2, what))
        ulpdu = self.take(n, what)
        self.take(-(2 + n) % 4 + 4, what)
        return ulpdu

    def at_eof(self, secs):
        """Whether the stream ends within secs with nothing more."""
        self.s.settimeout(secs)
        try:
            b = self.s.recv(4096)
        except socket.timeout:
            return False, b''
        except ConnectionResetError:
            return True, b'(reset)'
        rest = bytes(self.buf[self.pos:]) + b
        return not b, rest


def accept_mpa(st):
    """Reads the MPA Request and accepts it."""
    hdr = st.take(20, 'MPA Request')
    if hdr[:16] != KEY_REQ:
        fail(f'not an MPA Request: {hdr!r}')
    flags, rev = hdr[16], hdr[17]
    (pd_len,) = struct.unpack('>H', hdr[18:20])
    pd = st.take(pd_len, 'MPA Request private data')
    if flags & (FLAG_M | FLAG_C):
        fail(f'the MPA Request asks for Markers or CRC (flags {flags:#x}): zero-copy '
             f'needs CRC off (rsiw without mpa_crc_required)')
    sink = struct.pack('<QI', SINK_TO, SINK_STAG)
    if rev >= 2 and flags & FLAG_S:
        if pd_len < 4:
            fail(f'an enhanced Request with PD_Length {pd_len}')
        ird, ord_ = struct.unpack('>HH', pd[:4])
        if ird & 0x8000:
            fail(f'the Request asks for peer-to-peer (IRD word {ird:#x}): rsiw must '
                 f'run client-server here')
        # Our IRD for its ORD, our ORD within its IRD: a Reply it takes.
        enh = struct.pack('>HH', ord_ & 0x3FFF, ird & 0x3FFF)
        rep = KEY_REP + bytes([FLAG_S, 2]) + struct.pack('>H', 4 + len(sink)) + enh + sink
        log(f'MPA Request rev 2, flags {flags:#x}, IRD {ird:#x} ORD {ord_:#x}: '
            f'enhanced Reply, no CRC')
    else:
        rep = KEY_REP + bytes([0, 1]) + struct.pack('>H', len(sink)) + sink
        log(f'MPA Request rev {rev}, flags {flags:#x}: Rev 1 Reply, no CRC')
    st.s.sendall(rep)


def pause(st, check):
    """The window closes behind the first bytes of check's message."""
    st.wait_data(check)
    time.sleep(PAUSE)
    log(f'{check}: read nothing for {PAUSE} s after the first byte')


def reassemble(st, check, msgs, total, head):
    """Reads the FPDUs of msgs messages of total / msgs bytes each, back to
    back, and returns (their payload, the number of FPDUs). head(u, n, off)
    checks the header of FPDU n, whose payload must start at byte off of the
    whole, and returns its payload."""
    got = bytearray(total)
    off = n = last = 0
    while last < msgs:
        u = st.fpdu(check)
        data = head(u, n, off)
        if off + len(data) > total:
            fail(f'{check}: FPDU {n} at {off} with {len(data)} bytes: beyond {total}')
        got[off:off + len(data)] = data
        off += len(data)
        n += 1
        if u[0] & DDP_L:
            last += 1
            if off != last * (total // msgs):
                fail(f'{check}: message {last - 1} ended at {off}, '
                     f'want {last * (total // msgs)}')
    return bytes(got), n


def recv_send(st):
    check = 'ZC-01'
    pause(st, check)

    def head(u, n, mo):
        if len(u) < 18 or u[0] & DDP_T or u[1] & 0x0f not in (OP_SEND, OP_SEND_SE):
            fail(f'{check}: FPDU {n} is not an untagged Send: {u[:18].hex()}')
        qn, msn, fmo = struct.unpack('>III', u[6:18])
        if qn != 0 or msn != 1 or fmo != mo:
            fail(f'{check}: FPDU {n}: QN {qn} MSN {msn} MO {fmo}; want QN 0 MSN 1 MO {mo}')
        return u[18:]

    got, n = reassemble(st, check, 1, SEND_SIZE, head)
    report_diff(check, got, send_pattern())
    log(f'{check}: {n} FPDUs, {SEND_SIZE} bytes: the Send carries pattern A throughout')


def recv_writes(st):
    check = 'ZC-02'
    pause(st, check)

    def head(u, n, off):
        if len(u) < 14 or not u[0] & DDP_T or u[1] & 0x0f != OP_WRITE:
            fail(f'{check}: FPDU {n} is not an RDMA Write: {u[:14].hex()}')
        stag, to = struct.unpack('>IQ', u[2:14])
        if stag != SINK_STAG or to != SINK_TO + off:
            fail(f'{check}: FPDU {n}: STag {stag:#x} TO {to:#x}; '
                 f'want STag {SINK_STAG:#x} TO {SINK_TO + off:#x}')
        return u[14:]

    got, n = reassemble(st, check, WRITES, WRITES * WRITE_SIZE, head)
    for i in range(WRITES):
        report_diff(f'{check}: Write {i}', got[i * WRITE_SIZE:(i + 1) * WRITE_SIZE],
                    write_pattern(i))
    log(f'{check}: {n} FPDUs, {WRITES} Writes of {WRITE_SIZE} bytes: each carries '
        f'its buffer\'s pattern throughout')


def server(addr, port):
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Before listen: the accepted socket inherits it, and the window scale
    # of its SYN-ACK follows from it.
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    lsock.bind((addr, int(port)))
    lsock.listen(1)
    lsock.settimeout(60)
    log('listening')
    try:
        s, peer = lsock.accept()
    except socket.timeout:
        fail('no connection within 60 s')
    s.settimeout(COMP_TIMEOUT)
    rcvbuf = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    log(f'connection from {peer[0]}:{peer[1]}, SO_RCVBUF {rcvbuf}')
    st = Stream(s)
    accept_mpa(st)
    recv_send(st)
    recv_writes(st)
    eof, rest = st.at_eof(COMP_TIMEOUT)
    if not eof or rest:
        fail(f'after the Writes: {rest[:32].hex() or "nothing"}, eof={eof}; want the '
             f'close alone')
    log('the client closed')
    s.close()


# --- the rdma_cm client on rsiw ------------------------------------------------

def counters(dev):
    """(tx_zc_batches, tx_zc_copied) of dev's port 1."""
    out = []
    for name in ('tx_zc_batches', 'tx_zc_copied'):
        path = f'/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}'
        try:
            with open(path, encoding='ascii') as f:
                out.append(int(f.read()))
        except OSError as ex:
            fail(f'{path}: {ex}: rsiw without zero-copy TX counters')
    return tuple(out)


def poll_one(cq, what):
    """The next completion on cq, within COMP_TIMEOUT s."""
    end = time.monotonic() + COMP_TIMEOUT
    while True:
        n, wcs = cq.poll(1)
        if n:
            return wcs[0]
        if time.monotonic() > end:
            fail(f'{what}: no completion within {COMP_TIMEOUT} s')
        time.sleep(0.0005)


def engaged(check, dev, before, t):
    """The counters across check: zero-copy must have engaged."""
    after = counters(dev)
    batches, copied = after[0] - before[0], after[1] - before[1]
    log(f'{check}: tx_zc_batches +{batches} (now {after[0]}), tx_zc_copied +{copied} '
        f'(now {after[1]}); completed {t:.2f} s after the post')
    if batches <= 0:
        fail(f'{check}: tx_zc_batches did not grow: zero-copy never engaged, the check '
             f'proves nothing')
    if t < EARLIEST:
        fail(f'{check}: completed {t:.2f} s after the post, but the peer read nothing for '
             f'{PAUSE} s after the first byte: the bytes beyond its window were not ACKed, '
             f'TCP still held the pages')


def client(addr, port):
    ch, cmid = cmutil.resolve(addr, port)
    dev = cmid.dev_name
    cq = CQ(cmid.context, 32, None, None, 0)
    cap = QPCap(max_send_wr=16, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    cmid.create_qp(QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap, sq_sig_all=0))
    smr = MR(cmid.pd, SEND_SIZE, e.IBV_ACCESS_LOCAL_WRITE)
    smr.write(send_pattern(), SEND_SIZE, 0)
    wmrs = []
    for i in range(WRITES):
        mr = MR(cmid.pd, WRITE_SIZE, e.IBV_ACCESS_LOCAL_WRITE)
        mr.write(write_pattern(i), WRITE_SIZE, 0)
        wmrs.append(mr)
    cmid.connect(conn_param())
    pd = next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, 'connect')
    if len(pd) < 12:
        fail(f'the Reply\'s private data {pd.hex()} has no sink')
    to, stag = struct.unpack('<QI', pd[:12])
    log(f'connected on {dev}: sink TO {to:#x} STag {stag:#x}')

    check = 'ZC-01'
    before = counters(dev)
    t0 = time.monotonic()
    cmid.post_send(smr, e.IBV_SEND_SIGNALED, SEND_SIZE)
    wc = poll_one(cq, check)
    t = time.monotonic() - t0
    smr.write(bytes([OVERWRITE]) * SEND_SIZE, SEND_SIZE, 0)
    if wc.status != e.IBV_WC_SUCCESS or wc.opcode != e.IBV_WC_SEND:
        fail(f'{check}: the Send completed with status {wc.status} opcode {wc.opcode}')
    log(f'{check}: the 1 MiB Send completed, its buffer overwritten with {OVERWRITE:#x}')
    engaged(check, dev, before, t)

    check = 'ZC-02'
    before = counters(dev)
    t0 = time.monotonic()
    for i, mr in enumerate(wmrs):
        flags = e.IBV_SEND_SIGNALED if i == WRITES - 1 else 0
        cmid.post_write(mr, WRITE_SIZE, to + i * WRITE_SIZE, stag, flags=flags)
    wc = poll_one(cq, check)
    t = time.monotonic() - t0
    for mr in wmrs:
        mr.write(bytes([OVERWRITE]) * WRITE_SIZE, WRITE_SIZE, 0)
    if wc.status != e.IBV_WC_SUCCESS or wc.opcode != e.IBV_WC_RDMA_WRITE:
        fail(f'{check}: the last Write completed with status {wc.status} opcode {wc.opcode}')
    n, extra = cq.poll(1)
    if n:
        fail(f'{check}: a completion for an unsignalled Write: status {extra[0].status}')
    log(f'{check}: the eight Writes completed, their buffers overwritten with '
        f'{OVERWRITE:#x}')
    engaged(check, dev, before, t)

    cmid.disconnect()
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, 'disconnect')
    log('disconnected')
    for mr in wmrs + [smr]:
        mr.close()
    cmid.close()
    cq.close()
    ch.close()


if __name__ == '__main__':
    cmutil.run_role(server, client)
