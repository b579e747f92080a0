// SPDX-License-Identifier: GPL-2.0

//! iWARP wire core: MPA, DDP, RDMAP, RFC 7306 and the RDMA commit extensions.
//!
//! This module is a sans-IO protocol core. It owns no socket, no memory
//! region and no queue; it only encodes, decodes and validates the bytes that
//! travel over the TCP stream, and it keeps the small bounded per-stream state
//! (MSN, message offsets, IRD/ORD credits) that the validation needs.
//!
//! The same source is compiled into the `rsiw` kernel module (as the `wire`
//! module of the driver crate) and into a host crate (`tests/wire`) where it
//! is unit tested, property tested, fuzzed and benchmarked.
//!
//! Rules this code follows, because every byte from the network is hostile
//! and overflow checks are on in the kernel:
//!
//! - no allocation, no recursion, no floating point, no `unsafe`;
//! - no slice indexing that can panic and no unchecked arithmetic on values
//!   derived from the wire;
//! - every violation maps to the exact Terminate the driver has to send.
//!
//! Module map:
//!
//! - [`crc`]: CRC32c behind the [`crc::Crc32c`] trait, plus a software table
//!   driven implementation.
//! - [`mpa`]: MPA Request/Reply frames, enhanced (MPA v2) data, the
//!   streaming frame reader and the negotiation functions.
//! - [`fpdu`]: FPDU framing helpers (pad, trailer, MULPDU).
//! - [`hdr`]: DDP and RDMAP headers, opcodes and the per-message headers.
//! - [`term`]: Terminate codes and the Terminate message.
//! - [`rx`]: the chunk-agnostic receive parser.
//! - [`tx`]: the transmit segmenter.
//! - [`stream`]: MSN, message offset and IRD/ORD credit state.
//! - [`atomic`]: RFC 7306 masked atomic arithmetic and the access-check
//!   error mapping shared by all request types.
//! - [`commit`]: the responder's decisions on Flush, Atomic Write and
//!   Verify (the RDMA commit draft).

pub mod atomic;
pub mod commit;
pub mod crc;
pub mod fpdu;
pub mod hdr;
pub mod mpa;
pub mod rx;
pub mod stream;
pub mod term;
pub mod tx;

/// Reads a big-endian `u16` at `off` of `b`, or `None` if out of bounds.
#[inline]
pub(crate) fn be16(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    let a: [u8; 2] = s.try_into().ok()?;
    Some(u16::from_be_bytes(a))
}

/// Reads a big-endian `u32` at `off` of `b`, or `None` if out of bounds.
#[inline]
pub(crate) fn be32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    let a: [u8; 4] = s.try_into().ok()?;
    Some(u32::from_be_bytes(a))
}

/// Reads a big-endian `u64` at `off` of `b`, or `None` if out of bounds.
#[inline]
pub(crate) fn be64(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let a: [u8; 8] = s.try_into().ok()?;
    Some(u64::from_be_bytes(a))
}

/// Writes `v` into `b` at `off`; returns `false` if out of bounds.
#[inline]
pub(crate) fn put(b: &mut [u8], off: usize, v: &[u8]) -> bool {
    let Some(end) = off.checked_add(v.len()) else {
        return false;
    };
    match b.get_mut(off..end) {
        Some(d) => {
            d.copy_from_slice(v);
            true
        }
        None => false,
    }
}
