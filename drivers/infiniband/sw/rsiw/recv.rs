// SPDX-License-Identifier: GPL-2.0

//! Untagged placement: the messages of QN 0 (the Send variants) into receives.
//!
//! A message's first segment takes the next receive queue element (the SRQ's if the QP has
//! one: [`RsiwQp::next_rqe`]) and checks its SGEs against the PD of the queue it came from
//! ([`rq_pd`]); each segment passes the MSN, MO and length checks of [`RxUntagged`] against
//! it before its payload is placed at its MO; the message's last segment completes the
//! receive, after the Invalidate STag of a Send with Invalidate was invalidated. Nothing
//! completes before the segment's CRC matched.
//!
//! A whole single-segment Send into a receive of one SGE (the usual receive) is taken in one
//! step ([`Recv::whole`]), with the same checks in the same order.

use crate::{
    device::{
        self,
        RsiwDevice, //
    },
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
    qp::RsiwQp,
    stag::{
        PdId,
        Rights, //
    },
    wire::{
        atomic::{
            access_error,
            Target as AccessTarget, //
        },
        hdr::{
            imm,
            DdpHeader,
            Placement as WirePlacement,
            IMM_LEN,
            SEND_IMM_FOLLOWS, //
        },
        rx::Segment,
        stream::RxUntagged,
        term::TermEcho,
        tx::sg_pieces,
    },
    wqe::{
        op,
        status,
        Completion,
        Rqe, //
        NUM_SGE,
    },
};
use kernel::{
    prelude::*,
    rdma::qp::Qp,
    sync::rcu, //
};

/// The receive being filled.
struct CurRqe {
    id: u64,
    pl: [Option<Placement>; NUM_SGE],
    lens: [u64; NUM_SGE],
    n: usize,
    total: u64,
}

/// Untagged placement state of a connection.
pub(crate) struct Recv {
    /// The receive being filled.
    cur: Option<CurRqe>,
    /// Where the next receive queue element is read to (kept: too large to move around).
    buf: Rqe,
    /// RFC 7306 is on: Immediate Data is taken, and a Send marked [`SEND_IMM_FOLLOWS`] is
    /// held for it.
    rfc7306: bool,
    /// The completion of a Send with Immediate whose Immediate Data is the next message of
    /// QN 0: both complete as this one receive.
    held: Option<Completion>,
    /// Payload bytes of the RDMA Writes Delivered since the last message of QN 0: the length
    /// an Immediate Data completion reports (D-07).
    written: u32,
}

/// The completion of receive `id`.
fn completion(id: u64, st: u16, bytes: u32, inval: Option<u32>, solicited: bool) -> Completion {
    Completion {
        id,
        opcode: op::RECEIVE,
        status: st,
        bytes,
        inval_stag: inval,
        solicited,
        imm: None,
    }
}

/// The PD the buffers of a receive of `qp` are checked against: the SRQ's if the QP takes its
/// receives from one, else the QP's. An SRQ's receives are posted against its own PD
/// (`post_srq_recv` checks a kernel SRQ's lkeys so; a user SRQ's are only checked here), which
/// may differ from the PD of a QP attached to it, as in siw. `None` (an SRQ without a PD of
/// this device, which ib_core does not create) fails the check.
fn rq_pd(path: &Path, qp: &Qp<RsiwDevice>) -> Option<PdId> {
    match qp.srq() {
        None => Some(path.pd()),
        Some(srq) => srq.pd().map(device::pd_id),
    }
}

impl Recv {
    /// No receive taken; Immediate Data taken if `rfc7306` is on.
    pub(crate) fn new(rfc7306: bool) -> Self {
        Self {
            cur: None,
            buf: Rqe::default(),
            rfc7306,
            held: None,
            written: 0,
        }
    }

    /// Whether no receive is being filled or held.
    pub(crate) fn idle(&self) -> bool {
        self.cur.is_none() && self.held.is_none()
    }

    /// Takes the receives being filled or held (to flush them), oldest first; returns their
    /// ids.
    pub(crate) fn take(&mut self) -> [Option<u64>; 2] {
        [
            self.held.take().map(|c| c.id),
            self.cur.take().map(|r| r.id),
        ]
    }

    /// A segment of an RDMA Write of `n` payload bytes was Delivered.
    pub(crate) fn wrote(&mut self, n: u32) {
        self.written = self.written.saturating_add(n);
    }

    /// A message of QN 0 other than the Immediate Data a held Send waits for arrived: the Send
    /// completes on its own (its sender did not follow it with Immediate Data, as an rsiw
    /// sender always does).
    fn release_held(&mut self, out: &mut RxOut) {
        if let Some(c) = self.held.take() {
            out.push_rq(c);
        }
    }

    /// Takes the next receive (the SRQ's if there is one) into `buf`; returns whether there
    /// was one. An invalid element is completed with its error and fails the stream.
    fn next_rqe(&mut self, qp: &Qp<RsiwDevice>, out: &mut RxOut) -> Result<bool, RxError> {
        match RsiwQp::next_rqe(qp, &mut self.buf) {
            None => Ok(false),
            Some(Err(c)) => {
                out.push_rq(c);
                Err(Fail::local().into())
            }
            Some(Ok(())) => Ok(true),
        }
    }

    /// Makes the receive in `buf` the current one, with its SGEs checked.
    fn fill(&mut self, path: &Path, qp: &Qp<RsiwDevice>, out: &mut RxOut) -> Result<(), RxError> {
        let rqe = &self.buf;
        let n = usize::from(rqe.num_sge).min(NUM_SGE);
        // Filled in place: a `CurRqe` is too large to move around on every message.
        let cur = self.cur.insert(CurRqe {
            id: rqe.id,
            pl: Default::default(),
            lens: [0; NUM_SGE],
            n,
            total: 0,
        });
        let mem = qp.device().mem();
        let pd = rq_pd(path, qp);
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
            let p = pd.and_then(|pd| {
                mem.check(
                    pd,
                    s.lkey,
                    Rights::LOCAL_WRITE,
                    s.laddr,
                    u64::from(s.length),
                )
                .ok()
            });
            match p {
                Some(p) => *pl = Some(p),
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            // Completed here, so not flushed again.
            self.cur = None;
            out.push_rq(completion(rqe.id, status::LOC_PROT_ERR, 0, None, false));
            return Err(Fail::local().into());
        }
        Ok(())
    }

    /// A new segment of a Send variant: takes a receive for a new message and checks the
    /// segment against it (MSN, MO, length: DDP-05 to DDP-09).
    pub(crate) fn segment(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        untagged: &mut RxUntagged,
        seg: &Segment,
        out: &mut RxOut,
    ) -> Result<(), RxError> {
        if self.cur.is_none() {
            self.release_held(out);
            if self.next_rqe(qp, out)? {
                self.fill(path, qp, out)?;
            }
        }
        let avail = self.cur.as_ref().map(|r| r.total);
        untagged
            .check(seg, avail)
            .map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
        Ok(())
    }

    /// An Immediate Data message (IMM-01): it completes the Send with Immediate held for it,
    /// or consumes a receive of its own, whose buffer it does not write (D-01: a receive with
    /// no SGE will do). MSN order as any message of QN 0 (IMM-03).
    pub(crate) fn imm_segment(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        untagged: &mut RxUntagged,
        seg: &Segment,
        out: &mut RxOut,
    ) -> Result<(), RxError> {
        let avail = if self.held.is_some() {
            Some(0)
        } else {
            if self.cur.is_none() && self.next_rqe(qp, out)? {
                self.fill(path, qp, out)?;
            }
            self.cur.as_ref().map(|r| r.total)
        };
        untagged
            .check(seg, avail)
            .map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
        Ok(())
    }

    /// The Immediate Data message `imm` (its 8 bytes) ended: completes the held Send with
    /// it, as `IB_WC_RECV` (a Send with Immediate), or its own receive as
    /// `IB_WC_RECV_RDMA_WITH_IMM` with the length of the RDMA Writes before it (D-07; an RDMA
    /// Write with Immediate, IMM-05).
    pub(crate) fn imm_end(&mut self, hdr: DdpHeader, imm: [u8; IMM_LEN], out: &mut RxOut) {
        let v = u32::from_ne_bytes(imm::to_verbs(imm));
        let se = hdr.opcode.is_solicited();
        let written = core::mem::take(&mut self.written);
        if let Some(mut c) = self.held.take() {
            c.imm = Some(v);
            c.solicited |= se;
            out.push_rq(c);
        } else if let Some(r) = self.cur.take() {
            out.push_rq(Completion {
                id: r.id,
                opcode: op::RECV_WRITE_IMM,
                status: status::SUCCESS,
                bytes: written,
                inval_stag: None,
                solicited: se,
                imm: Some(v),
            });
        }
    }

    /// Places `n` payload bytes, from `src`, at `off` in the current segment's payload, which
    /// goes into the current receive at message offset `mo`.
    pub(crate) fn place(
        &self,
        mo: u32,
        off: u32,
        src: &Source<'_, '_>,
        n: usize,
    ) -> Result<(), RxError> {
        let bad = || RxError::Fail(Fail::place());
        let r = self.cur.as_ref().ok_or_else(bad)?;
        let at = u64::from(mo).saturating_add(u64::from(off));
        if let ([Some(p), ..], [len, ..], 1) = (&r.pl, &r.lens, r.n) {
            // One SGE, the usual receive: no scatter walk.
            if at.saturating_add(n as u64) > *len {
                return Err(bad());
            }
            return p.put(at, src, 0, n).map_err(|_| bad());
        }
        let mut done = 0usize;
        for piece in sg_pieces(r.lens.get(..r.n).unwrap_or(&[]), at, n as u64) {
            let len = usize::try_from(piece.len).map_err(|_| bad())?;
            let p = r.pl.get(piece.index).and_then(|p| p.as_ref());
            p.ok_or_else(bad)?
                .put(piece.offset, src, done, len)
                .map_err(|_| bad())?;
            done = done.saturating_add(len);
        }
        if done != n {
            return Err(bad());
        }
        Ok(())
    }

    /// The last segment of a Send ended: completes the receive it filled (if it took one).
    pub(crate) fn end(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        hdr: DdpHeader,
        payload_len: u32,
        out: &mut RxOut,
    ) -> Result<(), RxError> {
        let Some(id) = self.cur.as_ref().map(|r| r.id) else {
            return Ok(());
        };
        // Dropped in place (its placements), not moved out.
        self.cur = None;
        self.finish(path, qp, hdr, payload_len, id, out)
    }

    /// A whole single-segment Send (its payload `data`, its CRC checked) after the stream's
    /// first message, with no receive taken: what [`Recv::segment`], [`Recv::place`] and
    /// [`Recv::end`] do for it. Into a receive of at most one SGE (the usual receive) its
    /// SGE is checked, the segment checked, the payload copied and the receive completed,
    /// all under one RCU read-side critical section, with no placement kept.
    pub(crate) fn whole(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        untagged: &mut RxUntagged,
        seg: &Segment,
        data: &[u8],
        out: &mut RxOut,
    ) -> Result<(), RxError> {
        let WirePlacement::Untagged { mo, .. } = seg.hdr.placement else {
            return Err(Fail::place().into());
        };
        self.release_held(out);
        if self.next_rqe(qp, out)? {
            if self.buf.num_sge <= 1 {
                return self.whole_one(path, qp, untagged, seg, data, out);
            }
            self.fill(path, qp, out)?;
        }
        let avail = self.cur.as_ref().map(|r| r.total);
        untagged
            .check(seg, avail)
            .map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
        if !data.is_empty() {
            self.place(mo, 0, &Source::Bytes(data), data.len())?;
        }
        self.end(path, qp, seg.hdr, seg.payload_len, out)
    }

    /// [`Recv::whole`] into the receive of at most one SGE in `buf`: the same checks in the
    /// same order as [`Recv::fill`], [`Recv::segment`], [`Recv::place`] and [`Recv::end`].
    fn whole_one(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        untagged: &mut RxUntagged,
        seg: &Segment,
        data: &[u8],
        out: &mut RxOut,
    ) -> Result<(), RxError> {
        let rqe = &self.buf;
        let (id, s) = (rqe.id, rqe.sge[0]);
        let len = if rqe.num_sge == 0 { 0 } else { s.length };
        let rcu = rcu::read_lock();
        let p = if len == 0 {
            None
        } else {
            let c = rq_pd(path, qp).and_then(|pd| {
                qp.device()
                    .mem()
                    .check_in(
                        &rcu,
                        pd,
                        s.lkey,
                        Rights::LOCAL_WRITE,
                        s.laddr,
                        u64::from(len),
                    )
                    .ok()
            });
            match c {
                Some(p) => Some(p),
                None => {
                    out.push_rq(completion(id, status::LOC_PROT_ERR, 0, None, false));
                    return Err(Fail::local().into());
                }
            }
        };
        if let Err(c) = untagged.check(seg, Some(u64::from(len))) {
            // Flushed with the rest of the receive queue.
            self.keep(id);
            return Err(RxError::Term(c, TermEcho::Ddp));
        }
        if !data.is_empty() {
            let WirePlacement::Untagged { mo, .. } = seg.hdr.placement else {
                return Err(Fail::place().into());
            };
            // `check` bounded `mo` plus the payload by the SGE's length.
            let placed = p.is_some_and(|p| p.write(u64::from(mo), data).is_ok());
            if !placed {
                self.keep(id);
                return Err(Fail::place().into());
            }
        }
        drop(rcu);
        self.finish(path, qp, seg.hdr, seg.payload_len, id, out)
    }

    /// Keeps the receive `id` as the current one, to be flushed. Out of line: only on errors.
    #[cold]
    #[inline(never)]
    fn keep(&mut self, id: u64) {
        self.cur = Some(CurRqe {
            id,
            pl: Default::default(),
            lens: [0; NUM_SGE],
            n: 0,
            total: 0,
        });
    }
}

impl Recv {
    /// Completes the receive `id` that the Send ending with `hdr` (`payload_len` bytes of payload
    /// in its last segment) filled, after invalidating the Invalidate STag of a Send with
    /// Invalidate; holds the completion of a Send with Immediate for its Immediate Data.
    fn finish(
        &mut self,
        path: &Path,
        qp: &Qp<RsiwDevice>,
        hdr: DdpHeader,
        payload_len: u32,
        id: u64,
        out: &mut RxOut,
    ) -> Result<(), RxError> {
        self.written = 0;
        let mo = match hdr.placement {
            WirePlacement::Untagged { mo, .. } => mo,
            WirePlacement::Tagged { .. } => 0,
        };
        let bytes = mo.saturating_add(payload_len);
        let mut inval = None;
        if let WirePlacement::Untagged { inv_stag, .. } = hdr.placement {
            if hdr.opcode.has_invalidate() {
                if let Err(f) = qp.device().mem().invalidate(path.pd(), inv_stag, true) {
                    out.push_rq(completion(id, status::LOC_PROT_ERR, bytes, None, false));
                    let (c, e) = access_error(AccessTarget::SendInvalidate, f);
                    return Err(RxError::Term(c, e));
                }
                inval = Some(inv_stag);
            }
        }
        let se = hdr.opcode.is_solicited();
        let c = completion(id, status::SUCCESS, bytes, inval, se);
        match hdr.placement {
            WirePlacement::Untagged {
                inv_stag: SEND_IMM_FOLLOWS,
                ..
            } if self.rfc7306 && inval.is_none() => self.held = Some(c),
            _ => out.push_rq(c),
        }
        Ok(())
    }
}
