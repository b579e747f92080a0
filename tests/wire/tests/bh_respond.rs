// SPDX-License-Identifier: GPL-2.0

//! Responses sent by two senders, the TX engine and `data_ready` in softirq
//! (spec-map T-01, T-05, DDP-05):
//!
//! - [`RespQueue::answer`] assigns the MSNs of QN 3 responses in arrival
//!   order, whichever sender takes the request, and [`RespQueue::peek_answer`]
//!   names the MSN the next one will get before it is taken;
//! - [`RespBurst`] holds responses built back to back for one send: an IRD
//!   credit is freed only once the last byte of its response was handed to
//!   the transport, however the bytes are cut and whoever sends the rest.

use proptest::prelude::*;
use rsiw_wire::wire::stream::{Answer, RespQueue};
use rsiw_wire::wire::tx::RespBurst;

/// An inbound request: its arrival number and whether its response is a QN 3
/// one (an atomic or a commit request) or a Read Response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct In {
    n: u32,
    qn3: bool,
}

fn qn3(r: &In) -> bool {
    r.qn3
}

#[derive(Clone, Copy, Debug)]
enum Step {
    /// A request arrives.
    Arrive(bool),
    /// A sender takes the next one: `data_ready` (peeks, builds, takes) or
    /// TX (takes).
    Take(bool),
    /// A response went out.
    Responded,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => any::<bool>().prop_map(Step::Arrive),
        3 => any::<bool>().prop_map(Step::Take),
        2 => Just(Step::Responded),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, .. ProptestConfig::default() })]

    /// T-01, DDP-05: the QN 3 responses carry MSN 1, 2, 3 ... in the arrival
    /// order of their requests, Read Responses none, however the two senders
    /// interleave; what `peek_answer` says is what `answer` then takes.
    #[test]
    fn t_01_prop_qn3_msn_in_arrival_order(
        ird in 1u16..16,
        steps in prop::collection::vec(step(), 0..300),
    ) {
        let mut q = RespQueue::new(ird, [None::<In>; 16]);
        let mut arrivals = 0u32;
        let mut sending = 0u16;
        let mut next_msn = 1u32;
        let mut last_n: Option<u32> = None;
        for s in steps {
            match s {
                Step::Arrive(k) => {
                    let n = arrivals;
                    arrivals += 1;
                    let _ = q.admit(|| Ok::<_, ()>(In { n, qn3: k }));
                }
                Step::Take(bh) => {
                    let peeked = q.peek_answer(qn3);
                    let got = q.answer(qn3);
                    if bh {
                        prop_assert_eq!(peeked, got);
                    }
                    if let Some(Answer { req, msn }) = got {
                        sending += 1;
                        prop_assert!(last_n.is_none_or(|l| l < req.n));
                        last_n = Some(req.n);
                        if req.qn3 {
                            prop_assert_eq!(msn, Some(next_msn));
                            next_msn += 1;
                        } else {
                            prop_assert_eq!(msn, None);
                        }
                    } else {
                        prop_assert_eq!(peeked, None);
                    }
                }
                Step::Responded => {
                    q.responded();
                    sending = sending.saturating_sub(1);
                }
            }
            prop_assert_eq!(q.used(), q.queued() as u16 + sending);
        }
    }
}

/// A request taken by `next_to_answer` (a queue without QN 3 responses)
/// consumes no MSN; `answer` goes on from where it was.
#[test]
fn ddp_05_next_to_answer_takes_no_msn() {
    let mut q = RespQueue::new(4, [None::<In>; 4]);
    for n in 0..3 {
        assert_eq!(q.admit(|| Ok::<_, ()>(In { n, qn3: true })), Ok(()));
    }
    assert_eq!(q.answer(qn3).map(|a| a.msn), Some(Some(1)));
    assert_eq!(q.next_to_answer().map(|r| r.n), Some(1));
    assert_eq!(
        q.peek_answer(qn3),
        Some(Answer {
            req: In { n: 2, qn3: true },
            msn: Some(2)
        })
    );
    assert_eq!(q.answer(qn3).map(|a| a.msn), Some(Some(2)));
    assert_eq!(q.answer(qn3), None);
    assert_eq!(q.peek_answer(qn3), None);
}

/// The driver's burst: 8 responses of at most 96 bytes.
const BURST_BYTES: usize = 768;
const BURST: usize = 8;
const FPDU: usize = 96;
type Burst = RespBurst<BURST_BYTES, BURST>;

/// Builds a response of `len` bytes (each byte its response's number) into
/// the burst's next slot; returns whether it was added.
fn add(b: &mut Burst, k: u8, len: usize) -> bool {
    match b.slot::<FPDU>() {
        Some(s) => {
            s.get_mut(..len).unwrap().fill(k);
            b.commit(len)
        }
        None => false,
    }
}

#[test]
fn t_05_burst_slots_and_commit() {
    let mut b = Burst::new();
    assert!(b.is_empty() && b.is_done());
    assert_eq!(b.sent(0), 0);
    // A slot of 0 bytes or one larger than the slot is refused.
    assert!(b.slot::<FPDU>().is_some());
    assert!(!b.commit(0));
    assert!(!b.commit(BURST_BYTES + 1));
    for k in 0..BURST {
        assert!(add(&mut b, k as u8, FPDU), "response {k}");
    }
    // M responses: no more.
    assert!(b.slot::<FPDU>().is_none());
    assert!(!b.commit(1));
    assert_eq!(
        (b.count(), b.len(), b.pending()),
        (BURST, BURST_BYTES, BURST)
    );

    // Fewer bytes left than a slot: none.
    let mut b = RespBurst::<100, 4>::new();
    assert!(b.slot::<60>().is_some());
    assert!(b.commit(50));
    assert!(b.slot::<60>().is_none());
    assert!(b.slot::<50>().is_some());

    // Nothing is added once sending began.
    let mut b = Burst::new();
    assert!(add(&mut b, 1, 36));
    assert_eq!(b.sent(10), 0);
    assert!(b.slot::<FPDU>().is_none());
    assert!(!b.commit(4));
    assert_eq!(b.unsent().len(), 26);
    // More than is left counts as all of it.
    assert_eq!(b.sent(1000), 1);
    assert!(b.is_done());
    assert_eq!(b.pending(), 0);
    b.clear();
    assert!(b.is_empty() && b.slot::<FPDU>().is_some());
}

/// T-05: a response's credit is freed with the call that hands over its last
/// byte, not one byte earlier.
#[test]
fn t_05_burst_credit_at_the_last_byte() {
    let mut b = Burst::new();
    assert!(add(&mut b, 0, 36));
    assert!(add(&mut b, 1, 84));
    assert!(add(&mut b, 2, 40));
    assert_eq!(b.sent(35), 0);
    assert_eq!(b.sent(1), 1);
    assert_eq!(b.sent(83), 0);
    // The last byte of the second and the first of the third.
    assert_eq!(b.sent(2), 1);
    assert_eq!(b.sent(38), 0);
    assert_eq!(b.pending(), 1);
    assert_eq!(b.sent(1), 1);
    assert_eq!(b.sent(0), 0);
    assert!(b.is_done());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, .. ProptestConfig::default() })]

    /// T-05: responses of any length built into a burst, handed to the
    /// transport in pieces of any size (none at all too; `data_ready` sends
    /// the first, TX the others): the byte stream is the responses back to back,
    /// and after every call the responses whose credits were freed are
    /// exactly those whose last byte was handed over. With the responder's
    /// queue: a credit is never free while its response has bytes to send.
    #[test]
    fn t_05_prop_burst_credit_never_early(
        lens in prop::collection::vec(1usize..=FPDU, 1..=12),
        chunks in prop::collection::vec(0usize..200, 0..40),
    ) {
        let ird = lens.len() as u16;
        let mut q = RespQueue::new(ird, vec![None::<u8>; lens.len()]);
        for k in 0..lens.len() {
            prop_assert_eq!(q.admit(|| Ok::<_, ()>(k as u8)), Ok(()));
        }
        let mut b = Burst::new();
        let mut built = Vec::new();
        let mut ends = Vec::new();
        for (k, &len) in lens.iter().enumerate() {
            // Built, then taken (as `data_ready` does).
            if !add(&mut b, k as u8, len) {
                prop_assert!(k >= BURST || built.len() + len > BURST_BYTES);
                break;
            }
            prop_assert_eq!(q.next_to_answer(), Some(k as u8));
            built.extend(std::iter::repeat_n(k as u8, len));
            ends.push(built.len());
        }
        let mut wire = Vec::new();
        let mut freed = 0usize;
        let mut cur = b;
        for &c in &chunks {
            let u = cur.unsent();
            let n = c.min(u.len());
            wire.extend_from_slice(&u[..n]);
            let k = cur.sent(n);
            for _ in 0..k {
                q.responded();
            }
            freed += k;
            let due = ends.iter().filter(|&&e| e <= wire.len()).count();
            prop_assert_eq!(freed, due, "credits freed after {} bytes", wire.len());
            prop_assert_eq!(cur.pending(), ends.len() - due);
            // Credits held: what is queued and what has bytes to send.
            prop_assert_eq!(q.used() as usize, lens.len() - due);
        }
        // The rest in one piece.
        let rest = cur.unsent().to_vec();
        wire.extend_from_slice(&rest);
        freed += cur.sent(rest.len());
        prop_assert_eq!(&wire, &built);
        prop_assert_eq!(freed, ends.len());
        prop_assert!(cur.is_done());
    }
}
