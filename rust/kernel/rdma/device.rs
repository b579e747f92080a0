// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`) and their operations.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! # Lifetime of a device
//!
//! An RDMA device is allocated by ib_core (`_ib_alloc_device()`) with room for the driver's data
//! behind the C `struct ib_device`, exactly like C drivers do with `ib_alloc_device()`. The Rust
//! type for this allocation is [`Device<T>`]; `T` is the driver's per-device data and implements
//! [`Driver`], from which the `struct ib_device_ops` table is built.
//!
//! 1. [`UnregisteredDevice::new`] allocates the device and initialises `T` in place. It is only
//!    callable from an `rdma link add` callback (it needs a [`NewLink`] token, see
//!    [`super::link`]), so a device can only come into existence while the module's link
//!    registration is alive.
//! 2. The driver configures the device through the [`UnregisteredDevice`] (node type, GUID,
//!    ports, netdev, ...). Nothing else can see it yet. Dropping an `UnregisteredDevice` frees it
//!    with `ib_dealloc_device()`, which drops `T`.
//! 3. [`UnregisteredDevice::register`] hands the device to ib_core. On failure the device is freed
//!    (and `T` dropped) before returning. On success ib_core owns it: the driver keeps no pointer,
//!    because ib_core may free the device at any time after `ib_register_device()` returns (e.g.
//!    `rdma link delete` racing with the caller).
//! 4. The device is unregistered by ib_core (`rdma link delete`), by the driver
//!    ([`DeviceRef::unregister_queued`], typically from a netdev notifier) or by the fence in the
//!    link registration's drop (`ib_unregister_driver()`, see [`super::link::Registration`]).
//!    Unregistration first removes all clients (uverbs, rdma_cm, ...) -- which destroys every
//!    user object and ucontext through the driver's callbacks -- and waits until every
//!    [`DeviceRef`] has been dropped. Then ib_core calls `dealloc_driver`, which drops `T`, and
//!    finally frees the memory (after an RCU grace period).
//!
//! Consequently:
//!
//! - every callback receives a `&Device<T>` that is valid for the duration of the callback, and
//!   callbacks may run concurrently with each other and with an unregistration that has not yet
//!   reached `dealloc_driver` (so `T: Sync`);
//! - `T` is dropped exactly once, on whatever thread performs the last step of unregistration
//!   (so `T: Send`), after all verbs objects of the device have been destroyed;
//! - a [`DeviceRef`] (obtained with [`Device::get_by_netdev`]) keeps the device from completing
//!   unregistration, so it must not be held across anything that waits for unregistration.
//!
//! # Verbs objects
//!
//! Verbs objects (ucontext, PD, CQ, QP, SRQ) are allocated by ib_core with the size the driver
//! declares (`INIT_RDMA_OBJ_SIZE`), and the driver initialises its part in the create callback.
//! In Rust every object type follows one pattern, [`super::object::Object`]: the C struct at
//! offset 0 followed by the driver's data, which the create callback returns as a [`PinInit`] and
//! which is dropped by the matching destroy callback. MRs are allocated by the driver in C; the
//! abstraction allocates them in the same layout so drivers see the same pattern.

use super::{
    attr::{
        DeviceAttr,
        EventType,
        Gid,
        PortAttr,
        PortImmutable, //
    },
    iwcm::{
        CmId,
        ConnParam,
        IwOps, //
    },
    link::NewLink,
    mmap::{
        mmap_callback,
        mmap_free_callback, //
    },
    object::{
        Counted,
        Cq,
        CqInitAttr,
        Mr,
        Pd,
        Qp,
        QpAttr,
        QpInitAttr,
        RecvWr,
        SendWr,
        Srq,
        SrqInitAttr,
        Ucontext,
        Wc, //
    },
    qp::QpQuery,
    srq::SrqAttrs,
    udata::Udata,
};
use crate::{
    bindings,
    error::{
        from_result,
        to_result, //
    },
    module::this_module,
    net::device::{
        NetDevice,
        IFNAMSIZ, //
    },
    prelude::*,
    sync::aref::ARef,
    types::Opaque, //
};
use core::{
    any::TypeId,
    marker::PhantomData,
    mem::{
        ManuallyDrop,
        MaybeUninit, //
    },
    ops::Deref,
    ptr::NonNull, //
};

/// Identifies the kind of provider (`enum rdma_driver_id`).
///
/// user space providers (rdma-core) bind to a device by its driver id and its
/// [`Driver::UVERBS_ABI_VER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriverId(bindings::rdma_driver_id);

impl DriverId {
    /// The soft-iWARP driver id (`RDMA_DRIVER_SIW`), used by rdma-core's `siw` provider.
    pub const SIW: Self = Self(bindings::rdma_driver_id_RDMA_DRIVER_SIW);

    pub(crate) const fn as_raw(self) -> bindings::rdma_driver_id {
        self.0
    }
}

/// The node type of a device (`enum rdma_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeType(u8);

impl NodeType {
    /// An InfiniBand channel adapter (`RDMA_NODE_IB_CA`).
    pub const IB_CA: Self = Self(bindings::RDMA_NODE_IB_CA as u8);
    /// An iWARP RDMA NIC (`RDMA_NODE_RNIC`).
    pub const RNIC: Self = Self(bindings::RDMA_NODE_RNIC as u8);
}

/// A legacy uverbs write() command (`enum ib_uverbs_write_cmds`) a device may opt into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UverbsCmd(u32);

impl UverbsCmd {
    /// `IB_USER_VERBS_CMD_POST_SEND`; the siw provider uses it as the send queue doorbell.
    pub const POST_SEND: Self = Self(bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND);
    /// `IB_USER_VERBS_CMD_POST_RECV`.
    pub const POST_RECV: Self = Self(bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV);
    /// `IB_USER_VERBS_CMD_POST_SRQ_RECV`.
    pub const POST_SRQ_RECV: Self =
        Self(bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SRQ_RECV);
}

/// iWARP connection manager flags (`enum iw_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IwFlags(u32);

impl IwFlags {
    /// No flags.
    pub const NONE: Self = Self(0);
    /// The device uses the host's TCP ports; `iwpmd` port mapping is not needed
    /// (`IW_F_NO_PORT_MAP`).
    pub const NO_PORT_MAP: Self = Self(bindings::iw_flags_IW_F_NO_PORT_MAP);
}

/// The error returned by a failed post: the error and the first work request that was not posted.
pub type PostError<'a, W> = (Error, &'a W);

/// The operations of an RDMA provider.
///
/// The implementing type is the driver's per-device data, stored in [`Device<Self>`] behind the
/// C `struct ib_device`. The `struct ib_device_ops` table is built from this trait at compile
/// time: methods the driver does not implement are left `NULL` in the table.
///
/// The required methods are the ones ib_core requires of a kernel-verbs provider
/// (`ib_device_check_mandatory()` in
/// [`drivers/infiniband/core/device.c`](srctree/drivers/infiniband/core/device.c)).
///
/// For each verbs object type the driver declares the type of its per-object data (e.g.
/// [`Driver::Pd`]). The create method returns an initialiser for it; the abstraction
/// initialises it in place in the object allocated by ib_core and drops it after the matching
/// destroy method (a hook that runs while the data is still alive) returns. Destroy methods are
/// infallible: once ib_core asks to destroy an object, the data is dropped.
///
/// All methods may be called concurrently, from any thread, in process context.
#[vtable]
pub trait Driver: Sized + Send + Sync + 'static {
    /// The driver id reported to user space (`ib_device_ops.driver_id`).
    const DRIVER_ID: DriverId;

    /// The uverbs ABI version reported to user space (`ib_device_ops.uverbs_abi_ver`).
    const UVERBS_ABI_VER: u32;

    /// Per-ucontext data.
    type Ucontext: Send + Sync;
    /// Per-PD data.
    type Pd: Send + Sync;
    /// Per-CQ data.
    type Cq: Send + Sync;
    /// Per-QP data.
    type Qp: Send + Sync;
    /// Per-SRQ data.
    type Srq: Send + Sync;
    /// Per-MR data.
    type Mr: Send + Sync;

    /// Returns the device attributes. `udata` is `None` for kernel callers.
    fn query_device(dev: &Device<Self>, udata: Option<&Udata>) -> Result<DeviceAttr>;

    /// Returns the attributes of port `port`.
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// Returns the immutable attributes of port `port`. Called once per port at registration.
    fn get_port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// Returns entry `index` of the GID table of port `port`.
    fn query_gid(_dev: &Device<Self>, _port: u32, _index: i32) -> Result<Gid> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver data of a new user context.
    fn alloc_ucontext(_dev: &Device<Self>, _udata: &Udata) -> impl PinInit<Self::Ucontext, Error> {
        // Never called: `HAS_ALLOC_UCONTEXT` is false unless the driver overrides this method.
        Err::<Self::Ucontext, Error>(EOPNOTSUPP)
    }

    /// Called before the data of a user context is dropped.
    fn dealloc_ucontext(_uctx: &Ucontext<Self>) {}

    /// Called when the device is unregistered while a process still holds the user context.
    ///
    /// Implementing this method (it may do nothing) lets ib_core remove the device without
    /// waiting for the processes that use it (`ib_uverbs_remove_one()` in
    /// [`drivers/infiniband/core/uverbs_main.c`](srctree/drivers/infiniband/core/uverbs_main.c)):
    /// uverbs destroys every object of the context through the destroy methods, zaps the
    /// process's mappings of the context's queues, then calls this method and
    /// [`Driver::dealloc_ucontext`]; later verbs calls of the process fail with `EIO`. It also
    /// means an open uverbs file no longer pins the driver's module. The destroy methods must
    /// therefore be able to tear down an object that is in use (a connected QP, for instance).
    /// Mapped queue memory is owned by its mmap entry (see [`super::mmap`]), so it stays valid
    /// until the mappings are gone. Without this method, removing the device blocks until every
    /// process has closed its uverbs file.
    fn disassociate_ucontext(_uctx: &Ucontext<Self>) {}

    /// Creates the driver data of a new protection domain. `udata` is `None` for kernel callers.
    fn alloc_pd(dev: &Device<Self>, udata: Option<&Udata>) -> impl PinInit<Self::Pd, Error>;

    /// Called before the data of a protection domain is dropped.
    fn dealloc_pd(_pd: &Pd<Self>, _udata: Option<&Udata>) {}

    /// Creates the driver data of a new completion queue.
    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self::Cq, Error>;

    /// Called before the data of a completion queue is dropped.
    fn destroy_cq(_cq: &Cq<Self>, _udata: Option<&Udata>) {}

    /// Polls up to `wc.len()` completions into `wc` and returns how many were written.
    fn poll_cq(cq: &Cq<Self>, wc: &mut [Wc]) -> Result<usize>;

    /// Arms the completion queue. `flags` are the `IB_CQ_*` notify flags. Returns `true` if
    /// `IB_CQ_REPORT_MISSED_EVENTS` was requested and completions may have been missed.
    fn req_notify_cq(cq: &Cq<Self>, flags: u32) -> Result<bool>;

    /// Creates the driver data of a new queue pair. The driver may update the capabilities in
    /// `attr` to the values it actually provides.
    fn create_qp(
        dev: &Device<Self>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self::Qp, Error>;

    /// Modifies the attributes selected by `mask` (`IB_QP_*`) of a queue pair.
    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr, mask: i32, udata: Option<&Udata>) -> Result;

    /// Called when a queue pair has been created, with its number set: the place to publish it
    /// (e.g. in a QP number table, taking an [`ARef`]). If it fails, the creation fails and the
    /// data is dropped without a call to [`Driver::destroy_qp`].
    fn qp_created(_qp: &Qp<Self>) -> Result {
        Ok(())
    }

    /// Called when ib_core destroys a queue pair. Afterwards the abstraction waits until every
    /// [`ARef`] to the QP is dropped, then drops the data: the hook must make all holders
    /// (tables, connections, queued work) let go, or the destruction never finishes.
    fn destroy_qp(_qp: &Qp<Self>, _udata: Option<&Udata>) {}

    /// Posts a chain of send work requests. On failure returns the error and the first request
    /// that was not posted.
    fn post_send<'a>(qp: &Qp<Self>, wr: &'a SendWr) -> Result<(), PostError<'a, SendWr>>;

    /// Handles a `post_send` without work requests: the send queue doorbell of providers whose
    /// user space posts through a mapped ring (`IB_USER_VERBS_CMD_POST_SEND` with no WRs).
    fn doorbell(_qp: &Qp<Self>) -> Result {
        Ok(())
    }

    /// Posts a chain of receive work requests. On failure returns the error and the first
    /// request that was not posted.
    fn post_recv<'a>(qp: &Qp<Self>, wr: &'a RecvWr) -> Result<(), PostError<'a, RecvWr>>;

    /// Returns the attributes of a queue pair; `mask` (`IB_QP_*`) names the ones asked for.
    fn query_qp(_qp: &Qp<Self>, _mask: i32) -> Result<QpQuery> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Returns the number of entries of a completion queue just created by
    /// [`Driver::create_cq`]; the abstraction reports it to the consumer (`ib_cq.cqe`).
    fn cq_size(cq: &Self::Cq) -> u32;

    /// Returns the QP number of a queue pair just created by [`Driver::create_qp`]; the
    /// abstraction stores it in `ib_qp.qp_num`.
    fn qp_num(qp: &Self::Qp) -> u32;

    /// Creates the driver data of a new shared receive queue.
    fn create_srq(
        _dev: &Device<Self>,
        _attr: &mut SrqInitAttr,
        _udata: Option<&Udata>,
    ) -> impl PinInit<Self::Srq, Error> {
        // Never called: `HAS_CREATE_SRQ` is false unless the driver overrides this method.
        Err::<Self::Srq, Error>(EOPNOTSUPP)
    }

    /// Called before the data of a shared receive queue is dropped.
    fn destroy_srq(_srq: &Srq<Self>, _udata: Option<&Udata>) {}

    /// Modifies the attributes selected by `mask` (`IB_SRQ_*`) of a shared receive queue.
    fn modify_srq(
        _srq: &Srq<Self>,
        _attr: &SrqAttrs,
        _mask: u32,
        _udata: Option<&Udata>,
    ) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Returns the attributes of a shared receive queue.
    fn query_srq(_srq: &Srq<Self>) -> Result<SrqAttrs> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Posts a chain of receive work requests to a shared receive queue. On failure returns
    /// the error and the first request that was not posted.
    fn post_srq_recv<'a>(_srq: &Srq<Self>, _wr: &'a RecvWr) -> Result<(), PostError<'a, RecvWr>> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver data of the DMA memory region of a kernel PD, covering all of memory
    /// (`pd->local_dma_lkey`, and `pd->unsafe_global_rkey` if ib_core asked for remote access).
    ///
    /// `kva` is the capability to copy to and from the kernel virtual addresses the consumer
    /// uses with this region; ib_core only creates DMA MRs for kernel PDs (the op fails with
    /// `EINVAL` for any other PD without calling the driver).
    fn get_dma_mr(
        pd: &Pd<Self>,
        access: i32,
        kva: super::mr::KernelVa,
    ) -> impl PinInit<Self::Mr, Error>;

    /// Creates the driver data of a memory region registering user memory
    /// `[start, start + length)` at I/O virtual address `virt_addr`.
    fn reg_user_mr(
        pd: &Pd<Self>,
        start: u64,
        length: u64,
        virt_addr: u64,
        access: i32,
        udata: &Udata,
    ) -> impl PinInit<Self::Mr, Error>;

    /// Called before the data of a memory region is dropped.
    fn dereg_mr(_mr: &Mr<Self>, _udata: Option<&Udata>) {}

    /// Returns the local and remote keys (`lkey`, `rkey`) of a memory region just created by
    /// [`Driver::get_dma_mr`], [`Driver::reg_user_mr`] or [`Driver::alloc_mr`]; the abstraction
    /// stores them in the `struct ib_mr`.
    fn mr_keys(mr: &Self::Mr) -> (u32, u32);

    /// Creates the driver data of a memory region for fast registration (`alloc_mr`) of type
    /// `mr_type` ([`super::mr::mr_type`]) with room for `max_num_sg` pages. The driver that
    /// implements it implements [`Driver::map_mr_step`] too (`map_mr_sg`).
    fn alloc_mr(_pd: &Pd<Self>, _mr_type: u32, _max_num_sg: u32) -> impl PinInit<Self::Mr, Error> {
        // Never called: `HAS_ALLOC_MR` is false unless the driver overrides this method.
        Err::<Self::Mr, Error>(EOPNOTSUPP)
    }

    /// Applies one step of `map_mr_sg` to the [`super::mr::PageList`] of a memory region created
    /// by [`Driver::alloc_mr`] (see [`super::mr`]), with [`super::mr::PageList::apply`].
    /// Errors stop the mapping. Process context; must not sleep between the steps of one
    /// mapping.
    fn map_mr_step(_mr: &Mr<Self>, _step: super::mr::MapStep) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    // iWARP connection manager operations (see [`super::iwcm`] for their contexts). They are
    // installed together when the driver implements `iw_connect`; a driver that does must
    // implement all eight.

    /// Starts listening on `id`'s mapped local address (`iw_create_listen`). May sleep.
    fn iw_create_listen(_dev: &Device<Self>, _id: &CmId, _backlog: u32) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Stops listening on `id` (`iw_destroy_listen`). May sleep.
    fn iw_destroy_listen(_dev: &Device<Self>, _id: &CmId) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Connects to `id`'s mapped remote address with the QP `param.qpn()` (`iw_connect`);
    /// reports the outcome with a `ConnectReply` event. May sleep.
    fn iw_connect(_dev: &Device<Self>, _id: &CmId, _param: &ConnParam<'_>) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Accepts the connection request behind `id` (`iw_accept`); reports `Established`.
    /// May sleep.
    fn iw_accept(_dev: &Device<Self>, _id: &CmId, _param: &ConnParam<'_>) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Rejects the connection request behind `id` with `private_data` (`iw_reject`). May sleep.
    fn iw_reject(_dev: &Device<Self>, _id: &CmId, _private_data: &[u8]) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Returns the QP numbered `qpn` (`iw_get_qp`). Atomic context.
    ///
    /// The iw_cm's own references (`iw_add_ref`/`iw_rem_ref`) are [`ARef`]s taken by the
    /// abstraction.
    fn iw_get_qp(_dev: &Device<Self>, _qpn: u32) -> Option<ARef<Qp<Self>>> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

/// The size in bytes of a type as allocated by `kmalloc()`.
///
/// ib_core allocates devices and objects with `kzalloc(size)`. Padding the size to the alignment
/// makes the allocation come from a cache whose objects are aligned to at least the alignment of
/// `T` for the (power of two) alignments our types have, as for `fwctl`.
const fn kmalloc_size<T>() -> usize {
    core::alloc::Layout::new::<T>().pad_to_align().size()
}

/// An RDMA device: a C `struct ib_device` followed by the driver's data `T`.
///
/// A `&Device<T>` is only handed to the driver while the device is known to be alive: in
/// callbacks, through an [`UnregisteredDevice`] or through a [`DeviceRef`]. Dereferences to `T`.
///
/// # Invariants
///
/// - `ibdev` is at offset 0 and was allocated and initialised by `_ib_alloc_device()` with the
///   size of `Self`.
/// - `type_id` holds the (unaligned) bytes of `TypeId::of::<T>()`.
/// - `data` is initialised and pinned from the time the device's `dealloc_driver` op is set until
///   it is dropped by that op.
#[repr(C)]
pub struct Device<T: Driver> {
    ibdev: Opaque<bindings::ib_device>,
    type_id: MaybeUninit<[u8; core::mem::size_of::<TypeId>()]>,
    data: T,
}

impl<T: Driver> Device<T> {
    /// Returns a raw pointer to the C `struct ib_device`.
    pub fn as_raw(&self) -> *mut bindings::ib_device {
        self.ibdev.get()
    }

    /// Creates a reference to a [`Device<T>`] from a pointer to its `struct ib_device`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to the `ibdev` field of a live [`Device<T>`] whose data is initialised,
    /// and the device must stay alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ibdev` is at offset 0 (type invariant); the caller guarantees the rest.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns a held reference to the net device attached to `port`, if any.
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: `self.as_raw()` is a valid device; `ib_device_get_netdev()` returns the netdev
        // with a reference taken with `dev_hold()`, or NULL.
        let ndev = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        let ndev = NonNull::new(ndev)?;
        // SAFETY: We own the reference taken by `ib_device_get_netdev()`, which `ARef` releases
        // with `dev_put()`. `NetDevice` is a transparent wrapper of `net_device`.
        Some(unsafe { ARef::from_raw(ndev.cast::<NetDevice>()) })
    }

    /// Returns the active speed (`IB_SPEED_*`) and width (`IB_WIDTH_*`) of `port`, derived from
    /// the link speed of its Ethernet net device (`ib_get_eth_speed()`).
    ///
    /// This takes the RTNL lock, so it must not be called from a netdev notifier.
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let mut speed: u16 = 0;
        let mut width: u8 = 0;
        // SAFETY: `self.as_raw()` is a valid device and the out-pointers are valid.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Looks up the registered device of type `T` attached to `ndev`.
    ///
    /// Returns `None` if there is none, or if the device attached to `ndev` with the driver id of
    /// `T` was not created by this abstraction for `T` (for example a C `siw` device).
    pub fn get_by_netdev(ndev: &NetDevice) -> Option<DeviceRef<T>> {
        // SAFETY: `ndev` is a valid net device. On success `ib_device_get_by_netdev()` returns a
        // registered device with its registration reference count raised.
        let raw =
            unsafe { bindings::ib_device_get_by_netdev(ndev.as_raw(), T::DRIVER_ID.as_raw()) };
        let raw = NonNull::new(raw)?;
        // SAFETY: We hold a registration reference, so the device is alive.
        if unsafe { Self::is_ours(raw.as_ptr()) } {
            // INVARIANT: The device is a registered `Device<T>` and we own a reference.
            Some(DeviceRef {
                ptr: raw.cast(),
                _p: PhantomData,
            })
        } else {
            // SAFETY: We own the reference taken above.
            unsafe { bindings::ib_device_put(raw.as_ptr()) };
            None
        }
    }

    /// Returns whether `ndev` has a registered device with the driver id of `T`, whether created
    /// by this abstraction or not (e.g. by the C `siw` driver, which uses the same id).
    pub fn netdev_has_device(ndev: &NetDevice) -> bool {
        // SAFETY: `ndev` is a valid net device.
        let raw =
            unsafe { bindings::ib_device_get_by_netdev(ndev.as_raw(), T::DRIVER_ID.as_raw()) };
        if raw.is_null() {
            return false;
        }
        // SAFETY: `ib_device_get_by_netdev()` took a registration reference, which we drop.
        unsafe { bindings::ib_device_put(raw) };
        true
    }

    /// Returns whether `raw` is a [`Device<T>`].
    ///
    /// A device whose `dealloc_driver` op is this abstraction's callback for `T` was created by
    /// [`UnregisteredDevice::new`] (possibly for another type whose callback the compiler merged
    /// with ours, but then it is still a `Device<U>` with the same header layout), so its
    /// `type_id` field can be read and tells the exact type.
    ///
    /// # Safety
    ///
    /// `raw` must point to a live `struct ib_device` whose `ops` are set.
    unsafe fn is_ours(raw: *mut bindings::ib_device) -> bool {
        let dealloc: Option<unsafe extern "C" fn(*mut bindings::ib_device)> =
            Some(VTable::<T>::dealloc_driver_callback);
        // SAFETY: `raw` is valid per the safety requirements. ib_core only changes the op
        // temporarily while a failed registration is unwound (it is then not ours to use
        // anyway), so read it like `READ_ONCE`.
        let ops_dealloc = unsafe { core::ptr::read_volatile(&raw const (*raw).ops.dealloc_driver) };
        if ops_dealloc.map(|f| f as usize) != dealloc.map(|f| f as usize) {
            return false;
        }
        // SAFETY: As argued above, `raw` is the `ibdev` field of a `Device<U>` for some `U`, and
        // the offset of `type_id` in `Device<U>` does not depend on `U` (`repr(C)`, and the
        // field has alignment 1). It was written with `TypeId::of::<U>()`.
        let id = unsafe {
            let dev = raw.cast::<Self>();
            core::ptr::read_unaligned((&raw const (*dev).type_id).cast::<TypeId>())
        };
        id == TypeId::of::<T>()
    }
}

impl<T: Driver> Deref for Device<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

// SAFETY: The C part of the device is protected by ib_core's locking and may be used from any
// thread; the driver data is `Send`.
unsafe impl<T: Driver> Send for Device<T> {}

// SAFETY: All `&self` methods are safe to call concurrently; the driver data is `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}

/// A device that has been allocated but not yet registered with ib_core.
///
/// The owner has exclusive access to the device and can configure it. Dropping it frees the
/// device (and drops the driver data); [`UnregisteredDevice::register`] hands it to ib_core.
///
/// # Invariants
///
/// `ptr` points to a live [`Device<T>`] with initialised data and ops set, that is not registered
/// and that no one else has a pointer to.
pub struct UnregisteredDevice<T: Driver> {
    ptr: NonNull<Device<T>>,
}

impl<T: Driver> UnregisteredDevice<T> {
    /// Allocates a new device and initialises the driver data with `init`.
    ///
    /// The device is created in the initial network namespace, like `ib_alloc_device()` does.
    pub fn new<E>(_link: &NewLink<'_, T>, init: impl PinInit<T, E>) -> Result<Self>
    where
        Error: From<E>,
    {
        const_assert!(
            core::mem::offset_of!(Device<T>, ibdev) == 0,
            "struct ib_device must be at offset 0"
        );

        // SAFETY: `init_net` is a static object that is always alive; the size covers a whole
        // `Device<T>` (see `kmalloc_size`).
        let raw = unsafe {
            bindings::_ib_alloc_device(kmalloc_size::<Device<T>>(), &raw mut bindings::init_net)
        };
        let dev = NonNull::new(raw.cast::<Device<T>>()).ok_or(ENOMEM)?;
        let p = dev.as_ptr();

        // SAFETY: `p` points to a zeroed allocation large enough for a `Device<T>`; `type_id`
        // has alignment 1.
        unsafe {
            core::ptr::write_unaligned((&raw mut (*p).type_id).cast::<TypeId>(), TypeId::of::<T>())
        };

        // SAFETY: `data` is uninitialised memory inside the allocation, which does not move
        // until it is freed.
        if let Err(e) = unsafe { pin_init::raw_try_init(&raw mut (*p).data, init) } {
            // SAFETY: The ops are not set yet (all zero), so `ib_dealloc_device()` does not call
            // `dealloc_driver` and does not touch the uninitialised data.
            unsafe { bindings::ib_dealloc_device(raw) };
            return Err(e.into());
        }

        // SAFETY: `raw` is a valid device and `VTABLE` is a valid ops table; ib_core copies it.
        // From now on `ib_dealloc_device()` drops the data through `dealloc_driver`.
        unsafe { bindings::ib_set_device_ops(raw, &VTable::<T>::VTABLE) };

        // INVARIANT: The data is initialised and the ops are set; no one else knows `raw`.
        Ok(Self { ptr: dev })
    }

    fn raw(&mut self) -> *mut bindings::ib_device {
        self.ptr.as_ptr().cast()
    }

    /// Sets the node type.
    pub fn set_node_type(&mut self, node_type: NodeType) {
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        unsafe { (*self.raw()).node_type = node_type.0 };
    }

    /// Sets the node GUID; `guid` is in network byte order (as shown to user space).
    pub fn set_node_guid(&mut self, guid: [u8; 8]) {
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        unsafe { (*self.raw()).node_guid = u64::from_ne_bytes(guid) };
    }

    /// Sets the node description, truncated to `IB_DEVICE_NODE_DESC_MAX - 1` bytes.
    pub fn set_node_desc(&mut self, desc: &CStr) {
        let raw = self.raw();
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        let dst = unsafe { &mut (*raw).node_desc };
        copy_c_string(dst, desc.to_bytes());
    }

    /// Sets the number of physical ports. Must be called before [`Self::set_netdev`].
    pub fn set_phys_port_cnt(&mut self, count: u32) {
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        unsafe { (*self.raw()).phys_port_cnt = count };
    }

    /// Sets the number of completion vectors.
    pub fn set_num_comp_vectors(&mut self, count: i32) {
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        unsafe { (*self.raw()).num_comp_vectors = count };
    }

    /// Enables a legacy uverbs write() command that ib_core does not enable by default.
    pub fn enable_uverbs_cmd(&mut self, cmd: UverbsCmd) {
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        unsafe { (*self.raw()).uverbs_cmd_mask |= 1u64 << cmd.0 };
    }

    /// Sets the iWARP connection manager flags.
    pub fn set_iw_driver_flags(&mut self, flags: IwFlags) {
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        unsafe { (*self.raw()).iw_driver_flags = flags.0 };
    }

    /// Sets the interface name the iWARP connection manager reports (`iw_ifname`).
    pub fn set_iw_ifname(&mut self, name: &[u8; IFNAMSIZ]) {
        let raw = self.raw();
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        let dst = unsafe { &mut (*raw).iw_ifname };
        let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        copy_c_string(dst, name.get(..len).unwrap_or(&[]));
    }

    /// Attaches `ndev` to `port` (`ib_device_set_netdev()`).
    ///
    /// ib_core keeps a reference to the net device until the device is unregistered or freed.
    /// The driver must unregister the device when `ndev` is unregistered (netdev notifier,
    /// `NETDEV_UNREGISTER`), or the net device cannot go away.
    pub fn set_netdev(&mut self, port: u32, ndev: &NetDevice) -> Result {
        // SAFETY: By the type invariant the device is valid; `ndev` is a valid net device, of
        // which ib_core takes its own reference.
        to_result(unsafe { bindings::ib_device_set_netdev(self.raw(), ndev.as_raw(), port) })
    }

    /// Registers the device with ib_core under `name`, marking the name as chosen by the user
    /// (as for devices created with `rdma link add`).
    ///
    /// On failure the device is freed and the driver data dropped before returning. On success
    /// ib_core owns the device; see the [module documentation](self) for how it goes away.
    pub fn register(self, name: &CStr) -> Result {
        let mut this = ManuallyDrop::new(self);
        let raw = this.raw();
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        unsafe {
            (*raw).name_assign_type = bindings::rdma_nl_name_assign_type_RDMA_NAME_ASSIGN_TYPE_USER;
        }
        // SAFETY: `raw` is a valid, configured, unregistered device and `name` is a valid C
        // string. A NULL DMA device selects ib_core's virtual DMA ops.
        let ret =
            unsafe { bindings::ib_register_device(raw, name.as_char_ptr(), core::ptr::null_mut()) };
        if ret != 0 {
            // SAFETY: The registration failed and the device is still ours (ib_core hands the
            // responsibility back to the caller on failure); this drops the driver data through
            // `dealloc_driver` and frees the device.
            unsafe { bindings::ib_dealloc_device(raw) };
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }
}

impl<T: Driver> Deref for UnregisteredDevice<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ptr` is valid for as long as `self`.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Driver> Drop for UnregisteredDevice<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the device is ours and not registered; this drops the
        // driver data through `dealloc_driver` and frees the device.
        unsafe { bindings::ib_dealloc_device(self.raw()) };
    }
}

// SAFETY: The device may be configured and freed from any thread.
unsafe impl<T: Driver> Send for UnregisteredDevice<T> {}

/// Copies `src` into the C string buffer `dst`, truncating and NUL terminating it.
fn copy_c_string(dst: &mut [c_char], src: &[u8]) {
    let n = src.len().min(dst.len().saturating_sub(1));
    for (d, s) in dst.iter_mut().zip(src.iter().take(n)) {
        *d = *s as c_char;
    }
    for d in dst.iter_mut().skip(n) {
        *d = 0;
    }
}

/// A registered device with a registration reference (`ib_device_put()` on drop).
///
/// While it exists the device cannot finish unregistering, so it is alive. Do not hold it
/// across anything that waits for the device to be unregistered.
///
/// # Invariants
///
/// `ptr` points to a [`Device<T>`] that was registered when the reference was taken, and the
/// `DeviceRef` owns one registration reference (`ib_device_try_get()`) to it.
pub struct DeviceRef<T: Driver> {
    ptr: NonNull<Device<T>>,
    _p: PhantomData<Device<T>>,
}

impl<T: Driver> DeviceRef<T> {
    /// Queues the unregistration of the device (`ib_unregister_device_queued()`).
    ///
    /// The device is unregistered and freed asynchronously on ib_core's unregistration
    /// workqueue; this is safe to call with the RTNL lock held (from a netdev notifier).
    pub fn unregister_queued(&self) {
        // SAFETY: By the type invariant the device is valid and its registration refcount is
        // non-zero; its `dealloc_driver` op is set.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }

    /// Dispatches an asynchronous event for `port` to the device's event handlers.
    pub fn dispatch_port_event(&self, port: u32, event: EventType) {
        let mut ev: bindings::ib_event = pin_init::zeroed();
        ev.device = self.as_raw();
        ev.element.port_num = port;
        ev.event = event.as_raw();
        // SAFETY: `ev` is a valid event for a registered device; ib_core copies it.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }

    /// Dispatches `IB_EVENT_PORT_ACTIVE` or `IB_EVENT_PORT_ERR` for the port `ndev` is attached
    /// to, if its state (up and carrier) changed since the last dispatch
    /// (`ib_dispatch_port_state_event()`).
    ///
    /// ib_core already does this from its own netdev notifier for `NETDEV_UP`, `NETDEV_DOWN` and
    /// `NETDEV_CHANGE`; the state is de-duplicated, so calling it again is harmless.
    pub fn dispatch_port_state_event(&self, ndev: &NetDevice) {
        // SAFETY: The device is registered and `ndev` is a valid net device.
        unsafe { bindings::ib_dispatch_port_state_event(self.as_raw(), ndev.as_raw()) };
    }
}

impl<T: Driver> Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: By the type invariant the device is alive while we hold the reference.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Driver> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own one registration reference.
        unsafe { bindings::ib_device_put(self.ptr.as_ptr().cast()) };
    }
}

// SAFETY: The registration reference may be dropped on any thread.
unsafe impl<T: Driver> Send for DeviceRef<T> {}

// SAFETY: `DeviceRef` only gives out `&Device<T>`, which is `Sync`.
unsafe impl<T: Driver> Sync for DeviceRef<T> {}

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

/// The `struct ib_device_ops` table for a [`Driver`].
pub(crate) struct VTable<T: Driver>(PhantomData<T>);

impl<T: Driver> VTable<T> {
    const VTABLE: bindings::ib_device_ops = bindings::ib_device_ops {
        owner: this_module::<T::OwnerModule>().as_ptr(),
        driver_id: T::DRIVER_ID.as_raw(),
        uverbs_abi_ver: T::UVERBS_ABI_VER,
        dealloc_driver: Some(Self::dealloc_driver_callback),
        query_device: Some(Self::query_device_callback),
        query_port: Some(Self::query_port_callback),
        get_port_immutable: Some(Self::get_port_immutable_callback),
        query_gid: if T::HAS_QUERY_GID {
            Some(Self::query_gid_callback)
        } else {
            None
        },
        alloc_ucontext: if T::HAS_ALLOC_UCONTEXT {
            Some(Self::alloc_ucontext_callback)
        } else {
            None
        },
        dealloc_ucontext: if T::HAS_ALLOC_UCONTEXT {
            Some(Self::dealloc_ucontext_callback)
        } else {
            None
        },
        disassociate_ucontext: if T::HAS_ALLOC_UCONTEXT && T::HAS_DISASSOCIATE_UCONTEXT {
            Some(Self::disassociate_ucontext_callback)
        } else {
            None
        },
        // User queues are mapped through `RingBuf` mmap entries.
        mmap: if T::HAS_ALLOC_UCONTEXT {
            Some(mmap_callback)
        } else {
            None
        },
        mmap_free: if T::HAS_ALLOC_UCONTEXT {
            Some(mmap_free_callback)
        } else {
            None
        },
        alloc_pd: Some(Self::alloc_pd_callback),
        dealloc_pd: Some(Self::dealloc_pd_callback),
        create_cq: Some(Self::create_cq_callback),
        destroy_cq: Some(Self::destroy_cq_callback),
        poll_cq: Some(Self::poll_cq_callback),
        req_notify_cq: Some(Self::req_notify_cq_callback),
        create_qp: Some(Self::create_qp_callback),
        modify_qp: Some(Self::modify_qp_callback),
        destroy_qp: Some(Self::destroy_qp_callback),
        post_send: Some(Self::post_send_callback),
        post_recv: Some(Self::post_recv_callback),
        query_qp: if T::HAS_QUERY_QP {
            Some(Self::query_qp_callback)
        } else {
            None
        },
        modify_srq: if T::HAS_MODIFY_SRQ {
            Some(Self::modify_srq_callback)
        } else {
            None
        },
        query_srq: if T::HAS_QUERY_SRQ {
            Some(Self::query_srq_callback)
        } else {
            None
        },
        post_srq_recv: if T::HAS_POST_SRQ_RECV {
            Some(Self::post_srq_recv_callback)
        } else {
            None
        },
        create_srq: if T::HAS_CREATE_SRQ {
            Some(Self::create_srq_callback)
        } else {
            None
        },
        destroy_srq: if T::HAS_CREATE_SRQ {
            Some(Self::destroy_srq_callback)
        } else {
            None
        },
        get_dma_mr: Some(Self::get_dma_mr_callback),
        reg_user_mr: Some(Self::reg_user_mr_callback),
        dereg_mr: Some(Self::dereg_mr_callback),
        alloc_mr: if T::HAS_ALLOC_MR {
            Some(super::mr::alloc_mr_callback::<T>)
        } else {
            None
        },
        map_mr_sg: if T::HAS_ALLOC_MR {
            Some(super::mr::map_mr_sg_callback::<T>)
        } else {
            None
        },
        iw_create_listen: if T::HAS_IW_CONNECT {
            Some(IwOps::<T>::create_listen)
        } else {
            None
        },
        iw_destroy_listen: if T::HAS_IW_CONNECT {
            Some(IwOps::<T>::destroy_listen)
        } else {
            None
        },
        iw_connect: if T::HAS_IW_CONNECT {
            Some(IwOps::<T>::connect)
        } else {
            None
        },
        iw_accept: if T::HAS_IW_CONNECT {
            Some(IwOps::<T>::accept)
        } else {
            None
        },
        iw_reject: if T::HAS_IW_CONNECT {
            Some(IwOps::<T>::reject)
        } else {
            None
        },
        iw_get_qp: if T::HAS_IW_CONNECT {
            Some(IwOps::<T>::get_qp)
        } else {
            None
        },
        iw_add_ref: if T::HAS_IW_CONNECT {
            Some(IwOps::<T>::add_ref)
        } else {
            None
        },
        iw_rem_ref: if T::HAS_IW_CONNECT {
            Some(IwOps::<T>::rem_ref)
        } else {
            None
        },
        size_ib_ucontext: kmalloc_size::<Ucontext<T>>(),
        size_ib_pd: kmalloc_size::<Pd<T>>(),
        size_ib_cq: kmalloc_size::<Cq<T>>(),
        size_ib_qp: kmalloc_size::<Qp<T>>(),
        size_ib_srq: kmalloc_size::<Srq<T>>(),
        ..pin_init::zeroed()
    };

    /// Drops the driver data of a device.
    ///
    /// # Safety
    ///
    /// Called by ib_core exactly once per device, from `ib_dealloc_device()`, after which no op
    /// of the device is called any more. `ibdev` is a [`Device<T>`] with initialised data (the op
    /// is only set once the data is initialised).
    unsafe extern "C" fn dealloc_driver_callback(ibdev: *mut bindings::ib_device) {
        let dev = ibdev.cast::<Device<T>>();
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { core::ptr::drop_in_place(&raw mut (*dev).data) };
    }

    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `attr` is valid for writes; `udata` is NULL or valid.
    unsafe extern "C" fn query_device_callback(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (dev, udata) = unsafe { (Device::<T>::from_raw(ibdev), udata_opt(udata)) };
            let a = T::query_device(dev, udata)?;
            // SAFETY: `attr` is valid for writes.
            unsafe { a.write_to(attr) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `attr` is valid for writes.
    unsafe extern "C" fn query_port_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let a = T::query_port(dev, port)?;
            // SAFETY: `attr` is valid for writes.
            unsafe { a.write_to(attr) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `imm` is valid for writes.
    unsafe extern "C" fn get_port_immutable_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let a = T::get_port_immutable(dev, port)?;
            // SAFETY: `imm` is valid for writes.
            unsafe { a.write_to(imm) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `gid` is valid for writes.
    unsafe extern "C" fn query_gid_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let g = T::query_gid(dev, port, index)?;
            // SAFETY: `gid` is valid for writes; `raw` is a 16-byte array in the union.
            unsafe { (*gid).raw = g.0 };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `uctx` was allocated by ib_core with `size_ib_ucontext` bytes, its `device` field is a
    /// live [`Device<T>`] and its driver part is uninitialised; `udata` is valid.
    unsafe extern "C" fn alloc_ucontext_callback(
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
            let init = T::alloc_ucontext(dev, udata);
            // SAFETY: Per the safety requirements.
            unsafe { Ucontext::<T>::init_data(uctx, init) }?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `uctx` was successfully initialised by `alloc_ucontext_callback` and is not used by
    /// ib_core after this returns (it frees it).
    unsafe extern "C" fn dealloc_ucontext_callback(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Ucontext::<T>::from_raw(uctx) };
        T::dealloc_ucontext(obj);
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Ucontext::<T>::drop_data(uctx) };
    }

    /// # Safety
    ///
    /// `uctx` was successfully initialised by `alloc_ucontext_callback` and its data has not
    /// been dropped yet (ib_core calls this before `dealloc_ucontext`).
    unsafe extern "C" fn disassociate_ucontext_callback(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Ucontext::<T>::from_raw(uctx) };
        T::disassociate_ucontext(obj);
    }

    /// # Safety
    ///
    /// `pd` was allocated by ib_core with `size_ib_pd` bytes, its `device` field is a live
    /// [`Device<T>`] and its driver part is uninitialised; `udata` is NULL or valid.
    unsafe extern "C" fn alloc_pd_callback(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (dev, udata) = unsafe { (Device::<T>::from_raw((*pd).device), udata_opt(udata)) };
            let init = T::alloc_pd(dev, udata);
            // SAFETY: Per the safety requirements.
            unsafe { Pd::<T>::init_data(pd, init) }?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `pd` was successfully initialised by `alloc_pd_callback` and is not used by ib_core after
    /// this returns 0 (it frees it); `udata` is NULL or valid.
    unsafe extern "C" fn dealloc_pd_callback(
        pd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Pd::<T>::from_raw(pd), udata_opt(udata)) };
        T::dealloc_pd(obj, udata);
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Pd::<T>::drop_data(pd) };
        0
    }

    /// # Safety
    ///
    /// `cq` was allocated by ib_core with `size_ib_cq` bytes, its `device` field is a live
    /// [`Device<T>`] and its driver part is uninitialised; `attr` is valid; `attrs` is NULL or a
    /// valid attribute bundle.
    unsafe extern "C" fn create_cq_callback(
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
            let init = T::create_cq(dev, attr, udata);
            // SAFETY: Per the safety requirements.
            unsafe { Cq::<T>::init_data(cq, init) }?;
            // SAFETY: The CQ is initialised; ib_core does not use it concurrently before this
            // callback returns.
            unsafe {
                let n = T::cq_size(Cq::<T>::from_raw(cq));
                (*cq).cqe = c_int::try_from(n).unwrap_or(c_int::MAX);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `cq` was successfully initialised by `create_cq_callback` and is not used by ib_core
    /// after this returns 0; `udata` is NULL or valid.
    unsafe extern "C" fn destroy_cq_callback(
        cq: *mut bindings::ib_cq,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Cq::<T>::from_raw(cq), udata_opt(udata)) };
        T::destroy_cq(obj, udata);
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Cq::<T>::drop_data(cq) };
        0
    }

    /// # Safety
    ///
    /// `cq` is a live CQ created by `create_cq_callback`; `wc` is valid for writes of
    /// `num_entries` entries.
    unsafe extern "C" fn poll_cq_callback(
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
            let done = T::poll_cq(obj, wc)?.min(n);
            Ok(c_int::try_from(done).unwrap_or(num_entries))
        })
    }

    /// # Safety
    ///
    /// `cq` is a live CQ created by `create_cq_callback`.
    unsafe extern "C" fn req_notify_cq_callback(
        cq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let obj = unsafe { Cq::<T>::from_raw(cq) };
            Ok(c_int::from(T::req_notify_cq(obj, flags)?))
        })
    }

    /// # Safety
    ///
    /// `qp` was allocated by ib_core with `size_ib_qp` bytes, its `device` field is a live
    /// [`Device<T>`] and its driver part is uninitialised; `attr` is valid for reads and writes;
    /// `udata` is NULL or valid.
    unsafe extern "C" fn create_qp_callback(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (dev, attr, udata) = unsafe {
                (
                    Device::<T>::from_raw((*qp).device),
                    QpInitAttr::from_raw(attr),
                    udata_opt(udata),
                )
            };
            let init = Counted::new(T::create_qp(dev, attr, udata));
            // SAFETY: Per the safety requirements.
            unsafe { Qp::<T>::init_data(qp, init) }?;
            // SAFETY: The QP is initialised; ib_core does not use it concurrently before this
            // callback returns.
            let obj = unsafe { Qp::<T>::from_raw(qp) };
            // SAFETY: As above.
            unsafe { (*qp).qp_num = T::qp_num(obj) };
            if let Err(e) = T::qp_created(obj) {
                obj.release_and_wait();
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
    unsafe extern "C" fn modify_qp_callback(
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
            T::modify_qp(obj, attr, mask, udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `qp` was successfully initialised by `create_qp_callback` and is not used by ib_core
    /// after this returns 0; `udata` is NULL or valid.
    unsafe extern "C" fn destroy_qp_callback(
        qp: *mut bindings::ib_qp,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Qp::<T>::from_raw(qp), udata_opt(udata)) };
        T::destroy_qp(obj, udata);
        obj.release_and_wait();
        // SAFETY: Per the safety requirements the data is initialised and no references to it
        // remain, so it is never used again.
        unsafe { Qp::<T>::drop_data(qp) };
        0
    }

    /// # Safety
    ///
    /// `qp` is a live QP created by `create_qp_callback`; `wr` is NULL or a valid chain of work
    /// requests that stays valid during the call; `bad_wr` is NULL or valid for writes.
    unsafe extern "C" fn post_send_callback(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Qp::<T>::from_raw(qp) };
        if wr.is_null() {
            // uverbs passes no WRs for a user doorbell.
            return from_result(|| T::doorbell(obj).map(|()| 0));
        }
        // SAFETY: Per the safety requirements `wr` is a valid chain (not NULL, checked above).
        let wr = unsafe { SendWr::from_raw(wr) };
        match T::post_send(obj, wr) {
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
    /// `qp` is a live QP created by `create_qp_callback`; `wr` is a valid chain of work requests
    /// that stays valid during the call; `bad_wr` is NULL or valid for writes.
    unsafe extern "C" fn post_recv_callback(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        if wr.is_null() {
            return 0;
        }
        // SAFETY: Per the safety requirements; `wr` is not NULL.
        let (obj, wr) = unsafe { (Qp::<T>::from_raw(qp), RecvWr::from_raw(wr)) };
        match T::post_recv(obj, wr) {
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
    /// `srq` was allocated by ib_core with `size_ib_srq` bytes, its `device` field is a live
    /// [`Device<T>`] and its driver part is uninitialised; `attr` is valid for reads and writes;
    /// `udata` is NULL or valid.
    unsafe extern "C" fn create_srq_callback(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (dev, attr, udata) = unsafe {
                (
                    Device::<T>::from_raw((*srq).device),
                    SrqInitAttr::from_raw(attr),
                    udata_opt(udata),
                )
            };
            let init = T::create_srq(dev, attr, udata);
            // SAFETY: Per the safety requirements.
            unsafe { Srq::<T>::init_data(srq, init) }?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `srq` was successfully initialised by `create_srq_callback` and is not used by ib_core
    /// after this returns 0; `udata` is NULL or valid.
    unsafe extern "C" fn destroy_srq_callback(
        srq: *mut bindings::ib_srq,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Srq::<T>::from_raw(srq), udata_opt(udata)) };
        T::destroy_srq(obj, udata);
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Srq::<T>::drop_data(srq) };
        0
    }

    /// # Safety
    ///
    /// `pd` is a live PD created by `alloc_pd_callback`.
    unsafe extern "C" fn get_dma_mr_callback(
        pd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: `pd` is live and being passed to `get_dma_mr`.
        let Some(kva) = (unsafe { super::mr::KernelVa::for_dma_mr(pd) }) else {
            return EINVAL.to_ptr();
        };
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Pd::<T>::from_raw(pd) };
        match Mr::<T>::new_raw(T::get_dma_mr(obj, access, kva)) {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `pd` is a live PD created by `alloc_pd_callback`; `dmah` is NULL or valid; `udata` is
    /// valid.
    unsafe extern "C" fn reg_user_mr_callback(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        virt_addr: u64,
        access: c_int,
        dmah: *mut bindings::ib_dmah,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        if !dmah.is_null() {
            // DMA handles are not supported by the abstractions.
            return EOPNOTSUPP.to_ptr();
        }
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Pd::<T>::from_raw(pd), Udata::from_raw(udata)) };
        let init = T::reg_user_mr(obj, start, length, virt_addr, access, udata);
        match Mr::<T>::new_raw(init) {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `mr` was returned by `get_dma_mr_callback`, `reg_user_mr_callback` or
    /// `alloc_mr_callback` and is not used by ib_core after this returns 0; `udata` is NULL or
    /// valid.
    unsafe extern "C" fn dereg_mr_callback(
        mr: *mut bindings::ib_mr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Mr::<T>::from_raw(mr), udata_opt(udata)) };
        T::dereg_mr(obj, udata);
        // SAFETY: Per the safety requirements `mr` came from `Mr::new_raw` and is never used
        // again.
        unsafe { Mr::<T>::free_raw(mr) };
        0
    }
}
