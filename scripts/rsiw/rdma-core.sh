#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build rdma-core's siw provider with the patches in patches/rdma-core/ (the
# extended siw ABI of Documentation/infiniband/rsiw-abi.rst) and install it
# into the guest root, next to the stock provider, for the VM cases that ask
# for it (provider=rsiw, see tests/vm/lib.sh).
#
#   rdma-core.sh            build if needed, install into the guest root
#   rdma-core.sh build      build if needed
#   rdma-core.sh shell      a shell in the build root
#   rdma-core.sh --check    exit 0 if the guest root has this build
#
# The source is Debian's rdma-core 56.1-1 (the version of the guest root's
# libibverbs): the upstream tarball and Debian's packaging with its patches,
# fetched from the Debian archive and checked against pinned SHA-256 sums
# (those of trixie's signed Sources index). It is built in a Debian 13 build
# root (debootstrap minbase plus the build dependencies, made once), so the
# provider links against the libc and libibverbs of the guest. Everything
# lives in $RSIW_CACHE/rdma-core; a change of the patches rebuilds only what
# they touch (files are copied into the build tree only when they changed).
#
# Installed into the guest root under /opt/rsiw/rdma-core:
#   lib/libsiw.so.1*            the patched provider (a shared provider, as
#                               mlx5's: libsiw-rdmav34.so links to it)
#   include/infiniband/siwdv.h  its direct-verbs header
#   bin/                        the provider's unit test (tests/provider/)
#   .stamp                      the hash of the patches and this recipe
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RC_VER=56.1
RC_DEB=56.1-1
RC_ORIG_SHA256=63ce7f2baa7242c2dbc76375dac957c420187dd27f8c5e148efc07971ee522a8
RC_DEBIAN_SHA256=4e27344a0ecfd591bd1081486a2006d2edb52782d209cd744da7faf3b8f0ded4
RC_POOL=${RSIW_MIRROR:-http://deb.debian.org/debian}/pool/main/r/rdma-core

SUITE=trixie
MIRROR=${RSIW_MIRROR:-http://deb.debian.org/debian}
BUILD_PKGS=(gcc libc6-dev cmake ninja-build pkg-config python3 libnl-3-dev libnl-route-3-dev)
# Bump when the recipe changes in a way that needs a new build root.
BUILDROOT_RECIPE=1

RC=$RSIW_CACHE/rdma-core
BROOT=$RC/root
PATCHES=$RSIW_TOP/patches/rdma-core
TESTS=$RSIW_TOP/tests/provider
GUEST_ROOT=$RSIW_CACHE/rootfs
DEST=/opt/rsiw/rdma-core

# The stamp of a build: the patches, the provider tests and this script.
want_stamp() {
	{
		echo "rdma-core $RC_DEB"
		cat "$PATCHES/series"
		while read -r p; do
			[ -n "$p" ] && cat "$PATCHES/$p"
		done <"$PATCHES/series"
		cat "$TESTS"/*.c "$TESTS"/*.h
		cat "$0"
	} | sha256sum | cut -d' ' -f1
}

in_root() {
	chroot "$BROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

buildroot_stamp() {
	printf '%s\n' "$SUITE $BUILDROOT_RECIPE" "${BUILD_PKGS[@]}" | sha256sum | cut -d' ' -f1
}

cleanup_root() {
	local r=$1 m
	for m in proc dev; do
		mountpoint -q "$r/$m" 2>/dev/null && umount -l "$r/$m"
	done
	return 0
}

# A Debian 13 minbase with the build dependencies, made once.
make_buildroot() {
	[ -f "$BROOT/.rsiw-buildroot" ] && [ "$(cat "$BROOT/.rsiw-buildroot")" = "$(buildroot_stamp)" ] &&
		return 0
	[ "$(id -u)" = 0 ] || rsiw_die "rdma-core.sh must run as root (debootstrap, chroot)"
	command -v debootstrap >/dev/null || rsiw_die "debootstrap is missing (run scripts/rsiw/setup.sh)"
	local tmp=$RC/root.tmp log=$RC/buildroot.log t0=$SECONDS
	mkdir -p "$RC"
	cleanup_root "$tmp"
	rm -rf --one-file-system "$tmp"
	rsiw_log "rdma-core: debootstrap $SUITE (minbase) build root"
	debootstrap --variant=minbase --components=main "$SUITE" "$tmp" "$MIRROR" >"$log" 2>&1 ||
		{ tail -20 "$log" >&2; rsiw_die "debootstrap failed (log: $log)"; }
	echo "deb $MIRROR $SUITE main" >"$tmp/etc/apt/sources.list"
	printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
	chmod 755 "$tmp/usr/sbin/policy-rc.d"
	mount -t proc proc "$tmp/proc"
	chroot "$tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends ${BUILD_PKGS[*]}" \
		>>"$log" 2>&1 || { umount "$tmp/proc"; tail -20 "$log" >&2; rsiw_die "apt-get install failed (log: $log)"; }
	umount "$tmp/proc"
	rm -rf "$tmp"/var/lib/apt/lists/* "$tmp"/var/cache/apt/archives/*.deb
	buildroot_stamp >"$tmp/.rsiw-buildroot"
	rm -rf --one-file-system "$BROOT"
	mv "$tmp" "$BROOT"
	rsiw_log "rdma-core: build root ready ($((SECONDS - t0)) s)"
}

# Debian's source: the upstream tarball and the packaging, with Debian's
# patches applied, in $BROOT/rsiw/src (pristine).
fetch_source() {
	local src=$BROOT/rsiw/src dl=$RSIW_CACHE/dl f sum
	[ -f "$src/.rsiw-verified" ] && return 0
	mkdir -p "$dl"
	for f in "rdma-core_$RC_VER.orig.tar.gz:$RC_ORIG_SHA256" "rdma-core_$RC_DEB.debian.tar.xz:$RC_DEBIAN_SHA256"; do
		sum=${f#*:}
		f=${f%%:*}
		if ! echo "$sum  $dl/$f" | sha256sum -c --status 2>/dev/null; then
			rsiw_log "rdma-core: downloading $f"
			curl -sSfL -o "$dl/$f.tmp" "$RC_POOL/$f" ||
				rsiw_die "cannot download $RC_POOL/$f (is rdma-core $RC_DEB still in $SUITE?)"
			mv "$dl/$f.tmp" "$dl/$f"
			echo "$sum  $dl/$f" | sha256sum -c --status || rsiw_die "sha256 mismatch for $dl/$f"
		fi
	done
	rm -rf "$src" "$src.tmp"
	mkdir -p "$src.tmp"
	tar -C "$src.tmp" --strip-components=1 -xzf "$dl/rdma-core_$RC_VER.orig.tar.gz"
	tar -C "$src.tmp" -xJf "$dl/rdma-core_$RC_DEB.debian.tar.xz"
	while read -r f; do
		case "$f" in "" | "#"*) continue ;; esac
		patch -s -p1 -d "$src.tmp" --no-backup-if-mismatch <"$src.tmp/debian/patches/$f" ||
			rsiw_die "Debian patch $f does not apply"
	done <"$src.tmp/debian/patches/series"
	touch "$src.tmp/.rsiw-verified"
	mv "$src.tmp" "$src"
}

# The patched tree: pristine source plus patches/rdma-core, synced into
# $BROOT/rsiw/tree so that unchanged files keep their timestamps.
prepare_tree() {
	local stage p
	stage=$(mktemp -d)
	cp -a "$BROOT/rsiw/src/." "$stage/"
	while read -r p; do
		[ -n "$p" ] || continue
		patch -s -p1 -d "$stage" --no-backup-if-mismatch -F0 <"$PATCHES/$p" ||
			{ rm -rf "$stage"; rsiw_die "patch $p does not apply to rdma-core $RC_DEB"; }
	done <"$PATCHES/series"
	mkdir -p "$BROOT/rsiw/tree"
	rsync -rlc --delete "$stage/" "$BROOT/rsiw/tree/"
	rm -rf "$stage"
	rm -rf "$BROOT/rsiw/tests"
	cp -r "$TESTS" "$BROOT/rsiw/tests"
}

build() {
	local t0=$SECONDS
	mkdir -p "$RC"
	exec 7>"$RC/lock"
	flock 7
	if [ -f "$RC/out/.stamp" ] && [ "$(cat "$RC/out/.stamp")" = "$(want_stamp)" ]; then
		return 0
	fi
	make_buildroot
	fetch_source
	prepare_tree
	rsiw_log "rdma-core: building the siw provider"
	mount -t proc proc "$BROOT/proc"
	trap 'cleanup_root "$BROOT"' EXIT
	# Debian's paths (debian/rules) and release flags; only what the siw
	# provider and its tests need is built.
	in_root sh -c '
		set -e
		mkdir -p /rsiw/build && cd /rsiw/build
		[ -f build.ninja ] || cmake -GNinja -DCMAKE_BUILD_TYPE=Release \
			-DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu \
			-DCMAKE_INSTALL_SYSCONFDIR=/etc -DCMAKE_INSTALL_RUNDIR=/run \
			-DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_STATIC=0 \
			-DCMAKE_EXPORT_COMPILE_COMMANDS=1 /rsiw/tree >/rsiw/cmake.log 2>&1 ||
			{ tail -30 /rsiw/cmake.log; exit 1; }
		ninja -j'"$(nproc)"' siw ibverbs rdmacm >/rsiw/ninja.log 2>&1 || { tail -40 /rsiw/ninja.log; exit 1; }
		sh /rsiw/tests/build.sh /rsiw/tree /rsiw/build /rsiw/tests-out
	' || rsiw_die "the rdma-core build failed (logs in $BROOT/rsiw)"
	cleanup_root "$BROOT"
	trap - EXIT

	local out=$RC/out.tmp lib
	rm -rf "$out"
	mkdir -p "$out/lib" "$out/include/infiniband" "$out/bin"
	lib=$(cd "$BROOT/rsiw/build/lib" && ls libsiw.so.1.*)
	cp "$BROOT/rsiw/build/lib/$lib" "$out/lib/"
	ln -s "$lib" "$out/lib/libsiw.so.1"
	cp "$BROOT/rsiw/tree/providers/siw/siwdv.h" "$out/include/infiniband/"
	cp "$BROOT"/rsiw/tests-out/* "$out/bin/"
	want_stamp >"$out/.stamp"
	rm -rf "$RC/out"
	mv "$out" "$RC/out"
	rsiw_log "rdma-core: provider $lib built ($((SECONDS - t0)) s)"
}

installed() {
	[ -f "$GUEST_ROOT$DEST/.stamp" ] && [ "$(cat "$GUEST_ROOT$DEST/.stamp")" = "$(want_stamp)" ]
}

install_root() {
	installed && return 0
	[ -d "$GUEST_ROOT/usr" ] || rsiw_die "no guest root at $GUEST_ROOT (run scripts/rsiw/mkroot.sh)"
	build
	rm -rf "$GUEST_ROOT$DEST.tmp"
	mkdir -p "$(dirname "$GUEST_ROOT$DEST")"
	cp -a "$RC/out" "$GUEST_ROOT$DEST.tmp"
	rm -rf "$GUEST_ROOT$DEST"
	mv "$GUEST_ROOT$DEST.tmp" "$GUEST_ROOT$DEST"
	rsiw_log "rdma-core: patched siw provider installed in the guest root ($DEST)"
}

case "${1:-}" in
"") install_root ;;
build) build ;;
shell) make_buildroot; in_root bash ;;
--check) installed ;;
*) rsiw_die "usage: $0 [build|shell|--check]" ;;
esac
