// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`), their states and attributes.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! Unlike the other objects, QPs are reference counted ([`ARef<Qp<T>>`]): connection managers
//! and data paths refer to a QP from socket callbacks and work items, and the iw_cm takes
//! references (`iw_add_ref`). ib_core frees a QP when its `destroy_qp` op returns, so the
//! abstraction's destroy op runs the driver's hook ([`Operations::destroy`]), which must make
//! every holder drop its reference, and then waits until the last reference is gone before it
//! drops the data (siw's `qp_free` completion).
//!
//! The work requests posted to a QP are in [`super::wr`].

use super::{
    attr::{
        EventType,
        Mtu, //
    },
    cq::{
        Cq,
        QpToken, //
    },
    device::{
        Device,
        Driver, //
    },
    mr::AccessFlags,
    object::{
        raw_wrapper,
        udata_opt,
        Counted,
        CqKind,
        Object,
        PdKind,
        QpKind,
        SrqKind, //
    },
    pd::Pd,
    srq::Srq,
    udata::Udata,
    vtable::VTable,
    wr::{
        PostError,
        RecvWr,
        SendWr, //
    },
};
use crate::{
    bindings,
    error::from_result,
    impl_flags,
    prelude::*,
    sync::aref::AlwaysRefCounted, //
};
use core::ptr::NonNull;

/// A `struct ib_qp` with the driver's [`Driver::Qp`] data, reference counted.
pub type Qp<T> = Object<T, QpKind>;

/// The operations of a queue pair; implemented by the driver's per-QP data.
#[vtable]
pub trait Operations: Sized + Send + Sync {
    /// The driver.
    type Driver: Driver;

    /// Creates the data of a new queue pair. The driver may update the capabilities in `attr`
    /// to the values it actually provides.
    fn create(
        dev: &Device<Self::Driver>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error>;

    /// Returns the QP number of a queue pair just created by [`Operations::create`]; the
    /// abstraction stores it in `ib_qp.qp_num` (see [`Qp::qp_num`]).
    fn number(&self) -> u32;

    /// Called when a queue pair has been created, with its number set: the place to publish it
    /// (e.g. in a QP number table, taking an [`ARef`](crate::sync::aref::ARef)). If it fails,
    /// the creation fails and the data is dropped without a call to [`Operations::destroy`].
    fn created(_qp: &Qp<Self::Driver>) -> Result {
        Ok(())
    }

    /// Modifies the attributes named in `mask` of a queue pair.
    fn modify(
        qp: &Qp<Self::Driver>,
        attr: &QpAttr,
        mask: QpAttrMask,
        udata: Option<&Udata>,
    ) -> Result;

    /// Returns the attributes of a queue pair; `mask` names the ones asked for.
    fn query(_qp: &Qp<Self::Driver>, _mask: QpAttrMask) -> Result<QpQuery> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Called when ib_core destroys a queue pair. Afterwards the abstraction waits until every
    /// [`ARef`](crate::sync::aref::ARef) to the QP is dropped, then drops the data: the hook
    /// must make all holders (tables, connections, queued work) let go, or the destruction
    /// never finishes.
    fn destroy(_qp: &Qp<Self::Driver>, _udata: Option<&Udata>) {}

    /// Posts a chain of send work requests. On failure returns the error and the first request
    /// that was not posted.
    fn post_send<'a>(qp: &Qp<Self::Driver>, wr: &'a SendWr) -> Result<(), PostError<'a, SendWr>>;

    /// Handles a `post_send` without work requests, which uverbs issues when user space posts
    /// none. For most providers there is nothing to do (the default); a provider whose user
    /// space queues send work in memory it shares with the kernel may take it as its doorbell.
    fn post_send_empty(_qp: &Qp<Self::Driver>) -> Result {
        Ok(())
    }

    /// Posts a chain of receive work requests. On failure returns the error and the first
    /// request that was not posted.
    fn post_recv<'a>(qp: &Qp<Self::Driver>, wr: &'a RecvWr) -> Result<(), PostError<'a, RecvWr>>;
}

/// QP states (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpState {
    /// `IB_QPS_RESET`.
    Reset = bindings::ib_qp_state_IB_QPS_RESET,
    /// `IB_QPS_INIT`.
    Init = bindings::ib_qp_state_IB_QPS_INIT,
    /// `IB_QPS_RTR`.
    Rtr = bindings::ib_qp_state_IB_QPS_RTR,
    /// `IB_QPS_RTS`.
    Rts = bindings::ib_qp_state_IB_QPS_RTS,
    /// `IB_QPS_SQD`.
    Sqd = bindings::ib_qp_state_IB_QPS_SQD,
    /// `IB_QPS_SQE`.
    Sqe = bindings::ib_qp_state_IB_QPS_SQE,
    /// `IB_QPS_ERR`.
    Error = bindings::ib_qp_state_IB_QPS_ERR,
}

impl TryFrom<u32> for QpState {
    type Error = Error;

    fn try_from(v: u32) -> Result<Self> {
        Ok(match v {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => QpState::Error,
            _ => return Err(EINVAL),
        })
    }
}

/// QP types (`enum ib_qp_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QpType {
    /// `IB_QPT_SMI`.
    Smi = bindings::ib_qp_type_IB_QPT_SMI,
    /// `IB_QPT_GSI`.
    Gsi = bindings::ib_qp_type_IB_QPT_GSI,
    /// Reliable connected (`IB_QPT_RC`).
    Rc = bindings::ib_qp_type_IB_QPT_RC,
    /// Unreliable connected (`IB_QPT_UC`).
    Uc = bindings::ib_qp_type_IB_QPT_UC,
    /// Unreliable datagram (`IB_QPT_UD`).
    Ud = bindings::ib_qp_type_IB_QPT_UD,
    /// `IB_QPT_RAW_IPV6`.
    RawIpv6 = bindings::ib_qp_type_IB_QPT_RAW_IPV6,
    /// `IB_QPT_RAW_ETHERTYPE`.
    RawEthertype = bindings::ib_qp_type_IB_QPT_RAW_ETHERTYPE,
    /// `IB_QPT_RAW_PACKET`.
    RawPacket = bindings::ib_qp_type_IB_QPT_RAW_PACKET,
    /// `IB_QPT_XRC_INI`.
    XrcIni = bindings::ib_qp_type_IB_QPT_XRC_INI,
    /// `IB_QPT_XRC_TGT`.
    XrcTgt = bindings::ib_qp_type_IB_QPT_XRC_TGT,
    /// A driver-specific type (`IB_QPT_DRIVER`).
    Driver = bindings::ib_qp_type_IB_QPT_DRIVER,
}

impl TryFrom<u32> for QpType {
    type Error = Error;

    fn try_from(v: u32) -> Result<Self> {
        Ok(match v {
            bindings::ib_qp_type_IB_QPT_SMI => Self::Smi,
            bindings::ib_qp_type_IB_QPT_GSI => Self::Gsi,
            bindings::ib_qp_type_IB_QPT_RC => Self::Rc,
            bindings::ib_qp_type_IB_QPT_UC => Self::Uc,
            bindings::ib_qp_type_IB_QPT_UD => Self::Ud,
            bindings::ib_qp_type_IB_QPT_RAW_IPV6 => Self::RawIpv6,
            bindings::ib_qp_type_IB_QPT_RAW_ETHERTYPE => Self::RawEthertype,
            bindings::ib_qp_type_IB_QPT_RAW_PACKET => Self::RawPacket,
            bindings::ib_qp_type_IB_QPT_XRC_INI => Self::XrcIni,
            bindings::ib_qp_type_IB_QPT_XRC_TGT => Self::XrcTgt,
            bindings::ib_qp_type_IB_QPT_DRIVER => Self::Driver,
            _ => return Err(EINVAL),
        })
    }
}

impl_flags!(
    /// A set of QP attributes (`enum ib_qp_attr_mask`), as named by `modify_qp` and `query_qp`;
    /// possibly with bits no [`QpAttrFlag`] names.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct QpAttrMask(u32);

    /// A QP attribute.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum QpAttrFlag {
        /// `IB_QP_STATE`.
        State = bindings::ib_qp_attr_mask_IB_QP_STATE,
        /// `IB_QP_CUR_STATE`.
        CurState = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE,
        /// `IB_QP_EN_SQD_ASYNC_NOTIFY`.
        EnSqdAsyncNotify = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY,
        /// `IB_QP_ACCESS_FLAGS`.
        AccessFlags = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS,
        /// `IB_QP_PKEY_INDEX`.
        PkeyIndex = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX,
        /// `IB_QP_PORT`.
        Port = bindings::ib_qp_attr_mask_IB_QP_PORT,
        /// `IB_QP_QKEY`.
        Qkey = bindings::ib_qp_attr_mask_IB_QP_QKEY,
        /// `IB_QP_AV`.
        Av = bindings::ib_qp_attr_mask_IB_QP_AV,
        /// `IB_QP_PATH_MTU`.
        PathMtu = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU,
        /// `IB_QP_TIMEOUT`.
        Timeout = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT,
        /// `IB_QP_RETRY_CNT`.
        RetryCnt = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT,
        /// `IB_QP_RNR_RETRY`.
        RnrRetry = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY,
        /// `IB_QP_RQ_PSN`.
        RqPsn = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN,
        /// `IB_QP_MAX_QP_RD_ATOMIC`: the outbound RDMA Read limit (ORD).
        MaxQpRdAtomic = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC,
        /// `IB_QP_ALT_PATH`.
        AltPath = bindings::ib_qp_attr_mask_IB_QP_ALT_PATH,
        /// `IB_QP_MIN_RNR_TIMER`.
        MinRnrTimer = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER,
        /// `IB_QP_SQ_PSN`.
        SqPsn = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN,
        /// `IB_QP_MAX_DEST_RD_ATOMIC`: the inbound RDMA Read limit (IRD).
        MaxDestRdAtomic = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC,
        /// `IB_QP_PATH_MIG_STATE`.
        PathMigState = bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE,
        /// `IB_QP_CAP`.
        Cap = bindings::ib_qp_attr_mask_IB_QP_CAP,
        /// `IB_QP_DEST_QPN`.
        DestQpn = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN,
        /// `IB_QP_RATE_LIMIT`.
        RateLimit = bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT,
    }
);

impl QpAttrMask {
    /// The standard attributes (`IB_QP_ATTR_STANDARD_BITS`): every attribute up to
    /// [`QpAttrFlag::DestQpn`] and the reserved bits after it.
    pub const STANDARD: Self = Self(bindings::ib_qp_attr_mask_IB_QP_ATTR_STANDARD_BITS);
}

impl_flags!(
    /// The creation flags of a QP (`enum ib_qp_create_flags`), possibly with bits no
    /// [`QpCreateFlag`] names.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct QpCreateFlags(u32);

    /// A creation flag of a QP.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum QpCreateFlag {
        /// `IB_QP_CREATE_IPOIB_UD_LSO`.
        IpoibUdLso = bindings::ib_qp_create_flags_IB_QP_CREATE_IPOIB_UD_LSO as u32,
        /// `IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK`.
        BlockMulticastLoopback =
            bindings::ib_qp_create_flags_IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK as u32,
        /// `IB_QP_CREATE_CROSS_CHANNEL`.
        CrossChannel = bindings::ib_qp_create_flags_IB_QP_CREATE_CROSS_CHANNEL as u32,
        /// `IB_QP_CREATE_MANAGED_SEND`.
        ManagedSend = bindings::ib_qp_create_flags_IB_QP_CREATE_MANAGED_SEND as u32,
        /// `IB_QP_CREATE_MANAGED_RECV`.
        ManagedRecv = bindings::ib_qp_create_flags_IB_QP_CREATE_MANAGED_RECV as u32,
        /// `IB_QP_CREATE_NETIF_QP`.
        NetifQp = bindings::ib_qp_create_flags_IB_QP_CREATE_NETIF_QP as u32,
        /// `IB_QP_CREATE_INTEGRITY_EN`.
        IntegrityEn = bindings::ib_qp_create_flags_IB_QP_CREATE_INTEGRITY_EN as u32,
        /// `IB_QP_CREATE_NETDEV_USE`.
        NetdevUse = bindings::ib_qp_create_flags_IB_QP_CREATE_NETDEV_USE as u32,
        /// `IB_QP_CREATE_SCATTER_FCS`.
        ScatterFcs = bindings::ib_qp_create_flags_IB_QP_CREATE_SCATTER_FCS as u32,
        /// `IB_QP_CREATE_CVLAN_STRIPPING`.
        CvlanStripping = bindings::ib_qp_create_flags_IB_QP_CREATE_CVLAN_STRIPPING as u32,
        /// `IB_QP_CREATE_SOURCE_QPN`.
        SourceQpn = bindings::ib_qp_create_flags_IB_QP_CREATE_SOURCE_QPN as u32,
        /// `IB_QP_CREATE_PCI_WRITE_END_PADDING`.
        PciWriteEndPadding = bindings::ib_qp_create_flags_IB_QP_CREATE_PCI_WRITE_END_PADDING as u32,
    }
);

/// Work queue capabilities (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Inline data bytes per send work request.
    pub max_inline_data: u32,
}

impl QpCap {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write_to(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

raw_wrapper!(
    /// Attributes of a QP to create (`struct ib_qp_init_attr`).
    QpInitAttr, ib_qp_init_attr
);

impl QpInitAttr {
    /// Returns the QP type, `EINVAL` for one [`QpType`] does not know.
    pub fn qp_type(&self) -> Result<QpType> {
        // SAFETY: By the type invariant the struct is valid.
        QpType::try_from(unsafe { (*self.as_raw()).qp_type })
    }

    /// Returns the creation flags.
    pub fn create_flags(&self) -> QpCreateFlags {
        // SAFETY: By the type invariant the struct is valid.
        QpCreateFlags(unsafe { (*self.as_raw()).create_flags })
    }

    /// Returns the requested capabilities.
    pub fn cap(&self) -> QpCap {
        // SAFETY: By the type invariant the struct is valid.
        QpCap::from_raw(unsafe { &(*self.as_raw()).cap })
    }

    /// Reports the capabilities actually provided back to the consumer.
    pub fn set_cap(&mut self, cap: QpCap) {
        // SAFETY: By the type invariant the struct is valid and we have exclusive access.
        cap.write_to(unsafe { &mut (*self.as_raw()).cap });
    }

    /// Returns the signalling type: `Some(true)` if every send WR generates a completion
    /// (`IB_SIGNAL_ALL_WR`), `Some(false)` for `IB_SIGNAL_REQ_WR`, `None` for anything else.
    pub fn sq_sig_all(&self) -> Option<bool> {
        // SAFETY: By the type invariant the struct is valid.
        match unsafe { (*self.as_raw()).sq_sig_type } {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR => Some(true),
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR => Some(false),
            _ => None,
        }
    }

    /// Returns whether a send CQ, a receive CQ and an SRQ were given.
    pub fn has_cqs_srq(&self) -> (bool, bool, bool) {
        // SAFETY: By the type invariant the struct is valid.
        let a = unsafe { &*self.as_raw() };
        (!a.send_cq.is_null(), !a.recv_cq.is_null(), !a.srq.is_null())
    }
}

raw_wrapper!(
    /// QP attributes to modify (`struct ib_qp_attr`).
    QpAttr, ib_qp_attr
);

impl QpAttr {
    /// Returns the requested state, valid with [`QpAttrFlag::State`]; `EINVAL` for one
    /// [`QpState`] does not know.
    pub fn qp_state(&self) -> Result<QpState> {
        // SAFETY: By the type invariant the struct is valid.
        QpState::try_from(unsafe { (*self.as_raw()).qp_state })
    }

    /// Returns the assumed current state, valid with [`QpAttrFlag::CurState`].
    pub fn cur_qp_state(&self) -> Result<QpState> {
        // SAFETY: By the type invariant the struct is valid.
        QpState::try_from(unsafe { (*self.as_raw()).cur_qp_state })
    }

    /// Returns the access flags, valid with [`QpAttrFlag::AccessFlags`].
    pub fn qp_access_flags(&self) -> AccessFlags {
        // SAFETY: By the type invariant the struct is valid.
        AccessFlags::from_raw(unsafe { (*self.as_raw()).qp_access_flags } as u32)
    }

    /// Returns the outbound RDMA Read limit (ORD), valid with [`QpAttrFlag::MaxQpRdAtomic`].
    pub fn max_rd_atomic(&self) -> u8 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).max_rd_atomic }
    }

    /// Returns the inbound RDMA Read limit (IRD), valid with [`QpAttrFlag::MaxDestRdAtomic`].
    pub fn max_dest_rd_atomic(&self) -> u8 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).max_dest_rd_atomic }
    }
}

/// The result of a QP query.
#[derive(Clone, Copy, Debug)]
pub struct QpQuery {
    /// The current state.
    pub state: QpState,
    /// The capabilities.
    pub cap: QpCap,
    /// The path MTU.
    pub path_mtu: Mtu,
    /// Outbound RDMA Read limit (ORD).
    pub max_rd_atomic: u8,
    /// Inbound RDMA Read limit (IRD).
    pub max_dest_rd_atomic: u8,
    /// Access flags.
    pub qp_access_flags: AccessFlags,
    /// Whether every send WR generates a completion.
    pub sq_sig_all: bool,
}

impl<T: Driver> Qp<T> {
    /// Returns the QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: By the type invariant the QP is live; `qp_num` is set at creation.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// Returns the token that names this QP in work completions.
    pub fn token(&self) -> QpToken {
        QpToken(self.as_raw())
    }

    /// Returns whether the QP belongs to a user context.
    pub fn is_user(&self) -> bool {
        // SAFETY: By the type invariant the QP is live; `uobject` is set before creation.
        !unsafe { (*self.as_raw()).uobject }.is_null()
    }

    /// Returns the send CQ.
    pub fn send_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: ib_core holds a use count on the QP's CQs for the QP's lifetime.
        unsafe { Object::<T, CqKind>::peer(self.device(), (*self.as_raw()).send_cq) }
    }

    /// Returns the receive CQ.
    pub fn recv_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: ib_core holds a use count on the QP's CQs for the QP's lifetime.
        unsafe { Object::<T, CqKind>::peer(self.device(), (*self.as_raw()).recv_cq) }
    }

    /// Returns the SRQ, if the QP uses one.
    pub fn srq(&self) -> Option<&Srq<T>> {
        // SAFETY: ib_core holds a use count on the QP's SRQ for the QP's lifetime.
        unsafe { Object::<T, SrqKind>::peer(self.device(), (*self.as_raw()).srq) }
    }

    /// Returns the PD.
    pub fn pd(&self) -> Option<&Pd<T>> {
        // SAFETY: ib_core holds a use count on the QP's PD for the QP's lifetime.
        unsafe { Object::<T, PdKind>::peer(self.device(), (*self.as_raw()).pd) }
    }

    /// Reports an asynchronous event (e.g. [`EventType::QP_FATAL`]) to the QP's event handler.
    pub fn dispatch_event(&self, event: EventType) {
        let qp = self.as_raw();
        // SAFETY: By the type invariant the QP is live; its event handler and context are set
        // before creation.
        let (handler, ctx) = unsafe { ((*qp).event_handler, (*qp).qp_context) };
        if let Some(h) = handler {
            let mut ev: bindings::ib_event = pin_init::zeroed();
            ev.device = self.device().as_raw();
            ev.element.qp = qp;
            ev.event = event.as_raw();
            // SAFETY: `ev` is a valid event for this QP; the handler was installed for it.
            unsafe { h(&mut ev, ctx) };
        }
    }
}

// SAFETY: `inc_ref` is only called through a live reference, so the count is at least one and
// the object alive; the object is not freed before the count drops to zero, because the destroy
// op waits for the count (`Counted::release_and_wait`), which `dec_ref` completes only then.
unsafe impl<T: Driver> AlwaysRefCounted for Qp<T> {
    fn inc_ref(&self) {
        let counted: &Counted<T::Qp> = self;
        counted.inc();
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference, so the object is alive.
        let counted: &Counted<T::Qp> = unsafe { obj.as_ref() };
        counted.dec();
    }
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `qp` was allocated by ib_core with `size_ib_qp` bytes, its `device` field is a live
    /// [`Device<T>`] and its driver part is uninitialised; `attr` is valid for reads and writes;
    /// `udata` is NULL or valid.
    pub(super) unsafe extern "C" fn create_qp_callback(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements; ib_core does not access `attr` during the
            // call.
            let (dev, attr, udata) = unsafe {
                (
                    Device::<T>::from_raw((*qp).device),
                    QpInitAttr::from_raw_mut(attr),
                    udata_opt(udata),
                )
            };
            let init = Counted::new(<T::Qp as Operations>::create(dev, attr, udata));
            // SAFETY: Per the safety requirements.
            unsafe { Qp::<T>::init_data(qp, init) }?;
            // SAFETY: The QP is initialised; ib_core does not use it concurrently before this
            // callback returns.
            let obj = unsafe { Qp::<T>::from_raw(qp) };
            let data: &T::Qp = obj;
            // SAFETY: As above.
            unsafe { (*qp).qp_num = data.number() };
            if let Err(e) = <T::Qp as Operations>::created(obj) {
                let counted: &Counted<T::Qp> = obj;
                counted.release_and_wait();
                // SAFETY: The data is initialised; on failure ib_core frees the QP without
                // calling the destroy op, so it is never used again.
                unsafe { Qp::<T>::drop_data(qp) };
                return Err(e);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `qp` is a live QP created by `create_qp_callback`; `attr` is valid; `udata` is NULL or
    /// valid.
    pub(super) unsafe extern "C" fn modify_qp_callback(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (obj, attr, udata) = unsafe {
                (
                    Qp::<T>::from_raw(qp),
                    QpAttr::from_raw(attr),
                    udata_opt(udata),
                )
            };
            <T::Qp as Operations>::modify(obj, attr, QpAttrMask(mask as u32), udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `qp` was successfully initialised by `create_qp_callback` and is not used by ib_core
    /// after this returns 0; `udata` is NULL or valid.
    pub(super) unsafe extern "C" fn destroy_qp_callback(
        qp: *mut bindings::ib_qp,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Qp::<T>::from_raw(qp), udata_opt(udata)) };
        <T::Qp as Operations>::destroy(obj, udata);
        let counted: &Counted<T::Qp> = obj;
        counted.release_and_wait();
        // SAFETY: Per the safety requirements the data is initialised and no references to it
        // remain, so it is never used again.
        unsafe { Qp::<T>::drop_data(qp) };
        0
    }

    /// # Safety
    ///
    /// `qp` is a live QP created by `create_qp_callback`; `attr` and `init` are valid for
    /// writes.
    pub(super) unsafe extern "C" fn query_qp_callback(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            if attr.is_null() || init.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: Per the safety requirements.
            let obj = unsafe { Qp::<T>::from_raw(qp) };
            let q = <T::Qp as Operations>::query(obj, QpAttrMask(mask as u32))?;
            // SAFETY: `attr` and `init` are valid for writes; `qp` is live.
            unsafe {
                let a = &mut *attr;
                a.qp_state = q.state as u32;
                a.cur_qp_state = q.state as u32;
                a.path_mtu = q.path_mtu.as_raw();
                a.qp_access_flags = u32::from(q.qp_access_flags) as c_int;
                q.cap.write_to(&mut a.cap);
                a.max_rd_atomic = q.max_rd_atomic;
                a.max_dest_rd_atomic = q.max_dest_rd_atomic;
                let i = &mut *init;
                i.qp_type = (*qp).qp_type;
                i.send_cq = (*qp).send_cq;
                i.recv_cq = (*qp).recv_cq;
                i.srq = (*qp).srq;
                q.cap.write_to(&mut i.cap);
                i.sq_sig_type = if q.sq_sig_all {
                    bindings::ib_sig_type_IB_SIGNAL_ALL_WR
                } else {
                    bindings::ib_sig_type_IB_SIGNAL_REQ_WR
                };
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `qp` is a live QP created by `create_qp_callback`; `wr` is NULL or a valid chain of work
    /// requests that stays valid during the call; `bad_wr` is NULL or valid for writes.
    pub(super) unsafe extern "C" fn post_send_callback(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Qp::<T>::from_raw(qp) };
        if wr.is_null() {
            // uverbs posts no WRs when user space asks for none.
            return from_result(|| <T::Qp as Operations>::post_send_empty(obj).map(|()| 0));
        }
        // SAFETY: Per the safety requirements `wr` is a valid chain (not NULL, checked above).
        let wr = unsafe { SendWr::from_raw(wr) };
        match <T::Qp as Operations>::post_send(obj, wr) {
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

    /// # Safety
    ///
    /// `qp` is a live QP created by `create_qp_callback`; `wr` is NULL or a valid chain of work
    /// requests that stays valid during the call; `bad_wr` is NULL or valid for writes.
    pub(super) unsafe extern "C" fn post_recv_callback(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        if wr.is_null() {
            return 0;
        }
        // SAFETY: Per the safety requirements; `wr` is not NULL.
        let (obj, wr) = unsafe { (Qp::<T>::from_raw(qp), RecvWr::from_raw(wr)) };
        match <T::Qp as Operations>::post_recv(obj, wr) {
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
