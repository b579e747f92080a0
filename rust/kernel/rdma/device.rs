// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`) and the operations of a provider.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! # Lifetime of a device
//!
//! An RDMA device is allocated by ib_core (`_ib_alloc_device()`) with room for the driver's data
//! behind the C `struct ib_device`, exactly like C drivers do with `ib_alloc_device()`. The Rust
//! type for this allocation is [`Device<T>`]; `T` is the driver's per-device data and implements
//! [`Driver`], from which (with the operations of each object type, see below) the
//! `struct ib_device_ops` table is built.
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
//! # Operations
//!
//! The device-wide operations (queries) are the methods of [`Driver`]. Each verbs object type
//! has its own data type and its own operations trait, in the module of the object: the driver
//! names the types in [`Driver`] (e.g. [`Driver::Cq`]) and implements their traits (e.g.
//! [`super::cq::Operations`]); the connection manager's operations are [`super::iwcm::Operations`].
//! Objects follow one pattern, [`super::object::Object`]: the C struct at offset 0 followed by
//! the driver's data, which the create operation returns as a [`PinInit`] and which is dropped
//! after the matching destroy operation.

use super::{
    attr::{
        DeviceAttr,
        EventType,
        Gid,
        PortAttr,
        PortImmutable, //
    },
    cq,
    iwcm,
    link::NewLink,
    mr,
    pd,
    qp,
    srq,
    ucontext,
    vtable::VTable, //
};
use crate::{
    bindings,
    error::to_result,
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
/// User space providers (rdma-core) bind to a device by its driver id and its
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
#[repr(u8)]
pub enum NodeType {
    /// An InfiniBand channel adapter (`RDMA_NODE_IB_CA`).
    IbCa = bindings::RDMA_NODE_IB_CA as u8,
    /// An iWARP RDMA NIC (`RDMA_NODE_RNIC`).
    Rnic = bindings::RDMA_NODE_RNIC as u8,
}

/// A legacy uverbs write() command (`enum ib_uverbs_write_cmds`) a device may opt into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum UverbsCmd {
    /// `IB_USER_VERBS_CMD_POST_SEND`.
    PostSend = bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND,
    /// `IB_USER_VERBS_CMD_POST_RECV`.
    PostRecv = bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV,
    /// `IB_USER_VERBS_CMD_POST_SRQ_RECV`.
    PostSrqRecv = bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SRQ_RECV,
}

/// The description of one hardware counter of a device (`struct rdma_stat_desc`): its name, as
/// `rdma statistic` and the `hw_counters` directory of each port in sysfs show it.
///
/// # Invariants
///
/// `self.0.name` points to a `'static` NUL-terminated string; `priv_` is NULL.
#[repr(transparent)]
pub struct HwCounter(bindings::rdma_stat_desc);

// SAFETY: The description only points to `'static` immutable data (type invariant).
unsafe impl Sync for HwCounter {}

impl HwCounter {
    /// Describes a counter named `name`.
    pub const fn new(name: &'static CStr) -> Self {
        // INVARIANT: `name` is a `'static` C string.
        Self(bindings::rdma_stat_desc {
            name: crate::str::as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// The device-wide operations of an RDMA provider, and the types of its objects.
///
/// The implementing type is the driver's per-device data, stored in [`Device<Self>`] behind the
/// C `struct ib_device`. The `struct ib_device_ops` table is built at compile time from this
/// trait and from the operations traits of the object types it names: operations the driver
/// does not implement are left `NULL` in the table.
///
/// The required operations, across the traits, are the ones ib_core requires of a kernel-verbs
/// provider (`ib_device_check_mandatory()` in
/// [`drivers/infiniband/core/device.c`](srctree/drivers/infiniband/core/device.c)).
///
/// All operations may be called concurrently, from any thread, in process context unless
/// documented otherwise.
#[vtable]
pub trait Driver: Sized + Send + Sync + 'static {
    /// The driver id reported to user space (`ib_device_ops.driver_id`).
    const DRIVER_ID: DriverId;

    /// The uverbs ABI version reported to user space (`ib_device_ops.uverbs_abi_ver`).
    const UVERBS_ABI_VER: u32;

    /// Per-ucontext data and operations.
    type Ucontext: ucontext::Operations<Driver = Self>;
    /// Per-PD data and operations.
    type Pd: pd::Operations<Driver = Self>;
    /// Per-CQ data and operations.
    type Cq: cq::Operations<Driver = Self>;
    /// Per-QP data and operations.
    type Qp: qp::Operations<Driver = Self>;
    /// Per-SRQ data and operations.
    type Srq: srq::Operations<Driver = Self>;
    /// Per-MR data and operations.
    type Mr: mr::Operations<Driver = Self>;
    /// The iWARP connection manager operations (a device of another transport implements none
    /// of them).
    type IwCm: iwcm::Operations<Driver = Self>;

    /// Returns the device attributes. `udata` is `None` for kernel callers.
    fn query_device(dev: &Device<Self>, udata: Option<&super::udata::Udata>) -> Result<DeviceAttr>;

    /// Returns the attributes of port `port`.
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// Returns the immutable attributes of port `port`. Called once per port at registration.
    fn get_port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// Returns entry `index` of the GID table of port `port`.
    fn query_gid(_dev: &Device<Self>, _port: u32, _index: i32) -> Result<Gid> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// The hardware counters of each port, in the order [`Driver::hw_counters`] reads them:
    /// `rdma statistic show link <dev>/<port>` and
    /// `/sys/class/infiniband/<dev>/ports/<port>/hw_counters/`. Only used if the driver
    /// implements [`Driver::hw_counters`].
    const HW_COUNTERS: &'static [HwCounter] = &[];

    /// Reads the counters of port `port` into `values`, one per entry of
    /// [`Driver::HW_COUNTERS`], in that order (`get_hw_stats`). Called in process context,
    /// under a mutex of ib_core's; may sleep.
    fn hw_counters(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

/// The size in bytes of a type as allocated by `kmalloc()`.
///
/// ib_core allocates devices and objects with `kzalloc(size)`. Padding the size to the alignment
/// makes the allocation come from a cache whose objects are aligned to at least the alignment of
/// `T` for the (power of two) alignments our types have, as for `fwctl`.
pub(crate) const fn kmalloc_size<T>() -> usize {
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

    /// Drops the driver data of a device.
    ///
    /// # Safety
    ///
    /// `ptr` must point to the `ibdev` field of a [`Device<T>`] whose data is initialised and is
    /// never used again.
    pub(crate) unsafe fn drop_data(ptr: *mut bindings::ib_device) {
        let dev = ptr.cast::<Self>();
        // SAFETY: `ibdev` is at offset 0 (type invariant); the caller guarantees the rest.
        unsafe { core::ptr::drop_in_place(&raw mut (*dev).data) };
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

impl<T: Driver> AsRef<crate::device::Device> for Device<T> {
    /// The device's embedded `struct device`, for the `dev_*!` log macros (messages read
    /// `infiniband <name>: ...`, as those of `ibdev_*()` in C).
    fn as_ref(&self) -> &crate::device::Device {
        // SAFETY: `self.as_raw()` points to a live `ib_device` (type invariants), whose `dev`
        // (in a union with `coredev`, which begins with it) `_ib_alloc_device()` initialised;
        // the `ib_device` is freed only when the reference count of `dev` drops to zero, which
        // it does not while `self` is alive.
        unsafe { crate::device::Device::from_raw(&raw mut (*self.as_raw()).__bindgen_anon_1.dev) }
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
        unsafe { (*self.raw()).node_type = node_type as u8 };
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
        unsafe { (*self.raw()).uverbs_cmd_mask |= 1u64 << (cmd as u32) };
    }

    /// Sets the iWARP connection manager flags.
    pub fn set_iw_driver_flags(&mut self, flags: iwcm::IwFlags) {
        // SAFETY: By the type invariant we have exclusive access to a valid device.
        unsafe { (*self.raw()).iw_driver_flags = u32::from(flags) };
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
