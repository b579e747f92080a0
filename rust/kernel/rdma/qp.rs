// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`), their attributes and work requests.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! Work requests posted by kernel consumers arrive as chains of `struct ib_send_wr` /
//! `struct ib_recv_wr` ([`SendWr`], [`RecvWr`]). Their fields are read through accessors; the
//! scatter/gather list is only reachable through [`SendWr::sges`] / [`RecvWr::sges`], which
//! first check the SGE count against the driver's limit, so a driver cannot walk past the
//! consumer's array. Opcode-specific extensions (`struct ib_rdma_wr`, `struct ib_reg_wr`) are
//! only read for the opcodes that carry them.

use super::{
    attr::EventType,
    cq::QpToken,
    device::{
        Device,
        Driver,
        VTable, //
    },
    object::{
        Cq,
        Pd,
        Qp,
        QpAttr,
        QpInitAttr,
        RecvWr,
        SendWr,
        Srq, //
    },
};
use crate::{
    bindings,
    error::from_result,
    prelude::*, //
};

/// QP states (`enum ib_qp_state`).
pub mod state {
    use crate::bindings;

    /// `IB_QPS_RESET`.
    pub const RESET: u32 = bindings::ib_qp_state_IB_QPS_RESET;
    /// `IB_QPS_INIT`.
    pub const INIT: u32 = bindings::ib_qp_state_IB_QPS_INIT;
    /// `IB_QPS_RTR`.
    pub const RTR: u32 = bindings::ib_qp_state_IB_QPS_RTR;
    /// `IB_QPS_RTS`.
    pub const RTS: u32 = bindings::ib_qp_state_IB_QPS_RTS;
    /// `IB_QPS_SQD`.
    pub const SQD: u32 = bindings::ib_qp_state_IB_QPS_SQD;
    /// `IB_QPS_SQE`.
    pub const SQE: u32 = bindings::ib_qp_state_IB_QPS_SQE;
    /// `IB_QPS_ERR`.
    pub const ERR: u32 = bindings::ib_qp_state_IB_QPS_ERR;
}

/// QP attribute mask bits (`enum ib_qp_attr_mask`).
pub mod attr_mask {
    use crate::bindings;

    /// `IB_QP_STATE`.
    pub const STATE: i32 = bindings::ib_qp_attr_mask_IB_QP_STATE as i32;
    /// `IB_QP_CUR_STATE`.
    pub const CUR_STATE: i32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE as i32;
    /// `IB_QP_ACCESS_FLAGS`.
    pub const ACCESS_FLAGS: i32 = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS as i32;
    /// `IB_QP_MAX_QP_RD_ATOMIC`.
    pub const MAX_QP_RD_ATOMIC: i32 = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC as i32;
    /// `IB_QP_MAX_DEST_RD_ATOMIC`.
    pub const MAX_DEST_RD_ATOMIC: i32 = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC as i32;
    /// All standard bits (`IB_QP_ATTR_STANDARD_BITS`).
    pub const STANDARD_BITS: i32 = bindings::ib_qp_attr_mask_IB_QP_ATTR_STANDARD_BITS as i32;
}

/// Send work request opcodes (`enum ib_wr_opcode`).
pub mod wr_opcode {
    use crate::bindings;

    /// `IB_WR_RDMA_WRITE`.
    pub const RDMA_WRITE: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE;
    /// `IB_WR_RDMA_WRITE_WITH_IMM`.
    pub const RDMA_WRITE_WITH_IMM: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM;
    /// `IB_WR_SEND`.
    pub const SEND: u32 = bindings::ib_wr_opcode_IB_WR_SEND;
    /// `IB_WR_SEND_WITH_IMM`.
    pub const SEND_WITH_IMM: u32 = bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM;
    /// `IB_WR_RDMA_READ`.
    pub const RDMA_READ: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_READ;
    /// `IB_WR_SEND_WITH_INV`.
    pub const SEND_WITH_INV: u32 = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV;
    /// `IB_WR_RDMA_READ_WITH_INV`.
    pub const RDMA_READ_WITH_INV: u32 = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV;
    /// `IB_WR_LOCAL_INV`.
    pub const LOCAL_INV: u32 = bindings::ib_wr_opcode_IB_WR_LOCAL_INV;
    /// `IB_WR_REG_MR`.
    pub const REG_MR: u32 = bindings::ib_wr_opcode_IB_WR_REG_MR;
    /// `IB_WR_ATOMIC_CMP_AND_SWP`.
    pub const ATOMIC_CMP_AND_SWP: u32 = bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP;
    /// `IB_WR_ATOMIC_FETCH_AND_ADD`.
    pub const ATOMIC_FETCH_AND_ADD: u32 = bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD;
    /// `IB_WR_FLUSH`.
    pub const FLUSH: u32 = bindings::ib_wr_opcode_IB_WR_FLUSH;
    /// `IB_WR_ATOMIC_WRITE`.
    pub const ATOMIC_WRITE: u32 = bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE;
}

/// Send flags (`enum ib_send_flags`).
pub mod send_flags {
    use crate::bindings;

    /// `IB_SEND_FENCE`.
    pub const FENCE: u32 = bindings::ib_send_flags_IB_SEND_FENCE as u32;
    /// `IB_SEND_SIGNALED`.
    pub const SIGNALED: u32 = bindings::ib_send_flags_IB_SEND_SIGNALED as u32;
    /// `IB_SEND_SOLICITED`.
    pub const SOLICITED: u32 = bindings::ib_send_flags_IB_SEND_SOLICITED as u32;
    /// `IB_SEND_INLINE`.
    pub const INLINE: u32 = bindings::ib_send_flags_IB_SEND_INLINE as u32;
}

/// The QP type of an RC QP (`IB_QPT_RC`).
pub const QPT_RC: u32 = bindings::ib_qp_type_IB_QPT_RC;

/// Work queue capabilities (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Inline data bytes per send work request.
    pub max_inline_data: u32,
}

impl QpCap {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write_to(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

impl QpInitAttr {
    /// Returns the requested capabilities.
    pub fn cap(&self) -> QpCap {
        // SAFETY: By the type invariant the struct is valid.
        QpCap::from_raw(unsafe { &(*self.as_raw()).cap })
    }

    /// Reports the capabilities actually provided back to the consumer.
    pub fn set_cap(&mut self, cap: QpCap) {
        // SAFETY: By the type invariant the struct is valid and we have exclusive access.
        cap.write_to(unsafe { &mut (*self.as_raw()).cap });
    }

    /// Returns the signalling type: `Some(true)` if every send WR generates a completion
    /// (`IB_SIGNAL_ALL_WR`), `Some(false)` for `IB_SIGNAL_REQ_WR`, `None` for anything else.
    pub fn sq_sig_all(&self) -> Option<bool> {
        // SAFETY: By the type invariant the struct is valid.
        match unsafe { (*self.as_raw()).sq_sig_type } {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR => Some(true),
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR => Some(false),
            _ => None,
        }
    }

    /// Returns whether a send CQ, a receive CQ and an SRQ were given.
    pub fn has_cqs_srq(&self) -> (bool, bool, bool) {
        // SAFETY: By the type invariant the struct is valid.
        let a = unsafe { &*self.as_raw() };
        (!a.send_cq.is_null(), !a.recv_cq.is_null(), !a.srq.is_null())
    }
}

impl QpAttr {
    /// Returns the access flags (`IB_ACCESS_*`), valid with `IB_QP_ACCESS_FLAGS`.
    pub fn qp_access_flags(&self) -> i32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).qp_access_flags }
    }

    /// Returns the assumed current state, valid with `IB_QP_CUR_STATE`.
    pub fn cur_qp_state(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).cur_qp_state }
    }

    /// Returns the outbound RDMA Read limit (ORD), valid with `IB_QP_MAX_QP_RD_ATOMIC`.
    pub fn max_rd_atomic(&self) -> u8 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).max_rd_atomic }
    }

    /// Returns the inbound RDMA Read limit (IRD), valid with `IB_QP_MAX_DEST_RD_ATOMIC`.
    pub fn max_dest_rd_atomic(&self) -> u8 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).max_dest_rd_atomic }
    }
}

/// The result of a QP query.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpQuery {
    /// The current state (`IB_QPS_*`).
    pub state: u32,
    /// The capabilities.
    pub cap: QpCap,
    /// The path MTU (`enum ib_mtu`).
    pub path_mtu: u32,
    /// Outbound RDMA Read limit (ORD).
    pub max_rd_atomic: u8,
    /// Inbound RDMA Read limit (IRD).
    pub max_dest_rd_atomic: u8,
    /// Access flags (`IB_ACCESS_*`).
    pub qp_access_flags: i32,
    /// Whether every send WR generates a completion.
    pub sq_sig_all: bool,
}

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
pub struct Sges<'a> {
    list: *const bindings::ib_sge,
    n: usize,
    i: usize,
    _p: core::marker::PhantomData<&'a ()>,
}

impl Iterator for Sges<'_> {
    type Item = Sge;

    fn next(&mut self) -> Option<Sge> {
        if self.i >= self.n {
            return None;
        }
        // SAFETY: `list` points to `n` valid SGEs (checked when the iterator was created and
        // guaranteed by the consumer's contract), which live as long as the work request.
        let s = unsafe { &*self.list.add(self.i) };
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
    Ok(Sges {
        list,
        n,
        i: 0,
        _p: core::marker::PhantomData,
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

/// The parameters of a fast registration (`struct ib_reg_wr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegParams {
    /// The MR's `struct ib_mr` (to be looked up by the MR code; never dereferenced here).
    pub mr: *mut bindings::ib_mr,
    /// The new key.
    pub key: u32,
    /// Access flags (`IB_ACCESS_*`).
    pub access: i32,
}

impl SendWr {
    /// Returns the work request id.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: By the type invariant the struct is valid; `wr_id` is the union member kernel
        // consumers set (or `wr_cqe`, whose bits are reported back unchanged).
        unsafe { (*self.as_raw()).__bindgen_anon_1.wr_id }
    }

    /// Returns the send flags (`IB_SEND_*`).
    pub fn send_flags(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).send_flags as u32 }
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
        match self.opcode() {
            wr_opcode::RDMA_WRITE
            | wr_opcode::RDMA_WRITE_WITH_IMM
            | wr_opcode::RDMA_READ
            | wr_opcode::RDMA_READ_WITH_INV => {
                // SAFETY: For these opcodes the consumer's contract is that the work request is
                // the `wr` field (at offset 0) of a `struct ib_rdma_wr`.
                let r = unsafe { &*self.as_raw().cast::<bindings::ib_rdma_wr>() };
                Some(RdmaTarget {
                    remote_addr: r.remote_addr,
                    rkey: r.rkey,
                })
            }
            _ => None,
        }
    }

    /// Returns the registration parameters for `IB_WR_REG_MR`, `None` for other opcodes.
    pub fn reg(&self) -> Option<RegParams> {
        if self.opcode() != wr_opcode::REG_MR {
            return None;
        }
        // SAFETY: For `IB_WR_REG_MR` the consumer's contract is that the work request is the
        // `wr` field (at offset 0) of a `struct ib_reg_wr`.
        let r = unsafe { &*self.as_raw().cast::<bindings::ib_reg_wr>() };
        Some(RegParams {
            mr: r.mr,
            key: r.key,
            access: r.access,
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
        if self.send_flags() & send_flags::INLINE == 0 {
            return Err(EINVAL);
        }
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

/// Returns the raw object pointer `p` as a `&Object` of `dev`, if it is set and of that device.
///
/// # Safety
///
/// `p` must be NULL or a live object of kind `K` that stays alive for `'a` (e.g. one that a
/// QP or SRQ holds a use count on, for as long as that QP or SRQ is borrowed).
pub(super) unsafe fn peer<'a, T: Driver, K: super::object::ObjectKind<T>>(
    dev: &Device<T>,
    p: *mut K::Raw,
) -> Option<&'a super::object::Object<T, K>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: Per the safety requirements `p` is live.
    if unsafe { K::device(p) } != dev.as_raw() {
        return None;
    }
    // SAFETY: `p` is an object of this device, hence an `Object<T, K>` created by this driver;
    // the caller guarantees that it stays alive for `'a`.
    Some(unsafe { super::object::Object::<T, K>::from_raw(p) })
}

impl<T: Driver> Qp<T> {
    /// Returns the QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: By the type invariant the QP is live; `qp_num` is set at creation.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// Returns the token that names this QP in work completions.
    pub fn token(&self) -> QpToken {
        QpToken(self.as_raw())
    }

    /// Returns whether the QP belongs to a user context.
    pub fn is_user(&self) -> bool {
        // SAFETY: By the type invariant the QP is live; `uobject` is set before creation.
        !unsafe { (*self.as_raw()).uobject }.is_null()
    }

    /// Returns the send CQ.
    pub fn send_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: ib_core holds a use count on the QP's CQs for the QP's lifetime.
        unsafe { peer::<T, super::object::CqKind>(self.device(), (*self.as_raw()).send_cq) }
    }

    /// Returns the receive CQ.
    pub fn recv_cq(&self) -> Option<&Cq<T>> {
        // SAFETY: ib_core holds a use count on the QP's CQs for the QP's lifetime.
        unsafe { peer::<T, super::object::CqKind>(self.device(), (*self.as_raw()).recv_cq) }
    }

    /// Returns the SRQ, if the QP uses one.
    pub fn srq(&self) -> Option<&Srq<T>> {
        // SAFETY: ib_core holds a use count on the QP's SRQ for the QP's lifetime.
        unsafe { peer::<T, super::object::SrqKind>(self.device(), (*self.as_raw()).srq) }
    }

    /// Returns the PD.
    pub fn pd(&self) -> Option<&Pd<T>> {
        // SAFETY: ib_core holds a use count on the QP's PD for the QP's lifetime.
        unsafe { peer::<T, super::object::PdKind>(self.device(), (*self.as_raw()).pd) }
    }

    /// Reports an asynchronous event (e.g. [`EventType::QP_FATAL`]) to the QP's event handler.
    pub fn dispatch_event(&self, event: EventType) {
        let qp = self.as_raw();
        // SAFETY: By the type invariant the QP is live; its event handler and context are set
        // before creation.
        let (handler, ctx) = unsafe { ((*qp).event_handler, (*qp).qp_context) };
        if let Some(h) = handler {
            let mut ev: bindings::ib_event = pin_init::zeroed();
            ev.device = self.device().as_raw();
            ev.element.qp = qp;
            ev.event = event.as_raw();
            // SAFETY: `ev` is a valid event for this QP; the handler was installed for it.
            unsafe { h(&mut ev, ctx) };
        }
    }
}

impl<T: Driver> VTable<T> {
    /// # Safety
    ///
    /// `qp` is a live QP created by `create_qp_callback`; `attr` and `init` are valid for
    /// writes.
    pub(crate) unsafe extern "C" fn query_qp_callback(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            if attr.is_null() || init.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: Per the safety requirements.
            let obj = unsafe { Qp::<T>::from_raw(qp) };
            let q = T::query_qp(obj, mask)?;
            // SAFETY: `attr` and `init` are valid for writes; `qp` is live.
            unsafe {
                let a = &mut *attr;
                a.qp_state = q.state;
                a.cur_qp_state = q.state;
                a.path_mtu = q.path_mtu;
                a.qp_access_flags = q.qp_access_flags;
                q.cap.write_to(&mut a.cap);
                a.max_rd_atomic = q.max_rd_atomic;
                a.max_dest_rd_atomic = q.max_dest_rd_atomic;
                let i = &mut *init;
                i.qp_type = (*qp).qp_type;
                i.send_cq = (*qp).send_cq;
                i.recv_cq = (*qp).recv_cq;
                i.srq = (*qp).srq;
                q.cap.write_to(&mut i.cap);
                i.sq_sig_type = if q.sq_sig_all {
                    bindings::ib_sig_type_IB_SIGNAL_ALL_WR
                } else {
                    bindings::ib_sig_type_IB_SIGNAL_REQ_WR
                };
            }
            Ok(0)
        })
    }
}
