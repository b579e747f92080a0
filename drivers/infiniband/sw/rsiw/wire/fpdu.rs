// SPDX-License-Identifier: GPL-2.0

//! MPA FPDU framing (RFC 5044 §4): `u16 ULPDU_Length | ULPDU | PAD | CRC`.
//!
//! Exactly one DDP segment per FPDU. PAD (0 to 3 zero bytes) makes
//! `2 + ULPDU_Length + PAD` a multiple of 4. The 4-byte CRC field is always
//! present; it is zero when CRC is not in use. Markers are never used (D-03).

use crate::wire::crc::{crc_to_wire, Crc32c, CRC_INIT};

/// Length of the ULPDU_Length field.
pub const LEN_LEN: usize = 2;
/// Length of the CRC field.
pub const CRC_LEN: usize = 4;
/// Framing overhead without pad.
pub const OVERHEAD: usize = LEN_LEN + CRC_LEN;

/// Pad length for a ULPDU of `ulpdu_len` bytes.
#[inline]
pub fn pad_len(ulpdu_len: usize) -> usize {
    // (2 + len + pad) % 4 == 0
    4usize.wrapping_sub(ulpdu_len.wrapping_add(LEN_LEN) & 3) & 3
}

/// Total FPDU length on the wire for a ULPDU of `ulpdu_len` bytes.
#[inline]
pub fn fpdu_len(ulpdu_len: usize) -> usize {
    ulpdu_len
        .saturating_add(OVERHEAD)
        .saturating_add(pad_len(ulpdu_len))
}

/// Largest ULPDU that fits an FPDU of at most `mss` bytes (RFC 5044 MULPDU,
/// `siw` sizes one FPDU per TCP segment). Returns `None` if the MSS is too
/// small to carry even a header.
pub fn mulpdu_from_mss(mss: u32) -> Option<u16> {
    let fpdu = usize::try_from(mss).ok()?.min(65535 + OVERHEAD + 3) & !3;
    let ulpdu = fpdu.checked_sub(OVERHEAD)?;
    let ulpdu = ulpdu.min(usize::from(u16::MAX) & !3 | 2);
    if ulpdu < crate::wire::hdr::UNTAGGED_HDR_LEN + crate::wire::hdr::ATOMIC_REQ_LEN {
        return None;
    }
    u16::try_from(ulpdu).ok()
}

/// Builds the trailer (pad and CRC) of an FPDU.
///
/// `crc` is the register after the length field, the header and the payload;
/// pass `None` when CRC is off (the field is then zero). Returns the bytes
/// and their count (4 to 7).
pub fn trailer<C: Crc32c>(c: &C, crc: Option<u32>, ulpdu_len: usize) -> ([u8; 7], usize) {
    let pad = pad_len(ulpdu_len);
    let mut out = [0u8; 7];
    let crc_bytes = match crc {
        Some(r) => crc_to_wire(c.update(r, out.get(..pad).unwrap_or(&[]))),
        None => [0; 4],
    };
    if let Some(d) = out.get_mut(pad..pad.saturating_add(CRC_LEN)) {
        d.copy_from_slice(&crc_bytes);
    }
    (out, pad.saturating_add(CRC_LEN))
}

/// Encodes a whole FPDU from a ULPDU held in one slice (control messages,
/// tests). Returns the FPDU length, or `None` if `out` is too small or the
/// ULPDU is longer than 65535 bytes.
pub fn encode_fpdu<C: Crc32c>(c: &C, crc_on: bool, ulpdu: &[u8], out: &mut [u8]) -> Option<usize> {
    let len = u16::try_from(ulpdu.len()).ok()?;
    let total = fpdu_len(ulpdu.len());
    let o = out.get_mut(..total)?;
    let lb = len.to_be_bytes();
    let body_end = LEN_LEN.checked_add(ulpdu.len())?;
    o.get_mut(..LEN_LEN)?.copy_from_slice(&lb);
    o.get_mut(LEN_LEN..body_end)?.copy_from_slice(ulpdu);
    let crc = if crc_on {
        Some(c.update(c.update(CRC_INIT, &lb), ulpdu))
    } else {
        None
    };
    let (t, tl) = trailer(c, crc, ulpdu.len());
    o.get_mut(body_end..)?.copy_from_slice(t.get(..tl)?);
    Some(total)
}
