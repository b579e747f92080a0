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
        commit::VERIFY_DIGEST_LEN,
        fpdu::{
            mulpdu_from_mss,
            CRC_LEN,
            LEN_LEN, //
        },
        hdr::{
            imm,
            AtomicRequest,
            AtomicWriteRequest,
            Body,
            FlushRequest,
            Opcode,
            Placement as WirePlacement,
            ReadRequest,
            SinkRange,
            VerifyRequest,
            IMM_LEN,
            QN_READ_REQ,
            QN_SEND,
            SEND_IMM_FOLLOWS,
            UNTAGGED_HDR_LEN, //
        },
        stream::Request,
        tx::{
            quick_fpdu,
            TxMessage, //
        },
    },
    wqe::{
        atomic_write_data,
        flags,
        imm_slot,
        op,
        status,
        AtomicArgs,
        FlushArgs,
        Sge,
        SqCompletion,
        Sqe,
        VerifyArgs,
        MAX_INLINE,
        NUM_SGE, //
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
    /// The Immediate Data message that must follow the message just started (a Send or Write
    /// with immediate data), before anything else.
    followup: Option<Followup>,
}

/// The second message of a Send or Write with immediate data.
#[derive(Clone, Copy)]
struct Followup {
    /// The 8-byte Immediate Data (D-01).
    imm: [u8; IMM_LEN],
    /// Immediate Data with Solicited Event.
    solicited: bool,
    /// The work request's completion, once this message is with TCP.
    done: Done,
}

impl Requester {
    /// A requester with nothing taken off the send queue.
    pub(crate) fn new() -> Self {
        Self {
            pending: false,
            sqe: Sqe::default(),
            quick_buf: [0; QUICK_FPDU],
            followup: None,
        }
    }

    /// Whether the second message of a Send or Write with immediate data must go out next.
    pub(crate) fn has_followup(&self) -> bool {
        self.followup.is_some()
    }

    /// Completes the element taken off the send queue, if any, with `IB_WC_WR_FLUSH_ERR`.
    pub(crate) fn flush(&mut self, qp: &Qp<RsiwDevice>) {
        if let Some(c) = self
            .followup
            .take()
            .and_then(|f| f.done.failed(status::WR_FLUSH_ERR))
        {
            RsiwQp::complete_sq(qp, c);
        }
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
    ///
    /// `earlier` are the messages sent before and not finished yet ([`Path::issue`]).
    pub(crate) fn next(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        out: &mut Outgoing,
        earlier: &mut [(usize, Done)],
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        if let Some(f) = self.followup.take() {
            return start_imm(out, f, mulpdu).map(|()| true);
        }
        // The SQE stays in `pending` and is used where it is (it is too large to move on
        // every message): taken once it becomes a message or fails, kept while it waits.
        loop {
            if !self.take_sqe(qp)? {
                return Ok(false);
            }
            if !matches!(self.sqe.opcode, op::INVAL_STAG | op::REG_MR) {
                break;
            }
            if !self.local_op(path, qp)? {
                return Ok(false);
            }
        }
        let r = self.start(path, qp, out, earlier, mulpdu);
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
    /// send queue order; returns false if it waits for room in the ORQ (to complete after
    /// the requests before it). Out of line: rare on the paths that must be short.
    #[inline(never)]
    fn local_op(&mut self, path: &Path, qp: &Qp<RsiwDevice>) -> Result<bool, Fatal> {
        if !self.pending {
            return Ok(true);
        }
        let sqe = &self.sqe;
        let wr = SqCompletion::new(sqe.id, sqe.opcode, status::SUCCESS, 0);
        let signalled = sqe.flags & flags::SIGNALLED != 0;
        if signalled && !path.local_room() {
            return Ok(false);
        }
        let mem = qp.device().mem();
        let r = match sqe.opcode {
            op::INVAL_STAG => mem
                .invalidate(path.pd(), sqe.rkey, false)
                .map_err(|_| status::LOC_PROT_ERR),
            op::REG_MR => mem
                .reg_mr(path.pd(), &RegMr::from_sqe(sqe))
                .map_err(|_| status::LOC_QP_OP_ERR),
            _ => return Ok(true),
        };
        // A local operation, completed in send queue order.
        self.pending = false;
        match r {
            Err(st) => Err(Fatal::wr(wr.failed(st))),
            Ok(()) => {
                if signalled && !path.defer(wr, true) {
                    RsiwQp::complete_sq(qp, wr);
                }
                Ok(true)
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
        earlier: &mut [(usize, Done)],
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        let sqe = &self.sqe;
        let sink = sqe.sge[0];
        let size = if sqe.num_sge == 0 { 0 } else { sink.length };
        // The sink must be writable by us (the response is placed there).
        if size > 0 {
            self.check_sink(path, qp, sink, u64::from(size))?;
        }
        let wr = self.orq_wr(read_opcode(sqe.opcode == op::READ_LOCAL_INV), size, sink);
        let body = Body::ReadRequest(ReadRequest {
            sink_stag: sink.lkey,
            sink_to: sink.laddr,
            size,
            src_stag: sqe.rkey,
            src_to: sqe.raddr,
        });
        let req = Request::Read {
            sink_stag: sink.lkey,
            sink_to: sink.laddr,
            size,
        };
        self.start_request(path, out, earlier, mulpdu, wr, Src::None, |_| {
            Some((Opcode::ReadRequest, body, req))
        })
    }

    /// Starts the message of the SQE in `pending` (not a local operation): returns `Ok(false)`
    /// if it has to wait (for an ORD credit or the fence), `Ok(true)` once it is in `out`.
    fn start(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        out: &mut Outgoing,
        earlier: &mut [(usize, Done)],
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        if !self.pending {
            return Ok(false);
        }
        if self.sqe.flags & flags::READ_FENCE != 0 && path.fenced() {
            return Ok(false);
        }
        let o = self.sqe.opcode;
        let read = matches!(o, op::READ | op::READ_LOCAL_INV);
        if read || op::is_atomic(o) || op::is_commit(o) {
            if path.ord() == 0 {
                // We negotiated not to send QN 1 requests (siw: EINVAL, LOC_QP_OP_ERR).
                return Err(self.failed(status::LOC_QP_OP_ERR));
            }
            if read {
                return self.start_read(path, qp, out, earlier, mulpdu);
            }
            if op::is_atomic(o) {
                return self.start_atomic(path, qp, out, earlier, mulpdu);
            }
            return self.start_commit(path, qp, out, earlier, mulpdu);
        }
        let sqe = &self.sqe;
        let fail = |st: u16| self.failed(st);
        let signalled = sqe.flags & flags::SIGNALLED != 0;
        // Its completion may have to wait in the ORQ behind requests (T-01).
        if signalled && !path.local_room() {
            return Ok(false);
        }
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
        let wr = SqCompletion::new(sqe.id, sqe.opcode, status::SUCCESS, len);
        let mut done = Done::Sq { wr, signalled };
        // With immediate data a second message follows, and the work request completes with
        // it (RFC 7306 6, IMM-05). The immediate of a Write sits in the last SGE slot, that of
        // a Send in `rkey` (see `wqe`).
        let mut followup = match sqe.opcode {
            op::WRITE_WITH_IMM => Some(sqe.sge[imm_slot()].lkey),
            op::SEND_WITH_IMM => Some(sqe.rkey),
            _ => None,
        }
        .map(|v| Followup {
            imm: imm::from_verbs(v.to_ne_bytes()),
            solicited,
            done: core::mem::replace(&mut done, Done::Nothing),
        });
        // Once the message started (nothing can fail any more): its completion waits in the
        // ORQ if requests are outstanding.
        let in_order = |d: Done| {
            if signalled && path.defer(wr, false) {
                Done::InOrder
            } else {
                d
            }
        };
        let (opcode, placement) = match sqe.opcode {
            op::WRITE_WITH_IMM if len == 0 => {
                // No Write message: the Immediate Data alone (IMM-05).
                let f = followup.ok_or(fail(status::LOC_QP_OP_ERR))?;
                *out.src_mut() = Src::None;
                start_imm(out, f, mulpdu)?;
                out.set_done(in_order(f.done));
                return Ok(true);
            }
            op::WRITE | op::WRITE_WITH_IMM => (
                Opcode::Write,
                WirePlacement::Tagged {
                    stag: sqe.rkey,
                    to: sqe.raddr,
                },
            ),
            op::SEND | op::SEND_REMOTE_INV | op::SEND_WITH_IMM => {
                let inv = sqe.opcode == op::SEND_REMOTE_INV;
                let msn = out.take_msn(QN_SEND).ok_or(fail(status::LOC_QP_OP_ERR))?;
                let word = match sqe.opcode {
                    op::SEND_REMOTE_INV => sqe.rkey,
                    // An rsiw receiver delivers it with the Immediate Data as one receive.
                    op::SEND_WITH_IMM => SEND_IMM_FOLLOWS,
                    _ => 0,
                };
                (
                    // The solicited event goes with the last message.
                    send_opcode(inv, solicited && followup.is_none()),
                    WirePlacement::Untagged {
                        inv_stag: word,
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
        out.start_filled(msg, done, mulpdu)
            .map_err(|_| fail(status::LOC_LEN_ERR))?;
        match followup.as_mut() {
            Some(f) => f.done = in_order(f.done),
            None => out.set_done(in_order(done)),
        }
        self.followup = followup;
        Ok(true)
    }

    /// Starts the Atomic Request of the SQE in `pending`: `Ok(false)` if it waits for an ORD
    /// credit, which it shares with Reads (T-04). Out of line: rare on the paths that must be
    /// short.
    #[inline(never)]
    fn start_atomic(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        out: &mut Outgoing,
        earlier: &mut [(usize, Done)],
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        let sqe = &self.sqe;
        // The original value is placed into the one 8-byte SGE (checked by `check_sqe`).
        let sink = sqe.sge[0];
        self.check_sink(path, qp, sink, 8)?;
        let wr = self.orq_wr(sqe.opcode, 8, sink);
        // The Request Identifier is ours to choose: the request's QN 1 MSN, unique among
        // the outstanding ones.
        self.start_request(path, out, earlier, mulpdu, wr, Src::None, |msn| {
            let body = Body::AtomicRequest(atomic_request(sqe, msn)?);
            Some((Opcode::AtomicRequest, body, Request::Atomic { req_id: msn }))
        })
    }

    /// Starts the Flush, Atomic Write or Verify Request of the SQE in `pending`: `Ok(false)`
    /// if it waits for an ORD credit, which it shares with Reads and atomics (CMT-02, T-04).
    /// It completes when its QN 3 response arrives, in send queue order (the completer); a
    /// Verify's digest goes into its sink SGE then. Out of line: rare on the paths that must
    /// be short.
    #[inline(never)]
    fn start_commit(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        out: &mut Outgoing,
        earlier: &mut [(usize, Done)],
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        let sqe = &self.sqe;
        let sink = SinkRange {
            stag: sqe.rkey,
            len: 0,
            to: sqe.raddr,
        };
        let (opcode, body, req, wr, src) = match sqe.opcode {
            op::FLUSH => {
                let f = FlushArgs::from_sqe(sqe);
                let body = Body::FlushRequest(FlushRequest {
                    sink: SinkRange {
                        len: f.length,
                        ..sink
                    },
                    flags: f.flags,
                });
                let wr = self.orq_wr(sqe.opcode, 0, Sge::default());
                (Opcode::FlushRequest, body, Request::Flush, wr, Src::None)
            }
            op::ATOMIC_WRITE => {
                let body = Body::AtomicWriteRequest(AtomicWriteRequest {
                    sink: SinkRange { len: 8, ..sink },
                    data: atomic_write_data(sqe),
                });
                let wr = self.orq_wr(sqe.opcode, 8, Sge::default());
                let req = Request::AtomicWrite;
                (Opcode::AtomicWriteRequest, body, req, wr, Src::None)
            }
            _ => {
                // Verify (VERIFY-01): the range, and the expected digest as the Hash Value
                // (none: the responder returns its digest). The digest of the response goes
                // into the sink SGE, if there is one (`check_sqe`: it holds a whole digest).
                let v = VerifyArgs::from_sqe(sqe);
                let dsink = if sqe.num_sge == 1 {
                    self.check_sink(path, qp, sqe.sge[0], VERIFY_DIGEST_LEN as u64)?;
                    sqe.sge[0]
                } else {
                    Sge::default()
                };
                let hash = v.hash();
                let mut data = [0u8; MAX_INLINE];
                if !fill(data.get_mut(..hash.len()), hash) {
                    return Err(self.failed(status::LOC_QP_OP_ERR));
                }
                let body = Body::VerifyRequest(VerifyRequest {
                    sink: SinkRange {
                        len: v.length,
                        ..sink
                    },
                });
                let wr = self.orq_wr(sqe.opcode, VERIFY_DIGEST_LEN as u32, dsink);
                let src = Src::Inline(data, hash.len());
                (Opcode::VerifyRequest, body, Request::Verify, wr, src)
            }
        };
        self.start_request(path, out, earlier, mulpdu, wr, src, |_| {
            Some((opcode, body, req))
        })
    }

    /// Checks that `len` bytes of the local SGE `sink` are ours to write (where a response
    /// is placed); a local protection error fails the pending element.
    fn check_sink(
        &self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        sink: Sge,
        len: u64,
    ) -> Result<(), Fatal> {
        qp.device()
            .mem()
            .check(path.pd(), sink.lkey, Rights::LOCAL_WRITE, sink.laddr, len)
            .map(|_| ())
            .map_err(|_| self.failed(status::LOC_PROT_ERR))
    }

    /// The ORQ entry of the pending element: it completes with `opcode` and `len` bytes, and
    /// its response is placed into `sink` (if it has one).
    fn orq_wr(&self, opcode: u8, len: u32, sink: Sge) -> OrqWr {
        OrqWr {
            id: Some(self.sqe.id),
            opcode,
            signalled: self.sqe.flags & flags::SIGNALLED != 0,
            len,
            sink,
            status: status::SUCCESS,
        }
    }

    /// Starts a QN 1 request (Read, Atomic, Flush, Verify or Atomic Write; the caller checked
    /// that ORD is not 0) of the pending element: records it in the ORQ as `wr` within ORD
    /// (`Ok(false)` if it waits for a credit) and starts its message, with payload `src`.
    /// `build` makes its opcode, header and ORQ request from the message's MSN.
    #[allow(clippy::too_many_arguments)]
    fn start_request(
        &self,
        path: &Path,
        out: &mut Outgoing,
        earlier: &mut [(usize, Done)],
        mulpdu: u16,
        wr: OrqWr,
        src: Src,
        build: impl FnOnce(u32) -> Option<(Opcode, Body, Request)>,
    ) -> Result<bool, Fatal> {
        let fail = || self.failed(status::LOC_QP_OP_ERR);
        let msn = out.peek_msn(QN_READ_REQ).ok_or_else(fail)?;
        let (opcode, body, req) = build(msn).ok_or_else(fail)?;
        if path.issue(req, wr, earlier) == Issue::Wait {
            return Ok(false);
        }
        let _ = out.take_msn(QN_READ_REQ);
        let payload_len = match &src {
            Src::Inline(_, n) => u32::try_from(*n).map_err(|_| fail())?,
            _ => 0,
        };
        let msg = TxMessage {
            opcode,
            placement: WirePlacement::Untagged {
                inv_stag: 0,
                qn: QN_READ_REQ,
                msn,
                mo: 0,
            },
            body,
            payload_len,
        };
        out.start(msg, src, Done::Nothing, mulpdu)
            .map_err(|_| fail())?;
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

/// Starts the Immediate Data message `f` in `out`.
fn start_imm(out: &mut Outgoing, f: Followup, mulpdu: u16) -> Result<(), Fatal> {
    let fail = || Fatal::local(f.done.failed(status::LOC_QP_OP_ERR));
    let msn = out.take_msn(QN_SEND).ok_or_else(fail)?;
    let msg = TxMessage {
        opcode: if f.solicited {
            Opcode::ImmDataSe
        } else {
            Opcode::ImmData
        },
        placement: WirePlacement::Untagged {
            inv_stag: 0,
            qn: QN_SEND,
            msn,
            mo: 0,
        },
        body: Body::Immediate(f.imm),
        payload_len: 0,
    };
    out.start(msg, Src::None, f.done, mulpdu)
        .map_err(|_| fail())
}

/// The Atomic Request header of the atomic SQE `sqe` with Request Identifier `req_id`: plain
/// operations with the masks of T-09 (a FetchAdd adds all 64 bits, a CmpSwap compares and swaps
/// all of them), masked ones with the consumer's masks (ATOM-07, ATOM-08).
fn atomic_request(sqe: &Sqe, req_id: u32) -> Option<AtomicRequest> {
    let a = AtomicArgs::from_sqe(sqe);
    let (stag, to) = (sqe.rkey, sqe.raddr);
    Some(match sqe.opcode {
        op::FETCH_AND_ADD => AtomicRequest::fetch_add(req_id, stag, to, a.compare_add),
        op::COMP_AND_SWAP => AtomicRequest::cmp_swap(req_id, stag, to, a.compare_add, a.swap),
        op::MASKED_FETCH_AND_ADD => AtomicRequest {
            add_swap_mask: a.compare_add_mask,
            ..AtomicRequest::fetch_add(req_id, stag, to, a.compare_add)
        },
        op::MASKED_COMP_AND_SWAP => AtomicRequest {
            add_swap_mask: a.swap_mask,
            compare_mask: a.compare_add_mask,
            ..AtomicRequest::cmp_swap(req_id, stag, to, a.compare_add, a.swap)
        },
        _ => return None,
    })
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
