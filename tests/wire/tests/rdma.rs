// SPDX-License-Identifier: GPL-2.0

//! DDP, RDMAP, Terminate, RFC 7306, commit-draft and DAT requirement tests
//! (spec-map sections 3-7).

mod common;

use common::*;
use rsiw_wire::wire::atomic::*;
use rsiw_wire::wire::hdr::*;
use rsiw_wire::wire::rx::{RxConfig, Segment};
use rsiw_wire::wire::stream::*;
use rsiw_wire::wire::term::*;
use rsiw_wire::wire::tx::{Segmenter, TxError};

fn one(cfg: RxConfig, b: &[u8]) -> Segment {
    let (evs, e) = parse(cfg, b);
    assert!(e.is_none(), "{e:?}");
    segs(&evs)[0]
}

fn c0(tagged: bool, last: bool) -> u8 {
    (if tagged { DDP_T } else { 0 }) | (if last { DDP_L } else { 0 }) | DDP_VERSION
}

fn ctl(op: u8) -> u8 {
    RDMAP_VERSION | op
}

fn untagged_seg(op: Opcode, qn: u32, msn: u32, mo: u32, last: bool, payload: u32) -> Segment {
    Segment {
        hdr: DdpHeader {
            opcode: op,
            last,
            placement: Placement::Untagged {
                inv_stag: 0,
                qn,
                msn,
                mo,
            },
        },
        ulpdu_len: 18,
        body: Body::None,
        payload_len: payload,
    }
}

// ---- DDP ---------------------------------------------------------------

/// Parses one commit request, then builds and encodes the Terminate the
/// driver sends for `code`/`echo` found while processing it. Returns the
/// request's raw FPDU and the Terminate bytes.
fn commit_term(
    op: Opcode,
    body: Body,
    payload: &[u8],
    code: TermCode,
    echo: TermEcho,
) -> (Vec<u8>, Vec<u8>) {
    use rsiw_wire::wire::crc::SoftCrc32c;
    use rsiw_wire::wire::rx::{RxEvent, RxParser};
    let b = encode(
        msg(
            op,
            Placement::Untagged {
                inv_stag: 0,
                qn: 1,
                msn: 7,
                mo: 0,
            },
            body,
            payload.len() as u32,
        ),
        payload,
        1000,
        true,
    );
    let mut p = RxParser::new(cfg_all(true), SoftCrc32c);
    let (_, ev) = p.feed(&b);
    assert!(
        matches!(ev, RxEvent::Segment(s) if s.hdr.opcode == op),
        "{ev:?}"
    );
    let t = p.terminate_for(code, echo);
    let mut out = [0u8; TERM_MAX_LEN];
    let n = t.encode(&mut out).expect("encode");
    (b, out[..n].to_vec())
}

/// Checks a Terminate echoing exactly the DDP header of the untagged FPDU
/// `req` (M and D set, R clear) with the given code bytes.
fn assert_term_echoes_ddp(term: &[u8], req: &[u8], code: [u8; 2]) {
    assert_eq!(term.len(), 4 + 2 + 18);
    assert_eq!(&term[..2], &code);
    assert_eq!(&term[2..4], &[0xC0, 0x00], "M=1 D=1 R=0");
    assert_eq!(&term[4..6], &req[..2], "DDP segment length");
    assert_eq!(&term[6..24], &req[2..20], "Terminated DDP header");
}

#[test]
fn ddp_01_version_checks() {
    let u = raw_untagged(0x42 | DDP_L, ctl(3), 0, 0, 1, 0); // DV = 2
    let b = raw_fpdu(&u, false);
    let e = parse_err(cfg_all(false), &b);
    assert_eq!(e.code, TermCode::new(1, 2, 6));
    assert_eq!(e.echo, TermEcho::Ddp);
    let mut p =
        rsiw_wire::wire::rx::RxParser::new(cfg_all(false), rsiw_wire::wire::crc::SoftCrc32c);
    let _ = p.feed(&b);
    let t = p.terminate().unwrap();
    assert_eq!(t.ddp_hdr_len as usize, UNTAGGED_HDR_LEN);
    assert_eq!(&t.ddp_hdr[..], &u[..]);
    let tg = raw_tagged(DDP_T | DDP_L, ctl(0), 5, 0); // DV = 0
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&tg, false)).code,
        TermCode::new(1, 1, 4)
    );
    // Reserved bits are not checked.
    let ok = raw_untagged(c0(false, true) | DDP_RSVD, ctl(3) | 0x20, 0, 0, 1, 0);
    assert_eq!(
        one(RxConfig::default(), &raw_fpdu(&ok, false)).hdr.opcode,
        Opcode::Send
    );
}

#[test]
fn ddp_02_tagged_header_and_segments() {
    let m = msg(
        Opcode::Write,
        Placement::Tagged {
            stag: 0xAB,
            to: 0x1000,
        },
        Body::None,
        10_000,
    );
    let p = vec![7u8; 10_000];
    let b = encode(m, &p, 1454, false);
    let (evs, e) = parse(cfg_all(false), &b);
    assert!(e.is_none());
    let ss = segs(&evs);
    assert!(ss.len() > 1);
    let mut to = 0x1000u64;
    for (i, s) in ss.iter().enumerate() {
        assert_eq!(s.hdr.last, i == ss.len() - 1);
        match s.hdr.placement {
            Placement::Tagged { stag, to: t } => {
                assert_eq!(stag, 0xAB);
                assert_eq!(t, to);
            }
            _ => panic!(),
        }
        assert_eq!(
            s.ulpdu_len as usize,
            TAGGED_HDR_LEN + s.payload_len as usize
        );
        to += u64::from(s.payload_len);
    }
    assert_eq!(to, 0x1000 + 10_000);
    assert_eq!(&b[2..4], &[DDP_T | DDP_VERSION, RDMAP_VERSION]);
}

#[test]
fn ddp_03_invalidate_stag_position() {
    let m = msg(
        Opcode::SendInv,
        Placement::Untagged {
            inv_stag: 0x1234_5678,
            qn: 9,
            msn: 1,
            mo: 0,
        },
        Body::None,
        0,
    );
    let b = encode(m, &[], 1000, false);
    assert_eq!(&b[4..8], &[0x12, 0x34, 0x56, 0x78]);
    assert_eq!(&b[8..12], &[0, 0, 0, 0]); // QN 0 (taken from the opcode)
                                          // Other messages send zero there, and the receiver ignores it.
    let m = msg(
        Opcode::Send,
        Placement::Untagged {
            inv_stag: 0xFFFF_FFFF,
            qn: 0,
            msn: 1,
            mo: 0,
        },
        Body::None,
        0,
    );
    let b = encode(m, &[], 1000, false);
    assert_eq!(&b[4..8], &[0, 0, 0, 0]);
    let raw = raw_untagged(c0(false, true), ctl(3), 0xDEAD_BEEF, 0, 1, 0);
    let s = one(cfg_all(false), &raw_fpdu(&raw, false));
    assert!(matches!(
        s.hdr.placement,
        Placement::Untagged { inv_stag: 0, .. }
    ));
}

#[test]
fn ddp_04_queue_numbers() {
    use Opcode::*;
    for (op, qn) in [
        (Send, 0),
        (SendInv, 0),
        (SendSe, 0),
        (SendSeInv, 0),
        (ImmData, 0),
        (ImmDataSe, 0),
        (ReadRequest, 1),
        (AtomicRequest, 1),
        (FlushRequest, 1),
        (VerifyRequest, 1),
        (AtomicWriteRequest, 1),
        (Terminate, 2),
        (AtomicResponse, 3),
        (FlushResponse, 3),
        (VerifyResponse, 3),
        (AtomicWriteResponse, 3),
    ] {
        assert_eq!(op.queue(), Some(qn), "{op:?}");
    }
    assert_eq!(Write.queue(), None);
    assert_eq!(ReadResponse.queue(), None);
    // QN 4: 1/2/01.
    let raw = raw_untagged(c0(false, true), ctl(3), 0, 4, 1, 0);
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(1, 2, 1)
    );
    // Atomic Request on QN 0: 0/2/06.
    let mut raw = raw_untagged(c0(false, true), ctl(0xA), 0, 0, 1, 0);
    raw.extend_from_slice(&rsiw_wire::wire::hdr::AtomicRequest::fetch_add(1, 2, 0, 1).encode());
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 6)
    );
}

#[test]
fn ddp_05_msn_per_queue() {
    let mut tx = TxMsn::new();
    assert_eq!(tx.take(0), Some(1));
    assert_eq!(tx.take(1), Some(1));
    assert_eq!(tx.take(2), Some(1));
    assert_eq!(tx.take(0), Some(2));
    assert_eq!(tx.take(4), None);
    let mut rx = RxUntagged::new();
    let s1 = untagged_seg(Opcode::Send, 0, 1, 0, true, 0);
    assert!(rx.check(&s1, Some(100)).is_ok());
    // A second Send with MSN 1: 1/2/03.
    assert_eq!(rx.check(&s1, Some(100)), Err(TermCode::new(1, 2, 3)));
    // MSN wraps mod 2^32.
    let mut rx = RxUntagged::new();
    for m in 1..=3u32 {
        rx.check(&untagged_seg(Opcode::Send, 0, m, 0, true, 0), Some(0))
            .unwrap();
    }
    assert_eq!(rx.expected_msn(0), Some(4));
    let mut tx = TxMsn::new();
    for _ in 0..5 {
        tx.take(3);
    }
    assert_eq!(tx.peek(3), Some(6));
}

#[test]
fn ddp_06_message_offset() {
    let mut rx = RxUntagged::new();
    rx.check(&untagged_seg(Opcode::Send, 0, 1, 0, false, 100), Some(1000))
        .unwrap();
    // Second segment with the wrong MO: 1/2/04.
    assert_eq!(
        rx.check(&untagged_seg(Opcode::Send, 0, 1, 50, true, 100), Some(1000)),
        Err(TermCode::new(1, 2, 4))
    );
    let mut rx = RxUntagged::new();
    rx.check(&untagged_seg(Opcode::Send, 0, 1, 0, false, 100), Some(150))
        .unwrap();
    // MO + len beyond the buffer: 1/2/05.
    assert_eq!(
        rx.check(&untagged_seg(Opcode::Send, 0, 1, 100, true, 100), Some(150)),
        Err(TermCode::new(1, 2, 5))
    );
    // Commit-draft requests: MO ignored.
    let mut rx = RxUntagged::new();
    assert!(rx
        .check(
            &untagged_seg(Opcode::FlushRequest, 1, 1, 0xDEAD, true, 0),
            Some(u64::MAX)
        )
        .is_ok());
}

#[test]
fn ddp_07_delivery_on_last_segment() {
    let mut rx = RxUntagged::new();
    let a = rx
        .check(&untagged_seg(Opcode::Send, 0, 1, 0, false, 10), Some(30))
        .unwrap();
    assert_eq!(
        a,
        MsgPos {
            first: true,
            complete: false
        }
    );
    let b = rx
        .check(&untagged_seg(Opcode::Send, 0, 1, 10, false, 10), Some(30))
        .unwrap();
    assert_eq!(
        b,
        MsgPos {
            first: false,
            complete: false
        }
    );
    let c = rx
        .check(&untagged_seg(Opcode::Send, 0, 1, 20, true, 10), Some(30))
        .unwrap();
    assert_eq!(
        c,
        MsgPos {
            first: false,
            complete: true
        }
    );
    assert_eq!(rx.expected_msn(0), Some(2));
}

#[test]
fn ddp_08_tagged_validation_codes() {
    assert_eq!(
        access_error(Target::Write, Fault::InvalidStag).0,
        TermCode::new(1, 1, 0)
    );
    assert_eq!(
        access_error(Target::Write, Fault::Bounds).0,
        TermCode::new(1, 1, 1)
    );
    assert_eq!(
        access_error(Target::Write, Fault::Pd).0,
        TermCode::new(1, 1, 2)
    );
    assert_eq!(
        access_error(Target::Write, Fault::ToWrap).0,
        TermCode::new(1, 1, 3)
    );
    // Access rights: 1/1/00 as siw (D-02).
    assert_eq!(
        access_error(Target::Write, Fault::Rights),
        (TermCode::new(1, 1, 0), TermEcho::Ddp)
    );
    assert_eq!(
        TermCode::tagged(DdpTaggedCode::InvalidVersion),
        TermCode::new(1, 1, 4)
    );
}

#[test]
fn ddp_09_untagged_codes_and_echo() {
    let codes = [
        (DdpUntaggedCode::InvalidQn, 1),
        (DdpUntaggedCode::NoBuffer, 2),
        (DdpUntaggedCode::MsnRange, 3),
        (DdpUntaggedCode::InvalidMo, 4),
        (DdpUntaggedCode::TooLong, 5),
        (DdpUntaggedCode::InvalidVersion, 6),
    ];
    for (c, v) in codes {
        assert_eq!(TermCode::untagged(c), TermCode::new(1, 2, v));
    }
    let mut rx = RxUntagged::new();
    assert_eq!(
        rx.check(&untagged_seg(Opcode::Send, 0, 1, 0, true, 1), None),
        Err(TermCode::new(1, 2, 2))
    );
    // The Terminate echoes the 18-byte header with D set.
    let raw = raw_untagged(c0(false, true), ctl(3), 0, 7, 1, 0);
    let b = raw_fpdu(&raw, false);
    let mut p =
        rsiw_wire::wire::rx::RxParser::new(cfg_all(false), rsiw_wire::wire::crc::SoftCrc32c);
    let _ = p.feed(&b);
    let t = p.terminate().unwrap();
    let mut out = [0u8; 64];
    let n = t.encode(&mut out).unwrap();
    assert_eq!(n, 4 + 2 + 18);
    assert_eq!(&out[..4], &[0x12, 0x01, 0xC0, 0x00]);
    assert_eq!(&out[4..6], &18u16.to_be_bytes());
    assert_eq!(&out[6..24], &raw[..]);
}

#[test]
fn ddp_11_multi_segment_send() {
    let m = msg(Opcode::Send, untagged(1), Body::None, 1 << 20);
    let p: Vec<u8> = (0..(1u32 << 20)).map(|i| (i >> 3) as u8).collect();
    let b = encode(m, &p, 1454, true);
    let (evs, e) = parse(cfg_all(true), &b);
    assert!(e.is_none());
    let ss = segs(&evs);
    assert_eq!(ss.len(), (1usize << 20).div_ceil(1454 - 18));
    let mut rx = RxUntagged::new();
    let mut completes = 0;
    for s in &ss {
        assert!(s.ulpdu_len <= 1454);
        if rx.check(s, Some(1 << 20)).unwrap().complete {
            completes += 1;
        }
    }
    assert_eq!(completes, 1);
    let data: Vec<u8> = evs
        .iter()
        .filter_map(|e| {
            if let Ev::Data(d) = e {
                Some(d.clone())
            } else {
                None
            }
        })
        .flatten()
        .collect();
    assert_eq!(data, p);
}

#[test]
fn ddp_12_zero_length_not_validated() {
    assert!(check_range(0x1000, 0x100, 0xFFFF_FFFF_FFFF_FFFF, 0).is_ok());
    assert_eq!(check_range(0x1000, 0x100, 0x10FF, 2), Err(Fault::Bounds));
    assert_eq!(check_range(0, u64::MAX, u64::MAX, 2), Err(Fault::ToWrap));
    assert!(check_range(0x1000, 0x100, 0x1000, 0x100).is_ok());
    let w = msg(
        Opcode::Write,
        Placement::Tagged {
            stag: 0xDEAD_BEEF,
            to: 7,
        },
        Body::None,
        0,
    );
    let s = one(cfg_all(false), &encode(w, &[], 100, false));
    assert_eq!(s.payload_len, 0);
}

// ---- RDMAP -------------------------------------------------------------

#[test]
fn rdmap_01_version() {
    let raw = raw_untagged(c0(false, true), 0x80 | 3, 0, 0, 1, 0); // RV = 10b
    let e = parse_err(cfg_all(false), &raw_fpdu(&raw, false));
    assert_eq!(e.code, TermCode::new(0, 2, 5));
    let raw = raw_untagged(c0(false, true), 3, 0, 0, 1, 0); // RV = 00b
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 5)
    );
}

#[test]
fn rdmap_02_opcode_validity() {
    let base = RxConfig::default();
    let mut raw = raw_untagged(c0(false, true), ctl(0xC), 0, 1, 1, 0);
    raw.extend_from_slice(&[0u8; 20]);
    assert_eq!(
        parse_err(base, &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 6)
    );
    // T flag not matching the opcode: Send marked tagged.
    let raw = raw_tagged(c0(true, true), ctl(3), 1, 0);
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 6)
    );
    // Write marked untagged.
    let raw = raw_untagged(c0(false, true), ctl(0), 0, 0, 1, 0);
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 6)
    );
    assert_eq!(Opcode::from_u8(0x12), None);
}

#[test]
fn rdmap_03_write_roundtrip() {
    assert!(Opcode::Write.is_tagged());
    let m = msg(
        Opcode::Write,
        Placement::Tagged {
            stag: 0x42,
            to: 0x10,
        },
        Body::None,
        5,
    );
    let (evs, e) = parse(cfg_all(true), &encode(m, b"hello", 100, true));
    assert!(e.is_none());
    assert_eq!(evs[1], Ev::Data(b"hello".to_vec()));
}

#[test]
fn rdmap_04_read_request_layout() {
    let rr = ReadRequest {
        sink_stag: 0x11,
        sink_to: 0x2222,
        size: 4096,
        src_stag: 0x33,
        src_to: 0x4444,
    };
    let m = msg(Opcode::ReadRequest, untagged(1), Body::ReadRequest(rr), 0);
    let b = encode(m, &[], 1000, false);
    assert_eq!(&b[..2], &46u16.to_be_bytes());
    assert_eq!(b.len(), 52);
    let h = &b[20..48];
    assert_eq!(&h[0..4], &0x11u32.to_be_bytes());
    assert_eq!(&h[4..12], &0x2222u64.to_be_bytes());
    assert_eq!(&h[12..16], &4096u32.to_be_bytes());
    assert_eq!(&h[16..20], &0x33u32.to_be_bytes());
    assert_eq!(&h[20..28], &0x4444u64.to_be_bytes());
    let s = one(cfg_all(false), &b);
    assert_eq!(s.body, Body::ReadRequest(rr));
    assert!(s.hdr.last);
    // A Read Request must be one segment: L=0 gives 0/2/07.
    let mut raw = raw_untagged(c0(false, false), ctl(1), 0, 1, 1, 0);
    raw.extend_from_slice(&rr.encode());
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 7)
    );
}

#[test]
fn rdmap_05_read_response_matching() {
    let mut q: OrdQueue<8> = OrdQueue::new(4);
    q.issue(Request::Read {
        sink_stag: 5,
        sink_to: 100,
        size: 10,
    })
    .unwrap();
    assert_eq!(
        q.on_read_response(6, 100, 10, true),
        Err(TermCode::new(1, 1, 0))
    );
    assert_eq!(
        q.on_read_response(5, 101, 10, true),
        Err(TermCode::new(1, 1, 1))
    );
    assert_eq!(
        q.on_read_response(5, 100, 11, true),
        Err(TermCode::new(1, 1, 1))
    );
    // Overrunning the Read is caught in the segment that overruns, L=0
    // or not (T-20), and places nothing.
    assert_eq!(
        q.on_read_response(5, 100, 11, false),
        Err(TermCode::new(1, 1, 1))
    );
    assert_eq!(q.on_read_response(5, 100, 4, false), Ok(false));
    assert_eq!(
        q.on_read_response(5, 104, 7, false),
        Err(TermCode::new(1, 1, 1))
    );
    assert_eq!(q.on_read_response(5, 104, 6, true), Ok(true));
    // Nothing outstanding: 1/1/00.
    assert_eq!(
        q.on_read_response(5, 110, 1, true),
        Err(TermCode::new(1, 1, 0))
    );
}

/// A Read is done once the payload of its last Read Response segment is
/// placed ([`OrdQueue::read_response_end`]), not at that segment's header:
/// the driver completes done Reads, and invalidates the sink of a Read with
/// Local Invalidate, from TX too, while RX may still be placing the rest of
/// a large last segment (nvmeof-rsiw: the target terminated 1/1/00 and its
/// ULP used the data before it was all there).
#[test]
fn rdmap_05_read_done_once_last_segment_placed() {
    let mut q: OrdQueue<8> = OrdQueue::new(4);
    let rd = Request::Read {
        sink_stag: 5,
        sink_to: 0,
        size: 8192,
    };
    q.issue(rd).unwrap();
    assert_eq!(q.read_response_segment(5, 0, 4096, false), Ok(()));
    assert!(!q.read_response_end(), "not the last segment");
    assert!(!q.head_done());
    // The last segment's header: matched, but its payload is not placed.
    assert_eq!(q.read_response_segment(5, 4096, 4096, true), Ok(()));
    assert!(!q.head_done(), "done before its payload is placed");
    assert_eq!(q.inflight(), 1);
    assert_eq!(q.pop_completed(), None);
    // Its end.
    assert!(q.read_response_end());
    assert!(q.head_done());
    assert_eq!(q.inflight(), 0);
    assert_eq!(q.pop_completed(), Some(rd));
    assert!(!q.read_response_end(), "nothing outstanding");
    assert!(q.is_empty());
}

#[test]
fn rdmap_06_read_request_errors_echo_rdma_header() {
    let (c, echo) = access_error(Target::ReadRequest, Fault::Bounds);
    assert_eq!(c, TermCode::new(0, 1, 1));
    assert_eq!(echo, TermEcho::DdpAndRdma);
    assert_eq!(
        access_error(Target::ReadRequest, Fault::InvalidStag).0,
        TermCode::new(0, 1, 0)
    );
    assert_eq!(
        access_error(Target::ReadRequest, Fault::Rights).0,
        TermCode::new(0, 1, 2)
    );
    assert_eq!(
        access_error(Target::ReadRequest, Fault::Pd).0,
        TermCode::new(0, 1, 3)
    );
    assert_eq!(
        access_error(Target::ReadRequest, Fault::ToWrap).0,
        TermCode::new(0, 1, 4)
    );
    let rr = ReadRequest {
        sink_stag: 1,
        sink_to: 2,
        size: 3,
        src_stag: 4,
        src_to: 5,
    };
    let b = encode(
        msg(Opcode::ReadRequest, untagged(1), Body::ReadRequest(rr), 0),
        &[],
        100,
        false,
    );
    let mut p =
        rsiw_wire::wire::rx::RxParser::new(cfg_all(false), rsiw_wire::wire::crc::SoftCrc32c);
    let (n, _) = p.feed(&b);
    let t = p.terminate_for(c, echo);
    assert_eq!(t.rdma_hdr, Some(rr.encode()));
    let mut out = [0u8; 64];
    let len = t.encode(&mut out).unwrap();
    assert_eq!(len, 4 + 2 + 18 + 28);
    assert_eq!(&out[2..4], &[0xE0, 0x00]); // M, D, R; reserved bits zero
    assert_eq!(&out[24..52], &rr.encode());
    assert!(n > 0);
}

#[test]
fn rdmap_07_ird_ord_limits() {
    let mut q: OrdQueue<8> = OrdQueue::new(2);
    let mut ok = 0;
    for i in 0..5 {
        if q.issue(Request::Read {
            sink_stag: i,
            sink_to: 0,
            size: 1,
        })
        .is_ok()
        {
            ok += 1;
        }
    }
    assert_eq!(ok, 2);
    assert_eq!(q.issue(Request::Flush), Err(OrdBusy::NoCredit));
    let mut ird = IrdCredits::new(2);
    ird.take().unwrap();
    ird.take().unwrap();
    assert_eq!(ird.take(), Err(TermCode::new(0, 2, 7)));
    ird.release();
    assert!(ird.take().is_ok());
    // A response frees the credit at once, but the request keeps its ring
    // slot until popped in order: a ring of N takes exactly N.
    let mut q: OrdQueue<2> = OrdQueue::new(8);
    let rd = |i| Request::Read {
        sink_stag: i,
        sink_to: 0,
        size: 1,
    };
    q.issue(rd(1)).unwrap();
    q.issue(rd(2)).unwrap();
    assert_eq!(q.issue(rd(3)), Err(OrdBusy::RingFull));
    assert_eq!(q.on_read_response(1, 0, 1, true), Ok(true));
    assert_eq!(q.inflight(), 1);
    assert_eq!(q.issue(rd(3)), Err(OrdBusy::RingFull));
    assert_eq!(q.pop_completed(), Some(rd(1)));
    q.issue(rd(3)).unwrap();
    assert_eq!(q.on_read_response(2, 0, 1, true), Ok(true));
    assert_eq!(q.on_read_response(3, 0, 1, true), Ok(true));
    assert_eq!(q.pop_completed(), Some(rd(2)));
    assert_eq!(q.pop_completed(), Some(rd(3)));
    assert!(q.is_empty());
}

#[test]
fn rdmap_08_send_buffer_checks() {
    let mut rx = RxUntagged::new();
    assert_eq!(
        rx.check(&untagged_seg(Opcode::Send, 0, 1, 0, true, 8), None),
        Err(TermCode::new(1, 2, 2))
    );
    let mut rx = RxUntagged::new();
    assert_eq!(
        rx.check(&untagged_seg(Opcode::Send, 0, 1, 0, true, 8), Some(4)),
        Err(TermCode::new(1, 2, 5))
    );
    let mut rx = RxUntagged::new();
    assert!(rx
        .check(&untagged_seg(Opcode::Send, 0, 1, 0, true, 0), Some(0))
        .is_ok());
}

#[test]
fn rdmap_09_send_with_invalidate() {
    for op in [Opcode::SendInv, Opcode::SendSeInv] {
        assert!(op.has_invalidate());
        let m = msg(
            op,
            Placement::Untagged {
                inv_stag: 0xCAFE,
                qn: 0,
                msn: 1,
                mo: 0,
            },
            Body::None,
            3,
        );
        let s = one(cfg_all(false), &encode(m, b"abc", 100, false));
        assert!(matches!(
            s.hdr.placement,
            Placement::Untagged {
                inv_stag: 0xCAFE,
                ..
            }
        ));
    }
    assert_eq!(
        access_error(Target::SendInvalidate, Fault::InvalidStag).0,
        TermCode::new(0, 2, 9)
    );
    assert_eq!(
        access_error(Target::SendInvalidate, Fault::Rights).0,
        TermCode::new(0, 1, 9)
    );
    assert_eq!(
        access_error(Target::SendInvalidate, Fault::Pd).0,
        TermCode::new(0, 1, 9)
    );
}

#[test]
fn rdmap_10_solicited_events() {
    for op in Opcode::ALL {
        let want = matches!(op, Opcode::SendSe | Opcode::SendSeInv | Opcode::ImmDataSe);
        assert_eq!(op.is_solicited(), want, "{op:?}");
    }
}

#[test]
fn rdmap_11_validation_table() {
    for t in [
        Target::ReadRequest,
        Target::Atomic,
        Target::Flush,
        Target::Verify,
        Target::AtomicWrite,
    ] {
        assert_eq!(
            access_error(t, Fault::InvalidStag).0,
            TermCode::new(0, 1, 0)
        );
        assert_eq!(access_error(t, Fault::Rights).0, TermCode::new(0, 1, 2));
        assert_eq!(access_error(t, Fault::Bounds).0, TermCode::new(0, 1, 1));
        assert_eq!(access_error(t, Fault::Pd).0, TermCode::new(0, 1, 3));
    }
}

#[test]
fn rdmap_12_read_completes_after_last_response() {
    let mut q: OrdQueue<4> = OrdQueue::new(4);
    q.issue(Request::Read {
        sink_stag: 1,
        sink_to: 0,
        size: 20,
    })
    .unwrap();
    q.on_read_response(1, 0, 10, false).unwrap();
    assert_eq!(q.pop_completed(), None);
    q.on_read_response(1, 10, 10, true).unwrap();
    assert!(matches!(q.pop_completed(), Some(Request::Read { .. })));
    assert!(q.is_empty());
}

#[test]
fn rdmap_13_parser_stops_after_error() {
    let raw = raw_untagged(c0(false, true), 0x80 | 3, 0, 0, 1, 0);
    let mut b = raw_fpdu(&raw, false);
    let good = encode(
        msg(Opcode::Send, untagged(1), Body::None, 0),
        &[],
        100,
        false,
    );
    b.extend_from_slice(&good);
    let mut p =
        rsiw_wire::wire::rx::RxParser::new(cfg_all(false), rsiw_wire::wire::crc::SoftCrc32c);
    let (_, ev) = p.feed(&b);
    assert!(matches!(ev, rsiw_wire::wire::rx::RxEvent::Error(_)));
    let (n, ev2) = p.feed(&good);
    assert_eq!(n, 0);
    assert!(matches!(ev2, rsiw_wire::wire::rx::RxEvent::Error(_)));
    assert!(p.error().is_some());
}

#[test]
fn rdmap_14_message_size_limit() {
    let m = msg(
        Opcode::Write,
        Placement::Tagged { stag: 1, to: 0 },
        Body::None,
        u32::MAX,
    );
    let s = Segmenter::new(m, 1454).unwrap();
    assert_eq!(s.fpdu_count(), u32::MAX.div_ceil(1440));
    let w = msg(
        Opcode::Write,
        Placement::Tagged {
            stag: 1,
            to: u64::MAX - 1,
        },
        Body::None,
        4,
    );
    assert_eq!(Segmenter::new(w, 1454).err(), Some(TxError::Wrap));
    let s = msg(
        Opcode::Send,
        Placement::Untagged {
            inv_stag: 0,
            qn: 0,
            msn: 1,
            mo: 1,
        },
        Body::None,
        u32::MAX,
    );
    assert_eq!(Segmenter::new(s, 1454).err(), Some(TxError::Wrap));
}

// ---- Terminate -----------------------------------------------------------

#[test]
fn term_01_layout() {
    let hdr = raw_tagged(c0(true, true), ctl(0), 0xAA, 0x10);
    let t = Terminate::with_headers(TermCode::new(1, 1, 1), 114, &hdr, None);
    let mut out = [0u8; 64];
    let n = t.encode(&mut out).unwrap();
    assert_eq!(n, 4 + 2 + 14);
    assert_eq!(&out[..4], &[0x11, 0x01, 0xC0, 0x00]);
    assert_eq!(&out[4..6], &114u16.to_be_bytes());
    assert_eq!(&out[6..20], &hdr[..]);
    let d = Terminate::decode(&out[..n]).unwrap();
    assert_eq!(d, t);
    assert_eq!(d.code, TermCode::new(1, 1, 1));
    // Lengths that do not match the flags are rejected.
    assert!(Terminate::decode(&out[..n - 1]).is_none());
    assert!(Terminate::decode(&out[..3]).is_none());
    assert_eq!(Opcode::Terminate as u8, 7);
}

#[test]
fn term_02_code_tables() {
    let rdmap_prot = [
        (RdmapCode::InvalidStag, 0),
        (RdmapCode::BaseBounds, 1),
        (RdmapCode::AccessRights, 2),
        (RdmapCode::StagNotAssociated, 3),
        (RdmapCode::ToWrap, 4),
        (RdmapCode::CannotInvalidate, 9),
        (RdmapCode::Unspecified, 0xFF),
    ];
    for (c, v) in rdmap_prot {
        let t = TermCode::protection(c);
        assert_eq!(t.to_bytes(), [0x01, v]);
        assert!(t.is_known());
    }
    let rdmap_op = [
        (RdmapCode::InvalidVersion, 5),
        (RdmapCode::UnexpectedOpcode, 6),
        (RdmapCode::CatastrophicStream, 7),
        (RdmapCode::CatastrophicGlobal, 8),
        (RdmapCode::CannotInvalidate, 9),
        (RdmapCode::Unspecified, 0xFF),
    ];
    for (c, v) in rdmap_op {
        let t = TermCode::operation(c);
        assert_eq!(t.to_bytes(), [0x02, v]);
        assert!(t.is_known());
    }
    assert_eq!(TermCode::rdmap_catastrophic().to_bytes(), [0x00, 0x00]);
    assert!(!TermCode::new(0, 1, 5).is_known()); // version is not a protection code
    assert!(!TermCode::new(0, 2, 0).is_known());
    for v in 0..=4u8 {
        assert!(TermCode::new(1, 1, v).is_known());
    }
    for v in 1..=6u8 {
        assert!(TermCode::new(1, 2, v).is_known());
    }
    assert!(!TermCode::new(1, 2, 0).is_known());
    assert!(TermCode::new(1, 0, 0).is_known());
    assert!(!TermCode::new(3, 0, 1).is_known());
    // The whole TERM-02 table, every triple: exactly these are defined.
    for layer in 0..16u8 {
        for etype in 0..16u8 {
            for ecode in 0..=255u8 {
                let want = match (layer, etype) {
                    (0, 0) | (1, 0) => ecode == 0,
                    (0, 1) => matches!(ecode, 0..=4 | 9 | 0xFF),
                    (0, 2) => matches!(ecode, 5..=9 | 0xFF),
                    (1, 1) => ecode <= 4,
                    (1, 2) => matches!(ecode, 1..=6),
                    (2, 0) => matches!(ecode, 1..=7),
                    _ => false,
                };
                let t = TermCode::new(layer, etype, ecode);
                assert_eq!(t.is_known(), want, "{layer}/{etype}/{ecode:#x}");
            }
        }
    }
    for b in 0..=255u8 {
        let t = TermCode::from_bytes([b, 0x42]);
        assert_eq!(t.to_bytes(), [b, 0x42]);
    }
}

#[test]
fn term_03_what_to_echo() {
    // Incoming error on an Atomic Request: D=1, R=0, no RDMA header bytes.
    let mut raw = raw_untagged(c0(false, true), ctl(0xA), 0, 1, 1, 0);
    raw.extend_from_slice(&AtomicRequest::fetch_add(1, 2, 4, 1).encode());
    let b = raw_fpdu(&raw, false);
    let mut p =
        rsiw_wire::wire::rx::RxParser::new(cfg_all(false), rsiw_wire::wire::crc::SoftCrc32c);
    let _ = p.feed(&b);
    let (code, echo) = access_error(Target::Atomic, Fault::Misaligned);
    let t = p.terminate_for(code, echo);
    let mut out = [0u8; 64];
    let n = t.encode(&mut out).unwrap();
    assert_eq!(n, 24);
    assert_eq!(out[2] & 0xE0, 0xC0); // M, D; no R
    assert_eq!(&out[6..24], &raw[..18]);
    // Error found while building an outgoing message: no headers.
    let t = Terminate::bare(TermCode::new(0, 2, 7));
    assert_eq!(t.encode(&mut out), Some(4));
    assert_eq!(&out[..4], &[0x02, 0x07, 0x00, 0x00]);
}

#[test]
fn term_04_single_terminate_on_qn2() {
    let mut tx = TxMsn::new();
    let msn = tx.take(QN_TERMINATE).unwrap();
    assert_eq!(msn, 1);
    let t = Terminate::bare(TermCode::llp(LlpCode::Crc));
    let m = msg(Opcode::Terminate, untagged(msn), Body::Terminate(t), 0);
    let mut s = Segmenter::new(m, 1454).unwrap();
    let f = s.next_fpdu().unwrap();
    assert!(f.last);
    assert!(s.next_fpdu().is_none());
    assert_eq!(f.ulpdu_len, 22);
    assert_eq!(&f.header()[8..12], &2u32.to_be_bytes());
    // A Terminate may not carry payload.
    let m = msg(Opcode::Terminate, untagged(1), Body::Terminate(t), 4);
    assert_eq!(
        Segmenter::new(m, 1454).err(),
        Some(TxError::UnexpectedPayload)
    );
}

#[test]
fn term_05_receiving_terminate() {
    let echoed = raw_tagged(c0(true, true), ctl(0), 9, 9);
    let t = Terminate::with_headers(TermCode::new(0, 1, 0), 14, &echoed, None);
    let b = encode(
        msg(Opcode::Terminate, untagged(1), Body::Terminate(t), 0),
        &[],
        1000,
        true,
    );
    let s = one(cfg_all(true), &b);
    assert_eq!(s.hdr.opcode, Opcode::Terminate);
    assert_eq!(s.body, Body::Terminate(t));
    assert_eq!(s.payload_len, 0);
    // A Terminate whose flags do not match its length: 0/2/07.
    let mut raw = raw_untagged(c0(false, true), ctl(7), 0, 2, 1, 0);
    raw.extend_from_slice(&[0x00, 0x00, 0x40, 0x00, 0, 1]);
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 7)
    );
}

// ---- RFC 7306 --------------------------------------------------------------

#[test]
fn ext_01_common_header_rules() {
    let bodies = [
        (Opcode::ImmData, Body::Immediate([1; 8])),
        (Opcode::ImmDataSe, Body::Immediate([2; 8])),
        (
            Opcode::AtomicRequest,
            Body::AtomicRequest(AtomicRequest::fetch_add(1, 2, 0, 1)),
        ),
        (
            Opcode::AtomicResponse,
            Body::AtomicResponse(AtomicResponse { req_id: 1, orig: 2 }),
        ),
    ];
    for (op, body) in bodies {
        let p = Placement::Untagged {
            inv_stag: 0xFFFF_FFFF,
            qn: 0,
            msn: 1,
            mo: 0,
        };
        let b = encode(msg(op, p, body, 0), &[], 1000, false);
        assert_eq!(&b[4..8], &[0, 0, 0, 0], "{op:?}");
        assert_eq!(b[3] & 0xC0, 0x40);
        assert_eq!(b[3] & 0x0F, op as u8);
        assert_eq!(b[2] & DDP_T, 0);
    }
}

#[test]
fn ext_02_validation_applies_to_new_opcodes() {
    for op in [0x8u8, 0x9, 0xA, 0xB] {
        let raw = raw_untagged(0x42 | DDP_L, ctl(op), 0, 0, 1, 0);
        let mut v = raw.clone();
        v.extend_from_slice(&[0u8; 52]);
        let op_e = Opcode::from_u8(op).unwrap();
        v.truncate(18 + op_e.rdmap_hdr_len());
        assert_eq!(
            parse_err(cfg_all(false), &raw_fpdu(&v, false)).code,
            TermCode::new(1, 2, 6)
        );
        v[0] = c0(false, true);
        v[1] = 0xC0 | op;
        assert_eq!(
            parse_err(cfg_all(false), &raw_fpdu(&v, false)).code,
            TermCode::new(0, 2, 5)
        );
    }
}

#[test]
fn ext_03_registries() {
    assert_eq!(Opcode::ImmData as u8, 0x8);
    assert_eq!(Opcode::ImmDataSe as u8, 0x9);
    assert_eq!(Opcode::AtomicRequest as u8, 0xA);
    assert_eq!(Opcode::AtomicResponse as u8, 0xB);
    assert_eq!((AOP_FETCH_ADD, AOP_RESERVED, AOP_CMP_SWAP), (0, 1, 2));
    assert_eq!(
        (QN_SEND, QN_READ_REQ, QN_TERMINATE, QN_RESPONSE),
        (0, 1, 2, 3)
    );
    // Which extension (and so which negotiated feature) each opcode needs:
    // 0x0-0x7 RFC 5040, 0x8-0xB RFC 7306, 0xC-0x11 the commit draft.
    for op in Opcode::ALL {
        let want = match op as u8 {
            0x0..=0x7 => Extension::Base,
            0x8..=0xB => Extension::Rfc7306,
            0xC..=0x11 => Extension::Commit,
            v => panic!("opcode {v:#x}"),
        };
        assert_eq!(op.extension(), want, "{op:?}");
    }
    // An RFC 7306 message with only RFC 7306 enabled parses; with only the
    // commit extensions enabled it is an unexpected opcode (0/2/06).
    let imm = encode(
        msg(Opcode::ImmData, untagged(1), Body::Immediate([9; 8]), 0),
        &[],
        1000,
        false,
    );
    let only = |rfc7306, commit| RxConfig {
        rfc7306,
        commit,
        ..RxConfig::default()
    };
    assert_eq!(one(only(true, false), &imm).hdr.opcode, Opcode::ImmData);
    assert_eq!(
        parse_err(only(false, true), &imm).code,
        TermCode::new(0, 2, 6)
    );
}

#[test]
fn atom_01_both_operations_supported() {
    for r in [
        AtomicRequest::fetch_add(1, 2, 8, 1),
        AtomicRequest::cmp_swap(1, 2, 8, 3, 4),
        AtomicRequest {
            add_swap_mask: 0x8000_0000,
            ..AtomicRequest::fetch_add(1, 2, 8, 1)
        },
        AtomicRequest {
            compare_mask: 0xFF,
            add_swap_mask: 0xFF00,
            ..AtomicRequest::cmp_swap(1, 2, 8, 3, 4)
        },
    ] {
        assert!(r.check_aopcode().is_ok());
        let b = encode(
            msg(
                Opcode::AtomicRequest,
                untagged(1),
                Body::AtomicRequest(r),
                0,
            ),
            &[],
            1000,
            false,
        );
        assert_eq!(one(cfg_all(false), &b).body, Body::AtomicRequest(r));
    }
}

#[test]
fn atom_02_request_golden() {
    let r = AtomicRequest::fetch_add(0x0102_0304, 0xAB, 0x1000, 1);
    let b = encode(
        msg(
            Opcode::AtomicRequest,
            untagged(1),
            Body::AtomicRequest(r),
            0,
        ),
        &[],
        1000,
        false,
    );
    assert_eq!(b.len(), 76);
    #[rustfmt::skip]
    let want: [u8; 72] = [
        0x00, 0x46,                                     // ULPDU_Length 70
        0x41, 0x4A,                                     // L, DV=1; RV=1, opcode 0xA
        0, 0, 0, 0,                                     // Invalidate STag: zero
        0, 0, 0, 1,                                     // QN 1
        0, 0, 0, 1,                                     // MSN 1
        0, 0, 0, 0,                                     // MO 0
        0, 0, 0, 0,                                     // reserved | AOpCode FetchAdd
        1, 2, 3, 4,                                     // Request Identifier
        0, 0, 0, 0xAB,                                  // Remote STag
        0, 0, 0, 0, 0, 0, 0x10, 0,                      // Remote TO
        0, 0, 0, 0, 0, 0, 0, 1,                         // Add Data
        0, 0, 0, 0, 0, 0, 0, 0,                         // Add Mask
        0, 0, 0, 0, 0, 0, 0, 0,                         // Compare Data
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, // Compare Mask
    ];
    assert_eq!(&b[..72], &want[..]);
}

#[test]
fn atom_03_aopcode_values() {
    let mut r = AtomicRequest::fetch_add(1, 2, 8, 1);
    r.aopcode = AOP_RESERVED;
    assert_eq!(r.check_aopcode(), Err(TermCode::new(0, 2, 6)));
    for a in 3..16u8 {
        r.aopcode = a;
        assert_eq!(r.check_aopcode(), Err(TermCode::new(0, 2, 6)));
    }
    // Reserved bits above the AOpCode are ignored on receive.
    let mut enc = AtomicRequest::cmp_swap(1, 2, 8, 3, 4).encode();
    enc[0] = 0xFF;
    enc[3] |= 0xF0;
    assert_eq!(AtomicRequest::decode(&enc).aopcode, AOP_CMP_SWAP);
}

#[test]
fn atom_04_request_is_single_qn1_segment() {
    let r = AtomicRequest::fetch_add(1, 2, 8, 1);
    let s = one(
        cfg_all(false),
        &encode(
            msg(
                Opcode::AtomicRequest,
                untagged(1),
                Body::AtomicRequest(r),
                0,
            ),
            &[],
            1000,
            false,
        ),
    );
    assert!(matches!(s.hdr.placement, Placement::Untagged { qn: 1, .. }));
    let mut rx = RxUntagged::new();
    assert!(rx.check(&s, Some(u64::MAX)).unwrap().complete);
    assert_eq!(rx.expected_msn(1), Some(2));
    let mut raw = raw_untagged(c0(false, false), ctl(0xA), 0, 1, 1, 0);
    raw.extend_from_slice(&r.encode());
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 7)
    );
    // Extra bytes after the header: 0/2/07 too.
    let mut raw = raw_untagged(c0(false, true), ctl(0xA), 0, 1, 1, 0);
    raw.extend_from_slice(&r.encode());
    raw.push(0);
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 7)
    );
}

#[test]
fn atom_05_response_layout() {
    let r = AtomicResponse {
        req_id: 0xAABB_CCDD,
        orig: 0x0102_0304_0506_0708,
    };
    let b = encode(
        msg(
            Opcode::AtomicResponse,
            untagged(1),
            Body::AtomicResponse(r),
            0,
        ),
        &[],
        1000,
        false,
    );
    assert_eq!(&b[..2], &30u16.to_be_bytes());
    assert_eq!(&b[8..12], &3u32.to_be_bytes());
    assert_eq!(
        &b[20..32],
        &[0xAA, 0xBB, 0xCC, 0xDD, 1, 2, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(b.len(), 36);
    assert_eq!(one(cfg_all(false), &b).body, Body::AtomicResponse(r));
}

fn qn3(op: Opcode, body: Body, msn: u32) -> Segment {
    Segment {
        hdr: DdpHeader {
            opcode: op,
            last: true,
            placement: Placement::Untagged {
                inv_stag: 0,
                qn: 3,
                msn,
                mo: 0,
            },
        },
        ulpdu_len: 18,
        body,
        payload_len: 0,
    }
}

#[test]
fn atom_06_request_identifier_matching() {
    let mut q: OrdQueue<4> = OrdQueue::new(4);
    q.issue(Request::Atomic { req_id: 7 }).unwrap();
    let bad = qn3(
        Opcode::AtomicResponse,
        Body::AtomicResponse(AtomicResponse { req_id: 8, orig: 0 }),
        1,
    );
    assert_eq!(q.on_response(&bad), Err(TermCode::new(0, 2, 6)));
    let good = qn3(
        Opcode::AtomicResponse,
        Body::AtomicResponse(AtomicResponse { req_id: 7, orig: 0 }),
        1,
    );
    assert_eq!(q.on_response(&good), Ok(true));
}

#[test]
fn atom_07_masked_fetch_add() {
    assert_eq!(
        fetch_add_masked(0x0000_0000_FFFF_FFFF, 1, 0x0000_0000_8000_0000),
        0
    );
    assert_eq!(
        fetch_add_masked(0x0000_0000_FFFF_FFFF, 1, 0),
        0x0000_0001_0000_0000
    );
    assert_eq!(fetch_add_masked(0x1234, 0xFF0F, !0), 0x1234 ^ 0xFF0F);
    assert_eq!(fetch_add_masked(u64::MAX, 1, 0), 0);
    // Reference bit loop (RFC 7306 pseudocode) against the closed form.
    fn reference(orig: u64, add: u64, mask: u64) -> u64 {
        let mut carry = false;
        let mut out = 0u64;
        for i in 0..64 {
            let bit = 1u64 << i;
            let a = orig & bit != 0;
            let b = add & bit != 0;
            let s = a ^ b ^ carry;
            carry = (a && b) || (carry && (a ^ b));
            carry = carry && (mask & bit == 0);
            if s {
                out |= bit;
            }
        }
        out
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (o, a, m) = (
            x,
            x.rotate_left(17) ^ 0x5555,
            x.rotate_right(9) & x.rotate_left(3),
        );
        assert_eq!(fetch_add_masked(o, a, m), reference(o, a, m));
    }
}

#[test]
fn atom_08_masked_cmp_swap() {
    let orig = 0x1234_5678_9ABC_DEF0;
    assert_eq!(
        cmp_swap_masked(
            orig,
            0x0000_0000_9ABC_DEF0,
            0x0000_0000_FFFF_FFFF,
            0xAAAA_AAAA_0000_0000,
            0xFFFF_FFFF_0000_0000
        ),
        0xAAAA_AAAA_9ABC_DEF0
    );
    assert_eq!(
        cmp_swap_masked(
            orig,
            0x0000_0000_9ABC_DEF1,
            0x0000_0000_FFFF_FFFF,
            0xAAAA_AAAA_0000_0000,
            0xFFFF_FFFF_0000_0000
        ),
        orig
    );
    assert_eq!(cmp_swap_masked(5, 5, !0, 9, !0), 9);
    assert_eq!(cmp_swap_masked(5, 6, !0, 9, !0), 5);
}

#[test]
fn atom_09_unused_field_values() {
    let f = AtomicRequest::fetch_add(1, 2, 3, 4);
    assert_eq!((f.add_swap_mask, f.compare, f.compare_mask), (0, 0, !0));
    let c = AtomicRequest::cmp_swap(1, 2, 3, 4, 5);
    assert_eq!((c.add_swap_mask, c.compare_mask), (!0, !0));
    assert_eq!((c.compare, c.add_swap), (4, 5));
}

#[test]
fn atom_10_big_endian_on_the_wire() {
    let r = AtomicRequest::cmp_swap(0, 0, 0, 0x0102_0304_0506_0708, 0x1112_1314_1516_1718);
    let b = r.encode();
    assert_eq!(
        &b[20..28],
        &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
    );
    assert_eq!(&b[36..44], &[1, 2, 3, 4, 5, 6, 7, 8]);
    let resp = AtomicResponse { req_id: 0, orig: 1 }.encode();
    assert_eq!(&resp[4..12], &[0, 0, 0, 0, 0, 0, 0, 1]);
}

#[test]
fn atom_11_alignment() {
    assert!(is_aligned8(0x1000));
    assert!(!is_aligned8(0x1004));
    assert!(!is_aligned8(1));
    assert_eq!(
        access_error(Target::Atomic, Fault::Misaligned),
        (TermCode::new(0, 2, 7), TermEcho::Ddp)
    );
}

#[test]
fn atom_12_access_checks() {
    assert_eq!(
        access_error(Target::Atomic, Fault::InvalidStag).0,
        TermCode::new(0, 1, 0)
    );
    assert_eq!(
        access_error(Target::Atomic, Fault::Bounds).0,
        TermCode::new(0, 1, 1)
    );
    assert_eq!(
        access_error(Target::Atomic, Fault::Rights).0,
        TermCode::new(0, 1, 2)
    );
    assert_eq!(
        access_error(Target::Atomic, Fault::Pd).0,
        TermCode::new(0, 1, 3)
    );
    assert_eq!(
        access_error(Target::Atomic, Fault::ToWrap).0,
        TermCode::new(0, 1, 4)
    );
    assert_eq!(check_range(0, 16, 12, 8), Err(Fault::Bounds));
}

#[test]
fn atom_13_unexpected_response() {
    let mut q: OrdQueue<4> = OrdQueue::new(4);
    let r = qn3(
        Opcode::AtomicResponse,
        Body::AtomicResponse(AtomicResponse { req_id: 1, orig: 0 }),
        1,
    );
    assert_eq!(q.on_response(&r), Err(TermCode::new(0, 2, 6)));
    // Wrong kind at the head: a Flush is expected.
    q.issue(Request::Flush).unwrap();
    assert_eq!(q.on_response(&r), Err(TermCode::new(0, 2, 6)));
}

#[test]
fn atom_14_shared_ird_pool() {
    let mut ird = IrdCredits::new(4);
    for _ in 0..4 {
        ird.take().unwrap();
    }
    assert_eq!(ird.take(), Err(TermCode::new(0, 2, 7)));
    let mut q: OrdQueue<8> = OrdQueue::new(4);
    q.issue(Request::Read {
        sink_stag: 1,
        sink_to: 0,
        size: 1,
    })
    .unwrap();
    q.issue(Request::Atomic { req_id: 1 }).unwrap();
    q.issue(Request::Read {
        sink_stag: 2,
        sink_to: 0,
        size: 1,
    })
    .unwrap();
    q.issue(Request::Atomic { req_id: 2 }).unwrap();
    assert_eq!(
        q.issue(Request::Atomic { req_id: 3 }),
        Err(OrdBusy::NoCredit)
    );
}

#[test]
fn atom_16_completion_order() {
    let mut q: OrdQueue<8> = OrdQueue::new(8);
    q.issue(Request::Atomic { req_id: 1 }).unwrap();
    q.issue(Request::Read {
        sink_stag: 9,
        sink_to: 0,
        size: 4,
    })
    .unwrap();
    q.issue(Request::Atomic { req_id: 2 }).unwrap();
    // The Read Response arrives first (a reordering peer): no completion yet.
    q.on_read_response(9, 0, 4, true).unwrap();
    assert_eq!(q.pop_completed(), None);
    let a1 = qn3(
        Opcode::AtomicResponse,
        Body::AtomicResponse(AtomicResponse { req_id: 1, orig: 0 }),
        1,
    );
    q.on_response(&a1).unwrap();
    assert_eq!(q.pop_completed(), Some(Request::Atomic { req_id: 1 }));
    assert!(matches!(q.pop_completed(), Some(Request::Read { .. })));
    assert_eq!(q.pop_completed(), None);
    // Responses to two atomics must come in request order.
    let a3 = qn3(
        Opcode::AtomicResponse,
        Body::AtomicResponse(AtomicResponse { req_id: 3, orig: 0 }),
        2,
    );
    assert!(q.on_response(&a3).is_err());
}

#[test]
fn atom_17_discovery_without_support() {
    let base = RxConfig::default();
    let r = AtomicRequest::fetch_add(1, 2, 8, 0);
    let b = encode(
        msg(
            Opcode::AtomicRequest,
            untagged(1),
            Body::AtomicRequest(r),
            0,
        ),
        &[],
        1000,
        false,
    );
    assert_eq!(parse_err(base, &b).code, TermCode::new(0, 2, 6));
    let on = RxConfig {
        rfc7306: true,
        ..base
    };
    assert_eq!(one(on, &b).hdr.opcode, Opcode::AtomicRequest);
}

#[test]
fn imm_01_immediate_format() {
    for op in [Opcode::ImmData, Opcode::ImmDataSe] {
        let b = encode(
            msg(op, untagged(5), Body::Immediate(*b"ABCDEFGH"), 0),
            &[],
            1000,
            false,
        );
        assert_eq!(&b[..2], &26u16.to_be_bytes());
        assert_eq!(b.len(), 32);
        let s = one(cfg_all(false), &b);
        assert_eq!(s.body, Body::Immediate(*b"ABCDEFGH"));
        assert!(matches!(
            s.hdr.placement,
            Placement::Untagged { qn: 0, msn: 5, .. }
        ));
    }
}

#[test]
fn imm_02_exactly_eight_bytes() {
    let mut raw = raw_untagged(c0(false, true), ctl(8), 0, 0, 1, 0);
    raw.extend_from_slice(&[0u8; 9]);
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 7)
    );
    // Fewer than 8 bytes is the same error (D-02), not a framing error: the
    // FPDU and its DDP header are whole.
    for n in [0usize, 1, 7] {
        let mut raw = raw_untagged(c0(false, true), ctl(9), 0, 0, 1, 0);
        raw.extend_from_slice(&vec![0u8; n]);
        let e = parse_err(cfg_all(false), &raw_fpdu(&raw, false));
        assert_eq!(
            (e.code, e.echo),
            (TermCode::new(0, 2, 7), TermEcho::Ddp),
            "{n}"
        );
    }
}

#[test]
fn imm_03_shares_qn0_order_with_sends() {
    let mut rx = RxUntagged::new();
    let mut tx = TxMsn::new();
    for i in 0..100u32 {
        let op = if i % 3 == 0 {
            Opcode::ImmData
        } else {
            Opcode::Send
        };
        let msn = tx.take(op.queue().unwrap()).unwrap();
        assert_eq!(msn, i + 1);
        assert!(
            rx.check(&untagged_seg(op, 0, msn, 0, true, 0), Some(0))
                .unwrap()
                .complete
        );
    }
}

#[test]
fn imm_04_event_and_packing() {
    assert!(Opcode::ImmDataSe.is_solicited());
    assert!(!Opcode::ImmData.is_solicited());
    assert_eq!(imm::from_verbs([1, 2, 3, 4]), [1, 2, 3, 4, 0, 0, 0, 0]);
    assert_eq!(imm::to_verbs([1, 2, 3, 4, 9, 9, 9, 9]), [1, 2, 3, 4]);
    // Both hardware layouts of a 32-bit immediate in the 8-byte field.
    assert_eq!(imm::to_verbs([1, 2, 3, 4, 0, 0, 0, 0]), [1, 2, 3, 4]);
    assert_eq!(imm::to_verbs([0, 0, 0, 0, 1, 2, 3, 4]), [1, 2, 3, 4]);
    assert_eq!(imm::to_verbs([0; 8]), [0; 4]);
}

#[test]
fn imm_05_write_then_immediate() {
    let mut b = encode(
        msg(
            Opcode::Write,
            Placement::Tagged { stag: 3, to: 0 },
            Body::None,
            3000,
        ),
        &[1u8; 3000],
        1454,
        true,
    );
    b.extend(encode(
        msg(Opcode::ImmData, untagged(1), Body::Immediate([7; 8]), 0),
        &[],
        1454,
        true,
    ));
    let (evs, e) = parse(cfg_all(true), &b);
    assert!(e.is_none());
    let ss = segs(&evs);
    assert_eq!(ss.last().unwrap().hdr.opcode, Opcode::ImmData);
    assert!(ss[..ss.len() - 1]
        .iter()
        .all(|s| s.hdr.opcode == Opcode::Write));
    assert!(ss[ss.len() - 2].hdr.last);
}

// ---- Commit draft -------------------------------------------------------

#[test]
fn cmt_01_opcodes_and_golden() {
    let sink = SinkRange {
        stag: 0x10,
        len: 8,
        to: 0x20,
    };
    let all = [
        (
            Opcode::FlushRequest,
            1,
            Body::FlushRequest(FlushRequest {
                sink,
                flags: FLUSH_V,
            }),
            38,
        ),
        (Opcode::FlushResponse, 3, Body::None, 18),
        (
            Opcode::VerifyRequest,
            1,
            Body::VerifyRequest(VerifyRequest { sink }),
            34,
        ),
        (Opcode::VerifyResponse, 3, Body::None, 18 + 4),
        (
            Opcode::AtomicWriteRequest,
            1,
            Body::AtomicWriteRequest(AtomicWriteRequest { sink, data: [9; 8] }),
            42,
        ),
        (Opcode::AtomicWriteResponse, 3, Body::None, 18),
    ];
    for (op, qn, body, ulpdu) in all {
        let pl = if op == Opcode::VerifyResponse { 4 } else { 0 };
        let b = encode(msg(op, untagged(1), body, pl), &[0xEE; 4], 1000, false);
        assert_eq!(u16::from_be_bytes([b[0], b[1]]), ulpdu, "{op:?}");
        assert_eq!(b[3], 0x40 | op as u8);
        assert_eq!(&b[4..8], &[0, 0, 0, 0]);
        assert_eq!(&b[8..12], &(qn as u32).to_be_bytes());
        let s = one(cfg_all(false), &b);
        assert_eq!((s.hdr.opcode, s.body), (op, body));
        // Disabled: 0/2/06 (0x10/0x11 decode as Write/Read Request with the
        // wrong T flag or length).
        let e = parse_err(
            RxConfig {
                rfc7306: true,
                ..RxConfig::default()
            },
            &b,
        );
        assert!(
            e.code == TermCode::new(0, 2, 6)
                || e.code == TermCode::llp(LlpCode::FpduStart)
                || e.code == TermCode::new(0, 2, 7),
            "{op:?} {e:?}"
        );
    }
    assert_eq!(Opcode::AtomicWriteResponse as u8, 0x11);
}

#[test]
fn cmt_02_shared_credits_and_qn3_matching() {
    let mut q: OrdQueue<8> = OrdQueue::new(2);
    q.issue(Request::Flush).unwrap();
    q.issue(Request::Verify).unwrap();
    assert_eq!(q.issue(Request::AtomicWrite), Err(OrdBusy::NoCredit));
    assert_eq!(
        q.on_response(&qn3(Opcode::VerifyResponse, Body::None, 1)),
        Err(TermCode::new(0, 2, 6))
    );
    assert_eq!(
        q.on_response(&qn3(Opcode::FlushResponse, Body::None, 1)),
        Ok(true)
    );
    assert_eq!(q.pop_completed(), Some(Request::Flush));
    q.issue(Request::AtomicWrite).unwrap();
    assert_eq!(
        q.on_response(&qn3(Opcode::VerifyResponse, Body::None, 2)),
        Ok(true)
    );
    assert_eq!(
        q.on_response(&qn3(Opcode::AtomicWriteResponse, Body::None, 3)),
        Ok(true)
    );
    assert_eq!(q.pop_completed(), Some(Request::Verify));
    assert_eq!(q.pop_completed(), Some(Request::AtomicWrite));
    // A Flush Response with payload is invalid.
    let mut raw = raw_untagged(c0(false, true), ctl(0xD), 0, 3, 1, 0);
    raw.push(1);
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 6)
    );
}

#[test]
fn cmt_04_responder_validation_codes() {
    assert_eq!(
        access_error(Target::Flush, Fault::Bounds).0,
        TermCode::new(0, 1, 1)
    );
    assert_eq!(
        access_error(Target::Verify, Fault::ToWrap).0,
        TermCode::new(0, 1, 4)
    );
    assert_eq!(
        access_error(Target::AtomicWrite, Fault::InvalidStag).0,
        TermCode::new(0, 1, 0)
    );
}

#[test]
fn cmt_05_requester_side_errors() {
    // An error building an outgoing message: Terminate without headers.
    let t = Terminate::bare(TermCode::new(0, 2, 7));
    assert!(t.is_empty());
    assert_eq!((t.ddp_hdr_len, t.rdma_hdr), (0, None));
}

#[test]
fn cmt_06_discovery_without_support() {
    let f = FlushRequest {
        sink: SinkRange {
            stag: 1,
            len: 0,
            to: 0,
        },
        flags: FLUSH_V | FLUSH_R,
    };
    let b = encode(
        msg(Opcode::FlushRequest, untagged(1), Body::FlushRequest(f), 0),
        &[],
        1000,
        false,
    );
    assert_eq!(
        parse_err(RxConfig::default(), &b).code,
        TermCode::new(0, 2, 6)
    );
}

#[test]
fn flush_01_request_layout() {
    let f = FlushRequest {
        sink: SinkRange {
            stag: 0x0A0B_0C0D,
            len: 0x100,
            to: 0x1122_3344_5566_7788,
        },
        flags: FLUSH_P,
    };
    let e = f.encode();
    assert_eq!(&e[0..4], &[0x0A, 0x0B, 0x0C, 0x0D]);
    assert_eq!(&e[4..8], &0x100u32.to_be_bytes());
    assert_eq!(&e[8..16], &0x1122_3344_5566_7788u64.to_be_bytes());
    assert_eq!(&e[16..20], &1u32.to_be_bytes());
    assert_eq!(FlushRequest::decode(&e), f);
}

#[test]
fn flush_02_flags() {
    let mk = |flags| FlushRequest {
        sink: SinkRange::default(),
        flags,
    };
    assert!(mk(FLUSH_P).check_flags().is_ok());
    assert!(mk(FLUSH_V).check_flags().is_ok());
    assert!(mk(FLUSH_P | FLUSH_V | FLUSH_R).check_flags().is_ok());
    assert_eq!(mk(FLUSH_R).check_flags(), Err(TermCode::new(0, 2, 0xFF)));
    assert_eq!(mk(0).check_flags(), Err(TermCode::new(0, 2, 0xFF)));
    assert_eq!(
        mk(FLUSH_V | 0x8).check_flags(),
        Err(TermCode::new(0, 2, 0xFF))
    );
    assert!(mk(FLUSH_V | FLUSH_R).whole_region());
    assert!(!mk(FLUSH_V).whole_region());
    assert_eq!((FLUSH_P, FLUSH_V, FLUSH_R), (1, 2, 4));
}

#[test]
fn flush_04_permission() {
    let (code, echo) = access_error(Target::Flush, Fault::Rights);
    assert_eq!((code, echo), (TermCode::new(0, 1, 2), TermEcho::Ddp));
    // On the wire: 0/1/02 with the Flush Request's DDP header, no RDMA
    // header (only a Read Request's is echoed).
    let f = FlushRequest {
        sink: SinkRange {
            stag: 0x55,
            len: 4096,
            to: 0x1000,
        },
        flags: FLUSH_P,
    };
    let (req, term) = commit_term(Opcode::FlushRequest, Body::FlushRequest(f), &[], code, echo);
    assert_term_echoes_ddp(&term, &req, [0x01, 0x02]);
    assert_eq!(req[2] & 0xC0, 0x40, "untagged, L=1");
    assert_eq!(&req[8..12], &1u32.to_be_bytes(), "QN 1");
}

#[test]
fn flush_05_response_has_no_payload() {
    let b = encode(
        msg(Opcode::FlushResponse, untagged(1), Body::None, 0),
        &[],
        1000,
        false,
    );
    assert_eq!(b.len(), 24);
    let s = one(cfg_all(false), &b);
    assert_eq!(s.payload_len, 0);
    assert!(Segmenter::new(msg(Opcode::FlushResponse, untagged(1), Body::None, 1), 1000).is_err());
}

#[test]
fn flush_06_failure_code() {
    assert_eq!(commit_failure(), TermCode::new(0, 2, 0xFF));
    assert!(commit_failure().is_known());
}

#[test]
fn verify_01_request_with_optional_hash() {
    let v = VerifyRequest {
        sink: SinkRange {
            stag: 1,
            len: 64,
            to: 8,
        },
    };
    let b = encode(
        msg(
            Opcode::VerifyRequest,
            untagged(1),
            Body::VerifyRequest(v),
            0,
        ),
        &[],
        1000,
        false,
    );
    assert_eq!(&b[..2], &34u16.to_be_bytes());
    assert_eq!(one(cfg_all(false), &b).payload_len, 0);
    let hash = [0x5Au8; 32];
    let b = encode(
        msg(
            Opcode::VerifyRequest,
            untagged(1),
            Body::VerifyRequest(v),
            32,
        ),
        &hash,
        1000,
        false,
    );
    let (evs, e) = parse(cfg_all(false), &b);
    assert!(e.is_none());
    assert_eq!(segs(&evs)[0].body, Body::VerifyRequest(v));
    assert_eq!(evs[1], Ev::Data(hash.to_vec()));
    // A hash that does not fit one segment cannot be sent.
    let big = msg(
        Opcode::VerifyRequest,
        untagged(1),
        Body::VerifyRequest(v),
        2000,
    );
    assert_eq!(
        Segmenter::new(big, 1000).err(),
        Some(TxError::MulpduTooSmall)
    );
    // Exactly one full segment (MULPDU 1000 - 18 - 16 = 966 hash bytes)
    // is fine and is sent as one FPDU with L=1; one byte more is not.
    let fit = msg(
        Opcode::VerifyRequest,
        untagged(1),
        Body::VerifyRequest(v),
        966,
    );
    let mut sg = Segmenter::new(fit, 1000).unwrap();
    let p = sg.next_fpdu().unwrap();
    assert_eq!((p.ulpdu_len, p.payload_len, p.last), (1000, 966, true));
    assert!(sg.next_fpdu().is_none());
    let over = msg(
        Opcode::VerifyRequest,
        untagged(1),
        Body::VerifyRequest(v),
        967,
    );
    assert_eq!(
        Segmenter::new(over, 1000).err(),
        Some(TxError::MulpduTooSmall)
    );
}

#[test]
fn verify_03_permission() {
    let (code, echo) = access_error(Target::Verify, Fault::Rights);
    assert_eq!((code, echo), (TermCode::new(0, 1, 2), TermEcho::Ddp));
    let v = VerifyRequest {
        sink: SinkRange {
            stag: 0x66,
            len: 512,
            to: 0,
        },
    };
    let (req, term) = commit_term(
        Opcode::VerifyRequest,
        Body::VerifyRequest(v),
        &[0xAB; 32],
        code,
        echo,
    );
    assert_term_echoes_ddp(&term, &req, [0x01, 0x02]);
    // The echoed segment length covers the 32-byte hash.
    assert_eq!(u16::from_be_bytes([term[4], term[5]]), 18 + 16 + 32);
}

#[test]
fn verify_04_mismatch_code() {
    assert_eq!(commit_failure().to_bytes(), [0x02, 0xFF]);
    // A mismatch found while processing a received Verify: Terminate
    // 0/2/FF echoing the Verify Request's DDP header.
    let v = VerifyRequest {
        sink: SinkRange {
            stag: 0x77,
            len: 64,
            to: 8,
        },
    };
    let (req, term) = commit_term(
        Opcode::VerifyRequest,
        Body::VerifyRequest(v),
        &[1; 8],
        commit_failure(),
        TermEcho::Ddp,
    );
    assert_term_echoes_ddp(&term, &req, [0x02, 0xFF]);
    assert_eq!(
        Terminate::decode(&term).map(|t| t.code),
        Some(TermCode::new(0, 2, 0xFF))
    );
    // The mismatch is known only once the whole hash is in, after End:
    // the Terminate still echoes the Verify Request, until the next FPDU's
    // first byte arrives.
    use rsiw_wire::wire::crc::SoftCrc32c;
    use rsiw_wire::wire::rx::{RxEvent, RxParser};
    let mut b = req.clone();
    b.extend_from_slice(&req);
    let mut p = RxParser::new(cfg_all(true), SoftCrc32c);
    let mut off = 0;
    loop {
        let (n, ev) = p.feed(&b[off..req.len()]);
        off += n;
        if ev == RxEvent::End {
            break;
        }
        assert!(
            !matches!(ev, RxEvent::Error(_) | RxEvent::NeedMore),
            "{ev:?}"
        );
    }
    assert_eq!(off, req.len());
    assert_eq!(p.feed(&[]), (0, RxEvent::NeedMore));
    let mut out = [0u8; TERM_MAX_LEN];
    let t = p.terminate_for(commit_failure(), TermEcho::Ddp);
    let n = t.encode(&mut out).unwrap();
    assert_term_echoes_ddp(&out[..n], &req, [0x02, 0xFF]);
    assert_eq!(p.feed(&b[off..off + 1]), (1, RxEvent::NeedMore));
    assert!(p.terminate_for(commit_failure(), TermEcho::Ddp).is_empty());
}

#[test]
fn verify_05_empty_response_is_invalid() {
    let raw = raw_untagged(c0(false, true), ctl(0xF), 0, 3, 1, 0);
    assert_eq!(
        parse_err(cfg_all(false), &raw_fpdu(&raw, false)).code,
        TermCode::new(0, 2, 6)
    );
    let mut raw = raw_untagged(c0(false, true), ctl(0xF), 0, 3, 1, 0);
    raw.extend_from_slice(&[1, 2]);
    assert!(parse(cfg_all(false), &raw_fpdu(&raw, false)).1.is_none());
}

#[test]
fn awrite_01_request_and_length() {
    let a = AtomicWriteRequest {
        sink: SinkRange {
            stag: 2,
            len: 8,
            to: 16,
        },
        data: *b"12345678",
    };
    let e = a.encode();
    assert_eq!(&e[16..24], b"12345678");
    assert_eq!(AtomicWriteRequest::decode(&e), a);
    assert!(a.check_len().is_ok());
    let bad = AtomicWriteRequest {
        sink: SinkRange { len: 4, ..a.sink },
        ..a
    };
    assert_eq!(bad.check_len(), Err(TermCode::new(0, 2, 7)));
}

#[test]
fn awrite_02_target_checks() {
    assert_eq!(
        access_error(Target::AtomicWrite, Fault::Misaligned).0,
        TermCode::new(0, 2, 7)
    );
    assert_eq!(
        access_error(Target::AtomicWrite, Fault::Rights).0,
        TermCode::new(0, 1, 2)
    );
    assert_eq!(
        access_error(Target::AtomicWrite, Fault::Length).0,
        TermCode::new(0, 2, 7)
    );
}

#[test]
fn awrite_05_response() {
    let b = encode(
        msg(Opcode::AtomicWriteResponse, untagged(1), Body::None, 0),
        &[],
        1000,
        false,
    );
    assert_eq!(&b[..2], &18u16.to_be_bytes());
    assert_eq!(&b[8..12], &3u32.to_be_bytes());
    assert_eq!(b[3], 0x40 | 0x11);
}

// ---- DAT ----------------------------------------------------------------

#[test]
fn dat_01_write_with_immediate_packing() {
    let imm = 0xCAFE_BABEu32.to_be_bytes();
    let f = imm::from_verbs(imm);
    assert_eq!(f, [0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 0]);
    let b = encode(
        msg(Opcode::ImmData, untagged(1), Body::Immediate(f), 0),
        &[],
        1000,
        false,
    );
    match one(cfg_all(false), &b).body {
        Body::Immediate(d) => assert_eq!(imm::to_verbs(d), imm),
        x => panic!("{x:?}"),
    }
}

#[test]
fn dat_04_verbs_atomics_mapping() {
    let fa = AtomicRequest::fetch_add(1, 2, 8, 5);
    assert_eq!(fetch_add_masked(10, fa.add_swap, fa.add_swap_mask), 15);
    let cs = AtomicRequest::cmp_swap(1, 2, 8, 10, 20);
    assert_eq!(
        cmp_swap_masked(
            10,
            cs.compare,
            cs.compare_mask,
            cs.add_swap,
            cs.add_swap_mask
        ),
        20
    );
    assert_eq!(
        cmp_swap_masked(
            11,
            cs.compare,
            cs.compare_mask,
            cs.add_swap,
            cs.add_swap_mask
        ),
        11
    );
}

#[test]
fn dat_13_immediate_carries_no_payload() {
    let m = msg(Opcode::ImmData, untagged(1), Body::Immediate([0; 8]), 1);
    assert_eq!(
        Segmenter::new(m, 1000).err(),
        Some(TxError::UnexpectedPayload)
    );
    assert!(!Opcode::ImmData.has_payload());
}

#[test]
fn dat_12_zero_length_read_orders_writes() {
    // "0-size RDMA Read between a pair of RDMA Writes": the wire side of
    // the barrier. The zero-length Read Request is one valid FPDU; its
    // Read Response is one zero-length tagged segment with L=1 that
    // completes the Read, in issue order behind earlier requests.
    let rr = ReadRequest {
        sink_stag: 0x51,
        sink_to: 0x2000,
        size: 0,
        src_stag: 0x52,
        src_to: 0x3000,
    };
    let req = encode(
        msg(Opcode::ReadRequest, untagged(1), Body::ReadRequest(rr), 0),
        &[],
        1454,
        true,
    );
    assert_eq!(req.len(), 2 + 18 + 28 + 4);
    let (evs, err) = parse(cfg_all(true), &req);
    assert_eq!(err, None);
    let s = segs(&evs);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].body, Body::ReadRequest(rr));
    assert_eq!(s[0].payload_len, 0);
    // The responder's answer: a zero-length Read Response to the sink.
    let resp = encode(
        msg(
            Opcode::ReadResponse,
            Placement::Tagged {
                stag: 0x51,
                to: 0x2000,
            },
            Body::None,
            0,
        ),
        &[],
        1454,
        true,
    );
    assert_eq!(resp.len(), 2 + 14 + 4);
    let s = one(cfg_all(true), &resp);
    assert!(s.hdr.last);
    assert_eq!(s.payload_len, 0);
    let mut q: OrdQueue<4> = OrdQueue::new(4);
    q.issue(Request::Atomic { req_id: 1 }).unwrap();
    q.issue(Request::Read {
        sink_stag: 0x51,
        sink_to: 0x2000,
        size: 0,
    })
    .unwrap();
    assert_eq!(q.inflight(), 2);
    let Placement::Tagged { stag, to } = s.hdr.placement else {
        panic!("tagged");
    };
    assert_eq!(
        q.on_read_response(stag, to, s.payload_len, s.hdr.last),
        Ok(true)
    );
    assert_eq!(q.inflight(), 1);
    // Complete, but not reported before the earlier atomic.
    assert_eq!(q.pop_completed(), None);
    // A zero-length Read Response without L does not complete it either.
    let mut q: OrdQueue<4> = OrdQueue::new(4);
    q.issue(Request::Read {
        sink_stag: 0x51,
        sink_to: 0x2000,
        size: 0,
    })
    .unwrap();
    assert_eq!(q.on_read_response(0x51, 0x2000, 0, false), Ok(false));
    assert_eq!(q.pop_completed(), None);
    assert_eq!(q.on_read_response(0x51, 0x2000, 0, true), Ok(true));
    assert!(matches!(
        q.pop_completed(),
        Some(Request::Read { size: 0, .. })
    ));
}
