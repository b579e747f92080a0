// SPDX-License-Identifier: GPL-2.0

//! MPA requirement tests (spec-map section 2, MPA-xx).

mod common;

use common::*;
use rsiw_wire::wire::crc::{crc32c, crc_to_wire, Crc32c, SoftCrc32c, CRC_INIT};
use rsiw_wire::wire::fpdu::{fpdu_len, mulpdu_from_mss, pad_len};
use rsiw_wire::wire::hdr::{Body, Opcode, Placement, ReadRequest};
use rsiw_wire::wire::mpa::*;
use rsiw_wire::wire::rx::RxEvent;
use rsiw_wire::wire::term::{LlpCode, TermCode, TermEcho};
use rsiw_wire::wire::tx::{rtr_message, TxMessage};

fn frame(kind: FrameKind, flags: u8, rev: u8, e: Option<Enhanced>, pd: &[u8]) -> Vec<u8> {
    let mut b = [0u8; MAX_FRAME];
    let n = encode_frame(kind, flags, rev, e.as_ref(), pd, &mut b).unwrap();
    b[..n].to_vec()
}

fn hdr(b: &[u8], kind: FrameKind) -> FrameHeader {
    FrameHeader::parse(b[..20].try_into().unwrap(), kind).unwrap()
}

fn respond(cfg: &LocalConfig, req: &[u8]) -> ResponderAction {
    let h = hdr(req, FrameKind::Request);
    responder_decide(cfg, &h, &req[20..])
}

fn enh(ird: u16, ord: u16, p2p: bool, rtr: RtrSet) -> Enhanced {
    Enhanced { ird, ord, p2p, rtr }
}

/// An accepting Rev 2 Reply with IRD `ird`, ORD `ord`, no peer-to-peer, no private data.
fn reply_v2(ird: u16, ord: u16) -> Vec<u8> {
    frame(
        FrameKind::Reply,
        0,
        2,
        Some(enh(ird, ord, false, RtrSet::NONE)),
        b"",
    )
}

/// The initiator's decision on the encoded Reply `rep`.
fn decide(cfg: &LocalConfig, rep: &[u8]) -> InitiatorAction {
    initiator_decide(cfg, &hdr(rep, FrameKind::Reply), &rep[20..])
}

const WR: RtrSet = RtrSet {
    send: false,
    write: true,
    read: true,
};

#[test]
fn mpa_01_keys_and_bad_key_closes() {
    assert_eq!(&KEY_REQ, b"MPA ID Req Frame");
    assert_eq!(&KEY_REP, b"MPA ID Rep Frame");
    let mut f = frame(FrameKind::Request, 0, 1, None, b"hi");
    assert_eq!(&f[..16], &KEY_REQ);
    f[15] = b'f'; // "MPA ID Req Framf"
    let mut r = FrameReader::new(FrameKind::Request);
    assert_eq!(r.feed(&f).1, ReadStatus::Invalid(MpaError::BadKey));
    // A Reply key is not a Request.
    let rep = frame(FrameKind::Reply, 0, 1, None, b"");
    let mut r = FrameReader::new(FrameKind::Request);
    assert_eq!(r.feed(&rep).1, ReadStatus::Invalid(MpaError::BadKey));
    // A truncated frame is never Done.
    let good = frame(FrameKind::Request, 0, 1, None, b"abc");
    let mut r = FrameReader::new(FrameKind::Request);
    assert_eq!(r.feed(&good[..good.len() - 1]).1, ReadStatus::NeedMore);
    assert!(r.frame().is_none());
}

#[test]
fn mpa_02_res_bits_ignored_and_sent_zero() {
    let mut f = frame(FrameKind::Request, 0, 1, None, b"pd");
    assert_eq!(f[16] & FLAG_RES, 0);
    f[16] |= 0x0F;
    let a = respond(&LocalConfig::default(), &f);
    assert!(matches!(a, ResponderAction::Accept { .. }), "{a:?}");
    // Encoding strips reserved bits even if asked to set them.
    let g = frame(FrameKind::Reply, 0x0F | FLAG_C, 1, None, b"");
    assert_eq!(g[16], FLAG_C);
}

#[test]
fn mpa_03_revisions() {
    let cfg = LocalConfig::default();
    // Rev 1 request: Rev 1 reply, S=0, PD untouched.
    let f = frame(FrameKind::Request, 0, 1, None, b"\x01\x02\x03\x04\x05");
    match respond(&cfg, &f) {
        ResponderAction::Accept {
            flags,
            rev,
            enhanced,
            params,
        } => {
            assert_eq!(rev, 1);
            assert_eq!(flags & FLAG_S, 0);
            assert!(enhanced.is_none());
            assert!(!params.enhanced);
        }
        a => panic!("{a:?}"),
    }
    let fr = Frame::parse(&f, FrameKind::Request).unwrap();
    assert_eq!(fr.ulp_pd, b"\x01\x02\x03\x04\x05");
    // Rev 2 with S=1: Rev 2 reply with S=1.
    let f2 = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(4, 4, false, RtrSet::NONE)),
        b"x",
    );
    match respond(&cfg, &f2) {
        ResponderAction::Accept { rev, enhanced, .. } => {
            assert_eq!(rev, 2);
            assert!(enhanced.is_some());
            let out = frame(FrameKind::Reply, 0, rev, enhanced, b"");
            assert_eq!(out[16] & FLAG_S, FLAG_S);
        }
        a => panic!("{a:?}"),
    }
    // Rev 2 with S=0: plain reply.
    let f3 = frame(FrameKind::Request, 0, 2, None, b"");
    assert!(matches!(
        respond(&cfg, &f3),
        ResponderAction::Accept {
            rev: 2,
            enhanced: None,
            ..
        }
    ));
    // Rev 3 answered with Rev 2; Rev 0 is invalid.
    let mut f4 = f3.clone();
    f4[17] = 3;
    assert!(matches!(
        respond(&cfg, &f4),
        ResponderAction::Accept { rev: 2, .. }
    ));
    let mut f5 = f3;
    f5[17] = 0;
    assert_eq!(
        FrameHeader::parse(f5[..20].try_into().unwrap(), FrameKind::Request),
        Err(MpaError::BadRev)
    );
    // Rev 0 is never sent, with or without enhanced data; enhanced data
    // needs Rev 2.
    let mut b = [0u8; MAX_FRAME];
    let e = enh(1, 1, false, RtrSet::NONE);
    assert_eq!(
        encode_frame(FrameKind::Request, 0, 0, None, b"", &mut b),
        Err(MpaError::BadRev)
    );
    assert_eq!(
        encode_frame(FrameKind::Request, 0, 0, Some(&e), b"", &mut b),
        Err(MpaError::BadRev)
    );
    assert_eq!(
        encode_frame(FrameKind::Request, 0, 1, Some(&e), b"", &mut b),
        Err(MpaError::BadRev)
    );
    assert_eq!(
        encode_frame(FrameKind::Request, 0, 2, Some(&e), b"", &mut b),
        Ok(24)
    );
}

#[test]
fn mpa_04_markers_rejected_never_requested() {
    let f = frame(FrameKind::Request, FLAG_M, 1, None, b"");
    match respond(&LocalConfig::default(), &f) {
        ResponderAction::Reject { flags, reason, .. } => {
            assert_eq!(reason, RejectReason::Markers);
            assert_eq!(flags & FLAG_R, FLAG_R);
            assert_eq!(flags & FLAG_M, 0);
        }
        a => panic!("{a:?}"),
    }
    for crc in [false, true] {
        let cfg = LocalConfig {
            crc,
            p2p: true,
            ..Default::default()
        };
        let (flags, _, _) = initiator_request(&cfg);
        assert_eq!(flags & FLAG_M, 0);
    }
}

#[test]
fn mpa_05_crc_negotiation_and_check() {
    let mut cfg = LocalConfig::default();
    for (req_c, local_c, want) in [
        (false, false, false),
        (true, false, true),
        (false, true, true),
        (true, true, true),
    ] {
        cfg.crc = local_c;
        let f = frame(
            FrameKind::Request,
            if req_c { FLAG_C } else { 0 },
            1,
            None,
            b"",
        );
        match respond(&cfg, &f) {
            ResponderAction::Accept { flags, params, .. } => {
                assert_eq!(params.crc, want);
                assert_eq!(flags & FLAG_C != 0, want);
            }
            a => panic!("{a:?}"),
        }
    }
    // Initiator: C in the reply alone turns CRC on.
    let icfg = LocalConfig {
        max_rev: 1,
        ..Default::default()
    };
    let rep = frame(FrameKind::Reply, FLAG_C, 1, None, b"");
    match decide(&icfg, &rep) {
        InitiatorAction::Established(p) => assert!(p.crc),
        a => panic!("{a:?}"),
    }
    // With CRC on, one flipped payload bit gives 2/0/02.
    let m = msg(
        Opcode::Send,
        untagged(1),
        rsiw_wire::wire::hdr::Body::None,
        100,
    );
    let payload: Vec<u8> = (0..100u8).collect();
    let mut b = encode(m, &payload, 1000, true);
    assert!(parse(cfg_all(true), &b).1.is_none());
    b[40] ^= 0x01;
    let e = parse_err(cfg_all(true), &b);
    assert_eq!(e.code, TermCode::llp(LlpCode::Crc));
    assert_eq!(e.code.to_bytes(), [0x20, 0x02]);
    // With CRC off the field is ignored (siw sends zero).
    assert!(parse(cfg_all(false), &b).1.is_none());
    let z = encode(m, &payload, 1000, false);
    assert_eq!(&z[z.len() - 4..], &[0, 0, 0, 0]);
}

#[test]
fn mpa_06_reject_carries_pd_and_ird_ord() {
    let icfg = LocalConfig {
        ird: 4,
        ord: 8,
        ..Default::default()
    };
    let rep = frame(
        FrameKind::Reply,
        FLAG_R,
        2,
        Some(enh(2, 6, false, RtrSet::NONE)),
        b"0123456789",
    );
    let h = hdr(&rep, FrameKind::Reply);
    // The flag bits on the wire: M 0x80, C 0x40, R 0x20, S 0x10.
    assert_eq!(
        (FLAG_M, FLAG_C, FLAG_R, FLAG_S, FLAG_RES),
        (0x80, 0x40, 0x20, 0x10, 0x0F)
    );
    assert_eq!(rep[16], 0x30, "R=1, S=1 in the reject");
    let fr = Frame::from_parts(h, &rep[20..]).unwrap();
    assert_eq!(fr.ulp_pd, b"0123456789");
    assert_eq!(
        initiator_decide(&icfg, &h, &rep[20..]),
        InitiatorAction::Rejected {
            peer_ird: Some(2),
            peer_ord: Some(6)
        }
    );
}

#[test]
fn mpa_07_private_data_limits() {
    let mut b = [0u8; MAX_FRAME + 8];
    let pd = [0xAAu8; 513];
    assert_eq!(
        encode_frame(FrameKind::Request, 0, 1, None, &pd, &mut b),
        Err(MpaError::PdTooLong)
    );
    assert_eq!(
        encode_frame(FrameKind::Request, 0, 1, None, &pd[..512], &mut b),
        Ok(532)
    );
    let e = enh(1, 1, false, RtrSet::NONE);
    assert_eq!(
        encode_frame(FrameKind::Request, 0, 2, Some(&e), &pd[..509], &mut b),
        Err(MpaError::PdTooLong)
    );
    assert_eq!(
        encode_frame(
            FrameKind::Request,
            0,
            2,
            Some(&e),
            &pd[..MAX_ULP_PD_ENHANCED],
            &mut b
        ),
        Ok(532)
    );
    assert_eq!(u16::from_be_bytes([b[18], b[19]]), 512);
    // Incoming PD_Length 512 is fine.
    let f = frame(FrameKind::Request, 0, 1, None, &[7; 512]);
    let mut r = FrameReader::new(FrameKind::Request);
    assert_eq!(r.feed(&f), (532, ReadStatus::Done));
    assert_eq!(r.frame().unwrap().unwrap().ulp_pd, &[7; 512][..]);
    // Incoming PD_Length 513: invalid frame.
    let mut f = frame(FrameKind::Request, 0, 1, None, b"");
    f[18..20].copy_from_slice(&513u16.to_be_bytes());
    let mut r = FrameReader::new(FrameKind::Request);
    assert_eq!(r.feed(&f).1, ReadStatus::Invalid(MpaError::PdTooLong));
}

#[test]
fn mpa_08_s_bit_strips_enhanced_data() {
    let f = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(3, 3, false, RtrSet::NONE)),
        b"",
    );
    assert_eq!(u16::from_be_bytes([f[18], f[19]]), 4);
    let fr = Frame::parse(&f, FrameKind::Request).unwrap();
    assert_eq!(fr.ulp_pd.len(), 0);
    assert_eq!(fr.enhanced.unwrap().ird, 3);
    // S=1 with PD_Length = 2 is rejected.
    let mut g = frame(FrameKind::Request, 0, 2, None, b"ab");
    g[16] |= FLAG_S;
    assert_eq!(
        Frame::parse(&g, FrameKind::Request),
        Err(MpaError::ShortEnhanced)
    );
    assert!(matches!(
        respond(&LocalConfig::default(), &g),
        ResponderAction::Reject {
            reason: RejectReason::ShortEnhanced,
            ..
        }
    ));
    // PD after the enhanced data reaches the ULP unchanged.
    let h = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(3, 3, false, RtrSet::NONE)),
        b"ulp",
    );
    assert_eq!(Frame::parse(&h, FrameKind::Request).unwrap().ulp_pd, b"ulp");
}

#[test]
fn mpa_09_enhanced_encoding_exact_bytes() {
    let e = enh(
        16,
        8,
        true,
        RtrSet {
            send: false,
            write: true,
            read: false,
        },
    );
    assert_eq!(e.encode(), [0x80, 0x10, 0x80, 0x08]);
    assert_eq!(Enhanced::decode([0x80, 0x10, 0x80, 0x08]), e);
    let all = enh(
        0x3FFF,
        0x3FFF,
        true,
        RtrSet {
            send: true,
            write: true,
            read: true,
        },
    );
    assert_eq!(all.encode(), [0xFF, 0xFF, 0xFF, 0xFF]);
    assert_eq!(
        enh(0x1234, 0x0ABC, false, RtrSet::NONE).encode(),
        [0x12, 0x34, 0x0A, 0xBC]
    );
}

#[test]
fn mpa_10_responder_ird_ord() {
    let req = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(4, 8, false, RtrSet::NONE)),
        b"",
    );
    // Relaxed: ORD adopted down to initiator IRD.
    let cfg = LocalConfig {
        ird: 2,
        ord: 32,
        max_ird: 16,
        max_ord: 64,
        relaxed_ord: true,
        ..Default::default()
    };
    match respond(&cfg, &req) {
        ResponderAction::Accept {
            enhanced: Some(e),
            params,
            ..
        } => {
            assert!(e.ird >= 8, "{e:?}");
            assert!(e.ord <= 4, "{e:?}");
            assert_eq!((params.ird, params.ord), (e.ird, e.ord));
            assert_eq!((params.peer_ird, params.peer_ord), (Some(4), Some(8)));
        }
        a => panic!("{a:?}"),
    }
    // Strict: reject, the reply's ORD is the ORD the ULP requires.
    let strict = LocalConfig {
        relaxed_ord: false,
        ..cfg
    };
    match respond(&strict, &req) {
        ResponderAction::Reject {
            enhanced: Some(e),
            reason,
            flags,
            ..
        } => {
            assert_eq!(reason, RejectReason::InsufficientIrd);
            assert_eq!(e.ord, 32);
            assert_eq!(flags & FLAG_R, FLAG_R);
        }
        a => panic!("{a:?}"),
    }
    // Responder IRD capped by the device maximum.
    let big = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(4, 100, false, RtrSet::NONE)),
        b"",
    );
    match respond(&cfg, &big) {
        ResponderAction::Accept {
            enhanced: Some(e), ..
        } => assert_eq!(e.ird, 16),
        a => panic!("{a:?}"),
    }
    // ORD 0 with a Read RTR raises the responder IRD to 1.
    let c0 = LocalConfig {
        ird: 0,
        ord: 0,
        ..Default::default()
    };
    let r0 = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(
            0,
            0,
            true,
            RtrSet {
                send: false,
                write: false,
                read: true,
            },
        )),
        b"",
    );
    match respond(&c0, &r0) {
        ResponderAction::Accept {
            enhanced: Some(e), ..
        } => {
            assert_eq!(e.ird, 1);
            assert!(e.rtr.read);
        }
        a => panic!("{a:?}"),
    }
    // Responder ORD equal to the initiator's IRD is fine (only a larger
    // one is refused, X-10): ORD 4 against IRD 4 is accepted as 4.
    let c4 = LocalConfig {
        max_rev: 2,
        ird: 4,
        ord: 4,
        relaxed_ord: false,
        ..Default::default()
    };
    let r4 = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(4, 4, false, RtrSet::NONE)),
        b"",
    );
    match respond(&c4, &r4) {
        ResponderAction::Accept {
            enhanced: Some(e),
            params,
            ..
        } => {
            assert_eq!((e.ird, e.ord), (4, 4));
            assert_eq!((params.ird, params.ord), (4, 4));
        }
        a => panic!("{a:?}"),
    }
    let r3 = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(3, 4, false, RtrSet::NONE)),
        b"",
    );
    assert!(matches!(
        respond(&c4, &r3),
        ResponderAction::Reject {
            reason: RejectReason::InsufficientIrd,
            ..
        }
    ));
}

#[test]
fn mpa_11_initiator_ird_ord_on_accept() {
    let icfg = LocalConfig {
        ird: 4,
        ord: 8,
        max_ird: 16,
        max_ord: 16,
        ..Default::default()
    };
    let rep = reply_v2(6, 10);
    match decide(&icfg, &rep) {
        InitiatorAction::Established(p) => {
            assert_eq!(p.ord, 6); // at most responder IRD
            assert_eq!(p.ird, 10); // at least responder ORD
            assert_eq!((p.peer_ird, p.peer_ord), (Some(6), Some(10)));
        }
        a => panic!("{a:?}"),
    }
    let rep = reply_v2(6, 0x3FFE);
    assert_eq!(
        decide(&icfg, &rep),
        InitiatorAction::Terminate(TermCode::new(2, 0, 6))
    );
    // Strict negotiation (siw's relaxed_ird_negotiation false): the ULP's
    // ORD above the responder IRD, or the responder ORD above the ULP's IRD,
    // terminates with 2/0/06 instead of adjusting.
    let strict = LocalConfig {
        relaxed_ord: false,
        ..icfg
    };
    for (ird, ord) in [(6, 4), (8, 10), (6, 10)] {
        let rep = reply_v2(ird, ord);
        assert_eq!(
            decide(&strict, &rep),
            InitiatorAction::Terminate(TermCode::new(2, 0, 6)),
            "reply IRD {ird} ORD {ord}"
        );
    }
    // Values that already fit are taken as they are.
    let rep = reply_v2(8, 4);
    match decide(&strict, &rep) {
        InitiatorAction::Established(p) => assert_eq!((p.ird, p.ord), (4, 8)),
        a => panic!("{a:?}"),
    }
}

#[test]
fn mpa_12_ulp_negotiated_0x3fff() {
    let cfg = LocalConfig {
        ird: 5,
        ord: 7,
        ..Default::default()
    };
    // Initiator ORD 0x3FFF: responder IRD unchanged, reply IRD 0x3FFF.
    let req = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(9, 0x3FFF, false, RtrSet::NONE)),
        b"",
    );
    match respond(&cfg, &req) {
        ResponderAction::Accept {
            enhanced: Some(e),
            params,
            ..
        } => {
            assert_eq!(e.ird, 0x3FFF);
            assert_eq!(params.ird, 5);
            assert_eq!(e.encode()[0] & 0x3F, 0x3F);
        }
        a => panic!("{a:?}"),
    }
    // Initiator IRD 0x3FFF: responder ORD unchanged, reply ORD 0x3FFF.
    let req = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(0x3FFF, 2, false, RtrSet::NONE)),
        b"",
    );
    match respond(&cfg, &req) {
        ResponderAction::Accept {
            enhanced: Some(e),
            params,
            ..
        } => {
            assert_eq!(e.ord, 0x3FFF);
            assert_eq!(params.ord, 7);
        }
        a => panic!("{a:?}"),
    }
    // Initiator keeps ORD / IRD on 0x3FFF from the responder.
    let icfg = LocalConfig {
        ird: 3,
        ord: 4,
        ..Default::default()
    };
    let rep = reply_v2(0x3FFF, 0x3FFF);
    match decide(&icfg, &rep) {
        InitiatorAction::Established(p) => assert_eq!((p.ird, p.ord), (3, 4)),
        a => panic!("{a:?}"),
    }
    // The initiator passes 0x3FFF through when its ULP asks for it.
    let ucfg = LocalConfig {
        ird: IRD_ORD_ULP,
        ord: IRD_ORD_ULP,
        ..Default::default()
    };
    let (_, _, e) = initiator_request(&ucfg);
    assert_eq!(e.unwrap().encode(), [0x3F, 0xFF, 0x3F, 0xFF]);
}

#[test]
fn mpa_13_initiator_model_flags() {
    let cs = LocalConfig {
        p2p: false,
        ird: 1,
        ord: 1,
        ..Default::default()
    };
    let (_, rev, e) = initiator_request(&cs);
    assert_eq!(rev, 2);
    let b = e.unwrap().encode();
    assert_eq!(b[0] & 0xC0, 0);
    assert_eq!(b[2] & 0xC0, 0);
    let p2p = LocalConfig {
        p2p: true,
        rtr: WR,
        ird: 1,
        ord: 1,
        ..Default::default()
    };
    let b = initiator_request(&p2p).2.unwrap().encode();
    assert_eq!(b, [0x80, 0x01, 0xC0, 0x01]);
    // On reception B/C/D are ignored when A=0.
    let d = Enhanced::decode([0x40, 0x01, 0xC0, 0x01]);
    assert!(!d.p2p);
    assert!(d.rtr.is_empty());
}

#[test]
fn mpa_14_responder_rtr_selection() {
    let cfg = LocalConfig {
        rtr: WR,
        ..Default::default()
    };
    let only_b = RtrSet {
        send: true,
        write: false,
        read: false,
    };
    let req = frame(FrameKind::Request, 0, 2, Some(enh(4, 4, true, only_b)), b"");
    match respond(&cfg, &req) {
        ResponderAction::Accept {
            enhanced: Some(e), ..
        } => {
            assert!(e.p2p);
            assert!(e.rtr.write || e.rtr.read);
            assert!(!e.rtr.is_empty());
        }
        a => panic!("{a:?}"),
    }
    // Intersection when possible.
    let req = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(
            4,
            4,
            true,
            RtrSet {
                send: true,
                write: true,
                read: false,
            },
        )),
        b"",
    );
    match respond(&cfg, &req) {
        ResponderAction::Accept {
            enhanced: Some(e), ..
        } => {
            assert_eq!(
                e.rtr,
                RtrSet {
                    send: false,
                    write: true,
                    read: false
                }
            );
        }
        a => panic!("{a:?}"),
    }
    // A=0 in the request: A=0 and no RTR flags in the reply.
    let req = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(4, 4, false, RtrSet::NONE)),
        b"",
    );
    match respond(&cfg, &req) {
        ResponderAction::Accept {
            enhanced: Some(e), ..
        } => {
            assert!(!e.p2p);
            assert_eq!(e.encode()[0] & 0xC0, 0);
            assert_eq!(e.encode()[2] & 0xC0, 0);
        }
        a => panic!("{a:?}"),
    }
}

#[test]
fn mpa_15_initiator_rtr_choice_and_failure() {
    let icfg = LocalConfig {
        p2p: true,
        rtr: WR,
        ..Default::default()
    };
    let rep = frame(
        FrameKind::Reply,
        0,
        2,
        Some(enh(4, 4, true, RtrSet::NONE)),
        b"",
    );
    assert_eq!(
        decide(&icfg, &rep),
        InitiatorAction::Terminate(TermCode::new(2, 0, 7))
    );
    let rep = frame(
        FrameKind::Reply,
        0,
        2,
        Some(enh(
            4,
            4,
            true,
            RtrSet {
                send: false,
                write: false,
                read: true,
            },
        )),
        b"",
    );
    match decide(&icfg, &rep) {
        InitiatorAction::Established(p) => {
            assert_eq!(p.rtr_send, Some(RtrKind::Read));
            assert!(p.ord >= 1);
        }
        a => panic!("{a:?}"),
    }
    // Only B offered but we cannot send it: TERM 2/0/07.
    let rep = frame(
        FrameKind::Reply,
        0,
        2,
        Some(enh(
            4,
            4,
            true,
            RtrSet {
                send: true,
                write: false,
                read: false,
            },
        )),
        b"",
    );
    assert_eq!(
        decide(&icfg, &rep),
        InitiatorAction::Terminate(TermCode::llp(LlpCode::NoMatchingRtr))
    );
    // A Read RTR uses one ORD slot even if the ULP asked for none; a Write
    // RTR does not.
    let rd = RtrSet {
        send: false,
        write: false,
        read: true,
    };
    let wr = RtrSet {
        send: false,
        write: true,
        read: false,
    };
    for (rtr, kind, want_ord) in [(rd, RtrKind::Read, 1), (wr, RtrKind::Write, 0)] {
        let icfg = LocalConfig {
            max_rev: 2,
            p2p: true,
            rtr,
            ird: 0,
            ord: 0,
            ..Default::default()
        };
        let rep = frame(FrameKind::Reply, 0, 2, Some(enh(1, 0, true, rtr)), b"");
        match decide(&icfg, &rep) {
            InitiatorAction::Established(p) => {
                assert_eq!(p.rtr_send, Some(kind));
                assert_eq!(p.ord, want_ord, "{kind:?}");
            }
            a => panic!("{a:?}"),
        }
    }
}

#[test]
fn mpa_16_responder_refuses_a_first_fpdu_that_is_no_offered_rtr() {
    let c = cfg_all(false);
    let first =
        |m: TxMessage, payload: &[u8]| segs(&parse(c, &encode(m, payload, 1000, false)).0)[0];
    let send = first(rtr_message(RtrKind::Send, 1), &[]);
    let write = first(rtr_message(RtrKind::Write, 0), &[]);
    let read = first(rtr_message(RtrKind::Read, 1), &[]);
    let no = Err(TermCode::llp(LlpCode::NoMatchingRtr));
    let all = RtrSet {
        send: true,
        write: true,
        read: true,
    };
    // Each RTR is taken when it was offered, and only then.
    for (seg, kind) in [
        (send, RtrKind::Send),
        (write, RtrKind::Write),
        (read, RtrKind::Read),
    ] {
        assert_eq!(responder_rtr(all, &seg), Ok(kind));
        let mut only = all;
        match kind {
            RtrKind::Send => only.send = false,
            RtrKind::Write => only.write = false,
            RtrKind::Read => only.read = false,
        }
        assert_eq!(responder_rtr(only, &seg), no, "{kind:?} not offered");
        assert_eq!(responder_rtr(RtrSet::NONE, &seg), no);
    }
    // A ULP message before the RTR passes no fence: a Send or Write with data, a Send with
    // Solicited Event or Invalidate, a Read Request of data, a non-last segment.
    let ulp = [
        first(msg(Opcode::Send, untagged(1), Body::None, 4), b"data"),
        first(msg(Opcode::SendSe, untagged(1), Body::None, 0), &[]),
        first(msg(Opcode::SendInv, untagged(1), Body::None, 0), &[]),
        first(
            msg(
                Opcode::Write,
                Placement::Tagged { stag: 1, to: 0 },
                Body::None,
                4,
            ),
            b"data",
        ),
        first(
            msg(
                Opcode::ReadRequest,
                Placement::Untagged {
                    inv_stag: 0,
                    qn: 1,
                    msn: 1,
                    mo: 0,
                },
                Body::ReadRequest(ReadRequest {
                    sink_stag: 1,
                    sink_to: 0,
                    size: 8,
                    src_stag: 2,
                    src_to: 0,
                }),
                0,
            ),
            &[],
        ),
    ];
    for seg in ulp {
        assert_eq!(responder_rtr(all, &seg), no, "{:?}", seg.hdr);
    }
    let mut partial = write;
    partial.hdr.last = false;
    assert_eq!(responder_rtr(all, &partial), no);
}

#[test]
fn mpa_17_rtr_messages_on_the_wire() {
    let c = cfg_all(false);
    // B: zero-length Send, QN 0, MSN 1, L=1, ULPDU 18 (FPDU 24).
    let b = encode(rtr_message(RtrKind::Send, 1), &[], 1000, false);
    assert_eq!(b.len(), 24);
    assert_eq!(&b[..2], &18u16.to_be_bytes());
    let s = segs(&parse(c, &b).0)[0];
    assert_eq!(s.hdr.opcode, Opcode::Send);
    assert!(s.hdr.last);
    assert_eq!(
        s.hdr.placement,
        Placement::Untagged {
            inv_stag: 0,
            qn: 0,
            msn: 1,
            mo: 0
        }
    );
    // C: zero-length Write, ULPDU 14 (FPDU 20), STag 1.
    let w = encode(rtr_message(RtrKind::Write, 0), &[], 1000, false);
    assert_eq!(w.len(), 20);
    let s = segs(&parse(c, &w).0)[0];
    assert_eq!(s.hdr.placement, Placement::Tagged { stag: 1, to: 0 });
    assert_eq!(s.payload_len, 0);
    // Zero-length placement is never STag-checked.
    assert!(rsiw_wire::wire::atomic::check_range(0, 0, 0xDEAD_BEEF, 0).is_ok());
    // D: Read Request, QN 1, MSN 1, size 0, ULPDU 46 (FPDU 52).
    let r = encode(rtr_message(RtrKind::Read, 1), &[], 1000, false);
    assert_eq!(r.len(), 52);
    let s = segs(&parse(c, &r).0)[0];
    assert_eq!(
        s.hdr.placement,
        Placement::Untagged {
            inv_stag: 0,
            qn: 1,
            msn: 1,
            mo: 0
        }
    );
    match s.body {
        rsiw_wire::wire::hdr::Body::ReadRequest(ReadRequest { size: 0, .. }) => {}
        b => panic!("{b:?}"),
    }
}

#[test]
fn mpa_18_interoperability_matrix() {
    let v2 = LocalConfig::default();
    let v1 = LocalConfig {
        max_rev: 1,
        ..Default::default()
    };
    // Enhanced request, enhanced responder: enhanced reply.
    let req2 = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(4, 4, false, RtrSet::NONE)),
        b"",
    );
    assert!(matches!(
        respond(&v2, &req2),
        ResponderAction::Accept {
            enhanced: Some(_),
            rev: 2,
            ..
        }
    ));
    // Unenhanced request: unenhanced reply (also from a v2 responder).
    let req1 = frame(FrameKind::Request, 0, 1, None, b"");
    assert!(matches!(
        respond(&v2, &req1),
        ResponderAction::Accept {
            enhanced: None,
            rev: 1,
            ..
        }
    ));
    // A v1-only responder answers a Rev 2 request with Rev 1 and no S.
    match respond(&v1, &req2) {
        ResponderAction::Accept {
            enhanced: None,
            rev: 1,
            ..
        } => {}
        a => panic!("{a:?}"),
    }
    // The initiator without enhanced features sends Rev 1.
    assert_eq!(initiator_request(&v1), (0, 1, None));
    // A p2p initiator cannot use an unenhanced reply.
    let p2p = LocalConfig {
        p2p: true,
        ..Default::default()
    };
    let rep1 = frame(FrameKind::Reply, 0, 1, None, b"");
    assert_eq!(
        initiator_decide(&p2p, &hdr(&rep1, FrameKind::Reply), &rep1[20..]),
        InitiatorAction::Terminate(TermCode::llp(LlpCode::NoMatchingRtr))
    );
    assert!(matches!(
        initiator_decide(&v2, &hdr(&rep1, FrameKind::Reply), &rep1[20..]),
        InitiatorAction::Established(ConnParams {
            enhanced: false,
            ..
        })
    ));
    // A reply with a higher Rev than requested is invalid.
    let rep2 = frame(FrameKind::Reply, 0, 2, None, b"");
    assert_eq!(
        initiator_decide(&v1, &hdr(&rep2, FrameKind::Reply), &rep2[20..]),
        InitiatorAction::Close(MpaError::BadRev)
    );
}

#[test]
fn mpa_19_enhanced_mode_term_codes() {
    assert_eq!(
        TermCode::llp(LlpCode::LocalCatastrophic),
        TermCode::new(2, 0, 5)
    );
    assert_eq!(
        TermCode::llp(LlpCode::InsufficientIrd),
        TermCode::new(2, 0, 6)
    );
    assert_eq!(
        TermCode::llp(LlpCode::NoMatchingRtr),
        TermCode::new(2, 0, 7)
    );
    // A reply asking for markers is a local failure: 2/0/05.
    let rep = frame(FrameKind::Reply, FLAG_M, 1, None, b"");
    let icfg = LocalConfig {
        max_rev: 1,
        ..Default::default()
    };
    assert_eq!(
        decide(&icfg, &rep),
        InitiatorAction::Terminate(TermCode::new(2, 0, 5))
    );
}

#[test]
fn mpa_20_llp_error_codes() {
    let table = [
        (LlpCode::ConnectionLost, 1),
        (LlpCode::Crc, 2),
        (LlpCode::FpduStart, 3),
        (LlpCode::InvalidFrame, 4),
        (LlpCode::LocalCatastrophic, 5),
        (LlpCode::InsufficientIrd, 6),
        (LlpCode::NoMatchingRtr, 7),
    ];
    for (c, v) in table {
        let t = TermCode::llp(c);
        assert_eq!(t.to_bytes(), [0x20, v]);
        assert!(t.is_known());
    }
    assert!(!TermCode::new(2, 0, 8).is_known());
    assert!(!TermCode::new(2, 0, 0).is_known());
}

#[test]
fn mpa_21_sanity_clamping() {
    let cfg = LocalConfig {
        ird: 8,
        ord: 8,
        max_ird: 16,
        max_ord: 16,
        relaxed_ord: true,
        ..Default::default()
    };
    let req = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(0x3FFE, 0x3FFE, false, RtrSet::NONE)),
        b"",
    );
    match respond(&cfg, &req) {
        ResponderAction::Accept { params, .. } => {
            assert!(params.ird <= 16);
            assert!(params.ord <= 16);
        }
        a => panic!("{a:?}"),
    }
    // A=0 with B, C, D set: ignored.
    let mut raw = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(4, 4, false, RtrSet::NONE)),
        b"",
    );
    raw[20] |= 0x40;
    raw[22] |= 0xC0;
    match respond(&cfg, &raw) {
        ResponderAction::Accept {
            enhanced: Some(e),
            params,
            ..
        } => {
            assert!(!e.p2p && e.rtr.is_empty() && !params.p2p);
        }
        a => panic!("{a:?}"),
    }
    // Device maxima above 0x3FFE never leak into the reply.
    let huge = LocalConfig {
        ird: 0xFFFF,
        max_ird: 0xFFFF,
        ..cfg
    };
    match respond(&huge, &req) {
        ResponderAction::Accept {
            enhanced: Some(e), ..
        } => assert_eq!(e.ird, 0x3FFE),
        a => panic!("{a:?}"),
    }
    // A local value above 14 bits is clamped to 0x3FFE on the wire, never
    // to 0x3FFF (which would mean "ULP negotiated").
    assert_eq!(IRD_ORD_MAX, 0x3FFE);
    let (_, _, e) = initiator_request(&LocalConfig {
        max_rev: 2,
        ird: 0x4000,
        ord: 0xFFFE,
        max_ird: 0xFFFF,
        max_ord: 0xFFFF,
        ..Default::default()
    });
    let e = e.unwrap();
    assert_eq!((e.ird, e.ord), (0x3FFE, 0x3FFE));
    assert_eq!(e.encode(), [0x3F, 0xFE, 0x3F, 0xFE]);
}

#[test]
fn mpa_22_reader_never_over_reads() {
    let f = frame(
        FrameKind::Request,
        0,
        2,
        Some(enh(1, 1, false, RtrSet::NONE)),
        b"private!",
    );
    let mut stream = f.clone();
    stream.extend_from_slice(&[0xEE; 40]); // the first FPDU bytes
    let mut r = FrameReader::new(FrameKind::Request);
    let (n1, s1) = r.feed(&stream[..1]);
    assert_eq!((n1, s1), (1, ReadStatus::NeedMore));
    let (n2, s2) = r.feed(&stream[1..20]);
    assert_eq!((n2, s2), (19, ReadStatus::NeedMore));
    let (n3, s3) = r.feed(&stream[20..]);
    assert_eq!(s3, ReadStatus::Done);
    assert_eq!(20 + n3, f.len());
    let fr = r.frame().unwrap().unwrap();
    assert_eq!(fr.ulp_pd, b"private!");
    // Feeding more after Done consumes nothing.
    assert_eq!(r.feed(&stream[f.len()..]), (0, ReadStatus::Done));
}

#[test]
fn mpa_23_fpdu_pad() {
    for (len, pad) in [
        (18usize, 0usize),
        (19, 3),
        (20, 2),
        (21, 1),
        (14, 0),
        (26, 0),
        (46, 0),
        (30, 0),
        (70, 0),
    ] {
        assert_eq!(pad_len(len), pad, "len {len}");
        assert_eq!((2 + len + pad) % 4, 0);
    }
    assert_eq!(fpdu_len(18), 24);
    assert_eq!(fpdu_len(70), 76);
    // Pad bytes on the wire are zero and the parser accepts any length.
    for n in 0..8u32 {
        let m = msg(
            Opcode::Send,
            untagged(1),
            rsiw_wire::wire::hdr::Body::None,
            n,
        );
        let p = vec![0x55u8; n as usize];
        let b = encode(m, &p, 1000, true);
        assert_eq!(b.len() % 4, 0);
        assert_eq!(b.len(), fpdu_len(18 + n as usize));
        let pad = pad_len(18 + n as usize);
        assert!(b[b.len() - 4 - pad..b.len() - 4].iter().all(|&x| x == 0));
        assert!(parse(cfg_all(true), &b).1.is_none());
    }
}

#[test]
fn mpa_24_crc32c_vectors_and_wire_order() {
    let c = SoftCrc32c;
    assert_eq!(crc32c(&c, b"123456789"), 0xE306_9283);
    // RFC 3720 B.4 vectors.
    assert_eq!(crc32c(&c, &[0u8; 32]), 0x8A91_36AA);
    assert_eq!(crc32c(&c, &[0xFFu8; 32]), 0x62A8_AB43);
    let inc: Vec<u8> = (0..32u8).collect();
    assert_eq!(crc32c(&c, &inc), 0x46DD_794E);
    let dec: Vec<u8> = (0..32u8).rev().collect();
    assert_eq!(crc32c(&c, &dec), 0x113F_DB5C);
    // iSCSI wire order: 32 zero bytes give aa 36 91 8a.
    assert_eq!(
        crc_to_wire(c.update(CRC_INIT, &[0u8; 32])),
        [0xAA, 0x36, 0x91, 0x8A]
    );
    // Chaining over pieces equals one pass.
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    let whole = c.update(CRC_INIT, &data);
    let mut r = CRC_INIT;
    for ch in data.chunks(13) {
        r = c.update(r, ch);
    }
    assert_eq!(r, whole);
    // FPDU trailer: CRC over length, ULPDU and pad, little-endian image.
    let b = encode(rtr_message(RtrKind::Send, 1), &[], 1000, true);
    let want = crc_to_wire(c.update(CRC_INIT, &b[..20]));
    assert_eq!(&b[20..24], &want);
}

#[test]
fn mpa_25_markers_never_negotiated_nor_framed() {
    // D-03: markers are refused in both roles, for Rev 1 and Rev 2 peers,
    // whatever else the frame asks for.
    let e = enh(4, 4, true, WR);
    for (rev, en) in [(1, None), (2, Some(e))] {
        for extra in [0, FLAG_C] {
            let f = frame(FrameKind::Request, FLAG_M | extra, rev, en, b"pd");
            let cfg = LocalConfig {
                p2p: true,
                rtr: WR,
                ird: 4,
                ord: 4,
                ..Default::default()
            };
            match respond(&cfg, &f) {
                ResponderAction::Reject { flags, reason, .. } => {
                    assert_eq!(reason, RejectReason::Markers);
                    assert_eq!(flags & (FLAG_R | FLAG_M), FLAG_R, "rev {rev}");
                }
                a => panic!("rev {rev}: {a:?}"),
            }
            // A reply that asks us for markers: LLP 2/0/05, never established.
            let icfg = LocalConfig {
                max_rev: rev,
                p2p: rev == 2,
                rtr: WR,
                ird: 4,
                ord: 4,
                ..Default::default()
            };
            let rep = frame(FrameKind::Reply, FLAG_M | extra, rev, en, b"");
            assert_eq!(
                decide(&icfg, &rep),
                InitiatorAction::Terminate(TermCode::llp(LlpCode::LocalCatastrophic)),
                "rev {rev}"
            );
        }
    }
    // No marker is ever framed: an FPDU crossing 512-byte boundaries of the
    // stream is exactly length + ULPDU + pad + CRC, and the payload arrives
    // contiguous (a marker would be 4 bytes at stream offset 512).
    let p: Vec<u8> = (0..1500u32).map(|i| (i % 251) as u8).collect();
    let m = msg(
        Opcode::Send,
        untagged(1),
        rsiw_wire::wire::hdr::Body::None,
        1500,
    );
    let b = encode(m, &p, 8994, true);
    assert_eq!(b.len(), 2 + 18 + 1500 + 4);
    assert_eq!(&b[20..20 + 1500], &p[..]);
    let (evs, err) = parse(cfg_all(true), &b);
    assert!(err.is_none());
    assert_eq!(evs[1], Ev::Data(p));
}

#[test]
fn mpa_26_mulpdu_and_any_chunking() {
    assert_eq!(mulpdu_from_mss(1460), Some(1454));
    assert_eq!(mulpdu_from_mss(9000), Some(8994));
    assert_eq!(mulpdu_from_mss(100_000), Some(65534));
    assert_eq!(mulpdu_from_mss(40), None);
    // The smallest MULPDU carries an untagged header and an Atomic Request
    // (18 + 52 = 70 bytes): MSS 76 gives 70, MSS 75 is too small.
    assert_eq!(mulpdu_from_mss(76), Some(70));
    assert_eq!(mulpdu_from_mss(75), None);
    for mss in [576u32, 1448, 1460, 4096, 8948, 65536] {
        let m = mulpdu_from_mss(mss).unwrap() as usize;
        assert!(fpdu_len(m) <= mss as usize);
        assert_eq!(pad_len(m), 0);
    }
    // A stream of FPDUs split at every possible byte gives the same events.
    let m = msg(
        Opcode::Send,
        untagged(1),
        rsiw_wire::wire::hdr::Body::None,
        3000,
    );
    let p: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let b = encode(m, &p, 1454, true);
    let whole = parse(cfg_all(true), &b);
    for ch in [1usize, 2, 3, 7, 100, 1455, 2999] {
        assert_eq!(parse_chunked(cfg_all(true), &b, &[ch]), whole, "chunk {ch}");
    }
    assert!(whole.1.is_none());
    // An FPDU shorter than the header it announces: LLP 2/0/03.
    let mut bad = raw_untagged(0x41, 0x43, 0, 0, 1, 0);
    bad.truncate(10);
    let e = parse_err(cfg_all(false), &raw_fpdu(&bad, false));
    assert_eq!(e.code, TermCode::llp(LlpCode::FpduStart));
    assert_eq!(e.echo, TermEcho::None);
    // Larger than the negotiated maximum: 2/0/03 too.
    let mut c = cfg_all(false);
    c.max_ulpdu = 100;
    let e = parse_err(c, &b);
    assert_eq!(e.code, TermCode::llp(LlpCode::FpduStart));
    // Exactly the maximum is fine; one byte more is not.
    c.max_ulpdu = 1454;
    let (evs, err) = parse(c, &b);
    assert!(err.is_none());
    assert_eq!(evs, whole.0);
    c.max_ulpdu = 1453;
    assert_eq!(parse_err(c, &b).code, TermCode::llp(LlpCode::FpduStart));
    let _ = RxEvent::NeedMore;
}
