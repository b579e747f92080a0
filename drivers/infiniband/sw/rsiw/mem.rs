// SPDX-License-Identifier: GPL-2.0

//! Memory regions and the device's STag table.
//!
//! Every MR is a [`Mem`], shared (`Arc`) between the MR object and the device's [`MemTable`],
//! which maps the 24-bit STag index to it (see [`crate::stag`]). The data path looks STags up
//! with [`MemTable::check`], which returns a [`Placement`]: a reference to the region plus the
//! checked offset, through which it copies data in and out ([`Placement::write`],
//! [`Placement::read`]; received payload straight from the socket buffer with
//! [`Placement::write_from_skb`]).
//!
//! Kinds of regions:
//!
//! - DMA MR ([`Kind::Dma`]): created by ib_core for every kernel PD (`pd->local_dma_lkey`);
//!   covers the whole address space; its addresses are kernel virtual addresses
//!   (`CONFIG_INFINIBAND_VIRT_DMA`), copied to and from through the [`KernelVa`] capability the
//!   abstraction hands to `get_dma_mr` for kernel PDs only (it checks every range with
//!   `virt_addr_valid()`). Remote access only with the rights ib_core asked for
//!   (`IB_PD_UNSAFE_GLOBAL_RKEY`: remote read and write).
//! - User MR ([`Kind::User`]): user memory pinned with `ib_umem_get()`; pages are found by
//!   index into the pinned page array (O(1)).
//! - Fast-registration MR ([`Kind::FastReg`]): created by `alloc_mr` with room for
//!   `max_num_sg` pages and *invalid*; `map_mr_sg` stages a page list ([`PageList`], kernel
//!   virtual addresses, found by index: O(1)); the `IB_WR_REG_MR` work request makes it valid
//!   with a new key, access rights and I/O virtual address ([`MemTable::reg_mr`]); Local
//!   Invalidate, Read with Local Invalidate and a received Send with Invalidate make it invalid
//!   again ([`MemTable::invalidate`]). Its state and page list are under one IRQ-safe spinlock,
//!   which copies hold: when an invalidation returns, no copy into the region is in progress.
//!
//! Deregistration removes the STag from the table first (no new lookups), marks the region
//! invalid, then revokes the pinned memory: `Revocable::revoke()` waits for an RCU grace period,
//! so copies in progress (which run under the RCU read lock) finish before the pages are
//! unpinned, in process context.
//!
//! # For the TX and RX engines
//!
//! - Every placed or sourced segment: [`MemTable::check`], then [`Placement::write`] /
//!   [`Placement::read`].
//! - `SIW_OP_REG_MR` SQE, when the SQ reaches it (in order): [`MemTable::reg_mr`] with
//!   [`RegMr::from_sqe`]; on error complete it with `SIW_WC_LOC_QP_OP_ERR`.
//! - `SIW_OP_INVAL_STAG` SQE: [`MemTable::invalidate`] with `sqe.rkey`, `remote = false`; on
//!   error complete it with `SIW_WC_LOC_QP_OP_ERR`.
//! - `SIW_OP_READ_LOCAL_INV`, after the last Read Response byte was placed: invalidate the sink
//!   STag (`sqe.sge[0].lkey`) the same way; on error complete it with `SIW_WC_LOC_QP_OP_ERR`.
//! - A received Send with Invalidate, after placement: [`MemTable::invalidate`] with the
//!   Invalidate STag and `remote = true`; on error send the Terminate
//!   `wire::atomic::access_error(Target::SendInvalidate, fault)` (0/2/09 for an invalid STag,
//!   0/1/09 otherwise: spec-map RDMAP-09, T-06); on success the receive completes with the
//!   invalidated STag.
//!
//! Memory windows are not implemented (`max_mw = 0`), so no region is ever bound to one.

use crate::{
    stag::{
        self,
        check_region,
        PdId,
        RegionView,
        Rights, //
    },
    wire::{
        atomic::Fault,
        commit::writeback_span, //
    },
    wqe::{
        Sge,
        Sqe, //
    },
};
use core::ops::Deref;
use kernel::{
    mm::pmem,
    net::skb::SkbData,
    new_spinlock_irq,
    prelude::*,
    random,
    rdma::{
        mr::{
            AccessFlag,
            AccessFlags,
            IndexTable,
            KernelVa,
            MapStep,
            PageList, //
        },
        umem::{
            Umem,
            UmemPageRef, //
        },
    },
    revocable::Revocable,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            AtomicFlag,
            Relaxed,
            Release, //
        },
        rcu,
        Arc,
        ArcBorrow,
        SpinLockIrq, //
    },
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

/// The access flags rsiw supports in a registration: those it grants (see [`granted`]), a hint
/// (huge pages) and the optional ones (relaxed ordering, ...).
fn supported() -> AccessFlags {
    granted() | AccessFlag::HugeTlb | AccessFlags::OPTIONAL
}

/// The access flags that grant [`Rights`].
fn granted() -> AccessFlags {
    AccessFlag::LocalWrite
        | AccessFlag::RemoteWrite
        | AccessFlag::RemoteRead
        | AccessFlag::RemoteAtomic
        | AccessFlag::FlushGlobal
        | AccessFlag::FlushPersistent
}

/// Validates the access flags of a registration and returns the rights they grant.
///
/// Fails with `EINVAL` for remote write or atomic without local write (the verbs rule; ib_core
/// checks it for user registrations already) and with `EOPNOTSUPP` for unsupported flags
/// (memory window binding, zero-based addresses, on-demand paging, ...). Hints (huge pages) and
/// optional flags (relaxed ordering) are ignored.
///
/// `IB_ACCESS_FLUSH_PERSISTENT` is granted here, but a region is flushable to persistence only
/// if every page of it is persistent memory (CMT-03): each kind of registration checks its
/// pages ([`persistent`]) and refuses the flag with `EINVAL` and a log line otherwise.
pub(crate) fn mr_rights(flags: AccessFlags) -> Result<Rights> {
    if flags.contains_any(AccessFlag::RemoteWrite | AccessFlag::RemoteAtomic)
        && !flags.contains(AccessFlag::LocalWrite)
    {
        return Err(EINVAL);
    }
    if u32::from(flags) & !u32::from(supported()) != 0 {
        return Err(EOPNOTSUPP);
    }
    Ok(Rights(u32::from(flags & granted())))
}

/// The check of a registration with rights `rights` whose memory is persistent memory or not
/// (`is_pmem`: every page is, [`kernel::mm::pmem`]; only asked if it matters): a region is
/// flushable to persistence (`IB_ACCESS_FLUSH_PERSISTENT`, [`Rights::FLUSH_PERSISTENT`]) only
/// if every page of it is persistent memory and the architecture can write caches back to it
/// (CMT-03, issue 37). Otherwise `EINVAL`, and a log line that says why. Returns whether the
/// region is flushable to persistence. A user MR's `is_pmem` also says yes under the test knob
/// [`fault_dram_persistent`]; a fast registration's and a DMA MR's never do.
pub(crate) fn persistent(rights: Rights, is_pmem: impl FnOnce() -> bool) -> Result<bool> {
    if !rights.contains(Rights::FLUSH_PERSISTENT) {
        return Ok(false);
    }
    if pmem::CAN_WRITE_BACK && is_pmem() {
        return Ok(true);
    }
    pr_warn!("mr: IB_ACCESS_FLUSH_PERSISTENT refused: the region is not persistent memory\n");
    Err(EINVAL)
}

/// Fault injection for tests (`fault_dram_persistent`, off by default): a user region that is
/// not persistent memory is taken for persistent memory by [`persistent`], so that a Flush to
/// persistence, and the deferred write-back of a long one (`responder::DeferredFlush`), can be
/// tested on a kernel without persistent memory (`tests/vm/cases/commit-faults.sh`, on the KASAN
/// kernel). Writing back the cache lines of DRAM (`arch_wb_cache_pmem()`) only cleans them:
/// it is harmless, and makes nothing durable. Fast registrations and DMA MRs are not affected
/// (see [`fast_reg_rights`]). Logs once per module load, when it first applies.
fn fault_dram_persistent() -> bool {
    static LOGGED: AtomicFlag = AtomicFlag::new(false);
    if !crate::module_parameters::fault_dram_persistent.value() {
        return false;
    }
    if !LOGGED.xchg(true, Relaxed) {
        pr_warn!(
            "fault_dram_persistent: a user region that is not persistent memory is registered flushable to persistence (testing only)\n"
        );
    }
    true
}

/// The rights of a fast registration (`IB_WR_REG_MR`), checked when it is posted and when it
/// executes: those of [`mr_rights`], and never flushable to persistence (`EINVAL` and the log
/// line of [`persistent`]). Recognising persistent memory reads the resource tree under its
/// lock, which is taken with interrupts on elsewhere: it must not be taken where a
/// registration executes (the send path, in softirq, under the region's IRQ-safe lock).
pub(crate) fn fast_reg_rights(flags: AccessFlags) -> Result<Rights> {
    let rights = mr_rights(flags)?;
    persistent(rights, || false)?;
    Ok(rights)
}

/// The kind of a memory region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// All of (kernel) memory, for kernel users.
    Dma,
    /// Pinned user memory.
    User,
    /// Fast registration (`alloc_mr`, `map_mr_sg`, `IB_WR_REG_MR`).
    FastReg,
}

/// The registration state of a fast-registration region.
struct FastReg {
    /// Registered (by `IB_WR_REG_MR`) and not invalidated since.
    valid: bool,
    /// The key of the current (or last) registration.
    key: u8,
    rights: Rights,
    /// The I/O virtual address of the registration.
    base: u64,
    /// The page list generation of the registration.
    gen: u64,
    /// Every page of the registration is persistent memory (it has
    /// [`Rights::FLUSH_PERSISTENT`]).
    pmem: bool,
    pages: PageList,
}

impl FastReg {
    fn view(&self, pd: PdId) -> RegionView {
        RegionView {
            key: self.key,
            valid: self.valid,
            pd,
            rights: self.rights,
            base: self.base,
            len: self.pages.active_len(),
        }
    }
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
    valid: Atomic<bool>,
    /// Every page of the region is persistent memory: it was registered with
    /// `IB_ACCESS_FLUSH_PERSISTENT` ([`persistent`]). For a fast-registration MR, the state of
    /// the registration has it.
    pmem: bool,
    /// The kernel virtual address capability of a DMA MR (`None` for the other kinds).
    kva: Option<KernelVa>,
    /// The pinned memory of a user MR (`None` for a DMA MR); revoked at deregistration.
    #[pin]
    umem: Revocable<Option<Umem>>,
    /// The state of a fast-registration MR (`None` for the other kinds).
    #[pin]
    fr: SpinLockIrq<Option<FastReg>>,
}

impl Mem {
    /// Returns the region's view for the access check and the page list generation it was
    /// taken at (0 unless fast registration).
    fn view(&self) -> (RegionView, u64) {
        if self.kind == Kind::FastReg {
            if let Some(f) = &*self.fr.lock() {
                return (f.view(self.pd), f.gen);
            }
        }
        let v = RegionView {
            key: self.key,
            valid: self.valid.load(Acquire),
            pd: self.pd,
            rights: self.rights,
            base: self.base,
            len: self.len,
        };
        (v, 0)
    }

    /// Returns the PD of the region.
    pub(crate) fn pd(&self) -> PdId {
        self.pd
    }

    /// Applies a step of `map_mr_sg` (see [`kernel::rdma::mr`]); `EINVAL` unless the region
    /// is a fast-registration MR.
    pub(crate) fn map_step(&self, step: MapStep) -> Result {
        match &mut *self.fr.lock() {
            Some(f) => f.pages.apply(step),
            None => Err(EINVAL),
        }
    }

    /// Returns the kind of the region.
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }
}

/// A checked access to `[to, to + len)` of a region, returned by [`MemTable::check`] (with a
/// reference to the region) or [`MemTable::check_in`] (borrowed for an RCU read-side critical
/// section: no reference counting for a copy done at once).
///
/// The memory itself may still be revoked by a concurrent deregistration, in which case
/// copies fail with `ENOENT`.
pub(crate) struct Placement<M: Deref<Target = Mem> = Arc<Mem>> {
    mem: M,
    /// Offset of `to` from the region's base.
    off: u64,
    len: u64,
    /// The page list generation checked (fast registration).
    gen: u64,
}

impl<M: Deref<Target = Mem>> Placement<M> {
    /// Returns the region.
    pub(crate) fn mem(&self) -> &Mem {
        &self.mem
    }

    /// Returns the offset into the region of `[at, at + n)` of the checked range.
    fn region_off(&self, at: u64, n: usize) -> Result<u64> {
        let n = u64::try_from(n).map_err(|_| EINVAL)?;
        if at.checked_add(n).ok_or(EINVAL)? > self.len {
            return Err(EINVAL);
        }
        self.off.checked_add(at).ok_or(EINVAL)
    }

    /// Copies `src` into bytes `[at, at + src.len())` of the checked range.
    ///
    /// Does not sleep (runs under the RCU read lock or the region's spinlock). Fails with
    /// `EINVAL` outside the checked range, `ENOENT` if the region was deregistered or
    /// invalidated (fast registration: or registered again) meanwhile, `EFAULT` for a DMA MR
    /// range that is not direct-mapped kernel memory ([`KernelVa`]) and `EOPNOTSUPP` for a DMA
    /// MR without the capability.
    pub(crate) fn write(&self, at: u64, src: &[u8]) -> Result {
        let off = self.region_off(at, src.len())?;
        match self.mem.kind {
            Kind::FastReg => {
                let fr = self.mem.fr.lock();
                return fr.as_ref().ok_or(ENOENT)?.pages.write(self.gen, off, src);
            }
            Kind::Dma => {
                let addr = self.mem.base.checked_add(off).ok_or(EINVAL)?;
                return self.mem.kva.as_ref().ok_or(EOPNOTSUPP)?.write(addr, src);
            }
            Kind::User => {}
        }
        let off = usize::try_from(off).map_err(|_| EINVAL)?;
        let guard = self.mem.umem.try_access().ok_or(ENOENT)?;
        match &*guard {
            Some(umem) => umem.write(off, src),
            None => Err(EOPNOTSUPP),
        }
    }

    /// Copies `len` received bytes of `skb`, starting at `skb_off`, into bytes
    /// `[at, at + len)` of the checked range, straight from the socket buffer (no staging copy).
    ///
    /// Same rules as [`Placement::write`]; also `EINVAL` if the range is not inside `skb`.
    pub(crate) fn write_from_skb(
        &self,
        at: u64,
        skb: &SkbData<'_>,
        skb_off: usize,
        len: usize,
    ) -> Result {
        let off = self.region_off(at, len)?;
        match self.mem.kind {
            Kind::FastReg => {
                let fr = self.mem.fr.lock();
                return fr
                    .as_ref()
                    .ok_or(ENOENT)?
                    .pages
                    .write_from_skb(self.gen, off, skb, skb_off, len);
            }
            Kind::Dma => {
                let addr = self.mem.base.checked_add(off).ok_or(EINVAL)?;
                return self
                    .mem
                    .kva
                    .as_ref()
                    .ok_or(EOPNOTSUPP)?
                    .write_from_skb(addr, skb, skb_off, len);
            }
            Kind::User => {}
        }
        let off = usize::try_from(off).map_err(|_| EINVAL)?;
        let guard = self.mem.umem.try_access().ok_or(ENOENT)?;
        match &*guard {
            Some(umem) => umem.write_from_skb(off, skb, skb_off, len),
            None => Err(EOPNOTSUPP),
        }
    }

    /// Copies bytes `[at, at + dst.len())` of the checked range into `dst`.
    ///
    /// Same rules as [`Placement::write`].
    pub(crate) fn read(&self, at: u64, dst: &mut [u8]) -> Result {
        let off = self.region_off(at, dst.len())?;
        match self.mem.kind {
            Kind::FastReg => {
                let fr = self.mem.fr.lock();
                return fr.as_ref().ok_or(ENOENT)?.pages.read(self.gen, off, dst);
            }
            Kind::Dma => {
                let addr = self.mem.base.checked_add(off).ok_or(EINVAL)?;
                return self.mem.kva.as_ref().ok_or(EOPNOTSUPP)?.read(addr, dst);
            }
            Kind::User => {}
        }
        let off = usize::try_from(off).map_err(|_| EINVAL)?;
        let guard = self.mem.umem.try_access().ok_or(ENOENT)?;
        match &*guard {
            Some(umem) => umem.read(off, dst),
            None => Err(EOPNOTSUPP),
        }
    }
}

impl<M: Deref<Target = Mem>> Placement<M> {
    /// Applies `op` atomically to the 64-bit word at `at` of the checked range, in the
    /// region's memory as mapped, and returns its value before (RFC 7306 atomics, T-10): a
    /// compare-and-exchange loop on the word, atomic against the CPU's atomics and every other
    /// QP, under no lock of the driver's. Does not sleep.
    ///
    /// Fails with `EINVAL` if the word's address (the resolved address, not the TO: T-07) is
    /// not 8-byte aligned, or the word is not in the checked range; otherwise as
    /// [`Placement::write`].
    pub(crate) fn atomic_u64(&self, at: u64, op: impl FnMut(u64) -> u64) -> Result<u64> {
        self.word(at, Rmw(op))
    }

    /// Runs `access` on the 8-byte aligned word at `at` of the checked range, in whichever
    /// memory backs the region: the one dispatch of [`Placement::atomic_u64`] and
    /// [`Placement::store_u64`].
    fn word<A: WordAccess>(&self, at: u64, access: A) -> Result<A::Out> {
        let off = self.region_off(at, 8)?;
        match self.mem.kind {
            Kind::FastReg => {
                let fr = self.mem.fr.lock();
                return access.pages(&fr.as_ref().ok_or(ENOENT)?.pages, self.gen, off);
            }
            Kind::Dma => {
                let addr = self.mem.base.checked_add(off).ok_or(EINVAL)?;
                return access.kva(self.mem.kva.as_ref().ok_or(EOPNOTSUPP)?, addr);
            }
            Kind::User => {}
        }
        let off = usize::try_from(off).map_err(|_| EINVAL)?;
        let guard = self.mem.umem.try_access().ok_or(ENOENT)?;
        match &*guard {
            Some(umem) => access.umem(umem, off),
            None => Err(EOPNOTSUPP),
        }
    }
}

/// One access to an aligned 64-bit word of a region, for each kind of memory that can back it.
trait WordAccess {
    /// What the access returns.
    type Out;
    /// On the pages of a fast registration of generation `gen`, at byte `off` of the region.
    fn pages(self, pages: &PageList, gen: u64, off: u64) -> Result<Self::Out>;
    /// On kernel memory, at kernel virtual address `addr`.
    fn kva(self, kva: &KernelVa, addr: u64) -> Result<Self::Out>;
    /// On pinned user memory, at byte `off` of the pin.
    fn umem(self, umem: &Umem, off: usize) -> Result<Self::Out>;
}

/// A read-modify-write: returns the word's value before `op` replaced it.
struct Rmw<F>(F);

impl<F: FnMut(u64) -> u64> WordAccess for Rmw<F> {
    type Out = u64;
    fn pages(self, pages: &PageList, gen: u64, off: u64) -> Result<u64> {
        pages.atomic_u64(gen, off, self.0)
    }
    fn kva(self, kva: &KernelVa, addr: u64) -> Result<u64> {
        kva.atomic_u64(addr, self.0)
    }
    fn umem(self, umem: &Umem, off: usize) -> Result<u64> {
        umem.atomic_u64(off, self.0)
    }
}

/// A store of release ordering of the 8 bytes.
struct Store([u8; 8]);

impl WordAccess for Store {
    type Out = ();
    fn pages(self, pages: &PageList, gen: u64, off: u64) -> Result {
        pages.store_u64(gen, off, self.0)
    }
    fn kva(self, kva: &KernelVa, addr: u64) -> Result {
        kva.store_u64(addr, self.0)
    }
    fn umem(self, umem: &Umem, off: usize) -> Result {
        umem.store_u64(off, self.0)
    }
}

impl<M: Deref<Target = Mem>> Placement<M> {
    /// Stores the 8 bytes `image` into the 64-bit word at `at` of the checked range with one
    /// aligned store of release ordering (RDMA Atomic Write, AWRITE-03: never torn, and after
    /// every placement this CPU made before it). Does not sleep. Errors as
    /// [`Placement::atomic_u64`].
    pub(crate) fn store_u64(&self, at: u64, image: [u8; 8]) -> Result {
        self.word(at, Store(image))
    }
}

/// What a write-back of [`Placement::write_back_part`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WriteBack {
    /// Bytes of the CPU cache lines covering all the flushed bytes
    /// (`wire::commit::writeback_span` of them as they fall in the region's pages): what the
    /// whole write-back writes back, for the device's counters.
    pub(crate) bytes: u64,
    /// Flushed bytes after the part just written back (0: it was the last part).
    pub(crate) left: u64,
}

impl<M: Deref<Target = Mem>> Placement<M> {
    /// Writes back to persistent memory the bytes an RDMA Flush to persistence names: the
    /// checked range, or with `whole` the whole region (FLUSH-02: the checked range is then
    /// empty). The CPU cache lines covering them are written back
    /// ([`kernel::mm::pmem::write_back`], page by page), not ordered: call
    /// [`kernel::mm::pmem::barrier`] after. Returns the bytes of those cache lines, for the
    /// device's counters. All at once: see [`Placement::write_back_part`] for a write-back in
    /// pieces.
    ///
    /// Errors as [`Placement::write_back_part`]. Does not sleep.
    pub(crate) fn write_back(&self, whole: bool) -> Result<u64> {
        Ok(self.write_back_part(whole, 0, u64::MAX)?.bytes)
    }

    /// Writes back a part of the bytes of [`Placement::write_back`]: at most `max` of them,
    /// from `at` bytes into them (a cache line across two parts is written back twice, which
    /// changes nothing). A long write-back is so cut into parts, between which a caller in
    /// process context can give the CPU away; with `max` 0 nothing is written back and the
    /// result tells how much there is.
    ///
    /// Fails with `EOPNOTSUPP` unless the region (its current registration) is persistent
    /// memory (registered with `IB_ACCESS_FLUSH_PERSISTENT`, [`persistent`]), `ENOENT` if it
    /// was deregistered or invalidated meanwhile, `EINVAL` outside the region. Does not sleep
    /// (the fast registration's spinlock, or the RCU read lock that keeps a user region's pages,
    /// is held while the part is written back).
    pub(crate) fn write_back_part(&self, whole: bool, at: u64, max: u64) -> Result<WriteBack> {
        let line = u64::try_from(pmem::line_size()).map_err(|_| EINVAL)?;
        // The part: its region offset and length, where the region starts `lead` bytes into its
        // first page and has `region_len` bytes.
        let part = |lead: u64, region_len: u64| -> Result<(u64, usize, WriteBack)> {
            let (off, len) = if whole {
                (0, region_len)
            } else {
                (self.off, self.len)
            };
            let first = lead.checked_add(off).ok_or(EINVAL)?;
            let (_, bytes) = writeback_span(first, len, line).ok_or(EINVAL)?;
            let at = at.min(len);
            let n = max.min(len - at);
            let wb = WriteBack {
                bytes,
                left: len - at - n,
            };
            let at = off.checked_add(at).ok_or(EINVAL)?;
            Ok((at, usize::try_from(n).map_err(|_| EINVAL)?, wb))
        };
        match self.mem.kind {
            Kind::FastReg => {
                let fr = self.mem.fr.lock();
                let f = fr.as_ref().ok_or(ENOENT)?;
                if !f.pmem {
                    return Err(EOPNOTSUPP);
                }
                let (off, n, wb) = part(f.pages.active_offset(), f.pages.active_len())?;
                if n > 0 {
                    f.pages.write_back(self.gen, off, n)?;
                }
                Ok(wb)
            }
            Kind::Dma => Err(EOPNOTSUPP),
            Kind::User => {
                if !self.mem.pmem {
                    return Err(EOPNOTSUPP);
                }
                let guard = self.mem.umem.try_access().ok_or(ENOENT)?;
                let umem = guard.as_ref().ok_or(EOPNOTSUPP)?;
                let lead = u64::try_from(umem.page_offset()).map_err(|_| EINVAL)?;
                let (off, n, wb) = part(lead, self.mem.len)?;
                if n > 0 {
                    umem.write_back(usize::try_from(off).map_err(|_| EINVAL)?, n)?;
                }
                Ok(wb)
            }
        }
    }
}

/// Where received payload bytes to place come from.
pub(crate) enum Source<'a, 'b> {
    /// The socket buffer, from an offset on.
    Skb(&'a SkbData<'b>, usize),
    /// A copy (the header copy a whole small FPDU is in).
    Bytes(&'a [u8]),
}

impl<M: Deref<Target = Mem>> Placement<M> {
    /// Writes `len` bytes of `src`, `from` bytes into it, at `at` of the checked range: from
    /// the socket buffer ([`Placement::write_from_skb`]) or from a copy
    /// ([`Placement::write`]).
    pub(crate) fn put(&self, at: u64, src: &Source<'_, '_>, from: usize, len: usize) -> Result {
        match src {
            Source::Skb(skb, off) => self.write_from_skb(at, skb, off.saturating_add(from), len),
            Source::Bytes(b) => {
                let end = from.checked_add(len).ok_or(EINVAL)?;
                self.write(at, b.get(from..end).ok_or(EINVAL)?)
            }
        }
    }
}

impl<M: Deref<Target = Mem>> Placement<M> {
    /// Hands `f(page, offset_in_page, len)` a reference on each page piece of bytes
    /// `[at, at + len)` of the checked range, in order, to send the bytes by reference or with
    /// a copy after the region's lock is dropped ([`UmemPageRef`]).
    ///
    /// Only user regions have such pages: `EOPNOTSUPP` for the other kinds, before `f` runs.
    /// `f` runs under the RCU read lock and must not sleep. Otherwise the rules of
    /// [`Placement::write`] and the errors of `f`.
    pub(crate) fn page_refs(
        &self,
        at: u64,
        len: usize,
        f: impl FnMut(UmemPageRef, usize, usize) -> Result,
    ) -> Result {
        let off = self.region_off(at, len)?;
        if self.mem.kind != Kind::User {
            return Err(EOPNOTSUPP);
        }
        let off = usize::try_from(off).map_err(|_| EINVAL)?;
        let guard = self.mem.umem.try_access().ok_or(ENOENT)?;
        match &*guard {
            Some(umem) => umem.page_refs(off, len, f),
            None => Err(EOPNOTSUPP),
        }
    }
}

/// The checks of [`MemTable::check`] on the region `stag` named.
#[inline(always)]
fn checked<M: Deref<Target = Mem>>(
    mem: M,
    pd: PdId,
    stag: u32,
    need: Rights,
    to: u64,
    len: u64,
) -> Result<Placement<M>, Fault> {
    let (view, gen) = mem.view();
    let off = check_region(&view, stag::stag_key(stag), pd, need, to, len)?;
    Ok(Placement { mem, off, len, gen })
}

/// What holds the memory of a new region.
enum Backing {
    /// All of kernel memory (DMA MR of a kernel PD).
    Kernel(Option<KernelVa>),
    /// Pinned user memory.
    Umem(Umem),
    /// A fast-registration page list.
    Pages(PageList),
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
        let first = stag::INDEX_MIN + random::get_u32() % (stag::INDEX_MAX - stag::INDEX_MIN);
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
        backing: Backing,
    ) -> Result<RsiwMr> {
        // Only a user MR can be persistent memory (a fast registration never is:
        // `fast_reg_rights()`); `persistent()` logs the refusal of the others. The test knob
        // `fault_dram_persistent` applies to user MRs only.
        let pmem = match &backing {
            Backing::Umem(u) => {
                persistent(rights, || u.is_persistent() || fault_dram_persistent())?
            }
            _ => persistent(rights, || false)?,
        };
        let (kva, umem, pages) = match backing {
            Backing::Kernel(k) => (k, None, None),
            Backing::Umem(u) => (None, Some(u), None),
            Backing::Pages(p) => (None, None, Some(p)),
        };
        let key = (random::get_u32() & 0xff) as u8;
        // A fast-registration MR is invalid until `IB_WR_REG_MR` executes.
        let fr = pages.map(|pages| FastReg {
            valid: false,
            key,
            rights: Rights(0),
            base: 0,
            gen: 0,
            pmem: false,
            pages,
        });
        let mem = Arc::pin_init(
            try_pin_init!(Mem {
                kind,
                key,
                pd,
                rights,
                base,
                len,
                valid: Atomic::new(fr.is_none()),
                pmem,
                kva,
                umem <- Revocable::new(umem),
                fr <- new_spinlock_irq!(fr, "rsiw_fastreg"),
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

    /// Registers the DMA MR of a kernel PD: all of memory, with rights `rights`, accessed
    /// through `kva`.
    pub(crate) fn add_dma(&self, pd: PdId, rights: Rights, kva: KernelVa) -> Result<RsiwMr> {
        self.add(
            Kind::Dma,
            pd,
            rights,
            0,
            u64::MAX,
            Backing::Kernel(Some(kva)),
        )
    }

    /// A DMA MR without the kernel virtual address capability (copies fail with
    /// `EOPNOTSUPP`), for KUnit tests of the access checks.
    #[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
    fn add_dma_nocopy(&self, pd: PdId, rights: Rights) -> Result<RsiwMr> {
        self.add(Kind::Dma, pd, rights, 0, u64::MAX, Backing::Kernel(None))
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
        self.add(Kind::User, pd, rights, iova, len, Backing::Umem(umem))
    }

    /// Creates a fast-registration MR of PD `pd` for up to `max_pages` pages (`alloc_mr`),
    /// in the invalid state.
    pub(crate) fn add_fast_reg(&self, pd: PdId, max_pages: u32) -> Result<RsiwMr> {
        let pages = PageList::new(max_pages)?;
        self.add(Kind::FastReg, pd, Rights(0), 0, 0, Backing::Pages(pages))
    }

    /// Deregisters an MR: removes its STag, invalidates it and unpins its memory after the
    /// copies in progress have finished. May sleep.
    ///
    /// A fast-registration MR does not wait for an RCU grace period: its copies hold its `fr`
    /// lock, which the deactivation below takes, and the table keeps the region until lookups
    /// that may have found it are over ([`IndexTable::retire`]). Kernel ULPs deregister their
    /// MR pools in bursts (RTRS: 512 per path, NVMe-oF: one per queue entry), one grace period
    /// each (about 15 ms on a small guest) made a teardown take seconds, and `siw` frees them
    /// with `kfree_rcu()`.
    pub(crate) fn remove(&self, mr: &RsiwMr) {
        let index = stag::stag_index(mr.stag);
        let removed = if mr.mem.kind == Kind::FastReg {
            self.table.retire(index)
        } else {
            self.table.remove(index).map(|m| Arc::as_ptr(&m))
        };
        if removed.is_some_and(|p| !core::ptr::eq(p, Arc::as_ptr(&mr.mem))) {
            // Cannot happen: an index names one region until it is removed here.
            pr_err!("STag table corrupted at {:#x}\n", mr.stag);
        }
        mr.mem.valid.store(false, Release);
        match mr.mem.kind {
            Kind::User => {
                mr.mem.umem.revoke();
            }
            Kind::FastReg => {
                if let Some(f) = &mut *mr.mem.fr.lock() {
                    f.valid = false;
                    f.pages.deactivate();
                }
            }
            Kind::Dma => {}
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
        checked(mem, pd, stag, need, to, len)
    }

    /// [`MemTable::check`] for the next segment of a message whose previous segment was
    /// checked into `prev` (with the STag it names): for the same `stag`, the region `prev`
    /// references is checked again without a lookup (and without touching its reference
    /// count). Checked again means exactly as a lookup would: a region deregistered or
    /// invalidated since is refused ([`Fault::InvalidStag`]), and rights, PD and bounds are
    /// those of `[to, to + len)`. The one difference is an index that was deregistered and
    /// registered again with the same key in between: refused here (the old region is
    /// invalid), where a lookup would find the new one.
    pub(crate) fn check_again(
        &self,
        prev: Option<(u32, Placement)>,
        stag: u32,
        pd: PdId,
        need: Rights,
        to: u64,
        len: u64,
    ) -> Result<Placement, Fault> {
        match prev {
            Some((s, p)) if s == stag => checked(p.mem, pd, stag, need, to, len),
            _ => self.check(pd, stag, need, to, len),
        }
    }

    /// [`MemTable::check`] for a copy done within the RCU read-side critical section of `rcu`
    /// (one message's small payload): the region is borrowed, not referenced.
    pub(crate) fn check_in<'a>(
        &'a self,
        rcu: &'a rcu::Guard,
        pd: PdId,
        stag: u32,
        need: Rights,
        to: u64,
        len: u64,
    ) -> Result<Placement<ArcBorrow<'a, Mem>>, Fault> {
        let mem = self
            .table
            .get_in(rcu, stag::stag_index(stag))
            .ok_or(Fault::InvalidStag)?;
        checked(mem, pd, stag, need, to, len)
    }

    /// Invalidates `stag`: a Local Invalidate SQE or the sink of a Read with Local Invalidate
    /// (`remote == false`), or the Invalidate STag of a received Send with Invalidate
    /// (`remote == true`). Runs in any context (IRQ-safe lock); when it returns, no copy into
    /// the region is in progress and none will start.
    ///
    /// Rules (RFC 5040 section 3.5, spec-map RDMAP-09; rxe's and siw's checks):
    /// - the index must name a region and the key must be its current one, else
    ///   [`Fault::InvalidStag`]; a remote invalidation also needs the region to be valid (a
    ///   local one of an already invalid region succeeds, as in siw and rxe);
    /// - the region must belong to `pd` (the QP's PD, i.e. the stream), else [`Fault::Pd`];
    /// - only fast-registration regions can be invalidated: DMA and user MRs give
    ///   [`Fault::Rights`] (like rxe; there are no memory windows, so no region is bound to one).
    pub(crate) fn invalidate(&self, pd: PdId, stag: u32, remote: bool) -> Result<(), Fault> {
        let mem = self
            .table
            .get(stag::stag_index(stag))
            .ok_or(Fault::InvalidStag)?;
        if mem.kind == Kind::FastReg {
            let mut fr = mem.fr.lock();
            let f = Option::as_mut(&mut *fr).ok_or(Fault::InvalidStag)?;
            if f.key != stag::stag_key(stag) || (remote && !f.valid) {
                return Err(Fault::InvalidStag);
            }
            if mem.pd != pd {
                return Err(Fault::Pd);
            }
            f.valid = false;
            f.pages.deactivate();
            return Ok(());
        }
        let (v, _) = mem.view();
        if !v.valid || v.key != stag::stag_key(stag) {
            return Err(Fault::InvalidStag);
        }
        if v.pd != pd {
            return Err(Fault::Pd);
        }
        Err(Fault::Rights)
    }

    /// Executes a Register MR work request of a QP of PD `pd` (`siw_fastreg_mr()`), in SQ order.
    ///
    /// The region named by the index of `r.stag` must be a fast-registration MR of `pd` in the
    /// invalid state with a complete staged mapping (`map_mr_sg`); the registration gets the key
    /// of `r.stag`, the rights of `r.access` (remote write or atomic need local write) and I/O
    /// virtual address `r.iova`, for the length mapped. Fails with `EINVAL` (no such region,
    /// not fast registration, already valid, nothing mapped, address range wraps, bad access
    /// combination), `EACCES` (other PD) or `EOPNOTSUPP` (unsupported access flags); complete
    /// the SQE with `SIW_WC_LOC_QP_OP_ERR` then.
    pub(crate) fn reg_mr(&self, pd: PdId, r: &RegMr) -> Result {
        let mem = self.table.get(stag::stag_index(r.stag)).ok_or(EINVAL)?;
        if mem.kind != Kind::FastReg {
            return Err(EINVAL);
        }
        if mem.pd != pd {
            return Err(EACCES);
        }
        let rights = fast_reg_rights(r.access)?;
        let mut fr = mem.fr.lock();
        let f = Option::as_mut(&mut *fr).ok_or(EINVAL)?;
        if f.valid {
            return Err(EINVAL);
        }
        let len = f.pages.staged_len();
        // The last byte's address must be representable (`len` is not 0 if something is mapped).
        r.iova.checked_add(len.saturating_sub(1)).ok_or(EINVAL)?;
        f.gen = f.pages.activate()?;
        f.key = stag::stag_key(r.stag);
        f.rights = rights;
        f.pmem = false;
        f.base = r.iova;
        f.valid = true;
        Ok(())
    }

    /// The post-time check of a kernel work request's SGE (issue 4: post_send and post_recv
    /// validate every lkey): a non-empty SGE must name a region of `pd`; a DMA or user MR must
    /// be valid with a matching key, grant `need` and contain the SGE. A fast-registration MR
    /// only has to exist and belong to `pd`: an `IB_WR_REG_MR` earlier in the same SQ may make
    /// it valid (with this key) before the SGE is used. Fails with `EINVAL`. The data path
    /// checks every access again with [`MemTable::check`].
    pub(crate) fn check_lkey(&self, pd: PdId, sge: &Sge, need: Rights) -> Result {
        if sge.length == 0 {
            // Nothing is accessed (as for zero-length segments on the wire, DDP-12).
            return Ok(());
        }
        let mem = self.table.get(stag::stag_index(sge.lkey)).ok_or(EINVAL)?;
        if mem.pd != pd {
            return Err(EINVAL);
        }
        if mem.kind == Kind::FastReg {
            return Ok(());
        }
        let (v, _) = mem.view();
        check_region(
            &v,
            stag::stag_key(sge.lkey),
            pd,
            need,
            sge.laddr,
            u64::from(sge.length),
        )
        .map(|_| ())
        .map_err(|_| EINVAL)
    }

    /// The post-time check of the STag of a Local Invalidate: it must name a region of `pd`
    /// (`EINVAL`). Whether it can be invalidated is decided when the SQE executes.
    pub(crate) fn check_local_stag(&self, pd: PdId, stag: u32) -> Result {
        match self.table.get(stag::stag_index(stag)) {
            Some(mem) if mem.pd == pd => Ok(()),
            _ => Err(EINVAL),
        }
    }
}

/// A Register MR work request as carried by a `SIW_OP_REG_MR` SQE.
///
/// siw stores a pointer to the `struct ib_mr` in the SQE (`base_mr`); rsiw names the region by
/// the index of its new STag instead, which post_send checked to be the MR's own index:
/// `sqe.rkey` is the new STag, `sqe.raddr` the I/O virtual address, `sqe.sge[0].length` the
/// `IB_ACCESS_*` flags (`num_sge` is 0, so the SGEs are otherwise unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegMr {
    /// The new STag (the region's index and the new key).
    pub(crate) stag: u32,
    /// The access flags.
    pub(crate) access: AccessFlags,
    /// The I/O virtual address of the registration.
    pub(crate) iova: u64,
}

impl RegMr {
    /// Stores the request in an SQE.
    pub(crate) fn to_sqe(self, sqe: &mut Sqe) {
        sqe.rkey = self.stag;
        sqe.raddr = self.iova;
        sqe.sge[0].length = u32::from(self.access);
    }

    /// Reads the request from a `SIW_OP_REG_MR` SQE.
    pub(crate) fn from_sqe(sqe: &Sqe) -> Self {
        Self {
            stag: sqe.rkey,
            access: AccessFlags::from_raw(sqe.sge[0].length),
            iova: sqe.raddr,
        }
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
        let a = t.add_dma_nocopy(pd, Rights::LOCAL_WRITE)?;
        let b = t.add_dma_nocopy(pd, Rights::LOCAL_WRITE | Rights::REMOTE_READ)?;
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

    /// The next segment of a message checked against the previous one's region: the same
    /// answers as a lookup, rights, PD, bounds and validity included; another STag is looked
    /// up; a region deregistered in between is refused.
    #[test]
    fn check_again() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let a = t.add_dma_nocopy(pd, Rights::LOCAL_WRITE | Rights::REMOTE_WRITE)?;
        let b = t.add_dma_nocopy(pd, Rights::LOCAL_WRITE)?;
        let first = |s| {
            t.check(pd, s, Rights::REMOTE_WRITE, 0x1000, 8)
                .ok()
                .map(|p| (s, p))
        };
        let p = t
            .check_again(
                first(a.stag()),
                a.stag(),
                pd,
                Rights::REMOTE_WRITE,
                0x1008,
                8,
            )
            .map_err(|_| EINVAL)?;
        assert!(core::ptr::eq(p.mem(), a.mem()));
        assert_eq!(
            t.check_again(first(a.stag()), a.stag(), pd, Rights::REMOTE_READ, 0, 1)
                .err(),
            Some(Fault::Rights)
        );
        assert_eq!(
            t.check_again(
                first(a.stag()),
                a.stag(),
                PdId(0x80),
                Rights::LOCAL_WRITE,
                0,
                1
            )
            .err(),
            Some(Fault::Pd)
        );
        // Another STag, even with the previous region at hand, is looked up.
        let q = t
            .check_again(Some((a.stag(), p)), b.stag(), pd, Rights::LOCAL_WRITE, 0, 1)
            .map_err(|_| EINVAL)?;
        assert!(core::ptr::eq(q.mem(), b.mem()));
        assert_eq!(
            t.check_again(
                Some((b.stag(), q)),
                b.stag(),
                pd,
                Rights::REMOTE_WRITE,
                0,
                1
            )
            .err(),
            Some(Fault::Rights)
        );
        // Deregistered after the previous segment: refused, as by a lookup.
        let p = first(a.stag());
        assert!(p.is_some());
        t.remove(&a);
        assert_eq!(
            t.check_again(p, a.stag(), pd, Rights::REMOTE_WRITE, 0x1008, 8)
                .err(),
            Some(Fault::InvalidStag)
        );
        t.remove(&b);
        Ok(())
    }

    /// Stages a mapping of a `len`-byte buffer holding `i as u8` at byte `i`.
    fn map(mr: &RsiwMr, len: usize, page_size: u32) -> Result {
        let mut buf = KVec::with_capacity(len, GFP_KERNEL)?;
        for i in 0..len {
            buf.push(i as u8, GFP_KERNEL)?;
        }
        match &mut *mr.mem.fr.lock() {
            Some(f) => f.pages.map_owned(buf, page_size),
            None => Err(EINVAL),
        }
    }

    fn reg(t: &MemTable, pd: PdId, stag: u32, access: AccessFlags, iova: u64) -> Result {
        t.reg_mr(pd, &RegMr { stag, access, iova })
    }

    #[test]
    fn fast_reg_state_machine() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let rw = AccessFlag::LocalWrite | AccessFlag::RemoteWrite | AccessFlag::RemoteRead;
        let mr = t.add_fast_reg(pd, 4)?;
        let stag = mr.stag();
        assert_eq!(mr.mem().kind(), Kind::FastReg);
        // Invalid until registered.
        assert_eq!(
            t.check(pd, stag, Rights::LOCAL_READ, 0, 1).err(),
            Some(Fault::InvalidStag)
        );
        // Nothing mapped yet.
        assert_eq!(reg(&t, pd, stag, rw, 0x10000), Err(EINVAL));
        // 3000 bytes in 1 KiB pages (plus the offset of the buffer in its first page).
        map(&mr, 3000, 1024)?;
        // Wrong PD, remote write without local write, unsupported flag, another index.
        assert_eq!(reg(&t, PdId(0x80), stag, rw, 0x10000), Err(EACCES));
        assert_eq!(
            reg(&t, pd, stag, AccessFlag::RemoteWrite.into(), 0x10000),
            Err(EINVAL)
        );
        assert_eq!(
            reg(
                &t,
                pd,
                stag,
                AccessFlag::LocalWrite | AccessFlag::MwBind,
                0x10000
            ),
            Err(EOPNOTSUPP)
        );
        assert_eq!(reg(&t, pd, stag ^ 0x100, rw, 0x10000), Err(EINVAL));
        // A range that wraps.
        assert_eq!(reg(&t, pd, stag, rw, u64::MAX - 10), Err(EINVAL));
        // Register with a new key.
        let new = (stag & !0xff) | u32::from(stag::stag_key(stag).wrapping_add(1));
        reg(&t, pd, new, rw, 0x10000)?;
        assert_eq!(
            t.check(pd, stag, Rights::LOCAL_READ, 0x10000, 1).err(),
            Some(Fault::InvalidStag)
        );
        // Already valid.
        assert_eq!(reg(&t, pd, new, rw, 0x10000), Err(EINVAL));
        // Bounds: exactly the mapped 3000 bytes from the new I/O virtual address.
        assert_eq!(
            t.check(pd, new, Rights::REMOTE_WRITE, 0x10000 + 2999, 2)
                .err(),
            Some(Fault::Bounds)
        );
        assert_eq!(
            t.check(pd, new, Rights::REMOTE_ATOMIC, 0x10000, 8).err(),
            Some(Fault::Rights)
        );
        let all = t
            .check(pd, new, Rights::REMOTE_READ, 0x10000, 3000)
            .map_err(|_| EINVAL)?;
        // The page list translates every byte (across 1 KiB pages) to the buffer.
        let mut back = KVec::from_elem(0u8, 3000, GFP_KERNEL)?;
        all.read(0, &mut back)?;
        assert!(back.iter().enumerate().all(|(i, b)| *b == i as u8));
        let p = t
            .check(pd, new, Rights::REMOTE_WRITE, 0x10000 + 1000, 100)
            .map_err(|_| EINVAL)?;
        p.write(0, &[0xaa; 100])?;
        assert_eq!(p.write(1, &[0xaa; 100]), Err(EINVAL));
        all.read(0, &mut back)?;
        assert!(back[999] == 231 && back[1000] == 0xaa && back[1099] == 0xaa);
        assert_eq!(back[1100], 1100u32 as u8);
        // Invalidation rules.
        assert_eq!(t.invalidate(pd, stag, true), Err(Fault::InvalidStag));
        assert_eq!(t.invalidate(PdId(0x80), new, true), Err(Fault::Pd));
        assert_eq!(t.invalidate(pd, new, true), Ok(()));
        assert_eq!(
            t.check(pd, new, Rights::LOCAL_READ, 0x10000, 1).err(),
            Some(Fault::InvalidStag)
        );
        // Copies checked before the invalidation fail.
        assert_eq!(p.write(0, &[1; 4]), Err(ENOENT));
        // Locally invalidating an invalid region succeeds (verbs); remotely it does not.
        assert_eq!(t.invalidate(pd, new, false), Ok(()));
        assert_eq!(t.invalidate(pd, new, true), Err(Fault::InvalidStag));
        // The mapping stays staged: register again, with the old key; stale copies still fail.
        reg(&t, pd, stag, AccessFlag::RemoteRead.into(), 0)?;
        assert!(t.check(pd, stag, Rights::REMOTE_READ, 0, 3000).is_ok());
        assert_eq!(p.write(0, &[1; 4]), Err(ENOENT));
        assert_eq!(all.read(0, &mut back), Err(ENOENT));
        t.remove(&mr);
        assert_eq!(
            t.check(pd, stag, Rights::REMOTE_READ, 0, 1).err(),
            Some(Fault::InvalidStag)
        );
        Ok(())
    }

    /// CMT-03: kernel memory that is not persistent memory cannot be registered flushable to
    /// persistence; the refusal changes nothing, and the same mapping registers without it.
    /// Nothing but persistent memory is ever written back.
    #[test]
    fn fast_reg_flush_persistent_refused() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let mr = t.add_fast_reg(pd, 4)?;
        map(&mr, 3000, 1024)?;
        let rw = AccessFlag::LocalWrite | AccessFlag::RemoteWrite | AccessFlag::FlushGlobal;
        assert_eq!(
            reg(&t, pd, mr.stag(), rw | AccessFlag::FlushPersistent, 0x10000),
            Err(EINVAL)
        );
        assert_eq!(
            t.check(pd, mr.stag(), Rights::LOCAL_READ, 0x10000, 1).err(),
            Some(Fault::InvalidStag)
        );
        reg(&t, pd, mr.stag(), rw, 0x10000)?;
        assert_eq!(
            t.check(pd, mr.stag(), Rights::FLUSH_PERSISTENT, 0x10000, 8)
                .err(),
            Some(Fault::Rights)
        );
        let p = t
            .check(pd, mr.stag(), Rights::FLUSH_GLOBAL, 0x10000, 100)
            .map_err(|_| EINVAL)?;
        assert_eq!(p.write_back(false), Err(EOPNOTSUPP));
        assert_eq!(p.write_back(true), Err(EOPNOTSUPP));
        // Nor in parts, nor asked how much there is (the deferral's question).
        assert_eq!(p.write_back_part(true, 0, 0), Err(EOPNOTSUPP));
        assert_eq!(p.write_back_part(false, 64, 64), Err(EOPNOTSUPP));
        // A DMA MR is never persistent memory.
        assert_eq!(
            t.add_dma_nocopy(pd, Rights::LOCAL_WRITE | Rights::FLUSH_PERSISTENT)
                .err(),
            Some(EINVAL)
        );
        t.remove(&mr);
        Ok(())
    }

    #[test]
    fn fast_reg_map_bounds() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let mr = t.add_fast_reg(pd, 2)?;
        assert_eq!(map(&mr, 100, 1000), Err(EINVAL));
        // Three pages' worth into a list of two: only what the two pages hold is mapped.
        map(&mr, 3 * 512, 512)?;
        let staged = match &*mr.mem.fr.lock() {
            Some(f) => f.pages.staged_len(),
            None => 0,
        };
        assert!(staged > 0 && staged <= 1024);
        reg(&t, pd, mr.stag(), AccessFlag::LocalWrite.into(), 0x2000)?;
        assert!(t
            .check(pd, mr.stag(), Rights::LOCAL_WRITE, 0x2000, staged)
            .is_ok());
        assert_eq!(
            t.check(pd, mr.stag(), Rights::LOCAL_WRITE, 0x2000, staged + 1)
                .err(),
            Some(Fault::Bounds)
        );
        t.remove(&mr);
        Ok(())
    }

    #[test]
    fn post_time_lkeys() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let dma = t.add_dma_nocopy(pd, Rights::LOCAL_WRITE)?;
        let ro = t.add_dma_nocopy(pd, Rights::LOCAL_READ)?;
        let fr = t.add_fast_reg(pd, 1)?;
        let sge = |lkey: u32, length: u32| Sge {
            laddr: 0x1000,
            length,
            lkey,
        };
        t.check_lkey(pd, &sge(dma.stag(), 8), Rights::LOCAL_WRITE)?;
        t.check_lkey(pd, &sge(ro.stag(), 8), Rights::LOCAL_READ)?;
        assert_eq!(
            t.check_lkey(pd, &sge(ro.stag(), 8), Rights::LOCAL_WRITE),
            Err(EINVAL)
        );
        assert_eq!(
            t.check_lkey(PdId(0x80), &sge(dma.stag(), 8), Rights::LOCAL_READ),
            Err(EINVAL)
        );
        assert_eq!(
            t.check_lkey(pd, &sge(dma.stag() ^ 1, 8), Rights::LOCAL_READ),
            Err(EINVAL)
        );
        assert_eq!(
            t.check_lkey(pd, &sge(dma.stag() ^ 0x100, 8), Rights::LOCAL_READ),
            Err(EINVAL)
        );
        // Zero-length SGEs access nothing.
        t.check_lkey(pd, &sge(0xdead_beef, 0), Rights::LOCAL_WRITE)?;
        // A fast-registration MR may still be invalid, with any key, but must be in the PD.
        t.check_lkey(pd, &sge(fr.stag() ^ 0x5a, 8), Rights::LOCAL_WRITE)?;
        assert_eq!(
            t.check_lkey(PdId(0x80), &sge(fr.stag(), 8), Rights::LOCAL_READ),
            Err(EINVAL)
        );
        t.check_local_stag(pd, fr.stag())?;
        assert_eq!(t.check_local_stag(PdId(0x80), fr.stag()), Err(EINVAL));
        // DMA MRs cannot be invalidated.
        assert_eq!(t.invalidate(pd, dma.stag(), false), Err(Fault::Rights));
        // The SQE encoding of Register MR round-trips.
        let r = RegMr {
            stag: fr.stag(),
            access: AccessFlag::LocalWrite | AccessFlag::RemoteRead,
            iova: 0xffff_8880_0000_1234,
        };
        let mut sqe = Sqe::default();
        r.to_sqe(&mut sqe);
        assert_eq!(RegMr::from_sqe(&sqe), r);
        assert_eq!(sqe.num_sge, 0);
        t.remove(&dma);
        t.remove(&ro);
        t.remove(&fr);
        Ok(())
    }

    #[test]
    fn dma_mr_placement() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        // The capability of a KUnit test owns the memory it reaches.
        let kva = KernelVa::for_kunit(KVec::from_elem(0u8, 6000, GFP_KERNEL)?).ok_or(EINVAL)?;
        let (addr, _) = kva.kunit_buffer().ok_or(EINVAL)?;
        let dma = t.add_dma(pd, Rights::LOCAL_WRITE, kva)?;
        // A local SGE of the DMA MR: its address is a kernel virtual address.
        let p = t
            .check(pd, dma.stag(), Rights::LOCAL_WRITE, addr + 10, 5000)
            .map_err(|_| EINVAL)?;
        p.write(100, &[0x3c; 4500])?;
        let mut back = KVec::from_elem(0u8, 4502, GFP_KERNEL)?;
        p.read(99, &mut back)?;
        assert!(back[0] == 0 && back[4501] == 0);
        assert!(back[1..4501].iter().all(|b| *b == 0x3c));
        assert_eq!(p.write(4999, &[0; 2]), Err(EINVAL));
        // Without IB_PD_UNSAFE_GLOBAL_RKEY no remote access reaches it.
        for need in [Rights::REMOTE_WRITE, Rights::REMOTE_READ] {
            assert_eq!(
                t.check(pd, dma.stag(), need, addr, 8).err(),
                Some(Fault::Rights)
            );
        }
        // An address that is not kernel memory passes the region check (the DMA MR covers
        // everything) but no copy reaches it.
        let bad = t
            .check(pd, dma.stag(), Rights::LOCAL_WRITE, 0x1000, 64)
            .map_err(|_| EINVAL)?;
        assert_eq!(bad.write(0, &[1; 64]), Err(EFAULT));
        assert_eq!(bad.read(0, &mut back[..64]), Err(EFAULT));
        // A range that wraps is refused by the check itself.
        assert_eq!(
            t.check(pd, dma.stag(), Rights::LOCAL_WRITE, u64::MAX - 4, 64)
                .err(),
            Some(Fault::ToWrap)
        );
        // With the unsafe global rkey: remote reads and writes.
        let kva = KernelVa::for_kunit(KVec::from_elem(0u8, 64, GFP_KERNEL)?).ok_or(EINVAL)?;
        let (gaddr, _) = kva.kunit_buffer().ok_or(EINVAL)?;
        let all = Rights::LOCAL_WRITE | Rights::REMOTE_READ | Rights::REMOTE_WRITE;
        let g = t.add_dma(pd, all, kva)?;
        t.check(pd, g.stag(), Rights::REMOTE_WRITE, gaddr, 8)
            .map_err(|_| EINVAL)?
            .write(0, &[9; 8])?;
        let mut nine = [0u8; 8];
        t.check(pd, g.stag(), Rights::REMOTE_READ, gaddr, 8)
            .map_err(|_| EINVAL)?
            .read(0, &mut nine)?;
        assert_eq!(nine, [9; 8]);
        // A DMA MR without the capability cannot copy.
        let n = t.add_dma_nocopy(pd, Rights::LOCAL_WRITE)?;
        let pn = t
            .check(pd, n.stag(), Rights::LOCAL_WRITE, addr, 8)
            .map_err(|_| EINVAL)?;
        assert_eq!(pn.write(0, &[1; 8]), Err(EOPNOTSUPP));
        t.remove(&dma);
        t.remove(&g);
        t.remove(&n);
        Ok(())
    }

    /// Deregistering a burst of fast-registration MRs (an RTRS path's 512, the MR pool of an
    /// NVMe-oF queue) waits for one RCU grace period per batch of them, not one per MR. Counted,
    /// not timed: with a wait per MR, 256 removals wait 256 times.
    #[test]
    fn fast_reg_burst_waits_per_batch() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let mut mrs = KVec::new();
        for _ in 0..256 {
            mrs.push(t.add_fast_reg(pd, 1)?, GFP_KERNEL)?;
        }
        let before = t.table.grace_period_waits();
        for mr in mrs.iter() {
            t.remove(mr);
        }
        // At most one wait per 64 retired entries (`index_table::RETIRED_MAX`).
        assert!(t.table.grace_period_waits() - before <= 256 / 64);
        // Removed at once: no lookup finds them any more.
        for mr in mrs.iter() {
            assert_eq!(t.invalidate(pd, mr.stag(), false), Err(Fault::InvalidStag));
        }
        Ok(())
    }

    #[test]
    fn cyclic_indices() -> Result {
        let t = MemTable::new()?;
        let pd = PdId(0x40);
        let a = t.add_dma_nocopy(pd, Rights::LOCAL_WRITE)?;
        let ia = stag::stag_index(a.stag());
        t.remove(&a);
        // The next registration does not reuse the index just freed.
        let b = t.add_dma_nocopy(pd, Rights::LOCAL_WRITE)?;
        assert_ne!(stag::stag_index(b.stag()), ia);
        t.remove(&b);
        Ok(())
    }
}
