// SPDX-License-Identifier: GPL-2.0

//! Sending: the locked socket ([`SocketGuard`]) and the page fragments it sends.

use super::{
    read_sock,
    TcpSocket, //
};
use crate::{
    alloc::Flags,
    bindings,
    net::{
        skb::{
            PageFrag,
            SkbData, //
        },
        socket::SendFlags, //
    },
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

/// The maximum number of buffers in one [`TcpSocket::send`] or [`SocketGuard::send`] call.
pub const MAX_SEND_BUFS: usize = 8;

/// The maximum number of page fragments in one [`SocketGuard::send_pages`] or
/// [`SocketGuard::send_pages_copy`] call.
pub const MAX_SEND_PAGES: usize = 32;

impl TcpSocket {
    /// Locks the socket (`lock_sock()`) for operations that need the lock. May sleep.
    #[inline]
    pub fn lock(&self) -> SocketGuard<'_> {
        // SAFETY: `sk` is valid.
        unsafe { bindings::lock_sock(self.sk().as_ptr()) };
        // INVARIANT: The lock was just taken.
        SocketGuard {
            sk: self.sk(),
            _p: PhantomData,
        }
    }

    /// Sends the concatenation of `bufs`, copying it (`kernel_sendmsg()`).
    ///
    /// Returns the number of bytes queued, which with [`SendFlags::DONTWAIT`] can be fewer than
    /// the total, or `EAGAIN` if none fit. At most [`MAX_SEND_BUFS`] buffers (`EINVAL`).
    /// May sleep.
    pub fn send(&self, bufs: &[&[u8]], flags: SendFlags) -> Result<usize> {
        let (mut kv, n, total) = kvecs::<MAX_SEND_BUFS>(bufs)?;
        // SAFETY: `sock` is valid; `kv[..n]` describe `total` readable bytes borrowed for the
        // call; `kernel_sendmsg` only reads them.
        let ret = unsafe {
            bindings::kernel_sendmsg_kvec(
                self.sock.as_ptr(),
                kv.as_mut_ptr(),
                n,
                total,
                flags.as_raw(),
            )
        };
        if ret < 0 {
            Err(Error::from_errno(ret))
        } else {
            Ok(ret as usize)
        }
    }
}

pub(super) fn kvecs<const N: usize>(bufs: &[&[u8]]) -> Result<([bindings::kvec; N], usize, usize)> {
    if bufs.len() > N || N > MAX_SEND_BUFS {
        return Err(EINVAL);
    }
    let mut kv = [bindings::kvec::default(); N];
    let mut total = 0usize;
    for (k, b) in kv.iter_mut().zip(bufs) {
        k.iov_base = b.as_ptr().cast_mut().cast();
        k.iov_len = b.len();
        total = total.checked_add(b.len()).ok_or(EINVAL)?;
    }
    if total > c_int::MAX as usize {
        return Err(EINVAL);
    }
    Ok((kv, bufs.len(), total))
}

/// A page whose bytes are assembled in place and sent with a copy
/// ([`SocketGuard::send_pages_copy`]), then rewritten for the next send: e.g. protocol headers
/// and trailers between payload fragments of other pages, in one `sendmsg`.
///
/// Its fragments cannot be sent by reference: [`SocketGuard::send_pages`] refuses them, so TCP
/// never reads the page after the call that copied from it.
///
/// # Invariants
///
/// The page is zeroed when allocated. No reference to it is held outside `self` and the
/// [`PageFrag`]s borrowed from it; those are only ever copied from, during a
/// [`SocketGuard::send_pages_copy`] call; or the page belongs to a
/// [`ZcNotif`](super::ZcNotif), which TCP may read it through until the page is freed with the
/// notification, and which never lends it mutably.
pub struct StagingPage {
    page: Page,
}

impl StagingPage {
    /// Allocates a zeroed page with `gfp` (e.g. [`GFP_KERNEL`], or [`GFP_NOIO`] on the path
    /// block IO takes; [`__GFP_ZERO`] is added). May sleep if `gfp` allows it.
    pub fn new(gfp: Flags) -> Result<Self> {
        // INVARIANT: Zeroed at allocation; nothing else refers to the new page.
        Ok(Self {
            page: Page::alloc_page(gfp | __GFP_ZERO)?,
        })
    }

    /// Calls `f` with bytes `[offset, offset + len)` of the page, to read or write them;
    /// `EINVAL` if they do not fit in the page. Does not sleep (if `f` does not).
    pub fn with_slice_mut<T>(
        &mut self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<T> {
        if offset.checked_add(len).ok_or(EINVAL)? > PAGE_SIZE {
            return Err(EINVAL);
        }
        // SAFETY: We own the page, which stays allocated while `self` is borrowed.
        let base = unsafe { bindings::kmap_local_page(self.page.as_ptr()) }.cast::<u8>();
        // SAFETY: `base` maps the whole page and `offset + len <= PAGE_SIZE` (checked above).
        // The bytes are initialized (zeroed at allocation). Nobody else accesses them while
        // the slice lives: we borrow `self` mutably, so no `PageFrag` of the page is alive,
        // and TCP only read them during earlier `send_pages_copy` calls (type invariant).
        let slice = unsafe { core::slice::from_raw_parts_mut(base.add(offset), len) };
        let ret = f(slice);
        // SAFETY: `base` was mapped just above; mappings made by `f` were undone before it
        // returned (`kmap_local` nesting), so this one is the innermost.
        unsafe { bindings::kunmap_local(base.cast::<c_void>()) };
        Ok(ret)
    }

    /// Whether `f` lies in this page.
    pub(crate) fn same_page(&self, f: &PageFrag<'_>) -> bool {
        f.page_ptr() == self.page.as_ptr()
    }

    /// Describes bytes `[offset, offset + len)` of the page, to send them with
    /// [`SocketGuard::send_pages_copy`]; `EINVAL` if they do not fit in the page.
    #[inline]
    pub fn frag(&self, offset: usize, len: usize) -> Result<PageFrag<'_>> {
        // The fragment lies in a `StagingPage`: it may only be copied from.
        Ok(PageFrag::new(&self.page, offset, len)?.copy_only())
    }
}

/// A page for small data sent by reference ([`SocketGuard::send_pages`]), e.g. protocol headers
/// between payload pages sent by reference, written append-only: bytes once appended are never
/// changed, so TCP may keep (re)transmitting them after the call. Dropping it releases only our
/// reference on the page; TCP keeps its own for what it queued.
///
/// # Invariants
///
/// `used <= PAGE_SIZE`; bytes `[0, used)` of `page` are never written again.
pub struct AppendPage {
    page: Page,
    used: usize,
}

impl AppendPage {
    /// Allocates an empty page. May sleep.
    pub fn new() -> Result<Self> {
        // INVARIANT: Nothing is used yet.
        Ok(Self {
            page: Page::alloc_page(GFP_KERNEL)?,
            used: 0,
        })
    }

    /// Returns the number of bytes appended.
    pub fn len(&self) -> usize {
        self.used
    }

    /// Returns `true` if nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Returns the number of bytes that can still be appended.
    pub fn room(&self) -> usize {
        PAGE_SIZE - self.used
    }

    /// Appends `data` and returns its offset in the page; `ENOSPC` if it does not fit.
    pub fn append(&mut self, data: &[u8]) -> Result<usize> {
        let off = self.used;
        if data.len() > self.room() {
            return Err(ENOSPC);
        }
        // SAFETY: `data` is valid for reading `data.len()` bytes. The bytes written lie beyond
        // `used`: no fragment handed out by `frag()` covers them, so TCP does not read them.
        unsafe { self.page.write_raw(data.as_ptr(), off, data.len())? };
        // INVARIANT: `off + data.len() <= PAGE_SIZE` (checked above).
        self.used = off + data.len();
        Ok(off)
    }

    /// Describes appended bytes `[offset, offset + len)` for sending; `EINVAL` if they were not
    /// appended.
    #[inline]
    pub fn frag(&self, offset: usize, len: usize) -> Result<PageFrag<'_>> {
        if offset.checked_add(len).ok_or(EINVAL)? > self.used {
            return Err(EINVAL);
        }
        PageFrag::new(&self.page, offset, len)
    }
}

/// A locked TCP socket (`lock_sock()`), unlocked on drop (`release_sock()`, which also
/// processes the packets that arrived meanwhile and may run callbacks).
///
/// # Invariants
///
/// The socket lock of `sk` is held by this guard.
pub struct SocketGuard<'a> {
    sk: NonNull<bindings::sock>,
    _p: PhantomData<&'a TcpSocket>,
}

impl SocketGuard<'_> {
    /// Reads from the receive queue with `tcp_read_sock()`; see [`DataReadySock::read_sock`].
    /// Returns `ENOTCONN` on a listening socket. Process context, socket locked.
    pub fn read_sock<F>(&mut self, actor: F) -> Result<usize>
    where
        F: FnMut(&SkbData<'_>) -> Result<usize>,
    {
        // SAFETY: The socket is locked (type invariant); `tcp_read_sock` itself refuses
        // listeners.
        unsafe { read_sock(self.sk, actor) }
    }

    fn sent(ret: c_int) -> Result<usize> {
        if ret < 0 {
            Err(Error::from_errno(ret))
        } else {
            Ok(ret as usize)
        }
    }

    /// Sends the concatenation of `bufs`, copying it (`tcp_sendmsg_locked()`); see
    /// [`TcpSocket::send`]. Socket locked; blocks unless [`SendFlags::DONTWAIT`] is given.
    pub fn send(&mut self, bufs: &[&[u8]], flags: SendFlags) -> Result<usize> {
        // Most calls send one or two buffers (a small message): an array sized for them saves
        // initialising the large one on every send.
        if bufs.len() <= 2 {
            self.send_n::<2>(bufs, flags)
        } else {
            self.send_n::<MAX_SEND_BUFS>(bufs, flags)
        }
    }

    fn send_n<const N: usize>(&mut self, bufs: &[&[u8]], flags: SendFlags) -> Result<usize> {
        let (kv, n, total) = kvecs::<N>(bufs)?;
        // SAFETY: The socket is locked (type invariant) and is a TCP socket; `kv[..n]` lives
        // across the call and describes `total` readable bytes, which TCP only reads.
        Self::sent(unsafe {
            bindings::tcp_sendmsg_kvec_locked(
                self.sk.as_ptr(),
                kv.as_ptr(),
                n,
                total,
                flags.as_raw(),
            )
        })
    }

    /// Sends page fragments without copying (`MSG_SPLICE_PAGES`).
    ///
    /// TCP takes a reference on each page and transmits (and retransmits) from it until the
    /// peer acknowledges the data, so the pages must not be modified until then if the bytes
    /// on the wire matter; their lifetime is safe either way. Returns the number of bytes queued
    /// (possibly fewer than asked with [`SendFlags::DONTWAIT`]), or `EAGAIN`. At most
    /// [`MAX_SEND_PAGES`] fragments, none of a [`StagingPage`] (`EINVAL`). Socket locked;
    /// blocks unless [`SendFlags::DONTWAIT`].
    pub fn send_pages(&mut self, frags: &[PageFrag<'_>], flags: SendFlags) -> Result<usize> {
        if frags.iter().any(|f| !f.may_splice()) {
            return Err(EINVAL);
        }
        self.send_bvec(frags, flags.as_raw() | bindings::MSG_SPLICE_PAGES)
    }

    /// Sends the bytes of page fragments, copying them into the socket's buffers during the
    /// call (`sendmsg` over a `bio_vec` iterator, without `MSG_SPLICE_PAGES`).
    ///
    /// TCP keeps no reference on the pages: once the call returned, the bytes it queued are
    /// TCP's own, and the pages may change or go. This gathers headers and payload from
    /// different pages into one send at the cost of one copy, as `send()` on a user socket.
    /// Returns the number of bytes queued (possibly fewer than asked with
    /// [`SendFlags::DONTWAIT`]), or `EAGAIN`. At most [`MAX_SEND_PAGES`] fragments (`EINVAL`).
    /// Socket locked; blocks unless [`SendFlags::DONTWAIT`].
    pub fn send_pages_copy(&mut self, frags: &[PageFrag<'_>], flags: SendFlags) -> Result<usize> {
        self.send_bvec(frags, flags.as_raw())
    }

    fn send_bvec(&mut self, frags: &[PageFrag<'_>], flags: u32) -> Result<usize> {
        self.send_bvec_ubuf(frags, flags, core::ptr::null_mut())
    }

    /// Sends `frags` with `flags` and, if not null, `ubuf` as `msg->msg_ubuf` (the caller holds
    /// a reference on it for the call, and passes `MSG_ZEROCOPY`).
    pub(super) fn send_bvec_ubuf(
        &mut self,
        frags: &[PageFrag<'_>],
        flags: u32,
        ubuf: *mut bindings::ubuf_info,
    ) -> Result<usize> {
        // Most calls carry one or two fragments (a small message): an array sized for them
        // saves initialising the large one on every send.
        if frags.len() <= 4 {
            self.send_bvec_n::<4>(frags, flags, ubuf)
        } else {
            self.send_bvec_n::<MAX_SEND_PAGES>(frags, flags, ubuf)
        }
    }

    fn send_bvec_n<const N: usize>(
        &mut self,
        frags: &[PageFrag<'_>],
        flags: u32,
        ubuf: *mut bindings::ubuf_info,
    ) -> Result<usize> {
        if frags.len() > N {
            return Err(EINVAL);
        }
        let mut bv = [bindings::bio_vec::default(); N];
        let mut total = 0usize;
        for (b, f) in bv.iter_mut().zip(frags) {
            *b = f.as_bio_vec();
            total += f.len(); // At most MAX_SEND_PAGES * PAGE_SIZE.
        }
        // SAFETY: The socket is locked (type invariant) and is a TCP socket; `bv[..frags.len()]`
        // lives across the call and describes `total` bytes of pages that stay allocated for the
        // call (`PageFrag` invariant). With `MSG_SPLICE_PAGES` TCP takes its own page references
        // for what it queues, and `StagingPage` fragments are not spliced (the callers check);
        // with `MSG_ZEROCOPY` and a `ubuf` (live for the call, caller), it takes page references
        // too and each skb a reference on `ubuf`, and `StagingPage` fragments are only of pages
        // the notification owns (`send_pages_zc`); without either, TCP copies the bytes during
        // the call.
        Self::sent(unsafe {
            bindings::tcp_sendmsg_bvec_locked(
                self.sk.as_ptr(),
                bv.as_ptr(),
                frags.len(),
                total,
                flags,
                ubuf,
            )
        })
    }
}

impl Drop for SocketGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The lock is held (type invariant).
        unsafe { bindings::release_sock(self.sk.as_ptr()) };
    }
}
