// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use super::{
    device::{
        Device,
        Driver, //
    },
    object::{
        udata_opt,
        Object,
        PdKind, //
    },
    udata::Udata,
    vtable::VTable,
};
use crate::{
    bindings,
    error::from_result,
    prelude::*, //
};

/// A `struct ib_pd` with the driver's [`Driver::Pd`] data.
pub type Pd<T> = Object<T, PdKind>;

/// The operations of a protection domain; implemented by the driver's per-PD data.
#[vtable]
pub trait Operations: Sized + Send + Sync {
    /// The driver.
    type Driver: Driver;

    /// Creates the data of a new protection domain. `udata` is `None` for kernel callers.
    fn alloc(dev: &Device<Self::Driver>, udata: Option<&Udata>) -> impl PinInit<Self, Error>;

    /// Called before the data of a protection domain is dropped.
    fn dealloc(_pd: &Pd<Self::Driver>, _udata: Option<&Udata>) {}
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `pd` was allocated by ib_core with `size_ib_pd` bytes, its `device` field is a live
    /// [`Device<T>`] and its driver part is uninitialised; `udata` is NULL or valid.
    pub(super) unsafe extern "C" fn alloc_pd_callback(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (dev, udata) = unsafe { (Device::<T>::from_raw((*pd).device), udata_opt(udata)) };
            let init = <T::Pd as Operations>::alloc(dev, udata);
            // SAFETY: Per the safety requirements.
            unsafe { Pd::<T>::init_data(pd, init) }?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `pd` was successfully initialised by `alloc_pd_callback` and is not used by ib_core after
    /// this returns 0 (it frees it); `udata` is NULL or valid.
    pub(super) unsafe extern "C" fn dealloc_pd_callback(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Pd::<T>::from_raw(pd), udata_opt(udata)) };
        <T::Pd as Operations>::dealloc(obj, udata);
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Pd::<T>::drop_data(pd) };
        0
    }
}
