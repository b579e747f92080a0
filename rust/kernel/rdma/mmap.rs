// SPDX-License-Identifier: GPL-2.0

//! Queue memory shared with user space and its mmap entries (`struct rdma_user_mmap_entry`).
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h) and
//! [`include/linux/vmalloc.h`](srctree/include/linux/vmalloc.h).
//!
//! Soft RDMA providers such as `siw` let user space post work requests and reap completions
//! through rings in memory that both the kernel and the user process map. Such memory is
//! hostile: the user may write any byte at any time, concurrently with the kernel. This module
//! gives drivers a safe interface to it:
//!
//! - [`SharedBuf`] is zeroed, page-aligned memory from `vmalloc()`. It is only accessed
//!   through copies made with atomic (`READ_ONCE`/`WRITE_ONCE` like) loads and stores; no Rust
//!   reference to its contents is ever formed. [`SharedBuf::read`] copies a whole element into
//!   a kernel-owned value, which the driver then validates: the value cannot change under it.
//! - [`RingBuf`] is a [`SharedBuf`] that is either kernel-only or published to a user context
//!   through an mmap entry ([`RingBuf::new_user`]); [`RingBuf::mmap_key`] is the offset user
//!   space passes to `mmap()`. Memory published to user space is charged to the memory cgroup
//!   of the process that asked for it (`__GFP_ACCOUNT`), as user-driven kernel memory should
//!   be: a user that creates large queues pays for them within its own limits.
//! - [`map_ring`] maps a published buffer: it is the default `mmap` operation of a user context
//!   ([`super::ucontext::Operations::mmap`]). The device's `mmap_free` operation is implemented
//!   here for every driver with user contexts ([`mmap_free_callback`]): an mmap entry owns its
//!   buffer, so the memory stays allocated while a mapping or an `mmap()` call in progress still
//!   refers to it, and is freed with the last reference to the entry.

use crate::{
    alloc::{
        flags,
        Flags, //
    },
    bindings,
    error::to_result,
    mm::virt::VmaNew,
    page::PAGE_SIZE,
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Release, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

use super::{
    device::Driver,
    ucontext::Ucontext,
    udata::Udata, //
};

/// Zeroed memory from `vmalloc()` that may be mapped into user space (with [`map_ring`]).
///
/// All accesses are atomic loads and stores of naturally aligned words (`READ_ONCE()` and
/// `WRITE_ONCE()`, or the kernel's atomics), so they are sound even while a user process writes
/// the memory concurrently.
///
/// # Invariants
///
/// `ptr` was returned by `__vmalloc(len, GFP_KERNEL | __GFP_ZERO)`, with `__GFP_ACCOUNT` or
/// without, `len > 0`, and is owned by this object (freed with `vfree()` on drop). The
/// allocation is page aligned and made of whole order-0 pages.
pub struct SharedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

impl SharedBuf {
    /// Allocates `len` zeroed bytes (rounded up to whole pages by the allocator), not charged
    /// to a memory cgroup (kernel queues).
    pub fn new(len: usize) -> Result<Self> {
        Self::alloc(len, flags::GFP_KERNEL | flags::__GFP_ZERO)
    }

    /// Allocates `len` zeroed bytes, charged to the memory cgroup of the current task: for
    /// memory a user asks for.
    pub fn new_accounted(len: usize) -> Result<Self> {
        Self::alloc(len, flags::GFP_KERNEL_ACCOUNT | flags::__GFP_ZERO)
    }

    fn alloc(len: usize, gfp: Flags) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `__vmalloc_noprof()` may be called with any size and these flags (it may
        // sleep: so may our caller, as `GFP_KERNEL` says); it returns zeroed memory or NULL.
        let ptr = unsafe { bindings::__vmalloc_noprof(len, gfp.as_raw()) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: `ptr` is a zeroed `__vmalloc()` allocation of `len > 0` bytes that we own.
        Ok(Self { ptr, len })
    }

    /// Returns the size of the buffer in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether the buffer is empty (never: buffers have at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns a pointer to the `size` bytes at `off`, if they are in bounds and `off` is
    /// aligned to `align`.
    #[inline]
    fn at(&self, off: usize, size: usize, align: usize) -> Option<*mut u8> {
        if off % align != 0 || off.checked_add(size)? > self.len {
            return None;
        }
        // SAFETY: `off + size <= len`, so the result is inside the allocation.
        Some(unsafe { self.ptr.as_ptr().add(off) })
    }

    /// Loads the 64-bit word at `p`, as `READ_ONCE()` does: one volatile load of an aligned
    /// word, single-copy atomic (what `Atomic::<i64>::load(Relaxed)` does through its C helper,
    /// without a function call per word: elements are read word by word on every work request).
    ///
    /// # Safety
    ///
    /// `p` is 8-byte aligned and points to 8 bytes inside the buffer.
    #[inline]
    unsafe fn load_word(p: *const u8) -> u64 {
        // SAFETY: `p` is aligned and valid (the caller's guarantee). The memory is only accessed
        // by such single-copy atomic word accesses in the kernel; concurrent user writes are
        // seen as whole old or new words.
        unsafe { core::ptr::read_volatile(p.cast::<u64>()) }
    }

    /// Stores the 64-bit word `v` at `p`, as `WRITE_ONCE()` does (see [`Self::load_word`]).
    ///
    /// # Safety
    ///
    /// `p` is 8-byte aligned and points to 8 bytes inside the buffer.
    #[inline]
    unsafe fn store_word(p: *mut u8, v: u64) {
        // SAFETY: As for `load_word`.
        unsafe { core::ptr::write_volatile(p.cast::<u64>(), v) }
    }

    /// Copies the element of type `E` at byte offset `off` into a kernel-owned value.
    ///
    /// `off` must be a multiple of 8, and `E` a multiple of 8 bytes in size; otherwise, or if
    /// the element is out of bounds, returns `None`. Each 64-bit word is read once, with relaxed
    /// ordering: to read an element after observing its "valid" flag, load the flag first with
    /// [`Self::load_acquire_u16`] (or `_u32`).
    #[inline]
    pub fn read<E: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        off: usize,
    ) -> Option<E> {
        let mut v = E::new_zeroed();
        self.read_into(off, &mut v)?;
        Some(v)
    }

    /// Copies the element of type `E` at byte offset `off` into `v`, as [`Self::read`] does,
    /// for a caller that keeps a buffer for it: a large element is then not moved again after
    /// the copy. On `None` (bad alignment, size or bounds) `v` is unchanged.
    #[inline]
    pub fn read_into<E: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        off: usize,
        v: &mut E,
    ) -> Option<()> {
        self.slot::<E>(off)?.read_into(v);
        Some(())
    }

    /// Writes the element `e` at byte offset `off`, one relaxed 64-bit store per word.
    ///
    /// The same alignment and size rules as for [`Self::read`] apply; returns `EINVAL` if they
    /// are not met. To publish the element, store its "valid" flag afterwards with
    /// [`Self::store_release_u16`] (or `_u32`).
    #[inline]
    pub fn write<E: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        off: usize,
        e: &E,
    ) -> Result {
        self.slot::<E>(off).ok_or(EINVAL)?.write(e);
        Ok(())
    }

    /// Returns the element of type `E` at byte offset `off` as a [`Slot`], checked once for
    /// alignment (8 bytes), size (a multiple of 8 bytes) and bounds, so that its fields are
    /// accessed without checking the buffer's bounds again. `None` if a check fails.
    #[inline]
    pub fn slot<E: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable>(
        &self,
        off: usize,
    ) -> Option<Slot<'_, E>> {
        let size = core::mem::size_of::<E>();
        if size % 8 != 0 {
            return None;
        }
        let p = self.at(off, size, 8)?;
        // INVARIANT: `at()` checked that the `size` bytes at `p` are inside the buffer and that
        // `p` is 8-byte aligned.
        Some(Slot {
            p,
            _buf: PhantomData,
            _e: PhantomData,
        })
    }

    /// Loads the 16-bit value at `off` (2-byte aligned) with acquire ordering.
    #[inline]
    pub fn load_acquire_u16(&self, off: usize) -> Option<u16> {
        let p = self.at(off, 2, 2)?;
        // SAFETY: `p` is aligned and valid for the lifetime of `self`; only atomic accesses.
        let a = unsafe { Atomic::from_ptr(p.cast::<i16>()) };
        Some(a.load(Acquire) as u16)
    }

    /// Stores the 16-bit value `v` at `off` (2-byte aligned) with release ordering.
    #[inline]
    pub fn store_release_u16(&self, off: usize, v: u16) -> Result {
        let p = self.at(off, 2, 2).ok_or(EINVAL)?;
        // SAFETY: `p` is aligned and valid for the lifetime of `self`; only atomic accesses.
        let a = unsafe { Atomic::from_ptr(p.cast::<i16>()) };
        a.store(v as i16, Release);
        Ok(())
    }

    /// Loads the 32-bit value at `off` (4-byte aligned) with acquire ordering.
    #[inline]
    pub fn load_acquire_u32(&self, off: usize) -> Option<u32> {
        let p = self.at(off, 4, 4)?;
        // SAFETY: `p` is aligned and valid for the lifetime of `self`; only atomic accesses.
        let a = unsafe { Atomic::from_ptr(p.cast::<u32>()) };
        Some(a.load(Acquire))
    }

    /// Stores the 32-bit value `v` at `off` (4-byte aligned) with release ordering.
    #[inline]
    pub fn store_release_u32(&self, off: usize, v: u32) -> Result {
        let p = self.at(off, 4, 4).ok_or(EINVAL)?;
        // SAFETY: `p` is aligned and valid for the lifetime of `self`; only atomic accesses.
        let a = unsafe { Atomic::from_ptr(p.cast::<u32>()) };
        a.store(v, Release);
        Ok(())
    }

    /// Atomically exchanges the 32-bit value at `off` (4-byte aligned) with `v` (fully ordered)
    /// and returns the old value.
    pub fn xchg_u32(&self, off: usize, v: u32) -> Option<u32> {
        let p = self.at(off, 4, 4)?;
        // SAFETY: `p` is aligned and valid for the lifetime of `self`; only atomic accesses.
        let a = unsafe { Atomic::from_ptr(p.cast::<u32>()) };
        Some(a.xchg(v, crate::sync::atomic::Full))
    }

    fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for SharedBuf {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `ptr` came from `__vmalloc()` and is owned by us.
        // Pages still mapped into user space stay alive through the mapping's own references.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}

// SAFETY: The buffer is plain memory owned by the object; it may be freed on any thread.
unsafe impl Send for SharedBuf {}

// SAFETY: All accesses through `&self` are atomic.
unsafe impl Sync for SharedBuf {}

/// An element of type `E` in a [`SharedBuf`] (a ring's slot), from [`SharedBuf::slot`]: its
/// bounds were checked once, and its fields are accessed at offsets checked against the size
/// of `E` only (constant offsets fold away). The same access rules as for the buffer apply:
/// atomic word loads and stores, never a reference to the memory.
///
/// # Invariants
///
/// `p` is 8-byte aligned, and the `size_of::<E>()` bytes at `p` are inside the buffer that
/// `'a` borrows.
pub struct Slot<'a, E> {
    p: *mut u8,
    _buf: PhantomData<&'a SharedBuf>,
    _e: PhantomData<fn() -> E>,
}

impl<E: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable> Slot<'_, E> {
    /// Returns a pointer to the `n` bytes at `off` in the element, if they are inside it and
    /// `off` is a multiple of `n` (a power of two up to 8).
    #[inline]
    fn field(&self, off: usize, n: usize) -> Option<*mut u8> {
        if off % n != 0 || off.checked_add(n)? > core::mem::size_of::<E>() {
            return None;
        }
        // SAFETY: `off + n <= size_of::<E>()`: inside the element, so inside the buffer (type
        // invariant).
        Some(unsafe { self.p.add(off) })
    }

    /// Copies the element into `v`, one relaxed 64-bit load per word (see
    /// [`SharedBuf::read`]).
    #[inline]
    pub fn read_into(&self, v: &mut E) {
        for (i, chunk) in v.as_mut_bytes().chunks_exact_mut(8).enumerate() {
            // SAFETY: `p` is 8-byte aligned and the element's bytes are in the buffer (type
            // invariant); `size_of::<E>()` is a multiple of 8 (checked by
            // `SharedBuf::slot()`), so `i * 8 + 8 <= size_of::<E>()`.
            let w = unsafe { SharedBuf::load_word(self.p.add(i * 8)) };
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
    }

    /// Writes `e` into the element, one relaxed 64-bit store per word (see
    /// [`SharedBuf::write`]).
    #[inline]
    pub fn write(&self, e: &E) {
        for (i, chunk) in e.as_bytes().chunks_exact(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            // SAFETY: As for `read_into`.
            unsafe { SharedBuf::store_word(self.p.add(i * 8), u64::from_ne_bytes(w)) };
        }
    }

    /// Loads the 16-bit field at `off` (2-byte aligned) with acquire ordering.
    #[inline]
    pub fn load_acquire_u16(&self, off: usize) -> Option<u16> {
        let p = self.field(off, 2)?;
        // SAFETY: `p` is aligned and inside the buffer, which `'a` keeps alive; only atomic
        // accesses.
        let a = unsafe { Atomic::from_ptr(p.cast::<i16>()) };
        Some(a.load(Acquire) as u16)
    }

    /// Stores the 16-bit field at `off` (2-byte aligned) with release ordering.
    #[inline]
    pub fn store_release_u16(&self, off: usize, v: u16) -> Result {
        let p = self.field(off, 2).ok_or(EINVAL)?;
        // SAFETY: As for `load_acquire_u16`.
        let a = unsafe { Atomic::from_ptr(p.cast::<i16>()) };
        a.store(v as i16, Release);
        Ok(())
    }

    /// Stores the 32-bit field at `off` (4-byte aligned) with release ordering.
    #[inline]
    pub fn store_release_u32(&self, off: usize, v: u32) -> Result {
        let p = self.field(off, 4).ok_or(EINVAL)?;
        // SAFETY: As for `load_acquire_u16`.
        let a = unsafe { Atomic::from_ptr(p.cast::<u32>()) };
        a.store(v, Release);
        Ok(())
    }
}

/// An mmap entry of a user context that owns a [`SharedBuf`].
///
/// # Invariants
///
/// `rdma` is at offset 0. The entry is allocated with `KBox` and freed by
/// [`mmap_free_callback`] when ib_core drops its last reference.
#[repr(C)]
struct Entry {
    rdma: Opaque<bindings::rdma_user_mmap_entry>,
    buf: SharedBuf,
}

/// Queue memory: a [`SharedBuf`] that is kernel-only or published to a user context.
///
/// Dereferences to the [`SharedBuf`].
///
/// # Invariants
///
/// - If `entry` is `Some`, it points to an [`Entry`] inserted into a user context with
///   `rdma_user_mmap_entry_insert_range()` and not yet removed: the user context's mmap table
///   holds a reference to it, so it is alive, and `_buf` is `None`. Otherwise `_buf` is `Some`
///   (kept for its drop).
/// - `shared` points to the [`SharedBuf`] in `_buf` if that is `Some`, else to the `buf` of the
///   entry: it is valid for as long as `self` is (a ring is accessed on every work request, so
///   this costs one load instead of a match).
pub struct RingBuf {
    shared: NonNull<SharedBuf>,
    _buf: Option<KBox<SharedBuf>>,
    entry: Option<NonNull<Entry>>,
}

impl RingBuf {
    /// Allocates `len` zeroed bytes of kernel-only queue memory.
    pub fn new_kernel(len: usize) -> Result<Self> {
        let buf = KBox::new(SharedBuf::new(len)?, GFP_KERNEL)?;
        // INVARIANT: `shared` points into the box, which moves with `self` but stays put.
        Ok(Self {
            shared: NonNull::from(&*buf),
            _buf: Some(buf),
            entry: None,
        })
    }

    /// Allocates `len` zeroed bytes and publishes them to the user context of `udata`, which
    /// may then map them at [`Self::mmap_key`].
    ///
    /// The memory gets the first free range of page offsets (the key divided by the page size)
    /// that starts at or above `min_pgoff`: a user ABI that reserves a key value (as siw's
    /// does `SIW_INVAL_UOBJ_KEY` for "not mapped") passes the page offset above it, so that no
    /// buffer gets that key.
    pub fn new_user(udata: &Udata, len: usize, min_pgoff: u32) -> Result<Self> {
        // SAFETY: `udata` is valid for the duration of the call.
        let uctx = unsafe { bindings::rdma_udata_to_ucontext(udata.as_raw()) };
        if uctx.is_null() {
            return Err(EINVAL);
        }
        // User-driven memory: charged to the caller's memory cgroup.
        let buf = SharedBuf::new_accounted(len)?;
        let entry = KBox::new(
            Entry {
                rdma: Opaque::zeroed(),
                buf,
            },
            GFP_KERNEL,
        )?;
        let entry = KBox::into_raw(entry);
        // SAFETY: `uctx` is the live user context of the command; `entry` is a valid, zeroed
        // mmap entry at offset 0 of an `Entry`. On success ib_core owns a reference to it.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert_range(
                uctx,
                (*entry).rdma.get(),
                len,
                min_pgoff,
                u32::MAX,
            )
        };
        if let Err(e) = to_result(ret) {
            // SAFETY: The insertion failed, so `entry` is still exclusively ours.
            drop(unsafe { KBox::from_raw(entry) });
            return Err(e);
        }
        // SAFETY: `KBox::into_raw` never returns NULL.
        let entry = unsafe { NonNull::new_unchecked(entry) };
        // INVARIANT: The entry is inserted and owns the buffer, which `shared` points to.
        Ok(Self {
            // SAFETY: `entry` is a valid `Entry`; no reference is created.
            shared: unsafe { NonNull::new_unchecked(&raw mut (*entry.as_ptr()).buf) },
            _buf: None,
            entry: Some(entry),
        })
    }

    /// Returns the `mmap()` offset of the memory for user space, or `None` if it is
    /// kernel-only.
    pub fn mmap_key(&self) -> Option<u64> {
        let entry = self.entry?;
        // SAFETY: By the type invariant the entry is alive and inserted.
        Some(unsafe { bindings::rdma_user_mmap_get_offset(entry.as_ref().rdma.get()) })
    }

    /// Returns whether the memory is published to user space.
    pub fn is_user(&self) -> bool {
        self.entry.is_some()
    }
}

impl core::ops::Deref for RingBuf {
    type Target = SharedBuf;

    #[inline]
    fn deref(&self) -> &SharedBuf {
        // SAFETY: By the type invariant `shared` points to the buffer of `_buf` or of the entry,
        // which is alive while it is inserted, that is until `self` is dropped. Only shared
        // references to it are ever formed.
        unsafe { self.shared.as_ref() }
    }
}

impl Drop for RingBuf {
    fn drop(&mut self) {
        if let Some(entry) = self.entry {
            // SAFETY: By the type invariant the entry is inserted. Removing it drops the mmap
            // table's reference; ib_core calls `mmap_free` (freeing the buffer) once the last
            // mapping or `mmap()` call in progress drops its reference.
            unsafe { bindings::rdma_user_mmap_entry_remove(entry.as_ref().rdma.get()) };
        }
    }
}

// SAFETY: The buffer is `Send`; the entry is managed by ib_core, which allows removing it from
// any thread.
unsafe impl Send for RingBuf {}

// SAFETY: Only the `Sync` `SharedBuf` is reachable through `&self`.
unsafe impl Sync for RingBuf {}

/// Maps the [`RingBuf`] published to `uctx` whose key is the offset of `vma`, if the sizes
/// match (the default [`Operations::mmap`](super::ucontext::Operations::mmap)).
///
/// Fails with `EINVAL` if no buffer of the context has that key and size, and with the errors of
/// `vm_insert_page()`.
pub fn map_ring<T: Driver>(uctx: &Ucontext<T>, vma: &VmaNew) -> Result {
    // SAFETY: `uctx` is a live user context and `vma` a mapping being set up for it. On success
    // we own a reference to an entry whose size matches the mapping's.
    let rdma = unsafe { bindings::rdma_user_mmap_entry_get(uctx.as_raw(), vma.as_ptr()) };
    if rdma.is_null() {
        return Err(EINVAL);
    }
    // All entries of a context are `Entry`s (only `RingBuf::new_user` inserts entries), with the
    // C entry at offset 0.
    let entry = rdma.cast::<Entry>();
    // SAFETY: We hold a reference, so the entry and its buffer are alive.
    let buf = unsafe { &(*entry).buf };
    let ret = insert_pages(buf, vma);
    // SAFETY: We own the reference taken above.
    unsafe { bindings::rdma_user_mmap_entry_put(rdma) };
    ret
}

/// Maps the pages of `buf` into `vma`, from its start, as `remap_vmalloc_range()` does for
/// `vmalloc_user()` memory (whose `VM_USERMAP` flag an accounted allocation cannot have).
fn insert_pages(buf: &SharedBuf, vma: &VmaNew) -> Result {
    let size = vma.end().checked_sub(vma.start()).ok_or(EINVAL)?;
    // The buffer is made of whole pages (type invariant).
    let room = buf
        .len()
        .checked_next_multiple_of(PAGE_SIZE)
        .ok_or(EINVAL)?;
    // `size` is a multiple of the page size, as every mapping's.
    if size > room {
        return Err(EINVAL);
    }
    vma.set_mixedmap();
    let mut off = 0;
    while off < size {
        // SAFETY: `off < size <= room`: the address is inside the buffer's vmalloc area, which
        // stays allocated while `buf` is borrowed.
        let page = unsafe {
            bindings::vmalloc_to_page(buf.as_ptr().add(off).cast_const().cast::<c_void>())
        };
        if page.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `vma` is being set up by `mmap()` (its `VmaNew` invariant: the mmap lock is
        // held for writing) and has `VM_MIXEDMAP`; `start + off` is a page-aligned address
        // inside it; `page` is an order-0 vmalloc page, which `vm_insert_page()` takes a
        // reference to, so it outlives the buffer while mapped.
        to_result(unsafe { bindings::vm_insert_page(vma.as_ptr(), vma.start() + off, page) })?;
        off += PAGE_SIZE;
    }
    vma.set_dontexpand();
    vma.set_dontdump();
    Ok(())
}

/// The `mmap_free` device operation: frees an [`Entry`] and its buffer.
///
/// # Safety
///
/// Called by ib_core once, when the last reference to an entry inserted by
/// [`RingBuf::new_user`] is dropped.
pub(crate) unsafe extern "C" fn mmap_free_callback(rdma: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: `rdma` is at offset 0 of an `Entry` allocated with `KBox` (type invariant) and no
    // one uses it any more.
    drop(unsafe { KBox::from_raw(rdma.cast::<Entry>()) });
}
