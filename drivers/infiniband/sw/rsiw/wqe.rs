// SPDX-License-Identifier: GPL-2.0

//! Work queue and completion queue elements: the ring formats of the `siw` user ABI
//! (`include/uapi/rdma/siw-abi.h`), used for kernel and user queues alike, and their
//! validation.
//!
//! Every element the kernel consumes is first copied out of the ring
//! ([`crate::ring::Ring::read`]) and then validated here; only a validated copy is acted upon,
//! so a user rewriting the ring concurrently cannot change what the kernel checked.

use crate::limits;
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
    /// The completion carries immediate data (kernel CQs only: `IB_WC_WITH_IMM`).
    pub(crate) const WITH_IMM: u16 = 1 << 6;
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
    /// Send with immediate data (kernel only: the immediate in `rkey`).
    pub(crate) const SEND_WITH_IMM: u8 = 4;
    /// Send with Invalidate.
    pub(crate) const SEND_REMOTE_INV: u8 = 5;
    /// Fetch and add (kernel only, see [`AtomicArgs`]).
    pub(crate) const FETCH_AND_ADD: u8 = 6;
    /// Compare and swap (kernel only, see [`AtomicArgs`]).
    pub(crate) const COMP_AND_SWAP: u8 = 7;
    /// Receive (completions only).
    pub(crate) const RECEIVE: u8 = 8;
    /// Local invalidate (kernel only).
    pub(crate) const INVAL_STAG: u8 = 10;
    /// Fast registration (kernel only).
    pub(crate) const REG_MR: u8 = 11;
    /// Number of opcodes (`SIW_NUM_OPCODES`): the last one user space may see.
    pub(crate) const NUM: u8 = 12;

    // Kernel QPs and CQs only, beyond the siw ABI (user rings never hold them).

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

    /// Whether `opcode` is one of the four atomics.
    pub(crate) const fn is_atomic(opcode: u8) -> bool {
        matches!(
            opcode,
            FETCH_AND_ADD | COMP_AND_SWAP | MASKED_FETCH_AND_ADD | MASKED_COMP_AND_SWAP
        )
    }

    /// The opcode a user CQ reports for `opcode`: the kernel-only ones as their nearest siw
    /// ABI opcode (the stock provider indexes a table of [`NUM`] entries with it).
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
/// has one SGE, its 8-byte result buffer), in native byte order. Kernel QPs only.
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

/// Where an RDMA Write with immediate data keeps its immediate: the `lkey` of the last SGE,
/// which it therefore cannot use (at most `NUM_SGE - 1` SGEs, or 64 bytes inline). Kernel QPs
/// only.
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
}

/// Inline data capacity of an SQE (`SIW_MAX_INLINE`: `sge[1..]`).
pub(crate) const MAX_INLINE: usize = core::mem::size_of::<Sge>() * (NUM_SGE - 1);

/// Inline data capacity of an RDMA Write with immediate data: `sge[1..NUM_SGE - 1]`, the last
/// slot holding the immediate ([`imm_slot`]).
pub(crate) const MAX_INLINE_WRITE_IMM: usize = core::mem::size_of::<Sge>() * (NUM_SGE - 2);

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

/// Returns whether `opcode` may be posted to a send queue, by a user (`user`) or kernel
/// consumer. User space (libsiw) posts only Write, Read, Send and Send with Invalidate; the
/// other operations are kernel verbs.
pub(crate) fn sq_opcode_allowed(opcode: u8, user: bool) -> bool {
    match opcode {
        op::WRITE | op::READ | op::SEND | op::SEND_REMOTE_INV => true,
        op::READ_LOCAL_INV | op::INVAL_STAG | op::REG_MR => !user,
        // RFC 7306: kernel QPs only (the siw ABI has no encoding for them).
        op::SEND_WITH_IMM | op::WRITE_WITH_IMM => !user,
        o if op::is_atomic(o) => !user,
        _ => false,
    }
}

/// Validates a copied send queue element against the QP's SGE limit.
///
/// Returns the total payload length on success.
pub(crate) fn check_sqe(sqe: &Sqe, max_sge: u32, user: bool) -> Result<u32, Invalid> {
    if !sq_opcode_allowed(sqe.opcode, user) {
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
            if sqe.sge[0].length != 8 {
                return Err(Invalid::Length);
            }
            return Ok(8);
        }
        // The immediate takes the last SGE slot.
        op::WRITE_WITH_IMM => {
            if sqe.flags & flags::INLINE != 0 {
                if n != 1 || sqe.sge[0].length as usize > MAX_INLINE_WRITE_IMM {
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

/// The `SIW_OP_*` opcode a completion of a receive carries.
pub(crate) const fn rq_opcode() -> u8 {
    op::RECEIVE
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_wqe)]
mod tests {
    use super::*;

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
        assert_eq!(check_sqe(&sqe(op::SEND, 1, 0), 6, true), Ok(0));
        assert_eq!(
            check_sqe(&sqe(op::REG_MR, 0, 0), 6, true),
            Err(Invalid::Opcode)
        );
        assert_eq!(check_sqe(&sqe(op::REG_MR, 0, 0), 6, false), Ok(0));
        assert_eq!(
            check_sqe(&sqe(op::SEND_WITH_IMM, 1, 0), 6, true),
            Err(Invalid::Opcode)
        );
        assert_eq!(check_sqe(&sqe(op::SEND_WITH_IMM, 1, 0), 6, false), Ok(0));
        for o in [
            op::FETCH_AND_ADD,
            op::COMP_AND_SWAP,
            op::MASKED_FETCH_AND_ADD,
            op::MASKED_COMP_AND_SWAP,
            op::WRITE_WITH_IMM,
        ] {
            assert_eq!(check_sqe(&sqe(o, 1, 0), 6, true), Err(Invalid::Opcode));
        }
        // Past the kernel-only opcodes (`op::NUM` is `op::WRITE_WITH_IMM` for kernel QPs),
        // and the receive-only one.
        assert_eq!(
            check_sqe(&sqe(op::RECV_WRITE_IMM, 1, 0), 6, false),
            Err(Invalid::Opcode)
        );
        assert_eq!(
            check_sqe(&sqe(op::RECV_WRITE_IMM + 1, 1, 0), 6, false),
            Err(Invalid::Opcode)
        );
        assert_eq!(
            check_sqe(&sqe(op::NUM, 1, 0), 6, true),
            Err(Invalid::Opcode)
        );
        assert_eq!(check_sqe(&sqe(0xff, 1, 0), 6, false), Err(Invalid::Opcode));
    }

    #[test]
    fn sqe_sges_and_lengths() {
        assert_eq!(
            check_sqe(&sqe(op::SEND, 7, 0), 6, true),
            Err(Invalid::SgeCount)
        );
        assert_eq!(
            check_sqe(&sqe(op::SEND, 3, 0), 2, true),
            Err(Invalid::SgeCount)
        );
        assert_eq!(
            check_sqe(&sqe(op::READ, 2, 0), 6, true),
            Err(Invalid::SgeCount)
        );
        let mut s = sqe(op::WRITE, 2, 0);
        s.sge[0].length = u32::MAX;
        s.sge[1].length = 1;
        assert_eq!(check_sqe(&s, 6, true), Err(Invalid::Length));
        s.sge[1].length = 0;
        assert_eq!(check_sqe(&s, 6, true), Ok(u32::MAX));
        let mut i = sqe(op::SEND, 1, flags::INLINE);
        i.sge[0].length = MAX_INLINE as u32;
        assert_eq!(check_sqe(&i, 6, true), Ok(80));
        i.sge[0].length = MAX_INLINE as u32 + 1;
        assert_eq!(check_sqe(&i, 6, true), Err(Invalid::Length));
        assert_eq!(
            check_sqe(&sqe(op::READ, 1, flags::INLINE), 6, true),
            Err(Invalid::Flags)
        );
        assert_eq!(
            check_sqe(&sqe(op::SEND, 1, 0x8000), 6, true),
            Err(Invalid::Flags)
        );
    }

    #[test]
    fn sqe_extensions() {
        let mut a = sqe(op::FETCH_AND_ADD, 1, 0);
        assert_eq!(check_sqe(&a, 6, false), Err(Invalid::Length));
        a.sge[0].length = 8;
        assert_eq!(check_sqe(&a, 6, false), Ok(8));
        a.num_sge = 2;
        assert_eq!(check_sqe(&a, 6, false), Err(Invalid::SgeCount));
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
        assert_eq!(check_sqe(&w, 6, false), Ok(0));
        w.num_sge = 6;
        assert_eq!(check_sqe(&w, 6, false), Err(Invalid::SgeCount));
        let mut i = sqe(op::WRITE_WITH_IMM, 1, flags::INLINE);
        i.sge[0].length = MAX_INLINE_WRITE_IMM as u32;
        assert_eq!(check_sqe(&i, 6, false), Ok(64));
        i.sge[0].length += 1;
        assert_eq!(check_sqe(&i, 6, false), Err(Invalid::Length));
        assert_eq!(op::for_user(op::RECV_WRITE_IMM), op::RECEIVE);
        assert_eq!(op::for_user(op::MASKED_COMP_AND_SWAP), op::COMP_AND_SWAP);
        assert_eq!(op::for_user(0xff), op::SEND);
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
