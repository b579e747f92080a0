#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: rsiw against the C siw in identical VM pairs, in the same run.
# Builds the bench kernel (no debug options), boots two VMs with siw in both,
# then two with rsiw in both, then two with rsiw sending FPDUs of up to
# 64 KiB (fpdu_segments=45), runs the same set (perftest, connection rate,
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
# One host CPU per VM (vm.py): steadier latencies (rsiw-testing.rst).
export RSIW_VM_PIN=${RSIW_VM_PIN:-1}
RSIW_BENCH_ONLY=${RSIW_BENCH_ONLY:-}
"$RSIW_TOP/scripts/rsiw/kernel.sh" build bench
out="$RSIW_CACHE/logs/bench-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
# Configurations: name, driver, extra kernel arguments. "rsiw-64k" is rsiw
# with FPDUs of up to 64 KiB (fpdu_segments=45) instead of one per segment.
configs=("siw siw" "rsiw rsiw" "rsiw-64k rsiw rsiw.fpdu_segments=45")
# The perftest clients preload tests/vm/tools/rdma-connect-delay.c (see
# tests/vm/cases/perftest-interop.sh): a siw server loses a first Send that
# arrives right after its MPA Reply. The 0.2 s it waits after ESTABLISHED is
# outside perftest's measured (-D) interval. The guest has no compiler.
tools=$out/tools
mkdir -p "$tools"
gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$tools/rdma-connect-delay.so" \
	"$RSIW_TOP/tests/vm/tools/rdma-connect-delay.c" -ldl
for r in $(seq 1 "$rounds"); do
	for c in "${configs[@]}"; do
		read -r name drv kargs <<<"$c"
		rsiw_log "round $r: $name <-> $name"
		mkdir -p "$out/$name-$r"
		cp -r "$tools" "$out/$name-$r/"
		"$RSIW_TOP/scripts/rsiw/vm.py" run --variant bench --vms 2 --driver "$drv" \
			--driver-b "$drv" ${kargs:+--karg "$kargs"} --quiet --timeout 1200 \
			--out "$out/$name-$r" \
			--cmd "RSIW_BENCH_ONLY=${RSIW_BENCH_ONLY@Q} /rsiw/guest/bench" ||
			rsiw_die "the $name pair failed; logs in $out/$name-$r"
		[ -s "$out/$name-$r/b/bench.txt" ] || rsiw_die "no results from the $name pair ($out/$name-$r)"
	done
done
python3 - "$out" "$rounds" <<'PY' | tee "$out/results.txt"
import statistics, sys
from pathlib import Path
out, rounds = Path(sys.argv[1]), int(sys.argv[2])
res, notes = {}, []
names = ("siw", "rsiw", "rsiw-64k")
for drv in names:
    for r in range(1, rounds + 1):
        for line in (out / f"{drv}-{r}" / "b" / "bench.txt").read_text().split("\n"):
            if line.startswith("#"):
                notes.append(f"{drv} round {r}: {line[1:].strip()}")
            f = line.split()
            if len(f) == 4 and not line.startswith("#"):
                res.setdefault((f[0], f[1], f[3]), {}).setdefault(drv, []).append(float(f[2]))
med = lambda v: statistics.median(v) if v else None
tcp = {d: med(res.get(("tcp", "131072", "MB/s"), {}).get(d)) for d in names}
fmt = lambda x: f"{x:10.2f}" if x is not None else f"{'-':>10}"
rat = lambda x: f"{x:8.2f}" if x is not None else f"{'n/a':>8}"
print(f"{'test':<12} {'size':>7} {'siw':>10} {'rsiw':>10} {'rsiw-64k':>10} {'unit':<6} "
      f"{'rsiw/siw':>8} {'64k/siw':>8} {'siw/tcp':>8} {'rsiw/tcp':>8} {'64k/tcp':>8}")
for (test, size, unit), v in res.items():
    m = {d: med(v.get(d)) for d in names}
    def vs_siw(d):
        s, o = m["siw"], m[d]
        if not (s and o):
            return None
        # Higher is better for rates, lower for latencies.
        return s / o if unit == "us" else o / s
    def vs_tcp(d):
        if unit != "MB/s" or test == "tcp" or not (m[d] and tcp[d]):
            return None
        return m[d] / tcp[d]
    print(f"{test:<12} {size:>7} {fmt(m['siw'])} {fmt(m['rsiw'])} {fmt(m['rsiw-64k'])} {unit:<6} "
          f"{rat(vs_siw('rsiw'))} {rat(vs_siw('rsiw-64k'))} {rat(vs_tcp('siw'))} "
          f"{rat(vs_tcp('rsiw'))} {rat(vs_tcp('rsiw-64k'))}")
print(f"(medians of {rounds} round(s); x/siw > 1: x is better, for latencies it is siw/x;")
print(" x/tcp: RDMA bandwidth over iperf3's on the same pair's link; rsiw-64k: rsiw")
print(" with fpdu_segments=45, FPDUs of up to 64 KiB)")
for n in notes:
    print(n)
print(f"logs: {out}")
PY
