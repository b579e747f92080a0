// SPDX-License-Identifier: GPL-2.0

//! The user ABI shared with rdma-core's `siw` provider.
//!
//! Mirrors `include/uapi/rdma/siw-abi.h` (ABI version [`crate::limits::ABI_VERSION`]): the
//! driver keeps its own copies of the structs, which `zerocopy` can copy safely, and checks at
//! build time that each has the layout of the generated uapi binding (`kernel::uapi`).

use crate::{
    limits,
    mem::UrespRegMr,
    wqe::{
        Cqe,
        Rqe,
        Sge,
        Sqe,
        CQ_CTRL_SIZE,
        NUM_SGE, //
    },
};
use core::mem::{
    offset_of,
    size_of, //
};
use kernel::{
    prelude::*,
    uapi, //
};
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

/// Asserts that `$ours` has the size of the uapi struct `$theirs` and each listed field the offset
/// of the uapi field of the same name, or of the one after `as` (the uapi structs' anonymous
/// unions are `__bindgen_anon_N`).
macro_rules! assert_layout {
    ($ours:ty, $theirs:ty: $($field:ident $(as $uapi:ident)?),+ $(,)?) => {
        assert!(size_of::<$ours>() == size_of::<$theirs>());
        $(assert_layout!(@field $ours, $theirs, $field $(as $uapi)?);)+
    };
    (@field $ours:ty, $theirs:ty, $field:ident as $uapi:ident) => {
        assert!(offset_of!($ours, $field) == offset_of!($theirs, $uapi));
    };
    (@field $ours:ty, $theirs:ty, $field:ident) => {
        assert!(offset_of!($ours, $field) == offset_of!($theirs, $field));
    };
}

// The siw ABI's constants and layouts are those of the uapi header.
const _: () = {
    assert!(limits::ABI_VERSION == uapi::SIW_ABI_VERSION);
    assert!(INVAL_UOBJ_KEY >> 32 == 0 && INVAL_UOBJ_KEY as u32 == uapi::SIW_INVAL_UOBJ_KEY);
    assert!(NUM_SGE == uapi::SIW_MAX_SGE as usize);
    assert!(CQ_CTRL_SIZE == size_of::<uapi::siw_cq_ctrl>());

    assert_layout!(UrespAllocCtx, uapi::siw_uresp_alloc_ctx: dev_id, pad);
    assert_layout!(UrespCreateCq, uapi::siw_uresp_create_cq: cq_id, num_cqe, cq_key);
    assert_layout!(UrespCreateQp, uapi::siw_uresp_create_qp:
        qp_id, num_sqe, num_rqe, pad, sq_key, rq_key);
    assert_layout!(UrespCreateSrq, uapi::siw_uresp_create_srq: num_rqe, pad, srq_key);
    assert_layout!(UrespRegMr, uapi::siw_uresp_reg_mr: stag, pad);
    assert_layout!(Sge, uapi::siw_sge: laddr, length, lkey);
    assert_layout!(Sqe, uapi::siw_sqe:
        id, flags, num_sge, opcode,
        rkey as __bindgen_anon_1, raddr as __bindgen_anon_2, sge as __bindgen_anon_3);
    assert_layout!(Rqe, uapi::siw_rqe: id, flags, num_sge, opcode, unused, sge);
    assert_layout!(Cqe, uapi::siw_cqe:
        id, flags, opcode, status, bytes, imm_data as __bindgen_anon_1, qp_id as __bindgen_anon_2);
};
