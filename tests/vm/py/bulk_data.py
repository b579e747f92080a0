#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Every byte of large unsignalled Writes and Sends arrives (the path a
# sender may take by reference instead of copying), over one rdma_cm
# connection:
#
#   bulk_data.py server ADDR PORT
#   bulk_data.py client ADDR PORT
#
# The server registers COUNT x SIZE for remote Write, posts COUNT receives of
# SIZE and accepts with the buffer's address and rkey as private data. The
# client writes COUNT chunks of SIZE, each from its own registered buffer,
# unsignalled, then sends COUNT messages of SIZE, all unsignalled but the
# last. The server checks every receive completion and every byte written
# and sent against the pattern, then disconnects. perftest and rping do not
# look at the data of unsignalled work requests; this does. Exits 0 on
# success.

import struct
import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.qp import QPCap, QPInitAttr

import cmutil
from cmutil import conn_param, fail, log, next_event

cmutil.NAME = 'bulk_data'

COUNT = 8
SIZE = 65536


# A byte sequence whose SIZE-long windows differ for every start below 251
# (251 is prime, so no window repeats within it).
_BASE = bytes(j % 251 for j in range(SIZE + 256))


def pattern(kind, i):
    """The bytes of chunk i of the Writes (kind 0) or the Sends (kind 1)."""
    seed = (kind * COUNT + i) * 7 + 1
    return _BASE[seed:seed + SIZE]


def server(addr, port):
    ch, lid = cmutil.listen(addr, port)
    child, _ = cmutil.get_request(ch, lid)
    child.create_qp(cmutil.qp_attr(wr=COUNT + 1, sge=1))
    wbuf = child.reg_write(COUNT * SIZE)
    rbufs = [child.reg_msgs(SIZE) for _ in range(COUNT)]
    for rbuf in rbufs:
        child.post_recv(rbuf, SIZE)
    child.accept(conn_param(struct.pack('<QII', wbuf.buf, wbuf.rkey, COUNT * SIZE)))
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    for i in range(COUNT):
        wc = child.get_recv_comp()
        if wc.status != e.IBV_WC_SUCCESS or wc.byte_len != SIZE:
            fail(f'receive {i}: status {wc.status} byte_len {wc.byte_len}')
    # The Sends follow the Writes on the same stream: all are placed now.
    for i in range(COUNT):
        if bytes(wbuf.read(SIZE, i * SIZE)) != pattern(0, i):
            fail(f'Write {i}: wrong data')
        if bytes(rbufs[i].read(SIZE, 0)) != pattern(1, i):
            fail(f'Send {i}: wrong data')
    log(f'{COUNT} Writes and {COUNT} Sends of {SIZE} bytes, unsignalled: data checked')
    child.disconnect()
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)


def client(addr, port):
    # sq_sig_all off (pyverbs defaults to on): only flagged WRs complete.
    cap = QPCap(max_send_wr=2 * COUNT + 1, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    attr = QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap, sq_sig_all=0)
    ch, cmid = cmutil.resolve(addr, port, attr)
    wsrc = [cmid.reg_msgs(SIZE) for _ in range(COUNT)]
    ssrc = [cmid.reg_msgs(SIZE) for _ in range(COUNT)]
    for i in range(COUNT):
        wsrc[i].write(pattern(0, i), SIZE, 0)
        ssrc[i].write(pattern(1, i), SIZE, 0)
    cmid.connect(conn_param())
    pd = next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    raddr, rkey, _ = struct.unpack('<QII', pd[:16])
    # One post per work request: each rings the doorbell on its own.
    for i in range(COUNT):
        cmid.post_write(wsrc[i], SIZE, raddr + i * SIZE, rkey, flags=0)
    for i in range(COUNT):
        cmid.post_send(ssrc[i], flags=e.IBV_SEND_SIGNALED if i == COUNT - 1 else 0)
    wc = cmid.get_send_comp()
    if wc.status != e.IBV_WC_SUCCESS or wc.opcode != e.IBV_WC_SEND:
        fail(f'send completion: status {wc.status} opcode {wc.opcode}')
    log(f'{2 * COUNT} work requests, unsignalled but the last, completed')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    cmutil.disconnect_after_peer(cmid, quiet=True)


if __name__ == '__main__':
    cmutil.run_role(server, client)
