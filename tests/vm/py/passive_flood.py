#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Resource limits of the connection manager (issue 38, item 8). First a raw
# TCP client opens K established connections (raw MPA Requests, accepted by
# the pyverbs server), and the memory each costs is measured: the TX batch
# is allocated as it is used, not 128 KiB up front. Then it floods the
# rdma_cm listener on rsiw with N connections that never send an MPA
# Request; each one costs the responder a connection endpoint and a socket
# until its MPA timeout (5 s). rsiw must hold at most max_mpa_pending of
# them per device and reset the others at once; every connection must be
# closed by the responder (reset or MPA timeout), and the unreclaimable slab
# and vmalloc memory must return to the baseline afterwards.
#
#   passive_flood.py server ADDR PORT           the rdma_cm server on rsiw
#   passive_flood.py client ADDR PORT N CAP K   N raw connections, the cap the
#                                               module was loaded with, K
#                                               established connections
#
# Exits 0 if all pass, 1 with a message otherwise. Timings are reported,
# never asserted.

import errno
import os
import resource
import select
import socket
import struct
import sys
import time

import cmutil
from cmutil import fail, log
from mpa_raw import KEY_REP, KEY_REQ
from mpa_responder import recv_exact

cmutil.NAME = 'passive_flood'

# What failed: every check runs (a run on a driver without one fix still
# measures the others), and the client fails at the end.
errors = []


def check(ok, msg):
    if not ok:
        log(f'FAIL: {msg}')
        errors.append(msg)

# A leak of an endpoint or a socket per connection is more than this.
LEAK_PER_CONN = 512
# The pages an established connection may cost (both sockets, the QP, its
# CQs and the connection state): the TX batch alone was 132 KiB.
MAX_PER_ESTABLISHED = 120 * 1024


def server(addr, port):
    import pyverbs.cm_enums as ce
    from pyverbs.cmid import CMEvent, CMID
    ch, lid = cmutil.listen(addr, port, backlog=1024)
    children = []
    counts = {}
    while True:
        ev = CMEvent(ch)
        t = ev.event_type
        if t == ce.RDMA_CM_EVENT_CONNECT_REQUEST:
            child = CMID(creator=ev, listen_id=lid)
            ev.ack_cm_event()
            child.create_qp(cmutil.qp_attr(wr=4, sge=1))
            child.accept(cmutil.conn_param())
            children.append(child)
        else:
            ev.ack_cm_event()
        counts[t] = counts.get(t, 0) + 1
        log(f'event {t} ({counts[t]})')


def meminfo():
    m = {}
    with open('/proc/meminfo') as f:
        for line in f:
            k, v = line.split(':')
            m[k] = int(v.split()[0]) * 1024
    return m


def settle():
    """Frees what the kernel frees lazily, so that memory can be compared:
    caches, and objects in KASAN's quarantine (shrinking a slab cache
    empties the cache's part of it)."""
    os.sync()
    time.sleep(1)
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('3\n')
    try:
        caches = os.listdir('/sys/kernel/slab')
    except OSError:
        caches = []
    for c in caches:
        try:
            with open(f'/sys/kernel/slab/{c}/shrink', 'w') as f:
                f.write('1\n')
        except OSError:
            pass


def pages_in_use():
    """Pages not free, as a negative count to compare: the buddy allocator's
    free pages plus those on the per-CPU lists, from /proc/zoneinfo (MemFree
    leaves the per-CPU lists out, which blurs it). The pgalloc and pgfree
    counters of /proc/vmstat need CONFIG_VM_EVENT_COUNTERS, which the test
    kernels lack: without it they read nothing, and every cost measured 0."""
    free = zones = 0
    with open('/proc/zoneinfo') as f:
        for line in f:
            w = line.split()
            if w[:2] == ['pages', 'free']:
                free += int(w[2])
                zones += 1
            elif w[:1] == ['count:']:
                free += int(w[1])
    if not zones:
        fail('no free page counts in /proc/zoneinfo')
    return -free


def kernel_mem():
    m = meminfo()
    return m['SUnreclaim'] + m['VmallocUsed']


def accept_queue(port):
    """Connections the listener has not accepted yet (rx_queue of the
    listening socket)."""
    hexport = f'{port:04X}'
    with open('/proc/net/tcp') as f:
        for line in f.readlines()[1:]:
            p = line.split()
            if p[3] == '0A' and p[1].endswith(':' + hexport):
                return int(p[4].split(':')[1], 16)
    fail('the listener is gone')


def mpa_connect(addr, port):
    """An established connection: a raw MPA Request (Rev 1, no CRC), whose
    Reply must accept. Returns the socket."""
    s = socket.create_connection((addr, port), timeout=60)
    s.sendall(KEY_REQ + bytes([0, 1]) + struct.pack('>H', 0))
    hdr = recv_exact(s, 20)
    if hdr[:16] != KEY_REP or hdr[16] & 0x20:
        fail(f'not an accepting MPA Reply: {hdr!r}')
    (pd_len,) = struct.unpack('>H', hdr[18:20])
    recv_exact(s, pd_len)
    return s


def flood(addr, port, n, cap):
    settle()
    base = kernel_mem()
    log(f'baseline: SUnreclaim+VmallocUsed {base // 1024} KiB')
    socks = []
    # Connections the responder reset before connect() returned (the reset
    # can beat the waking of this process).
    early = 0
    t0 = time.monotonic()
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(30)
        try:
            s.connect((addr, port))
        except (ConnectionResetError, ConnectionRefusedError):
            early += 1
            s.close()
            continue
        except OSError as ex:
            fail(f'connection {i}: {ex}')
        s.setblocking(False)
        socks.append(s)
    t1 = time.monotonic()
    while accept_queue(port) > 0:
        time.sleep(0.05)
    t2 = time.monotonic()
    log(f'{n} connections opened in {t1 - t0:.1f} s, all accepted {t2 - t1:.1f} s later')
    held = kernel_mem()
    log(f'with the flood: +{(held - base) // 1024} KiB ({(held - base) // n} B per connection); '
        f'{early} reset before connect() returned')
    # Every connection ends by the responder: a reset (beyond the cap) or a
    # FIN (the MPA timeout of one it held).
    resets, fins = early, 0
    first_reset = None
    open_ = {s.fileno(): s for s in socks}
    poll = select.poll()
    for fd in open_:
        poll.register(fd, select.POLLIN)
    deadline = time.monotonic() + 120
    while open_ and time.monotonic() < deadline:
        for fd, _ in poll.poll(1000):
            poll.unregister(fd)
            s = open_.pop(fd)
            try:
                data = s.recv(64)
                if data:
                    fail(f'the responder sent {data!r} to a silent peer')
                fins += 1
            except ConnectionResetError:
                resets += 1
                if first_reset is None:
                    first_reset = time.monotonic() - t0
            except OSError as ex:
                if ex.errno != errno.ECONNRESET:
                    fail(f'recv: {ex}')
                resets += 1
            # A reset in turn: the responder's socket goes away at once,
            # not after TIME_WAIT, so that memory can be compared soon.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
            s.close()
    t3 = time.monotonic()
    log(f'{resets} reset (the first {first_reset and round(first_reset, 1)} s after the '
        f'first connect), {fins} closed by the MPA timeout, {len(open_)} still open; '
        f'all closed {t3 - t0:.1f} s after the first connect')
    check(not open_, f'{len(open_)} connections still open after 120 s')
    check(n <= cap or resets > 0,
          f'{n} silent connections, none reset: no cap on pending MPA exchanges')
    for s in socks:
        s.close()
    # Back to the baseline: nothing of the endpoints or sockets is left
    # (sockets in TIME_WAIT are small and counted in the tolerance).
    limit = base + n * LEAK_PER_CONN
    end = time.monotonic() + 30
    while True:
        settle()
        now = kernel_mem()
        if now <= limit or time.monotonic() > end:
            break
    log(f'after close: {(now - base) // 1024:+} KiB against the baseline')
    check(now <= limit, f'{(now - base) // 1024} KiB more than before the flood: a leak')


def established(addr, port, k):
    settle()
    before, kbefore = pages_in_use(), kernel_mem()
    socks = [mpa_connect(addr, port) for _ in range(k)]
    # The responder allocates the connection's state before its Reply.
    time.sleep(1)
    settle()
    after, kafter = pages_in_use(), kernel_mem()
    per = (after - before) * 4096 // k
    log(f'{k} established connections: {(after - before) * 4} KiB of pages, '
        f'{per // 1024} KiB per connection ({(kafter - kbefore) // k // 1024} KiB of it '
        f'unreclaimable slab and vmalloc)')
    for s in socks:
        s.close()
    check(per <= MAX_PER_ESTABLISHED,
          f'an established connection costs {per // 1024} KiB '
          f'(at most {MAX_PER_ESTABLISHED // 1024} KiB expected)')


def client(addr, port, n, cap, k):
    port, n, cap, k = int(port), int(n), int(cap), int(k)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 256
    if hard < want:
        hard = want
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    t0 = time.monotonic()
    s = mpa_connect(addr, port)
    log(f'an idle listener accepts in {(time.monotonic() - t0) * 1000:.0f} ms')
    s.close()
    established(addr, port, k)
    flood(addr, port, n, cap)
    t0 = time.monotonic()
    s = mpa_connect(addr, port)
    log(f'after the flood the listener accepts in {(time.monotonic() - t0) * 1000:.0f} ms')
    s.close()
    if errors:
        fail('; '.join(errors))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == 'server':
        server(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 7 and sys.argv[1] == 'client':
        client(*sys.argv[2:7])
    else:
        fail('usage: passive_flood.py server ADDR PORT | client ADDR PORT N CAP K')
    log('ok')


if __name__ == '__main__':
    main()
