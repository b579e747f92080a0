#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# A user CQ's ring is charged to the memory cgroup of the process that
# creates it (issue 38, item 8): the process moves itself into CGROUP (a
# cgroup v2 directory with the memory controller), creates a CQ of 2^20
# entries (32 MiB of ring) on DEV, and the cgroup's memory.current must grow
# by at least 30 MiB; destroying the CQ gives it back.
#
#   cq_memcg.py DEV CGROUP
#
# Exits 0 if all pass, 1 with a message otherwise.

import os
import sys

from pyverbs.cq import CQ
from pyverbs.device import Context

ENTRIES = 1 << 20
MIB = 1 << 20


def log(msg):
    print(f'cq_memcg: {msg}', flush=True)


def fail(msg):
    log(f'FAIL: {msg}')
    sys.exit(1)


def current(cg):
    with open(os.path.join(cg, 'memory.current')) as f:
        return int(f.read())


def main():
    dev, cg = sys.argv[1:3]
    with open(os.path.join(cg, 'cgroup.procs'), 'w') as f:
        f.write(f'{os.getpid()}\n')
    ctx = Context(name=dev)
    before = current(cg)
    cq = CQ(ctx, ENTRIES - 1, None, None, 0)
    during = current(cg)
    cq.close()
    after = current(cg)
    log(f'memory.current: {before // 1024} KiB, with a CQ of {ENTRIES} entries '
        f'{during // 1024} KiB, after destroying it {after // 1024} KiB')
    if during - before < 30 * MIB:
        fail(f'the CQ ring is not charged to the cgroup ({(during - before) // 1024} KiB)')
    if during - after < 30 * MIB:
        fail(f'destroying the CQ gave back {(during - after) // 1024} KiB only')
    ctx.close()
    log('ok')


if __name__ == '__main__':
    main()
