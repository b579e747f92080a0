#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# One rdma_cm (iWARP) connection with private data both ways, or a reject
# with private data, checked on both sides (MPA-06, MPA-07 through rdma_cm).
#
#   cm_pd.py server ADDR PORT accept|reject
#   cm_pd.py client ADDR PORT accept|reject
#
# The client sends CLIENT_PD in its connect; the server checks it in the
# CONNECT_REQUEST and either accepts with SERVER_PD (the client checks it in
# ESTABLISHED, then the server disconnects and both see DISCONNECTED) or
# rejects with REJECT_PD (the client checks REJECTED and the data). Exits 0 on
# success, 1 with a message otherwise.

import sys

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
from pyverbs.qp import QPCap, QPInitAttr

CLIENT_PD = b'rsiw client private data \x00\x01\xfe\xff' + bytes(range(64))
SERVER_PD = b'rsiw server private data' + bytes(range(200, 256))
REJECT_PD = b'rsiw: rejected on purpose'


def fail(msg):
    print(f'cm_pd: FAIL: {msg}', flush=True)
    sys.exit(1)


def next_event(channel, want):
    ev = CMEvent(channel)
    got = ev.event_type
    pd = bytes(ev.private_data or b'')
    ev.ack_cm_event()
    if got != want:
        fail(f'expected event {want}, got {got}')
    return ev, pd


def qp_attr():
    return QPInitAttr(qp_type=e.IBV_QPT_RC,
                      cap=QPCap(max_send_wr=4, max_recv_wr=4))


def conn_param(pd):
    # The length is fixed at construction; set_private_data() copies the bytes.
    cp = ConnParam(resources=1, depth=1, qp_num=0, data_len=len(pd))
    cp.set_private_data(pd)
    return cp


def server(addr, port, mode):
    ch = CMEventChannel()
    cmid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP,
                  flags=ce.RAI_PASSIVE)
    cmid.bind_addr(ai)
    cmid.listen()
    print('cm_pd: listening', flush=True)
    ev = CMEvent(ch)
    if ev.event_type != ce.RDMA_CM_EVENT_CONNECT_REQUEST:
        fail(f'expected CONNECT_REQUEST, got {ev.event_type}')
    pd = bytes(ev.private_data or b'')
    child = CMID(creator=ev, listen_id=cmid)
    ev.ack_cm_event()
    if pd[:len(CLIENT_PD)] != CLIENT_PD:
        fail(f'request private data {pd!r}, expected {CLIENT_PD!r}')
    print(f'cm_pd: request with {len(pd)} bytes of private data', flush=True)
    if mode == 'reject':
        child.reject(REJECT_PD)
        print('cm_pd: rejected', flush=True)
        return
    child.create_qp(qp_attr())
    child.accept(conn_param(SERVER_PD))
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    print('cm_pd: established', flush=True)
    child.disconnect()
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    print('cm_pd: disconnected', flush=True)


def client(addr, port, mode):
    ch = CMEventChannel()
    cmid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
    ai = AddrInfo(dst=addr, dst_service=port, port_space=ce.RDMA_PS_TCP)
    cmid.resolve_addr(ai)
    next_event(ch, ce.RDMA_CM_EVENT_ADDR_RESOLVED)
    cmid.resolve_route()
    next_event(ch, ce.RDMA_CM_EVENT_ROUTE_RESOLVED)
    cmid.create_qp(qp_attr())
    cmid.connect(conn_param(CLIENT_PD))
    if mode == 'reject':
        _, pd = next_event(ch, ce.RDMA_CM_EVENT_REJECTED)
        if pd[:len(REJECT_PD)] != REJECT_PD:
            fail(f'reject private data {pd!r}, expected {REJECT_PD!r}')
        print(f'cm_pd: rejected with {len(pd)} bytes of private data', flush=True)
        return
    _, pd = next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    if pd[:len(SERVER_PD)] != SERVER_PD:
        fail(f'reply private data {pd!r}, expected {SERVER_PD!r}')
    print(f'cm_pd: established with {len(pd)} bytes of private data', flush=True)
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    # librdmacm moves the QP to SQD first; rsiw refuses that out of ERROR (siw
    # ignores it), so the call may fail with EINVAL after the peer closed.
    try:
        cmid.disconnect()
    except Exception as ex:  # pylint: disable=broad-except
        print(f'cm_pd: disconnect after the peer closed: {ex}', flush=True)
    print('cm_pd: disconnected', flush=True)


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ('server', 'client') or \
            sys.argv[4] not in ('accept', 'reject'):
        fail('usage: cm_pd.py server|client ADDR PORT accept|reject')
    role, addr, port, mode = sys.argv[1:]
    (server if role == 'server' else client)(addr, port, mode)
    print('cm_pd: ok', flush=True)


if __name__ == '__main__':
    main()
