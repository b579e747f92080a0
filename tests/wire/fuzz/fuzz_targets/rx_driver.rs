// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the receive parser the way the driver's RX path drives it
//! (`rx.rs`, `process`): payload accounted with `advance_payload` and the
//! CRC of the caller's bytes, headers and trailers fed from a copy of up to
//! `HDR_BUF` bytes, and a small FPDU whole in that copy taken in one step
//! with `feed_whole` (its quick header and whole header checks).
//!
//! Input: byte 0 selects the configuration, byte 1 the socket buffer size;
//! the rest is the TCP stream. The driver's path must never meet a state
//! the driver treats as a local error (payload not accounted, a parser that
//! wants nothing, a payload event), and must give the same segments, the
//! same payload bytes and the same error as `feed` over the whole stream.

#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use rsiw_wire::wire::crc::{Crc32c, SoftCrc32c};
use rsiw_wire::wire::rx::{RxConfig, RxEvent, RxParser, Segment, HDR_BUF};

type Out = (Vec<(Segment, Vec<u8>)>, Option<(u8, u8, u8)>);

/// `feed` over the whole stream, payload from its events.
fn reference(cfg: RxConfig, data: &[u8]) -> Out {
    let mut p = RxParser::new(cfg, SoftCrc32c);
    let mut segs: Vec<(Segment, Vec<u8>)> = Vec::new();
    let mut c = data;
    loop {
        let (n, ev) = p.feed(c);
        c = &c[n..];
        match ev {
            RxEvent::NeedMore => return (segs, None),
            RxEvent::Segment(s) => segs.push((s, Vec::new())),
            RxEvent::Payload { data, .. } => segs.last_mut().unwrap().1.extend_from_slice(data),
            RxEvent::End => {}
            RxEvent::Error(e) => return (segs, Some((e.code.layer, e.code.etype, e.code.ecode))),
        }
    }
}

/// The driver's loop over socket buffers of `skb` bytes.
fn driver(cfg: RxConfig, data: &[u8], skb: usize) -> Out {
    let mut p = RxParser::new(cfg, SoftCrc32c);
    let mut segs: Vec<(Segment, Vec<u8>)> = Vec::new();
    for buf in data.chunks(skb) {
        let mut pos = 0;
        while pos < buf.len() {
            let left = buf.len() - pos;
            let rem = p.payload_remaining();
            if rem > 0 {
                let n = rem.min(left);
                let (seg, payload) = segs.last_mut().expect("payload without a segment");
                let off = seg.payload_len as usize - rem;
                assert_eq!(off, payload.len());
                let bytes = &buf[pos..pos + n];
                let done = p.advance_payload(n, |reg| Some(SoftCrc32c.update(reg, bytes)));
                assert_eq!(done, Some(off as u32), "payload not accounted");
                payload.extend_from_slice(bytes);
                pos += n;
                continue;
            }
            assert_ne!(p.want(), 0, "the parser wants nothing");
            let n = left.min(HDR_BUF);
            let stage = &buf[pos..pos + n];
            let mut used = 0;
            while used < n && p.payload_remaining() == 0 {
                let input = &stage[used..n];
                if let Some((c, seg, data)) = p.feed_whole(input) {
                    assert!(c > 0 && c <= input.len());
                    assert_eq!(data.len(), seg.payload_len as usize);
                    used += c;
                    segs.push((seg, data.to_vec()));
                    continue;
                }
                let (c, ev) = p.feed(input);
                assert!(c <= input.len());
                used += c;
                match ev {
                    RxEvent::NeedMore => break,
                    RxEvent::Segment(s) => segs.push((s, Vec::new())),
                    RxEvent::End => {}
                    RxEvent::Error(e) => {
                        return (segs, Some((e.code.layer, e.code.etype, e.code.ecode)))
                    }
                    RxEvent::Payload { .. } => panic!("payload fed from the header copy"),
                }
                if c == 0 {
                    break;
                }
            }
            assert_ne!(used, 0, "the parser took nothing although it wants bytes");
            pos += used;
        }
    }
    (segs, None)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let cfg = common::rx_config(data[0]);
    let skb = if data[1] == 0 {
        usize::MAX
    } else {
        usize::from(data[1])
    };
    let stream = &data[2..];
    let a = reference(cfg, stream);
    let b = driver(cfg, stream, skb.min(stream.len().max(1)));
    assert_eq!(a, b);
});
