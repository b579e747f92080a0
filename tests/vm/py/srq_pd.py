#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""SRQ receives checked against the SRQ's PD (issue 38, item 6), for
verbs-cq-qp-srq.sh.

  srq_pd.py ADDR PORT DRIVER

Both ends of rdma_cm connections in one process, on ADDR (an address of the
device under test). For each check the server's QP is created in PD B (its
cm_id's) on an SRQ created in PD A, with one MR in each PD, and the client
Sends to it. A receive taken from an SRQ is checked against the SRQ's PD,
not the QP's (as siw does, and rsiw's post_srq_recv for kernel SRQs):

  srq-pd       two receives on MRs of PD A (the SRQ's) and two Sends: the
               first is the stream's first message, the second a whole
               single-segment Send after it (rsiw places them on two
               paths). Both complete with IBV_WC_SUCCESS, their length and
               opcode, and their bytes land in PD A's MR.
  qp-pd-first  one receive on an MR of PD B (the QP's, not the SRQ's) and one
               Send: the receive completes with IBV_WC_LOC_PROT_ERR, nothing
               is written into the MR, the server's QP goes to ERROR (with a
               Terminate, so the client sees DISCONNECTED).
  qp-pd-next   a receive on PD A, then one on PD B, and two Sends: the first
               completes with SUCCESS and its bytes, the second (a whole
               Send after the first message) with IBV_WC_LOC_PROT_ERR, and
               PD B's MR stays untouched; QP in ERROR as above.

The status of a receive whose buffer fails the local protection check is
IBV_WC_LOC_PROT_ERR, as the verbs define it (a scatter entry that does not
name a memory region valid for the operation); with DRIVER siw, siw's
IBV_WC_GENERAL_ERR is accepted instead (it completes every failed receive so).
Exits 0 on success, 1 with a message otherwise.
"""

import signal
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SGE

import cmutil
from cmutil import conn_param, fail, log, next_event

cmutil.NAME = 'srq_pd'

SIZE = 4096
MSGS = (bytes((i * 7 + 3) & 0xff for i in range(40)),
        bytes((i * 11 + 5) & 0xff for i in range(24)))
# The receives of each check: which PD's MR each one names.
CHECKS = {
    'srq-pd': ('A', 'A'),
    'qp-pd-first': ('B',),
    'qp-pd-next': ('A', 'B'),
}


def poll(cq, n, child, what):
    """Returns up to n completions of cq: all n, or those that came before
    the server's QP went to ERROR and nothing more arrived for 1 s (the
    receives left in the SRQ are not flushed). Fails after 30 s."""
    wcs = []
    end = time.monotonic() + 30
    idle = None
    while len(wcs) < n:
        _, got = cq.poll(n - len(wcs))
        wcs += got
        if got:
            idle = None
            continue
        now = time.monotonic()
        if qp_state(child) == e.IBV_QPS_ERR:
            idle = idle or now
            if now - idle > 1:
                break
        if now > end:
            fail(f'{what}: {len(wcs)} of {n} receive completions after 30 s')
        time.sleep(0.01)
    return wcs


def qp_state(cmid):
    attr, _ = cmid.query_qp(e.IBV_QP_STATE)
    return attr.qp_state


def run_check(lst, addr, port, check, siw, keep, problems):
    pds = CHECKS[check]
    bad_status = (e.IBV_WC_LOC_PROT_ERR, e.IBV_WC_GENERAL_ERR) if siw else \
        (e.IBV_WC_LOC_PROT_ERR,)
    ch, cmid = cmutil.resolve(addr, port, cmutil.qp_attr(wr=4, sge=1))
    cmid.connect(conn_param())
    child, _ = lst.request(check)
    ctx = child.context
    pd_b = child.pd
    pd_a = PD(ctx)
    cq = CQ(ctx, 8)
    srq = SRQ(pd_a, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
    child.create_qp(QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq,
                               cap=QPCap(max_send_wr=4, max_recv_wr=4,
                                         max_send_sge=1, max_recv_sge=1)))
    mrs = {'A': MR(pd_a, SIZE, e.IBV_ACCESS_LOCAL_WRITE),
           'B': MR(pd_b, SIZE, e.IBV_ACCESS_LOCAL_WRITE)}
    for mr in mrs.values():
        mr.write(bytes(SIZE), SIZE, 0)
    # Each receive at its own offset, so that the bytes of each are checked.
    offs = [i * 256 for i in range(len(pds))]
    for i, (p, off) in enumerate(zip(pds, offs)):
        mr = mrs[p]
        srq.post_recv(RecvWR(wr_id=i + 1, num_sge=1, sg=[SGE(mr.buf + off, 256, mr.lkey)]))
    child.accept(conn_param())
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, f'{check}: client')
    lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, f'{check}: server')
    log(f'{check}: SRQ in PD A, QP in PD B; receives on the MRs of PD {", ".join(pds)}')

    smrs = [cmid.reg_msgs(64) for _ in pds]
    for m, smr in zip(MSGS, smrs):
        smr.write(m, len(m), 0)
    # Both Sends at once: the second is behind the first in the stream.
    for m, smr in zip(MSGS, smrs):
        cmid.post_send(smr, length=len(m))
    for i in range(len(pds)):
        wc = cmid.get_send_comp()
        log(f'{check}: Send {i + 1} completed with status {wc.status}')

    wcs = poll(cq, len(pds), child, check)
    bad = []
    for i, p in enumerate(pds):
        if i >= len(wcs):
            bad.append(f'receive {i + 1} (PD {p}) did not complete')
            continue
        wc, off = wcs[i], offs[i]
        log(f'{check}: receive {wc.wr_id} (PD {p}): status {wc.status}, '
            f'opcode {wc.opcode}, length {wc.byte_len}')
        if wc.wr_id != i + 1:
            bad.append(f'completion {i + 1} is of receive {wc.wr_id}')
        got = bytes(mrs[p].read(256, off))
        if p == 'A':
            if wc.status != e.IBV_WC_SUCCESS:
                bad.append(f'receive {i + 1} on the SRQ\'s PD completed with status '
                           f'{wc.status}, expected SUCCESS')
            elif wc.opcode != e.IBV_WC_RECV or wc.byte_len != len(MSGS[i]):
                bad.append(f'receive {i + 1}: opcode {wc.opcode} length {wc.byte_len}')
            elif got[:len(MSGS[i])] != MSGS[i] or any(got[len(MSGS[i]):]):
                bad.append(f'receive {i + 1}: the bytes in PD A\'s MR are wrong')
        else:
            if wc.status not in bad_status:
                bad.append(f'receive {i + 1} on the QP\'s PD (not the SRQ\'s) completed '
                           f'with status {wc.status}, expected {bad_status}')
            if any(got):
                bad.append(f'receive {i + 1}: the Send was written into PD B\'s MR')
    want = e.IBV_QPS_ERR if 'B' in pds else e.IBV_QPS_RTS
    # The data path moves the QP to ERROR right after the failed receive.
    end = time.monotonic() + 10
    st = qp_state(child)
    while st != want and time.monotonic() < end:
        time.sleep(0.05)
        st = qp_state(child)
    if st != want:
        bad.append(f'server QP state {st}, expected {want}')
    if st == e.IBV_QPS_ERR:
        # Terminated: both ends see DISCONNECTED.
        next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, f'{check}: client')
        lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, f'{check}: server')
        cmutil.disconnect_after_peer(cmid, quiet=True)
        cmutil.disconnect_after_peer(child, quiet=True)
    else:
        cmutil.disconnect_after_peer(child)
        lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, f'{check}: server')
        next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, f'{check}: client')
        cmutil.disconnect_after_peer(cmid, quiet=True)
    for b in bad:
        log(f'{check}: FAIL: {b}')
    problems.extend(f'{check}: {b}' for b in bad)
    if not bad:
        log(f'{check}: ok')
    # pyverbs gives every child the listener's PD object, and closing a CMID
    # clears that object's pointer: close the children at the end.
    keep.append((child, srq, cq, mrs, pd_a, cmid, ch, smrs))


def main():
    if len(sys.argv) != 4:
        fail('usage: srq_pd.py ADDR PORT DRIVER')
    addr, port, driver = sys.argv[1:4]
    signal.alarm(300)
    lst = cmutil.Listener(addr, port)
    keep = []
    problems = []
    for check in CHECKS:
        run_check(lst, addr, port, check, driver == 'siw', keep, problems)
    for child, srq, cq, mrs, pd_a, cmid, ch, smrs in reversed(keep):
        child.close()
        cmid.close()
        srq.close()
        for mr in list(mrs.values()) + smrs:
            mr.close()
        cq.close()
        pd_a.close()
    if problems:
        fail('; '.join(problems))
    log('ok')


if __name__ == '__main__':
    main()
