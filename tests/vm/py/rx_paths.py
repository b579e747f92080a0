#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# rsiw's RX engine takes a small FPDU that arrives whole in one step (the
# whole path: RxParser::feed_whole, the whole-Write and whole-Send code of
# rx.rs and recv.rs), and anything else event by event (the general path).
# Both must give the same completions, the same memory contents and the same
# Terminate for the same FPDUs. A raw TCP peer sends each scenario's FPDUs
# twice, on two connections: once whole (each FPDU in one TCP segment) and
# once dribbled (each FPDU cut into three segments sent 100 ms apart, so that
# no segment holds a whole FPDU and TCP does not merge them before rsiw reads
# them). The rdma_cm server on rsiw records, per connection, its receive
# completions (status, length), the bytes of its receive buffers and of its
# remote-writable buffer; the raw peer records what rsiw sent back (the
# Terminate FPDU). Each pair must agree, and match what the scenario expects.
#
#   rx_paths.py server ADDR PORT   the rdma_cm (pyverbs) server on rsiw
#   rx_paths.py client ADDR PORT   the raw TCP peer (MPA Rev 1, no CRC)
#
# Scenarios (after a zero-length Write, so that each FPDU below is past the
# stream's first message, where the whole path applies):
#
#   send        a Send of 8 bytes                      receive: 8 bytes
#   send0       a Send of 0 bytes                      receive: 0 bytes
#   send-se     a Send with Solicited Event            receive: 8 bytes
#   send-two    two Sends of 8 and 5 bytes             both receives
#   send-long   24 bytes into a 16-byte receive        TERM 1/2/05 (DDP-09)
#   send-msn    a Send with MSN 2 first                TERM 1/2/03 (DDP-05)
#   send-norecv a Send with no receive posted          TERM 1/2/02 (DDP-09)
#   send-inv    a Send with Invalidate of a bad STag   TERM 0/2/09, LOC_PROT_ERR
#   write       a Write of 16 bytes                    the bytes land
#   write-stag  a Write to a wrong STag                TERM 1/1/00 (DDP-08)
#   write-oob   a Write past the end of the buffer     TERM 1/1/01
#   write-ro    a Write to a read-only buffer          TERM 1/1/00 (T-06)
#   mixed       Write 16, Send 8, Write 4, Send 0      all land, in order
#
# Exits 0 if all pass, 1 with a message otherwise.

import struct
import sys
import time

import pyverbs.cm_enums as ce
import pyverbs.enums as e

import cmutil
from cmutil import BAD_STAG, conn_param, fail, log, next_event
from mpa_raw import read_all
import rawpeer

cmutil.NAME = 'rx_paths'

SIZE = 256
RECV = 64
SUCCESS, LOC_PROT, FLUSH = e.IBV_WC_SUCCESS, e.IBV_WC_LOC_PROT_ERR, e.IBV_WC_WR_FLUSH_ERR

# name: (receives posted (their sizes), receive statuses and lengths expected,
#        Terminate (layer, type, code) expected or None)
SCENARIOS = {
    'send': ((RECV, RECV), ((SUCCESS, 8), (FLUSH, 0)), None),
    'send0': ((RECV, RECV), ((SUCCESS, 0), (FLUSH, 0)), None),
    'send-se': ((RECV, RECV), ((SUCCESS, 8), (FLUSH, 0)), None),
    'send-two': ((RECV, RECV), ((SUCCESS, 8), (SUCCESS, 5)), None),
    'send-long': ((16,), ((FLUSH, 0),), (1, 2, 5)),
    'send-msn': ((RECV, RECV), ((FLUSH, 0), (FLUSH, 0)), (1, 2, 3)),
    'send-norecv': ((), (), (1, 2, 2)),
    'send-inv': ((RECV, RECV), ((LOC_PROT, None), (FLUSH, 0)), (0, 2, 9)),
    'write': ((RECV,), ((FLUSH, 0),), None),
    'write-stag': ((RECV,), ((FLUSH, 0),), (1, 1, 0)),
    'write-oob': ((RECV,), ((FLUSH, 0),), (1, 1, 1)),
    'write-ro': ((RECV,), ((FLUSH, 0),), (1, 1, 0)),
    'mixed': ((RECV, RECV), ((SUCCESS, 8), (SUCCESS, 0)), None),
}
MODES = ('whole', 'dribbled')
DATA = bytes((i * 13 + 5) & 0xff for i in range(32))


def fpdu(ulpdu):
    body = struct.pack('>H', len(ulpdu)) + ulpdu
    body += bytes(-len(body) % 4)
    return body + bytes(4)


def tagged(stag, to, payload):
    """An RDMA Write: tagged, L=1, DV=1, opcode 0."""
    return fpdu(bytes([0xC1, 0x40]) + struct.pack('>IQ', stag, to) + payload)


def send(msn, payload, opcode=3, inv=0):
    """A Send variant: untagged, L=1, QN 0, MO 0."""
    return fpdu(bytes([0x41, 0x40 | opcode]) + struct.pack('>IIII', inv, 0, msn, 0) + payload)


def fpdus(name, rw, ro):
    """The FPDUs of a scenario; rw and ro are (address, rkey) of the
    server's remote-writable and read-only buffers."""
    (a, k), (ra, rk) = rw, ro
    first = [tagged(0, 0, b'')]
    return first + {
        'send': [send(1, DATA[:8])],
        'send0': [send(1, b'')],
        'send-se': [send(1, DATA[:8], opcode=5)],
        'send-two': [send(1, DATA[:8]), send(2, DATA[8:13])],
        'send-long': [send(1, DATA[:24])],
        'send-msn': [send(2, DATA[:8])],
        'send-norecv': [send(1, DATA[:8])],
        'send-inv': [send(1, DATA[:8], opcode=4, inv=BAD_STAG)],
        'write': [tagged(k, a + 8, DATA[:16])],
        'write-stag': [tagged(BAD_STAG, a, DATA[:16])],
        'write-oob': [tagged(k, a + SIZE - 8, DATA[:16])],
        'write-ro': [tagged(rk, ra, DATA[:16])],
        'mixed': [tagged(k, a, DATA[:16]), send(1, DATA[16:24]), tagged(k, a + 32, DATA[:4]),
                  send(2, b'')],
    }[name]


def server(addr, port):
    lst = cmutil.Listener(addr, port)
    results = {}
    for name, (recvs, want, _) in SCENARIOS.items():
        for mode in MODES:
            what = f'{name} ({mode})'
            child, _ = lst.request(what)
            child.create_qp(cmutil.qp_attr(wr=4, sge=1))
            rw = child.reg_write(SIZE)
            ro = child.reg_read(SIZE)
            rw.write(bytes(SIZE), SIZE, 0)
            bufs = []
            for n in recvs:
                b = child.reg_msgs(n)
                b.write(bytes(n), n, 0)
                child.post_recv(b, n)
                bufs.append(b)
            child.accept(conn_param(struct.pack('<QIQI', rw.buf, rw.rkey, ro.buf, ro.rkey)))
            lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, what)
            lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, what)
            wcs = []
            for _ in recvs:
                wc = child.get_recv_comp()
                wcs.append((wc.status, wc.byte_len if wc.status == SUCCESS else None))
            got = (tuple(wcs), tuple(bytes(b.read(b.length, 0)) for b in bufs),
                   bytes(rw.read(SIZE, 0)))
            log(f'{what}: receives {wcs}')
            exp = tuple((st, n if st == SUCCESS else None) for st, n in want)
            if tuple(wcs) != exp:
                fail(f'{what}: receives {wcs}, expected {list(exp)}')
            if mode == 'dribbled' and got != results[name]:
                fail(f'{name}: whole and dribbled differ: {results[name]!r} against {got!r}')
            results[name] = got
            cmutil.disconnect_after_peer(child, quiet=True)
            for b in bufs + [rw, ro]:
                b.close()
        check_memory(name, results[name])
        log(f'{name}: whole and dribbled agree')


def check_memory(name, got):
    """The bytes the scenario's Sends and Writes must have left."""
    _, recv_bytes, mem = got
    want_mem = bytearray(SIZE)
    if name == 'write':
        want_mem[8:24] = DATA[:16]
    if name == 'mixed':
        want_mem[0:16] = DATA[:16]
        want_mem[32:36] = DATA[:4]
    if mem != bytes(want_mem):
        fail(f'{name}: remote-writable buffer {mem[:48].hex()}...')
    firsts = {'send': DATA[:8], 'send-se': DATA[:8], 'send-two': DATA[:8],
              'mixed': DATA[16:24]}
    if name in firsts and recv_bytes[0][:8] != firsts[name]:
        fail(f'{name}: first receive holds {recv_bytes[0][:16].hex()}')
    if name == 'send-two' and recv_bytes[1][:5] != DATA[8:13]:
        fail(f'{name}: second receive holds {recv_bytes[1][:16].hex()}')


def norm(term):
    """A Terminate FPDU without the fields of the echoed DDP header that name
    the connection's own buffers (each connection registers new ones): the
    STag and TO of a tagged header, the Invalidate STag of an untagged one."""
    b = bytearray(term)
    if len(b) >= 40:
        end = 40 if b[26] & 0x80 else 32
        b[28:end] = bytes(end - 28)
    return bytes(b)


def connect(addr, port):
    """A Rev 1 MPA connection. Returns (socket, rw, ro) with the server's
    buffers from the Reply's private data."""
    s, pd = rawpeer.connect(addr, port)
    a, k, ra, rk = struct.unpack('<QIQI', pd[:24])
    return s, (a, k), (ra, rk)


def client(addr, port):
    port = int(port)
    for name, (_, _, term) in SCENARIOS.items():
        back = {}
        for mode in MODES:
            s, rw, ro = connect(addr, port)
            # rsiw's RX starts once the QP is in RTS; the pause keeps the first
            # FPDU from arriving with the Reply's ACK.
            time.sleep(0.2)
            pieces = []
            for f in fpdus(name, rw, ro):
                pieces += [f] if mode == 'whole' else [f[:3], f[3:-1], f[-1:]]
            for piece in pieces:
                try:
                    s.sendall(piece)
                except (BrokenPipeError, ConnectionResetError):
                    # rsiw terminated and closed on a header before the rest.
                    break
                time.sleep(0.1)
            data, eof = read_all(s, 2)
            s.close()
            back[mode] = data
            got = None
            if data:
                # The Terminate FPDU: 2-byte length, untagged header with opcode 7.
                if len(data) < 24 or data[3] & 0x0f != 7:
                    fail(f'{name} ({mode}): rsiw sent {data.hex()}, not a Terminate')
                got = (data[20] >> 4, data[20] & 0xf, data[21])
            if got != term:
                fail(f'{name} ({mode}): Terminate {got}, expected {term}')
            log(f'{name} ({mode}): Terminate {got}, eof={eof}')
            # Let the server see the close before the next connection.
            time.sleep(0.2)
        if norm(back['whole']) != norm(back['dribbled']):
            fail(f'{name}: rsiw answered {back["whole"].hex()} whole, '
                 f'{back["dribbled"].hex()} dribbled')


if __name__ == '__main__':
    cmutil.run_role(server, client)
