// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's cryptographically secure generator.
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h).

use crate::bindings;

/// Returns 32 random bits (`get_random_u32()`). Any context.
pub fn get_u32() -> u32 {
    // SAFETY: `get_random_u32()` may be called from any context.
    unsafe { bindings::get_random_u32() }
}
