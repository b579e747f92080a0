// SPDX-License-Identifier: GPL-2.0

//! The responder: inbound QN 1 requests in, responses for the TX engine out.
//!
//! When a request has been Delivered (its segment ended and its CRC matched) RX hands it to
//! [`request`], which checks it (STag, PD, bounds, rights: spec-map T-06), executes it and
//! queues it within IRD ([`Path::admit`]): one FIFO for every kind of request, sharing the
//! IRD credits (T-01, T-04); beyond IRD the peer gets 0/2/07 (D-08) and nothing is executed.
//! A Read Request's execution is reading the source, which its response does as it is sent
//! (checked again per FPDU: the region may go away meanwhile). Each request is executed once,
//! and answered once, in arrival order: the TX engine asks for the next response with
//! [`next_response`], or `data_ready` sends it ([`crate::tx::respond_bh`]); both build it with
//! [`response`], with the MSN the inbound queue assigns a QN 3 response
//! ([`Path::next_inbound`]), and the response's end frees its credit ([`Done::Response`],
//! T-05).
//!
//! The commit extensions (draft-talpey-rdma-commit-02, module parameter `commit`) run the
//! same way, when Delivered and so after every earlier Write of the stream was placed (RX
//! places synchronously and in stream order): a Flush is a full memory barrier before its
//! response is queued (global visibility), preceded for a Flush to persistence by the
//! write-back of its bytes to persistent memory ([`persist`], or past [`FLUSH_INLINE_MAX`]
//! bytes in the connection's work item: [`DeferredFlush`]); an Atomic Write one aligned
//! 64-bit store with release ordering, a Verify the CRC32c of the range compared with the Hash
//! Value the request carries. The decisions that need no memory are the wire core's
//! (`wire::commit`).

use crate::{
    device::RsiwDevice,
    msg::{
        Done,
        Fatal,
        Outgoing,
        Src, //
    },
    path::{
        Fail,
        InRead,
        InRequest,
        Path,
        RxError, //
    },
    stag::Rights,
    wire::{
        atomic::{
            access_error,
            cmp_swap_masked,
            commit_failure,
            fetch_add_masked,
            Fault,
            Target as AccessTarget, //
        },
        commit::{
            atomic_write_check,
            flush_plan,
            verify_outcome,
            FlushScope,
            VerifyDigest,
            VERIFY_DIGEST_LEN, //
        },
        hdr::{
            AtomicRequest,
            AtomicResponse,
            AtomicWriteRequest,
            Body,
            FlushRequest,
            Opcode,
            Placement as WirePlacement,
            ReadRequest,
            VerifyRequest,
            AOP_FETCH_ADD,
            QN_RESPONSE, //
        },
        stream::Refused,
        term::{
            RdmapCode,
            TermCode,
            TermEcho, //
        },
        tx::TxMessage,
    },
    wqe::MAX_INLINE,
};
use kernel::{
    mm::pmem,
    prelude::*,
    rdma::qp::Qp,
    sync::barrier::{
        mb,
        Full, //
    },
};

/// The most bytes one RDMA Verify digests: it runs in the RX path (softirq), so its length
/// is bounded; a longer one fails as a Verify that cannot be performed (0/2/FF, D-02).
pub(crate) const VERIFY_MAX_LEN: u64 = 1 << 20;

/// The most bytes of cache lines a Flush to persistence writes back in the RX path, 64 KiB
/// (1024 lines of 64 bytes): RX runs in softirq, or in the work item under its spinlock with
/// interrupts off, and a write-back costs about a `clwb` per line. A Flush that writes back
/// more is deferred to the connection's work item ([`DeferredFlush`]).
pub(crate) const FLUSH_INLINE_MAX: u64 = 64 * 1024;

/// A Flush to persistence whose write-back is too long for the RX path ([`FLUSH_INLINE_MAX`]):
/// checked, not yet executed. RX holds it and stops at the end of its request, consuming
/// nothing more of the stream; the connection's work item writes the bytes back in process
/// context, in parts with a yield point between them ([`write_back_deferred`]), then executes
/// the Flush ([`finish_flush`]) and lets RX go on. So the Flush Response, and every later
/// message of the stream (an Atomic Write or a Verify after the Flush, AWRITE-04 and
/// VERIFY-06; any response queued behind it), still follow the write-back and its barrier,
/// as for a Flush executed in the RX path (FLUSH-03, FLUSH-05).
pub(crate) struct DeferredFlush {
    target: crate::mem::Placement,
    whole: bool,
}

/// An inbound request was Delivered: checks, executes and queues it, or (a long Flush to
/// persistence) returns it checked, for the work item ([`DeferredFlush`]). `body` is its fixed
/// RDMAP header, `hash` the payload of a Verify Request (empty for the others). Any error is
/// the peer's: the Terminate it gets.
pub(crate) fn request(
    path: &Path,
    qp: &Qp<RsiwDevice>,
    body: &Body,
    hash: &[u8],
) -> Result<Option<DeferredFlush>, RxError> {
    match body {
        Body::ReadRequest(r) => read_request(path, qp, r).map(|()| None),
        Body::AtomicRequest(r) => atomic_request(path, qp, r).map(|()| None),
        Body::FlushRequest(r) => flush_request(path, qp, r),
        Body::AtomicWriteRequest(r) => atomic_write_request(path, qp, r).map(|()| None),
        Body::VerifyRequest(r) => verify_request(path, qp, r, hash).map(|()| None),
        // The parser decodes the body of the opcode it accepted.
        _ => Err(RxError::Term(
            TermCode::operation(RdmapCode::CatastrophicStream),
            TermEcho::Ddp,
        )),
    }
}

/// The Terminate for an inbound request of kind `t` whose target failed a check (T-06).
fn refused(t: AccessTarget, f: Fault) -> RxError {
    let (c, e) = access_error(t, f);
    RxError::Term(c, e)
}

/// Queues an RDMA Read Request whose source is ours to read.
fn read_request(path: &Path, qp: &Qp<RsiwDevice>, r: &ReadRequest) -> Result<(), RxError> {
    // The QP must grant remote read too, not only the region.
    if r.size > 0 && !qp.remote_rights().contains(Rights::REMOTE_READ) {
        return Err(refused(AccessTarget::ReadRequest, Fault::Rights));
    }
    if r.size > 0 {
        let c = qp.device().mem().check(
            path.pd(),
            r.src_stag,
            Rights::REMOTE_READ,
            r.src_to,
            u64::from(r.size),
        );
        if let Err(f) = c {
            let (c, e) = access_error(AccessTarget::ReadRequest, f);
            return Err(RxError::Term(c, e));
        }
    }
    let req = InRead {
        sink_stag: r.sink_stag,
        sink_to: r.sink_to,
        size: r.size,
        src_stag: r.src_stag,
        src_to: r.src_to,
    };
    admit(path, || Ok(InRequest::Read(req)))
}

/// Executes an Atomic Request on its target word within IRD, in stream order (T-02), and
/// queues its response (ATOM-04): the operation code (ATOM-03, 0/2/06), the QP's and the
/// region's remote atomic right, STag, PD and bounds (ATOM-12, 0/1/xx) and the alignment of
/// the resolved address (ATOM-11, T-07, 0/2/07) are checked first; memory is not touched on
/// any failure, nor beyond IRD (0/2/07).
fn atomic_request(path: &Path, qp: &Qp<RsiwDevice>, r: &AtomicRequest) -> Result<(), RxError> {
    r.check_aopcode()
        .map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
    if !qp.remote_rights().contains(Rights::REMOTE_ATOMIC) {
        return Err(refused(AccessTarget::Atomic, Fault::Rights));
    }
    let target = qp
        .device()
        .mem()
        .check(path.pd(), r.stag, Rights::REMOTE_ATOMIC, r.to, 8)
        .map_err(|f| refused(AccessTarget::Atomic, f))?;
    let r = *r;
    admit(path, || {
        let op = |orig: u64| match r.aopcode {
            AOP_FETCH_ADD => fetch_add_masked(orig, r.add_swap, r.add_swap_mask),
            _ => cmp_swap_masked(orig, r.compare, r.compare_mask, r.add_swap, r.add_swap_mask),
        };
        match target.atomic_u64(0, op) {
            Ok(orig) => Ok(InRequest::Atomic {
                req_id: r.req_id,
                orig,
            }),
            // The region was checked; what is left is the word's address.
            Err(e) if e == EINVAL => Err(refused(AccessTarget::Atomic, Fault::Misaligned)),
            // Pages pinned without write access (not with remote atomic access).
            Err(e) if e == EACCES => Err(refused(AccessTarget::Atomic, Fault::Rights)),
            // Deregistered or invalidated meanwhile.
            Err(_) => Err(refused(AccessTarget::Atomic, Fault::InvalidStag)),
        }
    })
}

/// Executes an RDMA Flush Request within IRD, in stream order, and queues its response
/// (FLUSH-03, FLUSH-05): the flags are checked first (D-05, 0/2/FF), then the STag, PD, the
/// range (ignored with the R flag) and the region's Flushable rights for each flag asked for
/// (FLUSH-04, CMT-04: 0/1/xx).
///
/// Global visibility: every earlier request of the stream was placed by this CPU before the
/// Flush was Delivered (RX places synchronously, in stream order), so a full memory barrier
/// (`mb()`, against other CPUs and devices) before the response is queued makes them
/// globally visible before the Flush Response can be sent (FLUSH-08).
///
/// Persistence (P): only a region of persistent memory has the Flushable-to-persistence right
/// (checked at registration: [`crate::mem::persistent`]); on any other region a Flush with P
/// fails the rights check (0/1/02). On one, [`persist`] writes the bytes back to persistent
/// memory and orders the write-backs before the response is queued (FLUSH-05). It runs before
/// the Flush is admitted, not under the lock `admit` takes (IRQs off), still after every
/// earlier placement of the stream; a Flush then refused beyond IRD (D-08) wrote back bytes
/// for nothing, which is allowed (other bytes MAY be flushed, FLUSH-05). A write-back that
/// fails (the region went away meanwhile) is a Flush that cannot be performed (FLUSH-06,
/// 0/2/FF). The device counts the Flushes executed and the bytes written back
/// ([`RsiwDevice::count_flush`]).
///
/// A write-back of more than [`FLUSH_INLINE_MAX`] bytes is not done here: the Flush is returned
/// checked ([`DeferredFlush`]) and executed in the work item.
fn flush_request(
    path: &Path,
    qp: &Qp<RsiwDevice>,
    r: &FlushRequest,
) -> Result<Option<DeferredFlush>, RxError> {
    let plan = flush_plan(r).map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
    let mut need = Rights(0);
    if plan.global {
        need = need | Rights::FLUSH_GLOBAL;
    }
    if plan.persistent {
        need = need | Rights::FLUSH_PERSISTENT;
    }
    // The whole region: only STag, PD and rights are checked (a zero-length range has no
    // bounds).
    let (to, len) = match plan.scope {
        FlushScope::Region => (0, 0),
        FlushScope::Range { to, len } => (to, len),
    };
    let target = qp
        .device()
        .mem()
        .check(path.pd(), r.sink.stag, need, to, len)
        .map_err(|f| refused(AccessTarget::Flush, f))?;
    let whole = plan.scope == FlushScope::Region;
    // How much to write back (nothing is written yet); a region that went away meanwhile
    // fails below, in the RX path.
    if plan.persistent
        && target
            .write_back_part(whole, 0, 0)
            .is_ok_and(|w| w.bytes > FLUSH_INLINE_MAX)
    {
        return Ok(Some(DeferredFlush { target, whole }));
    }
    let written = if plan.persistent {
        Some(persist(&target, plan.scope))
    } else {
        None
    };
    admit(path, || {
        let bytes = match written {
            Some(w) => w.map_err(|_| RxError::Term(commit_failure(), TermEcho::Ddp))?,
            None => 0,
        };
        mb(Full);
        qp.device().count_flush(plan.persistent, bytes, false);
        Ok(InRequest::Flush)
    })
    .map(|()| None)
}

/// The write-back of a [`DeferredFlush`], in the connection's work item (process context, no
/// lock held): parts of [`FLUSH_INLINE_MAX`] bytes, with a yield point between them
/// ([`pmem::cond_resched`]), then the pmem barrier, as [`persist`]. Returns the bytes of the
/// cache lines written back. `cancel` is asked between the parts: once it says so (the
/// connection stops) the write-back ends with `ECANCELED`, and the Flush is not executed.
pub(crate) fn write_back_deferred(d: &DeferredFlush, cancel: impl Fn() -> bool) -> Result<u64> {
    let mut at = 0u64;
    loop {
        let w = d.target.write_back_part(d.whole, at, FLUSH_INLINE_MAX)?;
        if w.left == 0 {
            pmem::barrier();
            return Ok(w.bytes);
        }
        if cancel() {
            return Err(ECANCELED);
        }
        pmem::cond_resched();
        at = at.saturating_add(FLUSH_INLINE_MAX);
    }
}

/// Executes a [`DeferredFlush`] once the work item wrote its bytes back (`written`, from
/// [`write_back_deferred`]): as [`flush_request`] after its write-back, within IRD, a full
/// memory barrier and the Flush Response queued; a failed write-back is 0/2/FF. Runs under the
/// RX engine's lock, before RX consumes anything after the Flush. The device counts it as
/// deferred too.
pub(crate) fn finish_flush(
    path: &Path,
    qp: &Qp<RsiwDevice>,
    written: Result<u64>,
) -> Result<(), RxError> {
    admit(path, || {
        let bytes = written.map_err(|_| RxError::Term(commit_failure(), TermEcho::Ddp))?;
        mb(Full);
        qp.device().count_flush(true, bytes, true);
        Ok(InRequest::Flush)
    })
}

/// Writes the flushed bytes of `target` back to persistent memory: the whole cache lines
/// covering the range, or the whole region for [`FlushScope::Region`]
/// (`crate::mem::Placement::write_back`, `arch_wb_cache_pmem()`), then orders the write-backs
/// ([`pmem::barrier`], `pmem_wmb()`). Returns the bytes of the cache lines written back
/// (`wire::commit::writeback_span`).
fn persist(target: &crate::mem::Placement, scope: FlushScope) -> Result<u64> {
    let bytes = target.write_back(scope == FlushScope::Region)?;
    pmem::barrier();
    Ok(bytes)
}

/// Executes an Atomic Write Request within IRD, in stream order, and queues its response:
/// the length (AWRITE-01, 0/2/07), the QP's and the region's remote write right, STag, PD and
/// bounds (AWRITE-02, 0/1/xx) and the alignment of the resolved address (T-07, 0/2/07) are
/// checked first, and memory is not touched on any failure. The 8 bytes are stored as one
/// aligned word with release ordering (AWRITE-03): after every earlier Write of the stream,
/// which was placed before (AWRITE-04), and never seen torn. They are a memory image (D-06).
fn atomic_write_request(
    path: &Path,
    qp: &Qp<RsiwDevice>,
    r: &AtomicWriteRequest,
) -> Result<(), RxError> {
    atomic_write_check(r).map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
    if !qp.remote_rights().contains(Rights::REMOTE_WRITE) {
        return Err(refused(AccessTarget::AtomicWrite, Fault::Rights));
    }
    let target = qp
        .device()
        .mem()
        .check(path.pd(), r.sink.stag, Rights::REMOTE_WRITE, r.sink.to, 8)
        .map_err(|f| refused(AccessTarget::AtomicWrite, f))?;
    let data = r.data;
    admit(path, || match target.store_u64(0, data) {
        Ok(()) => Ok(InRequest::AtomicWrite),
        // The region was checked; what is left is the word's address.
        Err(e) if e == EINVAL => Err(refused(AccessTarget::AtomicWrite, Fault::Misaligned)),
        // Pages pinned without write access.
        Err(e) if e == EACCES => Err(refused(AccessTarget::AtomicWrite, Fault::Rights)),
        // Deregistered or invalidated meanwhile.
        Err(_) => Err(refused(AccessTarget::AtomicWrite, Fault::InvalidStag)),
    })
}

/// Executes an RDMA Verify Request within IRD, in stream order, and queues its response
/// (VERIFY-06): the QP's and the region's remote read right (rsiw's "Verifiable" right, see
/// `Documentation/infiniband/rsiw-extensions.rst`), STag, PD and bounds are checked first
/// (VERIFY-03, CMT-04: 0/1/xx). The digest is the CRC32c of the range read from the region
/// itself (VERIFY-02); a Hash Value that differs from it is a mismatch: 0/2/FF and no
/// response (VERIFY-04). Without a Hash Value the response just returns the digest.
fn verify_request(
    path: &Path,
    qp: &Qp<RsiwDevice>,
    r: &VerifyRequest,
    hash: &[u8],
) -> Result<(), RxError> {
    let len = u64::from(r.sink.len);
    if len > 0 && !qp.remote_rights().contains(Rights::REMOTE_READ) {
        return Err(refused(AccessTarget::Verify, Fault::Rights));
    }
    let target = qp
        .device()
        .mem()
        .check(path.pd(), r.sink.stag, Rights::REMOTE_READ, r.sink.to, len)
        .map_err(|f| refused(AccessTarget::Verify, f))?;
    if len > VERIFY_MAX_LEN {
        return Err(RxError::Term(commit_failure(), TermEcho::Ddp));
    }
    // Digested before it is admitted: not under the lock `admit` takes (IRQs off), which an
    // atomic holds for one word only. Still in stream order; a Verify beyond IRD is refused
    // as such (D-08) and only read memory.
    let digest = range_digest(path, &target, len);
    admit(path, || {
        let digest = digest?;
        verify_outcome(hash, &digest).map_err(|c| RxError::Term(c, TermEcho::Ddp))?;
        Ok(InRequest::Verify { digest })
    })
}

/// The Verify digest of the first `len` bytes of `target`, read from the region itself
/// (VERIFY-02); a read that fails (the region went away) is a Verify that cannot be
/// performed (0/2/FF).
fn range_digest(
    path: &Path,
    target: &crate::mem::Placement,
    len: u64,
) -> Result<[u8; VERIFY_DIGEST_LEN], RxError> {
    let mut d = VerifyDigest::new();
    let mut buf = [0u8; 256];
    let mut at = 0u64;
    while at < len {
        let n = (len - at).min(buf.len() as u64) as usize;
        let chunk = buf.get_mut(..n).ok_or(Fail::local())?;
        target
            .read(at, chunk)
            .map_err(|_| RxError::Term(commit_failure(), TermEcho::Ddp))?;
        d.update(path.crc32c(), chunk);
        at += n as u64;
    }
    Ok(d.finish())
}

/// Admits a request within IRD; `exec` runs once if it is.
fn admit(path: &Path, exec: impl FnOnce() -> Result<InRequest, RxError>) -> Result<(), RxError> {
    match path.admit(exec) {
        Ok(()) => Ok(()),
        Err(Refused::Ird(c)) => Err(RxError::Term(c, TermEcho::DdpAndRdma)),
        Err(Refused::Exec(e)) => Err(e),
    }
}

/// The Read Response message of the Read `r` (the whole response; TX cuts it into FPDUs).
pub(crate) fn read_response(r: &InRead) -> TxMessage {
    TxMessage {
        opcode: Opcode::ReadResponse,
        placement: WirePlacement::Tagged {
            stag: r.sink_stag,
            to: r.sink_to,
        },
        body: Body::None,
        payload_len: r.size,
    }
}

/// The response message to the inbound request `req`, whose QN 3 response carries `msn` (the
/// MSN the inbound queue assigned it, [`crate::path::Path::next_inbound`]); `None` for a QN 3
/// response without one. TX and `data_ready` ([`crate::tx::respond_bh`]) both send this; the
/// payload is the Read's source or the Verify's digest ([`response_src`]).
pub(crate) fn response(req: &InRequest, msn: Option<u32>) -> Option<TxMessage> {
    let qn3 = |opcode, body, payload_len| {
        Some(TxMessage {
            opcode,
            placement: WirePlacement::Untagged {
                inv_stag: 0,
                qn: QN_RESPONSE,
                msn: msn?,
                mo: 0,
            },
            body,
            payload_len,
        })
    };
    match *req {
        InRequest::Read(r) => Some(read_response(&r)),
        InRequest::Flush => qn3(Opcode::FlushResponse, Body::None, 0),
        InRequest::AtomicWrite => qn3(Opcode::AtomicWriteResponse, Body::None, 0),
        InRequest::Verify { .. } => {
            qn3(Opcode::VerifyResponse, Body::None, VERIFY_DIGEST_LEN as u32)
        }
        InRequest::Atomic { req_id, orig } => qn3(
            Opcode::AtomicResponse,
            Body::AtomicResponse(AtomicResponse { req_id, orig }),
            0,
        ),
    }
}

/// Where the payload of the response to `req` comes from, for a TX pass: the Read's source
/// (checked per FPDU), the Verify's digest, or nothing.
fn response_src(req: &InRequest) -> Src {
    match *req {
        InRequest::Read(r) => Src::Remote(r.src_stag, r.src_to, None),
        InRequest::Verify { digest } => {
            let mut data = [0u8; MAX_INLINE];
            if let Some(d) = data.get_mut(..VERIFY_DIGEST_LEN) {
                d.copy_from_slice(&digest);
            }
            Src::Inline(data, VERIFY_DIGEST_LEN)
        }
        InRequest::Flush | InRequest::AtomicWrite | InRequest::Atomic { .. } => Src::None,
    }
}

/// Starts the response to the oldest inbound request in `out`, if there is one; returns
/// whether there was. Out of line: rare on the paths that must be short.
#[inline(never)]
pub(crate) fn next_response(path: &Path, out: &mut Outgoing, mulpdu: u16) -> Result<bool, Fatal> {
    let Some(a) = path.next_inbound() else {
        return Ok(false);
    };
    let msg = response(&a.req, a.msn).ok_or(Fatal::local(None))?;
    out.start(msg, response_src(&a.req), Done::Response, mulpdu)
        .map_err(|_| Fatal::local(None))?;
    Ok(true)
}
