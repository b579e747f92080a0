// SPDX-License-Identifier: GPL-2.0

//! Benchmarks of the wire core hot paths (run by tests/wire/bench.sh).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use rsiw_wire::wire::crc::{Crc32c, SoftCrc32c, CRC_INIT};
use rsiw_wire::wire::hdr::{Body, DdpHeader, Opcode, Placement};
use rsiw_wire::wire::rx::{RxConfig, RxEvent, RxParser};
use rsiw_wire::wire::tx::{Segmenter, TxMessage};

fn encode_stream(msg: TxMessage, payload: &[u8], crc: bool) -> Vec<u8> {
    let c = SoftCrc32c;
    let mut s = Segmenter::new(msg, 1454).unwrap();
    let mut out = Vec::new();
    while let Some(p) = s.next_fpdu() {
        out.extend_from_slice(p.header());
        let mut cr = p.crc(&c, crc);
        let r = p.payload_off as usize..(p.payload_off + p.payload_len) as usize;
        cr.update(&payload[r.clone()]);
        out.extend_from_slice(&payload[r]);
        let (t, n) = cr.trailer();
        out.extend_from_slice(&t[..n]);
    }
    out
}

fn parse_all(cfg: RxConfig, b: &[u8]) -> usize {
    let mut p = RxParser::new(cfg, SoftCrc32c);
    let mut rest = b;
    let mut placed = 0;
    loop {
        let (n, ev) = p.feed(rest);
        rest = &rest[n..];
        match ev {
            RxEvent::NeedMore => return placed,
            RxEvent::Payload { data, .. } => placed += data.len(),
            RxEvent::Error(_) => panic!("parse error"),
            _ => {}
        }
    }
}

fn benches(c: &mut Criterion) {
    let send = TxMessage {
        opcode: Opcode::Send,
        placement: Placement::Untagged {
            inv_stag: 0,
            qn: 0,
            msn: 1,
            mo: 0,
        },
        body: Body::None,
        payload_len: 0,
    };
    c.bench_function("hdr_encode_untagged", |b| {
        let h = DdpHeader {
            opcode: Opcode::Send,
            last: true,
            placement: Placement::Untagged {
                inv_stag: 0,
                qn: 0,
                msn: 7,
                mo: 1440,
            },
        };
        let mut out = [0u8; 18];
        b.iter(|| black_box(black_box(&h).encode(&mut out)))
    });
    c.bench_function("fpdu_plan_write_segment", |b| {
        let w = TxMessage {
            opcode: Opcode::Write,
            placement: Placement::Tagged { stag: 5, to: 0 },
            body: Body::None,
            payload_len: 1440,
        };
        b.iter(|| {
            let mut s = Segmenter::new(black_box(w), 1454).unwrap();
            black_box(s.next_fpdu())
        })
    });
    let one = encode_stream(send, &[], false);
    c.bench_function("parse_validate_one_fpdu_header", |b| {
        b.iter(|| black_box(parse_all(RxConfig::default(), black_box(&one))))
    });
    let msg64 = TxMessage {
        opcode: Opcode::Write,
        placement: Placement::Tagged { stag: 5, to: 0 },
        body: Body::None,
        payload_len: 65536,
    };
    let payload = vec![0xA5u8; 65536];
    let mut g = c.benchmark_group("parse_64k_message");
    g.throughput(Throughput::Bytes(65536));
    let s_nocrc = encode_stream(msg64, &payload, false);
    let s_crc = encode_stream(msg64, &payload, true);
    g.bench_function("crc_off", |b| {
        b.iter(|| black_box(parse_all(RxConfig::default(), &s_nocrc)))
    });
    let cfg = RxConfig {
        crc: true,
        ..RxConfig::default()
    };
    g.bench_function("crc_on", |b| b.iter(|| black_box(parse_all(cfg, &s_crc))));
    g.finish();
    let mut g = c.benchmark_group("crc32c_sw");
    g.throughput(Throughput::Bytes(65536));
    g.bench_function("64KiB", |b| {
        b.iter(|| black_box(SoftCrc32c.update(CRC_INIT, black_box(&payload))))
    });
    g.finish();
}

criterion_group! {
    name = wire;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(wire);
