// SPDX-License-Identifier: GPL-2.0

//! STags and the access check.
//!
//! An STag (steering tag, RFC 5040 section 2.3) names a memory region on the wire and in work
//! requests (lkey and rkey are the same STag, as in `siw`): the upper 24 bits are an index into
//! the device's table of regions, the lower 8 bits a key (the "consumer key" of fast
//! registration). rsiw allocates indices cyclically over the whole 24-bit space and starts every
//! device at a random index, and every registration gets a random key, so STags are hard to
//! guess and a stale STag (e.g. of a region deregistered a moment ago) does not name a new
//! region until the 16M indices have wrapped *and* the 1-in-256 key matches.
//!
//! [`check_region`] is the one access check of the data path: every placed or sourced segment
//! goes through it (via [`crate::mem::MemTable::check`]). It is pure, so the KUnit suite below
//! covers it exhaustively.

use crate::wire::atomic::Fault;

/// The number of bits of the key part of an STag.
pub(crate) const KEY_BITS: u32 = 8;
/// The largest STag index (24 bits).
pub(crate) const INDEX_MAX: u32 = (1 << (32 - KEY_BITS)) - 1;
/// The smallest STag index: STag 0 is never valid (RFC 5040 reserves no STag, but 0 is the
/// "no STag" value of the siw ABI and of many ULPs).
pub(crate) const INDEX_MIN: u32 = 1;

/// Packs an index and a key into an STag.
pub(crate) const fn stag(index: u32, key: u8) -> u32 {
    (index << KEY_BITS) | key as u32
}

/// Returns the index part of an STag.
pub(crate) const fn stag_index(stag: u32) -> u32 {
    stag >> KEY_BITS
}

/// Returns the key part of an STag.
pub(crate) const fn stag_key(stag: u32) -> u8 {
    (stag & 0xff) as u8
}

/// Access rights of a region, and the rights an access needs.
///
/// The bits are the `IB_ACCESS_*` registration flags; local read is always granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rights(pub(crate) u32);

impl Rights {
    /// Local read: granted to every region.
    pub(crate) const LOCAL_READ: Self = Self(0);
    /// Local write (receive buffers, RDMA READ sinks, atomic result buffers).
    pub(crate) const LOCAL_WRITE: Self = Self(1);
    /// Remote write (RDMA WRITE sink).
    pub(crate) const REMOTE_WRITE: Self = Self(2);
    /// Remote read (RDMA READ source).
    pub(crate) const REMOTE_READ: Self = Self(4);
    /// Remote atomic (RFC 7306 atomics and Atomic Write target).
    pub(crate) const REMOTE_ATOMIC: Self = Self(8);
    /// Flush to global visibility (RDMA Flush, placement type global).
    pub(crate) const FLUSH_GLOBAL: Self = Self(1 << 8);
    /// Flush to persistence (RDMA Flush, placement type persistent).
    pub(crate) const FLUSH_PERSISTENT: Self = Self(1 << 9);

    /// Returns `true` if every right of `need` is in `self`.
    pub(crate) const fn contains(self, need: Self) -> bool {
        self.0 & need.0 == need.0
    }
}

impl core::ops::BitOr for Rights {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Identifies a protection domain. Two live PDs never have the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PdId(pub(crate) usize);

/// What the access check needs to know about a region.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RegionView {
    /// Key of the region's current STag.
    pub(crate) key: u8,
    /// `false` once the region was invalidated (or deregistered).
    pub(crate) valid: bool,
    /// The PD the region belongs to.
    pub(crate) pd: PdId,
    /// Rights granted at registration.
    pub(crate) rights: Rights,
    /// First tagged offset (the I/O virtual address) of the region.
    pub(crate) base: u64,
    /// Length of the region in bytes.
    pub(crate) len: u64,
}

/// The access check: may `[to, to + len)` of the region named by an STag with key `key` be
/// accessed with rights `need` by a QP of PD `pd`?
///
/// Checks, in the order of RFC 5040 section 7.2 / spec-map T-06: the STag is valid and its key
/// matches (else [`Fault::InvalidStag`]), the PD matches ([`Fault::Pd`]), the rights include
/// `need` ([`Fault::Rights`]), `to + len` does not wrap ([`Fault::ToWrap`]) and the range lies
/// within the region ([`Fault::Bounds`]). A zero-length access is never bounds-checked
/// (DDP-12). Returns the offset of `to` from the region's base.
pub(crate) fn check_region(
    r: &RegionView,
    key: u8,
    pd: PdId,
    need: Rights,
    to: u64,
    len: u64,
) -> Result<u64, Fault> {
    if !r.valid || r.key != key {
        return Err(Fault::InvalidStag);
    }
    if r.pd != pd {
        return Err(Fault::Pd);
    }
    if !r.rights.contains(need) {
        return Err(Fault::Rights);
    }
    if len == 0 {
        return Ok(to.wrapping_sub(r.base));
    }
    to.checked_add(len).ok_or(Fault::ToWrap)?;
    // Overflow-safe form of `base <= to && to + len <= base + r.len`, which also works for a
    // region that ends at the top of the address space.
    let off = to.checked_sub(r.base).ok_or(Fault::Bounds)?;
    if off > r.len || len > r.len - off {
        return Err(Fault::Bounds);
    }
    Ok(off)
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_stag)]
mod tests {
    use super::*;

    const PD: PdId = PdId(0x1000);

    fn region() -> RegionView {
        RegionView {
            key: 0x5a,
            valid: true,
            pd: PD,
            rights: Rights::LOCAL_WRITE | Rights::REMOTE_WRITE,
            base: 0x10_0000,
            len: 0x2000,
        }
    }

    #[test]
    fn stag_packing() {
        assert_eq!(stag(0xab_cdef, 0x12), 0xabcd_ef12);
        assert_eq!(stag_index(0xabcd_ef12), 0xab_cdef);
        assert_eq!(stag_key(0xabcd_ef12), 0x12);
        assert_eq!(stag_index(stag(INDEX_MAX, 0xff)), INDEX_MAX);
        assert_eq!(stag(INDEX_MAX, 0xff), u32::MAX);
    }

    #[test]
    fn check_ok() {
        let r = region();
        assert_eq!(
            check_region(&r, 0x5a, PD, Rights::REMOTE_WRITE, 0x10_0000, 0x2000),
            Ok(0)
        );
        assert_eq!(
            check_region(&r, 0x5a, PD, Rights::LOCAL_READ, 0x10_1fff, 1),
            Ok(0x1fff)
        );
        assert_eq!(
            check_region(
                &r,
                0x5a,
                PD,
                Rights::LOCAL_WRITE | Rights::REMOTE_WRITE,
                0x10_1000,
                0x1000
            ),
            Ok(0x1000)
        );
        // Zero-length accesses are not bounds-checked (DDP-12).
        assert!(check_region(&r, 0x5a, PD, Rights::REMOTE_WRITE, u64::MAX, 0).is_ok());
    }

    #[test]
    fn check_stag() {
        let mut r = region();
        assert_eq!(
            check_region(&r, 0x5b, PD, Rights::LOCAL_READ, 0x10_0000, 1),
            Err(Fault::InvalidStag)
        );
        r.valid = false;
        assert_eq!(
            check_region(&r, 0x5a, PD, Rights::LOCAL_READ, 0x10_0000, 1),
            Err(Fault::InvalidStag)
        );
        // An invalid STag wins over every other fault.
        assert_eq!(
            check_region(&r, 0x5a, PdId(1), Rights::REMOTE_READ, 0, u64::MAX),
            Err(Fault::InvalidStag)
        );
    }

    #[test]
    fn check_pd_rights() {
        let r = region();
        assert_eq!(
            check_region(&r, 0x5a, PdId(0x2000), Rights::LOCAL_READ, 0x10_0000, 1),
            Err(Fault::Pd)
        );
        assert_eq!(
            check_region(&r, 0x5a, PD, Rights::REMOTE_READ, 0x10_0000, 1),
            Err(Fault::Rights)
        );
        assert_eq!(
            check_region(&r, 0x5a, PD, Rights::REMOTE_ATOMIC, 0x10_0000, 8),
            Err(Fault::Rights)
        );
        assert_eq!(
            check_region(&r, 0x5a, PD, Rights::FLUSH_GLOBAL, 0x10_0000, 0),
            Err(Fault::Rights)
        );
    }

    #[test]
    fn check_bounds() {
        let r = region();
        let need = Rights::REMOTE_WRITE;
        assert_eq!(
            check_region(&r, 0x5a, PD, need, 0x0f_ffff, 1),
            Err(Fault::Bounds)
        );
        assert_eq!(
            check_region(&r, 0x5a, PD, need, 0x10_0000, 0x2001),
            Err(Fault::Bounds)
        );
        assert_eq!(
            check_region(&r, 0x5a, PD, need, 0x10_2000, 1),
            Err(Fault::Bounds)
        );
        assert_eq!(
            check_region(&r, 0x5a, PD, need, u64::MAX, 2),
            Err(Fault::ToWrap)
        );
        assert_eq!(
            check_region(&r, 0x5a, PD, need, 0x10_0001, u64::MAX),
            Err(Fault::ToWrap)
        );
        // A region reaching the top of the address space.
        let top = RegionView {
            base: u64::MAX - 0xfff,
            len: 0x1000,
            ..r
        };
        assert_eq!(
            check_region(&top, 0x5a, PD, need, u64::MAX - 1, 1),
            Ok(0xffe)
        );
        // Its last byte cannot be named: TO + length would wrap.
        assert_eq!(
            check_region(&top, 0x5a, PD, need, u64::MAX, 1),
            Err(Fault::ToWrap)
        );
        // The DMA MR covers all of the address space.
        let all = RegionView {
            base: 0,
            len: u64::MAX,
            ..r
        };
        assert_eq!(
            check_region(&all, 0x5a, PD, need, 0xffff_8880_0000_0000, 4096),
            Ok(0xffff_8880_0000_0000)
        );
    }
}
