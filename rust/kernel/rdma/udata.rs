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

use super::{
    device::{
        Device,
        Driver, //
    },
    ucontext::Ucontext,
};
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

    /// Copies the user's request into an `R` (`ib_copy_validate_udata_in()`).
    ///
    /// The request must have at least `min_len` bytes (the size of the first version of the
    /// struct; 0 if the request is optional), else `EINVAL`. A shorter request is zero padded;
    /// a longer one is accepted if the bytes beyond `R` are zero, else `EOPNOTSUPP`.
    pub fn copy_in<R>(&self, min_len: usize) -> Result<R>
    where
        R: zerocopy::FromBytes + zerocopy::IntoBytes,
    {
        let mut req = R::new_zeroed();
        let bytes = req.as_mut_bytes();
        // SAFETY: By the type invariant the struct is valid; `bytes` is valid for writes of
        // `bytes.len()` bytes, and any bytes are a valid `R` (`FromBytes`).
        to_result(unsafe {
            bindings::_ib_copy_validate_udata_in(
                self.as_raw(),
                bytes.as_mut_ptr().cast(),
                bytes.len(),
                min_len,
            )
        })?;
        Ok(req)
    }

    /// Returns the user context of `dev` the command runs in.
    ///
    /// `None` while the context itself is being created (in
    /// [`Operations::alloc`](super::ucontext::Operations::alloc)): ib_core publishes a context
    /// only once it is initialised.
    pub fn ucontext<T: Driver>(&self, dev: &Device<T>) -> Option<&Ucontext<T>> {
        // SAFETY: By the type invariant the struct is valid, and it is the driver data of a
        // uverbs command, which runs under the device's disassociation SRCU as the helper
        // requires.
        let uctx = unsafe { bindings::rdma_udata_to_live_ucontext(self.as_raw()) };
        // SAFETY: `uctx` is NULL or the published, hence initialised, context of the command;
        // uverbs does not destroy it while a command of it runs (`hw_destroy_rwsem`), so it
        // outlives `self`.
        unsafe { Ucontext::<T>::peer(dev, uctx) }
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
