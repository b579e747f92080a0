#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# The server of tests/vm/cases/ext-siw.sh, on the C siw, which has no RFC
# 7306: registers a page with every remote right, accepts one connection
# with the page's address and rkey as private data (the layout rsiw_kext's
# peer= mode reads: u64 address, u32 rkey), posts a receive, and waits for
# the connection to go: rsiw's FetchAdd must have been refused with a
# Terminate. Checks that the page is unchanged and the QP in ERROR.
#
#   ext_siw.py ADDR PORT

import struct
import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.mr import MR

import cmutil
from cmutil import conn_param, fail, log

cmutil.NAME = 'ext_siw'
SIZE = 4096
INIT = 0x0102030405060708


def main():
    if len(sys.argv) != 3:
        fail('usage: ext_siw.py ADDR PORT')
    lst = cmutil.Listener(sys.argv[1], sys.argv[2])
    child, _ = lst.request()
    child.create_qp(cmutil.qp_attr(wr=4, sge=1))
    access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ |
              e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_ATOMIC)
    try:
        mr = MR(child.pd, SIZE, access)
    except Exception as ex:  # pylint: disable=broad-except
        log(f'remote atomic access refused ({ex}): remote read and write only')
        mr = MR(child.pd, SIZE, access & ~e.IBV_ACCESS_REMOTE_ATOMIC)
    mr.write(struct.pack('<Q', INIT) * (SIZE // 8), SIZE, 0)
    rbuf = child.reg_msgs(64)
    child.post_recv(rbuf, 64)
    child.accept(conn_param(struct.pack('<QI', mr.buf, mr.rkey)))
    lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED)
    log(f'established; page {mr.buf:#x} rkey {mr.rkey:#x}')
    lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED)
    (word,) = struct.unpack('<Q', bytes(mr.read(8, 0)))
    state = cmutil.qp_state_after_close(child, siw=True)
    log(f'disconnected: word {word:#x}, QP state {state}')
    if word != INIT:
        fail(f'the word changed to {word:#x}')
    if state != e.IBV_QPS_ERR:
        fail(f'QP state {state}, want ERROR')
    cmutil.disconnect_after_peer(child, quiet=True)
    log('ok')


if __name__ == '__main__':
    main()
