#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The upstream patch series: pristine 7.3.4 plus this repository, grouped as
# patches/upstream.txt declares, as `git format-patch` output.
#
#   series.sh [make] [-o DIR]  write it to DIR (default out/series)
#   series.sh check [-o DIR]   make, `git am` onto pristine 7.3.4, compare the
#                              result with kernel.sh's tree, checkpatch --strict
#   series.sh tree             after `kernel.sh build`: kernel.sh's working tree
#                              is the last check's `git am` result, byte for byte
#   series.sh prefixes [--all] [--only K,...]
#                              make, then build the kernel crate and the changed
#                              C directories of each prefix in a private tree
#                              (slow: a kernel crate build per patch; not part
#                              of make check; needs the light kernel's .config)
#
# The pristine source is committed once to a scratch repository in
# $RSIW_CACHE/series (about a minute); later runs take seconds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export RSIW_TOP RSIW_CACHE RSIW_PRISTINE RSIW_TREE
# The pristine source, read only. Fetched if missing under the lock kernel.sh
# build fetches under, so that two first runs do not extract it at once.
case "${1:-make}" in
make | check | prefixes)
	if [ ! -f "$RSIW_PRISTINE/.rsiw-verified" ]; then
		mkdir -p "$RSIW_CACHE"
		flock "$RSIW_CACHE/kernel.lock" "$RSIW_TOP/scripts/rsiw/kernel.sh" fetch
	fi
	;;
esac
exec python3 "$RSIW_TOP/scripts/rsiw/series.py" "$@"
