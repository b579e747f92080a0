#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A hostile user of the siw ABI's mapped rings, for hostile-rings.sh.

  hostile_rings.py DEV DRIVER

Creates a CQ and a QP through the stock provider, finds their rings in the
process's mappings of the uverbs device (/proc/self/maps: the mmap offset is
the ring's key; keys grow in creation order: CQ, SQ, RQ), maps them a second
time through the same file descriptor, and then:

  1. maps with bad offsets and sizes (must fail with EINVAL);
  2. fills the SQ and RQ with garbage elements marked VALID (bad opcodes,
     255 SGEs, huge lengths, unknown flags) and rings the doorbell through a
     regular post_send: the unconnected QP must refuse with ENOTCONN and leave
     the rings alone;
  3. moves the QP to ERROR: every element is completed with
     IBV_WC_WR_FLUSH_ERR (rsiw; siw ignores the SQ of a never-connected QP),
     with opcodes the provider can map;
  4. refills the SQ with garbage in ERROR and rings the doorbell again
     (rsiw flushes them);
  5. fills the CQ with garbage CQEs so that it overflows, and writes garbage
     into the arming word; a further flush must not crash the kernel.

The kernel must survive all of it with a clean console (checked by the
runner). Exits non-zero on the first failure.
"""

import errno
import mmap
import os
import struct
import sys

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

DEV, DRIVER = sys.argv[1], sys.argv[2]
RSIW = DRIVER == "rsiw"
SQE, RQE, CQE = 120, 112, 32
NSQ, NRQ, NCQ = 16, 16, 64
PAGE = mmap.PAGESIZE


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok: {msg}", flush=True)


def uverbs_maps():
    """Returns [(offset, size)] of this process's mappings of the uverbs device."""
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/dev/infiniband/uverbs"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                maps.append((int(parts[2], 16), hi - lo))
    return sorted(maps)


def cmd_fd():
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/infiniband/uverbs"):
                return int(fd)
        except OSError:
            pass
    fail("no open uverbs device")


def garbage_sqe(i):
    # id, flags (VALID + unknown bits + INLINE), num_sge 255, opcode i*37, rkey, raddr,
    # then SGEs with huge lengths.
    head = struct.pack("<QHBBIQ", 0xbad0000 + i, 0xffff if i % 2 else 0x0003, 255,
                       (i * 37) & 0xff, 0xdeadbeef, 0xffffffffffffffff)
    sges = b"".join(struct.pack("<QII", 0xffffffffffff0000, 0xffffffff, i) for _ in range(6))
    return head + sges


def garbage_rqe(i):
    head = struct.pack("<QHBBI", 0xbee0000 + i, 0xfff1 if i % 2 else 0x0001, 200 + i, 0xff, 7)
    sges = b"".join(struct.pack("<QII", 0, 0x80000000, 0) for _ in range(6))
    return head + sges


def modify(qp, state):
    qp.modify(QPAttr(qp_state=state), e.IBV_QP_STATE)


def drain(cq):
    wcs = []
    while True:
        n, got = cq.poll(16)
        if n == 0:
            return wcs
        wcs += got[:n]


ctx = Context(name=DEV)
pd = PD(ctx)
cq = CQ(ctx, NCQ, None, None, 0)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=NSQ, max_recv_wr=NRQ, max_send_sge=2,
                                 max_recv_sge=2), sq_sig_all=1))
maps = uverbs_maps()
print(f"uverbs mappings (offset, size): {maps}", flush=True)
if len(maps) != 3:
    fail(f"expected 3 ring mappings (CQ, SQ, RQ), found {maps}")
(cq_key, cq_len), (sq_key, sq_len), (rq_key, rq_len) = maps
fd = cmd_fd()

# 1. Bad mappings.
for what, off, size in [("unknown key", sq_key + 64 * PAGE, PAGE),
                        ("key 0x7fff0000", 0x7fff0000, PAGE),
                        ("too long", cq_key, cq_len + PAGE)]:
    try:
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=off)
        m.close()
        fail(f"mmap with a bad {what} succeeded")
    except OSError as ex:
        if ex.errno != errno.EINVAL:
            fail(f"mmap with a bad {what}: errno {ex.errno}, expected EINVAL")
        ok(f"mmap with a bad {what}: EINVAL")

sq = mmap.mmap(fd, sq_len, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=sq_key)
rq = mmap.mmap(fd, rq_len, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=rq_key)
cqm = mmap.mmap(fd, cq_len, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=cq_key)

# 2. Garbage in slots 1..NSQ-2 (libsiw posts to slot 0 next and rings the doorbell only
#    when the slot before it, NSQ-1, is free).
for i in range(1, NSQ - 1):
    sq[i * SQE:(i + 1) * SQE] = garbage_sqe(i)
for i in range(NRQ):
    rq[i * RQE:(i + 1) * RQE] = garbage_rqe(i)
try:
    qp.post_send(SendWR(wr_id=0x5e0, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(0, 0, 0)]))
    fail("doorbell on an unconnected QP succeeded")
except PyverbsRDMAError as ex:
    # The kernel answers ENOTCONN; libsiw returns -1 for a failed doorbell.
    ok(f"doorbell with garbage SQEs on an unconnected QP fails ({ex.error_code})")
if drain(cq):
    fail("completions before the QP left IDLE")
if struct.unpack_from("<H", sq, 1 * SQE + 8)[0] == 0:
    fail("the kernel consumed an SQE of an unconnected QP")

# 3. To ERROR: everything is flushed.
modify(qp, e.IBV_QPS_ERR)
wcs = drain(cq)
n_sq = NSQ - 1 if RSIW else 0
if len(wcs) != n_sq + NRQ:
    fail(f"{len(wcs)} completions after ->ERR, expected {n_sq + NRQ}")
bad = [w for w in wcs if w.status != e.IBV_WC_WR_FLUSH_ERR or w.qp_num != qp.qp_num]
if bad:
    fail(f"completions not flushed: {[(hex(w.wr_id), w.status) for w in bad]}")
ids = {w.wr_id for w in wcs}
want = {0xbee0000 + i for i in range(NRQ)}
if RSIW:
    want |= {0x5e0} | {0xbad0000 + i for i in range(1, NSQ - 1)}
if ids != want:
    fail(f"flushed wr_ids {sorted(hex(i) for i in ids)}, expected {sorted(hex(i) for i in want)}")
ok(f"->ERR flushed {len(wcs)} garbage and regular elements with IBV_WC_WR_FLUSH_ERR")
if RSIW:
    left = [i for i in range(NSQ) if struct.unpack_from("<H", sq, i * SQE + 8)[0]]
    if left:
        fail(f"SQ slots still owned by the kernel after the flush: {left}")

# 4. A second QP, moved to ERROR first: garbage SQEs in slots 1..NSQ-2, then a regular
#    post (slot 0) rings the doorbell, which flushes them all (rsiw; siw leaves them).
qp3 = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                        cap=QPCap(max_send_wr=NSQ, max_recv_wr=NRQ), sq_sig_all=1))
modify(qp3, e.IBV_QPS_ERR)
new_maps = [m for m in uverbs_maps() if m[0] > rq_key]
if len(new_maps) != 2:
    fail(f"expected 2 new ring mappings (SQ, RQ) of the second QP, found {new_maps}")
(sq3_key, sq3_len), _ = new_maps
sq3 = mmap.mmap(fd, sq3_len, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=sq3_key)
for i in range(1, NSQ - 1):
    sq3[i * SQE:(i + 1) * SQE] = garbage_sqe(i + 100)
qp3.post_send(SendWR(wr_id=0x5e1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(0, 0, 0)]))
wcs = drain(cq)
want = NSQ - 1 if RSIW else 0
if len(wcs) != want or any(w.status != e.IBV_WC_WR_FLUSH_ERR for w in wcs):
    fail(f"doorbell in ERROR: {[(hex(w.wr_id), w.status) for w in wcs]}, expected {want}")
ok(f"doorbell in ERROR flushed {len(wcs)} SQEs")
sq3.close()
qp3.close()

# 5. A CQ full of garbage owned by the consumer, and a garbage arming word: the next
#    completions overflow the CQ (IB_EVENT_CQ_ERR; they are dropped). The garbage is not
#    polled: that would test the provider, not the kernel.
for i in range(cq_len // CQE):
    cqm[i * CQE:(i + 1) * CQE] = struct.pack("<QBBHIQQ", i, 0xff, 0xee, 0xffff, 7, 0, 0)
qp2 = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                        cap=QPCap(max_send_wr=4, max_recv_wr=4), sq_sig_all=1))
for i in range(4):
    qp2.post_recv(RecvWR(wr_id=0x900 + i, num_sge=1, sg=[SGE(0, 0, 0)]))
modify(qp2, e.IBV_QPS_ERR)
ok("flush into a CQ full of garbage survived")
for i in range(cq_len // CQE):
    cqm[i * CQE + 8] = 0

qp2.close()
sq.close()
rq.close()
cqm.close()
qp.close()
cq.close()
pd.close()
ctx.close()
print("PASS", flush=True)
