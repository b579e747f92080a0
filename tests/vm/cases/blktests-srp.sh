#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel=pmem smp=1 mem=2048 timeout=5400 long=1 prepare=tests/vm/blktests-prepare.sh
#
# blktests' srp/ group (the SRP initiator ib_srp and the LIO target ib_srpt
# in one VM, logged in over RDMA/CM on the soft-RDMA device on eth0, with
# dm-multipath on top) on rsiw (VM a) and, in an identical VM, on C siw (VM
# b): the table of every test on both; fails if a test passes on siw but not
# on rsiw (tests/vm/blktests.sh). The group needs udev (multipathd and the
# tests find the multipath devices by their /dev/disk/by-id links), which
# the guests otherwise do without. One vCPU per VM: no srp/ test asks for
# more, and with two in each VM (four vCPUs on a two-core host) srp/001 took
# 450 s instead of about 100 and srp/002 did not end in 14 minutes.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/blktests.sh

BT_UDEV=1
# A test that hangs costs 10 min, not 15.
BT_TEST_TIMEOUT=600
# srp/002's lockdep report (del_gendisk() vs. writeback through dm, on either
# driver: KNOWN_LOCKDEP in tests/vm/py/known_lockdep.py) turns lockdep off for the rest
# of the boot: run it last, so that the other tests run under lockdep.
# shellcheck disable=SC2046 # a list of words
blktests_case $(cd "$BT_SRC/tests" && ls -d srp/[0-9][0-9][0-9] | grep -vx srp/002) srp/002
