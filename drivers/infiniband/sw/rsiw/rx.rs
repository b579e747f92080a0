// SPDX-License-Identifier: GPL-2.0

//! The RX engine: bytes from the socket in, segments dispatched to the roles.
//!
//! It runs in the socket's `data_ready` callback as the read actor of `tcp_read_sock()`
//! ([`RxState::chunk`], called by [`crate::conn::Conn`]). Header and trailer bytes are copied
//! into a small stack buffer (up to [`HDR_BUF`] bytes at a time: the rest of a trailer and the
//! next header in one copy; without MPA CRC a trailer is skipped uncopied,
//! [`RxParser::skip_trailer`]) and go through the wire core's
//! [`RxParser`](crate::wire::rx::RxParser), which is fed only until a segment's payload
//! starts. Payload is copied once, from the socket buffer straight into the target memory
//! ([`Placement::put`]: the kmap'd pages of a user MR, the page list of a fast-registration
//! MR, or the kernel VAs of a DMA MR), and then accounted with
//! [`RxParser::advance_payload`]. A small FPDU that the header copy holds whole is taken in
//! one step ([`RxParser::feed_whole`]: CRC checked first, payload placed from that copy).
//!
//! With MPA CRC on, the CRC is computed over the same bytes in the socket buffer
//! (`skb_crc32c()`, after the copy succeeded), not over the target after the copy as C siw
//! does: the target may be changed concurrently (by user space, or by another connection's
//! Write into the same region), which must not fail a good FPDU; the bytes placed are the
//! ones checked. Placed data is not known good before the segment's CRC matched, and nothing
//! completes earlier.
//!
//! Each segment is dispatched once on its opcode ([`Role`]), to:
//!
//! - tagged placement (Write): STag, PD, bounds and rights checked with
//!   [`MemTable::check`](crate::mem::MemTable::check) on every segment;
//! - the completer ([`crate::completer`]): a Read Response must continue the oldest
//!   outstanding Read before its payload is placed;
//! - receive placement ([`crate::recv`]): the Send variants, into receives;
//! - the responder ([`crate::responder`]): inbound requests, once Delivered; a Flush to
//!   persistence too long for this context stops the engine at the end of its request, with
//!   nothing more consumed, until the work item executed it ([`RxState::take_flush`],
//!   [`RxState::flush_done`]);
//! - a Terminate from the peer fails the connection (no Terminate is sent back).
//!
//! Any violation yields the Terminate the wire core or a role names; the TX work sends it
//! and moves the QP to ERROR.

use crate::{
    completer,
    crc::KernelCrc32c,
    device::RsiwDevice,
    mem::{
        Placement,
        Source, //
    },
    path::{
        Fail,
        Path,
        RxError,
        RxOut, //
    },
    qp::QpState,
    recv::Recv,
    responder,
    stag::Rights,
    wire::{
        atomic::{
            access_error,
            Fault,
            Target as AccessTarget, //
        },
        commit::VERIFY_MAX_HASH,
        hdr::{
            Body,
            Opcode,
            Placement as WirePlacement,
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
        stream::{
            ReadCursor,
            RxUntagged, //
        },
        term::{
            RdmapCode,
            TermCode,
            TermEcho,
            Terminate, //
        },
    },
};
use kernel::{
    net::skb::SkbData,
    prelude::*,
    rdma::qp::Qp,
    sync::{
        aref::ARef,
        rcu, //
    },
};

/// How a segment is handled: the one dispatch on the opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// RDMA Write: tagged placement.
    Write,
    /// RDMA Read Response: the completer, then tagged placement.
    ReadResponse,
    /// A Send variant: receive placement.
    Send,
    /// Immediate Data: receive placement.
    Imm,
    /// An inbound request: the responder, once Delivered.
    Request,
    /// A QN 3 response: the completer, once Delivered.
    Response,
    /// The peer's Terminate.
    Terminate,
    /// No segment yet (every opcode has a role; the parser refuses those of disabled
    /// extensions already).
    Unexpected,
}

/// The role of a segment with opcode `op`.
fn role(op: Opcode) -> Role {
    match op {
        Opcode::Write => Role::Write,
        Opcode::ReadResponse => Role::ReadResponse,
        Opcode::Send | Opcode::SendInv | Opcode::SendSe | Opcode::SendSeInv => Role::Send,
        Opcode::ImmData | Opcode::ImmDataSe => Role::Imm,
        Opcode::ReadRequest
        | Opcode::AtomicRequest
        | Opcode::FlushRequest
        | Opcode::VerifyRequest
        | Opcode::AtomicWriteRequest => Role::Request,
        Opcode::AtomicResponse
        | Opcode::FlushResponse
        | Opcode::VerifyResponse
        | Opcode::AtomicWriteResponse => Role::Response,
        Opcode::Terminate => Role::Terminate,
    }
}

/// Where the current segment's payload goes.
enum Target {
    /// Nowhere (no payload).
    None,
    /// A checked tagged buffer, and the STag that names it.
    Tagged(Placement, u32),
    /// The current receive, at the segment's MO.
    Recv(u32),
    /// The Hash Value of a Verify Request, collected here.
    Hash(HashBuf),
}

/// The Hash Value of a Verify Request (at most [`VERIFY_MAX_HASH`] bytes, checked when its
/// segment starts).
#[derive(Clone, Copy)]
struct HashBuf {
    b: [u8; VERIFY_MAX_HASH],
    n: usize,
}

impl HashBuf {
    /// Copies `len` bytes of `src`, at `off` of the Hash Value.
    fn put(&mut self, off: u32, src: &Source<'_, '_>, len: usize) -> Result<(), RxError> {
        let off = off as usize;
        let end = off.checked_add(len).ok_or(Fail::local())?;
        let dst = self.b.get_mut(off..end).ok_or(Fail::local())?;
        match src {
            Source::Skb(skb, at) => skb.copy_to(*at, dst).map_err(|_| Fail::local())?,
            Source::Bytes(b) => dst.copy_from_slice(b.get(..len).ok_or(Fail::local())?),
        }
        self.n = self.n.max(end);
        Ok(())
    }

    /// The bytes collected.
    fn bytes(&self) -> &[u8] {
        self.b.get(..self.n).unwrap_or(&[])
    }
}

/// The RX engine of a connection.
pub(crate) struct RxState {
    parser: RxParser<KernelCrc32c>,
    untagged: RxUntagged,
    seg: Option<Segment>,
    role: Role,
    target: Target,
    /// The Read whose response is arriving, after its first segment: matches the next ones
    /// without the ORQ's lock, until its last segment ends.
    read: Option<ReadCursor>,
    recv: Recv,
    failed: bool,
    /// The first segment ended.
    first_done: bool,
    /// Responder in peer-to-peer mode, until the first segment: the RTR options our Reply
    /// offered; the first segment must be one of them (MPA-16).
    rtr: Option<RtrSet>,
    /// The first segment is the initiator's zero-length Send RTR (MPA-17): it takes no
    /// receive and completes nothing.
    send_rtr: bool,
    /// The connection's QP, until the connection stops: here, under the lock the engine
    /// takes anyway, it costs `data_ready` no lookup.
    qp: Option<ARef<Qp<RsiwDevice>>>,
    /// Nothing is processed any more.
    stopped: bool,
    /// A Flush the work item executes: nothing after it is processed until it is done.
    flush: HeldFlush,
}

/// The Flush to persistence the engine stopped at ([`responder::DeferredFlush`]).
enum HeldFlush {
    /// None.
    None,
    /// Waiting for the work item.
    Waiting(responder::DeferredFlush),
    /// The work item writes it back.
    Running,
}

impl RxState {
    /// A fresh engine around `parser`; `rtr` holds the RTR options offered to the initiator
    /// if we are the responder of a peer-to-peer connection.
    pub(crate) fn new(
        parser: RxParser<KernelCrc32c>,
        rtr: Option<RtrSet>,
        qp: ARef<Qp<RsiwDevice>>,
    ) -> Self {
        let rfc7306 = parser.config().rfc7306;
        Self {
            parser,
            untagged: RxUntagged::new(),
            seg: None,
            role: Role::Unexpected,
            target: Target::None,
            read: None,
            recv: Recv::new(rfc7306),
            failed: false,
            first_done: false,
            rtr,
            send_rtr: false,
            qp: Some(qp),
            stopped: false,
            flush: HeldFlush::None,
        }
    }

    /// Stops the engine: nothing is processed any more. Returns the QP reference it held.
    pub(crate) fn stop(&mut self) -> Option<ARef<Qp<RsiwDevice>>> {
        self.stopped = true;
        self.flush = HeldFlush::None;
        self.qp.take()
    }

    /// Takes the Flush the engine stopped at for the work item to write back
    /// ([`responder::write_back_deferred`]); the engine stays stopped until
    /// [`RxState::flush_done`].
    pub(crate) fn take_flush(&mut self) -> Option<responder::DeferredFlush> {
        match core::mem::replace(&mut self.flush, HeldFlush::Running) {
            HeldFlush::Waiting(d) => Some(d),
            other => {
                self.flush = other;
                None
            }
        }
    }

    /// The work item wrote back the Flush it took with [`RxState::take_flush`] (`written`):
    /// executes it ([`responder::finish_flush`]: its response queued, or the Terminate in
    /// `out`) and lets the engine go on past it. Returns the QP, to report `out` to once the
    /// engine's lock is dropped; `None` once stopped.
    pub(crate) fn flush_done(
        &mut self,
        path: &Path,
        written: Result<u64>,
        out: &mut RxOut,
    ) -> Option<ARef<Qp<RsiwDevice>>> {
        self.flush = HeldFlush::None;
        if self.stopped {
            return None;
        }
        let qp = self.qp.clone()?;
        // As `chunk`: nothing is executed once the connection fails or the QP left RTS.
        if self.failed || !matches!(qp.state(), QpState::Rts | QpState::Closing) {
            return Some(qp);
        }
        match responder::finish_flush(path, &qp, written) {
            Ok(()) => out.respond = true,
            Err(e) => {
                self.failed = true;
                // The parser was fed nothing after the Flush: its Terminate echoes the Flush.
                out.fail = Some(self.fail(e));
            }
        }
        Some(qp)
    }

    /// Takes the receives being filled or held (to flush them), oldest first; returns their
    /// ids.
    pub(crate) fn take_rqe(&mut self) -> [Option<u64>; 2] {
        self.target = Target::None;
        self.recv.take()
    }

    /// The Terminate (or silent failure) for an error a role found in the current segment.
    #[cold]
    #[inline(never)]
    fn fail(&self, e: RxError) -> Fail {
        match e {
            RxError::Term(c, echo) => Fail::Terminate(self.parser.terminate_for(c, echo)),
            RxError::Fail(f) => f,
        }
    }

    /// A new segment's header was validated.
    fn on_segment(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        seg: &Segment,
        out: &mut RxOut,
    ) -> Result<(), RxError> {
        self.seg = Some(*seg);
        // The region the previous segment of a tagged message went to ([`RxState::on_end`]).
        let prev = match core::mem::replace(&mut self.target, Target::None) {
            Target::Tagged(p, s) => Some((s, p)),
            _ => None,
        };
        if seg.hdr.opcode != Opcode::Terminate {
            if let Some(offered) = self.rtr.take() {
                // Peer-to-peer: the initiator's first FPDU is its RTR. Anything else (a ULP
                // message, an RTR we did not offer) is refused with 2/0/07 (MPA-16, MPA-19).
                match responder_rtr(offered, seg) {
                    Ok(kind) => self.send_rtr = kind == RtrKind::Send,
                    Err(c) => return Err(Fail::Terminate(Terminate::bare(c)).into()),
                }
            }
        }
        let len = u64::from(seg.payload_len);
        self.role = role(seg.hdr.opcode);
        match (self.role, seg.hdr.placement) {
            (Role::Write, WirePlacement::Tagged { stag, to }) => {
                if len > 0 {
                    // The QP must grant remote write too, not only the region.
                    if !qp.remote_rights().contains(Rights::REMOTE_WRITE) {
                        return Err(write_fault(Fault::Rights));
                    }
                    let p = (qp.device().mem())
                        .check_again(prev, stag, path.pd(), Rights::REMOTE_WRITE, to, len)
                        .map_err(write_fault)?;
                    self.target = Target::Tagged(p, stag);
                }
            }
            (Role::ReadResponse, WirePlacement::Tagged { stag, to }) => {
                let cursor = &mut self.read;
                if let Some(p) =
                    completer::read_response_segment(path, qp, seg, (stag, to), prev, cursor)?
                {
                    self.target = Target::Tagged(p, stag);
                }
            }
            (Role::Send, WirePlacement::Untagged { qn: QN_SEND, .. })
                if self.send_rtr && !self.first_done && seg.hdr.last && len == 0 =>
            {
                self.send_rtr_segment(seg)?;
            }
            (Role::Send, WirePlacement::Untagged { mo, .. }) => {
                self.recv.segment(path, qp, &mut self.untagged, seg, out)?;
                self.target = Target::Recv(mo);
            }
            // A legacy user context cannot see its completion: as if RFC 7306 were off
            // (`Documentation/infiniband/rsiw-abi.rst`), 0/2/06 below.
            (Role::Imm, _) if qp.takes_imm() => {
                self.recv
                    .imm_segment(path, qp, &mut self.untagged, seg, out)?;
            }
            (Role::Request, _) => {
                // Requests take no buffer of ours: their credits are the responder's.
                self.untagged
                    .check(seg, Some(u64::MAX))
                    .map_err(|c| RxError::Term(c, TermEcho::DdpAndRdma))?;
                if seg.hdr.opcode == Opcode::VerifyRequest {
                    // Its Hash Value, single segment (the parser checked): a longer one than
                    // any digest is refused as any oversized request (0/2/07).
                    if len > VERIFY_MAX_HASH as u64 {
                        return Err(RxError::Term(
                            TermCode::operation(RdmapCode::CatastrophicStream),
                            TermEcho::Ddp,
                        ));
                    }
                    self.target = Target::Hash(HashBuf {
                        b: [0; VERIFY_MAX_HASH],
                        n: 0,
                    });
                }
            }
            (Role::Response, _) => {
                // Matched against the ORQ once Delivered; in MSN order on QN 3.
                self.untagged
                    .check(seg, Some(u64::MAX))
                    .map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
                if seg.hdr.opcode == Opcode::VerifyResponse {
                    // Its digest, single segment, for the completer: else an invalid response.
                    if !seg.hdr.last || len > VERIFY_MAX_HASH as u64 {
                        return Err(RxError::Term(
                            TermCode::operation(RdmapCode::UnexpectedOpcode),
                            TermEcho::Ddp,
                        ));
                    }
                    self.target = Target::Hash(HashBuf {
                        b: [0; VERIFY_MAX_HASH],
                        n: 0,
                    });
                }
            }
            (Role::Terminate, _) => {}
            _ => {
                return Err(RxError::Term(
                    TermCode::operation(RdmapCode::UnexpectedOpcode),
                    TermEcho::Ddp,
                ))
            }
        }
        Ok(())
    }

    /// The initiator's zero-length Send RTR. Out of line: once per connection.
    #[inline(never)]
    fn send_rtr_segment(&mut self, seg: &Segment) -> Result<(), RxError> {
        // The initiator's zero-length Send RTR (MPA-17, T-13): it must carry MSN 1
        // and MO 0, and advances the expected MSN; no receive is taken, so the end
        // of the segment completes nothing. The ULP's first Send is MSN 2.
        self.send_rtr = false;
        self.untagged
            .check(seg, Some(0))
            .map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
        Ok(())
    }

    /// Places `n` payload bytes, from `src`, at `off` in the current segment's payload: one
    /// copy, from the socket buffer (or the header copy a whole small FPDU is in) straight
    /// into the target memory.
    fn place(&mut self, off: u32, src: &Source<'_, '_>, n: usize) -> Result<(), RxError> {
        match &mut self.target {
            Target::None => Ok(()),
            Target::Hash(h) => h.put(off, src, n),
            Target::Tagged(p, _) => p
                .put(u64::from(off), src, 0, n)
                .map_err(|_| Fail::place().into()),
            Target::Recv(mo) => self.recv.place(*mo, off, src, n),
        }
    }

    /// A whole small FPDU that [`RxParser::feed_whole`] took from the header copy: its
    /// segment, its payload (placed from that copy, after its CRC matched) and its end, as
    /// the events of [`RxParser::feed`] would have it.
    fn whole(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        seg: &Segment,
        data: &[u8],
        out: &mut RxOut,
    ) -> Result<(), RxError> {
        if self.first_done {
            match (role(seg.hdr.opcode), seg.hdr.placement) {
                (Role::Write, WirePlacement::Tagged { stag, to }) => {
                    // A Write after the stream's first message (no RTR to check, nothing for
                    // its end to do): checked and placed here, without the state the event
                    // path keeps from a segment's header to its end.
                    if !data.is_empty() {
                        if !qp.remote_rights().contains(Rights::REMOTE_WRITE) {
                            return Err(write_fault(Fault::Rights));
                        }
                        let rcu = rcu::read_lock();
                        let n = data.len() as u64;
                        let p = (qp.device().mem())
                            .check_in(&rcu, path.pd(), stag, Rights::REMOTE_WRITE, to, n)
                            .map_err(write_fault)?;
                        p.write(0, data).map_err(|_| Fail::place())?;
                    }
                    self.recv.wrote(seg.payload_len);
                    return Ok(());
                }
                (Role::Send, WirePlacement::Untagged { .. })
                    if self.recv.idle() && seg.hdr.last =>
                {
                    // A whole Send message after the stream's first one (no RTR).
                    return self
                        .recv
                        .whole(path, qp, &mut self.untagged, seg, data, out);
                }
                _ => {}
            }
        }
        self.on_segment(path, qp, seg, out)?;
        if !data.is_empty() {
            self.place(0, &Source::Bytes(data), data.len())?;
        }
        self.on_end(path, qp, out)
    }

    /// The current segment ended and its CRC matched.
    fn on_end(&mut self, path: &Path, qp: &Qp<RsiwDevice>, out: &mut RxOut) -> Result<(), RxError> {
        // Read where it is: a `Segment` is too large to move out on every message.
        let Some(seg) = self.seg.as_ref() else {
            return Ok(());
        };
        let (hdr, payload_len) = (seg.hdr, seg.payload_len);
        // Only these need their fixed header at the end (a QN 3 response all of the segment).
        let body = match self.role {
            Role::Request | Role::Terminate | Role::Imm | Role::Response => seg.body,
            _ => Body::None,
        };
        let response = (self.role == Role::Response).then_some(*seg);
        self.seg = None;
        let hash = match core::mem::replace(&mut self.target, Target::None) {
            Target::Hash(h) => Some(h),
            // The next segment of the message most likely goes to the same region: kept for
            // its check (`MemTable::check_again`), which then needs no lookup. Not beyond the
            // message.
            Target::Tagged(p, s) if !hdr.last => {
                self.target = Target::Tagged(p, s);
                None
            }
            _ => None,
        };
        if !self.first_done && hdr.opcode != Opcode::Terminate {
            self.first_done = true;
            if path.is_responder() {
                // Peer-to-peer: the initiator's RTR (or its first message otherwise, which
                // the connection manager ignores). A Terminate (an initiator refusing our
                // Reply, MPA-11/15) is not one: the connection fails instead.
                path.set_rtr_seen();
                out.kick = true;
            }
        }
        match (self.role, body) {
            (Role::Write, _) => self.recv.wrote(payload_len),
            (Role::ReadResponse, _) if hdr.last => {
                completer::read_response_end(path, out, self.read.take())
            }
            (Role::Send, _) if hdr.last => self.recv.end(path, qp, hdr, payload_len, out)?,
            (Role::Imm, Body::Immediate(imm)) => self.recv.imm_end(hdr, imm, out),
            (Role::Request, _) => {
                let hash = hash.as_ref().map_or(&[][..], HashBuf::bytes);
                match responder::request(path, qp, &body, hash)? {
                    None => out.respond = true,
                    Some(d) => {
                        // Stop here: nothing more of the stream is processed until the work
                        // item executed the Flush.
                        self.flush = HeldFlush::Waiting(d);
                        out.defer = true;
                    }
                }
            }
            (Role::Response, _) => {
                if let Some(seg) = &response {
                    let digest = hash.as_ref().map_or(&[][..], HashBuf::bytes);
                    completer::response(path, qp, seg, digest, out)?;
                }
            }
            (Role::Terminate, _) => return Err(terminated(path, qp, &body).into()),
            _ => {}
        }
        Ok(())
    }

    /// Processes one run of received bytes; returns how many were consumed.
    fn process(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        skb: &SkbData<'_>,
        out: &mut RxOut,
    ) -> Result<usize, (usize, Fail)> {
        let len = skb.len();
        let mut pos = 0usize;
        let local = |pos| (pos, Fail::local());
        while pos < len && !out.full() && !out.defer {
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
                self.place(off, &Source::Skb(skb, pos), n)
                    .map_err(|e| (pos, self.fail(e)))?;
                let done = self
                    .parser
                    .advance_payload(n, |reg| skb.crc32c(pos, n, reg).ok());
                if done != Some(off) {
                    return Err(local(pos));
                }
                pos += n;
                continue;
            }
            if let Some(k) = self.parser.skip_trailer(left) {
                // Without MPA CRC the pad and CRC field are not read (MPA-05): not copied
                // either, and the header copy below starts at the next FPDU.
                pos += k;
                self.on_end(path, qp, out)
                    .map_err(|e| (pos, self.fail(e)))?;
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
            while used < n && self.parser.payload_remaining() == 0 && !out.full() && !out.defer {
                let input = stage.get(used..n).unwrap_or(&[]);
                // A small FPDU whole in the copy (a latency-bound exchange) is taken in one
                // step; anything else, or anything wrong with it, goes event by event.
                if let Some((c, seg, data)) = self.parser.feed_whole(input) {
                    used = used.saturating_add(c);
                    self.whole(path, qp, &seg, data, out)
                        .map_err(|e| (pos.saturating_add(used), self.fail(e)))?;
                    continue;
                }
                let (c, ev) = self.parser.feed(input);
                used = used.saturating_add(c);
                // `ev` borrows `stage`, not the engine: handled where it is, without a copy.
                match &ev {
                    RxEvent::NeedMore => break,
                    RxEvent::Segment(s) => self.on_segment(path, qp, s, out),
                    RxEvent::End => self.on_end(path, qp, out),
                    RxEvent::Error(e) => Err(RxError::Term(e.code, e.echo)),
                    // Cannot happen: the parser is not fed inside a segment's payload.
                    RxEvent::Payload { .. } => Err(RxError::Term(
                        TermCode::operation(RdmapCode::CatastrophicStream),
                        TermEcho::None,
                    )),
                }
                .map_err(|e| (pos.saturating_add(used), self.fail(e)))?;
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

    /// Processes a run of received bytes of the connection into `out`. Returns how many
    /// bytes were consumed (`tcp_read_sock()` calls again for the rest) and the QP, to post
    /// `out`'s completions to once the engine's lock is dropped; `None` once stopped.
    pub(crate) fn chunk(
        &mut self,
        path: &Path,
        skb: &SkbData<'_>,
        out: &mut RxOut,
    ) -> Option<(usize, ARef<Qp<RsiwDevice>>)> {
        if self.stopped {
            return None;
        }
        // Completions are posted after the lock is dropped, and the connection may stop
        // meanwhile: a reference.
        let qp = self.qp.clone()?;
        if !matches!(self.flush, HeldFlush::None) {
            // Stopped at a Flush the work item executes: it reads the rest afterwards.
            return Some((0, qp));
        }
        let n = if self.failed || !matches!(qp.state(), QpState::Rts | QpState::Closing) {
            // Dropped: the connection is failing or the QP left RTS.
            skb.len()
        } else {
            match self.process(path, &qp, skb, out) {
                Ok(n) => n,
                Err((_, f)) => {
                    self.failed = true;
                    out.fail = Some(f);
                    skb.len()
                }
            }
        };
        Some((n, qp))
    }
}

/// The Terminate for a Write whose target failed its check (spec-map DDP-08, T-06).
fn write_fault(f: Fault) -> RxError {
    let (c, e) = access_error(AccessTarget::Write, f);
    RxError::Term(c, e)
}

/// The peer terminated: fails the connection without answering (RFC 5040 6.1), and the
/// oldest outstanding request with the Terminate's error.
#[cold]
#[inline(never)]
fn terminated(path: &Path, qp: &Qp<RsiwDevice>, body: &Body) -> Fail {
    if let Body::Terminate(t) = body {
        let c = t.code;
        dev_info!(
            qp.device(),
            "QP {}: Terminate received: layer {} type {} code {:#x}\n",
            path.qpn(),
            c.layer,
            c.etype,
            c.ecode
        );
        path.set_peer_term(completer::peer_term_status(c));
    }
    Fail::Silent
}
