#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Memory registration through the stock provider (pyverbs), for mr-register.sh.

  mr_register.py DEV DRIVER OUTDIR

Registers user MRs with every combination of the four access flags (local
write, remote write, remote read, remote atomic), checks that the invalid ones
(remote write or atomic without local write) fail with EINVAL and the others
succeed with distinct, non-zero keys (lkey == rkey, the STag), that
"rdma resource show mr" lists exactly them, that deregistration removes them,
that bad ranges fail with the right errno, and times a large registration.
Exits non-zero with a message on the first failure.
"""

import ctypes
import errno
import json
import mmap
import os
import subprocess
import sys
import time

from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

DEV, DRIVER, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
RA = e.IBV_ACCESS_REMOTE_ATOMIC
FLAGS = [("LW", LW), ("RW", RW), ("RR", RR), ("RA", RA)]
LARGE = int(os.environ.get("MR_LARGE_MIB", "256")) << 20


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def names(flags):
    return "|".join(n for n, f in FLAGS if flags & f) or "0"


def buf_addr(m):
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def expect_errno(what, want, fn):
    try:
        obj = fn()
    except PyverbsRDMAError as ex:
        if ex.error_code != want:
            fail(f"{what}: errno {ex.error_code}, expected {want} ({ex})")
        print(f"ok   {what}: errno {want} ({errno.errorcode[want]})")
        return
    obj.close()
    fail(f"{what}: succeeded, expected errno {want}")


def resource_mrs():
    out = subprocess.run(["rdma", "-j", "resource", "show", "mr"], check=True,
                         capture_output=True, text=True).stdout
    mine = [m for m in json.loads(out or "[]")
            if m.get("ifname") == DEV and m.get("pid") == os.getpid()]
    # iproute2 prints the keys as hex strings without 0x.
    return {int(m["rkey"], 16) if isinstance(m["rkey"], str) else m["rkey"]: m for m in mine}


ctx = Context(name=DEV)
pd = PD(ctx)
buf = mmap.mmap(-1, 1 << 20)
addr = buf_addr(buf)

# Every combination of the four access flags.
mrs = {}
for combo in range(16):
    flags = sum(f for i, (_, f) in enumerate(FLAGS) if combo >> i & 1)
    what = f"reg_mr access {names(flags)}"
    if flags & (RW | RA) and not flags & LW:
        expect_errno(what, errno.EINVAL, lambda: MR(pd, 8192, flags, address=addr))
        continue
    off = combo * 8192
    mr = MR(pd, 8192, flags, address=addr + off)
    if mr.lkey == 0 or mr.rkey == 0:
        fail(f"{what}: zero key (lkey {mr.lkey:#x}, rkey {mr.rkey:#x})")
    if mr.lkey != mr.rkey:
        fail(f"{what}: lkey {mr.lkey:#x} != rkey {mr.rkey:#x}")
    if mr.rkey in mrs:
        fail(f"{what}: key {mr.rkey:#x} is not unique")
    print(f"ok   {what}: stag {mr.rkey:#010x}")
    mrs[mr.rkey] = (mr, 8192)

# rdma resource show mr lists exactly these.
res = resource_mrs()
if set(res) != set(mrs):
    fail(f"rdma resource show mr: keys {sorted(map(hex, res))}, "
         f"expected {sorted(map(hex, mrs))}")
for k, m in res.items():
    if m.get("mrlen") != mrs[k][1]:
        fail(f"rdma resource show mr: mrlen {m.get('mrlen')} for {k:#x}")
print(f"ok   rdma resource show mr lists the {len(res)} MRs")

# Unaligned start and a length that is not a multiple of the page size.
mr = MR(pd, 5000, LW, address=addr + 100)
print(f"ok   unaligned reg_mr (addr+100, 5000 bytes): stag {mr.rkey:#010x}")
mr.close()

# A different I/O virtual address than the user address (ibv_reg_mr_iova).
mr = MR(pd, 8192, LW | RR, address=addr, iova=0x7f0000000000)
print(f"ok   reg_mr with iova 0x7f0000000000: stag {mr.rkey:#010x}")
mr.close()

# Bad ranges. Address 0 is never mapped.
expect_errno("reg_mr of unmapped memory", errno.EFAULT,
             lambda: MR(pd, 8192, LW, address=0x1000))
if DRIVER == "rsiw":
    # siw does not check the flags it does not implement.
    expect_errno("reg_mr access MW_BIND", errno.EOPNOTSUPP,
                 lambda: MR(pd, 8192, LW | e.IBV_ACCESS_MW_BIND, address=addr))

# Deregistration removes them.
for mr, _ in mrs.values():
    mr.close()
res = resource_mrs()
if res:
    fail(f"rdma resource show mr: {len(res)} MRs left after dereg")
print("ok   all MRs deregistered")

# Re-registration of the same memory gets a new STag.
a = MR(pd, 8192, LW, address=addr)
ka = a.rkey
a.close()
b = MR(pd, 8192, LW, address=addr)
if b.rkey == ka:
    fail(f"re-registration reused STag {ka:#x}")
print(f"ok   re-registration: stag {ka:#010x} then {b.rkey:#010x}")
b.close()

# A large MR.
big = mmap.mmap(-1, LARGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
t0 = time.monotonic()
mr = MR(pd, LARGE, LW | RW | RR, address=buf_addr(big))
t1 = time.monotonic()
mr.close()
t2 = time.monotonic()
print(f"ok   {LARGE >> 20} MiB MR: reg {1000 * (t1 - t0):.0f} ms, dereg {1000 * (t2 - t1):.0f} ms")
with open(os.path.join(OUT, "mr-timing.txt"), "w") as f:
    f.write(f"driver {DRIVER} large_mib {LARGE >> 20} reg_ms {1000 * (t1 - t0):.0f} "
            f"dereg_ms {1000 * (t2 - t1):.0f}\n")
del big

pd.close()
ctx.close()
print("mr_register: all checks passed")
