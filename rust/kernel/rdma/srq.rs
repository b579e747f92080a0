// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use super::{
    attr::EventType,
    device::{
        Driver,
        VTable, //
    },
    object::{
        Pd,
        RecvWr,
        Srq,
        SrqInitAttr, //
    },
    udata::Udata,
};
use crate::{
    bindings,
    error::from_result,
    prelude::*, //
};

/// SRQ attribute mask bits (`enum ib_srq_attr_mask`).
pub mod attr_mask {
    use crate::bindings;

    /// Resize the SRQ (`IB_SRQ_MAX_WR`).
    pub const MAX_WR: u32 = bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR;
    /// Arm the limit event (`IB_SRQ_LIMIT`).
    pub const LIMIT: u32 = bindings::ib_srq_attr_mask_IB_SRQ_LIMIT;
}

/// The basic SRQ type (`IB_SRQT_BASIC`).
pub const SRQT_BASIC: u32 = bindings::ib_srq_type_IB_SRQT_BASIC;

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

    /// Returns the SRQ type (`IB_SRQT_*`).
    pub fn srq_type(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).srq_type }
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
        unsafe { super::qp::peer::<T, super::object::PdKind>(self.device(), (*self.as_raw()).pd) }
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

/// Converts a possibly-NULL `struct ib_udata` pointer into an optional [`Udata`].
///
/// # Safety
///
/// `udata` must be NULL or valid for `'a`.
unsafe fn udata_opt<'a>(udata: *mut bindings::ib_udata) -> Option<&'a Udata> {
    if udata.is_null() {
        None
    } else {
        // SAFETY: Valid per the safety requirements.
        Some(unsafe { Udata::from_raw(udata) })
    }
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `srq` is a live SRQ created by `create_srq_callback`; `attr` is valid; `udata` is NULL
    /// or valid.
    pub(crate) unsafe extern "C" fn modify_srq_callback(
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
            T::modify_srq(obj, &a, mask, udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` is a live SRQ created by `create_srq_callback`; `attr` is valid for writes.
    pub(crate) unsafe extern "C" fn query_srq_callback(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let obj = unsafe { Srq::<T>::from_raw(srq) };
            let a = T::query_srq(obj)?;
            // SAFETY: `attr` is valid for writes.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` is a live SRQ created by `create_srq_callback`; `wr` is a valid chain of work
    /// requests that stays valid during the call; `bad_wr` is NULL or valid for writes.
    pub(crate) unsafe extern "C" fn post_srq_recv_callback(
        srq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        if wr.is_null() {
            return 0;
        }
        // SAFETY: Per the safety requirements; `wr` is not NULL.
        let (obj, wr) = unsafe { (Srq::<T>::from_raw(srq), RecvWr::from_raw(wr)) };
        match T::post_srq_recv(obj, wr) {
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
