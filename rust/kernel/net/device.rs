// SPDX-License-Identifier: GPL-2.0

//! Network devices (`struct net_device`).
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h).
//!
//! This module gives drivers that sit *on top of* a network device (such as a software RDMA
//! provider) a reference-counted handle to it. It does not provide the means to implement a
//! network device.

use crate::{
    bindings,
    sync::aref::{
        ARef,
        AlwaysRefCounted, //
    },
    types::Opaque, //
};
use core::ptr::NonNull;

/// Length of an interface name buffer, including the terminating NUL (`IFNAMSIZ`).
pub const IFNAMSIZ: usize = bindings::IFNAMSIZ as usize;

/// Length of an Ethernet hardware address (`ETH_ALEN`).
pub const ETH_ALEN: usize = bindings::ETH_ALEN as usize;

/// Returns a random, locally administered, unicast Ethernet address (like `eth_random_addr()`).
pub fn random_ether_addr() -> [u8; ETH_ALEN] {
    let mut addr = [0u8; ETH_ALEN];
    // SAFETY: `addr` is valid for writes of `ETH_ALEN` bytes.
    unsafe { bindings::get_random_bytes(addr.as_mut_ptr().cast(), ETH_ALEN) };
    addr[0] &= 0xfe; // Clear the multicast bit.
    addr[0] |= 0x02; // Set the locally administered bit.
    addr
}

/// Hardware type of a network device (`dev->type`, one of the `ARPHRD_*` values).
///
/// See [`include/uapi/linux/if_arp.h`](srctree/include/uapi/linux/if_arp.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwType(u16);

impl HwType {
    /// Ethernet (`ARPHRD_ETHER`).
    pub const ETHER: Self = Self(bindings::ARPHRD_ETHER as u16);
    /// IEEE 802.2 Ethernet/TR/TB (`ARPHRD_IEEE802`).
    pub const IEEE802: Self = Self(bindings::ARPHRD_IEEE802 as u16);
    /// Loopback device (`ARPHRD_LOOPBACK`).
    pub const LOOPBACK: Self = Self(bindings::ARPHRD_LOOPBACK as u16);
    /// Zero header length, no hardware address (`ARPHRD_NONE`), e.g. tun or wireguard.
    pub const NONE: Self = Self(bindings::ARPHRD_NONE as u16);

    /// Returns the raw `ARPHRD_*` value.
    pub const fn as_raw(self) -> u16 {
        self.0
    }
}

/// A network device.
///
/// Wraps the kernel's [`struct net_device`]. A `&NetDevice` is only handed out while the device
/// is known to be alive, either because a reference is held (see [`ARef<NetDevice>`]) or because
/// the caller is a callback that the networking core runs with the device pinned (for example a
/// netdev notifier, see [`crate::net::notifier`]).
///
/// Most fields of a `net_device` are protected by the RTNL lock. The accessors below read only
/// fields that are immutable while the device is registered (`ifindex`), fields that the C code
/// itself reads locklessly with `READ_ONCE` (`mtu`, `max_mtu`, `dev_addr`, `type`), atomic state
/// bits (`netif_running()`, `netif_carrier_ok()`), or the name through the rename seqlock. A
/// lockless read can observe a value that is being changed concurrently; every such change is
/// followed by a netdev notifier event (`NETDEV_CHANGEMTU`, `NETDEV_CHANGEADDR`, ...), so users
/// that cache a value must refresh it from their notifier.
///
/// [`struct net_device`]: srctree/include/linux/netdevice.h
///
/// # Invariants
///
/// The pointer to the inner `net_device` is valid for as long as the `&NetDevice` is.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

impl NetDevice {
    /// Creates a reference to a [`NetDevice`] from a valid pointer.
    ///
    /// # Safety
    ///
    /// The caller must ensure that `ptr` points to a `struct net_device` that stays alive (its
    /// memory is not freed) for the lifetime `'a`.
    pub unsafe fn from_raw<'a>(ptr: *const bindings::net_device) -> &'a Self {
        // CAST: `NetDevice` is `repr(transparent)` over `Opaque<net_device>`, which has the same
        // layout as `net_device`.
        // SAFETY: By the safety requirements, `ptr` is valid for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns a raw pointer to the inner `struct net_device`.
    pub fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Returns the interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: By the type invariant the pointer is valid; `ifindex` does not change while the
        // device is registered and is read locklessly by the C code as well.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).ifindex) }
    }

    /// Returns a copy of the interface name, NUL terminated.
    ///
    /// The name is read under the rename seqlock (`netdev_copy_name()`), so it is never torn.
    pub fn name(&self) -> [u8; IFNAMSIZ] {
        let mut name = [0u8; IFNAMSIZ];
        // SAFETY: By the type invariant the pointer is valid and `name` has room for `IFNAMSIZ`
        // bytes, which is what `netdev_copy_name()` writes at most.
        unsafe { bindings::netdev_copy_name(self.as_raw(), name.as_mut_ptr().cast()) };
        name
    }

    /// Returns the hardware type (`dev->type`).
    pub fn hw_type(&self) -> HwType {
        // SAFETY: By the type invariant the pointer is valid. `type` only changes under RTNL
        // around `NETDEV_PRE_TYPE_CHANGE`/`NETDEV_POST_TYPE_CHANGE`; a racy read is a plain
        // `READ_ONCE`-style snapshot.
        HwType(unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).type_) })
    }

    /// Returns the current MTU (`READ_ONCE(dev->mtu)`).
    pub fn mtu(&self) -> u32 {
        // SAFETY: By the type invariant the pointer is valid; the C code reads `mtu` with
        // `READ_ONCE`, which is what a volatile read is.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).mtu) }
    }

    /// Returns the largest MTU the device supports (`dev->max_mtu`).
    pub fn max_mtu(&self) -> u32 {
        // SAFETY: By the type invariant the pointer is valid; `max_mtu` is set by the driver
        // before registration.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).max_mtu) }
    }

    /// Returns the first `ETH_ALEN` bytes of the hardware address, or `None` if the device has no
    /// hardware address (`addr_len == 0`, e.g. `ARPHRD_NONE` devices).
    ///
    /// Shorter addresses are zero padded. The address is read locklessly; see the type
    /// documentation.
    pub fn mac_address(&self) -> Option<[u8; ETH_ALEN]> {
        let raw = self.as_raw();
        // SAFETY: By the type invariant the pointer is valid.
        let len = unsafe { core::ptr::read_volatile(&raw const (*raw).addr_len) };
        if len == 0 {
            return None;
        }
        // SAFETY: By the type invariant the pointer is valid. `dev_addr` is valid for
        // `MAX_ADDR_LEN` bytes whenever `addr_len` is not zero (it is allocated at
        // `alloc_netdev()` time and freed with the device).
        let addr = unsafe { core::ptr::read_volatile(&raw const (*raw).dev_addr) };
        if addr.is_null() {
            return None;
        }
        let mut mac = [0u8; ETH_ALEN];
        for (i, b) in mac.iter_mut().enumerate().take(usize::from(len)) {
            // SAFETY: `i < min(addr_len, ETH_ALEN) <= MAX_ADDR_LEN`, so `addr + i` is in bounds
            // of the address buffer (see above).
            *b = unsafe { core::ptr::read_volatile(addr.add(i)) };
        }
        Some(mac)
    }

    /// Returns whether the device is administratively up (`netif_running()`).
    pub fn is_running(&self) -> bool {
        // SAFETY: By the type invariant the pointer is valid; `netif_running()` is an atomic bit
        // test.
        unsafe { bindings::netif_running(self.as_raw()) }
    }

    /// Returns whether the device has carrier (`netif_carrier_ok()`).
    pub fn carrier_ok(&self) -> bool {
        // SAFETY: By the type invariant the pointer is valid; `netif_carrier_ok()` is an atomic
        // bit test.
        unsafe { bindings::netif_carrier_ok(self.as_raw()) }
    }

    /// Returns whether the device is up and has carrier, i.e. whether it can carry traffic.
    pub fn is_operational(&self) -> bool {
        self.is_running() && self.carrier_ok()
    }
}

// SAFETY: The reference count is managed with `dev_hold()`/`dev_put()`, which pin the device (it
// is not freed before the last reference is put) and may be called from any context.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the pointer is valid; the existence of `&self` implies a
        // non-zero reference count.
        unsafe { bindings::dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: By the safety requirements of this function the caller owns a reference taken
        // with `dev_hold()` (or returned by a C function that took it).
        unsafe { bindings::dev_put(obj.cast::<bindings::net_device>().as_ptr()) };
    }
}

impl NetDevice {
    /// Takes an additional reference and returns it as an owned [`ARef`].
    pub fn get(&self) -> ARef<Self> {
        ARef::from(self)
    }
}

// SAFETY: A `net_device` may be referenced and its reference count changed from any thread.
unsafe impl Send for NetDevice {}

// SAFETY: All methods taking `&self` are safe to call concurrently (see the lockless-read rules
// in the type documentation).
unsafe impl Sync for NetDevice {}
