#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""CQ, QP and SRQ through the stock siw provider (pyverbs), for verbs-cq-qp-srq.sh.

  verbs_objects.py DEV DRIVER

Creates, queries, modifies and destroys CQs, QPs and SRQs on DEV; checks the
errno of bad arguments; checks that "rdma resource show" lists the objects;
checks that a move to ERROR flushes posted work requests into the CQ with
IBV_WC_WR_FLUSH_ERR and that an armed CQ raises a completion event for them,
while a CQ armed for solicited completions only does not; checks that no
queue of a context gets the mmap key libsiw takes for "not mapped".

DRIVER is rsiw or siw: where rsiw deliberately differs from siw, the expected
result depends on it (see EXPECT below). Exits non-zero on the first failure.
"""

import errno
import json
import os
import select
import subprocess
import sys

from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

DEV, DRIVER = sys.argv[1], sys.argv[2]
RSIW = DRIVER == "rsiw"

# Device limits (siw's, which rsiw keeps; see Documentation/infiniband/rsiw.rst).
MAX_QP_WR = 32 * 1024
MAX_CQE = MAX_QP_WR * 100
MAX_SGE = 6
MAX_INLINE = 80
MAX_SRQ_WR = MAX_QP_WR * 10

# errno of the requests where rsiw rejects what siw silently ignores.
EXPECT = {
    "INIT->SQD": errno.EINVAL if RSIW else 0,
    "ERR->RESET": errno.EINVAL if RSIW else 0,
}


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok: {msg}", flush=True)


def expect_errno(what, want, fn, *args, **kw):
    """Calls fn; it must fail with errno `want` (or succeed if want is 0)."""
    try:
        obj = fn(*args, **kw)
    except PyverbsRDMAError as ex:
        got = abs(ex.error_code)
        if got != want:
            fail(f"{what}: errno {got} ({errno.errorcode.get(got)}), expected {want} "
                 f"({errno.errorcode.get(want, 'success')})")
        ok(f"{what}: {errno.errorcode.get(got)}")
        return None
    if want != 0:
        fail(f"{what}: succeeded, expected {errno.errorcode.get(want)}")
    ok(f"{what}: success (as expected)")
    return obj


def rdma_json(*args):
    out = subprocess.run(["rdma", "-j", *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out) if out.strip() else []


def cap(sw=4, rw=4, ss=1, rs=1, inline=0):
    return QPCap(max_send_wr=sw, max_recv_wr=rw, max_send_sge=ss, max_recv_sge=rs,
                 max_inline_data=inline)


def rc_qp(pd, cq, srq=None, c=None, qpt=e.IBV_QPT_RC, sig_all=1):
    attr = QPInitAttr(qp_type=qpt, scq=cq, rcq=cq, srq=srq, cap=c or cap(), sq_sig_all=sig_all)
    return QP(pd, attr)


def modify_state(qp, state):
    qp.modify(QPAttr(qp_state=state), e.IBV_QP_STATE)


def state_of(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


def poll_all(cq, want, what):
    """Polls until `want` completions arrived (they are written synchronously)."""
    wcs = []
    for _ in range(100):
        n, got = cq.poll(want - len(wcs))
        wcs += got[:n]
        if len(wcs) >= want:
            break
    if len(wcs) != want:
        fail(f"{what}: {len(wcs)} completions, expected {want}")
    n, _ = cq.poll(1)
    if n != 0:
        fail(f"{what}: more completions than the {want} expected")
    return wcs


def event_fds():
    """Returns the set of this process's file descriptors of uverbs event files."""
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "infinibandevent" in os.readlink(f"/proc/self/fd/{fd}"):
                fds.add(int(fd))
        except OSError:
            pass
    return fds


def wait_event(chan, cq, fd, timeout):
    """Waits up to `timeout` s for a completion event; returns True if one came.

    pyverbs' get_cq_event() blocks holding the GIL, so wait with select() on the
    channel's file descriptor first.
    """
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return False
    chan.get_cq_event(cq)
    return True


ctx = Context(name=DEV)
pd = PD(ctx)

# --- CQ ----------------------------------------------------------------------
expect_errno("CQ with 0 entries", errno.EINVAL, CQ, ctx, 0, None, None, 0)
expect_errno("CQ above max_cqe", errno.EINVAL, CQ, ctx, MAX_CQE + 1, None, None, 0)
cq = CQ(ctx, 100, None, None, 0)
if cq.cqe < 100:
    fail(f"CQ of 100 has {cq.cqe} entries")
ok(f"CQ of 100 entries: cqe {cq.cqe}")
cq.req_notify()
cq.req_notify(1)
n, _ = cq.poll(4)
if n != 0:
    fail(f"new CQ polled {n} completions")

# --- QP ----------------------------------------------------------------------
expect_errno("UD QP", errno.EOPNOTSUPP, rc_qp, pd, cq, qpt=e.IBV_QPT_UD)
expect_errno("UC QP", errno.EOPNOTSUPP, rc_qp, pd, cq, qpt=e.IBV_QPT_UC)
expect_errno("QP with 7 send SGEs", errno.EINVAL, rc_qp, pd, cq, c=cap(ss=MAX_SGE + 1))
expect_errno("QP with 7 recv SGEs", errno.EINVAL, rc_qp, pd, cq, c=cap(rs=MAX_SGE + 1))
expect_errno("QP with 0 send WRs", errno.EINVAL, rc_qp, pd, cq, c=cap(sw=0))
expect_errno("QP above max_qp_wr", errno.EINVAL, rc_qp, pd, cq, c=cap(sw=MAX_QP_WR + 1))
expect_errno("QP with 81 bytes inline", errno.EINVAL, rc_qp, pd, cq, c=cap(inline=MAX_INLINE + 1))

qp = rc_qp(pd, cq, c=cap(sw=5, rw=9, ss=2, rs=3, inline=MAX_INLINE))
attr, init = qp.query(e.IBV_QP_STATE | e.IBV_QP_CAP)
got = (attr.qp_state, attr.cap.max_send_wr, attr.cap.max_recv_wr, attr.cap.max_send_sge,
       attr.cap.max_recv_sge, attr.cap.max_inline_data)
want = (e.IBV_QPS_INIT, 8, 16, 2, 3, MAX_INLINE)
if got != want:
    fail(f"query of a new QP: (state, send_wr, recv_wr, send_sge, recv_sge, inline) = {got}, "
         f"expected {want}")
ok(f"new QP {qp.qp_num}: state INIT, caps rounded to {got[1:]}")
if qp.qp_num == 0:
    fail("QP number 0")

# Resource tracking lists the QP and CQs.
res = rdma_json("resource", "show", "qp")
if not any(r.get("lqpn") == qp.qp_num and r.get("ifname") == DEV for r in res):
    fail(f"rdma resource show qp does not list QP {qp.qp_num}: {res}")
res = rdma_json("resource", "show", "cq", "dev", DEV)
if len(res) < 1 or not any(r.get("cqe") == cq.cqe for r in res):
    fail(f"rdma resource show cq does not list the CQ of {cq.cqe} entries: {res}")
ok("rdma resource show lists the QP and the CQ")

# State machine: RTS needs a connection; INIT -> RTR is allowed.
expect_errno("INIT->RTS without a connection", errno.EINVAL, modify_state, qp, e.IBV_QPS_RTS)
expect_errno("INIT->SQD", EXPECT["INIT->SQD"], modify_state, qp, e.IBV_QPS_SQD)
modify_state(qp, e.IBV_QPS_INIT)
if state_of(qp) != e.IBV_QPS_INIT:
    fail(f"state after INIT->INIT: {state_of(qp)}")

# Posting to a QP that is not connected: the send doorbell fails with ENOTCONN
# (as in siw); receives are queued.
try:
    qp.post_send(SendWR(wr_id=0x51, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(0, 0, 0)]))
    fail("post_send on an unconnected QP succeeded")
except PyverbsRDMAError as ex:
    # The kernel answers ENOTCONN; libsiw returns -1 for a failed doorbell.
    ok(f"post_send on an unconnected QP fails ({ex.error_code})")
qp.post_recv(RecvWR(wr_id=0x71, num_sge=1, sg=[SGE(0, 0, 0)]))
qp.post_recv(RecvWR(wr_id=0x72, num_sge=1, sg=[SGE(0, 0, 0)]))

# Moving to ERROR flushes: both RQEs (and in rsiw the SQE too; siw leaves the
# SQ of a never-connected QP alone).
modify_state(qp, e.IBV_QPS_ERR)
if state_of(qp) != e.IBV_QPS_ERR:
    fail(f"state after ->ERR: {state_of(qp)}")
wcs = poll_all(cq, 3 if RSIW else 2, "flush on ->ERR")
for wc in wcs:
    if wc.status != e.IBV_WC_WR_FLUSH_ERR or wc.qp_num != qp.qp_num:
        fail(f"flushed WR {wc.wr_id:#x}: status {wc.status}, qp {wc.qp_num}")
ids = sorted(wc.wr_id for wc in wcs)
want_ids = [0x51, 0x71, 0x72] if RSIW else [0x71, 0x72]
if ids != want_ids:
    fail(f"flushed wr_ids {[hex(i) for i in ids]}, expected {[hex(i) for i in want_ids]}")
recv_ops = [wc.opcode for wc in wcs if wc.wr_id in (0x71, 0x72)]
if any(op != e.IBV_WC_RECV for op in recv_ops):
    fail(f"flushed receives have opcodes {recv_ops}")
ok(f"->ERR flushed {len(wcs)} WRs with IBV_WC_WR_FLUSH_ERR")

# In ERROR, a posted send is flushed at the doorbell (rsiw; siw drops it).
qp.post_send(SendWR(wr_id=0x52, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(0, 0, 0)]))
if RSIW:
    wcs = poll_all(cq, 1, "send posted in ERROR")
    if wcs[0].wr_id != 0x52 or wcs[0].status != e.IBV_WC_WR_FLUSH_ERR:
        fail(f"send posted in ERROR: wr_id {wcs[0].wr_id:#x} status {wcs[0].status}")
    ok("send posted in ERROR completes with IBV_WC_WR_FLUSH_ERR")
expect_errno("ERR->RESET", EXPECT["ERR->RESET"], modify_state, qp, e.IBV_QPS_RESET)
expect_errno("ERR->RTS", errno.EINVAL if RSIW else 0, modify_state, qp, e.IBV_QPS_RTS)
qp.close()

# --- completion events -------------------------------------------------------
before = event_fds()
chan = CompChannel(ctx)
new = event_fds() - before
if len(new) != 1:
    fail(f"cannot find the completion channel's file descriptor: {new}")
chan_fd = new.pop()
ecq = CQ(ctx, 8, None, chan, 0)
qp1 = rc_qp(pd, ecq)
qp2 = rc_qp(pd, ecq)
# Armed for solicited completions only: a flushed receive is not solicited.
ecq.req_notify(1)
qp1.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(0, 0, 0)]))
modify_state(qp1, e.IBV_QPS_ERR)
poll_all(ecq, 1, "flush of qp1")
if wait_event(chan, ecq, chan_fd, 1.0):
    fail("completion event on a CQ armed for solicited completions only")
ok("no event for an unsolicited completion on a solicited-only CQ")
# Armed for the next completion: the event comes.
ecq.req_notify(0)
qp2.post_recv(RecvWR(wr_id=2, num_sge=1, sg=[SGE(0, 0, 0)]))
modify_state(qp2, e.IBV_QPS_ERR)
if not wait_event(chan, ecq, chan_fd, 5.0):
    fail("no completion event on an armed CQ")
ecq.ack_events(1)
poll_all(ecq, 1, "flush of qp2")
ok("completion event on an armed CQ")
qp1.close()
qp2.close()
ecq.close()
chan.close()

# --- SRQ ---------------------------------------------------------------------
expect_errno("SRQ with 0 WRs", errno.EINVAL, SRQ, pd, SrqInitAttr(SrqAttr(max_wr=0, max_sge=1)))
expect_errno("SRQ above max_srq_wr", errno.EINVAL, SRQ, pd,
             SrqInitAttr(SrqAttr(max_wr=MAX_SRQ_WR + 1, max_sge=1)))
expect_errno("SRQ with 7 SGEs", errno.EINVAL, SRQ, pd,
             SrqInitAttr(SrqAttr(max_wr=4, max_sge=MAX_SGE + 1)))
expect_errno("SRQ limit above max_wr", errno.EINVAL, SRQ, pd,
             SrqInitAttr(SrqAttr(max_wr=4, max_sge=1, srq_limit=5)))
srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=10, max_sge=2, srq_limit=0)))
# libsiw has no query_srq (EOPNOTSUPP in user space); the ring has 16 entries.
srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
srq.modify(SrqAttr(srq_limit=16), e.IBV_SRQ_LIMIT)
ok("SRQ of 10 WRs: limit armed at 4, then at 16 (its rounded size)")
expect_errno("SRQ limit above its size", errno.EINVAL, srq.modify, SrqAttr(srq_limit=17),
             e.IBV_SRQ_LIMIT)
expect_errno("SRQ resize", errno.EOPNOTSUPP, srq.modify, SrqAttr(max_wr=32), e.IBV_SRQ_MAX_WR)
sqp = rc_qp(pd, cq, srq=srq)
attr, _ = sqp.query(e.IBV_QP_CAP)
if attr.cap.max_recv_wr != 0:
    fail(f"QP with an SRQ reports {attr.cap.max_recv_wr} receive WRs")
srq.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(0, 0, 0)]))
ok("QP on an SRQ; SRQ receive posted")
sqp.close()
srq.close()

cq.close()
pd.close()
ctx.close()

# --- mmap keys ---------------------------------------------------------------
# libsiw takes the mmap key SIW_INVAL_UOBJ_KEY (0x90000) for "not mapped" and
# fails the create, with whatever errno was left (pyverbs' test_query_rc_qp
# saw ENOSPC). ib_core counts a context's keys in pages from 0, so the 145th
# page of queue memory gets that key with C siw, and so does every later queue
# as long as the ones below stay (the failed queue's page is freed and handed
# out again). rsiw starts the keys above it. One-page CQs in a new context.
KEY_PAGE = 0x90000 // os.sysconf("SC_PAGE_SIZE")
kctx = Context(name=DEV)
cqs, failed = [], []
for i in range(KEY_PAGE + 4):
    try:
        cqs.append(CQ(kctx, 4, None, None, 0))
    except PyverbsRDMAError:
        failed.append(i)
for c in cqs:
    c.close()
kctx.close()
want = [] if RSIW else list(range(KEY_PAGE, KEY_PAGE + 4))
if failed != want:
    fail(f"{KEY_PAGE + 4} one-page CQs in a context: creates {failed} failed, expected {want}")
ok(f"{KEY_PAGE + 4} one-page CQs in a context: "
   + (f"creates {failed} failed (siw gives out key 0x90000)" if failed else "all created"))
print("PASS", flush=True)
