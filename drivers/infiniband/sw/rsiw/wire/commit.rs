// SPDX-License-Identifier: GPL-2.0

//! The responder's decisions on the RDMA commit extensions
//! (draft-talpey-rdma-commit-02): Flush, Atomic Write and Verify.
//!
//! Pure: the driver resolves STags and touches memory; this module says what
//! a request asks for, which Terminate a malformed one gets (spec-map D-02,
//! D-05), which bytes a persistent Flush writes back, and how a Verify ends.
//!
//! Ordering (FLUSH-03, AWRITE-04, VERIFY-06, T-01, T-02) is not decided here
//! but by where the driver runs these functions: each request is executed
//! when it is Delivered, in stream order, after every earlier Write was
//! placed (RX places synchronously, TCP delivers in order), and its
//! response is queued in the one responder FIFO ([`super::stream::RespQueue`]).
//! A request that fails terminates the stream, so nothing after it runs.

use crate::wire::crc::{crc_to_wire, Crc32c, CRC_INIT};
use crate::wire::hdr::{AtomicWriteRequest, FlushRequest, FLUSH_P, FLUSH_V};
use crate::wire::term::{RdmapCode, TermCode};

/// What a Flush covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushScope {
    /// The whole region (flag R; Length and TO are ignored, FLUSH-02).
    Region,
    /// `[to, to + len)` of the region.
    Range {
        /// Data Sink Tagged Offset.
        to: u64,
        /// Data Sink Length.
        len: u64,
    },
}

/// A checked Flush Request: what to achieve, and over which bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushPlan {
    /// Flush to persistence (P): the region needs the Flushable-to-persistence
    /// right, and the bytes are written back.
    pub persistent: bool,
    /// Flush to global visibility (V or G, X-25): the region needs the
    /// Flushable-to-global-visibility right.
    pub global: bool,
    /// The bytes concerned.
    pub scope: FlushScope,
}

/// Checks a Flush Request's flags (D-05: unknown bits, or neither P nor V,
/// are 0/2/FF) and returns what it asks for.
pub fn flush_plan(r: &FlushRequest) -> Result<FlushPlan, TermCode> {
    r.check_flags()?;
    let scope = if r.whole_region() {
        FlushScope::Region
    } else {
        FlushScope::Range {
            to: r.sink.to,
            len: u64::from(r.sink.len),
        }
    };
    Ok(FlushPlan {
        persistent: r.flags & FLUSH_P != 0,
        global: r.flags & FLUSH_V != 0,
        scope,
    })
}

/// The bytes a persistent Flush of `[off, off + len)` writes back: the
/// whole cache lines of `line` bytes (a power of two) that cover them, as
/// `(start, length)`. `(off, 0)` for nothing; `None` if `line` is not a
/// power of two or the span does not fit in 64 bits.
pub fn writeback_span(off: u64, len: u64, line: u64) -> Option<(u64, u64)> {
    if !line.is_power_of_two() {
        return None;
    }
    if len == 0 {
        return Some((off, 0));
    }
    let mask = line.checked_sub(1)?;
    let start = off & !mask;
    let end = off.checked_add(len)?.checked_add(mask)? & !mask;
    Some((start, end.checked_sub(start)?))
}

/// Checks an Atomic Write Request before its target is resolved: the Data
/// Sink Length MUST be 8 (AWRITE-01: 0/2/07). The alignment of the resolved
/// address is the driver's check (AWRITE-02, T-07: also 0/2/07).
pub fn atomic_write_check(r: &AtomicWriteRequest) -> Result<(), TermCode> {
    r.check_len()
}

/// Bytes of the digest rsiw computes for RDMA Verify: CRC32c (spec-map 8.8,
/// `Documentation/infiniband/rsiw-extensions.rst`).
pub const VERIFY_DIGEST_LEN: usize = 4;

/// The most Hash Value bytes a Verify Request may carry (the siw ABI's
/// `SIW_MAX_VERIFY_DIGEST`); longer is 0/2/07, as any oversized request.
pub const VERIFY_MAX_HASH: usize = 64;

/// A Verify digest being computed over the target range, piece by piece.
#[derive(Clone, Copy, Debug)]
pub struct VerifyDigest {
    crc: u32,
}

impl Default for VerifyDigest {
    fn default() -> Self {
        Self::new()
    }
}

impl VerifyDigest {
    /// Nothing digested yet.
    pub fn new() -> Self {
        VerifyDigest { crc: CRC_INIT }
    }

    /// Adds the next bytes of the range.
    pub fn update(&mut self, c: &impl Crc32c, data: &[u8]) {
        self.crc = c.update(self.crc, data);
    }

    /// The digest: the CRC32c of the range (standard, reflected, final XOR),
    /// as 4 bytes in the order the MPA trailer uses (little-endian).
    pub fn finish(&self) -> [u8; VERIFY_DIGEST_LEN] {
        crc_to_wire(self.crc)
    }
}

/// How a Verify ends, given the Hash Value it carried (`expected`, empty
/// for none) and the digest of the target range: a Verify Response carrying
/// the digest (no hash asked for, or a match), or a Terminate 0/2/FF
/// without a response (VERIFY-04, D-02: a mismatch, including a hash of
/// another length than the digest).
pub fn verify_outcome(expected: &[u8], digest: &[u8]) -> Result<(), TermCode> {
    if expected.is_empty() || expected == digest {
        Ok(())
    } else {
        Err(TermCode::operation(RdmapCode::Unspecified))
    }
}
