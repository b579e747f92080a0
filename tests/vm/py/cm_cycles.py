#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# N rdma_cm connect/disconnect cycles over one listener, checked on both
# sides:
#
#   cm_cycles.py server ADDR PORT N
#   cm_cycles.py client ADDR PORT N
#
# Each cycle: the client connects (new cm_id and QP), sends 16 bytes that the
# server checks in its posted receive, and one side disconnects (the client on
# even cycles, the server on odd ones); both must see DISCONNECTED, and the
# ids and QPs are destroyed before the next cycle. The server may get the
# next CONNECT_REQUEST before the ESTABLISHED or DISCONNECTED of the cycle
# before (cmutil.Listener says why) and counts those. Exits 0 on success, 1
# with a message otherwise.
#
# RSIW_ESTABLISHED_DELAY_MS (client): wait that long after ESTABLISHED before
# the Send, for a siw server, which ignores bytes that arrive before
# siw_accept() installed its QP's receive callback (as the LD_PRELOAD shim
# tests/vm/tools/rdma-connect-delay.c does for C programs; it cannot find
# librdmacm in a Python process, whose pyverbs loads it privately).

import os
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import ConnParam

import cmutil
from cmutil import fail, log, next_event

cmutil.NAME = 'cm_cycles'


def qp_attr():
    return cmutil.qp_attr(wr=2, sge=1)


def payload(i):
    return (b'cycle %08d rsiw' % i)[:16]


def server(addr, port, n):
    lst = cmutil.Listener(addr, port, backlog=4)
    for i in range(n):
        child, _ = lst.request(f'cycle {i}')
        child.create_qp(qp_attr())
        buf = child.reg_msgs(64)
        child.post_recv(buf, 64)
        child.accept(ConnParam(resources=1, depth=1))
        lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, f'cycle {i}')
        wc = child.get_recv_comp()
        if wc.status != e.IBV_WC_SUCCESS or wc.byte_len != 16:
            fail(f'cycle {i}: receive status {wc.status} length {wc.byte_len}')
        data = bytes(buf.read(16, 0))
        if data != payload(i):
            fail(f'cycle {i}: received {data!r}, expected {payload(i)!r}')
        if i % 2:
            cmutil.disconnect_after_peer(child, quiet=True)
        lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, f'cycle {i}')
        if not i % 2:
            cmutil.disconnect_after_peer(child, quiet=True)
        buf.close()
        child.close()
    log(f'{n} connections served ({lst.reordered} requests came before the '
        'events of the connection before them)')


def client(addr, port, n):
    delay = int(os.environ.get('RSIW_ESTABLISHED_DELAY_MS', '0')) / 1000
    for i in range(n):
        ch, cmid = cmutil.resolve(addr, port, qp_attr())
        buf = cmid.reg_msgs(64)
        buf.write(payload(i), 16)
        cmid.connect(ConnParam(resources=1, depth=1))
        next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, f'cycle {i}')
        time.sleep(delay)
        cmid.post_send(buf, flags=e.IBV_SEND_SIGNALED, length=16)
        wc = cmid.get_send_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            fail(f'cycle {i}: send status {wc.status}')
        if not i % 2:
            cmutil.disconnect_after_peer(cmid, quiet=True)
        next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, f'cycle {i}')
        if i % 2:
            cmutil.disconnect_after_peer(cmid, quiet=True)
        buf.close()
        cmid.close()
        ch.close()
    log(f'{n} connections made')


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ('server', 'client'):
        fail('usage: cm_cycles.py server|client ADDR PORT N')
    role, addr, port, n = sys.argv[1:]
    (server if role == 'server' else client)(addr, port, int(n))
    log('ok')


if __name__ == '__main__':
    main()
