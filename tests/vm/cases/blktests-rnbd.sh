#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel=pmem smp=2 mem=1536 timeout=2400 long=1 prepare=tests/vm/blktests-prepare.sh
#
# blktests' rnbd/ group (the RNBD client mapping a loop device that the
# RNBD server in the same VM exports over RTRS) on rsiw (VM a) and, in an
# identical VM, on C siw (VM b). Upstream runs it on rdma_rxe only
# (USE_RXE=1); tests/vm/blktests.sh opens it to the driver under test. RTRS
# sends its I/O with RDMA Write with Immediate Data, which siw does not have
# and rsiw has (RFC 7306; off by default, so blktests loads rsiw with
# rfc7306=1 here): both tests must pass on rsiw (BT_MUST_PASS), whatever
# siw does.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/blktests.sh

BT_MUST_PASS="rnbd/001 rnbd/002"
BT_RSIW_OPTIONS="rfc7306=1"
# rnbd/002 maps and unmaps 100 times, about 9.5 s each on rsiw under TCG
# (2026-11-29: 8 s of it between the server's "RTRS Session disconnected"
# and the next map).
BT_TEST_TIMEOUT=1500
blktests_case rnbd
