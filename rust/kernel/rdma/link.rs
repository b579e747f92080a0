// SPDX-License-Identifier: GPL-2.0

//! `rdma link` types (`struct rdma_link_ops`).
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).
//!
//! Software RDMA providers create a device per net device on request of the administrator:
//! `rdma link add <name> type <type> netdev <if>` calls the `newlink` op of the link type
//! `<type>` (loading the module with alias `rdma-link-<type>` first if needed). `rdma link
//! delete <name>` is handled by ib_core, which unregisters the device.
//!
//! A [`Registration`] registers a link type for a [`Driver`] and is the *fence* for that
//! driver's devices: devices can only be created from its `newlink` callback (which receives the
//! [`NewLink`] token that [`UnregisteredDevice::new`] requires), and dropping the registration
//! first unregisters the link type (waiting for a running `newlink`) and then unregisters every
//! device with the driver's id (`ib_unregister_driver()`), waiting until they are freed. So no
//! device of the driver, and no callback into its code, survives the registration, which the
//! module owns.
//!
//! [`UnregisteredDevice::new`]: super::device::UnregisteredDevice::new

use super::device::Driver;
use crate::{
    bindings,
    error::from_result,
    net::device::NetDevice,
    prelude::*,
    types::Opaque, //
};
use core::marker::PhantomData;

/// An `rdma link` type.
pub trait LinkOps: 'static {
    /// The driver of the devices this link type creates.
    type Driver: Driver;

    /// The link type name, as given to `rdma link add ... type <TYPE>`.
    const TYPE: &'static CStr;

    /// Creates and registers a device called `name` for `ndev`.
    ///
    /// Called with a reference on `ndev` held, in process context, without the RTNL lock.
    fn newlink(link: &NewLink<'_, Self::Driver>, name: &CStr, ndev: &NetDevice) -> Result;
}

/// Proof that the caller runs inside a `newlink` callback of a registered [`LinkOps`] for driver
/// `T`, so that a device created now is covered by the fence of its [`Registration`].
pub struct NewLink<'a, T: Driver> {
    _scope: PhantomData<&'a ()>,
    _driver: PhantomData<fn() -> T>,
}

/// A registered `rdma link` type.
///
/// See the [module documentation](self) for the guarantees it provides.
///
/// # Invariants
///
/// `ops` is registered with ib_core (or, if another module had already registered the same
/// type, was left unregistered and self-linked) until `drop`.
#[pin_data(PinnedDrop)]
pub struct Registration<T: LinkOps> {
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    _p: PhantomData<T>,
}

impl<T: LinkOps> Registration<T> {
    /// Registers the link type `T::TYPE`.
    ///
    /// Fails with `EEXIST` if the type is already registered.
    pub fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(|slot: *mut bindings::rdma_link_ops| {
                // SAFETY: `slot` is valid for writes and pinned. The list head is initialised
                // to point to itself, so that `rdma_link_unregister()` is harmless even if
                // `rdma_link_register()` did not add it.
                unsafe {
                    slot.write(bindings::rdma_link_ops {
                        list: bindings::list_head {
                            next: &raw mut (*slot).list,
                            prev: &raw mut (*slot).list,
                        },
                        type_: T::TYPE.as_char_ptr(),
                        newlink: Some(Self::newlink_callback),
                        dellink: None,
                    });
                    bindings::rdma_link_register(slot);
                }
                // `rdma_link_register()` warns and leaves the ops unlinked if the type exists.
                // Our `next` pointer points to ourselves if and only if we were not added (once
                // added, it never points to ourselves), so this racy read is exact.
                // SAFETY: `slot` is valid; the read is a `READ_ONCE`.
                let next = unsafe { core::ptr::read_volatile(&raw const (*slot).list.next) };
                // SAFETY: Computing the address of a field of a valid pointer.
                if core::ptr::eq(next, unsafe { &raw mut (*slot).list }) {
                    return Err(EEXIST);
                }
                Ok(())
            }),
            _p: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by ib_core with a valid device name and a referenced net device, while the link
    /// type is registered.
    unsafe extern "C" fn newlink_callback(
        name: *const c_char,
        ndev: *mut bindings::net_device,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core passes a NUL-terminated name and a net device on which it holds a
            // reference for the duration of the call.
            let (name, ndev) = unsafe { (CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
            // INVARIANT: We are in `newlink` of the registered link type of `T::Driver`.
            let link = NewLink {
                _scope: PhantomData,
                _driver: PhantomData,
            };
            T::newlink(&link, name, ndev)?;
            Ok(0)
        })
    }
}

#[pinned_drop]
impl<T: LinkOps> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `ops` is registered or self-linked. This waits for
        // running `newlink` callbacks (it takes `link_ops_rwsem` for writing).
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        // SAFETY: Unregisters all devices with our driver id and waits until they have been
        // freed (their `dealloc_driver` has run). No new device can be created any more.
        unsafe { bindings::ib_unregister_driver(driver_id::<T::Driver>()) };
    }
}

/// Returns the raw driver id of `D`.
fn driver_id<D: Driver>() -> bindings::rdma_driver_id {
    D::DRIVER_ID.as_raw()
}

// SAFETY: The ops are only accessed by ib_core under `link_ops_rwsem`; registering and
// unregistering may happen on any thread.
unsafe impl<T: LinkOps> Send for Registration<T> {}

// SAFETY: `Registration` has no `&self` methods that access the ops.
unsafe impl<T: LinkOps> Sync for Registration<T> {}
