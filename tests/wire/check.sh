#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Host checks of the rsiw iWARP wire core, run by `make check-host`.
#
# Steps: tool install (idempotent), rustfmt, clippy, a no_std build check,
# unit/requirement/property tests, the Wireshark oracle, spec-map coverage,
# and a bounded cargo-fuzz run per target. Prints "N passed, N failed" last
# and exits non-zero if any step failed.
#
# Environment:
#   RSIW_CACHE      cache directory (default ~/.cache/rsiw)
#   SPEC_MAP        spec map (default ../shared/research/spec-map.md from the
#                   repository root, else the committed tests/wire/spec-ids.txt)
#   FUZZ_SECONDS    seconds per fuzz target (default 30; 0 skips fuzzing)

set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${RSIW_CACHE:-$HOME/.cache/rsiw}
export CARGO_TARGET_DIR=$cache/cargo-target/wire
fuzz_target_dir=$cache/cargo-target/wire-fuzz
fuzz_seconds=${FUZZ_SECONDS:-30}
passed=0
failed=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

step() {
	local name=$1
	shift
	echo "== $name"
	if "$@" >"$log/$name.log" 2>&1; then
		passed=$((passed + 1))
		echo "   ok"
	else
		failed=$((failed + 1))
		echo "   FAILED ($name):"
		tail -40 "$log/$name.log" | sed 's/^/   | /'
	fi
}

install_tools() {
	if ! command -v tshark >/dev/null 2>&1; then
		local sudo=
		[ "$(id -u)" -ne 0 ] && sudo=sudo
		echo 'wireshark-common wireshark-common/install-setuid boolean false' |
			$sudo debconf-set-selections
		DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq tshark
	fi
	if [ "$fuzz_seconds" != 0 ] && ! cargo fuzz --version >/dev/null 2>&1; then
		cargo install cargo-fuzz --locked
	fi
	command -v tshark >/dev/null 2>&1
}

fmt_check() {
	rustfmt --edition 2021 --check "$root/drivers/infiniband/sw/rsiw/wire/mod.rs" \
		"$here/lib.rs" "$here"/tests/*.rs "$here"/benches/*.rs "$here"/examples/*.rs \
		"$here"/fuzz/fuzz_targets/*.rs
}

clippy_check() {
	cd "$here" && cargo clippy --lib --tests --benches --examples -- -D warnings
}

# The library must build as the kernel builds it: a module of a no_std crate
# (-Zcrate-attr=no_std), edition 2021, kernel lints, overflow checks on,
# panic=abort; and its source must not name std, alloc or allocating types.
nostd_check() {
	local t
	t=$(mktemp -d)
	ln -s "$root/drivers/infiniband/sw/rsiw/wire" "$t/wire"
	printf '//! Probe crate root.\npub mod wire;\n' >"$t/root.rs"
	RUSTC_BOOTSTRAP=1 rustc --edition 2021 --crate-type rlib --crate-name rsiw_probe \
		-Zcrate-attr=no_std -D missing_docs -D unreachable_pub -D rust_2018_idioms \
		-D unsafe_op_in_unsafe_fn -D warnings -C overflow-checks=on -C panic=abort -O \
		--out-dir "$t" "$t/root.rs" || { rm -rf "$t"; return 1; }
	rm -rf "$t"
	! grep -rnE '\bstd::|extern crate (std|alloc)|\balloc::|\bVec<|\bString\b|format!|println!' \
		"$root/drivers/infiniband/sw/rsiw/wire/"
}

unit_tests() {
	cd "$here" && cargo test --no-fail-fast 2>&1 | tee "$log/test-output.txt"
	local rc=${PIPESTATUS[0]}
	grep -E '^test result:' "$log/test-output.txt" |
		awk '{p += $4; f += $6} END {print "cargo test total: " p " passed, " f " failed"}'
	return "$rc"
}

coverage() {
	local ids=$log/ids.txt map=${SPEC_MAP:-$root/../shared/research/spec-map.md}
	if [ -f "$map" ]; then
		awk '/^## 2\./{f=1} /^## 8\./{f=0} f' "$map" | grep -oE '^\*\*[A-Z]+-[0-9]+' | tr -d '*' >"$ids"
		if ! cmp -s "$ids" "$here/spec-ids.txt"; then
			echo "note: $here/spec-ids.txt differs from $map (regenerate it)"
		fi
	else
		cp "$here/spec-ids.txt" "$ids"
	fi
	(cd "$here" && cargo test -q -- --list 2>/dev/null) | sed -n 's/: test$//p' >"$log/tests.txt"
	local total=0 covered=0 excluded=0 missing=()
	while read -r id; do
		[ -n "$id" ] || continue
		total=$((total + 1))
		local key
		key=$(echo "$id" | tr 'A-Z-' 'a-z_')
		if grep -qE "(^|::)${key}_" "$log/tests.txt"; then
			covered=$((covered + 1))
		elif grep -qE "^$id " "$here/spec-ids-excluded.txt"; then
			excluded=$((excluded + 1))
		else
			missing+=("$id")
		fi
	done <"$ids"
	echo "spec-map coverage: $covered/$total IDs (sections 2-7), $excluded excluded, ${#missing[@]} missing${missing:+: ${missing[*]}}"
	echo "spec-map coverage: $covered/$total IDs (sections 2-7), $excluded excluded, ${#missing[@]} missing" >"$log/coverage-line"
	[ "${#missing[@]}" -eq 0 ]
}

fuzz_one() {
	local target=$1 work
	work=$(mktemp -d)
	cd "$here" &&
		CARGO_TARGET_DIR=$fuzz_target_dir RUSTC_BOOTSTRAP=1 cargo fuzz run -O --fuzz-dir fuzz \
			"$target" "$work" "fuzz/corpus/$target" -- \
			-max_total_time="$fuzz_seconds" -print_final_stats=1 -artifact_prefix="$work/" 2>&1 |
		grep -E 'DONE|number_of_executed_units|panicked|ERROR|SUMMARY|Test unit written'
	local rc=${PIPESTATUS[0]}
	if [ "$rc" -ne 0 ]; then
		# Keep the reproducer: cargo fuzz run --fuzz-dir fuzz TARGET FILE.
		local keep=$cache/fuzz-artifacts/$target
		mkdir -p "$keep"
		cp "$work"/crash-* "$work"/oom-* "$work"/timeout-* "$keep"/ 2>/dev/null
		echo "fuzz $target failed (exit $rc); inputs kept in $keep"
	fi
	rm -rf "$work"
	return "$rc"
}

step install install_tools
step rustfmt fmt_check
step clippy clippy_check
step no_std nostd_check
step tests unit_tests
grep -E 'cargo test total' "$log/tests.log" | sed 's/^/   /'
step coverage coverage
cat "$log/coverage-line" 2>/dev/null | sed 's/^/   /'
if [ "$fuzz_seconds" != 0 ]; then
	step fuzz_rx_parser fuzz_one rx_parser
	grep -E 'DONE' "$log/fuzz_rx_parser.log" | sed 's/^/   /'
	step fuzz_mpa_negotiate fuzz_one mpa_negotiate
	grep -E 'DONE' "$log/fuzz_mpa_negotiate.log" | sed 's/^/   /'
	step fuzz_responder fuzz_one responder
	grep -E 'DONE' "$log/fuzz_responder.log" | sed 's/^/   /'
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
