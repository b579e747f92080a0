// SPDX-License-Identifier: GPL-2.0

//! The driver-facing APIs: the parser's direct placement, as the RX path
//! uses it, and the segmenter's MULPDU change, as the TX path needs it.
//!
//! The kernel RX engine does not take `RxEvent::Payload`: once a segment
//! header is in, it copies `payload_remaining()` bytes from the skb straight
//! into memory region pages and accounts for them with `advance_payload()`,
//! computing the CRC over the skb itself (or `consume_payload()`, which
//! runs the bytes through the parser's CRC). These tests drive that path.

mod common;

use common::*;
use rsiw_wire::wire::crc::{Crc32c, SoftCrc32c};
use rsiw_wire::wire::hdr::{Body, Opcode, Placement};
use rsiw_wire::wire::rx::{RxEvent, RxParser, Segment, HDR_BUF};
use rsiw_wire::wire::term::{LlpCode, TermCode};
use rsiw_wire::wire::tx::{sg_pieces, Segmenter, SgPiece, TxError};

/// How the caller accounts for the payload it placed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Account {
    /// `consume_payload()` with the placed bytes.
    Consume,
    /// `advance_payload()`, the CRC computed by the caller over its source.
    Advance,
}

type Driven = (Vec<Segment>, Vec<Vec<u8>>, usize, Option<TermCode>);

/// Feeds `bytes` in `chunk`-sized pieces, placing payload through
/// `consume_payload` in `place`-sized pieces. Returns the segments, the
/// placed payload per segment, the number of End events and any error.
fn drive(bytes: &[u8], crc: bool, chunk: usize, place: usize) -> Driven {
    drive_with(bytes, crc, chunk, place, Account::Consume)
}

/// As [`drive`], accounting for the placed payload as `how` says.
fn drive_with(bytes: &[u8], crc: bool, chunk: usize, place: usize, how: Account) -> Driven {
    let mut p = RxParser::new(cfg_all(crc), SoftCrc32c);
    let (mut segs, mut data, mut ends) = (Vec::new(), Vec::<Vec<u8>>::new(), 0);
    for mut c in bytes.chunks(chunk) {
        while !c.is_empty() {
            // Place directly, as from the skb, before asking the parser.
            let want = p.payload_remaining();
            if want > 0 {
                let n = want.min(c.len()).min(place);
                let src = &c[..n];
                let off = match how {
                    Account::Consume => p.consume_payload(src),
                    Account::Advance => p.advance_payload(n, |r| {
                        assert!(crc, "no CRC callback without the CRC");
                        Some(SoftCrc32c.update(r, src))
                    }),
                }
                .expect("within payload");
                let d = data.last_mut().expect("segment");
                assert_eq!(off as usize, d.len());
                d.extend_from_slice(&c[..n]);
                c = &c[n..];
                continue;
            }
            let (n, ev) = p.feed(c);
            c = &c[n..];
            match ev {
                RxEvent::NeedMore => assert!(c.is_empty()),
                RxEvent::Segment(s) => {
                    segs.push(s);
                    data.push(Vec::new());
                }
                RxEvent::Payload { .. } => panic!("payload is placed by the caller"),
                RxEvent::End => ends += 1,
                RxEvent::Error(e) => return (segs, data, ends, Some(e.code)),
            }
        }
    }
    (segs, data, ends, None)
}

fn stream() -> (Vec<u8>, Vec<u8>) {
    let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut b = encode(
        msg(Opcode::Send, untagged(1), Body::None, 5000),
        &payload,
        1454,
        true,
    );
    b.extend(encode(
        msg(
            Opcode::Write,
            Placement::Tagged {
                stag: 0x1234_5678,
                to: 0x10_0000,
            },
            Body::None,
            1001,
        ),
        &payload[..1001],
        1454,
        true,
    ));
    (b, payload)
}

#[test]
fn rx_consume_payload_places_and_checks_crc() {
    let (b, payload) = stream();
    for (chunk, place) in [
        (b.len(), usize::MAX),
        (1, 1),
        (7, 3),
        (1460, 1000),
        (100, 64),
    ] {
        let (segs, data, ends, err) = drive(&b, true, chunk, place);
        assert_eq!(err, None, "chunk {chunk} place {place}");
        // 5000 bytes at MULPDU 1454 (1436 payload per Send FPDU): 4 FPDUs,
        // then one Write FPDU of 1001.
        assert_eq!(segs.len(), 5);
        assert_eq!(ends, 5);
        let lens: Vec<u32> = segs.iter().map(|s| s.payload_len).collect();
        assert_eq!(lens, [1436, 1436, 1436, 692, 1001]);
        let sends: Vec<u8> = data[..4].concat();
        assert_eq!(sends, payload);
        assert_eq!(data[4], payload[..1001]);
    }
}

#[test]
fn rx_consume_payload_feeds_the_crc() {
    // A payload byte corrupted on the wire is placed, but the segment
    // never ends: the CRC over the placed bytes fails with 2/0/02.
    let (mut b, _) = stream();
    b[2 + 18 + 700] ^= 0x20;
    for (chunk, place) in [(b.len(), usize::MAX), (13, 5)] {
        let (segs, _, ends, err) = drive(&b, true, chunk, place);
        assert_eq!(err, Some(TermCode::llp(LlpCode::Crc)));
        assert_eq!((segs.len(), ends), (1, 0));
    }
    // Without CRC the same bytes are accepted (CRC field is not checked).
    let (segs, _, ends, err) = drive(&b, false, b.len(), usize::MAX);
    assert_eq!((segs.len(), ends, err), (5, 5, None));
}

#[test]
fn rx_consume_payload_refuses_misuse() {
    let (b, _) = stream();
    let mut p = RxParser::new(cfg_all(true), SoftCrc32c);
    // Nothing to place before a segment header, not even zero bytes.
    assert_eq!(p.consume_payload(&[]), None);
    assert_eq!(p.consume_payload(&[0]), None);
    let (n, ev) = p.feed(&b);
    assert!(matches!(ev, RxEvent::Segment(_)));
    let rest = &b[n..];
    assert_eq!(p.payload_remaining(), 1436);
    // More than remains: refused, nothing consumed.
    assert_eq!(p.consume_payload(&rest[..1437]), None);
    assert_eq!(p.payload_remaining(), 1436);
    assert_eq!(p.consume_payload(&rest[..1000]), Some(0));
    assert_eq!(p.consume_payload(&[]), Some(1000));
    assert_eq!(p.consume_payload(&rest[1000..1436]), Some(1000));
    assert_eq!(p.payload_remaining(), 0);
    // Payload is done: no more, not even an empty slice.
    assert_eq!(p.consume_payload(&[]), None);
    let (_, ev) = p.feed(&rest[1436..]);
    assert_eq!(ev, RxEvent::End);
    // Between segments an empty consume must not move the parser on.
    assert_eq!(p.consume_payload(&[]), None);
    assert!(!p.in_segment());
    let (_, ev) = p.feed(&rest[1436 + 4..]);
    assert!(matches!(ev, RxEvent::Segment(s) if s.payload_len == 1436));
    // A failed parser stays failed.
    let mut p = RxParser::new(cfg_all(true), SoftCrc32c);
    let (_, ev) = p.feed(&[0, 1, 0x41, 0x40]);
    assert!(matches!(ev, RxEvent::Error(_)));
    assert_eq!(p.consume_payload(&[]), None);
    assert!(matches!(p.feed(&b).1, RxEvent::Error(_)));
}

#[test]
fn rx_advance_payload_places_and_checks_crc() {
    // Payload accounted without the parser seeing it, the CRC computed by
    // the caller over its source (as the kernel does over the skb): the same
    // segments, placement and CRC result as with consume_payload.
    let (b, payload) = stream();
    for crc in [true, false] {
        for (chunk, place) in [(b.len(), usize::MAX), (1, 1), (7, 3), (1460, 1000)] {
            let got = drive_with(&b, crc, chunk, place, Account::Advance);
            assert_eq!(got, drive(&b, crc, chunk, place), "crc {crc} chunk {chunk}");
            let (segs, data, ends, err) = got;
            assert_eq!((segs.len(), ends, err), (5, 5, None));
            assert_eq!(data[..4].concat(), payload);
        }
    }
    // A corrupted payload byte fails the CRC computed over the source.
    let (mut b, _) = stream();
    b[2 + 18 + 700] ^= 0x20;
    let (segs, _, ends, err) = drive_with(&b, true, 13, 5, Account::Advance);
    assert_eq!(err, Some(TermCode::llp(LlpCode::Crc)));
    assert_eq!((segs.len(), ends), (1, 0));
}

#[test]
fn rx_advance_payload_refuses_misuse() {
    let (b, _) = stream();
    let mut p = RxParser::new(cfg_all(true), SoftCrc32c);
    let never = |_| -> Option<u32> { panic!("CRC callback on a refused call") };
    // Nothing to account before a segment header, not even zero bytes.
    assert_eq!(p.advance_payload(0, never), None);
    assert_eq!(p.advance_payload(1, never), None);
    let (n, ev) = p.feed(&b);
    assert!(matches!(ev, RxEvent::Segment(_)));
    let rest = &b[n..];
    // More than remains: refused before the CRC is asked.
    assert_eq!(p.advance_payload(1437, never), None);
    // A CRC that cannot be computed: refused, nothing accounted.
    assert_eq!(p.advance_payload(10, |_| None), None);
    assert_eq!(p.payload_remaining(), 1436);
    fn upd(d: &[u8]) -> impl FnOnce(u32) -> Option<u32> + '_ {
        move |r| Some(SoftCrc32c.update(r, d))
    }
    assert_eq!(p.advance_payload(1000, upd(&rest[..1000])), Some(0));
    assert_eq!(p.consume_payload(&rest[1000..1200]), Some(1000));
    assert_eq!(p.advance_payload(236, upd(&rest[1200..1436])), Some(1200));
    assert_eq!(p.advance_payload(0, never), None);
    let (_, ev) = p.feed(&rest[1436..]);
    assert_eq!(ev, RxEvent::End);
    // A wrong register (CRC over other bytes) fails at the trailer.
    let mut p = RxParser::new(cfg_all(true), SoftCrc32c);
    let (n, _) = p.feed(&b);
    assert_eq!(p.advance_payload(1436, |r| Some(r ^ 1)), Some(0));
    let (_, ev) = p.feed(&b[n + 1436..]);
    assert_eq!(ev, RxEvent::Error(p.error().unwrap()));
    assert_eq!(p.error().unwrap().code, TermCode::llp(LlpCode::Crc));
    // Without the CRC the callback is never called.
    let mut p = RxParser::new(cfg_all(false), SoftCrc32c);
    let (n, _) = p.feed(&b);
    assert_eq!(p.advance_payload(1436, never), Some(0));
    assert_eq!(p.feed(&b[n + 1436..]).1, RxEvent::End);
}

#[test]
fn tx_mulpdu_change_mid_message() {
    let payload: Vec<u8> = (0..5000u32).map(|i| (i * 13) as u8).collect();
    let c = SoftCrc32c;
    let m = msg(Opcode::Send, untagged(3), Body::None, 5000);
    let mut s = Segmenter::new(m, 1454).unwrap();
    assert_eq!((s.fpdu_count(), s.remaining()), (4, 4));
    let mut wire = Vec::new();
    let mut lens = Vec::new();
    while let Some(p) = s.next_fpdu() {
        wire.extend_from_slice(p.header());
        let r = p.payload_off as usize..(p.payload_off + p.payload_len) as usize;
        let mut cr = p.crc(&c, true);
        cr.update(&payload[r.clone()]);
        wire.extend_from_slice(&payload[r]);
        let (t, tl) = cr.trailer();
        wire.extend_from_slice(&t[..tl]);
        lens.push(p.payload_len);
        if lens.len() == 1 {
            // The MSS dropped after the first FPDU: 1436 sent, 3564 left.
            assert_eq!(s.sent(), 1436);
            // Too small for the header: refused, nothing changes.
            assert_eq!(s.set_mulpdu(17), Err(TxError::MulpduTooSmall));
            assert_eq!(s.remaining(), 3);
            s.set_mulpdu(534).unwrap();
            assert_eq!(s.remaining(), 3564u32.div_ceil(516));
        }
    }
    assert_eq!(s.remaining(), 0);
    assert_eq!(lens[0], 1436);
    assert_eq!(lens.len(), 8);
    assert!(lens[1..7].iter().all(|&l| l == 516));
    assert_eq!(lens[7..], [3564 - 6 * 516]);
    assert_eq!(lens.iter().sum::<u32>(), 5000);
    // The receiver sees one message: MOs continue, L only on the last.
    let (segs, data, ends, err) = drive(&wire, true, 97, 1000);
    assert_eq!(err, None);
    assert_eq!(ends, segs.len());
    let mut mo = 0;
    for (i, sg) in segs.iter().enumerate() {
        assert_eq!(sg.hdr.last, i == segs.len() - 1);
        match sg.hdr.placement {
            Placement::Untagged { msn, mo: m, .. } => assert_eq!((msn, m), (3, mo)),
            _ => panic!("untagged"),
        }
        mo += sg.payload_len;
    }
    assert_eq!(data.concat(), payload);
}

#[test]
fn rx_want_bounds_every_copy() {
    // A caller copying from an skb (skb_copy_bits) into a small staging
    // buffer copies at most want() bytes per step: every byte it gives is
    // consumed, and payload never passes through the staging buffer.
    let (b, payload) = stream();
    let mut p = RxParser::new(cfg_all(true), SoftCrc32c);
    let (mut off, mut placed, mut ends) = (0, Vec::new(), 0);
    let mut stage = [0u8; 64];
    while off < b.len() {
        let w = p.want();
        assert!(w > 0);
        if p.payload_remaining() > 0 {
            let n = w.min(b.len() - off).min(300);
            p.consume_payload(&b[off..off + n]).unwrap();
            placed.extend_from_slice(&b[off..off + n]);
            off += n;
            continue;
        }
        assert!(w <= stage.len(), "header or trailer fits a staging buffer");
        let n = w.min(b.len() - off).min(5);
        stage[..n].copy_from_slice(&b[off..off + n]);
        let (used, ev) = p.feed(&stage[..n]);
        assert_eq!(used, n);
        off += n;
        match ev {
            RxEvent::NeedMore | RxEvent::Segment(_) => {}
            RxEvent::End => ends += 1,
            e => panic!("{e:?}"),
        }
    }
    assert_eq!(ends, 5);
    assert_eq!(placed[..5000], payload[..]);
    assert_eq!(placed[5000..], payload[..1001]);
    assert_eq!(p.want(), 4);
}

#[test]
fn rx_stage_stops_feeding_at_payload() {
    // The kernel RX path copies up to HDR_BUF bytes at a time (a trailer and
    // the next header together) and feeds them only until payload starts,
    // then goes on after the bytes fed: payload is placed from the source.
    let (b, payload) = stream();
    for crc in [true, false] {
        for (place, window) in [(usize::MAX, HDR_BUF), (300, HDR_BUF), (300, 9), (7, 1)] {
            let mut p = RxParser::new(cfg_all(crc), SoftCrc32c);
            let (mut off, mut placed, mut ends, mut segs) = (0, Vec::new(), 0, 0);
            while off < b.len() {
                assert!(p.want() > 0);
                if p.payload_remaining() > 0 {
                    let n = p.payload_remaining().min(b.len() - off).min(place);
                    let src = &b[off..off + n];
                    let at = p.advance_payload(n, |r| Some(SoftCrc32c.update(r, src)));
                    assert!(at.is_some());
                    placed.extend_from_slice(src);
                    off += n;
                    continue;
                }
                let mut stage = [0u8; HDR_BUF];
                let n = (b.len() - off).min(window);
                stage[..n].copy_from_slice(&b[off..off + n]);
                let mut used = 0;
                while used < n && p.payload_remaining() == 0 {
                    let (c, ev) = p.feed(&stage[used..n]);
                    used += c;
                    match ev {
                        RxEvent::NeedMore => break,
                        RxEvent::Segment(_) => segs += 1,
                        RxEvent::End => ends += 1,
                        e => panic!("{e:?}"),
                    }
                }
                assert!(used > 0);
                off += used;
            }
            assert_eq!(
                (segs, ends),
                (5, 5),
                "crc {crc} place {place} window {window}"
            );
            assert_eq!(placed[..5000], payload[..]);
            assert_eq!(placed[5000..], payload[..1001]);
        }
    }
}

#[test]
fn tx_sg_pieces_at_element_boundary() {
    // A range starting exactly at an element boundary starts in the next
    // element, with no empty piece for the one before.
    let lens = [10u64, 0, 20, 5];
    let p: Vec<SgPiece> = sg_pieces(&lens, 10, 25).collect();
    assert_eq!(
        p,
        [
            SgPiece {
                index: 2,
                offset: 0,
                len: 20
            },
            SgPiece {
                index: 3,
                offset: 0,
                len: 5
            }
        ]
    );
    let p: Vec<SgPiece> = sg_pieces(&lens, 9, 2).collect();
    assert_eq!(p.len(), 2);
    assert_eq!((p[0].index, p[0].offset, p[0].len), (0, 9, 1));
    assert_eq!((p[1].index, p[1].offset, p[1].len), (2, 0, 1));
    assert_eq!(sg_pieces(&lens, 35, 1).count(), 0);
    assert_eq!(sg_pieces(&lens, 0, 0).count(), 0);
}
