#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Build the provider's unit test: run by scripts/rsiw/rdma-core.sh inside
# its Debian 13 build root, after the siw provider was built.
#   build.sh SRC BUILD OUT
# The test includes the provider's siw.c, so it is compiled with the flags
# CMake gave siw.c (from compile_commands.json).
set -eu
src=$1 build=$2 out=$3
flags=$(python3 - "$build/compile_commands.json" <<'PY'
import json, shlex, sys
for c in json.load(open(sys.argv[1])):
    if c["file"].endswith("providers/siw/siw.c"):
        args = shlex.split(c["command"])[1:]
        keep, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c", "-MT", "-MF"):
                skip = True
                continue
            if a in ("-MD",) or a.endswith("siw.c") or a.startswith("-D") and "EXPORTS" in a:
                continue
            keep.append(a)
        print(" ".join(shlex.quote(a) for a in keep))
        break
PY
)
[ -n "$flags" ] || { echo "no compile command for siw.c" >&2; exit 1; }
mkdir -p "$out"
# shellcheck disable=SC2086
eval cc $flags -Werror -UNDEBUG -I"$src/providers/siw" -I"$src" \
	-o "$out/siw_unit" "$(dirname "$0")/siw_unit.c" \
	-L"$build/lib" -libverbs -lpthread
# A program of the provider's own users: the public headers and libsiw.
cc -O2 -Wall -Wextra -Werror -I"$build/include" -o "$out/siw_ctx" \
	"$(dirname "$0")/siw_ctx.c" -L"$build/lib" -lsiw -libverbs
# Malformed extended SQEs written into a connected QP's ring: siw.h's
# struct siw_qp, so siw.c's flags as for the unit test.
eval cc $flags -Werror -UNDEBUG -I"$src/providers/siw" -I"$src" \
	-o "$out/siw_hostile" "$(dirname "$0")/siw_hostile.c" \
	-L"$build/lib" -lrdmacm -libverbs
# Atomics and immediate data over rdma_cm, through ibv_post_send().
cc -O2 -Wall -Wextra -Werror -I"$build/include" -o "$out/siw_ext" \
	"$(dirname "$0")/siw_ext.c" -L"$build/lib" -lrdmacm -libverbs
# The commit extensions (Flush, Atomic Write, siwdv Verify) over rdma_cm: the
# client with siw.c's flags (siw.h, for the SQEs it writes into the ring) and
# libsiw, the server with plain verbs (it also runs with the stock provider).
eval cc $flags -Werror -UNDEBUG -DSIW_COMMIT_CLIENT -I"$src/providers/siw" -I"$src" \
	-o "$out/siw_commit" "$(dirname "$0")/siw_commit.c" \
	-L"$build/lib" -lsiw -lrdmacm -libverbs
cc -O2 -Wall -Wextra -Werror -I"$build/include" -o "$out/siw_commit_server" \
	"$(dirname "$0")/siw_commit.c" -L"$build/lib" -lrdmacm -libverbs
# RDMA Flush to persistence of a devdax mapping (commit-pmem): plain verbs.
cc -O2 -Wall -Wextra -Werror -I"$build/include" -o "$out/siw_pmem" \
	"$(dirname "$0")/siw_pmem.c" -L"$build/lib" -lrdmacm -libverbs
