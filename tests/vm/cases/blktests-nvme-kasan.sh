#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=siw kernel=pmem-kasan mem=2048 timeout=1800 long=1 prepare=tests/vm/blktests-prepare.sh
#
# The tests of blktests' nvme/ group that require KASAN (_have_kernel_options
# KASAN: nvme/069, the nvme-generic cdev's lifetime under NVMe multipath,
# where a use-after-free would show as a KASAN report), on the pmem kernel
# with KASAN, rsiw (VM a) against C siw (VM b), NVMET_TRTYPES=rdma. The pmem
# kernel of blktests-nvme has no KASAN (speed under TCG), so these tests are
# "not run" there; this case runs them.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/blktests.sh

blktests_case nvme/069
