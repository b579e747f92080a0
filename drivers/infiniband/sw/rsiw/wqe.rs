// SPDX-License-Identifier: GPL-2.0

//! Work queue and completion queue elements: the ring formats of the `siw` user ABI
//! (`include/uapi/rdma/siw-abi.h`), used for kernel and user queues alike, and their
//! validation.
//!
//! Every element the kernel consumes is first copied out of the ring
//! ([`crate::ring::Ring::read`]) and then validated here; only a validated copy is acted upon,
//! so a user rewriting the ring concurrently cannot change what the kernel checked.

use crate::{
    abi::ext,
    limits,
    wire::commit::{
        VERIFY_DIGEST_LEN,
        VERIFY_MAX_HASH, //
    },
};
use kernel::{
    prelude::*,
    rdma::wr::{
        RecvWr,
        Sges, //
    },
};
use zerocopy_derive::{
    Immutable,
    KnownLayout, //
};

/// A scatter/gather element (`struct siw_sge`, same layout as `ibv_sge`).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub(crate) struct Sge {
    /// Address.
    pub(crate) laddr: u64,
    /// Length.
    pub(crate) length: u32,
    /// Local STag.
    pub(crate) lkey: u32,
}

/// Number of SGEs in a WQE (`SIW_MAX_SGE`).
pub(crate) const NUM_SGE: usize = 6;

/// A send queue element (`struct siw_sqe`, 120 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Sqe {
    /// Work request id.
    pub(crate) id: u64,
    /// `SIW_WQE_*` flags.
    pub(crate) flags: u16,
    /// Number of SGEs (for inline sends: 1, the data follows `sge[0]`).
    pub(crate) num_sge: u8,
    /// `SIW_OP_*` opcode.
    pub(crate) opcode: u8,
    /// Remote STag (Read/Write), STag to invalidate (Send with Invalidate, Local Invalidate) or
    /// new key (Reg MR).
    pub(crate) rkey: u32,
    /// Remote address (Read/Write) or MR (Reg MR).
    pub(crate) raddr: u64,
    /// SGEs; the bytes of `sge[1..]` hold inline data; for Reg MR, `access` flags.
    pub(crate) sge: [Sge; NUM_SGE],
}

/// A receive queue element (`struct siw_rqe`, 112 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Rqe {
    /// Work request id.
    pub(crate) id: u64,
    /// `SIW_WQE_*` flags.
    pub(crate) flags: u16,
    /// Number of SGEs.
    pub(crate) num_sge: u8,
    /// Opcode, kernel only (ignored when written by user space).
    pub(crate) opcode: u8,
    /// Unused.
    pub(crate) unused: u32,
    /// SGEs.
    pub(crate) sge: [Sge; NUM_SGE],
}

/// A completion queue element (`struct siw_cqe`, 32 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Cqe {
    /// Work request id.
    pub(crate) id: u64,
    /// `SIW_WQE_VALID` when owned by the consumer, plus `SIW_WQE_REM_INVAL` / `SOLICITED`.
    pub(crate) flags: u8,
    /// `SIW_OP_*` opcode of the completed work request.
    pub(crate) opcode: u8,
    /// `SIW_WC_*` status.
    pub(crate) status: u16,
    /// Bytes transferred.
    pub(crate) bytes: u32,
    /// Immediate data or invalidated STag.
    pub(crate) imm_data: u64,
    /// QP number.
    pub(crate) qp_id: u64,
}

/// A completion to post to a CQ.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    /// The work request id.
    pub(crate) id: u64,
    /// The `SIW_OP_*` opcode of the work request.
    pub(crate) opcode: u8,
    /// The `SIW_WC_*` status.
    pub(crate) status: u16,
    /// Bytes transferred.
    pub(crate) bytes: u32,
    /// Invalidated STag (sets `SIW_WQE_REM_INVAL`), for received Send with Invalidate.
    pub(crate) inval_stag: Option<u32>,
    /// Whether the work request was solicited (a solicited receive).
    pub(crate) solicited: bool,
    /// Immediate data (`__be32` as it was sent), for a receive that carried some.
    pub(crate) imm: Option<u32>,
}

impl Completion {
    /// The completion of receive `id` with `status` and no data.
    pub(crate) const fn recv(id: u64, status: u16) -> Self {
        Completion {
            id,
            opcode: op::RECEIVE,
            status,
            bytes: 0,
            inval_stag: None,
            solicited: false,
            imm: None,
        }
    }
}

/// The completion of a send queue work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SqCompletion {
    /// The work request id.
    pub(crate) id: u64,
    /// The `SIW_OP_*` opcode of the work request.
    pub(crate) opcode: u8,
    /// The `SIW_WC_*` status.
    pub(crate) status: u16,
    /// Bytes transferred.
    pub(crate) bytes: u32,
}

impl SqCompletion {
    /// A completion of work request `id`.
    pub(crate) const fn new(id: u64, opcode: u8, status: u16, bytes: u32) -> Self {
        Self {
            id,
            opcode,
            status,
            bytes,
        }
    }

    /// The same work request, completed with `status` and no bytes (an error).
    pub(crate) const fn failed(self, status: u16) -> Self {
        Self::new(self.id, self.opcode, status, 0)
    }
}

impl From<SqCompletion> for Completion {
    fn from(c: SqCompletion) -> Self {
        Completion {
            id: c.id,
            opcode: c.opcode,
            status: c.status,
            bytes: c.bytes,
            inval_stag: None,
            solicited: false,
            imm: None,
        }
    }
}

/// The byte offset of the `flags` field in every element.
pub(crate) const FLAGS_OFFSET: usize = 8;

/// The CQ arming word (`struct siw_cq_ctrl`), placed after the last CQE.
pub(crate) const CQ_CTRL_SIZE: usize = 8;

// The layouts are checked against the uapi bindings in `crate::abi`.
const _: () = {
    assert!(core::mem::offset_of!(Sqe, flags) == FLAGS_OFFSET);
    assert!(core::mem::offset_of!(Rqe, flags) == FLAGS_OFFSET);
    assert!(core::mem::offset_of!(Cqe, flags) == FLAGS_OFFSET);
};

/// `SIW_WQE_*` flags.
pub(crate) mod flags {
    /// The element is owned by the consumer.
    pub(crate) const VALID: u16 = 1;
    /// Inline data.
    pub(crate) const INLINE: u16 = 1 << 1;
    /// Generate a completion.
    pub(crate) const SIGNALLED: u16 = 1 << 2;
    /// Solicited event.
    pub(crate) const SOLICITED: u16 = 1 << 3;
    /// Fence behind outstanding RDMA Reads.
    pub(crate) const READ_FENCE: u16 = 1 << 4;
    /// The completion reports an invalidated STag.
    pub(crate) const REM_INVAL: u16 = 1 << 5;
    /// The completion carries immediate data (`SIW_WQE_WITH_IMM`: kernel CQs and those of
    /// extended user contexts), see [`super::imm_to_cqe`].
    pub(crate) const WITH_IMM: u16 = 1 << 7;
    /// Flags a send queue element may carry.
    pub(crate) const SQE_KNOWN: u16 = VALID | INLINE | SIGNALLED | SOLICITED | READ_FENCE;
    /// Flags a receive queue element may carry.
    pub(crate) const RQE_KNOWN: u16 = VALID;
}

/// `SIW_OP_*` opcodes (`enum siw_opcode`).
pub(crate) mod op {
    /// RDMA Write.
    pub(crate) const WRITE: u8 = 0;
    /// RDMA Read.
    pub(crate) const READ: u8 = 1;
    /// RDMA Read, then invalidate the local sink STag.
    pub(crate) const READ_LOCAL_INV: u8 = 2;
    /// Send.
    pub(crate) const SEND: u8 = 3;
    /// Send with immediate data (the immediate in `rkey`, as sent: network byte order).
    pub(crate) const SEND_WITH_IMM: u8 = 4;
    /// Send with Invalidate.
    pub(crate) const SEND_REMOTE_INV: u8 = 5;
    /// Fetch and add (see [`AtomicArgs`]).
    pub(crate) const FETCH_AND_ADD: u8 = 6;
    /// Compare and swap (see [`AtomicArgs`]).
    pub(crate) const COMP_AND_SWAP: u8 = 7;
    /// Receive (completions only).
    pub(crate) const RECEIVE: u8 = 8;
    /// Local invalidate (kernel only).
    pub(crate) const INVAL_STAG: u8 = 10;
    /// Fast registration (kernel only).
    pub(crate) const REG_MR: u8 = 11;
    /// Number of opcodes (`SIW_NUM_OPCODES`): the last one user space may see.
    pub(crate) const NUM: u8 = 12;

    // Beyond the opcodes of the original siw ABI: kernel QPs and CQs, and user contexts that
    // got the extension (`Documentation/infiniband/rsiw-abi.rst`).

    /// RDMA Write with immediate data (the immediate in `sge[NUM_SGE - 1]`, see
    /// [`super::imm_slot`]).
    pub(crate) const WRITE_WITH_IMM: u8 = 12;
    /// Masked fetch and add.
    pub(crate) const MASKED_FETCH_AND_ADD: u8 = 13;
    /// Masked compare and swap.
    pub(crate) const MASKED_COMP_AND_SWAP: u8 = 14;
    /// Receive of an RDMA Write with immediate data, or of Immediate Data alone (completions
    /// only).
    pub(crate) const RECV_WRITE_IMM: u8 = 15;
    /// RDMA Flush (`SIW_OP_FLUSH`, [`super::FlushArgs`]): kernel QPs and user contexts that
    /// got a Flush bit, with the commit extensions on.
    pub(crate) const FLUSH: u8 = 16;
    /// Atomic Write (`SIW_OP_ATOMIC_WRITE`, [`super::atomic_write_data`]): kernel QPs and user
    /// contexts that got the bit, with the commit extensions on.
    pub(crate) const ATOMIC_WRITE: u8 = 17;
    /// RDMA Verify (`SIW_OP_VERIFY`, [`super::VerifyArgs`]): user contexts that got the bit
    /// (no kernel verb has it).
    pub(crate) const VERIFY: u8 = 18;
    /// Number of opcodes of extended contexts (`SIW_NUM_OPCODES_EXT`).
    pub(crate) const NUM_EXT: u8 = 19;

    /// Whether `opcode` is a request of the commit extensions: it expects a QN 3 response
    /// and takes an ORD credit (CMT-02).
    pub(crate) const fn is_commit(opcode: u8) -> bool {
        matches!(opcode, FLUSH | ATOMIC_WRITE | VERIFY)
    }

    /// Whether `opcode` is one of the four atomics.
    pub(crate) const fn is_atomic(opcode: u8) -> bool {
        matches!(
            opcode,
            FETCH_AND_ADD | COMP_AND_SWAP | MASKED_FETCH_AND_ADD | MASKED_COMP_AND_SWAP
        )
    }

    /// The opcode the CQ of a legacy user context reports for `opcode`: the extended ones as
    /// their nearest siw ABI opcode (the stock provider indexes a table of [`NUM`] entries
    /// with it).
    pub(crate) const fn for_user(opcode: u8) -> u8 {
        match opcode {
            WRITE_WITH_IMM => WRITE,
            MASKED_FETCH_AND_ADD => FETCH_AND_ADD,
            MASKED_COMP_AND_SWAP => COMP_AND_SWAP,
            RECV_WRITE_IMM => RECEIVE,
            o if o < NUM => o,
            _ => SEND,
        }
    }
}

/// The operands of an atomic send queue element, kept in the bytes of `sge[1..3]` (an atomic
/// has one SGE, its 8-byte result buffer), in native byte order: `struct siw_sqe_atomic`,
/// bytes 40-71 of the SQE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AtomicArgs {
    /// Compare value (compare and swap) or value to add (fetch and add).
    pub(crate) compare_add: u64,
    /// Swap value.
    pub(crate) swap: u64,
    /// Compare mask, or the field boundaries of a masked fetch and add.
    pub(crate) compare_add_mask: u64,
    /// Swap mask.
    pub(crate) swap_mask: u64,
}

impl AtomicArgs {
    /// Stores the operands into `sqe`.
    pub(crate) fn to_sqe(self, sqe: &mut Sqe) {
        let v = [
            self.compare_add,
            self.swap,
            self.compare_add_mask,
            self.swap_mask,
        ];
        if let Some(b) = sqe.sge.get_mut(1..3) {
            for (d, x) in b.as_mut_bytes().chunks_exact_mut(8).zip(v) {
                d.copy_from_slice(&x.to_ne_bytes());
            }
        }
    }

    /// Reads the operands back from `sqe`.
    pub(crate) fn from_sqe(sqe: &Sqe) -> Self {
        let mut v = [0u64; 4];
        if let Some(b) = sqe.sge.get(1..3) {
            for (x, s) in v.iter_mut().zip(b.as_bytes().chunks_exact(8)) {
                let mut w = [0u8; 8];
                w.copy_from_slice(s);
                *x = u64::from_ne_bytes(w);
            }
        }
        let [compare_add, swap, compare_add_mask, swap_mask] = v;
        Self {
            compare_add,
            swap,
            compare_add_mask,
            swap_mask,
        }
    }
}

/// The operands of a Flush send queue element (`struct siw_sqe_flush`, bytes 24-31 of the
/// SQE, in the place of `sge[0].laddr`), in native byte order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlushArgs {
    /// Bytes to flush at `raddr` (ignored with [`FlushArgs::REGION`]).
    pub(crate) length: u32,
    /// The Flush Request's Flags (`enum siw_flush_flags`, the wire's values).
    pub(crate) flags: u32,
}

impl FlushArgs {
    /// Flush to persistence (`SIW_FLUSH_PERSISTENT`).
    pub(crate) const PERSISTENT: u32 = 1 << 0;
    /// Flush to global visibility (`SIW_FLUSH_GLOBAL`).
    pub(crate) const GLOBAL: u32 = 1 << 1;
    /// The whole region (`SIW_FLUSH_REGION`).
    pub(crate) const REGION: u32 = 1 << 2;

    /// Stores the operands into `sqe`.
    pub(crate) fn to_sqe(self, sqe: &mut Sqe) {
        let b = sqe.sge[0].as_mut_bytes();
        if let Some(d) = b.get_mut(0..8) {
            let (len, fl) = d.split_at_mut(4);
            len.copy_from_slice(&self.length.to_ne_bytes());
            fl.copy_from_slice(&self.flags.to_ne_bytes());
        }
    }

    /// Reads the operands back from `sqe`.
    pub(crate) fn from_sqe(sqe: &Sqe) -> Self {
        let b = sqe.sge[0].as_bytes();
        let w = |r: core::ops::Range<usize>| {
            let mut x = [0u8; 4];
            if let Some(s) = b.get(r) {
                x.copy_from_slice(s);
            }
            u32::from_ne_bytes(x)
        };
        Self {
            length: w(0..4),
            flags: w(4..8),
        }
    }
}

/// The 8 bytes of an Atomic Write send queue element (`atomic_write`, bytes 24-31 of the SQE,
/// in the place of `sge[0].laddr`), in memory order.
pub(crate) fn atomic_write_data(sqe: &Sqe) -> [u8; 8] {
    let mut d = [0u8; 8];
    if let Some(s) = sqe.sge[0].as_bytes().get(0..8) {
        d.copy_from_slice(s);
    }
    d
}

/// Stores the 8 bytes of an Atomic Write into `sqe` (see [`atomic_write_data`]).
pub(crate) fn set_atomic_write_data(sqe: &mut Sqe, data: [u8; 8]) {
    if let Some(d) = sqe.sge[0].as_mut_bytes().get_mut(0..8) {
        d.copy_from_slice(&data);
    }
}

/// The byte offset of `length` in an SQE of `SIW_OP_VERIFY` (`struct siw_sqe_verify`, after
/// the digest sink in `sge[0]`).
pub(crate) const VERIFY_LEN_OFFSET: usize = 40;
/// The byte offset of `digest_len` in an SQE of `SIW_OP_VERIFY`.
const VERIFY_DIGEST_LEN_OFFSET: usize = 44;
/// The byte offset of `digest` in an SQE of `SIW_OP_VERIFY`.
pub(crate) const VERIFY_DIGEST_OFFSET: usize = 48;
/// The end of `digest` in an SQE of `SIW_OP_VERIFY` (`reserved2` follows).
const VERIFY_DIGEST_END: usize = VERIFY_DIGEST_OFFSET + VERIFY_MAX_HASH;

/// The operands of a Verify send queue element (`struct siw_sqe_verify`, bytes 24-119 of the
/// SQE): the digest sink is `sge[0]` (if `num_sge` is 1), then these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VerifyArgs {
    /// Bytes to verify at `raddr`.
    pub(crate) length: u32,
    /// Bytes of `digest` to send as the request's Hash Value (0: ask for the digest).
    pub(crate) digest_len: u8,
    /// The expected digest.
    pub(crate) digest: [u8; VERIFY_MAX_HASH],
}

impl VerifyArgs {
    /// Reads the operands from `sqe` (as they are: [`check_sqe`] checks them).
    pub(crate) fn from_sqe(sqe: &Sqe) -> Self {
        let b = sqe.as_bytes();
        let mut len = [0u8; 4];
        if let Some(s) = b.get(VERIFY_LEN_OFFSET..VERIFY_DIGEST_LEN_OFFSET) {
            len.copy_from_slice(s);
        }
        let mut digest = [0u8; VERIFY_MAX_HASH];
        if let Some(s) = b.get(VERIFY_DIGEST_OFFSET..VERIFY_DIGEST_END) {
            digest.copy_from_slice(s);
        }
        Self {
            length: u32::from_ne_bytes(len),
            digest_len: b.get(VERIFY_DIGEST_LEN_OFFSET).copied().unwrap_or(0),
            digest,
        }
    }

    /// Stores the operands into `sqe`.
    pub(crate) fn to_sqe(self, sqe: &mut Sqe) {
        let b = sqe.as_mut_bytes();
        if let Some(d) = b.get_mut(VERIFY_LEN_OFFSET..VERIFY_DIGEST_LEN_OFFSET) {
            d.copy_from_slice(&self.length.to_ne_bytes());
        }
        if let Some(d) = b.get_mut(VERIFY_DIGEST_LEN_OFFSET) {
            *d = self.digest_len;
        }
        if let Some(d) = b.get_mut(VERIFY_DIGEST_OFFSET..VERIFY_DIGEST_END) {
            d.copy_from_slice(&self.digest);
        }
    }

    /// The Hash Value the request carries: the first `digest_len` bytes of `digest`.
    pub(crate) fn hash(&self) -> &[u8] {
        self.digest
            .get(..usize::from(self.digest_len))
            .unwrap_or(&[])
    }
}

/// Where an RDMA Write with immediate data keeps its immediate (`write_imm_data`, the last 4
/// bytes of the SQE): the `lkey` of the last SGE, which it therefore cannot use (at most
/// `NUM_SGE - 1` SGEs, or [`MAX_INLINE_WRITE_IMM`] bytes inline).
pub(crate) const fn imm_slot() -> usize {
    NUM_SGE - 1
}

/// `SIW_WC_*` completion status (`enum siw_wc_status`).
pub(crate) mod status {
    /// Success.
    pub(crate) const SUCCESS: u16 = 0;
    /// Local length error.
    pub(crate) const LOC_LEN_ERR: u16 = 1;
    /// Local protection error.
    pub(crate) const LOC_PROT_ERR: u16 = 2;
    /// Local QP operation error.
    pub(crate) const LOC_QP_OP_ERR: u16 = 3;
    /// Flushed.
    pub(crate) const WR_FLUSH_ERR: u16 = 4;
    /// Bad response.
    pub(crate) const BAD_RESP_ERR: u16 = 5;
    /// Local access error.
    pub(crate) const LOC_ACCESS_ERR: u16 = 6;
    /// Remote access error.
    pub(crate) const REM_ACCESS_ERR: u16 = 7;
    /// Remote invalid request.
    pub(crate) const REM_INV_REQ_ERR: u16 = 8;
    /// General error.
    pub(crate) const GENERAL_ERR: u16 = 9;
    /// Number of statuses a legacy user context may see (`SIW_NUM_WC_STATUS`).
    pub(crate) const NUM: u16 = 10;
    /// Remote operation error (`SIW_WC_REM_OP_ERR`, extended contexts and kernel CQs only).
    pub(crate) const REM_OP_ERR: u16 = 10;

    /// The status the CQ of a legacy user context reports for `status`: the extended ones as
    /// a general error.
    pub(crate) const fn for_legacy(status: u16) -> u16 {
        if status < NUM {
            status
        } else {
            GENERAL_ERR
        }
    }
}

/// The `imm_data` word of a CQE carrying immediate data `imm` (the 32 bits as sent, network
/// byte order, read as a native `u32`): `imm32`, its first 4 bytes, then zeros.
pub(crate) fn imm_to_cqe(imm: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&imm.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// The immediate data of a CQE's `imm_data` word ([`imm_to_cqe`]).
pub(crate) fn imm_from_cqe(word: u64) -> u32 {
    let b = word.to_ne_bytes();
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// Who posts to a queue and reads its completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Consumer {
    /// A kernel ULP: every opcode it may post was checked when it posted.
    Kernel,
    /// A user context with these [`ext`] bits (0: a legacy context).
    User(u64),
}

impl Consumer {
    /// Whether a user context that got the extended CQEs.
    pub(crate) const fn extended(self) -> bool {
        match self {
            Consumer::Kernel => false,
            Consumer::User(e) => e & ext::CQE != 0,
        }
    }

    /// Whether this is a user context.
    pub(crate) const fn user(self) -> bool {
        matches!(self, Consumer::User(_))
    }
}

/// Inline data capacity of an SQE (`SIW_MAX_INLINE`: `sge[1..]`).
pub(crate) const MAX_INLINE: usize = core::mem::size_of::<Sge>() * (NUM_SGE - 1);

/// Inline data capacity of an RDMA Write with immediate data (`SIW_MAX_INLINE_WRITE_IMM`):
/// bytes 40-115, the last 4 bytes holding the immediate ([`imm_slot`]).
pub(crate) const MAX_INLINE_WRITE_IMM: usize = MAX_INLINE - 4;

const _: () = {
    // The immediate of a Write with immediate data is the last word of the SQE.
    assert!(
        core::mem::offset_of!(Sqe, sge) + imm_slot() * core::mem::size_of::<Sge>() + 12 == 120 - 4
    );
    assert!(core::mem::offset_of!(Sqe, sge) + 16 + MAX_INLINE_WRITE_IMM == 120 - 4);
};

/// Why a work queue element was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invalid {
    /// Unknown or unsupported opcode.
    Opcode,
    /// Too many SGEs for the queue (or the operation).
    SgeCount,
    /// Unknown flags, or flags not allowed for the opcode.
    Flags,
    /// Total length overflows 32 bits, or inline data too long.
    Length,
    /// A field of an extended encoding out of its range, or a reserved byte not zero.
    Field,
}

impl Invalid {
    /// The `SIW_WC_*` status a rejected element completes with.
    pub(crate) fn status(self) -> u16 {
        match self {
            Invalid::Length => status::LOC_LEN_ERR,
            _ => status::LOC_QP_OP_ERR,
        }
    }
}

/// Returns whether `opcode` may be posted to a send queue by `who`. A legacy user context
/// (libsiw) posts only Write, Read, Send and Send with Invalidate; an extended one also the
/// RFC 7306 and commit operations it got ([`ext`]); the other operations are kernel verbs
/// (whose RFC 7306 and commit operations were checked against the device when posted).
pub(crate) fn sq_opcode_allowed(opcode: u8, who: Consumer) -> bool {
    let got = |bit: u64| match who {
        Consumer::Kernel => true,
        Consumer::User(e) => e & ext::CQE != 0 && e & bit != 0,
    };
    match opcode {
        op::WRITE | op::READ | op::SEND | op::SEND_REMOTE_INV => true,
        op::READ_LOCAL_INV | op::INVAL_STAG | op::REG_MR => !who.user(),
        op::SEND_WITH_IMM => got(ext::SEND_WITH_IMM),
        op::WRITE_WITH_IMM => got(ext::WRITE_WITH_IMM),
        op::FETCH_AND_ADD | op::COMP_AND_SWAP => got(ext::ATOMICS),
        op::MASKED_FETCH_AND_ADD | op::MASKED_COMP_AND_SWAP => got(ext::MASKED_ATOMICS),
        // Kernel verbs checked against the device when posted; user contexts that got them
        // (the commit extensions, with `commit` on).
        op::FLUSH => got(ext::FLUSH_GLOBAL | ext::FLUSH_PERSISTENT),
        op::ATOMIC_WRITE => got(ext::ATOMIC_WRITE),
        // No kernel verb.
        op::VERIFY => who.user() && got(ext::VERIFY),
        _ => false,
    }
}

/// The checks of the extended encodings that only user SQEs need (kernel SQEs are built by
/// [`crate::qp::RsiwQp`]): reserved bytes and operands that must be zero
/// (`Documentation/infiniband/rsiw-abi.rst`, "Send queue elements").
fn check_user_ext(sqe: &Sqe, got: u64) -> Result<(), Invalid> {
    let bytes = sqe.as_bytes();
    let zero = |r: core::ops::Range<usize>| bytes.get(r).is_some_and(|b| b.iter().all(|&x| x == 0));
    let ok = match sqe.opcode {
        // The immediate replaces the rkey; the remote address is reserved.
        op::SEND_WITH_IMM => sqe.raddr == 0,
        o if op::is_atomic(o) => {
            let a = AtomicArgs::from_sqe(sqe);
            // The result SGE is 8 bytes; 72-119 reserved.
            sqe.sge[0].length == 8
                && zero(72..120)
                && match o {
                    op::FETCH_AND_ADD => a.swap == 0 && a.compare_add_mask == 0 && a.swap_mask == 0,
                    op::COMP_AND_SWAP => a.compare_add_mask == 0 && a.swap_mask == 0,
                    op::MASKED_FETCH_AND_ADD => a.swap == 0 && a.swap_mask == 0,
                    _ => true,
                }
        }
        // Known flags, PERSISTENT or GLOBAL, each only if the context got it; 32-119
        // reserved. The length is ignored with REGION.
        op::FLUSH => {
            let f = FlushArgs::from_sqe(sqe).flags;
            let all = FlushArgs::PERSISTENT | FlushArgs::GLOBAL | FlushArgs::REGION;
            let may = |flag: u32, bit: u64| f & flag == 0 || got & bit != 0;
            f & !all == 0
                && f & (FlushArgs::PERSISTENT | FlushArgs::GLOBAL) != 0
                && may(FlushArgs::GLOBAL, ext::FLUSH_GLOBAL)
                && may(FlushArgs::PERSISTENT, ext::FLUSH_PERSISTENT)
                && zero(32..120)
        }
        // One aligned 64-bit word (AWRITE-02); 32-119 reserved.
        op::ATOMIC_WRITE => sqe.raddr % 8 == 0 && zero(32..120),
        // No digest or one of the context's `verify_digest_len`; reserved bytes zero.
        op::VERIFY => {
            let v = VerifyArgs::from_sqe(sqe);
            matches!(usize::from(v.digest_len), 0 | VERIFY_DIGEST_LEN)
                && zero(VERIFY_DIGEST_LEN_OFFSET + 1..VERIFY_DIGEST_OFFSET)
                && zero(VERIFY_DIGEST_END..120)
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(Invalid::Field)
    }
}

/// Validates a copied send queue element of `who` against the QP's SGE limit.
///
/// Returns the total payload length on success.
pub(crate) fn check_sqe(sqe: &Sqe, max_sge: u32, who: Consumer) -> Result<u32, Invalid> {
    if !sq_opcode_allowed(sqe.opcode, who) {
        return Err(Invalid::Opcode);
    }
    if sqe.flags & !flags::SQE_KNOWN != 0 {
        return Err(Invalid::Flags);
    }
    let n = u32::from(sqe.num_sge);
    match sqe.opcode {
        // Local operations carry no SGEs.
        op::INVAL_STAG | op::REG_MR => {
            if sqe.flags & flags::INLINE != 0 {
                return Err(Invalid::Flags);
            }
            return Ok(0);
        }
        // An atomic returns the original value to one 8-byte SGE.
        o if op::is_atomic(o) => {
            if n != 1 || sqe.flags & flags::INLINE != 0 {
                return Err(Invalid::SgeCount);
            }
            if let Consumer::User(got) = who {
                check_user_ext(sqe, got)?;
            }
            if sqe.sge[0].length != 8 {
                return Err(Invalid::Length);
            }
            return Ok(8);
        }
        // Their operands are in the SQE: no SGE, no inline data.
        op::FLUSH | op::ATOMIC_WRITE => {
            if n != 0 || sqe.flags & flags::INLINE != 0 {
                return Err(Invalid::SgeCount);
            }
            if let Consumer::User(got) = who {
                check_user_ext(sqe, got)?;
            }
            return Ok(if sqe.opcode == op::ATOMIC_WRITE { 8 } else { 0 });
        }
        // The digest sink, if any, is `sge[0]` and holds the whole digest.
        op::VERIFY => {
            if n > 1 || sqe.flags & flags::INLINE != 0 {
                return Err(Invalid::SgeCount);
            }
            if let Consumer::User(got) = who {
                check_user_ext(sqe, got)?;
            }
            if n == 1 && (sqe.sge[0].length as usize) < VERIFY_DIGEST_LEN {
                return Err(Invalid::Length);
            }
            return Ok(0);
        }
        op::SEND_WITH_IMM => {
            if let Consumer::User(got) = who {
                check_user_ext(sqe, got)?;
            }
        }
        // The immediate takes the last SGE slot.
        op::WRITE_WITH_IMM => {
            if sqe.flags & flags::INLINE != 0 {
                if n != 1 {
                    return Err(Invalid::SgeCount);
                }
                if sqe.sge[0].length as usize > MAX_INLINE_WRITE_IMM {
                    return Err(Invalid::Length);
                }
                return Ok(sqe.sge[0].length);
            }
            if n as usize > imm_slot() {
                return Err(Invalid::SgeCount);
            }
        }
        // The RDMA Read sink is a single SGE (`max_sge_rd`).
        op::READ | op::READ_LOCAL_INV => {
            if n > limits::MAX_SGE_RD {
                return Err(Invalid::SgeCount);
            }
            if sqe.flags & flags::INLINE != 0 {
                return Err(Invalid::Flags);
            }
        }
        _ => {}
    }
    if sqe.flags & flags::INLINE != 0 {
        // Inline: one SGE whose length is the data length, the data in `sge[1..]`.
        if n != 1 {
            return Err(Invalid::SgeCount);
        }
        let len = sqe.sge[0].length;
        if len as usize > MAX_INLINE {
            return Err(Invalid::Length);
        }
        return Ok(len);
    }
    if n > max_sge || n as usize > NUM_SGE {
        return Err(Invalid::SgeCount);
    }
    sum_len(&sqe.sge[..n as usize])
}

/// Validates a copied receive queue element against the queue's SGE limit and returns its
/// total length.
pub(crate) fn check_rqe(rqe: &Rqe, max_sge: u32) -> Result<u32, Invalid> {
    if rqe.flags & !flags::RQE_KNOWN != 0 {
        return Err(Invalid::Flags);
    }
    let n = u32::from(rqe.num_sge);
    if n > max_sge || n as usize > NUM_SGE {
        return Err(Invalid::SgeCount);
    }
    sum_len(&rqe.sge[..n as usize])
}

/// Returns the total length of `sges`, which must fit 32 bits (the iWARP message size limit).
fn sum_len(sges: &[Sge]) -> Result<u32, Invalid> {
    sges.iter()
        .try_fold(0u32, |acc, s| acc.checked_add(s.length))
        .ok_or(Invalid::Length)
}

/// Copies the SGEs of a kernel work request into a ring element; returns how many were
/// copied. `src` was bounded by the queue's SGE limit, which fits `dst`.
pub(crate) fn copy_sges(dst: &mut [Sge], src: Sges<'_>) -> Result<u8> {
    let mut n: u8 = 0;
    for (d, s) in dst.iter_mut().zip(src) {
        *d = Sge {
            laddr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
        n = n.checked_add(1).ok_or(EINVAL)?;
    }
    Ok(n)
}

/// Builds a validated RQE from a kernel receive work request posted to a QP or SRQ: at most
/// `max_sge` SGEs, each passing `check_lkey` (an lkey of the queue's PD that grants local
/// write, [`MemTable::check_lkey`]). Fails with `EINVAL`.
///
/// [`MemTable::check_lkey`]: crate::mem::MemTable::check_lkey
pub(crate) fn build_rqe(
    w: &RecvWr,
    max_sge: u32,
    check_lkey: impl Fn(&Sge) -> Result,
) -> Result<Rqe> {
    let mut rqe = Rqe {
        id: w.wr_id(),
        opcode: rq_opcode(),
        ..Rqe::default()
    };
    rqe.num_sge = copy_sges(&mut rqe.sge, w.sges(max_sge)?)?;
    check_rqe(&rqe, max_sge).map_err(|_: Invalid| EINVAL)?;
    rqe.sge
        .get(..usize::from(rqe.num_sge))
        .ok_or(EINVAL)?
        .iter()
        .try_for_each(check_lkey)?;
    Ok(rqe)
}

/// Returns `opcode` if `who` may see it in the completion of an SQE that was rejected, else
/// `SIW_OP_SEND` (for completions of garbage SQEs written by a user).
pub(crate) fn sanitise_opcode(opcode: u8, who: Consumer) -> u8 {
    match opcode {
        o if o < op::NUM => o,
        op::WRITE_WITH_IMM
        | op::MASKED_FETCH_AND_ADD
        | op::MASKED_COMP_AND_SWAP
        | op::FLUSH
        | op::ATOMIC_WRITE
            if !who.user() =>
        {
            opcode
        }
        // The SQE opcodes of the extended ABI (all but the receive's).
        o if who.extended() && o < op::NUM_EXT && o != op::RECV_WRITE_IMM => o,
        _ => op::SEND,
    }
}

/// The `SIW_OP_*` opcode a completion of a receive carries.
pub(crate) const fn rq_opcode() -> u8 {
    op::RECEIVE
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_wqe)]
mod tests {
    use super::*;

    const K: Consumer = Consumer::Kernel;
    const U0: Consumer = Consumer::User(0);

    fn sqe(opcode: u8, num_sge: u8, fl: u16) -> Sqe {
        Sqe {
            opcode,
            num_sge,
            flags: fl | flags::VALID,
            ..Sqe::default()
        }
    }

    #[test]
    fn sqe_opcodes() {
        assert_eq!(check_sqe(&sqe(op::SEND, 1, 0), 6, U0), Ok(0));
        assert_eq!(
            check_sqe(&sqe(op::REG_MR, 0, 0), 6, U0),
            Err(Invalid::Opcode)
        );
        assert_eq!(check_sqe(&sqe(op::REG_MR, 0, 0), 6, K), Ok(0));
        assert_eq!(
            check_sqe(&sqe(op::SEND_WITH_IMM, 1, 0), 6, U0),
            Err(Invalid::Opcode)
        );
        assert_eq!(check_sqe(&sqe(op::SEND_WITH_IMM, 1, 0), 6, K), Ok(0));
        for o in [
            op::FETCH_AND_ADD,
            op::COMP_AND_SWAP,
            op::MASKED_FETCH_AND_ADD,
            op::MASKED_COMP_AND_SWAP,
            op::WRITE_WITH_IMM,
        ] {
            assert_eq!(check_sqe(&sqe(o, 1, 0), 6, U0), Err(Invalid::Opcode));
        }
        // The receive-only opcode, and past the kernel-only ones (Flush and Atomic Write are
        // the last: a kernel QP posts no Verify).
        assert_eq!(
            check_sqe(&sqe(op::RECV_WRITE_IMM, 1, 0), 6, K),
            Err(Invalid::Opcode)
        );
        assert_eq!(
            check_sqe(&sqe(op::ATOMIC_WRITE + 1, 1, 0), 6, K),
            Err(Invalid::Opcode)
        );
        assert_eq!(check_sqe(&sqe(op::NUM, 1, 0), 6, U0), Err(Invalid::Opcode));
        assert_eq!(check_sqe(&sqe(0xff, 1, 0), 6, K), Err(Invalid::Opcode));
    }

    #[test]
    fn sqe_sges_and_lengths() {
        assert_eq!(
            check_sqe(&sqe(op::SEND, 7, 0), 6, U0),
            Err(Invalid::SgeCount)
        );
        assert_eq!(
            check_sqe(&sqe(op::SEND, 3, 0), 2, U0),
            Err(Invalid::SgeCount)
        );
        assert_eq!(
            check_sqe(&sqe(op::READ, 2, 0), 6, U0),
            Err(Invalid::SgeCount)
        );
        let mut s = sqe(op::WRITE, 2, 0);
        s.sge[0].length = u32::MAX;
        s.sge[1].length = 1;
        assert_eq!(check_sqe(&s, 6, U0), Err(Invalid::Length));
        s.sge[1].length = 0;
        assert_eq!(check_sqe(&s, 6, U0), Ok(u32::MAX));
        let mut i = sqe(op::SEND, 1, flags::INLINE);
        i.sge[0].length = MAX_INLINE as u32;
        assert_eq!(check_sqe(&i, 6, U0), Ok(80));
        i.sge[0].length = MAX_INLINE as u32 + 1;
        assert_eq!(check_sqe(&i, 6, U0), Err(Invalid::Length));
        assert_eq!(
            check_sqe(&sqe(op::READ, 1, flags::INLINE), 6, U0),
            Err(Invalid::Flags)
        );
        assert_eq!(
            check_sqe(&sqe(op::SEND, 1, 0x8000), 6, U0),
            Err(Invalid::Flags)
        );
    }

    #[test]
    fn sqe_extensions() {
        let mut a = sqe(op::FETCH_AND_ADD, 1, 0);
        assert_eq!(check_sqe(&a, 6, K), Err(Invalid::Length));
        a.sge[0].length = 8;
        assert_eq!(check_sqe(&a, 6, K), Ok(8));
        a.num_sge = 2;
        assert_eq!(check_sqe(&a, 6, K), Err(Invalid::SgeCount));
        let args = AtomicArgs {
            compare_add: 1,
            swap: u64::MAX,
            compare_add_mask: 0x8000_0000,
            swap_mask: 7,
        };
        args.to_sqe(&mut a);
        assert_eq!(AtomicArgs::from_sqe(&a), args);
        assert_eq!(a.sge[0].length, 8);
        let mut w = sqe(op::WRITE_WITH_IMM, 5, 0);
        assert_eq!(check_sqe(&w, 6, K), Ok(0));
        w.num_sge = 6;
        assert_eq!(check_sqe(&w, 6, K), Err(Invalid::SgeCount));
        let mut i = sqe(op::WRITE_WITH_IMM, 1, flags::INLINE);
        i.sge[0].length = MAX_INLINE_WRITE_IMM as u32;
        assert_eq!(check_sqe(&i, 6, K), Ok(76));
        i.sge[0].length += 1;
        assert_eq!(check_sqe(&i, 6, K), Err(Invalid::Length));
        assert_eq!(op::for_user(op::RECV_WRITE_IMM), op::RECEIVE);
        assert_eq!(op::for_user(op::MASKED_COMP_AND_SWAP), op::COMP_AND_SWAP);
        assert_eq!(op::for_user(0xff), op::SEND);
    }

    /// Flush and Atomic Write SQEs of kernel QPs: no SGE, no inline data, their operands in
    /// the place of `sge[0].laddr` as `struct siw_sqe_flush` and `atomic_write` lay them out.
    #[test]
    fn sqe_commit() {
        let mut f = sqe(op::FLUSH, 0, 0);
        let args = FlushArgs {
            length: 0x1234_5678,
            flags: FlushArgs::GLOBAL | FlushArgs::REGION,
        };
        args.to_sqe(&mut f);
        assert_eq!(FlushArgs::from_sqe(&f), args);
        // `struct siw_sqe_flush`: the length, then the flags, in native order.
        let b = f.sge[0].as_bytes();
        assert_eq!(b.get(0..4), Some(&args.length.to_ne_bytes()[..]));
        assert_eq!(b.get(4..8), Some(&args.flags.to_ne_bytes()[..]));
        assert_eq!(check_sqe(&f, 6, K), Ok(0));
        f.num_sge = 1;
        assert_eq!(check_sqe(&f, 6, K), Err(Invalid::SgeCount));
        let mut a = sqe(op::ATOMIC_WRITE, 0, 0);
        set_atomic_write_data(&mut a, *b"rsiw8byt");
        assert_eq!(atomic_write_data(&a), *b"rsiw8byt");
        assert_eq!(check_sqe(&a, 6, K), Ok(8));
        let i = sqe(op::ATOMIC_WRITE, 0, flags::INLINE);
        assert_eq!(check_sqe(&i, 6, K), Err(Invalid::SgeCount));
        assert!(op::is_commit(op::FLUSH) && op::is_commit(op::ATOMIC_WRITE));
        assert!(op::is_commit(op::VERIFY) && !op::is_commit(op::FETCH_AND_ADD));
        // A kernel QP posts no Verify.
        assert_eq!(
            check_sqe(&sqe(op::VERIFY, 0, 0), 6, K),
            Err(Invalid::Opcode)
        );
    }

    /// The commit operations of user contexts: only with their bit, every field of the ring
    /// checked (`Documentation/infiniband/rsiw-abi.rst`).
    #[test]
    fn sqe_user_commit() {
        let commit = Consumer::User(ext::CQE | ext::COMMIT);
        let f0 = {
            let mut f = sqe(op::FLUSH, 0, 0);
            FlushArgs {
                length: 64,
                flags: FlushArgs::GLOBAL,
            }
            .to_sqe(&mut f);
            f
        };
        let mut a0 = sqe(op::ATOMIC_WRITE, 0, 0);
        a0.raddr = 0x1000;
        set_atomic_write_data(&mut a0, *b"rsiw8byt");
        let mut v0 = sqe(op::VERIFY, 1, 0);
        v0.sge[0].length = 4;
        let mut args = VerifyArgs {
            length: 4096,
            digest_len: 4,
            digest: [0; VERIFY_MAX_HASH],
        };
        args.digest[..4].copy_from_slice(&[1, 2, 3, 4]);
        args.to_sqe(&mut v0);
        assert_eq!(VerifyArgs::from_sqe(&v0), args);
        assert_eq!(VerifyArgs::from_sqe(&v0).hash(), &[1, 2, 3, 4]);
        assert_eq!(v0.as_bytes()[40..44], 4096u32.to_ne_bytes());
        assert_eq!(v0.as_bytes()[44], 4);
        assert_eq!(v0.as_bytes()[48..52], [1, 2, 3, 4]);

        assert_eq!(check_sqe(&f0, 6, commit), Ok(0));
        assert_eq!(check_sqe(&a0, 6, commit), Ok(8));
        assert_eq!(check_sqe(&v0, 6, commit), Ok(0));
        // Legacy contexts, extended ones without the bits, bits without the extended CQEs.
        for who in [
            U0,
            Consumer::User(ext::CQE | ext::RFC7306),
            Consumer::User(ext::COMMIT),
        ] {
            for s in [&f0, &a0, &v0] {
                assert_eq!(check_sqe(s, 6, who), Err(Invalid::Opcode));
            }
        }
        // Each bit for its operation only.
        let only = |b: u64| Consumer::User(ext::CQE | b);
        assert_eq!(check_sqe(&f0, 6, only(ext::FLUSH_GLOBAL)), Ok(0));
        assert_eq!(
            check_sqe(&a0, 6, only(ext::FLUSH_GLOBAL)),
            Err(Invalid::Opcode)
        );
        assert_eq!(
            check_sqe(&v0, 6, only(ext::ATOMIC_WRITE)),
            Err(Invalid::Opcode)
        );
        assert_eq!(check_sqe(&f0, 6, only(ext::VERIFY)), Err(Invalid::Opcode));

        // Flush: known flags, PERSISTENT or GLOBAL, each only if granted; no SGE; reserved.
        let global = Consumer::User(ext::CQE | (ext::COMMIT & !ext::FLUSH_PERSISTENT));
        for (fl, ok) in [
            (FlushArgs::GLOBAL | FlushArgs::REGION, true),
            (0, false),
            (FlushArgs::REGION, false),
            (FlushArgs::PERSISTENT, false),
            (FlushArgs::PERSISTENT | FlushArgs::GLOBAL, false),
            (FlushArgs::GLOBAL | 8, false),
            (FlushArgs::GLOBAL | 0x8000_0000, false),
        ] {
            let mut f = f0;
            FlushArgs {
                length: 64,
                flags: fl,
            }
            .to_sqe(&mut f);
            let want = if ok { Ok(0) } else { Err(Invalid::Field) };
            assert_eq!(check_sqe(&f, 6, global), want);
        }
        let mut f = f0;
        FlushArgs {
            length: 0,
            flags: FlushArgs::PERSISTENT,
        }
        .to_sqe(&mut f);
        let persistent = Consumer::User(ext::CQE | ext::FLUSH_PERSISTENT);
        assert_eq!(check_sqe(&f, 6, persistent), Ok(0));
        let mut f = f0;
        f.num_sge = 1;
        assert_eq!(check_sqe(&f, 6, commit), Err(Invalid::SgeCount));
        f = f0;
        f.flags |= flags::INLINE;
        assert_eq!(check_sqe(&f, 6, commit), Err(Invalid::SgeCount));
        for at in [32usize, 119] {
            f = f0;
            f.as_mut_bytes()[at] = 1;
            assert_eq!(check_sqe(&f, 6, commit), Err(Invalid::Field));
        }

        // Atomic Write: an 8-aligned address, no SGE ("length" not 8), reserved bytes.
        for off in 1..8 {
            let mut a = a0;
            a.raddr += off;
            assert_eq!(check_sqe(&a, 6, commit), Err(Invalid::Field));
        }
        let mut a = a0;
        a.num_sge = 1;
        a.sge[0].length = 4;
        assert_eq!(check_sqe(&a, 6, commit), Err(Invalid::SgeCount));
        a = a0;
        a.as_mut_bytes()[32] = 1;
        assert_eq!(check_sqe(&a, 6, commit), Err(Invalid::Field));
        a = a0;
        a.flags |= flags::INLINE;
        assert_eq!(check_sqe(&a, 6, commit), Err(Invalid::SgeCount));

        // Verify: 0 or 1 SGE of at least the digest, digest length 0 or 4, reserved bytes.
        let mut v = v0;
        v.num_sge = 0;
        assert_eq!(check_sqe(&v, 6, commit), Ok(0));
        v.num_sge = 2;
        assert_eq!(check_sqe(&v, 6, commit), Err(Invalid::SgeCount));
        v = v0;
        v.sge[0].length = 3;
        assert_eq!(check_sqe(&v, 6, commit), Err(Invalid::Length));
        for (dl, ok) in [
            (0u8, true),
            (4, true),
            (1, false),
            (5, false),
            (64, false),
            (65, false),
        ] {
            v = v0;
            v.as_mut_bytes()[44] = dl;
            let want = if ok { Ok(0) } else { Err(Invalid::Field) };
            assert_eq!(check_sqe(&v, 6, commit), want);
        }
        for at in [45usize, 47, 112, 119] {
            v = v0;
            v.as_mut_bytes()[at] = 1;
            assert_eq!(check_sqe(&v, 6, commit), Err(Invalid::Field));
        }
        v = v0;
        v.flags |= flags::INLINE;
        assert_eq!(check_sqe(&v, 6, commit), Err(Invalid::SgeCount));
        // A rejected SQE's completion shows its opcode to an extended context.
        assert_eq!(sanitise_opcode(op::VERIFY, commit), op::VERIFY);
        assert_eq!(sanitise_opcode(op::VERIFY, U0), op::SEND);
    }

    /// The extended user ABI (`Documentation/infiniband/rsiw-abi.rst`): what each context
    /// may post, and every field of the new SQEs checked on a hostile ring.
    #[test]
    fn sqe_user_extensions() {
        let all = Consumer::User(ext::CQE | ext::RFC7306);
        // Legacy contexts, and extended ones without the bit, get no extended opcode.
        for o in [
            op::SEND_WITH_IMM,
            op::WRITE_WITH_IMM,
            op::FETCH_AND_ADD,
            op::COMP_AND_SWAP,
            op::MASKED_FETCH_AND_ADD,
            op::MASKED_COMP_AND_SWAP,
        ] {
            assert!(!sq_opcode_allowed(o, U0));
            assert!(!sq_opcode_allowed(o, Consumer::User(ext::CQE)));
            // Bits without the extended CQEs count for nothing.
            assert!(!sq_opcode_allowed(o, Consumer::User(ext::RFC7306)));
            assert!(sq_opcode_allowed(o, all));
        }
        let atomics = Consumer::User(ext::CQE | ext::ATOMICS);
        assert!(sq_opcode_allowed(op::FETCH_AND_ADD, atomics));
        assert!(!sq_opcode_allowed(op::MASKED_FETCH_AND_ADD, atomics));
        assert!(!sq_opcode_allowed(op::WRITE_WITH_IMM, atomics));
        // Kernel verbs, the receive opcode; Flush, Atomic Write, Verify without their bits.
        for o in [
            op::READ_LOCAL_INV,
            op::INVAL_STAG,
            op::REG_MR,
            op::RECEIVE,
            op::RECV_WRITE_IMM,
            16,
            17,
            18,
            op::NUM_EXT,
            0xff,
        ] {
            assert_eq!(check_sqe(&sqe(o, 0, 0), 6, all), Err(Invalid::Opcode));
        }

        // Atomics: one 8-byte result SGE, no inline, operands that do not apply are zero,
        // bytes 72-119 reserved.
        let mut a = sqe(op::COMP_AND_SWAP, 1, 0);
        a.sge[0].length = 8;
        AtomicArgs {
            compare_add: 5,
            swap: 6,
            ..AtomicArgs::default()
        }
        .to_sqe(&mut a);
        assert_eq!(check_sqe(&a, 6, all), Ok(8));
        assert_eq!(check_sqe(&a, 6, U0), Err(Invalid::Opcode));
        assert_eq!(Invalid::Opcode.status(), status::LOC_QP_OP_ERR);
        let mut b = a;
        b.sge[0].length = 4;
        assert_eq!(check_sqe(&b, 6, all), Err(Invalid::Field));
        assert_eq!(Invalid::Field.status(), status::LOC_QP_OP_ERR);
        b = a;
        b.num_sge = 0;
        assert_eq!(check_sqe(&b, 6, all), Err(Invalid::SgeCount));
        b.num_sge = 2;
        assert_eq!(check_sqe(&b, 6, all), Err(Invalid::SgeCount));
        b = a;
        b.flags |= flags::INLINE;
        assert_eq!(check_sqe(&b, 6, all), Err(Invalid::SgeCount));
        b = a;
        b.flags |= 0x80;
        assert_eq!(check_sqe(&b, 6, all), Err(Invalid::Flags));
        for at in [72usize, 100, 119] {
            b = a;
            b.as_mut_bytes()[at] = 1;
            assert_eq!(check_sqe(&b, 6, all), Err(Invalid::Field));
        }
        // Masks only for the masked variants, the swap value not for fetch and add.
        for (o, args, ok) in [
            (op::COMP_AND_SWAP, [1, 2, 0, 0], true),
            (op::COMP_AND_SWAP, [1, 2, 3, 0], false),
            (op::COMP_AND_SWAP, [1, 2, 0, 4], false),
            (op::FETCH_AND_ADD, [1, 0, 0, 0], true),
            (op::FETCH_AND_ADD, [1, 2, 0, 0], false),
            (op::FETCH_AND_ADD, [1, 0, 3, 0], false),
            (op::MASKED_FETCH_AND_ADD, [1, 0, 3, 0], true),
            (op::MASKED_FETCH_AND_ADD, [1, 0, 3, 4], false),
            (op::MASKED_FETCH_AND_ADD, [1, 2, 3, 0], false),
            (op::MASKED_COMP_AND_SWAP, [1, 2, 3, 4], true),
        ] {
            let mut m = a;
            m.opcode = o;
            let [compare_add, swap, compare_add_mask, swap_mask] = args;
            AtomicArgs {
                compare_add,
                swap,
                compare_add_mask,
                swap_mask,
            }
            .to_sqe(&mut m);
            let want = if ok { Ok(8) } else { Err(Invalid::Field) };
            assert_eq!(check_sqe(&m, 6, all), want);
            // The kernel builds its SQEs itself: no operand check.
            assert_eq!(check_sqe(&m, 6, K), Ok(8));
        }

        // Write with immediate data: at most 5 SGEs or 76 bytes inline.
        let mut w = sqe(op::WRITE_WITH_IMM, 5, 0);
        w.sge[5].lkey = 0xdead_beef;
        assert_eq!(check_sqe(&w, 6, all), Ok(0));
        assert_eq!(check_sqe(&w, 4, all), Err(Invalid::SgeCount));
        w.num_sge = 6;
        assert_eq!(check_sqe(&w, 6, all), Err(Invalid::SgeCount));
        w.num_sge = 0;
        assert_eq!(check_sqe(&w, 6, all), Ok(0));
        let mut i = sqe(op::WRITE_WITH_IMM, 1, flags::INLINE);
        i.sge[0].length = 76;
        assert_eq!(check_sqe(&i, 6, all), Ok(76));
        i.sge[0].length = 77;
        assert_eq!(check_sqe(&i, 6, all), Err(Invalid::Length));
        i.sge[0].length = 8;
        i.num_sge = 2;
        assert_eq!(check_sqe(&i, 6, all), Err(Invalid::SgeCount));
        assert_eq!(Invalid::Length.status(), status::LOC_LEN_ERR);

        // Send with immediate data: the immediate in the rkey, the remote address reserved.
        let mut si = sqe(op::SEND_WITH_IMM, 2, 0);
        si.rkey = 0x1234_5678;
        si.sge[0].length = 3;
        si.sge[1].length = 4;
        assert_eq!(check_sqe(&si, 6, all), Ok(7));
        si.raddr = 1;
        assert_eq!(check_sqe(&si, 6, all), Err(Invalid::Field));
        si.raddr = 0;
        si.flags |= flags::INLINE;
        si.num_sge = 1;
        si.sge[0].length = MAX_INLINE as u32;
        assert_eq!(check_sqe(&si, 6, all), Ok(80));

        // What a rejected SQE's completion may show.
        assert_eq!(sanitise_opcode(op::WRITE_WITH_IMM, U0), op::SEND);
        assert_eq!(sanitise_opcode(op::FETCH_AND_ADD, U0), op::FETCH_AND_ADD);
        assert_eq!(sanitise_opcode(op::WRITE_WITH_IMM, all), op::WRITE_WITH_IMM);
        assert_eq!(sanitise_opcode(op::RECV_WRITE_IMM, all), op::SEND);
        assert_eq!(sanitise_opcode(18, all), 18);
        assert_eq!(sanitise_opcode(op::NUM_EXT, all), op::SEND);
        assert_eq!(
            sanitise_opcode(op::MASKED_COMP_AND_SWAP, K),
            op::MASKED_COMP_AND_SWAP
        );
        assert_eq!(sanitise_opcode(op::FLUSH, K), op::FLUSH);
        assert_eq!(sanitise_opcode(op::ATOMIC_WRITE, K), op::ATOMIC_WRITE);
        assert_eq!(status::for_legacy(status::REM_OP_ERR), status::GENERAL_ERR);
        assert_eq!(
            status::for_legacy(status::REM_INV_REQ_ERR),
            status::REM_INV_REQ_ERR
        );
        assert_eq!(imm_from_cqe(imm_to_cqe(0x0102_0304)), 0x0102_0304);
        assert_eq!(imm_to_cqe(0x0102_0304).to_ne_bytes()[4..], [0; 4]);
    }

    #[test]
    fn rqe_checks() {
        let mut r = Rqe {
            flags: flags::VALID,
            num_sge: 2,
            ..Rqe::default()
        };
        assert_eq!(check_rqe(&r, 2), Ok(0));
        assert_eq!(check_rqe(&r, 1), Err(Invalid::SgeCount));
        r.num_sge = 200;
        assert_eq!(check_rqe(&r, 6), Err(Invalid::SgeCount));
        r.num_sge = 1;
        r.flags |= flags::INLINE;
        assert_eq!(check_rqe(&r, 6), Err(Invalid::Flags));
    }
}
