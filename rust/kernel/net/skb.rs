// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`) as seen by readers of a socket's receive queue.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h).
//!
//! Receivers do not own or keep socket buffers: a protocol reading a socket hands each run of
//! received bytes to a closure as an [`SkbData`], a borrowed range of one `sk_buff`, which the
//! closure copies out ([`SkbData::copy_to`]), places straight into its destination
//! ([`SkbData::copy_to_raw`]) or checksums ([`SkbData::crc32c`]) without a staging copy.
//!
//! Senders describe the bytes to send as [`PageFrag`]s, the page fragments an skb is made of.

use crate::{
    bindings,
    error::to_result,
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*, //
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

/// A contiguous range of received bytes inside one `sk_buff`, passed to a read actor.
///
/// # Invariants
///
/// `skb` is a valid `sk_buff` for `'a` holding at least `offset + len` bytes.
pub struct SkbData<'a> {
    skb: NonNull<bindings::sk_buff>,
    offset: u32,
    len: usize,
    _p: PhantomData<&'a bindings::sk_buff>,
}

impl<'a> SkbData<'a> {
    /// Creates the range `[offset, offset + len)` of `skb`.
    ///
    /// # Safety
    ///
    /// `skb` is a valid `sk_buff` for `'a` that holds at least `offset + len` bytes.
    pub(crate) unsafe fn from_raw(
        skb: NonNull<bindings::sk_buff>,
        offset: u32,
        len: usize,
    ) -> Self {
        // INVARIANT: Per the safety requirements.
        Self {
            skb,
            offset,
            len,
            _p: PhantomData,
        }
    }

    /// Returns the number of bytes available.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns true if no bytes are available (TCP never passes an empty range).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns `EINVAL` unless bytes `[offset, offset + len)` are inside this range.
    pub fn check_range(&self, offset: usize, len: usize) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Copies `dst.len()` bytes starting at `offset` into `dst` (`skb_copy_bits()`).
    ///
    /// Returns `EINVAL` if the range is out of bounds. Any context.
    #[inline]
    pub fn copy_to(&self, offset: usize, dst: &mut [u8]) -> Result {
        // SAFETY: `dst` is valid for writes of `dst.len()` bytes and is not aliased.
        unsafe { self.copy_to_raw(offset, dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `len` bytes starting at `offset` to `dst`.
    ///
    /// This is for destinations that cannot be a `&mut [u8]`, such as pages mapped from user
    /// memory that user space may change concurrently. Returns `EINVAL` if the range is out of
    /// bounds. Any context.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `len` bytes, and no Rust reference may be used to access
    /// that memory during the call.
    pub unsafe fn copy_to_raw(&self, offset: usize, dst: *mut u8, len: usize) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        // `self.offset + self.len` fits in the skb's `u32` length (invariant), so these fit.
        let off = c_int::try_from(self.offset as usize + offset).map_err(|_| EINVAL)?;
        let n = c_int::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: The skb is valid (invariant) and holds `self.offset + self.len >= off + n`
        // bytes; `dst` is valid for `len` bytes (caller).
        to_result(unsafe { bindings::skb_copy_bits(self.skb.as_ptr(), off, dst.cast(), n) })
    }

    /// Updates the CRC-32C register `crc` over the `len` bytes starting at `offset`
    /// (`skb_crc32c()`), in the convention of [`crate::crc::crc32c`]: no inversion on input or
    /// output, so calls chain over consecutive ranges.
    ///
    /// Returns `EINVAL` if the range is out of bounds. Any context.
    #[cfg(CONFIG_NET_CRC32C)]
    pub fn crc32c(&self, offset: usize, len: usize, crc: u32) -> Result<u32> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        if len == 0 {
            return Ok(crc);
        }
        // `self.offset + self.len` fits in the skb's `u32` length (invariant), so these fit.
        let off = c_int::try_from(self.offset as usize + offset).map_err(|_| EINVAL)?;
        let n = c_int::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: The skb is valid (invariant) and holds `self.offset + self.len >= off + n`
        // bytes, so `skb_crc32c()` stays within it.
        Ok(unsafe { bindings::skb_crc32c(self.skb.as_ptr(), off, n, crc) })
    }
}

/// A fragment of a page (as an skb carries them, `skb_frag_t`), to send by reference
/// ([`SocketGuard::send_pages`]) or copied ([`SocketGuard::send_pages_copy`]).
///
/// [`SocketGuard::send_pages`]: super::tcp::SocketGuard::send_pages
/// [`SocketGuard::send_pages_copy`]: super::tcp::SocketGuard::send_pages_copy
///
/// # Invariants
///
/// `page` is a page that stays allocated for `'a`, and `offset + len <= PAGE_SIZE`. If
/// `splice` is false, the fragment lies in a page whose bytes may change after the send that
/// copies them ([`StagingPage`](super::tcp::StagingPage)): it must not be sent by reference.
#[derive(Clone, Copy)]
pub struct PageFrag<'a> {
    page: NonNull<bindings::page>,
    offset: u32,
    len: u32,
    splice: bool,
    _p: PhantomData<&'a Page>,
}

impl<'a> PageFrag<'a> {
    /// Describes `len` bytes of `page` at `offset`; `EINVAL` if they do not fit in the page.
    #[inline]
    pub fn new(page: &'a Page, offset: usize, len: usize) -> Result<Self> {
        // SAFETY: `page` is allocated for `'a`.
        unsafe { Self::from_raw(NonNull::new(page.as_ptr()).ok_or(EINVAL)?, offset, len) }
    }

    /// Describes `len` bytes at `offset` of a page owned by another abstraction (e.g. pinned user
    /// memory). `EINVAL` if they do not fit in the page.
    ///
    /// # Safety
    ///
    /// The caller holds a reference on `page` for `'a`, and it is not a slab page.
    #[inline]
    pub unsafe fn from_raw(
        page: NonNull<bindings::page>,
        offset: usize,
        len: usize,
    ) -> Result<Self> {
        if offset.checked_add(len).ok_or(EINVAL)? > PAGE_SIZE {
            return Err(EINVAL);
        }
        // INVARIANT: Checked above; the page stays allocated (caller).
        Ok(Self {
            page,
            offset: offset as u32,
            len: len as u32,
            splice: true,
            _p: PhantomData,
        })
    }

    /// Returns the length of the fragment.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Returns `true` if the fragment is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Marks the fragment as one that must not be sent by reference (its page is rewritten after
    /// the send that copies it).
    pub(crate) fn copy_only(mut self) -> Self {
        self.splice = false;
        self
    }

    /// Returns whether the fragment may be sent by reference (`MSG_SPLICE_PAGES`).
    pub(crate) fn may_splice(&self) -> bool {
        self.splice
    }

    /// Returns the fragment's page.
    pub(crate) fn page_ptr(&self) -> *mut bindings::page {
        self.page.as_ptr()
    }

    /// Returns the fragment as a `struct bio_vec`.
    pub(crate) fn as_bio_vec(&self) -> bindings::bio_vec {
        bindings::bio_vec {
            bv_page: self.page.as_ptr(),
            bv_offset: self.offset,
            bv_len: self.len,
        }
    }
}
