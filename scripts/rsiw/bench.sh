#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: rsiw against the C siw in identical VM pairs, in the same run.
# Builds the bench kernel (no debug options), boots two VMs with rsiw in both,
# then two with siw in both, runs the same set (perftest, connection rate,
# iperf3 as the TCP reference) in each pair
# (scripts/rsiw/guest/bench) and prints every figure with the ratios
# rsiw/siw and RDMA/TCP; the table is also written to results.txt in the
# log directory.
#
# Under QEMU TCG (KVM guests hang on these machines) absolute numbers are
# low and noisy: read the ratios, and repeat (RSIW_BENCH_ROUNDS) to see the
# spread. RSIW_BENCH_ONLY selects a subset (see scripts/rsiw/guest/bench).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

rounds=${RSIW_BENCH_ROUNDS:-1}
RSIW_BENCH_ONLY=${RSIW_BENCH_ONLY:-}
"$RSIW_TOP/scripts/rsiw/kernel.sh" build bench
out="$RSIW_CACHE/logs/bench-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
	for drv in siw rsiw; do
		rsiw_log "round $r: $drv <-> $drv"
		"$RSIW_TOP/scripts/rsiw/vm.py" run --variant bench --vms 2 --driver "$drv" \
			--driver-b "$drv" --quiet --timeout 1200 --out "$out/$drv-$r" \
			--cmd "RSIW_BENCH_ONLY=${RSIW_BENCH_ONLY@Q} /rsiw/guest/bench" ||
			rsiw_die "the $drv pair failed; logs in $out/$drv-$r"
		[ -s "$out/$drv-$r/b/bench.txt" ] || rsiw_die "no results from the $drv pair ($out/$drv-$r)"
	done
done
python3 - "$out" "$rounds" <<'PY' | tee "$out/results.txt"
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
med = lambda v: statistics.median(v) if v else None
tcp = {d: med(res.get(("tcp", "131072", "MB/s"), {}).get(d)) for d in ("siw", "rsiw")}
fmt = lambda x: f"{x:12.2f}" if x is not None else f"{'-':>12}"
rat = lambda x: f"{x:9.2f}" if x is not None else f"{'n/a':>9}"
print(f"{'test':<14} {'size':>8} {'siw':>12} {'rsiw':>12} {'unit':<6} {'rsiw/siw':>9} {'siw/tcp':>9} {'rsiw/tcp':>9}")
for (test, size, unit), v in res.items():
    s, o = med(v.get("siw")), med(v.get("rsiw"))
    ratio = None
    if s and o:
        # Higher is better for rates, lower for latencies.
        ratio = s / o if unit == "us" else o / s
    st = ot = None
    if unit == "MB/s" and test != "tcp":
        st = s / tcp["siw"] if s and tcp["siw"] else None
        ot = o / tcp["rsiw"] if o and tcp["rsiw"] else None
    print(f"{test:<14} {size:>8} {fmt(s)} {fmt(o)} {unit:<6} {rat(ratio)} {rat(st)} {rat(ot)}")
print(f"(medians of {rounds} round(s); rsiw/siw > 1: rsiw is better, for latencies it is")
print(" siw/rsiw; x/tcp: RDMA bandwidth over iperf3's on the same pair's link)")
print(f"logs: {out}")
PY
