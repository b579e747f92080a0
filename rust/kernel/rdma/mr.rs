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
//!   softirq context.

use crate::{
    bindings,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    types::Opaque, //
};
use core::{
    cell::UnsafeCell,
    ops::RangeInclusive, //
};

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
/// Lookups take the XArray lock with interrupts disabled and take a reference on the entry, so
/// they are O(1) (a radix tree walk), safe from any context, and return an entry that stays
/// alive even if it is removed concurrently. Indices are allocated cyclically (`xa_alloc_cyclic`),
/// so an index is not reused until the whole range has been used.
///
/// # Invariants
///
/// - `raw.xa` is an XArray initialised with `XA_FLAGS_ALLOC1 | XA_FLAGS_LOCK_IRQ`.
/// - Every entry of `raw.xa` was produced by `Arc::<T>::into_raw` and is owned by the table.
/// - `raw.next` is only accessed with the XArray lock held.
pub struct IndexTable<T: Send + Sync> {
    raw: Pin<KBox<RawTable>>,
    _p: core::marker::PhantomData<Arc<T>>,
}

// SAFETY: The table owns `Arc<T>`s, which are `Send` for `T: Send + Sync`; the XArray may be used
// from any thread.
unsafe impl<T: Send + Sync> Send for IndexTable<T> {}

// SAFETY: All methods take the XArray lock; `&IndexTable` only hands out `Arc<T>` clones.
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

    /// Returns a reference to the entry at `index`, if any.
    pub fn get(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: `self.xa()` is a valid XArray.
        let flags = unsafe { bindings::xa_lock_irqsave(self.xa()) };
        // SAFETY: `self.xa()` is a valid XArray; `xa_load()` may be called with its lock held.
        let ptr = unsafe { bindings::xa_load(self.xa(), index as usize) };
        let entry = if ptr.is_null() {
            None
        } else {
            // SAFETY: Entries are `Arc<T>`s owned by the table (type invariant), which cannot be
            // removed while we hold the lock, so `ptr` is alive until the clone below holds its
            // own reference.
            Some(unsafe { ArcBorrow::<T>::from_raw(ptr.cast::<T>()) }.into())
        };
        // SAFETY: Locked above with these flags.
        unsafe { bindings::xa_unlock_irqrestore(self.xa(), flags) };
        entry
    }

    /// Removes the entry at `index` and returns it.
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        // SAFETY: `self.xa()` is a valid XArray with an IRQ-safe lock.
        let ptr = unsafe { bindings::xa_erase_irq(self.xa(), index as usize) };
        if ptr.is_null() {
            None
        } else {
            // SAFETY: The entry was owned by the table (type invariant) and is no longer in it.
            Some(unsafe { Arc::from_raw(ptr.cast::<T>()) })
        }
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
