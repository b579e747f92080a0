// SPDX-License-Identifier: GPL-2.0

//! Memory regions: access flags, keys and the STag index table.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h) and
//! [`include/linux/xarray.h`](srctree/include/linux/xarray.h).
//!
//! The MR objects themselves are [`super::object::Mr`]. This module provides what a software
//! provider needs around them:
//!
//! - [`access`]: the `IB_ACCESS_*` registration flags;
//! - [`random_u32`]: unguessable key material (`get_random_u32()`);
//! - [`IndexTable`]: a table from a 24-bit (or any `u32`) index to a reference-counted entry,
//!   backed by an allocating XArray with cyclic allocation, that may be used from any context
//!   (its lock disables interrupts), so that the data path can look up an STag in O(1) from
//!   softirq context;
//! - [`PageList`]: the page list of a fast-registration MR, filled by `ib_sg_to_pages()` through
//!   [`Driver::map_mr_step`] and used to copy data into and out of the registered memory;
//! - [`SendWr::reg_mr`]: the MR of an `IB_WR_REG_MR` work request.
//!
//! # Fast registration
//!
//! ib_core's `ib_map_mr_sg()` calls the provider's `map_mr_sg` op with a DMA-mapped scatterlist.
//! The abstraction implements that op: it runs `ib_sg_to_pages()`, whose `set_page` callback is
//! a trampoline, and hands each step to [`Driver::map_mr_step`] as an opaque [`MapStep`], which
//! the driver applies to the MR's [`PageList`] (under whatever lock it keeps the list in):
//! a begin step with the page size, one step per page, and an end step with the mapped I/O
//! virtual address and length. The list keeps that *staged* mapping until the driver activates
//! it when it executes the `IB_WR_REG_MR` work request ([`PageList::activate`]); from then on
//! [`PageList::write`] and [`PageList::read`] copy to and from the registered memory, until
//! [`PageList::deactivate`] (invalidation).
//!
//! Software providers use `CONFIG_INFINIBAND_VIRT_DMA`: the DMA addresses of their scatterlists
//! are kernel virtual addresses. The op checks `ib_uses_virt_dma()` and fails with `EOPNOTSUPP`
//! otherwise. The page addresses of a [`PageList`] only come from `ib_sg_to_pages()`, and only
//! the bytes of the mapped range are ever accessed; the kernel consumer keeps that memory mapped
//! while the region is registered (the verbs contract, as for every provider).

use super::{
    device::{
        Device,
        Driver, //
    },
    object::{
        Mr,
        SendWr, //
    },
};
use crate::{
    bindings,
    net::tcp::SkbData,
    prelude::*,
    sync::{
        rcu,
        Arc,
        ArcBorrow, //
    },
    types::Opaque, //
};
use core::{
    cell::UnsafeCell,
    ffi::{
        c_int,
        c_uint, //
    },
    ops::RangeInclusive, //
};

/// Memory region types (`enum ib_mr_type`).
pub mod mr_type {
    /// Fast-registration MR (`IB_MR_TYPE_MEM_REG`).
    pub const MEM_REG: u32 = crate::bindings::ib_mr_type_IB_MR_TYPE_MEM_REG;
    /// Fast-registration MR without gap restrictions (`IB_MR_TYPE_SG_GAPS`).
    pub const SG_GAPS: u32 = crate::bindings::ib_mr_type_IB_MR_TYPE_SG_GAPS;
    /// Integrity MR (`IB_MR_TYPE_INTEGRITY`).
    pub const INTEGRITY: u32 = crate::bindings::ib_mr_type_IB_MR_TYPE_INTEGRITY;
}

/// Memory registration access flags (`enum ib_access_flags`).
pub mod access {
    /// Local write (`IB_ACCESS_LOCAL_WRITE`). Local read is always allowed.
    pub const LOCAL_WRITE: i32 = crate::bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE as i32;
    /// Remote write (`IB_ACCESS_REMOTE_WRITE`).
    pub const REMOTE_WRITE: i32 = crate::bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE as i32;
    /// Remote read (`IB_ACCESS_REMOTE_READ`).
    pub const REMOTE_READ: i32 = crate::bindings::ib_access_flags_IB_ACCESS_REMOTE_READ as i32;
    /// Remote atomic (`IB_ACCESS_REMOTE_ATOMIC`).
    pub const REMOTE_ATOMIC: i32 = crate::bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC as i32;
    /// Memory window binding (`IB_ACCESS_MW_BIND`).
    pub const MW_BIND: i32 = crate::bindings::ib_access_flags_IB_ACCESS_MW_BIND as i32;
    /// Zero-based virtual addresses (`IB_ZERO_BASED`).
    pub const ZERO_BASED: i32 = crate::bindings::ib_access_flags_IB_ZERO_BASED as i32;
    /// On-demand paging (`IB_ACCESS_ON_DEMAND`).
    pub const ON_DEMAND: i32 = crate::bindings::ib_access_flags_IB_ACCESS_ON_DEMAND as i32;
    /// Huge pages hint (`IB_ACCESS_HUGETLB`).
    pub const HUGETLB: i32 = crate::bindings::ib_access_flags_IB_ACCESS_HUGETLB as i32;
    /// Relaxed ordering (`IB_ACCESS_RELAXED_ORDERING`, optional: may be ignored).
    pub const RELAXED_ORDERING: i32 =
        crate::bindings::ib_access_flags_IB_ACCESS_RELAXED_ORDERING as i32;
    /// Flush to global visibility (`IB_ACCESS_FLUSH_GLOBAL`).
    pub const FLUSH_GLOBAL: i32 = crate::bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL as i32;
    /// Flush to persistence (`IB_ACCESS_FLUSH_PERSISTENT`).
    pub const FLUSH_PERSISTENT: i32 =
        crate::bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT as i32;
    /// The range of optional flags a provider may ignore (`IB_ACCESS_OPTIONAL`).
    pub const OPTIONAL: i32 = crate::bindings::ib_access_flags_IB_ACCESS_OPTIONAL as i32;
}

/// Returns 32 random bits from the kernel's CSPRNG (`get_random_u32()`).
pub fn random_u32() -> u32 {
    // SAFETY: `get_random_u32()` may be called from any context.
    unsafe { bindings::get_random_u32() }
}

/// The C part of an [`IndexTable`]: the XArray and its cyclic allocation cursor.
struct RawTable {
    xa: Opaque<bindings::xarray>,
    /// The next index to try; written by `xa_alloc_cyclic_irq()` under the XArray lock.
    next: UnsafeCell<u32>,
}

/// A table from `u32` indices to reference-counted entries, with cyclic index allocation.
///
/// Lookups are lock-free: they walk the radix tree under RCU (`xa_load()`) and take a reference
/// on the entry, so they are O(1), safe from any context, and return an entry that stays alive
/// even if it is removed concurrently. Removal waits for an RCU grace period before it gives up
/// the table's reference ([`IndexTable::remove`]), so a lookup that found the entry can always
/// take its own. Indices are allocated cyclically (`xa_alloc_cyclic`), so an index is not
/// reused until the whole range has been used.
///
/// # Invariants
///
/// - `raw.xa` is an XArray initialised with `XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ`.
/// - Every entry of `raw.xa` was produced by `Arc::<T>::into_raw` and is owned by the table.
///   The table keeps owning an erased entry until an RCU grace period has passed since the
///   erasure.
/// - `raw.next` is only accessed with the XArray lock held.
pub struct IndexTable<T: Send + Sync> {
    raw: Pin<KBox<RawTable>>,
    _p: core::marker::PhantomData<Arc<T>>,
}

// SAFETY: The table owns `Arc<T>`s, which are `Send` for `T: Send + Sync`; the XArray may be used
// from any thread.
unsafe impl<T: Send + Sync> Send for IndexTable<T> {}

// SAFETY: The XArray is safe for concurrent use (changes under its lock, lookups under RCU);
// `&IndexTable` only hands out `Arc<T>` clones.
unsafe impl<T: Send + Sync> Sync for IndexTable<T> {}

impl<T: Send + Sync> IndexTable<T> {
    /// Creates an empty table; allocation starts at index `first`.
    pub fn new(first: u32) -> Result<Self> {
        let raw = KBox::pin(
            RawTable {
                xa: Opaque::uninit(),
                next: UnsafeCell::new(first),
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `raw.xa` is valid for writing and pinned (boxed) from now on.
        unsafe {
            bindings::xa_init_flags(
                raw.xa.get(),
                bindings::XA_FLAGS_ALLOC1 | bindings::xa_lock_type_XA_LOCK_IRQ as bindings::gfp_t,
            )
        };
        // INVARIANT: Initialised above; empty.
        Ok(Self {
            raw,
            _p: core::marker::PhantomData,
        })
    }

    fn xa(&self) -> *mut bindings::xarray {
        self.raw.xa.get()
    }

    /// Stores `value` at a free index in `range`, allocated cyclically, and returns the index.
    ///
    /// Fails with `EBUSY` if every index of `range` is in use and `ENOMEM` on allocation failure.
    pub fn alloc(&self, value: Arc<T>, range: RangeInclusive<u32>) -> Result<u32> {
        let limit = bindings::xa_limit {
            min: *range.start(),
            max: *range.end(),
        };
        let ptr = Arc::into_raw(value).cast_mut();
        let mut id = 0u32;
        // SAFETY: `self.xa()` is an allocating XArray with an IRQ-safe lock (type invariant);
        // `next` is only accessed under that lock, which `xa_alloc_cyclic_irq()` takes.
        let ret = unsafe {
            bindings::xa_alloc_cyclic_irq(
                self.xa(),
                &mut id,
                ptr.cast(),
                limit,
                self.raw.next.get(),
                bindings::GFP_KERNEL,
            )
        };
        if ret < 0 {
            // SAFETY: `ptr` came from `Arc::into_raw` above and was not stored.
            drop(unsafe { Arc::from_raw(ptr) });
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: The table now owns the `Arc` behind `ptr`.
        Ok(id)
    }

    /// Returns a reference to the entry at `index`, if any. Lock-free, any context.
    pub fn get(&self, index: u32) -> Option<Arc<T>> {
        let rcu = rcu::read_lock();
        let t = self.get_in(&rcu, index)?;
        // SAFETY: `t` is the contents of an `Arc<T>` the table owned when it was loaded (type
        // invariant), alive while `rcu` is held (see `get_in()`): it is alive until the clone
        // holds its own reference.
        Some(unsafe { ArcBorrow::<T>::from_raw(t) }.into())
    }

    /// Returns the entry at `index`, if any, for as long as the RCU read-side critical section
    /// of `rcu` lasts: no reference is taken, so the entry must not be kept beyond it (nor can
    /// it be: the borrow ends with the guard). Lock-free, any context.
    #[inline]
    pub fn get_in<'a>(&'a self, _rcu: &'a rcu::Guard, index: u32) -> Option<&'a T> {
        // SAFETY: `self.xa()` is a valid XArray; `xa_load()` may be called under RCU, which
        // `_rcu` holds.
        let ptr = unsafe { bindings::xa_load(self.xa(), index as usize) };
        // SAFETY: A non-null `ptr` is an `Arc<T>` owned by the table (type invariant) when it
        // was loaded, in the RCU read-side critical section of `_rcu`. If it is erased since,
        // `remove()` waits for a grace period before it gives the table's reference away,
        // and that cannot end before `_rcu` is dropped, which the returned borrow prevents.
        (!ptr.is_null()).then(|| unsafe { &*ptr.cast::<T>() })
    }

    /// Removes the entry at `index` and returns it, once no lookup that may have found it can
    /// still be taking a reference (after an RCU grace period). Process context: may sleep.
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: `self.xa()` is a valid XArray with an IRQ-safe lock.
        let ptr = unsafe { bindings::xa_erase_irq(self.xa(), index as usize) };
        if ptr.is_null() {
            return None;
        }
        // Lookups that loaded `ptr` before the erasure are in RCU read-side critical sections.
        rcu::synchronize_rcu();
        // SAFETY: The entry was owned by the table (type invariant), is no longer in it, and a
        // grace period has passed since its erasure: the table's reference is ours to return.
        Some(unsafe { Arc::from_raw(ptr.cast::<T>()) })
    }
}

impl<T: Send + Sync> Drop for IndexTable<T> {
    fn drop(&mut self) {
        let mut index: usize = 0;
        loop {
            // SAFETY: `self.xa()` is a valid XArray; we have exclusive access.
            let ptr = unsafe {
                bindings::xa_find(self.xa(), &mut index, usize::MAX, bindings::XA_PRESENT)
            };
            if ptr.is_null() {
                break;
            }
            // SAFETY: `index` holds an entry; we have exclusive access.
            unsafe { bindings::xa_erase_irq(self.xa(), index) };
            // SAFETY: The entry was owned by the table and was removed above.
            drop(unsafe { Arc::from_raw(ptr.cast::<T>()) });
        }
        // SAFETY: The XArray is empty and not used afterwards.
        unsafe { bindings::xa_destroy(self.xa()) };
    }
}

/// One step of mapping a scatterlist into a fast-registration MR, produced by the `map_mr_sg`
/// op and applied by the driver to the MR's [`PageList`] with [`PageList::apply`].
///
/// Steps are only created by the abstraction, from the results of `ib_sg_to_pages()`: a driver
/// cannot make up page addresses.
pub struct MapStep(Step);

enum Step {
    /// A new mapping with pages of this size (`ib_mr.page_size`) begins.
    Begin(u32),
    /// The next page (a kernel virtual address aligned to the page size).
    Page(u64),
    /// The mapping is complete: I/O virtual address of its first byte and its length.
    End { iova: u64, length: u64 },
}

/// A mapping: page addresses, page size, offset of the first byte in the first page, length.
struct Mapping {
    pages: KVec<u64>,
    shift: u32,
    fbo: u64,
    len: u64,
}

impl Mapping {
    fn new(max: usize) -> Result<Self> {
        Ok(Self {
            pages: KVec::with_capacity(max, GFP_KERNEL)?,
            shift: 0,
            fbo: 0,
            len: 0,
        })
    }

    /// Calls `f(address, at, n)` for the pieces of `[off, off + len)` of the mapping, in order;
    /// `at` is the offset of the piece from `off`.
    fn pieces(&self, off: u64, len: usize, mut f: impl FnMut(u64, usize, usize)) -> Result {
        let len64 = u64::try_from(len).map_err(|_| EINVAL)?;
        let end = off.checked_add(len64).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        let size = 1u64 << self.shift;
        let mut pos = self.fbo.checked_add(off).ok_or(EINVAL)?;
        let mut done = 0usize;
        while done < len {
            let idx = usize::try_from(pos >> self.shift).map_err(|_| EINVAL)?;
            let in_page = pos & (size - 1);
            let rest = (len - done) as u64;
            let n = (size - in_page).min(rest);
            let page = *self.pages.get(idx).ok_or(EINVAL)?;
            f(page + in_page, done, n as usize);
            pos += n;
            done += n as usize;
        }
        Ok(())
    }
}

/// The page list of a fast-registration memory region.
///
/// Holds the *staged* mapping (written by `map_mr_sg` through [`PageList::apply`]) and the
/// *active* one (the mapping of the current registration, copied from the staged one by
/// [`PageList::activate`]), so that mapping the next registration does not change the current
/// one, as on hardware. Every activation and deactivation starts a new generation; copies name
/// the generation they were checked against and fail if it is no longer active.
///
/// The list has no lock of its own: the driver keeps it under the lock of its region state, and
/// copies hold that lock, so that once [`PageList::deactivate`] returns no copy is in progress
/// and none will start (the consumer may then free the memory).
///
/// # Invariants
///
/// - Every address in `staged.pages` and `active.pages` was produced by `ib_sg_to_pages()` for a
///   scatterlist mapped for a device using virtual DMA (a kernel virtual address), or points into
///   a buffer owned by `owned` (KUnit only).
/// - For both mappings, `fbo < 1 << shift` and `fbo + len <= pages.len() << shift`, and byte `i`
///   of `[fbo, fbo + len)` of the concatenated pages is a byte of memory the consumer mapped.
pub struct PageList {
    staged: Mapping,
    active: Mapping,
    max: usize,
    on: bool,
    gen: u64,
    #[cfg(CONFIG_KUNIT)]
    owned: KVec<KVec<u8>>,
}

impl PageList {
    /// Creates an empty list for up to `max_pages` pages.
    pub fn new(max_pages: u32) -> Result<Self> {
        let max = usize::try_from(max_pages).map_err(|_| EINVAL)?;
        // INVARIANT: Both mappings are empty.
        Ok(Self {
            staged: Mapping::new(max)?,
            active: Mapping::new(max)?,
            max,
            on: false,
            gen: 0,
            #[cfg(CONFIG_KUNIT)]
            owned: KVec::new(),
        })
    }

    /// Returns the maximum number of pages.
    pub fn max_pages(&self) -> usize {
        self.max
    }

    /// Applies a step of `map_mr_sg` to the staged mapping.
    ///
    /// Fails with `EINVAL` for a page size that is not a power of two (the op then fails) and
    /// with `ENOMEM` when the list is full (`ib_sg_to_pages()` then stops: the consumer sees
    /// fewer elements mapped than it asked for).
    pub fn apply(&mut self, step: MapStep) -> Result {
        let m = &mut self.staged;
        match step.0 {
            Step::Begin(size) => {
                if !size.is_power_of_two() {
                    return Err(EINVAL);
                }
                m.pages.clear();
                m.shift = size.trailing_zeros();
                m.fbo = 0;
                m.len = 0;
            }
            Step::Page(addr) => {
                // INVARIANT: `addr` came from `ib_sg_to_pages()` (`MapStep` is only built by
                // the op); the mapped length stays 0 until the end step.
                if m.pages.len() >= self.max || addr & ((1u64 << m.shift) - 1) != 0 {
                    return Err(ENOMEM);
                }
                m.pages.push(addr, GFP_ATOMIC)?;
            }
            Step::End { iova, length } => {
                let size = 1u64 << m.shift;
                let first = m.pages.first().copied().unwrap_or(0);
                let fbo = iova.wrapping_sub(first);
                let cap = (m.pages.len() as u64) << m.shift;
                // INVARIANT: `fbo` is the offset of the mapping's first byte in its first page;
                // the length is clamped to the pages (a partial mapping maps fewer bytes).
                if m.pages.is_empty() || fbo >= size {
                    m.fbo = 0;
                    m.len = 0;
                } else {
                    m.fbo = fbo;
                    m.len = length.min(cap - fbo);
                }
            }
        }
        Ok(())
    }

    /// Returns the length in bytes of the staged mapping (0 if there is none).
    pub fn staged_len(&self) -> u64 {
        self.staged.len
    }

    /// Makes the staged mapping the registered one and returns its generation, for
    /// [`PageList::write`] and [`PageList::read`]. Fails with `EINVAL` if nothing is mapped.
    pub fn activate(&mut self) -> Result<u64> {
        if self.staged.len == 0 {
            return Err(EINVAL);
        }
        self.active.pages.clear();
        // Both vectors have capacity for `max` pages: this does not allocate.
        self.active
            .pages
            .extend_from_slice(&self.staged.pages, GFP_ATOMIC)?;
        // INVARIANT: A copy of the staged mapping, which satisfies the invariants.
        self.active.shift = self.staged.shift;
        self.active.fbo = self.staged.fbo;
        self.active.len = self.staged.len;
        self.on = true;
        self.gen = self.gen.wrapping_add(1);
        Ok(self.gen)
    }

    /// Returns the length of the registered mapping, 0 if none is active.
    pub fn active_len(&self) -> u64 {
        if self.on {
            self.active.len
        } else {
            0
        }
    }

    /// Ends the registration: copies of every generation fail from now on.
    pub fn deactivate(&mut self) {
        self.on = false;
        self.gen = self.gen.wrapping_add(1);
    }

    fn active(&self, gen: u64) -> Result<&Mapping> {
        if !self.on || gen != self.gen {
            return Err(ENOENT);
        }
        Ok(&self.active)
    }

    /// Copies `src` to bytes `[off, off + src.len())` of the registered mapping of generation
    /// `gen`. Fails with `ENOENT` if that generation is no longer registered and `EINVAL` if the
    /// range exceeds the mapping. Does not sleep.
    pub fn write(&self, gen: u64, off: u64, src: &[u8]) -> Result {
        self.active(gen)?.pieces(off, src.len(), |addr, at, n| {
            // SAFETY: By the type invariants `addr` is the kernel virtual address of `n` bytes
            // of memory the consumer mapped and keeps mapped while the region is registered
            // (`gen` is active); `pieces()` keeps `[at, at + n)` within `src`.
            unsafe {
                core::ptr::copy_nonoverlapping(src.as_ptr().add(at), addr as usize as *mut u8, n)
            }
        })
    }

    /// Copies `len` received bytes of `skb`, starting at `skb_off`, to bytes `[off, off + len)`
    /// of the registered mapping of generation `gen` (`skb_copy_bits()`, no staging copy). Same
    /// rules as [`PageList::write`]; also `EINVAL` if the range is not inside `skb`. Pages
    /// before a failing one may have been written.
    pub fn write_from_skb(
        &self,
        gen: u64,
        off: u64,
        skb: &SkbData<'_>,
        skb_off: usize,
        len: usize,
    ) -> Result {
        skb.check_range(skb_off, len)?;
        let mut ret = Ok(());
        self.active(gen)?.pieces(off, len, |addr, at, n| {
            if ret.is_ok() {
                // SAFETY: As in `write()`, `addr` is the kernel virtual address of `n` bytes the
                // consumer mapped and keeps mapped while `gen` is active; it is not memory Rust
                // holds a reference to. `skb_off + at + n <= skb_off + len` (checked above).
                ret = unsafe {
                    skb.copy_to_raw(skb_off.saturating_add(at), addr as usize as *mut u8, n)
                };
            }
        })?;
        ret
    }

    /// Copies bytes `[off, off + dst.len())` of the registered mapping of generation `gen`
    /// into `dst`. Same rules as [`PageList::write`].
    pub fn read(&self, gen: u64, off: u64, dst: &mut [u8]) -> Result {
        let p = dst.as_mut_ptr();
        self.active(gen)?.pieces(off, dst.len(), |addr, at, n| {
            // SAFETY: As in `write()`; `[at, at + n)` is within `dst`, which we borrow mutably.
            unsafe { core::ptr::copy_nonoverlapping(addr as usize as *const u8, p.add(at), n) }
        })
    }

    /// Stages a mapping of `buf`, with pages of `page_size` bytes, at I/O virtual address
    /// `iova`, as `map_mr_sg` would for a scatterlist of that buffer. The list keeps the buffer
    /// until it is dropped. For KUnit tests of drivers; does not sleep.
    #[cfg(CONFIG_KUNIT)]
    pub fn map_owned(&mut self, buf: KVec<u8>, page_size: u32) -> Result {
        self.apply(MapStep(Step::Begin(page_size)))?;
        let start = buf.as_ptr() as usize as u64;
        let len = buf.len() as u64;
        // Atomic: drivers keep the list under a spinlock.
        self.owned.push(buf, GFP_ATOMIC)?;
        let mask = !(u64::from(page_size) - 1);
        let mut page = start & mask;
        let mut mapped = 0u64;
        while page < start + len {
            // INVARIANT: Pages of `buf`, which `owned` keeps alive; only its bytes are mapped.
            if self.apply(MapStep(Step::Page(page))).is_err() {
                break;
            }
            page += u64::from(page_size);
            mapped = (page - start).min(len);
        }
        self.apply(MapStep(Step::End {
            iova: start,
            length: mapped,
        }))
    }
}

/// The capability to copy to and from the kernel virtual addresses a kernel consumer places in
/// the SGEs of its DMA MR (`pd->local_dma_lkey`).
///
/// Software providers use `CONFIG_INFINIBAND_VIRT_DMA`: `ib_dma_map_*()` return kernel virtual
/// addresses (`ib_virt_dma_to_ptr()`), and the address of an SGE whose lkey is the DMA MR of a
/// kernel PD, or a remote access to it through `pd->unsafe_global_rkey`, is such an address
/// (C siw: `mem == NULL` in `siw_check_sge()` and the copies of siw_qp_tx.c/siw_qp_rx.c).
///
/// Only the abstraction creates this capability: it hands one to [`Driver::get_dma_mr`] when
/// ib_core creates the DMA MR of a *kernel* PD (`__ib_alloc_pd()`; `pd->uobject` is NULL). It is
/// neither `Clone` nor `Copy`, so a driver can only keep it with that one region; user PDs never
/// get one, so user memory keys can never reach kernel virtual addresses.
///
/// Copies check that the first and the last byte of the range, and the first byte of every page
/// in between, are direct-mapped kernel memory (`virt_addr_valid()`), fail on overflow, and never
/// sleep (they may run in softirq context or under a spinlock).
///
/// # Invariants
///
/// The value was created by the abstraction for the DMA MR of a kernel PD of a device using
/// virtual DMA (or, for KUnit, inside a KUnit test). Under the verbs contract, every address a
/// kernel consumer passes with that MR's keys is the kernel virtual address of memory it owns
/// and keeps mapped and allocated until the work request that names it completes (remote
/// accesses: while the consumer has advertised the address).
pub struct KernelVa {
    _private: (),
}

impl KernelVa {
    /// Creates the capability for the DMA MR of PD `pd`, or `None` for a user PD or a device
    /// that does not use virtual DMA.
    ///
    /// # Safety
    ///
    /// `pd` is a live PD, being passed to the `get_dma_mr` op.
    pub(crate) unsafe fn for_dma_mr(pd: *mut bindings::ib_pd) -> Option<Self> {
        // SAFETY: `pd` is live (safety requirements).
        let (kernel, dev) = unsafe { (bindings::rdma_pd_is_kernel(pd), (*pd).device) };
        // SAFETY: `dev` is the live device of a live PD.
        if !kernel || !unsafe { bindings::ib_uses_virt_dma(dev) } {
            return None;
        }
        // INVARIANT: The DMA MR of a kernel PD of a virtual-DMA device.
        Some(Self { _private: () })
    }

    /// Returns the capability inside a KUnit test (for tests of drivers, which copy to their
    /// own buffers), `None` elsewhere.
    #[cfg(CONFIG_KUNIT)]
    pub fn for_kunit() -> Option<Self> {
        // INVARIANT: Only inside a KUnit test.
        crate::kunit::in_kunit_test().then_some(Self { _private: () })
    }

    /// Checks `[addr, addr + len)` (`len > 0`) and returns it as a pointer.
    ///
    /// Fails with `EINVAL` if the range wraps or does not fit a pointer and `EFAULT` if a page
    /// of it is not direct-mapped kernel memory.
    fn check(addr: u64, len: usize) -> Result<usize> {
        let start = usize::try_from(addr).map_err(|_| EINVAL)?;
        let last = start.checked_add(len - 1).ok_or(EINVAL)?;
        let mut at = start;
        loop {
            // SAFETY: `virt_addr_valid()` only computes on the address.
            if !unsafe { bindings::virt_addr_valid(at) } {
                return Err(EFAULT);
            }
            if at == last {
                return Ok(start);
            }
            // The first byte of the next page, or the last byte of the range.
            at = (at | (crate::page::PAGE_SIZE - 1))
                .checked_add(1)
                .map_or(last, |next| next.min(last));
        }
    }

    /// Copies `src` to kernel virtual address `addr`. Does not sleep.
    ///
    /// Fails with `EINVAL` if the range wraps and `EFAULT` if it is not direct-mapped kernel
    /// memory; nothing is copied then.
    pub fn write(&self, addr: u64, src: &[u8]) -> Result {
        if src.is_empty() {
            return Ok(());
        }
        let dst = Self::check(addr, src.len())?;
        // SAFETY: By the type invariant `addr` names memory of a kernel consumer that stays
        // allocated while the work request accessing it is in progress; `check()` verified that
        // all `src.len()` bytes are direct-mapped kernel memory. `src` is a distinct Rust
        // borrow, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    /// Copies `len` received bytes of `skb`, starting at `skb_off`, to kernel virtual address
    /// `addr` (`skb_copy_bits()`, no staging copy). Same rules as [`KernelVa::write`]; also
    /// `EINVAL` if the range is not inside `skb`.
    pub fn write_from_skb(
        &self,
        addr: u64,
        skb: &SkbData<'_>,
        skb_off: usize,
        len: usize,
    ) -> Result {
        skb.check_range(skb_off, len)?;
        if len == 0 {
            return Ok(());
        }
        let dst = Self::check(addr, len)?;
        // SAFETY: As in `write()`: by the type invariant `addr` names memory of a kernel
        // consumer that stays allocated while the work request accessing it is in progress, and
        // `check()` verified that all `len` bytes are direct-mapped kernel memory. The memory is
        // the consumer's, not borrowed by Rust code.
        unsafe { skb.copy_to_raw(skb_off, dst as *mut u8, len) }
    }

    /// Copies `dst.len()` bytes from kernel virtual address `addr` into `dst`. Same rules as
    /// [`KernelVa::write`].
    pub fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        if dst.is_empty() {
            return Ok(());
        }
        let src = Self::check(addr, dst.len())?;
        // SAFETY: As in `write()`; `dst` is borrowed mutably, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
}

/// The `IB_WR_REG_MR` parameters of a send work request, with the MR resolved.
pub struct RegMr<'a, T: Driver> {
    /// The MR to register.
    pub mr: &'a Mr<T>,
    /// The new key (`lkey` and `rkey`) of the MR; only its low 8 bits may differ from the MR's.
    pub key: u32,
    /// Access flags (`IB_ACCESS_*`).
    pub access: i32,
    /// The I/O virtual address of the registration (`ib_mr.iova`, set by `ib_map_mr_sg()` and
    /// possibly changed by the consumer, e.g. to 0 for zero-based registrations).
    pub iova: u64,
}

impl SendWr {
    /// Returns the parameters of an `IB_WR_REG_MR` work request if its MR belongs to `dev`;
    /// `None` for other opcodes or a foreign MR.
    pub fn reg_mr<'a, T: Driver>(&'a self, dev: &Device<T>) -> Option<RegMr<'a, T>> {
        let r = self.reg()?;
        if r.mr.is_null() {
            return None;
        }
        // SAFETY: The consumer's contract is that the MR of a posted `IB_WR_REG_MR` is live for
        // the duration of the post (the lifetime of `self`).
        let (device, iova) = unsafe { ((*r.mr).device, (*r.mr).iova) };
        if device != dev.as_raw() {
            return None;
        }
        // SAFETY: Every MR of a `Device<T>` is created by one of its MR ops, which all allocate
        // an `Mr<T>` (`Mr::new_raw`); it is live for `'a` (see above).
        let mr = unsafe { Mr::<T>::from_raw(r.mr) };
        Some(RegMr {
            mr,
            key: r.key,
            access: r.access,
            iova,
        })
    }
}

/// The `alloc_mr` op.
///
/// # Safety
///
/// `pd` is a live PD of a `Device<T>`.
pub(crate) unsafe extern "C" fn alloc_mr_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    // SAFETY: Per the safety requirements.
    let obj = unsafe { super::object::Pd::<T>::from_raw(pd) };
    match Mr::<T>::new_raw(T::alloc_mr(obj, mr_type, max_num_sg)) {
        Ok(mr) => mr,
        Err(e) => e.to_ptr(),
    }
}

/// The `set_page` callback of `ib_sg_to_pages()`.
///
/// # Safety
///
/// `mr` is a live MR of a `Device<T>`, being mapped by [`map_mr_sg_callback`].
unsafe extern "C" fn set_page_callback<T: Driver>(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: Per the safety requirements.
    let obj = unsafe { Mr::<T>::from_raw(mr) };
    match T::map_mr_step(obj, MapStep(Step::Page(addr))) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `map_mr_sg` op: maps the largest prefix of a DMA-mapped scatterlist with
/// `ib_sg_to_pages()`, handing each step to [`Driver::map_mr_step`]. Returns the number of
/// elements mapped, as `ib_sg_to_pages()`.
///
/// # Safety
///
/// `mr` is a live MR of a `Device<T>`; `sg` holds `sg_nents` elements DMA-mapped for the
/// device; `sg_offset` is NULL or valid.
pub(crate) unsafe extern "C" fn map_mr_sg_callback<T: Driver>(
    mr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut c_uint,
) -> c_int {
    // SAFETY: Per the safety requirements.
    let obj = unsafe { Mr::<T>::from_raw(mr) };
    // SAFETY: `mr` is live; ib_core set `page_size` and `device`.
    let (page_size, dev) = unsafe { ((*mr).page_size, (*mr).device) };
    // SAFETY: `dev` is a live device.
    if !unsafe { bindings::ib_uses_virt_dma(dev) } {
        // Page addresses would be bus addresses, which `PageList` cannot copy to.
        return EOPNOTSUPP.to_errno();
    }
    if let Err(e) = T::map_mr_step(obj, MapStep(Step::Begin(page_size))) {
        return e.to_errno();
    }
    // SAFETY: Per the safety requirements; the callback matches `T`, the driver of `mr`.
    let n = unsafe {
        bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(set_page_callback::<T>))
    };
    // SAFETY: `ib_sg_to_pages()` set `iova` and `length`; `mr` is live.
    let (iova, length) = unsafe { ((*mr).iova, (*mr).length) };
    // Only a complete mapping can be registered: consumers treat a partial one as an error,
    // and `ib_sg_to_pages()` leaves no usable length after a failed `set_page`.
    let length = if n > 0 && n == sg_nents { length } else { 0 };
    if let Err(e) = T::map_mr_step(obj, MapStep(Step::End { iova, length })) {
        return e.to_errno();
    }
    n
}

#[macros::kunit_tests(rust_rdma_mr)]
mod tests {
    use super::*;

    /// An `ib_mr` followed by the page list its `set_page` callback fills, as a driver's MR.
    #[repr(C)]
    struct Harness {
        mr: bindings::ib_mr,
        list: PageList,
    }

    /// The `set_page` callback of the harness.
    ///
    /// # Safety
    ///
    /// `mr` is the `mr` field of a live `Harness` that nothing else accesses meanwhile.
    unsafe extern "C" fn set_page(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
        // SAFETY: `mr` is at offset 0 of a live `Harness` (`repr(C)`), per the requirements.
        let list = unsafe { &mut (*mr.cast::<Harness>()).list };
        match list.apply(MapStep(Step::Page(addr))) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// Maps `segs` (address, length; virtual DMA addresses) with `ib_sg_to_pages()` into a new
    /// list of `max` pages of `page_size` bytes, as the `map_mr_sg` op does, and activates it.
    fn map(segs: &[(usize, u32)], page_size: u32, max: u32) -> Result<(KBox<Harness>, c_int)> {
        let mut h = KBox::new(
            Harness {
                mr: pin_init::zeroed(),
                list: PageList::new(max)?,
            },
            GFP_KERNEL,
        )?;
        let mut sgl = KVec::<bindings::scatterlist>::with_capacity(segs.len(), GFP_KERNEL)?;
        for _ in segs {
            sgl.push(pin_init::zeroed(), GFP_KERNEL)?;
        }
        let n = c_int::try_from(segs.len())?;
        // SAFETY: `sgl` holds `n` entries.
        unsafe { bindings::sg_init_table(sgl.as_mut_ptr(), n as c_uint) };
        for (sg, (addr, len)) in sgl.iter_mut().zip(segs) {
            sg.dma_address = *addr as u64;
            sg.dma_length = *len;
            sg.length = *len;
        }
        h.mr.page_size = page_size;
        h.list.apply(MapStep(Step::Begin(page_size)))?;
        let mr = &raw mut h.mr;
        // SAFETY: `mr` is the `mr` of the live harness `h`, not otherwise used during the
        // call; `sgl` is an initialised table of `n` entries.
        let ret = unsafe {
            bindings::ib_sg_to_pages(
                mr,
                sgl.as_mut_ptr(),
                n,
                core::ptr::null_mut(),
                Some(set_page),
            )
        };
        let length = if ret == n { h.mr.length } else { 0 };
        let iova = h.mr.iova;
        h.list.apply(MapStep(Step::End { iova, length }))?;
        Ok((h, ret))
    }

    fn pattern(len: usize, seed: u8) -> Result<KVec<u8>> {
        let mut v = KVec::with_capacity(len, GFP_KERNEL)?;
        for i in 0..len {
            v.push((i as u8).wrapping_mul(7).wrapping_add(seed), GFP_KERNEL)?;
        }
        Ok(v)
    }

    #[test]
    fn one_element() -> Result {
        let mut buf = pattern(10000, 1)?;
        let addr = buf.as_ptr() as usize;
        let (mut h, n) = map(&[(addr + 5, 9000)], 4096, 4)?;
        assert_eq!(n, 1);
        assert_eq!(h.list.staged_len(), 9000);
        let gen = h.list.activate()?;
        let mut back = KVec::from_elem(0u8, 9000, GFP_KERNEL)?;
        h.list.read(gen, 0, &mut back)?;
        assert!(back[..] == buf[5..9005]);
        // A write across a page boundary lands in the buffer.
        h.list.write(gen, 4000, &[0xee; 200])?;
        assert!(buf[4005..4205].iter().all(|b| *b == 0xee));
        assert_eq!(buf[4004], 4004u32.wrapping_mul(7).wrapping_add(1) as u8);
        assert_eq!(h.list.write(gen, 8999, &[0; 2]), Err(EINVAL));
        h.list.deactivate();
        assert_eq!(h.list.read(gen, 0, &mut back[..1]), Err(ENOENT));
        buf.clear();
        Ok(())
    }

    #[test]
    fn kernel_va_copies() -> Result {
        let kva = KernelVa::for_kunit().ok_or(EINVAL)?;
        // Across a page boundary of a kmalloc'ed buffer.
        let mut buf = pattern(3 * 4096, 4)?;
        let addr = buf.as_ptr() as usize as u64;
        kva.write(addr + 4000, &[0x5a; 300])?;
        assert!(buf[4000..4300].iter().all(|b| *b == 0x5a));
        assert_eq!(buf[3999], 3999u32.wrapping_mul(7).wrapping_add(4) as u8);
        assert_eq!(buf[4300], 4300u32.wrapping_mul(7).wrapping_add(4) as u8);
        let mut back = [0u8; 8];
        kva.read(addr + 4296, &mut back)?;
        assert_eq!(back[..4], [0x5a; 4]);
        assert_eq!(back[4], buf[4300]);
        // Empty copies touch nothing, even at a bad address.
        kva.write(0, &[])?;
        // User, NULL, wrapping and non-direct-map addresses are refused, and nothing is copied.
        assert_eq!(kva.write(0x1000, &[1; 4]), Err(EFAULT));
        assert_eq!(kva.read(0, &mut back), Err(EFAULT));
        assert_eq!(kva.write(u64::MAX - 2, &[1; 4]), Err(EINVAL));
        assert_eq!(kva.read(u64::MAX, &mut back), Err(EINVAL));
        // vmalloc memory is not direct-mapped: refused.
        let v = VBox::new([7u8; 64], GFP_KERNEL)?;
        assert_eq!(kva.read(v.as_ptr() as usize as u64, &mut back), Err(EFAULT));
        buf.clear();
        Ok(())
    }

    #[test]
    fn two_elements_and_overflow() -> Result {
        // kmalloc() aligns power-of-two sizes naturally: both buffers are page aligned.
        let a = pattern(8192, 2)?;
        let b = pattern(8192, 3)?;
        let (pa, pb) = (a.as_ptr() as usize, b.as_ptr() as usize);
        assert_eq!((pa | pb) % 4096, 0);
        // a[100..8192] ends on a page boundary, b[0..5000] starts on one: four pages.
        let (mut h, n) = map(&[(pa + 100, 8092), (pb, 5000)], 4096, 4)?;
        assert_eq!(n, 2);
        assert_eq!(h.list.staged_len(), 13092);
        let gen = h.list.activate()?;
        let mut back = KVec::from_elem(0u8, 13092, GFP_KERNEL)?;
        h.list.read(gen, 0, &mut back)?;
        assert!(back[..8092] == a[100..]);
        assert!(back[8092..] == b[..5000]);
        // Three pages cannot hold it: the mapping stops early and cannot be registered.
        let (mut h3, n3) = map(&[(pa + 100, 8092), (pb, 5000)], 4096, 3)?;
        assert_eq!(n3, 1);
        assert_eq!(h3.list.staged_len(), 0);
        assert_eq!(h3.list.activate(), Err(EINVAL));
        Ok(())
    }
}
