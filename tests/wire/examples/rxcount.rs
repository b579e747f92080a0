// SPDX-License-Identifier: GPL-2.0

//! Instruction-count harness for the receive parser's small-message path.
//!
//! Feeds `N` one-FPDU messages (2-byte Send, or 2-byte Write with `write`) the
//! way the kernel RX engine does (`rx.rs`: headers and trailers copied into a
//! stack buffer of up to `HDR_BUF` bytes and fed, payload accounted with
//! `advance_payload()`), so that `valgrind --tool=callgrind` can count the
//! parser's instructions per message on the host:
//!
//!   cargo build --release --example rxcount
//!   valgrind --tool=callgrind target/release/examples/rxcount 1000 [write]
//!
//! With `tx-send` or `tx-write` it counts the TX side instead: segmenter,
//! FPDU plan, header and trailer of each message. With `tx-bulk` it plans
//! `N` 64 KiB Writes at a MULPDU of 1442 (a 1448-byte MSS): 46 FPDUs each.
//!
//! The difference between two runs with different `N`, divided by the
//! difference in `N`, is the per-message cost.

use rsiw_wire::wire::crc::Crc32c;
use rsiw_wire::wire::hdr::{Body, Opcode, Placement};
use rsiw_wire::wire::rx::{RxConfig, RxEvent, RxParser, HDR_BUF};
use rsiw_wire::wire::tx::{Segmenter, TxMessage};
use std::hint::black_box;

/// The CRC is off; the kernel computes it outside the parser anyway.
#[derive(Clone, Copy, Debug)]
struct NoCrc;

impl Crc32c for NoCrc {
    fn update(&self, reg: u32, _data: &[u8]) -> u32 {
        reg
    }
}

/// The `i`-th 2-byte message: a Write, or a Send with MSN `i + 1`.
fn message(i: u32, write: bool) -> TxMessage {
    if write {
        TxMessage {
            opcode: Opcode::Write,
            placement: Placement::Tagged {
                stag: 0x1234_5600,
                to: 0x7f00_0000_1000,
            },
            body: Body::None,
            payload_len: 2,
        }
    } else {
        TxMessage {
            opcode: Opcode::Send,
            placement: Placement::Untagged {
                inv_stag: 0,
                qn: 0,
                msn: i + 1,
                mo: 0,
            },
            body: Body::None,
            payload_len: 2,
        }
    }
}

fn stream(n: u32, write: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let msg = message(i, write);
        let mut s = Segmenter::new(msg, 1454).expect("segmenter");
        while let Some(p) = s.next_fpdu() {
            out.extend_from_slice(p.header());
            let mut c = p.crc(&NoCrc, false);
            c.update(&[0x5a, 0xa5]);
            out.extend_from_slice(&[0x5a, 0xa5]);
            let (t, k) = c.trailer();
            out.extend_from_slice(&t[..k]);
        }
    }
    out
}

/// `n` Writes of `len` bytes, one FPDU per TCP segment of `mss` bytes (the kernel TX path's
/// default FPDUs): the stream a bandwidth test receives.
fn bulk_stream(n: u32, len: u32, mss: u16) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let msg = TxMessage {
            opcode: Opcode::Write,
            placement: Placement::Tagged {
                stag: 0x1234_5600,
                to: 0x7f00_0000_0000 + u64::from(i) * u64::from(len),
            },
            body: Body::None,
            payload_len: len,
        };
        let mut s = Segmenter::new(msg, mss).expect("segmenter");
        while let Some(p) = s.next_fpdu() {
            out.extend_from_slice(p.header());
            let k = p.payload_len as usize;
            out.resize(out.len() + k, 0x5a);
            let c = p.crc(&NoCrc, false);
            let (t, k) = c.trailer();
            out.extend_from_slice(&t[..k]);
        }
    }
    out
}

/// One message per "skb", as a 2-byte ping-pong receives them.
fn process(p: &mut RxParser<NoCrc>, skb: &[u8]) -> usize {
    let mut pos = 0;
    let mut placed = 0;
    while pos < skb.len() {
        let rem = p.payload_remaining();
        if rem > 0 {
            let n = rem.min(skb.len() - pos);
            black_box(&skb[pos..pos + n]);
            p.advance_payload(n, Some).expect("advance");
            placed += n;
            pos += n;
            continue;
        }
        if let Some(k) = p.skip_trailer(skb.len() - pos) {
            // As the kernel without CRC: the trailer is not copied.
            black_box(RxEvent::End);
            pos += k;
            continue;
        }
        let mut stage = [0u8; HDR_BUF];
        let n = (skb.len() - pos).min(HDR_BUF);
        stage[..n].copy_from_slice(&skb[pos..pos + n]);
        let mut used = 0;
        while used < n && p.payload_remaining() == 0 {
            // As the kernel: a whole FPDU in the copy is taken in one step.
            if let Some((c, seg, data)) = p.feed_whole(&stage[used..n]) {
                black_box((&seg, data));
                placed += data.len();
                used += c;
                continue;
            }
            let (c, ev) = p.feed(&stage[used..n]);
            used += c;
            match black_box(&ev) {
                RxEvent::NeedMore => break,
                RxEvent::Error(e) => panic!("{e:?}"),
                _ => {}
            }
            if c == 0 {
                break;
            }
        }
        pos += used;
    }
    placed
}

/// The TX side of one 2-byte message as `tx.rs` builds it: segmenter, one
/// FPDU plan, its header staged, CRC accumulator and trailer.
fn tx(n: u32, write: bool) {
    let mut stage = [0u8; 256];
    let mut total = 0usize;
    for i in 0..n {
        let msg = black_box(message(i, write));
        let mut s = Segmenter::new(msg, black_box(1454)).expect("segmenter");
        let p = s.next_fpdu().expect("fpdu");
        let mut c = p.crc(&NoCrc, false);
        let h = p.header();
        stage[..h.len()].copy_from_slice(h);
        c.update(&[0x5a, 0xa5]);
        let (t, k) = c.trailer();
        stage[h.len() + 2..h.len() + 2 + k].copy_from_slice(&t[..k]);
        total += black_box(&stage)[0] as usize + h.len() + k;
    }
    println!("tx: {n} messages, {total}");
}

/// The TX side of `n` 64 KiB Writes cut at `mulpdu`: segmenter and FPDU plans, each
/// plan's header staged and its trailer built as `tx()` does (payload not touched).
fn tx_bulk(n: u32, mulpdu: u16) {
    let mut stage = [0u8; 256];
    let mut total = 0usize;
    let mut fpdus = 0u32;
    for i in 0..n {
        let msg = black_box(TxMessage {
            opcode: Opcode::Write,
            placement: Placement::Tagged {
                stag: 0x1234_5600,
                to: 0x7f00_0000_0000 + u64::from(i) * 65536,
            },
            body: Body::None,
            payload_len: 65536,
        });
        let mut s = Segmenter::new(msg, black_box(mulpdu)).expect("segmenter");
        while let Some(p) = s.next_fpdu() {
            let c = p.crc(&NoCrc, false);
            let h = p.header();
            stage[..h.len()].copy_from_slice(h);
            let (t, k) = c.trailer();
            stage[h.len()..h.len() + k].copy_from_slice(&t[..k]);
            total += black_box(&stage)[0] as usize + h.len() + k + p.payload_len as usize;
            fpdus += 1;
        }
    }
    println!("tx-bulk: {n} messages, {fpdus} FPDUs, {total}");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let mode = args.next();
    if mode.as_deref() == Some("tx-bulk") {
        tx_bulk(n, 1448 - 6);
        return;
    }
    if let Some(m) = mode.as_deref().and_then(|m| m.strip_prefix("tx-")) {
        tx(n, m == "write");
        return;
    }
    if mode.as_deref() == Some("bulk") {
        // 64 KiB Writes in FPDUs of one 1448-byte segment, received in 64 KiB GRO skbs.
        let s = bulk_stream(n, 65536, 1448 - 6);
        let mut p = RxParser::new(RxConfig::default(), NoCrc);
        let mut placed = 0;
        for m in s.chunks(65536) {
            placed += process(&mut p, black_box(m));
        }
        assert_eq!(placed, 65536 * n as usize);
        println!("{n} messages of 64 KiB, {} bytes", s.len());
        return;
    }
    let write = mode.as_deref() == Some("write");
    let s = stream(n, write);
    let per = s.len() / n as usize;
    let mut p = RxParser::new(RxConfig::default(), NoCrc);
    let mut placed = 0;
    for m in s.chunks(per) {
        placed += process(&mut p, black_box(m));
    }
    assert_eq!(placed, 2 * n as usize);
    println!("{n} messages of {per} bytes");
}
