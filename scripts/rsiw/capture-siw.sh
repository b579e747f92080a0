#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Regenerate the C siw interop fixtures of the wire core
# (tests/wire/fixtures/siw-*.pcap): boot two VMs with the C siw driver, run
# tests/vm/tools/siw-capture.sh in both (servers on VM b, clients and tcpdump
# on VM a) and copy the captures into the fixture directory.
#
#   scripts/rsiw/capture-siw.sh [--out DIR] [--dest DIR] [WORKLOAD...]
#
# --out: the run's log directory; --dest: where the pcaps go (default
# tests/wire/fixtures). To check a fresh capture against the expectations
# without replacing the fixtures:
#
#   scripts/rsiw/capture-siw.sh --dest /tmp/siw-new &&
#   RSIW_SIW_FIXTURES=/tmp/siw-new cargo test --test siw_fixtures  # in tests/wire
#
# WORKLOAD is any of rping write_bw read_bw send_bw terminate (default: all). Needs the
# debug kernel (scripts/rsiw/kernel.sh build debug) and the guest root
# (scripts/rsiw/mkroot.sh). After regenerating, check that
# tests/wire/tests/siw_fixtures.rs still holds (the expected opcode counts
# are in that file) and update tests/wire/fixtures/README.

set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=
fixtures=$RSIW_TOP/tests/wire/fixtures
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2 && shift 2 ;;
	--dest) fixtures=$2 && shift 2 ;;
	*) break ;;
	esac
done
out=${out:-$RSIW_CACHE/logs/$(date +%Y%m%d-%H%M%S)-siw-capture}
mkdir -p "$fixtures"
workloads=${*:-rping write_bw read_bw send_bw terminate}

"$RSIW_TOP/scripts/rsiw/vm.py" run --vms 2 --driver siw --driver-b siw --quiet \
	--timeout 900 --out "$out" \
	--cmd "/rsiw/tests/vm/tools/siw-capture.sh $workloads" ||
	rsiw_die "capture run failed; logs in $out"

kver=$(cat "$RSIW_CACHE/build-debug/include/config/kernel.release")
for w in $workloads; do
	f=$out/a/$w.pcap
	[ -s "$f" ] || rsiw_die "no capture $f"
	cp "$f" "$fixtures/siw-${w//_/-}.pcap"
	rsiw_log "siw-${w//_/-}.pcap: $(stat -c %s "$f") bytes"
done
rsiw_log "captured on $kver (debug kernel, QEMU TCG) on $(date -u +%Y-%m-%d); logs in $out"
