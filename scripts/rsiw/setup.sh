#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything the rsiw build, VM rig and tests need on a Debian 12
# host. Idempotent and quick when everything is already there.
#
# Apt sources added (and nothing else):
#  - trixie-backports, only for the pinned linux-source-7.3 package. Its
#    default priority (100) keeps the rest of the machine on Debian 12.
#  - bookworm-backports, for qemu-system-x86 matching the qemu-utils that
#    some Debian 12 images already carry from there.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

export DEBIAN_FRONTEND=noninteractive

PKGS=(
	make gcc git python3 rsync cpio bc flex bison kmod xz-utils zstd
	libelf-dev libssl-dev
	clang-19 lld-19 llvm-19 libclang-19-dev
	debootstrap
	# blktests' helpers (tests/vm/blktests-prepare.sh)
	g++ liburing-dev
)
BPO_PKGS=(qemu-system-x86)
BINDGEN_MIN=0.71.1

add_source() {
	local name=$1 suite=$2 file=/etc/apt/sources.list.d/rsiw-$1.sources
	[ -f "$file" ] && return 1
	cat >"$file" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	rsiw_log "added apt source $suite"
}

missing_pkgs() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
	done
}

apt_setup() {
	local updated=0 missing
	if add_source trixie-backports trixie-backports; then updated=1; fi
	if add_source bookworm-backports bookworm-backports; then updated=1; fi
	missing=$(missing_pkgs "${PKGS[@]}" "${BPO_PKGS[@]}")
	if [ -z "$missing" ] && [ $updated = 0 ]; then
		# The package index must know the pinned kernel source package.
		apt-cache show "$RSIW_DEB_PKG=$RSIW_DEB_VER" >/dev/null 2>&1 && return 0
	fi
	# shellcheck disable=SC2086
	rsiw_log "installing packages: $(echo ${missing:-none (index refresh)})"
	quiet apt-get update -qq
	# shellcheck disable=SC2086
	[ -z "$(missing_pkgs "${PKGS[@]}")" ] ||
		quiet apt-get install -y -qq --no-install-recommends $(missing_pkgs "${PKGS[@]}")
	[ -z "$(missing_pkgs "${BPO_PKGS[@]}")" ] ||
		quiet apt-get install -y -qq --no-install-recommends -t bookworm-backports "${BPO_PKGS[@]}"
}

# quiet CMD...: run CMD with its output shown only if it fails (apt's
# "debconf: delaying package configuration" and the like are no news).
quiet() {
	local log rc=0
	log=$(mktemp)
	"$@" >"$log" 2>&1 || rc=$?
	[ $rc = 0 ] || cat "$log" >&2
	rm -f "$log"
	return $rc
}

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

rust_setup() {
	command -v rustup >/dev/null || rsiw_die "rustup is required (the machine's Rust toolchain)"
	if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
		rsiw_log "adding rust-src"
		quiet rustup component add rust-src
	fi
	local v
	v=$({ bindgen --version 2>/dev/null || true; } | awk '{print $2}')
	if [ -z "$v" ] || ! version_ge "$v" "$BINDGEN_MIN"; then
		rsiw_log "installing bindgen-cli from crates.io"
		quiet cargo install --locked --quiet bindgen-cli
	fi
}

apt_setup
rust_setup
"$RSIW_TOP/scripts/rsiw/kernel.sh" fetch
rsiw_log "host set-up complete"
