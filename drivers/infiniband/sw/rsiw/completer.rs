// SPDX-License-Identifier: GPL-2.0

//! The completer: responses in, send queue completions out.
//!
//! Every request that expects a response (a Read, the RTR Read) is recorded in the ORQ before
//! it is sent ([`Path::issue`]), one ordered list tagged with the response each entry expects
//! (spec-map T-12). RX matches each Read Response segment against the oldest outstanding Read
//! ([`read_response_segment`]: its STag, TO and length must continue it, and the sink must be
//! ours to write, T-20) before anything is placed; a response that matches nothing is the
//! peer's error (1/1/00, 1/1/01). A Read is complete once the payload of its last segment is
//! placed ([`read_response_end`]), not at that segment's header. Then [`deliver`] (run after
//! the RX lock is dropped, or by TX) completes the requests at the head of the ORQ whose
//! responses arrived, in send queue order, and wakes TX if it waited for an ORD credit or a
//! fence.
//!
//! When the connection goes down, [`flush`] completes what is left in order; a Terminate from
//! the peer fails the oldest outstanding request with its error ([`peer_term_status`]).

use crate::{
    device::RsiwDevice,
    mem::Placement,
    path::{
        Fail,
        Path,
        RxError,
        RxOut, //
    },
    qp::RsiwQp,
    stag::Rights,
    wire::{
        atomic::{
            access_error,
            Target as AccessTarget, //
        },
        commit::VERIFY_DIGEST_LEN,
        hdr::Body,
        rx::Segment,
        stream::{
            ReadCursor,
            Request, //
        },
        term::{
            RdmapCode,
            TermCode,
            TermEcho,
            DDP_ETYPE_TAGGED,
            DDP_ETYPE_UNTAGGED,
            LAYER_DDP,
            LAYER_RDMAP,
            RDMAP_ETYPE_OPERATION,
            RDMAP_ETYPE_PROTECTION, //
        },
    },
    wqe::{
        op,
        status, //
    },
};
use kernel::{
    prelude::*,
    rdma::qp::Qp, //
};

/// A Read Response segment's header: it must continue the oldest outstanding Read, into
/// memory we may write. Returns where its payload goes (`None` without payload); `prev`: where
/// the response's previous segment went (`MemTable::check_again`). The first segment of a
/// Read is matched against the ORQ, under its lock; the next ones by the `cursor` that match
/// returned, which RX keeps until the Read's end ([`read_response_end`]). Out of line:
/// rare on the paths that must be short.
#[inline(never)]
pub(crate) fn read_response_segment(
    path: &Path,
    qp: &Qp<RsiwDevice>,
    seg: &Segment,
    (stag, to): (u32, u64),
    prev: Option<(u32, Placement)>,
    cursor: &mut Option<ReadCursor>,
) -> Result<Option<Placement>, RxError> {
    let len = u64::from(seg.payload_len);
    let (n, last) = (seg.payload_len, seg.hdr.last);
    match cursor {
        Some(c) => c.next(stag, to, n, last),
        None => path
            .read_response(stag, to, n, last)
            .map(|c| *cursor = Some(c)),
    }
    .map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
    if len == 0 {
        return Ok(None);
    }
    match qp
        .device()
        .mem()
        .check_again(prev, stag, path.pd(), Rights::LOCAL_WRITE, to, len)
    {
        Ok(p) => Ok(Some(p)),
        Err(f) => {
            let (c, e) = access_error(AccessTarget::Write, f);
            Err(RxError::Term(c, e))
        }
    }
}

/// The last segment of a response ended (its CRC matched): the request is complete, to be
/// delivered once the RX lock is dropped.
pub(crate) fn response_end(out: &mut RxOut) {
    out.deliver = true;
}

/// The last segment of a Read Response ended, its payload placed and its CRC matched: only
/// now is the Read done. Done at its header, it could be completed (by a [`deliver`] that TX
/// runs meanwhile) while the rest of its payload was still arriving: the consumer would see
/// the data before it was all there, and a Read with Local Invalidate would invalidate its
/// sink under the placement, which then fails (1/1/00).
pub(crate) fn read_response_end(path: &Path, out: &mut RxOut, cursor: Option<ReadCursor>) {
    path.read_response_end(cursor);
    response_end(out);
}

/// A QN 3 response was Delivered: it must answer the oldest outstanding request that expects
/// one, with the kind of response it expects and, for an Atomic Response, its Request
/// Identifier (T-12, ATOM-06); anything else, or a response with nothing outstanding, is an
/// invalid response: 0/2/06 (ATOM-13, D-02). An Atomic Response's original value goes into
/// the request's 8-byte result buffer (native byte order, ATOM-10) before the request can
/// complete, a Verify Response's digest (`payload`, VERIFY-05) into the Verify's digest
/// sink, if it has one: a digest of another length than rsiw's is an invalid response too.
/// Out of line: rare on the paths that must be short.
#[inline(never)]
pub(crate) fn response(
    path: &Path,
    qp: &Qp<RsiwDevice>,
    seg: &Segment,
    payload: &[u8],
    out: &mut RxOut,
) -> Result<(), RxError> {
    let a = path
        .response(seg)
        .map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
    let orig;
    let data: &[u8] = match (a.req, &seg.body) {
        (Request::Atomic { .. }, Body::AtomicResponse(r)) => {
            orig = r.orig.to_ne_bytes();
            &orig
        }
        (Request::Verify, _) => {
            if payload.len() != VERIFY_DIGEST_LEN {
                return Err(RxError::Term(
                    TermCode::operation(RdmapCode::UnexpectedOpcode),
                    TermEcho::Ddp,
                ));
            }
            payload
        }
        _ => &[],
    };
    let sink = a.local.sink;
    if !data.is_empty() && sink.length > 0 {
        let placed = qp
            .device()
            .mem()
            .check(
                path.pd(),
                sink.lkey,
                Rights::LOCAL_WRITE,
                sink.laddr,
                data.len() as u64,
            )
            .ok()
            .is_some_and(|p| p.write(0, data).is_ok());
        if !placed {
            // The result buffer went away since the request was sent: a local error.
            return Err(Fail::local().into());
        }
    }
    if a.done {
        response_end(out);
    }
    Ok(())
}

/// Completes the requests whose responses arrived, and the work requests behind them that
/// expect none and are done, in send queue order: a Read with Local Invalidate invalidates
/// its sink first. One caller at a time completes (another one finishing entries meanwhile
/// has it go round again), so that completions are written in order. Returns whether TX
/// waited for one (and must be kicked). Any context, no data path lock held.
pub(crate) fn deliver(path: &Path, qp: &Qp<RsiwDevice>) -> bool {
    let mut kick = false;
    if !path.begin_deliver() {
        return false;
    }
    loop {
        while let Some(a) = path.pop_completed(&mut kick) {
            let w = a.local;
            let mut st = w.status;
            if w.opcode == op::READ_LOCAL_INV
                && a.req != Request::Local
                && qp
                    .device()
                    .mem()
                    .invalidate(path.pd(), w.sink.lkey, false)
                    .is_err()
            {
                st = status::LOC_QP_OP_ERR;
            }
            if let Some(c) = w.completion(st) {
                RsiwQp::complete_sq(qp, c);
            }
        }
        if !path.end_deliver() {
            return kick;
        }
    }
}

/// Completes every outstanding request with `IB_WC_WR_FLUSH_ERR` (the connection is going
/// down), except that the oldest one still waiting for its response gets the status of the
/// peer's Terminate, if the peer terminated (the Terminate refers to it), and a work request
/// that failed locally its error.
pub(crate) fn flush(path: &Path, qp: &Qp<RsiwDevice>) {
    let mut peer = path.take_peer_term();
    // One at a time: a completion may call the consumer, which must not find a lock held.
    while let Some(a) = path.pop_orq() {
        let local = a.req == Request::Local;
        let st = match peer {
            Some(st) if !a.done && !local => st,
            _ if local && a.done && a.local.status != status::SUCCESS => a.local.status,
            _ => status::WR_FLUSH_ERR,
        };
        if !a.done && !local {
            peer = None;
        }
        if let Some(c) = a.local.completion(st) {
            RsiwQp::complete_sq(qp, c);
        }
    }
}

/// The completion status of the outstanding request a peer's Terminate refers to: an access
/// violation (RDMAP remote protection, DDP tagged buffer) is `REM_ACCESS_ERR`, an operation
/// that the peer performed and that failed (RDMAP remote operation, unspecified: a Flush that
/// could not be performed, a Verify whose digest did not match, spec-map D-02)
/// `REM_OP_ERR`, a refused operation (the other RDMAP remote operation errors, DDP untagged
/// buffer) `REM_INV_REQ_ERR`, anything else (catastrophic, LLP) `GENERAL_ERR`. A legacy user
/// context sees `REM_OP_ERR` as `GENERAL_ERR` (`status::for_legacy`).
pub(crate) fn peer_term_status(c: TermCode) -> u16 {
    if c == TermCode::operation(RdmapCode::Unspecified) {
        return status::REM_OP_ERR;
    }
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
