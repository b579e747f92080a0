// SPDX-License-Identifier: GPL-2.0

//! Socket addresses and message flags shared by the kernel socket abstractions.
//!
//! Addresses are [`core::net::SocketAddr`] values on the Rust side and `struct sockaddr_in`,
//! `struct sockaddr_in6` or `struct sockaddr_storage` on the C side; this module converts between
//! the two.
//!
//! C headers: [`include/linux/socket.h`](srctree/include/linux/socket.h),
//! [`include/uapi/linux/in.h`](srctree/include/uapi/linux/in.h),
//! [`include/uapi/linux/in6.h`](srctree/include/uapi/linux/in6.h).

use crate::{
    bindings,
    error::{
        code::EAFNOSUPPORT,
        Result, //
    },
};
use core::net::{
    Ipv4Addr,
    Ipv6Addr,
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6, //
};

/// An address family of an IP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// IPv4 (`AF_INET`).
    Inet,
    /// IPv6 (`AF_INET6`).
    Inet6,
}

impl Family {
    /// Returns the family of `addr`.
    pub fn of(addr: &SocketAddr) -> Self {
        match addr {
            SocketAddr::V4(_) => Family::Inet,
            SocketAddr::V6(_) => Family::Inet6,
        }
    }

    /// Returns the `AF_*` value.
    pub fn as_raw(self) -> u16 {
        match self {
            Family::Inet => bindings::AF_INET as u16,
            Family::Inet6 => bindings::AF_INET6 as u16,
        }
    }

    /// Returns the family for an `AF_*` value, if it is an IP family.
    pub fn from_raw(af: u16) -> Option<Self> {
        match u32::from(af) {
            bindings::AF_INET => Some(Family::Inet),
            bindings::AF_INET6 => Some(Family::Inet6),
            _ => None,
        }
    }
}

/// A C socket address (`struct sockaddr_storage`), large enough for any family.
///
/// # Invariants
///
/// `len` is the size of the family-specific structure held in `storage` (at most its size).
#[derive(Clone, Copy)]
pub struct SockAddrStorage {
    storage: bindings::__kernel_sockaddr_storage,
    len: usize,
}

impl SockAddrStorage {
    /// Encodes `addr` as a `sockaddr_in` or `sockaddr_in6`.
    pub fn new(addr: &SocketAddr) -> Self {
        let mut storage = bindings::__kernel_sockaddr_storage::default();
        let ptr = core::ptr::from_mut(&mut storage);
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = bindings::sockaddr_in {
                    sin_family: bindings::AF_INET as u16,
                    sin_port: a.port().to_be(),
                    sin_addr: bindings::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    ..Default::default()
                };
                // SAFETY: `sockaddr_storage` is larger than and at least as aligned as
                // `sockaddr_in` (it is the C type meant to hold any address), and `ptr` is valid
                // for writes.
                unsafe { ptr.cast::<bindings::sockaddr_in>().write(sin) };
                core::mem::size_of::<bindings::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = bindings::sockaddr_in6 {
                    sin6_family: bindings::AF_INET6 as u16,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo().to_be(),
                    sin6_addr: bindings::in6_addr {
                        in6_u: bindings::in6_addr__bindgen_ty_1 {
                            u6_addr8: a.ip().octets(),
                        },
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: As above, for `sockaddr_in6`.
                unsafe { ptr.cast::<bindings::sockaddr_in6>().write(sin6) };
                core::mem::size_of::<bindings::sockaddr_in6>()
            }
        };
        // INVARIANT: `len` is the size of the structure just written.
        Self { storage, len }
    }

    /// Decodes a C `sockaddr_storage`.
    ///
    /// Returns `EAFNOSUPPORT` if it holds neither an IPv4 nor an IPv6 address.
    pub fn decode(storage: &bindings::__kernel_sockaddr_storage) -> Result<SocketAddr> {
        let ptr = core::ptr::from_ref(storage);
        // SAFETY: `ss_family` is the first field of every `sockaddr_*` and of the storage; all
        // bit patterns are valid for it.
        let family = unsafe { (*ptr).__bindgen_anon_1.__bindgen_anon_1.ss_family };
        match Family::from_raw(family) {
            Some(Family::Inet) => {
                // SAFETY: The storage is large and aligned enough for a `sockaddr_in`, every bit
                // pattern is valid for it, and the family says it holds one.
                let sin = unsafe { &*ptr.cast::<bindings::sockaddr_in>() };
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(sin.sin_port),
                )))
            }
            Some(Family::Inet6) => {
                // SAFETY: As above, for `sockaddr_in6`.
                let sin6 = unsafe { &*ptr.cast::<bindings::sockaddr_in6>() };
                // SAFETY: Every variant of the `in6_addr` union is plain bytes.
                let octets = unsafe { sin6.sin6_addr.in6_u.u6_addr8 };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(octets),
                    u16::from_be(sin6.sin6_port),
                    u32::from_be(sin6.sin6_flowinfo),
                    sin6.sin6_scope_id,
                )))
            }
            None => Err(EAFNOSUPPORT),
        }
    }

    /// Returns the decoded address.
    pub fn addr(&self) -> Result<SocketAddr> {
        Self::decode(&self.storage)
    }

    /// Returns the C storage.
    pub fn as_raw(&self) -> &bindings::__kernel_sockaddr_storage {
        &self.storage
    }

    /// Returns a pointer for the C socket calls, which take a non-const `sockaddr_unsized`.
    ///
    /// The C functions this is passed to (`kernel_bind`, `kernel_connect`) do not write through
    /// it.
    pub(crate) fn as_unsized_ptr(&self) -> *mut bindings::sockaddr_unsized {
        core::ptr::from_ref(&self.storage).cast_mut().cast()
    }

    /// Returns the length of the family-specific structure.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an encoded address is never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl From<&SocketAddr> for SockAddrStorage {
    fn from(addr: &SocketAddr) -> Self {
        Self::new(addr)
    }
}

/// Flags for sending on a socket (`MSG_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SendFlags(u32);

impl SendFlags {
    /// No flags: block until everything is queued.
    pub const NONE: Self = Self(0);
    /// Do not block; send what fits and return `EAGAIN` if nothing does (`MSG_DONTWAIT`).
    pub const DONTWAIT: Self = Self(bindings::MSG_DONTWAIT);
    /// More data follows; let TCP coalesce it with the next send (`MSG_MORE`).
    pub const MORE: Self = Self(bindings::MSG_MORE);
    /// Do not raise `SIGPIPE` (`MSG_NOSIGNAL`).
    pub const NOSIGNAL: Self = Self(bindings::MSG_NOSIGNAL);

    /// Returns the raw `MSG_*` bits.
    pub fn as_raw(self) -> u32 {
        self.0
    }

    /// Returns true if every flag in `other` is set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for SendFlags {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}
