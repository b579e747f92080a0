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

import cmutil
from cmutil import conn_param, fail, log, next_event, qp_attr

cmutil.NAME = 'cm_pd'

CLIENT_PD = b'rsiw client private data \x00\x01\xfe\xff' + bytes(range(64))
SERVER_PD = b'rsiw server private data' + bytes(range(200, 256))
REJECT_PD = b'rsiw: rejected on purpose'


def server(addr, port, mode):
    ch, lid = cmutil.listen(addr, port)
    child, pd = cmutil.get_request(ch, lid)
    if pd[:len(CLIENT_PD)] != CLIENT_PD:
        fail(f'request private data {pd!r}, expected {CLIENT_PD!r}')
    log(f'request with {len(pd)} bytes of private data')
    if mode == 'reject':
        child.reject(REJECT_PD)
        log('rejected')
        return
    child.create_qp(qp_attr())
    child.accept(conn_param(SERVER_PD))
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    log('established')
    child.disconnect()
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    log('disconnected')


def client(addr, port, mode):
    ch, cmid = cmutil.resolve(addr, port, qp_attr())
    cmid.connect(conn_param(CLIENT_PD))
    if mode == 'reject':
        pd = next_event(ch, ce.RDMA_CM_EVENT_REJECTED)
        if pd[:len(REJECT_PD)] != REJECT_PD:
            fail(f'reject private data {pd!r}, expected {REJECT_PD!r}')
        log(f'rejected with {len(pd)} bytes of private data')
        return
    pd = next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    if pd[:len(SERVER_PD)] != SERVER_PD:
        fail(f'reply private data {pd!r}, expected {SERVER_PD!r}')
    log(f'established with {len(pd)} bytes of private data')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    cmutil.disconnect_after_peer(cmid)
    log('disconnected')


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ('server', 'client') or \
            sys.argv[4] not in ('accept', 'reject'):
        fail('usage: cm_pd.py server|client ADDR PORT accept|reject')
    role, addr, port, mode = sys.argv[1:]
    (server if role == 'server' else client)(addr, port, mode)
    log('ok')


if __name__ == '__main__':
    main()
