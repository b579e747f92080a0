#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel=pmem smp=2 mem=2048 timeout=7200 long=1 prepare=tests/vm/blktests-prepare.sh
#
# blktests' nvme/ group with NVMET_TRTYPES=rdma (target and host in one VM,
# over the soft-RDMA device on eth0) on rsiw (VM a) and, in an identical VM,
# on C siw (VM b): the table of every test on both, with the reason of each
# "not run"; fails if a test passes on siw but not on rsiw
# (tests/vm/blktests.sh). It asks for two vCPUs per VM (nvme/048 needs
# them). Every test of the group that needs no test device, on both
# backends; blktests-nvme-dev runs the others, blktests-nvme-kasan those that
# require KASAN (nvme/069: "not run" here), blktests-nvme-short a short
# subset. The tables of 2026-11-29 are in rsiw-testing.rst (blktests).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/blktests.sh

blktests_case nodev:nvme
