#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Make a C siw peer send a Terminate (tool of siw-capture.sh).

  siw-terminate.py server ADDR PORT   accept one connection, take one Send,
                                      wait, close
  siw-terminate.py client ADDR PORT   connect, Send 32 bytes, then RDMA Write
                                      64 bytes to an STag the server never
                                      registered: the server's siw answers
                                      with a Terminate (DDP tagged buffer
                                      error, invalid STag) and drops the
                                      connection.
"""

import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import AddrInfo, CMID
from pyverbs.qp import QPCap, QPInitAttr

BAD_STAG = 0x5A5A5A00
BAD_TO = 0x1000


def init_attr():
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    return QPInitAttr(qp_type=e.IBV_QPT_RC, cap=cap, sq_sig_all=1)


def server(addr, port):
    ai = AddrInfo(src=addr, src_service=port, port_space=ce.RDMA_PS_TCP,
                  flags=ce.RAI_PASSIVE)
    lid = CMID(creator=ai, qp_init_attr=init_attr())
    lid.listen()
    print("listening", flush=True)
    cid = lid.get_request()
    rmr = cid.reg_msgs(64)
    cid.post_recv(rmr)
    cid.accept()
    wc = cid.get_recv_comp()
    print(f"server: recv status {wc.status} len {wc.byte_len}", flush=True)
    # The bad Write arrives next; siw terminates. Give it time, then go.
    time.sleep(3)
    cid.close()
    lid.close()


def client(addr, port):
    ai = AddrInfo(dst=addr, dst_service=port, port_space=ce.RDMA_PS_TCP)
    cid = CMID(creator=ai, qp_init_attr=init_attr())
    cid.connect()
    smr = cid.reg_msgs(32)
    smr.write(b"rsiw terminate fixture: a Send.\0", 32)
    cid.post_send(smr)
    wc = cid.get_send_comp()
    print(f"client: send status {wc.status}", flush=True)
    time.sleep(1)
    wmr = cid.reg_msgs(64)
    wmr.write(bytes(range(64)), 64)
    cid.post_write(wmr, 64, BAD_TO, BAD_STAG, e.IBV_SEND_SIGNALED)
    wc = cid.get_send_comp()
    print(f"client: write status {wc.status}", flush=True)
    time.sleep(3)
    cid.close()


if __name__ == "__main__":
    role, addr, port = sys.argv[1:4]
    {"server": server, "client": client}[role](addr, port)
