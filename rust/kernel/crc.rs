// SPDX-License-Identifier: GPL-2.0

//! CRC functions.
//!
//! C header: [`include/linux/crc32.h`](srctree/include/linux/crc32.h).

use crate::bindings;

/// Updates a CRC-32C (Castagnoli) register with `data`, using the kernel's implementation
/// (accelerated where the architecture offers it).
///
/// `crc` is the raw register: no inversion is done on input or output, exactly as the C
/// `crc32c()` does. Callers that need the standard CRC-32C start from `!0` and invert the
/// result.
///
/// # Examples
///
/// ```
/// use kernel::crc::crc32c;
///
/// // The check value of CRC-32C.
/// assert_eq!(!crc32c(!0, b"123456789"), 0xe306_9283);
/// // Updating in pieces gives the same register.
/// assert_eq!(crc32c(crc32c(!0, b"1234"), b"56789"), crc32c(!0, b"123456789"));
/// ```
#[inline]
pub fn crc32c(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is valid for reads of `data.len()` bytes, and `crc32c()` reads no more.
    unsafe { bindings::crc32c(crc, data.as_ptr().cast(), data.len()) }
}
