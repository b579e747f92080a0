// SPDX-License-Identifier: GPL-2.0

//! Rings of work queue and completion queue elements in (possibly user-mapped) queue memory.
//!
//! A ring has a power-of-two number of slots; producer and consumer keep free-running 32-bit
//! counters and a slot's index is the counter modulo the size ([`slot`]). Ownership of a slot is
//! the `VALID` bit of its `flags` field ([`wqe::FLAGS_OFFSET`]): the producer writes the element,
//! then sets the flag with release ordering; the consumer observes the flag with acquire
//! ordering, copies the element out, and hands the slot back by clearing the flag.

use crate::wqe;
use core::marker::PhantomData;
use kernel::{
    prelude::*,
    rdma::{
        mmap::{
            RingBuf,
            Slot, //
        },
        udata::Udata, //
    },
    sync::atomic::{
        Acquire,
        Atomic,
        Full, //
    },
};
use zerocopy::Immutable;

/// Returns the slot index of counter value `counter` in a ring of `size` (a power of two).
pub(crate) const fn slot(counter: u32, size: u32) -> u32 {
    counter & size.wrapping_sub(1)
}

/// Returns the number of elements between the consumer counter `get` and the producer counter
/// `put` (free-running, wrapping).
pub(crate) const fn used(get: u32, put: u32) -> u32 {
    put.wrapping_sub(get)
}

/// Rounds a requested queue depth up to the ring size: the next power of two, at least 1.
/// Returns `None` if `n` exceeds `max` (before rounding) or the rounded size does not fit.
pub(crate) fn ring_size(n: u32, max: u32) -> Option<u32> {
    if n > max {
        return None;
    }
    n.max(1).checked_next_power_of_two()
}

/// Returns whether `s` is owned by the consumer (`VALID` set), with acquire ordering: what
/// [`Ring::is_valid`] returns for its counter.
pub(crate) fn slot_valid<E: FromBytes + IntoBytes + Immutable>(s: &Slot<'_, E>) -> bool {
    // The `VALID` bit is in the first byte of `flags` (a `u8` in CQEs).
    let f = s.load_acquire_u16(wqe::FLAGS_OFFSET).unwrap_or(0);
    f.to_ne_bytes()[0] & (wqe::flags::VALID as u8) != 0
}

/// A ring of elements of type `E`, followed by `extra` bytes (the CQ arming word).
///
/// # Invariants
///
/// `size` is a power of two and the buffer holds `size` elements plus the extra bytes.
pub(crate) struct Ring<E> {
    buf: RingBuf,
    size: u32,
    _p: PhantomData<E>,
}

impl<E: FromBytes + IntoBytes + Immutable> Ring<E> {
    /// Allocates a zeroed ring of `size` slots (a power of two) plus `extra` bytes, mapped into
    /// the user context of `udata` if given.
    pub(crate) fn new(size: u32, extra: usize, udata: Option<&Udata>) -> Result<Self> {
        if !size.is_power_of_two() {
            return Err(EINVAL);
        }
        let len = (size as usize)
            .checked_mul(core::mem::size_of::<E>())
            .and_then(|l| l.checked_add(extra))
            .ok_or(EINVAL)?;
        let buf = match udata {
            Some(u) => RingBuf::new_user(u, len, crate::abi::FIRST_KEY_PGOFF)?,
            None => RingBuf::new_kernel(len)?,
        };
        Ok(Self {
            buf,
            size,
            _p: PhantomData,
        })
    }

    /// Returns the number of slots.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Returns the `mmap()` key of a user-mapped ring.
    pub(crate) fn mmap_key(&self) -> Option<u64> {
        self.buf.mmap_key()
    }

    fn off(&self, counter: u32) -> usize {
        slot(counter, self.size) as usize * core::mem::size_of::<E>()
    }

    /// Returns the slot of `counter`, bounds-checked once for the accesses to its fields.
    pub(crate) fn slot(&self, counter: u32) -> Option<Slot<'_, E>> {
        self.buf.slot(self.off(counter))
    }

    /// Returns the flags of the slot of `counter`, with acquire ordering.
    pub(crate) fn flags(&self, counter: u32) -> u16 {
        self.buf
            .load_acquire_u16(self.off(counter) + wqe::FLAGS_OFFSET)
            .unwrap_or(0)
    }

    /// Returns whether the slot of `counter` is owned by the consumer (`VALID` set).
    pub(crate) fn is_valid(&self, counter: u32) -> bool {
        // The `VALID` bit is in the first byte of `flags` (a `u8` in CQEs).
        self.flags(counter).to_ne_bytes()[0] & (wqe::flags::VALID as u8) != 0
    }

    /// Copies the element of the slot of `counter` out of the ring.
    pub(crate) fn read(&self, counter: u32) -> Option<E> {
        self.buf.read(self.off(counter))
    }

    /// Writes `e` into the slot of `counter` without publishing it (its `flags` should be 0).
    pub(crate) fn write(&self, counter: u32, e: &E) -> Result {
        self.buf.write(self.off(counter), e)
    }

    /// Publishes the slot of `counter` by storing `flags` (16 bits) with release ordering.
    pub(crate) fn publish16(&self, counter: u32, flags: u16) -> Result {
        self.buf
            .store_release_u16(self.off(counter) + wqe::FLAGS_OFFSET, flags)
    }

    /// Hands the slot of `counter` back to the producer (clears its flags).
    pub(crate) fn release(&self, counter: u32) {
        // Cannot fail: the offset is in bounds and aligned.
        let _ = self.publish16(counter, 0);
    }

    /// Takes the element at the consumer counter `get` into `e`, if its slot is valid, and
    /// moves `get` on; returns whether it did.
    ///
    /// Lock-free for consumers that may race (a queue's engine and a flush): each copies the
    /// element, then claims the slot by moving `get` on with a compare-and-exchange, and only
    /// the winner hands the slot back to the producer, which cannot reuse it before. The
    /// counter is free-running, so a stale copy cannot win (the counter would have to wrap).
    pub(crate) fn take_into(&self, get: &Atomic<u32>, e: &mut E) -> bool {
        loop {
            let g = get.load(Acquire);
            let Some(s) = self.slot(g).filter(slot_valid) else {
                return false;
            };
            s.read_into(e);
            if get.cmpxchg(g, g.wrapping_add(1), Full).is_ok() {
                // Cannot fail: the offset is in the element and aligned.
                let _ = s.store_release_u16(wqe::FLAGS_OFFSET, 0);
                return true;
            }
        }
    }

    /// Returns the 32-bit word `extra_off` bytes after the last slot, with acquire ordering.
    pub(crate) fn extra_u32(&self, extra_off: usize) -> u32 {
        self.buf
            .load_acquire_u32(self.size as usize * core::mem::size_of::<E>() + extra_off)
            .unwrap_or(0)
    }

    /// Exchanges the 32-bit word `extra_off` bytes after the last slot (fully ordered).
    pub(crate) fn xchg_extra_u32(&self, extra_off: usize, v: u32) -> u32 {
        self.buf
            .xchg_u32(
                self.size as usize * core::mem::size_of::<E>() + extra_off,
                v,
            )
            .unwrap_or(0)
    }
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_ring)]
mod tests {
    use super::*;

    #[test]
    fn index_math() {
        assert_eq!(slot(0, 8), 0);
        assert_eq!(slot(9, 8), 1);
        assert_eq!(slot(u32::MAX, 8), 7);
        assert_eq!(slot(u32::MAX.wrapping_add(1), 8), 0);
        assert_eq!(used(5, 5), 0);
        assert_eq!(used(u32::MAX, 3), 4);
        assert_eq!(used(u32::MAX - 1, u32::MAX), 1);
    }

    #[test]
    fn sizes() {
        assert_eq!(ring_size(0, 16), Some(1));
        assert_eq!(ring_size(1, 16), Some(1));
        assert_eq!(ring_size(3, 16), Some(4));
        assert_eq!(ring_size(16, 16), Some(16));
        assert_eq!(ring_size(17, 16), None);
        assert_eq!(ring_size(u32::MAX, u32::MAX), None);
        assert_eq!(ring_size(1 << 31, u32::MAX), Some(1 << 31));
    }

    #[test]
    fn ring_ownership() -> Result {
        let r = Ring::<wqe::Cqe>::new(4, wqe::CQ_CTRL_SIZE, None)?;
        assert_eq!(r.size(), 4);
        assert!(!r.is_valid(0));
        let c = wqe::Cqe {
            id: 0x1234,
            bytes: 7,
            ..Default::default()
        };
        let s = r.slot(5).ok_or(EINVAL)?;
        s.write(&c);
        assert!(!r.is_valid(1) && !slot_valid(&s));
        // CQEs are published with their flags, opcode and status in one word.
        s.store_release_u32(wqe::FLAGS_OFFSET, u32::from_ne_bytes([1, 3, 4, 0]))?;
        assert!(r.is_valid(1) && slot_valid(&s));
        // A field outside the element or misaligned is refused.
        assert_eq!(
            s.load_acquire_u16(core::mem::size_of::<wqe::Cqe>() - 1),
            None
        );
        assert_eq!(s.load_acquire_u16(wqe::FLAGS_OFFSET + 1), None);
        let got = r.read(1).ok_or(EINVAL)?;
        assert_eq!(
            (got.id, got.flags, got.opcode, got.status, got.bytes),
            (0x1234, 1, 3, 4, 7)
        );
        r.release(1);
        assert!(!r.is_valid(1));
        assert_eq!(r.xchg_extra_u32(0, 2), 0);
        assert_eq!(r.extra_u32(0), 2);
        Ok(())
    }

    #[test]
    fn take_in_order() -> Result {
        let r = Ring::<wqe::Rqe>::new(2, 0, None)?;
        let get = Atomic::new(u32::MAX);
        let mut e = wqe::Rqe::default();
        assert!(!r.take_into(&get, &mut e));
        for (k, id) in [(u32::MAX, 10u64), (0, 11)] {
            r.write(
                k,
                &wqe::Rqe {
                    id,
                    ..Default::default()
                },
            )?;
            r.publish16(k, wqe::flags::VALID)?;
        }
        // In counter order across the wrap, each slot handed back once taken.
        assert!(r.take_into(&get, &mut e));
        assert_eq!((e.id, get.load(Acquire)), (10, 0));
        assert!(!r.is_valid(u32::MAX));
        assert!(r.take_into(&get, &mut e));
        assert_eq!((e.id, get.load(Acquire)), (11, 1));
        assert!(!r.take_into(&get, &mut e));
        assert_eq!((e.id, get.load(Acquire)), (11, 1));
        Ok(())
    }
}
