#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=2 a=rsiw b=rsiw timeout=600
#
# NFS over RDMA on rsiw at both ends: VM a is the kernel NFS server (NFSv3,
# RPC-over-RDMA on port 20049), VM b mounts with proto=rdma, writes and
# verifies 4 MiB with fio, copies a file there and reads it back, and unmounts
# (tests/vm/nfsrdma.sh).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/nfsrdma.sh

nfsrdma_setup
nfsrdma_round a rr
pass
