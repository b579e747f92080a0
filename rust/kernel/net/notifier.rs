// SPDX-License-Identifier: GPL-2.0

//! Network device notifiers.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h).
//!
//! A [`Registration`] registers a [`Handler`] with the netdev notifier chain
//! (`register_netdevice_notifier()`), which calls it for every event of every network device in
//! every namespace.

use crate::{
    bindings,
    error::to_result,
    net::device::NetDevice,
    prelude::*,
    types::Opaque, //
};
use core::marker::PhantomData;

/// A network device event (`enum netdev_cmd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event(bindings::netdev_cmd);

impl Event {
    /// The device was brought up (`NETDEV_UP`).
    pub const UP: Self = Self(bindings::netdev_cmd_NETDEV_UP);
    /// The device was brought down (`NETDEV_DOWN`).
    pub const DOWN: Self = Self(bindings::netdev_cmd_NETDEV_DOWN);
    /// The device state (e.g. carrier) changed (`NETDEV_CHANGE`).
    pub const CHANGE: Self = Self(bindings::netdev_cmd_NETDEV_CHANGE);
    /// The device was registered (`NETDEV_REGISTER`).
    pub const REGISTER: Self = Self(bindings::netdev_cmd_NETDEV_REGISTER);
    /// The device is being unregistered (`NETDEV_UNREGISTER`). Users must drop their
    /// references to it; its unregistration waits for that.
    pub const UNREGISTER: Self = Self(bindings::netdev_cmd_NETDEV_UNREGISTER);
    /// The MTU changed (`NETDEV_CHANGEMTU`).
    pub const CHANGEMTU: Self = Self(bindings::netdev_cmd_NETDEV_CHANGEMTU);
    /// The hardware address changed (`NETDEV_CHANGEADDR`).
    pub const CHANGEADDR: Self = Self(bindings::netdev_cmd_NETDEV_CHANGEADDR);
    /// The device was renamed (`NETDEV_CHANGENAME`).
    pub const CHANGENAME: Self = Self(bindings::netdev_cmd_NETDEV_CHANGENAME);

    /// Returns the raw `NETDEV_*` value.
    pub fn as_raw(self) -> u32 {
        self.0
    }
}

/// A handler of network device events.
pub trait Handler: Send + Sync {
    /// Called for `event` on `dev`.
    ///
    /// Called with the RTNL lock held (so it must not take it, nor wait for anything that takes
    /// it), in process context. `dev` is valid for the duration of the call.
    ///
    /// When the handler is registered, `NETDEV_REGISTER` and `NETDEV_UP` are replayed for all
    /// existing devices; when it is unregistered, `NETDEV_GOING_DOWN`, `NETDEV_DOWN` and
    /// `NETDEV_UNREGISTER` are replayed.
    fn event(&self, event: Event, dev: &NetDevice);
}

/// A registered netdev notifier.
///
/// # Invariants
///
/// `nb` is registered with the netdev notifier chain until `drop`, and its callback is
/// `Self::callback`.
#[pin_data(PinnedDrop)]
pub struct Registration<T: Handler> {
    handler: T,
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    _p: PhantomData<T>,
}

impl<T: Handler> Registration<T> {
    /// Registers `handler` for netdev events.
    pub fn new(handler: T) -> impl PinInit<Self, Error> {
        // `handler` is initialised before `nb` is registered, because events are replayed
        // during the registration.
        try_pin_init!(Self {
            handler,
            nb <- Opaque::try_ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is valid for writes and pinned.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::callback),
                        next: core::ptr::null_mut(),
                        priority: 0,
                    })
                };
                // SAFETY: `slot` is a pinned, initialised notifier block that stays registered
                // until `drop` (which unregisters it).
                to_result(unsafe { bindings::register_netdevice_notifier(slot) })
            }),
            _p: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the netdev notifier chain for a registered `nb` embedded in a `Self`, with `ptr`
    /// pointing to a valid `struct netdev_notifier_info`.
    unsafe extern "C" fn callback(
        nb: *mut bindings::notifier_block,
        event: c_ulong,
        ptr: *mut c_void,
    ) -> c_int {
        // SAFETY: `nb` is the `nb` field of a live `Self` (it is unregistered before `Self` is
        // dropped).
        let this = unsafe { &*crate::container_of!(Opaque::cast_from(nb), Self, nb) };
        // SAFETY: Netdev notifiers are passed a `struct netdev_notifier_info`, whose device is
        // valid for the duration of the call.
        let dev = unsafe {
            NetDevice::from_raw(bindings::netdev_notifier_info_to_dev(
                ptr.cast::<bindings::netdev_notifier_info>(),
            ))
        };
        // CAST: `netdev_cmd` values are small; anything else is not a known event.
        let event = Event(u32::try_from(event).unwrap_or(u32::MAX));
        this.handler.event(event, dev);
        // CAST: `NOTIFY_OK` is 1.
        bindings::NOTIFY_OK as c_int
    }
}

#[pinned_drop]
impl<T: Handler> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `nb` is registered. This takes the RTNL lock, so no
        // callback is running once it returns; the replayed events run before it returns,
        // while `handler` is still alive.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}

// SAFETY: The notifier block is only used by the notifier chain under the RTNL lock; the handler
// is `Send`.
unsafe impl<T: Handler> Send for Registration<T> {}

// SAFETY: The handler is `Sync`; `&Registration` gives no access to the notifier block.
unsafe impl<T: Handler> Sync for Registration<T> {}
