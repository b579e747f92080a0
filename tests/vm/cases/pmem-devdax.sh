#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rsiw-test: vms=1 driver=rsiw kernel=pmem nvdimm=128M timeout=300 long=1
#
# The rig's persistent memory (issue 37): the VM gets a 128 MiB emulated
# NVDIMM (QEMU nvdimm=on, file-backed, with a label area; the VM boots with
# ACPI for its NFIT). The drivers find it, ndctl makes its namespace a
# devdax namespace, /dev/daxX.Y appears, its range is "Persistent Memory"
# in /proc/iomem (IORES_DESC_PERSISTENT_MEMORY, what a FLUSH_PERSISTENT
# registration checks), and a shared mapping of it keeps what was written
# through another mapping. Last, an rsiw device comes up in the same VM
# (the ACPI boot changes nothing for it).
. /rsiw/tests/vm/lib.sh
. /rsiw/tests/vm/pmem.sh

pmem_up
grep -i "persistent" /proc/iomem | sed 's/^/  [iomem] /'
pmem_devdax
pmem_is_persistent "$PMEM_DAX_START" "$PMEM_DAX_SIZE" ||
	die "$PMEM_DAX ($PMEM_DAX_START, $PMEM_DAX_SIZE bytes) is not inside a Persistent Memory range of /proc/iomem"
log "$PMEM_DAX lies in a Persistent Memory range"
# The same check must refuse ordinary RAM (or it could not fail).
ram=$(awk -F' : ' '$2 == "System RAM" { print $1; exit }' /proc/iomem)
! pmem_is_persistent "0x${ram%-*}" 4096 || die "System RAM at ${ram%-*} taken for persistent memory"

# devdax: MAP_SHARED only, offset and length multiples of the alignment.
python3 - "$PMEM_DAX" "$PMEM_DAX_ALIGN" <<'PY'
import mmap, os, sys
dev, align = sys.argv[1], int(sys.argv[2])
fd = os.open(dev, os.O_RDWR)
a = mmap.mmap(fd, 2 * align, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
pattern = bytes((i * 7 + 3) & 0xff for i in range(4096))
a[0:4096] = pattern
a[align + 4096 - 8:align + 4096] = b"rsiwpmem"
# No a.flush(): msync() of device DAX is EINVAL (no fsync; persistence is
# the CPU's cache writeback, e.g. arch_wb_cache_pmem in the kernel).
b = mmap.mmap(fd, 2 * align, mmap.MAP_SHARED, mmap.PROT_READ)
assert b[0:4096] == pattern, "the second mapping does not see the first one's bytes"
assert b[align + 4096 - 8:align + 4096] == b"rsiwpmem"
try:
    mmap.mmap(fd, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
    raise SystemExit("a private mapping of device DAX succeeded")
except OSError as e:
    print(f"private mapping refused as device DAX must: {e}")
print(f"{dev}: {2 * align} bytes mapped shared, written and read back")
PY

load_driver
veth_pair veth0 veth1
rsiw_up veth0
pass
