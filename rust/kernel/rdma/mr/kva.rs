// SPDX-License-Identifier: GPL-2.0

//! Copies to and from the kernel virtual addresses of kernel consumers (the DMA MR).

use crate::{
    bindings,
    net::skb::SkbData,
    prelude::*, //
};

/// The capability to copy to and from the kernel virtual addresses a kernel consumer places in
/// the SGEs of its DMA MR (`pd->local_dma_lkey`).
///
/// Software providers use `CONFIG_INFINIBAND_VIRT_DMA`: `ib_dma_map_*()` return kernel virtual
/// addresses (`ib_virt_dma_to_ptr()`), and the address of an SGE whose lkey is the DMA MR of a
/// kernel PD, or a remote access to it through `pd->unsafe_global_rkey`, is such an address
/// (C siw: `mem == NULL` in `siw_check_sge()` and the copies of siw_qp_tx.c/siw_qp_rx.c).
///
/// Only the abstraction creates this capability: it hands one to [`Operations::get_dma`](super::Operations::get_dma) when
/// ib_core creates the DMA MR of a *kernel* PD (`__ib_alloc_pd()`; `pd->uobject` is NULL). It is
/// neither `Clone` nor `Copy`, so a driver can only keep it with that one region; user PDs never
/// get one, so user memory keys can never reach kernel virtual addresses.
///
/// Copies check that the first and the last byte of the range, and the first byte of every page
/// in between, are direct-mapped kernel memory (`virt_addr_valid()`), fail on overflow, and never
/// sleep (they may run in softirq context or under a spinlock).
///
/// # Invariants
///
/// The value was created by the abstraction for the DMA MR of a kernel PD of a device using
/// virtual DMA (or, for KUnit, inside a KUnit test). Under the verbs contract, every address a
/// kernel consumer passes with that MR's keys is the kernel virtual address of memory it owns
/// and keeps mapped and allocated until the work request that names it completes (remote
/// accesses: while the consumer has advertised the address).
pub struct KernelVa {
    _private: (),
}

impl KernelVa {
    /// Creates the capability for the DMA MR of PD `pd`, or `None` for a user PD or a device
    /// that does not use virtual DMA.
    ///
    /// # Safety
    ///
    /// `pd` is a live PD, being passed to the `get_dma_mr` op.
    pub(crate) unsafe fn for_dma_mr(pd: *mut bindings::ib_pd) -> Option<Self> {
        // SAFETY: `pd` is live (safety requirements).
        let (kernel, dev) = unsafe { (bindings::rdma_pd_is_kernel(pd), (*pd).device) };
        // SAFETY: `dev` is the live device of a live PD.
        if !kernel || !unsafe { bindings::ib_uses_virt_dma(dev) } {
            return None;
        }
        // INVARIANT: The DMA MR of a kernel PD of a virtual-DMA device.
        Some(Self { _private: () })
    }

    /// Returns the capability inside a KUnit test (for tests of drivers, which copy to their
    /// own buffers), `None` elsewhere.
    #[cfg(CONFIG_KUNIT)]
    pub fn for_kunit() -> Option<Self> {
        // INVARIANT: Only inside a KUnit test.
        crate::kunit::in_kunit_test().then_some(Self { _private: () })
    }

    /// Checks `[addr, addr + len)` (`len > 0`) and returns it as a pointer.
    ///
    /// Fails with `EINVAL` if the range wraps or does not fit a pointer and `EFAULT` if a page
    /// of it is not direct-mapped kernel memory.
    fn check(addr: u64, len: usize) -> Result<usize> {
        let start = usize::try_from(addr).map_err(|_| EINVAL)?;
        let last = start.checked_add(len - 1).ok_or(EINVAL)?;
        let mut at = start;
        loop {
            // SAFETY: `virt_addr_valid()` only computes on the address.
            if !unsafe { bindings::virt_addr_valid(at) } {
                return Err(EFAULT);
            }
            if at == last {
                return Ok(start);
            }
            // The first byte of the next page, or the last byte of the range.
            at = (at | (crate::page::PAGE_SIZE - 1))
                .checked_add(1)
                .map_or(last, |next| next.min(last));
        }
    }

    /// Copies `src` to kernel virtual address `addr`. Does not sleep.
    ///
    /// Fails with `EINVAL` if the range wraps and `EFAULT` if it is not direct-mapped kernel
    /// memory; nothing is copied then.
    pub fn write(&self, addr: u64, src: &[u8]) -> Result {
        if src.is_empty() {
            return Ok(());
        }
        let dst = Self::check(addr, src.len())?;
        // SAFETY: By the type invariant `addr` names memory of a kernel consumer that stays
        // allocated while the work request accessing it is in progress; `check()` verified that
        // all `src.len()` bytes are direct-mapped kernel memory. `src` is a distinct Rust
        // borrow, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    /// Copies `len` received bytes of `skb`, starting at `skb_off`, to kernel virtual address
    /// `addr` (`skb_copy_bits()`, no staging copy). Same rules as [`KernelVa::write`]; also
    /// `EINVAL` if the range is not inside `skb`.
    pub fn write_from_skb(
        &self,
        addr: u64,
        skb: &SkbData<'_>,
        skb_off: usize,
        len: usize,
    ) -> Result {
        skb.check_range(skb_off, len)?;
        if len == 0 {
            return Ok(());
        }
        let dst = Self::check(addr, len)?;
        // SAFETY: As in `write()`: by the type invariant `addr` names memory of a kernel
        // consumer that stays allocated while the work request accessing it is in progress, and
        // `check()` verified that all `len` bytes are direct-mapped kernel memory. The memory is
        // the consumer's, not borrowed by Rust code.
        unsafe { skb.copy_to_raw(skb_off, dst as *mut u8, len) }
    }

    /// Copies `dst.len()` bytes from kernel virtual address `addr` into `dst`. Same rules as
    /// [`KernelVa::write`].
    pub fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        if dst.is_empty() {
            return Ok(());
        }
        let src = Self::check(addr, dst.len())?;
        // SAFETY: As in `write()`; `dst` is borrowed mutably, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
}

#[macros::kunit_tests(rust_rdma_kva)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Result<KVec<u8>> {
        let mut v = KVec::with_capacity(len, GFP_KERNEL)?;
        for i in 0..len {
            v.push((i as u8).wrapping_mul(7).wrapping_add(seed), GFP_KERNEL)?;
        }
        Ok(v)
    }

    #[test]
    fn kernel_va_copies() -> Result {
        let kva = KernelVa::for_kunit().ok_or(EINVAL)?;
        // Across a page boundary of a kmalloc'ed buffer.
        let mut buf = pattern(3 * 4096, 4)?;
        let addr = buf.as_ptr() as usize as u64;
        kva.write(addr + 4000, &[0x5a; 300])?;
        assert!(buf[4000..4300].iter().all(|b| *b == 0x5a));
        assert_eq!(buf[3999], 3999u32.wrapping_mul(7).wrapping_add(4) as u8);
        assert_eq!(buf[4300], 4300u32.wrapping_mul(7).wrapping_add(4) as u8);
        let mut back = [0u8; 8];
        kva.read(addr + 4296, &mut back)?;
        assert_eq!(back[..4], [0x5a; 4]);
        assert_eq!(back[4], buf[4300]);
        // Empty copies touch nothing, even at a bad address.
        kva.write(0, &[])?;
        // User, NULL, wrapping and non-direct-map addresses are refused, and nothing is copied.
        assert_eq!(kva.write(0x1000, &[1; 4]), Err(EFAULT));
        assert_eq!(kva.read(0, &mut back), Err(EFAULT));
        assert_eq!(kva.write(u64::MAX - 2, &[1; 4]), Err(EINVAL));
        assert_eq!(kva.read(u64::MAX, &mut back), Err(EINVAL));
        // vmalloc memory is not direct-mapped: refused.
        let v = VBox::new([7u8; 64], GFP_KERNEL)?;
        assert_eq!(kva.read(v.as_ptr() as usize as u64, &mut back), Err(EFAULT));
        buf.clear();
        Ok(())
    }
}
