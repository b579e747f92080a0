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
//! [`next_response`], and the response's end frees its credit ([`Done::Response`], T-05).

use crate::{
    device::RsiwDevice,
    msg::{
        Done,
        Fatal,
        Outgoing,
        Src, //
    },
    path::{
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
            fetch_add_masked,
            Fault,
            Target as AccessTarget, //
        },
        hdr::{
            AtomicRequest,
            AtomicResponse,
            Body,
            Opcode,
            Placement as WirePlacement,
            ReadRequest,
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
};
use kernel::{
    prelude::*,
    rdma::qp::Qp, //
};

/// An inbound request was Delivered: checks, executes and queues it. `body` is its fixed
/// RDMAP header. Any error is the peer's: the Terminate it gets.
pub(crate) fn request(path: &Path, qp: &Qp<RsiwDevice>, body: &Body) -> Result<(), RxError> {
    match body {
        Body::ReadRequest(r) => read_request(path, qp, r),
        Body::AtomicRequest(r) => atomic_request(path, qp, r),
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

/// Admits a request within IRD; `exec` runs once if it is.
fn admit(path: &Path, exec: impl FnOnce() -> Result<InRequest, RxError>) -> Result<(), RxError> {
    match path.admit(exec) {
        Ok(()) => Ok(()),
        Err(Refused::Ird(c)) => Err(RxError::Term(c, TermEcho::DdpAndRdma)),
        Err(Refused::Exec(e)) => Err(e),
    }
}

/// Starts the response to the oldest inbound request in `out`, if there is one; returns
/// whether there was. Out of line: rare on the paths that must be short.
#[inline(never)]
pub(crate) fn next_response(path: &Path, out: &mut Outgoing, mulpdu: u16) -> Result<bool, Fatal> {
    let Some(req) = path.next_inbound() else {
        return Ok(false);
    };
    let (msg, src) = match req {
        InRequest::Atomic { req_id, orig } => {
            let msn = out.take_msn(QN_RESPONSE).ok_or(Fatal::local(None))?;
            (
                TxMessage {
                    opcode: Opcode::AtomicResponse,
                    placement: WirePlacement::Untagged {
                        inv_stag: 0,
                        qn: QN_RESPONSE,
                        msn,
                        mo: 0,
                    },
                    body: Body::AtomicResponse(AtomicResponse { req_id, orig }),
                    payload_len: 0,
                },
                Src::None,
            )
        }
        InRequest::Read(r) => (
            TxMessage {
                opcode: Opcode::ReadResponse,
                placement: WirePlacement::Tagged {
                    stag: r.sink_stag,
                    to: r.sink_to,
                },
                body: Body::None,
                payload_len: r.size,
            },
            Src::Remote(r.src_stag, r.src_to),
        ),
    };
    out.start(msg, src, Done::Response, mulpdu)
        .map_err(|_| Fatal::local(None))?;
    Ok(true)
}
