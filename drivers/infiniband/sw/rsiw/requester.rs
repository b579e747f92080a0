// SPDX-License-Identifier: GPL-2.0

//! The requester: send queue elements in, messages for the TX engine out.
//!
//! It takes the send queue's elements in order ([`RsiwQp::next_sqe`]: copied and validated),
//! carries out the local operations (Local Invalidate, Fast Registration) in that order, and
//! starts a message for each other one in [`Outgoing`]: Send variants and Write with their
//! payload, and the requests that expect a response (Read), which are first recorded in the
//! ORQ ([`Path::issue`]) within ORD. An element waits while no ORD credit is left, and a
//! fenced one while requests are outstanding (T-03); a response kicks TX then.
//!
//! Send, Send with Solicited Event / Invalidate and Write complete when their last byte was
//! handed to TCP ([`Done::Sq`]); a request completes when its response arrived (the
//! completer).
//!
//! A small Send or Write alone in the send queue (the latency-bound case) is built into one
//! FPDU in one pass instead ([`Requester::quick`]), which the TX engine hands to TCP in one
//! call.

use crate::{
    device::RsiwDevice,
    mem::{
        MemTable,
        Placement,
        RegMr, //
    },
    msg::{
        Done,
        Fatal,
        Outgoing,
        Src, //
    },
    path::{
        read_opcode,
        Issue,
        OrqWr,
        Path, //
    },
    qp::RsiwQp,
    stag::Rights,
    wire::{
        fpdu::{
            mulpdu_from_mss,
            CRC_LEN,
            LEN_LEN, //
        },
        hdr::{
            Body,
            Opcode,
            Placement as WirePlacement,
            ReadRequest,
            QN_READ_REQ,
            QN_SEND,
            UNTAGGED_HDR_LEN, //
        },
        stream::Request,
        tx::{
            quick_fpdu,
            TxMessage, //
        },
    },
    wqe::{
        flags,
        op,
        status,
        SqCompletion,
        Sqe, //
        MAX_INLINE,
        NUM_SGE,
    },
};
use kernel::{
    prelude::*,
    rdma::qp::Qp,
    sync::rcu, //
};

/// Payload up to this long of a Send or Write alone in the send queue goes out by
/// [`Requester::quick`].
const QUICK_PAYLOAD: usize = 192;

/// Room for a quick FPDU: length, the longer header of Send and Write, payload, pad and CRC.
const QUICK_FPDU: usize = LEN_LEN + UNTAGGED_HDR_LEN + QUICK_PAYLOAD + 3 + CRC_LEN;

/// A message built whole by [`Requester::quick`].
pub(crate) struct Quick<'a> {
    /// The FPDU.
    pub(crate) fpdu: &'a [u8],
    /// What its end does.
    pub(crate) done: Done,
}

/// The requester of a connection.
pub(crate) struct Requester {
    /// `sqe` holds a send queue element taken off the ring: it becomes a message, or waits
    /// for an ORD credit or the fence.
    pending: bool,
    /// The send queue element read last (read here in place: too large to move around).
    sqe: Sqe,
    /// Where [`Requester::quick`] builds its FPDU. Kept here, not on the stack: a fresh array
    /// would be zeroed for every message, and [`quick_fpdu`] writes every byte it returns.
    quick_buf: [u8; QUICK_FPDU],
}

impl Requester {
    /// A requester with nothing taken off the send queue.
    pub(crate) fn new() -> Self {
        Self {
            pending: false,
            sqe: Sqe::default(),
            quick_buf: [0; QUICK_FPDU],
        }
    }

    /// Completes the element taken off the send queue, if any, with `IB_WC_WR_FLUSH_ERR`.
    pub(crate) fn flush(&mut self, qp: &Qp<RsiwDevice>) {
        if core::mem::take(&mut self.pending) {
            let s = &self.sqe;
            RsiwQp::complete_sq(
                qp,
                SqCompletion::new(s.id, s.opcode, status::WR_FLUSH_ERR, 0),
            );
        }
    }

    /// The completion of the pending element with `status`.
    fn failed(&self, st: u16) -> Fatal {
        Fatal::local(Some(SqCompletion::new(self.sqe.id, self.sqe.opcode, st, 0)))
    }

    /// Starts the message of the next send queue element in `out`, after the local
    /// operations before it; returns whether it did (`false`: the queue is empty, or the
    /// element waits for a response).
    pub(crate) fn next(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        out: &mut Outgoing,
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        // The SQE stays in `pending` and is used where it is (it is too large to move on
        // every message): taken once it becomes a message or fails, kept while it waits.
        loop {
            if !self.take_sqe(qp)? {
                return Ok(false);
            }
            if !matches!(self.sqe.opcode, op::INVAL_STAG | op::REG_MR) {
                break;
            }
            self.local_op(path, qp)?;
        }
        let r = self.start(path, qp, out, mulpdu);
        if !matches!(r, Ok(false)) {
            // A message now, or failed: the SQE is done with.
            self.pending = false;
        }
        r
    }

    /// Makes sure `pending` holds a send queue element, taking the next one off the queue if
    /// needed; returns whether there is one. An invalid element fails the pass.
    fn take_sqe(&mut self, qp: &Qp<RsiwDevice>) -> Result<bool, Fatal> {
        if !self.pending {
            match qp.next_sqe(&mut self.sqe) {
                None => return Ok(false),
                Some(Err(wr)) => return Err(Fatal::wr(wr)),
                Some(Ok(())) => self.pending = true,
            }
        }
        Ok(true)
    }

    /// Carries out the local operation (Local Invalidate, Fast Registration) in `pending`, in
    /// send queue order. Out of line: rare on the paths that must be short.
    #[inline(never)]
    fn local_op(&mut self, path: &Path, qp: &Qp<RsiwDevice>) -> Result<(), Fatal> {
        if !self.pending {
            return Ok(());
        }
        let sqe = &self.sqe;
        let wr = SqCompletion::new(sqe.id, sqe.opcode, status::SUCCESS, 0);
        let signalled = sqe.flags & flags::SIGNALLED != 0;
        let mem = qp.device().mem();
        let r = match sqe.opcode {
            op::INVAL_STAG => mem
                .invalidate(path.pd(), sqe.rkey, false)
                .map_err(|_| status::LOC_PROT_ERR),
            op::REG_MR => mem
                .reg_mr(path.pd(), &RegMr::from_sqe(sqe))
                .map_err(|_| status::LOC_QP_OP_ERR),
            _ => return Ok(()),
        };
        // A local operation, completed in send queue order.
        self.pending = false;
        match r {
            Err(st) => Err(Fatal::wr(wr.failed(st))),
            Ok(()) => {
                if signalled {
                    RsiwQp::complete_sq(qp, wr);
                }
                Ok(())
            }
        }
    }

    /// Starts the Read Request of the SQE in `pending`: `Ok(false)` if it waits for an ORD
    /// credit. Out of line: rare on the paths that must be short.
    #[inline(never)]
    fn start_read(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        out: &mut Outgoing,
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        let sqe = &self.sqe;
        let fail = |st: u16| self.failed(st);
        if path.ord() == 0 {
            // We negotiated not to send Read Requests (siw: EINVAL, LOC_QP_OP_ERR).
            return Err(fail(status::LOC_QP_OP_ERR));
        }
        let sink = sqe.sge[0];
        let size = if sqe.num_sge == 0 { 0 } else { sink.length };
        // The sink must be writable by us (the response is placed there).
        if size > 0 {
            qp.device()
                .mem()
                .check(
                    path.pd(),
                    sink.lkey,
                    Rights::LOCAL_WRITE,
                    sink.laddr,
                    u64::from(size),
                )
                .map_err(|_| fail(status::LOC_PROT_ERR))?;
        }
        let msn = out
            .peek_msn(QN_READ_REQ)
            .ok_or(fail(status::LOC_QP_OP_ERR))?;
        let req = Request::Read {
            sink_stag: sink.lkey,
            sink_to: sink.laddr,
            size,
        };
        let wr = OrqWr {
            id: Some(sqe.id),
            opcode: read_opcode(sqe.opcode == op::READ_LOCAL_INV),
            signalled: sqe.flags & flags::SIGNALLED != 0,
            len: size,
            sink,
        };
        if path.issue(req, wr) == Issue::Wait {
            return Ok(false);
        }
        let _ = out.take_msn(QN_READ_REQ);
        let msg = TxMessage {
            opcode: Opcode::ReadRequest,
            placement: WirePlacement::Untagged {
                inv_stag: 0,
                qn: QN_READ_REQ,
                msn,
                mo: 0,
            },
            body: Body::ReadRequest(ReadRequest {
                sink_stag: sink.lkey,
                sink_to: sink.laddr,
                size,
                src_stag: sqe.rkey,
                src_to: sqe.raddr,
            }),
            payload_len: 0,
        };
        out.start(msg, Src::None, Done::Nothing, mulpdu)
            .map_err(|_| fail(status::LOC_QP_OP_ERR))?;
        Ok(true)
    }

    /// Starts the message of the SQE in `pending` (not a local operation): returns `Ok(false)`
    /// if it has to wait (for an ORD credit or the fence), `Ok(true)` once it is in `out`.
    fn start(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        out: &mut Outgoing,
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        if !self.pending {
            return Ok(false);
        }
        if self.sqe.flags & flags::READ_FENCE != 0 && path.fenced() {
            return Ok(false);
        }
        if matches!(self.sqe.opcode, op::READ | op::READ_LOCAL_INV) {
            return self.start_read(path, qp, out, mulpdu);
        }
        let sqe = &self.sqe;
        let fail = |st: u16| self.failed(st);
        let signalled = sqe.flags & flags::SIGNALLED != 0;
        // Send, Send with Invalidate, Write: the payload, into the source where it is.
        let len = if sqe.flags & flags::INLINE != 0 {
            let len = sqe.sge[0].length as usize;
            let s = sqe.sge[1..]
                .as_bytes()
                .get(..len)
                .ok_or(fail(status::LOC_LEN_ERR))?;
            let src = out.src_mut();
            *src = Src::Inline([0; MAX_INLINE], len);
            let Src::Inline(data, _) = src else {
                return Err(fail(status::LOC_LEN_ERR));
            };
            if !fill(data.get_mut(..len), s) {
                *src = Src::None;
                return Err(fail(status::LOC_LEN_ERR));
            }
            len as u32
        } else {
            let n = usize::from(sqe.num_sge).min(NUM_SGE);
            let src = out.src_mut();
            *src = Src::Sgl(Default::default(), [0; NUM_SGE], n);
            let r = match src {
                Src::Sgl(pl, lens, _) => sgl(path, qp.device().mem(), sqe, n, pl, lens),
                _ => Err(status::LOC_LEN_ERR),
            };
            match r {
                Ok(total) => total,
                Err(st) => {
                    *src = Src::None;
                    return Err(fail(st));
                }
            }
        };
        let solicited = sqe.flags & flags::SOLICITED != 0;
        let (opcode, placement) = match sqe.opcode {
            op::WRITE => (
                Opcode::Write,
                WirePlacement::Tagged {
                    stag: sqe.rkey,
                    to: sqe.raddr,
                },
            ),
            op::SEND | op::SEND_REMOTE_INV => {
                let inv = sqe.opcode == op::SEND_REMOTE_INV;
                let msn = out.take_msn(QN_SEND).ok_or(fail(status::LOC_QP_OP_ERR))?;
                (
                    send_opcode(inv, solicited),
                    WirePlacement::Untagged {
                        inv_stag: if inv { sqe.rkey } else { 0 },
                        qn: QN_SEND,
                        msn,
                        mo: 0,
                    },
                )
            }
            _ => return Err(fail(status::LOC_QP_OP_ERR)),
        };
        let msg = TxMessage {
            opcode,
            placement,
            body: Body::None,
            payload_len: len,
        };
        let done = Done::Sq {
            wr: SqCompletion::new(sqe.id, sqe.opcode, status::SUCCESS, len),
            signalled,
        };
        out.start_filled(msg, done, mulpdu)
            .map_err(|_| fail(status::LOC_LEN_ERR))?;
        Ok(true)
    }

    /// The path of a latency-bound application: builds the send queue element that is alone
    /// in the queue, if it is a small Send or Write, into one FPDU in one pass
    /// ([`quick_fpdu`]), for the TX engine to hand to TCP in one call, without segmenter,
    /// batch or completion list. `None` leaves the element (if any) pending for
    /// [`Requester::next`]. `mss` is the socket's current MSS: the FPDU must fit one TCP
    /// segment, whatever `fpdu_segments` allows.
    pub(crate) fn quick(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        out: &mut Outgoing,
        mss: u32,
    ) -> Result<Option<Quick<'_>>, Fatal> {
        if !self.take_sqe(qp)? {
            return Ok(None);
        }
        let sqe = &self.sqe;
        let inline = sqe.flags & flags::INLINE != 0;
        let len = if inline {
            sqe.sge[0].length as usize
        } else if sqe.num_sge == 0 {
            0
        } else {
            sqe.sge[0].length as usize
        };
        if !matches!(sqe.opcode, op::WRITE | op::SEND | op::SEND_REMOTE_INV)
            || sqe.flags & flags::READ_FENCE != 0
            || (!inline && sqe.num_sge > 1)
            || len > QUICK_PAYLOAD
            || qp.sq_more()
        {
            return Ok(None);
        }
        let fits = mulpdu_from_mss(mss)
            .is_some_and(|m| usize::from(m) >= UNTAGGED_HDR_LEN.saturating_add(len));
        if !fits {
            return Ok(None);
        }
        let wr = SqCompletion::new(sqe.id, sqe.opcode, status::SUCCESS, len as u32);
        let fail = |st: u16| Fatal::local(Some(wr.failed(st)));
        self.pending = false;
        // The payload is copied into the FPDU at once: the region is borrowed under RCU.
        let rcu = rcu::read_lock();
        let place = if inline || len == 0 {
            None
        } else {
            let s = sqe.sge[0];
            let p = (qp.device().mem())
                .check_in(
                    &rcu,
                    path.pd(),
                    s.lkey,
                    Rights::LOCAL_READ,
                    s.laddr,
                    len as u64,
                )
                .map_err(|_| fail(status::LOC_PROT_ERR))?;
            Some(p)
        };
        let placement = if wr.opcode == op::WRITE {
            WirePlacement::Tagged {
                stag: sqe.rkey,
                to: sqe.raddr,
            }
        } else {
            let inv = wr.opcode == op::SEND_REMOTE_INV;
            WirePlacement::Untagged {
                inv_stag: if inv { sqe.rkey } else { 0 },
                qn: QN_SEND,
                msn: out.take_msn(QN_SEND).ok_or(fail(status::LOC_QP_OP_ERR))?,
                mo: 0,
            }
        };
        let solicited = sqe.flags & flags::SOLICITED != 0;
        let msg = TxMessage {
            opcode: match wr.opcode {
                op::WRITE => Opcode::Write,
                op => send_opcode(op == op::SEND_REMOTE_INV, solicited),
            },
            placement,
            body: Body::None,
            payload_len: len as u32,
        };
        let data = if inline {
            sqe.sge
                .get(1..)
                .and_then(|s| s.as_bytes().get(..len))
                .ok_or(fail(status::LOC_LEN_ERR))?
        } else {
            &[]
        };
        let buf = &mut self.quick_buf;
        let total = quick_fpdu(path.crc32c(), path.crc(), msg, buf, |d| match &place {
            Some(p) => p.read(0, d).is_ok(),
            None => fill(Some(d), data),
        })
        .map_err(|_| fail(status::LOC_PROT_ERR))?;
        // The FPDU holds its own copy of the payload: the region is no longer needed.
        drop(rcu);
        let done = Done::Sq {
            wr,
            signalled: sqe.flags & flags::SIGNALLED != 0,
        };
        Ok(Some(Quick {
            fpdu: self.quick_buf.get(..total).unwrap_or(&[]),
            done,
        }))
    }
}

/// The opcode of a Send variant.
fn send_opcode(inv: bool, solicited: bool) -> Opcode {
    match (inv, solicited) {
        (false, false) => Opcode::Send,
        (false, true) => Opcode::SendSe,
        (true, false) => Opcode::SendInv,
        (true, true) => Opcode::SendSeInv,
    }
}

/// Checks the SGEs of a send queue element into `pl` and `lens`; returns their total length,
/// or the completion status.
fn sgl(
    path: &Path,
    mem: &MemTable,
    sqe: &Sqe,
    n: usize,
    pl: &mut [Option<Placement>; NUM_SGE],
    lens: &mut [u64; NUM_SGE],
) -> Result<u32, u16> {
    let mut total = 0u32;
    for ((s, len), p) in sqe
        .sge
        .iter()
        .take(n)
        .zip(lens.iter_mut())
        .zip(pl.iter_mut())
    {
        *len = u64::from(s.length);
        total = total.checked_add(s.length).ok_or(status::LOC_LEN_ERR)?;
        if s.length == 0 {
            continue;
        }
        let c = mem.check(
            path.pd(),
            s.lkey,
            Rights::LOCAL_READ,
            s.laddr,
            u64::from(s.length),
        );
        *p = Some(c.map_err(|_| status::LOC_PROT_ERR)?);
    }
    Ok(total)
}

/// Copies `src` into `dst` if both have the same length (without the panic path of
/// `copy_from_slice`). Returns whether it copied.
pub(crate) fn fill(dst: Option<&mut [u8]>, src: &[u8]) -> bool {
    match dst {
        Some(d) if d.len() == src.len() => {
            for (d, s) in d.iter_mut().zip(src) {
                *d = *s;
            }
            true
        }
        _ => false,
    }
}
