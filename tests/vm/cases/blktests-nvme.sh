#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw smp=2 mem=2048 timeout=1200 long=part long_timeout=7200 prepare=tests/vm/blktests-prepare.sh
#
# blktests' nvme/ group with NVMET_TRTYPES=rdma (target and host in one VM,
# over the soft-RDMA device on eth0) on rsiw (VM a) and, in an identical VM,
# on C siw (VM b): the table of every test on both, with the reason of each
# "not run"; fails if a test passes on siw but not on rsiw
# (tests/vm/blktests.sh). Two vCPUs per VM (nvme/048 needs them).
#
# make check runs a short part, on a block device backend only: a target
# and a host over the soft-RDMA device with UUID namespace descriptors
# (004), a host (008), fio verification of the data path (010, 20 s), a
# Flush from the host (014) and controller deletion right after setup
# (031). make check-long (RSIW_LONG=1) runs every test of the group that
# needs no test device, on both backends; blktests-nvme-dev runs the others.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/blktests.sh

if [ "${RSIW_LONG:-0}" = 1 ]; then
	blktests_case nodev:nvme
fi
BT_BLKDEV_TYPES=device
blktests_case nvme/004 nvme/008 nvme/010 nvme/014 nvme/031
