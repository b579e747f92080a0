// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`).
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h).
//!
//! A [`Umem`] pins a range of user memory with `ib_umem_get()` and unpins it with
//! `ib_umem_release()` when dropped. Software RDMA devices (`CONFIG_INFINIBAND_VIRT_DMA`) do not
//! DMA: they copy to and from the pinned pages with the CPU. [`Umem`] therefore keeps an array
//! of the pinned `struct page`s, so that the page holding any byte of the region is found with
//! one index operation, and offers [`Umem::read`] and [`Umem::write`], which copy through
//! short-lived `kmap_local_page()` mappings, and [`Umem::write_from_skb`], which places received
//! data from a socket buffer the same way, without a staging copy.
//!
//! Pages pinned without write access (a registration without local write, remote write or
//! remote atomic access) may be pages nobody may write: the shared zero page, a page cache page
//! of a file mapped privately, a page shared copy-on-write with another process. The writes
//! refuse them ([`Umem::is_writable`]).

use super::{
    device::{
        Device,
        Driver, //
    },
    mr::AccessFlags,
};
use crate::{
    alloc::KVVec,
    bindings,
    error::from_err_ptr,
    net::skb::{
        PageFrag,
        SkbData, //
    },
    page::{
        BorrowedPage,
        PAGE_SHIFT,
        PAGE_SIZE, //
    },
    prelude::*, //
};
use core::ptr::NonNull;

/// A pinned range of user memory.
///
/// # Invariants
///
/// - `raw` was returned by `ib_umem_get*()` and is released exactly once, on drop.
/// - `pages` holds, in order, the pages pinned by `raw`; they stay pinned until drop.
/// - `offset < PAGE_SIZE` is the offset of the first byte in `pages[0]`, and
///   `offset + len <= pages.len() * PAGE_SIZE`.
/// - `writable` is true only if the pages were pinned for writing (`ib_umem.writable`).
pub struct Umem {
    raw: NonNull<bindings::ib_umem>,
    pages: KVVec<NonNull<bindings::page>>,
    offset: usize,
    len: usize,
    writable: bool,
}

// SAFETY: An `ib_umem` may be released from any thread; the page array is plain data.
unsafe impl Send for Umem {}

// SAFETY: `&Umem` only allows reading the page array and copying to and from the pages, which
// may be done concurrently from several threads.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of user memory of the current process at `addr` (`ib_umem_get_va()`).
    ///
    /// `access` are the access flags of the registration; with local write, remote write or
    /// remote atomic access the pages are pinned for writing (`ib_umem_get()`).
    /// Fails with `EINVAL` for an empty or wrapping range, and with the errors of
    /// `ib_umem_get()` (`ENOMEM` beyond `RLIMIT_MEMLOCK`, `EFAULT` for unmapped memory).
    pub fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Self> {
        // SAFETY: `dev` is a live device.
        unsafe { Self::get_raw(dev.as_raw(), addr, len, access) }
    }

    /// [`Umem::get`] for the `struct ib_device` `dev`.
    ///
    /// # Safety
    ///
    /// `dev` is a valid `struct ib_device` for the lifetime of the result.
    unsafe fn get_raw(
        dev: *mut bindings::ib_device,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Self> {
        if len == 0 || addr.checked_add(len).is_none() {
            return Err(EINVAL);
        }
        let ulen = usize::try_from(len).map_err(|_| EINVAL)?;
        let uaddr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let offset = uaddr & (PAGE_SIZE - 1);
        let npages = offset
            .checked_add(ulen)
            .and_then(|n| n.checked_add(PAGE_SIZE - 1))
            .ok_or(EINVAL)?
            >> PAGE_SHIFT;

        // SAFETY: `dev` is a valid device; a NULL attribute bundle selects the plain virtual
        // address `addr`.
        let raw = from_err_ptr(unsafe {
            bindings::ib_umem_get_attr_or_va(
                dev,
                core::ptr::null(),
                0,
                addr,
                ulen,
                u32::from(access) as c_int,
            )
        })?;
        let raw = NonNull::new(raw).ok_or(EINVAL)?;
        // INVARIANT: `pages` is filled below from the umem's scatterlist before `this` is
        // handed out; on failure `this` is dropped, releasing the umem. `writable` is how
        // `ib_umem_get()` pinned the pages.
        let mut this = Self {
            raw,
            pages: KVVec::new(),
            offset,
            len: ulen,
            // SAFETY: `raw` is a valid umem.
            writable: unsafe { bindings::ib_umem_writable(raw.as_ptr()) },
        };
        this.pages.reserve(npages, GFP_KERNEL)?;

        let mut iter = core::mem::MaybeUninit::<bindings::sg_page_iter>::zeroed();
        // SAFETY: `raw` is a valid umem whose scatterlist `sgt_append.sgt` was set up by
        // `ib_umem_get()`; `iter` is valid for writing.
        unsafe {
            let sgt = &raw mut (*raw.as_ptr()).sgt_append.sgt;
            bindings::__sg_page_iter_start(iter.as_mut_ptr(), (*sgt).sgl, (*sgt).orig_nents, 0);
        }
        // SAFETY: `iter` was initialised by `__sg_page_iter_start()` above.
        while unsafe { bindings::__sg_page_iter_next(iter.as_mut_ptr()) } {
            // SAFETY: `iter` points at a valid page of the scatterlist.
            let page = unsafe { bindings::sg_page_iter_page(iter.as_mut_ptr()) };
            let page = NonNull::new(page).ok_or(EINVAL)?;
            this.pages.push(page, GFP_KERNEL)?;
        }
        if this.pages.len() != npages {
            pr_warn!(
                "rdma: umem: {} pages pinned, {} expected\n",
                this.pages.len(),
                npages
            );
            return Err(EINVAL);
        }
        Ok(this)
    }

    /// Returns the length of the region in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns `true` if the region is empty (never: pinning an empty range fails).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns whether the pages were pinned for writing: [`Umem::write`] and
    /// [`Umem::write_from_skb`] fail with `EACCES` otherwise.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Returns the offset of the region's first byte in its first page.
    pub fn page_offset(&self) -> usize {
        self.offset
    }

    /// Returns the number of pinned pages.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Returns pinned page `index` (`0..page_count()`), in O(1).
    pub fn page(&self, index: usize) -> Option<BorrowedPage<'_>> {
        let page = *self.pages.get(index)?;
        // SAFETY: By the type invariant the page stays pinned while `self` is alive.
        Some(unsafe { BorrowedPage::from_raw(page) })
    }

    /// Calls `f(page, offset_in_page, range)` for each page piece of region bytes
    /// `[off, off + len)`, where `range` is the matching range of `0..len`.
    fn for_each_piece(
        &self,
        off: usize,
        len: usize,
        mut f: impl FnMut(&BorrowedPage<'_>, usize, core::ops::Range<usize>) -> Result,
    ) -> Result {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // Cannot overflow: `self.offset + self.len` fits the page array (type invariant).
        let mut pos = self.offset + off;
        let mut done = 0;
        while done < len {
            let in_page = pos & (PAGE_SIZE - 1);
            let n = core::cmp::min(PAGE_SIZE - in_page, len - done);
            let page = self.page(pos >> PAGE_SHIFT).ok_or(EINVAL)?;
            f(&page, in_page, done..done + n)?;
            pos += n;
            done += n;
        }
        Ok(())
    }

    /// Copies region bytes `[off, off + dst.len())` into `dst`.
    ///
    /// Fails with `EINVAL` if the range is not inside the region.
    pub fn read(&self, off: usize, dst: &mut [u8]) -> Result {
        self.for_each_piece(off, dst.len(), |page, in_page, r| {
            let d = &mut dst[r];
            // SAFETY: `d` is valid for writing `d.len()` bytes. The page belongs to user space,
            // which may write it concurrently, exactly as it may while a hardware RDMA device
            // DMAs from it; the bytes read are then unspecified but the copy is sound.
            unsafe { page.read_raw(d.as_mut_ptr(), in_page, d.len()) }
        })
    }

    /// Copies `src` into region bytes `[off, off + src.len())`.
    ///
    /// Fails with `EACCES` if the pages were not pinned for writing and `EINVAL` if the range
    /// is not inside the region.
    pub fn write(&self, off: usize, src: &[u8]) -> Result {
        if !self.writable {
            return Err(EACCES);
        }
        self.for_each_piece(off, src.len(), |page, in_page, r| {
            let s = &src[r];
            // SAFETY: `s` is valid for reading `s.len()` bytes. The page is user memory pinned
            // for this registration; concurrent user access is allowed as for hardware DMA
            // (see `read`).
            unsafe { page.write_raw(s.as_ptr(), in_page, s.len()) }
        })
    }

    /// Applies `op` atomically to the 64-bit word at region byte `off` and returns its value
    /// before ([`super::mr::atomic_rmw_u64`], through a short-lived `kmap_local_page()`
    /// mapping). Fails with `EACCES` if the pages were not pinned for writing, with `EINVAL`
    /// if the word's user address is not 8-byte aligned or the word is not inside the region.
    /// Does not sleep.
    pub fn atomic_u64(&self, off: usize, op: impl FnMut(u64) -> u64) -> Result<u64> {
        // SAFETY: `word()` hands a pointer to an aligned word of a page pinned for writing,
        // mapped for the call; no Rust reference to user memory exists; user space may access
        // the word concurrently, as it may while a hardware RDMA device performs an atomic on
        // it.
        self.word(off, |w| unsafe { super::mr::atomic_rmw_u64(w, op) })
    }

    /// Stores the 8 bytes `image` into the 64-bit word at region byte `off` with release
    /// ordering ([`super::mr::store_release_u64`], RDMA Atomic Write); errors as
    /// [`Umem::atomic_u64`]. Does not sleep.
    pub fn store_u64(&self, off: usize, image: [u8; 8]) -> Result {
        // SAFETY: As in `atomic_u64()`.
        self.word(off, |w| unsafe { super::mr::store_release_u64(w, image) })
    }

    /// Runs `f` on the aligned 64-bit word at region byte `off`, through a short-lived
    /// `kmap_local_page()` mapping: the pointer is 8-byte aligned and valid for reads and
    /// writes of 8 bytes while `f` runs, and the page was pinned for writing. Fails with
    /// `EACCES` if the pages were not pinned for writing, with `EINVAL` if the word's user
    /// address is not 8-byte aligned or the word is not inside the region.
    fn word<R>(&self, off: usize, f: impl FnOnce(*mut u64) -> R) -> Result<R> {
        if !self.writable {
            return Err(EACCES);
        }
        let end = off.checked_add(8).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // Cannot overflow: `self.offset + self.len` fits the page array (type invariant).
        let pos = self.offset + off;
        // The user address has the same offset into its page: an aligned word never crosses a
        // page.
        if pos & 7 != 0 {
            return Err(EINVAL);
        }
        let page = self.page(pos >> PAGE_SHIFT).ok_or(EINVAL)?;
        let in_page = pos & (PAGE_SIZE - 1);
        // SAFETY: The page is pinned while `self` lives (type invariant).
        let va = unsafe { bindings::kmap_local_page(page.as_ptr()) };
        // SAFETY: `va` maps the whole page and `in_page + 8 <= PAGE_SIZE`, so the pointer stays
        // inside the mapping.
        let r = f(unsafe { va.cast::<u8>().add(in_page).cast() });
        // SAFETY: `va` was mapped just above, and nothing mapped since is still mapped.
        unsafe { bindings::kunmap_local(va) };
        Ok(r)
    }

    /// Copies `len` received bytes of `skb`, starting at `skb_off`, into region bytes
    /// `[off, off + len)`, straight into the pinned pages (`skb_copy_bits()` through short-lived
    /// `kmap_local_page()` mappings): no staging buffer. Does not sleep.
    ///
    /// Fails with `EACCES` if the pages were not pinned for writing, with `EINVAL` if the range
    /// is not inside the region or not inside `skb`. Pages before the failing one may have been
    /// written.
    pub fn write_from_skb(
        &self,
        off: usize,
        skb: &SkbData<'_>,
        skb_off: usize,
        len: usize,
    ) -> Result {
        if !self.writable {
            return Err(EACCES);
        }
        skb.check_range(skb_off, len)?;
        self.for_each_piece(off, len, |page, in_page, r| {
            // `for_each_piece()` keeps `in_page + r.len()` within the page and `r` within
            // `0..len`, so `at + n <= skb.len()` (checked above).
            let (at, n) = (skb_off.saturating_add(r.start), r.len());
            // SAFETY: The page is pinned while `self` lives (type invariant).
            let va = unsafe { bindings::kmap_local_page(page.as_ptr()) };
            // SAFETY: `va` maps the whole page and `in_page + n <= PAGE_SIZE`, so the
            // destination is valid for writing `n` bytes. No Rust reference to user memory
            // exists; user space may access the page concurrently, as it may while a hardware
            // RDMA device DMAs to it (see `read`).
            let ret = unsafe { skb.copy_to_raw(at, va.cast::<u8>().add(in_page), n) };
            // SAFETY: `va` was mapped just above, and nothing mapped since is still mapped.
            unsafe { bindings::kunmap_local(va) };
            ret
        })
    }
}

impl Umem {
    /// Returns whether every pinned page is persistent memory
    /// ([`crate::mm::pmem::is_persistent_page`]), as a registration with
    /// `IB_ACCESS_FLUSH_PERSISTENT` requires. Does not sleep.
    pub fn is_persistent(&self) -> bool {
        (0..self.page_count()).all(|i| {
            self.page(i)
                .is_some_and(|p| crate::mm::pmem::is_persistent_page(&p))
        })
    }

    /// Writes back the CPU cache lines covering region bytes `[off, off + len)` to memory
    /// ([`crate::mm::pmem::write_back_page`], page by page). The write-backs are not ordered:
    /// call [`crate::mm::pmem::barrier`] after the last one. Fails with `EINVAL` if the range
    /// is not inside the region. Does not sleep.
    pub fn write_back(&self, off: usize, len: usize) -> Result {
        self.for_each_piece(off, len, |page, in_page, r| {
            crate::mm::pmem::write_back_page(page, in_page, r.len())
        })
    }
}

impl Umem {
    /// Calls `f(page, offset_in_page, len)` for each page piece of region bytes
    /// `[off, off + len)`, in order, handing over a reference on the page taken for the piece
    /// ([`UmemPageRef`]), so that the bytes can be sent by reference
    /// (for example with [`SocketGuard::send_pages`](crate::net::tcp::SocketGuard::send_pages)) after this
    /// borrow of the region ended. Does not sleep (if `f` does not).
    ///
    /// Fails with `EINVAL` if the range is not inside the region, and with the errors of `f`.
    pub fn page_refs(
        &self,
        off: usize,
        len: usize,
        mut f: impl FnMut(UmemPageRef, usize, usize) -> Result,
    ) -> Result {
        self.for_each_piece(off, len, |page, in_page, r| {
            // SAFETY: The page is pinned while `self` lives (type invariant), so it is a live
            // page to take another reference on.
            unsafe { bindings::get_page(page.as_ptr()) };
            let page = NonNull::new(page.as_ptr()).ok_or(EINVAL)?;
            // INVARIANT: We took a reference just above; the page was pinned by the umem.
            f(UmemPageRef { page }, in_page, r.len())
        })
    }
}

/// A reference on a page of pinned user memory, taken by [`Umem::page_refs`] and dropped
/// (`put_page()`) with this value: the page stays allocated while it lives, even if the region
/// is released meanwhile.
///
/// # Invariants
///
/// `page` was pinned by a [`Umem`] (`pin_user_pages()`) when this value was created, and this
/// value owns one reference on it.
pub struct UmemPageRef {
    page: NonNull<bindings::page>,
}

// SAFETY: A page reference may be dropped from any thread.
unsafe impl Send for UmemPageRef {}

// SAFETY: `&UmemPageRef` only gives out page fragments for sending.
unsafe impl Sync for UmemPageRef {}

impl UmemPageRef {
    /// Describes `len` bytes of the page at `offset`, to send them by reference; `EINVAL` if
    /// they do not fit in the page.
    ///
    /// The bytes are user memory: user space may change them at any time, so TCP may
    /// (re)transmit other bytes than those the page held when the fragment was queued.
    pub fn frag(&self, offset: usize, len: usize) -> Result<PageFrag<'_>> {
        // SAFETY: We own a reference on the page for the lifetime of `self` (type invariant).
        // Pages pinned from user memory are never slab pages: `pin_user_pages()` refuses
        // `VM_IO`/`VM_PFNMAP` mappings and `vm_insert_page()` refuses slab pages.
        unsafe { PageFrag::from_raw(self.page, offset, len) }
    }
}

impl Drop for UmemPageRef {
    fn drop(&mut self) {
        // SAFETY: We own one reference on the page (type invariant) and drop it once.
        unsafe { bindings::put_page(self.page.as_ptr()) };
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `raw` is a live umem released only here. This may
        // sleep; `Umem` is only dropped in process context (see the MR documentation).
        unsafe { bindings::ib_umem_release(self.raw.as_ptr()) };
    }
}

#[macros::kunit_tests(rust_rdma_umem)]
mod tests {
    use super::*;
    use crate::kunit::in_kunit_test;

    // `include/uapi/asm-generic/mman-common.h` (not in the bindings).
    const PROT_READ: c_ulong = 0x1;
    const MAP_PRIVATE: c_ulong = 0x02;
    const MAP_ANONYMOUS: c_ulong = 0x20;

    /// A read-only private mapping pins the shared zero page (the same for every untouched
    /// anonymous page, and the closest KUnit gets to a read-only private file mapping: it
    /// maps no file, but pinning it without write access gives a page nobody may write, as
    /// the page cache page of such a mapping would be). The writes must refuse it.
    #[test]
    fn read_only_pin_refuses_writes() -> Result {
        assert!(in_kunit_test());
        // SAFETY: Called from a KUnit test, which `kunit_get_current_test()` returns.
        let test = unsafe { bindings::kunit_get_current_test() };
        // SAFETY: `test` is the running test; the mapping (and the mm KUnit attaches for it)
        // lives until the test ends.
        let addr = unsafe {
            bindings::kunit_vm_mmap(
                test,
                core::ptr::null_mut(),
                0,
                PAGE_SIZE,
                PROT_READ,
                MAP_PRIVATE | MAP_ANONYMOUS,
                0,
            )
        };
        assert_ne!(addr, 0);
        // A device with no DMA device: `ib_umem_get()` only asks whether it uses virtual DMA.
        let dev = KBox::into_raw(KBox::<bindings::ib_device>::new_uninit(GFP_KERNEL)?)
            .cast::<bindings::ib_device>();
        // SAFETY: `dev` is a fresh allocation for one `ib_device`; zeroed, as ib_core's
        // `kzalloc()`ed devices start.
        unsafe { core::ptr::write_bytes(dev, 0, 1) };
        // SAFETY: `dev` is a valid device until it is freed below, after the umem.
        let ro = unsafe { Umem::get_raw(dev, addr as u64, PAGE_SIZE as u64, AccessFlags::empty()) };
        let res = ro.and_then(|ro| {
            assert!(!ro.is_writable());
            let w = ro.write(10, &[0xa5; 16]);
            let mut back = [0xffu8; 32];
            ro.read(0, &mut back)?;
            if w.is_ok() {
                // Undo it: the page is the zero page.
                let _ = ro.write(10, &[0; 16]);
            }
            assert_eq!(w, Err(EACCES));
            assert_eq!(back, [0u8; 32]);
            Ok(())
        });
        // SAFETY: `dev` came from `KBox::into_raw` above; the umem is gone.
        drop(unsafe { KBox::from_raw(dev.cast::<core::mem::MaybeUninit<bindings::ib_device>>()) });
        res
    }
}
