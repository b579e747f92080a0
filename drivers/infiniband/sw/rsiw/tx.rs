// SPDX-License-Identifier: GPL-2.0

//! The TX engine: send queue elements and Read Responses in, FPDUs out.
//!
//! It runs in the connection's work item ([`Conn::tx_work`]), never in softirq. Per pass it
//! finishes a partially sent FPDU, continues the message in progress, then starts the next
//! message: the peer-to-peer RTR (initiator, once), the Read Responses the peer asked for
//! (within IRD), and the next send queue element. Each message is cut into FPDUs sized to the
//! current TCP MSS (times the `fpdu_segments` module parameter) by
//! [`crate::wire::tx::Segmenter`]. FPDUs are queued back to back in a
//! [`Batch`]: headers, trailers and copied payload in staging pages, payload of user memory
//! regions by page reference, and handed to TCP, which copies them, in few `sendmsg` calls with
//! `MSG_DONTWAIT`. When TCP takes only part of a batch, TX stops and `write_space` resumes it.
//! A small Send or Write alone in the send queue (the latency-bound case) skips all that
//! ([`TxState::quick`]): it is built on the stack in one pass and handed to TCP in one call.
//!
//! Send, Send with Solicited Event / Invalidate and Write complete when their last byte was
//! handed to TCP; a Read completes when its response arrived (RX). A Read waits for an ORD
//! credit, and a fenced element waits until no Read is outstanding.

use crate::{
    batch::{
        Batch,
        MAX_SEGS, //
    },
    conn::{
        issue_read,
        read_opcode,
        Conn,
        InRead,
        OrqWr, //
    },
    crc::KernelCrc32c,
    device::RsiwDevice,
    mem::{
        MemTable,
        Placement,
        RegMr, //
    },
    qp::{
        QpState,
        RsiwQp, //
    },
    stag::Rights,
    wire::{
        crc::{
            Crc32c,
            CRC_INIT, //
        },
        fpdu::{
            fpdu_len,
            mulpdu_from_mss,
            trailer,
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
            QN_TERMINATE, //
            UNTAGGED_HDR_LEN,
        },
        mpa::RtrKind,
        stream::{
            Request,
            TxMsn, //
        },
        term::{
            TermCode,
            Terminate, //
        },
        tx::{
            quick_fpdu,
            rtr_message,
            sg_pieces,
            FpduCrc,
            FpduPlan,
            Segmenter,
            TxMessage, //
        },
    },
    wqe::{
        flags,
        op,
        status,
        Sqe,
        MAX_INLINE,
        NUM_SGE, //
    },
};
use core::sync::atomic::Ordering::{
    AcqRel,
    Acquire,
    Release, //
};
use kernel::{
    net::{
        socket::SendFlags,
        tcp::{
            SocketGuard,
            TcpSocket, //
        },
    },
    page::PAGE_SIZE,
    prelude::*,
    rdma::qp::Qp,
    sync::{
        rcu,
        Arc, //
    },
};

/// Batches sent per pass before the work item requeues itself (fairness between QPs).
const BURST: u32 = 4;

/// The largest FPDU (ULPDU_Length is 16 bits), with room to spare.
const FPDU_MAX: usize = 65536 + 16;

/// FPDUs are assembled back to back until a batch holds this many bytes, then handed to TCP
/// in one `sendmsg`.
const BATCH: usize = 64 * 1024;

/// Staging room of a batch: a batch plus one more FPDU, which may start just below [`BATCH`].
const TX_BUF: usize = BATCH + FPDU_MAX;

/// Fragments one FPDU may need: the payload's pages (two more per scatter element, which may
/// start and end inside a page) and the header and trailer (each may cross a staging page).
const FPDU_SEGS: usize = FPDU_MAX / PAGE_SIZE + 2 * NUM_SGE + 4;

/// Payload pieces of user memory shorter than this are copied into the staging pages, which
/// costs less than a fragment of their own.
const COPY_BREAK: usize = 256;

/// FPDUs up to this long whose payload is copied are staged in one piece ([`small_fpdu`]).
const SMALL_FPDU: usize = COPY_BREAK;

// A batch has room for the largest FPDU, with a margin.
const _: () = assert!(2 * FPDU_SEGS <= MAX_SEGS);

/// Payload up to this long of a Send or Write alone in the send queue goes out by
/// [`TxState::quick`].
const QUICK_PAYLOAD: usize = 192;

/// Room for a quick FPDU: length, the longer header of Send and Write, payload, pad and CRC.
const QUICK_FPDU: usize = LEN_LEN + UNTAGGED_HDR_LEN + QUICK_PAYLOAD + 3 + CRC_LEN;

/// Messages that may end in one batch (each to be completed once its last byte is with TCP).
const MAX_DONE: usize = 32;

/// Where a message's payload comes from.
enum Src {
    /// No payload.
    None,
    /// Inline data of the send queue element.
    Inline([u8; MAX_INLINE], usize),
    /// The SGEs of a send queue element, checked once when the message starts.
    Sgl([Option<Placement>; NUM_SGE], [u64; NUM_SGE], usize),
    /// Our memory, read by the peer (Read Response): checked per FPDU.
    Remote(u32, u64),
}

/// What to do once the last FPDU of a message is handed to TCP.
#[derive(Clone, Copy)]
enum Done {
    /// Nothing (Read Request, RTR, Terminate).
    Nothing,
    /// Complete a send queue element.
    Sq {
        id: u64,
        opcode: u8,
        signalled: bool,
        bytes: u32,
    },
    /// A Read Response went out: release its IRD credit.
    ReadResponse,
}

/// A message being sent. Its payload's source is [`TxState::src`], filled in place.
struct TxMsg {
    seg: Segmenter,
    /// The MULPDU `seg` cuts at.
    mulpdu: u16,
    done: Done,
}

/// Why a pass ended.
enum Pass {
    /// Nothing left to send.
    Idle,
    /// The socket is full.
    Blocked,
    /// The burst is used up; more to send.
    Budget,
}

/// A fatal error found by TX: complete `wr` with its status, send `term` (if any) and move the
/// QP to ERROR.
struct Fatal {
    wr: Option<(u64, u8, u16)>,
    term: Option<Terminate>,
}

impl Fatal {
    fn local(wr: Option<(u64, u8, u16)>) -> Self {
        Self {
            wr,
            term: Some(Terminate::bare(TermCode::rdmap_catastrophic())),
        }
    }
}

/// The TX engine of a connection.
pub(crate) struct TxState {
    msn: TxMsn,
    cur: Option<TxMsg>,
    /// Where the payload of `cur` comes from (`Src::None` without `cur`). Apart from `cur`
    /// and filled where it is: an SGL's placements are too large to move on every message.
    src: Src,
    /// `sqe` holds a send queue element taken off the ring: it becomes a message, or waits
    /// for an ORD credit or the fence.
    pending: bool,
    /// The send queue element read last (read here in place: too large to move around).
    sqe: Sqe,
    /// Where [`TxState::quick`] builds its FPDU. Kept here, not on the stack: a fresh array
    /// would be zeroed for every message, and [`quick_fpdu`] writes every byte it returns.
    quick_buf: [u8; QUICK_FPDU],
    /// The batch of FPDUs being sent.
    batch: Batch,
    /// The messages ending in the batch, in order: the offset after their last byte and what
    /// to do once TCP took it. The first `ndone` entries are in use.
    done: [(usize, Done); MAX_DONE],
    ndone: usize,
    /// A fatal error found while the batch before it was assembled: reported once that batch
    /// went out, so its messages complete first.
    deferred: Option<Fatal>,
    /// The RTR to send first.
    rtr: Option<RtrKind>,
    /// The connection failed; nothing is sent any more.
    pub(crate) dead: bool,
    /// The connection's socket, until [`Conn::stop`]: here, under the mutex a pass takes
    /// anyway, it costs the doorbell no lookup.
    pub(crate) sock: Option<Arc<TcpSocket>>,
}

impl TxState {
    /// A fresh engine sending on `sock`; `rtr` is the RTR message to send first.
    pub(crate) fn new(rtr: Option<RtrKind>, sock: Arc<TcpSocket>) -> Result<Self> {
        Ok(Self {
            msn: TxMsn::new(),
            cur: None,
            src: Src::None,
            pending: false,
            sqe: Sqe::default(),
            quick_buf: [0; QUICK_FPDU],
            batch: Batch::new(TX_BUF)?,
            done: [(0, Done::Nothing); MAX_DONE],
            ndone: 0,
            deferred: None,
            rtr,
            dead: false,
            sock: Some(sock),
        })
    }

    /// Completes what the engine holds with `IB_WC_WR_FLUSH_ERR` and forgets it.
    pub(crate) fn flush(&mut self, qp: &Qp<RsiwDevice>) {
        let n = self.ndone;
        self.ndone = 0;
        let cur = self.end_message().map(|m| m.done);
        let batch = self.done.get(..n).unwrap_or(&[]).iter().map(|d| d.1);
        for d in Iterator::chain(batch, cur) {
            if let Done::Sq { id, opcode, .. } = d {
                RsiwQp::complete_sq(qp, id, opcode, status::WR_FLUSH_ERR, 0);
            }
        }
        if core::mem::take(&mut self.pending) {
            let s = &self.sqe;
            RsiwQp::complete_sq(qp, s.id, s.opcode, status::WR_FLUSH_ERR, 0);
        }
        if let Some((id, opcode, _)) = self.deferred.take().and_then(|f| f.wr) {
            RsiwQp::complete_sq(qp, id, opcode, status::WR_FLUSH_ERR, 0);
        }
        self.batch.clear();
    }

    /// Sends a Terminate, after the rest of a partially sent FPDU. Gives up (the connection
    /// is aborted anyway) if the socket is full.
    pub(crate) fn send_terminate(&mut self, conn: &Conn, sock: &TcpSocket, t: Terminate) {
        let mut g = sock.lock();
        if self.batch.sent() < self.batch.len()
            && !matches!(self.batch.push(&mut g, false), Ok(true))
        {
            return;
        }
        // What the batch completes is flushed with the QP (`flush`); its bytes are sent.
        let ndone = self.ndone;
        self.batch.clear();
        let Some(msn) = self.msn.take(QN_TERMINATE) else {
            return;
        };
        let msg = TxMessage {
            opcode: Opcode::Terminate,
            placement: WirePlacement::Untagged {
                inv_stag: 0,
                qn: QN_TERMINATE,
                msn,
                mo: 0,
            },
            body: Body::Terminate(t),
            payload_len: 0,
        };
        let Some(mulpdu) = mulpdu_from_mss(sock.mss_cache()) else {
            return;
        };
        let Ok(seg) = Segmenter::new(msg, mulpdu) else {
            return;
        };
        self.src = Src::None;
        self.cur = Some(TxMsg {
            seg,
            mulpdu,
            done: Done::Nothing,
        });
        if self.build(conn, sock).is_ok() {
            let _ = self.batch.push(&mut g, false);
        }
        self.end_message();
        // The Terminate completes nothing.
        self.ndone = ndone;
    }

    /// Appends the next FPDU of the current message to the batch. On error the message is
    /// dropped (the caller completes its work request with the error).
    fn build(&mut self, conn: &Conn, sock: &TcpSocket) -> Result<(), Fatal> {
        let r = self.build_fpdu(conn, sock);
        if r.is_err() {
            self.end_message();
        }
        r
    }

    /// Ends the current message: drops its payload source (and the references to memory its
    /// placements hold) with it.
    fn end_message(&mut self) -> Option<TxMsg> {
        self.src = Src::None;
        self.cur.take()
    }

    fn build_fpdu(&mut self, conn: &Conn, sock: &TcpSocket) -> Result<(), Fatal> {
        let Some(m) = self.cur.as_mut() else {
            return Ok(());
        };
        // The MSS may change in the middle of a message; a message's first FPDU is cut at the
        // size it was just started with.
        if m.seg.sent() > 0 {
            if let Some(mulpdu) = tx_mulpdu(sock) {
                // On failure the old size stays: still a valid, if large, FPDU.
                if mulpdu != m.mulpdu && m.seg.set_mulpdu(mulpdu).is_ok() {
                    m.mulpdu = mulpdu;
                }
            }
        }
        let Some(plan) = m.seg.next_fpdu() else {
            self.end_message();
            return Ok(());
        };
        let mark = self.batch.mark();
        if fpdu(&mut self.batch, conn, &plan, &self.src).is_err() {
            // Nothing of the FPDU goes out.
            self.batch.rollback(mark);
            return Err(Fatal::local(sq_of(&m.done)));
        }
        let fpdu_end = self.batch.len();
        if plan.last {
            let d = m.done;
            self.end_message();
            if !matches!(d, Done::Nothing) {
                // The caller stops the batch before `done` is full.
                let slot = self
                    .done
                    .get_mut(self.ndone)
                    .ok_or(Fatal::local(sq_of(&d)))?;
                *slot = (fpdu_end, d);
                self.ndone = self.ndone.saturating_add(1);
            }
        }
        Ok(())
    }

    /// Takes the next message to send, if any, into `cur` and `src`; returns whether there
    /// was one.
    fn next_message(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        if let Some(kind) = self.rtr.take() {
            return self.start_rtr(conn, kind, mulpdu);
        }
        if conn.irq_hint.load(Acquire) && self.start_read_response(conn, mulpdu)? {
            return Ok(true);
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
            self.local_op(conn, qp)?;
        }
        let r = self.start_sqe(conn, qp, mulpdu);
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
                Some(Err(wr)) => {
                    return Err(Fatal {
                        wr: Some(wr),
                        term: None,
                    })
                }
                Some(Ok(())) => self.pending = true,
            }
        }
        Ok(true)
    }

    /// Starts the peer-to-peer RTR message (MPA-17). Out of line: once per connection.
    #[inline(never)]
    fn start_rtr(&mut self, conn: &Conn, kind: RtrKind, mulpdu: u16) -> Result<bool, Fatal> {
        let seg = |msg: TxMessage| Segmenter::new(msg, mulpdu).map_err(|_| Fatal::local(None));
        // A zero-length Write is tagged: it consumes no MSN (taking one of QN 0 would make
        // the ULP's first Send arrive with MSN 2, which the peer terminates, 1/2/03).
        let msn = match kind {
            RtrKind::Read => self.msn.take(QN_READ_REQ).ok_or(Fatal::local(None))?,
            RtrKind::Send => self.msn.take(QN_SEND).ok_or(Fatal::local(None))?,
            RtrKind::Write => 0,
        };
        if kind == RtrKind::Read {
            let req = Request::Read {
                sink_stag: 1,
                sink_to: 0,
                size: 0,
            };
            let mut sh = conn.shared.lock();
            if !issue_read(&mut sh, req, OrqWr::default()) {
                return Err(Fatal::local(None));
            }
        }
        self.src = Src::None;
        self.cur = Some(TxMsg {
            seg: seg(rtr_message(kind, msn))?,
            mulpdu,
            done: Done::Nothing,
        });
        Ok(true)
    }

    /// Starts the Read Response to the oldest Read Request queued by RX, if any. Out of line:
    /// rare on the paths that must be short.
    #[inline(never)]
    fn start_read_response(&mut self, conn: &Conn, mulpdu: u16) -> Result<bool, Fatal> {
        let rr = {
            let mut sh = conn.shared.lock();
            let r = sh.irq.pop();
            if sh.irq.len() == 0 {
                conn.irq_hint.store(false, Release);
            }
            r
        };
        let Some(r) = rr else {
            return Ok(false);
        };
        self.src = Src::Remote(r.src_stag, r.src_to);
        self.cur = Some(read_response(r, mulpdu)?);
        Ok(true)
    }

    /// Carries out the local operation (Local Invalidate, Fast Registration) in `pending`, in
    /// send queue order. Out of line: rare on the paths that must be short.
    #[inline(never)]
    fn local_op(&mut self, conn: &Conn, qp: &Qp<RsiwDevice>) -> Result<(), Fatal> {
        if !self.pending {
            return Ok(());
        }
        let sqe = &self.sqe;
        match sqe.opcode {
            op::INVAL_STAG => {
                // A local operation, completed in send queue order.
                let (id, opcode, rkey, fl) = (sqe.id, sqe.opcode, sqe.rkey, sqe.flags);
                self.pending = false;
                if qp.device().mem().invalidate(conn.pd, rkey, false).is_err() {
                    return Err(Fatal {
                        wr: Some((id, opcode, status::LOC_PROT_ERR)),
                        term: None,
                    });
                }
                if fl & flags::SIGNALLED != 0 {
                    RsiwQp::complete_sq(qp, id, opcode, status::SUCCESS, 0);
                }
            }
            op::REG_MR => {
                // Fast registration, a local operation completed in send queue order.
                let r = RegMr::from_sqe(sqe);
                let (id, opcode, fl) = (sqe.id, sqe.opcode, sqe.flags);
                self.pending = false;
                if qp.device().mem().reg_mr(conn.pd, &r).is_err() {
                    return Err(Fatal {
                        wr: Some((id, opcode, status::LOC_QP_OP_ERR)),
                        term: None,
                    });
                }
                if fl & flags::SIGNALLED != 0 {
                    RsiwQp::complete_sq(qp, id, opcode, status::SUCCESS, 0);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Starts the Read Request of the SQE in `pending`: `Ok(false)` if it waits for an ORD
    /// credit. Out of line: rare on the paths that must be short.
    #[inline(never)]
    fn start_read(&mut self, conn: &Conn, qp: &Qp<RsiwDevice>, mulpdu: u16) -> Result<bool, Fatal> {
        let seg = |msg: TxMessage| Segmenter::new(msg, mulpdu).map_err(|_| Fatal::local(None));
        if !self.pending {
            return Ok(false);
        }
        let sqe = &self.sqe;
        let signalled = sqe.flags & flags::SIGNALLED != 0;
        let fail = |st: u16| Fatal::local(Some((sqe.id, sqe.opcode, st)));
        let dev = qp.device();
        if conn.ord == 0 {
            // We negotiated not to send Read Requests (siw: EINVAL, LOC_QP_OP_ERR).
            return Err(fail(status::LOC_QP_OP_ERR));
        }
        let sink = sqe.sge[0];
        let size = if sqe.num_sge == 0 { 0 } else { sink.length };
        let req = Request::Read {
            sink_stag: sink.lkey,
            sink_to: sink.laddr,
            size,
        };
        let wr = OrqWr {
            id: Some(sqe.id),
            opcode: read_opcode(sqe.opcode == op::READ_LOCAL_INV),
            signalled,
            len: size,
            sink,
        };
        // The sink must be writable by us (the response is placed there).
        if size > 0 {
            dev.mem()
                .check(
                    conn.pd,
                    sink.lkey,
                    Rights::LOCAL_WRITE,
                    sink.laddr,
                    u64::from(size),
                )
                .map_err(|_| fail(status::LOC_PROT_ERR))?;
        }
        let msn = self
            .msn
            .peek(QN_READ_REQ)
            .ok_or(fail(status::LOC_QP_OP_ERR))?;
        {
            let mut sh = conn.shared.lock();
            if !issue_read(&mut sh, req, wr) {
                sh.tx_waits_read = true;
                return Ok(false);
            }
        }
        let _ = self.msn.take(QN_READ_REQ);
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
        self.src = Src::None;
        self.cur = Some(TxMsg {
            seg: seg(msg).map_err(|_| fail(status::LOC_QP_OP_ERR))?,
            mulpdu,
            done: Done::Nothing,
        });
        Ok(true)
    }

    /// Starts the message of the SQE in `pending` (not a local operation): returns `Ok(false)`
    /// if it has to wait (for an ORD credit or the Read fence), `Ok(true)` once it is `cur`.
    fn start_sqe(&mut self, conn: &Conn, qp: &Qp<RsiwDevice>, mulpdu: u16) -> Result<bool, Fatal> {
        if !self.pending {
            return Ok(false);
        }
        let sqe = &self.sqe;
        let signalled = sqe.flags & flags::SIGNALLED != 0;
        let fail = |st: u16| Fatal::local(Some((sqe.id, sqe.opcode, st)));
        if sqe.flags & flags::READ_FENCE != 0 {
            let mut sh = conn.shared.lock();
            if !sh.ord.is_empty() {
                // Under the lock RX completes Reads with: it sees the flag.
                sh.tx_waits_read = true;
                return Ok(false);
            }
        }
        if matches!(sqe.opcode, op::READ | op::READ_LOCAL_INV) {
            return self.start_read(conn, qp, mulpdu);
        }
        let dev = qp.device();
        // Send, Send with Invalidate, Write: the payload, into `src` where it is.
        let len = if sqe.flags & flags::INLINE != 0 {
            let len = sqe.sge[0].length as usize;
            let s = sqe.sge[1..]
                .as_bytes()
                .get(..len)
                .ok_or(fail(status::LOC_LEN_ERR))?;
            self.src = Src::Inline([0; MAX_INLINE], len);
            let Src::Inline(data, _) = &mut self.src else {
                return Err(fail(status::LOC_LEN_ERR));
            };
            if !fill(data.get_mut(..len), s) {
                self.src = Src::None;
                return Err(fail(status::LOC_LEN_ERR));
            }
            len as u32
        } else {
            let n = usize::from(sqe.num_sge).min(NUM_SGE);
            self.src = Src::Sgl(Default::default(), [0; NUM_SGE], n);
            let r = match &mut self.src {
                Src::Sgl(pl, lens, _) => sgl(conn, dev.mem(), sqe, n, pl, lens),
                _ => Err(status::LOC_LEN_ERR),
            };
            match r {
                Ok(total) => total,
                Err(st) => {
                    self.src = Src::None;
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
                let opcode = match (inv, solicited) {
                    (false, false) => Opcode::Send,
                    (false, true) => Opcode::SendSe,
                    (true, false) => Opcode::SendInv,
                    (true, true) => Opcode::SendSeInv,
                };
                let msn = self.msn.take(QN_SEND).ok_or(fail(status::LOC_QP_OP_ERR))?;
                (
                    opcode,
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
            id: sqe.id,
            opcode: sqe.opcode,
            signalled,
            bytes: len,
        };
        // The message is segmented where it stays: it is too large to move on every message.
        let m = self.cur.insert(TxMsg {
            seg: Segmenter::idle(),
            mulpdu,
            done,
        });
        if m.seg.reset(msg, mulpdu).is_err() {
            self.cur = None;
            self.src = Src::None;
            return Err(fail(status::LOC_LEN_ERR));
        }
        Ok(true)
    }

    /// The path of a latency-bound application: sends the send queue element that is alone
    /// in the queue, if it is a small Send or Write, as one FPDU built on the stack in one
    /// pass ([`quick_fpdu`]) and handed to TCP in one call, and completes it, without
    /// segmenter, batch or completion list. Returns whether it took the element; `false`
    /// leaves it (if any) in `pending` for [`TxState::fill`]. What TCP did not take is staged
    /// in the (empty) batch, with the element's completion, for the caller to send on.
    fn quick(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        sock: &TcpSocket,
        g: &mut SocketGuard<'_>,
    ) -> Result<bool, Fatal> {
        // What `next_message` would send before the send queue.
        if self.rtr.is_some() || conn.irq_hint.load(Acquire) {
            return Ok(false);
        }
        if !self.take_sqe(qp)? {
            return Ok(false);
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
            return Ok(false);
        }
        // One FPDU within one MSS (TCP's segment, whatever `fpdu_segments` allows).
        let fits = mulpdu_from_mss(sock.mss_cache())
            .is_some_and(|m| usize::from(m) >= UNTAGGED_HDR_LEN.saturating_add(len));
        if !fits {
            return Ok(false);
        }
        let (id, opcode) = (sqe.id, sqe.opcode);
        let fail = |st: u16| Fatal::local(Some((id, opcode, st)));
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
                    conn.pd,
                    s.lkey,
                    Rights::LOCAL_READ,
                    s.laddr,
                    len as u64,
                )
                .map_err(|_| fail(status::LOC_PROT_ERR))?;
            Some(p)
        };
        let placement = if opcode == op::WRITE {
            WirePlacement::Tagged {
                stag: sqe.rkey,
                to: sqe.raddr,
            }
        } else {
            let inv = opcode == op::SEND_REMOTE_INV;
            WirePlacement::Untagged {
                inv_stag: if inv { sqe.rkey } else { 0 },
                qn: QN_SEND,
                msn: self.msn.take(QN_SEND).ok_or(fail(status::LOC_QP_OP_ERR))?,
                mo: 0,
            }
        };
        let solicited = sqe.flags & flags::SOLICITED != 0;
        let msg = TxMessage {
            opcode: match (opcode, solicited) {
                (op::WRITE, _) => Opcode::Write,
                (op::SEND, false) => Opcode::Send,
                (op::SEND, true) => Opcode::SendSe,
                (_, false) => Opcode::SendInv,
                (_, true) => Opcode::SendSeInv,
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
        let total = quick_fpdu(&conn.crc32c, conn.crc, msg, buf, |d| match &place {
            Some(p) => p.read(0, d).is_ok(),
            None => fill(Some(d), data),
        })
        .map_err(|_| fail(status::LOC_PROT_ERR))?;
        // The FPDU holds its own copy of the payload: the region is no longer needed.
        drop(rcu);
        let done = Done::Sq {
            id,
            opcode,
            signalled: sqe.flags & flags::SIGNALLED != 0,
            bytes: len as u32,
        };
        let fpdu = buf.get(..total).unwrap_or(&[]);
        let sent = match g.send(&[fpdu], SendFlags::DONTWAIT) {
            Ok(n) => n,
            Err(e) if e == EAGAIN => 0,
            // The socket failed; the CM reports it.
            Err(_) => {
                return Err(Fatal {
                    wr: Some((id, opcode, status::WR_FLUSH_ERR)),
                    term: None,
                })
            }
        };
        if let Some(rest) = fpdu.get(sent..).filter(|r| !r.is_empty()) {
            // The batch is empty: the rest fits. It goes out (and completes) as a batch.
            self.batch
                .stage(rest)
                .map_err(|_| fail(status::LOC_QP_OP_ERR))?;
            if let Some(slot) = self.done.first_mut() {
                *slot = (self.batch.len(), done);
                self.ndone = 1;
            }
        } else if let Done::Sq {
            signalled: true, ..
        } = done
        {
            RsiwQp::complete_sq(qp, id, opcode, status::SUCCESS, len as u32);
        }
        Ok(true)
    }

    /// Completes the messages of the batch whose last byte TCP took; starts a new batch once
    /// all of it went out.
    fn finish(&mut self, conn: &Conn, qp: &Qp<RsiwDevice>) {
        let n = self.ndone;
        let mut k = 0usize;
        for &(end, d) in self.done.get(..n).unwrap_or(&[]) {
            if end > self.batch.sent() {
                break;
            }
            match d {
                Done::Sq {
                    id,
                    opcode,
                    signalled: true,
                    bytes,
                } => RsiwQp::complete_sq(qp, id, opcode, status::SUCCESS, bytes),
                Done::ReadResponse => conn.shared.lock().ird.release(),
                _ => {}
            }
            k = k.saturating_add(1);
        }
        if k > 0 {
            for i in 0..n.saturating_sub(k) {
                let v = self.done.get(i.saturating_add(k)).copied();
                if let (Some(v), Some(slot)) = (v, self.done.get_mut(i)) {
                    *slot = v;
                }
            }
            self.ndone = n.saturating_sub(k);
        }
        if self.batch.sent() >= self.batch.len() {
            self.batch.clear();
        }
    }

    /// Appends the next FPDU to the batch, starting the next message if needed. Returns
    /// `Ok(false)` when there is nothing to send.
    fn fill(&mut self, conn: &Conn, qp: &Qp<RsiwDevice>, sock: &TcpSocket) -> Result<bool, Fatal> {
        if self.cur.is_none() {
            let mulpdu = tx_mulpdu(sock).ok_or(Fatal::local(None))?;
            if !self.next_message(conn, qp, mulpdu)? {
                return Ok(false);
            }
        }
        self.build(conn, sock)?;
        Ok(true)
    }

    /// One pass: fills and sends up to [`BURST`] batches.
    fn run(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        sock: &TcpSocket,
        g: &mut SocketGuard<'_>,
    ) -> Result<Pass, Fatal> {
        for _ in 0..BURST {
            // The queues were found empty while filling this batch: once it is out, the pass
            // is done. Work posted since then rings its own doorbell, which finds the engine
            // busy and queues the work item (`tx_inline`), or queues it itself (kernel QPs).
            let mut drained = false;
            // A batch that TCP took only in part is sent out before a new one starts.
            if self.batch.len() == 0 {
                if let Some(f) = self.deferred.take() {
                    return Err(f);
                }
                if self.cur.is_none() && self.ndone == 0 && self.quick(conn, qp, sock, g)? {
                    if self.batch.len() == 0 {
                        // The queue held nothing more (see `drained`).
                        return Ok(Pass::Idle);
                    }
                    drained = true;
                }
                while !drained
                    && self.batch.len() < BATCH
                    && self.ndone < MAX_DONE
                    && self.batch.seg_room() >= FPDU_SEGS
                {
                    match self.fill(conn, qp, sock) {
                        Ok(true) => {}
                        Ok(false) => {
                            drained = true;
                            break;
                        }
                        // What is already in the batch goes out (and completes) first.
                        Err(f) if self.batch.len() > 0 => {
                            self.deferred = Some(f);
                            break;
                        }
                        Err(f) => return Err(f),
                    }
                }
            }
            if self.batch.len() == 0 {
                return Ok(Pass::Idle);
            }
            let more = self.cur.is_some();
            let r = self.batch.push(g, more);
            self.finish(conn, qp);
            match r {
                Ok(true) if drained => return Ok(Pass::Idle),
                Ok(true) => {}
                Ok(false) => return Ok(Pass::Blocked),
                Err(_) => {
                    // The socket failed; the CM reports it. Stop sending.
                    return Err(Fatal {
                        wr: None,
                        term: None,
                    });
                }
            }
        }
        Ok(Pass::Budget)
    }
}

/// Appends one FPDU to the batch: header, payload, pad and CRC.
fn fpdu(b: &mut Batch, conn: &Conn, plan: &FpduPlan, src: &Src) -> Result {
    let n = plan.payload_len as usize;
    let total = fpdu_len(usize::from(plan.ulpdu_len));
    // A small FPDU is copied whole (its payload is below `COPY_BREAK`): staged in one piece.
    if total <= SMALL_FPDU
        && !matches!(src, Src::Remote(..))
        && b.stage_whole(total, |buf| small_fpdu(buf, conn, plan, src))?
    {
        return Ok(());
    }
    let off = u64::from(plan.payload_off);
    let mut crc = plan.crc(&conn.crc32c, conn.crc);
    b.stage(plan.header())?;
    // Without CRC, payload in user memory goes by reference (TCP copies it); the CRC is
    // computed over the staged copy.
    let by_ref = !conn.crc;
    match src {
        Src::None => {}
        Src::Inline(data, len) => {
            let s = data
                .get(plan.payload_off as usize..*len)
                .and_then(|s| s.get(..n))
                .ok_or(EINVAL)?;
            crc.update(s);
            b.stage(s)?;
        }
        Src::Sgl(pl, lens, cnt) => {
            let mut at = 0u64;
            for p in sg_pieces(lens.get(..*cnt).unwrap_or(&[]), off, n as u64) {
                let place = pl.get(p.index).and_then(|x| x.as_ref()).ok_or(EINVAL)?;
                let len = usize::try_from(p.len).map_err(|_| EINVAL)?;
                payload(b, place, p.offset, len, by_ref, &mut crc)?;
                at = at.saturating_add(p.len);
            }
            if at != n as u64 {
                return Err(EINVAL);
            }
        }
        Src::Remote(stag, to) => {
            if n > 0 {
                let to = to.checked_add(off).ok_or(EINVAL)?;
                let p = conn
                    .qp()
                    .ok_or(EINVAL)?
                    .device()
                    .mem()
                    .check(conn.pd, *stag, Rights::REMOTE_READ, to, n as u64)
                    .map_err(|_| EINVAL)?;
                payload(b, &p, 0, n, by_ref, &mut crc)?;
            }
        }
    }
    let (t, tl) = crc.trailer();
    b.stage(t.get(..tl).unwrap_or(&[]))
}

/// Writes the FPDU of `plan` into `buf`, which is exactly as long: header, payload (copied
/// from `src`, which is not [`Src::Remote`]), pad and CRC, the CRC over the contiguous bytes.
fn small_fpdu(buf: &mut [u8], conn: &Conn, plan: &FpduPlan, src: &Src) -> Result {
    let hdr = plan.header();
    let n = plan.payload_len as usize;
    let body_end = hdr.len().checked_add(n).ok_or(EINVAL)?;
    let (body, tail) = buf.split_at_mut_checked(body_end).ok_or(EINVAL)?;
    let (h, p) = body.split_at_mut_checked(hdr.len()).ok_or(EINVAL)?;
    if !fill(Some(h), hdr) {
        return Err(EINVAL);
    }
    match src {
        Src::None => {}
        Src::Inline(data, len) => {
            let s = data
                .get(plan.payload_off as usize..*len)
                .and_then(|s| s.get(..n))
                .ok_or(EINVAL)?;
            if !fill(Some(p), s) {
                return Err(EINVAL);
            }
        }
        Src::Sgl(pl, lens, cnt) => {
            let mut at = 0usize;
            let off = u64::from(plan.payload_off);
            for pc in sg_pieces(lens.get(..*cnt).unwrap_or(&[]), off, n as u64) {
                let place = pl.get(pc.index).and_then(|x| x.as_ref()).ok_or(EINVAL)?;
                let len = usize::try_from(pc.len).map_err(|_| EINVAL)?;
                let end = at.checked_add(len).ok_or(EINVAL)?;
                place.read(pc.offset, p.get_mut(at..end).ok_or(EINVAL)?)?;
                at = end;
            }
            if at != n {
                return Err(EINVAL);
            }
        }
        Src::Remote(..) => return Err(EINVAL),
    }
    let crc = conn.crc.then(|| conn.crc32c.update(CRC_INIT, body));
    let (t, tl) = trailer(&conn.crc32c, crc, usize::from(plan.ulpdu_len));
    if !fill(Some(tail), t.get(..tl).unwrap_or(&[])) {
        return Err(EINVAL);
    }
    Ok(())
}

/// Appends payload bytes `[at, at + len)` of `place`: by page reference if `by_ref` and the
/// region is user memory, else a copy (fed to the CRC).
fn payload(
    b: &mut Batch,
    place: &Placement,
    at: u64,
    len: usize,
    by_ref: bool,
    crc: &mut FpduCrc<'_, KernelCrc32c>,
) -> Result {
    if by_ref && len >= COPY_BREAK {
        match place.page_refs(at, len, |page, off, n| b.add_user(page, off, n)) {
            // Not user memory: copied below.
            Err(e) if e == EOPNOTSUPP => {}
            r => return r,
        }
    }
    b.stage_with(len, |chunk, k| {
        place.read(at.saturating_add(k as u64), chunk)?;
        crc.update(chunk);
        Ok(())
    })
}

/// Copies `src` into `dst` if both have the same length (without the panic path of
/// `copy_from_slice`). Returns whether it copied.
fn fill(dst: Option<&mut [u8]>, src: &[u8]) -> bool {
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

/// The send queue element a fatal error completes.
fn sq_of(d: &Done) -> Option<(u64, u8, u16)> {
    match *d {
        Done::Sq { id, opcode, .. } => Some((id, opcode, status::LOC_PROT_ERR)),
        _ => None,
    }
}

/// MULPDU for the data FPDUs: `fpdu_segments` times the socket's current MSS, capped by
/// the 16-bit ULPDU length.
fn tx_mulpdu(sock: &TcpSocket) -> Option<u16> {
    let segs = u32::from(crate::module_parameters::fpdu_segments.value().clamp(1, 45));
    mulpdu_from_mss(sock.mss_cache().saturating_mul(segs))
}

/// The Read Response to an inbound Read Request.
fn read_response(r: InRead, mulpdu: u16) -> Result<TxMsg, Fatal> {
    let msg = TxMessage {
        opcode: Opcode::ReadResponse,
        placement: WirePlacement::Tagged {
            stag: r.sink_stag,
            to: r.sink_to,
        },
        body: Body::None,
        payload_len: r.size,
    };
    let seg = Segmenter::new(msg, mulpdu).map_err(|_| Fatal::local(None))?;
    Ok(TxMsg {
        seg,
        mulpdu,
        done: Done::ReadResponse,
    })
}

/// Checks the SGEs of a send queue element into `pl` and `lens`; returns their total length,
/// or the completion status.
fn sgl(
    conn: &Conn,
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
            conn.pd,
            s.lkey,
            Rights::LOCAL_READ,
            s.laddr,
            u64::from(s.length),
        );
        *p = Some(c.map_err(|_| status::LOC_PROT_ERR)?);
    }
    Ok(total)
}

impl Conn {
    /// The work item: sends what there is to send, or handles a fatal error. Process context.
    pub(crate) fn tx_work(self: &Arc<Self>) {
        if self.stopped.load(Acquire) {
            return;
        }
        let Some(qp) = self.qp() else {
            return;
        };
        self.tx_pass(&qp, false);
    }

    /// Sends in the calling context: the doorbell of a user QP, as `siw_post_send()` does
    /// for user QPs (`in_syscall`). This saves the work queue's wakeup on every message, the
    /// bulk of the small-message latency. If the work item holds the engine, or the socket
    /// is full, the work item (now or after `write_space`) sends instead. Process context,
    /// may sleep.
    ///
    /// `qp` is the doorbell's QP, which the caller holds; the socket is the engine's.
    pub(crate) fn tx_inline(self: &Arc<Self>, qp: &Qp<RsiwDevice>) {
        if self.tx_blocked.load(Acquire) || self.stopped.load(Acquire) {
            return;
        }
        self.tx_pass(qp, true);
    }

    /// One pass of the TX engine: the work item, or `inline` from [`Conn::tx_inline`].
    fn tx_pass(self: &Arc<Self>, qp: &Qp<RsiwDevice>, inline: bool) {
        let mut tx = if inline {
            match self.tx.try_lock() {
                Some(g) => g,
                None => {
                    // The work item (or `stop`) holds the engine: make sure the work item
                    // runs once more for what was just posted.
                    Conn::kick(self.as_arc_borrow());
                    return;
                }
            }
        } else {
            self.tx.lock()
        };
        if self.stopped.load(Acquire) || tx.dead {
            return;
        }
        // Out of the engine for the pass, and back after it: `stop` takes it under the mutex
        // this pass holds.
        let Some(sock) = tx.sock.take() else {
            return;
        };
        self.tx_pass_locked(qp, &mut tx, &sock);
        tx.sock = Some(sock);
    }

    fn tx_pass_locked(self: &Arc<Self>, qp: &Qp<RsiwDevice>, tx: &mut TxState, sock: &TcpSocket) {
        if self.fatal_hint.load(Acquire) {
            self.fatal(qp, tx, sock);
            return;
        }
        // Once per connection: a plain load first, not a locked exchange on every pass.
        if self.rtr_seen.load(Acquire) && self.rtr_seen.swap(false, AcqRel) {
            if let Some(cep) = self.cep() {
                cep.rtr_received();
            }
        }
        match qp.state() {
            QpState::Error => {
                tx.dead = true;
                self.flush_inflight(qp, tx);
                return;
            }
            QpState::Rts | QpState::Closing => {}
            _ => return,
        }
        let r = {
            let mut g = sock.lock();
            tx.run(self, qp, sock, &mut g)
        };
        match r {
            Ok(Pass::Idle) => {}
            Ok(Pass::Budget) => Conn::kick(self.as_arc_borrow()),
            Ok(Pass::Blocked) => {
                self.tx_blocked.store(true, Release);
                // `write_space` may have run before the flag was set.
                if sock.stream_wspace() >= sock.stream_min_wspace() {
                    self.tx_blocked.store(false, Release);
                    Conn::kick(self.as_arc_borrow());
                }
            }
            Err(f) => self.pass_failed(qp, tx, sock, f),
        }
    }

    /// A pass found a fatal error: completes its work request, records the error (and its
    /// Terminate) and handles it.
    #[cold]
    #[inline(never)]
    fn pass_failed(&self, qp: &Qp<RsiwDevice>, tx: &mut TxState, sock: &TcpSocket, f: Fatal) {
        if let Some((id, opcode, st)) = f.wr {
            RsiwQp::complete_sq(qp, id, opcode, st, 0);
        }
        {
            let mut sh = self.shared.lock();
            if !sh.fatal {
                sh.fatal = true;
                sh.term = f.term;
                self.fatal_hint.store(true, Release);
            }
        }
        self.fatal(qp, tx, sock);
    }
}
