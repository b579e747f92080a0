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

/// The mmap key of a queue that is not mapped (`SIW_INVAL_UOBJ_KEY`).
pub(crate) const INVAL_UOBJ_KEY: u64 = 0x08_ffff + 1;

/// The lowest page offset of a queue's mmap key: the page after [`INVAL_UOBJ_KEY`].
///
/// libsiw refuses a queue whose key is `SIW_INVAL_UOBJ_KEY` (and reports a stale `errno`).
/// That key is page-aligned, so a context whose queues fill the page offsets below it would get
/// it for the next queue (page offset 0x90 with 4 KiB pages, the 145th page of queue memory):
/// keys start above it instead. C siw hands out that key (pyverbs' `test_query_rc_qp` with two
/// 4096-entry QPs fails on it now and then).
pub(crate) const FIRST_KEY_PGOFF: u32 = (INVAL_UOBJ_KEY >> kernel::page::PAGE_SHIFT) as u32 + 1;

/// Response of `create_cq` (`struct siw_uresp_create_cq`).
#[repr(C)]
#[derive(IntoBytes, Immutable)]
pub(crate) struct UrespCreateCq {
    /// CQ id.
    pub(crate) cq_id: u32,
    /// Number of CQEs in the ring.
    pub(crate) num_cqe: u32,
    /// mmap key of the ring (CQEs followed by the `siw_cq_ctrl` arming word).
    pub(crate) cq_key: u64,
}

/// Response of `create_qp` (`struct siw_uresp_create_qp`).
#[repr(C)]
#[derive(IntoBytes, Immutable)]
pub(crate) struct UrespCreateQp {
    /// QP id (the QP number).
    pub(crate) qp_id: u32,
    /// Number of SQEs in the send ring.
    pub(crate) num_sqe: u32,
    /// Number of RQEs in the receive ring (0 with an SRQ).
    pub(crate) num_rqe: u32,
    /// Padding, zero.
    pub(crate) pad: u32,
    /// mmap key of the send ring.
    pub(crate) sq_key: u64,
    /// mmap key of the receive ring, 0 without one (SRQ).
    pub(crate) rq_key: u64,
}

/// Response of `create_srq` (`struct siw_uresp_create_srq`).
#[repr(C)]
#[derive(IntoBytes, Immutable)]
pub(crate) struct UrespCreateSrq {
    /// Number of RQEs in the ring.
    pub(crate) num_rqe: u32,
    /// Padding, zero.
    pub(crate) pad: u32,
    /// mmap key of the ring.
    pub(crate) srq_key: u64,
}
