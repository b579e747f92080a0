# SPDX-License-Identifier: GPL-2.0
#
# Persistent memory helpers for VM cases with an emulated NVDIMM. Source
# after lib.sh. This interface is stable: the commit extensions' cases
# (commit-pmem) use it.
#
# The case header asks for the NVDIMM and the kernel that drives it:
#
#   # rsiw-test: vms=1 driver=rsiw kernel=pmem nvdimm=128M ...
#   # rsiw-test: vms=2 a=rsiw b=rsiw kernel=pmem nvdimm_a=128M ...
#
# nvdimm=SIZE gives every VM an NVDIMM of SIZE (a multiple of 16M: the
# region's alignment), nvdimm_a= / nvdimm_b= one VM only; kernel=pmem is
# required (the only kernel with ACPI, NFIT and device DAX; tests/vm/run
# refuses nvdimm= without it). In the guest, $RSIW_NVDIMM is the VM's
# NVDIMM size in MiB (0: none). The NVDIMM is a QEMU nvdimm on a shared,
# sparse file under $RSIW_CACHE/nvdimm, removed after the run (nothing
# persists across boots), with a 128 KiB label area beyond SIZE, so the
# region is SIZE bytes and label-less (one namespace spanning it).
#
# The guest has no udev, so nothing loads the drivers of the NVDIMM's ACPI
# device: pmem_up loads them (nfit finds the DIMM in the NFIT table and
# registers its region; dax_pmem and device_dax give a devdax namespace its
# character device).
#
#   pmem_up                 load the drivers, wait for the region (dies
#                           without an NVDIMM)
#   pmem_devdax             make namespace0.0 a devdax namespace (ndctl)
#                           and set PMEM_DAX=/dev/daxX.Y, PMEM_DAX_SIZE
#                           (bytes), PMEM_DAX_ALIGN (bytes: mmap offsets and
#                           lengths must be multiples of it, 2 MiB here) and
#                           PMEM_DAX_START (its physical address, 0x...)
#   pmem_dax_device         pmem_up and pmem_devdax with their logs on
#                           stderr; prints the device path, for
#                           dax=$(pmem_dax_device) || die "no devdax"
#   pmem_is_persistent START SIZE
#                           whether [START, START+SIZE) lies in one "Persistent
#                           Memory" range of /proc/iomem: the ranges whose
#                           resource descriptor is IORES_DESC_PERSISTENT_MEMORY
#                           (NFIT's SPA ranges, E820 type 7), what rxe's
#                           is_pmem_page() and the commit extensions' Flush
#                           check for
#
# A devdax device maps only MAP_SHARED, in multiples of PMEM_DAX_ALIGN
# (tests/vm/cases/pmem-devdax.sh shows it from Python).

pmem_up() {
	[ "${RSIW_NVDIMM:-0}" != 0 ] || die "this VM has no NVDIMM (nvdimm= in the case header)"
	run modprobe nfit
	run modprobe -a nd_pmem dax_pmem device_dax
	wait_for 30 eval 'ls -d /sys/bus/nd/devices/region*' ||
		die "no NVDIMM region appeared (dmesg: $(dmesg | grep -iE 'nfit|nvdimm|nd_' | tail -3))"
	log "NVDIMM region: $(ls /sys/bus/nd/devices | grep region | tr '\n' ' ')"
}

pmem_devdax() {
	local ns dev region=/sys/bus/nd/devices/region0 size align
	# The region is label-less (QEMU leaves the label area blank), so its
	# one namespace spans it whole; vm.py keeps the label area out of it,
	# and a size that is a multiple of the region's alignment (16 MiB on
	# x86) is one.
	size=$(cat "$region/size")
	align=$(cat "$region/align")
	[ $((size % align)) = 0 ] ||
		die "region0: $size bytes, not a multiple of its alignment $align (make nvdimm= a multiple of 16M)"
	ns=$(ndctl create-namespace -f -e namespace0.0 -m devdax 2>&1) ||
		die "ndctl create-namespace -m devdax: $ns"
	echo "$ns" | sed 's/^/  [ndctl] /'
	dev=$(ls -d /sys/bus/dax/devices/dax* 2>/dev/null | head -n 1)
	[ -n "$dev" ] || die "no dax device after create-namespace"
	PMEM_DAX=/dev/${dev##*/}
	wait_for 10 test -c "$PMEM_DAX" || die "$PMEM_DAX is not a character device"
	PMEM_DAX_SIZE=$(cat "$dev/size")
	PMEM_DAX_ALIGN=$(cat "$dev/align")
	PMEM_DAX_START=$(cat "$dev/resource")
	log "devdax $PMEM_DAX: $PMEM_DAX_SIZE bytes at $PMEM_DAX_START, align $PMEM_DAX_ALIGN"
}

pmem_is_persistent() {
	local start=$(($1)) end=$(($1 + $2 - 1)) line range name lo hi
	while read -r line; do
		range=${line%% : *}
		name=${line#* : }
		[[ $range =~ ^[0-9a-f]+-[0-9a-f]+$ ]] || continue
		[ "$name" = "Persistent Memory" ] || continue
		lo=$((16#${range%-*}))
		hi=$((16#${range#*-}))
		[ "$start" -ge "$lo" ] && [ "$end" -le "$hi" ] && return 0
	done </proc/iomem
	return 1
}

pmem_dax_device() {
	{
		pmem_up
		pmem_devdax
	} >&2
	echo "$PMEM_DAX"
}

# siw_pmem_run TAG SECONDS SERVER_ARGS... -- CLIENT_ARGS...: runs
# tests/provider/siw_pmem's server (logs in $RSIW_OUT/TAG-server.log) and,
# once it listens, its client (TAG-client.log) for at most SECONDS; prints
# both logs and dies if either exits non-zero. The case checks their last
# lines.
siw_pmem_run() {
	local tag=$1 t=$2 sargs=() spid rc=0 src=0
	local bin=$RSIW_PROVIDER_DIR/bin/siw_pmem slog=$RSIW_OUT/$1-server.log
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		sargs+=("$1")
		shift
	done
	shift
	"$bin" "${sargs[@]}" >"$slog" 2>&1 &
	spid=$!
	wait_for 30 grep -q "listening" "$slog" ||
		die "the server did not listen: $(cat "$slog")"
	timeout "$t" "$bin" "$@" >"$RSIW_OUT/$tag-client.log" 2>&1 || rc=$?
	wait_for 30 eval '! kill -0 $spid 2>/dev/null' || kill "$spid" 2>/dev/null || true
	wait "$spid" || src=$?
	cat "$slog" "$RSIW_OUT/$tag-client.log"
	[ "$rc" = 0 ] || die "siw_pmem $tag client: exit status $rc"
	[ "$src" = 0 ] || die "siw_pmem $tag server: exit status $src"
}
