#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make check: host tests, then the kernel, guest root and VM tests (KUnit
# runs inside the VM tests). Each stage prints its own "N passed, N failed"
# line; this script adds them up and ends with the total. A stage that fails
# without running its tests (a build error, say) counts as one failure.
# make check-long runs it with RSIW_LONG=1: tests/vm/run then adds the long
# cases and the long parts of cases (rsiw-testing.rst, "Long tests").
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RSIW_TOP"

total_pass=0
total_fail=0
summary=()

stage() {
	local name=$1 log t0 rc line p f
	shift
	log=$(mktemp)
	t0=$SECONDS
	rsiw_log "stage $name: $*"
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	rm -f "$log"
	if [ -n "$line" ]; then
		p=$(sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed.*/\2/' <<<"$line")
		f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
	else
		p=0
		f=0
	fi
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		f=1
	fi
	if [ -z "$line" ] && [ "$rc" = 0 ]; then
		p=1
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	summary+=("$(printf '%-12s %4d passed %4d failed %6d s' "$name" "$p" "$f" $((SECONDS - t0)))")
	return "$rc"
}

stage setup scripts/rsiw/setup.sh
stage host tests/wire/check.sh
# The upstream series: git am onto pristine 7.3.4, checkpatch --strict; after
# the first kernel build, its tree is the one kernel.sh built (series.sh).
stage series scripts/rsiw/series.sh check
# The VM suite runs rsiw on two kernels: most cases on the light debug kernel,
# the cases marked kernel=debug on the full one with KASAN (tests/vm/run). The
# non-debug bench kernel boots the siw peer of perftest-interop (kernel_b=).
if stage kernel-light scripts/rsiw/kernel.sh build light &&
	{ stage series-tree scripts/rsiw/series.sh tree || true; } &&
	stage kernel scripts/rsiw/kernel.sh build debug &&
	stage kernel-bench scripts/rsiw/kernel.sh build bench &&
	# The pmem kernel (NVDIMM, the memory controller, what blktests needs):
	# make check runs blktests-nvme-short on it, the other cases are long.
	stage kernel-pmem scripts/rsiw/kernel.sh build pmem &&
	# The pmem kernel with KASAN: only long cases run on it (blktests-nvme-kasan).
	{ [ "${RSIW_LONG:-0}" != 1 ] || stage kernel-pmem-kasan scripts/rsiw/kernel.sh build pmem-kasan; } &&
	stage rootfs scripts/rsiw/mkroot.sh; then
	stage vm tests/vm/run ${T:-}
fi

echo
printf '%s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
