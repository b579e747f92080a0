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
    cell::Cell,
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
    /// Where the last copy ended ([`SkbData::copy_parts`]).
    cursor: Cell<Cursor>,
    _p: PhantomData<&'a bindings::sk_buff>,
}

/// The length of the array `_` points to.
fn array_len<T, const N: usize>(_: *const [T; N]) -> usize {
    N
}

/// A position in an skb's data ([`SkbData::copy_parts`]): `unit` (the skb or an skb of its
/// fragment list; null: none yet) holds its bytes from byte `start` of the skb on, and its
/// page fragment `frag` from byte `fstart` on.
#[derive(Clone, Copy)]
struct Cursor {
    unit: *mut bindings::sk_buff,
    start: u32,
    frag: u32,
    fstart: u32,
}

impl Cursor {
    /// The start of `skb`.
    ///
    /// # Safety
    ///
    /// `skb` is a valid `sk_buff`.
    unsafe fn first(skb: *mut bindings::sk_buff) -> Self {
        // SAFETY: Per the safety requirements.
        unsafe { Self::at(skb, 0) }
    }

    /// The start of `unit`, which holds bytes from byte `start` of its skb on.
    ///
    /// # Safety
    ///
    /// `unit` is a valid `sk_buff`.
    unsafe fn at(unit: *mut bindings::sk_buff, start: u32) -> Self {
        // SAFETY: Per the safety requirements.
        let head = unsafe { bindings::skb_headlen(unit) };
        Self {
            unit,
            start,
            frag: 0,
            fstart: start.saturating_add(head),
        }
    }
}

/// Copies `k` bytes from byte `at` of the page fragment `f` to `dst`, page by page (as
/// `skb_frag_foreach_page()`); false, with nothing copied, if it is not a page.
///
/// # Safety
///
/// `f` is a valid descriptor of a readable fragment of a valid skb, holding at least `at + k`
/// bytes; `dst` is valid for writes of `k` bytes and is not memory of the skb.
unsafe fn copy_frag(f: *const bindings::skb_frag_t, at: u32, dst: *mut u8, k: u32) -> bool {
    // SAFETY: Per the safety requirements.
    let first = unsafe { bindings::skb_frag_page(f) };
    if first.is_null() {
        return false;
    }
    let (mut at, mut k, mut done) = (at as usize, k as usize, 0usize);
    while k > 0 {
        let in_page = at % PAGE_SIZE;
        let c = k.min(PAGE_SIZE - in_page);
        // SAFETY: Byte `at` of the fragment's memory is in page `at / PAGE_SIZE` of it (a
        // compound page if it spans several), which the skb holds a reference on.
        let page = unsafe { first.add(at / PAGE_SIZE) };
        // SAFETY: A page of the fragment, see above.
        let va = unsafe { bindings::kmap_local_page(page) }.cast::<u8>();
        // SAFETY: `va` maps the whole page and `in_page + c <= PAGE_SIZE`; `dst` is valid for
        // `k` bytes from `done` on and does not overlap the page (caller).
        unsafe { core::ptr::copy_nonoverlapping(va.add(in_page), dst.add(done), c) };
        // SAFETY: `va` was mapped just above, and nothing mapped since is still mapped.
        unsafe { bindings::kunmap_local(va.cast()) };
        (at, k, done) = (at + c, k - c, done + c);
    }
    true
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
            cursor: Cell::new(Cursor {
                unit: core::ptr::null_mut(),
                start: 0,
                frag: 0,
                fstart: 0,
            }),
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
        // SAFETY: `[off, off + n)` is inside the skb (above) and `dst` is valid for `n` bytes
        // (caller).
        let done = unsafe { self.copy_parts(off as u32, dst, n as u32) };
        if done == n as u32 {
            return Ok(());
        }
        // SAFETY: The skb is valid (invariant) and holds `self.offset + self.len >= off + n`
        // bytes; `dst` is valid for `len` bytes (caller), so for the `n - done` after `done`.
        to_result(unsafe {
            bindings::skb_copy_bits(
                self.skb.as_ptr(),
                off + done as c_int,
                dst.add(done as usize).cast(),
                n - done as c_int,
            )
        })
    }

    /// Copies skb bytes `[off, off + n)` to `dst`, in order, as far as they lie in memory this
    /// can read: the linear parts and page fragments of the skb and of the skbs of its
    /// fragment list; returns how many it copied (`n`, or fewer for `skb_copy_bits()` to copy
    /// the rest: a nested fragment list, fragments not in host memory).
    ///
    /// `skb_copy_bits()` walks the skb from its start on every call. A read actor copies an
    /// skb in order, piece by piece (rsiw: the header of each FPDU to the stack, its payload
    /// page by page to its destination), and a GRO skb chains up to 64 KiB of segments as
    /// fragments or as a fragment list: every piece walked past half of them on average.
    /// This starts where the previous copy ended (`cursor`).
    ///
    /// # Safety
    ///
    /// `[off, off + n)` is inside the skb and `dst` is valid for writes of `n` bytes, not
    /// accessed through a Rust reference during the call.
    unsafe fn copy_parts(&self, off: u32, dst: *mut u8, n: u32) -> u32 {
        let top = self.skb.as_ptr();
        let end = off.saturating_add(n);
        let mut c = self.cursor.get();
        if c.unit.is_null() || off < c.start {
            // SAFETY: `top` is valid for `'a` (invariant).
            c = unsafe { Cursor::first(top) };
        }
        let mut pos = off;
        loop {
            let u = c.unit;
            // SAFETY: `u` is `top` or an skb of its fragment list, valid as long as `top` is.
            let (head, readable, nested, data) = unsafe {
                (
                    bindings::skb_headlen(u),
                    bindings::skb_frags_readable(u),
                    u != top && bindings::skb_has_frag_list(u),
                    bindings::skb_data(u),
                )
            };
            if !readable || nested {
                break;
            }
            let fstart = c.start.saturating_add(head);
            if pos < fstart {
                // In the linear part.
                let k = end.min(fstart) - pos;
                // SAFETY: The linear part holds `head` bytes at `data`, of which these `k`
                // start at `pos - c.start`; `dst` is valid for the `n` bytes from `off` and
                // is not skb memory (caller).
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        data.add((pos - c.start) as usize),
                        dst.add((pos - off) as usize),
                        k as usize,
                    )
                };
                pos += k;
                (c.frag, c.fstart) = (0, fstart);
            } else if pos < c.fstart {
                // Before the fragment the cursor is at: from the first.
                (c.frag, c.fstart) = (0, fstart);
            }
            // SAFETY: `u` is valid (above), and so is its shared info. Its fragments (count and
            // descriptors) do not change while the skb is queued and read; they are read
            // through raw pointers, as other fields of the shared info may change meanwhile.
            let sh = unsafe { bindings::skb_shinfo(u) };
            // SAFETY: As above.
            let frags = unsafe { core::ptr::addr_of!((*sh).frags) };
            // SAFETY: As above.
            let nr = u32::from(unsafe { (*sh).nr_frags }).min(array_len(frags) as u32);
            let frags = frags.cast::<bindings::skb_frag_t>();
            while pos < end && c.frag < nr {
                // SAFETY: `c.frag < nr`, inside the array (above).
                let f = unsafe { frags.add(c.frag as usize) };
                // SAFETY: `f` points to a fragment descriptor (above).
                let (flen, foff) = unsafe { ((*f).len, (*f).offset) };
                let fend = c.fstart.saturating_add(flen);
                if pos < fend {
                    // SAFETY: `f` is a descriptor of readable fragments (above): a page
                    // (compound if the fragment spans several), held by the skb.
                    if unsafe {
                        !copy_frag(
                            f,
                            foff + (pos - c.fstart),
                            dst.add((pos - off) as usize),
                            end.min(fend) - pos,
                        )
                    } {
                        return pos - off;
                    }
                    pos = end.min(fend);
                }
                if pos < end {
                    (c.frag, c.fstart) = (c.frag + 1, fend);
                }
            }
            self.cursor.set(c);
            if pos >= end {
                break;
            }
            // The next skb of the fragment list, which starts where this one's bytes end.
            let ustart = c.fstart;
            // SAFETY: `top` is valid, and so is its fragment list, of which `u` is a member
            // unless it is `top`.
            let next = unsafe {
                bindings::skb_walk_frags_next(top, if u == top { core::ptr::null_mut() } else { u })
            };
            if next.is_null() {
                break;
            }
            // SAFETY: A member of `top`'s fragment list.
            c = unsafe { Cursor::at(next, ustart) };
        }
        pos - off
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
