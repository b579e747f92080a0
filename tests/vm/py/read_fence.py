#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Reads beyond the ORD, then a fenced Send (RDMAP-07, RFC 5040 6.4 Read
# fence), over one rdma_cm connection:
#
#   read_fence.py server ADDR PORT
#   read_fence.py client ADDR PORT
#
# The server registers READS x 4 KiB for remote Read, filled with a pattern,
# posts one receive and accepts with the buffer's address and rkey as private
# data. The client connects with ORD 1 (initiator depth 1), posts READS
# signalled 4 KiB Reads of consecutive chunks into separate buffers, then a
# signalled Send with IBV_SEND_FENCE. Every Read but the first must wait for
# the ORD credit of the one before, and the Send for all of them: a requester
# that is not woken when a Read completes stalls here and the test times out.
# The client checks READS + 1 successful completions in order and every byte
# read; the server checks the Send arrived. Exits 0 on success.

import struct
import pyverbs.cm_enums as ce
import pyverbs.enums as e

import cmutil
from cmutil import conn_param, fail, log, next_event

cmutil.NAME = 'read_fence'

READS = 8
CHUNK = 4096
MSG = 64


def pattern(i):
    """The bytes of chunk i of the server's buffer."""
    return bytes((i * 37 + j * 7 + 1) & 0xff for j in range(CHUNK))


def server(addr, port):
    ch, lid = cmutil.listen(addr, port)
    child, _ = cmutil.get_request(ch, lid)
    child.create_qp(cmutil.qp_attr(wr=READS + 2, sge=1))
    buf = child.reg_read(READS * CHUNK)
    for i in range(READS):
        buf.write(pattern(i), CHUNK, i * CHUNK)
    rbuf = child.reg_msgs(MSG)
    child.post_recv(rbuf, MSG)
    child.accept(conn_param(struct.pack('<QII', buf.buf, buf.rkey, READS * CHUNK)))
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    wc = child.get_recv_comp()
    if wc.status != e.IBV_WC_SUCCESS or wc.byte_len != MSG:
        fail(f'receive: status {wc.status} byte_len {wc.byte_len}')
    log('fenced Send received')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    cmutil.disconnect_after_peer(child, quiet=True)


def client(addr, port):
    ch, cmid = cmutil.resolve(addr, port, cmutil.qp_attr(wr=READS + 2, sge=1))
    sinks = [cmid.reg_msgs(CHUNK) for _ in range(READS)]
    msg = cmid.reg_msgs(MSG)
    cmid.connect(conn_param())
    pd = next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    raddr, rkey, _ = struct.unpack('<QII', pd[:16])
    sig = e.IBV_SEND_SIGNALED
    for i, sink in enumerate(sinks):
        cmid.post_read(sink, CHUNK, raddr + i * CHUNK, rkey, flags=sig)
    cmid.post_send(msg, flags=sig | e.IBV_SEND_FENCE)
    want = [e.IBV_WC_RDMA_READ] * READS + [e.IBV_WC_SEND]
    for i, op in enumerate(want):
        wc = cmid.get_send_comp()
        if wc.status != e.IBV_WC_SUCCESS or wc.opcode != op:
            fail(f'completion {i}: status {wc.status} opcode {wc.opcode}, expected {op}')
    for i, sink in enumerate(sinks):
        if bytes(sink.read(CHUNK, 0)) != pattern(i):
            fail(f'Read {i}: wrong data')
    log(f'{READS} Reads with ORD 1 and a fenced Send completed in order, data checked')
    cmid.disconnect()
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)


if __name__ == '__main__':
    cmutil.run_role(server, client)
