#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=600
#
# NVMe over Fabrics on rsiw at both ends, in the kernel: VM a exports a
# null_blk namespace with nvmet-rdma, VM b connects with nvme-rdma, writes
# and verifies 4 MiB with fio (CRC32C) and disconnects (tests/vm/nvmeof.sh).
# On the light kernel since 2026-11-30 (190 s on the full debug kernel on
# the slow CI host, where a pair on it runs alone); a kernel ULP at both
# ends under KASAN is commit-kernel's.
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/nvmeof.sh

nvmeof_setup
nvmeof_round a rr
pass
