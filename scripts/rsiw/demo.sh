#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: boot the debug kernel in a VM, attach rsiw0 to its Ethernet
# device and show it working (scripts/rsiw/guest/demo). Expects the kernel
# and the guest root to be built (the make target does that first).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out="$RSIW_CACHE/logs/demo-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
rsiw_log "booting the demo VM (console log: $out/console-a.log)"
rc=0
"$RSIW_TOP/scripts/rsiw/vm.py" run --vms 1 --driver rsiw --net lone --quiet \
	--timeout 600 --out "$out" --cmd /rsiw/guest/demo || rc=$?
if [ -f "$out/a/demo.txt" ]; then
	cat "$out/a/demo.txt"
fi
[ $rc = 0 ] || rsiw_die "demo failed (status $rc); console: $out/console-a.log"
