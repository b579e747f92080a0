// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: a ring of `siw_rqe` shared by the QPs attached to it, with the limit
//! event (`IB_EVENT_SRQ_LIMIT_REACHED`), as in `siw`.

use crate::{
    abi::UrespCreateSrq,
    device::{
        self,
        RsiwDevice, //
    },
    limits,
    ring::{
        self,
        Ring, //
    },
    stag::Rights,
    wqe::{
        build_rqe,
        check_rqe,
        flags,
        Completion,
        Rqe, //
    },
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{
        attr::EventType,
        device::Device,
        srq::{
            Srq,
            SrqAttrFlag,
            SrqAttrMask,
            SrqAttrs,
            SrqInitAttr,
            SrqType, //
        },
        udata::Udata,
        wr::{
            PostError,
            RecvWr, //
        },
    },
    sync::SpinLockIrq,
};

/// Producer and consumer state of an SRQ.
struct SrqState {
    put: u32,
    get: u32,
    /// The limit: the event fires when fewer RQEs than this remain.
    limit: u32,
    /// Whether the limit event is armed.
    armed: bool,
}

/// Per-SRQ data.
#[pin_data]
pub(crate) struct RsiwSrq {
    ring: Ring<Rqe>,
    max_sge: u32,
    user: bool,
    #[pin]
    state: SpinLockIrq<SrqState>,
}

impl RsiwSrq {
    /// Creates the data of a new SRQ (`siw_create_srq()`).
    pub(crate) fn new(
        dev: &Device<RsiwDevice>,
        attr: &mut SrqInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error> {
        let res = Self::alloc(dev, attr, udata);
        let user = udata.is_some();
        pin_init::pin_init_scope(move || {
            let (ring, a) = res?;
            Ok(try_pin_init!(Self {
                ring,
                max_sge: a.max_sge,
                user,
                state <- new_spinlock_irq!(
                    SrqState {
                        put: 0,
                        get: 0,
                        limit: a.srq_limit,
                        armed: a.srq_limit != 0,
                    },
                    "rsiw_srq"
                ),
            }))
        })
    }

    fn alloc(
        dev: &Device<RsiwDevice>,
        attr: &mut SrqInitAttr,
        udata: Option<&Udata>,
    ) -> Result<(Ring<Rqe>, SrqAttrs)> {
        if attr.srq_type() != Ok(SrqType::Basic) {
            return Err(EOPNOTSUPP);
        }
        let a = attr.attr();
        if a.max_wr == 0
            || a.max_wr > limits::MAX_SRQ_WR
            || a.max_sge > limits::MAX_SGE
            || a.srq_limit > a.max_wr
        {
            return Err(EINVAL);
        }
        if let Some(u) = udata {
            if u.outlen() < core::mem::size_of::<UrespCreateSrq>() {
                return Err(EINVAL);
            }
        }
        let size = ring::ring_size(a.max_wr, limits::MAX_SRQ_WR).ok_or(EINVAL)?;
        dev.srqs.take()?;
        let r = (|| {
            let ring = Ring::<Rqe>::new(size, 0, udata)?;
            if let Some(u) = udata {
                u.respond(&UrespCreateSrq {
                    num_rqe: size,
                    pad: 0,
                    srq_key: ring.mmap_key().unwrap_or(crate::abi::INVAL_UOBJ_KEY),
                })?;
            }
            Ok(ring)
        })();
        let ring = r.inspect_err(|_: &Error| dev.srqs.put())?;
        let out = SrqAttrs { max_wr: size, ..a };
        attr.set_attr(out);
        Ok((ring, out))
    }

    /// Modifies the SRQ (`siw_modify_srq()`): arms or disarms the limit event; resizing is not
    /// supported (`EOPNOTSUPP`).
    pub(crate) fn modify(&self, attr: &SrqAttrs, mask: SrqAttrMask) -> Result {
        if mask.has_unknown() {
            return Err(EINVAL);
        }
        if mask.contains(SrqAttrFlag::MaxWr) {
            return Err(EOPNOTSUPP);
        }
        if mask.contains(SrqAttrFlag::Limit) {
            let mut st = self.state.lock();
            if attr.srq_limit > self.ring.size() {
                return Err(EINVAL);
            }
            st.armed = attr.srq_limit != 0;
            st.limit = attr.srq_limit;
        }
        Ok(())
    }

    /// Returns the SRQ's attributes.
    pub(crate) fn query(&self) -> SrqAttrs {
        SrqAttrs {
            max_wr: self.ring.size(),
            max_sge: self.max_sge,
            srq_limit: self.state.lock().limit,
        }
    }

    /// Posts kernel receive work requests (`siw_post_srq_recv()`): each is validated like a QP's
    /// receive (SGE count, lkeys of the SRQ's PD with local write) before it is queued; the first
    /// bad one fails with `EINVAL` and is returned as `bad_wr`, the ones before it stay posted.
    pub(crate) fn post_recv<'a>(
        srq: &Srq<RsiwDevice>,
        wr: &'a RecvWr,
    ) -> Result<(), PostError<'a, RecvWr>> {
        let this: &RsiwSrq = srq;
        if this.user {
            return Err((EINVAL, wr));
        }
        let pd = srq.pd().map(device::pd_id).ok_or((EINVAL, wr))?;
        let mem = srq.device().mem();
        let mut st = this.state.lock();
        for w in wr.iter() {
            let rqe = build_rqe(w, this.max_sge, |s| {
                mem.check_lkey(pd, s, Rights::LOCAL_WRITE)
            })
            .map_err(|e| (e, w))?;
            let put = st.put;
            if this.ring.flags(put) != 0 {
                return Err((ENOMEM, w));
            }
            this.ring.write(put, &rqe).map_err(|e| (e, w))?;
            this.ring.publish16(put, flags::VALID).map_err(|e| (e, w))?;
            st.put = put.wrapping_add(1);
        }
        Ok(())
    }

    /// Takes the next RQE for the RX engine (`siw_rqe_get()` for SRQs): copied, validated, and
    /// raising the limit event when the SRQ runs low.
    pub(crate) fn next_rqe(srq: &Srq<RsiwDevice>) -> Option<Result<Rqe, Completion>> {
        let this: &RsiwSrq = srq;
        let (rqe, event) = {
            let mut st = this.state.lock();
            let get = st.get;
            if !this.ring.is_valid(get) {
                return None;
            }
            let rqe = this.ring.read(get)?;
            this.ring.release(get);
            st.get = get.wrapping_add(1);
            let mut event = false;
            if st.armed && !this.ring.is_valid(get.wrapping_add(st.limit)) {
                st.armed = false;
                event = true;
            }
            (rqe, event)
        };
        if event {
            srq.dispatch_event(EventType::SRQ_LIMIT_REACHED);
        }
        Some(match check_rqe(&rqe, this.max_sge) {
            Ok(_) => Ok(rqe),
            Err(e) => Err(Completion::recv(rqe.id, e.status())),
        })
    }
}
