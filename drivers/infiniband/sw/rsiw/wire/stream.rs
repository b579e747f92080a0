// SPDX-License-Identifier: GPL-2.0

//! Per-stream state: MSN counters, message offsets, IRD/ORD credits and
//! response matching. Plain bounded structs that the driver owns and locks.
//!
//! - [`TxMsn`]: the MSN of the next message per queue (first MSN is 1,
//!   wrapping mod 2^32, DDP-05).
//! - [`RxUntagged`]: the expected MSN and MO per queue; checks every
//!   untagged segment (DDP-05, DDP-06, DDP-07, DDP-09).
//! - [`IrdCredits`]: the responder's inbound request slots (RDMAP-07, D-08).
//! - [`OrdQueue`]: the requester's outstanding QN 1 requests, one credit
//!   pool for Reads, Atomics, Flush, Verify and Atomic Write (T-04), matching
//!   Read Responses (RDMAP-05) and QN 3 responses (ATOM-06, T-12), with the
//!   work requests posted behind them, so all complete in order (T-01).
//! - [`RespQueue`]: the responder's inbound QN 1 requests in arrival order,
//!   within IRD, each executed once and answered once (T-01, T-02, T-05),
//!   with the MSNs of the QN 3 responses ([`RespQueue::answer`]).

use crate::wire::hdr::{Body, Opcode, Placement, NUM_QN, QN_READ_REQ, QN_RESPONSE};
use crate::wire::rx::Segment;
use crate::wire::term::{DdpTaggedCode, DdpUntaggedCode, RdmapCode, TermCode};
use core::marker::PhantomData;

/// Transmit MSN counters, one per queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxMsn {
    next: [u32; NUM_QN],
}

impl Default for TxMsn {
    fn default() -> Self {
        Self::new()
    }
}

impl TxMsn {
    /// Fresh counters: the first message on every queue carries MSN 1.
    pub fn new() -> Self {
        TxMsn { next: [1; NUM_QN] }
    }

    /// Takes the MSN for the next message on `qn` (`None` if `qn` > 3).
    pub fn take(&mut self, qn: u32) -> Option<u32> {
        let s = self.next.get_mut(usize::try_from(qn).ok()?)?;
        let v = *s;
        *s = v.wrapping_add(1);
        Some(v)
    }

    /// The MSN the next message on `qn` will carry.
    pub fn peek(&self, qn: u32) -> Option<u32> {
        self.next.get(usize::try_from(qn).ok()?).copied()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RxQ {
    msn: u32,
    mo: u32,
}

/// Where an accepted untagged segment sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgPos {
    /// First segment of the message (a new buffer is taken).
    pub first: bool,
    /// Last segment: the message can be Delivered (DDP-07).
    pub complete: bool,
}

/// Receive-side untagged state, one entry per queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxUntagged {
    q: [RxQ; NUM_QN],
}

impl Default for RxUntagged {
    fn default() -> Self {
        Self::new()
    }
}

impl RxUntagged {
    /// Fresh state: MSN 1 expected on every queue, MO 0.
    pub fn new() -> Self {
        RxUntagged {
            q: [RxQ { msn: 1, mo: 0 }; NUM_QN],
        }
    }

    /// The MSN expected next on `qn`.
    pub fn expected_msn(&self, qn: u32) -> Option<u32> {
        Some(self.q.get(usize::try_from(qn).ok()?)?.msn)
    }

    /// Checks an untagged segment against the queue state and advances it.
    ///
    /// `avail` is the length of the buffer the message lands in (the posted
    /// receive for QN 0), or `None` if there is none (1/2/02). Pass
    /// `Some(u64::MAX)` for queues whose buffers the driver accounts
    /// elsewhere (QN 1 requests via [`IrdCredits`], QN 2, QN 3).
    ///
    /// The MO of commit-draft requests is ignored.
    pub fn check(&mut self, seg: &Segment, avail: Option<u64>) -> Result<MsgPos, TermCode> {
        let Placement::Untagged { qn, msn, mo, .. } = seg.hdr.placement else {
            return Err(TermCode::operation(RdmapCode::UnexpectedOpcode));
        };
        let q = usize::try_from(qn)
            .ok()
            .and_then(|i| self.q.get_mut(i))
            .ok_or(TermCode::untagged(DdpUntaggedCode::InvalidQn))?;
        if msn != q.msn {
            return Err(TermCode::untagged(DdpUntaggedCode::MsnRange));
        }
        let avail = avail.ok_or(TermCode::untagged(DdpUntaggedCode::NoBuffer))?;
        let ignore_mo = matches!(
            seg.hdr.opcode,
            Opcode::FlushRequest | Opcode::VerifyRequest | Opcode::AtomicWriteRequest
        );
        let mo = if ignore_mo { q.mo } else { mo };
        if mo != q.mo {
            return Err(TermCode::untagged(DdpUntaggedCode::InvalidMo));
        }
        let end = u64::from(mo).saturating_add(u64::from(seg.payload_len));
        let new_mo =
            u32::try_from(end).map_err(|_| TermCode::untagged(DdpUntaggedCode::TooLong))?;
        if end > avail {
            return Err(TermCode::untagged(DdpUntaggedCode::TooLong));
        }
        let first = q.mo == 0;
        if seg.hdr.last {
            q.msn = q.msn.wrapping_add(1);
            q.mo = 0;
        } else {
            q.mo = new_mo;
        }
        Ok(MsgPos {
            first,
            complete: seg.hdr.last,
        })
    }
}

/// The responder's inbound request credits (IRD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IrdCredits {
    ird: u16,
    used: u16,
}

impl IrdCredits {
    /// `ird` slots, as negotiated.
    pub fn new(ird: u16) -> Self {
        IrdCredits { ird, used: 0 }
    }

    /// Slots in use.
    pub fn used(&self) -> u16 {
        self.used
    }

    /// Takes a slot for an inbound QN 1 request. A peer exceeding IRD gets
    /// 0/2/07 (D-08).
    pub fn take(&mut self) -> Result<(), TermCode> {
        if self.used >= self.ird {
            return Err(TermCode::operation(RdmapCode::CatastrophicStream));
        }
        self.used = self.used.saturating_add(1);
        Ok(())
    }

    /// Frees a slot once the last response byte was handed to TCP (T-05).
    pub fn release(&mut self) {
        self.used = self.used.saturating_sub(1);
    }
}

/// An outstanding request at the requester.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// RDMA Read: the sink the response must land in.
    Read {
        /// Data Sink STag.
        sink_stag: u32,
        /// Data Sink TO.
        sink_to: u64,
        /// Read Message Size.
        size: u32,
    },
    /// Atomic Request with its Request Identifier.
    Atomic {
        /// Request Identifier.
        req_id: u32,
    },
    /// RDMA Flush.
    Flush,
    /// RDMA Verify.
    Verify,
    /// Atomic Write.
    AtomicWrite,
    /// No request: a work request that expects no response (a Send, a
    /// Write, a local operation) posted after outstanding requests. It holds
    /// no ORD credit and matches no response; it completes, in send queue
    /// order (T-01), once it is done locally ([`OrdQueue::local_done`]) and
    /// everything before it completed.
    Local,
}

impl Request {
    /// The response this request expects, if any.
    fn response_opcode(&self) -> Option<Opcode> {
        Some(match self {
            Request::Read { .. } => Opcode::ReadResponse,
            Request::Atomic { .. } => Opcode::AtomicResponse,
            Request::Flush => Opcode::FlushResponse,
            Request::Verify => Opcode::VerifyResponse,
            Request::AtomicWrite => Opcode::AtomicWriteResponse,
            Request::Local => return None,
        })
    }
}

/// An entry of an [`OrdQueue`]'s ring (opaque: a ring an owner sizes is a
/// buffer of `Option<Slot<T>>`, all `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot<T> {
    req: Request,
    got: u32,
    done: bool,
    local: T,
}

/// The rest of the oldest outstanding Read's response, after its first
/// segment ([`OrdQueue::read_response_cursor`]): its next segments are
/// matched here exactly as [`OrdQueue::read_response_segment`] would match
/// them (1/1/00 for another STag, 1/1/01 for a TO or length that does not
/// continue the Read), and counted into the Read at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadCursor {
    stag: u32,
    /// Where the next segment must start (`None`: past the end of the TO
    /// space, which no segment continues).
    next_to: Option<u64>,
    /// Bytes of the Read not yet matched.
    left: u32,
    /// Bytes matched here, not yet counted in the queue.
    unsynced: u32,
    /// The Read's entry in the queue's ring.
    slot: usize,
}

impl ReadCursor {
    /// Matches the Read's next segment. On an error nothing changes.
    pub fn next(&mut self, stag: u32, to: u64, len: u32, last: bool) -> Result<(), TermCode> {
        let bounds = TermCode::tagged(DdpTaggedCode::BaseBounds);
        if stag != self.stag {
            return Err(TermCode::tagged(DdpTaggedCode::InvalidStag));
        }
        if self.next_to != Some(to) || len > self.left || (last && len != self.left) {
            return Err(bounds);
        }
        self.next_to = to.checked_add(u64::from(len));
        self.left = self.left.saturating_sub(len);
        self.unsynced = self.unsynced.saturating_add(len);
        Ok(())
    }
}

/// Why a request cannot be issued now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrdBusy {
    /// ORD requests are already outstanding; wait for a response.
    NoCredit,
    /// The completion ring is full; pop completed entries first.
    RingFull,
}

/// The requester's outstanding QN 1 requests, in issue order: one ordered
/// list, each entry tagged with the response it expects (T-12) and carrying
/// the requester's local side `T` (the work request to complete, the local
/// buffer a response lands in). Work requests that expect no response but
/// were posted behind outstanding requests are entries too
/// ([`Request::Local`]), so that everything completes in send queue order.
///
/// `N` bounds the ring of [`OrdQueue::new`], kept inline; it must be at
/// least the ORD. [`OrdQueue::with_ring`] takes a ring `B` its owner sizes
/// and allocates instead (a driver's ring is too large for a kernel stack).
#[derive(Clone, Copy, Debug)]
pub struct OrdQueue<const N: usize, T: Copy = (), B = [Option<Slot<T>>; N]> {
    ring: B,
    _local: PhantomData<T>,
    head: usize,
    len: usize,
    inflight: u16,
    ord: u16,
}

/// A request whose response arrived, or that was taken off the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answered<T> {
    /// The request.
    pub req: Request,
    /// Its local side.
    pub local: T,
    /// Its response arrived in full.
    pub done: bool,
}

impl<const N: usize, T, B> OrdQueue<N, T, B>
where
    T: Copy + Default,
    B: AsRef<[Option<Slot<T>>]> + AsMut<[Option<Slot<T>>]>,
{
    /// Records a request with a default local side (see
    /// [`OrdQueue::issue_with`]).
    pub fn issue(&mut self, req: Request) -> Result<(), OrdBusy> {
        self.issue_with(req, T::default())
    }
}

impl<const N: usize, T: Copy> OrdQueue<N, T> {
    /// An empty queue allowing `ord` outstanding requests, with an inline
    /// ring of `N` entries.
    pub fn new(ord: u16) -> Self {
        Self::with_ring(ord, [None; N])
    }
}

impl<const N: usize, T, B> OrdQueue<N, T, B>
where
    T: Copy,
    B: AsRef<[Option<Slot<T>>]> + AsMut<[Option<Slot<T>>]>,
{
    /// An empty queue allowing `ord` outstanding requests, in `ring` (its
    /// length bounds the queue; `N` is not used). Every entry is cleared.
    pub fn with_ring(ord: u16, mut ring: B) -> Self {
        ring.as_mut().iter_mut().for_each(|e| *e = None);
        OrdQueue {
            ring,
            _local: PhantomData,
            head: 0,
            len: 0,
            inflight: 0,
            ord,
        }
    }

    /// The ring's length.
    fn cap(&self) -> usize {
        self.ring.as_ref().len()
    }

    /// Requests awaiting a response.
    pub fn inflight(&self) -> u16 {
        self.inflight
    }

    /// Requests in the queue: awaiting a response, or answered and not yet
    /// popped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if nothing is outstanding or awaiting pop: a work request
    /// posted now may complete as soon as it is done.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True if a request (not a [`Request::Local`]) is outstanding or awaiting
    /// pop: the fence condition (T-03).
    pub fn has_requests(&self) -> bool {
        (0..self.len)
            .any(|k| matches!(self.ring.as_ref().get(self.idx(k)), Some(Some(s)) if s.req != Request::Local))
    }

    fn idx(&self, i: usize) -> usize {
        self.head
            .wrapping_add(i)
            .checked_rem(self.cap())
            .unwrap_or(0)
    }

    /// Records a request before it is sent (a response may arrive before
    /// the send returns, as `siw` notes), with its local side.
    /// A [`Request::Local`] takes no ORD credit.
    pub fn issue_with(&mut self, req: Request, local: T) -> Result<(), OrdBusy> {
        let credit = req != Request::Local;
        if credit && self.inflight >= self.ord {
            return Err(OrdBusy::NoCredit);
        }
        if self.len >= self.cap() {
            return Err(OrdBusy::RingFull);
        }
        let i = self.idx(self.len);
        let s = self.ring.as_mut().get_mut(i).ok_or(OrdBusy::RingFull)?;
        *s = Some(Slot {
            req,
            got: 0,
            done: false,
            local,
        });
        self.len = self.len.saturating_add(1);
        if credit {
            self.inflight = self.inflight.saturating_add(1);
        }
        Ok(())
    }

    /// Records a [`Request::Local`] already done (a local operation posted
    /// behind outstanding requests: it happened, and completes in order).
    pub fn issue_local_done(&mut self, local: T) -> Result<(), OrdBusy> {
        self.issue_with(Request::Local, local)?;
        let i = self.idx(self.len.saturating_sub(1));
        if let Some(Some(s)) = self.ring.as_mut().get_mut(i) {
            s.done = true;
        }
        Ok(())
    }

    /// Whether the oldest entry is finished: [`OrdQueue::pop_completed`]
    /// takes it.
    pub fn head_done(&self) -> bool {
        self.len > 0 && matches!(self.ring.as_ref().get(self.head), Some(Some(s)) if s.done)
    }

    /// How many more entries the ring takes.
    pub fn room(&self) -> usize {
        self.cap().saturating_sub(self.len)
    }

    /// The ring index of the oldest entry not yet done that `want` accepts.
    /// Walks the ring from the head, wrapping (no division per entry).
    fn find_idx_by(&self, want: impl Fn(&Request) -> bool) -> Option<usize> {
        let ring = self.ring.as_ref();
        let mut i = self.head;
        for _ in 0..self.len {
            if let Some(Some(s)) = ring.get(i) {
                if !s.done && want(&s.req) {
                    return Some(i);
                }
            }
            i = i.saturating_add(1);
            if i >= ring.len() {
                i = 0;
            }
        }
        None
    }

    /// The oldest entry not yet done that `want` accepts.
    fn find_by(&mut self, want: impl Fn(&Request) -> bool) -> Option<&mut Slot<T>> {
        let i = self.find_idx_by(want)?;
        self.ring.as_mut().get_mut(i)?.as_mut()
    }

    /// The oldest outstanding Read (`read`), or the oldest outstanding
    /// request that expects a QN 3 response.
    fn find(&mut self, read: bool) -> Option<&mut Slot<T>> {
        self.find_by(|r| match r {
            Request::Read { .. } => read,
            Request::Local => false,
            _ => !read,
        })
    }

    /// The oldest [`Request::Local`] not yet done is done (its message is
    /// with the transport, or its local operation happened): `f` updates its
    /// local side (with a failure, say). Locals are done in issue order.
    /// Returns false if there is none.
    pub fn local_done(&mut self, f: impl FnOnce(&mut T)) -> bool {
        match self.find_by(|r| *r == Request::Local) {
            Some(s) => {
                s.done = true;
                f(&mut s.local);
                true
            }
            None => false,
        }
    }

    fn finish(&mut self) {
        self.inflight = self.inflight.saturating_sub(1);
    }

    /// Matches a Read Response segment against the oldest outstanding Read
    /// (RDMAP-05, T-20): wrong STag or no Read outstanding is 1/1/00; a TO
    /// or length that does not continue the Read is 1/1/01. Returns true
    /// when the Read is complete: [`OrdQueue::read_response_segment`] and,
    /// for the last segment, [`OrdQueue::read_response_end`] at once, for a
    /// segment whose payload is already placed.
    pub fn on_read_response(
        &mut self,
        stag: u32,
        to: u64,
        len: u32,
        last: bool,
    ) -> Result<bool, TermCode> {
        self.read_response_segment(stag, to, len, last)?;
        if last {
            self.read_response_end();
        }
        Ok(last)
    }

    /// The header of a Read Response segment: matched and counted as
    /// [`OrdQueue::on_read_response`] does, but the Read stays outstanding
    /// (not done, its ORD credit held) even if the segment is its last, until
    /// [`OrdQueue::read_response_end`] says that segment's payload is placed.
    /// A Read done at the header could be completed, and its sink
    /// invalidated (Read with Local Invalidate) and reused by the consumer,
    /// while the rest of the segment is still arriving.
    pub fn read_response_segment(
        &mut self,
        stag: u32,
        to: u64,
        len: u32,
        last: bool,
    ) -> Result<(), TermCode> {
        let bad_stag = TermCode::tagged(DdpTaggedCode::InvalidStag);
        let s = self.find(true).ok_or(bad_stag)?;
        let (got, _) = Self::match_read(s, stag, to, len, last)?;
        s.got = got;
        Ok(())
    }

    /// [`OrdQueue::read_response_segment`] for the first segment of a Read's
    /// response, returning a [`ReadCursor`] that matches its next segments
    /// as this would, without the queue (a data path keeps the queue under a
    /// lock that RX then need not take per segment), and that finds the Read
    /// again at its end ([`OrdQueue::read_response_end_with`]) without a
    /// search. The cursor's segments are counted into the Read there. Until
    /// then the Read stays the oldest outstanding one (nothing but its last
    /// segment's end makes it done), so the cursor follows the Read this
    /// would find.
    pub fn read_response_cursor(
        &mut self,
        stag: u32,
        to: u64,
        len: u32,
        last: bool,
    ) -> Result<ReadCursor, TermCode> {
        let bad_stag = TermCode::tagged(DdpTaggedCode::InvalidStag);
        let i = self
            .find_idx_by(|r| matches!(r, Request::Read { .. }))
            .ok_or(bad_stag)?;
        let s = self
            .ring
            .as_mut()
            .get_mut(i)
            .and_then(|s| s.as_mut())
            .ok_or(bad_stag)?;
        let (got, size) = Self::match_read(s, stag, to, len, last)?;
        s.got = got;
        Ok(ReadCursor {
            stag,
            next_to: to.checked_add(u64::from(len)),
            left: size.saturating_sub(got),
            unsynced: 0,
            slot: i,
        })
    }

    /// Matches a Read Response segment against the Read in `s`: the
    /// Read's bytes received with it, and its size.
    fn match_read(
        s: &Slot<T>,
        stag: u32,
        to: u64,
        len: u32,
        last: bool,
    ) -> Result<(u32, u32), TermCode> {
        let bad_stag = TermCode::tagged(DdpTaggedCode::InvalidStag);
        let bounds = TermCode::tagged(DdpTaggedCode::BaseBounds);
        let Request::Read {
            sink_stag,
            sink_to,
            size,
        } = s.req
        else {
            return Err(bad_stag);
        };
        if stag != sink_stag {
            return Err(bad_stag);
        }
        if sink_to.checked_add(u64::from(s.got)) != Some(to) {
            return Err(bounds);
        }
        let got = s.got.checked_add(len).ok_or(bounds)?;
        if got > size || (last && got != size) {
            return Err(bounds);
        }
        Ok((got, size))
    }

    /// [`OrdQueue::read_response_end`] for the Read a [`ReadCursor`]
    /// follows, after the segments it matched: the Read is found where the
    /// cursor's first segment found it. Returns false, and changes nothing,
    /// if that entry is no longer the outstanding Read of the cursor (the
    /// queue was cleared meanwhile) or the Read is not all there.
    pub fn read_response_end_with(&mut self, cursor: ReadCursor) -> bool {
        let Some(Some(s)) = self.ring.as_mut().get_mut(cursor.slot) else {
            return false;
        };
        match s.req {
            Request::Read {
                sink_stag, size, ..
            } if !s.done && sink_stag == cursor.stag => {
                let got = s.got.saturating_add(cursor.unsynced);
                if got != size {
                    return false;
                }
                s.got = got;
                s.done = true;
            }
            _ => return false,
        }
        self.finish();
        true
    }

    /// The last segment of the oldest outstanding Read ended, its payload
    /// placed (and its CRC checked): the Read is done, to be completed in
    /// order. Returns false if no outstanding Read has all of its response.
    pub fn read_response_end(&mut self) -> bool {
        let Some(s) = self.find(true) else {
            return false;
        };
        if !matches!(s.req, Request::Read { size, .. } if size == s.got) {
            return false;
        }
        s.done = true;
        self.finish();
        true
    }

    /// Matches a QN 3 response (Atomic, Flush, Verify or Atomic Write
    /// Response) against the oldest outstanding non-Read request (T-12).
    /// A response with nothing outstanding, of the wrong kind or with the
    /// wrong Request Identifier is an invalid response: 0/2/06 (D-02).
    /// Returns true when the request is complete. MSN order on QN 3 is
    /// checked by [`RxUntagged::check`].
    pub fn on_response(&mut self, seg: &Segment) -> Result<bool, TermCode> {
        self.on_response_with(seg).map(|a| a.done)
    }

    /// [`OrdQueue::on_response`], returning the matched request with its
    /// local side (where an Atomic Response's original value goes).
    pub fn on_response_with(&mut self, seg: &Segment) -> Result<Answered<T>, TermCode> {
        let bad = TermCode::operation(RdmapCode::UnexpectedOpcode);
        match seg.hdr.placement {
            Placement::Untagged { qn, .. } if qn == QN_RESPONSE => {}
            _ => return Err(bad),
        }
        let s = self.find(false).ok_or(bad)?;
        if s.req.response_opcode() != Some(seg.hdr.opcode) {
            return Err(bad);
        }
        if let (Request::Atomic { req_id }, Body::AtomicResponse(r)) = (s.req, &seg.body) {
            if r.req_id != req_id {
                return Err(bad);
            }
        }
        let a = Answered {
            req: s.req,
            local: s.local,
            done: seg.hdr.last,
        };
        if seg.hdr.last {
            s.done = true;
            self.finish();
        }
        Ok(a)
    }

    /// Pops the oldest request if it is complete, so completions are
    /// reported in issue order.
    pub fn pop_completed(&mut self) -> Option<Request> {
        self.pop_completed_with().map(|a| a.req)
    }

    /// [`OrdQueue::pop_completed`], with the request's local side.
    pub fn pop_completed_with(&mut self) -> Option<Answered<T>> {
        match self.ring.as_ref().get(self.head) {
            Some(Some(s)) if s.done && self.len > 0 => self.pop_front(),
            _ => None,
        }
    }

    /// Pops the oldest request, answered or not (the stream is going down:
    /// the driver flushes them in order).
    pub fn pop_front(&mut self) -> Option<Answered<T>> {
        if self.len == 0 {
            return None;
        }
        let s = self.ring.as_mut().get_mut(self.head)?.take()?;
        self.head = self.idx(1);
        self.len = self.len.saturating_sub(1);
        if !s.done && s.req != Request::Local {
            self.finish();
        }
        Some(Answered {
            req: s.req,
            local: s.local,
            done: s.done,
        })
    }

    /// Drops everything (the stream is going down); returns how many
    /// requests were outstanding, to be flushed by the driver.
    pub fn clear(&mut self) -> usize {
        let n = self.len;
        self.ring.as_mut().iter_mut().for_each(|e| *e = None);
        self.head = 0;
        self.len = 0;
        self.inflight = 0;
        n
    }
}

/// Why an inbound request was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused<E> {
    /// The peer exceeded IRD: 0/2/07 (D-08). The request was not executed.
    Ird(TermCode),
    /// Executing the request failed; it holds no credit.
    Exec(E),
}

/// The responder's inbound QN 1 requests (Read, Atomic, and the commit
/// draft's), in arrival order, with the IRD credits they share (T-01, T-04,
/// T-05).
///
/// A request is admitted when it is Delivered: within IRD it takes a credit
/// and is executed exactly once (an atomic's read-modify-write happens
/// right there, in stream order, T-02); what `T` holds is its result, to be
/// answered. Responses are taken in arrival order ([`RespQueue::next_to_answer`]),
/// each exactly once, and its credit is freed once the response went out
/// ([`RespQueue::responded`]).
///
/// The queue lives in `B`, a buffer the owner provides (the driver sizes it
/// by the negotiated IRD); an IRD above its length is lowered to it.
#[derive(Clone, Copy, Debug)]
pub struct RespQueue<T: Copy, B: AsRef<[Option<T>]> + AsMut<[Option<T>]>> {
    credits: IrdCredits,
    ring: B,
    head: usize,
    len: usize,
    /// Taken by [`RespQueue::next_to_answer`], response not yet out.
    sending: u16,
    /// The MSN of the next QN 3 response ([`RespQueue::answer`]).
    qn3_msn: u32,
    _t: core::marker::PhantomData<T>,
}

/// A request taken to be answered ([`RespQueue::answer`]), with the MSN of
/// its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer<T> {
    /// The request.
    pub req: T,
    /// The MSN its QN 3 response carries (Atomic, Flush, Verify or Atomic
    /// Write Response: one counter for all of them, from 1, DDP-05); `None`
    /// for a tagged response (a Read Response), which has none.
    pub msn: Option<u32>,
}

impl<T: Copy, B: AsRef<[Option<T>]> + AsMut<[Option<T>]>> RespQueue<T, B> {
    /// An empty queue in `ring` (whose entries are cleared) with `ird`
    /// credits, at most the length of `ring`.
    pub fn new(ird: u16, mut ring: B) -> Self {
        ring.as_mut().iter_mut().for_each(|e| *e = None);
        let cap = u16::try_from(ring.as_ref().len()).unwrap_or(u16::MAX);
        RespQueue {
            credits: IrdCredits::new(ird.min(cap)),
            ring,
            head: 0,
            len: 0,
            sending: 0,
            qn3_msn: 1,
            _t: core::marker::PhantomData,
        }
    }

    fn slot(&self, i: usize) -> usize {
        i.checked_rem(self.ring.as_ref().len()).unwrap_or(0)
    }

    /// Admits an inbound request: takes a credit, then runs `exec` once to
    /// execute it and queues its result. Beyond IRD `exec` does not run
    /// (0/2/07, D-08); if `exec` fails, nothing is queued and the credit is
    /// returned.
    pub fn admit<E>(&mut self, exec: impl FnOnce() -> Result<T, E>) -> Result<(), Refused<E>> {
        let beyond = Refused::Ird(TermCode::operation(RdmapCode::CatastrophicStream));
        if self.len >= self.ring.as_ref().len() {
            return Err(beyond);
        }
        self.credits.take().map_err(Refused::Ird)?;
        let v = match exec() {
            Ok(v) => v,
            Err(e) => {
                self.credits.release();
                return Err(Refused::Exec(e));
            }
        };
        let i = self.slot(self.head.wrapping_add(self.len));
        match self.ring.as_mut().get_mut(i) {
            Some(s) => *s = Some(v),
            None => {
                self.credits.release();
                return Err(beyond);
            }
        }
        self.len = self.len.saturating_add(1);
        Ok(())
    }

    /// The oldest admitted request, the one [`RespQueue::next_to_answer`]
    /// would take, left in the queue.
    pub fn peek(&self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        *self.ring.as_ref().get(self.head)?
    }

    /// Takes the oldest admitted request to answer; its credit stays taken
    /// until [`RespQueue::responded`].
    pub fn next_to_answer(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let head = self.head;
        let v = self.ring.as_mut().get_mut(head)?.take()?;
        self.head = self.slot(head.wrapping_add(1));
        self.len = self.len.saturating_sub(1);
        self.sending = self.sending.saturating_add(1);
        Some(v)
    }

    /// The oldest admitted request with the MSN its response will carry
    /// ([`RespQueue::answer`] with the same `qn3`), left in the queue: a
    /// sender may build the response first and take it once it is built.
    pub fn peek_answer(&self, qn3: impl FnOnce(&T) -> bool) -> Option<Answer<T>> {
        let req = self.peek()?;
        let msn = qn3(&req).then_some(self.qn3_msn);
        Some(Answer { req, msn })
    }

    /// Takes the oldest admitted request to answer, as
    /// [`RespQueue::next_to_answer`], and assigns its response the next QN 3
    /// MSN if `qn3` says it is a QN 3 response. The MSNs of the QN 3
    /// responses follow the arrival order of their requests whoever sends
    /// them (T-01, DDP-05), as long as every response is taken here; a
    /// request taken by [`RespQueue::next_to_answer`] gets none.
    pub fn answer(&mut self, qn3: impl FnOnce(&T) -> bool) -> Option<Answer<T>> {
        let req = self.next_to_answer()?;
        let msn = qn3(&req).then(|| {
            let m = self.qn3_msn;
            self.qn3_msn = m.wrapping_add(1);
            m
        });
        Some(Answer { req, msn })
    }

    /// The response to the oldest request taken by [`RespQueue::next_to_answer`] went
    /// out (its last byte was handed to the transport, T-05): its credit is
    /// free. Without such a request nothing changes: a queued request's
    /// credit is never freed early.
    pub fn responded(&mut self) {
        if self.sending > 0 {
            self.sending = self.sending.saturating_sub(1);
            self.credits.release();
        }
    }

    /// Requests waiting to be answered.
    pub fn queued(&self) -> usize {
        self.len
    }

    /// Credits in use: queued requests and responses being sent.
    pub fn used(&self) -> u16 {
        self.credits.used()
    }

    /// Drops everything (the stream is going down). The QN 3 MSN counter
    /// goes on: nothing is answered any more.
    pub fn clear(&mut self) {
        self.ring.as_mut().iter_mut().for_each(|e| *e = None);
        self.credits = IrdCredits::new(self.credits.ird);
        self.head = 0;
        self.len = 0;
        self.sending = 0;
    }
}

/// The queue number inbound requests use (kept for symmetry with the
/// response queue).
pub const REQUEST_QN: u32 = QN_READ_REQ;
