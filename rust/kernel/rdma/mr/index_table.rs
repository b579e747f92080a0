// SPDX-License-Identifier: GPL-2.0

//! A table from `u32` indices to reference-counted entries, for keys looked up on the data path.
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h).

use crate::{
    alloc::kvec::PushError,
    bindings,
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        rcu,
        Arc,
        ArcBorrow,
        Mutex, //
    },
    xarray::{
        AllocKind,
        XArray, //
    }, //
};
use core::ops::RangeInclusive;

/// How many entries [`IndexTable::retire`] keeps waiting for their grace period at most.
const RETIRED_MAX: usize = 64;

/// An entry removed by [`IndexTable::retire`], kept until the grace period of `cookie` has
/// passed.
struct Retired<T: Send + Sync + 'static> {
    /// From `start_poll_synchronize_rcu()`, taken after the entry's removal.
    cookie: ffi::c_ulong,
    /// Never read: held so that the entry is dropped only with this record.
    _entry: Arc<T>,
}

/// Returns a cookie for a grace period that starts now, and makes sure one starts
/// (`start_poll_synchronize_rcu()`).
fn start_poll() -> ffi::c_ulong {
    // SAFETY: No requirements; process context (the callers may sleep).
    unsafe { bindings::start_poll_synchronize_rcu() }
}

/// Returns whether a full grace period has passed since `cookie` was taken
/// (`poll_state_synchronize_rcu()`).
fn poll_done(cookie: ffi::c_ulong) -> bool {
    // SAFETY: No requirements: any value is accepted, and a cookie from `start_poll` is one.
    unsafe { bindings::poll_state_synchronize_rcu(cookie) }
}

/// A table from `u32` indices to reference-counted entries, with cyclic index allocation.
///
/// It is an allocating [`XArray`] of [`Arc`]s. Lookups are lock-free: they walk the radix tree
/// under RCU ([`XArray::get_rcu`]), so they are O(1), safe from any context, and the entry they
/// find stays alive for as long as the RCU read-side critical section, or for as long as the
/// reference they may take. Removal waits for an RCU grace period before it gives the table's
/// reference away ([`IndexTable::remove`]), or keeps the entry until one has passed
/// ([`IndexTable::retire`], for removals in bursts). Indices are allocated cyclically
/// ([`Guard::alloc_cyclic`](crate::xarray::Guard::alloc_cyclic)), so an index is not reused until
/// the whole range has been used.
///
/// Allocation and removal take the XArray's lock, without disabling interrupts or bottom halves:
/// they are for process context (the lookups are for any).
///
/// # Invariants
///
/// An entry removed from `xa` is dropped only after an RCU grace period has passed since its
/// removal. `next` (the next index to try) is only changed with the XArray's lock held. Each
/// entry in `retired` was removed from `xa` before its cookie was taken; the cookies were taken
/// in the order of the vector (oldest first), which holds at most `RETIRED_MAX` entries.
pub struct IndexTable<T: Send + Sync + 'static> {
    xa: Pin<KBox<XArray<Arc<T>>>>,
    next: Atomic<u32>,
    /// Entries removed by [`IndexTable::retire`] whose grace period may not have passed yet.
    retired: Pin<KBox<Mutex<KVec<Retired<T>>>>>,
    /// How many times a removal waited for a grace period ([`IndexTable::grace_period_waits`]).
    waits: Atomic<u32>,
}

impl<T: Send + Sync + 'static> IndexTable<T> {
    /// Creates an empty table; allocation starts at index `first`. Index 0 is never allocated.
    pub fn new(first: u32) -> Result<Self> {
        // INVARIANT: Empty.
        Ok(Self {
            xa: KBox::pin_init(XArray::new(AllocKind::Alloc1), GFP_KERNEL)?,
            next: Atomic::new(first),
            retired: KBox::pin_init(new_mutex!(KVec::new(), "IndexTable::retired"), GFP_KERNEL)?,
            waits: Atomic::new(0),
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
        self.waits.fetch_add(1, Relaxed);
        // INVARIANT: A grace period has passed since the removal.
        Some(entry)
    }

    /// Removes the entry at `index` without waiting for an RCU grace period and returns its
    /// address, for identity checks only (the entry may be freed at any time afterwards).
    ///
    /// The table keeps the entry until a grace period has passed since the removal: a later
    /// `retire` drops it once one has, the one that finds `RETIRED_MAX` (64) entries waiting
    /// waits for one (as does a `retire` that cannot allocate), and dropping the table waits for
    /// one if entries are left. A burst of `n` removals thus waits for about `n / 64` grace
    /// periods instead of `n` ([`IndexTable::remove`]), as `kfree_rcu()` does for C tables. Use
    /// it where the caller needs no grace period of its own. Process context: may sleep; entries
    /// are dropped in process context.
    pub fn retire(&self, index: u32) -> Option<*const T> {
        let entry = self.xa.lock().remove(index as usize)?;
        let ptr = Arc::as_ptr(&entry);
        let mut retired = self.retired.lock();
        // Every waiting entry was removed before the newest one's cookie was taken: once its
        // grace period has passed, theirs have too.
        if retired.last().is_some_and(|r| poll_done(r.cookie)) {
            retired.clear();
        }
        if retired.len() >= RETIRED_MAX || retired.reserve(1, GFP_KERNEL).is_err() {
            rcu::synchronize_rcu();
            self.waits.fetch_add(1, Relaxed);
            // INVARIANT: A grace period has passed since every removal, this one's included.
            retired.clear();
            drop(entry);
            return Some(ptr);
        }
        // INVARIANT: After the removal, under the lock, so after the cookies already waiting.
        let cookie = start_poll();
        if let Err(PushError(r)) = retired.push_within_capacity(Retired {
            cookie,
            _entry: entry,
        }) {
            // Cannot happen: room was reserved.
            rcu::synchronize_rcu();
            self.waits.fetch_add(1, Relaxed);
            drop(r);
        }
        Some(ptr)
    }

    /// Returns how many times [`IndexTable::remove`] and [`IndexTable::retire`] waited for an
    /// RCU grace period, for tests.
    pub fn grace_period_waits(&self) -> u32 {
        self.waits.load(Relaxed)
    }
}

impl<T: Send + Sync + 'static> Drop for IndexTable<T> {
    fn drop(&mut self) {
        let mut retired = self.retired.lock();
        if !retired.is_empty() {
            rcu::synchronize_rcu();
            // INVARIANT: A grace period has passed since every removal.
            retired.clear();
        }
    }
}
