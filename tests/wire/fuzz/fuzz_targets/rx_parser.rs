// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the receive parser and the stream state with hostile bytes.
//!
//! Input: byte 0 selects the configuration, byte 1 the chunk size; the
//! rest is the TCP stream. The parser must never panic, must consume at most
//! what it is given, must yield payload that adds up to the announced
//! lengths, and must give the same result for whole and chunked delivery,
//! and when the caller places the payload itself with `consume_payload`
//! (the driver's path), calling it with nothing at every step.

#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use rsiw_wire::wire::crc::SoftCrc32c;
use rsiw_wire::wire::hdr::Placement;
use rsiw_wire::wire::rx::{RxConfig, RxEvent, RxParser};
use rsiw_wire::wire::stream::{OrdQueue, Request, RxUntagged};

fn run(
    cfg: RxConfig,
    data: &[u8],
    chunk: usize,
    place: bool,
) -> (Vec<(u32, u16)>, Option<(u8, u8, u8)>, usize) {
    let mut p = RxParser::new(cfg, SoftCrc32c);
    let mut rx = RxUntagged::new();
    let mut orq: OrdQueue<8> = OrdQueue::new(4);
    let _ = orq.issue(Request::Read {
        sink_stag: 1,
        sink_to: 0,
        size: 64,
    });
    let _ = orq.issue(Request::Atomic { req_id: 1 });
    let mut out = Vec::new();
    let mut payload = 0usize;
    let mut want = 0usize;
    for mut c in data.chunks(chunk.max(1)) {
        loop {
            if place {
                // An empty placement never changes anything.
                let in_payload = p.payload_remaining() > 0;
                assert_eq!(p.consume_payload(&[]).is_some(), in_payload);
                let n = p.payload_remaining().min(c.len());
                if n > 0 {
                    let off = p.consume_payload(&c[..n]).expect("placement");
                    assert_eq!(off as usize, payload);
                    payload += n;
                    assert!(payload <= want);
                    c = &c[n..];
                    continue;
                }
            }
            let (n, ev) = p.feed(c);
            assert!(n <= c.len());
            c = &c[n..];
            match ev {
                RxEvent::NeedMore => break,
                RxEvent::Segment(s) => {
                    assert_eq!(payload, want);
                    payload = 0;
                    want = s.payload_len as usize;
                    out.push((s.payload_len, s.ulpdu_len));
                    match s.hdr.placement {
                        Placement::Untagged { qn, .. } => {
                            let _ = rx.check(&s, Some(4096));
                            if qn == 3 {
                                let _ = orq.on_response(&s);
                            }
                        }
                        Placement::Tagged { stag, to } => {
                            let _ = orq.on_read_response(stag, to, s.payload_len, s.hdr.last);
                        }
                    }
                    let _ = p.terminate_for(
                        rsiw_wire::wire::term::TermCode::new(0, 1, 0),
                        rsiw_wire::wire::term::TermEcho::DdpAndRdma,
                    );
                    while orq.pop_completed().is_some() {}
                }
                RxEvent::Payload { offset, data } => {
                    assert!(!place, "payload left to the parser");
                    assert_eq!(offset as usize, payload);
                    payload += data.len();
                    assert!(payload <= want);
                }
                RxEvent::End => assert_eq!(payload, want),
                RxEvent::Error(e) => {
                    let t = p.terminate().expect("terminate");
                    let mut buf = [0u8; 64];
                    let len = t.encode(&mut buf).expect("encode");
                    assert_eq!(
                        rsiw_wire::wire::term::Terminate::decode(&buf[..len]),
                        Some(t)
                    );
                    return (
                        out,
                        Some((e.code.layer, e.code.etype, e.code.ecode)),
                        payload,
                    );
                }
            }
        }
    }
    (out, None, payload)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let cfg = common::rx_config(data[0]);
    let chunk = usize::from(data[1]) + 1;
    let stream = &data[2..];
    let a = run(cfg, stream, stream.len().max(1), false);
    let b = run(cfg, stream, chunk, false);
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    let c = run(cfg, stream, chunk, true);
    assert_eq!(a.0, c.0);
    assert_eq!(a.1, c.1);
});
