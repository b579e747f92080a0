// SPDX-License-Identifier: GPL-2.0

//! Completion queues.
//!
//! A CQ is a ring of `siw_cqe` ([`Cqe`]) followed by the `siw_cq_ctrl` arming word, as in
//! `siw`. For user CQs the ring is mapped into the process, which reaps completions itself and
//! arms the CQ by writing the arming word; for kernel CQs, [`poll`] reaps them. Producers (the
//! QPs' send and receive paths) call [`RsiwCq::complete`], which writes the CQE, publishes it,
//! and calls the consumer's completion handler if the CQ was armed for it.

use crate::{
    abi::UrespCreateCq,
    device::{
        RsiwDevice,
        RsiwUcontext, //
    },
    limits,
    ring::{
        self,
        Ring, //
    },
    wqe::{
        self,
        op,
        status,
        Completion,
        Consumer,
        Cqe, //
    },
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{
        attr::EventType,
        cq::{
            Cq,
            CqCreateFlags,
            CqInitAttr,
            CqNotifyFlag,
            CqNotifyFlags,
            QpToken,
            Wc,
            WcOpcode,
            WcStatus,
            WorkCompletion, //
        },
        device::Device,
        qp::Qp,
        udata::Udata,
    },
    sync::SpinLockIrq,
};

/// `SIW_NOTIFY_*` arming flags in the arming word.
mod arm {
    /// Not armed.
    pub(super) const NOT: u32 = 0;
    /// Notify on the next solicited completion.
    pub(super) const SOLICITED: u32 = 1;
    /// Notify on the next completion.
    pub(super) const NEXT_COMPLETION: u32 = 2;
}

/// Producer and consumer state of a CQ.
struct CqState {
    /// Producer counter.
    put: u32,
    /// Consumer counter (kernel CQs only; user space keeps its own).
    get: u32,
    /// The QP of each slot's completion, for `ib_wc.qp` (kernel CQs only).
    qps: KVVec<Option<QpToken>>,
}

/// Per-CQ data.
#[pin_data]
pub(crate) struct RsiwCq {
    /// The ring of CQEs followed by the arming word.
    ring: Ring<Cqe>,
    /// Who reads the completions: a kernel ULP, or a user context and its ABI extensions.
    who: Consumer,
    #[pin]
    state: SpinLockIrq<CqState>,
}

/// The `siw_cq_ctrl` offset after the last CQE.
const CTRL: usize = 0;

impl RsiwCq {
    /// Creates the data of a new CQ (`siw_create_cq()`).
    pub(crate) fn new(
        dev: &Device<RsiwDevice>,
        attr: &CqInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error> {
        let who = match udata {
            Some(_) => Consumer::User(RsiwUcontext::ext_of(dev, udata)),
            None => Consumer::Kernel,
        };
        let res = Self::alloc(dev, attr, udata);
        pin_init::pin_init_scope(move || {
            let (ring, qps) = res?;
            Ok(try_pin_init!(Self {
                ring,
                who,
                state <- new_spinlock_irq!(CqState { put: 0, get: 0, qps }, "rsiw_cq"),
            }))
        })
    }

    /// Checks the attributes, takes a CQ slot and allocates the ring.
    fn alloc(
        dev: &Device<RsiwDevice>,
        attr: &CqInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(Ring<Cqe>, KVVec<Option<QpToken>>)> {
        if attr.flags() != CqCreateFlags::empty() {
            return Err(EOPNOTSUPP);
        }
        let n = attr.cqe();
        if !(1..=limits::MAX_CQE).contains(&n) {
            return Err(EINVAL);
        }
        let size = ring::ring_size(n, limits::MAX_CQE).ok_or(EINVAL)?;
        if let Some(u) = udata {
            // The response must fit, as in siw.
            if u.outlen() < core::mem::size_of::<UrespCreateCq>() {
                return Err(EINVAL);
            }
        }
        dev.cqs.take()?;
        let r = (|| {
            let ring = Ring::<Cqe>::new(size, wqe::CQ_CTRL_SIZE, udata)?;
            let mut qps = KVVec::new();
            if udata.is_none() {
                qps.resize(size as usize, None, GFP_KERNEL)?;
            }
            let id = dev.next_cq_id();
            if let Some(u) = udata {
                u.respond(&UrespCreateCq {
                    cq_id: id,
                    num_cqe: size,
                    cq_key: ring.mmap_key().unwrap_or(crate::abi::INVAL_UOBJ_KEY),
                })?;
            }
            Ok((ring, qps))
        })();
        if r.is_err() {
            dev.cqs.put();
        }
        r
    }

    /// Returns the number of entries.
    pub(crate) fn size(&self) -> u32 {
        self.ring.size()
    }

    /// Posts a completion for a work request of `qp`. Calls the completion handler if the CQ is
    /// armed for it. If the CQ is full, reports `IB_EVENT_CQ_ERR` and fails with `ENOMEM`.
    pub(crate) fn complete(cq: &Cq<RsiwDevice>, qp: &Qp<RsiwDevice>, c: &Completion) -> Result {
        let this: &RsiwCq = cq;
        let notify = {
            let mut st = this.state.lock();
            let put = st.put;
            // One bounds check for the element's accesses below.
            let slot = this.ring.slot(put).ok_or(EINVAL)?;
            if ring::slot_valid(&slot) {
                drop(st);
                cq.dispatch_event(EventType::CQ_ERR);
                return Err(ENOMEM);
            }
            let mut fl = wqe::flags::VALID as u8;
            let mut imm = match c.inval_stag {
                Some(s) => {
                    fl |= wqe::flags::REM_INVAL as u8;
                    u64::from(s)
                }
                None => 0,
            };
            // The CQ of a legacy user context sees only what the original siw ABI defines
            // (the stock provider indexes its opcode and status tables unchecked and ignores
            // the immediate); kernel CQs and extended contexts see everything
            // (`Documentation/infiniband/rsiw-abi.rst`).
            let (opcode, wc_status) = if this.who.user() && !this.who.extended() {
                (op::for_user(c.opcode), status::for_legacy(c.status))
            } else {
                if let Some(v) = c.imm {
                    fl |= wqe::flags::WITH_IMM as u8;
                    imm = wqe::imm_to_cqe(v);
                }
                (c.opcode, c.status)
            };
            let cqe = Cqe {
                id: c.id,
                flags: 0,
                opcode,
                status: wc_status,
                bytes: c.bytes,
                imm_data: imm,
                qp_id: u64::from(qp.qp_num()),
            };
            slot.write(&cqe);
            if let Some(t) = st.qps.get_mut(ring::slot(put, this.ring.size()) as usize) {
                *t = Some(qp.token());
            }
            let st16 = wc_status.to_ne_bytes();
            slot.store_release_u32(
                wqe::FLAGS_OFFSET,
                u32::from_ne_bytes([fl, opcode, st16[0], st16[1]]),
            )?;
            st.put = put.wrapping_add(1);
            this.notify_now(c.solicited)
        };
        if notify {
            cq.notify();
        }
        Ok(())
    }

    /// Returns whether the consumer asked to be notified of this completion, and disarms the
    /// CQ if so (one-shot, `siw_cq_notify_now()`).
    fn notify_now(&self, solicited: bool) -> bool {
        let armed = self.ring.extra_u32(CTRL);
        if armed & arm::NEXT_COMPLETION != 0 || (armed & arm::SOLICITED != 0 && solicited) {
            self.ring.xchg_extra_u32(CTRL, arm::NOT);
            return true;
        }
        false
    }

    /// Arms the CQ (`siw_req_notify_cq()`). Returns `true` if missed events were to be reported
    /// and completions are pending.
    pub(crate) fn req_notify(cq: &Cq<RsiwDevice>, flags: CqNotifyFlags) -> Result<bool> {
        let this: &RsiwCq = cq;
        let v = if flags.solicited_only() {
            arm::SOLICITED
        } else {
            arm::SOLICITED | arm::NEXT_COMPLETION
        };
        this.ring.xchg_extra_u32(CTRL, v);
        if flags.contains(CqNotifyFlag::ReportMissedEvents) {
            let st = this.state.lock();
            return Ok(this.who.user() || this.ring.is_valid(st.get));
        }
        Ok(false)
    }

    /// Reaps up to `wc.len()` completions (`siw_poll_cq()`).
    pub(crate) fn poll(cq: &Cq<RsiwDevice>, wc: &mut [Wc]) -> Result<usize> {
        let this: &RsiwCq = cq;
        let mut st = this.state.lock();
        let mut n = 0;
        for w in wc.iter_mut() {
            let get = st.get;
            if !this.ring.is_valid(get) {
                break;
            }
            let Some(cqe) = this.ring.read(get) else {
                break;
            };
            let idx = ring::slot(get, this.ring.size()) as usize;
            let qp = st.qps.get_mut(idx).and_then(|t| t.take());
            w.write(&to_wc(&cqe, qp));
            this.ring.release(get);
            st.get = get.wrapping_add(1);
            n += 1;
        }
        Ok(n)
    }
}

/// Converts a CQE into a work completion; opcodes and status values written by a hostile user
/// are sanitised (`siw_reap_cqe()`).
fn to_wc(cqe: &Cqe, qp: Option<QpToken>) -> WorkCompletion {
    let opcode = match cqe.opcode {
        op::WRITE | op::WRITE_WITH_IMM => Some(WcOpcode::RDMA_WRITE),
        op::READ | op::READ_LOCAL_INV => Some(WcOpcode::RDMA_READ),
        op::SEND | op::SEND_WITH_IMM | op::SEND_REMOTE_INV => Some(WcOpcode::SEND),
        op::FETCH_AND_ADD => Some(WcOpcode::FETCH_ADD),
        op::COMP_AND_SWAP => Some(WcOpcode::COMP_SWAP),
        op::MASKED_FETCH_AND_ADD => Some(WcOpcode::MASKED_FETCH_ADD),
        op::MASKED_COMP_AND_SWAP => Some(WcOpcode::MASKED_COMP_SWAP),
        op::RECEIVE => Some(WcOpcode::RECV),
        op::RECV_WRITE_IMM => Some(WcOpcode::RECV_RDMA_WITH_IMM),
        op::INVAL_STAG => Some(WcOpcode::LOCAL_INV),
        op::REG_MR => Some(WcOpcode::REG_MR),
        op::FLUSH => Some(WcOpcode::FLUSH),
        op::ATOMIC_WRITE => Some(WcOpcode::ATOMIC_WRITE),
        _ => None,
    };
    let st = match cqe.status {
        status::SUCCESS => Some(WcStatus::SUCCESS),
        status::LOC_LEN_ERR => Some(WcStatus::LOC_LEN_ERR),
        status::LOC_PROT_ERR => Some(WcStatus::LOC_PROT_ERR),
        status::LOC_QP_OP_ERR => Some(WcStatus::LOC_QP_OP_ERR),
        status::WR_FLUSH_ERR => Some(WcStatus::WR_FLUSH_ERR),
        status::BAD_RESP_ERR => Some(WcStatus::BAD_RESP_ERR),
        status::LOC_ACCESS_ERR => Some(WcStatus::LOC_ACCESS_ERR),
        status::REM_ACCESS_ERR => Some(WcStatus::REM_ACCESS_ERR),
        status::REM_INV_REQ_ERR => Some(WcStatus::REM_INV_REQ_ERR),
        status::GENERAL_ERR => Some(WcStatus::GENERAL_ERR),
        status::REM_OP_ERR => Some(WcStatus::REM_OP_ERR),
        _ => None,
    };
    let (opcode, st) = match (opcode, st) {
        (Some(o), Some(s)) => (o, s),
        _ => (WcOpcode::SEND, WcStatus::GENERAL_ERR),
    };
    let inval = u16::from(cqe.flags) & wqe::flags::REM_INVAL != 0;
    let imm = u16::from(cqe.flags) & wqe::flags::WITH_IMM != 0;
    WorkCompletion {
        wr_id: cqe.id,
        status: st,
        opcode,
        vendor_err: 0,
        byte_len: cqe.bytes,
        qp,
        imm_data: imm.then_some(wqe::imm_from_cqe(cqe.imm_data)),
        invalidate_rkey: if inval {
            Some(cqe.imm_data as u32)
        } else {
            None
        },
    }
}
