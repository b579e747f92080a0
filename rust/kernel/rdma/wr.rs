// SPDX-License-Identifier: GPL-2.0

//! Work requests (`struct ib_send_wr`, `struct ib_recv_wr`) posted by kernel consumers.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! Work requests arrive as chains of `struct ib_send_wr` / `struct ib_recv_wr` ([`SendWr`],
//! [`RecvWr`]). Their fields are read through accessors; the scatter/gather list is only
//! reachable through [`SendWr::sges`] / [`RecvWr::sges`], which first check the SGE count
//! against the driver's limit, so a driver cannot walk past the consumer's array.
//! Opcode-specific extensions (`struct ib_rdma_wr`, `struct ib_reg_wr`) are only read for the
//! opcodes that carry them.

use super::{
    mr::AccessFlags,
    object::raw_wrapper, //
};
use crate::{
    bindings,
    impl_flags,
    prelude::*, //
};
use core::marker::PhantomData;

/// The error returned by a failed post: the error and the first work request that was not posted.
pub type PostError<'a, W> = (Error, &'a W);

raw_wrapper!(
    /// A send work request (`struct ib_send_wr`), part of a chain.
    SendWr, ib_send_wr
);
raw_wrapper!(
    /// A receive work request (`struct ib_recv_wr`), part of a chain.
    RecvWr, ib_recv_wr
);

/// The opcode of a send work request (`enum ib_wr_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WrOpcode {
    /// `IB_WR_RDMA_WRITE`.
    RdmaWrite = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
    /// `IB_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
    /// `IB_WR_SEND`.
    Send = bindings::ib_wr_opcode_IB_WR_SEND,
    /// `IB_WR_SEND_WITH_IMM`.
    SendWithImm = bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM,
    /// `IB_WR_RDMA_READ`.
    RdmaRead = bindings::ib_wr_opcode_IB_WR_RDMA_READ,
    /// `IB_WR_ATOMIC_CMP_AND_SWP`.
    AtomicCmpAndSwp = bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
    /// `IB_WR_ATOMIC_FETCH_AND_ADD`.
    AtomicFetchAndAdd = bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
    /// `IB_WR_LOCAL_INV`.
    LocalInv = bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
    /// `IB_WR_BIND_MW`.
    BindMw = bindings::ib_wr_opcode_IB_WR_BIND_MW,
    /// `IB_WR_SEND_WITH_INV`.
    SendWithInv = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV,
    /// `IB_WR_LSO`.
    Lso = bindings::ib_wr_opcode_IB_WR_LSO,
    /// `IB_WR_RDMA_READ_WITH_INV`.
    RdmaReadWithInv = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV,
    /// `IB_WR_MASKED_ATOMIC_CMP_AND_SWP`.
    MaskedAtomicCmpAndSwp = bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP,
    /// `IB_WR_MASKED_ATOMIC_FETCH_AND_ADD`.
    MaskedAtomicFetchAndAdd = bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD,
    /// `IB_WR_FLUSH`.
    Flush = bindings::ib_wr_opcode_IB_WR_FLUSH,
    /// `IB_WR_ATOMIC_WRITE`.
    AtomicWrite = bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE,
    /// `IB_WR_REG_MR`.
    RegMr = bindings::ib_wr_opcode_IB_WR_REG_MR,
    /// `IB_WR_REG_MR_INTEGRITY`.
    RegMrIntegrity = bindings::ib_wr_opcode_IB_WR_REG_MR_INTEGRITY,
}

impl TryFrom<u32> for WrOpcode {
    type Error = Error;

    fn try_from(v: u32) -> Result<Self> {
        Ok(match v {
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE => Self::RdmaWrite,
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => Self::RdmaWriteWithImm,
            bindings::ib_wr_opcode_IB_WR_SEND => Self::Send,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM => Self::SendWithImm,
            bindings::ib_wr_opcode_IB_WR_RDMA_READ => Self::RdmaRead,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => Self::AtomicCmpAndSwp,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => Self::AtomicFetchAndAdd,
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV => Self::LocalInv,
            bindings::ib_wr_opcode_IB_WR_BIND_MW => Self::BindMw,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => Self::SendWithInv,
            bindings::ib_wr_opcode_IB_WR_LSO => Self::Lso,
            bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV => Self::RdmaReadWithInv,
            bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP => Self::MaskedAtomicCmpAndSwp,
            bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD => {
                Self::MaskedAtomicFetchAndAdd
            }
            bindings::ib_wr_opcode_IB_WR_FLUSH => Self::Flush,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE => Self::AtomicWrite,
            bindings::ib_wr_opcode_IB_WR_REG_MR => Self::RegMr,
            bindings::ib_wr_opcode_IB_WR_REG_MR_INTEGRITY => Self::RegMrIntegrity,
            _ => return Err(EINVAL),
        })
    }
}

impl_flags!(
    /// The flags of a send work request (`enum ib_send_flags`), possibly with bits no
    /// [`SendWrFlag`] names.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SendWrFlags(u32);

    /// A flag of a send work request.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum SendWrFlag {
        /// Wait for outstanding RDMA Reads and atomics first (`IB_SEND_FENCE`).
        Fence = bindings::ib_send_flags_IB_SEND_FENCE as u32,
        /// Generate a completion (`IB_SEND_SIGNALED`).
        Signaled = bindings::ib_send_flags_IB_SEND_SIGNALED as u32,
        /// Set the solicited event bit (`IB_SEND_SOLICITED`).
        Solicited = bindings::ib_send_flags_IB_SEND_SOLICITED as u32,
        /// The SGEs hold kernel virtual addresses of data to copy at post time
        /// (`IB_SEND_INLINE`).
        Inline = bindings::ib_send_flags_IB_SEND_INLINE as u32,
        /// Offload the IP checksum (`IB_SEND_IP_CSUM`).
        IpCsum = bindings::ib_send_flags_IB_SEND_IP_CSUM as u32,
    }
);

/// A scatter/gather element (`struct ib_sge`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Address (an I/O virtual address within the MR of `lkey`).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

/// An iterator over the SGEs of a work request.
///
/// # Invariants
///
/// `list` points to `n` valid `struct ib_sge`s that stay valid and unchanged for `'a` (they
/// belong to a work request borrowed for `'a`), and `i <= n`.
pub struct Sges<'a> {
    list: *const bindings::ib_sge,
    n: usize,
    i: usize,
    _p: PhantomData<&'a bindings::ib_sge>,
}

impl Iterator for Sges<'_> {
    type Item = Sge;

    fn next(&mut self) -> Option<Sge> {
        if self.i >= self.n {
            return None;
        }
        // SAFETY: `i < n` and `list` points to `n` valid SGEs that live for `'a` (type
        // invariant).
        let s = unsafe { &*self.list.add(self.i) };
        // INVARIANT: `i < n` before the increment.
        self.i += 1;
        Some(Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
    }
}

/// Creates an SGE iterator after checking `num_sge` against `max`.
///
/// # Safety
///
/// If `0 <= num_sge <= max`, `list` must point to `num_sge` valid SGEs that live for `'a`.
unsafe fn sges<'a>(list: *const bindings::ib_sge, num_sge: c_int, max: u32) -> Result<Sges<'a>> {
    let n = usize::try_from(num_sge).map_err(|_| EINVAL)?;
    if n > max as usize || (n > 0 && list.is_null()) {
        return Err(EINVAL);
    }
    // INVARIANT: `0 <= n <= max`, so per the safety requirements `list` points to `n` valid SGEs
    // for `'a` (or `n` is 0).
    Ok(Sges {
        list,
        n,
        i: 0,
        _p: PhantomData,
    })
}

/// The remote buffer of an RDMA Read or Write (`struct ib_rdma_wr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdmaTarget {
    /// Remote address.
    pub remote_addr: u64,
    /// Remote STag.
    pub rkey: u32,
}

/// The parameters of an atomic operation (`struct ib_atomic_wr`). The original value is
/// returned to the work request's first SGE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicParams {
    /// Remote address of the 64-bit target.
    pub remote_addr: u64,
    /// Remote STag.
    pub rkey: u32,
    /// Compare value (compare and swap) or the value to add (fetch and add).
    pub compare_add: u64,
    /// Swap value (compare and swap).
    pub swap: u64,
    /// Compare mask (masked compare and swap), or the field boundaries (masked fetch and add).
    pub compare_add_mask: u64,
    /// Swap mask (masked compare and swap).
    pub swap_mask: u64,
}

/// The parameters of a fast registration (`struct ib_reg_wr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegParams {
    /// The MR's `struct ib_mr` (to be looked up by the MR code; never dereferenced here).
    pub mr: *mut bindings::ib_mr,
    /// The new key.
    pub key: u32,
    /// Access flags.
    pub access: AccessFlags,
}

impl SendWr {
    /// Returns the next work request of the chain.
    pub fn next(&self) -> Option<&SendWr> {
        // SAFETY: By the type invariant the struct is valid; the chain it links to is valid for
        // as long as the first request is.
        let next = unsafe { (*self.as_raw()).next };
        // SAFETY: See above; only shared references to the chain are handed out.
        (!next.is_null()).then(|| unsafe { SendWr::from_raw(next) })
    }

    /// Returns the opcode, or `None` for an opcode [`WrOpcode`] does not know.
    pub fn opcode(&self) -> Option<WrOpcode> {
        // SAFETY: By the type invariant the struct is valid.
        WrOpcode::try_from(unsafe { (*self.as_raw()).opcode }).ok()
    }

    /// Returns the work request id.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: By the type invariant the struct is valid; `wr_id` is the union member kernel
        // consumers set (or `wr_cqe`, whose bits are reported back unchanged).
        unsafe { (*self.as_raw()).__bindgen_anon_1.wr_id }
    }

    /// Returns the send flags.
    pub fn send_flags(&self) -> SendWrFlags {
        // SAFETY: By the type invariant the struct is valid.
        SendWrFlags(unsafe { (*self.as_raw()).send_flags } as u32)
    }

    /// Returns the number of SGEs as given by the consumer (may be negative or too large).
    pub fn num_sge(&self) -> i32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).num_sge }
    }

    /// Returns the SGEs, or `EINVAL` if there are more than `max` (or a negative count).
    pub fn sges(&self, max: u32) -> Result<Sges<'_>> {
        // SAFETY: By the type invariant the struct is valid; the consumer's contract is that
        // `sg_list` holds `num_sge` entries for the duration of the post.
        unsafe { sges((*self.as_raw()).sg_list, (*self.as_raw()).num_sge, max) }
    }

    /// Returns the immediate data (network byte order), for opcodes with immediate data.
    pub fn imm_data(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid; both union members are `u32`.
        unsafe { (*self.as_raw()).ex.imm_data }
    }

    /// Returns the STag to invalidate, for `IB_WR_SEND_WITH_INV` and `IB_WR_LOCAL_INV`.
    pub fn invalidate_rkey(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid; both union members are `u32`.
        unsafe { (*self.as_raw()).ex.invalidate_rkey }
    }

    /// Returns the remote buffer for RDMA Read and Write opcodes, `None` for others.
    pub fn rdma(&self) -> Option<RdmaTarget> {
        match self.opcode()? {
            WrOpcode::RdmaWrite
            | WrOpcode::RdmaWriteWithImm
            | WrOpcode::RdmaRead
            | WrOpcode::RdmaReadWithInv
            | WrOpcode::Flush
            | WrOpcode::AtomicWrite => {
                // SAFETY: For these opcodes the consumer's contract is that the work request is
                // the `wr` field (at offset 0) of a `struct ib_rdma_wr` (ib_core defines no
                // other one for `IB_WR_FLUSH` and `IB_WR_ATOMIC_WRITE`; drivers that take them
                // from kernel consumers document this).
                let r = unsafe { &*self.as_raw().cast::<bindings::ib_rdma_wr>() };
                Some(RdmaTarget {
                    remote_addr: r.remote_addr,
                    rkey: r.rkey,
                })
            }
            _ => None,
        }
    }

    /// Returns the parameters of the atomic opcodes (`IB_WR_ATOMIC_*` and
    /// `IB_WR_MASKED_ATOMIC_*`), `None` for others.
    pub fn atomic(&self) -> Option<AtomicParams> {
        match self.opcode()? {
            WrOpcode::AtomicCmpAndSwp
            | WrOpcode::AtomicFetchAndAdd
            | WrOpcode::MaskedAtomicCmpAndSwp
            | WrOpcode::MaskedAtomicFetchAndAdd => {
                // SAFETY: For these opcodes the consumer's contract is that the work request is
                // the `wr` field (at offset 0) of a `struct ib_atomic_wr`.
                let a = unsafe { &*self.as_raw().cast::<bindings::ib_atomic_wr>() };
                Some(AtomicParams {
                    remote_addr: a.remote_addr,
                    rkey: a.rkey,
                    compare_add: a.compare_add,
                    swap: a.swap,
                    compare_add_mask: a.compare_add_mask,
                    swap_mask: a.swap_mask,
                })
            }
            _ => None,
        }
    }

    /// Returns the registration parameters for `IB_WR_REG_MR`, `None` for other opcodes.
    pub fn reg(&self) -> Option<RegParams> {
        if self.opcode() != Some(WrOpcode::RegMr) {
            return None;
        }
        // SAFETY: For `IB_WR_REG_MR` the consumer's contract is that the work request is the
        // `wr` field (at offset 0) of a `struct ib_reg_wr`.
        let r = unsafe { &*self.as_raw().cast::<bindings::ib_reg_wr>() };
        Some(RegParams {
            mr: r.mr,
            key: r.key,
            access: AccessFlags::from_raw(r.access as u32),
        })
    }

    /// Copies the data of an inline work request (`IB_SEND_INLINE`) into `dst` and returns its
    /// length.
    ///
    /// For inline sends the SGE addresses are kernel virtual addresses (no lkey), possibly on
    /// the consumer's (vmalloc'ed) stack. Fails with `EINVAL` if the WR is not inline, has more
    /// than `max_sge` SGEs, or its data does not fit `dst`, and with `EFAULT` if an SGE does not
    /// name readable kernel memory (`copy_from_kernel_nofault()`: user addresses are refused and
    /// faults are caught rather than oopsing).
    pub fn copy_inline(&self, dst: &mut [u8], max_sge: u32) -> Result<usize> {
        if !self.send_flags().contains(SendWrFlag::Inline) {
            return Err(EINVAL);
        }
        self.copy_sge_data(dst, max_sge)
    }

    /// Copies the bytes the SGEs (at most `max_sge`) address, taken as kernel virtual
    /// addresses as for inline data, into `dst`, whatever the send flags; for operations whose
    /// few bytes are taken when posted (the 8 bytes of an Atomic Write). Returns the number of
    /// bytes; errors as [`SendWr::copy_inline`].
    pub fn copy_sge_data(&self, dst: &mut [u8], max_sge: u32) -> Result<usize> {
        let mut off = 0usize;
        for sge in self.sges(max_sge)? {
            let len = sge.length as usize;
            let end = off.checked_add(len).ok_or(EINVAL)?;
            let d = dst.get_mut(off..end).ok_or(EINVAL)?;
            if len > 0 {
                // SAFETY: `d` is valid for writes of `len` bytes. The source is only read by
                // `copy_from_kernel_nofault()`, which refuses addresses that are not kernel
                // addresses and returns an error instead of faulting.
                let r = unsafe {
                    bindings::copy_from_kernel_nofault(
                        d.as_mut_ptr().cast(),
                        sge.addr as usize as *const core::ffi::c_void,
                        len,
                    )
                };
                if r != 0 {
                    return Err(EFAULT);
                }
            }
            off = end;
        }
        Ok(off)
    }

    /// Iterates over this work request and the rest of its chain.
    pub fn iter(&self) -> impl Iterator<Item = &SendWr> {
        core::iter::successors(Some(self), |w| w.next())
    }
}

impl RecvWr {
    /// Returns the next work request of the chain.
    pub fn next(&self) -> Option<&RecvWr> {
        // SAFETY: By the type invariant the struct is valid; the chain it links to is valid for
        // as long as the first request is.
        let next = unsafe { (*self.as_raw()).next };
        // SAFETY: See above; only shared references to the chain are handed out.
        (!next.is_null()).then(|| unsafe { RecvWr::from_raw(next) })
    }

    /// Returns the work request id.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).__bindgen_anon_1.wr_id }
    }

    /// Returns the number of SGEs as given by the consumer.
    pub fn num_sge(&self) -> i32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).num_sge }
    }

    /// Returns the SGEs, or `EINVAL` if there are more than `max` (or a negative count).
    pub fn sges(&self, max: u32) -> Result<Sges<'_>> {
        // SAFETY: By the type invariant the struct is valid; the consumer's contract is that
        // `sg_list` holds `num_sge` entries for the duration of the post.
        unsafe { sges((*self.as_raw()).sg_list, (*self.as_raw()).num_sge, max) }
    }

    /// Iterates over this work request and the rest of its chain.
    pub fn iter(&self) -> impl Iterator<Item = &RecvWr> {
        core::iter::successors(Some(self), |w| w.next())
    }
}
