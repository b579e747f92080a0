#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Create and destroy verbs objects many times; try invalid arguments.

  verbs_stress.py DEV N M OUT_JSON

Every object type the device implements is created and destroyed: PDs and
MRs N times, CQs, QPs and SRQs M times (once they exist: a type whose creation fails
with EOPNOTSUPP is reported as pending, not failed). Then each invalid
argument is tried and must fail with its errno. Leaks are caught by the
kmemleak scan the VM runner does at the end of the case. Prints the rate of
each loop and writes them to OUT_JSON. Exits non-zero on the first failure.
"""

import ctypes
import errno
import json
import mmap
import sys
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPCap, QPInitAttr, QP
from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr
import pyverbs.enums as e

DEV, N, M, OUT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
results = {"iterations": {}, "rate_per_s": {}, "pending": [], "errnos": {}}


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def buf_addr(m):
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def errno_of(fn):
    try:
        obj = fn()
    except PyverbsRDMAError as ex:
        return ex.error_code
    obj.close()
    return 0


def loop(name, make, n):
    """Create and destroy with make() n times; EOPNOTSUPP on the first -> pending."""
    t0 = time.monotonic()
    for i in range(n):
        try:
            obj = make()
        except PyverbsRDMAError as ex:
            if i == 0 and ex.error_code == errno.EOPNOTSUPP:
                print(f"pending {name}: not implemented (EOPNOTSUPP)")
                results["pending"].append(name)
                return False
            fail(f"{name}: iteration {i}: {ex}")
        obj.close()
    dt = time.monotonic() - t0
    results["iterations"][name] = n
    results["rate_per_s"][name] = round(n / dt)
    print(f"ok   {name}: {n} create/destroy in {dt:.1f} s ({n / dt:.0f}/s)", flush=True)
    return True


def expect(what, want, fn, pending_ok=False):
    got = errno_of(fn)
    if got == errno.EOPNOTSUPP and pending_ok:
        print(f"pending {what}: EOPNOTSUPP")
        results["pending"].append(what)
        return
    if got != want:
        fail(f"{what}: errno {got}, expected {want} ({errno.errorcode.get(want)})")
    results["errnos"][what] = errno.errorcode[want]
    print(f"ok   {what}: {errno.errorcode[want]}")


ctx = Context(name=DEV)
attr = ctx.query_device()
pd = PD(ctx)
buf = mmap.mmap(-1, 1 << 16)
addr = buf_addr(buf)

# Object churn.
loop("pd", lambda: PD(ctx), N)
loop("mr", lambda: MR(pd, 1 << 16, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE,
                      address=addr), N)
have_cq = loop("cq", lambda: CQ(ctx, 16), M)
if have_cq:
    cq = CQ(ctx, 64)
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    loop("qp", lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)), M)
    loop("srq", lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1))), M)

# Invalid arguments.
expect("mr of length 0", errno.EINVAL, lambda: MR(pd, 0, e.IBV_ACCESS_LOCAL_WRITE, address=addr))
expect("mr of unmapped memory", errno.EFAULT,
       lambda: MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE, address=0x1000))
expect("mr remote write without local write", errno.EINVAL,
       lambda: MR(pd, 4096, e.IBV_ACCESS_REMOTE_WRITE, address=addr))
expect("mr with unknown access bits", errno.EINVAL,
       lambda: MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | (1 << 19), address=addr))
if have_cq:
    expect("cq larger than max_cqe", errno.EINVAL, lambda: CQ(ctx, attr.max_cqe + 1))
    cq = CQ(ctx, 64)
    big = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=attr.max_sge + 1, max_recv_sge=1)
    expect("qp with too many send SGEs", errno.EINVAL,
           lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=big)))
    deep = QPCap(max_send_wr=attr.max_qp_wr + 1, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
    expect("qp deeper than max_qp_wr", errno.EINVAL,
           lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=deep)))
    expect("srq deeper than max_srq_wr", errno.EINVAL,
           lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=attr.max_srq_wr + 1, max_sge=1))))
    cq.close()
else:
    results["pending"] += ["cq larger than max_cqe", "qp with too many send SGEs",
                           "qp deeper than max_qp_wr", "srq deeper than max_srq_wr"]
    print("pending CQ/QP/SRQ argument checks: CQs are not implemented")

pd.close()
ctx.close()
with open(OUT, "w") as f:
    json.dump(results, f, indent=1)
print(f"verbs_stress: all checks passed ({len(results['pending'])} pending)")
