// SPDX-License-Identifier: GPL-2.0

//! A table from `u32` indices to reference-counted entries, for keys looked up on the data path.
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h).

use crate::{
    bindings,
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
    ops::RangeInclusive, //
};

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
