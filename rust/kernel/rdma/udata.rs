// SPDX-License-Identifier: GPL-2.0

//! Driver-private data of uverbs commands (`struct ib_udata`).
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h) and
//! [`include/rdma/uverbs_ioctl.h`](srctree/include/rdma/uverbs_ioctl.h).
//!
//! A uverbs command carries an input buffer (the provider library's request) and an output
//! buffer (the driver's response), both in user memory. The helpers follow ib_core's
//! forward/backward compatibility rules: responses are truncated to the user's buffer or zero
//! padded, and unknown non-zero input is rejected.

use crate::{
    bindings,
    error::to_result,
    prelude::*,
    types::Opaque, //
};

/// The driver-private input and output buffers of a uverbs command.
///
/// # Invariants
///
/// A `&Udata` is only handed out while the `struct ib_udata` is valid (during the callback that
/// received it).
#[repr(transparent)]
pub struct Udata(Opaque<bindings::ib_udata>);

impl Udata {
    /// Creates a reference from a pointer to a `struct ib_udata`.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::ib_udata) -> &'a Self {
        // SAFETY: `Udata` is a transparent wrapper of `ib_udata`; valid per the safety
        // requirements.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns a raw pointer to the `struct ib_udata`.
    pub fn as_raw(&self) -> *mut bindings::ib_udata {
        self.0.get()
    }

    /// Returns the length of the user's input buffer.
    pub fn inlen(&self) -> usize {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).inlen }
    }

    /// Returns the length of the user's output buffer.
    pub fn outlen(&self) -> usize {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).outlen }
    }

    /// Checks that the input buffer is empty or all zeros (`ib_is_udata_in_empty()`); fails with
    /// `EOPNOTSUPP` otherwise.
    pub fn check_in_empty(&self) -> Result {
        // SAFETY: By the type invariant the struct is valid.
        to_result(unsafe { bindings::ib_is_udata_in_empty(self.as_raw()) })
    }

    /// Checks that there is no input and zero fills the output buffer (`ib_no_udata_io()`), for
    /// commands that exchange no driver data.
    pub fn check_no_io(&self) -> Result {
        // SAFETY: By the type invariant the struct is valid.
        to_result(unsafe { bindings::ib_no_udata_io(self.as_raw()) })
    }

    /// Copies `resp` to the user's output buffer, truncating it to the buffer or zero padding
    /// the buffer (`ib_respond_udata()`).
    pub fn respond<R>(&self, resp: &R) -> Result
    where
        R: zerocopy::IntoBytes + zerocopy::Immutable,
    {
        let bytes = resp.as_bytes();
        // SAFETY: By the type invariant the struct is valid; `bytes` is valid for reads of
        // `bytes.len()` bytes.
        to_result(unsafe {
            bindings::_ib_respond_udata(self.as_raw(), bytes.as_ptr().cast(), bytes.len())
        })
    }
}
