// SPDX-License-Identifier: GPL-2.0

//! What the data path's engines share: the connection's fixed parameters, the requester's
//! outstanding requests (the ORQ), the responder's inbound requests, and a pending error.
//!
//! The engines are the requester ([`crate::requester`], send queue work to messages), the
//! responder ([`crate::responder`], inbound QN 1 requests: checked and executed when they
//! arrive, answered in order), the completer ([`crate::completer`], responses matched against
//! the ORQ and completed in send queue order) and receive placement ([`crate::recv`]). The TX
//! engine ([`crate::tx`]) sends what the requester and the responder hand it, the RX engine
//! ([`crate::rx`]) dispatches received segments to the others. [`crate::conn::Conn`] owns a
//! [`Path`] and the engines, and runs them.
//!
//! `shared` (an IRQ-safe spinlock) holds what RX (softirq) and TX (process context) both
//! change; every access goes through a method here, which takes it for as long as the
//! operation needs and never across a call into another lock but the CQs'.

use crate::{
    crc::KernelCrc32c,
    limits,
    msg::Done,
    stag::PdId,
    wire::{
        rx::Segment,
        stream::{
            Answer,
            Answered,
            OrdBusy,
            OrdQueue,
            ReadCursor,
            Refused,
            Request,
            RespQueue,
            Slot, //
        },
        term::{
            DdpTaggedCode,
            TermCode,
            TermEcho,
            Terminate, //
        },
        tx::RespBurst,
    },
    wqe::{
        op,
        Completion,
        Sge,
        SqCompletion, //
    },
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            AtomicFlag,
            Full,
            Relaxed,
            Release, //
        },
        SpinLockIrq,
    },
};

/// The most requests outstanding: the ORD actually used is at most this (using fewer credits
/// than the peer's IRD allows is always correct). The device's ORD ([`limits::MAX_ORD`]), so
/// that an ORD the connection manager negotiated is the one used: perftest asks for it and
/// keeps up to 128 Reads posted, and with 64 every other Read waited in the send queue for a
/// credit, sent by the work item a wake-up later (issue 39).
pub(crate) const ORQ_SIZE: usize = limits::MAX_ORD as usize;

/// Entries of the ORQ: the requests, and the work requests posted behind them that wait to
/// complete in order (a batch of them, and a few more, see [`Path::issue`]).
const ORQ_RING: usize = ORQ_SIZE + 64;

/// Why the connection fails.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fail {
    /// Send this Terminate, then fail.
    Terminate(Terminate),
    /// Fail without sending anything: the peer terminated (RFC 5040 6.1), or the socket
    /// failed.
    Silent,
}

impl Fail {
    /// A local failure: a catastrophic error of the stream (0/0/00).
    #[cold]
    #[inline(never)]
    pub(crate) fn local() -> Self {
        Fail::Terminate(Terminate::bare(TermCode::rdmap_catastrophic()))
    }
}

impl Fail {
    /// A copy into a checked target failed: the region went away (deregistered or
    /// invalidated) or the range is not in the receive (1/1/00).
    #[cold]
    #[inline(never)]
    pub(crate) fn place() -> Self {
        Fail::Terminate(Terminate::bare(TermCode::tagged(
            DdpTaggedCode::InvalidStag,
        )))
    }
}

/// What is wrong with a received segment, found by one of the roles.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RxError {
    /// The peer violated the protocol: the Terminate code, and which headers of the segment
    /// it echoes (the RX engine builds it from the segment it holds).
    Term(TermCode, TermEcho),
    /// Fail so.
    Fail(Fail),
}

impl From<Fail> for RxError {
    fn from(f: Fail) -> Self {
        RxError::Fail(f)
    }
}

/// Receive completions one call of the RX engine may collect; it stops when they are full,
/// and `tcp_read_sock()` calls again. Small, as it is initialised on every call.
pub(crate) const RX_OUT: usize = 4;

/// What the RX engine hands back to its caller, to do after its lock is dropped.
pub(crate) struct RxOut {
    /// Receive completions, in order.
    rq: [Option<Completion>; RX_OUT],
    nrq: usize,
    /// Requests in the ORQ were completed: the completer delivers them.
    pub(crate) deliver: bool,
    /// TX has work (the first FPDU to report, or a completed request it waited for).
    pub(crate) kick: bool,
    /// An inbound request was queued: its response is to be sent (by TX, or by
    /// `data_ready` itself, see [`crate::tx::respond_bh`]).
    pub(crate) respond: bool,
    /// RX stopped at a Flush whose write-back the work item does
    /// ([`crate::responder::DeferredFlush`]).
    pub(crate) defer: bool,
    /// Fail the connection so.
    pub(crate) fail: Option<Fail>,
}

impl RxOut {
    /// Nothing to do yet.
    pub(crate) fn new() -> Self {
        Self {
            rq: [None; RX_OUT],
            nrq: 0,
            deliver: false,
            kick: false,
            respond: false,
            defer: false,
            fail: None,
        }
    }

    /// Whether the completions of another segment may not fit (a segment adds at most two:
    /// a held Send with Immediate and its own).
    pub(crate) fn full(&self) -> bool {
        self.nrq.saturating_add(2) > RX_OUT
    }

    /// Adds a receive completion.
    pub(crate) fn push_rq(&mut self, c: Completion) {
        if let Some(s) = self.rq.get_mut(self.nrq) {
            *s = Some(c);
            self.nrq += 1;
        }
    }

    /// The receive completions, in order.
    pub(crate) fn rq(&self) -> impl Iterator<Item = &Completion> {
        self.rq.iter().take(self.nrq).flatten()
    }
}

/// The local side of an outstanding request (in ORD order).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OrqWr {
    /// The send queue element's id, or `None` for the RTR Read.
    pub(crate) id: Option<u64>,
    /// The `SIW_OP_*` opcode it completes with.
    pub(crate) opcode: u8,
    /// Complete it on success.
    pub(crate) signalled: bool,
    /// Bytes it moves.
    pub(crate) len: u32,
    /// The local sink of a Read.
    pub(crate) sink: Sge,
    /// The status of a work request that expects no response ([`Request::Local`]) once it is
    /// done: it failed locally if not `SUCCESS`.
    pub(crate) status: u16,
}

impl OrqWr {
    /// The local side of a signalled work request that expects no response, completing with
    /// `wr` in send queue order.
    pub(crate) fn local(wr: SqCompletion) -> Self {
        Self {
            id: Some(wr.id),
            opcode: wr.opcode,
            signalled: true,
            len: wr.bytes,
            sink: Sge::default(),
            status: wr.status,
        }
    }

    /// The completion of the work request with `status`, if it has one to report: an error,
    /// or success when signalled.
    pub(crate) fn completion(&self, status: u16) -> Option<SqCompletion> {
        let id = self.id?;
        let report = self.signalled || status != crate::wqe::status::SUCCESS;
        let len = if status == crate::wqe::status::SUCCESS {
            self.len
        } else {
            0
        };
        report.then_some(SqCompletion::new(id, self.opcode, status, len))
    }
}

/// The completion opcode of a Read.
pub(crate) fn read_opcode(local_inv: bool) -> u8 {
    if local_inv {
        op::READ_LOCAL_INV
    } else {
        op::READ
    }
}

/// An inbound RDMA Read Request, its source checked when it arrived.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct InRead {
    /// Data Sink STag and TO (of the peer).
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    /// Size.
    pub(crate) size: u32,
    /// Data Source STag and TO (ours; checked again per FPDU of the response).
    pub(crate) src_stag: u32,
    pub(crate) src_to: u64,
}

/// An inbound QN 1 request, checked and executed when it arrived, to be answered in order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum InRequest {
    /// RDMA Read Request: the response reads the source when it is sent.
    Read(InRead),
    /// Atomic Request, executed when it arrived: the response returns the original value.
    Atomic {
        /// The Request Identifier to echo.
        req_id: u32,
        /// The Original Remote Data Value.
        orig: u64,
    },
    /// RDMA Flush, executed when it arrived: the response has no payload.
    Flush,
    /// Atomic Write, executed when it arrived: the response has no payload.
    AtomicWrite,
    /// RDMA Verify, executed when it arrived: the response returns the digest.
    Verify {
        /// The digest of the range (CRC32c).
        digest: [u8; crate::wire::commit::VERIFY_DIGEST_LEN],
    },
}

impl InRequest {
    /// Whether its response is a QN 3 message, which carries an MSN (all but the Read
    /// Response, which is tagged).
    pub(crate) fn qn3(&self) -> bool {
        !matches!(self, InRequest::Read(_))
    }
}

/// The ORQ: outstanding requests in issue order, with their local sides, and the work
/// requests posted behind them.
type Orq = OrdQueue<ORQ_RING, OrqWr, OrqRing>;

/// The ORQ's ring, allocated: inline its `ORQ_RING` entries (about 72 bytes each) would be a
/// value of about 14 KiB, built on the stack of the connection's set-up (which overflowed it
/// at 9 KiB).
struct OrqRing(KVec<Option<Slot<OrqWr>>>);

impl AsRef<[Option<Slot<OrqWr>>]> for OrqRing {
    fn as_ref(&self) -> &[Option<Slot<OrqWr>>] {
        &self.0
    }
}

impl AsMut<[Option<Slot<OrqWr>>]> for OrqRing {
    fn as_mut(&mut self) -> &mut [Option<Slot<OrqWr>>] {
        &mut self.0
    }
}

/// The responder's queue of inbound requests, sized by the IRD.
struct InboundRing(KVec<Option<InRequest>>);

impl AsRef<[Option<InRequest>]> for InboundRing {
    fn as_ref(&self) -> &[Option<InRequest>] {
        &self.0
    }
}

impl AsMut<[Option<InRequest>]> for InboundRing {
    fn as_mut(&mut self) -> &mut [Option<InRequest>] {
        &mut self.0
    }
}

/// What RX and TX both change.
struct Shared {
    /// The requester's outstanding requests.
    orq: Orq,
    /// The responder's inbound requests, within IRD.
    inbound: RespQueue<InRequest, InboundRing>,
    /// The connection failed (our Terminate, a peer's Terminate, or a socket error): the TX
    /// work moves the QP to ERROR and aborts the connection.
    fatal: bool,
    /// The Terminate to send before closing.
    term: Option<Terminate>,
    /// The completion status a peer's Terminate gives the oldest outstanding request (the
    /// one it refers to); the others are flushed.
    peer_term: Option<u16>,
    /// TX holds a send queue element back until a response arrives (no ORD credit, or a
    /// fence): a completed request must kick TX. Otherwise RX does not wake TX for it.
    tx_waits: bool,
    /// Someone completes the ORQ's finished entries ([`Path::begin_deliver`]): what it took
    /// off the ORQ may not be completed yet.
    delivering: bool,
    /// Entries finished while someone was delivering: it goes round again.
    redeliver: bool,
    /// The rest of the responses `data_ready` sent in part ([`crate::tx::respond_bh`]): TX
    /// sends it before anything else, freeing each response's IRD credit as its last byte
    /// goes. Empty ([`BhBurst::is_done`]) when there is none.
    tail: BhBurst,
}

/// The most bytes of a response FPDU [`crate::tx::respond_bh`] builds.
pub(crate) const BH_FPDU: usize = 96;

/// The most responses one `data_ready` call builds and sends ([`crate::tx::respond_bh`]).
pub(crate) const BH_BURST: usize = 8;

/// Responses `data_ready` built for one send, in a buffer on its stack (768 bytes), and, for
/// the rest TCP did not take, in `shared`: TX sends that first, freeing the IRD credit of each
/// response as its last byte goes ([`crate::wire::tx::RespBurst`]).
pub(crate) type BhBurst = RespBurst<{ BH_BURST * BH_FPDU }, BH_BURST>;

impl Shared {
    /// Whether a work request may complete at once, without waiting for others: nothing is
    /// in the ORQ or being completed from it.
    fn orq_idle(&self) -> bool {
        self.orq.is_empty() && !self.delivering
    }
}

/// Issuing a request to the ORQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Issue {
    /// Recorded: send it.
    Issued,
    /// No ORD credit: wait for a response (TX is kicked when one arrives).
    Wait,
}

/// The data path's shared state and fixed parameters of one connection.
#[pin_data]
pub(crate) struct Path {
    pd: PdId,
    qpn: u32,
    crc: bool,
    ord: u32,
    crc32c: KernelCrc32c,
    responder: bool,
    /// `shared.fatal`, readable without the lock: set with it (under the lock) and never
    /// cleared, so the TX pass of every message need not take `shared` to check it.
    fatal_hint: AtomicFlag,
    /// Whether inbound requests wait to be answered, changed only under `shared`: TX takes
    /// the lock for a response only if there is one. RX kicks TX after queueing one.
    inbound_hint: AtomicFlag,
    /// Whether the ORQ is in use (not [`Shared::orq_idle`]), changed only under `shared`.
    /// Only TX adds entries, so TX reading false knows a work request it completes now
    /// completes after every one before it.
    orq_hint: AtomicFlag,
    /// RX saw the first FPDU (responder); the work item tells the connection manager.
    rtr_seen: AtomicFlag,
    /// TX holds nothing half sent or to be sent before a response: its last pass ended idle
    /// and nothing was left for it since. Changed only with the socket locked (TX owning it,
    /// or `data_ready` in softirq), so read there it is exact.
    tx_quiet: AtomicFlag,
    /// `shared.tail` is set, readable without the lock: TX passes take it only then. Changed
    /// with the socket locked, as `tx_quiet`.
    tail_hint: AtomicFlag,
    #[pin]
    shared: SpinLockIrq<Shared>,
}

/// The parameters of a [`Path`].
pub(crate) struct PathParams {
    pub(crate) pd: PdId,
    pub(crate) qpn: u32,
    pub(crate) crc: bool,
    pub(crate) ird: u32,
    pub(crate) ord: u32,
    pub(crate) responder: bool,
}

impl Path {
    /// A fresh data path: the ORD is capped by the ORQ, the IRD by the device limit.
    pub(crate) fn new(p: PathParams) -> Result<impl PinInit<Self, Error>> {
        // The negotiated ORD is at most the peer's IRD (MPA-11, RDMAP-07): never raise it, or
        // the peer terminates with "IRQ exceeded". With ORD 0 a Read fails at once (as in siw)
        // instead of waiting for a credit that never comes.
        let ord = p.ord.min(ORQ_SIZE as u32);
        let ird = p.ird.min(limits::MAX_IRD);
        let mut ring = KVec::with_capacity(ird.max(1) as usize, GFP_KERNEL)?;
        for _ in 0..ird.max(1) {
            ring.push(None, GFP_KERNEL)?;
        }
        let shared = Shared {
            orq: Orq::with_ring(
                ord as u16,
                OrqRing(KVec::from_elem(None, ORQ_RING, GFP_KERNEL)?),
            ),
            inbound: RespQueue::new(ird as u16, InboundRing(ring)),
            fatal: false,
            term: None,
            peer_term: None,
            tx_waits: false,
            delivering: false,
            redeliver: false,
            tail: BhBurst::new(),
        };
        Ok(try_pin_init!(Path {
            pd: p.pd,
            qpn: p.qpn,
            crc: p.crc,
            ord,
            crc32c: KernelCrc32c,
            responder: p.responder,
            fatal_hint: AtomicFlag::new(false),
            inbound_hint: AtomicFlag::new(false),
            orq_hint: AtomicFlag::new(false),
            rtr_seen: AtomicFlag::new(false),
            tx_quiet: AtomicFlag::new(false),
            tail_hint: AtomicFlag::new(false),
            shared <- new_spinlock_irq!(shared, "rsiw_path_shared"),
        }))
    }

    /// The QP's PD, for the access checks.
    pub(crate) fn pd(&self) -> PdId {
        self.pd
    }

    /// The QP number, for messages.
    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Whether MPA CRC is in use.
    pub(crate) fn crc(&self) -> bool {
        self.crc
    }

    /// The kernel CRC32c.
    pub(crate) fn crc32c(&self) -> &KernelCrc32c {
        &self.crc32c
    }

    /// The ORD in use: 0 means no request may be sent.
    pub(crate) fn ord(&self) -> u32 {
        self.ord
    }

    /// Whether we are the MPA responder.
    pub(crate) fn is_responder(&self) -> bool {
        self.responder
    }

    // The pending error.

    /// Records a fatal error and the Terminate to send, unless one was recorded already.
    pub(crate) fn set_fatal(&self, f: Fail) {
        let mut sh = self.shared.lock();
        if !sh.fatal {
            sh.fatal = true;
            sh.term = match f {
                Fail::Terminate(t) => Some(t),
                Fail::Silent => None,
            };
            self.fatal_hint.store(true, Release);
        }
    }

    /// Whether a fatal error was recorded. Without a lock.
    pub(crate) fn is_fatal(&self) -> bool {
        self.fatal_hint.load(Acquire)
    }

    /// Takes the Terminate to send, if any.
    pub(crate) fn take_terminate(&self) -> Option<Terminate> {
        self.shared.lock().term.take()
    }

    /// A Terminate from the peer: the oldest outstanding request fails with `status`.
    pub(crate) fn set_peer_term(&self, status: u16) {
        self.shared.lock().peer_term = Some(status);
    }

    // The responder's first FPDU.

    /// RX saw the initiator's first FPDU (responder in peer-to-peer mode).
    pub(crate) fn set_rtr_seen(&self) {
        self.rtr_seen.store(true, Release);
    }

    /// Returns whether RX saw the first FPDU since the last call. A plain load first: this
    /// runs on every TX pass and is true once per connection.
    pub(crate) fn take_rtr_seen(&self) -> bool {
        self.rtr_seen.load(Acquire) && self.rtr_seen.xchg(false, Full)
    }

    // The requester's ORQ.

    /// Records an outstanding request before it is sent. Fails without an ORD credit or
    /// room in the ORQ (TX then waits for a response, which kicks it).
    ///
    /// `earlier` are the messages TX sent before it and has not finished: those that would
    /// complete by themselves when finished join the ORQ first ([`Done::InOrder`]), since the
    /// request's response may arrive (and complete it) before TX finishes them (T-01).
    pub(crate) fn issue(&self, req: Request, wr: OrqWr, earlier: &mut [(usize, Done)]) -> Issue {
        let mut sh = self.shared.lock();
        let direct = earlier.iter().filter(|(_, d)| d.completes()).count();
        if sh.orq.room() <= direct {
            sh.tx_waits = true;
            return Issue::Wait;
        }
        for (_, d) in earlier.iter_mut() {
            if let Done::Sq { wr, .. } = *d {
                if d.completes() && sh.orq.issue_with(Request::Local, OrqWr::local(wr)).is_ok() {
                    *d = Done::InOrder;
                }
            }
        }
        let r = sh.orq.issue_with(req, wr);
        if !sh.orq.is_empty() {
            self.orq_hint.store(true, Relaxed);
        }
        match r {
            Ok(()) => Issue::Issued,
            Err(OrdBusy::NoCredit | OrdBusy::RingFull) => {
                sh.tx_waits = true;
                Issue::Wait
            }
        }
    }

    /// Whether the ORQ is idle: a work request TX completes now completes after every one
    /// before it. Without a lock.
    pub(crate) fn orq_idle(&self) -> bool {
        !self.orq_hint.load(Acquire)
    }

    /// Whether a work request that expects no response can be posted now: the ORQ is idle,
    /// or has room for it ([`Path::defer`]). If not, TX waits (a completion kicks it).
    pub(crate) fn local_room(&self) -> bool {
        let mut sh = self.shared.lock();
        if sh.orq_idle() || sh.orq.room() > 0 {
            return true;
        }
        sh.tx_waits = true;
        false
    }

    /// A signalled work request that expects no response, posted now, completes with `wr`:
    /// after the entries in the ORQ, if there are any (returns true: [`Path::local_done`] once
    /// it is done, or already `done`). Returns false if it may complete at once (or there is
    /// no room, which [`Path::local_room`] rules out).
    pub(crate) fn defer(&self, wr: SqCompletion, done: bool) -> bool {
        let mut sh = self.shared.lock();
        if sh.orq_idle() {
            return false;
        }
        let r = if done {
            sh.orq.issue_local_done(OrqWr::local(wr))
        } else {
            sh.orq.issue_with(Request::Local, OrqWr::local(wr))
        };
        self.orq_hint.store(true, Relaxed);
        r.is_ok()
    }

    /// The oldest work request in the ORQ that expects no response is done, with `status`
    /// (messages finish in send queue order). Returns whether it can complete now (it is the
    /// oldest entry), for the caller to deliver.
    pub(crate) fn local_done(&self, status: u16) -> bool {
        let mut sh = self.shared.lock();
        sh.orq.local_done(|w| w.status = status);
        sh.orq.head_done()
    }

    /// The fence condition (T-03): whether requests are outstanding. If so, TX waits, and
    /// the completion of the last one kicks it.
    pub(crate) fn fenced(&self) -> bool {
        let mut sh = self.shared.lock();
        if !sh.orq.has_requests() {
            return false;
        }
        // Under the lock the completer completes requests with: it sees the flag.
        sh.tx_waits = true;
        true
    }

    /// Matches the first segment of a Read Response against the oldest outstanding Read
    /// (RDMAP-05); returns the cursor that matches its next segments without this lock
    /// ([`ReadCursor::next`]) and finds the Read at its end without a search. The Read stays
    /// outstanding until [`Path::read_response_end`].
    pub(crate) fn read_response(
        &self,
        stag: u32,
        to: u64,
        len: u32,
        last: bool,
    ) -> Result<ReadCursor, TermCode> {
        self.shared
            .lock()
            .orq
            .read_response_cursor(stag, to, len, last)
    }

    /// The last Read Response segment of the oldest outstanding Read ended, its payload
    /// placed (`cursor`: what matched its segments after the first): the Read is done, for
    /// [`completer::deliver`](crate::completer::deliver).
    pub(crate) fn read_response_end(&self, cursor: Option<ReadCursor>) {
        let mut sh = self.shared.lock();
        match cursor {
            Some(c) => sh.orq.read_response_end_with(c),
            None => sh.orq.read_response_end(),
        };
    }

    /// Matches a QN 3 response against the oldest outstanding request of its kind (T-12).
    pub(crate) fn response(&self, seg: &Segment) -> Result<Answered<OrqWr>, TermCode> {
        self.shared.lock().orq.on_response_with(seg)
    }

    /// Becomes the one that completes the ORQ's finished entries (completions go in send
    /// queue order, so one at a time), unless someone is: then it goes round again for them
    /// ([`Path::end_deliver`]) and this returns false.
    pub(crate) fn begin_deliver(&self) -> bool {
        let mut sh = self.shared.lock();
        if sh.delivering {
            sh.redeliver = true;
            return false;
        }
        sh.delivering = true;
        true
    }

    /// Takes the oldest entry if it is finished (its response arrived, or it expects none and
    /// is done); sets `kick` if TX waited for one. Only between [`Path::begin_deliver`] and
    /// [`Path::end_deliver`].
    pub(crate) fn pop_completed(&self, kick: &mut bool) -> Option<Answered<OrqWr>> {
        let mut sh = self.shared.lock();
        let a = sh.orq.pop_completed_with()?;
        if core::mem::take(&mut sh.tx_waits) {
            *kick = true;
        }
        Some(a)
    }

    /// The completions taken off the ORQ are written: returns true if entries finished in the
    /// meantime (go round again), else stops delivering.
    pub(crate) fn end_deliver(&self) -> bool {
        let mut sh = self.shared.lock();
        if core::mem::take(&mut sh.redeliver) {
            return true;
        }
        sh.delivering = false;
        if sh.orq.is_empty() {
            // After the completions: TX may complete at once again.
            self.orq_hint.store(false, Release);
        }
        false
    }

    /// Takes the completion status a peer's Terminate gave the oldest outstanding request.
    pub(crate) fn take_peer_term(&self) -> Option<u16> {
        self.shared.lock().peer_term.take()
    }

    /// Takes the oldest request off the ORQ, answered or not (the connection is going down).
    pub(crate) fn pop_orq(&self) -> Option<Answered<OrqWr>> {
        let mut sh = self.shared.lock();
        let a = sh.orq.pop_front();
        if sh.orq_idle() {
            self.orq_hint.store(false, Release);
        }
        a
    }

    // The responder's inbound queue.

    /// Admits an inbound request: within IRD, runs `exec` once and queues what it returns.
    pub(crate) fn admit<E>(
        &self,
        exec: impl FnOnce() -> Result<InRequest, E>,
    ) -> Result<(), Refused<E>> {
        let mut sh = self.shared.lock();
        sh.inbound.admit(exec)?;
        self.inbound_hint.store(true, Release);
        Ok(())
    }

    /// Takes the oldest inbound request to answer, if any, with the MSN of its response (QN 3
    /// responses: [`RespQueue::answer`], whoever sends them). Takes the lock only if there
    /// is one.
    pub(crate) fn next_inbound(&self) -> Option<Answer<InRequest>> {
        if !self.inbound_hint.load(Acquire) {
            return None;
        }
        let mut sh = self.shared.lock();
        let r = sh.inbound.answer(InRequest::qn3);
        if sh.inbound.queued() == 0 {
            self.inbound_hint.store(false, Release);
        }
        r
    }

    /// Whether inbound requests wait to be answered. Without a lock.
    pub(crate) fn has_inbound(&self) -> bool {
        self.inbound_hint.load(Acquire)
    }

    /// The oldest inbound request to answer, with the MSN its response will carry, left
    /// queued. Takes the lock only if there is one.
    pub(crate) fn peek_inbound(&self) -> Option<Answer<InRequest>> {
        if !self.inbound_hint.load(Acquire) {
            return None;
        }
        self.shared.lock().inbound.peek_answer(InRequest::qn3)
    }

    // What `data_ready` hands TX ([`crate::tx::respond_bh`]). Socket locked.

    /// Whether TX is quiet (see `tx_quiet`).
    pub(crate) fn tx_quiet(&self) -> bool {
        self.tx_quiet.load(Relaxed)
    }

    /// TX starts a pass (false) or ended one with nothing held (true).
    pub(crate) fn set_tx_quiet(&self, quiet: bool) {
        self.tx_quiet.store(quiet, Relaxed);
    }

    /// Leaves the rest of responses to TX, which sends it first (`t` is copied in place).
    pub(crate) fn set_tail(&self, t: &BhBurst) {
        self.tx_quiet.store(false, Relaxed);
        self.shared.lock().tail = *t;
        self.tail_hint.store(true, Relaxed);
    }

    /// Takes the rest of responses that TX must send first, if any. Takes the lock only if
    /// there is one. Process context (the copy is as large as [`BhBurst`]).
    pub(crate) fn take_tail(&self) -> Option<BhBurst> {
        if !self.tail_hint.load(Relaxed) {
            return None;
        }
        self.tail_hint.store(false, Relaxed);
        let mut sh = self.shared.lock();
        if sh.tail.is_done() {
            return None;
        }
        let t = sh.tail;
        sh.tail.clear();
        Some(t)
    }

    /// A response went out: its IRD credit is free.
    pub(crate) fn responded(&self) {
        self.shared.lock().inbound.responded();
    }

    /// `n` responses went out: their IRD credits are free.
    pub(crate) fn responded_n(&self, n: usize) {
        if n > 0 {
            let mut sh = self.shared.lock();
            for _ in 0..n {
                sh.inbound.responded();
            }
        }
    }

    /// Drops the inbound requests (the connection is going down).
    pub(crate) fn drain_inbound(&self) {
        self.shared.lock().inbound.clear();
        self.inbound_hint.store(false, Release);
    }
}
