#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Data-path Terminate: a tagged access the responder must refuse, over one
# rdma_cm connection per check, checked on both sides.
#
#   term_access.py server ADDR PORT CHECK [siw]
#   term_access.py client ADDR PORT CHECK [siw]
#
# The server registers a 4 KiB buffer (remote Read and Write, or remote Read
# only for "write-ro"), posts one receive, and accepts with the buffer's
# address and rkey as private data. The client then issues, signalled:
#
#   read-stag   an RDMA Read from a wrong STag (index + 1);
#   read-oob    an RDMA Read running 64 bytes past the end of the buffer;
#   write-stag  an RDMA Write to a wrong STag, then a Send;
#   write-ro    an RDMA Write to the read-only buffer, then a Send;
#   write-late  two RDMA Writes of 16 bytes into the buffer (at 0 and 64),
#               each waited for, then one to a wrong STag: small Writes
#               after the stream's first message (rsiw places them from its
#               header copy in one step, RxParser::feed_whole). The server
#               checks both good Writes' bytes.
#
# The responder must answer with a Terminate and go to ERROR. The client
# must see IBV_WC_REM_ACCESS_ERR for the Read (with "siw", for the C siw as
# client: WR_FLUSH_ERR is accepted too, as siw flushes its outstanding Reads
# on a Terminate instead of reporting the peer's error; as server, siw does
# not flush the posted receive, so that is checked on rsiw only), and for the
# Write REM_ACCESS_ERR or SUCCESS (a Write completes once handed to TCP,
# before the Terminate can arrive); then DISCONNECTED and its QP in ERROR. The server's
# receive must be flushed (WR_FLUSH_ERR), never completed with data, and it
# sees DISCONNECTED. Exits 0 on success, 1 with a message otherwise.

import struct
import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e

import cmutil
from cmutil import conn_param, fail, log, next_event

cmutil.NAME = 'term_access'

SIZE = 4096
# write-late: 16 bytes, so that the whole FPDU fits rsiw's 72-byte header copy.
PATTERN = bytes((i * 7 + 3) & 0xff for i in range(16))
CHECKS = ('read-stag', 'read-oob', 'write-stag', 'write-ro', 'write-late')


def qp_attr():
    return cmutil.qp_attr(wr=4, sge=1)


def qp_state(cmid):
    attr, _ = cmid.query_qp(e.IBV_QP_STATE)
    return attr.qp_state


def server(addr, port, check, siw=False):
    ch, lid = cmutil.listen(addr, port)
    child, _ = cmutil.get_request(ch, lid)
    child.create_qp(qp_attr())
    buf = child.reg_read(SIZE) if check == 'write-ro' else child.reg_write(SIZE)
    rbuf = child.reg_msgs(SIZE)
    child.post_recv(rbuf, SIZE)
    child.accept(conn_param(struct.pack('<QII', buf.buf, buf.rkey, SIZE)))
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    log(f'established; buffer {buf.buf:#x} rkey {buf.rkey:#x}')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    log('disconnected')
    if siw:
        # siw does not flush a user QP's posted receive on a Terminate it sent.
        log('siw: receive flush not checked')
        return
    wc = child.get_recv_comp()
    if wc.status != e.IBV_WC_WR_FLUSH_ERR:
        fail(f'receive completed with status {wc.status}, expected WR_FLUSH_ERR')
    log('receive flushed')
    if check == 'write-late':
        for off in (0, 64):
            if bytes(buf.read(len(PATTERN), off)) != PATTERN:
                fail(f'the Write to offset {off} did not land')
        log('write-late: both good Writes landed')
    st = qp_state(child)
    if st != e.IBV_QPS_ERR:
        fail(f'server QP state {st}, expected ERROR')
    cmutil.disconnect_after_peer(child)


def client(addr, port, check, siw=False):
    ch, cmid = cmutil.resolve(addr, port, qp_attr())
    local = cmid.reg_msgs(SIZE)
    cmid.connect(conn_param())
    pd = next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    raddr, rkey, size = struct.unpack('<QII', pd[:16])
    log(f'established; remote buffer {raddr:#x} rkey {rkey:#x} size {size}')
    bad_rkey = cmutil.BAD_STAG
    sig = e.IBV_SEND_SIGNALED
    if check == 'read-stag':
        cmid.post_read(local, 64, raddr, bad_rkey, flags=sig)
    elif check == 'read-oob':
        cmid.post_read(local, 128, raddr + size - 64, rkey, flags=sig)
    elif check == 'write-stag':
        cmid.post_write(local, 64, raddr, bad_rkey, flags=sig)
    elif check == 'write-late':
        local.write(PATTERN, len(PATTERN), 0)
        for off in (0, 64):
            cmid.post_write(local, len(PATTERN), raddr + off, rkey, flags=sig)
            wc = cmid.get_send_comp()
            if wc.status != e.IBV_WC_SUCCESS:
                fail(f'Write to offset {off} completed with status {wc.status}')
        cmid.post_write(local, len(PATTERN), raddr, bad_rkey, flags=sig)
    else:
        cmid.post_write(local, 64, raddr, rkey, flags=sig)
    wc = cmid.get_send_comp()
    log(f'{check}: completion status {wc.status} opcode {wc.opcode}')
    if check.startswith('read'):
        if siw and wc.status == e.IBV_WC_WR_FLUSH_ERR:
            log('siw flushed the Read (it does not report the peer\'s Terminate)')
        elif wc.status != e.IBV_WC_REM_ACCESS_ERR:
            fail(f'Read completed with status {wc.status}, expected REM_ACCESS_ERR')
    elif wc.status == e.IBV_WC_SUCCESS:
        # A Write completes once handed to TCP, before the peer's Terminate
        # can arrive (so would a Send posted right after it).
        log(f'{check}: the Write completed when it was sent')
    elif siw and wc.status in (e.IBV_WC_LOC_QP_OP_ERR, e.IBV_WC_WR_FLUSH_ERR):
        # siw moves the QP to ERROR on the peer's Terminate; a Write it had
        # not completed yet then completes with a local status (seen: 2).
        log(f'{check}: siw completed the Write with status {wc.status} after the Terminate')
    elif wc.status != e.IBV_WC_REM_ACCESS_ERR:
        fail(f'Write completed with status {wc.status}, expected REM_ACCESS_ERR or SUCCESS')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    log('disconnected')
    st = cmutil.qp_state_after_close(cmid, siw)
    if st != e.IBV_QPS_ERR:
        fail(f'client QP state {st}, expected ERROR')
    cmutil.disconnect_after_peer(cmid)


def main():
    if len(sys.argv) not in (5, 6) or sys.argv[1] not in ('server', 'client') or \
            sys.argv[4] not in CHECKS:
        fail(f'usage: term_access.py server|client ADDR PORT {"|".join(CHECKS)} [siw]')
    role, addr, port, check = sys.argv[1:5]
    if role == 'server':
        server(addr, port, check, sys.argv[5:] == ['siw'])
    else:
        client(addr, port, check, sys.argv[5:] == ['siw'])
    log('ok')


if __name__ == '__main__':
    main()
