#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: rsiw against the C siw in identical VM pairs, in the same run.
# Builds the bench kernel (no debug options), boots two VMs with rsiw in both,
# then two with siw in both, runs the same perftest set in each pair
# (scripts/rsiw/guest/bench) and prints every figure with the ratio
# rsiw/siw (bandwidth: higher is better; latency: lower is better).
#
# Under QEMU TCG (KVM guests hang on these machines) absolute numbers are
# low and noisy: read the ratios, and repeat (RSIW_BENCH_ROUNDS) to see the
# spread.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

rounds=${RSIW_BENCH_ROUNDS:-1}
"$RSIW_TOP/scripts/rsiw/kernel.sh" build bench
out="$RSIW_CACHE/logs/bench-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
	for drv in siw rsiw; do
		rsiw_log "round $r: $drv <-> $drv"
		"$RSIW_TOP/scripts/rsiw/vm.py" run --variant bench --vms 2 --driver "$drv" \
			--driver-b "$drv" --quiet --timeout 1200 --out "$out/$drv-$r" \
			--cmd /rsiw/guest/bench ||
			rsiw_die "the $drv pair failed; logs in $out/$drv-$r"
		[ -s "$out/$drv-$r/b/bench.txt" ] || rsiw_die "no results from the $drv pair ($out/$drv-$r)"
	done
done
python3 - "$out" "$rounds" <<'PY'
import statistics, sys
from pathlib import Path
out, rounds = Path(sys.argv[1]), int(sys.argv[2])
res = {}
for drv in ("siw", "rsiw"):
    for r in range(1, rounds + 1):
        for line in (out / f"{drv}-{r}" / "b" / "bench.txt").read_text().split("\n"):
            f = line.split()
            if len(f) == 4:
                res.setdefault((f[0], f[1], f[3]), {}).setdefault(drv, []).append(float(f[2]))
print(f"{'test':<14} {'size':>8} {'siw':>12} {'rsiw':>12} {'unit':<5} {'rsiw/siw':>9}")
for (tool, size, unit), v in res.items():
    s = statistics.median(v.get("siw", [0])) if v.get("siw") else None
    o = statistics.median(v.get("rsiw", [0])) if v.get("rsiw") else None
    if s and o:
        ratio = o / s if unit == "MB/s" else s / o
        rs = f"{ratio:9.2f}"
    else:
        rs = f"{'n/a':>9}"
    fmt = lambda x: f"{x:12.2f}" if x is not None else f"{'-':>12}"
    print(f"{tool:<14} {size:>8} {fmt(s)} {fmt(o)} {unit:<5} {rs}")
print("(ratio > 1: rsiw is better; latency ratios are siw/rsiw)")
print(f"logs: {out}")
PY
