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
/// Only the abstraction creates this capability: it hands one to
/// [`Operations::get_dma`](super::Operations::get_dma) when ib_core creates the DMA MR of a *kernel* PD (`__ib_alloc_pd()`; `pd->uobject` is NULL). It is
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
/// virtual DMA, or by [`KernelVa::for_kunit`] with `kunit` set. Under the verbs contract, every
/// address a kernel consumer passes with that MR's keys is the kernel virtual address of memory
/// it owns and keeps mapped and allocated until the work request that names it completes
/// (remote accesses: while the consumer has advertised the address). With `kunit` set, copies
/// are confined to its buffer, which the value owns.
pub struct KernelVa {
    #[cfg(CONFIG_KUNIT)]
    kunit: Option<KunitBuf>,
    _private: (),
}

/// The buffer a [`KernelVa`] made for a KUnit test owns, from `KVec::into_raw_parts()`: no
/// Rust reference to its bytes exists while it lives, only the copies' raw accesses.
#[cfg(CONFIG_KUNIT)]
struct KunitBuf {
    ptr: *mut u8,
    len: usize,
    cap: usize,
}

#[cfg(CONFIG_KUNIT)]
impl Drop for KunitBuf {
    fn drop(&mut self) {
        // SAFETY: The parts came from `KVec::into_raw_parts()` and are used once.
        drop(unsafe { KVec::from_raw_parts(self.ptr, self.len, self.cap) });
    }
}

// SAFETY: The capability (and a KUnit buffer, which is plain memory it owns) may move between
// threads.
unsafe impl Send for KernelVa {}

// SAFETY: Copies through `&KernelVa` are raw accesses the callers' locking orders, as for the
// memory of kernel consumers.
unsafe impl Sync for KernelVa {}

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
        Some(Self {
            #[cfg(CONFIG_KUNIT)]
            kunit: None,
            _private: (),
        })
    }

    /// Returns a capability confined to `buf`, for KUnit tests of drivers, or `None` outside
    /// a KUnit test. The capability owns the buffer; [`KernelVa::kunit_buffer`] tells its
    /// address, and addresses outside it fail with `EFAULT`.
    #[cfg(CONFIG_KUNIT)]
    pub fn for_kunit(buf: KVec<u8>) -> Option<Self> {
        if !crate::kunit::in_kunit_test() {
            return None;
        }
        let (ptr, len, cap) = buf.into_raw_parts();
        // INVARIANT: Copies are confined to the buffer, which the value owns.
        Some(Self {
            kunit: Some(KunitBuf { ptr, len, cap }),
            _private: (),
        })
    }

    /// Returns the kernel virtual address and the length of the buffer of a capability made by
    /// [`KernelVa::for_kunit`].
    #[cfg(CONFIG_KUNIT)]
    pub fn kunit_buffer(&self) -> Option<(u64, usize)> {
        self.kunit.as_ref().map(|b| (b.ptr as usize as u64, b.len))
    }

    /// Returns `Err(EFAULT)` unless `[start, last]` lies in the buffer of a KUnit capability.
    #[cfg(CONFIG_KUNIT)]
    fn confined(&self, start: usize, last: usize) -> Result {
        match &self.kunit {
            Some(b) if start < b.ptr as usize || last >= b.ptr as usize + b.len => Err(EFAULT),
            _ => Ok(()),
        }
    }

    /// Checks `[addr, addr + len)` (`len > 0`) and returns it as a pointer.
    ///
    /// Fails with `EINVAL` if the range wraps or does not fit a pointer and `EFAULT` if a page
    /// of it is not direct-mapped kernel memory.
    fn check(&self, addr: u64, len: usize) -> Result<usize> {
        let start = usize::try_from(addr).map_err(|_| EINVAL)?;
        let last = start.checked_add(len - 1).ok_or(EINVAL)?;
        #[cfg(CONFIG_KUNIT)]
        self.confined(start, last)?;
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
        let dst = self.check(addr, src.len())?;
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
        let dst = self.check(addr, len)?;
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
        let src = self.check(addr, dst.len())?;
        // SAFETY: As in `write()`; `dst` is borrowed mutably, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Applies `op` atomically to the 64-bit word at kernel virtual address `addr` and returns
    /// its value before ([`super::atomic_rmw_u64`]). Fails with `EINVAL` if `addr` is not
    /// 8-byte aligned and `EFAULT` if it is not direct-mapped kernel memory. Does not sleep.
    pub fn atomic_u64(&self, addr: u64, op: impl FnMut(u64) -> u64) -> Result<u64> {
        if addr & 7 != 0 {
            return Err(EINVAL);
        }
        let p = self.check(addr, 8)?;
        // SAFETY: As in `write()`: by the type invariant `addr` names memory of a kernel
        // consumer that stays allocated while the work request accessing it is in progress, and
        // `check()` verified that the 8 bytes are direct-mapped kernel memory; it is aligned
        // (checked above) and the consumer's, not borrowed by Rust code.
        Ok(unsafe { super::atomic_rmw_u64(p as *mut u64, op) })
    }

    /// Stores the 8 bytes `image` into the 64-bit word at kernel virtual address `addr` with
    /// release ordering ([`super::store_release_u64`]); errors as [`KernelVa::atomic_u64`].
    pub fn store_u64(&self, addr: u64, image: [u8; 8]) -> Result {
        if addr & 7 != 0 {
            return Err(EINVAL);
        }
        let p = self.check(addr, 8)?;
        // SAFETY: As in `atomic_u64()`.
        unsafe { super::store_release_u64(p as *mut u64, image) };
        Ok(())
    }
}

#[macros::kunit_tests(rust_rdma_kva)]
mod tests {
    use super::*;
    use crate::rdma::mr::test_pattern as pattern;

    impl KernelVa {
        /// Returns a capability that is not confined to a buffer.
        ///
        /// # Safety
        ///
        /// Copies through it only name memory the caller owns (or addresses the checks
        /// refuse).
        unsafe fn unconfined() -> Self {
            // INVARIANT: Per the safety requirements.
            Self {
                kunit: None,
                _private: (),
            }
        }
    }

    #[test]
    fn kernel_va_copies() -> Result {
        // SAFETY: The test copies only to its own buffers and to addresses the checks refuse.
        let kva = unsafe { KernelVa::unconfined() };
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

    #[test]
    fn kunit_capability_is_confined() -> Result {
        let kva = KernelVa::for_kunit(pattern(100, 9)?).ok_or(EINVAL)?;
        let (addr, len) = kva.kunit_buffer().ok_or(EINVAL)?;
        assert_eq!(len, 100);
        kva.write(addr + 90, &[1; 10])?;
        let mut back = [0u8; 10];
        kva.read(addr + 90, &mut back)?;
        assert_eq!(back, [1; 10]);
        // One byte past either end of the buffer is refused, though it is kernel memory.
        assert_eq!(kva.write(addr + 91, &[1; 10]), Err(EFAULT));
        assert_eq!(kva.read(addr - 1, &mut back[..2]), Err(EFAULT));
        Ok(())
    }
}
