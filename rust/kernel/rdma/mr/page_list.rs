// SPDX-License-Identifier: GPL-2.0

//! The page list of a fast-registration memory region.
//!
//! See the [fast registration](super#fast-registration) section of the module documentation.

use crate::{
    net::skb::SkbData,
    prelude::*, //
};

/// One step of mapping a scatterlist into a fast-registration MR, produced by the `map_mr_sg`
/// op and applied by the driver to the MR's [`PageList`] with [`PageList::apply`].
///
/// Steps are only created by the abstraction, from the results of `ib_sg_to_pages()`: a driver
/// cannot make up page addresses.
pub struct MapStep(pub(super) Step);

pub(super) enum Step {
    /// A new mapping with pages of this size (`ib_mr.page_size`) begins.
    Begin(u32),
    /// The next page (a kernel virtual address aligned to the page size).
    Page(u64),
    /// The mapping is complete: I/O virtual address of its first byte and its length.
    End { iova: u64, length: u64 },
}

/// A mapping: page addresses, page size, offset of the first byte in the first page, length.
struct Mapping {
    pages: KVec<u64>,
    shift: u32,
    fbo: u64,
    len: u64,
}

impl Mapping {
    fn new(max: usize) -> Result<Self> {
        Ok(Self {
            pages: KVec::with_capacity(max, GFP_KERNEL)?,
            shift: 0,
            fbo: 0,
            len: 0,
        })
    }

    /// Calls `f(address, at, n)` for the pieces of `[off, off + len)` of the mapping, in order;
    /// `at` is the offset of the piece from `off`.
    fn pieces(&self, off: u64, len: usize, mut f: impl FnMut(u64, usize, usize)) -> Result {
        let len64 = u64::try_from(len).map_err(|_| EINVAL)?;
        let end = off.checked_add(len64).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        let size = 1u64 << self.shift;
        let mut pos = self.fbo.checked_add(off).ok_or(EINVAL)?;
        let mut done = 0usize;
        while done < len {
            let idx = usize::try_from(pos >> self.shift).map_err(|_| EINVAL)?;
            let in_page = pos & (size - 1);
            let rest = (len - done) as u64;
            let n = (size - in_page).min(rest);
            let page = *self.pages.get(idx).ok_or(EINVAL)?;
            f(page + in_page, done, n as usize);
            pos += n;
            done += n as usize;
        }
        Ok(())
    }
}

/// The page list of a fast-registration memory region.
///
/// Holds the *staged* mapping (written by `map_mr_sg` through [`PageList::apply`]) and the
/// *active* one (the mapping of the current registration, copied from the staged one by
/// [`PageList::activate`]), so that mapping the next registration does not change the current
/// one, as on hardware. Every activation and deactivation starts a new generation; copies name
/// the generation they were checked against and fail if it is no longer active.
///
/// The list has no lock of its own: the driver keeps it under the lock of its region state, and
/// copies hold that lock, so that once [`PageList::deactivate`] returns no copy is in progress
/// and none will start (the consumer may then free the memory).
///
/// # Invariants
///
/// - Every address in `staged.pages` and `active.pages` was produced by `ib_sg_to_pages()` for a
///   scatterlist mapped for a device using virtual DMA (a kernel virtual address), or points into
///   a buffer owned by `owned` (KUnit only).
/// - For both mappings, `fbo < 1 << shift` and `fbo + len <= pages.len() << shift`, and byte `i`
///   of `[fbo, fbo + len)` of the concatenated pages is a byte of memory the consumer mapped.
pub struct PageList {
    staged: Mapping,
    active: Mapping,
    max: usize,
    on: bool,
    gen: u64,
    #[cfg(CONFIG_KUNIT)]
    owned: KVec<KVec<u8>>,
}

impl PageList {
    /// Creates an empty list for up to `max_pages` pages.
    pub fn new(max_pages: u32) -> Result<Self> {
        let max = usize::try_from(max_pages).map_err(|_| EINVAL)?;
        // INVARIANT: Both mappings are empty.
        Ok(Self {
            staged: Mapping::new(max)?,
            active: Mapping::new(max)?,
            max,
            on: false,
            gen: 0,
            #[cfg(CONFIG_KUNIT)]
            owned: KVec::new(),
        })
    }

    /// Returns the maximum number of pages.
    pub fn max_pages(&self) -> usize {
        self.max
    }

    /// Applies a step of `map_mr_sg` to the staged mapping.
    ///
    /// Fails with `EINVAL` for a page size that is not a power of two (the op then fails) and
    /// with `ENOMEM` when the list is full (`ib_sg_to_pages()` then stops: the consumer sees
    /// fewer elements mapped than it asked for).
    pub fn apply(&mut self, step: MapStep) -> Result {
        let m = &mut self.staged;
        match step.0 {
            Step::Begin(size) => {
                if !size.is_power_of_two() {
                    return Err(EINVAL);
                }
                m.pages.clear();
                m.shift = size.trailing_zeros();
                m.fbo = 0;
                m.len = 0;
            }
            Step::Page(addr) => {
                // INVARIANT: `addr` came from `ib_sg_to_pages()` (`MapStep` is only built by
                // the op); the mapped length stays 0 until the end step.
                if m.pages.len() >= self.max || addr & ((1u64 << m.shift) - 1) != 0 {
                    return Err(ENOMEM);
                }
                m.pages.push(addr, GFP_ATOMIC)?;
            }
            Step::End { iova, length } => {
                let size = 1u64 << m.shift;
                let first = m.pages.first().copied().unwrap_or(0);
                let fbo = iova.wrapping_sub(first);
                let cap = (m.pages.len() as u64) << m.shift;
                // INVARIANT: `fbo` is the offset of the mapping's first byte in its first page;
                // the length is clamped to the pages (a partial mapping maps fewer bytes).
                if m.pages.is_empty() || fbo >= size {
                    m.fbo = 0;
                    m.len = 0;
                } else {
                    m.fbo = fbo;
                    m.len = length.min(cap - fbo);
                }
            }
        }
        Ok(())
    }

    /// Returns the length in bytes of the staged mapping (0 if there is none).
    pub fn staged_len(&self) -> u64 {
        self.staged.len
    }

    /// Makes the staged mapping the registered one and returns its generation, for
    /// [`PageList::write`] and [`PageList::read`]. Fails with `EINVAL` if nothing is mapped.
    pub fn activate(&mut self) -> Result<u64> {
        if self.staged.len == 0 {
            return Err(EINVAL);
        }
        self.active.pages.clear();
        // Both vectors have capacity for `max` pages: this does not allocate.
        self.active
            .pages
            .extend_from_slice(&self.staged.pages, GFP_ATOMIC)?;
        // INVARIANT: A copy of the staged mapping, which satisfies the invariants.
        self.active.shift = self.staged.shift;
        self.active.fbo = self.staged.fbo;
        self.active.len = self.staged.len;
        self.on = true;
        self.gen = self.gen.wrapping_add(1);
        Ok(self.gen)
    }

    /// Returns the length of the registered mapping, 0 if none is active.
    pub fn active_len(&self) -> u64 {
        if self.on {
            self.active.len
        } else {
            0
        }
    }

    /// Returns the offset of the registered mapping's first byte in its first page (0 if none
    /// is active): where the region's bytes fall in pages, and so in cache lines.
    pub fn active_offset(&self) -> u64 {
        if self.on {
            self.active.fbo
        } else {
            0
        }
    }

    /// Ends the registration: copies of every generation fail from now on.
    pub fn deactivate(&mut self) {
        self.on = false;
        self.gen = self.gen.wrapping_add(1);
    }

    fn active(&self, gen: u64) -> Result<&Mapping> {
        if !self.on || gen != self.gen {
            return Err(ENOENT);
        }
        Ok(&self.active)
    }

    /// Copies `src` to bytes `[off, off + src.len())` of the registered mapping of generation
    /// `gen`. Fails with `ENOENT` if that generation is no longer registered and `EINVAL` if the
    /// range exceeds the mapping. Does not sleep.
    pub fn write(&self, gen: u64, off: u64, src: &[u8]) -> Result {
        self.active(gen)?.pieces(off, src.len(), |addr, at, n| {
            // SAFETY: By the type invariants `addr` is the kernel virtual address of `n` bytes
            // of memory the consumer mapped and keeps mapped while the region is registered
            // (`gen` is active); `pieces()` keeps `[at, at + n)` within `src`.
            unsafe {
                core::ptr::copy_nonoverlapping(src.as_ptr().add(at), addr as usize as *mut u8, n)
            }
        })
    }

    /// Copies `len` received bytes of `skb`, starting at `skb_off`, to bytes `[off, off + len)`
    /// of the registered mapping of generation `gen` (`skb_copy_bits()`, no staging copy). Same
    /// rules as [`PageList::write`]; also `EINVAL` if the range is not inside `skb`. Pages
    /// before a failing one may have been written.
    pub fn write_from_skb(
        &self,
        gen: u64,
        off: u64,
        skb: &SkbData<'_>,
        skb_off: usize,
        len: usize,
    ) -> Result {
        skb.check_range(skb_off, len)?;
        let mut ret = Ok(());
        self.active(gen)?.pieces(off, len, |addr, at, n| {
            if ret.is_ok() {
                // SAFETY: As in `write()`, `addr` is the kernel virtual address of `n` bytes the
                // consumer mapped and keeps mapped while `gen` is active; it is not memory Rust
                // holds a reference to. `skb_off + at + n <= skb_off + len` (checked above).
                ret = unsafe {
                    skb.copy_to_raw(skb_off.saturating_add(at), addr as usize as *mut u8, n)
                };
            }
        })?;
        ret
    }

    /// Copies bytes `[off, off + dst.len())` of the registered mapping of generation `gen`
    /// into `dst`. Same rules as [`PageList::write`].
    pub fn read(&self, gen: u64, off: u64, dst: &mut [u8]) -> Result {
        let p = dst.as_mut_ptr();
        self.active(gen)?.pieces(off, dst.len(), |addr, at, n| {
            // SAFETY: As in `write()`; `[at, at + n)` is within `dst`, which we borrow mutably.
            unsafe { core::ptr::copy_nonoverlapping(addr as usize as *const u8, p.add(at), n) }
        })
    }

    /// Applies `op` atomically to the 64-bit word at `off` of the registered mapping of
    /// generation `gen` and returns its value before ([`super::atomic_rmw_u64`]). Fails with
    /// `EINVAL` if the word's address is not 8-byte aligned (or the word is outside the
    /// mapping) and with `ENOENT` if the generation is no longer registered. Does not sleep.
    pub fn atomic_u64(&self, gen: u64, off: u64, op: impl FnMut(u64) -> u64) -> Result<u64> {
        let addr = self.word(gen, off)?;
        // SAFETY: By the type invariants `addr` is the kernel virtual address of 8 bytes of
        // memory the consumer mapped and keeps mapped while `gen` is active (checked by
        // `word()`, and the caller holds the lock that keeps it active); it is aligned (checked
        // by `word()`) and belongs to the consumer, not to Rust code.
        Ok(unsafe { super::atomic_rmw_u64(addr as usize as *mut u64, op) })
    }

    /// Stores the 8 bytes `image` into the 64-bit word at `off` of the registered mapping of
    /// generation `gen` with release ordering ([`super::store_release_u64`]); errors as
    /// [`PageList::atomic_u64`]. Does not sleep.
    pub fn store_u64(&self, gen: u64, off: u64, image: [u8; 8]) -> Result {
        let addr = self.word(gen, off)?;
        // SAFETY: As in `atomic_u64()`.
        unsafe { super::store_release_u64(addr as usize as *mut u64, image) };
        Ok(())
    }

    /// The kernel virtual address of the aligned 64-bit word at `off` of the mapping of
    /// generation `gen`: `EINVAL` if it is not aligned or outside the mapping, `ENOENT` if the
    /// generation is no longer registered.
    fn word(&self, gen: u64, off: u64) -> Result<u64> {
        let mut word = None;
        self.active(gen)?.pieces(off, 8, |addr, _, n| {
            // An aligned word never crosses a page: it is one piece.
            if n == 8 && addr & 7 == 0 {
                word = Some(addr);
            }
        })?;
        word.ok_or(EINVAL)
    }

    /// Writes back the CPU cache lines covering bytes `[off, off + len)` of the registered
    /// mapping of generation `gen` ([`crate::mm::pmem::write_back`]). The write-backs are not
    /// ordered: call [`crate::mm::pmem::barrier`] after the last one. Errors as
    /// [`PageList::write`]. Does not sleep.
    pub fn write_back(&self, gen: u64, off: u64, len: usize) -> Result {
        self.active(gen)?.pieces(off, len, |addr, _, n| {
            // SAFETY: By the type invariants `addr` is the kernel virtual address of `n` bytes
            // of memory the consumer mapped and keeps mapped while the region is registered
            // (`gen` is active); a write-back reads and writes none of them.
            unsafe { crate::mm::pmem::write_back(addr as usize as *const u8, n) }
        })
    }

    /// Stages a mapping of `buf`, with pages of `page_size` bytes, at I/O virtual address
    /// `iova`, as `map_mr_sg` would for a scatterlist of that buffer. The list keeps the buffer
    /// until it is dropped. For KUnit tests of drivers; does not sleep.
    #[cfg(CONFIG_KUNIT)]
    pub fn map_owned(&mut self, buf: KVec<u8>, page_size: u32) -> Result {
        self.apply(MapStep(Step::Begin(page_size)))?;
        let start = buf.as_ptr() as usize as u64;
        let len = buf.len() as u64;
        // Atomic: drivers keep the list under a spinlock.
        self.owned.push(buf, GFP_ATOMIC)?;
        let mask = !(u64::from(page_size) - 1);
        let mut page = start & mask;
        let mut mapped = 0u64;
        while page < start + len {
            // INVARIANT: Pages of `buf`, which `owned` keeps alive; only its bytes are mapped.
            if self.apply(MapStep(Step::Page(page))).is_err() {
                break;
            }
            page += u64::from(page_size);
            mapped = (page - start).min(len);
        }
        self.apply(MapStep(Step::End {
            iova: start,
            length: mapped,
        }))
    }
}

#[macros::kunit_tests(rust_rdma_mr)]
mod tests {
    use super::*;
    use crate::bindings;
    use crate::rdma::mr::test_pattern as pattern;

    /// An `ib_mr` followed by the page list its `set_page` callback fills, as a driver's MR.
    #[repr(C)]
    struct Harness {
        mr: bindings::ib_mr,
        list: PageList,
    }

    /// The `set_page` callback of the harness.
    ///
    /// # Safety
    ///
    /// `mr` is the `mr` field of a live `Harness` that nothing else accesses meanwhile.
    unsafe extern "C" fn set_page(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
        // SAFETY: `mr` is at offset 0 of a live `Harness` (`repr(C)`), per the requirements.
        let list = unsafe { &mut (*mr.cast::<Harness>()).list };
        match list.apply(MapStep(Step::Page(addr))) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// Maps `segs` (address, length; virtual DMA addresses) with `ib_sg_to_pages()` into a new
    /// list of `max` pages of `page_size` bytes, as the `map_mr_sg` op does, and activates it.
    fn map(segs: &[(usize, u32)], page_size: u32, max: u32) -> Result<(KBox<Harness>, c_int)> {
        let mut h = KBox::new(
            Harness {
                mr: pin_init::zeroed(),
                list: PageList::new(max)?,
            },
            GFP_KERNEL,
        )?;
        let mut sgl = KVec::<bindings::scatterlist>::with_capacity(segs.len(), GFP_KERNEL)?;
        for _ in segs {
            sgl.push(pin_init::zeroed(), GFP_KERNEL)?;
        }
        let n = c_int::try_from(segs.len())?;
        // SAFETY: `sgl` holds `n` entries.
        unsafe { bindings::sg_init_table(sgl.as_mut_ptr(), n as c_uint) };
        for (sg, (addr, len)) in sgl.iter_mut().zip(segs) {
            sg.dma_address = *addr as u64;
            sg.dma_length = *len;
            sg.length = *len;
        }
        h.mr.page_size = page_size;
        h.list.apply(MapStep(Step::Begin(page_size)))?;
        let mr = &raw mut h.mr;
        // SAFETY: `mr` is the `mr` of the live harness `h`, not otherwise used during the
        // call; `sgl` is an initialised table of `n` entries.
        let ret = unsafe {
            bindings::ib_sg_to_pages(
                mr,
                sgl.as_mut_ptr(),
                n,
                core::ptr::null_mut(),
                Some(set_page),
            )
        };
        let length = if ret == n { h.mr.length } else { 0 };
        let iova = h.mr.iova;
        h.list.apply(MapStep(Step::End { iova, length }))?;
        Ok((h, ret))
    }

    #[test]
    fn one_element() -> Result {
        let mut buf = pattern(10000, 1)?;
        let addr = buf.as_ptr() as usize;
        let (mut h, n) = map(&[(addr + 5, 9000)], 4096, 4)?;
        assert_eq!(n, 1);
        assert_eq!(h.list.staged_len(), 9000);
        let gen = h.list.activate()?;
        let mut back = KVec::from_elem(0u8, 9000, GFP_KERNEL)?;
        h.list.read(gen, 0, &mut back)?;
        assert!(back[..] == buf[5..9005]);
        // A write across a page boundary lands in the buffer.
        h.list.write(gen, 4000, &[0xee; 200])?;
        assert!(buf[4005..4205].iter().all(|b| *b == 0xee));
        assert_eq!(buf[4004], 4004u32.wrapping_mul(7).wrapping_add(1) as u8);
        assert_eq!(h.list.write(gen, 8999, &[0; 2]), Err(EINVAL));
        h.list.deactivate();
        assert_eq!(h.list.read(gen, 0, &mut back[..1]), Err(ENOENT));
        buf.clear();
        Ok(())
    }

    #[test]
    fn two_elements_and_overflow() -> Result {
        // kmalloc() aligns power-of-two sizes naturally: both buffers are page aligned.
        let a = pattern(8192, 2)?;
        let b = pattern(8192, 3)?;
        let (pa, pb) = (a.as_ptr() as usize, b.as_ptr() as usize);
        assert_eq!((pa | pb) % 4096, 0);
        // a[100..8192] ends on a page boundary, b[0..5000] starts on one: four pages.
        let (mut h, n) = map(&[(pa + 100, 8092), (pb, 5000)], 4096, 4)?;
        assert_eq!(n, 2);
        assert_eq!(h.list.staged_len(), 13092);
        let gen = h.list.activate()?;
        let mut back = KVec::from_elem(0u8, 13092, GFP_KERNEL)?;
        h.list.read(gen, 0, &mut back)?;
        assert!(back[..8092] == a[100..]);
        assert!(back[8092..] == b[..5000]);
        // Three pages cannot hold it: the mapping stops early and cannot be registered.
        let (mut h3, n3) = map(&[(pa + 100, 8092), (pb, 5000)], 4096, 3)?;
        assert_eq!(n3, 1);
        assert_eq!(h3.list.staged_len(), 0);
        assert_eq!(h3.list.activate(), Err(EINVAL));
        Ok(())
    }
}
