#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Host side of the blktests-* VM cases (prepare= in their headers, run by
# tests/vm/run): put a copy of the pinned blktests, with its small C helpers
# (src/) built, into the case's run directory, where the guests find it as
# /rsiw/run/blktests (tests/vm/blktests.sh adapts and runs it there).
#
#   blktests-prepare.sh RUNDIR
#
# blktests is not part of this repository: it is the unmodified copy at
# $RSIW_BLKTESTS, or else ../shared/third_party/blktests next to the
# checkout (or, in a git worktree, next to its main checkout; in a clone of
# a local checkout, next to that checkout; see that directory's README). Without it the case skips (exit
# 77, the reason on the last line). The guest root has no compiler, so src/
# is built here with the host's gcc and g++ (Debian 12's glibc is older
# than the guest's, so the binaries run there), once per blktests version:
# the build is kept in $RSIW_CACHE/blktests/<hash of the tree>.
set -euo pipefail
. "$(dirname "$0")/../../scripts/rsiw/lib.sh"

run=${1:?usage: $0 RUNDIR}
src=${RSIW_BLKTESTS:-$RSIW_TOP/../shared/third_party/blktests}
# In a git worktree, ../shared is next to the main checkout; in a clone of a
# local checkout (a CI's clean clone), next to the checkout it came from.
if [ -z "${RSIW_BLKTESTS:-}" ] && [ ! -x "$src/check" ]; then
	common=$(git -C "$RSIW_TOP" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
	[ -z "$common" ] || src=$(dirname "$common")/../shared/third_party/blktests
fi
if [ -z "${RSIW_BLKTESTS:-}" ] && [ ! -x "$src/check" ]; then
	origin=$(git -C "$RSIW_TOP" remote get-url origin 2>/dev/null || true)
	[ ! -d "$origin" ] || src=$origin/../shared/third_party/blktests
fi
if [ ! -x "$src/check" ] || [ ! -d "$src/tests/nvme" ]; then
	echo "no blktests at $src (set RSIW_BLKTESTS to a blktests checkout)"
	exit 77
fi
src=$(cd "$src" && pwd)

# The tree's contents name its build: a changed copy builds again.
hash=$(cd "$src" && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z |
	xargs -0 sha256sum | sha256sum | cut -c1-16)
built=$RSIW_CACHE/blktests/$hash
if [ ! -f "$built/.rsiw-built" ]; then
	mkdir -p "$RSIW_CACHE/blktests"
	exec 9>"$RSIW_CACHE/blktests/.lock"
	flock 9
	if [ ! -f "$built/.rsiw-built" ]; then
		# discontiguous-io is C++; two NVMe passthrough helpers need liburing.
		missing=$(for p in g++ liburing-dev; do
			dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
		done)
		if [ -n "$missing" ]; then
			rsiw_log "installing $missing (blktests' helpers)"
			apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
				rsiw_log "warning: cannot install $missing; blktests builds without"
		fi
		rm -rf "$built.tmp"
		cp -a "$src" "$built.tmp"
		rsiw_log "building blktests' helpers (src/) from $src"
		# Without liburing-dev the helpers that need it (the NVMe passthrough
		# ones, for device tests) are left out; blktests reports the tests
		# that need them as not run.
		make -C "$built.tmp/src" -j"$(nproc)" >"$built.tmp/.rsiw-build.log" 2>&1 || {
			tail -20 "$built.tmp/.rsiw-build.log"
			echo "building blktests' src/ failed (log above)"
			exit 1
		}
		touch "$built.tmp/.rsiw-built"
		mv "$built.tmp" "$built"
	fi
	flock -u 9
fi
# A copy of its own for every run: the guests adapt theirs at run time.
rm -rf "$run/blktests"
cp -a "$built" "$run/blktests"
echo "blktests $hash from $src in $run/blktests"
