// SPDX-License-Identifier: GPL-2.0

//! The iWARP connection manager (iw_cm) provider interface.
//!
//! An iWARP provider implements connection setup for ib_core's iw_cm through the `iw_*`
//! operations of its device, the methods of [`Operations`] (the type [`Driver::IwCm`] names).
//! The iw_cm passes a connection identifier, [`CmId`], to those operations; the provider reports
//! progress on it with [`CmId::event`].
//!
//! # Contract (from `drivers/infiniband/core/iwcm.c`)
//!
//! - `iw_create_listen`, `iw_destroy_listen`, `iw_connect`, `iw_accept` and `iw_reject` are
//!   called in process context without iw_cm locks held; they may sleep.
//! - `iw_get_qp`, `iw_add_ref` and `iw_rem_ref` are called with the iw_cm's `cm_id_priv->lock`
//!   (a spinlock, interrupts disabled) held: atomic context, they must not sleep.
//! - A provider that keeps a [`CmId`] beyond the call takes a reference ([`ARef<CmId>`], which is
//!   `cm_id->add_ref()`) and drops it after its last event for that connection (normally
//!   `Close`, or the `ConnectReply` that reports a failure).
//! - [`CmId::event`] may be called from any context but hard interrupt context: the iw_cm copies
//!   the private data and queues the event with `GFP_ATOMIC`.
//! - A `ConnectRequest` is delivered on the *listening* id; the event's provider token becomes the
//!   `provider_data` of the new id that the iw_cm creates and later passes to `iw_accept` or
//!   `iw_reject`.
//! - `iw_accept` and `iw_connect` look the QP up with `iw_get_qp` and then, under the same
//!   spinlock, take a reference with `iw_add_ref`, which they drop (`iw_rem_ref`) when the
//!   connection is closed or the id is destroyed. Nothing else calls `iw_add_ref`. The QP must
//!   not be freed between the two calls, so `iw_get_qp` returns it with a reference, which
//!   `iw_add_ref` adopts instead of taking another (see [`Operations::get_qp`]).
//!
//! C header: [`include/rdma/iw_cm.h`](srctree/include/rdma/iw_cm.h).

use super::{
    device::{
        Device,
        Driver, //
    },
    qp::Qp,
    vtable::VTable,
};
use crate::{
    bindings,
    error::from_result,
    impl_flags,
    net::socket::SockAddrStorage,
    prelude::*,
    sync::aref::{
        ARef,
        AlwaysRefCounted, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    net::SocketAddr,
    ptr::{
        self,
        NonNull, //
    },
};

/// The largest private data an MPA frame and an iw_cm event can carry.
pub const MAX_PRIVATE_DATA: usize = 255;

/// The iWARP connection manager operations of a device.
///
/// They are installed together when the implementation provides [`Operations::connect`]; an
/// implementation that does must provide all six. The contexts they are called in are
/// described in the [module documentation](self).
#[vtable]
pub trait Operations {
    /// The driver.
    type Driver: Driver;

    /// Starts listening on `id`'s mapped local address (`iw_create_listen`). May sleep.
    fn create_listen(_dev: &Device<Self::Driver>, _id: &CmId, _backlog: u32) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Stops listening on `id` (`iw_destroy_listen`). May sleep.
    fn destroy_listen(_dev: &Device<Self::Driver>, _id: &CmId) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Connects to `id`'s mapped remote address with the QP `param.qpn()` (`iw_connect`);
    /// reports the outcome with a `ConnectReply` event. May sleep.
    fn connect(_dev: &Device<Self::Driver>, _id: &CmId, _param: &ConnParam<'_>) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Accepts the connection request behind `id` (`iw_accept`); reports `Established`.
    /// May sleep.
    fn accept(_dev: &Device<Self::Driver>, _id: &CmId, _param: &ConnParam<'_>) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Rejects the connection request behind `id` with `private_data` (`iw_reject`). May sleep.
    fn reject(_dev: &Device<Self::Driver>, _id: &CmId, _private_data: &[u8]) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Returns the QP numbered `qpn` (`iw_get_qp`). Atomic context.
    ///
    /// The reference returned becomes the iw_cm's (`iw_add_ref`, which the iw_cm calls right
    /// after this, adopts it; `iw_rem_ref` drops it), so the QP cannot be freed in between: a
    /// concurrent [`qp::Operations::destroy`](super::qp::Operations::destroy) waits for it.
    /// The iw_cm does not say who asks: [`Operations::connect`] and [`Operations::accept`]
    /// must check that the caller may bind the QP ([`CmId::may_bind`]).
    fn get_qp(_dev: &Device<Self::Driver>, _qpn: u32) -> Option<ARef<Qp<Self::Driver>>> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

impl_flags!(
    /// iWARP connection manager flags of a device (`enum iw_flags`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct IwFlags(u32);

    /// An iWARP connection manager flag.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum IwFlag {
        /// The device uses the host's TCP ports; `iwpmd` port mapping is not needed
        /// (`IW_F_NO_PORT_MAP`).
        NoPortMap = bindings::iw_flags_IW_F_NO_PORT_MAP,
    }
);

/// An iw_cm connection identifier (`struct iw_cm_id`).
///
/// # Invariants
///
/// A `&CmId` is only handed out while the id is alive: during an `iw_*` operation that received
/// it, or while a reference ([`ARef<CmId>`], `cm_id->add_ref()`) is held.
#[repr(transparent)]
pub struct CmId(Opaque<bindings::iw_cm_id>);

// SAFETY: The iw_cm's ids are reference-counted and used from any task; the fields the methods
// read are set by the iw_cm before it calls the provider, and `provider_data` is accessed with
// `READ_ONCE`/`WRITE_ONCE`.
unsafe impl Send for CmId {}
// SAFETY: As above.
unsafe impl Sync for CmId {}

// SAFETY: `add_ref`/`rem_ref` are the id's reference counting, usable from any context.
unsafe impl AlwaysRefCounted for CmId {
    fn inc_ref(&self) {
        // SAFETY: The id is alive (type invariant).
        unsafe { bindings::iw_cm_id_add_ref(self.as_raw()) }
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference.
        unsafe { bindings::iw_cm_id_rem_ref(obj.as_ptr().cast()) }
    }
}

/// Which address of a [`CmId`] to read.
#[derive(Clone, Copy)]
enum Which {
    Local = 0,
    Remote = 1,
    MappedLocal = 2,
    MappedRemote = 3,
}

impl CmId {
    /// Creates a reference from a pointer.
    ///
    /// # Safety
    ///
    /// `ptr` is a live `iw_cm_id` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::iw_cm_id) -> &'a Self {
        // SAFETY: `CmId` is a transparent wrapper; the caller guarantees liveness.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns the raw pointer.
    pub fn as_raw(&self) -> *mut bindings::iw_cm_id {
        self.0.get()
    }

    fn addr(&self, which: Which) -> Result<SocketAddr> {
        // SAFETY: The id is alive; the helper returns a pointer into it.
        let p = unsafe { bindings::iw_cm_id_addr(self.as_raw(), which as c_int) };
        // SAFETY: `p` points to a `sockaddr_storage` inside the live id, which the iw_cm sets
        // before it calls the provider and does not change afterwards.
        SockAddrStorage::decode(unsafe { &*p.cast::<bindings::__kernel_sockaddr_storage>() })
    }

    /// Returns the local address the consumer asked for (`local_addr`).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.addr(Which::Local)
    }

    /// Returns the remote address the consumer asked for (`remote_addr`).
    pub fn remote_addr(&self) -> Result<SocketAddr> {
        self.addr(Which::Remote)
    }

    /// Returns the local address after iWARP port mapping (`m_local_addr`); this is the one to
    /// bind or listen on.
    pub fn mapped_local_addr(&self) -> Result<SocketAddr> {
        self.addr(Which::MappedLocal)
    }

    /// Returns the remote address after port mapping (`m_remote_addr`); this is the one to
    /// connect to.
    pub fn mapped_remote_addr(&self) -> Result<SocketAddr> {
        self.addr(Which::MappedRemote)
    }

    /// Returns true if an IPv6 wildcard listener must not take IPv4 connections (`afonly`).
    pub fn afonly(&self) -> bool {
        // SAFETY: The id is alive.
        unsafe { bindings::iw_cm_id_afonly(self.as_raw()) }
    }

    /// Returns true if the rdma_cm connects or accepts this id for user space (`user`).
    ///
    /// The QP number of the connection parameters then comes from user space: see
    /// [`CmId::may_bind`].
    pub fn is_user(&self) -> bool {
        // SAFETY: The id is alive.
        unsafe { bindings::iw_cm_id_user(self.as_raw()) }
    }

    /// Returns true if the connection of this id may bind `qp`: a user QP that the calling
    /// process created if the id is user space's ([`CmId::is_user`]), a kernel QP otherwise.
    ///
    /// Call it from [`Operations::connect`] or [`Operations::accept`] only: for a user id
    /// they run in the system call of the process that connects or accepts (a write to the
    /// rdma_ucm device), which is the process the QP must belong to.
    pub fn may_bind<T: Driver>(&self, qp: &Qp<T>) -> bool {
        if !self.is_user() {
            return !qp.is_user();
        }
        // SAFETY: The QP is alive: the caller holds a reference to it, and ib_core releases
        // its restrack entry (and the task it holds) only after the driver destroyed it.
        unsafe { bindings::ib_qp_of_current(qp.as_raw()) }
    }

    /// Returns the type of service the consumer set, if any.
    pub fn tos(&self) -> Option<u8> {
        // SAFETY: The id is alive.
        u8::try_from(unsafe { bindings::iw_cm_id_tos(self.as_raw()) }).ok()
    }

    /// Returns the provider's token for this id (`provider_data`, 0 if unset).
    ///
    /// The token is an integer the provider chooses, e.g. a key into its own table of
    /// endpoints; this abstraction never dereferences it. For an id created by the iw_cm for a
    /// connection request it is the token of the `ConnectRequest` event.
    pub fn provider_token(&self) -> usize {
        // SAFETY: The id is alive; the helper reads with `READ_ONCE`.
        unsafe { bindings::iw_cm_id_provider_data(self.as_raw()) }
    }

    /// Sets the provider's token (see [`CmId::provider_token`]).
    pub fn set_provider_token(&self, token: usize) {
        // SAFETY: The id is alive; the helper writes with `WRITE_ONCE`. The iw_cm only reads
        // the field when it creates an id for a connection request.
        unsafe { bindings::iw_cm_id_set_provider_data(self.as_raw(), token) }
    }

    /// Delivers `event` to the iw_cm (`cm_id->event_handler`).
    ///
    /// Any context except hard interrupt context. Returns the iw_cm's error (e.g. `ENOMEM`).
    pub fn event(&self, event: &Event<'_>) -> Result {
        let pdata = event.private_data;
        let len = u8::try_from(pdata.len()).map_err(|_| EINVAL)?;
        let local = event.local.as_ref().map(SockAddrStorage::new);
        let remote = event.remote.as_ref().map(SockAddrStorage::new);
        let addr_ptr = |a: &Option<SockAddrStorage>| {
            a.as_ref()
                .map_or(ptr::null(), |s| ptr::from_ref(s.as_raw()))
        };
        // SAFETY: The id is alive. The addresses and private data are valid for the call; the
        // iw_cm copies what it keeps.
        let ret = unsafe {
            bindings::iw_cm_id_event(
                self.as_raw(),
                event.kind.as_raw(),
                event.status.map_or(0, |e| e.to_errno()),
                addr_ptr(&local),
                addr_ptr(&remote),
                if pdata.is_empty() {
                    ptr::null()
                } else {
                    pdata.as_ptr().cast::<c_void>()
                },
                len,
                event.provider_token,
                event.ird,
                event.ord,
            )
        };
        if ret < 0 {
            Err(Error::from_errno(ret))
        } else {
            Ok(())
        }
    }
}

/// The type of an iw_cm event (`enum iw_cm_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A connection request arrived on a listener (passive side).
    ConnectRequest,
    /// The peer answered an `iw_connect` (active side); `status` says whether it accepted.
    ConnectReply,
    /// An accepted connection is established (passive side).
    Established,
    /// The peer started an orderly shutdown.
    Disconnect,
    /// The connection is closed; the last event of a connection.
    Close,
}

impl EventKind {
    fn as_raw(self) -> bindings::iw_cm_event_type {
        match self {
            EventKind::ConnectRequest => bindings::iw_cm_event_type_IW_CM_EVENT_CONNECT_REQUEST,
            EventKind::ConnectReply => bindings::iw_cm_event_type_IW_CM_EVENT_CONNECT_REPLY,
            EventKind::Established => bindings::iw_cm_event_type_IW_CM_EVENT_ESTABLISHED,
            EventKind::Disconnect => bindings::iw_cm_event_type_IW_CM_EVENT_DISCONNECT,
            EventKind::Close => bindings::iw_cm_event_type_IW_CM_EVENT_CLOSE,
        }
    }
}

/// An event for [`CmId::event`] (`struct iw_cm_event`).
pub struct Event<'a> {
    /// What happened.
    pub kind: EventKind,
    /// `None` for success, or the error: e.g. `ECONNREFUSED` (rejected), `ETIMEDOUT`,
    /// `ECONNRESET` (reset or aborted).
    pub status: Option<Error>,
    /// The connection's local address, if known.
    pub local: Option<SocketAddr>,
    /// The connection's remote address, if known.
    pub remote: Option<SocketAddr>,
    /// The peer's private data (`ConnectRequest`, `ConnectReply`); at most
    /// [`MAX_PRIVATE_DATA`] bytes.
    pub private_data: &'a [u8],
    /// For `ConnectRequest`: the token the new id's `provider_data` will carry.
    pub provider_token: usize,
    /// The peer's inbound RDMA Read limit, as the consumer of this side must see it.
    pub ird: u8,
    /// The peer's outbound RDMA Read limit, as the consumer of this side must see it.
    pub ord: u8,
}

impl<'a> Event<'a> {
    /// An event of `kind` with no status, addresses or private data.
    pub fn new(kind: EventKind) -> Self {
        Self {
            kind,
            status: None,
            local: None,
            remote: None,
            private_data: &[],
            provider_token: 0,
            ird: 0,
            ord: 0,
        }
    }
}

/// The consumer's connection parameters for `iw_connect` and `iw_accept`
/// (`struct iw_cm_conn_param`).
///
/// # Invariants
///
/// `raw` is valid for `'a`, and its private data (if any) is valid for `'a`.
pub struct ConnParam<'a> {
    raw: NonNull<bindings::iw_cm_conn_param>,
    _p: PhantomData<&'a bindings::iw_cm_conn_param>,
}

impl<'a> ConnParam<'a> {
    /// # Safety
    ///
    /// `raw` is valid for `'a`, and so is its private data.
    unsafe fn from_raw(raw: *mut bindings::iw_cm_conn_param) -> Option<Self> {
        // INVARIANT: Per the safety requirements.
        NonNull::new(raw).map(|raw| Self {
            raw,
            _p: PhantomData,
        })
    }

    /// Returns the private data to send in the MPA Request or Reply.
    pub fn private_data(&self) -> &'a [u8] {
        let mut len = 0u16;
        // SAFETY: `raw` is valid (invariant); `len` is valid for writes.
        let p = unsafe { bindings::iw_cm_conn_param_pdata(self.raw.as_ptr(), &mut len) };
        if p.is_null() || len == 0 {
            return &[];
        }
        // SAFETY: The consumer's private data is valid for `len` bytes for `'a` (invariant).
        unsafe { core::slice::from_raw_parts(p.cast::<u8>(), usize::from(len)) }
    }

    fn get(&self) -> (u32, u32, u32) {
        let (mut ird, mut ord, mut qpn) = (0, 0, 0);
        // SAFETY: `raw` is valid; the outputs are valid for writes.
        unsafe { bindings::iw_cm_conn_param_get(self.raw.as_ptr(), &mut ird, &mut ord, &mut qpn) };
        (ird, ord, qpn)
    }

    /// Returns the inbound RDMA Read limit the consumer asks for.
    pub fn ird(&self) -> u32 {
        self.get().0
    }

    /// Returns the outbound RDMA Read limit the consumer asks for.
    pub fn ord(&self) -> u32 {
        self.get().1
    }

    /// Returns the number of the QP to bind to the connection.
    pub fn qpn(&self) -> u32 {
        self.get().2
    }
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `id` is a live id whose device is a registered `Device<T>`.
    unsafe fn iw_dev<'a>(id: &CmId) -> &'a Device<T> {
        // SAFETY: Per the safety requirements.
        unsafe { Device::<T>::from_raw(bindings::iw_cm_id_device(id.as_raw())) }
    }

    /// # Safety
    ///
    /// Called by the iw_cm with a live id of a `Device<T>`.
    pub(super) unsafe extern "C" fn iw_create_listen_callback(
        id: *mut bindings::iw_cm_id,
        backlog: c_int,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (id, dev) = unsafe { (CmId::from_raw(id), Self::iw_dev(CmId::from_raw(id))) };
            <T::IwCm as Operations>::create_listen(dev, id, backlog.max(0) as u32)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// As for `iw_create_listen_callback`.
    pub(super) unsafe extern "C" fn iw_destroy_listen_callback(
        id: *mut bindings::iw_cm_id,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (id, dev) = unsafe { (CmId::from_raw(id), Self::iw_dev(CmId::from_raw(id))) };
            <T::IwCm as Operations>::destroy_listen(dev, id)?;
            Ok(0)
        })
    }

    /// Runs `op` (`iw_connect` or `iw_accept`) with the id, its device and the parameters.
    ///
    /// # Safety
    ///
    /// As for `iw_create_listen_callback`; `param` is valid for the call.
    unsafe fn iw_with_conn_param(
        id: *mut bindings::iw_cm_id,
        param: *mut bindings::iw_cm_conn_param,
        op: fn(&Device<T>, &CmId, &ConnParam<'_>) -> Result,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (id, dev, param) = unsafe {
                (
                    CmId::from_raw(id),
                    Self::iw_dev(CmId::from_raw(id)),
                    ConnParam::from_raw(param).ok_or(EINVAL)?,
                )
            };
            op(dev, id, &param)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// As for `iw_create_listen_callback`; `param` is valid for the call.
    pub(super) unsafe extern "C" fn iw_connect_callback(
        id: *mut bindings::iw_cm_id,
        param: *mut bindings::iw_cm_conn_param,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        unsafe { Self::iw_with_conn_param(id, param, <T::IwCm as Operations>::connect) }
    }

    /// # Safety
    ///
    /// As for `iw_connect_callback`.
    pub(super) unsafe extern "C" fn iw_accept_callback(
        id: *mut bindings::iw_cm_id,
        param: *mut bindings::iw_cm_conn_param,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        unsafe { Self::iw_with_conn_param(id, param, <T::IwCm as Operations>::accept) }
    }

    /// # Safety
    ///
    /// As for `iw_create_listen_callback`; `pdata` is NULL or valid for `len` bytes during the call.
    pub(super) unsafe extern "C" fn iw_reject_callback(
        id: *mut bindings::iw_cm_id,
        pdata: *const c_void,
        len: u8,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (id, dev) = unsafe { (CmId::from_raw(id), Self::iw_dev(CmId::from_raw(id))) };
            let pdata = if pdata.is_null() || len == 0 {
                &[][..]
            } else {
                // SAFETY: Per the safety requirements.
                unsafe { core::slice::from_raw_parts(pdata.cast::<u8>(), usize::from(len)) }
            };
            <T::IwCm as Operations>::reject(dev, id, pdata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `dev` is a registered `Device<T>`.
    pub(super) unsafe extern "C" fn iw_get_qp_callback(
        dev: *mut bindings::ib_device,
        qpn: c_int,
    ) -> *mut bindings::ib_qp {
        // SAFETY: Per the safety requirements.
        let dev = unsafe { Device::<T>::from_raw(dev) };
        let Ok(qpn) = u32::try_from(qpn) else {
            return ptr::null_mut();
        };
        // The reference is handed over to the iw_cm: `iw_add_ref_callback` adopts it, and
        // `iw_rem_ref_callback` drops it. Dropping it here would let a concurrent destroy free
        // the QP before the iw_cm's `iw_add_ref`.
        <T::IwCm as Operations>::get_qp(dev, qpn)
            .map_or(ptr::null_mut(), |qp| ARef::into_raw(qp).as_ptr().cast())
    }

    /// Adopts the reference `iw_get_qp_callback` returned the QP with.
    ///
    /// # Safety
    ///
    /// `qp` was returned by `iw_get_qp_callback`, whose reference the caller owns and hands
    /// over; it is returned with `iw_rem_ref_callback`. (The iw_cm calls `iw_add_ref` exactly
    /// once after each successful `iw_get_qp`, under the same lock, and nowhere else.)
    pub(super) unsafe extern "C" fn iw_add_ref_callback(_qp: *mut bindings::ib_qp) {}

    /// # Safety
    ///
    /// `qp` is a live QP of a `Device<T>` on which the caller holds the reference of
    /// `iw_get_qp_callback`, adopted by `iw_add_ref_callback`.
    pub(super) unsafe extern "C" fn iw_rem_ref_callback(qp: *mut bindings::ib_qp) {
        // SAFETY: `qp` is an `Object` at offset 0 (`Qp::from_raw`); the caller owns the
        // reference of `iw_get_qp_callback`, which this gives back.
        drop(unsafe { ARef::from_raw(NonNull::new_unchecked(qp.cast::<Qp<T>>())) });
    }
}

/// Returns a counted reference to `id` (`cm_id->add_ref()`), for a provider that keeps it.
pub fn hold(id: &CmId) -> ARef<CmId> {
    ARef::from(id)
}
