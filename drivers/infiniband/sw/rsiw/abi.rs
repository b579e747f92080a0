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
        flags,
        imm_slot,
        op,
        status,
        Cqe,
        FlushArgs,
        Rqe,
        Sge,
        Sqe,
        CQ_CTRL_SIZE,
        NUM_SGE,
        VERIFY_DIGEST_OFFSET,
        VERIFY_LEN_OFFSET, //
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
use zerocopy_derive::{
    FromBytes,
    Immutable, //
};

/// Request of `alloc_ucontext` (`struct siw_ureq_alloc_ctx`), optional: the stock provider
/// sends none.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable)]
pub(crate) struct UreqAllocCtx {
    /// The [`ext`] bits the provider can use.
    pub(crate) ext_req: u64,
}

/// Response of `alloc_ucontext` (`struct siw_uresp_alloc_ctx`).
#[repr(C)]
#[derive(IntoBytes, Immutable)]
pub(crate) struct UrespAllocCtx {
    /// Device identifier (the device's vendor part id).
    pub(crate) dev_id: u32,
    /// Padding, zero.
    pub(crate) pad: u32,
}

/// Response of `alloc_ucontext` to a request with a non-zero `ext_req`
/// (`struct siw_uresp_alloc_ctx_ext`): [`UrespAllocCtx`] and what the context got.
#[repr(C)]
#[derive(IntoBytes, Immutable)]
pub(crate) struct UrespAllocCtxExt {
    /// Device identifier (the device's vendor part id).
    pub(crate) dev_id: u32,
    /// Padding, zero.
    pub(crate) pad: u32,
    /// The [`ext`] bits granted: a subset of the request's.
    pub(crate) ext_caps: u64,
    /// Bytes of a Verify digest, 0 without `SIW_CTX_EXT_VERIFY` ([`ext::verify_digest_len`]).
    pub(crate) verify_digest_len: u8,
    /// Zero.
    pub(crate) reserved: [u8; 7],
}

const _: () = {
    assert!(core::mem::size_of::<UreqAllocCtx>() == 8);
    assert!(core::mem::size_of::<UrespAllocCtx>() == 8);
    assert!(core::mem::size_of::<UrespAllocCtxExt>() == 24);
};

/// The ABI extensions of a user context (`enum siw_ctx_ext`,
/// `Documentation/infiniband/rsiw-abi.rst`). A context that got none is a legacy context.
pub(crate) mod ext {
    /// Extended CQEs: opcodes from `SIW_NUM_OPCODES`, `SIW_WC_REM_OP_ERR`, immediate data.
    /// Granted whenever asked for, even with every extension switched off.
    pub(crate) const CQE: u64 = 1 << 0;
    /// `SIW_OP_COMP_AND_SWAP` and `SIW_OP_FETCH_AND_ADD`.
    pub(crate) const ATOMICS: u64 = 1 << 1;
    /// Their masked variants.
    pub(crate) const MASKED_ATOMICS: u64 = 1 << 2;
    /// `SIW_OP_WRITE_WITH_IMM`.
    pub(crate) const WRITE_WITH_IMM: u64 = 1 << 3;
    /// `SIW_OP_SEND_WITH_IMM`.
    pub(crate) const SEND_WITH_IMM: u64 = 1 << 4;
    /// `SIW_OP_FLUSH` with `SIW_FLUSH_GLOBAL` (global visibility).
    pub(crate) const FLUSH_GLOBAL: u64 = 1 << 5;
    /// `SIW_OP_FLUSH` with `SIW_FLUSH_PERSISTENT`: granted with the commit extensions where
    /// the architecture can write caches back to persistent memory
    /// (`kernel::mm::pmem::CAN_WRITE_BACK`), as the device capability
    /// `IB_DEVICE_FLUSH_PERSISTENT`. Only regions of persistent memory accept it
    /// (`crate::mem::persistent`).
    pub(crate) const FLUSH_PERSISTENT: u64 = 1 << 6;
    /// `SIW_OP_ATOMIC_WRITE`.
    pub(crate) const ATOMIC_WRITE: u64 = 1 << 7;
    /// `SIW_OP_VERIFY`; the context's `verify_digest_len` is [`VERIFY_DIGEST_LEN`].
    ///
    /// [`VERIFY_DIGEST_LEN`]: crate::wire::commit::VERIFY_DIGEST_LEN
    pub(crate) const VERIFY: u64 = 1 << 8;

    /// The RFC 7306 extensions (the module parameter `rfc7306`).
    pub(crate) const RFC7306: u64 = ATOMICS | MASKED_ATOMICS | WRITE_WITH_IMM | SEND_WITH_IMM;

    /// The commit extensions rsiw grants (the module parameter `commit`): Flush to global
    /// visibility, Verify, on 64-bit kernels (one aligned 64-bit store, as the device
    /// capability `IB_DEVICE_ATOMIC_WRITE`) Atomic Write, and where caches can be written back
    /// to persistent memory Flush to persistence ([`FLUSH_PERSISTENT`]).
    pub(crate) const COMMIT: u64 = FLUSH_GLOBAL
        | VERIFY
        | if cfg!(CONFIG_64BIT) { ATOMIC_WRITE } else { 0 }
        | if kernel::mm::pmem::CAN_WRITE_BACK {
            FLUSH_PERSISTENT
        } else {
            0
        };

    /// What a device supports: extended CQEs always, RFC 7306 and the commit extensions if
    /// they are switched on.
    pub(crate) const fn supported(rfc7306: bool, commit: bool) -> u64 {
        let mut s = CQE;
        if rfc7306 {
            s |= RFC7306;
        }
        if commit {
            s |= COMMIT;
        }
        s
    }

    /// What a context that asked for `req` gets: `req & supported`, nothing without
    /// [`CQE`] (a context that cannot read extended CQEs must not cause them). Unknown bits
    /// are not an error: a newer provider gets what this driver has.
    pub(crate) const fn grant(req: u64, rfc7306: bool, commit: bool) -> u64 {
        let g = req & supported(rfc7306, commit);
        if g & CQE == 0 {
            0
        } else {
            g
        }
    }

    /// The `verify_digest_len` of a context that got `ext`: the device's digest length with
    /// [`VERIFY`], 0 without.
    pub(crate) const fn verify_digest_len(ext: u64) -> u8 {
        if ext & VERIFY != 0 {
            crate::wire::commit::VERIFY_DIGEST_LEN as u8
        } else {
            0
        }
    }
}

const _: () = {
    // Unknown bits are no error; nothing without the extended CQEs; RFC 7306 and the commit
    // extensions only if on; Flush to persistence with them where caches can be written back.
    assert!(ext::grant(0, true, true) == 0);
    assert!(ext::grant(u64::MAX, true, false) == 0x1f);
    assert!(ext::grant(u64::MAX, false, false) == ext::CQE);
    assert!(ext::grant(ext::RFC7306, true, true) == 0);
    assert!(ext::grant(ext::COMMIT, true, true) == 0);
    assert!(ext::grant(ext::CQE | ext::ATOMICS | (1 << 8), true, false) == ext::CQE | ext::ATOMICS);
    assert!(ext::grant(u64::MAX, false, true) == ext::CQE | ext::COMMIT);
    assert!(ext::grant(u64::MAX, true, false) & ext::FLUSH_PERSISTENT == 0);
    assert!(
        ext::grant(ext::CQE | ext::FLUSH_PERSISTENT, true, true)
            == if kernel::mm::pmem::CAN_WRITE_BACK {
                ext::CQE | ext::FLUSH_PERSISTENT
            } else {
                ext::CQE
            }
    );
    assert!(ext::grant(ext::CQE | ext::VERIFY | (1 << 9), false, true) == ext::CQE | ext::VERIFY);
    assert!(ext::verify_digest_len(ext::CQE | ext::VERIFY) == 4);
    assert!(ext::verify_digest_len(ext::CQE | (ext::COMMIT & !ext::VERIFY)) == 0);
};

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

    // The negotiated extensions (Documentation/infiniband/rsiw-abi.rst).
    assert_layout!(UreqAllocCtx, uapi::siw_ureq_alloc_ctx: ext_req);
    assert_layout!(UrespAllocCtxExt, uapi::siw_uresp_alloc_ctx_ext:
        dev_id, pad, ext_caps, verify_digest_len, reserved);
    assert!(ext::CQE == uapi::siw_ctx_ext_SIW_CTX_EXT_CQE as u64);
    assert!(ext::ATOMICS == uapi::siw_ctx_ext_SIW_CTX_EXT_ATOMICS as u64);
    assert!(ext::MASKED_ATOMICS == uapi::siw_ctx_ext_SIW_CTX_EXT_MASKED_ATOMICS as u64);
    assert!(ext::WRITE_WITH_IMM == uapi::siw_ctx_ext_SIW_CTX_EXT_WRITE_WITH_IMM as u64);
    assert!(ext::SEND_WITH_IMM == uapi::siw_ctx_ext_SIW_CTX_EXT_SEND_WITH_IMM as u64);
    assert!(ext::FLUSH_GLOBAL == uapi::siw_ctx_ext_SIW_CTX_EXT_FLUSH_GLOBAL as u64);
    assert!(ext::FLUSH_PERSISTENT == uapi::siw_ctx_ext_SIW_CTX_EXT_FLUSH_PERSISTENT as u64);
    assert!(ext::ATOMIC_WRITE == uapi::siw_ctx_ext_SIW_CTX_EXT_ATOMIC_WRITE as u64);
    assert!(ext::VERIFY == uapi::siw_ctx_ext_SIW_CTX_EXT_VERIFY as u64);
    assert!(op::FLUSH as u32 == uapi::siw_opcode_SIW_OP_FLUSH);
    assert!(op::ATOMIC_WRITE as u32 == uapi::siw_opcode_SIW_OP_ATOMIC_WRITE);
    assert!(op::VERIFY as u32 == uapi::siw_opcode_SIW_OP_VERIFY);
    assert!(crate::wire::commit::VERIFY_MAX_HASH == uapi::SIW_MAX_VERIFY_DIGEST as usize);
    assert!(FlushArgs::PERSISTENT == uapi::siw_flush_flags_SIW_FLUSH_PERSISTENT);
    assert!(FlushArgs::GLOBAL == uapi::siw_flush_flags_SIW_FLUSH_GLOBAL);
    assert!(FlushArgs::REGION == uapi::siw_flush_flags_SIW_FLUSH_REGION);
    assert!(size_of::<uapi::siw_sqe_verify>() == 96);
    assert!(VERIFY_LEN_OFFSET == 40 && VERIFY_DIGEST_OFFSET == 48);
    assert!(op::NUM as u32 == uapi::siw_opcode_SIW_NUM_OPCODES);
    assert!(op::WRITE_WITH_IMM as u32 == uapi::siw_opcode_SIW_OP_WRITE_WITH_IMM);
    assert!(op::MASKED_FETCH_AND_ADD as u32 == uapi::siw_opcode_SIW_OP_MASKED_FETCH_AND_ADD);
    assert!(op::MASKED_COMP_AND_SWAP as u32 == uapi::siw_opcode_SIW_OP_MASKED_COMP_AND_SWAP);
    assert!(op::RECV_WRITE_IMM as u32 == uapi::siw_opcode_SIW_OP_RECEIVE_RDMA_WITH_IMM);
    assert!(op::NUM_EXT as u32 == uapi::siw_opcode_SIW_NUM_OPCODES_EXT);
    assert!(flags::WITH_IMM as u32 == uapi::siw_wqe_flags_SIW_WQE_WITH_IMM);
    assert!(status::NUM as u32 == uapi::siw_wc_status_SIW_NUM_WC_STATUS);
    assert!(status::REM_OP_ERR as u32 == uapi::siw_wc_status_SIW_WC_REM_OP_ERR);
    assert!(imm_slot() == uapi::SIW_MAX_SGE_WRITE_IMM as usize);
};
