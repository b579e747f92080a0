#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# A connect or accept may only bind a QP that its caller may use (issue 38,
# item 2): for user space, a QP that the calling process created. The QP
# number of an iWARP connect or accept comes from the caller (the qp_num of
# rdma_connect()'s or rdma_accept()'s conn_param when the cm_id has no QP of
# its own), and a provider that looks any QP of the device up by that number
# lets one process move another's QP to ERROR or bind it to its own stream.
#
#   qp_steal.py ADDR PORT DEV
#
# Three processes on the device DEV attached at ADDR:
#
# - the victim creates a QP with plain verbs (no cm_id) and posts a receive;
# - the thief, another process with its own rdma_cm ids, calls rdma_connect()
#   with the victim's QP number towards a closed port (PORT + 1), then
#   rdma_accept() with it on a connection to its own listener (PORT + 2).
#   Both must fail with EINVAL;
# - this process, the server, then checks through the victim that its QP is
#   still in INIT with nothing completed, and has the victim connect that QP
#   through a cm_id of its own (rdma_connect() with qp_num: the rule is the
#   process, not the verbs context, as pyverbs' external QPs need) to a
#   listener on PORT, and sends one message: it must land in the receive
#   posted before the thief came.
#
# Exits 0 if all pass, 1 with a message otherwise.

import errno
import subprocess
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import ConnParam
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE

import cmutil
from cmutil import fail, log, next_event, qp_attr

cmutil.NAME = 'qp_steal'

MSG = b'for the victim only: rsiw qp_steal'
WR_ID = 0x5a17
SIZE = 64


def param(qpn):
    return ConnParam(resources=1, depth=1, qp_num=qpn)


# The victim answers the server on its stdout; its messages go to stderr.
OUT = sys.stdout


def tell(msg):
    print(msg, file=OUT, flush=True)


def victim(addr, port, dev):
    sys.stdout = sys.stderr
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 8)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    mr = MR(pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE)
    mr.write(bytes(SIZE), SIZE)
    qp.post_recv(RecvWR(wr_id=WR_ID, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)]))
    tell(f'qpn {qp.qp_num}')
    sys.stdin.readline()
    attr, _ = qp.query(e.IBV_QP_STATE)
    n, _ = cq.poll(1)
    tell(f'state {attr.qp_state} polled {n}')
    sys.stdin.readline()
    ch, cmid = cmutil.resolve(addr, port)
    cmid.connect(param(qp.qp_num))
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED)
    deadline = time.monotonic() + 30
    while True:
        n, wcs = cq.poll(1)
        if n:
            break
        if time.monotonic() > deadline:
            fail('victim: no receive completion after 30 s')
        time.sleep(0.01)
    wc = wcs[0]
    got = bytes(mr.read(len(MSG), 0))
    tell(f'received wr_id {wc.wr_id:#x} status {wc.status} len {wc.byte_len} '
         f'ok {int(got == MSG)}')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED)
    cmutil.disconnect_after_peer(cmid, quiet=True)


def expect_einval(what, fn, *args):
    """Runs fn(*args); returns a failure message unless it fails with EINVAL."""
    try:
        fn(*args)
    except PyverbsRDMAError as ex:
        if ex.error_code == errno.EINVAL:
            log(f'thief: {what}: EINVAL')
            return None
        return f'{what} failed with {ex.error_code}, not EINVAL'
    return f'{what} with the victim\'s QP succeeded'


def thief(addr, port, qpn):
    port, qpn = int(port), int(qpn)
    bad = []
    # rdma_connect() with the victim's QP, to a port nobody listens on: the
    # refused connection would move that QP to ERROR.
    ch, cmid = cmutil.resolve(addr, str(port + 1))
    msg = expect_einval('rdma_connect', cmid.connect, param(qpn))
    if msg:
        bad.append(msg)
        ev = cmutil.CMEvent(ch)
        log(f'thief: connect event {ev.event_type}')
        ev.ack_cm_event()
    # rdma_accept() with it, on a connection the thief makes to itself: the
    # victim's QP would carry the thief's stream.
    lch, lid = cmutil.listen(addr, str(port + 2))
    _, acm = cmutil.resolve(addr, str(port + 2), qp_attr())
    acm.connect(cmutil.conn_param())
    child, _ = cmutil.get_request(lch, lid)
    msg = expect_einval('rdma_accept', child.accept, param(qpn))
    if msg:
        bad.append(msg)
        time.sleep(1)
    if bad:
        fail('thief: ' + '; '.join(bad))
    log('thief: both refused')


def spawn(*args):
    return subprocess.Popen([sys.executable, __file__, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def line(p, what):
    s = p.stdout.readline().strip()
    log(f'{what}: {s}')
    if not s:
        fail(f'{what}: no answer (exit status {p.wait()})')
    return s.split()


def server(addr, port, dev):
    lst = cmutil.Listener(addr, port)
    vic = spawn('victim', addr, port, dev)
    qpn = int(line(vic, 'victim')[1])
    th = subprocess.run([sys.executable, __file__, 'thief', addr, port, str(qpn)],
                        timeout=120, check=False)
    vic.stdin.write('check\n')
    vic.stdin.flush()
    w = line(vic, 'victim after the thief')
    if th.returncode != 0:
        fail('the thief bound the victim\'s QP')
    if int(w[1]) != e.IBV_QPS_INIT or int(w[3]) != 0:
        fail(f'the victim\'s QP changed: state {w[1]} (INIT is {e.IBV_QPS_INIT}), '
             f'{w[3]} completions')
    vic.stdin.write('connect\n')
    vic.stdin.flush()
    child, _ = lst.request('victim')
    child.create_qp(qp_attr(sge=1))
    buf = child.reg_msgs(len(MSG))
    buf.write(MSG, len(MSG), 0)
    child.accept(cmutil.conn_param())
    lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, 'victim')
    child.post_send(buf, flags=e.IBV_SEND_SIGNALED, length=len(MSG))
    wc = child.get_send_comp()
    if wc.status != e.IBV_WC_SUCCESS:
        fail(f'send to the victim: status {wc.status}')
    w = ' '.join(line(vic, 'victim'))
    want = f'received wr_id {WR_ID:#x} status {e.IBV_WC_SUCCESS} len {len(MSG)} ok 1'
    if w != want:
        fail(f'the victim\'s receive: {w}, expected {want}')
    child.disconnect()
    lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, 'victim')
    if vic.wait(timeout=60) != 0:
        fail('the victim failed')
    log('ok')


def main():
    roles = {'victim': victim, 'thief': thief}
    if len(sys.argv) >= 2 and sys.argv[1] in roles:
        roles[sys.argv[1]](*sys.argv[2:])
        return
    if len(sys.argv) != 4:
        fail('usage: qp_steal.py ADDR PORT DEV')
    server(*sys.argv[1:])


if __name__ == '__main__':
    main()
