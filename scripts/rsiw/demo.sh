#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: boot two VMs with the debug kernel, joined by a virtual link;
# attach rsiw0 to each one's Ethernet device and show it working: devices,
# rping with data check and an ib_write_bw run (scripts/rsiw/guest/demo).
# Expects the kernel and the guest root to be built (the make target does
# that first).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out="$RSIW_CACHE/logs/demo-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
rsiw_log "booting the two demo VMs (console logs: $out/console-{a,b}.log)"
rc=0
"$RSIW_TOP/scripts/rsiw/vm.py" run --vms 2 --driver rsiw --driver-b rsiw --quiet \
	--timeout 900 --out "$out" --cmd /rsiw/guest/demo || rc=$?
for role in a b; do
	if [ -f "$out/$role/demo.txt" ]; then
		echo "===== VM $role ====="
		cat "$out/$role/demo.txt"
	fi
done
[ $rc = 0 ] || rsiw_die "demo failed (status $rc); console: $out/console-a.log"
