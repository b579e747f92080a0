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
//!   Read Responses (RDMAP-05) and QN 3 responses (ATOM-06, T-12).

use crate::wire::hdr::{Body, Opcode, Placement, NUM_QN, QN_READ_REQ, QN_RESPONSE};
use crate::wire::rx::Segment;
use crate::wire::term::{DdpTaggedCode, DdpUntaggedCode, RdmapCode, TermCode};

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
}

impl Request {
    fn response_opcode(&self) -> Opcode {
        match self {
            Request::Read { .. } => Opcode::ReadResponse,
            Request::Atomic { .. } => Opcode::AtomicResponse,
            Request::Flush => Opcode::FlushResponse,
            Request::Verify => Opcode::VerifyResponse,
            Request::AtomicWrite => Opcode::AtomicWriteResponse,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    req: Request,
    got: u32,
    done: bool,
}

/// Why a request cannot be issued now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrdBusy {
    /// ORD requests are already outstanding; wait for a response.
    NoCredit,
    /// The completion ring is full; pop completed entries first.
    RingFull,
}

/// The requester's outstanding QN 1 requests, in issue order.
///
/// `N` bounds the ring; it must be at least the ORD.
#[derive(Clone, Copy, Debug)]
pub struct OrdQueue<const N: usize> {
    ring: [Option<Slot>; N],
    head: usize,
    len: usize,
    inflight: u16,
    ord: u16,
}

impl<const N: usize> OrdQueue<N> {
    /// An empty queue allowing `ord` outstanding requests.
    pub fn new(ord: u16) -> Self {
        OrdQueue {
            ring: [None; N],
            head: 0,
            len: 0,
            inflight: 0,
            ord,
        }
    }

    /// Requests awaiting a response.
    pub fn inflight(&self) -> u16 {
        self.inflight
    }

    /// True if nothing is outstanding or awaiting pop (the fence condition,
    /// T-03).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn idx(&self, i: usize) -> usize {
        self.head.wrapping_add(i).checked_rem(N).unwrap_or(0)
    }

    /// Records a request before it is sent (a response may arrive before
    /// the send returns, as `siw` notes).
    pub fn issue(&mut self, req: Request) -> Result<(), OrdBusy> {
        if self.inflight >= self.ord {
            return Err(OrdBusy::NoCredit);
        }
        if self.len >= N {
            return Err(OrdBusy::RingFull);
        }
        let i = self.idx(self.len);
        let s = self.ring.get_mut(i).ok_or(OrdBusy::RingFull)?;
        *s = Some(Slot {
            req,
            got: 0,
            done: false,
        });
        self.len = self.len.saturating_add(1);
        self.inflight = self.inflight.saturating_add(1);
        Ok(())
    }

    fn find(&mut self, read: bool) -> Option<&mut Slot> {
        let mut found = None;
        for k in 0..self.len {
            let i = self.idx(k);
            if let Some(Some(s)) = self.ring.get(i) {
                if !s.done && matches!(s.req, Request::Read { .. }) == read {
                    found = Some(i);
                    break;
                }
            }
        }
        self.ring.get_mut(found?)?.as_mut()
    }

    fn finish(&mut self) {
        self.inflight = self.inflight.saturating_sub(1);
    }

    /// Matches a Read Response segment against the oldest outstanding Read
    /// (RDMAP-05, T-20): wrong STag or no Read outstanding is 1/1/00; a TO
    /// or length that does not continue the Read is 1/1/01. Returns true
    /// when the Read is complete.
    pub fn on_read_response(
        &mut self,
        stag: u32,
        to: u64,
        len: u32,
        last: bool,
    ) -> Result<bool, TermCode> {
        let bad_stag = TermCode::tagged(DdpTaggedCode::InvalidStag);
        let bounds = TermCode::tagged(DdpTaggedCode::BaseBounds);
        let s = self.find(true).ok_or(bad_stag)?;
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
        s.got = got;
        if last {
            s.done = true;
            self.finish();
        }
        Ok(last)
    }

    /// Matches a QN 3 response (Atomic, Flush, Verify or Atomic Write
    /// Response) against the oldest outstanding non-Read request (T-12).
    /// A response with nothing outstanding, of the wrong kind or with the
    /// wrong Request Identifier is an invalid response: 0/2/06 (D-02).
    /// Returns true when the request is complete. MSN order on QN 3 is
    /// checked by [`RxUntagged::check`].
    pub fn on_response(&mut self, seg: &Segment) -> Result<bool, TermCode> {
        let bad = TermCode::operation(RdmapCode::UnexpectedOpcode);
        match seg.hdr.placement {
            Placement::Untagged { qn, .. } if qn == QN_RESPONSE => {}
            _ => return Err(bad),
        }
        let s = self.find(false).ok_or(bad)?;
        if s.req.response_opcode() != seg.hdr.opcode {
            return Err(bad);
        }
        if let (Request::Atomic { req_id }, Body::AtomicResponse(r)) = (s.req, &seg.body) {
            if r.req_id != req_id {
                return Err(bad);
            }
        }
        if seg.hdr.last {
            s.done = true;
            self.finish();
        }
        Ok(seg.hdr.last)
    }

    /// Pops the oldest request if it is complete, so completions are
    /// reported in issue order.
    pub fn pop_completed(&mut self) -> Option<Request> {
        if self.len == 0 {
            return None;
        }
        let slot = self.ring.get_mut(self.head)?;
        match slot {
            Some(s) if s.done => {
                let r = s.req;
                *slot = None;
                self.head = self.idx(1);
                self.len = self.len.saturating_sub(1);
                Some(r)
            }
            _ => None,
        }
    }

    /// Drops everything (the stream is going down); returns how many
    /// requests were outstanding, to be flushed by the driver.
    pub fn clear(&mut self) -> usize {
        let n = self.len;
        self.ring = [None; N];
        self.head = 0;
        self.len = 0;
        self.inflight = 0;
        n
    }
}

/// The queue number inbound requests use (kept for symmetry with the
/// response queue).
pub const REQUEST_QN: u32 = QN_READ_REQ;
