// SPDX-License-Identifier: GPL-2.0

//! The user ABI shared with rdma-core's `siw` provider.
//!
//! Mirrors `include/uapi/rdma/siw-abi.h` (ABI version [`crate::limits::ABI_VERSION`]).

use kernel::prelude::*;
use zerocopy_derive::Immutable;

/// Response of `alloc_ucontext` (`struct siw_uresp_alloc_ctx`).
#[repr(C)]
#[derive(IntoBytes, Immutable)]
pub(crate) struct UrespAllocCtx {
    /// Device identifier (the device's vendor part id).
    pub(crate) dev_id: u32,
    /// Padding, zero.
    pub(crate) pad: u32,
}
