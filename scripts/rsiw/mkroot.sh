#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the guest root file system for the rsiw test VMs: a Debian 13 (trixie)
# minbase made by debootstrap, plus the RDMA userspace (rdma-core, perftest,
# pyverbs) and a few network tools. It is shared read-only into the VMs over
# 9p (see scripts/rsiw/vm.py); the guest puts a tmpfs overlay on top.
#
#   mkroot.sh           build $RSIW_CACHE/rootfs unless it is up to date
#   mkroot.sh --force   rebuild it
#   mkroot.sh path      print the root's path
#
# The root is rebuilt only when the package list (or this script's recipe
# version) changes: $RSIW_CACHE/rootfs/.rsiw-root holds a hash of both. It is
# built in a temporary directory and renamed into place, so an interrupted
# build never leaves a half-made root behind. The host's apt sources are not
# touched and the guest does not depend on what the host has installed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SUITE=trixie
MIRROR=${RSIW_MIRROR:-http://deb.debian.org/debian}
ROOT=$RSIW_CACHE/rootfs

# What the tests need in the guest. Keep it lean; every change rebuilds.
PACKAGES=(
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
	python3-pyverbs
	iproute2 iputils-ping kmod procps ethtool
	iperf3 tcpdump strace
	nvme-cli fio
	nfs-kernel-server
	# blktests (tests/vm/blktests.sh): its check script and the nvme/, srp/
	# and rnbd/ groups; udev for the /dev/disk/by-id links multipathd uses.
	util-linux bsdextrautils uuid-runtime psmisc lsof e2fsprogs xfsprogs
	sg3-utils multipath-tools udev
	# The run-time library of blktests' io_uring passthrough helpers (built
	# on the host against liburing-dev; nvme/067).
	liburing2
	# Persistent memory (an emulated NVDIMM, see scripts/rsiw/vm.py).
	ndctl daxctl
)

# Bump when the recipe below changes in a way that needs a rebuild.
RECIPE=3

# The stub the kernel runs as init (init=/rsiw-boot): mount the repository's
# guest directory and hand over to the real init there, so changing the init
# does not need a new root.
read -r -d '' BOOT_STUB <<'EOF' || true
#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# rsiw guest boot stub, made by scripts/rsiw/mkroot.sh.
/bin/mount -t 9p -o trans=virtio,version=9p2000.L,ro rsiwguest /rsiw/guest ||
	{ echo "rsiw-boot: cannot mount the guest scripts"; exec /bin/sh; }
exec /rsiw/guest/init "$@"
EOF

# The stamp covers the package list, the boot stub and the recipe: the
# build function's code (declare -f drops comments, so editing those does
# not rebuild).
want_stamp() {
	{
		echo "suite=$SUITE recipe=$RECIPE"
		printf '%s\n' "${PACKAGES[@]}" | sort
		echo "$BOOT_STUB"
		declare -f build
	} | sha256sum | cut -d' ' -f1
}

up_to_date() {
	[ -f "$ROOT/.rsiw-root" ] && [ "$(cat "$ROOT/.rsiw-root")" = "$(want_stamp)" ]
}

need_debootstrap() {
	command -v debootstrap >/dev/null && [ -e /usr/share/debootstrap/scripts/$SUITE ] && return 0
	rsiw_log "installing debootstrap"
	apt-get install -y debootstrap >/dev/null || {
		apt-get update >/dev/null && apt-get install -y debootstrap >/dev/null
	} || rsiw_die "cannot install debootstrap"
	[ -e /usr/share/debootstrap/scripts/$SUITE ] || rsiw_die "this debootstrap does not know $SUITE"
}

# Unmount whatever we mounted in the tmp root, then remove it.
cleanup() {
	local tmp=$1
	[ -d "$tmp" ] || return 0
	for m in proc sys dev/pts dev; do
		mountpoint -q "$tmp/$m" 2>/dev/null && umount -l "$tmp/$m"
	done
	rm -rf --one-file-system "$tmp"
}

build() {
	[ "$(id -u)" = 0 ] || rsiw_die "mkroot.sh must run as root (debootstrap, chroot)"
	need_debootstrap
	mkdir -p "$RSIW_CACHE"
	local tmp=$RSIW_CACHE/rootfs.tmp t0=$SECONDS
	cleanup "$tmp"
	trap "cleanup '$tmp'" EXIT

	rsiw_log "debootstrap $SUITE (minbase) into $tmp"
	# Keyring: trixie is signed with keys that Debian 12's
	# debian-archive-keyring already carries.
	debootstrap --variant=minbase --components=main "$SUITE" "$tmp" "$MIRROR" \
		>"$RSIW_CACHE/mkroot.log" 2>&1 ||
		{ tail -20 "$RSIW_CACHE/mkroot.log" >&2; rsiw_die "debootstrap failed (log: $RSIW_CACHE/mkroot.log)"; }

	# No docs, man pages or translations: they are half the size. Keep
	# rdma-core's test suite (shipped by python3-pyverbs as documentation).
	cat >"$tmp/etc/dpkg/dpkg.cfg.d/01-rsiw-nodoc" <<-'EOF'
	path-exclude /usr/share/doc/*
	path-include /usr/share/doc/*/copyright
	path-include /usr/share/doc/rdma-core/tests/*
	path-exclude /usr/share/man/*
	path-exclude /usr/share/info/*
	path-exclude /usr/share/locale/*
	path-include /usr/share/locale/locale.alias
	path-exclude /usr/share/lintian/*
	EOF
	# No daemons start inside the chroot.
	printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
	chmod 755 "$tmp/usr/sbin/policy-rc.d"
	echo "deb $MIRROR $SUITE main" >"$tmp/etc/apt/sources.list"

	mount -t proc proc "$tmp/proc"
	rsiw_log "installing ${#PACKAGES[@]} packages"
	chroot "$tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends ${PACKAGES[*]}" \
		>>"$RSIW_CACHE/mkroot.log" 2>&1 ||
		{ tail -20 "$RSIW_CACHE/mkroot.log" >&2; rsiw_die "apt-get install failed (log: $RSIW_CACHE/mkroot.log)"; }
	umount "$tmp/proc"

	# Versions the tests rely on.
	local v
	v=$(chroot "$tmp" dpkg-query -W -f='${Version}' rdma-core)
	rsiw_log "rdma-core $v, perftest $(chroot "$tmp" dpkg-query -W -f='${Version}' perftest)"
	case "$v" in 56.*) ;; *) rsiw_log "warning: expected rdma-core 56, got $v" ;; esac
	[ -e "$tmp/usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav34.so" ] ||
		rsiw_die "rdma-core's siw provider is missing from the root"

	# Trim: apt lists and caches, logs.
	rm -rf "$tmp"/var/lib/apt/lists/* "$tmp"/var/cache/apt/*.bin \
		"$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/log/*.log \
		"$tmp"/usr/sbin/policy-rc.d

	# Guest glue: mount points for the 9p shares, the boot stub, a hostname,
	# an fstab that the init does not need, a passwordless root shell.
	mkdir -p "$tmp"/rsiw/{guest,tests,run,out} "$tmp/lib/modules"
	printf '%s\n' "$BOOT_STUB" >"$tmp/rsiw-boot"
	chmod 755 "$tmp/rsiw-boot"
	echo rsiw >"$tmp/etc/hostname"
	printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost\n169.254.0.1\trsiw-a\n169.254.0.2\trsiw-b\n' >"$tmp/etc/hosts"
	: >"$tmp/etc/fstab"
	sed -i 's/^root:[^:]*:/root::/' "$tmp/etc/shadow"

	want_stamp >"$tmp/.rsiw-root"
	chmod 755 "$tmp"
	# Running VMs keep using the old root (QEMU holds its directory open), so
	# move it aside and remove old roots only once no test can still use them.
	[ -d "$ROOT" ] && mv "$ROOT" "$ROOT.old-$(date +%s)"
	mv "$tmp" "$ROOT"
	local old now
	now=$(date +%s)
	for old in "$ROOT".old-*; do
		[ -d "$old" ] || continue
		[ $((now - ${old##*.old-})) -lt 10800 ] || rm -rf --one-file-system "$old"
	done
	trap - EXIT
	rsiw_log "guest root ready ($((SECONDS - t0)) s, $(du -sh "$ROOT" | cut -f1)): $ROOT"
}

# One build at a time (test runners call this script): wait for a running
# build, then look again whether the root is up to date.
lock() {
	mkdir -p "$RSIW_CACHE"
	exec 8>"$RSIW_CACHE/rootfs.lock"
	flock -n 8 || { rsiw_log "another guest root build is running; waiting"; flock 8; }
}

# rdma-core's siw provider with the extended ABI, built and installed into
# the root by its own script (a no-op when the root has the current one).
provider() { "$RSIW_TOP/scripts/rsiw/rdma-core.sh"; }

case "${1:-}" in
"") up_to_date && { rsiw_log "guest root up to date: $ROOT"; provider; exit; }
	lock
	up_to_date && { rsiw_log "guest root up to date: $ROOT"; provider; exit; }
	build && provider ;;
--force) lock; build && provider ;;
path) echo "$ROOT" ;;
--check) up_to_date ;;
*) rsiw_die "usage: $0 [--force|--check|path]" ;;
esac
