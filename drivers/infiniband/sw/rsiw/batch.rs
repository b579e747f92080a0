// SPDX-License-Identifier: GPL-2.0

//! The TX batch: FPDUs handed to TCP together, as a list of page fragments.
//!
//! Headers, trailers, inline data and the payload that has to be copied (kernel memory regions,
//! small pieces, and all payload when MPA CRC is on, which is computed over the copy) are
//! assembled in staging pages, byte after byte. Payload in pinned user memory is referenced in
//! place, with a page reference per piece. The batch goes to TCP with `sendmsg` over a `bio_vec`
//! iterator, [`MAX_SEND_PAGES`] fragments per call, without `MSG_SPLICE_PAGES`: TCP copies every
//! byte during the call. User payload so takes one copy on its way to the wire, as with `send()`
//! on a TCP socket, instead of two (into a staging buffer, then into the socket), and a work
//! request whose last byte TCP took may complete at once, since TCP holds its own copy.
//!
//! Staging pages are allocated as the batch first needs them, up to the room it was created
//! with: a connection that only ever sends small messages holds one page, not the 128 KiB a
//! batch of the largest FPDUs needs. Pages beyond the first that stayed unused for
//! [`SHRINK_AFTER`] batches in a row are freed again. Staging runs in process context (the
//! TX engine holds a mutex and the socket lock).
//!
//! A batch with enough payload in user memory may go by reference instead
//! ([`Batch::start_zc`]): TCP then references the user pages and the staging pages (which move
//! into the notification, so they are never rewritten while TCP may read them), and reports when
//! it let go of them ([`ZcNotif`]); what the batch completes must wait for that.
//!
//! Storage ULPs (NVMe-oF, NFS, rnbd) send over the connection from the memory reclaim path, so
//! the batch grows with `GFP_NOIO` (reclaim must not start IO that may need this connection)
//! and `__GFP_NORETRY` (nor loop in reclaim waiting for it), without a warning. The growth is
//! an optimisation: when it fails, the batch reports it ([`Batch::take_nomem`]) and the TX
//! engine sends what the batch holds first, then cuts the FPDU to the pages the batch already
//! has ([`Batch::held`], at least the first, allocated with the connection): the send is held
//! back, never failed, and needs no allocation to go on.

use crate::tx::ZcTrack;
use kernel::{
    net::{
        skb::PageFrag,
        socket::SendFlags,
        tcp::{
            SocketGuard,
            StagingPage,
            ZcNotif,
            MAX_SEND_PAGES, //
        },
    },
    page::PAGE_SIZE,
    prelude::*,
    rdma::umem::UmemPageRef,
};

/// Fragments a batch may hold.
pub(crate) const MAX_SEGS: usize = 320;

/// Batches in a row that used at most one staging page, after which the others are freed.
const SHRINK_AFTER: u32 = 256;

/// A fragment of the batch.
enum Seg {
    /// Bytes `[off, off + len)` of staging page `page`.
    Stage { page: usize, off: usize, len: usize },
    /// Bytes `[off, off + len)` of a page of user memory.
    User {
        page: UmemPageRef,
        off: usize,
        len: usize,
    },
}

impl Seg {
    fn len(&self) -> usize {
        match self {
            Seg::Stage { len, .. } | Seg::User { len, .. } => *len,
        }
    }
}

/// A position in the batch to go back to ([`Batch::rollback`]).
#[derive(Clone, Copy)]
pub(crate) struct Mark {
    segs: usize,
    last_len: usize,
    sp: usize,
    so: usize,
    len: usize,
    user: usize,
}

/// The FPDUs of a batch.
///
/// Bytes `[0, len)` are queued in `segs`, in wire order; `[0, sent)` of them are with TCP.
pub(crate) struct Batch {
    /// The staging pages allocated so far, at most `max_pages`.
    stage: KVec<StagingPage>,
    max_pages: usize,
    /// Batches in a row that used only the first staging page.
    small: u32,
    /// A staging page could not be allocated since [`Batch::take_nomem`] was last called.
    nomem: bool,
    /// The batch cannot grow, as if every allocation failed (`fault_tx_nomem`, testing only).
    no_grow: bool,
    /// A growth was refused for `no_grow` already (it is reported once).
    faulted: bool,
    /// The next free staging byte: offset `so` of page `sp`.
    sp: usize,
    so: usize,
    segs: KVec<Seg>,
    len: usize,
    sent: usize,
    /// `sent` as a position in `segs`: byte `soff` of segment `si`.
    si: usize,
    soff: usize,
    /// Bytes of user memory among the `len`.
    user: usize,
    /// The batch goes by reference: the notification, which holds the staging pages its
    /// fragments lie in.
    zc: Option<ZcNotif<ZcTrack>>,
}

impl Batch {
    /// An empty batch that can stage `stage_bytes` bytes, with one staging page allocated
    /// (the others come when first used). May sleep.
    pub(crate) fn new(stage_bytes: usize) -> Result<Self> {
        let max_pages = stage_bytes.div_ceil(PAGE_SIZE).max(1);
        let mut stage = KVec::with_capacity(max_pages, GFP_KERNEL)?;
        stage.push(StagingPage::new(GFP_KERNEL)?, GFP_KERNEL)?;
        Ok(Self {
            stage,
            max_pages,
            small: 0,
            nomem: false,
            no_grow: crate::module_parameters::fault_tx_nomem.value(),
            faulted: false,
            sp: 0,
            so: 0,
            segs: KVec::with_capacity(MAX_SEGS, GFP_KERNEL)?,
            len: 0,
            sent: 0,
            si: 0,
            soff: 0,
            user: 0,
            zc: None,
        })
    }

    /// Returns the number of bytes of user memory queued (which could go by reference).
    pub(crate) fn user_bytes(&self) -> usize {
        self.user
    }

    /// Whether the batch goes by reference ([`Batch::start_zc`]).
    pub(crate) fn is_zc(&self) -> bool {
        self.zc.is_some()
    }

    /// Sends the batch by reference from now on, with the notification `make` creates, which
    /// takes the staging pages (TCP may read them until it is released; the batch continues
    /// with a new page). Only before any of it was sent. Returns whether it did: not
    /// if a page for the next batch's staging, or the notification, could not be allocated (the
    /// batch is then sent by copy, as always).
    pub(crate) fn start_zc(&mut self, make: impl FnOnce() -> Result<ZcNotif<ZcTrack>>) -> bool {
        if self.sent > 0 || self.zc.is_some() {
            return false;
        }
        let gfp = GFP_NOIO | __GFP_NORETRY | __GFP_NOWARN;
        // The next batch needs its first page without an allocation (see the module's
        // documentation): it gets it now, or the batch is copied.
        let (Ok(first), Ok(mut next), Ok(mut n)) = (
            StagingPage::new(gfp),
            KVec::with_capacity(self.max_pages, gfp),
            make(),
        ) else {
            return false;
        };
        if next.push_within_capacity(first).is_err() {
            return false;
        }
        let used = core::mem::replace(&mut self.stage, next);
        if let Err(used) = n.hold(used) {
            // A new notification holds no pages: cannot happen. Copied, as always.
            self.stage = used;
            return false;
        }
        self.zc = Some(n);
        true
    }

    /// Returns the number of bytes queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Returns the number of bytes TCP took.
    pub(crate) fn sent(&self) -> usize {
        self.sent
    }

    /// Returns the number of staging bytes the batch holds pages for (at least one page): an
    /// FPDU of at most this many bytes fits an empty batch without an allocation.
    pub(crate) fn held(&self) -> usize {
        self.stage.len().max(1).saturating_mul(PAGE_SIZE)
    }

    /// Returns whether a staging page could not be allocated since the last call (the last
    /// staging call then failed with `ENOMEM`), and forgets it.
    pub(crate) fn take_nomem(&mut self) -> bool {
        core::mem::replace(&mut self.nomem, false)
    }

    /// Returns the number of fragments that can still be added.
    pub(crate) fn seg_room(&self) -> usize {
        MAX_SEGS.saturating_sub(self.segs.len())
    }

    /// Empties the batch, dropping its page references. Frees the staging pages beyond the
    /// first once they were not needed for [`SHRINK_AFTER`] batches.
    pub(crate) fn clear(&mut self) {
        if self.sp == 0 && self.stage.len() > 1 {
            self.small = self.small.saturating_add(1);
            if self.small >= SHRINK_AFTER {
                self.stage.truncate(1);
                self.small = 0;
            }
        } else {
            self.small = 0;
        }
        self.segs.clear();
        self.nomem = false;
        self.sp = 0;
        self.so = 0;
        self.len = 0;
        self.sent = 0;
        self.si = 0;
        self.soff = 0;
        self.user = 0;
        // Our reference on the notification: TCP keeps its own while it needs the pages.
        self.zc = None;
    }

    /// The current end of the batch, to [`Batch::rollback`] to.
    pub(crate) fn mark(&self) -> Mark {
        Mark {
            segs: self.segs.len(),
            last_len: self.segs.last().map_or(0, Seg::len),
            sp: self.sp,
            so: self.so,
            len: self.len,
            user: self.user,
        }
    }

    /// Drops what was added since `m` (an FPDU that failed half-way). Nothing of it was sent.
    pub(crate) fn rollback(&mut self, m: Mark) {
        self.segs.truncate(m.segs);
        if let Some(Seg::Stage { len, .. } | Seg::User { len, .. }) = self.segs.last_mut() {
            *len = m.last_len;
        }
        self.sp = m.sp;
        self.so = m.so;
        self.len = m.len;
        self.user = m.user;
    }

    fn add(&mut self, seg: Seg) -> Result {
        let n = seg.len();
        if let (
            Seg::Stage { page, off, len },
            Some(Seg::Stage {
                page: lp,
                off: lo,
                len: ll,
            }),
        ) = (&seg, self.segs.last_mut())
        {
            if *lp == *page && lo.saturating_add(*ll) == *off {
                *ll = ll.saturating_add(*len);
                self.len = self.len.saturating_add(n);
                return Ok(());
            }
        }
        // No allocation: this may run under the RCU read lock (`add_user`).
        self.segs.push_within_capacity(seg).map_err(|_| ENOSPC)?;
        self.len = self.len.saturating_add(n);
        Ok(())
    }

    /// Appends `n` staged bytes, which `f(chunk, at)` writes chunk by chunk (`at`: the offset
    /// of `chunk` in the `n` bytes; a chunk does not cross a page). `ENOSPC` if they do not fit.
    pub(crate) fn stage_with(
        &mut self,
        n: usize,
        mut f: impl FnMut(&mut [u8], usize) -> Result,
    ) -> Result {
        let mut at = 0usize;
        while at < n {
            if self.so >= PAGE_SIZE {
                self.sp = self.sp.saturating_add(1);
                self.so = 0;
            }
            let chunk = (n - at).min(PAGE_SIZE - self.so);
            self.grow(self.sp)?;
            let page = self.stage.get_mut(self.sp).ok_or(ENOSPC)?;
            page.with_slice_mut(self.so, chunk, |s| f(s, at))??;
            self.add(Seg::Stage {
                page: self.sp,
                off: self.so,
                len: chunk,
            })?;
            self.so += chunk;
            at += chunk;
        }
        Ok(())
    }

    /// Appends `n` staged bytes that `f` writes in one piece, in the current staging page or at
    /// the start of the next. Returns `Ok(false)`, with nothing added, if they fit in neither.
    pub(crate) fn stage_whole(
        &mut self,
        n: usize,
        f: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result<bool> {
        let (sp, so) = if self.so.saturating_add(n) <= PAGE_SIZE {
            (self.sp, self.so)
        } else {
            (self.sp.saturating_add(1), 0)
        };
        if n > PAGE_SIZE || sp >= self.max_pages {
            return Ok(false);
        }
        self.grow(sp)?;
        let page = self.stage.get_mut(sp).ok_or(ENOSPC)?;
        page.with_slice_mut(so, n, f)??;
        self.add(Seg::Stage {
            page: sp,
            off: so,
            len: n,
        })?;
        self.sp = sp;
        self.so = so + n;
        Ok(true)
    }

    /// Allocates the staging pages up to page `i` if needed: `ENOSPC` at or beyond
    /// `max_pages`, `ENOMEM` (and [`Batch::take_nomem`] tells) if an allocation fails. Never
    /// waits for IO (see the module's documentation).
    #[inline]
    fn grow(&mut self, i: usize) -> Result {
        // Page `i` is there (then `i < max_pages`): every header and trailer but a batch's
        // first few.
        if i < self.stage.len() {
            return Ok(());
        }
        self.grow_pages(i)
    }

    #[inline(never)]
    fn grow_pages(&mut self, i: usize) -> Result {
        if i >= self.max_pages {
            return Err(ENOSPC);
        }
        while self.stage.len() <= i {
            let page = if self.no_grow {
                if !core::mem::replace(&mut self.faulted, true) {
                    pr_info!("fault_tx_nomem: a TX batch cannot grow beyond its first page\n");
                }
                Err(ENOMEM)
            } else {
                StagingPage::new(GFP_NOIO | __GFP_NORETRY | __GFP_NOWARN)
            };
            let page = match page {
                Ok(p) => p,
                Err(e) => {
                    self.nomem = true;
                    return Err(e);
                }
            };
            // Within the capacity reserved at creation (`max_pages`): the vector does not move.
            self.stage.push_within_capacity(page).map_err(|_| ENOSPC)?;
        }
        Ok(())
    }

    /// Appends a copy of `data`.
    pub(crate) fn stage(&mut self, data: &[u8]) -> Result {
        let (n, sp, so) = (data.len(), self.sp, self.so);
        // A header or a trailer: in the current page, in one piece.
        if n > 0 && so.saturating_add(n) <= PAGE_SIZE && sp < self.stage.len() {
            let page = self.stage.get_mut(sp).ok_or(ENOSPC)?;
            page.with_slice_mut(so, n, |s| {
                for (d, b) in s.iter_mut().zip(data) {
                    *d = *b;
                }
            })?;
            self.add(Seg::Stage {
                page: sp,
                off: so,
                len: n,
            })?;
            self.so = so + n;
            return Ok(());
        }
        self.stage_with(n, |chunk, at| {
            let src = data.get(at..at.saturating_add(chunk.len())).ok_or(EINVAL)?;
            for (d, s) in chunk.iter_mut().zip(src) {
                *d = *s;
            }
            Ok(())
        })
    }

    /// Appends `len` bytes at `off` of a page of user memory. Does not sleep. `ENOSPC` without
    /// room for the fragment.
    pub(crate) fn add_user(&mut self, page: UmemPageRef, off: usize, len: usize) -> Result {
        self.add(Seg::User { page, off, len })?;
        self.user = self.user.saturating_add(len);
        Ok(())
    }

    /// The staging pages the batch's fragments lie in: the notification's once it goes by
    /// reference.
    fn stage_pages(&self) -> &[StagingPage] {
        match &self.zc {
            Some(n) => n.pages(),
            None => &self.stage,
        }
    }

    fn frag<'a>(&'a self, s: &'a Seg, skip: usize) -> Result<PageFrag<'a>> {
        match s {
            Seg::Stage { page, off, len } => self
                .stage_pages()
                .get(*page)
                .ok_or(EINVAL)?
                .frag(off.saturating_add(skip), len.saturating_sub(skip)),
            Seg::User { page, off, len } => {
                page.frag(off.saturating_add(skip), len.saturating_sub(skip))
            }
        }
    }

    /// Hands TCP what it did not take yet, without blocking. `more`: another batch follows at
    /// once (`MSG_MORE` on the last call too). Returns `Ok(true)` when all of it is with TCP,
    /// `Ok(false)` when the socket is full.
    pub(crate) fn push(&mut self, g: &mut SocketGuard<'_>, more: bool) -> Result<bool> {
        while self.sent < self.len {
            // A small message is one or two fragments, a message of a few FPDUs (4 KiB: 3)
            // about two per FPDU: an array their size saves initialising the large one on
            // every send.
            let rest = self.segs.len().saturating_sub(self.si);
            let r = if rest == 1 {
                self.send_last(g, more)
            } else if rest <= 4 {
                self.send_some::<4>(g, more)
            } else if rest <= 8 {
                self.send_some::<8>(g, more)
            } else if rest <= 16 {
                self.send_some::<16>(g, more)
            } else {
                self.send_some::<MAX_SEND_PAGES>(g, more)
            };
            match r {
                Ok(0) => return Ok(false),
                Ok(n) => self.advance(n),
                Err(e) if e == EAGAIN => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Hands TCP the last fragment, from the sent position on. Returns the number of bytes TCP
    /// took.
    fn send_last(&self, g: &mut SocketGuard<'_>, more: bool) -> Result<usize> {
        let s = self.segs.get(self.si).ok_or(EINVAL)?;
        let f = self.frag(s, self.soff)?;
        let fl = if more {
            SendFlags::DONTWAIT | SendFlags::MORE
        } else {
            SendFlags::DONTWAIT
        };
        self.send(g, core::slice::from_ref(&f), fl)
    }

    /// Hands TCP `frags`: by reference with the notification, or copied.
    fn send(
        &self,
        g: &mut SocketGuard<'_>,
        frags: &[PageFrag<'_>],
        fl: SendFlags,
    ) -> Result<usize> {
        match &self.zc {
            Some(n) => g.send_pages_zc(frags, fl, n),
            None => g.send_pages_copy(frags, fl),
        }
    }

    /// Hands TCP up to `N` (at most [`MAX_SEND_PAGES`]) fragments from the sent position on.
    /// Returns the number of bytes TCP took.
    fn send_some<const N: usize>(&self, g: &mut SocketGuard<'_>, more: bool) -> Result<usize> {
        let first = self.stage_pages().first().ok_or(EINVAL)?.frag(0, 0)?;
        let mut frags = [first; N];
        let mut k = 0usize;
        let mut i = self.si;
        let mut skip = self.soff;
        for slot in frags.iter_mut() {
            let Some(s) = self.segs.get(i) else {
                break;
            };
            *slot = self.frag(s, skip)?;
            skip = 0;
            i += 1;
            k += 1;
        }
        if k == 0 {
            // `sent < len` but no fragment left: cannot happen.
            return Err(EINVAL);
        }
        let last = i >= self.segs.len();
        let fl = if more || !last {
            SendFlags::DONTWAIT | SendFlags::MORE
        } else {
            SendFlags::DONTWAIT
        };
        self.send(g, frags.get(..k).unwrap_or(&[]), fl)
    }

    /// Moves the sent position `n` bytes on.
    fn advance(&mut self, n: usize) {
        self.sent = self.sent.saturating_add(n).min(self.len);
        let mut n = n;
        while n > 0 {
            let Some(s) = self.segs.get(self.si) else {
                break;
            };
            let left = s.len().saturating_sub(self.soff);
            if n < left {
                self.soff += n;
                break;
            }
            n -= left;
            self.si += 1;
            self.soff = 0;
        }
    }
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_batch)]
mod tests {
    use super::*;

    /// A batch that cannot grow says so, keeps nothing of what failed, and still takes what
    /// fits the page it holds.
    #[test]
    fn no_grow() -> Result {
        let mut b = Batch::new(4 * PAGE_SIZE)?;
        b.no_grow = true;
        assert_eq!(b.held(), PAGE_SIZE);
        let m = b.mark();
        assert_eq!(
            b.stage_with(PAGE_SIZE + 1, |_, _| Ok(())).err(),
            Some(ENOMEM)
        );
        assert!(b.take_nomem());
        assert!(!b.take_nomem());
        b.rollback(m);
        assert_eq!(b.len(), 0);
        // As much as the page holds fits, without an allocation.
        b.stage_with(PAGE_SIZE, |c, _| {
            c.fill(1);
            Ok(())
        })?;
        assert_eq!(b.len(), PAGE_SIZE);
        assert!(!b.take_nomem());
        // A piece staged whole would need the next page.
        assert_eq!(b.stage_whole(8, |_| Ok(())).err(), Some(ENOMEM));
        assert!(b.take_nomem());
        b.clear();
        assert_eq!((b.len(), b.held()), (0, PAGE_SIZE));
        Ok(())
    }

    /// A batch that can grow allocates the pages it needs, up to the room it was made with.
    #[test]
    fn grows() -> Result {
        let mut b = Batch::new(4 * PAGE_SIZE)?;
        b.no_grow = false;
        b.stage_with(PAGE_SIZE + 1, |_, _| Ok(()))?;
        assert_eq!(b.held(), 2 * PAGE_SIZE);
        assert!(!b.take_nomem());
        assert_eq!(
            b.stage_with(3 * PAGE_SIZE, |_, _| Ok(())).err(),
            Some(ENOSPC)
        );
        assert!(!b.take_nomem());
        assert_eq!(b.held(), 4 * PAGE_SIZE);
        Ok(())
    }
}
