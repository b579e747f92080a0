// SPDX-License-Identifier: GPL-2.0

//! Regenerates the committed fuzz seed corpus:
//! `cargo test --test corpus -- --ignored`.

mod common;

use common::*;
use rsiw_wire::wire::hdr::*;
use rsiw_wire::wire::mpa::{encode_frame, Enhanced, FrameKind, RtrSet, MAX_FRAME};
use rsiw_wire::wire::term::{TermCode, Terminate};
use std::path::Path;

fn write(dir: &Path, name: &str, data: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), data).unwrap();
}

#[test]
#[ignore]
fn gen_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let rx = root.join("rx_parser");
    let sink = SinkRange {
        stag: 1,
        len: 8,
        to: 8,
    };
    let msgs = [
        (msg(Opcode::Send, untagged(1), Body::None, 40), 40),
        (
            msg(
                Opcode::Write,
                Placement::Tagged { stag: 1, to: 0 },
                Body::None,
                3000,
            ),
            3000,
        ),
        (
            msg(
                Opcode::ReadResponse,
                Placement::Tagged { stag: 1, to: 0 },
                Body::None,
                64,
            ),
            64,
        ),
        (
            msg(
                Opcode::ReadRequest,
                untagged(1),
                Body::ReadRequest(ReadRequest {
                    sink_stag: 1,
                    sink_to: 0,
                    size: 64,
                    src_stag: 2,
                    src_to: 0,
                }),
                0,
            ),
            0,
        ),
        (
            msg(
                Opcode::AtomicRequest,
                untagged(1),
                Body::AtomicRequest(AtomicRequest::fetch_add(1, 2, 8, 1)),
                0,
            ),
            0,
        ),
        (
            msg(
                Opcode::AtomicResponse,
                untagged(1),
                Body::AtomicResponse(AtomicResponse { req_id: 1, orig: 5 }),
                0,
            ),
            0,
        ),
        (
            msg(Opcode::ImmDataSe, untagged(1), Body::Immediate([1; 8]), 0),
            0,
        ),
        (
            msg(
                Opcode::FlushRequest,
                untagged(1),
                Body::FlushRequest(FlushRequest {
                    sink,
                    flags: FLUSH_V,
                }),
                0,
            ),
            0,
        ),
        (msg(Opcode::VerifyResponse, untagged(1), Body::None, 32), 32),
        (
            msg(
                Opcode::AtomicWriteRequest,
                untagged(1),
                Body::AtomicWriteRequest(AtomicWriteRequest { sink, data: [3; 8] }),
                0,
            ),
            0,
        ),
        (
            msg(
                Opcode::Terminate,
                untagged(1),
                Body::Terminate(Terminate::bare(TermCode::new(1, 2, 1))),
                0,
            ),
            0,
        ),
    ];
    for (i, (m, n)) in msgs.iter().enumerate() {
        for crc in [false, true] {
            let mut b = vec![if crc { 0x07 } else { 0x06 }, (i * 13) as u8];
            b.extend(encode(*m, &vec![0x5A; *n], 1454, crc));
            write(&rx, &format!("seed-{i:02}-{}", crc as u8), &b);
        }
    }
    let mpa = root.join("mpa_negotiate");
    let cfgs: [[u8; 16]; 3] = [
        [0x7F, 0, 0, 8, 0, 8, 0, 128, 0, 128, 0, 0, 0, 0, 0, 0],
        [0x00, 0, 0, 1, 0, 1, 0, 16, 0, 16, 0, 0, 0, 0, 0, 0],
        [
            0x2D, 0, 0x3F, 0xFF, 0x3F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0,
        ],
    ];
    let e = Enhanced {
        ird: 4,
        ord: 8,
        p2p: true,
        rtr: RtrSet {
            send: true,
            write: true,
            read: true,
        },
    };
    for (ci, c) in cfgs.iter().enumerate() {
        for (fi, (kind, flags, rev, en)) in [
            (FrameKind::Request, 0u8, 1u8, None),
            (FrameKind::Request, 0x40, 2, Some(e)),
            (FrameKind::Reply, 0, 2, Some(e)),
            (
                FrameKind::Reply,
                0x20,
                2,
                Some(Enhanced { p2p: false, ..e }),
            ),
            (FrameKind::Reply, 0x40, 1, None),
        ]
        .into_iter()
        .enumerate()
        {
            let mut out = [0u8; MAX_FRAME];
            let n = encode_frame(kind, flags, rev, en.as_ref(), b"pd", &mut out).unwrap();
            let mut b = c.to_vec();
            b.extend_from_slice(&out[..n]);
            write(&mpa, &format!("seed-{ci}-{fi}"), &b);
        }
    }
}
