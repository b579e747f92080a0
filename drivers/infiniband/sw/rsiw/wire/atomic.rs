// SPDX-License-Identifier: GPL-2.0

//! RFC 7306 atomic arithmetic and the remote access error mapping.
//!
//! The arithmetic is pure: the driver reads the target u64 (in target memory
//! order), computes the new value here and stores it with a compare-exchange
//! loop (spec-map T-10). The error mapping turns a failed STag, bounds,
//! rights, PD or alignment check into the Terminate code spec-map T-06 and
//! D-02 choose, for each kind of incoming request.

use crate::wire::term::{DdpTaggedCode, RdmapCode, TermCode, TermEcho};

/// Masked FetchAdd (RFC 7306 §5.1.1).
///
/// A bit set in `mask` marks the most significant bit of a field; the carry
/// out of that bit is discarded, so each field is added independently.
/// `mask == 0` is a plain 64-bit add; an all-ones mask turns the add into a
/// XOR. Returns the new value (the original goes back to the requester).
#[inline]
pub fn fetch_add_masked(orig: u64, add: u64, mask: u64) -> u64 {
    // Adding with the field MSBs cleared keeps every carry inside its field;
    // the MSBs are then the XOR of both MSBs and the incoming carry.
    (orig & !mask).wrapping_add(add & !mask) ^ ((orig ^ add) & mask)
}

/// Masked CmpSwap (RFC 7306 §5.1.2). Returns the new value.
#[inline]
pub fn cmp_swap_masked(
    orig: u64,
    compare: u64,
    compare_mask: u64,
    swap: u64,
    swap_mask: u64,
) -> u64 {
    if (compare ^ orig) & compare_mask == 0 {
        (orig & !swap_mask) | (swap & swap_mask)
    } else {
        orig
    }
}

/// True if the resolved target address is 64-bit aligned (ATOM-11, T-07:
/// check the address, not the TO).
#[inline]
pub fn is_aligned8(addr: u64) -> bool {
    addr & 7 == 0
}

/// The kind of incoming message whose target failed a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// RDMA Write (tagged placement).
    Write,
    /// RDMA Read Request (data source checks).
    ReadRequest,
    /// Atomic Request.
    Atomic,
    /// RDMA Flush Request.
    Flush,
    /// RDMA Verify Request.
    Verify,
    /// Atomic Write Request.
    AtomicWrite,
    /// The Invalidate STag of a Send with Invalidate.
    SendInvalidate,
}

/// What failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The STag is not registered or was invalidated.
    InvalidStag,
    /// Base or bounds violation.
    Bounds,
    /// TO + length wraps.
    ToWrap,
    /// The region lacks the access right.
    Rights,
    /// The STag belongs to another protection domain / stream.
    Pd,
    /// The target is not 64-bit aligned (atomics, Atomic Write).
    Misaligned,
    /// Wrong Data Sink Length (Atomic Write: MUST be 8).
    Length,
}

/// The Terminate code and echo for a failed check (spec-map T-06, D-02).
pub fn access_error(t: Target, f: Fault) -> (TermCode, TermEcho) {
    use Fault::*;
    let echo = if t == Target::ReadRequest {
        // RFC 5040: Read Request errors carry the Terminated RDMA Header.
        TermEcho::DdpAndRdma
    } else {
        TermEcho::Ddp
    };
    let code = match (t, f) {
        (Target::Write, InvalidStag | Rights) => TermCode::tagged(DdpTaggedCode::InvalidStag),
        (Target::Write, Bounds) => TermCode::tagged(DdpTaggedCode::BaseBounds),
        (Target::Write, ToWrap) => TermCode::tagged(DdpTaggedCode::ToWrap),
        (Target::Write, Pd) => TermCode::tagged(DdpTaggedCode::StagNotAssociated),
        (Target::SendInvalidate, InvalidStag) => TermCode::operation(RdmapCode::CannotInvalidate),
        (Target::SendInvalidate, _) => TermCode::protection(RdmapCode::CannotInvalidate),
        (_, InvalidStag) => TermCode::protection(RdmapCode::InvalidStag),
        (_, Bounds) => TermCode::protection(RdmapCode::BaseBounds),
        (_, ToWrap) => TermCode::protection(RdmapCode::ToWrap),
        (_, Rights) => TermCode::protection(RdmapCode::AccessRights),
        (_, Pd) => TermCode::protection(RdmapCode::StagNotAssociated),
        (_, Misaligned | Length) => TermCode::operation(RdmapCode::CatastrophicStream),
    };
    (code, echo)
}

/// Checks `[to, to + len)` against a region `[base, base + size)` in TO
/// space. Zero-length accesses are never checked (DDP-12, T-19).
pub fn check_range(base: u64, size: u64, to: u64, len: u64) -> Result<(), Fault> {
    if len == 0 {
        return Ok(());
    }
    let end = to.checked_add(len).ok_or(Fault::ToWrap)?;
    let rend = base.checked_add(size).ok_or(Fault::Bounds)?;
    if to < base || end > rend {
        return Err(Fault::Bounds);
    }
    Ok(())
}

/// The Terminate for a Flush or Verify that failed while processing, or a
/// Verify hash mismatch: 0/2/FF (FLUSH-06, VERIFY-04, D-02).
pub fn commit_failure() -> TermCode {
    TermCode::operation(RdmapCode::Unspecified)
}
