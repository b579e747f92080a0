// SPDX-License-Identifier: GPL-2.0

//! Independent oracle: Wireshark's `iwarp_mpa` and `iwarp_ddp_rdmap`
//! dissectors decode a synthetic TCP stream that our encoder wrote.
//!
//! The test writes a pcap (Ethernet/IPv4/TCP, one FPDU per segment, after an
//! MPA Request/Reply so the dissector's heuristic claims the stream), runs
//! `tshark -T fields` over it and compares every decoded field with what
//! was encoded. It fails if tshark is missing (tests/wire/check.sh installs
//! it).

mod common;

use common::*;
use rsiw_wire::wire::crc::{Crc32c, SoftCrc32c, CRC_INIT};
use rsiw_wire::wire::hdr::*;
use rsiw_wire::wire::mpa::{encode_frame, FrameKind, FLAG_C, MAX_FRAME};
use rsiw_wire::wire::term::{TermCode, Terminate};
use rsiw_wire::wire::tx::TxMessage;
use std::process::Command;

struct Pcap {
    buf: Vec<u8>,
    seq: [u32; 2],
}

impl Pcap {
    fn new() -> Self {
        let mut buf = Vec::new();
        for v in [
            0xa1b2_c3d4u32.to_le_bytes().as_slice(),
            &2u16.to_le_bytes(),
            &4u16.to_le_bytes(),
            &[0; 8],
            &65535u32.to_le_bytes(),
            &1u32.to_le_bytes(),
        ] {
            buf.extend_from_slice(v);
        }
        Pcap {
            buf,
            seq: [1000, 5000],
        }
    }

    /// Appends one TCP segment; `dir` 0 is client to server.
    fn segment(&mut self, dir: usize, payload: &[u8]) {
        let (sp, dp, sip, dip) = if dir == 0 {
            (40000u16, 40001u16, [10, 0, 0, 1], [10, 0, 0, 2])
        } else {
            (40001, 40000, [10, 0, 0, 2], [10, 0, 0, 1])
        };
        let mut f = Vec::new();
        f.extend_from_slice(&[
            2,
            0,
            0,
            0,
            0,
            (2 - dir) as u8,
            2,
            0,
            0,
            0,
            0,
            (dir + 1) as u8,
            0x08,
            0x00,
        ]);
        let tot = 20 + 20 + payload.len();
        let mut ip = vec![
            0x45,
            0,
            (tot >> 8) as u8,
            tot as u8,
            0,
            1,
            0x40,
            0,
            64,
            6,
            0,
            0,
        ];
        ip.extend_from_slice(&sip);
        ip.extend_from_slice(&dip);
        let mut sum = 0u32;
        for c in ip.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        let cs = !(sum as u16);
        ip[10..12].copy_from_slice(&cs.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&sp.to_be_bytes());
        f.extend_from_slice(&dp.to_be_bytes());
        f.extend_from_slice(&self.seq[dir].to_be_bytes());
        f.extend_from_slice(&self.seq[1 - dir].to_be_bytes());
        f.extend_from_slice(&[0x50, 0x18, 0xFF, 0xFF, 0, 0, 0, 0]);
        f.extend_from_slice(payload);
        self.seq[dir] = self.seq[dir].wrapping_add(payload.len() as u32);
        let n = (self.buf.len() / 64) as u32;
        for v in [
            n.to_le_bytes(),
            0u32.to_le_bytes(),
            (f.len() as u32).to_le_bytes(),
            (f.len() as u32).to_le_bytes(),
        ] {
            self.buf.extend_from_slice(&v);
        }
        self.buf.extend_from_slice(&f);
    }
}

const FIELDS: &[&str] = &[
    "iwarp_mpa.ulpdulength",
    "iwarp_mpa.crc",
    "iwarp_mpa.crc_check",
    "iwarp_ddp.tagged_flag",
    "iwarp_ddp.last_flag",
    "iwarp_ddp.dv",
    "iwarp_rdma.version",
    "iwarp_rdma.opcode",
    "iwarp_ddp.stag",
    "iwarp_ddp.tagged_offset",
    "iwarp_ddp.qn",
    "iwarp_ddp.msn",
    "iwarp_ddp.mo",
    "iwarp_rdma.inval_stag",
    "iwarp_rdma.sinkstag",
    "iwarp_rdma.sinkto",
    "iwarp_rdma.rdmardsz",
    "iwarp_rdma.srcstag",
    "iwarp_rdma.srcto",
    "iwarp_rdma.term_layer",
    "iwarp_rdma.term_etype_ddp",
    "iwarp_rdma.term_errcode_ddp_untagged",
    "iwarp_rdma.hdrct_d",
    "iwarp_rdma.atomic.opcode",
    "iwarp_rdma.atomic.request_identifier",
    "iwarp_rdma.atomic.remote_stag",
    "iwarp_rdma.atomic.remote_tagged_offset",
    "iwarp_rdma.atomic.add_data",
    "iwarp_rdma.atomic.swap_data",
    "iwarp_rdma.atomic.compare_data",
    "iwarp_rdma.atomic.original_request_identifier",
];

fn num(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    match s {
        "True" | "1" if s.len() == 1 || s == "True" => return Some(1),
        "False" => return Some(0),
        _ => {}
    }
    if let Some(h) = s.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok();
    }
    s.parse().ok()
}

#[test]
fn tshark_oracle_decodes_our_frames() {
    if Command::new("tshark").arg("--version").output().is_err() {
        panic!("tshark is not installed: run tests/wire/check.sh (it installs it) or apt-get install tshark");
    }
    let mut pcap = Pcap::new();
    let mut b = [0u8; MAX_FRAME];
    let n = encode_frame(FrameKind::Request, FLAG_C, 1, None, b"rsiw", &mut b).unwrap();
    pcap.segment(0, &b[..n]);
    let n = encode_frame(FrameKind::Reply, FLAG_C, 1, None, b"ok", &mut b).unwrap();
    pcap.segment(1, &b[..n]);

    let rr = ReadRequest {
        sink_stag: 0x1111,
        sink_to: 0x2222_3333,
        size: 4096,
        src_stag: 0x4444,
        src_to: 0x5555_6666_7777,
    };
    let fa = AtomicRequest::fetch_add(0x77, 0xAB, 0x1000, 5);
    let cs = AtomicRequest::cmp_swap(0x78, 0xAC, 0x2000, 9, 10);
    let term = Terminate::with_headers(
        TermCode::new(1, 2, 1),
        18,
        &raw_untagged(0x41, 0x43, 0, 7, 1, 0),
        None,
    );
    let pl = |inv, msn| Placement::Untagged {
        inv_stag: inv,
        qn: 0,
        msn,
        mo: 0,
    };
    let msgs: Vec<TxMessage> = vec![
        msg(Opcode::Send, pl(0, 1), Body::None, 5),
        msg(Opcode::SendInv, pl(0xDEAD_BEEF, 2), Body::None, 6),
        msg(Opcode::SendSe, pl(0, 3), Body::None, 0),
        msg(Opcode::SendSeInv, pl(0x0102_0304, 4), Body::None, 3),
        msg(
            Opcode::Write,
            Placement::Tagged {
                stag: 0xABCD,
                to: 0x1_0000_0000,
            },
            Body::None,
            10,
        ),
        msg(Opcode::ReadRequest, pl(0, 1), Body::ReadRequest(rr), 0),
        msg(
            Opcode::ReadResponse,
            Placement::Tagged {
                stag: 0x1111,
                to: 0x2222_3333,
            },
            Body::None,
            7,
        ),
        msg(Opcode::AtomicRequest, pl(0, 2), Body::AtomicRequest(fa), 0),
        msg(Opcode::AtomicRequest, pl(0, 3), Body::AtomicRequest(cs), 0),
        msg(
            Opcode::AtomicResponse,
            pl(0, 1),
            Body::AtomicResponse(AtomicResponse {
                req_id: 0x77,
                orig: 42,
            }),
            0,
        ),
        msg(
            Opcode::Send,
            Placement::Untagged {
                inv_stag: 0,
                qn: 0,
                msn: 5,
                mo: 0,
            },
            Body::None,
            3000,
        ),
        msg(Opcode::Terminate, pl(0, 1), Body::Terminate(term), 0),
    ];
    // Expected per FPDU: field name -> value.
    let mut expect: Vec<Vec<(&str, u64)>> = Vec::new();
    let c = SoftCrc32c;
    for m in &msgs {
        let payload: Vec<u8> = (0..m.payload_len).map(|i| i as u8).collect();
        let bytes = encode(*m, &payload, 1454, true);
        // Split the encoded stream into its FPDUs, one per TCP segment.
        let mut off = 0;
        let mut mo = 0u64;
        while off < bytes.len() {
            let ul = usize::from(u16::from_be_bytes([bytes[off], bytes[off + 1]]));
            let total = rsiw_wire::wire::fpdu::fpdu_len(ul);
            let f = &bytes[off..off + total];
            pcap.segment(0, f);
            let crc = u32::from_le_bytes(f[total - 4..].try_into().unwrap());
            assert_eq!(
                !c.update(CRC_INIT, &f[..total - 4]),
                u32::from_le_bytes(f[total - 4..].try_into().unwrap())
            );
            let last = off + total == bytes.len();
            let mut e: Vec<(&str, u64)> = vec![
                ("iwarp_mpa.ulpdulength", ul as u64),
                ("iwarp_mpa.crc_check", u64::from(crc.swap_bytes())),
                ("iwarp_ddp.tagged_flag", m.opcode.is_tagged() as u64),
                ("iwarp_ddp.last_flag", last as u64),
                ("iwarp_ddp.dv", 1),
                ("iwarp_rdma.version", 1),
                ("iwarp_rdma.opcode", m.opcode as u64),
            ];
            let seg_payload =
                (ul - m.opcode.header_len() + m.opcode.rdmap_hdr_len() - m.body.len()) as u64;
            match m.placement {
                Placement::Tagged { stag, to } => {
                    e.push(("iwarp_ddp.stag", stag.into()));
                    e.push(("iwarp_ddp.tagged_offset", to + mo));
                }
                Placement::Untagged { inv_stag, msn, .. } => {
                    e.push(("iwarp_ddp.qn", m.opcode.queue().unwrap().into()));
                    e.push(("iwarp_ddp.msn", msn.into()));
                    e.push(("iwarp_ddp.mo", mo));
                    if m.opcode.has_invalidate() {
                        e.push(("iwarp_rdma.inval_stag", inv_stag.into()));
                    }
                }
            }
            match m.body {
                Body::ReadRequest(r) => {
                    e.push(("iwarp_rdma.sinkstag", r.sink_stag.into()));
                    e.push(("iwarp_rdma.sinkto", r.sink_to));
                    e.push(("iwarp_rdma.rdmardsz", r.size.into()));
                    e.push(("iwarp_rdma.srcstag", r.src_stag.into()));
                    e.push(("iwarp_rdma.srcto", r.src_to));
                }
                Body::AtomicRequest(a) => {
                    e.push(("iwarp_rdma.atomic.opcode", a.aopcode.into()));
                    e.push(("iwarp_rdma.atomic.request_identifier", a.req_id.into()));
                    e.push(("iwarp_rdma.atomic.remote_stag", a.stag.into()));
                    e.push(("iwarp_rdma.atomic.remote_tagged_offset", a.to));
                    if a.aopcode == AOP_FETCH_ADD {
                        e.push(("iwarp_rdma.atomic.add_data", a.add_swap));
                    } else {
                        e.push(("iwarp_rdma.atomic.swap_data", a.add_swap));
                    }
                    e.push(("iwarp_rdma.atomic.compare_data", a.compare));
                }
                Body::AtomicResponse(r) => e.push((
                    "iwarp_rdma.atomic.original_request_identifier",
                    r.req_id.into(),
                )),
                Body::Terminate(t) => {
                    e.push(("iwarp_rdma.term_layer", t.code.layer.into()));
                    e.push(("iwarp_rdma.term_etype_ddp", t.code.etype.into()));
                    e.push(("iwarp_rdma.term_errcode_ddp_untagged", t.code.ecode.into()));
                    e.push(("iwarp_rdma.hdrct_d", 1));
                }
                _ => {}
            }
            expect.push(e);
            mo += seg_payload;
            off += total;
        }
    }
    let dir = std::env::temp_dir().join(format!("rsiw-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wire.pcap");
    std::fs::write(&path, &pcap.buf).unwrap();
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(&path).args([
        "-o",
        "iwarp_ddp_rdmap.reassemble_iwarp_rdma_send:FALSE",
        "-Y",
        "iwarp_ddp_rdmap",
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-E",
        "occurrence=f",
    ]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(
        rows.len(),
        expect.len(),
        "tshark decoded {} FPDUs, expected {}:\n{text}",
        rows.len(),
        expect.len()
    );
    let mut checked = 0;
    for (i, (row, exp)) in rows.iter().zip(&expect).enumerate() {
        let cols: Vec<&str> = row.split('|').collect();
        let get = |name: &str| cols[FIELDS.iter().position(|f| *f == name).unwrap()];
        for (name, want) in exp {
            let got = num(get(name));
            assert_eq!(
                got,
                Some(*want),
                "FPDU {i} field {name}: tshark says {:?}, we encoded {want:#x}\nrow: {row}",
                get(name)
            );
            checked += 1;
        }
        // Wireshark recomputes the CRC: a good one is reported as
        // crc_check, a bad one as crc.
        assert_eq!(
            get("iwarp_mpa.crc"),
            "",
            "FPDU {i}: Wireshark reports a bad CRC"
        );
    }
    println!(
        "tshark oracle: {} FPDUs, {checked} fields match",
        rows.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
