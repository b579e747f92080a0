#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# A socket whose sk_user_data another owner took must be refused cleanly:
# usage sk_owner.py ADDR PORT CGROUP2_DIR.
#
# Loads two BPF programs with the bpf() system call (no libbpf or bpftool in
# the guest) and attaches them like an application that redirects TCP
# traffic would:
#
#   SEC("sockops") int sockops(struct bpf_sock_ops *skops)
#   {
#           __u64 key;
#
#           if (skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
#                   return 1;
#           key = (__u64)skops->local_port << 32 | skops->remote_port;
#           bpf_sock_hash_update(skops, &sock_hash, &key, BPF_ANY);
#           return 1;
#   }
#
#   SEC("sk_skb/verdict") int verdict(struct __sk_buff *skb)
#   {
#           return SK_PASS;
#   }
#
# on the cgroup and on the sockhash. Every passively established TCP socket
# then gets a psock in its sk_user_data before its listener's owner accepts
# it, and the psock wraps its sk_data_ready and sk_write_space and calls the
# callbacks it saved: those the socket inherited from rsiw's listener.
#
# An rdma_cm connect to a listener on ADDR:PORT must then fail (rsiw refuses
# the accepted socket and closes it, touching neither the psock nor its
# callbacks). With the programs detached, the same listener must accept the
# next connect: the refusal left it working. The runner fails the case on
# any KASAN report, oops or stack overflow in the console.

import ctypes
import os
import signal
import struct
import sys

import pyverbs.cm_enums as ce

import cmutil
from cmutil import (Listener, conn_param, disconnect_after_peer, fail, log, next_event,
                     qp_attr, resolve)

cmutil.NAME = 'sk_owner'

NR_BPF = 321  # x86_64
BPF_MAP_CREATE, BPF_PROG_LOAD, BPF_PROG_ATTACH, BPF_PROG_DETACH = 0, 5, 8, 9
BPF_MAP_TYPE_SOCKHASH = 18
BPF_PROG_TYPE_SOCK_OPS, BPF_PROG_TYPE_SK_SKB = 13, 14
BPF_CGROUP_SOCK_OPS, BPF_SK_SKB_VERDICT = 3, 38
BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB = 5
BPF_FUNC_sock_hash_update = 70
BPF_PSEUDO_MAP_FD = 1
SK_PASS = 1

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def bpf(cmd, attr):
    """bpf(cmd, attr): attr is the packed start of union bpf_attr."""
    buf = ctypes.create_string_buffer(attr.ljust(128, b'\0'), 128)
    ret = libc.syscall(NR_BPF, cmd, buf, 128)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f'bpf({cmd}): {os.strerror(err)}')
    return ret


def insn(code, dst=0, src=0, off=0, imm=0):
    """One struct bpf_insn."""
    return struct.pack('<BBhi', code, dst | src << 4, off, imm)


# Opcodes used below (include/uapi/linux/bpf.h, bpf_common.h).
MOV64_X, MOV64_K, LDX_W, STX_DW = 0xbf, 0xb7, 0x61, 0x7b
JNE_K, LSH64_K, OR64_X, ADD64_K = 0x55, 0x67, 0x4f, 0x07
LD_DW, CALL, EXIT = 0x18, 0x85, 0x95
OP, REMOTE_PORT, LOCAL_PORT = 0, 64, 68  # offsets in struct bpf_sock_ops


def sockops_insns(map_fd):
    return b''.join([
        insn(MOV64_X, 6, 1),                            # r6 = skops
        insn(LDX_W, 2, 6, OP),                          # r2 = skops->op
        insn(JNE_K, 2, 0, 12, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB),
        insn(LDX_W, 3, 6, LOCAL_PORT),                  # r3 = local_port << 32
        insn(LSH64_K, 3, 0, 0, 32),
        insn(LDX_W, 2, 6, REMOTE_PORT),                 # r3 |= remote_port
        insn(OR64_X, 3, 2),
        insn(STX_DW, 10, 3, -8),                        # key on the stack
        insn(MOV64_X, 1, 6),                            # r1 = skops
        insn(LD_DW, 2, BPF_PSEUDO_MAP_FD, 0, map_fd),   # r2 = &sock_hash
        insn(0),
        insn(MOV64_X, 3, 10),                           # r3 = &key
        insn(ADD64_K, 3, 0, 0, -8),
        insn(MOV64_K, 4, 0, 0, 0),                      # r4 = BPF_ANY
        insn(CALL, 0, 0, 0, BPF_FUNC_sock_hash_update),
        insn(MOV64_K, 0, 0, 0, 1),                      # return 1
        insn(EXIT),
    ])


def verdict_insns():
    return insn(MOV64_K, 0, 0, 0, SK_PASS) + insn(EXIT)


def prog_load(prog_type, insns, name, expected_attach_type=0):
    code = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(b'GPL')
    log_buf = ctypes.create_string_buffer(65536)
    attr = struct.pack('<IIQQIIQII16sII', prog_type, len(insns) // 8,
                       ctypes.addressof(code), ctypes.addressof(lic),
                       1, len(log_buf), ctypes.addressof(log_buf), 0, 0,
                       name, 0, expected_attach_type)
    try:
        return bpf(BPF_PROG_LOAD, attr)
    except OSError:
        log(f'verifier log for {name}:\n{log_buf.value.decode(errors="replace")}')
        raise


def attach(target_fd, prog_fd, attach_type, cmd=BPF_PROG_ATTACH):
    bpf(cmd, struct.pack('<IIII', target_fd, prog_fd, attach_type, 0))


def connect(addr, port):
    """Connects a new client. Returns (channel, cm_id)."""
    ch, cmid = resolve(addr, port, qp_attr())
    cmid.connect(conn_param())
    return ch, cmid


def main():
    if len(sys.argv) != 4:
        fail('usage: sk_owner.py ADDR PORT CGROUP2_DIR')
    addr, port, cgroup = sys.argv[1:4]
    # A refused connect may take the MPA timeout to be reported; never hang.
    signal.alarm(240)

    map_fd = bpf(BPF_MAP_CREATE, struct.pack('<IIIII', BPF_MAP_TYPE_SOCKHASH, 8, 8, 64, 0))
    verdict = prog_load(BPF_PROG_TYPE_SK_SKB, verdict_insns(), b'rsiw_verdict',
                        BPF_SK_SKB_VERDICT)
    sockops = prog_load(BPF_PROG_TYPE_SOCK_OPS, sockops_insns(map_fd), b'rsiw_sockops')
    cg = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY)
    # The verdict first: a psock takes the map's programs when it is made.
    attach(map_fd, verdict, BPF_SK_SKB_VERDICT)
    attach(cg, sockops, BPF_CGROUP_SOCK_OPS)
    log('sockops and sockhash verdict attached')

    srv = Listener(addr, port)
    ch, cmid = connect(addr, port)
    ev = cmutil.CMEvent(ch)
    got = ev.event_type
    ev.ack_cm_event()
    if got == ce.RDMA_CM_EVENT_ESTABLISHED:
        fail('connected through a socket a sockmap owns')
    log(f'connect refused (event {got})')
    cmid.close()
    ch.close()

    attach(cg, sockops, BPF_CGROUP_SOCK_OPS, BPF_PROG_DETACH)
    log('sockops detached')
    ch, cmid = connect(addr, port)
    child, _ = srv.request('connect after detach')
    child.create_qp(qp_attr())
    child.accept(conn_param())
    next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, 'client after detach')
    srv.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, 'server after detach')
    log('connected after detach')
    child.disconnect()
    srv.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, 'server disconnect')
    next_event(ch, ce.RDMA_CM_EVENT_DISCONNECTED, 'client disconnect')
    disconnect_after_peer(cmid)
    child.close()
    cmid.close()
    log('ok')


if __name__ == '__main__':
    main()
