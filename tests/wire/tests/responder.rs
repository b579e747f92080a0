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
