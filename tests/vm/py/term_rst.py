#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# A peer that fails the connection with a Terminate and then resets it: the
# Terminate still decides the outstanding request's status (spec-map TERM-05:
# the requester reports the peer's error), whether rsiw read it at once or
# left it to its work item when the reset came. And a peer that closes
# gracefully right behind its last message: that message is placed. The C siw ends this way
# after an FPDU it refuses (it releases its socket with the rest of that FPDU
# unread, so TCP sends a RST right behind the Terminate): commit-siw and
# ext-siw.
#
#   term_rst.py server ADDR PORT   the rdma_cm (pyverbs) server on rsiw
#   term_rst.py client ADDR PORT   the raw TCP peer (MPA Rev 1, no CRC)
#
# One connection per check. The server registers a 4 KiB buffer with remote
# write, posts a 64-byte receive, accepts with the buffer's address and rkey
# as private data, and posts a signalled 8-byte RDMA Read from the raw peer. The raw peer reads the Read
# Request and answers, in one send, with:
#
#   inline    a Terminate (0/1/00: invalid STag)
#   deferred  four 4 KiB RDMA Writes of a pattern into the buffer, then the
#             same Terminate: more than rsiw reads in its data_ready
#             callback (RX_INLINE_MAX), so its work item reads it
#
# and closes with SO_LINGER 0, a RST right behind; or
#
#   fin       the four Writes and an 8-byte Send, then a graceful close (FIN)
#
# With fault_work_delay_ms (term-rst.sh) rsiw's work item sleeps after each
# run, so the reset or FIN reaches rsiw's connection manager before the work
# item read the deferred bytes: the connection manager places them first.
#
# The Read must complete with IBV_WC_REM_ACCESS_ERR (not WR_FLUSH_ERR: the
# Terminate lost), or for fin with WR_FLUSH_ERR (no Terminate came); the
# buffer hold the pattern (deferred, fin); the receive complete with the
# Send's 8 bytes (fin) or be flushed; the server see DISCONNECTED with its
# QP in ERROR. Exits 0 if all pass, 1 with a message otherwise.

import socket
import struct
import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.mr import MR

import cmutil
from cmutil import conn_param, fail, log
import rawpeer
from rawpeer import first_write, untagged, write
from mpa_responder import recv_exact

cmutil.NAME = 'term_rst'

SIZE = 4096
CHECKS = ('inline', 'deferred', 'fin')
SEND = b'rsiw-fin'
WRITES = 4
# RDMAP (layer 0), remote protection (type 1), invalid STag (code 0); no
# headers echoed.
TERM_CTRL = bytes([0x01, 0x00, 0x00, 0x00])


def pattern(check):
    return bytes((i * 7 + len(check)) & 0xff for i in range(SIZE))


def server(addr, port):
    lst = cmutil.Listener(addr, port)
    children = []
    for check in CHECKS:
        child, _ = lst.request(check)
        children.append(child)
        child.create_qp(cmutil.qp_attr(wr=4, sge=1))
        rw = MR(child.pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        rw.write(bytes(SIZE), SIZE, 0)
        sink = child.reg_msgs(64)
        rbuf = child.reg_msgs(64)
        child.post_recv(rbuf, 64)
        child.accept(conn_param(struct.pack('<QI', rw.buf, rw.rkey)))
        lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, check)
        child.post_read(sink, 8, 0x10000, 0x1234, flags=e.IBV_SEND_SIGNALED)
        wc = child.get_send_comp()
        lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, check)
        rwc = child.get_recv_comp()
        state = cmutil.qp_state_after_close(child)
        log(f'{check}: Read status {wc.status}, receive status {rwc.status} length '
            f'{rwc.byte_len}, QP state {state}')
        if check == 'fin':
            if wc.status != e.IBV_WC_WR_FLUSH_ERR:
                fail(f'{check}: Read status {wc.status}, want WR_FLUSH_ERR')
            got = bytes(rbuf.read(len(SEND), 0))
            if rwc.status != e.IBV_WC_SUCCESS or rwc.byte_len != len(SEND) or got != SEND:
                fail(f'{check}: receive status {rwc.status} length {rwc.byte_len} bytes '
                     f'{got!r}: the Send before the FIN was not placed')
        else:
            if wc.status != e.IBV_WC_REM_ACCESS_ERR:
                fail(f'{check}: Read status {wc.status}, want REM_ACCESS_ERR '
                     f'({e.IBV_WC_REM_ACCESS_ERR}): the Terminate before the reset was lost')
            if rwc.status != e.IBV_WC_WR_FLUSH_ERR:
                fail(f'{check}: receive status {rwc.status}, want WR_FLUSH_ERR')
        if state != e.IBV_QPS_ERR:
            fail(f'{check}: QP state {state}, want ERROR')
        got = bytes(rw.read(SIZE, 0))
        want = bytes(SIZE) if check == 'inline' else pattern(check)
        if got != want:
            fail(f'{check}: the buffer does not hold what the peer wrote before its '
                 f'Terminate (first bytes {got[:8].hex()}, want {want[:8].hex()})')
        cmutil.check_done(child, check, rw, sink, rbuf)
    for child in children:
        child.close()


def read_fpdu(s):
    """One FPDU (no CRC, no Markers) from s."""
    (n,) = struct.unpack('>H', recv_exact(s, 2))
    rest = recv_exact(s, n + (-(2 + n) % 4) + 4)
    return struct.pack('>H', n) + rest


def client(addr, port):
    port = int(port)
    for check in CHECKS:
        s, pdata = rawpeer.connect(addr, port)
        a, k = struct.unpack('<QI', pdata[:12])
        s.sendall(first_write())
        f = read_fpdu(s)
        if len(f) < 4 or f[3] & 0x0f != 1:
            fail(f'{check}: rsiw sent {f.hex()}, not a Read Request')
        burst = b''
        if check != 'inline':
            burst = b''.join(write(k, a, pattern(check)) for _ in range(WRITES))
        if check == 'fin':
            # A Send (QN 0, MSN 1) into the posted receive, then a FIN.
            burst += untagged(0x3, 0, 1, SEND)
            s.sendall(burst)
            s.close()
            log(f'{check}: sent {len(burst)} bytes, a Send last, then a FIN')
            continue
        # The Terminate's DDP header: QN 2 (Terminate), MSN 1.
        burst += untagged(0x7, 2, 1, TERM_CTRL)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        s.sendall(burst)
        s.close()
        log(f'{check}: sent {len(burst)} bytes, the Terminate last, then a RST')


if __name__ == '__main__':
    cmutil.run_role(server, client)
