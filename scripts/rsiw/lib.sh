# SPDX-License-Identifier: GPL-2.0
#
# Common settings for the rsiw build and VM scripts. Source it, don't run it.

RSIW_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RSIW_CACHE=${RSIW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rsiw}

# The kernel source: Debian's linux-source-7.3 from trixie-backports, pinned.
RSIW_KVER=7.3.4
RSIW_DEB_PKG=linux-source-7.3
RSIW_DEB_VER=7.3.4-1~bpo13+1
RSIW_DEB_SHA256=703e369ddd4cce971452f5a593ee55df3a5c10c83caf0fa0df039633ed181ee3
RSIW_TAR_SHA256=76df1affb19f24926949369be1d74b60071c963c598ce8780bddd4bbf0fc3bc4
RSIW_PRISTINE=$RSIW_CACHE/src/linux-source-7.3
RSIW_TREE=$RSIW_CACHE/tree

# Kernel variants: "debug" (KASAN, lockdep, kmemleak; the test kernel) and
# "bench" (no debug options; for make bench).
RSIW_VARIANT=${RSIW_VARIANT:-debug}
rsiw_build_dir() { echo "$RSIW_CACHE/build-${1:-$RSIW_VARIANT}"; }

# Clang 19 from Debian 12 builds the C side, so KASAN works with Rust.
RSIW_LLVM=${RSIW_LLVM:--19}

# The bench kernel's Rust compiler: one on LLVM 19 like clang-19, so that
# CONFIG_RUST_INLINE_HELPERS can inline the C helpers into Rust code (rustc
# 1.86 is the last on LLVM 19; the kernel needs 1.85). Installed with rustup
# when the bench kernel is first configured.
RSIW_BENCH_RUST=${RSIW_BENCH_RUST-1.86.0}

export PATH="$HOME/.cargo/bin:$PATH"

rsiw_log() { printf '[rsiw] %s\n' "$*" >&2; }
rsiw_die() { printf '[rsiw] error: %s\n' "$*" >&2; exit 1; }
