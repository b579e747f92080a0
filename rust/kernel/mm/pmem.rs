// SPDX-License-Identifier: GPL-2.0

//! Persistent memory: which memory is persistent, and writing the CPU caches back to it.
//!
//! C headers: [`include/linux/ioport.h`](srctree/include/linux/ioport.h),
//! [`include/linux/libnvdimm.h`](srctree/include/linux/libnvdimm.h) and
//! [`include/asm-generic/barrier.h`](srctree/include/asm-generic/barrier.h) (`pmem_wmb()`).
//!
//! Memory is *persistent* when its physical range lies in resources of type `IORESOURCE_MEM`
//! with the descriptor `IORES_DESC_PERSISTENT_MEMORY` and in no other resource: the system
//! physical address ranges of NVDIMMs that ACPI's NFIT describes, E820 type 7 ranges, CXL
//! persistent memory. The legacy `memmap=nn!ss` ranges (`IORES_DESC_PERSISTENT_MEMORY_LEGACY`)
//! and virtio-pmem are not: nothing promises that a cache write-back makes them durable.
//!
//! A store to persistent memory reaches the persistence domain once the cache lines it went
//! to have been written back ([`write_back`], [`write_back_page`]: `arch_wb_cache_pmem()`) and
//! the write-backs are ordered before what follows ([`barrier`]: `pmem_wmb()`). This is what
//! the pmem block driver and DAX do for their own stores, and what a software RDMA device does
//! before it answers an RDMA Flush to persistence.
//!
//! Only architectures with `CONFIG_ARCH_HAS_PMEM_API` can write caches back
//! ([`CAN_WRITE_BACK`]); elsewhere the write-backs do nothing, and a caller must not claim
//! persistence.

use crate::{
    bindings,
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*, //
};

/// Whether the architecture can write CPU caches back to persistent memory
/// (`CONFIG_ARCH_HAS_PMEM_API`; x86_64, arm64, powerpc64). Without it, [`write_back`] and
/// [`write_back_page`] do nothing.
pub const CAN_WRITE_BACK: bool = cfg!(CONFIG_ARCH_HAS_PMEM_API);

/// The size of a CPU cache line as the write-backs count it (`cache_line_size()`): a
/// write-back of any byte of a line writes the whole line back.
pub fn line_size() -> usize {
    // SAFETY: `cache_line_size()` only reads a boot-time constant.
    let n = unsafe { bindings::pmem_line_size() };
    usize::try_from(n).unwrap_or(64)
}

/// Returns whether the physical range `[start, start + size)` is persistent memory: it
/// intersects resources of type `IORESOURCE_MEM` with descriptor `IORES_DESC_PERSISTENT_MEMORY`
/// and no other (`region_intersects()` is `REGION_INTERSECTS`). An empty range is not.
///
/// Does not sleep (the resource tree is read under a spinning lock).
pub fn is_persistent_range(start: bindings::phys_addr_t, size: usize) -> bool {
    if size == 0 {
        return false;
    }
    // SAFETY: `region_intersects()` only reads the resource tree, under its own lock; any
    // range is a valid argument.
    let r = unsafe {
        bindings::region_intersects(
            start,
            size,
            bindings::IORESOURCE_MEM as c_ulong,
            bindings::IORES_DESC_PERSISTENT_MEMORY as c_ulong,
        )
    };
    r == bindings::REGION_INTERSECTS as c_int
}

/// Returns whether `page` is persistent memory ([`is_persistent_range`] of its physical
/// range), as rxe's `is_pmem_page()`. Does not sleep.
pub fn is_persistent_page(page: &Page) -> bool {
    // SAFETY: `page.as_ptr()` is a valid `struct page` (type invariant of `Page`);
    // `page_to_phys()` only computes its physical address.
    let phys = unsafe { bindings::page_to_phys(page.as_ptr()) };
    is_persistent_range(phys, PAGE_SIZE)
}

/// Writes the CPU cache lines covering `[addr, addr + len)` back to memory
/// (`arch_wb_cache_pmem()`: `clwb`, or `clflushopt`/`clflush`, on x86), without invalidating
/// them. The write-backs are not ordered: call [`barrier`] after the last one.
///
/// Does not sleep. Does nothing without [`CAN_WRITE_BACK`].
///
/// # Safety
///
/// `[addr, addr + len)` is mapped kernel memory (the direct map, a `kmap_local_page()` or
/// `memremap()` mapping) for the duration of the call. Its contents are not read or changed,
/// so concurrent accesses to it are allowed.
pub unsafe fn write_back(addr: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: The range is mapped kernel memory (safety requirements); a cache write-back
    // changes no byte of it.
    unsafe { bindings::pmem_write_back(addr.cast_mut().cast(), len) };
}

/// Writes back the cache lines covering bytes `[offset, offset + len)` of `page`, through a
/// short-lived `kmap_local_page()` mapping ([`write_back`]). Fails with `EINVAL` if the bytes
/// are not inside the page. Does not sleep.
pub fn write_back_page(page: &Page, offset: usize, len: usize) -> Result {
    let end = offset.checked_add(len).ok_or(EINVAL)?;
    if end > PAGE_SIZE {
        return Err(EINVAL);
    }
    if len == 0 {
        return Ok(());
    }
    // SAFETY: `page` is a valid page (type invariant of `Page`).
    let va = unsafe { bindings::kmap_local_page(page.as_ptr()) };
    // SAFETY: `va` maps the whole page and `offset + len <= PAGE_SIZE`, so the range is mapped
    // kernel memory until the `kunmap_local()` below.
    unsafe { write_back(va.cast::<u8>().add(offset), len) };
    // SAFETY: `va` was mapped just above, and nothing mapped since is still mapped.
    unsafe { bindings::kunmap_local(va) };
    Ok(())
}

/// Orders the cache write-backs before it ([`write_back`]) before the stores that follow it
/// (`pmem_wmb()`; `wmb()`, i.e. `sfence`, on x86): once it returns, the written-back lines are
/// in the persistence domain (ADR) as far as any later store, such as the one that sends a
/// reply, can tell.
pub fn barrier() {
    // SAFETY: A barrier has no preconditions.
    unsafe { bindings::pmem_wmb() };
}

/// Gives the CPU to another task if one is due (`cond_resched()`): the yield point between the
/// pieces of a long write-back in process context, which without it could hold the CPU for
/// milliseconds on a kernel without preemption (a whole region of persistent memory is one
/// `clwb` per cache line).
///
/// Process context only: it may sleep (`CONFIG_DEBUG_ATOMIC_SLEEP` reports a call in atomic
/// context).
pub fn cond_resched() {
    // SAFETY: `cond_resched()` has no preconditions beyond process context, which callers
    // promise (and the kernel checks under `CONFIG_DEBUG_ATOMIC_SLEEP`).
    unsafe { bindings::cond_resched() };
}

#[macros::kunit_tests(rust_mm_pmem)]
mod tests {
    use super::*;

    /// Ordinary RAM is not persistent memory, and writing it back changes nothing.
    #[test]
    fn dram_is_not_persistent() -> Result {
        let page = Page::alloc_page(GFP_KERNEL)?;
        assert!(!is_persistent_page(&page));
        assert!(!is_persistent_range(0, 0));
        let pattern = [0x5au8; 200];
        // SAFETY: `pattern` is valid for reading 200 bytes; the page is ours.
        unsafe { page.write_raw(pattern.as_ptr(), 3000, pattern.len())? };
        write_back_page(&page, 3000, 200)?;
        write_back_page(&page, 0, PAGE_SIZE)?;
        write_back_page(&page, PAGE_SIZE, 0)?;
        barrier();
        assert_eq!(write_back_page(&page, 4000, 200), Err(EINVAL));
        assert_eq!(write_back_page(&page, usize::MAX, 2), Err(EINVAL));
        let mut back = [0u8; 200];
        // SAFETY: `back` is valid for writing 200 bytes; the page is ours.
        unsafe { page.read_raw(back.as_mut_ptr(), 3000, back.len())? };
        assert_eq!(back, pattern);
        Ok(())
    }
}
