#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# An rdma_cm (iWARP) initiator whose connects must be refused: usage
# cm_refused.py ADDR PORT COUNT. Connects COUNT times in a row and expects
# RDMA_CM_EVENT_REJECTED each time (the provider reports -ECONNREFUSED, as siw
# does when it refuses an MPA Reply). Exits 0 if all are refused.

import sys

import pyverbs.cm_enums as ce

import cmutil
from cmutil import conn_param, log, next_event, qp_attr, resolve

cmutil.NAME = 'cm_refused'


def main():
    addr, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(count):
        ch, cmid = resolve(addr, port, qp_attr())
        cmid.connect(conn_param())
        next_event(ch, ce.RDMA_CM_EVENT_REJECTED, f'connect {i}')
        log(f'connect {i}: rejected')
        cmid.close()
        ch.close()
    log('ok')


if __name__ == '__main__':
    main()
