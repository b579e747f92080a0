// SPDX-License-Identifier: GPL-2.0

//! An [`Arc`] slot that readers access under RCU, without a lock.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h).
//!
//! An [`RcuArc`] holds an `Option<Arc<T>>`. Readers borrow the current value for as long as an
//! RCU read-side critical section lasts ([`RcuArc::get`]): one load, no lock and no reference
//! count change. This suits a hot path that finds an object through a pointer another context
//! may replace, such as a socket callback finding its connection. Writers replace the value
//! with [`RcuArc::replace`], which hands the old value back only once an RCU grace period has
//! passed (`rcu_assign_pointer()` and `synchronize_rcu()`): no reader can still be using it.

use crate::sync::{
    atomic::{
        Acquire,
        Atomic,
        Relaxed,
        Release, //
    },
    rcu,
    Arc,
    ArcBorrow, //
};
use core::{
    marker::PhantomData,
    ptr, //
};

/// An `Option<Arc<T>>` that is read under RCU and replaced by writers that may sleep.
///
/// # Examples
///
/// ```
/// use kernel::sync::{rcu, Arc, RcuArc};
///
/// let slot = RcuArc::new(Some(Arc::new(10u32, GFP_KERNEL)?));
/// {
///     let guard = rcu::read_lock();
///     assert_eq!(slot.get(&guard).map(|v| *v), Some(10));
/// }
/// let old = slot.replace(None);
/// assert_eq!(old.map(|v| *v), Some(10));
/// assert!(slot.clone_value().is_none());
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `ptr` is null or was produced by [`Arc::into_raw`], and the slot owns that reference. When
/// `ptr` changes from a non-null value, the slot keeps owning the old reference until an RCU
/// grace period has passed since the change.
pub struct RcuArc<T: Send + Sync> {
    ptr: Atomic<*const T>,
    _p: PhantomData<Option<Arc<T>>>,
}

// SAFETY: The slot owns an `Arc<T>`, which may be sent to another thread for `T: Send + Sync`.
unsafe impl<T: Send + Sync> Send for RcuArc<T> {}

// SAFETY: `&RcuArc<T>` only gives out `ArcBorrow<'_, T>` and `Arc<T>` clones, which may be used
// from any thread for `T: Send + Sync`; the pointer is only accessed atomically.
unsafe impl<T: Send + Sync> Sync for RcuArc<T> {}

fn into_ptr<T>(v: Option<Arc<T>>) -> *const T {
    v.map_or(ptr::null(), Arc::into_raw)
}

impl<T: Send + Sync> RcuArc<T> {
    /// Creates a slot holding `v`.
    pub fn new(v: Option<Arc<T>>) -> Self {
        // INVARIANT: `into_ptr` gives null or a pointer from `Arc::into_raw`, now owned here.
        Self {
            ptr: Atomic::new(into_ptr(v)),
            _p: PhantomData,
        }
    }

    /// Returns the current value, borrowed for as long as the RCU read-side critical section
    /// of `guard` lasts. Any context.
    #[inline]
    pub fn get<'a>(&'a self, guard: &'a rcu::Guard) -> Option<ArcBorrow<'a, T>> {
        let _ = guard;
        let p = self.ptr.load(Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` came from `Arc::into_raw` and was owned by the slot when it was loaded,
        // within the critical section of `guard` (type invariant). If it has been replaced
        // since, the slot keeps owning it until a grace period has passed, which cannot happen
        // before that critical section ends; the borrow ends with `guard` ('a) at the latest.
        Some(unsafe { ArcBorrow::from_raw(p) })
    }

    /// Returns a new reference to the current value. Any context.
    #[inline]
    pub fn clone_value(&self) -> Option<Arc<T>> {
        let guard = rcu::read_lock();
        self.get(&guard).map(Arc::from)
    }

    /// Stores `v` and returns the previous value, once no reader can be using it any more.
    ///
    /// If the slot held a value, waits for an RCU grace period: process context, may sleep.
    pub fn replace(&self, v: Option<Arc<T>>) -> Option<Arc<T>> {
        // `Release`: a reader that loads the new pointer sees the value it points to.
        let old = self.ptr.xchg(into_ptr(v), Release);
        if old.is_null() {
            return None;
        }
        // Readers that loaded `old` are in RCU read-side critical sections.
        rcu::synchronize_rcu();
        // SAFETY: `old` came from `Arc::into_raw` and was owned by the slot (type invariant); a
        // grace period has passed since it was replaced, so no reader borrows it: the
        // reference is ours to return.
        Some(unsafe { Arc::from_raw(old) })
    }
}

impl<T: Send + Sync> Drop for RcuArc<T> {
    fn drop(&mut self) {
        let p = self.ptr.load(Relaxed);
        if !p.is_null() {
            // SAFETY: `p` came from `Arc::into_raw` and is owned by the slot (type invariant).
            // Borrows from `get` live no longer than `&self`, so none is left.
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}

#[macros::kunit_tests(rust_sync_rcu_arc)]
mod tests {
    use super::*;
    use crate::prelude::*;
    use crate::sync::atomic::Atomic;

    /// Counts its drops in `drops`.
    struct Tracked<'a> {
        value: u32,
        drops: &'a Atomic<u32>,
    }

    impl Drop for Tracked<'_> {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn get_replace_clone() -> Result {
        let drops = Atomic::new(0u32);
        let slot = RcuArc::new(None);
        assert!(slot.clone_value().is_none());
        assert!(slot
            .replace(Some(Arc::new(
                Tracked {
                    value: 1,
                    drops: &drops
                },
                GFP_KERNEL
            )?))
            .is_none());
        {
            let guard = rcu::read_lock();
            assert_eq!(slot.get(&guard).map(|t| t.value), Some(1));
        }
        let held = slot.clone_value();
        assert_eq!(held.as_ref().map(|t| t.value), Some(1));
        // The old value comes back (after a grace period), still alive while `held` is.
        let old = slot.replace(Some(Arc::new(
            Tracked {
                value: 2,
                drops: &drops,
            },
            GFP_KERNEL,
        )?));
        assert_eq!(old.as_ref().map(|t| t.value), Some(1));
        drop(old);
        assert_eq!(drops.load(Relaxed), 0);
        drop(held);
        assert_eq!(drops.load(Relaxed), 1);
        assert_eq!(slot.clone_value().map(|t| t.value), Some(2));
        // Dropping the slot drops its value.
        drop(slot);
        assert_eq!(drops.load(Relaxed), 2);
        Ok(())
    }
}
