#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel=pmem mem=2048 timeout=1200 prepare=tests/vm/blktests-prepare.sh
#
# A short part of blktests' nvme/ group (NVMET_TRTYPES=rdma; see
# blktests-nvme), on a block device backend only: a target and a host over
# the soft-RDMA device with fio verification of the data path (010, 20 s),
# on rsiw (VM a) and C siw (VM b): blktests' part of make check. UUID
# namespace descriptors (004: 69 s beside other cases on the slow CI host),
# a host alone (008), a Flush from the host (014) and controller deletion
# right after setup (031) run in blktests-nvme (make check-long), with the
# rest of the group.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/blktests.sh

BT_BLKDEV_TYPES=device
blktests_case nvme/010
