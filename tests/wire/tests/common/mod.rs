// SPDX-License-Identifier: GPL-2.0

//! Shared helpers for the wire core integration tests.

#![allow(dead_code)]

use rsiw_wire::wire::crc::SoftCrc32c;
use rsiw_wire::wire::hdr::{Body, Opcode, Placement};
use rsiw_wire::wire::rx::{RxConfig, RxError, RxEvent, RxParser, Segment};
use rsiw_wire::wire::tx::{Segmenter, TxMessage};

/// A canonical parser event (payload merged per segment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ev {
    Seg(Segment),
    Data(Vec<u8>),
    End,
}

/// Encodes one message with the segmenter (payload from `payload`).
pub fn encode(msg: TxMessage, payload: &[u8], mulpdu: u16, crc: bool) -> Vec<u8> {
    let c = SoftCrc32c;
    let mut s = Segmenter::new(msg, mulpdu).expect("segmenter");
    let mut out = Vec::new();
    while let Some(p) = s.next_fpdu() {
        out.extend_from_slice(p.header());
        let mut cr = p.crc(&c, crc);
        let a = p.payload_off as usize;
        let b = a + p.payload_len as usize;
        // Feed the CRC in two pieces to exercise the incremental path.
        let mid = a + (b - a) / 3;
        cr.update(&payload[a..mid]);
        cr.update(&payload[mid..b]);
        out.extend_from_slice(&payload[a..b]);
        let (t, tl) = cr.trailer();
        out.extend_from_slice(&t[..tl]);
    }
    out
}

/// Full-featured receive configuration.
pub fn cfg_all(crc: bool) -> RxConfig {
    RxConfig {
        crc,
        rfc7306: true,
        commit: true,
        max_ulpdu: u16::MAX,
        siw_terminate: false,
    }
}

/// Parses `bytes` delivered in chunks of the given sizes (cycled).
pub fn parse_chunked(cfg: RxConfig, bytes: &[u8], chunks: &[usize]) -> (Vec<Ev>, Option<RxError>) {
    let mut p = RxParser::new(cfg, SoftCrc32c);
    let mut evs: Vec<Ev> = Vec::new();
    let mut off = 0;
    let mut ci = 0;
    while off < bytes.len() {
        let n = if chunks.is_empty() {
            bytes.len()
        } else {
            chunks[ci % chunks.len()].max(1)
        };
        ci += 1;
        let end = (off + n).min(bytes.len());
        let mut chunk = &bytes[off..end];
        off = end;
        loop {
            let (used, ev) = p.feed(chunk);
            assert!(used <= chunk.len());
            chunk = &chunk[used..];
            match ev {
                RxEvent::NeedMore => {
                    assert!(chunk.is_empty());
                    break;
                }
                RxEvent::Segment(s) => evs.push(Ev::Seg(s)),
                RxEvent::Payload { offset, data } => {
                    let seg_data_len = match evs.last_mut() {
                        Some(Ev::Data(d)) => {
                            assert_eq!(offset as usize, d.len());
                            d.extend_from_slice(data);
                            continue;
                        }
                        _ => 0,
                    };
                    assert_eq!(offset as usize, seg_data_len);
                    evs.push(Ev::Data(data.to_vec()));
                }
                RxEvent::End => evs.push(Ev::End),
                RxEvent::Error(e) => return (evs, Some(e)),
            }
        }
    }
    (evs, p.error())
}

/// Parses a whole buffer in one go.
pub fn parse(cfg: RxConfig, bytes: &[u8]) -> (Vec<Ev>, Option<RxError>) {
    parse_chunked(cfg, bytes, &[])
}

/// The segments of a parse.
pub fn segs(evs: &[Ev]) -> Vec<Segment> {
    evs.iter()
        .filter_map(|e| match e {
            Ev::Seg(s) => Some(*s),
            _ => None,
        })
        .collect()
}

/// An untagged placement.
pub fn untagged(msn: u32) -> Placement {
    Placement::Untagged {
        inv_stag: 0,
        qn: 0,
        msn,
        mo: 0,
    }
}

/// A simple message.
pub fn msg(opcode: Opcode, placement: Placement, body: Body, payload_len: u32) -> TxMessage {
    TxMessage {
        opcode,
        placement,
        body,
        payload_len,
    }
}

/// Builds a raw FPDU around a raw ULPDU (for malformed input tests).
pub fn raw_fpdu(ulpdu: &[u8], crc: bool) -> Vec<u8> {
    let mut out = vec![0u8; ulpdu.len() + 16];
    let n = rsiw_wire::wire::fpdu::encode_fpdu(&SoftCrc32c, crc, ulpdu, &mut out).expect("fpdu");
    out.truncate(n);
    out
}

/// A raw untagged ULPDU header: ctrl bytes, inv stag, qn, msn, mo.
pub fn raw_untagged(c0: u8, c1: u8, inv: u32, qn: u32, msn: u32, mo: u32) -> Vec<u8> {
    let mut v = vec![c0, c1];
    v.extend_from_slice(&inv.to_be_bytes());
    v.extend_from_slice(&qn.to_be_bytes());
    v.extend_from_slice(&msn.to_be_bytes());
    v.extend_from_slice(&mo.to_be_bytes());
    v
}

/// A raw tagged ULPDU header.
pub fn raw_tagged(c0: u8, c1: u8, stag: u32, to: u64) -> Vec<u8> {
    let mut v = vec![c0, c1];
    v.extend_from_slice(&stag.to_be_bytes());
    v.extend_from_slice(&to.to_be_bytes());
    v
}

/// Parses and returns the error the input must produce.
pub fn parse_err(cfg: RxConfig, bytes: &[u8]) -> RxError {
    let (_, e) = parse(cfg, bytes);
    e.expect("expected a parser error")
}
