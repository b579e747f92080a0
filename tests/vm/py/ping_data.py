#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# rping -V's exchange at sizes beyond rping's buffers (rping stops below
# 64 KiB), up to 1 MiB, over one rdma_cm connection:
#
#   ping_data.py server ADDR PORT
#   ping_data.py client ADDR PORT
#
# For each size and iteration the client fills its source buffer with a
# pattern that differs from the previous ping's, clears its sink buffer and
# Sends the source's address, rkey and length. The server RDMA-Reads the
# source and checks every byte, Sends "read done", receives the sink's
# address and RDMA-Writes the data there, then Sends "write done"; the client
# checks every byte of the sink. Every work request is signalled and its
# completion status and opcode checked. A wrong byte is reported with its
# offset and whether it holds the previous ping's data. Exits 0 on success.

import struct
import pyverbs.cm_enums as ce
import pyverbs.enums as e

import cmutil
from cmutil import conn_param, fail, log, next_event

cmutil.NAME = 'ping_data'

SIZES = (64, 4095, 65536, 1048576)
ITERS = 3
MAX = max(SIZES)
MSG = 16
# Message tags (the third field of a message).
READ_DONE = 0xfffffff0
WRITE_DONE = 0xfffffff1

# A byte sequence whose windows differ for every start below 251.
_BASE = bytes(range(251)) * (MAX // 251 + 2)


def pattern(size, it):
    seed = (size * 13 + it * 7 + 1) % 251
    return _BASE[seed:seed + size]


def check(what, got, size, it):
    want = pattern(size, it)
    if got == want:
        return
    bad = next(i for i in range(size) if got[i] != want[i])
    end = bad
    while end < size and got[end] != want[end]:
        end += 1
    stale = it > 0 and got[bad:end] == pattern(size, it - 1)[bad:end]
    fail(f'{what} of {size} bytes, ping {it}: bytes {bad}..{end - 1} wrong'
         f' (first {got[bad]:#04x}, expected {want[bad]:#04x})'
         f'{"; they hold the previous ping" if stale else ""}')


def send_msg(cmid, mr, addr, key, length):
    mr.write(struct.pack('<QII', addr, key, length), MSG, 0)
    cmid.post_send(mr, flags=e.IBV_SEND_SIGNALED, length=MSG)
    comp(cmid.get_send_comp(), e.IBV_WC_SEND, 'Send')


def recv_msg(cmid, mr):
    wc = cmid.get_recv_comp()
    comp(wc, e.IBV_WC_RECV, 'receive')
    if wc.byte_len != MSG:
        fail(f'receive of {wc.byte_len} bytes, expected {MSG}')
    msg = struct.unpack('<QII', bytes(mr.read(MSG, 0)))
    cmid.post_recv(mr, MSG)
    return msg


def msg_bufs(cmid):
    """Registers the receive and send message buffers of cmid and posts the
    first receive. Returns (rmsg, smsg)."""
    rmsg = cmid.reg_msgs(MSG)
    smsg = cmid.reg_msgs(MSG)
    cmid.post_recv(rmsg, MSG)
    return rmsg, smsg


def comp(wc, opcode, what):
    if wc.status != e.IBV_WC_SUCCESS or wc.opcode != opcode:
        fail(f'{what}: status {wc.status} opcode {wc.opcode}')


def server(addr, port):
    ch, lid = cmutil.listen(addr, port)
    child, _ = cmutil.get_request(ch, lid)
    child.create_qp(cmutil.qp_attr(wr=4, sge=1))
    buf = child.reg_msgs(MAX)
    rmsg, smsg = msg_bufs(child)
    child.accept(conn_param())
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    for size in SIZES:
        for it in range(ITERS):
            raddr, rkey, length = recv_msg(child, rmsg)
            if length != size:
                fail(f'source of {length} bytes announced, expected {size}')
            child.post_read(buf, size, raddr, rkey, flags=e.IBV_SEND_SIGNALED)
            comp(child.get_send_comp(), e.IBV_WC_RDMA_READ, 'Read')
            check('Read', bytes(buf.read(size, 0)), size, it)
            send_msg(child, smsg, 0, 0, READ_DONE)
            raddr, rkey, length = recv_msg(child, rmsg)
            if length != size:
                fail(f'sink of {length} bytes announced, expected {size}')
            child.post_write(buf, size, raddr, rkey, flags=e.IBV_SEND_SIGNALED)
            comp(child.get_send_comp(), e.IBV_WC_RDMA_WRITE, 'Write')
            send_msg(child, smsg, 0, 0, WRITE_DONE)
        log(f'{ITERS} pings of {size} bytes: Read data checked')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    cmutil.disconnect_after_peer(child, quiet=True)


def client(addr, port):
    ch, cmid = cmutil.resolve(addr, port, cmutil.qp_attr(wr=4, sge=1))
    src = cmid.reg_read(MAX)
    sink = cmid.reg_write(MAX)
    rmsg, smsg = msg_bufs(cmid)
    cmid.connect(conn_param())
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    zeros = bytes(MAX)
    for size in SIZES:
        for it in range(ITERS):
            src.write(pattern(size, it), size, 0)
            sink.write(zeros, size, 0)
            send_msg(cmid, smsg, src.buf, src.rkey, size)
            if recv_msg(cmid, rmsg)[2] != READ_DONE:
                fail('expected "read done"')
            send_msg(cmid, smsg, sink.buf, sink.rkey, size)
            if recv_msg(cmid, rmsg)[2] != WRITE_DONE:
                fail('expected "write done"')
            check('echo', bytes(sink.read(size, 0)), size, it)
        log(f'{ITERS} pings of {size} bytes: echo checked')
    cmid.disconnect()
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)


if __name__ == '__main__':
    cmutil.run_role(server, client)
