// SPDX-License-Identifier: GPL-2.0

//! IRD/ORD outcome of a whole MPA exchange (spec-map MPA-10, MPA-11, RDMAP-07).
//!
//! Runs `initiator_request` -> `responder_decide` -> encoded Reply -> `initiator_decide` for
//! arbitrary ULP values, revisions and peer-to-peer settings, and checks the invariant the data
//! path relies on: each side's ORD is at most the other side's IRD, as configured. Without
//! enhanced data both sides keep the values their ULP gave (as `siw` does).

use proptest::prelude::*;
use rsiw_wire::wire::mpa::*;

fn frame(kind: FrameKind, flags: u8, rev: u8, e: Option<&Enhanced>) -> Vec<u8> {
    let mut b = [0u8; MAX_FRAME];
    let n = encode_frame(kind, flags, rev, e, b"", &mut b).unwrap();
    b[..n].to_vec()
}

fn hdr(b: &[u8], kind: FrameKind) -> FrameHeader {
    FrameHeader::parse(b[..20].try_into().unwrap(), kind).unwrap()
}

/// Outcome of one exchange: (initiator params, responder params), if both reach full operation.
fn exchange(i: &LocalConfig, r: &LocalConfig) -> Option<(ConnParams, ConnParams)> {
    let (flags, rev, e) = initiator_request(i);
    let req = frame(FrameKind::Request, flags, rev, e.as_ref());
    let (flags, rev, e, rp) = match responder_decide(r, &hdr(&req, FrameKind::Request), &req[20..])
    {
        ResponderAction::Accept {
            flags,
            rev,
            enhanced,
            params,
        } => (flags, rev, enhanced, params),
        _ => return None,
    };
    let rep = frame(FrameKind::Reply, flags, rev, e.as_ref());
    match initiator_decide(i, &hdr(&rep, FrameKind::Reply), &rep[20..]) {
        InitiatorAction::Established(ip) => Some((ip, rp)),
        _ => None,
    }
}

fn cfg(max_rev: u8, ird: u16, ord: u16, p2p: bool, rtr: [bool; 3], relaxed: bool) -> LocalConfig {
    LocalConfig {
        max_rev,
        crc: false,
        ird,
        ord,
        max_ird: 128,
        max_ord: 128,
        p2p,
        rtr: RtrSet {
            send: rtr[0],
            write: rtr[1],
            read: rtr[2],
        },
        relaxed_ord: relaxed,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, .. ProptestConfig::default() })]

    #[test]
    fn mpa_10_11_ord_never_exceeds_peer_ird(
        irev in 1u8..=2, rrev in 1u8..=2,
        iird in 0u16..200, iord in 0u16..200, rird in 0u16..200, rord in 0u16..200,
        p2p in any::<bool>(), irtr in any::<[bool; 3]>(), rrtr in any::<[bool; 3]>(),
        relaxed in any::<bool>(),
    ) {
        let i = cfg(irev, iird, iord, p2p, irtr, relaxed);
        let r = cfg(rrev, rird, rord, false, rrtr, relaxed);
        if let Some((ip, rp)) = exchange(&i, &r) {
            prop_assert_eq!(ip.enhanced, rp.enhanced);
            // Nothing exceeds the device maximum.
            prop_assert!(ip.ird <= 128 && ip.ord <= 128 && rp.ird <= 128 && rp.ord <= 128);
            if ip.enhanced {
                // The exchanged values are the configured ones.
                prop_assert_eq!(ip.peer_ird, Some(rp.ird));
                prop_assert_eq!(ip.peer_ord, Some(rp.ord));
                prop_assert_eq!(rp.peer_ird, Some(i.ird.min(128)));
                prop_assert_eq!(rp.peer_ord, Some(i.ord.min(128)));
                // The invariant: ORD <= the peer's IRD, both ways.
                prop_assert!(ip.ord <= rp.ird, "initiator ORD {} > responder IRD {}", ip.ord, rp.ird);
                prop_assert!(rp.ord <= ip.ird, "responder ORD {} > initiator IRD {}", rp.ord, ip.ird);
                // The initiator uses what its ULP asked, as far as the peer allows.
                if ip.rtr_send != Some(RtrKind::Read) {
                    prop_assert_eq!(ip.ord, iord.min(128).min(rp.ird));
                }
                // A Read RTR always has its credit on both sides.
                if ip.rtr_send == Some(RtrKind::Read) {
                    prop_assert!(ip.ord >= 1 && rp.ird >= 1);
                }
            } else {
                // Rev 1 (or no enhanced reply): the ULP's values, clamped to the device.
                prop_assert_eq!((ip.ird, ip.ord), (iird.min(128), iord.min(128)));
                prop_assert_eq!((rp.ird, rp.ord), (rird.min(128), rord.min(128)));
                prop_assert_eq!(ip.peer_ird, None);
                prop_assert!(ip.rtr_send.is_none());
            }
        } else {
            // Only a peer-to-peer or strict negotiation may fail.
            prop_assert!(p2p || !relaxed, "exchange failed: {:?} {:?}", i, r);
        }
    }
}

/// siw as initiator asks ORD 128 (perftest's max_qp_rd_atom): an rsiw responder whose ULP
/// gives IRD 16 still offers IRD 128, so the initiator's ORD stays within it.
#[test]
fn responder_ird_covers_initiator_ord() {
    let i = cfg(2, 128, 128, false, [false; 3], true);
    let r = cfg(2, 16, 16, false, [false, true, true], true);
    let (ip, rp) = exchange(&i, &r).unwrap();
    assert_eq!(rp.ird, 128);
    assert_eq!(ip.ord, 128);
    assert_eq!(rp.ord, 16);
}

/// A responder that grants IRD 2 limits an initiator that wanted ORD 128 to 2.
#[test]
fn initiator_ord_limited_by_responder_ird() {
    let i = cfg(2, 4, 128, false, [false; 3], true);
    let (flags, rev, e) = initiator_request(&i);
    assert_eq!(e.unwrap().ord, 128);
    let _ = (flags, rev);
    let rep = frame(
        FrameKind::Reply,
        0,
        2,
        Some(&Enhanced {
            ird: 2,
            ord: 4,
            p2p: false,
            rtr: RtrSet::NONE,
        }),
    );
    match initiator_decide(&i, &hdr(&rep, FrameKind::Reply), &rep[20..]) {
        InitiatorAction::Established(p) => assert_eq!((p.ird, p.ord), (4, 2)),
        a => panic!("{a:?}"),
    }
    // IRD 0 from the responder: ORD 0, no Read Requests at all.
    let rep0 = frame(
        FrameKind::Reply,
        0,
        2,
        Some(&Enhanced {
            ird: 0,
            ord: 0,
            p2p: false,
            rtr: RtrSet::NONE,
        }),
    );
    match initiator_decide(&i, &hdr(&rep0, FrameKind::Reply), &rep0[20..]) {
        InitiatorAction::Established(p) => assert_eq!(p.ord, 0),
        a => panic!("{a:?}"),
    }
}
