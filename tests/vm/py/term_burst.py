#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# The Terminate must reach the peer (issue 38, item 7; TERM-04: "it MUST send
# a Terminate message before closing the connection"). A raw TCP peer sends
# an RDMA Write to an STag that does not exist and, in the same burst, many
# more FPDUs behind it, and goes on sending while the responder closes: some
# arrive after the responder stopped reading. Closing a TCP socket with
# unread data sends a RST, and so does an abortive close: a RST discards what
# TCP has not sent yet, the Terminate too, and the peer gets ECONNRESET. The
# peer must read a whole Terminate 1/1/00 (DDP-08), then EOF: a FIN before
# any reset (a RST for the bytes it sent after the close may follow).
#
#   term_burst.py server ADDR PORT   the rdma_cm (pyverbs) server on rsiw
#   term_burst.py client ADDR PORT   the raw TCP peer (MPA Rev 1, no CRC)
#
# Exits 0 if all pass, 1 with a message otherwise.

import socket
import struct
import threading
import time

import pyverbs.cm_enums as ce

import cmutil
from cmutil import conn_param, fail, log
import rawpeer
from rx_paths import send, tagged

cmutil.NAME = 'term_burst'

ROUNDS = 3
BURST = 800         # Sends of 16 bytes behind the bad Write: 32 KB
BAD_STAG = 0x7e57ab00
MORE = 8            # Sends per send() after the burst, every 2 ms for up to 3 s


def server(addr, port):
    lst = cmutil.Listener(addr, port)
    for r in range(ROUNDS):
        what = f'round {r}'
        child, _ = lst.request(what)
        child.create_qp(cmutil.qp_attr(wr=4, sge=1))
        bufs = [child.reg_msgs(64) for _ in range(2)]
        for b in bufs:
            child.post_recv(b, 64)
        child.accept(conn_param())
        lst.next_event(ce.RDMA_CM_EVENT_ESTABLISHED, what)
        lst.next_event(ce.RDMA_CM_EVENT_DISCONNECTED, what)
        log(f'{what}: disconnected')
        cmutil.disconnect_after_peer(child, quiet=True)
        for b in bufs:
            b.close()


def keep_sending(s, stop):
    """More Sends while the responder closes, until it resets or stop."""
    more = b''.join(send(BURST + 1 + i, bytes(16)) for i in range(MORE))
    end = time.monotonic() + 3
    while not stop.is_set() and time.monotonic() < end:
        try:
            s.sendall(more)
        except OSError:
            return
        time.sleep(0.002)


def client(addr, port):
    port = int(port)
    burst = b''.join(send(msn, bytes(16)) for msn in range(1, BURST + 1))
    for r in range(ROUNDS):
        s, _ = rawpeer.connect(addr, port)
        # rsiw's RX starts once the QP is in RTS.
        time.sleep(0.2)
        s.settimeout(30)
        s.sendall(tagged(BAD_STAG, 0, bytes(16)) + burst)
        stop = threading.Event()
        more = threading.Thread(target=keep_sending, args=(s, stop))
        more.start()
        data, end = b'', None
        try:
            while True:
                b = s.recv(4096)
                if not b:
                    end = 'EOF'
                    break
                data += b
        except ConnectionResetError:
            end = 'ECONNRESET'
        except socket.timeout:
            end = 'timeout'
        stop.set()
        more.join()
        s.close()
        log(f'round {r}: {len(data)} bytes, then {end}: {data.hex()}')
        if len(data) < 2:
            fail(f'round {r}: no Terminate before {end}')
        # One FPDU: length, ULPDU, padding, CRC field.
        (ulpdu_len,) = struct.unpack('>H', data[:2])
        n = 2 + ulpdu_len + (-(2 + ulpdu_len) % 4) + 4
        if len(data) != n or data[3] & 0x0f != 7:
            fail(f'round {r}: {data.hex()} is not one whole Terminate FPDU')
        term = (data[20] >> 4, data[20] & 0xf, data[21])
        if term != (1, 1, 0):
            fail(f'round {r}: Terminate {term}, expected (1, 1, 0)')
        if end != 'EOF':
            fail(f'round {r}: Terminate {term}, then {end} instead of EOF')
        log(f'round {r}: Terminate {term}, then EOF')
        time.sleep(0.2)


if __name__ == '__main__':
    cmutil.run_role(server, client)
