# SPDX-License-Identifier: GPL-2.0
#
# Shared rdma_cm (iWARP) helpers for the pyverbs test scripts in this
# directory: messages, event checks, QP and connection parameters, and the
# listener and client set-up every script repeats.
#
# A script sets NAME (its message prefix) before calling anything here.

import os
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
from pyverbs.qp import QPCap, QPInitAttr

NAME = 'cmutil'

# An STag that no region can have, on rsiw and on siw alike: both allocate
# region indices (the upper 24 bits) from 1 up, so index 0 is never live,
# whatever the random start index and keys. A test that wants an invalid
# STag uses this one: "the next index" may be a live region of the test's
# own, which turns an invalid-STag error into a rights or PD error.
BAD_STAG = 0x0000005a


def log(msg):
    print(f'{NAME}: {msg}', flush=True)


def fail(msg):
    log(f'FAIL: {msg}')
    sys.exit(1)


def next_event(channel, want, what=None):
    """Waits for the next event on channel, acks it and fails unless it is
    want. Returns the event's private data."""
    return _check_event(CMEvent(channel), want, what)


def _check_event(ev, want, what):
    got = ev.event_type
    pd = bytes(ev.private_data or b'')
    ev.ack_cm_event()
    if got != want:
        fail(f'{what + ": " if what else ""}expected event {want}, got {got}')
    # The python side of tests/vm/tools/rdma-connect-delay.c, which cannot
    # be preloaded into python (see tests/vm/cases/rping-interop.sh).
    delay = os.environ.get('RSIW_ESTABLISHED_DELAY_MS')
    if got == ce.RDMA_CM_EVENT_ESTABLISHED and delay:
        time.sleep(int(delay) / 1000)
    return pd


def qp_attr(wr=4, sge=None):
    """RC QP attributes with wr send and receive WRs (and sge SGEs each if
    given)."""
    cap = QPCap(max_send_wr=wr, max_recv_wr=wr)
    if sge is not None:
        cap = QPCap(max_send_wr=wr, max_recv_wr=wr, max_send_sge=sge,
                    max_recv_sge=sge)
    return QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap)


def qp_state_after_close(cmid, siw=False, secs=5.0):
    """The QP state once the connection has gone (DISCONNECTED seen).

    The C siw reports the close to the CM (IW_CM_EVENT_CLOSE, hence
    DISCONNECTED) from its CM work item before that work item moves the QP
    to ERROR (siw_cm_work_handler: siw_cm_upcall, then siw_qp_llp_close),
    so on siw the state is polled until ERROR for up to secs. rsiw is in
    ERROR before it reports the close: read once."""
    end = time.monotonic() + (secs if siw else 0)
    while True:
        attr, _ = cmid.query_qp(e.IBV_QP_STATE)
        if attr.qp_state == e.IBV_QPS_ERR or time.monotonic() >= end:
            return attr.qp_state
        time.sleep(0.05)


def conn_param(pd=b''):
    # The length is fixed at construction; set_private_data() copies the bytes.
    cp = ConnParam(resources=1, depth=1, qp_num=0, data_len=len(pd))
    if pd:
        cp.set_private_data(pd)
    return cp


def listen(addr, port, backlog=None):
    """Binds a listener to addr:port. Returns (channel, cm_id)."""
    ch = CMEventChannel()
    lid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
    lid.bind_addr(AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP,
                           flags=ce.RAI_PASSIVE))
    if backlog is None:
        lid.listen()
    else:
        lid.listen(backlog=backlog)
    log('listening')
    return ch, lid


def get_request(ch, lid, what=None):
    """Waits for a CONNECT_REQUEST on the listener. Returns (child cm_id,
    the request's private data)."""
    ev = CMEvent(ch)
    if ev.event_type != ce.RDMA_CM_EVENT_CONNECT_REQUEST:
        got = ev.event_type
        ev.ack_cm_event()
        fail(f'{what + ": " if what else ""}expected CONNECT_REQUEST, got {got}')
    pd = bytes(ev.private_data or b'')
    child = CMID(creator=ev, listen_id=lid)
    ev.ack_cm_event()
    return child, pd


class Listener:
    """A listening cm_id whose channel also carries the events of the
    connections it accepted. The events of two connections are not ordered:
    the provider reports ESTABLISHED after its MPA Reply has gone out (siw,
    cxgb4 and rsiw alike), so a client that connects again as soon as it is
    established and done can have its next CONNECT_REQUEST queued before the
    previous connection's ESTABLISHED or DISCONNECTED. next_event() keeps such
    a request for the next request() instead of failing."""

    def __init__(self, addr, port, backlog=None):
        self.ch, self.lid = listen(addr, port, backlog)
        self.early = []
        self.reordered = 0

    def request(self, what=None):
        """The next connection request: (child cm_id, private data)."""
        if self.early:
            return self.early.pop(0)
        return get_request(self.ch, self.lid, what)

    def next_event(self, want, what=None):
        """next_event() on the channel for an accepted connection; a
        CONNECT_REQUEST on the way is kept for request()."""
        while True:
            ev = CMEvent(self.ch)
            if ev.event_type != ce.RDMA_CM_EVENT_CONNECT_REQUEST:
                break
            pd = bytes(ev.private_data or b'')
            self.early.append((CMID(creator=ev, listen_id=self.lid), pd))
            ev.ack_cm_event()
            self.reordered += 1
        return _check_event(ev, want, what)


def resolve(addr, port, attr=None):
    """Resolves the address and route of addr:port on a new cm_id and creates
    its QP with attr (none without). Returns (channel, cm_id), ready to
    connect."""
    ch = CMEventChannel()
    cmid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
    cmid.resolve_addr(AddrInfo(dst=addr, dst_service=port,
                               port_space=ce.RDMA_PS_TCP))
    next_event(ch, ce.RDMA_CM_EVENT_ADDR_RESOLVED)
    cmid.resolve_route()
    next_event(ch, ce.RDMA_CM_EVENT_ROUTE_RESOLVED)
    if attr is not None:
        cmid.create_qp(attr)
    return ch, cmid


def disconnect_after_peer(cmid, quiet=False):
    """rdma_disconnect() once the peer may have closed: librdmacm moves the QP
    to SQD first, which a QP in ERROR may refuse; that is not an error here."""
    try:
        cmid.disconnect()
    except Exception as ex:  # pylint: disable=broad-except
        if not quiet:
            log(f'disconnect after the peer closed: {ex}')


def check_done(cmid, check, *objs):
    """The end of one check on a server's accepted connection: disconnect
    (the peer may have closed already), close objs (MRs, PDs), log ok."""
    disconnect_after_peer(cmid, quiet=True)
    for o in objs:
        o.close()
    log(f'{check}: ok')


def run_role(server, client):
    """main() of a two-sided script taking "server|client ADDR PORT": runs
    server(addr, port) or client(addr, port), then logs ok."""
    if len(sys.argv) != 4 or sys.argv[1] not in ('server', 'client'):
        fail(f'usage: {NAME}.py server|client ADDR PORT')
    role, addr, port = sys.argv[1:4]
    (server if role == 'server' else client)(addr, port)
    log('ok')
