// SPDX-License-Identifier: GPL-2.0

//! The RX engine: bytes from the socket in, placed data and completions out.
//!
//! It runs in the socket's `data_ready` callback as the read actor of `tcp_read_sock()`
//! ([`rx_chunk`]). Header and trailer bytes are copied into a small stack buffer (up to
//! [`HDR_BUF`] bytes at a time: the rest of a trailer and the next header in one copy) and go
//! through the wire core's [`RxParser`](crate::wire::rx::RxParser), which is fed only until a
//! segment's payload starts. Payload is copied once, from the socket buffer straight into the
//! target memory ([`Placement::write_from_skb`]: the kmap'd pages of a user MR, the page list
//! of a fast-registration MR, or the kernel VAs of a DMA MR), and then accounted with
//! [`RxParser::advance_payload`]. A small FPDU that the header copy holds whole is taken in
//! one step ([`RxParser::feed_whole`]: CRC checked first, payload placed from that copy).
//!
//! With MPA CRC on, the CRC is computed over the same bytes in the socket buffer
//! (`skb_crc32c()`, after the copy succeeded), not over the target after the copy as C siw
//! does: the target may be changed concurrently (by user space, or by another connection's
//! Write into the same region), which must not fail a good FPDU; the bytes placed are the
//! ones checked. Placed data is not known good before the segment's CRC matched, and nothing
//! completes earlier. The target is checked once per segment:
//!
//! - tagged (Write, Read Response): STag, PD, bounds and rights with
//!   [`MemTable::check`](crate::mem::MemTable::check) on every segment; a Read Response must
//!   also continue the oldest outstanding Read ([`OrdQueue`](crate::wire::stream::OrdQueue));
//! - untagged (Send variants): into the receive queue element (or the SRQ's) taken by the
//!   message's first segment, after the MSN/MO/length checks of
//!   [`RxUntagged`](crate::wire::stream::RxUntagged);
//! - Read Requests take an IRD credit and are queued for the TX engine;
//! - a Terminate from the peer fails the connection (no Terminate is sent back).
//!
//! Completions are posted once a message's last segment passed its CRC check, after the RX
//! lock is dropped. Any violation yields the Terminate the wire core names, and the TX work
//! sends it and moves the QP to ERROR.

use crate::{
    conn::{
        Conn,
        InRead, //
    },
    cq::Completion,
    crc::KernelCrc32c,
    device::RsiwDevice,
    mem::Placement,
    qp::{
        QpState,
        RsiwQp, //
    },
    stag::Rights,
    wire::{
        atomic::{
            access_error,
            Fault,
            Target as AccessTarget, //
        },
        hdr::{
            Body,
            DdpHeader,
            Opcode,
            Placement as WirePlacement,
            ReadRequest,
            QN_SEND, //
        },
        mpa::{
            responder_rtr,
            RtrKind,
            RtrSet, //
        },
        rx::{
            RxEvent,
            RxParser,
            Segment,
            HDR_BUF, //
        },
        stream::RxUntagged,
        term::{
            DdpTaggedCode,
            RdmapCode,
            TermCode,
            TermEcho,
            Terminate,
            DDP_ETYPE_TAGGED,
            DDP_ETYPE_UNTAGGED,
            LAYER_DDP,
            LAYER_RDMAP,
            RDMAP_ETYPE_OPERATION,
            RDMAP_ETYPE_PROTECTION, //
        },
        tx::sg_pieces,
    },
    wqe::{
        op,
        status,
        Rqe,
        NUM_SGE, //
    },
};
use core::sync::atomic::Ordering::Release;
use kernel::{
    net::skb::SkbData,
    prelude::*,
    rdma::qp::Qp,
    sync::{
        aref::ARef,
        rcu,
        ArcBorrow, //
    },
};

/// Completions collected under the RX lock, posted after it. A segment adds at most one to
/// each queue, and processing stops when one is full (`tcp_read_sock()` calls again): small,
/// as it is initialized on every call.
const OUTBOX: usize = 4;

/// The receive being filled.
struct CurRqe {
    id: u64,
    pl: [Option<Placement>; NUM_SGE],
    lens: [u64; NUM_SGE],
    n: usize,
    total: u64,
}

/// Where the current segment's payload goes.
enum Target {
    /// Nowhere (no payload).
    None,
    /// A checked tagged buffer.
    Tagged(Placement),
    /// The current receive, at the segment's MO.
    Rqe(u32),
}

/// The RX engine of a connection.
pub(crate) struct RxState {
    parser: RxParser<KernelCrc32c>,
    untagged: RxUntagged,
    seg: Option<Segment>,
    target: Target,
    rqe: Option<CurRqe>,
    /// Where the next receive queue element is read to (kept: too large to move around).
    rqe_buf: Rqe,
    failed: bool,
    /// The first segment ended.
    first_done: bool,
    /// Responder in peer-to-peer mode, until the first segment: the RTR options our Reply
    /// offered; the first segment must be one of them (MPA-16).
    rtr: Option<RtrSet>,
    /// The first segment is the initiator's zero-length Send RTR (MPA-17): it takes no
    /// receive and completes nothing.
    send_rtr: bool,
    /// The connection's QP, until [`Conn::stop`]: here, under the lock the engine takes
    /// anyway, it costs `data_ready` no lookup.
    pub(crate) qp: Option<ARef<Qp<RsiwDevice>>>,
    /// Set by [`Conn::stop`]: nothing is processed any more.
    pub(crate) stopped: bool,
}

/// Where payload bytes to place come from.
enum Payload<'a, 'b> {
    /// The socket buffer, from an offset on.
    Skb(&'a SkbData<'b>, usize),
    /// A copy (the header copy a whole small FPDU is in).
    Bytes(&'a [u8]),
}

impl Payload<'_, '_> {
    /// Writes `len` bytes, `from` bytes into the source, at `at` of `p`.
    fn put(&self, p: &Placement, at: u64, from: usize, len: usize) -> Result {
        match self {
            Payload::Skb(skb, off) => p.write_from_skb(at, skb, off.saturating_add(from), len),
            Payload::Bytes(b) => {
                let end = from.checked_add(len).ok_or(EINVAL)?;
                p.write(at, b.get(from..end).ok_or(EINVAL)?)
            }
        }
    }
}

/// The part of a segment's fixed RDMAP header its end needs.
enum EndBody {
    None,
    ReadRequest(ReadRequest),
    Terminate(TermCode),
}

/// What to do after the RX lock is released.
struct Outbox {
    sq: [(u64, u8, u16, u32); OUTBOX],
    nsq: usize,
    rq: [Option<Completion>; OUTBOX],
    nrq: usize,
    kick: bool,
    /// Fail the connection, sending this Terminate if any.
    fail: Option<Option<Terminate>>,
}

impl Outbox {
    fn full(&self) -> bool {
        self.nsq >= OUTBOX || self.nrq >= OUTBOX
    }
}

/// A failed check: the Terminate to send (or none for a received Terminate).
type Fail = Option<Terminate>;

impl RxState {
    /// A fresh engine around `parser`; `rtr` holds the RTR options offered to the initiator
    /// if we are the responder of a peer-to-peer connection.
    pub(crate) fn new(
        parser: RxParser<KernelCrc32c>,
        rtr: Option<RtrSet>,
        qp: ARef<Qp<RsiwDevice>>,
    ) -> Result<Self> {
        Ok(Self {
            parser,
            untagged: RxUntagged::new(),
            seg: None,
            target: Target::None,
            rqe: None,
            rqe_buf: Rqe::default(),
            failed: false,
            first_done: false,
            rtr,
            send_rtr: false,
            qp: Some(qp),
            stopped: false,
        })
    }

    /// Takes the receive being filled (to flush it); returns its id.
    pub(crate) fn take_rqe(&mut self) -> Option<u64> {
        self.target = Target::None;
        self.rqe.take().map(|r| r.id)
    }

    #[cold]
    #[inline(never)]
    fn term(&self, code: TermCode, echo: TermEcho) -> Fail {
        Some(self.parser.terminate_for(code, echo))
    }

    /// Takes the next receive (the SRQ's if there is one) into `rqe_buf`; returns whether
    /// there was one. An invalid element is completed with its error and fails the stream.
    fn next_rqe(&mut self, qp: &Qp<RsiwDevice>, out: &mut Outbox) -> Result<bool, Fail> {
        match RsiwQp::next_rqe(qp, &mut self.rqe_buf) {
            None => Ok(false),
            Some(Err((id, st))) => {
                push_rq(out, completion(id, st, 0, None, false));
                Err(local_fail())
            }
            Some(Ok(())) => Ok(true),
        }
    }

    /// Takes a receive for a new untagged message and checks its SGEs.
    fn take_rqe_for(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        out: &mut Outbox,
    ) -> Result<(), Fail> {
        if self.next_rqe(qp, out)? {
            self.fill_rqe(conn, qp, out)?;
        }
        Ok(())
    }

    /// Makes the receive in `rqe_buf` the current one, with its SGEs checked.
    fn fill_rqe(&mut self, conn: &Conn, qp: &Qp<RsiwDevice>, out: &mut Outbox) -> Result<(), Fail> {
        let rqe = &self.rqe_buf;
        let n = usize::from(rqe.num_sge).min(NUM_SGE);
        // Filled in place: a `CurRqe` is too large to move around on every message.
        let cur = self.rqe.insert(CurRqe {
            id: rqe.id,
            pl: Default::default(),
            lens: [0; NUM_SGE],
            n,
            total: 0,
        });
        let mem = qp.device().mem();
        let mut ok = true;
        for ((s, len), pl) in rqe
            .sge
            .iter()
            .take(n)
            .zip(cur.lens.iter_mut())
            .zip(cur.pl.iter_mut())
        {
            *len = u64::from(s.length);
            cur.total = cur.total.saturating_add(u64::from(s.length));
            if s.length == 0 {
                continue;
            }
            match mem.check(
                conn.pd,
                s.lkey,
                Rights::LOCAL_WRITE,
                s.laddr,
                u64::from(s.length),
            ) {
                Ok(p) => *pl = Some(p),
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            // Completed here, so not flushed again.
            self.rqe = None;
            push_rq(
                out,
                completion(rqe.id, status::LOC_PROT_ERR, 0, None, false),
            );
            return Err(local_fail());
        }
        Ok(())
    }

    /// A whole single-segment Send into a receive of at most one SGE (the usual receive), in
    /// `rqe_buf`: its SGE checked, the MSN/MO/length checks, the payload copied and the
    /// receive completed, all under one RCU read-side critical section, with no placement
    /// kept. The same checks in the same order as [`RxState::fill_rqe`], `on_segment`,
    /// `place` and `on_end`.
    fn whole_send_one(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        seg: &Segment,
        data: &[u8],
        out: &mut Outbox,
    ) -> Result<(), Fail> {
        let rqe = &self.rqe_buf;
        let (id, s) = (rqe.id, rqe.sge[0]);
        let len = if rqe.num_sge == 0 { 0 } else { s.length };
        let rcu = rcu::read_lock();
        let p = if len == 0 {
            None
        } else {
            let c = qp.device().mem().check_in(
                &rcu,
                conn.pd,
                s.lkey,
                Rights::LOCAL_WRITE,
                s.laddr,
                u64::from(len),
            );
            match c {
                Ok(p) => Some(p),
                Err(_) => {
                    push_rq(out, completion(id, status::LOC_PROT_ERR, 0, None, false));
                    return Err(local_fail());
                }
            }
        };
        if let Err(c) = self.untagged.check(seg, Some(u64::from(len))) {
            // Flushed with the rest of the receive queue.
            self.keep_rqe(id);
            return Err(self.term(c, TermEcho::Ddp));
        }
        if !data.is_empty() {
            let WirePlacement::Untagged { mo, .. } = seg.hdr.placement else {
                return Err(place_fault());
            };
            // `check` bounded `mo` plus the payload by the SGE's length.
            let placed = p.is_some_and(|p| p.write(u64::from(mo), data).is_ok());
            if !placed {
                self.keep_rqe(id);
                return Err(place_fault());
            }
        }
        drop(rcu);
        self.finish_send(conn, qp, seg.hdr, seg.payload_len, id, out)
    }

    /// Keeps the receive `id` as the current one, to be flushed. Out of line: only on errors.
    #[cold]
    #[inline(never)]
    fn keep_rqe(&mut self, id: u64) {
        self.rqe = Some(CurRqe {
            id,
            pl: Default::default(),
            lens: [0; NUM_SGE],
            n: 0,
            total: 0,
        });
    }

    /// A new segment's header was validated.
    fn on_segment(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        seg: &Segment,
        out: &mut Outbox,
    ) -> Result<(), Fail> {
        self.seg = Some(*seg);
        self.target = Target::None;
        if seg.hdr.opcode != Opcode::Terminate {
            if let Some(offered) = self.rtr.take() {
                // Peer-to-peer: the initiator's first FPDU is its RTR. Anything else (a ULP
                // message, an RTR we did not offer) is refused with 2/0/07 (MPA-16, MPA-19).
                match responder_rtr(offered, seg) {
                    Ok(kind) => self.send_rtr = kind == RtrKind::Send,
                    Err(c) => return Err(Some(Terminate::bare(c))),
                }
            }
        }
        let len = u64::from(seg.payload_len);
        match (seg.hdr.opcode, seg.hdr.placement) {
            (Opcode::Write, WirePlacement::Tagged { stag, to }) => {
                if len > 0 {
                    let p = (qp.device().mem())
                        .check(conn.pd, stag, Rights::REMOTE_WRITE, to, len)
                        .map_err(|f| self.write_fault(f))?;
                    self.target = Target::Tagged(p);
                }
            }
            (Opcode::ReadResponse, WirePlacement::Tagged { stag, to }) => {
                self.read_response_segment(conn, qp, seg, stag, to)?;
            }
            (Opcode::Send, WirePlacement::Untagged { qn: QN_SEND, .. })
                if self.send_rtr && !self.first_done && seg.hdr.last && len == 0 =>
            {
                self.send_rtr_segment(seg)?;
            }
            (
                Opcode::Send | Opcode::SendInv | Opcode::SendSe | Opcode::SendSeInv,
                WirePlacement::Untagged { mo, .. },
            ) => {
                if self.rqe.is_none() {
                    self.take_rqe_for(conn, qp, out)?;
                }
                let avail = self.rqe.as_ref().map(|r| r.total);
                if let Err(c) = self.untagged.check(seg, avail) {
                    return Err(self.term(c, TermEcho::Ddp));
                }
                self.target = Target::Rqe(mo);
            }
            (Opcode::ReadRequest, _) => {
                if let Err(c) = self.untagged.check(seg, Some(u64::MAX)) {
                    return Err(self.term(c, TermEcho::DdpAndRdma));
                }
            }
            (Opcode::Terminate, _) => {}
            _ => {
                return Err(self.term(
                    TermCode::operation(RdmapCode::UnexpectedOpcode),
                    TermEcho::Ddp,
                ))
            }
        }
        Ok(())
    }

    /// The Terminate for a Write whose target failed its check (spec-map DDP-08, T-06).
    fn write_fault(&self, f: Fault) -> Fail {
        let (c, e) = access_error(AccessTarget::Write, f);
        self.term(c, e)
    }

    /// A Read Response segment's header: it must continue the oldest outstanding Read, into
    /// memory we may write. Out of line: rare on the paths that must be short.
    #[inline(never)]
    fn read_response_segment(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        seg: &Segment,
        stag: u32,
        to: u64,
    ) -> Result<(), Fail> {
        let len = u64::from(seg.payload_len);
        let mem = qp.device().mem();
        let r = conn
            .shared
            .lock()
            .ord
            .on_read_response(stag, to, seg.payload_len, seg.hdr.last);
        if let Err(c) = r {
            return Err(self.term(c, TermEcho::Ddp));
        }
        if len > 0 {
            match mem.check(conn.pd, stag, Rights::LOCAL_WRITE, to, len) {
                Ok(p) => self.target = Target::Tagged(p),
                Err(f) => {
                    let (c, e) = access_error(AccessTarget::Write, f);
                    return Err(self.term(c, e));
                }
            }
        }
        Ok(())
    }

    /// The initiator's zero-length Send RTR. Out of line: once per connection.
    #[inline(never)]
    fn send_rtr_segment(&mut self, seg: &Segment) -> Result<(), Fail> {
        // The initiator's zero-length Send RTR (MPA-17, T-13): it must carry MSN 1
        // and MO 0, and advances the expected MSN; no receive is taken, so the end
        // of the segment completes nothing. The ULP's first Send is MSN 2.
        self.send_rtr = false;
        if let Err(c) = self.untagged.check(seg, Some(0)) {
            return Err(self.term(c, TermEcho::Ddp));
        }
        Ok(())
    }

    /// Places `n` payload bytes, from `src`, at `off` in the current segment's payload: one
    /// copy, from the socket buffer (or the header copy a whole small FPDU is in) straight
    /// into the target memory.
    fn place(&self, off: u32, src: &Payload<'_, '_>, n: usize) -> Result<(), Fail> {
        let bad = place_fault;
        match &self.target {
            Target::None => Ok(()),
            Target::Tagged(p) => src.put(p, u64::from(off), 0, n).map_err(|_| bad()),
            Target::Rqe(mo) => self.place_rqe(*mo, off, src, n),
        }
    }

    /// Places `n` payload bytes, from `src`, at `off` in the current segment's payload, which
    /// goes into the current receive at message offset `mo`.
    fn place_rqe(&self, mo: u32, off: u32, src: &Payload<'_, '_>, n: usize) -> Result<(), Fail> {
        let bad = place_fault;
        let r = self.rqe.as_ref().ok_or_else(bad)?;
        let at = u64::from(mo).saturating_add(u64::from(off));
        if let ([Some(p), ..], [len, ..], 1) = (&r.pl, &r.lens, r.n) {
            // One SGE, the usual receive: no scatter walk.
            if at.saturating_add(n as u64) > *len {
                return Err(bad());
            }
            return src.put(p, at, 0, n).map_err(|_| bad());
        }
        let mut done = 0usize;
        for piece in sg_pieces(r.lens.get(..r.n).unwrap_or(&[]), at, n as u64) {
            let len = usize::try_from(piece.len).map_err(|_| bad())?;
            let p = r.pl.get(piece.index).and_then(|p| p.as_ref());
            src.put(p.ok_or_else(bad)?, piece.offset, done, len)
                .map_err(|_| bad())?;
            done = done.saturating_add(len);
        }
        if done != n {
            return Err(bad());
        }
        Ok(())
    }

    /// A whole small FPDU that [`RxParser::feed_whole`] took from the header copy: its
    /// segment, its payload (placed from that copy, after its CRC matched) and its end, as
    /// the events of [`RxParser::feed`] would have it.
    fn whole(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        seg: &Segment,
        data: &[u8],
        out: &mut Outbox,
    ) -> Result<(), Fail> {
        if let (Opcode::Write, WirePlacement::Tagged { stag, to }, true) =
            (seg.hdr.opcode, seg.hdr.placement, self.first_done)
        {
            // A Write after the stream's first message (no RTR to check, nothing for its
            // end to do): checked and placed here, without the state the event path keeps
            // from a segment's header to its end.
            if !data.is_empty() {
                let rcu = rcu::read_lock();
                let n = data.len() as u64;
                let p = (qp.device().mem())
                    .check_in(&rcu, conn.pd, stag, Rights::REMOTE_WRITE, to, n)
                    .map_err(|f| self.write_fault(f))?;
                p.write(0, data).map_err(|_| place_fault())?;
            }
            return Ok(());
        }
        if let (
            Opcode::Send | Opcode::SendInv | Opcode::SendSe | Opcode::SendSeInv,
            WirePlacement::Untagged { mo, .. },
            true,
            true,
            true,
        ) = (
            seg.hdr.opcode,
            seg.hdr.placement,
            self.first_done,
            self.rqe.is_none(),
            seg.hdr.last,
        ) {
            // A whole Send message after the stream's first one (no RTR): what `on_segment`,
            // `place` and `on_end` do for it, without keeping the segment for its end.
            if self.next_rqe(qp, out)? {
                if self.rqe_buf.num_sge <= 1 {
                    return self.whole_send_one(conn, qp, seg, data, out);
                }
                self.fill_rqe(conn, qp, out)?;
            }
            let avail = self.rqe.as_ref().map(|r| r.total);
            if let Err(c) = self.untagged.check(seg, avail) {
                return Err(self.term(c, TermEcho::Ddp));
            }
            if !data.is_empty() {
                self.place_rqe(mo, 0, &Payload::Bytes(data), data.len())?;
            }
            return self.end_send(conn, qp, seg.hdr, seg.payload_len, out);
        }
        self.on_segment(conn, qp, seg, out)?;
        if !data.is_empty() {
            self.place(0, &Payload::Bytes(data), data.len())?;
        }
        self.on_end(conn, qp, out)
    }

    /// The current segment ended and its CRC matched.
    fn on_end(&mut self, conn: &Conn, qp: &Qp<RsiwDevice>, out: &mut Outbox) -> Result<(), Fail> {
        // Read where it is: a `Segment` is too large to move out on every message.
        let Some(seg) = self.seg.as_ref() else {
            return Ok(());
        };
        let (hdr, payload_len) = (seg.hdr, seg.payload_len);
        let body = match (hdr.opcode, &seg.body) {
            (Opcode::ReadRequest, Body::ReadRequest(r)) => EndBody::ReadRequest(*r),
            (Opcode::Terminate, Body::Terminate(t)) => EndBody::Terminate(t.code),
            _ => EndBody::None,
        };
        self.seg = None;
        self.target = Target::None;
        if !self.first_done && hdr.opcode != Opcode::Terminate {
            self.first_done = true;
            if conn.responder {
                // Peer-to-peer: the initiator's RTR (or its first message otherwise, which
                // the connection manager ignores). A Terminate (an initiator refusing our
                // Reply, MPA-11/15) is not one: the connection fails instead.
                conn.rtr_seen.store(true, Release);
                out.kick = true;
            }
        }
        match hdr.opcode {
            Opcode::ReadResponse if hdr.last => self.read_response_end(conn, qp, out),
            Opcode::Send | Opcode::SendInv | Opcode::SendSe | Opcode::SendSeInv if hdr.last => {
                self.end_send(conn, qp, hdr, payload_len, out)?
            }
            Opcode::ReadRequest => self.read_request_end(conn, qp, body, out)?,
            Opcode::Terminate => return Err(terminated(conn, body)),
            _ => {}
        }
        Ok(())
    }

    /// The last segment of a Send ended: completes the receive it filled (if it took one),
    /// after the Invalidate STag of a Send with Invalidate is invalidated.
    fn end_send(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        hdr: DdpHeader,
        payload_len: u32,
        out: &mut Outbox,
    ) -> Result<(), Fail> {
        let Some(id) = self.rqe.as_ref().map(|r| r.id) else {
            return Ok(());
        };
        // Dropped in place (its placements), not moved out.
        self.rqe = None;
        self.finish_send(conn, qp, hdr, payload_len, id, out)
    }

    /// Completes the receive `id` that the Send ending with `hdr` (`payload_len` bytes of
    /// payload in its last segment) filled, after invalidating the Invalidate STag of a Send
    /// with Invalidate.
    fn finish_send(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        hdr: DdpHeader,
        payload_len: u32,
        id: u64,
        out: &mut Outbox,
    ) -> Result<(), Fail> {
        let mo = match hdr.placement {
            WirePlacement::Untagged { mo, .. } => mo,
            WirePlacement::Tagged { .. } => 0,
        };
        let bytes = mo.saturating_add(payload_len);
        let mut inval = None;
        if let WirePlacement::Untagged { inv_stag, .. } = hdr.placement {
            if hdr.opcode.has_invalidate() {
                if let Err(f) = qp.device().mem().invalidate(conn.pd, inv_stag, true) {
                    push_rq(
                        out,
                        completion(id, status::LOC_PROT_ERR, bytes, None, false),
                    );
                    let (c, e) = access_error(AccessTarget::SendInvalidate, f);
                    return Err(self.term(c, e));
                }
                inval = Some(inv_stag);
            }
        }
        let se = hdr.opcode.is_solicited();
        push_rq(out, completion(id, status::SUCCESS, bytes, inval, se));
        Ok(())
    }

    /// The last segment of a Read Response ended: completes the Reads it finished. Out of
    /// line: rare on the paths that must be short.
    #[inline(never)]
    fn read_response_end(&mut self, conn: &Conn, qp: &Qp<RsiwDevice>, out: &mut Outbox) {
        let mut sh = conn.shared.lock();
        while sh.ord.pop_completed().is_some() {
            let Some(w) = sh.orq.pop() else {
                break;
            };
            let mut st = status::SUCCESS;
            if w.opcode == op::READ_LOCAL_INV
                && qp
                    .device()
                    .mem()
                    .invalidate(conn.pd, w.sink.lkey, false)
                    .is_err()
            {
                st = status::LOC_QP_OP_ERR;
            }
            if let (Some(id), true) = (w.id, w.signalled || st != status::SUCCESS) {
                if out.nsq < OUTBOX {
                    out.sq[out.nsq] = (id, w.opcode, st, w.len);
                    out.nsq += 1;
                }
            }
        }
        // Wake TX only if it waits for this (a work queue round trip per Read
        // otherwise: the bulk of a small Read's latency).
        if core::mem::take(&mut sh.tx_waits_read) {
            out.kick = true;
        }
    }

    /// A Read Request ended: checks the source and queues it for the TX engine within IRD.
    /// Out of line: rare on the paths that must be short.
    #[inline(never)]
    fn read_request_end(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        body: EndBody,
        out: &mut Outbox,
    ) -> Result<(), Fail> {
        let EndBody::ReadRequest(r) = body else {
            return Err(self.term(
                TermCode::operation(RdmapCode::CatastrophicStream),
                TermEcho::Ddp,
            ));
        };
        if r.size > 0 {
            if let Err(f) = qp.device().mem().check(
                conn.pd,
                r.src_stag,
                Rights::REMOTE_READ,
                r.src_to,
                u64::from(r.size),
            ) {
                let (c, e) = access_error(AccessTarget::ReadRequest, f);
                return Err(self.term(c, e));
            }
        }
        let mut sh = conn.shared.lock();
        if let Err(c) = sh.ird.take() {
            drop(sh);
            return Err(self.term(c, TermEcho::DdpAndRdma));
        }
        let req = InRead {
            sink_stag: r.sink_stag,
            sink_to: r.sink_to,
            size: r.size,
            src_stag: r.src_stag,
            src_to: r.src_to,
        };
        if sh.irq.push(req).is_err() {
            drop(sh);
            return Err(self.term(
                TermCode::operation(RdmapCode::CatastrophicStream),
                TermEcho::DdpAndRdma,
            ));
        }
        conn.irq_hint.store(true, Release);
        out.kick = true;
        Ok(())
    }

    /// Processes one run of received bytes; returns how many were consumed.
    fn process(
        &mut self,
        conn: &Conn,
        qp: &Qp<RsiwDevice>,
        skb: &SkbData<'_>,
        out: &mut Outbox,
    ) -> Result<usize, (usize, Fail)> {
        let len = skb.len();
        let mut pos = 0usize;
        let local = |pos| (pos, Some(Terminate::bare(TermCode::rdmap_catastrophic())));
        while pos < len && !out.full() {
            let left = len - pos;
            let rem = self.parser.payload_remaining();
            if rem > 0 {
                // Payload: placed from the skb, then accounted with the CRC over the same skb
                // bytes.
                let n = rem.min(left);
                let total = self.seg.as_ref().map_or(0, |s| s.payload_len as usize);
                let off = total
                    .checked_sub(rem)
                    .and_then(|o| u32::try_from(o).ok())
                    .ok_or_else(|| local(pos))?;
                self.place(off, &Payload::Skb(skb, pos), n)
                    .map_err(|f| (pos, f))?;
                let done = self
                    .parser
                    .advance_payload(n, |reg| skb.crc32c(pos, n, reg).ok());
                if done != Some(off) {
                    return Err(local(pos));
                }
                pos += n;
                continue;
            }
            if self.parser.want() == 0 {
                return Err(local(pos));
            }
            // Header and trailer bytes: one copy of up to `HDR_BUF` bytes (the rest of a
            // trailer and the next header usually) into a stack buffer for the parser. Feeding
            // stops where payload starts: that is placed from the skb, and any payload bytes
            // copied here are not used.
            let mut stage = [0u8; HDR_BUF];
            let n = left.min(HDR_BUF);
            let dst = stage.get_mut(..n).ok_or_else(|| local(pos))?;
            skb.copy_to(pos, dst).map_err(|_| local(pos))?;
            let mut used = 0usize;
            while used < n && self.parser.payload_remaining() == 0 && !out.full() {
                let input = stage.get(used..n).unwrap_or(&[]);
                // A small FPDU whole in the copy (a latency-bound exchange) is taken in one
                // step; anything else, or anything wrong with it, goes event by event.
                if let Some((c, seg, data)) = self.parser.feed_whole(input) {
                    used = used.saturating_add(c);
                    self.whole(conn, qp, &seg, data, out)
                        .map_err(|f| (pos.saturating_add(used), f))?;
                    continue;
                }
                let (c, ev) = self.parser.feed(input);
                used = used.saturating_add(c);
                // `ev` borrows `stage`, not the engine: handled where it is, without a copy.
                match &ev {
                    RxEvent::NeedMore => break,
                    RxEvent::Segment(s) => self.on_segment(conn, qp, s, out),
                    RxEvent::End => self.on_end(conn, qp, out),
                    RxEvent::Error(e) => Err(self.term(e.code, e.echo)),
                    // Cannot happen: the parser is not fed inside a segment's payload.
                    RxEvent::Payload { .. } => Err(self.term(
                        TermCode::operation(RdmapCode::CatastrophicStream),
                        TermEcho::None,
                    )),
                }
                .map_err(|f| (pos.saturating_add(used), f))?;
                if c == 0 {
                    break;
                }
            }
            if used == 0 {
                // The parser took nothing although it wants bytes.
                return Err(local(pos));
            }
            pos = pos.saturating_add(used);
        }
        Ok(pos)
    }
}

/// A copy into a checked target failed: the region went away (deregistered or invalidated)
/// or the range is not in the receive.
fn place_fault() -> Fail {
    Some(Terminate::bare(TermCode::tagged(
        DdpTaggedCode::InvalidStag,
    )))
}

/// A local failure: a catastrophic error of the stream.
#[cold]
#[inline(never)]
fn local_fail() -> Fail {
    Some(Terminate::bare(TermCode::rdmap_catastrophic()))
}

/// The peer terminated: fails the connection without answering (RFC 5040 6.1).
#[cold]
#[inline(never)]
fn terminated(conn: &Conn, body: EndBody) -> Fail {
    // The peer terminated: fail without answering (RFC 5040 6.1).
    if let EndBody::Terminate(c) = body {
        pr_info!(
            "rsiw: QP {}: Terminate received: layer {} type {} code {:#x}\n",
            conn.qpn,
            c.layer,
            c.etype,
            c.ecode
        );
        conn.shared.lock().peer_term = Some(peer_term_status(c));
    }
    None
}

fn completion(id: u64, st: u16, bytes: u32, inval: Option<u32>, solicited: bool) -> Completion {
    Completion {
        id,
        opcode: op::RECEIVE,
        status: st,
        bytes,
        inval_stag: inval,
        solicited,
    }
}

fn push_rq(out: &mut Outbox, c: Completion) {
    if let Some(s) = out.rq.get_mut(out.nrq) {
        *s = Some(c);
        out.nrq += 1;
    }
}

/// The read actor: processes a run of received bytes of the connection. Returns how many
/// bytes were consumed; `tcp_read_sock()` calls again for the rest. Atomic context.
pub(crate) fn rx_chunk(conn: ArcBorrow<'_, Conn>, skb: &SkbData<'_>) -> usize {
    let mut out = Outbox {
        sq: [(0, 0, 0, 0); OUTBOX],
        nsq: 0,
        rq: [None; OUTBOX],
        nrq: 0,
        kick: false,
        fail: None,
    };
    let (consumed, qp) = {
        let mut rx = conn.rx.lock();
        if rx.stopped {
            return 0;
        }
        // Completions are posted after the lock is dropped, and `stop` may take the QP
        // meanwhile.
        let Some(qp) = rx.qp.clone() else {
            return 0;
        };
        let n = if rx.failed || !matches!(qp.state(), QpState::Rts | QpState::Closing) {
            // Dropped: the connection is failing or the QP left RTS.
            skb.len()
        } else {
            match rx.process(&conn, &qp, skb, &mut out) {
                Ok(n) => n,
                Err((n, f)) => {
                    rx.failed = true;
                    out.fail = Some(f);
                    let _ = n;
                    skb.len()
                }
            }
        };
        (n, qp)
    };
    for &(id, opcode, st, bytes) in out.sq.iter().take(out.nsq) {
        RsiwQp::complete_sq(&qp, id, opcode, st, bytes);
    }
    for c in out.rq.iter().take(out.nrq).flatten() {
        RsiwQp::complete_rq(&qp, c);
    }
    if let Some(term) = out.fail {
        Conn::fail(conn, term);
    } else if out.kick {
        Conn::kick(conn);
    }
    consumed
}

/// The completion status of the outstanding Read a peer's Terminate refers to: an access
/// violation (RDMAP remote protection, DDP tagged buffer) is `REM_ACCESS_ERR`, a refused
/// operation (RDMAP remote operation, DDP untagged buffer) `REM_INV_REQ_ERR`, anything else
/// (catastrophic, LLP) `GENERAL_ERR`.
fn peer_term_status(c: TermCode) -> u16 {
    match (c.layer, c.etype) {
        (LAYER_RDMAP, RDMAP_ETYPE_PROTECTION) | (LAYER_DDP, DDP_ETYPE_TAGGED) => {
            status::REM_ACCESS_ERR
        }
        (LAYER_RDMAP, RDMAP_ETYPE_OPERATION) | (LAYER_DDP, DDP_ETYPE_UNTAGGED) => {
            status::REM_INV_REQ_ERR
        }
        _ => status::GENERAL_ERR,
    }
}
