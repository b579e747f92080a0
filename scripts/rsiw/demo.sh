#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: boot two VMs with the debug kernel, joined by a virtual link;
# attach rsiw0 to each one's Ethernet device and show it working: devices,
# rping with data check and an ib_write_bw run (scripts/rsiw/guest/demo).
# Prints both VMs' transcripts, then a summary. Expects the kernel and the
# guest root to be built (the make target does that first).
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

# The summary, from the transcripts and the tools' logs (VM a serves, VM b is
# the client: tests/vm/lib.sh serve_client keeps each side's output in
# <role>/<tool>.log).
state() { grep -ho 'rsiw0/1 state [A-Z_]*' "$out/$1/demo.txt" 2>/dev/null | head -1 | awk '{ print $3 }'; }
pings=$(grep -c '^ping data:' "$out/b/rping.log" 2>/dev/null || true)
rping=failed
if [ "${pings:-0}" -gt 0 ] && grep -q '^demo \[a\]: OK' "$out/a/demo.txt" 2>/dev/null; then
	rping="OK: $pings pings of 64 B, each checked by the server (rping -V)"
fi
bw=$(grep -ho '[0-9.]* MB/s$' "$out/b/demo.txt" 2>/dev/null | tail -1)
accel=tcg
[ ! -r "$RSIW_CACHE/kvm-verdict" ] || accel=$(awk '{ print $2 }' "$RSIW_CACHE/kvm-verdict")
accel=${RSIW_ACCEL:-$accel}
echo
echo "===== summary ====="
state_a=$(state a)
state_b=$(state b)
echo "links:  rsiw0 on eth0: VM a ${state_a:-not up}, VM b ${state_b:-not up}"
echo "rping:  $rping"
echo "Write:  ib_write_bw, 64 KiB messages for 3 s: ${bw:-no result}"
if [ "$accel" = kvm ]; then
	echo "This ran the debug kernel (KASAN, lockdep, kmemleak) in QEMU with KVM."
else
	echo "This ran the debug kernel (KASAN, lockdep, kmemleak) under QEMU's emulation (TCG),"
	echo "many times slower than hardware."
fi
echo "It shows that rsiw works, not how fast it is: 'make bench' measures rsiw against"
echo "siw on a kernel without debugging (README.md, 'Benchmark')."
echo "Logs: $out"
[ $rc = 0 ] || rsiw_die "demo failed (status $rc); console: $out/console-a.log"
