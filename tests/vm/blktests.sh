# SPDX-License-Identifier: GPL-2.0
#
# blktests in the guest, for the blktests-* VM cases (source after lib.sh).
#
# The case's prepare= script (tests/vm/blktests-prepare.sh) put the pinned,
# unmodified blktests with its C helpers built into the run directory. Each
# VM copies it to a tmpfs of its own, adapts that copy to its driver
# (tests/vm/py/blktests.py adapt: start_soft_rdma loads $RSIW_DRIVER, the
# rnbd/ group is open to it), writes its config (NVMET_TRTYPES=rdma) and
# runs the tests one ./check at a time, each under a time limit, so that a
# hung test costs its own result and not the whole table (with a fast
# `systemctl list-unit-files` on its PATH: bt_systemctl_shim).
#
#   blktests_case GROUP_OR_TEST...   the whole case: VM a runs rsiw, VM b
#                                    siw, in identical guests; a prints the
#                                    table and fails on a regression
#
# RSIW_BT_TESTS (from the host's environment) replaces the case's list.
#
# Knobs (case variables, set before blktests_case):
#   BT_TEST_TIMEOUT  seconds one test may take (default 900)
#   BT_IMG_SIZE      NVME_IMG_SIZE (default 350m: the least nvme/012 takes)
#   BT_TIMED         TIMEOUT, the run time of blktests' TIMED tests' fio
#                    jobs (default 20 s; upstream runs them to the end)
#   BT_BLKDEV_TYPES  NVMET_BLKDEV_TYPES (default "device file", upstream's)
#   BT_PENDING       tests (or groups) whose rsiw result is shown, not
#                    enforced (see blktests.py compare)
#   BT_MUST_PASS     tests (or groups) that must pass on rsiw whatever siw
#                    does
#   BT_UDEV=1        run udevd (srp/: multipathd and the /dev/disk/by-id
#                    links of the multipath devices)
#   BT_RSIW_OPTIONS  module parameters for rsiw whenever blktests loads it
#                    (start_soft_rdma), e.g. rfc7306=1 for rnbd/: RTRS
#                    needs immediate data, which rsiw has off by default
#
# A VM with an emulated NVMe drive (nvme=SIZE in the case header) loads the
# nvme driver and gives blktests /dev/nvme0n1 as its test device (TEST_DEVS).

BT_SRC=/rsiw/run/blktests
BT=/blktests
BT_PY=/rsiw/tests/vm/py/blktests.py
BT_BIN=/blktests-bin
: "${BT_TEST_TIMEOUT:=900}" "${BT_IMG_SIZE:=350m}" "${BT_TIMED:=20}"
: "${BT_BLKDEV_TYPES:=device file}" "${BT_PENDING:=}"
export BT_MUST_PASS="${BT_MUST_PASS:-}"

bt_setup() {
	local other
	[ -x "$BT_SRC/check" ] ||
		skip "no blktests in the run directory (tests/vm/blktests-prepare.sh did not run)"
	# rsiw and siw must never share a kernel: nothing in blktests may load
	# the other one.
	case $RSIW_DRIVER in rsiw) other=siw ;; *) other=rsiw ;; esac
	echo "install $other /bin/false" >/etc/modprobe.d/rsiw-blktests.conf
	if [ "$RSIW_DRIVER" = rsiw ] && [ -n "${BT_RSIW_OPTIONS:-}" ]; then
		echo "options rsiw $BT_RSIW_OPTIONS" >>/etc/modprobe.d/rsiw-blktests.conf
		log "rsiw loads with $BT_RSIW_OPTIONS"
	fi
	mkdir -p "$BT"
	run mount -t tmpfs -o mode=755 rsiw-blktests "$BT"
	cp -a "$BT_SRC/." "$BT/"
	python3 "$BT_PY" adapt "$BT" "$RSIW_DRIVER"
	cat >"$BT/config" <<-EOF
	# Written by tests/vm/blktests.sh for $RSIW_DRIVER.
	NVMET_TRTYPES=rdma
	NVMET_BLKDEV_TYPES="$BT_BLKDEV_TYPES"
	NVME_IMG_SIZE=$BT_IMG_SIZE
	TIMEOUT=$BT_TIMED
	NORMAL_USER=blktests
	EOF
	# An unprivileged user for the tests that need one (nvme/046).
	id blktests >/dev/null 2>&1 || useradd -M -s /bin/bash blktests
	if [ "${RSIW_NVME:-0}" != 0 ]; then
		# The VM's emulated NVMe drive (nvme= in the case header) is the
		# test device of the nvme/ group's device tests.
		run modprobe nvme
		wait_for 60 test -b /dev/nvme0n1 || die "the emulated NVMe drive did not appear"
		echo "TEST_DEVS=(/dev/nvme0n1)" >>"$BT/config"
	fi
	sed 's/^/  [config] /' "$BT/config"
	bt_static_nodes
	bt_disk_driver
	[ -e /proc/config.gz ] || log "warning: no /proc/config.gz (CONFIG_IKCONFIG_PROC)"
	[ "${BT_UDEV:-0}" != 1 ] || bt_udev
	bt_hung_task
	bt_systemctl_shim
	bt_sudo_shim
}

# bt_sudo_shim: the guest root has no sudo, and blktests, which runs as
# root, calls "sudo CMD" (nvme/067: sudo src/nvme-passthru-admin-uring),
# which then failed on both drivers with "sudo: command not found". As root
# sudo only runs the command: the shim does that, and "-u USER" with
# runuser; any other option is refused, so a test that needs more fails
# visibly. A real sudo, when there is one, is used instead.
bt_sudo_shim() {
	command -v sudo >/dev/null 2>&1 && return 0
	mkdir -p "$BT_BIN"
	cat >"$BT_BIN/sudo" <<-'EOF'
	#!/bin/bash
	# tests/vm/blktests.sh (bt_sudo_shim): sudo for root, without sudo.
	if [ "$1" = -u ] && [ $# -ge 3 ]; then
		u=$2
		shift 2
		exec runuser -u "$u" -- "$@"
	fi
	case $1 in
	-*)
		echo "sudo (blktests shim): option $1 not supported" >&2
		exit 1
		;;
	esac
	exec "$@"
	EOF
	chmod 755 "$BT_BIN/sudo"
	log "blktests: sudo runs commands as root ($BT_BIN/sudo, no sudo in the guest)"
}

# bt_systemctl_shim: a systemctl first on ./check's PATH (bt_run) that
# answers `systemctl list-unit-files` with the names of the unit files in
# the unit directories, one readdir each, and runs the real systemctl for
# everything else. blktests' _have_systemctl_unit (common/rc) greps that
# listing for a unit (nvme/062 and nvme/063: tlshd, in their requires()).
# The guest runs no systemd, so the real systemctl computes every unit's
# enablement state client-side from the guest root: about 140,000 file
# system calls (strace, Debian 13's systemd 257, 276 unit files), over 9p
# under TCG about 5 minutes, with nothing on the console, before each of
# the two tests is "not run" (rsiw-testing.rst, blktests). The verdicts
# and reasons stay blktests' own: a unit file that is there is listed.
bt_systemctl_shim() {
	mkdir -p "$BT_BIN"
	cat >"$BT_BIN/systemctl" <<-'EOF'
	#!/bin/bash
	# tests/vm/blktests.sh (bt_systemctl_shim): list-unit-files without
	# the enablement states, which take minutes over 9p under TCG.
	if [ "$*" = list-unit-files ]; then
		for d in /etc/systemd/system /run/systemd/system \
			/usr/local/lib/systemd/system /usr/lib/systemd/system \
			/lib/systemd/system; do
			[ ! -d "$d" ] || ls -1 "$d"
		done | grep -E '\.(service|socket|target|timer|path|mount|automount|swap|slice)$' |
			LC_ALL=C sort -u | sed 's/$/ -/'
		exit 0
	fi
	for s in /usr/bin/systemctl /bin/systemctl; do
		[ ! -x "$s" ] || exec "$s" "$@"
	done
	echo "systemctl: not installed" >&2
	exit 127
	EOF
	chmod 755 "$BT_BIN/systemctl"
	log "blktests: systemctl list-unit-files lists names only ($BT_BIN/systemctl)"
}

# bt_hung_task: report a task blocked for 480 s rather than 120. nvme/044's
# failed bidirectional authentication can leave the host's AUTH failure2
# command unanswered on either driver (rsiw-testing.rst, blktests, nvme/044):
# the target (nvmet_execute_auth_send()) queues its fatal controller error,
# which disconnects the queue, before it sends the response, and the host
# times the command out and retries it: six times 61 s (nvme_max_retries is 5),
# `nvme connect` blocked in nvme_auth_wait() meanwhile: 366 s, a hung-task
# report at 120 and 240 s, and then the test passes. 480 s stays below the
# limit of a test (BT_TEST_TIMEOUT, 600 s and more), so a task that really
# hangs is still reported, and the test killed.
bt_hung_task() {
	local f=/proc/sys/kernel/hung_task_timeout_secs
	[ -w $f ] || return 0
	echo 480 >$f
	log "hung-task reports after $(cat $f) s"
}

# bt_static_nodes: the device nodes whose first open loads their module
# (modules.devname), as a booted system has them (systemd-tmpfiles-setup-dev,
# kmod static-nodes): /dev/loop-control loads loop for the tests that run
# losetup without loading it themselves (nvme/047, nvme/051), and
# /dev/mapper/control dm_mod.
bt_static_nodes() {
	local mod node dev t
	while read -r mod node dev; do
		case $mod in '' | '#'*) continue ;; esac
		[ ! -e "/dev/$node" ] || continue
		t=${dev:0:1} dev=${dev:1}
		case $t in b | c) ;; *) continue ;; esac
		mkdir -p "$(dirname "/dev/$node")"
		run mknod -m 0600 "/dev/$node" "$t" "${dev%%:*}" "${dev##*:}"
	done <"/lib/modules/$(uname -r)/modules.devname"
}

# bt_disk_driver: load sd_mod, as udev does on a booted system when the first
# SCSI disk appears (its modalias, scsi:t-0x00): without it the scsi_debug
# disk of nvme/065 gets no block device. It also holds scsi_mod, which
# blktests' reload of scsi_debug (_init_scsi_debug: modprobe --remove, which
# takes scsi_mod with it when nothing else holds it, then modprobe) would
# otherwise unload and load anew: the 7.3 kernel never releases a removed
# scsi_debug host (its scsi_tmf_N workqueue and host number stay), and a
# fresh scsi_mod numbers hosts from 0 again, so the next host's scsi_tmf_0
# is a duplicate, a console splat, and scsi_debug has no host
# (rsiw-testing.rst, blktests, nvme/065).
bt_disk_driver() {
	run modprobe sd_mod
}

# bt_udev: start udevd (systemd's, without systemd) and replay the devices
# that exist already, so that it sees them as a booted system would.
bt_udev() {
	local udevd
	for udevd in /usr/lib/systemd/systemd-udevd /lib/systemd/systemd-udevd; do
		[ -x "$udevd" ] && break
	done
	[ -x "$udevd" ] || die "no systemd-udevd in the guest root"
	run "$udevd" --daemon
	udevadm trigger --action=add --type=subsystems
	udevadm trigger --action=add --type=devices
	udevadm settle --timeout=120 || log "warning: udevadm settle timed out"
	log "udevd running"
}

# bt_run JSON GROUP_OR_TEST...: run the tests, one ./check each, and write
# their results to JSON.
bt_run() {
	local json=$1 t rc t0 line tests
	shift
	tests=$(python3 "$BT_PY" tests "$BT" "$@")
	: >"$RSIW_OUT/check.log"
	for t in $tests; do
		t0=$EPOCHSECONDS
		rc=0
		(cd "$BT" && PATH="$BT_BIN:$PATH" \
			timeout -k 30 "$BT_TEST_TIMEOUT" ./check -c config -o "$BT/results" "$t") \
			>"$RSIW_OUT/check-last.log" 2>&1 </dev/null || rc=$?
		cat "$RSIW_OUT/check-last.log" >>"$RSIW_OUT/check.log"
		line=$(grep -E '\[(passed|failed|not run)\]$' "$RSIW_OUT/check-last.log" |
			sed -E 's/ +/ /g' | tr '\n' ' ')
		[ $rc != 124 ] && [ $rc != 137 ] || line="$line (killed after $BT_TEST_TIMEOUT s)"
		log "blktests $t: ${line:-no result (check exited $rc)} $((EPOCHSECONDS - t0)) s"
		# Keep the results (.full, .dmesg, .out.bad; the test images went
		# with each test's TMPDIR) after every test, for a run that is cut
		# short.
		mkdir -p "$RSIW_OUT/results"
		cp -a "$BT/results/." "$RSIW_OUT/results/" 2>/dev/null || true
	done
	rm -f "$RSIW_OUT/check-last.log"
	# blktests scans for leaks after each test and clears the list before
	# the next, so the guest's final scan does not see them: show them on
	# the console like the final scan's reports (scripts/rsiw/vm.py fails
	# the run on them).
	find "$BT/results" -name '*.kmemleak' -exec sed 's/^/kmemleak-report: /' {} + 2>/dev/null || true
	python3 "$BT_PY" parse "$BT" "$RSIW_OUT/check.log" "$json" "$@"
}

blktests_case() {
	local json other
	# The host's RSIW_BT_TESTS (tests/vm/run passes it on) replaces the
	# case's list: a part of a group, e.g. to split it into shorter runs.
	if [ -n "${RSIW_BT_TESTS:-}" ]; then
		log "blktests: RSIW_BT_TESTS replaces the case's list ($*)"
		# shellcheck disable=SC2086 # a list of words
		set -- $RSIW_BT_TESTS
	fi
	bt_setup
	json=$RSIW_RUN/blktests-$RSIW_DRIVER-$RSIW_ROLE.json
	bt_run "$json" "$@"
	compare_peer "$BT_PY" "$json" "$RSIW_OUT/blktests-table.txt" "$BT_PENDING" 14400 \
		"blktests: " ", or failed on their kernel log"
	pass
}
