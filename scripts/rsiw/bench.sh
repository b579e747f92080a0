#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: rsiw against the C siw in identical VM pairs, in the same run.
# Builds the bench kernel (no debug options) and boots three VM pairs at
# once: siw in both VMs, rsiw in both, and rsiw sending FPDUs of up to
# 64 KiB (fpdu_segments=45). scripts/rsiw/bench.py hands out the tests
# (perftest, connection rate, iperf3 as the TCP reference; guest side
# scripts/rsiw/guest/bench) so that the pairs take turns test by test, and
# prints every figure with the ratios rsiw/siw and RDMA/TCP; the table is
# also written to results.txt in the log directory.
#
# Under QEMU TCG (KVM guests hang on these machines) absolute numbers are
# low and drift: read the ratios, and repeat (RSIW_BENCH_ROUNDS, default 3)
# to see the spread. RSIW_BENCH_ONLY selects a subset (see
# scripts/rsiw/guest/bench). RSIW_BENCH_PAIRS=N boots N pairs per
# configuration and averages them (each boot has its own speed);
# RSIW_BENCH_LAT_ITERS sets the latency tools' iterations (default 1000);
# RSIW_BENCH_CONFIGS=rsiw boots only siw and the named configurations;
# RSIW_BENCH_SWAP=1 measures all configurations in every pair, swapping the
# driver between turns (the ratio then compares runs of the same boot).
# RSIW_BENCH_PT adds options to the perftest bandwidth tools on both sides,
# e.g. "-Q 1" (a completion per message instead of per 100; perftest refuses
# "-e" in the fixed-time runs the bench makes); RSIW_BENCH_BW_ITERS=N runs
# them for N iterations instead, RSIW_BENCH_EVENTS=1 so with "-e" for Read
# and Send (no polling vCPU; scripts/rsiw/guest/bench); RSIW_BENCH_STATS=1 keeps
# each guest's counters around each perftest run, and its TCP sockets' state
# (ss) halfway through it (scripts/rsiw/guest/bench);
# RSIW_BENCH_SCHED sets scheduler features in every guest (e.g.
# NO_RUN_TO_PARITY).
#
# Issue 39's rows: ib_{write,read,send}_bw at 64 KiB on 8 QPs at once
# (perftest's -q 8, size "65536q8": RSIW_BENCH_ONLY='_bw-65536' selects them
# with the one-QP rows, '65536q8' alone), and the CPU cost of a byte:
# cpu:TEST is the guest CPU time of both VMs of the pair per GB that TEST
# moved (s/GB, /proc/stat's busy time over the test's measured interval),
# kcpu:TEST the kernel's part of it (perftest's client polls its CQ and keeps
# a vCPU busy whatever the driver does). Lower is better: their ratios are
# siw/x and tcp/x, against iperf3's cost on the same pair (cpu:tcp). They
# come with the bandwidth tools at 64 KiB (one and 8 QPs) and tcp;
# RSIW_BENCH_CPU (a grep -E pattern over TOOL-SIZE, see
# scripts/rsiw/guest/bench) picks other tests, RSIW_BENCH_CPU= none.
#
# Then the commit extensions on persistent memory (issue 37; RSIW_BENCH_PMEM=0
# leaves them out of a whole bench, RSIW_BENCH_PMEM=1 adds them to a subset,
# RSIW_BENCH_ONLY=pmem runs only them): one VM on the pmem
# kernel with an emulated NVDIMM (tests/vm/cases/bench-pmem.sh), rsiw to
# rsiw over a veth pair, the median and mean latency of a 64-byte Write
# with a Flush to persistence, with a Flush to global visibility, with a
# 1-byte Read (the Read-after-Write idiom a Flush replaces), of an Atomic
# Write, and the Atomic Write rate. The pmem kernel is the light debug
# kernel (lockdep, kmemleak) plus NVDIMM drivers, not the bench kernel: read
# those rows against each other (the ratio row), not against the table
# above. They go below the table in results.txt (and the saved table).
#
# At the end scripts/rsiw/bench-plot.py draws the table (bandwidth against
# message size with TCP's as a line, and latency) and the table and the
# picture are saved as Documentation/infiniband/rsiw-bench.{txt,png}, the
# ones README.md shows (RSIW_BENCH_DOC=0 leaves them alone: runs with
# RSIW_BENCH_ONLY or other subsets do not replace them by default).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# The plot needs Debian's matplotlib (for /usr/bin/python3).
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	rsiw_log "installing python3-matplotlib (for the bench's plot)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		python3-matplotlib >/dev/null 2>&1 || rsiw_die "cannot install python3-matplotlib"
fi

rounds=${RSIW_BENCH_ROUNDS:-3}
# One host CPU per VM (vm.py): steadier latencies (rsiw-testing.rst).
export RSIW_VM_PIN=${RSIW_VM_PIN:-1}
RSIW_BENCH_ONLY=${RSIW_BENCH_ONLY:-}
[ "$RSIW_BENCH_ONLY" = pmem ] || "$RSIW_TOP/scripts/rsiw/kernel.sh" build bench
started=$(date '+%Y-%m-%d %H:%M')
out="$RSIW_CACHE/logs/bench-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
# The perftest clients preload tests/vm/tools/rdma-connect-delay.c (see
# tests/vm/cases/perftest-interop.sh): a siw server loses a first Send that
# arrives right after its MPA Reply. The 0.2 s it waits after ESTABLISHED is
# outside perftest's measured (-D) interval. The guest has no compiler.
tools=$out/tools
mkdir -p "$tools"
gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$tools/rdma-connect-delay.so" \
	"$RSIW_TOP/tests/vm/tools/rdma-connect-delay.c" -ldl
if [ "$RSIW_BENCH_ONLY" = pmem ]; then
	: >"$out/results.txt"
else
	python3 "$RSIW_TOP/scripts/rsiw/bench.py" "$out" "$rounds" "$RSIW_BENCH_ONLY"
fi

# bench_pmem: the rows of tests/vm/cases/bench-pmem.sh, appended to results.txt.
bench_pmem() {
	local dir=$out/pmem/bench-pmem/a
	"$RSIW_TOP/scripts/rsiw/kernel.sh" build pmem
	"$RSIW_TOP/scripts/rsiw/rdma-core.sh"
	"$RSIW_TOP/tests/vm/run" --long --out "$out/pmem" bench-pmem ||
		rsiw_die "bench-pmem failed (logs in $out/pmem)"
	{
		echo
		echo "persistent memory (bench-pmem: rsiw to rsiw in one VM, an emulated NVDIMM, devdax;"
		echo "the pmem kernel, lockdep and kmemleak: compare these rows with each other)"
		# bench-R-client.log: round R with the defaults; bench-wq-R-client.log:
		# the same with bh_respond_qn3=0 (QN 3 responses from the work item).
		# Each row: the median over the rounds of each round's median.
		python3 - "$dir" <<'PY'
import glob, statistics, sys
def rounds(prefix):
    out = []
    for f in sorted(glob.glob(f"{sys.argv[1]}/{prefix}-[0-9]*-client.log")):
        lat, rate = {}, None
        for line in open(f):
            w = line.split()
            if w[:2] == ["siw_pmem", "bench:"] and len(w) == 5:
                lat[w[2]] = float(w[3])
            elif w[:3] == ["siw_pmem", "bench:", "atomic_write_rate"]:
                rate = float(w[3])
        out.append((lat, rate))
    return out
for prefix, title in (("bench", None),
                      ("bench-wq", "with bh_respond_qn3=0 (Atomic Write and Flush responses from the work item):")):
    rs = rounds(prefix)
    if not rs:
        continue
    if title:
        print("  " + title)
    for name in rs[0][0]:
        v = [r[0][name] for r in rs if name in r[0]]
        print(f"  {name:26s} median {statistics.median(v):8.1f} us  (rounds: {' '.join(f'{x:.1f}' for x in v)})")
    v = [r[1] for r in rs if r[1]]
    if v:
        print(f"  {'atomic_write_rate':26s} {statistics.median(v):8.0f} op/s (8 posted at once; rounds: {' '.join(f'{x:.0f}' for x in v)})")
    q = [r[0]["write64+flush_persistent"] / r[0]["write64+read1"] for r in rs
         if r[0].get("write64+read1")]
    if q:
        print(f"  {'flush_p/read_after_write':26s} {statistics.median(q):8.2f} (Write+Flush(P) / Write+Read, per round: {' '.join(f'{x:.2f}' for x in q)})")
PY
	} | tee -a "$out/results.txt"
}
# By default with the whole bench only (RSIW_BENCH_ONLY selects perftest rows).
pmem_default=0
[ -n "$RSIW_BENCH_ONLY" ] || pmem_default=1
if [ "${RSIW_BENCH_PMEM:-$pmem_default}" = 1 ] || [ "$RSIW_BENCH_ONLY" = pmem ]; then
	bench_pmem
fi

# The picture, and the table and picture README.md shows: by default only a
# full bench (all tests, all configurations) replaces them.
full=0
[ -n "$RSIW_BENCH_ONLY${RSIW_BENCH_CONFIGS:-}" ] || full=1
commit=$(git -C "$RSIW_TOP" describe --always --dirty 2>/dev/null || echo unknown)
what="make bench, $started, $commit, $rounds round(s)"
[ "${RSIW_BENCH_PAIRS:-1}" = 1 ] || what+=", $RSIW_BENCH_PAIRS pairs"
[ "${RSIW_BENCH_SWAP:-0}" != 1 ] || what+=", swapped drivers"
[ "$RSIW_BENCH_ONLY" = pmem ] ||
	/usr/bin/python3 "$RSIW_TOP/scripts/rsiw/bench-plot.py" "$out/results.txt" "$out/bench.png" \
		--title "$what, QEMU TCG"
if [ "${RSIW_BENCH_DOC:-$full}" = 1 ]; then
	doc=$RSIW_TOP/Documentation/infiniband/rsiw-bench
	{ echo "$what ($(nproc) host CPUs, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | xargs))"
	  cat "$out/results.txt"; } >"$doc.txt"
	cp "$out/bench.png" "$doc.png"
	rsiw_log "saved $doc.txt and $doc.png (README.md shows them; copy the table there)"
fi
