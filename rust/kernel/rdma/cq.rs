// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`) and work completions (`struct ib_wc`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! The driver keeps completions in its own format and converts them into a [`WorkCompletion`]
//! when a kernel consumer polls ([`Wc::write`]). After queueing completions it calls
//! [`Cq::notify`] if the CQ was armed, and reports overflows with [`EventType::CQ_ERR`].

use super::{
    attr::EventType,
    device::{
        Device,
        Driver, //
    },
    object::{
        raw_wrapper,
        udata_opt,
        CqKind,
        Object, //
    },
    udata::Udata,
    vtable::VTable,
};
use crate::{
    bindings,
    error::from_result,
    impl_flags,
    prelude::*, //
};

/// A `struct ib_cq` with the driver's [`Driver::Cq`] data.
pub type Cq<T> = Object<T, CqKind>;

/// The operations of a completion queue; implemented by the driver's per-CQ data.
#[vtable]
pub trait Operations: Sized + Send + Sync {
    /// The driver.
    type Driver: Driver;

    /// Creates the data of a new completion queue.
    fn create(
        dev: &Device<Self::Driver>,
        attr: &CqInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error>;

    /// Returns the number of entries of a completion queue just created by
    /// [`Operations::create`]; the abstraction reports it to the consumer (`ib_cq.cqe`).
    fn entries(&self) -> u32;

    /// Called before the data of a completion queue is dropped.
    fn destroy(_cq: &Cq<Self::Driver>, _udata: Option<&Udata>) {}

    /// Polls up to `wc.len()` completions into `wc` and returns how many were written.
    fn poll(cq: &Cq<Self::Driver>, wc: &mut [Wc]) -> Result<usize>;

    /// Arms the completion queue. Returns `true` if [`CqNotifyFlag::ReportMissedEvents`] was
    /// requested and completions may have been missed.
    fn req_notify(cq: &Cq<Self::Driver>, flags: CqNotifyFlags) -> Result<bool>;
}

raw_wrapper!(
    /// Attributes of a CQ to create (`struct ib_cq_init_attr`).
    CqInitAttr, ib_cq_init_attr
);

impl CqInitAttr {
    /// Returns the requested number of CQ entries.
    pub fn cqe(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).cqe }
    }

    /// Returns the requested completion vector.
    pub fn comp_vector(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).comp_vector }
    }

    /// Returns the creation flags.
    pub fn flags(&self) -> CqCreateFlags {
        // SAFETY: By the type invariant the struct is valid.
        CqCreateFlags(unsafe { (*self.as_raw()).flags })
    }
}

impl_flags!(
    /// Creation flags of a CQ (`enum ib_uverbs_ex_create_cq_flags`), possibly with bits no
    /// [`CqCreateFlag`] names.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct CqCreateFlags(u32);

    /// A creation flag of a CQ.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CqCreateFlag {
        /// Completions carry a timestamp (`IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION`).
        TimestampCompletion =
            bindings::ib_uverbs_ex_create_cq_flags_IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION,
        /// Overruns are not reported (`IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN`).
        IgnoreOverrun = bindings::ib_uverbs_ex_create_cq_flags_IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN,
    }
);

impl_flags!(
    /// The flags of `req_notify_cq` (`enum ib_cq_notify_flags`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct CqNotifyFlags(u32);

    /// A flag of `req_notify_cq`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CqNotifyFlag {
        /// Notify on the next solicited completion only (`IB_CQ_SOLICITED`).
        Solicited = bindings::ib_cq_notify_flags_IB_CQ_SOLICITED,
        /// Notify on the next completion (`IB_CQ_NEXT_COMP`).
        NextComp = bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP,
        /// Report whether completions may have been missed (`IB_CQ_REPORT_MISSED_EVENTS`).
        ReportMissedEvents = bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS,
    }
);

impl CqNotifyFlags {
    /// Returns whether only the next solicited completion arms the notification: the
    /// `IB_CQ_SOLICITED_MASK` part of the flags is `IB_CQ_SOLICITED`.
    pub fn solicited_only(self) -> bool {
        self.0 & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED
    }
}

/// The status of a work completion (`enum ib_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcStatus(bindings::ib_wc_status);

impl WcStatus {
    /// Success (`IB_WC_SUCCESS`).
    pub const SUCCESS: Self = Self(bindings::ib_wc_status_IB_WC_SUCCESS);
    /// Local length error (`IB_WC_LOC_LEN_ERR`).
    pub const LOC_LEN_ERR: Self = Self(bindings::ib_wc_status_IB_WC_LOC_LEN_ERR);
    /// Local QP operation error (`IB_WC_LOC_QP_OP_ERR`).
    pub const LOC_QP_OP_ERR: Self = Self(bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR);
    /// Local protection error (`IB_WC_LOC_PROT_ERR`).
    pub const LOC_PROT_ERR: Self = Self(bindings::ib_wc_status_IB_WC_LOC_PROT_ERR);
    /// Work request flushed (`IB_WC_WR_FLUSH_ERR`).
    pub const WR_FLUSH_ERR: Self = Self(bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR);
    /// Bad response (`IB_WC_BAD_RESP_ERR`).
    pub const BAD_RESP_ERR: Self = Self(bindings::ib_wc_status_IB_WC_BAD_RESP_ERR);
    /// Local access error (`IB_WC_LOC_ACCESS_ERR`).
    pub const LOC_ACCESS_ERR: Self = Self(bindings::ib_wc_status_IB_WC_LOC_ACCESS_ERR);
    /// Remote invalid request (`IB_WC_REM_INV_REQ_ERR`).
    pub const REM_INV_REQ_ERR: Self = Self(bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR);
    /// Remote access error (`IB_WC_REM_ACCESS_ERR`).
    pub const REM_ACCESS_ERR: Self = Self(bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR);
    /// Remote operation error (`IB_WC_REM_OP_ERR`).
    pub const REM_OP_ERR: Self = Self(bindings::ib_wc_status_IB_WC_REM_OP_ERR);
    /// Fatal error (`IB_WC_FATAL_ERR`).
    pub const FATAL_ERR: Self = Self(bindings::ib_wc_status_IB_WC_FATAL_ERR);
    /// General error (`IB_WC_GENERAL_ERR`).
    pub const GENERAL_ERR: Self = Self(bindings::ib_wc_status_IB_WC_GENERAL_ERR);

    /// Returns the raw value.
    pub fn as_raw(self) -> u32 {
        self.0
    }
}

/// The operation of a work completion (`enum ib_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WcOpcode(bindings::ib_wc_opcode);

impl WcOpcode {
    /// Send (`IB_WC_SEND`).
    pub const SEND: Self = Self(bindings::ib_wc_opcode_IB_WC_SEND);
    /// RDMA Write (`IB_WC_RDMA_WRITE`).
    pub const RDMA_WRITE: Self = Self(bindings::ib_wc_opcode_IB_WC_RDMA_WRITE);
    /// RDMA Read (`IB_WC_RDMA_READ`).
    pub const RDMA_READ: Self = Self(bindings::ib_wc_opcode_IB_WC_RDMA_READ);
    /// Compare and swap (`IB_WC_COMP_SWAP`).
    pub const COMP_SWAP: Self = Self(bindings::ib_wc_opcode_IB_WC_COMP_SWAP);
    /// Fetch and add (`IB_WC_FETCH_ADD`).
    pub const FETCH_ADD: Self = Self(bindings::ib_wc_opcode_IB_WC_FETCH_ADD);
    /// Local invalidate (`IB_WC_LOCAL_INV`).
    pub const LOCAL_INV: Self = Self(bindings::ib_wc_opcode_IB_WC_LOCAL_INV);
    /// Fast registration (`IB_WC_REG_MR`).
    pub const REG_MR: Self = Self(bindings::ib_wc_opcode_IB_WC_REG_MR);
    /// Flush (`IB_WC_FLUSH`).
    pub const FLUSH: Self = Self(bindings::ib_wc_opcode_IB_WC_FLUSH);
    /// Atomic write (`IB_WC_ATOMIC_WRITE`).
    pub const ATOMIC_WRITE: Self = Self(bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE);
    /// Receive (`IB_WC_RECV`).
    pub const RECV: Self = Self(bindings::ib_wc_opcode_IB_WC_RECV);
    /// Masked compare and swap (`IB_WC_MASKED_COMP_SWAP`).
    pub const MASKED_COMP_SWAP: Self = Self(bindings::ib_wc_opcode_IB_WC_MASKED_COMP_SWAP);
    /// Masked fetch and add (`IB_WC_MASKED_FETCH_ADD`).
    pub const MASKED_FETCH_ADD: Self = Self(bindings::ib_wc_opcode_IB_WC_MASKED_FETCH_ADD);
    /// Receive of an RDMA Write with immediate data (`IB_WC_RECV_RDMA_WITH_IMM`).
    pub const RECV_RDMA_WITH_IMM: Self = Self(bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM);

    /// Returns the raw value.
    pub fn as_raw(self) -> u32 {
        self.0
    }
}

/// The QP a completion belongs to, as reported to kernel consumers in `ib_wc.qp`.
///
/// Only obtainable from a live QP ([`Qp::token`](super::qp::Qp)), so a completion
/// can never name a QP that did not exist. It is a plain value: the driver cannot dereference
/// it. (Kernel consumers must not poll completions of QPs they have destroyed, as in C.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpToken(pub(crate) *mut bindings::ib_qp);

// SAFETY: The token is an opaque value; it is never dereferenced by Rust code.
unsafe impl Send for QpToken {}

// SAFETY: See `Send`.
unsafe impl Sync for QpToken {}

/// A work completion, written into a consumer's `struct ib_wc` by [`Wc::write`].
#[derive(Clone, Copy, Debug)]
pub struct WorkCompletion {
    /// The work request id.
    pub wr_id: u64,
    /// The status.
    pub status: WcStatus,
    /// The operation.
    pub opcode: WcOpcode,
    /// A vendor error code (0 unless `status` is an error).
    pub vendor_err: u32,
    /// The number of bytes transferred (receives and reads).
    pub byte_len: u32,
    /// The QP of the work request.
    pub qp: Option<QpToken>,
    /// Immediate data (network byte order as received), sets `IB_WC_WITH_IMM`.
    pub imm_data: Option<u32>,
    /// The STag invalidated by a Send with Invalidate, sets `IB_WC_WITH_INVALIDATE`.
    pub invalidate_rkey: Option<u32>,
}

raw_wrapper!(
    /// A work completion slot to fill (`struct ib_wc`); may be uninitialised.
    Wc, ib_wc
);

impl Wc {
    /// Fills the (possibly uninitialised) work completion slot with `wc`; other fields are
    /// zeroed.
    pub fn write(&mut self, wc: &WorkCompletion) {
        let mut raw: bindings::ib_wc = pin_init::zeroed();
        raw.__bindgen_anon_1.wr_id = wc.wr_id;
        raw.status = wc.status.0;
        raw.opcode = wc.opcode.0;
        raw.vendor_err = wc.vendor_err;
        raw.byte_len = wc.byte_len;
        raw.qp = wc.qp.map_or(core::ptr::null_mut(), |q| q.0);
        if let Some(imm) = wc.imm_data {
            raw.ex.imm_data = imm;
            raw.wc_flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM as c_int;
        } else if let Some(rkey) = wc.invalidate_rkey {
            raw.ex.invalidate_rkey = rkey;
            raw.wc_flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE as c_int;
        }
        // SAFETY: By the type invariant the slot is valid for writes.
        unsafe { self.as_raw().write(raw) };
    }
}

impl<T: Driver> Cq<T> {
    /// Returns whether the CQ belongs to a user context.
    pub fn is_user(&self) -> bool {
        // SAFETY: By the type invariant the CQ is live; `uobject` is set before creation.
        !unsafe { (*self.as_raw()).uobject }.is_null()
    }

    /// Returns whether the CQ has a completion handler (kernel consumers that poll directly, and
    /// uverbs CQs without a completion channel, may have none).
    pub fn has_comp_handler(&self) -> bool {
        // SAFETY: By the type invariant the CQ is live. ib_core may set the handler right after
        // creation, so read it once like `READ_ONCE`.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).comp_handler) }.is_some()
    }

    /// Calls the CQ's completion handler (`cq->comp_handler(cq, cq->cq_context)`), if any.
    ///
    /// Must not be called with locks held that the consumer's handler might take (e.g. to poll
    /// this CQ).
    pub fn notify(&self) {
        let cq = self.as_raw();
        // SAFETY: By the type invariant the CQ is live.
        let (handler, ctx) = unsafe {
            (
                core::ptr::read_volatile(&raw const (*cq).comp_handler),
                (*cq).cq_context,
            )
        };
        if let Some(h) = handler {
            // SAFETY: The handler and its context were installed by the CQ's consumer for
            // exactly this call.
            unsafe { h(cq, ctx) };
        }
    }

    /// Reports an asynchronous event (e.g. [`EventType::CQ_ERR`]) to the CQ's event handler,
    /// if any.
    pub fn dispatch_event(&self, event: EventType) {
        let cq = self.as_raw();
        // SAFETY: By the type invariant the CQ is live; the event handler and context are set
        // before creation.
        let (handler, ctx) = unsafe { ((*cq).event_handler, (*cq).cq_context) };
        if let Some(h) = handler {
            let mut ev: bindings::ib_event = pin_init::zeroed();
            ev.device = self.device().as_raw();
            ev.element.cq = cq;
            ev.event = event.as_raw();
            // SAFETY: `ev` is a valid event for this CQ; the handler was installed for it.
            unsafe { h(&mut ev, ctx) };
        }
    }
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `cq` was allocated by ib_core with `size_ib_cq` bytes, its `device` field is a live
    /// [`Device<T>`] and its driver part is uninitialised; `attr` is valid; `attrs` is NULL or a
    /// valid attribute bundle.
    pub(super) unsafe extern "C" fn create_cq_callback(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements `attrs`, if not NULL, is a valid bundle whose
            // `driver_udata` is valid.
            let udata = unsafe {
                if attrs.is_null() {
                    None
                } else {
                    udata_opt(&raw mut (*attrs).__bindgen_anon_1.hdr.driver_udata)
                }
            };
            // SAFETY: Per the safety requirements.
            let (dev, attr) = unsafe {
                (
                    Device::<T>::from_raw((*cq).device),
                    CqInitAttr::from_raw(attr),
                )
            };
            let init = <T::Cq as Operations>::create(dev, attr, udata);
            // SAFETY: Per the safety requirements.
            unsafe { Cq::<T>::init_data(cq, init) }?;
            // SAFETY: The CQ is initialised; ib_core does not use it concurrently before this
            // callback returns.
            let data: &T::Cq = unsafe { Cq::<T>::from_raw(cq) };
            // SAFETY: As above.
            unsafe { (*cq).cqe = c_int::try_from(data.entries()).unwrap_or(c_int::MAX) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `cq` was successfully initialised by `create_cq_callback` and is not used by ib_core
    /// after this returns 0; `udata` is NULL or valid.
    pub(super) unsafe extern "C" fn destroy_cq_callback(
        cq: *mut bindings::ib_cq,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Cq::<T>::from_raw(cq), udata_opt(udata)) };
        <T::Cq as Operations>::destroy(obj, udata);
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Cq::<T>::drop_data(cq) };
        0
    }

    /// # Safety
    ///
    /// `cq` is a live CQ created by `create_cq_callback`; `wc` is valid for writes of
    /// `num_entries` entries.
    pub(super) unsafe extern "C" fn poll_cq_callback(
        cq: *mut bindings::ib_cq,
        num_entries: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        from_result(|| {
            let n = usize::try_from(num_entries).map_err(|_| EINVAL)?;
            // SAFETY: Per the safety requirements.
            let obj = unsafe { Cq::<T>::from_raw(cq) };
            let wc = if n == 0 || wc.is_null() {
                &mut []
            } else {
                // SAFETY: `wc` is valid for `n` entries and not aliased during the call; `Wc` is
                // a transparent wrapper of `ib_wc` that may be uninitialised.
                unsafe { core::slice::from_raw_parts_mut(wc.cast::<Wc>(), n) }
            };
            let done = <T::Cq as Operations>::poll(obj, wc)?.min(n);
            Ok(c_int::try_from(done).unwrap_or(num_entries))
        })
    }

    /// # Safety
    ///
    /// `cq` is a live CQ created by `create_cq_callback`.
    pub(super) unsafe extern "C" fn req_notify_cq_callback(
        cq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let obj = unsafe { Cq::<T>::from_raw(cq) };
            let flags = CqNotifyFlags(flags);
            Ok(c_int::from(<T::Cq as Operations>::req_notify(obj, flags)?))
        })
    }
}
