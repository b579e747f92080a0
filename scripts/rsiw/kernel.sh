#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Fetch, prepare and build the rsiw test kernel out of tree.
#
#   kernel.sh fetch            download and verify the pinned kernel source
#   kernel.sh prepare          pristine tree + patches/ + the repo's overlay
#   kernel.sh build [VARIANT]  configure (tinyconfig + fragments) and build
#   kernel.sh path [VARIANT]   print the build directory
#
# VARIANT is "debug" (default; KASAN, lockdep, kmemleak), "light" (the debug
# set without KASAN, for the bulk of the VM tests), "bench" or "pmem" (light
# plus persistent memory and what blktests needs, for the cases with
# kernel=pmem: rsiw-pmem.config, rsiw-blktests.config), "pmem-kasan" (pmem
# plus KASAN, for the blktests that require it, e.g. nvme/069: built only for
# make check-blktests and check-long). Everything lives in
# $RSIW_CACHE (default ~/.cache/rsiw), so a clean clone on the same machine rebuilds
# incrementally: files are copied into the tree only when their contents
# changed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Directories of the repository that are overlaid onto the kernel tree.
OVERLAY_DIRS=(rust drivers Documentation include kernel)

fetch() {
	[ -f "$RSIW_PRISTINE/.rsiw-verified" ] && return 0
	mkdir -p "$RSIW_CACHE/dl" "$RSIW_CACHE/src"
	local deb="$RSIW_CACHE/dl/${RSIW_DEB_PKG}_${RSIW_DEB_VER}_all.deb"
	if ! echo "$RSIW_DEB_SHA256  $deb" | sha256sum -c --status 2>/dev/null; then
		rsiw_log "downloading $RSIW_DEB_PKG $RSIW_DEB_VER"
		rm -f "$deb"
		# As root into a directory _apt cannot enter: say so, or apt warns.
		(cd "$RSIW_CACHE/dl" && apt-get download -qq -o APT::Sandbox::User=root \
			"$RSIW_DEB_PKG=$RSIW_DEB_VER") ||
			rsiw_die "apt-get download failed (is trixie-backports configured? run scripts/rsiw/setup.sh)"
		mv "$RSIW_CACHE/dl/${RSIW_DEB_PKG}_"*"_all.deb" "$deb" 2>/dev/null || true
		echo "$RSIW_DEB_SHA256  $deb" | sha256sum -c --status || rsiw_die "sha256 mismatch for $deb"
	fi
	local tar="$RSIW_CACHE/src/linux-source-7.3.tar.xz"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/src/linux-source-7.3.tar.xz >"$tar"
	echo "$RSIW_TAR_SHA256  $tar" | sha256sum -c --status || rsiw_die "sha256 mismatch for $tar"
	rm -rf "$RSIW_PRISTINE"
	rsiw_log "extracting kernel source"
	tar -C "$RSIW_CACHE/src" -xf "$tar"
	rm -f "$tar"
	grep -q '^SUBLEVEL = 4$' "$RSIW_PRISTINE/Makefile" || rsiw_die "unexpected kernel version"
	touch "$RSIW_PRISTINE/.rsiw-verified"
}

# Copy $2 (a list of relative paths) from directory $1 into the tree, but only
# files whose contents differ, so unchanged files keep their timestamps.
sync_into_tree() {
	rsync -rc --files-from="$2" "$1/" "$RSIW_TREE/"
}

prepare() {
	fetch
	if [ ! -d "$RSIW_TREE" ]; then
		rsiw_log "creating the working tree"
		# Hard links are safe: patch and rsync replace files, never edit in place.
		cp -al "$RSIW_PRISTINE" "$RSIW_TREE.tmp"
		mv "$RSIW_TREE.tmp" "$RSIW_TREE"
	fi
	local state="$RSIW_TREE/.rsiw"
	mkdir -p "$state"
	touch "$state/patched" "$state/overlay"

	# 1. The patch series, applied to pristine copies of the files it touches.
	local stage new_patched
	stage=$(mktemp -d)
	new_patched=$(mktemp)
	while read -r p; do
		[ -n "$p" ] || continue
		grep -E '^\+\+\+ b/' "$RSIW_TOP/patches/$p" | sed 's|^+++ b/||'
	done <"$RSIW_TOP/patches/series" | sort -u >"$new_patched"
	sort -u "$state/patched" "$new_patched" | while read -r f; do
		if [ -f "$RSIW_PRISTINE/$f" ]; then
			mkdir -p "$stage/$(dirname "$f")"
			cp "$RSIW_PRISTINE/$f" "$stage/$f"
		fi
	done
	while read -r p; do
		[ -n "$p" ] || continue
		patch -s -p1 -d "$stage" --no-backup-if-mismatch -F0 <"$RSIW_TOP/patches/$p" ||
			rsiw_die "patch $p does not apply to pristine $RSIW_KVER"
	done <"$RSIW_TOP/patches/series"
	(cd "$stage" && find . -type f | sed 's|^\./||') >"$stage.list"
	sync_into_tree "$stage" "$stage.list"
	comm -23 <(sort -u "$state/patched") "$new_patched" | while read -r f; do
		[ -f "$RSIW_PRISTINE/$f" ] || rm -f "$RSIW_TREE/$f"
	done
	mv "$new_patched" "$state/patched"
	rm -rf "$stage" "$stage.list"

	# 2. The overlay: new files of the repository in kernel layout.
	local new_overlay
	new_overlay=$(mktemp)
	(cd "$RSIW_TOP" && git ls-files --cached --others --exclude-standard -- "${OVERLAY_DIRS[@]}" 2>/dev/null ||
		find "${OVERLAY_DIRS[@]}" -type f 2>/dev/null) | while read -r f; do
		[ -f "$RSIW_TOP/$f" ] && echo "$f"
	done | sort -u >"$new_overlay"
	if grep -qxFf "$state/patched" "$new_overlay"; then
		rsiw_die "a file is both patched and overlaid: $(grep -xFf "$state/patched" "$new_overlay" | head -1)"
	fi
	sync_into_tree "$RSIW_TOP" "$new_overlay"
	comm -23 <(sort -u "$state/overlay") "$new_overlay" | while read -r f; do
		if [ -f "$RSIW_PRISTINE/$f" ]; then
			rsync -c "$RSIW_PRISTINE/$f" "$RSIW_TREE/$f"
		else
			rm -f "$RSIW_TREE/$f"
		fi
	done
	mv "$new_overlay" "$state/overlay"
}

# The rustup toolchain a variant builds with (empty: the default one).
rust_of() {
	[ "$1" = bench ] && echo "$RSIW_BENCH_RUST"
	return 0
}

kmake() {
	local variant=$1 rust env=()
	shift
	rust=$(rust_of "$variant")
	[ -z "$rust" ] || env=(RUSTUP_TOOLCHAIN="$rust")
	env "${env[@]}" make -C "$RSIW_TREE" O="$(rsiw_build_dir "$variant")" LLVM="$RSIW_LLVM" \
		-j"$(nproc)" -s "$@"
}

configure() {
	local variant=$1 build frags stamp want rust
	build=$(rsiw_build_dir "$variant")
	case "$variant" in
	debug) frags=(rsiw.config rsiw-debug.config rsiw-kasan.config) ;;
	light) frags=(rsiw.config rsiw-debug.config) ;;
	bench) frags=(rsiw.config rsiw-bench.config) ;;
	pmem) frags=(rsiw.config rsiw-debug.config rsiw-pmem.config rsiw-blktests.config) ;;
	pmem-kasan) frags=(rsiw.config rsiw-debug.config rsiw-pmem.config rsiw-blktests.config rsiw-kasan.config) ;;
	*) rsiw_die "unknown kernel variant $variant (debug, light, bench, pmem or pmem-kasan)" ;;
	esac
	mkdir -p "$build"
	rust=$(rust_of "$variant")
	# rust-src to build, rustfmt because the build formats generated code
	# (without it every such step prints rustup's error and a backtrace).
	if [ -n "$rust" ]; then
		local have
		have=$(rustup component list --toolchain "$rust" --installed 2>/dev/null || true)
		if ! grep -q '^rust-src' <<<"$have"; then
			rsiw_log "installing Rust $rust (rust-src, rustfmt) for the $variant kernel"
			rustup toolchain install "$rust" --profile minimal --component rust-src,rustfmt ||
				rsiw_die "cannot install Rust $rust"
		elif ! grep -q '^rustfmt' <<<"$have"; then
			rsiw_log "adding rustfmt to Rust $rust"
			rustup component add --toolchain "$rust" rustfmt || rsiw_die "cannot add rustfmt to Rust $rust"
		fi
	fi
	want=$( (cd "$RSIW_TOP/kernel/configs" && cat "${frags[@]}" && echo "rust ${rust:-default}") |
		sha256sum | cut -d' ' -f1)
	stamp="$build/.rsiw-config"
	if [ -f "$build/.config" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		return 0
	fi
	rsiw_log "configuring $variant kernel: tinyconfig + ${frags[*]}"
	kmake "$variant" tinyconfig >/dev/null
	kmake "$variant" "${frags[@]}" >/dev/null
	# Every option a fragment asks for must have survived olddefconfig.
	local f line bad=0
	for f in "${frags[@]}"; do
		while read -r line; do
			case "$line" in
			CONFIG_*=n) grep -q "^${line%=n}=" "$build/.config" && { rsiw_log "not unset: $line"; bad=1; } ;;
			CONFIG_*) grep -qx "$line" "$build/.config" || { rsiw_log "not set: $line"; bad=1; } ;;
			esac
		done <"$RSIW_TOP/kernel/configs/$f"
	done
	[ $bad = 0 ] || rsiw_die "kernel configuration does not match the fragments (missing toolchain? try 'make -C $RSIW_TREE O=$build LLVM=$RSIW_LLVM rustavailable')"
	echo "$want" >"$stamp"
}

build() {
	local variant=${1:-$RSIW_VARIANT} build
	build=$(rsiw_build_dir "$variant")
	mkdir -p "$RSIW_CACHE"
	exec 9>"$RSIW_CACHE/kernel.lock"
	flock 9
	prepare
	configure "$variant"
	rsiw_log "building $variant kernel in $build"
	local t0=$SECONDS
	kmake "$variant" bzImage modules
	rm -rf "$build/modroot"
	kmake "$variant" modules_install INSTALL_MOD_PATH="$build/modroot" INSTALL_MOD_STRIP=1 >/dev/null
	# The in-kernel test modules (tests/kmod, e.g. rsiw_kverbs), built out of
	# tree against this kernel (objects in $build/kmod) and installed with its
	# modules (lib/modules/<release>/updates), so that VM cases modprobe them.
	local kmod=(M="$RSIW_TOP/tests/kmod" MO="$build/kmod")
	kmake "$variant" "${kmod[@]}" modules
	kmake "$variant" "${kmod[@]}" modules_install INSTALL_MOD_PATH="$build/modroot" \
		INSTALL_MOD_STRIP=1 >/dev/null
	rsiw_log "$variant kernel ready ($((SECONDS - t0)) s): $build/arch/x86/boot/bzImage"
}

case "${1:-build}" in
fetch) fetch ;;
prepare) prepare ;;
build) build "${2:-}" ;;
path) rsiw_build_dir "${2:-}" ;;
*) rsiw_die "usage: $0 fetch|prepare|build [debug|light|bench|pmem|pmem-kasan]|path [debug|light|bench|pmem|pmem-kasan]" ;;
esac
