// SPDX-License-Identifier: GPL-2.0

//! User contexts (`struct ib_ucontext`): a process's open uverbs file, and the mappings of
//! queue memory it makes.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use super::{
    device::{
        Device,
        Driver, //
    },
    mmap,
    object::{
        Object,
        UcontextKind, //
    },
    udata::Udata,
    vtable::VTable,
};
use crate::{
    bindings,
    error::from_result,
    mm::virt::VmaNew,
    prelude::*, //
};

/// A `struct ib_ucontext` with the driver's [`Driver::Ucontext`] data.
pub type Ucontext<T> = Object<T, UcontextKind>;

/// The operations of a user context; implemented by the driver's per-context data.
///
/// A driver that does not implement [`Operations::alloc`] has no user contexts, hence no user
/// space verbs.
#[vtable]
pub trait Operations: Sized + Send + Sync {
    /// The driver.
    type Driver: Driver;

    /// Creates the data of a new user context.
    fn alloc(_dev: &Device<Self::Driver>, _udata: &Udata) -> impl PinInit<Self, Error> {
        // Never called: `HAS_ALLOC` is false unless the driver overrides this method.
        Err::<Self, Error>(EOPNOTSUPP)
    }

    /// Called before the data of a user context is dropped.
    fn dealloc(_uctx: &Ucontext<Self::Driver>) {}

    /// Called when the device is unregistered while a process still holds the user context.
    ///
    /// Implementing this method (it may do nothing) lets ib_core remove the device without
    /// waiting for the processes that use it (`ib_uverbs_remove_one()` in
    /// [`drivers/infiniband/core/uverbs_main.c`](srctree/drivers/infiniband/core/uverbs_main.c)):
    /// uverbs destroys every object of the context through the destroy operations, zaps the
    /// mappings made with `rdma_user_mmap_io()`, then calls this method and
    /// [`Operations::dealloc`]; later verbs calls of the process fail with `EIO`. It also
    /// means an open uverbs file no longer pins the driver's module. The destroy operations must
    /// therefore be able to tear down an object that is in use (a connected QP, for instance).
    /// Mappings of a [`RingBuf`](mmap::RingBuf) ([`Operations::mmap`]'s default) are not
    /// zapped: they stay in the process until it unmaps them, and keep their pages (the
    /// mapping's own page references) after the buffer is freed, but no kernel code reads or
    /// writes those pages any more. Without this method, removing the device blocks until every
    /// process has closed its uverbs file.
    fn disassociate(_uctx: &Ucontext<Self::Driver>) {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Maps queue memory of the context into the calling process (`mmap()` on the uverbs file).
    ///
    /// The default maps the [`RingBuf`](mmap::RingBuf) published to this context whose key is
    /// the mapping's offset ([`mmap::map_ring`]), which is how providers with rings in user
    /// memory (siw's ABI) share them. A driver with another scheme overrides it.
    fn mmap(uctx: &Ucontext<Self::Driver>, vma: &VmaNew) -> Result {
        mmap::map_ring(uctx, vma)
    }
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `uctx` was allocated by ib_core with `size_ib_ucontext` bytes, its `device` field is a
    /// live [`Device<T>`] and its driver part is uninitialised; `udata` is valid.
    pub(super) unsafe extern "C" fn alloc_ucontext_callback(
        uctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (dev, udata) = unsafe {
                (
                    Device::<T>::from_raw((*uctx).device),
                    Udata::from_raw(udata),
                )
            };
            let init = <T::Ucontext as Operations>::alloc(dev, udata);
            // SAFETY: Per the safety requirements.
            unsafe { Ucontext::<T>::init_data(uctx, init) }?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `uctx` was successfully initialised by `alloc_ucontext_callback` and is not used by
    /// ib_core after this returns (it frees it).
    pub(super) unsafe extern "C" fn dealloc_ucontext_callback(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Ucontext::<T>::from_raw(uctx) };
        <T::Ucontext as Operations>::dealloc(obj);
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Ucontext::<T>::drop_data(uctx) };
    }

    /// # Safety
    ///
    /// `uctx` was successfully initialised by `alloc_ucontext_callback` and its data has not
    /// been dropped yet (ib_core calls this before `dealloc_ucontext`).
    pub(super) unsafe extern "C" fn disassociate_ucontext_callback(
        uctx: *mut bindings::ib_ucontext,
    ) {
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Ucontext::<T>::from_raw(uctx) };
        <T::Ucontext as Operations>::disassociate(obj);
    }

    /// # Safety
    ///
    /// `uctx` was successfully initialised by `alloc_ucontext_callback` and its data has not
    /// been dropped yet; `vma` is a mapping being set up by `mmap()` on the context's file.
    pub(super) unsafe extern "C" fn mmap_callback(
        uctx: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements: `uctx` is live for the call, and `vma` is
            // undergoing its initial setup until the op returns.
            let (obj, vma) = unsafe { (Ucontext::<T>::from_raw(uctx), VmaNew::from_raw(vma)) };
            <T::Ucontext as Operations>::mmap(obj, vma)?;
            Ok(0)
        })
    }
}
