// SPDX-License-Identifier: GPL-2.0

//! Property tests: encode/decode round trips for every message and
//! chunking independence of the receive parser.

mod common;

use common::*;
use proptest::prelude::*;
use rsiw_wire::wire::crc::SoftCrc32c;
use rsiw_wire::wire::hdr::*;
use rsiw_wire::wire::mpa::{encode_frame, Enhanced, Frame, FrameKind, RtrSet, MAX_FRAME};
use rsiw_wire::wire::rx::{RxConfig, RxError, RxEvent, RxParser};
use rsiw_wire::wire::term::{TermCode, Terminate};
use rsiw_wire::wire::tx::{quick_fpdu, sg_pieces, whole_fpdu, Segmenter, TxError, TxMessage};

fn sink() -> impl Strategy<Value = SinkRange> {
    (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(stag, len, to)| SinkRange {
        stag,
        len,
        to,
    })
}

fn terminate() -> impl Strategy<Value = Terminate> {
    (
        0u8..3,
        0u8..4,
        any::<u8>(),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        prop::array::uniform18(any::<u8>()),
        prop::array::uniform28(any::<u8>()),
        any::<bool>(),
    )
        .prop_map(|(l, t, c, sl, with_ddp, tagged, mut h, r, with_r)| {
            let code = TermCode::new(l, t, c);
            if !with_ddp {
                return Terminate::bare(code);
            }
            h[0] = if tagged { h[0] | DDP_T } else { h[0] & !DDP_T };
            let rr = if with_r { Some(&r) } else { None };
            Terminate::with_headers(code, sl, &h, rr)
        })
}

/// Any message the segmenter accepts, with its payload.
fn message() -> impl Strategy<Value = (TxMessage, Vec<u8>)> {
    let tagged = (
        prop_oneof![Just(Opcode::Write), Just(Opcode::ReadResponse)],
        any::<u32>(),
        0u64..(u64::MAX / 2),
        0usize..5000,
    )
        .prop_map(|(op, stag, to, n)| {
            (
                msg(op, Placement::Tagged { stag, to }, Body::None, n as u32),
                vec![0xA5; n],
            )
        });
    let sends = (
        prop_oneof![
            Just(Opcode::Send),
            Just(Opcode::SendInv),
            Just(Opcode::SendSe),
            Just(Opcode::SendSeInv)
        ],
        any::<u32>(),
        any::<u32>(),
        0usize..5000,
    )
        .prop_map(|(op, inv, msn, n)| {
            let inv_stag = if op.has_invalidate() { inv } else { 0 };
            let p: Vec<u8> = (0..n).map(|i| (i * 31) as u8).collect();
            (
                msg(
                    op,
                    Placement::Untagged {
                        inv_stag,
                        qn: 0,
                        msn,
                        mo: 0,
                    },
                    Body::None,
                    n as u32,
                ),
                p,
            )
        });
    let fixed = (
        prop_oneof![
            (
                any::<u32>(),
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
                any::<u64>()
            )
                .prop_map(|(a, b, c, d, e)| (
                    Opcode::ReadRequest,
                    Body::ReadRequest(ReadRequest {
                        sink_stag: a,
                        sink_to: b,
                        size: c,
                        src_stag: d,
                        src_to: e
                    })
                )),
            (
                0u8..16,
                any::<u32>(),
                any::<u32>(),
                any::<u64>(),
                any::<[u64; 4]>()
            )
                .prop_map(|(a, id, st, to, d)| (
                    Opcode::AtomicRequest,
                    Body::AtomicRequest(AtomicRequest {
                        aopcode: a,
                        req_id: id,
                        stag: st,
                        to,
                        add_swap: d[0],
                        add_swap_mask: d[1],
                        compare: d[2],
                        compare_mask: d[3]
                    })
                )),
            (any::<u32>(), any::<u64>()).prop_map(|(id, o)| (
                Opcode::AtomicResponse,
                Body::AtomicResponse(AtomicResponse {
                    req_id: id,
                    orig: o
                })
            )),
            (
                prop_oneof![Just(Opcode::ImmData), Just(Opcode::ImmDataSe)],
                any::<[u8; 8]>()
            )
                .prop_map(|(o, d)| (o, Body::Immediate(d))),
            (sink(), any::<u32>()).prop_map(|(s, f)| (
                Opcode::FlushRequest,
                Body::FlushRequest(FlushRequest { sink: s, flags: f })
            )),
            Just((Opcode::FlushResponse, Body::None)),
            (sink(), any::<[u8; 8]>()).prop_map(|(s, d)| (
                Opcode::AtomicWriteRequest,
                Body::AtomicWriteRequest(AtomicWriteRequest { sink: s, data: d })
            )),
            Just((Opcode::AtomicWriteResponse, Body::None)),
            terminate().prop_map(|t| (Opcode::Terminate, Body::Terminate(t))),
        ],
        any::<u32>(),
    )
        .prop_map(|((op, body), msn)| {
            (
                msg(
                    op,
                    Placement::Untagged {
                        inv_stag: 0,
                        qn: 0,
                        msn,
                        mo: 0,
                    },
                    body,
                    0,
                ),
                vec![],
            )
        });
    let verify = (sink(), any::<u32>(), 0usize..64, any::<bool>()).prop_map(|(s, msn, n, req)| {
        let p = vec![0x3C; n.max(if req { 0 } else { 1 })];
        if req {
            (
                msg(
                    Opcode::VerifyRequest,
                    untagged(msn),
                    Body::VerifyRequest(VerifyRequest { sink: s }),
                    p.len() as u32,
                ),
                p,
            )
        } else {
            (
                msg(
                    Opcode::VerifyResponse,
                    untagged(msn),
                    Body::None,
                    p.len() as u32,
                ),
                p,
            )
        }
    });
    prop_oneof![tagged, sends, fixed, verify]
}

fn check_roundtrip(m: TxMessage, p: &[u8], mulpdu: u16, crc: bool) {
    let b = encode(m, p, mulpdu, crc);
    let (evs, e) = parse(cfg_all(crc), &b);
    assert!(e.is_none(), "{e:?}");
    let ss = segs(&evs);
    let mut data = Vec::new();
    for ev in &evs {
        if let Ev::Data(d) = ev {
            data.extend_from_slice(d);
        }
    }
    assert_eq!(data, p);
    assert!(ss.last().unwrap().hdr.last);
    let mut off = 0u64;
    for s in &ss {
        assert_eq!(s.hdr.opcode, m.opcode);
        assert_eq!(s.body, m.body);
        assert!(s.ulpdu_len <= mulpdu);
        match (s.hdr.placement, m.placement) {
            (Placement::Tagged { stag, to }, Placement::Tagged { stag: s0, to: t0 }) => {
                assert_eq!(stag, s0);
                assert_eq!(to, t0 + off);
            }
            (
                Placement::Untagged {
                    inv_stag,
                    qn,
                    msn,
                    mo,
                },
                Placement::Untagged {
                    inv_stag: i0,
                    msn: m0,
                    ..
                },
            ) => {
                assert_eq!(inv_stag, i0);
                assert_eq!(Some(qn), m.opcode.queue());
                assert_eq!(msn, m0);
                assert_eq!(u64::from(mo), off);
            }
            x => panic!("{x:?}"),
        }
        off += u64::from(s.payload_len);
    }
}

/// As `parse_chunked`, but every step first offers the input to `feed_whole` (the kernel RX
/// path for small FPDUs), and with `skip` a trailer to `skip_trailer` (the kernel RX path
/// without CRC); also returns the Terminate the parser would send.
fn parse_chunked_whole(
    cfg: RxConfig,
    bytes: &[u8],
    chunks: &[usize],
    skip: bool,
) -> (Vec<Ev>, Option<RxError>, Option<Terminate>) {
    let mut p = RxParser::new(cfg, SoftCrc32c);
    let mut evs: Vec<Ev> = Vec::new();
    let mut off = 0;
    let mut ci = 0;
    while off < bytes.len() {
        let n = chunks[ci % chunks.len()].max(1);
        ci += 1;
        let end = (off + n).min(bytes.len());
        let mut chunk = &bytes[off..end];
        off = end;
        loop {
            if skip {
                if let Some(n) = p.skip_trailer(chunk.len()) {
                    assert!(!cfg.crc && (1..=7).contains(&n) && n <= chunk.len());
                    chunk = &chunk[n..];
                    evs.push(Ev::End);
                    continue;
                }
            }
            if let Some((used, seg, data)) = p.feed_whole(chunk) {
                assert!(used <= chunk.len());
                chunk = &chunk[used..];
                evs.push(Ev::Seg(seg));
                if !data.is_empty() {
                    evs.push(Ev::Data(data.to_vec()));
                }
                evs.push(Ev::End);
                continue;
            }
            let (used, ev) = p.feed(chunk);
            chunk = &chunk[used..];
            match ev {
                RxEvent::NeedMore => break,
                RxEvent::Segment(s) => evs.push(Ev::Seg(s)),
                RxEvent::Payload { data, .. } => match evs.last_mut() {
                    Some(Ev::Data(d)) => d.extend_from_slice(data),
                    _ => evs.push(Ev::Data(data.to_vec())),
                },
                RxEvent::End => evs.push(Ev::End),
                RxEvent::Error(e) => return (evs, Some(e), p.terminate()),
            }
        }
    }
    (evs, p.error(), p.terminate())
}

/// Feeds `bytes` `step` bytes at a time (all at once if 0) and records every
/// event, the error and the Terminate the parser would send.
fn trace(cfg: RxConfig, bytes: &[u8], step: usize) -> (Vec<String>, Option<Terminate>) {
    let mut p = RxParser::new(cfg, SoftCrc32c);
    let mut evs = Vec::new();
    let step = if step == 0 { bytes.len().max(1) } else { step };
    'outer: for mut chunk in bytes.chunks(step) {
        loop {
            let (used, ev) = p.feed(chunk);
            chunk = &chunk[used..];
            match ev {
                RxEvent::NeedMore => break,
                // Payload may arrive in pieces: record it byte by byte.
                RxEvent::Payload { offset, data } => {
                    for (i, b) in data.iter().enumerate() {
                        evs.push(format!("P{}={b}", offset as usize + i));
                    }
                }
                RxEvent::Error(e) => {
                    evs.push(format!("{e:?}"));
                    break 'outer;
                }
                e => evs.push(format!("{e:?}")),
            }
        }
    }
    (evs, p.terminate())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn prop_every_message_roundtrips((m, p) in message(), mulpdu in 100u16..2000, crc in any::<bool>()) {
        check_roundtrip(m, &p, mulpdu, crc);
    }

    #[test]
    fn mpa_26_prop_chunking_independent(
        msgs in prop::collection::vec(message(), 1..6),
        chunks in prop::collection::vec(1usize..3000, 1..8),
        crc in any::<bool>(),
    ) {
        let mut b = Vec::new();
        for (m, p) in &msgs {
            b.extend(encode(*m, p, 1454, crc));
        }
        let whole = parse(cfg_all(crc), &b);
        prop_assert!(whole.1.is_none());
        prop_assert_eq!(parse_chunked(cfg_all(crc), &b, &chunks), whole.clone());
        prop_assert_eq!(parse_chunked(cfg_all(crc), &b, &[1]), whole);
    }

    /// A segmenter reset in place for a new message (the TX engine keeps one per message
    /// slot) plans exactly what a fresh one does, whatever it planned before; a message it
    /// refuses leaves it planning nothing (DDP-02, DDP-11).
    #[test]
    fn ddp_11_prop_segmenter_reset_in_place(
        (m1, _p1) in message(),
        (m2, _p2) in message(),
        used in 0usize..3,
        mismatch in any::<bool>(),
        mulpdu in 20u16..2000,
    ) {
        let mut m2 = m2;
        if mismatch {
            // The other placement kind: refused (PlacementMismatch).
            m2.placement = match m2.placement {
                Placement::Tagged { stag, to } => Placement::Untagged { inv_stag: stag, qn: 0, msn: 1, mo: to as u32 },
                Placement::Untagged { msn, mo, .. } => Placement::Tagged { stag: msn, to: u64::from(mo) },
            };
        }
        let mut s = Segmenter::new(m1, 1454).unwrap();
        for _ in 0..used {
            let _ = s.next_fpdu();
        }
        let fresh = Segmenter::new(m2, mulpdu);
        let r = s.reset(m2, mulpdu);
        prop_assert_eq!(r.err(), fresh.err());
        match fresh {
            Ok(mut f) => {
                prop_assert_eq!(s.fpdu_count(), f.fpdu_count());
                loop {
                    let (a, b) = (s.next_fpdu(), f.next_fpdu());
                    prop_assert_eq!(a, b);
                    if a.is_none() {
                        break;
                    }
                }
            }
            Err(_) => {
                prop_assert!(s.next_fpdu().is_none());
                prop_assert_eq!(s.remaining(), 0);
            }
        }
    }

    /// A message of one FPDU built in one pass (the TX engine's path for small messages) is
    /// byte for byte what the segmenter plans, with payload and trailer; a message of more
    /// FPDUs, or a buffer too short, is refused before the payload is asked for (DDP-11,
    /// MPA-08).
    #[test]
    fn ddp_11_prop_whole_fpdu_matches_segmenter(
        (m, p) in message(),
        mulpdu in 20u16..2000,
        crc in any::<bool>(),
        room in 0usize..2200,
        fail in any::<bool>(),
    ) {
        let mut out = vec![0u8; room];
        let mut asked = false;
        let r = whole_fpdu(&SoftCrc32c, crc, m, mulpdu, &mut out, |d| {
            asked = true;
            d.copy_from_slice(&p);
            !fail
        });
        match Segmenter::new(m, mulpdu) {
            Err(e) => prop_assert_eq!(r, Err(e)),
            Ok(s) if s.fpdu_count() > 1 => {
                prop_assert_eq!(r, Err(TxError::NotWhole));
                prop_assert!(!asked);
            }
            Ok(_) => {
                let want = encode(m, &p, mulpdu, crc);
                if want.len() > room {
                    prop_assert_eq!(r, Err(TxError::NotWhole));
                    prop_assert!(!asked);
                } else if fail {
                    prop_assert_eq!(r, Err(TxError::Payload));
                } else {
                    prop_assert_eq!(r, Ok(want.len()));
                    prop_assert_eq!(&out[..want.len()], &want[..]);
                }
            }
        }
    }

    /// Every FPDU the segmenter plans, of a message without a fixed RDMAP header (header
    /// written field by field) or with one (encoded), is the reference's: header bytes as
    /// `DdpHeader::encode` and `Body::encode` build them for the FPDU's offset and L bit,
    /// payload cut at the MULPDU in force, with the MULPDU changed (or a change refused)
    /// between FPDUs; the receive parser decodes each header to the opcode, L bit, placement
    /// and fixed header planned (DDP-11, DDP-02, DDP-03, DDP-06, DDP-07).
    #[test]
    fn ddp_11_prop_next_fpdu_fast_same_as_general(
        (m, p) in message(),
        mulpdu in 100u16..2000,
        changes in prop::collection::vec(
            prop::option::of(prop_oneof![100u16..2000, 0u16..40]),
            0..40,
        ),
        mo in prop_oneof![Just(0u32), any::<u32>()],
        to in prop_oneof![Just(None), (u64::MAX - 6000..=u64::MAX).prop_map(Some)],
        crc in any::<bool>(),
    ) {
        let mut m = m;
        match &mut m.placement {
            Placement::Untagged { mo: o, .. } => *o = mo,
            Placement::Tagged { to: t, .. } => *t = to.unwrap_or(*t),
        }
        let len = m.payload_len;
        let wraps = match m.placement {
            Placement::Tagged { to, .. } => to.checked_add(u64::from(len)).is_none(),
            Placement::Untagged { mo, .. } => mo.checked_add(len).is_none(),
        };
        let mut s = match Segmenter::new(m, mulpdu) {
            Ok(s) => s,
            Err(e) => {
                prop_assert!(wraps);
                prop_assert_eq!(e, TxError::Wrap);
                return Ok(());
            }
        };
        prop_assert!(!wraps);
        // The reference: the header and payload bytes per FPDU at the MULPDU in force.
        let ddp = if m.opcode.is_tagged() { TAGGED_HDR_LEN } else { UNTAGGED_HDR_LEN };
        let hl = ddp + m.body.len();
        let max = |mulpdu: u16| -> Option<u32> {
            let x = u32::try_from(usize::from(mulpdu).checked_sub(hl)?).ok()?;
            let refused = (len > 0 && x == 0) || (m.opcode == Opcode::VerifyRequest && len > x);
            (!refused).then_some(x)
        };
        let mut maxp = max(mulpdu).unwrap();
        let mut off = 0u32;
        let mut stream = Vec::new();
        let mut planned = Vec::new();
        for i in 0.. {
            if let Some(Some(mu)) = changes.get(i) {
                let r = s.set_mulpdu(*mu);
                prop_assert_eq!(r.is_ok(), max(*mu).is_some(), "set_mulpdu({}) {:?}", mu, r);
                if let Some(x) = max(*mu) {
                    maxp = x;
                }
            }
            let Some(plan) = s.next_fpdu() else {
                break;
            };
            let n = (len - off).min(maxp);
            let last = off + n == len;
            let placement = match m.placement {
                Placement::Tagged { stag, to } => Placement::Tagged {
                    stag,
                    to: to + u64::from(off),
                },
                Placement::Untagged { inv_stag, msn, mo, .. } => Placement::Untagged {
                    inv_stag,
                    qn: m.opcode.queue().unwrap(),
                    msn,
                    mo: mo + off,
                },
            };
            let h = DdpHeader { opcode: m.opcode, last, placement };
            let mut want = [0u8; 128];
            let dl = h.encode(&mut want[2..]).unwrap();
            let bl = m.body.encode(&mut want[2 + dl..]).unwrap();
            let ulpdu = u16::try_from(dl + bl + n as usize).unwrap();
            want[..2].copy_from_slice(&ulpdu.to_be_bytes());
            prop_assert_eq!(plan.header(), &want[..2 + dl + bl], "FPDU {} at {}", i, off);
            prop_assert_eq!(
                (plan.payload_off, plan.payload_len, plan.ulpdu_len, plan.last),
                (off, n, ulpdu, last),
                "FPDU {} at {}", i, off
            );
            prop_assert!(usize::from(ulpdu) <= maxp as usize + hl);
            planned.push((h, ulpdu, n));
            // The FPDU on the wire, for the parser.
            stream.extend_from_slice(plan.header());
            let mut c = plan.crc(&SoftCrc32c, crc);
            let d = &p[off as usize..(off + n) as usize];
            c.update(d);
            stream.extend_from_slice(d);
            let (t, tl) = c.trailer();
            stream.extend_from_slice(&t[..tl]);
            off += n;
            if last {
                break;
            }
        }
        prop_assert_eq!(off, len);
        prop_assert!(s.next_fpdu().is_none());
        prop_assert!(planned.last().is_some_and(|x| x.0.last));
        let (evs, e) = parse(cfg_all(crc), &stream);
        prop_assert!(e.is_none(), "{:?}", e);
        let ss = segs(&evs);
        prop_assert_eq!(ss.len(), planned.len());
        for (seg, (h, ulpdu, n)) in ss.iter().zip(&planned) {
            // The parser reports the reserved word of an untagged header as sent.
            let mut h = *h;
            if let Placement::Untagged { inv_stag, .. } = &mut h.placement {
                *inv_stag = m.opcode.untagged_word(*inv_stag);
            }
            prop_assert_eq!(seg.hdr, h);
            prop_assert_eq!(seg.ulpdu_len, *ulpdu);
            prop_assert_eq!(seg.body, m.body);
            prop_assert_eq!(seg.payload_len, *n);
        }
    }

    /// `quick_fpdu` (the kernel TX path of a small Write or Send) builds the bytes, and
    /// fails with the error, of `whole_fpdu` at the largest MULPDU, for every message (DDP-11),
    /// and writes every byte it returns.
    #[test]
    fn ddp_11_prop_quick_fpdu_matches_whole(
        (m, p) in message(),
        crc in any::<bool>(),
        fail in any::<bool>(),
        mo in prop_oneof![Just(0u32), any::<u32>()],
        to in prop_oneof![Just(None), (u64::MAX - 6000..=u64::MAX).prop_map(Some)],
    ) {
        let mut m = m;
        match &mut m.placement {
            Placement::Untagged { mo: o, .. } => *o = mo,
            Placement::Tagged { to: t, .. } => *t = to.unwrap_or(*t),
        }
        let run = |quick: bool, bg: u8| {
            let mut out = [bg; 256];
            let mut asked = false;
            let f = |d: &mut [u8]| {
                asked = true;
                d.copy_from_slice(&p);
                !fail
            };
            let r = if quick {
                quick_fpdu(&SoftCrc32c, crc, m, &mut out, f)
            } else {
                whole_fpdu(&SoftCrc32c, crc, m, u16::MAX, &mut out, f)
            };
            (r, asked, r.map(|n| out[..n].to_vec()))
        };
        prop_assert_eq!(run(true, 0xEE), run(false, 0xEE));
        // Every byte returned is written: the kernel reuses one buffer without clearing it.
        prop_assert_eq!(run(true, 0xEE), run(true, 0));
    }

    /// Whole small FPDUs taken in one step (`feed_whole`, the kernel RX path), and trailers
    /// skipped unread without CRC (`skip_trailer`, likewise), give the events, the error and
    /// the Terminate of feeding byte by byte, whatever the chunking, with a byte of the
    /// stream possibly corrupted (MPA-26, MPA-05, MPA-07, DDP-11).
    #[test]
    fn mpa_26_prop_feed_whole_same_as_feed(
        msgs in prop::collection::vec(message(), 1..6),
        chunks in prop::collection::vec(1usize..300, 1..8),
        crc in any::<bool>(),
        skip in any::<bool>(),
        flip in prop::option::of((any::<prop::sample::Index>(), 1u8..=255)),
        mulpdu in 100u16..600,
    ) {
        let mut b = Vec::new();
        for (m, p) in &msgs {
            b.extend(encode(*m, p, mulpdu, crc));
        }
        if let Some((at, x)) = flip {
            let i = at.index(b.len());
            b[i] ^= x;
        }
        let (evs, err) = parse_chunked(cfg_all(crc), &b, &chunks);
        // The reference Terminate: fed step by step up to the error.
        let term = trace(cfg_all(crc), &b, 0).1;
        let whole = parse_chunked_whole(cfg_all(crc), &b, &chunks, skip);
        prop_assert_eq!(&whole.0, &evs);
        prop_assert_eq!(whole.1, err);
        prop_assert_eq!(whole.2, term);
    }

    /// The decoder `feed` and `feed_whole` use for Write, Read Response and Send headers
    /// gives what the general one gives (the reference: the stream fed byte by byte, so that
    /// no header is ever whole in the input), for headers with bytes of the length field,
    /// control bytes and DDP fields changed, and whatever the configuration (MPA CRC off, so
    /// that a changed header is decoded; RFC 7306 and commit opcodes on or off; a small
    /// MULPDU bound) (DDP-01, DDP-02, DDP-03, DDP-04, RDMAP-01, RDMAP-02, RDMAP-03).
    #[test]
    fn ddp_01_prop_quick_header_same_as_feed(
        tagged in any::<bool>(),
        read_response in any::<bool>(),
        op in 3u8..=6,
        stag in any::<u32>(),
        to in any::<u64>(),
        msn in any::<u32>(),
        n in 0usize..48,
        flips in prop::collection::vec((0usize..20, 1u8..=255), 0..3),
        rfc7306 in any::<bool>(),
        commit in any::<bool>(),
        max_ulpdu in prop_oneof![Just(u16::MAX), 0u16..80],
        chunks in prop::collection::vec(1usize..80, 1..4),
    ) {
        let (m, p) = if tagged {
            let op = if read_response { Opcode::ReadResponse } else { Opcode::Write };
            (msg(op, Placement::Tagged { stag, to }, Body::None, n as u32), vec![0x5A; n])
        } else {
            let op = Opcode::from_u8(op).unwrap();
            let inv_stag = if op.has_invalidate() { stag } else { 0 };
            let pl = Placement::Untagged { inv_stag, qn: 0, msn, mo: 0 };
            (msg(op, pl, Body::None, n as u32), vec![0xC3; n])
        };
        let mut b = encode(m, &p, u16::MAX, false);
        // A second message after it: the first one's end and the next header in one input.
        b.extend(encode(m, &p, u16::MAX, false));
        for (at, x) in flips {
            b[at] ^= x;
        }
        let cfg = RxConfig { crc: false, rfc7306, commit, max_ulpdu, siw_terminate: false };
        let (evs, err) = parse_chunked(cfg, &b, &[1]);
        let term = trace(cfg, &b, 1).1;
        let chunked = parse_chunked(cfg, &b, &chunks);
        prop_assert_eq!(&chunked.0, &evs);
        prop_assert_eq!(chunked.1, err);
        prop_assert_eq!(trace(cfg, &b, 0).1, term);
        let whole = parse_chunked_whole(cfg, &b, &[b.len()], true);
        prop_assert_eq!(&whole.0, &evs);
        prop_assert_eq!(whole.1, err);
        prop_assert_eq!(whole.2, term);
    }

    #[test]
    fn prop_parser_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400), chunks in prop::collection::vec(1usize..50, 1..4)) {
        let _ = parse_chunked(cfg_all(true), &bytes, &chunks);
        let _ = parse_chunked(cfg_all(false), &bytes, &chunks);
    }

    #[test]
    fn prop_ddp_header_roundtrip(op in 0u8..18, last in any::<bool>(), a in any::<u32>(), b in any::<u64>(), c in any::<u32>()) {
        let op = Opcode::from_u8(op).unwrap();
        let placement = if op.is_tagged() {
            Placement::Tagged { stag: a, to: b }
        } else {
            Placement::Untagged { inv_stag: a, qn: op.queue().unwrap(), msn: c, mo: b as u32 }
        };
        let h = DdpHeader { opcode: op, last, placement };
        let mut out = [0u8; 18];
        let n = h.encode(&mut out).unwrap();
        prop_assert_eq!(n, if op.is_tagged() { 14 } else { 18 });
        // Byte 0: T, L, reserved 0, DV = 1. Byte 1: RV = 01b, opcode.
        let t = if op.is_tagged() { 0x80 } else { 0 };
        prop_assert_eq!(out[0], t | if last { 0x40 } else { 0 } | 0x01);
        prop_assert_eq!(out[1], 0x40 | op as u8);
        match placement {
            Placement::Tagged { stag, to } => {
                prop_assert_eq!(&out[2..6], &stag.to_be_bytes());
                prop_assert_eq!(&out[6..14], &to.to_be_bytes());
            }
            Placement::Untagged { inv_stag, qn, msn, mo } => {
                // The Invalidate STag is sent only by the opcodes that
                // carry one; the field is reserved (0) otherwise.
                let inv = if op.has_invalidate() { inv_stag } else { 0 };
                prop_assert_eq!(&out[2..6], &inv.to_be_bytes());
                prop_assert_eq!(&out[6..10], &qn.to_be_bytes());
                prop_assert_eq!(&out[10..14], &msn.to_be_bytes());
                prop_assert_eq!(&out[14..18], &mo.to_be_bytes());
            }
        }
    }

    #[test]
    fn prop_terminate_roundtrip(t in terminate()) {
        let mut out = [0u8; 64];
        let n = t.encode(&mut out).unwrap();
        prop_assert_eq!(Terminate::decode(&out[..n]), Some(t));
    }

    #[test]
    fn prop_mpa_frame_roundtrip(
        req in any::<bool>(), flags in any::<u8>(), rev in 1u8..5,
        ird in 0u16..0x4000, ord in 0u16..0x4000, p2p in any::<bool>(), rtr in any::<[bool; 3]>(),
        pd in prop::collection::vec(any::<u8>(), 0..508), enhanced in any::<bool>(),
    ) {
        let kind = if req { FrameKind::Request } else { FrameKind::Reply };
        let rtr = RtrSet { send: rtr[0], write: rtr[1], read: rtr[2] };
        let e = Enhanced { ird, ord, p2p, rtr: if p2p { rtr } else { RtrSet::NONE } };
        let rev = if enhanced { rev.max(2) } else { rev };
        let mut b = [0u8; MAX_FRAME];
        let n = encode_frame(kind, flags, rev, if enhanced { Some(&e) } else { None }, &pd, &mut b).unwrap();
        let f = Frame::parse(&b[..n], kind).unwrap();
        prop_assert_eq!(f.ulp_pd, &pd[..]);
        prop_assert_eq!(f.hdr.rev, rev);
        prop_assert_eq!(f.hdr.flags & 0xE0, flags & 0xE0);
        if enhanced {
            prop_assert_eq!(f.enhanced, Some(e));
        } else if rev < 2 || flags & 0x10 == 0 {
            prop_assert_eq!(f.enhanced, None);
        }
    }

    #[test]
    fn prop_sg_pieces_cover_range(lens in prop::collection::vec(0u64..5000, 0..10), off in 0u64..20000, len in 0u64..20000) {
        let total: u64 = lens.iter().sum();
        let mut covered = 0;
        let mut pos = 0u64;
        let starts: Vec<u64> = lens.iter().scan(0, |a, l| { let s = *a; *a += l; Some(s) }).collect();
        for p in sg_pieces(&lens, off, len) {
            let abs = starts[p.index] + p.offset;
            if covered == 0 { pos = abs; }
            prop_assert_eq!(abs, pos);
            prop_assert!(p.offset + p.len <= lens[p.index]);
            prop_assert!(p.len > 0);
            pos += p.len;
            covered += p.len;
        }
        let want = if off >= total { 0 } else { len.min(total - off) };
        prop_assert_eq!(covered, want);
        if want > 0 { prop_assert_eq!(pos, off + want); }
    }

    /// The parser validates a header that is whole in its input in place and
    /// otherwise step by step: both must give the same events, the same
    /// error and the same Terminate, also for corrupted headers.
    #[test]
    fn mpa_26_prop_whole_and_stepwise_headers_agree(
        msgs in prop::collection::vec(message(), 1..4),
        flips in prop::collection::vec((0usize..64, any::<u8>()), 0..3),
        crc in any::<bool>(),
        all in any::<bool>(),
    ) {
        let mut b = Vec::new();
        for (m, p) in &msgs {
            b.extend(encode(*m, p, 1454, crc));
        }
        for (at, x) in flips {
            if let Some(v) = b.get_mut(at) {
                *v ^= x;
            }
        }
        let cfg = if all { cfg_all(crc) } else { RxConfig { crc, ..RxConfig::default() } };
        let whole = trace(cfg, &b, 0);
        prop_assert_eq!(&trace(cfg, &b, 1), &whole);
        prop_assert_eq!(&trace(cfg, &b, 7), &whole);
    }
}

/// One step of [`rdmap_05_prop_read_cursor_same_as_queue`].
#[derive(Clone, Debug)]
enum ReadStep {
    /// A Read is issued (sink STag, size).
    Issue(u32, u32),
    /// A Read Response segment: STag, TO (`None`: where the oldest Read
    /// continues, `Some(d)`: that plus `d`, wrapping), length (`None`: the
    /// rest), L bit.
    Segment(u32, Option<i64>, Option<u32>, bool),
    /// Completed Reads are taken.
    Pop,
}

fn read_step() -> impl Strategy<Value = ReadStep> {
    prop_oneof![
        2 => (1u32..3, prop_oneof![0u32..40, Just(16u32)]).prop_map(|(s, n)| ReadStep::Issue(s, n)),
        6 => (
            prop_oneof![4 => Just(1u32), 1 => 1u32..3],
            prop_oneof![12 => Just(None), 1 => any::<i8>().prop_map(|d| Some(i64::from(d))),
                        1 => any::<i64>().prop_map(Some)],
            prop_oneof![1 => Just(None), 2 => (0u32..24).prop_map(Some)],
            any::<bool>(),
        )
            .prop_map(|(s, d, n, l)| ReadStep::Segment(s, d, n, l)),
        1 => Just(ReadStep::Pop),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, .. ProptestConfig::default() })]

    /// A Read's response matched segment by segment against the ORQ
    /// ([`OrdQueue::read_response_segment`], [`OrdQueue::read_response_end`])
    /// and matched by a [`ReadCursor`] after its first segment (the driver's
    /// RX, which then takes the ORQ's lock twice per Read) give the same
    /// result for every segment, valid or not (1/1/00, 1/1/01), and the same
    /// queue after every Read that ended (RDMAP-05, T-20).
    #[test]
    fn rdmap_05_prop_read_cursor_same_as_queue(
        base in prop_oneof![Just(0u64), u64::MAX - 64..=u64::MAX, Just(u64::MAX - 15)],
        steps in prop::collection::vec(read_step(), 1..120),
    ) {
        use rsiw_wire::wire::stream::{OrdQueue, Request};
        let mut a: OrdQueue<8> = OrdQueue::new(4);
        let mut b: OrdQueue<8> = OrdQueue::new(4);
        let mut cursor = None;
        // Where the reference's oldest Read continues (its sink TO plus
        // what arrived), and what it has left: for segments that continue it.
        let mut reads: std::collections::VecDeque<(u32, u64, u32)> = Default::default();
        for step in steps {
            match step {
                ReadStep::Issue(stag, size) => {
                    let r = Request::Read { sink_stag: stag, sink_to: base, size };
                    let ra = a.issue(r);
                    prop_assert_eq!(ra, b.issue(r));
                    if ra.is_ok() {
                        reads.push_back((stag, base, size));
                    }
                }
                ReadStep::Pop => {
                    loop {
                        let ra = a.pop_completed();
                        prop_assert_eq!(ra, b.pop_completed());
                        if ra.is_none() {
                            break;
                        }
                    }
                }
                ReadStep::Segment(stag, d, n, last) => {
                    let (next, left) = reads.front().map_or((base, 0), |r| (r.1, r.2));
                    let to = match d {
                        None => next,
                        // Where the Read would continue past the TO space too.
                        Some(0) => 0,
                        Some(d) => next.wrapping_add(d as u64),
                    };
                    let len = n.unwrap_or(left);
                    let ra = a.read_response_segment(stag, to, len, last);
                    let rb = match cursor.as_mut() {
                        Some(c) => rsiw_wire::wire::stream::ReadCursor::next(c, stag, to, len, last),
                        None => b.read_response_cursor(stag, to, len, last).map(|c| cursor = Some(c)),
                    };
                    prop_assert_eq!(ra, rb);
                    if ra.is_err() {
                        // The connection fails: the rest goes to a new one.
                        a = OrdQueue::new(4);
                        b = OrdQueue::new(4);
                        cursor = None;
                        reads.clear();
                        continue;
                    }
                    if let Some(r) = reads.front_mut() {
                        r.1 = r.1.wrapping_add(u64::from(len));
                        r.2 = r.2.saturating_sub(len);
                    }
                    if last {
                        let ea = a.read_response_end();
                        let eb = match cursor.take() {
                            Some(c) => b.read_response_end_with(c),
                            None => b.read_response_end(),
                        };
                        prop_assert_eq!(ea, eb);
                        prop_assert!(ea);
                        reads.pop_front();
                        prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                    }
                }
            }
            prop_assert_eq!(a.inflight(), b.inflight());
            prop_assert_eq!(a.head_done(), b.head_done());
        }
    }
}
