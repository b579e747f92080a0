// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the RFC 7306 request queues against models: the responder's
//! inbound queue (`RespQueue`) and the requester's ORQ (`OrdQueue`).
//!
//! Input: byte 0 picks the queue (bit 0), bytes 1-2 the IRD or ORD, byte 3
//! the responder's ring length (0 to 40); the rest are steps, one byte each
//! (a step may take the next bytes as its operands).
//!
//! Responder (T-01, T-02, T-04, T-05, D-08): a request beyond IRD or beyond
//! the ring is refused with 0/2/07 and never executed; every admitted
//! request is executed exactly once and answered exactly once, in arrival
//! order; credits in use are the queued requests plus the responses being
//! sent, never above IRD (lowered to the ring), and come back only when a
//! response went out; once everything is answered and sent, all are back.
//!
//! Commit decisions (D-02, D-05, FLUSH-02, FLUSH-08, AWRITE-01, VERIFY-04),
//! on every input as well: its first 20 bytes as a Flush Request, the first
//! 24 as an Atomic Write Request, the first 16 as the operands of a
//! writeback span, and the rest split in two as a Hash Value and a digest;
//! each decision must match a model, and a span must be whole lines that
//! cover exactly the range's lines.
//!
//! Requester (T-01, T-12, RDMAP-05, ATOM-06, D-02): issue, Read Responses
//! and QN 3 responses of any kind, right or wrong, Locals, completions and
//! flushes match a model of the documented rules step by step; completions
//! come out in issue order, each once; ORD is never exceeded.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_wire::wire::commit::{
    atomic_write_check, flush_plan, verify_outcome, writeback_span, FlushScope,
};
use rsiw_wire::wire::hdr::{
    AtomicResponse, AtomicWriteRequest, Body, DdpHeader, FlushRequest, Opcode, Placement,
    ATOMIC_WRITE_REQ_LEN, FLUSH_REQ_LEN, QN_RESPONSE,
};
use rsiw_wire::wire::rx::Segment;
use rsiw_wire::wire::stream::{OrdBusy, OrdQueue, Refused, Request, RespQueue};
use rsiw_wire::wire::term::{DdpTaggedCode, RdmapCode, TermCode};
use std::collections::VecDeque;

/// An inbound request as the responder queues it: its arrival number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct In {
    n: u32,
    kind: u8,
}

fn responder(ird: u16, cap: usize, steps: &[u8]) {
    let mut q = RespQueue::new(ird, vec![None::<In>; cap]);
    let limit = ird.min(u16::try_from(cap).unwrap_or(u16::MAX));
    let mut model: VecDeque<In> = VecDeque::new();
    let mut sending = 0u16;
    let mut arrivals = 0u32;
    let mut executed = vec![0u8; steps.len()];
    let mut last_answered: Option<u32> = None;
    let beyond = Err(Refused::Ird(TermCode::operation(
        RdmapCode::CatastrophicStream,
    )));
    for &b in steps {
        match b % 8 {
            // A request arrives; executing it succeeds (0-2) or fails (3).
            op @ 0..=3 => {
                let n = arrivals;
                arrivals += 1;
                let v = In { n, kind: b >> 3 };
                let fail = op == 3;
                let room =
                    model.len() < cap && model.len() + usize::from(sending) < usize::from(limit);
                let r = q.admit(|| {
                    executed[n as usize] += 1;
                    if fail {
                        Err(n)
                    } else {
                        Ok(v)
                    }
                });
                if !room {
                    assert_eq!(r, beyond, "beyond IRD must be 0/2/07");
                    assert_eq!(executed[n as usize], 0, "executed beyond IRD");
                } else if fail {
                    assert_eq!(r, Err(Refused::Exec(n)));
                    assert_eq!(executed[n as usize], 1);
                } else {
                    assert_eq!(r, Ok(()));
                    assert_eq!(executed[n as usize], 1);
                    model.push_back(v);
                }
            }
            // TX takes the next request to answer.
            4 => {
                let got = q.next_to_answer();
                assert_eq!(got, model.pop_front(), "answer out of arrival order");
                if let Some(i) = got {
                    sending += 1;
                    assert!(last_answered.is_none_or(|l| l < i.n), "answered twice");
                    last_answered = Some(i.n);
                }
            }
            // A response went out (whether or not one was being sent).
            5 => {
                q.responded();
                sending = sending.saturating_sub(1);
            }
            // The stream goes down (rarely), else TX answers and sends one.
            6 if b == 6 => {
                q.clear();
                model.clear();
                sending = 0;
            }
            _ => {
                let got = q.next_to_answer();
                assert_eq!(got, model.pop_front());
                if let Some(i) = got {
                    assert!(last_answered.is_none_or(|l| l < i.n));
                    last_answered = Some(i.n);
                    q.responded();
                }
            }
        }
        assert_eq!(q.queued(), model.len());
        assert_eq!(usize::from(q.used()), model.len() + usize::from(sending));
        assert!(q.used() <= limit, "IRD exceeded");
    }
    // Everything answered and sent: every credit is back.
    while let Some(i) = q.next_to_answer() {
        assert_eq!(Some(i), model.pop_front());
        sending += 1;
    }
    for _ in 0..sending {
        q.responded();
    }
    assert!(model.is_empty());
    assert_eq!(q.used(), 0, "credit leaked");
    assert!(executed.iter().all(|&e| e <= 1), "executed twice");
}

/// The model's entry of the requester's ORQ.
#[derive(Clone, Copy, Debug)]
struct Entry {
    req: Request,
    got: u32,
    done: bool,
    local: u32,
}

const N: usize = 8;

struct Model {
    q: VecDeque<Entry>,
    ord: u16,
}

impl Model {
    fn inflight(&self) -> u16 {
        self.q
            .iter()
            .filter(|e| !e.done && e.req != Request::Local)
            .count() as u16
    }

    fn issue(&mut self, req: Request, local: u32, done: bool) -> Result<(), OrdBusy> {
        if req != Request::Local && self.inflight() >= self.ord {
            return Err(OrdBusy::NoCredit);
        }
        if self.q.len() >= N {
            return Err(OrdBusy::RingFull);
        }
        self.q.push_back(Entry {
            req,
            got: 0,
            done,
            local,
        });
        Ok(())
    }

    fn oldest(&mut self, read: bool) -> Option<&mut Entry> {
        self.q.iter_mut().find(|e| {
            !e.done
                && match e.req {
                    Request::Read { .. } => read,
                    Request::Local => false,
                    _ => !read,
                }
        })
    }

    fn read_response(
        &mut self,
        stag: u32,
        to: u64,
        len: u32,
        last: bool,
    ) -> Result<bool, TermCode> {
        let bad_stag = TermCode::tagged(DdpTaggedCode::InvalidStag);
        let bounds = TermCode::tagged(DdpTaggedCode::BaseBounds);
        let e = self.oldest(true).ok_or(bad_stag)?;
        let Request::Read {
            sink_stag,
            sink_to,
            size,
        } = e.req
        else {
            unreachable!()
        };
        if stag != sink_stag {
            return Err(bad_stag);
        }
        if sink_to.checked_add(u64::from(e.got)) != Some(to) {
            return Err(bounds);
        }
        let got = e.got.checked_add(len).ok_or(bounds)?;
        if got > size || (last && got != size) {
            return Err(bounds);
        }
        e.got = got;
        e.done = last;
        Ok(last)
    }

    fn response(&mut self, seg: &Segment) -> Result<(Request, u32, bool), TermCode> {
        let bad = TermCode::operation(RdmapCode::UnexpectedOpcode);
        if !matches!(
            seg.hdr.placement,
            Placement::Untagged {
                qn: QN_RESPONSE,
                ..
            }
        ) {
            return Err(bad);
        }
        let e = self.oldest(false).ok_or(bad)?;
        let want = match e.req {
            Request::Atomic { .. } => Opcode::AtomicResponse,
            Request::Flush => Opcode::FlushResponse,
            Request::Verify => Opcode::VerifyResponse,
            Request::AtomicWrite => Opcode::AtomicWriteResponse,
            _ => unreachable!(),
        };
        if seg.hdr.opcode != want {
            return Err(bad);
        }
        if let (Request::Atomic { req_id }, Body::AtomicResponse(r)) = (e.req, &seg.body) {
            if r.req_id != req_id {
                return Err(bad);
            }
        }
        e.done = seg.hdr.last;
        Ok((e.req, e.local, seg.hdr.last))
    }
}

const RESPONSES: [Opcode; 7] = [
    Opcode::AtomicResponse,
    Opcode::FlushResponse,
    Opcode::VerifyResponse,
    Opcode::AtomicWriteResponse,
    Opcode::ReadResponse,
    Opcode::Send,
    Opcode::AtomicRequest,
];

fn requester(ord: u16, steps: &[u8]) {
    let mut q: OrdQueue<N, u32> = OrdQueue::new(ord);
    let mut m = Model {
        q: VecDeque::new(),
        ord,
    };
    let mut next_id = 0u32;
    let mut last_out: Option<u32> = None;
    let mut it = steps.iter().copied();
    let mut out = |local: u32| {
        assert!(
            last_out.is_none_or(|l| l < local),
            "completion out of issue order"
        );
        last_out = Some(local);
    };
    while let Some(b) = it.next() {
        let p = b >> 4;
        let mut arg = || it.next().unwrap_or(0);
        match b % 10 {
            // Issue a request (0, 9) or a Local (1), or a Local already done (2).
            op @ (0 | 1 | 2 | 9) => {
                let id = next_id;
                next_id += 1;
                let req = match (op, p % 5) {
                    (1 | 2, _) => Request::Local,
                    (9, _) | (_, 1) => Request::Atomic {
                        req_id: id ^ u32::from(p),
                    },
                    (_, 0) => Request::Read {
                        sink_stag: u32::from(p),
                        sink_to: u64::from(arg()) << 56 | u64::from(id),
                        size: u32::from(arg()),
                    },
                    (_, 2) => Request::Flush,
                    (_, 3) => Request::Verify,
                    _ => Request::AtomicWrite,
                };
                let r = if op == 2 {
                    q.issue_local_done(id)
                } else {
                    q.issue_with(req, id)
                };
                assert_eq!(r, m.issue(req, id, op == 2));
            }
            // TX finished the oldest Local.
            3 => {
                let mut marked = None;
                let got = q.local_done(|l| marked = Some(*l));
                let want =
                    m.q.iter_mut()
                        .find(|e| !e.done && e.req == Request::Local)
                        .map(|e| {
                            e.done = true;
                            e.local
                        });
                assert_eq!(got, want.is_some());
                assert_eq!(marked, want);
            }
            // A Read Response segment: the expected sink or off by a bit.
            4 => {
                let (stag, to) = match m.oldest(true).map(|e| (e.req, e.got)) {
                    Some((
                        Request::Read {
                            sink_stag, sink_to, ..
                        },
                        got,
                    )) => (sink_stag, sink_to.wrapping_add(u64::from(got))),
                    _ => (u32::from(p), 0),
                };
                let stag = if p & 1 != 0 {
                    stag ^ u32::from(arg())
                } else {
                    stag
                };
                let to = if p & 2 != 0 {
                    to ^ u64::from(arg()) << (arg() % 64)
                } else {
                    to
                };
                let len = if p & 4 != 0 {
                    u32::MAX - u32::from(arg())
                } else {
                    u32::from(arg())
                };
                let last = p & 8 != 0;
                assert_eq!(
                    q.on_read_response(stag, to, len, last),
                    m.read_response(stag, to, len, last)
                );
            }
            // A QN 3 response, of the right kind and id or not.
            5 => {
                let opcode = RESPONSES[usize::from(p % 7)];
                let want_id = match m.oldest(false).map(|e| e.req) {
                    Some(Request::Atomic { req_id }) => req_id,
                    _ => 0,
                };
                let a = arg();
                let body = if opcode == Opcode::AtomicResponse {
                    let req_id = if a & 1 != 0 {
                        want_id ^ u32::from(a)
                    } else {
                        want_id
                    };
                    Body::AtomicResponse(AtomicResponse { req_id, orig: 7 })
                } else {
                    Body::None
                };
                let seg = Segment {
                    hdr: DdpHeader {
                        opcode,
                        last: p & 8 != 0,
                        placement: Placement::Untagged {
                            inv_stag: 0,
                            qn: if a & 2 != 0 {
                                u32::from(a) % 4
                            } else {
                                QN_RESPONSE
                            },
                            msn: 1,
                            mo: 0,
                        },
                    },
                    ulpdu_len: 0,
                    body,
                    payload_len: 0,
                };
                let got = q.on_response_with(&seg).map(|a| (a.req, a.local, a.done));
                assert_eq!(got, m.response(&seg));
            }
            // Completions in order.
            6 => {
                while let Some(a) = q.pop_completed_with() {
                    let e = m.q.pop_front().expect("completion the model has not");
                    assert!(e.done && a.done);
                    assert_eq!((a.req, a.local), (e.req, e.local));
                    out(a.local);
                }
                assert!(m.q.front().is_none_or(|e| !e.done));
            }
            // The stream goes down: flush one in order, or all (rarely).
            7 => {
                let a = q.pop_front().map(|a| (a.req, a.local, a.done));
                let e = m.q.pop_front().map(|e| (e.req, e.local, e.done));
                assert_eq!(a, e);
                if let Some((_, local, _)) = a {
                    out(local);
                }
            }
            _ => {
                if p == 0 {
                    assert_eq!(q.clear(), m.q.len());
                    m.q.clear();
                }
            }
        }
        assert_eq!(q.len(), m.q.len());
        assert_eq!(q.is_empty(), m.q.is_empty());
        assert_eq!(q.room(), N - m.q.len());
        assert_eq!(q.inflight(), m.inflight());
        assert!(q.inflight() <= ord, "ORD exceeded");
        assert_eq!(q.head_done(), m.q.front().is_some_and(|e| e.done));
        assert_eq!(
            q.has_requests(),
            m.q.iter().any(|e| e.req != Request::Local)
        );
        for e in &m.q {
            if let Request::Read { size, .. } = e.req {
                assert!(e.got <= size);
            }
        }
    }
}

/// The commit decisions on arbitrary bytes, against models.
fn commit(data: &[u8]) {
    let mut b = [0u8; 24];
    let n = data.len().min(24);
    b[..n].copy_from_slice(&data[..n]);
    let f = FlushRequest::decode(b[..FLUSH_REQ_LEN].try_into().unwrap());
    let ok = f.flags & !7 == 0 && f.flags & 3 != 0;
    match flush_plan(&f) {
        Ok(p) => {
            assert!(ok, "flags {:#x} accepted", f.flags);
            assert_eq!(p.persistent, f.flags & 1 != 0);
            assert_eq!(p.global, f.flags & 2 != 0);
            let want = if f.flags & 4 != 0 {
                FlushScope::Region
            } else {
                FlushScope::Range {
                    to: f.sink.to,
                    len: u64::from(f.sink.len),
                }
            };
            assert_eq!(p.scope, want);
        }
        Err(c) => {
            assert!(!ok, "flags {:#x} refused", f.flags);
            assert_eq!(c, TermCode::operation(RdmapCode::Unspecified));
        }
    }
    let a = AtomicWriteRequest::decode(&b[..ATOMIC_WRITE_REQ_LEN].try_into().unwrap());
    assert_eq!(atomic_write_check(&a).is_ok(), a.sink.len == 8);
    let off = u64::from_be_bytes(b[..8].try_into().unwrap());
    let len = u64::from(u32::from_be_bytes(b[8..12].try_into().unwrap()));
    let line = 1u64 << (b[12] % 13);
    match writeback_span(off, len, line) {
        Some((start, n)) if len > 0 => {
            let end = start.checked_add(n).expect("span wraps");
            assert_eq!(start % line, 0);
            assert_eq!(n % line, 0);
            assert!(start <= off && end >= off + len, "span does not cover");
            assert!(
                off - start < line && end - (off + len) < line,
                "span too long"
            );
        }
        Some((start, n)) => assert_eq!((start, n), (off, 0)),
        None => assert!(off.checked_add(len + line).is_none(), "span refused"),
    }
    let rest = data.get(24..).unwrap_or(&[]);
    let (h, d) = rest.split_at(rest.len() / 2);
    let r = verify_outcome(h, d);
    assert_eq!(r.is_ok(), h.is_empty() || h == d);
}

fuzz_target!(|data: &[u8]| {
    commit(data);
    if data.len() < 4 {
        return;
    }
    let credits = u16::from_be_bytes([data[1], data[2]]);
    if data[0] & 1 == 0 {
        responder(credits, usize::from(data[3] % 41), &data[4..]);
    } else {
        requester(credits % 12, &data[4..]);
    }
});
