#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw kernel=pmem timeout=300 long=1
#
# User rings are charged to the creator's memory cgroup (issue 38, item 8;
# tests/vm/py/cq_memcg.py): a process in a cgroup creates a CQ of 2^20
# entries on rsiw, and the cgroup's memory.current must grow by its 32 MiB
# ring, and shrink again when it is destroyed. Skips on a kernel without the
# memory controller (CONFIG_MEMCG). The memory controller is in the pmem
# kernel only (kernel/configs/rsiw-pmem.config): make check-pmem, check-long.
. /rsiw/tests/vm/lib.sh

cg=/sys/fs/cgroup
grep -qw cgroup2 /proc/filesystems || skip "no cgroup v2 in this kernel"
mountpoint -q $cg || run mount -t cgroup2 none $cg
grep -qw memory $cg/cgroup.controllers || skip "no memory cgroup (CONFIG_MEMCG) in this kernel"
load_driver
veth_pair veth0 veth1
rsiw_up veth0
echo +memory >$cg/cgroup.subtree_control
mkdir -p $cg/rsiw-cq
run python3 /rsiw/tests/vm/py/cq_memcg.py "$DEV" $cg/rsiw-cq || die "cq_memcg failed"
rmdir $cg/rsiw-cq
pass
