#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make fuzz: a fuzzing campaign on the host fuzz targets of the wire core
# (tests/wire/fuzz), for as long as asked. Not part of make check: check.sh
# already runs each target for FUZZ_SECONDS (30 s) from the committed corpus.
#
# Each target runs alone, one libFuzzer process with one job, under
# nice -n 19 (the host's cores are shared with kernel builds and VM tests),
# until FUZZ_SECONDS have passed or FUZZ_RUNS inputs were executed,
# whichever comes first. The targets are built with cargo fuzz -O -a:
# optimised, with debug assertions and overflow checks on, as the kernel
# builds Rust (CONFIG_RUST_OVERFLOW_CHECKS), so an overflow is a finding.
# They are built without a sanitizer by default: the wire core has no
# unsafe code (#![deny(unsafe_code)]), so bounds and overflow checks catch
# what AddressSanitizer would, and the run is about twice as fast
# (FUZZ_SANITIZER=address for cargo fuzz's default).
#
# The working corpus lives in $RSIW_CACHE/fuzz/corpus/TARGET and grows from
# run to run; the committed one (tests/wire/fuzz/corpus/TARGET: seeds and
# regression inputs) is read, never written, unless FUZZ_MINIMIZE=1: then
# the inputs of the working corpus that add coverage to the committed one
# are merged into it (libFuzzer -merge=1), for review and commit.
#
# At the end a line per target gives the executions, exec/s, libFuzzer's
# coverage (cov: edges, ft: features) and the corpus sizes; every run is
# also appended to $RSIW_CACHE/fuzz/logs/TARGET/runs.tsv, which sums the
# campaign over runs. A crash, a timeout or an out-of-memory stops its
# target, the reproducer is kept in $RSIW_CACHE/fuzz/artifacts/TARGET/ and
# printed with the command that replays it, and the script exits non-zero.
#
# Environment (make fuzz passes them through):
#   FUZZ_TARGETS   targets, space or comma separated (default: all)
#   FUZZ_SECONDS   seconds per target (default 600; 0: no fuzzing, only
#                  FUZZ_MINIMIZE or FUZZ_COVERAGE)
#   FUZZ_RUNS      executions per target (default: no limit)
#   FUZZ_MINIMIZE  1: merge new coverage into the committed corpus
#   FUZZ_NICE      niceness (default 19)
#   FUZZ_SANITIZER cargo fuzz -s (default none)
#   FUZZ_COVERAGE  1: then replay the corpus with source coverage
#                  (cargo fuzz coverage; rustup's llvm-tools) and print
#                  the line and region coverage of each wire/*.rs file
#   FUZZ_ARGS      more libFuzzer flags (e.g. -max_len=8192)
set -uo pipefail
. "$(dirname "$0")/lib.sh"

wire=$RSIW_TOP/tests/wire
fuzz_dir=$wire/fuzz
work=$RSIW_CACHE/fuzz
seconds=${FUZZ_SECONDS:-600}
runs=${FUZZ_RUNS:-0}
minimize=${FUZZ_MINIMIZE:-0}
coverage=${FUZZ_COVERAGE:-0}
niceness=${FUZZ_NICE:-19}
sanitizer=${FUZZ_SANITIZER:-none}
read -r -a extra <<<"${FUZZ_ARGS:-}"
# Not check.sh's wire-fuzz (AddressSanitizer): no rebuild when both run.
export CARGO_TARGET_DIR=$RSIW_CACHE/cargo-target/wire-fuzz-$sanitizer

all=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$fuzz_dir/Cargo.toml" | grep -v '^rsiw-wire-fuzz$')
targets=${FUZZ_TARGETS:-$all}
targets=${targets//,/ }
for t in $targets; do
	grep -qx "$t" <<<"$all" || rsiw_die "no fuzz target '$t' (have: $(echo $all))"
done

if ! cargo fuzz --version >/dev/null 2>&1; then
	rsiw_log "installing cargo-fuzz"
	cargo install cargo-fuzz --locked || rsiw_die "cannot install cargo-fuzz"
fi

rsiw_log "building the fuzz targets (cargo fuzz build -O -a -s $sanitizer)"
for t in $targets; do
	(cd "$wire" && RUSTC_BOOTSTRAP=1 nice -n "$niceness" cargo fuzz build -O -a \
		-s "$sanitizer" --fuzz-dir fuzz "$t") || rsiw_die "cargo fuzz build $t failed"
done
bin=$(ls -d "$CARGO_TARGET_DIR"/*/release 2>/dev/null | head -1)
[ -n "$bin" ] || rsiw_die "no fuzz binaries under $CARGO_TARGET_DIR"

# "#N ... cov: C ft: F corp: E/S ... exec/s: X" of the last status line.
field() { grep -oE "$1: [0-9]+" <<<"$2" | tail -1 | awk '{print $2}'; }

# Line and region coverage of the wire core by the corpus of target $1, per
# file linked into the target and in total over those files: cargo fuzz
# coverage writes into the fuzz directory, moved to the cache.
source_coverage() {
	local t=$1 out=$work/coverage/$1 tdir=$RSIW_CACHE/cargo-target/wire-fuzz-cov cov bin
	cov=$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-cov 2>/dev/null | head -1)
	if [ -z "$cov" ]; then
		rustup component add llvm-tools >&2 || { echo "$t: no llvm-tools"; return; }
		cov=$(ls "$(rustc --print sysroot)"/lib/rustlib/*/bin/llvm-cov | head -1)
	fi
	rsiw_log "source coverage of $t (cargo fuzz coverage)"
	(cd "$wire" && RUSTC_BOOTSTRAP=1 nice -n "$niceness" cargo fuzz coverage -O -a -s none \
		--fuzz-dir fuzz --target-dir "$tdir" "$t" "$work/corpus/$t" "$fuzz_dir/corpus/$t" \
		>"$work/logs/$t/coverage.log" 2>&1) || { echo "$t: coverage failed ($work/logs/$t/coverage.log)"; return; }
	rm -rf "$out"
	mkdir -p "$work/coverage"
	mv "$fuzz_dir/coverage/$t" "$out" && rmdir "$fuzz_dir/coverage" 2>/dev/null
	bin=$(find "$tdir" -path '*/release/*' -name "$t" -type f | head -1)
	"$cov" report "$bin" -instr-profile="$out/coverage.profdata" >"$out/report.txt" 2>&1
	echo "$t source coverage of drivers/infiniband/sw/rsiw/wire ($out/report.txt):"
	# Filename Regions Missed Cover Functions Missed Executed Lines Missed Cover ...
	awk '$1 ~ /rsiw\/wire\/[a-z_]+\.rs$/ && NF >= 10 {
		n = split($1, p, "/"); r += $2; rm += $3; l += $8; lm += $9
		printf "    %-10s regions %7s  lines %7s\n", p[n], $4, $10 }
		END { if (r && l) printf "    %-10s regions %6.2f%%  lines %6.2f%%\n", "linked",
			100 * (r - rm) / r, 100 * (l - lm) / l }' "$out/report.txt"
}

# Fuzzes target $1 once; appends its line to summary (and failed).
fuzz_one() {
	local t=$1 corpus=$work/corpus/$1 arts=$work/artifacts/$1 logs=$work/logs/$1
	local log flags limit start rc secs last execs rate cov ft units entries committed
	local result total art
	log=$logs/$(date -u +%Y%m%dT%H%M%SZ).log
	flags=(-max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096
		-artifact_prefix="$arts/")
	limit="${seconds}s"
	if [ "$runs" != 0 ]; then
		flags+=(-runs="$runs")
		limit="$limit or $runs runs"
	fi
	rsiw_log "fuzzing $t for $limit (log: $log)"
	start=$(date +%s)
	nice -n "$niceness" "$work/bin/$t" "${flags[@]}" "${extra[@]}" \
		"$corpus" "$fuzz_dir/corpus/$t" >"$log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	last=$(grep -aE '^#[0-9]+' "$log" | tail -1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	execs=${execs:-$(grep -oE '^#[0-9]+' <<<"$last" | tr -d '#')}
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	rate=${rate:-$(field exec/s "$last")}
	cov=$(field cov "$last")
	ft=$(field ft "$last")
	units=$(field corp "$last")
	entries=$(find "$corpus" -type f | wc -l)
	committed=$(find "$fuzz_dir/corpus/$t" -type f | wc -l)
	result=ok
	if [ "$rc" -ne 0 ]; then
		art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
		result="FAILED rc=$rc${art:+ reproducer $art}"
		failed+=("$t: $result; replay: $work/bin/$t $art; log: $log")
		grep -aE 'panicked|ERROR|SUMMARY|overflow|assert|left:|right:' "$log" | head -6 >&2
	fi
	total=$(awk -F'\t' '{s += $3} END {print s + 0}' "$logs/runs.tsv" 2>/dev/null)
	total=$((total + ${execs:-0}))
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$secs" "${execs:-0}" \
		"${rate:-0}" "${cov:-?}" "${ft:-?}" "$entries" "$result" >>"$logs/runs.tsv"
	summary+=("$(printf '%-14s %10s execs %7s exec/s %6ss  cov %s ft %s  corpus %s units (%s files, %s committed)  campaign %s execs  %s' \
		"$t" "${execs:-0}" "${rate:-0}" "$secs" "${cov:-?}" "${ft:-?}" "${units:-?}" \
		"$entries" "$committed" "$total" "$result")")
}

# Merges what the working corpus of $1 adds to the committed corpus.
merge_one() {
	local t=$1 before after
	rsiw_log "merging new coverage of $t into tests/wire/fuzz/corpus/$t"
	before=$(find "$fuzz_dir/corpus/$t" -type f | wc -l)
	nice -n "$niceness" "$work/bin/$t" -merge=1 -rss_limit_mb=4096 \
		"$fuzz_dir/corpus/$t" "$work/corpus/$t" >"$work/logs/$t/merge.log" 2>&1 ||
		rsiw_log "merge of $t failed: $work/logs/$t/merge.log"
	after=$(find "$fuzz_dir/corpus/$t" -type f | wc -l)
	summary+=("$(printf '%-14s committed corpus %s -> %s files' "$t" "$before" "$after")")
}

# All in a function: bash has read it whole before it runs, so editing the
# script during a long campaign does not derail the run (edit by replacing
# the file, as git does, not in place).
main() {
	local t
	summary=()
	failed=()
	for t in $targets; do
		mkdir -p "$work/corpus/$t" "$work/artifacts/$t" "$work/logs/$t" "$work/bin"
		# A copy: a rebuild while the campaign runs does not touch it.
		cp "$bin/$t" "$work/bin/.$t.new" && mv -f "$work/bin/.$t.new" "$work/bin/$t" ||
			rsiw_die "no binary for $t"
		[ "$seconds" != 0 ] && fuzz_one "$t"
		[ "$minimize" = 1 ] && merge_one "$t"
		[ "$coverage" = 1 ] && summary+=("$(source_coverage "$t")")
	done

	echo
	echo "make fuzz: $(date -u +%FT%TZ), nice $niceness, one process per target"
	printf '%s\n' "${summary[@]}"
	if [ "${#failed[@]}" -gt 0 ]; then
		printf 'FAILED %s\n' "${failed[@]}"
		return 1
	fi
}

# One line: bash parses both before running main.
main "$@"; exit
