// SPDX-License-Identifier: GPL-2.0

//! CRC32c (Castagnoli) for the MPA FPDU trailer.
//!
//! The protocol code only needs the raw register update. It is behind the
//! [`Crc32c`] trait so that the kernel module can use the kernel's
//! (accelerated) `crc32c()` and the host a software implementation.
//!
//! MPA uses the iSCSI convention (as Linux `siw` does): the register starts
//! at `!0`, is updated over the 2-byte ULPDU_Length, the ULPDU and the pad,
//! and the complemented result is sent as a little-endian 32-bit value.

/// The CRC32c register update function.
///
/// `update(crc, data)` has the semantics of the kernel's
/// `u32 crc32c(u32 crc, const void *p, unsigned int len)`: no pre- or
/// post-inversion is applied, so calls can be chained over scattered data.
pub trait Crc32c {
    /// Updates the raw CRC register `crc` with `data` and returns it.
    fn update(&self, crc: u32, data: &[u8]) -> u32;
}

/// Initial register value of an MPA CRC computation.
pub const CRC_INIT: u32 = !0;

/// Turns a final register into the 4 trailer bytes that go on the wire.
#[inline]
pub fn crc_to_wire(crc: u32) -> [u8; 4] {
    (!crc).to_le_bytes()
}

/// Turns the 4 trailer bytes of an FPDU into the register value they match.
#[inline]
pub fn crc_from_wire(b: [u8; 4]) -> u32 {
    !u32::from_le_bytes(b)
}

/// The reflected CRC32c polynomial.
const POLY: u32 = 0x82F6_3B78;

// Evaluated at compile time only: an out-of-range index or an overflow
// here fails the build, it cannot happen at run time.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut j = 1;
        while j < 8 {
            let p = t[j - 1][i];
            t[j][i] = (p >> 8) ^ t[0][(p & 0xff) as usize];
            j += 1;
        }
        i += 1;
    }
    t
}

/// Slicing-by-8 lookup tables, computed at compile time.
static TABLES: [[u32; 256]; 8] = make_tables();

#[inline(always)]
fn tab(t: &[u32; 256], idx: u32) -> u32 {
    // `idx & 0xff` is always below 256: the lookup cannot fail.
    t.get((idx & 0xff) as usize).copied().unwrap_or(0)
}

/// Software CRC32c register update (slicing-by-8), usable in any context.
pub fn crc32c_sw(mut crc: u32, data: &[u8]) -> u32 {
    let [t0, t1, t2, t3, t4, t5, t6, t7] = &TABLES;
    // `chunks_exact` rather than `as_chunks`: the latter needs Rust 1.88, the kernel 1.85.
    let mut blocks = data.chunks_exact(8);
    for b in blocks.by_ref() {
        let Ok(b) = <&[u8; 8]>::try_from(b) else {
            break;
        };
        let lo = crc ^ u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let hi = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        crc = tab(t7, lo)
            ^ tab(t6, lo >> 8)
            ^ tab(t5, lo >> 16)
            ^ tab(t4, lo >> 24)
            ^ tab(t3, hi)
            ^ tab(t2, hi >> 8)
            ^ tab(t1, hi >> 16)
            ^ tab(t0, hi >> 24);
    }
    for &b in blocks.remainder() {
        crc = tab(t0, crc ^ u32::from(b)) ^ (crc >> 8);
    }
    crc
}

/// Software CRC32c, for the host and as a fallback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftCrc32c;

impl Crc32c for SoftCrc32c {
    #[inline]
    fn update(&self, crc: u32, data: &[u8]) -> u32 {
        crc32c_sw(crc, data)
    }
}

/// Computes the standard (finalised) CRC32c of `data`.
///
/// `crc32c(b"123456789") == 0xE306_9283`.
pub fn crc32c<C: Crc32c>(c: &C, data: &[u8]) -> u32 {
    !c.update(CRC_INIT, data)
}
