#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# The responder and the initiator's first FPDU. A raw TCP initiator asks an
# rdma_cm listener for the peer-to-peer model with the zero-length Write RTR
# (A=1, C=1) and checks the Reply offers it (MPA-16, MPA-19); then it
# connects client-server and sends data and its FIN at once, behind the
# Reply and then behind its Request. Four connections, in this order:
#
# - rtr:    the initiator sends the zero-length Write RTR: the connection is
#           established and stays up (no Terminate, no close) until the
#           initiator closes it;
# - no-rtr: the initiator sends a Send with data instead, a ULP message before
#           the RTR: the responder answers with TERM 2/0/07 (no matching RTR
#           option) and closes;
# - send-fin: a client-server Request (no A, no C); right behind the Reply the
#           initiator sends a Send of 4 bytes and its FIN in one TCP segment
#           (TCP_CORK): the responder places the Send in the posted receive
#           before it reports the close (ESTABLISHED, a successful receive of
#           the 4 bytes, DISCONNECTED), then closes without a Terminate. siw
#           sends its first Send and FIN this way when its ULP disconnects
#           as soon as the Send completed (conn-cycles-siw);
# - early-fin: the same Send and FIN right behind the Request, without
#           waiting for the Reply: the peer has closed before the ULP
#           accepts, so the accept fails with ECONNRESET (as on siw) and the
#           initiator gets no Reply, only the close.
#
#   mpa_rtr.py server ADDR PORT   the rdma_cm listener (pyverbs): accepts the
#                                 connections and sees each established, then
#                                 disconnected
#   mpa_rtr.py client ADDR PORT   the raw initiator
#
# Exits 0 if all pass, 1 with a message otherwise.

import errno
import socket
import struct
import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsRDMAError

import cmutil
from cmutil import conn_param, fail, log, next_event, qp_attr
from mpa_raw import KEY_REP, KEY_REQ, read_all
from mpa_responder import FLAG_C, FLAG_S, crc32c, recv_exact, terminate_fpdu

cmutil.NAME = 'mpa_rtr'

# Enhanced data of the Request: IRD 4 with A (peer-to-peer), ORD 4 with C
# (zero-length Write RTR).
REQ_IRD, REQ_ORD = 0x8000 | 4, 0x8000 | 4
SEND_DATA = b'data'


def fpdu(ulpdu, crc):
    body = struct.pack('>H', len(ulpdu)) + ulpdu
    body += bytes(-len(body) % 4)
    return body + (struct.pack('<I', crc32c(body)) if crc else bytes(4))


def write_rtr(crc):
    """The zero-length RDMA Write RTR: tagged, L=1, DV=1, opcode 0, STag 1."""
    return fpdu(bytes([0xC1, 0x40]) + struct.pack('>IQ', 1, 0), crc)


def send_with_data(crc):
    """A Send (opcode 3) of 4 bytes: untagged, L=1, QN 0, MSN 1, MO 0."""
    return fpdu(bytes([0x41, 0x43]) + struct.pack('>IIII', 0, 0, 1, 0) + SEND_DATA, crc)


def mpa_request(p2p):
    """A Rev 2 Request with enhanced data: peer-to-peer with the Write RTR,
    or client-server."""
    mask = 0xFFFF if p2p else 0x3FFF
    return KEY_REQ + bytes([FLAG_S, 2]) + struct.pack('>HHH', 4, REQ_IRD & mask, REQ_ORD & mask)


def send_and_fin(s, data):
    """Sends data and the FIN in one segment: corked, the data waits in the
    socket and the FIN goes out with it."""
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)


def handshake(addr, port, name, p2p=True):
    """Connects, sends the Request and reads the Reply. Returns (socket, CRC
    in use)."""
    s = socket.create_connection((addr, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(mpa_request(p2p))
    hdr = recv_exact(s, 20)
    if hdr[:16] != KEY_REP:
        fail(f'{name}: not an MPA Reply: {hdr!r}')
    flags, rev = hdr[16], hdr[17]
    (pd_len,) = struct.unpack('>H', hdr[18:20])
    pd = recv_exact(s, pd_len)
    if rev != 2 or not flags & FLAG_S or flags & 0x20 or pd_len < 4:
        fail(f'{name}: want an accepting enhanced Rev 2 Reply, got flags {flags:#x} rev {rev}')
    ird, ord_ = struct.unpack('>HH', pd[:4])
    if not p2p:
        if ird & 0xC000 or ord_ & 0xC000:
            fail(f'{name}: Reply IRD word {ird:#x} ORD word {ord_:#x}: want no A, no RTR')
        return s, bool(flags & FLAG_C)
    # MPA-14: A mirrored; the Write RTR we asked for is offered.
    if not ird & 0x8000 or not ord_ & 0x8000:
        fail(f'{name}: Reply IRD word {ird:#x} ORD word {ord_:#x}: want A=1 and C=1')
    return s, bool(flags & FLAG_C)


def client(addr, port):
    port = int(port)
    s, crc = handshake(addr, port, 'rtr')
    s.sendall(write_rtr(crc))
    data, eof = read_all(s, 3)
    if data or eof:
        fail(f'rtr: after the Write RTR got {data!r}, eof={eof}; want a quiet connection')
    log('rtr: the Write RTR is taken')
    s.close()

    s, crc = handshake(addr, port, 'no-rtr')
    s.sendall(send_with_data(crc))
    data, eof = read_all(s, 20)
    want = terminate_fpdu(2, 0, 7, crc)
    if data != want or not eof:
        fail(f'no-rtr: got {data.hex()}, eof={eof}; want {want.hex()} then close')
    log(f'no-rtr: TERM 2/0/07 ({"with" if crc else "no"} CRC), then close')

    s, crc = handshake(addr, port, 'send-fin', p2p=False)
    send_and_fin(s, send_with_data(crc))
    data, eof = read_all(s, 20)
    if data or not eof:
        fail(f'send-fin: got {data.hex()}, eof={eof}; want a close without a Terminate')
    log('send-fin: a Send and the FIN in one segment: placed, then closed')

    s = socket.create_connection((addr, port), timeout=30)
    send_and_fin(s, mpa_request(False) + send_with_data(False))
    data, eof = read_all(s, 20)
    if data or not eof:
        fail(f'early-fin: got {data.hex()}, eof={eof}; want a close without a Reply')
    log('early-fin: a Request, a Send and the FIN at once: no Reply, closed')


def server(addr, port):
    ch, lid = cmutil.listen(addr, port)
    for name in ('rtr', 'no-rtr'):
        child, _ = cmutil.get_request(ch, lid, name)
        child.create_qp(qp_attr())
        child.accept(conn_param())
        # The iw_cm reports an accepted connection that fails before its RTR
        # as established, then closed.
        next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, name)
        next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, name)
        cmutil.disconnect_after_peer(child, quiet=True)
        log(f'{name}: established, then disconnected')
    name = 'send-fin'
    child, _ = cmutil.get_request(ch, lid, name)
    child.create_qp(qp_attr())
    buf = child.reg_msgs(64)
    child.post_recv(buf, 64)
    child.accept(conn_param())
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, name)
    wc = child.get_recv_comp()
    data = bytes(buf.read(len(SEND_DATA), 0))
    if wc.status != e.IBV_WC_SUCCESS or wc.byte_len != len(SEND_DATA) or data != SEND_DATA:
        fail(f'{name}: receive status {wc.status} length {wc.byte_len} data {data!r}')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, name)
    cmutil.disconnect_after_peer(child, quiet=True)
    buf.close()
    log(f'{name}: established, the Send received, then disconnected')
    name = 'early-fin'
    child, _ = cmutil.get_request(ch, lid, name)
    child.create_qp(qp_attr())
    try:
        child.accept(conn_param())
    except PyverbsRDMAError as ex:
        if ex.error_code != errno.ECONNRESET:
            fail(f'{name}: accept failed with {ex}, want ECONNRESET')
    else:
        fail(f'{name}: the accept of a connection its peer had closed succeeded')
    log(f'{name}: the accept failed with ECONNRESET')


if __name__ == '__main__':
    cmutil.run_role(server, client)
