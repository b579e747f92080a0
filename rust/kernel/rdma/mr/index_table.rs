// SPDX-License-Identifier: GPL-2.0

//! A table from `u32` indices to reference-counted entries, for keys looked up on the data path.
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h).

use crate::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        rcu,
        Arc,
        ArcBorrow, //
    },
    xarray::{
        AllocKind,
        XArray, //
    },
};
use core::ops::RangeInclusive;

/// A table from `u32` indices to reference-counted entries, with cyclic index allocation.
///
/// It is an allocating [`XArray`] of [`Arc`]s. Lookups are lock-free: they walk the radix tree
/// under RCU ([`XArray::get_rcu`]), so they are O(1), safe from any context, and the entry they
/// find stays alive for as long as the RCU read-side critical section, or for as long as the
/// reference they may take. Removal waits for an RCU grace period before it gives the table's
/// reference away ([`IndexTable::remove`]). Indices are allocated cyclically
/// ([`Guard::alloc_cyclic`](crate::xarray::Guard::alloc_cyclic)), so an index is not reused until
/// the whole range has been used.
///
/// Allocation and removal take the XArray's lock, without disabling interrupts or bottom halves:
/// they are for process context (the lookups are for any).
///
/// # Invariants
///
/// An entry removed from `xa` is dropped only after an RCU grace period has passed since its
/// removal. `next` (the next index to try) is only changed with the XArray's lock held.
pub struct IndexTable<T: Send + Sync + 'static> {
    xa: Pin<KBox<XArray<Arc<T>>>>,
    next: Atomic<u32>,
}

impl<T: Send + Sync + 'static> IndexTable<T> {
    /// Creates an empty table; allocation starts at index `first`. Index 0 is never allocated.
    pub fn new(first: u32) -> Result<Self> {
        // INVARIANT: Empty.
        Ok(Self {
            xa: KBox::pin_init(XArray::new(AllocKind::Alloc1), GFP_KERNEL)?,
            next: Atomic::new(first),
        })
    }

    /// Stores `value` at a free index in `range`, allocated cyclically, and returns the index.
    ///
    /// Fails with `EBUSY` if every index of `range` is in use and `ENOMEM` on allocation failure.
    /// Process context: may sleep.
    pub fn alloc(&self, value: Arc<T>, range: RangeInclusive<u32>) -> Result<u32> {
        let mut guard = self.xa.lock();
        let mut next = self.next.load(Relaxed);
        let index = guard.alloc_cyclic(value, range, &mut next, GFP_KERNEL)?;
        // INVARIANT: The lock is held.
        self.next.store(next, Relaxed);
        Ok(index)
    }

    /// Returns a reference to the entry at `index`, if any. Lock-free, any context.
    pub fn get(&self, index: u32) -> Option<Arc<T>> {
        let rcu = rcu::read_lock();
        self.get_in(&rcu, index).map(Arc::from)
    }

    /// Returns the entry at `index`, if any, for as long as the RCU read-side critical section
    /// of `rcu` lasts: no reference is taken, so the entry must not be kept beyond it (nor can
    /// it be: the borrow ends with the guard). Lock-free, any context.
    #[inline]
    pub fn get_in<'a>(&'a self, rcu: &'a rcu::Guard, index: u32) -> Option<ArcBorrow<'a, T>> {
        // SAFETY: Removed entries are dropped after a grace period (type invariant).
        unsafe { self.xa.get_rcu(rcu, index as usize) }
    }

    /// Removes the entry at `index` and returns it, once no lookup that may have found it can
    /// still be using it without a reference (after an RCU grace period). Process context: may
    /// sleep.
    pub fn remove(&self, index: u32) -> Option<Arc<T>> {
        let entry = self.xa.lock().remove(index as usize)?;
        // Lookups that found the entry before it was removed are in RCU read-side critical
        // sections.
        rcu::synchronize_rcu();
        // INVARIANT: A grace period has passed since the removal.
        Some(entry)
    }
}
