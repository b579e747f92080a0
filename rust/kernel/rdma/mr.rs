// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`): their operations, access flags, keys and memory.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h) and
//! [`include/linux/xarray.h`](srctree/include/linux/xarray.h).
//!
//! Memory regions are allocated by the provider in C (`get_dma_mr`/`reg_user_mr` return a
//! `struct ib_mr *`). The abstraction allocates them in the layout ib_core allocates the other
//! objects in, so that [`Mr<T>`] is an [`Object`] too, and frees them after
//! [`Operations::dereg`]. Around them, this module provides what a software provider needs:
//!
//! - [`AccessFlags`]: the `IB_ACCESS_*` registration flags;
//! - [`IndexTable`]: a table from a 24-bit (or any `u32`) index to a reference-counted entry,
//!   built on an allocating [`XArray`](crate::xarray::XArray) with cyclic allocation and
//!   lock-free lookups, so that the data path can look up an STag in O(1) from any context;
//! - [`PageList`]: the page list of a fast-registration MR, filled by `ib_sg_to_pages()` through
//!   [`Operations::map_step`] and used to copy data into and out of the registered memory;
//! - [`KernelVa`]: the copies to and from kernel virtual addresses of a kernel PD's DMA MR;
//! - [`SendWr::reg_mr`]: the MR of an `IB_WR_REG_MR` work request.
//!
//! # Fast registration
//!
//! ib_core's `ib_map_mr_sg()` calls the provider's `map_mr_sg` op with a DMA-mapped scatterlist.
//! The abstraction implements that op: it runs `ib_sg_to_pages()`, whose `set_page` callback is
//! a trampoline, and hands each step to [`Operations::map_step`] as an opaque [`MapStep`], which
//! the driver applies to the MR's [`PageList`] (under whatever lock it keeps the list in):
//! a begin step with the page size, one step per page, and an end step with the mapped I/O
//! virtual address and length. The list keeps that *staged* mapping until the driver activates
//! it when it executes the `IB_WR_REG_MR` work request ([`PageList::activate`]); from then on
//! [`PageList::write`] and [`PageList::read`] copy to and from the registered memory, until
//! [`PageList::deactivate`] (invalidation).
//!
//! Software providers use `CONFIG_INFINIBAND_VIRT_DMA`: the DMA addresses of their scatterlists
//! are kernel virtual addresses. The op checks `ib_uses_virt_dma()` and fails with `EOPNOTSUPP`
//! otherwise. The page addresses of a [`PageList`] only come from `ib_sg_to_pages()`, and only
//! the bytes of the mapped range are ever accessed; the kernel consumer keeps that memory mapped
//! while the region is registered (the verbs contract, as for every provider).

use super::{
    device::{
        Device,
        Driver, //
    },
    object::{
        udata_opt,
        MrKind,
        Object, //
    },
    pd::Pd,
    udata::Udata,
    vtable::VTable,
    wr::SendWr,
};
use crate::{
    bindings,
    impl_flags,
    prelude::*,
    types::Opaque, //
};
use core::mem::MaybeUninit;

mod index_table;
mod kva;
mod page_list;

pub use index_table::IndexTable;
pub use kva::KernelVa;
pub use page_list::{
    MapStep,
    PageList, //
};

use page_list::Step;

/// Returns `len` bytes of a pattern that depends on `seed`, for the KUnit tests of the memory
/// a region reaches: byte `i` is `7 * i + seed`, modulo 256.
#[cfg(CONFIG_KUNIT = "y")]
fn test_pattern(len: usize, seed: u8) -> Result<KVec<u8>> {
    let mut v = KVec::with_capacity(len, GFP_KERNEL)?;
    for i in 0..len {
        v.push((i as u8).wrapping_mul(7).wrapping_add(seed), GFP_KERNEL)?;
    }
    Ok(v)
}

/// Applies `op` atomically to the 64-bit word at `ptr` and returns the word's value before
/// (RFC 7306 atomics): a compare-and-exchange loop with full ordering, atomic with respect to
/// the CPU's atomic operations on the word and to every other caller. Does not sleep.
///
/// # Safety
///
/// `ptr` is 8-byte aligned and valid for reads and writes of 8 bytes for the duration of the
/// call, and is not memory Rust holds a reference to. Others may access the word concurrently
/// only with atomic operations, or from user space or a device, which the kernel cannot stop.
pub(crate) unsafe fn atomic_rmw_u64(ptr: *mut u64, mut op: impl FnMut(u64) -> u64) -> u64 {
    use crate::sync::atomic::{
        Atomic,
        Full,
        Relaxed, //
    };
    // SAFETY: Valid and aligned for the call (safety requirements); every access this kernel
    // makes to it here is atomic.
    let word = unsafe { Atomic::<u64>::from_ptr(ptr) };
    let mut old = word.load(Relaxed);
    loop {
        match word.cmpxchg(old, op(old), Full) {
            Ok(v) => return v,
            Err(cur) => old = cur,
        }
    }
}

/// Stores the 8 bytes `image` into the 64-bit word at `ptr` (RDMA Atomic Write): one aligned
/// 64-bit store with release ordering, so that no access the CPU made before it (the placement
/// of earlier RDMA Writes) is seen after it, and no reader sees part of it. The bytes land in
/// memory as given (an 8-byte memory image, spec-map D-06). Does not sleep.
///
/// # Safety
///
/// As [`atomic_rmw_u64`]: `ptr` is 8-byte aligned and valid for writes of 8 bytes for the
/// duration of the call, and is not memory Rust holds a reference to; others access the word
/// concurrently only atomically, or from user space or a device.
pub(crate) unsafe fn store_release_u64(ptr: *mut u64, image: [u8; 8]) {
    use crate::sync::atomic::{
        Atomic,
        Release, //
    };
    // SAFETY: Valid and aligned for the call (safety requirements); every access this kernel
    // makes to it here is atomic.
    let word = unsafe { Atomic::<u64>::from_ptr(ptr) };
    word.store(u64::from_ne_bytes(image), Release);
}

/// A `struct ib_mr` with the driver's [`Driver::Mr`] data.
pub type Mr<T> = Object<T, MrKind>;

/// The operations of a memory region; implemented by the driver's per-MR data.
#[vtable]
pub trait Operations: Sized + Send + Sync {
    /// The driver.
    type Driver: Driver;

    /// Creates the data of the DMA memory region of a kernel PD, covering all of memory
    /// (`pd->local_dma_lkey`, and `pd->unsafe_global_rkey` if ib_core asked for remote access).
    ///
    /// `kva` is the capability to copy to and from the kernel virtual addresses the consumer
    /// uses with this region; ib_core only creates DMA MRs for kernel PDs (the op fails with
    /// `EINVAL` for any other PD without calling the driver).
    fn get_dma(
        pd: &Pd<Self::Driver>,
        access: AccessFlags,
        kva: KernelVa,
    ) -> impl PinInit<Self, Error>;

    /// Creates the data of a memory region registering user memory `[start, start + length)`
    /// at I/O virtual address `virt_addr`.
    fn reg_user(
        pd: &Pd<Self::Driver>,
        start: u64,
        length: u64,
        virt_addr: u64,
        access: AccessFlags,
        udata: &Udata,
    ) -> impl PinInit<Self, Error>;

    /// Returns the local and remote keys (`lkey`, `rkey`) of a memory region just created;
    /// the abstraction stores them in the `struct ib_mr`.
    fn keys(&self) -> (u32, u32);

    /// Called before the data of a memory region is dropped.
    fn dereg(_mr: &Mr<Self::Driver>, _udata: Option<&Udata>) {}

    /// Creates the data of a memory region for fast registration (`alloc_mr`) of type
    /// `mr_type` with room for `max_num_sg` pages. The driver that implements it implements
    /// [`Operations::map_step`] too (`map_mr_sg`).
    fn alloc(
        _pd: &Pd<Self::Driver>,
        _mr_type: MrType,
        _max_num_sg: u32,
    ) -> impl PinInit<Self, Error> {
        // Never called: `HAS_ALLOC` is false unless the driver overrides this method.
        Err::<Self, Error>(EOPNOTSUPP)
    }

    /// Applies one step of `map_mr_sg` to the [`PageList`] of a memory region created by
    /// [`Operations::alloc`] (see the [module documentation](self)), with
    /// [`PageList::apply`]. Errors stop the mapping. Process context; must not sleep between
    /// the steps of one mapping.
    fn map_step(_mr: &Mr<Self::Driver>, _step: MapStep) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

/// Memory region types (`enum ib_mr_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum MrType {
    /// Fast-registration MR (`IB_MR_TYPE_MEM_REG`).
    MemReg = bindings::ib_mr_type_IB_MR_TYPE_MEM_REG,
    /// Fast-registration MR without gap restrictions (`IB_MR_TYPE_SG_GAPS`).
    SgGaps = bindings::ib_mr_type_IB_MR_TYPE_SG_GAPS,
    /// Device memory MR (`IB_MR_TYPE_DM`).
    Dm = bindings::ib_mr_type_IB_MR_TYPE_DM,
    /// User MR (`IB_MR_TYPE_USER`).
    User = bindings::ib_mr_type_IB_MR_TYPE_USER,
    /// DMA MR (`IB_MR_TYPE_DMA`).
    Dma = bindings::ib_mr_type_IB_MR_TYPE_DMA,
    /// Integrity MR (`IB_MR_TYPE_INTEGRITY`).
    Integrity = bindings::ib_mr_type_IB_MR_TYPE_INTEGRITY,
}

impl TryFrom<u32> for MrType {
    type Error = Error;

    fn try_from(v: u32) -> Result<Self> {
        Ok(match v {
            bindings::ib_mr_type_IB_MR_TYPE_MEM_REG => Self::MemReg,
            bindings::ib_mr_type_IB_MR_TYPE_SG_GAPS => Self::SgGaps,
            bindings::ib_mr_type_IB_MR_TYPE_DM => Self::Dm,
            bindings::ib_mr_type_IB_MR_TYPE_USER => Self::User,
            bindings::ib_mr_type_IB_MR_TYPE_DMA => Self::Dma,
            bindings::ib_mr_type_IB_MR_TYPE_INTEGRITY => Self::Integrity,
            _ => return Err(EINVAL),
        })
    }
}

impl_flags!(
    /// Memory access flags (`enum ib_access_flags`) of a registration or a QP, possibly with
    /// bits no [`AccessFlag`] names.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct AccessFlags(u32);

    /// A memory access flag.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum AccessFlag {
        /// Local write (`IB_ACCESS_LOCAL_WRITE`). Local read is always allowed.
        LocalWrite = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
        /// Remote write (`IB_ACCESS_REMOTE_WRITE`).
        RemoteWrite = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
        /// Remote read (`IB_ACCESS_REMOTE_READ`).
        RemoteRead = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ,
        /// Remote atomic (`IB_ACCESS_REMOTE_ATOMIC`).
        RemoteAtomic = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
        /// Memory window binding (`IB_ACCESS_MW_BIND`).
        MwBind = bindings::ib_access_flags_IB_ACCESS_MW_BIND,
        /// Zero-based virtual addresses (`IB_ZERO_BASED`).
        ZeroBased = bindings::ib_access_flags_IB_ZERO_BASED,
        /// On-demand paging (`IB_ACCESS_ON_DEMAND`).
        OnDemand = bindings::ib_access_flags_IB_ACCESS_ON_DEMAND,
        /// Huge pages hint (`IB_ACCESS_HUGETLB`).
        HugeTlb = bindings::ib_access_flags_IB_ACCESS_HUGETLB,
        /// Flush to global visibility (`IB_ACCESS_FLUSH_GLOBAL`).
        FlushGlobal = bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL,
        /// Flush to persistence (`IB_ACCESS_FLUSH_PERSISTENT`).
        FlushPersistent = bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT,
        /// Relaxed ordering (`IB_ACCESS_RELAXED_ORDERING`, optional: may be ignored).
        RelaxedOrdering = bindings::ib_access_flags_IB_ACCESS_RELAXED_ORDERING,
    }
);

impl AccessFlags {
    /// The range of optional flags a provider may ignore (`IB_ACCESS_OPTIONAL`), named or not.
    pub const OPTIONAL: Self = Self(bindings::ib_access_flags_IB_ACCESS_OPTIONAL);

    /// Returns the flags with the raw bits `bits` (for example flags a driver stored).
    pub const fn from_raw(bits: u32) -> Self {
        Self(bits)
    }
}

/// The `IB_WR_REG_MR` parameters of a send work request, with the MR resolved.
pub struct RegMr<'a, T: Driver> {
    /// The MR to register.
    pub mr: &'a Mr<T>,
    /// The new key (`lkey` and `rkey`) of the MR; only its low 8 bits may differ from the MR's.
    pub key: u32,
    /// Access flags.
    pub access: AccessFlags,
    /// The I/O virtual address of the registration (`ib_mr.iova`, set by `ib_map_mr_sg()` and
    /// possibly changed by the consumer, e.g. to 0 for zero-based registrations).
    pub iova: u64,
}

impl SendWr {
    /// Returns the parameters of an `IB_WR_REG_MR` work request if its MR belongs to `dev`;
    /// `None` for other opcodes or a foreign MR.
    pub fn reg_mr<'a, T: Driver>(&'a self, dev: &Device<T>) -> Option<RegMr<'a, T>> {
        let r = self.reg()?;
        if r.mr.is_null() {
            return None;
        }
        // SAFETY: The consumer's contract is that the MR of a posted `IB_WR_REG_MR` is live for
        // the duration of the post (the lifetime of `self`).
        let (device, iova) = unsafe { ((*r.mr).device, (*r.mr).iova) };
        if device != dev.as_raw() {
            return None;
        }
        // SAFETY: Every MR of a `Device<T>` is created by one of its MR ops, which all allocate
        // an `Mr<T>` (`Mr::new_raw`); it is live for `'a` (see above).
        let mr = unsafe { Mr::<T>::from_raw(r.mr) };
        Some(RegMr {
            mr,
            key: r.key,
            access: r.access,
            iova,
        })
    }
}

impl<T: Driver> Mr<T> {
    /// Allocates a zeroed `struct ib_mr` followed by the driver data initialised with `init`,
    /// sets its keys from [`Operations::keys`], and returns a pointer to the `ib_mr` for ib_core
    /// (which fills in the other common fields).
    ///
    /// The object must be freed with [`Self::free_raw`].
    fn new_raw(init: impl PinInit<T::Mr, Error>) -> Result<*mut bindings::ib_mr> {
        let b = KBox::<Self>::new_uninit(GFP_KERNEL)?;
        let this = KBox::into_raw(b).cast::<Self>();
        // SAFETY: `this` is a valid, exclusively owned allocation for a `Self`, whose C struct
        // is at offset 0 (`Object` invariant).
        unsafe {
            this.cast::<Opaque<bindings::ib_mr>>()
                .write(Opaque::zeroed())
        };
        // SAFETY: The driver part is uninitialised memory inside the allocation, which does not
        // move until it is freed.
        let data = unsafe { Self::data_ptr(this.cast()) };
        // SAFETY: As above.
        if let Err(e) = unsafe { pin_init::raw_try_init(data, init) } {
            // SAFETY: `this` came from `KBox::into_raw` of a `KBox<MaybeUninit<Self>>`; nothing
            // in it needs dropping.
            drop(unsafe { KBox::from_raw(this.cast::<MaybeUninit<Self>>()) });
            return Err(e);
        }
        // SAFETY: `data` was initialised above; nobody else has access to `this` yet.
        let (lkey, rkey) = unsafe { &*data }.keys();
        let raw = this.cast::<bindings::ib_mr>();
        // SAFETY: `raw` is a zeroed `ib_mr`, exclusively owned.
        unsafe {
            (*raw).lkey = lkey;
            (*raw).rkey = rkey;
        }
        Ok(raw)
    }

    /// Drops the driver data of an MR and frees it.
    ///
    /// # Safety
    ///
    /// `mr` must have been returned by [`Self::new_raw`] and must not be used afterwards.
    unsafe fn free_raw(mr: *mut bindings::ib_mr) {
        // SAFETY: Per the safety requirements the data is initialised and not used again.
        unsafe { Self::drop_data(mr) };
        // SAFETY: `mr` came from `KBox::into_raw` of a `KBox<MaybeUninit<Self>>`.
        drop(unsafe { KBox::from_raw(mr.cast::<MaybeUninit<Self>>()) });
    }
}

/// Converts the result of an MR creation into what the op returns: the MR or an error pointer.
fn mr_or_err(mr: Result<*mut bindings::ib_mr>) -> *mut bindings::ib_mr {
    match mr {
        Ok(mr) => mr,
        Err(e) => e.to_ptr(),
    }
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `pd` is a live PD created by `alloc_pd_callback`.
    pub(super) unsafe extern "C" fn get_dma_mr_callback(
        pd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: `pd` is live and being passed to `get_dma_mr`.
        let Some(kva) = (unsafe { KernelVa::for_dma_mr(pd) }) else {
            return EINVAL.to_ptr();
        };
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Pd::<T>::from_raw(pd) };
        let access = AccessFlags(access as u32);
        mr_or_err(Mr::<T>::new_raw(<T::Mr as Operations>::get_dma(
            obj, access, kva,
        )))
    }

    /// # Safety
    ///
    /// `pd` is a live PD created by `alloc_pd_callback`; `dmah` is NULL or valid; `udata` is
    /// valid.
    pub(super) unsafe extern "C" fn reg_user_mr_callback(
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
        let access = AccessFlags(access as u32);
        let init = <T::Mr as Operations>::reg_user(obj, start, length, virt_addr, access, udata);
        mr_or_err(Mr::<T>::new_raw(init))
    }

    /// # Safety
    ///
    /// `mr` was returned by `get_dma_mr_callback`, `reg_user_mr_callback` or
    /// `alloc_mr_callback` and is not used by ib_core after this returns 0; `udata` is NULL or
    /// valid.
    pub(super) unsafe extern "C" fn dereg_mr_callback(
        mr: *mut bindings::ib_mr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (obj, udata) = unsafe { (Mr::<T>::from_raw(mr), udata_opt(udata)) };
        <T::Mr as Operations>::dereg(obj, udata);
        // SAFETY: Per the safety requirements `mr` came from `Mr::new_raw` and is never used
        // again.
        unsafe { Mr::<T>::free_raw(mr) };
        0
    }

    /// # Safety
    ///
    /// `pd` is a live PD created by `alloc_pd_callback`.
    pub(super) unsafe extern "C" fn alloc_mr_callback(
        pd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        let Ok(mr_type) = MrType::try_from(mr_type) else {
            return EINVAL.to_ptr();
        };
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Pd::<T>::from_raw(pd) };
        mr_or_err(Mr::<T>::new_raw(<T::Mr as Operations>::alloc(
            obj, mr_type, max_num_sg,
        )))
    }

    /// The `set_page` callback of `ib_sg_to_pages()`.
    ///
    /// # Safety
    ///
    /// `mr` is a live MR of a `Device<T>`, being mapped by `map_mr_sg_callback`.
    unsafe extern "C" fn set_page_callback(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Mr::<T>::from_raw(mr) };
        match <T::Mr as Operations>::map_step(obj, MapStep(Step::Page(addr))) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// The `map_mr_sg` op: maps the largest prefix of a DMA-mapped scatterlist with
    /// `ib_sg_to_pages()`, handing each step to [`Operations::map_step`]. Returns the number of
    /// elements mapped, as `ib_sg_to_pages()`.
    ///
    /// # Safety
    ///
    /// `mr` is a live MR of a `Device<T>`; `sg` holds `sg_nents` elements DMA-mapped for the
    /// device; `sg_offset` is NULL or valid.
    pub(super) unsafe extern "C" fn map_mr_sg_callback(
        mr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let obj = unsafe { Mr::<T>::from_raw(mr) };
        // SAFETY: `mr` is live; ib_core set `page_size` and `device`.
        let (page_size, dev) = unsafe { ((*mr).page_size, (*mr).device) };
        // SAFETY: `dev` is a live device.
        if !unsafe { bindings::ib_uses_virt_dma(dev) } {
            // Page addresses would be bus addresses, which `PageList` cannot copy to.
            return EOPNOTSUPP.to_errno();
        }
        if let Err(e) = <T::Mr as Operations>::map_step(obj, MapStep(Step::Begin(page_size))) {
            return e.to_errno();
        }
        // SAFETY: Per the safety requirements; the callback matches `T`, the driver of `mr`.
        let n = unsafe {
            bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(Self::set_page_callback))
        };
        // SAFETY: `ib_sg_to_pages()` set `iova` and `length`; `mr` is live.
        let (iova, length) = unsafe { ((*mr).iova, (*mr).length) };
        // Only a complete mapping can be registered: consumers treat a partial one as an error,
        // and `ib_sg_to_pages()` leaves no usable length after a failed `set_page`.
        let length = if n > 0 && n == sg_nents { length } else { 0 };
        let step = MapStep(Step::End { iova, length });
        if let Err(e) = <T::Mr as Operations>::map_step(obj, step) {
            return e.to_errno();
        }
        n
    }
}
