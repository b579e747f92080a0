// SPDX-License-Identifier: GPL-2.0

//! Memory regions and the device's STag table.
//!
//! Every MR is a [`Mem`], shared (`Arc`) between the MR object and the device's [`MemTable`],
//! which maps the 24-bit STag index to it (see [`crate::stag`]). The data path looks STags up
//! with [`MemTable::check`], which returns a [`Placement`]: a reference to the region plus the
//! checked offset, through which it copies data in and out ([`Placement::write`],
//! [`Placement::read`]).
//!
//! Kinds of regions:
//!
//! - DMA MR ([`Kind::Dma`]): created by ib_core for every kernel PD (`pd->local_dma_lkey`);
//!   covers the whole address space; its addresses are kernel virtual addresses
//!   (`CONFIG_INFINIBAND_VIRT_DMA`).
//! - User MR ([`Kind::User`]): user memory pinned with `ib_umem_get()`; pages are found by
//!   index into the pinned page array (O(1)).
//!
//! Deregistration removes the STag from the table first (no new lookups), marks the region
//! invalid, then revokes the pinned memory: `Revocable::revoke()` waits for an RCU grace period,
//! so copies in progress (which run under the RCU read lock) finish before the pages are
//! unpinned, in process context.

#![allow(dead_code, reason = "the data path (next issue) uses these")]

use crate::{
    stag::{
        self,
        check_region,
        PdId,
        RegionView,
        Rights, //
    },
    wire::atomic::Fault,
};
use core::sync::atomic::{
    AtomicBool,
    Ordering::{
        Acquire,
        Release, //
    },
};
use kernel::{
    prelude::*,
    rdma::{
        mr::{
            access,
            random_u32,
            IndexTable, //
        },
        umem::Umem,
    },
    revocable::Revocable,
    sync::Arc,
};
use zerocopy_derive::Immutable;

/// Response of `reg_user_mr` (`struct siw_uresp_reg_mr` of the siw ABI).
#[repr(C)]
#[derive(IntoBytes, Immutable)]
pub(crate) struct UrespRegMr {
    /// The STag of the new region.
    pub(crate) stag: u32,
    /// Padding, zero.
    pub(crate) pad: u32,
}

/// The access flags rsiw supports in a registration.
const SUPPORTED_ACCESS: i32 = access::LOCAL_WRITE
    | access::REMOTE_WRITE
    | access::REMOTE_READ
    | access::REMOTE_ATOMIC
    | access::FLUSH_GLOBAL
    | access::FLUSH_PERSISTENT
    | access::HUGETLB
    | access::OPTIONAL;

/// Validates the `IB_ACCESS_*` flags of a registration and returns the rights they grant.
///
/// Fails with `EINVAL` for remote write or atomic without local write (the verbs rule; ib_core
/// checks it for user registrations already) and with `EOPNOTSUPP` for unsupported flags
/// (memory window binding, zero-based addresses, on-demand paging, ...). Hints (huge pages) and
/// optional flags (relaxed ordering) are ignored.
pub(crate) fn mr_rights(flags: i32) -> Result<Rights> {
    if flags & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0
        && flags & access::LOCAL_WRITE == 0
    {
        return Err(EINVAL);
    }
    if flags & !SUPPORTED_ACCESS != 0 {
        return Err(EOPNOTSUPP);
    }
    let bits = flags
        & (access::LOCAL_WRITE
            | access::REMOTE_WRITE
            | access::REMOTE_READ
            | access::REMOTE_ATOMIC
            | access::FLUSH_GLOBAL
            | access::FLUSH_PERSISTENT);
    Ok(Rights(bits as u32))
}

/// The kind of a memory region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// All of (kernel) memory, for kernel users.
    Dma,
    /// Pinned user memory.
    User,
}

/// A registered memory region.
#[pin_data]
pub(crate) struct Mem {
    kind: Kind,
    key: u8,
    pd: PdId,
    rights: Rights,
    base: u64,
    len: u64,
    valid: AtomicBool,
    /// The pinned memory of a user MR (`None` for a DMA MR); revoked at deregistration.
    #[pin]
    umem: Revocable<Option<Umem>>,
}

impl Mem {
    fn view(&self) -> RegionView {
        RegionView {
            key: self.key,
            valid: self.valid.load(Acquire),
            pd: self.pd,
            rights: self.rights,
            base: self.base,
            len: self.len,
        }
    }

    /// Returns the kind of the region.
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }
}

/// A checked access to `[to, to + len)` of a region, returned by [`MemTable::check`].
///
/// Holds a reference to the region; the memory itself may still be revoked by a concurrent
/// deregistration, in which case copies fail with `ENOENT`.
pub(crate) struct Placement {
    mem: Arc<Mem>,
    /// Offset of `to` from the region's base.
    off: u64,
    len: u64,
}

impl Placement {
    /// Returns the region.
    pub(crate) fn mem(&self) -> &Mem {
        &self.mem
    }

    /// Returns the length of the checked range.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Returns the offset of the checked range from the region's base.
    pub(crate) fn offset(&self) -> u64 {
        self.off
    }

    /// Returns the offset into the region of `[at, at + n)` of the checked range.
    fn region_off(&self, at: u64, n: usize) -> Result<usize> {
        let n = u64::try_from(n).map_err(|_| EINVAL)?;
        if at.checked_add(n).ok_or(EINVAL)? > self.len {
            return Err(EINVAL);
        }
        usize::try_from(self.off + at).map_err(|_| EINVAL)
    }

    /// Copies `src` into bytes `[at, at + src.len())` of the checked range.
    ///
    /// Does not sleep (runs under the RCU read lock). Fails with `EINVAL` outside the checked
    /// range, `ENOENT` if the region was deregistered meanwhile and `EOPNOTSUPP` for a DMA MR
    /// (kernel virtual addresses: to be done with the data path).
    pub(crate) fn write(&self, at: u64, src: &[u8]) -> Result {
        let off = self.region_off(at, src.len())?;
        let guard = self.mem.umem.try_access().ok_or(ENOENT)?;
        match &*guard {
            Some(umem) => umem.write(off, src),
            None => Err(EOPNOTSUPP),
        }
    }

    /// Copies bytes `[at, at + dst.len())` of the checked range into `dst`.
    ///
    /// Same rules as [`Placement::write`].
    pub(crate) fn read(&self, at: u64, dst: &mut [u8]) -> Result {
        let off = self.region_off(at, dst.len())?;
        let guard = self.mem.umem.try_access().ok_or(ENOENT)?;
        match &*guard {
            Some(umem) => umem.read(off, dst),
            None => Err(EOPNOTSUPP),
        }
    }
}

/// The STag table of a device.
pub(crate) struct MemTable {
    table: IndexTable<Mem>,
}

/// A registered region, owned by the MR object.
pub(crate) struct RsiwMr {
    mem: Arc<Mem>,
    stag: u32,
}

impl RsiwMr {
    /// Returns the STag (lkey and rkey).
    pub(crate) fn stag(&self) -> u32 {
        self.stag
    }

    /// Returns the region.
    pub(crate) fn mem(&self) -> &Mem {
        &self.mem
    }
}

impl MemTable {
    /// Creates an empty table. Index allocation starts at a random index.
    pub(crate) fn new() -> Result<Self> {
        let first = stag::INDEX_MIN + random_u32() % (stag::INDEX_MAX - stag::INDEX_MIN);
        Ok(Self {
            table: IndexTable::new(first)?,
        })
    }

    fn add(
        &self,
        kind: Kind,
        pd: PdId,
        rights: Rights,
        base: u64,
        len: u64,
        umem: Option<Umem>,
    ) -> Result<RsiwMr> {
        let key = (random_u32() & 0xff) as u8;
        let mem = Arc::pin_init(
            try_pin_init!(Mem {
                kind,
                key,
                pd,
                rights,
                base,
                len,
                valid: AtomicBool::new(true),
                umem <- Revocable::new(umem),
            }? Error),
            GFP_KERNEL,
        )?;
        let index = self
            .table
            .alloc(mem.clone(), stag::INDEX_MIN..=stag::INDEX_MAX)?;
        Ok(RsiwMr {
            mem,
            stag: stag::stag(index, key),
        })
    }

    /// Registers the DMA MR of a kernel PD: all of memory, with rights `rights`.
    pub(crate) fn add_dma(&self, pd: PdId, rights: Rights) -> Result<RsiwMr> {
        self.add(Kind::Dma, pd, rights, 0, u64::MAX, None)
    }

    /// Registers pinned user memory, addressed from `iova` on.
    pub(crate) fn add_user(
        &self,
        pd: PdId,
        rights: Rights,
        iova: u64,
        umem: Umem,
    ) -> Result<RsiwMr> {
        let len = u64::try_from(umem.len()).map_err(|_| EINVAL)?;
        // The last byte's address must be representable.
        iova.checked_add(len - 1).ok_or(EINVAL)?;
        self.add(Kind::User, pd, rights, iova, len, Some(umem))
    }

    /// Deregisters an MR: removes its STag, invalidates it and unpins its memory after the
    /// copies in progress have finished. May sleep.
    pub(crate) fn remove(&self, mr: &RsiwMr) {
        if let Some(mem) = self.table.remove(stag::stag_index(mr.stag)) {
            if !Arc::ptr_eq(&mem, &mr.mem) {
                // Cannot happen: an index names one region until it is removed here.
                pr_err!("rsiw: STag table corrupted at {:#x}\n", mr.stag);
            }
        }
        mr.mem.valid.store(false, Release);
        if mr.mem.kind == Kind::User {
            mr.mem.umem.revoke();
        }
    }

    /// Looks up `stag` and checks an access to `[to, to + len)` of it with rights `need` by a
    /// QP of PD `pd`: the one access check of the data path, for every placed or sourced
    /// segment. Map a [`Fault`] to a Terminate with `wire::atomic::access_error()` (remote
    /// accesses) or to `IB_WC_LOC_PROT_ERR` (local SGEs).
    pub(crate) fn check(
        &self,
        pd: PdId,
        stag: u32,
        need: Rights,
        to: u64,
        len: u64,
    ) -> Result<Placement, Fault> {
        let mem = self
            .table
            .get(stag::stag_index(stag))
            .ok_or(Fault::InvalidStag)?;
        let off = check_region(&mem.view(), stag::stag_key(stag), pd, need, to, len)?;
        Ok(Placement { mem, off, len })
    }

    /// Invalidates `stag` (Local Invalidate work request, or the Invalidate STag of a received
    /// Send with Invalidate when `remote`). Only fast-registration MRs (and memory windows) can
    /// be invalidated; rsiw has neither yet, so this checks the STag and PD and fails with
    /// [`Fault::Rights`] for the regions that exist.
    pub(crate) fn invalidate(&self, pd: PdId, stag: u32, _remote: bool) -> Result<(), Fault> {
        let mem = self
            .table
            .get(stag::stag_index(stag))
            .ok_or(Fault::InvalidStag)?;
        let v = mem.view();
        if !v.valid || v.key != stag::stag_key(stag) {
            return Err(Fault::InvalidStag);
        }
        if v.pd != pd {
            return Err(Fault::Pd);
        }
        // DMA and user MRs cannot be invalidated (like rxe).
        Err(Fault::Rights)
    }
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_mem)]
mod tests {
    use super::*;

    #[test]
    fn table_lookup() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let a = t.add_dma(pd, Rights::LOCAL_WRITE)?;
        let b = t.add_dma(pd, Rights::LOCAL_WRITE | Rights::REMOTE_READ)?;
        assert_ne!(stag::stag_index(a.stag()), stag::stag_index(b.stag()));
        assert!(t
            .check(pd, a.stag(), Rights::LOCAL_WRITE, 0x1000, 8)
            .is_ok());
        assert_eq!(
            t.check(pd, a.stag(), Rights::REMOTE_READ, 0x1000, 8).err(),
            Some(Fault::Rights)
        );
        assert!(t
            .check(pd, b.stag(), Rights::REMOTE_READ, 0x1000, 8)
            .is_ok());
        assert_eq!(
            t.check(PdId(0x80), b.stag(), Rights::LOCAL_READ, 0, 1)
                .err(),
            Some(Fault::Pd)
        );
        // Wrong key, unknown index.
        assert_eq!(
            t.check(pd, a.stag() ^ 1, Rights::LOCAL_READ, 0, 1).err(),
            Some(Fault::InvalidStag)
        );
        assert_eq!(
            t.check(pd, a.stag() ^ 0x100, Rights::LOCAL_READ, 0, 1)
                .err(),
            Some(Fault::InvalidStag)
        );
        // A checked placement outlives the removal, but is invalid for new lookups.
        let p = t
            .check(pd, b.stag(), Rights::LOCAL_READ, 0, 1)
            .map_err(|_| EINVAL)?;
        t.remove(&b);
        assert_eq!(
            t.check(pd, b.stag(), Rights::LOCAL_READ, 0, 1).err(),
            Some(Fault::InvalidStag)
        );
        assert_eq!(p.mem().kind(), Kind::Dma);
        assert_eq!(t.invalidate(pd, a.stag(), false), Err(Fault::Rights));
        assert_eq!(t.invalidate(pd, b.stag(), true), Err(Fault::InvalidStag));
        t.remove(&a);
        Ok(())
    }

    #[test]
    fn cyclic_indices() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let a = t.add_dma(pd, Rights::LOCAL_WRITE)?;
        let ia = stag::stag_index(a.stag());
        t.remove(&a);
        // The next registration does not reuse the index just freed.
        let b = t.add_dma(pd, Rights::LOCAL_WRITE)?;
        assert_ne!(stag::stag_index(b.stag()), ia);
        t.remove(&b);
        Ok(())
    }
}
