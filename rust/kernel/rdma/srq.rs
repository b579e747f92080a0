// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use super::{
    attr::EventType,
    device::{
        Device,
        Driver, //
    },
    object::{
        raw_wrapper,
        udata_opt,
        Object,
        PdKind,
        SrqKind, //
    },
    pd::Pd,
    udata::Udata,
    vtable::VTable,
    wr::{
        PostError,
        RecvWr, //
    },
};
use crate::{
    bindings,
    error::from_result,
    impl_flags,
    prelude::*, //
};

/// A `struct ib_srq` with the driver's [`Driver::Srq`] data.
pub type Srq<T> = Object<T, SrqKind>;

/// The operations of a shared receive queue; implemented by the driver's per-SRQ data.
///
/// A driver without SRQs implements none of the methods: the device then has no SRQ operations.
#[vtable]
pub trait Operations: Sized + Send + Sync {
    /// The driver.
    type Driver: Driver;

    /// Creates the data of a new shared receive queue. The driver may update the attributes in
    /// `attr` to the values it actually provides.
    fn create(
        _dev: &Device<Self::Driver>,
        _attr: &mut SrqInitAttr,
        _udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error> {
        // Never called: `HAS_CREATE` is false unless the driver overrides this method.
        Err::<Self, Error>(EOPNOTSUPP)
    }

    /// Called before the data of a shared receive queue is dropped.
    fn destroy(_srq: &Srq<Self::Driver>, _udata: Option<&Udata>) {}

    /// Modifies the attributes named in `mask` of a shared receive queue.
    fn modify(
        _srq: &Srq<Self::Driver>,
        _attr: &SrqAttrs,
        _mask: SrqAttrMask,
        _udata: Option<&Udata>,
    ) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Returns the attributes of a shared receive queue.
    fn query(_srq: &Srq<Self::Driver>) -> Result<SrqAttrs> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of receive work requests. On failure returns the error and the first
    /// request that was not posted.
    fn post_recv<'a>(
        _srq: &Srq<Self::Driver>,
        _wr: &'a RecvWr,
    ) -> Result<(), PostError<'a, RecvWr>> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

/// SRQ types (`enum ib_srq_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum SrqType {
    /// A plain shared receive queue (`IB_SRQT_BASIC`).
    Basic = bindings::ib_srq_type_IB_SRQT_BASIC,
    /// An XRC SRQ (`IB_SRQT_XRC`).
    Xrc = bindings::ib_srq_type_IB_SRQT_XRC,
    /// A tag matching SRQ (`IB_SRQT_TM`).
    Tm = bindings::ib_srq_type_IB_SRQT_TM,
}

impl TryFrom<u32> for SrqType {
    type Error = Error;

    fn try_from(v: u32) -> Result<Self> {
        Ok(match v {
            bindings::ib_srq_type_IB_SRQT_BASIC => Self::Basic,
            bindings::ib_srq_type_IB_SRQT_XRC => Self::Xrc,
            bindings::ib_srq_type_IB_SRQT_TM => Self::Tm,
            _ => return Err(EINVAL),
        })
    }
}

impl_flags!(
    /// A set of SRQ attributes to modify (`enum ib_srq_attr_mask`), possibly with bits no
    /// [`SrqAttrFlag`] names.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SrqAttrMask(u32);

    /// An SRQ attribute.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum SrqAttrFlag {
        /// Resize the SRQ (`IB_SRQ_MAX_WR`).
        MaxWr = bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR,
        /// Arm the limit event (`IB_SRQ_LIMIT`).
        Limit = bindings::ib_srq_attr_mask_IB_SRQ_LIMIT,
    }
);

impl SrqAttrMask {
    /// Returns whether the mask has bits no [`SrqAttrFlag`] names.
    pub fn has_unknown(self) -> bool {
        self.0 & !Self::all_bits() != 0
    }
}

/// SRQ attributes (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttrs {
    /// Queue depth.
    pub max_wr: u32,
    /// SGEs per work request.
    pub max_sge: u32,
    /// Limit: when the number of posted WQEs drops below it, the limit event fires (0: off).
    pub srq_limit: u32,
}

impl SrqAttrs {
    fn from_raw(a: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    fn write_to(&self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

raw_wrapper!(
    /// Attributes of an SRQ to create (`struct ib_srq_init_attr`).
    SrqInitAttr, ib_srq_init_attr
);

impl SrqInitAttr {
    /// Returns the requested attributes.
    pub fn attr(&self) -> SrqAttrs {
        // SAFETY: By the type invariant the struct is valid.
        SrqAttrs::from_raw(unsafe { &(*self.as_raw()).attr })
    }

    /// Reports the attributes actually provided back to the consumer.
    pub fn set_attr(&mut self, attr: SrqAttrs) {
        // SAFETY: By the type invariant the struct is valid and we have exclusive access.
        attr.write_to(unsafe { &mut (*self.as_raw()).attr });
    }

    /// Returns the SRQ type, `EINVAL` for one [`SrqType`] does not know.
    pub fn srq_type(&self) -> Result<SrqType> {
        // SAFETY: By the type invariant the struct is valid.
        SrqType::try_from(unsafe { (*self.as_raw()).srq_type })
    }
}

impl<T: Driver> Srq<T> {
    /// Returns whether the SRQ belongs to a user context.
    pub fn is_user(&self) -> bool {
        // SAFETY: By the type invariant the SRQ is live; `uobject` is set before creation.
        !unsafe { (*self.as_raw()).uobject }.is_null()
    }

    /// Returns the PD.
    pub fn pd(&self) -> Option<&Pd<T>> {
        // SAFETY: ib_core holds a use count on the SRQ's PD for the SRQ's lifetime
        // (`ib_create_srq_user()` takes it, `ib_destroy_srq_user()` drops it after the destroy op).
        unsafe { Object::<T, PdKind>::peer(self.device(), (*self.as_raw()).pd) }
    }

    /// Reports an asynchronous event (e.g. [`EventType::SRQ_LIMIT_REACHED`]) to the SRQ's event
    /// handler.
    pub fn dispatch_event(&self, event: EventType) {
        let srq = self.as_raw();
        // SAFETY: By the type invariant the SRQ is live; its event handler and context are set
        // before creation.
        let (handler, ctx) = unsafe { ((*srq).event_handler, (*srq).srq_context) };
        if let Some(h) = handler {
            let mut ev: bindings::ib_event = pin_init::zeroed();
            ev.device = self.device().as_raw();
            ev.element.srq = srq;
            ev.event = event.as_raw();
            // SAFETY: `ev` is a valid event for this SRQ; the handler was installed for it.
            unsafe { h(&mut ev, ctx) };
        }
    }
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `srq` was allocated by ib_core with `size_ib_srq` bytes, its `device` field is a live
    /// [`Device<T>`] and its driver part is uninitialised; `attr` is valid for reads and writes;
    /// `udata` is NULL or valid.
    pub(super) unsafe extern "C" fn create_srq_callback(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements; ib_core does not access `attr` during the
            // call.
            let (dev, attr, udata) = unsafe {
                (
                    Device::<T>::from_raw((*srq).device),
                    SrqInitAttr::from_raw_mut(attr),
                    udata_opt(udata),
                )
            };
            let init = <T::Srq as Operations>::create(dev, attr, udata);
            // SAFETY: Per the safety requirements.
            unsafe { Srq::<T>::init_data(srq, init) }?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` was successfully initialised by `create_srq_callback` and is not used by ib_core
    /// after this returns 0; `udata` is NULL or valid.
    pub(super) unsafe extern "C" fn destroy_srq_callback(
        srq: *mut bindings::ib_srq,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Srq::<T>::from_raw(srq), udata_opt(udata)) };
        <T::Srq as Operations>::destroy(obj, udata);
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Srq::<T>::drop_data(srq) };
        0
    }

    /// # Safety
    ///
    /// `srq` is a live SRQ created by `create_srq_callback`; `attr` is valid; `udata` is NULL
    /// or valid.
    pub(super) unsafe extern "C" fn modify_srq_callback(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (obj, a, udata) = unsafe {
                (
                    Srq::<T>::from_raw(srq),
                    SrqAttrs::from_raw(&*attr),
                    udata_opt(udata),
                )
            };
            <T::Srq as Operations>::modify(obj, &a, SrqAttrMask(mask), udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` is a live SRQ created by `create_srq_callback`; `attr` is valid for writes.
    pub(super) unsafe extern "C" fn query_srq_callback(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let obj = unsafe { Srq::<T>::from_raw(srq) };
            let a = <T::Srq as Operations>::query(obj)?;
            // SAFETY: `attr` is valid for writes.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` is a live SRQ created by `create_srq_callback`; `wr` is NULL or a valid chain of
    /// work requests that stays valid during the call; `bad_wr` is NULL or valid for writes.
    pub(super) unsafe extern "C" fn post_srq_recv_callback(
        srq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        if wr.is_null() {
            return 0;
        }
        // SAFETY: Per the safety requirements; `wr` is not NULL.
        let (obj, wr) = unsafe { (Srq::<T>::from_raw(srq), RecvWr::from_raw(wr)) };
        match <T::Srq as Operations>::post_recv(obj, wr) {
            Ok(()) => 0,
            Err((e, bad)) => {
                if !bad_wr.is_null() {
                    // SAFETY: `bad_wr` is valid for writes; `bad` is one of the caller's WRs.
                    unsafe { *bad_wr = bad.as_raw().cast_const() };
                }
                e.to_errno()
            }
        }
    }
}
