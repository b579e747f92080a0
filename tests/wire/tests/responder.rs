// SPDX-License-Identifier: GPL-2.0

//! The ordering and credit rules of the responder and the requester's ORQ
//! (spec-map T-01, T-02, T-04, T-05, T-12, ATOM-04, ATOM-14, ATOM-16, D-08).
//!
//! [`RespQueue`] is the responder's single FIFO of inbound QN 1 requests
//! (Read, Atomic and the commit draft's, sharing IRD); [`OrdQueue`] is the
//! requester's one ordered list of outstanding requests, each tagged with
//! the response it expects. These tests drive both against simple models
//! with arbitrary interleavings: responses in arrival order, every request
//! executed at most once and answered at most once, IRD shared by all
//! kinds and never exceeded, credits freed only by a response that went
//! out; and at the requester, completions in issue order whatever order the
//! responses of different kinds match in.

use proptest::prelude::*;
use rsiw_wire::wire::hdr::{AtomicResponse, Body, DdpHeader, Opcode, Placement, QN_RESPONSE};
use rsiw_wire::wire::rx::Segment;
use rsiw_wire::wire::stream::{OrdBusy, OrdQueue, Refused, Request, RespQueue};
use rsiw_wire::wire::term::TermCode;
use std::collections::VecDeque;

/// What a peer does to the responder, step by step.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A request arrives: a Read (false) or an atomic (true).
    Arrive(bool),
    /// TX takes the next request to answer.
    Next,
    /// TX handed the response's last byte to TCP.
    Responded,
    /// Executing the next arrival fails (a memory fault).
    FailExec,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => any::<bool>().prop_map(Step::Arrive),
        2 => Just(Step::Next),
        2 => Just(Step::Responded),
        1 => Just(Step::FailExec),
    ]
}

/// An inbound request as the responder queues it: its arrival number and
/// kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct In {
    n: u32,
    atomic: bool,
}

const CAP: usize = 16;

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, .. ProptestConfig::default() })]

    /// T-01, T-04, T-05, D-08, ATOM-14: one FIFO for every kind, IRD shared
    /// by all of them, a request beyond IRD refused with 0/2/07 and never
    /// executed, every admitted request executed exactly once and answered
    /// exactly once, in arrival order; a credit comes back only when a
    /// response went out.
    #[test]
    fn t_01_prop_resp_queue_one_fifo_shared_ird(
        ird in 0u16..12,
        steps in prop::collection::vec(step(), 0..200),
    ) {
        let mut q = RespQueue::new(ird, [None::<In>; CAP]);
        let mut executed = vec![0u32; steps.len()];
        let mut model: VecDeque<In> = VecDeque::new();
        let mut sending = 0u16;
        let mut arrivals = 0u32;
        let mut answered: Vec<u32> = Vec::new();
        let mut fail_next = false;
        for s in steps {
            match s {
                Step::Arrive(atomic) => {
                    let n = arrivals;
                    arrivals += 1;
                    let used = model.len() as u16 + sending;
                    let fail = core::mem::take(&mut fail_next);
                    let r = q.admit(|| {
                        executed[n as usize] += 1;
                        if fail { Err(()) } else { Ok(In { n, atomic }) }
                    });
                    if used >= ird {
                        // Beyond IRD: refused before anything ran (T-02: the
                        // atomic did not touch memory).
                        prop_assert_eq!(r, Err(Refused::Ird(TermCode::new(0, 2, 7))));
                        prop_assert_eq!(executed[n as usize], 0);
                    } else if fail {
                        prop_assert_eq!(r, Err(Refused::Exec(())));
                        prop_assert_eq!(executed[n as usize], 1);
                    } else {
                        prop_assert_eq!(r, Ok(()));
                        prop_assert_eq!(executed[n as usize], 1);
                        model.push_back(In { n, atomic });
                    }
                }
                Step::Next => {
                    let got = q.next_to_answer();
                    prop_assert_eq!(got, model.pop_front());
                    if let Some(i) = got {
                        sending += 1;
                        answered.push(i.n);
                    }
                }
                Step::Responded => {
                    q.responded();
                    sending = sending.saturating_sub(1);
                }
                Step::FailExec => fail_next = true,
            }
            prop_assert_eq!(q.queued(), model.len());
            // What the next answer will be, without taking it.
            prop_assert_eq!(q.peek(), model.front().copied());
            prop_assert_eq!(q.used(), model.len() as u16 + sending);
            prop_assert!(q.used() <= ird);
        }
        // Never executed twice, answered in arrival order, each once.
        prop_assert!(executed.iter().all(|&e| e <= 1));
        prop_assert!(answered.windows(2).all(|w| w[0] < w[1]));
    }
}

/// T-04, ATOM-14: with IRD 4, Reads and atomics alternate four at a time
/// without errors; a fifth in flight is refused.
#[test]
fn atom_14_reads_and_atomics_share_ird() {
    let mut q = RespQueue::new(4, [None::<bool>; 8]);
    for round in 0..3 {
        for k in 0..4 {
            let atomic = (k + round) % 2 == 1;
            assert_eq!(q.admit(|| Ok::<_, ()>(atomic)), Ok(()));
        }
        assert_eq!(
            q.admit(|| Ok::<_, ()>(true)),
            Err(Refused::Ird(TermCode::new(0, 2, 7)))
        );
        for k in 0..4 {
            assert_eq!(q.next_to_answer(), Some((k + round) % 2 == 1));
            q.responded();
        }
        assert_eq!(q.used(), 0);
    }
    // An IRD above the queue's capacity is lowered to it.
    let mut q = RespQueue::new(100, vec![None::<u8>; 2]);
    assert!(q.admit(|| Ok::<_, ()>(1)).is_ok());
    assert!(q.admit(|| Ok::<_, ()>(2)).is_ok());
    assert!(matches!(q.admit(|| Ok::<_, ()>(3)), Err(Refused::Ird(_))));
    // `responded` without a response being sent frees nothing.
    q.responded();
    assert_eq!(q.used(), 2);
}

/// The response a QN 3 message carries, for [`OrdQueue::on_response_with`].
fn response(opcode: Opcode, msn: u32, req_id: u32) -> Segment {
    let body = if opcode == Opcode::AtomicResponse {
        Body::AtomicResponse(AtomicResponse { req_id, orig: 7 })
    } else {
        Body::None
    };
    Segment {
        hdr: DdpHeader {
            opcode,
            last: true,
            placement: Placement::Untagged {
                inv_stag: 0,
                qn: QN_RESPONSE,
                msn,
                mo: 0,
            },
        },
        ulpdu_len: 0,
        body,
        payload_len: 0,
    }
}

fn expected_response(r: &Request) -> Opcode {
    match r {
        Request::Read { .. } => Opcode::ReadResponse,
        Request::Atomic { .. } => Opcode::AtomicResponse,
        Request::Flush => Opcode::FlushResponse,
        Request::Verify => Opcode::VerifyResponse,
        Request::AtomicWrite => Opcode::AtomicWriteResponse,
        Request::Local => unreachable!("a Local expects no response"),
    }
}

fn request() -> impl Strategy<Value = u8> {
    0u8..5
}

fn make(kind: u8, n: u32) -> Request {
    match kind {
        0 => Request::Read {
            sink_stag: n,
            sink_to: 0,
            size: 1,
        },
        1 => Request::Atomic { req_id: n },
        2 => Request::Flush,
        3 => Request::Verify,
        _ => Request::AtomicWrite,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, .. ProptestConfig::default() })]

    /// T-12, ATOM-06, ATOM-16 rule 7: one ordered list of outstanding
    /// requests tagged with their response kind. A responder answers in
    /// request order (as rsiw's FIFO does); the requester matches Read
    /// Responses and QN 3 responses separately and completes strictly in
    /// issue order, each request exactly once with its own local side; a
    /// response of the wrong kind, or with nothing outstanding, is 0/2/06.
    #[test]
    fn t_12_prop_orq_completes_in_issue_order(
        kinds in prop::collection::vec(request(), 1..40),
        ord in 1u16..8,
        wrong in any::<prop::sample::Index>(),
    ) {
        let mut q: OrdQueue<8, u32> = OrdQueue::new(ord);
        let mut issued: VecDeque<(Request, u32)> = VecDeque::new();
        let mut completed: Vec<u32> = Vec::new();
        let mut msn3 = 1u32;
        let mut next = 0usize;
        let wrong_at = wrong.index(kinds.len());
        while next < kinds.len() || !issued.is_empty() {
            // Issue as many as ORD allows.
            while next < kinds.len() {
                let r = make(kinds[next], next as u32);
                match q.issue_with(r, next as u32) {
                    Ok(()) => {
                        issued.push_back((r, next as u32));
                        next += 1;
                    }
                    Err(OrdBusy::NoCredit) | Err(OrdBusy::RingFull) => break,
                }
            }
            prop_assert!(q.inflight() <= ord);
            // The peer answers the oldest outstanding one.
            let (r, id) = issued.pop_front().unwrap();
            if id as usize == wrong_at && !matches!(r, Request::Read { .. }) {
                // A response of another kind is refused and changes nothing.
                let other = if expected_response(&r) == Opcode::FlushResponse {
                    Opcode::VerifyResponse
                } else {
                    Opcode::FlushResponse
                };
                prop_assert_eq!(
                    q.on_response_with(&response(other, msn3, 0)).map(|a| a.local),
                    Err(TermCode::new(0, 2, 6))
                );
            }
            match r {
                Request::Read { sink_stag, .. } => {
                    prop_assert_eq!(q.on_read_response(sink_stag, 0, 1, true), Ok(true));
                }
                Request::Atomic { req_id } => {
                    let a = q.on_response_with(&response(Opcode::AtomicResponse, msn3, req_id));
                    prop_assert_eq!(a.map(|a| (a.local, a.done)), Ok((id, true)));
                    msn3 += 1;
                }
                _ => {
                    let a = q.on_response_with(&response(expected_response(&r), msn3, 0));
                    prop_assert_eq!(a.map(|a| (a.local, a.done)), Ok((id, true)));
                    msn3 += 1;
                }
            }
            while let Some(a) = q.pop_completed_with() {
                prop_assert!(a.done);
                completed.push(a.local);
            }
        }
        // Every request completed once, in issue order; then nothing is
        // outstanding and any response is unexpected.
        prop_assert_eq!(completed, (0..kinds.len() as u32).collect::<Vec<_>>());
        prop_assert!(q.is_empty());
        prop_assert_eq!(
            q.on_response(&response(Opcode::AtomicResponse, msn3, 0)),
            Err(TermCode::new(0, 2, 6))
        );
    }
}

/// One step of the T-01 model: the requester posts a work request (a
/// request when `Some(kind)`, else one that expects no response), the
/// transport takes the oldest message, TX finishes the oldest message the
/// transport took (completes it, or marks its Local done: TX does so after
/// handing a batch to TCP, so a response can come first), or the peer
/// answers the oldest request it received.
#[derive(Clone, Copy, Debug)]
enum SqStep {
    Post(Option<u8>),
    Sent,
    Finish,
    Answer,
}

fn sq_step() -> impl Strategy<Value = SqStep> {
    prop_oneof![
        (prop::option::of(request())).prop_map(SqStep::Post),
        Just(SqStep::Sent),
        Just(SqStep::Finish),
        Just(SqStep::Answer),
    ]
}

/// A message of the T-01 model not yet with the transport.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Msg {
    /// Completes when sent (nothing was in the ORQ when it was posted).
    Direct(u32),
    /// In the ORQ as a Local.
    Local,
    /// A request in the ORQ.
    Req(Request),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, .. ProptestConfig::default() })]

    /// T-01: the send queue completes in post order, whatever the order in
    /// which messages reach the transport and responses arrive, as rsiw's
    /// requester uses the ORQ: a work request that expects no response
    /// completes when its message is with the transport if the ORQ was
    /// empty when it was posted, else it joins the ORQ as a Local (no ORD
    /// credit, matches no response) and completes after everything before
    /// it. Before a request is issued, the messages not yet finished that
    /// would complete on their own join the ORQ as Locals first (its
    /// response may come before TX finishes them). Every work request
    /// completes exactly once; the fence (T-03) sees requests only.
    #[test]
    fn t_01_prop_send_queue_completes_in_post_order(
        steps in prop::collection::vec(sq_step(), 1..120),
        ord in 1u16..6,
    ) {
        let mut q: OrdQueue<8, u32> = OrdQueue::new(ord);
        let mut completed: Vec<u32> = Vec::new();
        let mut unsent: VecDeque<Msg> = VecDeque::new();
        // Messages with the transport that TX did not finish yet.
        let mut unfinished: VecDeque<Msg> = VecDeque::new();
        // Requests the peer received and has not answered.
        let mut received: VecDeque<Request> = VecDeque::new();
        let mut posted = 0u32;
        let mut msn3 = 1u32;
        let mut run = |steps: &mut dyn Iterator<Item = SqStep>| -> Result<(), TestCaseError> {
            for s in steps {
                match s {
                    SqStep::Post(None) => {
                        if q.is_empty() {
                            unsent.push_back(Msg::Direct(posted));
                        } else if q.room() > 0 {
                            prop_assert_eq!(q.issue_with(Request::Local, posted), Ok(()));
                            unsent.push_back(Msg::Local);
                        } else {
                            // The work request waits for room; the model drops it.
                            continue;
                        }
                        posted += 1;
                    }
                    SqStep::Post(Some(kind)) => {
                        let r = make(kind, posted);
                        let direct = (unfinished.iter().chain(unsent.iter()))
                            .filter(|m| matches!(m, Msg::Direct(_)))
                            .count();
                        if q.room() <= direct || (q.inflight() >= ord) {
                            continue;
                        }
                        for m in unfinished.iter_mut().chain(unsent.iter_mut()) {
                            if let Msg::Direct(id) = *m {
                                prop_assert_eq!(q.issue_with(Request::Local, id), Ok(()));
                                *m = Msg::Local;
                            }
                        }
                        prop_assert_eq!(q.issue_with(r, posted), Ok(()));
                        unsent.push_back(Msg::Req(r));
                        posted += 1;
                    }
                    SqStep::Sent => {
                        if let Some(m) = unsent.pop_front() {
                            if let Msg::Req(r) = m {
                                received.push_back(r);
                            }
                            unfinished.push_back(m);
                        }
                    }
                    SqStep::Finish => match unfinished.pop_front() {
                        Some(Msg::Direct(id)) => completed.push(id),
                        Some(Msg::Local) => {
                            let marked = q.local_done(|_| ());
                            prop_assert!(marked);
                        }
                        Some(Msg::Req(_)) | None => {}
                    },
                    SqStep::Answer => {
                        let Some(r) = received.pop_front() else {
                            if q.inflight() == 0 {
                                // Only Locals (or nothing) outstanding: no response is valid.
                                prop_assert_eq!(
                                    q.on_response(&response(Opcode::FlushResponse, msn3, 0)),
                                    Err(TermCode::new(0, 2, 6))
                                );
                                prop_assert!(q.on_read_response(0, 0, 1, true).is_err());
                            }
                            continue;
                        };
                        match r {
                            Request::Read { sink_stag, .. } => {
                                prop_assert_eq!(q.on_read_response(sink_stag, 0, 1, true), Ok(true));
                            }
                            Request::Atomic { req_id } => {
                                let a = response(Opcode::AtomicResponse, msn3, req_id);
                                prop_assert_eq!(q.on_response(&a), Ok(true));
                                msn3 += 1;
                            }
                            _ => {
                                let a = response(expected_response(&r), msn3, 0);
                                prop_assert_eq!(q.on_response(&a), Ok(true));
                                msn3 += 1;
                            }
                        }
                    }
                }
                prop_assert!(q.inflight() <= ord);
                let mut c = q;
                let mut reqs = false;
                while let Some(a) = c.pop_front() {
                    reqs |= a.req != Request::Local;
                }
                prop_assert_eq!(q.has_requests(), reqs);
                while let Some(a) = q.pop_completed_with() {
                    completed.push(a.local);
                }
            }
            Ok(())
        };
        run(&mut steps.into_iter())?;
        // Everything is sent and answered.
        let rest = core::iter::repeat_n([SqStep::Sent, SqStep::Finish, SqStep::Answer], 130)
            .flatten();
        run(&mut rest.into_iter())?;
        prop_assert_eq!(completed, (0..posted).collect::<Vec<_>>());
        prop_assert!(q.is_empty());
    }
}

/// T-01: a Local takes no ORD credit, is skipped by response matching, and
/// holds back no request before it; with a ring full of Locals nothing more
/// can be issued (the requester waits for the ring).
#[test]
fn t_01_local_takes_no_credit() {
    let mut q: OrdQueue<3, u8> = OrdQueue::new(1);
    q.issue_with(Request::Atomic { req_id: 5 }, 1).unwrap();
    assert_eq!(q.issue_with(Request::Flush, 9), Err(OrdBusy::NoCredit));
    q.issue_with(Request::Local, 2).unwrap();
    assert_eq!(q.inflight(), 1);
    assert!(q.has_requests());
    // Marking the Local done does not complete it before the Atomic.
    assert!(q.local_done(|l| *l += 10));
    assert_eq!(q.pop_completed_with(), None);
    let a = q
        .on_response_with(&response(Opcode::AtomicResponse, 1, 5))
        .unwrap();
    assert_eq!(a.local, 1);
    assert_eq!(q.pop_completed_with().map(|a| a.local), Some(1));
    assert!(!q.has_requests());
    assert_eq!(
        q.pop_completed_with().map(|a| (a.req, a.local)),
        Some((Request::Local, 12))
    );
    assert!(!q.local_done(|_| ()));
    // A ring of Locals not done: full, and a pop does not give back credit.
    for i in 0..3 {
        q.issue_with(Request::Local, i).unwrap();
    }
    assert_eq!(q.room(), 0);
    assert_eq!(q.issue_with(Request::Local, 4), Err(OrdBusy::RingFull));
    assert_eq!(q.pop_front().map(|a| a.done), Some(false));
    assert_eq!(q.inflight(), 0);
}

/// ATOM-13: an Atomic Response with nothing outstanding, or with a Request
/// Identifier that is not the one sent, is 0/2/06; a Read outstanding does
/// not make a QN 3 response valid.
#[test]
fn atom_13_unexpected_atomic_response() {
    let mut q: OrdQueue<4, u8> = OrdQueue::new(4);
    let atomic = |id| response(Opcode::AtomicResponse, 1, id);
    assert_eq!(q.on_response(&atomic(0)), Err(TermCode::new(0, 2, 6)));
    q.issue_with(
        Request::Read {
            sink_stag: 1,
            sink_to: 0,
            size: 8,
        },
        1,
    )
    .unwrap();
    assert_eq!(q.on_response(&atomic(0)), Err(TermCode::new(0, 2, 6)));
    q.issue_with(Request::Atomic { req_id: 9 }, 2).unwrap();
    assert_eq!(q.on_response(&atomic(8)), Err(TermCode::new(0, 2, 6)));
    let a = q.on_response_with(&atomic(9)).unwrap();
    assert_eq!((a.local, a.done), (2, true));
    // The atomic is answered but waits for the older Read to complete.
    assert_eq!(q.pop_completed_with(), None);
    assert_eq!(q.on_read_response(1, 0, 8, true), Ok(true));
    assert_eq!(q.pop_completed_with().map(|a| a.local), Some(1));
    assert_eq!(q.pop_completed_with().map(|a| a.local), Some(2));
    // Flushing pops outstanding requests in order, answered or not.
    q.issue_with(Request::Atomic { req_id: 10 }, 3).unwrap();
    q.issue_with(Request::Flush, 4).unwrap();
    assert_eq!(q.inflight(), 2);
    assert_eq!(q.pop_front().map(|a| (a.local, a.done)), Some((3, false)));
    assert_eq!(q.pop_front().map(|a| (a.local, a.done)), Some((4, false)));
    assert_eq!(q.inflight(), 0);
    assert!(q.is_empty());
}

// The commit extensions at the responder (draft-talpey-rdma-commit-02):
// a model responder driven by the receive parser, as the driver is, that
// executes each request when it is Delivered and queues its response in the
// one FIFO. The stream is Writes, Flushes, Atomic Writes and Verifies,
// encoded back to back and cut into arbitrary chunks, or fed whole (one TCP
// segment). Memory is checked against an independent model of the ops.

#[path = "common/mod.rs"]
mod common;

use rsiw_wire::wire::commit::{
    atomic_write_check, flush_plan, verify_outcome, writeback_span, FlushScope, VerifyDigest,
    VERIFY_DIGEST_LEN,
};
use rsiw_wire::wire::crc::SoftCrc32c;
use rsiw_wire::wire::hdr::{
    AtomicWriteRequest, FlushRequest, SinkRange, VerifyRequest, FLUSH_P, FLUSH_R, FLUSH_V,
    QN_READ_REQ,
};
use rsiw_wire::wire::term::RdmapCode;

/// The one region of the model: STag, base TO and length.
const STAG: u32 = 0x100;
const BASE: u64 = 0x1000;
const MEM: usize = 256;

/// One message the peer sends.
#[derive(Clone, Debug)]
enum Op {
    /// RDMA Write of `len` bytes of `fill` at region offset `off`.
    Write { off: u8, len: u8, fill: u8 },
    /// RDMA Flush with these flags over `[off, off + len)`.
    Flush { flags: u32, off: u8, len: u8 },
    /// Atomic Write at `off` with Data Sink Length `len`.
    AWrite { off: u8, len: u32, data: [u8; 8] },
    /// RDMA Verify of `[off, off + len)`: no hash, the right one, or a
    /// wrong one.
    Verify { off: u8, len: u8, hash: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let flags = prop_oneof![
        6 => Just(FLUSH_V),
        2 => Just(FLUSH_V | FLUSH_R),
        1 => Just(0u32),
        1 => Just(FLUSH_P | FLUSH_V),
        1 => Just(0x08u32 | FLUSH_V),
    ];
    prop_oneof![
        6 => (0u8..200, 1u8..56, any::<u8>()).prop_map(|(off, len, fill)| Op::Write { off, len, fill }),
        3 => (flags, 0u8..200, 0u8..56).prop_map(|(flags, off, len)| Op::Flush { flags, off, len }),
        3 => (0u8..31, prop_oneof![8 => Just(8u32), 1 => Just(4u32), 1 => Just(16u32)], any::<[u8; 8]>())
            .prop_map(|(w, len, data)| Op::AWrite { off: if w == 30 { 4 } else { w * 8 }, len, data }),
        2 => (0u8..200, 0u8..56, 0u8..3).prop_map(|(off, len, hash)| Op::Verify { off, len, hash }),
    ]
}

/// The CRC32c digest of `b`.
fn digest(b: &[u8]) -> [u8; VERIFY_DIGEST_LEN] {
    let mut d = VerifyDigest::new();
    d.update(&SoftCrc32c, b);
    d.finish()
}

/// What the peer's stream should do, from the ops alone: the memory after
/// each op, and the first op that fails with its Terminate code.
fn model(ops: &[Op]) -> (Vec<Vec<u8>>, Option<(usize, TermCode)>) {
    let mut mem = vec![0u8; MEM];
    let mut after = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        let err = match *o {
            Op::Write { off, len, fill } => {
                mem[usize::from(off)..usize::from(off) + usize::from(len)].fill(fill);
                None
            }
            Op::Flush { flags, .. } => {
                // D-05; the region has only the global-visibility right (P:
                // 0/1/02, FLUSH-04).
                if flags & !7 != 0 || flags & 3 == 0 {
                    Some(TermCode::new(0, 2, 0xff))
                } else if flags & FLUSH_P != 0 {
                    Some(TermCode::new(0, 1, 2))
                } else {
                    None
                }
            }
            Op::AWrite { off, len, data } => {
                if len != 8 || off % 8 != 0 {
                    Some(TermCode::new(0, 2, 7))
                } else {
                    mem[usize::from(off)..usize::from(off) + 8].copy_from_slice(&data);
                    None
                }
            }
            Op::Verify { off, len, hash } => {
                let d = digest(&mem[usize::from(off)..usize::from(off) + usize::from(len)]);
                // The wrong hash is 4 zero bytes: the digest of nothing.
                (hash == 2 && d != [0; 4]).then(|| TermCode::new(0, 2, 0xff))
            }
        };
        if let Some(c) = err {
            return (after, Some((i, c)));
        }
        after.push(mem.clone());
    }
    (after, None)
}

/// The stream the peer sends for `ops`, with the Verify hashes computed
/// from `after` (the model memory before each op).
fn stream(ops: &[Op]) -> Vec<u8> {
    let mut mem = vec![0u8; MEM];
    let mut out = Vec::new();
    let mut msn = 1u32;
    let req = |msn: u32| Placement::Untagged {
        inv_stag: 0,
        qn: QN_READ_REQ,
        msn,
        mo: 0,
    };
    for o in ops {
        let (m, payload) = match *o {
            Op::Write { off, len, fill } => {
                mem[usize::from(off)..usize::from(off) + usize::from(len)].fill(fill);
                let p = Placement::Tagged {
                    stag: STAG,
                    to: BASE + u64::from(off),
                };
                (
                    common::msg(Opcode::Write, p, Body::None, u32::from(len)),
                    vec![fill; usize::from(len)],
                )
            }
            Op::Flush { flags, off, len } => {
                let b = Body::FlushRequest(FlushRequest {
                    sink: SinkRange {
                        stag: STAG,
                        len: u32::from(len),
                        to: BASE + u64::from(off),
                    },
                    flags,
                });
                msn += 1;
                (
                    common::msg(Opcode::FlushRequest, req(msn - 1), b, 0),
                    Vec::new(),
                )
            }
            Op::AWrite { off, len, data } => {
                if len == 8 && off % 8 == 0 {
                    mem[usize::from(off)..usize::from(off) + 8].copy_from_slice(&data);
                }
                let b = Body::AtomicWriteRequest(AtomicWriteRequest {
                    sink: SinkRange {
                        stag: STAG,
                        len,
                        to: BASE + u64::from(off),
                    },
                    data,
                });
                msn += 1;
                (
                    common::msg(Opcode::AtomicWriteRequest, req(msn - 1), b, 0),
                    Vec::new(),
                )
            }
            Op::Verify { off, len, hash } => {
                let d = digest(&mem[usize::from(off)..usize::from(off) + usize::from(len)]);
                let h = match hash {
                    0 => Vec::new(),
                    1 => d.to_vec(),
                    _ => vec![0; 4],
                };
                let b = Body::VerifyRequest(VerifyRequest {
                    sink: SinkRange {
                        stag: STAG,
                        len: u32::from(len),
                        to: BASE + u64::from(off),
                    },
                });
                msn += 1;
                (
                    common::msg(Opcode::VerifyRequest, req(msn - 1), b, h.len() as u32),
                    h,
                )
            }
        };
        out.extend(common::encode(m, &payload, 1460, true));
    }
    out
}

/// The responder under test: wire::commit's decisions, memory touched only
/// when a request is Delivered (at its End), responses queued in the FIFO.
/// Returns the responses' opcodes in queue order and the Terminate, if any;
/// checks at every Flush that the memory holds every earlier op.
fn respond(
    ops: &[Op],
    bytes: &[u8],
    chunks: &[usize],
    after: &[Vec<u8>],
) -> Result<(Vec<Opcode>, Option<TermCode>), TestCaseError> {
    let (evs, err) = common::parse_chunked(common::cfg_all(true), bytes, chunks);
    prop_assert!(
        err.is_none(),
        "the parser refused a well-formed stream: {:?}",
        err
    );
    let mut mem = vec![0u8; MEM];
    let mut q = RespQueue::new(64, [None::<Opcode>; 64]);
    let mut cur: Option<Segment> = None;
    let mut data: Vec<u8> = Vec::new();
    let mut delivered = 0usize;
    for e in evs {
        match e {
            Ev::Seg(s) => {
                cur = Some(s);
                data.clear();
            }
            Ev::Data(d) => data.extend_from_slice(&d),
            Ev::End => {
                let s = cur.take().expect("End without Segment");
                let n = delivered;
                delivered += 1;
                match s.body {
                    Body::None if s.hdr.opcode == Opcode::Write => {
                        let Placement::Tagged { to, .. } = s.hdr.placement else {
                            unreachable!()
                        };
                        let o = (to - BASE) as usize;
                        mem[o..o + data.len()].copy_from_slice(&data);
                    }
                    Body::FlushRequest(r) => {
                        let plan = match flush_plan(&r) {
                            Ok(p) => p,
                            Err(c) => return Ok((answered(&mut q), Some(c))),
                        };
                        if plan.persistent {
                            return Ok((answered(&mut q), Some(TermCode::new(0, 1, 2))));
                        }
                        // FLUSH-03: everything before it is placed.
                        prop_assert_eq!(
                            &mem,
                            &after[n],
                            "Flush {} sees memory without an earlier op",
                            n
                        );
                        let _ = plan.scope;
                        prop_assert_eq!(q.admit(|| Ok::<_, ()>(Opcode::FlushResponse)), Ok(()));
                    }
                    Body::AtomicWriteRequest(r) => {
                        if let Err(c) = atomic_write_check(&r) {
                            return Ok((answered(&mut q), Some(c)));
                        }
                        let o = (r.sink.to - BASE) as usize;
                        if !o.is_multiple_of(8) {
                            return Ok((answered(&mut q), Some(TermCode::new(0, 2, 7))));
                        }
                        mem[o..o + 8].copy_from_slice(&r.data);
                        prop_assert_eq!(
                            q.admit(|| Ok::<_, ()>(Opcode::AtomicWriteResponse)),
                            Ok(())
                        );
                    }
                    Body::VerifyRequest(r) => {
                        let o = (r.sink.to - BASE) as usize;
                        let d = digest(&mem[o..o + r.sink.len as usize]);
                        if let Err(c) = verify_outcome(&data, &d) {
                            return Ok((answered(&mut q), Some(c)));
                        }
                        prop_assert_eq!(q.admit(|| Ok::<_, ()>(Opcode::VerifyResponse)), Ok(()));
                    }
                    b => prop_assert!(false, "unexpected body {:?}", b),
                }
                let _ = &ops[n];
            }
        }
    }
    Ok((answered(&mut q), None))
}

/// Takes every queued response, in order.
fn answered(q: &mut RespQueue<Opcode, [Option<Opcode>; 64]>) -> Vec<Opcode> {
    let mut v = Vec::new();
    while let Some(o) = q.next_to_answer() {
        v.push(o);
        q.responded();
    }
    v
}

use common::Ev;

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, .. ProptestConfig::default() })]

    /// FLUSH-03, FLUSH-05, AWRITE-04, VERIFY-06, T-01, T-02: Writes, Flushes,
    /// Atomic Writes and Verifies back to back, whole in one TCP segment or
    /// cut anywhere: each request runs when Delivered, after every earlier
    /// message was placed (a Flush sees all of them in memory), responses
    /// queue in arrival order, and the first bad request ends the stream with
    /// its code (D-02, D-05: flags 0/2/FF, persistence on DRAM 0/1/02, Atomic
    /// Write length or alignment 0/2/07, Verify mismatch 0/2/FF) with nothing
    /// after it executed.
    #[test]
    fn flush_03_prop_commit_stream_in_order(
        ops in prop::collection::vec(op(), 1..24),
        chunks in prop::collection::vec(1usize..200, 0..6),
    ) {
        let (after, fail) = model(&ops);
        let bytes = stream(&ops);
        let (resp, term) = respond(&ops, &bytes, &chunks, &after)?;
        let upto = fail.map_or(ops.len(), |(i, _)| i);
        let want: Vec<Opcode> = ops[..upto]
            .iter()
            .filter_map(|o| match o {
                Op::Write { .. } => None,
                Op::Flush { .. } => Some(Opcode::FlushResponse),
                Op::AWrite { .. } => Some(Opcode::AtomicWriteResponse),
                Op::Verify { .. } => Some(Opcode::VerifyResponse),
            })
            .collect();
        prop_assert_eq!(resp, want);
        prop_assert_eq!(term, fail.map(|(_, c)| c));
    }
}

/// FLUSH-02, D-05: the flags; R ignores Length and TO.
#[test]
fn flush_02_flags_and_scope() {
    let r = |flags, len, to| FlushRequest {
        sink: SinkRange { stag: 1, len, to },
        flags,
    };
    let ff = TermCode::operation(RdmapCode::Unspecified);
    assert_eq!(flush_plan(&r(0, 8, 0)), Err(ff));
    assert_eq!(flush_plan(&r(FLUSH_R, 8, 0)), Err(ff));
    assert_eq!(flush_plan(&r(FLUSH_V | 0x80, 8, 0)), Err(ff));
    assert_eq!(flush_plan(&r(FLUSH_V | 0x8000_0000, 8, 0)), Err(ff));
    let p = flush_plan(&r(FLUSH_V, 8, 0x40)).unwrap();
    assert!(p.global && !p.persistent);
    assert_eq!(p.scope, FlushScope::Range { to: 0x40, len: 8 });
    let p = flush_plan(&r(FLUSH_P | FLUSH_R, u32::MAX, u64::MAX)).unwrap();
    assert!(p.persistent && !p.global);
    assert_eq!(p.scope, FlushScope::Region);
}

/// FLUSH-08: a persistent Flush writes back the whole cache lines covering
/// the bytes, nothing for zero bytes, never overflows.
#[test]
fn flush_08_writeback_span_whole_lines() {
    assert_eq!(writeback_span(0, 1, 64), Some((0, 64)));
    assert_eq!(writeback_span(63, 2, 64), Some((0, 128)));
    assert_eq!(writeback_span(64, 64, 64), Some((64, 64)));
    assert_eq!(writeback_span(100, 0, 64), Some((100, 0)));
    assert_eq!(writeback_span(0x1001, 0x1000, 64), Some((0x1000, 0x1040)));
    assert_eq!(writeback_span(u64::MAX - 3, 1, 64), None);
    assert_eq!(writeback_span(0, 1, 48), None);
}

/// AWRITE-01: Data Sink Length must be 8 (0/2/07).
#[test]
fn awrite_01_length_must_be_8() {
    let r = |len| AtomicWriteRequest {
        sink: SinkRange {
            stag: 1,
            len,
            to: 0,
        },
        data: [0; 8],
    };
    assert_eq!(atomic_write_check(&r(8)), Ok(()));
    for len in [0, 4, 7, 9, 16, u32::MAX] {
        assert_eq!(atomic_write_check(&r(len)), Err(TermCode::new(0, 2, 7)));
    }
}

/// VERIFY-04: no hash or the right one is answered; any other (a wrong
/// value, another length) is 0/2/FF.
#[test]
fn verify_04_mismatch_terminates() {
    // The CRC-32C check value, in the MPA trailer's byte order.
    let d = digest(b"123456789");
    assert_eq!(d, 0xe306_9283u32.to_le_bytes());
    let ff = Err(TermCode::operation(RdmapCode::Unspecified));
    assert_eq!(verify_outcome(&[], &d), Ok(()));
    assert_eq!(verify_outcome(&d, &d), Ok(()));
    let mut bad = d;
    bad[3] ^= 1;
    assert_eq!(verify_outcome(&bad, &d), ff);
    assert_eq!(verify_outcome(&d[..3], &d), ff);
    assert_eq!(verify_outcome(&[d[0], d[1], d[2], d[3], 0], &d), ff);
}
