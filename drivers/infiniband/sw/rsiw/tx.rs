// SPDX-License-Identifier: GPL-2.0

//! The TX engine: messages in, FPDUs out.
//!
//! It runs in the connection's work item, or in a user QP's doorbell system call
//! ([`crate::conn::Conn`]); only responses (to small Reads, and the QN 3 ones) may go out
//! from `data_ready` in softirq, while TX holds nothing ([`respond_bh`]). Per pass it
//! finishes a partially sent FPDU, continues the message in progress, then starts the next
//! message: the peer-to-peer RTR (initiator, once), the responses the responder queued
//! ([`responder::next_response`]) and the requester's next send queue element
//! ([`Requester::next`]). Each message is cut into FPDUs sized to the
//! current TCP MSS (times the `fpdu_segments` module parameter) by
//! [`crate::wire::tx::Segmenter`]. FPDUs are queued back to back in a [`Batch`]: headers,
//! trailers and copied payload in staging pages, payload of user memory regions by page
//! reference, and handed to TCP, which copies them, in few `sendmsg` calls with
//! `MSG_DONTWAIT`. When TCP takes only part of a batch, TX stops and `write_space` resumes
//! it. A small Send or Write alone in the send queue (the latency-bound case) skips all that:
//! the requester builds it whole ([`Requester::quick`]) and it is handed to TCP in one call.
//!
//! A message's end does what its [`Done`] says once its last byte is with TCP: complete a
//! send queue element, or free the IRD credit of a response.
//!
//! Zero-copy: a batch carrying at least `zerocopy_min` bytes of user memory (module parameter;
//! MPA CRC off, which is computed over a copy) goes to TCP by reference with a notification
//! ([`kernel::net::tcp::ZcNotif`]) instead of being copied into the socket. TCP then reads the
//! user pages until the peer acknowledged the bytes, so the send queue elements that end in
//! such a batch, and every one after them (completions stay in order), complete only once TCP
//! released the batch ([`ZcTrack`]), which kicks the work item. IRD credits of responses are
//! freed when the response is with TCP, as for copied batches: the peer may send its next
//! request as soon as it has the response. Up to [`ZC_SLOTS`] batches are in flight that way;
//! beyond, batches are copied (and complete in order behind them).

use crate::conn::{
    Conn,
    WorkStats, //
};
use crate::{
    batch::{
        Batch,
        MAX_SEGS, //
    },
    completer,
    crc::KernelCrc32c,
    device::RsiwDevice,
    mem::{
        MemTable,
        Placement, //
    },
    msg::{
        Done,
        Fatal,
        Outgoing,
        Src, //
    },
    path::{
        BhBurst,
        Fail,
        InRequest,
        Issue,
        OrqWr,
        Path,
        BH_FPDU, //
    },
    qp::{
        QpState,
        RsiwQp, //
    },
    requester::{
        fill,
        Requester, //
    },
    responder,
    stag::Rights,
    wire::{
        commit::VERIFY_DIGEST_LEN,
        crc::{
            Crc32c,
            CRC_INIT, //
        },
        fpdu::{fpdu_len, mulpdu_from_mss, trailer, CRC_LEN, LEN_LEN},
        hdr::{
            Body,
            Opcode,
            Placement as WirePlacement,
            ATOMIC_RESP_LEN,
            QN_READ_REQ,
            QN_SEND,
            QN_TERMINATE,
            TAGGED_HDR_LEN,
            UNTAGGED_HDR_LEN, //
        },
        mpa::RtrKind,
        stream::{
            Answer,
            Request, //
        },
        term::Terminate,
        tx::{
            quick_fpdu,
            rtr_message,
            sg_pieces,
            FpduCrc,
            FpduPlan,
            TxMessage, //
        },
    },
    wqe::{
        status,
        SqCompletion, //
        NUM_SGE,
    },
};
use kernel::{
    net::{
        socket::SendFlags,
        tcp::{
            DataReadySock,
            SocketGuard,
            TcpSocket,
            ZcNotif,
            ZcOwner, //
        },
    },
    new_spinlock_irq,
    page::PAGE_SIZE,
    prelude::*,
    rdma::qp::Qp,
    sync::{
        atomic::{
            Acquire,
            AtomicFlag,
            Relaxed,
            Release, //
        },
        rcu,
        Arc,
        ArcBorrow,
        SpinLockIrq, //
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

/// Messages TX holds until they are finished: those ending in the batch being sent (each
/// completes once its last byte is with TCP) and those ending in batches sent by reference and
/// not released yet.
const MAX_DONE: usize = 128;

/// Messages that may end in one batch.
const BATCH_DONE: usize = 32;

/// Batches sent by reference that may wait for their release at once.
pub(crate) const ZC_SLOTS: usize = 16;

/// Read Responses of up to this many payload bytes are sent by `data_ready` ([`respond_bh`]).
const BH_READ_MAX: u32 = 64;

// Such a response is one FPDU of at most [`BH_FPDU`] bytes, and so is every QN 3 response
// (an Atomic Response has the longest header; a Verify Response the digest as payload).
const _: () = assert!(LEN_LEN + TAGGED_HDR_LEN + BH_READ_MAX as usize + 3 + CRC_LEN <= BH_FPDU);
const _: () = assert!(
    LEN_LEN + UNTAGGED_HDR_LEN + ATOMIC_RESP_LEN + VERIFY_DIGEST_LEN + 3 + CRC_LEN <= BH_FPDU
);

// `data_ready`'s burst of responses is on its stack: keep it small.
const _: () = assert!(core::mem::size_of::<BhBurst>() <= 900);

/// What [`TxState::fill`] did.
enum Fill {
    /// It appended an FPDU (or ended a message).
    Added,
    /// Nothing is left to send.
    Drained,
    /// The batch could not grow to take the next FPDU: it goes out first.
    Full,
}

/// Why a pass ended.
pub(crate) enum Pass {
    /// Nothing left to send.
    Idle,
    /// The socket is full.
    Blocked,
    /// The burst is used up; more to send.
    Budget,
}

/// The TX engine of a connection.
pub(crate) struct TxState {
    /// The message being sent and the MSN counters.
    out: Outgoing,
    /// The send queue's side.
    req: Requester,
    /// The batch of FPDUs being sent.
    batch: Batch,
    /// The messages TX has not finished, in order: the stream offset after their last byte
    /// (counted from the first batch, [`TxState::base`]) and what to do once TCP took it (and
    /// released it, if it went by reference). The first `ndone` entries are in use.
    done: KVec<(usize, Done)>,
    ndone: usize,
    /// The stream offset of the batch's first byte.
    base: usize,
    /// Entries of `done` that end in the batch being assembled.
    batch_done: usize,
    /// The batches sent by reference and not released yet, oldest first: their first and
    /// last stream offsets and their tag in `zc`.
    zc_fly: [(usize, usize, u32); ZC_SLOTS],
    zc_head: usize,
    zc_len: usize,
    /// The releases of the batches sent by reference.
    zc: Arc<ZcTrack>,
    /// A fatal error found while the batch before it was assembled: reported once that batch
    /// went out, so its messages complete first.
    deferred: Option<Fatal>,
    /// The RTR to send first.
    rtr: Option<RtrKind>,
    /// The connection failed; nothing is sent any more.
    dead: bool,
    /// The connection's socket, until the connection stops: here, under the mutex a pass
    /// takes anyway, it costs the doorbell no lookup.
    sock: Option<Arc<TcpSocket>>,
}

impl TxState {
    /// A fresh engine sending on `sock`; `rtr` is the RTR message to send first. `stats`
    /// counts its batches sent by reference.
    pub(crate) fn new(
        rtr: Option<RtrKind>,
        sock: Arc<TcpSocket>,
        stats: Arc<WorkStats>,
    ) -> Result<Self> {
        // On the heap: the engine is built on the stack of the connection manager's accept.
        let mut done = KVec::with_capacity(MAX_DONE, GFP_KERNEL)?;
        done.extend_with(MAX_DONE, (0, Done::Nothing), GFP_KERNEL)?;
        Ok(Self {
            out: Outgoing::new(),
            req: Requester::new(),
            batch: Batch::new(TX_BUF)?,
            done,
            ndone: 0,
            base: 0,
            batch_done: 0,
            zc_fly: [(0, 0, 0); ZC_SLOTS],
            zc_head: 0,
            zc_len: 0,
            zc: Arc::pin_init(ZcTrack::new(stats), GFP_KERNEL)?,
            deferred: None,
            rtr,
            dead: false,
            sock: Some(sock),
        })
    }

    /// The releases of this engine's batches sent by reference.
    pub(crate) fn zc_track(&self) -> &Arc<ZcTrack> {
        &self.zc
    }

    /// Whether the connection failed (nothing is sent any more).
    pub(crate) fn is_dead(&self) -> bool {
        self.dead
    }

    /// Marks the connection failed; returns whether it was not yet.
    pub(crate) fn kill(&mut self) -> bool {
        !core::mem::replace(&mut self.dead, true)
    }

    /// Takes the socket out of the engine (for a pass, or for good when the connection
    /// stops).
    pub(crate) fn take_sock(&mut self) -> Option<Arc<TcpSocket>> {
        self.sock.take()
    }

    /// Puts the socket back after a pass.
    pub(crate) fn put_sock(&mut self, sock: Arc<TcpSocket>) {
        self.sock = Some(sock);
    }

    /// Completes what the engine holds with `IB_WC_WR_FLUSH_ERR` and forgets it.
    pub(crate) fn flush(&mut self, qp: &Qp<RsiwDevice>) {
        let n = self.ndone;
        self.ndone = 0;
        self.batch_done = 0;
        // Batches sent by reference complete nothing any more; TCP still releases them.
        self.zc_len = 0;
        let cur = self.out.end().map(|m| m.done);
        let batch = self.done.get(..n).unwrap_or(&[]).iter().map(|d| d.1);
        for d in Iterator::chain(batch, cur) {
            if let Some(c) = d.failed(status::WR_FLUSH_ERR) {
                RsiwQp::complete_sq(qp, c);
            }
        }
        self.req.flush(qp);
        if let Some(c) = self.deferred.take().and_then(|f| f.wr) {
            RsiwQp::complete_sq(qp, c.failed(status::WR_FLUSH_ERR));
        }
        self.batch.clear();
    }

    /// Sends a Terminate, after the rest of a partially sent FPDU. Gives up (the connection
    /// is aborted anyway) if the socket is full.
    pub(crate) fn send_terminate(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        sock: &TcpSocket,
        t: Terminate,
    ) {
        let mut g = sock.lock();
        if self.batch.sent() < self.batch.len()
            && !matches!(self.batch.push(&mut g, false), Ok(true))
        {
            return;
        }
        // The rest of responses `data_ready` sent in part is partially sent FPDUs too.
        if let Some(t) = path.take_tail() {
            let u = t.unsent();
            if !matches!(g.send(&[u], SendFlags::DONTWAIT), Ok(n) if n == u.len()) {
                return;
            }
        }
        // What the batch completes is flushed with the QP (`flush`); its bytes are sent.
        let ndone = self.ndone;
        self.next_batch();
        let Some(msn) = self.out.take_msn(QN_TERMINATE) else {
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
        // A message in progress is abandoned (its work request is flushed).
        let cur = self.out.end().map(|m| m.done);
        if self
            .out
            .start(msg, Src::None, Done::Nothing, mulpdu)
            .is_ok()
            && self.build(path, qp, sock).is_ok()
        {
            let _ = self.batch.push(&mut g, false);
        }
        self.out.end();
        // The Terminate completes nothing; the abandoned message is flushed after the
        // messages before it (`flush`).
        self.ndone = ndone;
        if let Some(d) = cur {
            match self.done.get_mut(ndone) {
                Some(slot) => {
                    *slot = (usize::MAX, d);
                    self.ndone = ndone.saturating_add(1);
                }
                None => {
                    if let Some(c) = d.failed(status::WR_FLUSH_ERR) {
                        RsiwQp::complete_sq(qp, c);
                    }
                }
            }
        }
    }

    /// Appends the next FPDU of the current message to the batch. Returns `Ok(false)`, with
    /// nothing added, if the batch could not grow to take it: the batch must go out first
    /// ([`Batch`]). On error the message is dropped (the caller completes its work request
    /// with the error).
    fn build(&mut self, path: &Path, qp: &Qp<RsiwDevice>, sock: &TcpSocket) -> Result<bool, Fatal> {
        let r = self.build_fpdu(path, qp, sock);
        if r.is_err() {
            self.out.end();
        }
        r
    }

    fn build_fpdu(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        sock: &TcpSocket,
    ) -> Result<bool, Fatal> {
        let Some((m, src)) = self.out.current() else {
            return Ok(true);
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
        // To plan the FPDU again if the batch cannot grow to take it.
        let seg = m.seg;
        let Some(mut plan) = m.seg.next_fpdu() else {
            self.out.end();
            return Ok(true);
        };
        let mark = self.batch.mark();
        let mut r = fpdu(&mut self.batch, path, qp.device().mem(), &plan, src);
        if r.is_err() {
            // Nothing of the FPDU goes out.
            self.batch.rollback(mark);
            if self.batch.take_nomem() {
                // A staging page could not be allocated (`GFP_NOIO`, see `Batch`): the send is
                // held back, not failed. The FPDU is planned again, after the batch went out;
                // as the first of a batch, cut to the pages the batch holds, which needs no
                // allocation.
                m.seg = seg;
                if self.batch.len() > 0 {
                    return Ok(false);
                }
                let held = u32::try_from(self.batch.held()).unwrap_or(u32::MAX);
                if let Some(mulpdu) = mulpdu_from_mss(held).filter(|&x| x < m.mulpdu) {
                    if m.seg.set_mulpdu(mulpdu).is_ok() {
                        // The next FPDU is cut at the socket's size again (above).
                        m.mulpdu = mulpdu;
                        if let Some(p) = m.seg.next_fpdu() {
                            plan = p;
                            r = fpdu(&mut self.batch, path, qp.device().mem(), &plan, src);
                            if r.is_err() {
                                self.batch.rollback(mark);
                            }
                        }
                    }
                }
            }
        }
        if r.is_err() {
            return Err(Fatal::local(failed(path, m.done, status::LOC_PROT_ERR)));
        }
        let fpdu_end = self.base.saturating_add(self.batch.len());
        if plan.last {
            let d = m.done;
            self.out.end();
            if !matches!(d, Done::Nothing) {
                // The caller stops the batch before `done` is full.
                let Some(slot) = self.done.get_mut(self.ndone) else {
                    return Err(Fatal::local(failed(path, d, status::LOC_PROT_ERR)));
                };
                *slot = (fpdu_end, d);
                self.ndone = self.ndone.saturating_add(1);
                self.batch_done = self.batch_done.saturating_add(1);
            }
        }
        Ok(true)
    }

    /// Starts the next message to send, if any; returns whether there was one.
    fn next_message(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        mulpdu: u16,
    ) -> Result<bool, Fatal> {
        if let Some(kind) = self.rtr.take() {
            return self.start_rtr(path, kind, mulpdu);
        }
        // The Immediate Data of a Send or Write with immediate data right behind it.
        if !self.req.has_followup()
            && path.has_inbound()
            && responder::next_response(path, &mut self.out, mulpdu)?
        {
            return Ok(true);
        }
        let earlier = self.done.get_mut(..self.ndone).unwrap_or(&mut []);
        self.req.next(path, qp, &mut self.out, earlier, mulpdu)
    }

    /// Starts the peer-to-peer RTR message (MPA-17). Out of line: once per connection.
    #[inline(never)]
    fn start_rtr(&mut self, path: &Path, kind: RtrKind, mulpdu: u16) -> Result<bool, Fatal> {
        // A zero-length Write is tagged: it consumes no MSN (taking one of QN 0 would make
        // the ULP's first Send arrive with MSN 2, which the peer terminates, 1/2/03).
        let msn = match kind {
            RtrKind::Read => self.out.take_msn(QN_READ_REQ),
            RtrKind::Send => self.out.take_msn(QN_SEND),
            RtrKind::Write => Some(0),
        }
        .ok_or(Fatal::local(None))?;
        if kind == RtrKind::Read {
            let req = Request::Read {
                sink_stag: 1,
                sink_to: 0,
                size: 0,
            };
            let earlier = self.done.get_mut(..self.ndone).unwrap_or(&mut []);
            if path.issue(req, OrqWr::default(), earlier) != Issue::Issued {
                return Err(Fatal::local(None));
            }
        }
        self.out
            .start(rtr_message(kind, msn), Src::None, Done::Nothing, mulpdu)
            .map_err(|_| Fatal::local(None))?;
        Ok(true)
    }

    /// The latency-bound path: the requester builds the send queue element that is alone in
    /// the queue whole ([`Requester::quick`]), handed to TCP here in one call and completed
    /// at once, without segmenter, batch or completion list. Returns whether it took the
    /// element. What TCP did not take is staged in the (empty) batch, with the element's
    /// completion, for the caller to send on.
    fn quick(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        sock: &TcpSocket,
        g: &mut SocketGuard<'_>,
    ) -> Result<bool, Fatal> {
        // What `next_message` would send before the send queue; or the element must complete
        // after requests (T-01).
        if self.rtr.is_some() || path.has_inbound() || self.req.has_followup() || !path.orq_idle() {
            return Ok(false);
        }
        let Some(q) = self.req.quick(path, qp, &mut self.out, sock.mss_cache())? else {
            return Ok(false);
        };
        let wr = q.done.failed(status::WR_FLUSH_ERR);
        let sent = match g.send(&[q.fpdu], SendFlags::DONTWAIT) {
            Ok(n) => n,
            Err(e) if e == EAGAIN => 0,
            // The socket failed; the CM reports it.
            Err(_) => {
                return Err(Fatal {
                    wr,
                    fail: crate::path::Fail::Silent,
                })
            }
        };
        if let Some(rest) = q.fpdu.get(sent..).filter(|r| !r.is_empty()) {
            // The batch is empty: the rest fits. It goes out (and completes) as a batch.
            self.batch
                .stage(rest)
                .map_err(|_| Fatal::local(q.done.failed(status::LOC_QP_OP_ERR)))?;
            if let Some(slot) = self.done.first_mut() {
                *slot = (self.base.saturating_add(self.batch.len()), q.done);
                self.ndone = 1;
                self.batch_done = 1;
            }
        } else if let Done::Sq {
            wr,
            signalled: true,
        } = q.done
        {
            RsiwQp::complete_sq(qp, wr);
        }
        Ok(true)
    }

    /// Completes the messages whose last byte TCP took (and released, for batches sent by
    /// reference), in order; frees the IRD credit of responses TCP took. Starts a new batch
    /// once all of it went out. Returns whether that let a send queue element TX holds back go
    /// on (the pass must not end).
    fn finish(&mut self, path: &Path, qp: &Qp<RsiwDevice>) -> bool {
        let sent = self.base.saturating_add(self.batch.sent());
        // Released batches leave the list oldest first; the oldest one still held bounds what
        // may complete.
        while self.zc_len > 0 {
            let (_, _, tag) = self.zc_fly[self.zc_head % ZC_SLOTS];
            if !self.zc.is_released(tag) {
                break;
            }
            self.zc_head = self.zc_head.wrapping_add(1);
            self.zc_len -= 1;
        }
        let safe = if self.zc_len > 0 {
            sent.min(self.zc_fly[self.zc_head % ZC_SLOTS].0)
        } else {
            sent
        };
        let n = self.ndone;
        let mut w = 0usize;
        let mut deliver = false;
        let mut left_in_batch = 0usize;
        for i in 0..n {
            let Some(&(end, d)) = self.done.get(i) else {
                break;
            };
            let ready = end <= safe || (matches!(d, Done::Response) && end <= sent);
            if !ready {
                if end > self.base {
                    left_in_batch += 1;
                }
                if let Some(slot) = self.done.get_mut(w) {
                    *slot = (end, d);
                }
                w += 1;
                continue;
            }
            match d {
                Done::Sq {
                    wr,
                    signalled: true,
                } => RsiwQp::complete_sq(qp, wr),
                Done::Response => path.responded(),
                Done::InOrder => deliver |= path.local_done(status::SUCCESS),
                _ => {}
            }
        }
        self.ndone = w;
        self.batch_done = left_in_batch;
        if self.batch.sent() >= self.batch.len() {
            self.next_batch();
        }
        deliver && completer::deliver(path, qp)
    }

    /// Empties the batch, which went out whole, for the next one.
    fn next_batch(&mut self) {
        self.base = self.base.saturating_add(self.batch.len());
        self.batch_done = 0;
        self.batch.clear();
    }

    /// Whether batches sent by reference wait for their release.
    fn zc_waits(&self) -> bool {
        self.zc_len > 0
    }

    /// Sends the batch about to go out by reference if it carries enough user memory and a
    /// slot is free (see the module's documentation).
    fn maybe_zc(&mut self, path: &Path) {
        let min = crate::module_parameters::zerocopy_min.value() as usize;
        if min == 0
            || path.crc()
            || self.batch.sent() > 0
            || self.batch.is_zc()
            || self.batch.user_bytes() < min
            || self.zc_len >= ZC_SLOTS
        {
            return;
        }
        let slot = self.zc_head.wrapping_add(self.zc_len) % ZC_SLOTS;
        let tag = slot as u32;
        self.zc.arm(tag);
        let owner = self.zc.clone();
        let gfp = GFP_NOIO | __GFP_NORETRY | __GFP_NOWARN;
        if !self
            .batch
            .start_zc(|| ZcNotif::new(&crate::cm::THIS, owner, tag, gfp))
        {
            return;
        }
        self.zc_fly[slot] = (self.base, self.base.saturating_add(self.batch.len()), tag);
        self.zc_len += 1;
        self.zc.stats.zc_batches.fetch_add(1, Relaxed);
    }

    /// Appends the next FPDU to the batch, starting the next message if needed.
    fn fill(&mut self, path: &Path, qp: &Qp<RsiwDevice>, sock: &TcpSocket) -> Result<Fill, Fatal> {
        if !self.out.busy() {
            let mulpdu = tx_mulpdu(sock).ok_or(Fatal::local(None))?;
            if !self.next_message(path, qp, mulpdu)? {
                return Ok(Fill::Drained);
            }
        }
        if self.build(path, qp, sock)? {
            Ok(Fill::Added)
        } else {
            Ok(Fill::Full)
        }
    }

    /// One pass: sends the rest of a response `data_ready` left ([`respond_bh`]), then fills
    /// and sends up to [`BURST`] batches. Tells `data_ready` whether it may send responses
    /// itself until the next pass (nothing is held).
    pub(crate) fn run(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        sock: &TcpSocket,
        g: &mut SocketGuard<'_>,
    ) -> Result<Pass, Fatal> {
        path.set_tx_quiet(false);
        if self.zc_waits() && self.batch.len() == 0 {
            // Batches sent by reference may have been released (which kicked this pass).
            self.finish(path, qp);
        }
        if let Some(t) = path.take_tail() {
            if !send_tail(path, g, t)? {
                return Ok(Pass::Blocked);
            }
        }
        let r = self.run_batches(path, qp, sock, g);
        if matches!(r, Ok(Pass::Idle)) && self.quiet() {
            path.set_tx_quiet(true);
        }
        r
    }

    /// Whether nothing is half sent or due before a response: no batch, no message in
    /// progress or to complete, no RTR or Immediate Data to send first, no error to report.
    fn quiet(&self) -> bool {
        // With the batch out, the messages TX still holds wait only for releases of batches
        // sent by reference: nothing of the stream.
        self.batch.len() == 0
            && !self.out.busy()
            && self.deferred.is_none()
            && self.rtr.is_none()
            && !self.req.has_followup()
            && !self.dead
    }

    fn run_batches(
        &mut self,
        path: &Path,
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
                    if self.zc_waits() {
                        // The messages before it complete first: once TCP released them
                        // (which kicks this pass).
                        self.deferred = Some(f);
                        return Ok(Pass::Idle);
                    }
                    return Err(f);
                }
                if !self.out.busy() && self.ndone == 0 && self.quick(path, qp, sock, g)? {
                    if self.batch.len() == 0 {
                        // The queue held nothing more (see `drained`).
                        return Ok(Pass::Idle);
                    }
                    drained = true;
                }
                while !drained
                    && self.batch.len() < BATCH
                    && self.batch_done < BATCH_DONE
                    && self.ndone < MAX_DONE
                    && self.batch.seg_room() >= FPDU_SEGS
                {
                    match self.fill(path, qp, sock) {
                        Ok(Fill::Added) => {}
                        Ok(Fill::Drained) => {
                            drained = true;
                            break;
                        }
                        // The batch goes out first; the next one takes the FPDU.
                        Ok(Fill::Full) => break,
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
            let more = self.out.busy();
            self.maybe_zc(path);
            let r = self.batch.push(g, more);
            // A work request that waited for the ORQ may go on now.
            let go_on = self.finish(path, qp);
            match r {
                Ok(true) if drained && !go_on => return Ok(Pass::Idle),
                Ok(true) => {}
                Ok(false) => return Ok(Pass::Blocked),
                Err(_) => {
                    // The socket failed; the CM reports it. Stop sending.
                    return Err(Fatal {
                        wr: None,
                        fail: crate::path::Fail::Silent,
                    });
                }
            }
        }
        Ok(Pass::Budget)
    }
}

/// The releases of a connection's batches sent by reference ([`ZcNotif`]), one flag per slot
/// of [`TxState`]'s list, and the connection to kick when one comes.
#[pin_data]
pub(crate) struct ZcTrack {
    released: [AtomicFlag; ZC_SLOTS],
    /// The connection, from [`Conn::start`] to [`Conn::stop`]: a release kicks its work item.
    #[pin]
    pub(crate) conn: SpinLockIrq<Option<Arc<Conn>>>,
    /// The device's counters.
    pub(crate) stats: Arc<WorkStats>,
}

impl ZcTrack {
    fn new(stats: Arc<WorkStats>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            released: [const { AtomicFlag::new(false) }; ZC_SLOTS],
            conn <- new_spinlock_irq!(None, "rsiw_zc_conn"),
            stats,
        })
    }

    /// Slot `tag` is about to be sent with.
    fn arm(&self, tag: u32) {
        if let Some(f) = self.released.get(tag as usize) {
            f.store(false, Release);
        }
    }

    /// Whether the batch of slot `tag` was released.
    fn is_released(&self, tag: u32) -> bool {
        self.released
            .get(tag as usize)
            .is_none_or(|f| f.load(Acquire))
    }

    /// Sets the connection a release kicks; returns the previous one, to drop in process
    /// context. Any context.
    pub(crate) fn set_conn(&self, c: Option<Arc<Conn>>) -> Option<Arc<Conn>> {
        core::mem::replace(&mut *self.conn.lock(), c)
    }
}

impl ZcOwner for ZcTrack {
    fn released(this: ArcBorrow<'_, Self>, tag: u32, copied: bool) {
        if copied {
            this.stats.zc_copied.fetch_add(1, Relaxed);
        }
        if let Some(f) = this.released.get(tag as usize) {
            f.store(true, Release);
        }
        // Borrowed under the lock: the last reference is never dropped here (in softirq).
        if let Some(c) = this.conn.lock().as_ref() {
            Conn::kick(c.as_arc_borrow());
        }
    }
}

/// Sends the rest of the responses `data_ready` sent in part; returns whether all of it went,
/// else keeps what is left for the next pass. Each response's IRD credit is freed once its
/// last byte is with TCP ([`BhBurst::sent`]).
fn send_tail(path: &Path, g: &mut SocketGuard<'_>, mut t: BhBurst) -> Result<bool, Fatal> {
    let sent = match g.send(&[t.unsent()], SendFlags::DONTWAIT) {
        Ok(n) => n,
        Err(e) if e == EAGAIN => 0,
        // The socket failed; the CM reports it.
        Err(_) => {
            return Err(Fatal {
                wr: None,
                fail: Fail::Silent,
            })
        }
    };
    path.responded_n(t.sent(sent));
    if t.is_done() {
        Ok(true)
    } else {
        path.set_tail(&t);
        Ok(false)
    }
}

/// Sends responses, oldest first, from `data_ready` (the softirq), as the TX pass would send
/// them, instead of waking the work item for them: the wake-up and the switch to it are most
/// of a small message's time at the responder. C siw wakes a thread. Responses to Reads of at
/// most [`BH_READ_MAX`] bytes (module parameter `bh_respond`) and QN 3 responses: Atomic,
/// Flush, Atomic Write and Verify Responses (`bh_respond_qn3`). Their requests were executed
/// when they were Delivered, by RX ([`responder::request`]; a long Flush to persistence by the
/// work item, [`responder::DeferredFlush`]): what is left is the response, the message TX
/// would build ([`responder::response`], with the MSN the inbound queue assigns whoever sends
/// it, [`Path::next_inbound`]), as one FPDU.
///
/// Only while TX is quiet ([`Path::tx_quiet`]): nothing of TX's is half sent or due first,
/// and TX cannot start meanwhile (the softirq holds the socket, which a pass owns throughout),
/// so the byte stream is as a pass would make it. Responses go in arrival order (T-01): up to
/// [`crate::path::BH_BURST`] of them, each taken once built, back to back in one buffer
/// ([`BhBurst`], on the stack) and one `sendmsg`; the first request that does not qualify (a
/// larger Read, a parameter off) or whose response cannot be built (a Read's source fails the
/// check a pass makes; the pass then fails the same way) ends the burst and is left to TX
/// with everything after it. What TCP does not
/// take (or a socket that a task owns) is left to the next pass ([`Path::set_tail`]), which
/// frees each response's IRD credit once its last byte went out, as a pass does.
///
/// Returns whether nothing is left for TX; otherwise the caller kicks it.
pub(crate) fn respond_bh(path: &Path, qp: &Qp<RsiwDevice>, sk: &mut DataReadySock<'_>) -> bool {
    let reads = crate::module_parameters::bh_respond.value();
    let qn3 = crate::module_parameters::bh_respond_qn3.value();
    if !(reads || qn3)
        || !path.tx_quiet()
        || path.is_fatal()
        || !matches!(qp.state(), QpState::Rts | QpState::Closing)
    {
        return false;
    }
    let mut burst = BhBurst::new();
    let (mut nreads, mut nqn3) = (0u64, 0u64);
    while let Some(a) = path.peek_inbound() {
        let take = match a.req {
            InRequest::Read(r) => reads && r.size <= BH_READ_MAX,
            _ => qn3,
        };
        if !take {
            break;
        }
        let Some(slot) = burst.slot::<BH_FPDU>() else {
            break;
        };
        let Ok(n) = bh_response(path, qp, &a, slot) else {
            break;
        };
        // Taken now that it is built; under the socket lock nobody else takes responses.
        // `None`: the connection is going down.
        let Some(t) = path.next_inbound() else {
            break;
        };
        if t.msn != a.msn || !burst.commit(n) {
            // Cannot happen: the response was built with another MSN, or did not fit.
            path.set_fatal(Fail::local());
            return false;
        }
        if a.req.qn3() {
            nqn3 = nqn3.saturating_add(1);
        } else {
            nreads = nreads.saturating_add(1);
        }
    }
    if burst.is_empty() {
        return !path.has_inbound();
    }
    qp.device().count_bh(nreads, nqn3);
    // Anything not sent (an error too: the pass then meets it) goes to TX.
    let sent = sk.send(&[burst.unsent()]).unwrap_or(0);
    path.responded_n(burst.sent(sent));
    if !burst.is_done() {
        path.set_tail(&burst);
        return false;
    }
    !path.has_inbound()
}

/// The one FPDU of the response `a` into `buf` (at most [`BH_FPDU`] bytes: a Read Response of
/// at most [`BH_READ_MAX`] bytes, or a QN 3 response); returns its length. A Read's source is
/// checked as [`fpdu`] checks it for a pass.
fn bh_response(
    path: &Path,
    qp: &Qp<RsiwDevice>,
    a: &Answer<InRequest>,
    buf: &mut [u8; BH_FPDU],
) -> Result<usize> {
    let msg = responder::response(&a.req, a.msn).ok_or(EINVAL)?;
    let rcu = rcu::read_lock();
    let place = match a.req {
        InRequest::Read(r) if r.size > 0 => {
            let p = (qp.device().mem())
                .check_in(
                    &rcu,
                    path.pd(),
                    r.src_stag,
                    Rights::REMOTE_READ,
                    r.src_to,
                    u64::from(r.size),
                )
                .map_err(|_| EINVAL)?;
            Some(p)
        }
        _ => None,
    };
    quick_fpdu(path.crc32c(), path.crc(), msg, buf, |d| {
        match (&place, &a.req) {
            (Some(p), _) => p.read(0, d).is_ok(),
            (None, InRequest::Verify { digest }) if d.len() == digest.len() => {
                d.copy_from_slice(digest);
                true
            }
            (None, InRequest::Verify { .. }) => false,
            (None, _) => d.is_empty(),
        }
    })
    .map_err(|_| EINVAL)
}

/// The completion a fatal error while sending a message with `done` gives its work request:
/// one in the ORQ is marked failed there, and completes from there.
fn failed(path: &Path, done: Done, st: u16) -> Option<SqCompletion> {
    if matches!(done, Done::InOrder) {
        path.local_done(st);
    }
    done.failed(st)
}

/// Appends one FPDU to the batch: header, payload, pad and CRC.
fn fpdu(b: &mut Batch, path: &Path, mem: &MemTable, plan: &FpduPlan, src: &mut Src) -> Result {
    let n = plan.payload_len as usize;
    let total = fpdu_len(usize::from(plan.ulpdu_len));
    // A small FPDU is copied whole (its payload is below `COPY_BREAK`): staged in one piece.
    if total <= SMALL_FPDU
        && !matches!(src, Src::Remote(..))
        && b.stage_whole(total, |buf| small_fpdu(buf, path, plan, src))?
    {
        return Ok(());
    }
    let off = u64::from(plan.payload_off);
    let mut crc = plan.crc(path.crc32c(), path.crc());
    b.stage(plan.header())?;
    // Without CRC, payload in user memory goes by reference (TCP copies it); the CRC is
    // computed over the staged copy.
    let by_ref = !path.crc();
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
        Src::Remote(stag, to, prev) => {
            if n > 0 {
                let to = to.checked_add(off).ok_or(EINVAL)?;
                let p = mem
                    .check_again(
                        prev.take().map(|p| (*stag, p)),
                        *stag,
                        path.pd(),
                        Rights::REMOTE_READ,
                        to,
                        n as u64,
                    )
                    .map_err(|_| EINVAL)?;
                payload(b, &p, 0, n, by_ref, &mut crc)?;
                *prev = Some(p);
            }
        }
    }
    let (t, tl) = crc.trailer();
    b.stage(t.get(..tl).unwrap_or(&[]))
}

/// Writes the FPDU of `plan` into `buf`, which is exactly as long: header, payload (copied
/// from `src`, which is not [`Src::Remote`]), pad and CRC, the CRC over the contiguous bytes.
fn small_fpdu(buf: &mut [u8], path: &Path, plan: &FpduPlan, src: &Src) -> Result {
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
    let crc = path.crc().then(|| path.crc32c().update(CRC_INIT, body));
    let (t, tl) = trailer(path.crc32c(), crc, usize::from(plan.ulpdu_len));
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

/// MULPDU for the data FPDUs: `fpdu_segments` times the socket's current MSS, capped by
/// the 16-bit ULPDU length.
fn tx_mulpdu(sock: &TcpSocket) -> Option<u16> {
    let segs = u32::from(crate::module_parameters::fpdu_segments.value().clamp(1, 45));
    mulpdu_from_mss(sock.mss_cache().saturating_mul(segs))
}
