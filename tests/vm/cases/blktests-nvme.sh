#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw smp=2 mem=2048 timeout=1200 prepare=tests/vm/blktests-prepare.sh
#
# A short part of blktests' nvme/ group (NVMET_TRTYPES=rdma) for make check,
# on rsiw (VM a) and on C siw (VM b), with the table and the rule of
# blktests-nvme-all (make check-long runs the whole group): a target and a
# host over the soft-RDMA device with UUID namespace descriptors (004), a
# host (008), fio verification of the data path (010, 20 s), a Flush from
# the host (014) and controller deletion right after setup (031); each on a
# block device backend only (the file backend is in the whole group).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/blktests.sh

BT_BLKDEV_TYPES=device
blktests_case nvme/004 nvme/008 nvme/010 nvme/014 nvme/031
