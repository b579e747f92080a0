#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""rdma-core's pyverbs tests of atomics and the ibv_wr_*() API on QPs
connected by rdma_cm.

  ext_pyverbs.py DEV ADDR PORT JSON [TEST...]

rdma-core's tests/test_atomic.py and tests/test_qpex.py (shipped by
python3-pyverbs in /usr/share/doc/rdma-core/tests) connect their two players'
QPs the InfiniBand way: each QP is moved to RTR and RTS with the other's QP
number, PSN and GID. iWARP QPs are connected only by their connection
manager, so here the same test classes run with one change: create_players()
connects the client's QP to the server's through rdma_cm, client and server
in this process on device DEV (a listener on ADDR:PORT and a client
connecting to it, over this host's TCP loopback), passing each QP to
rdma_cm as an external QP (ConnParam.qp_num), as rdma-core's own
test_rdmacm_async_traffic_external_qp does. Everything else is rdma-core's:
the players (their contexts, PDs, CQs, MRs, QPs and QP access flags, moved
to INIT by pyverbs as in the originals), the test methods, the traffic
functions of tests/utils.py and their expected values.

The tests are those of the two modules that an RC QP can run: the UD and
XRC ones need QP types iWARP does not have. TESTS lists them and the outcome
each must have; "pass|skip" marks memory windows, which rsiw has no verb
for. Flush and Atomic Write run with rsiw's commit=1 and must pass:
test_qp_ex_rc_flush_type_violate posts a Flush to persistence to a region
registered without IBV_ACCESS_FLUSH_PERSISTENT and expects the responder's
refusal, IBV_WC_REM_ACCESS_ERR (rsiw grants contexts the Flush to
persistence and refuses it on such a region). Every test must pass.

JSON gets {test id: [outcome, detail]} in the form of pyverbs_suite.py's
(the original test ids, tests.test_atomic.AtomicTest.test_...); the table of
outcomes and expectations goes to stdout. Exit status 1 if a test does not
have its expected outcome.

The connections stay up until the end (pyverbs gives a listener's child
cm_ids the listener's PD object and closing one clears it for all): the
process ends with os._exit() and the kernel releases what is left, as for
any process that exits with connected QPs.
"""

import errno
import json
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmutil  # noqa: E402
import pyverbs_suite  # noqa: E402
import pyverbs.cm_enums as ce  # noqa: E402
from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402

cmutil.NAME = 'ext_pyverbs'
SUITE = '/usr/share/doc/rdma-core/tests'

# test id -> the outcomes it may have.
TESTS = {
    'tests.test_atomic.AtomicTest.test_atomic_cmp_and_swap': 'pass',
    'tests.test_atomic.AtomicTest.test_atomic_fetch_and_add': 'pass',
    'tests.test_atomic.AtomicTest.test_atomic_invalid_qp_access': 'pass',
    'tests.test_atomic.AtomicTest.test_atomic_invalid_mr_access': 'pass',
    'tests.test_atomic.AtomicTest.test_atomic_non_aligned_addr': 'pass',
    'tests.test_atomic.AtomicTest.test_atomic_invalid_lkey': 'pass',
    'tests.test_atomic.AtomicTest.test_atomic_invalid_rkey': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_send': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_send_imm': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write_imm': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_write_zero_length': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_read': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_rdma_read_zero_size': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_cmp_swp': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_fetch_add': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_flush': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_flush_type_violate': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_atomic_write': 'pass',
    'tests.test_qpex.QpExTestCase.test_qp_ex_rc_bind_mw': 'pass|skip',
}

ADDR = PORT = None
LISTENER = None
# Every connection's cm_ids, channel and players, kept to the end.
KEEP = []


class Listener(cmutil.Listener):
    """cmutil's listener, which also passes over the DISCONNECTED events of
    the connections of earlier tests (each ends when its test is done, or
    before, when the test makes the QP fail)."""

    def _event(self, want, what):
        while True:
            ev = CMEvent(self.ch)
            got = ev.event_type
            if got == want:
                return ev
            ev.ack_cm_event()
            if got not in (ce.RDMA_CM_EVENT_DISCONNECTED, ce.RDMA_CM_EVENT_TIMEWAIT_EXIT):
                cmutil.fail(f'{what}: expected event {want}, got {got}')

    def request(self, what='request'):
        ev = self._event(ce.RDMA_CM_EVENT_CONNECT_REQUEST, what)
        child = CMID(creator=ev, listen_id=self.lid)
        ev.ack_cm_event()
        return child

    def established(self, what='server'):
        self._event(ce.RDMA_CM_EVENT_ESTABLISHED, what).ack_cm_event()


def connect(client, server):
    """Connects client.qp to server.qp through rdma_cm, both external QPs in
    INIT (as pyverbs left them), one outstanding Read or atomic each way as
    the originals' RTR/RTS attributes (MAX_RD_ATOMIC, MAX_DEST_RD_ATOMIC)."""
    ch = CMEventChannel()
    cid = CMID(creator=ch, port_space=ce.RDMA_PS_TCP)
    cid.resolve_addr(AddrInfo(dst=ADDR, dst_service=PORT, port_space=ce.RDMA_PS_TCP))
    cmutil.next_event(ch, ce.RDMA_CM_EVENT_ADDR_RESOLVED, 'client')
    cid.resolve_route()
    cmutil.next_event(ch, ce.RDMA_CM_EVENT_ROUTE_RESOLVED, 'client')
    cid.connect(ConnParam(resources=1, depth=1, qp_num=client.qp.qp_num))
    child = LISTENER.request()
    child.accept(ConnParam(resources=1, depth=1, qp_num=server.qp.qp_num))
    LISTENER.established()
    cmutil.next_event(ch, ce.RDMA_CM_EVENT_ESTABLISHED, 'client')
    KEEP.append((ch, cid, child, client, server))


def cm_base(base):
    """A subclass of rdma-core's RDMATestCase (tests/base.py) that connects
    the players with rdma_cm. A test class derives from the original and
    then from it, so the original's setUp() (iterations, the atomic_caps
    check) calls this setUp() where it called RDMATestCase's."""

    class CMTestCase(base.RDMATestCase):
        def setUp(self):
            # RDMATestCase.setUp() looks for a RoCE or IB GID, which an
            # iWARP port does not have ("No supported port is up").
            unittest.TestCase.setUp(self)
            self.ib_port = 1
            self.gid_index = 0
            self.dev_info = {'dev_name': self.dev_name, 'ib_port': self.ib_port,
                             'gid_index': self.gid_index}

        def create_players(self, resource, sync_attrs=True, **resource_arg):
            try:
                self.client = resource(**self.dev_info, **resource_arg)
                self.server = resource(**self.dev_info, **resource_arg)
            except PyverbsRDMAError as ex:
                if ex.error_code == errno.EOPNOTSUPP:
                    raise unittest.SkipTest(f'Create player of {resource.__name__} is not supported')
                raise ex
            connect(self.client, self.server)
            if sync_attrs:
                self.sync_remote_attr()
            self.traffic_args = {'client': self.client, 'server': self.server,
                                 'iters': self.iters, 'gid_idx': self.gid_index,
                                 'port': self.ib_port}

        def tearDown(self):
            # The original closes both contexts; here the connection ends
            # and everything stays until the process exits (see the top).
            if KEEP and KEEP[-1][3] is self.client:
                cmutil.disconnect_after_peer(KEEP[-1][1], quiet=True)
            unittest.TestCase.tearDown(self)

    return CMTestCase


def load():
    """Imports rdma-core's test package from SUITE; returns {original test
    id: a test case running it over rdma_cm}."""
    _, tdir = pyverbs_suite.unpack(SUITE)
    sys.path[:0] = [tdir, os.path.dirname(tdir)]
    from args_parser import parser  # noqa: E402 (the suite's own)
    parser.parse_args()
    import tests.base as base  # noqa: E402
    import tests.test_atomic as ta  # noqa: E402
    import tests.test_qpex as tq  # noqa: E402
    cm = cm_base(base)

    class AtomicTest(ta.AtomicTest, cm):
        pass

    class QpExTestCase(tq.QpExTestCase, cm):
        pass

    classes = {'tests.test_atomic.AtomicTest': AtomicTest,
               'tests.test_qpex.QpExTestCase': QpExTestCase}
    return {i: classes[i.rsplit('.', 1)[0]](i.rsplit('.', 1)[1]) for i in TESTS}


def main():
    global ADDR, PORT, LISTENER
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    dev, ADDR, PORT, out = sys.argv[1:5]
    names = sys.argv[5:]
    sys.argv = [sys.argv[0], '--dev', dev]
    cases = load()
    if names:
        cases = {i: c for i, c in cases.items() if any(n in i for n in names)}
    LISTENER = Listener(ADDR, PORT)
    suite = unittest.TestSuite(cases.values())
    t0 = time.monotonic()
    unittest.TextTestRunner(stream=sys.stdout, verbosity=2,
                            resultclass=pyverbs_suite.Recorder).run(suite)
    dt = time.monotonic() - t0
    # The Recorder keys by test.id() (this module's classes): back to the
    # originals' ids.
    got = {}
    for i, c in cases.items():
        got[i] = pyverbs_suite.Recorder.outcomes.get(c.id(), ['error', 'no outcome recorded'])
    with open(out, 'w') as f:
        json.dump({'dev': dev, 'seconds': round(dt), 'tests': got}, f, indent=1, sort_keys=True)
    w = max(len(i) for i in got)
    bad = 0
    print(f"{'test':{w}}  {'rsiw':6} {'expected':9} note")
    for i, (o, detail) in sorted(got.items()):
        ok = o in TESTS[i].split('|')
        bad += not ok
        note = ('' if ok else 'UNEXPECTED ') + (detail or '')
        print(f'{i:{w}}  {o:6} {TESTS[i]:9} {note}'.rstrip())
    counts = {}
    for o, _ in got.values():
        counts[o] = counts.get(o, 0) + 1
    print(f'ext_pyverbs on {dev}: {len(got)} tests in {dt:.0f} s: '
          + ', '.join(f'{n} {k}' for k, n in sorted(counts.items()))
          + f'; {bad} without the expected outcome')
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if bad else 0)


if __name__ == '__main__':
    sys.exit(main())
