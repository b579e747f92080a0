#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs the wire core benchmarks and prints a short summary.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export CARGO_TARGET_DIR=${RSIW_CACHE:-$HOME/.cache/rsiw}/cargo-target/wire
cd "$here"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cargo bench --bench wire -- --noplot 2>&1 | tee "$out" >/dev/null
echo "rsiw wire benchmarks (median, criterion):"
awk '
	/^[a-z_0-9\/]+/ && !/^(Benchmarking|Found|Warming|Analyzing|Gnuplot|running)/ { name = $1 }
	{
		for (i = 1; i <= NF; i++) {
			if ($i == "time:" && $(i + 3) !~ /%/) printf "  %-36s %s %s\n", name, $(i + 3), $(i + 4)
			if ($i == "thrpt:" && $(i + 3) !~ /%/) printf "  %-36s %s %s\n", "", $(i + 3), $(i + 4)
		}
	}
' "$out"
