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
# ids and QPs are destroyed before the next cycle. Exits 0 on success, 1 with
# a message otherwise.

import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
from pyverbs.qp import QPCap, QPInitAttr


def fail(msg):
    print(f'cm_cycles: FAIL: {msg}', flush=True)
    sys.exit(1)


def next_event(channel, want, what):
    ev = CMEvent(channel)
    got = ev.event_type
    if got != want:
        ev.ack_cm_event()
        fail(f'{what}: expected event {want}, got {got}')
    return ev


def qp_attr():
    return QPInitAttr(qp_type=e.IBV_QPT_RC,
                      cap=QPCap(max_send_wr=2, max_recv_wr=2, max_send_sge=1,
                                max_recv_sge=1))


def disconnect(cmid):
    try:
        cmid.disconnect()
    except Exception:  # pylint: disable=broad-except
        pass  # the peer closed first


def payload(i):
    return (b'cycle %08d rsiw' % i)[:16]


def server(addr, port, n):
    ch = CMEventChannel()
    lid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
    lid.bind_addr(AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP,
                           flags=ce.RAI_PASSIVE))
    lid.listen(backlog=4)
    print('cm_cycles: listening', flush=True)
    for i in range(n):
        ev = next_event(ch, ce.RDMA_CM_EVENT_CONNECT_REQUEST, f'cycle {i}')
        child = CMID(creator=ev, listen_id=lid)
        ev.ack_cm_event()
        child.create_qp(qp_attr())
        buf = child.reg_msgs(64)
        child.post_recv(buf, 64)
        child.accept(ConnParam(resources=1, depth=1))
        next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, f'cycle {i}').ack_cm_event()
        wc = child.get_recv_comp()
        if wc.status != e.IBV_WC_SUCCESS or wc.byte_len != 16:
            fail(f'cycle {i}: receive status {wc.status} length {wc.byte_len}')
        data = bytes(buf.read(16, 0))
        if data != payload(i):
            fail(f'cycle {i}: received {data!r}, expected {payload(i)!r}')
        if i % 2:
            disconnect(child)
        next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, f'cycle {i}').ack_cm_event()
        if not i % 2:
            disconnect(child)
        buf.close()
        child.close()
    print(f'cm_cycles: {n} connections served', flush=True)


def client(addr, port, n):
    for i in range(n):
        ch = CMEventChannel()
        cmid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
        cmid.resolve_addr(AddrInfo(dst=addr, dst_service=port,
                                   port_space=ce.RDMA_PS_TCP))
        next_event(ch, ce.RDMA_CM_EVENT_ADDR_RESOLVED, f'cycle {i}').ack_cm_event()
        cmid.resolve_route()
        next_event(ch, ce.RDMA_CM_EVENT_ROUTE_RESOLVED, f'cycle {i}').ack_cm_event()
        cmid.create_qp(qp_attr())
        buf = cmid.reg_msgs(64)
        buf.write(payload(i), 16)
        cmid.connect(ConnParam(resources=1, depth=1))
        next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, f'cycle {i}').ack_cm_event()
        cmid.post_send(buf, flags=e.IBV_SEND_SIGNALED, length=16)
        wc = cmid.get_send_comp()
        if wc.status != e.IBV_WC_SUCCESS:
            fail(f'cycle {i}: send status {wc.status}')
        if not i % 2:
            disconnect(cmid)
        next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, f'cycle {i}').ack_cm_event()
        if i % 2:
            disconnect(cmid)
        buf.close()
        cmid.close()
        ch.close()
    print(f'cm_cycles: {n} connections made', flush=True)


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ('server', 'client'):
        fail('usage: cm_cycles.py server|client ADDR PORT N')
    role, addr, port, n = sys.argv[1:]
    (server if role == 'server' else client)(addr, port, int(n))
    print('cm_cycles: ok', flush=True)


if __name__ == '__main__':
    main()
