// SPDX-License-Identifier: GPL-2.0

//! Real peer bytes: the wire core against traffic of the C `siw` driver.
//!
//! The fixtures in `tests/wire/fixtures/siw-*.pcap` are tcpdump captures of
//! two VMs running the C `siw` of Linux 7.3.4 (see the README there and
//! `scripts/rsiw/capture-siw.sh`). For every TCP connection of a capture this
//! test:
//!
//! 1. reassembles each direction by sequence number (retransmissions and
//!    duplicates dropped after checking they carry the same bytes,
//!    out-of-order data held until the hole is filled; a hole left at the
//!    end fails);
//! 2. parses the MPA Request and Reply with `wire::mpa` and checks the
//!    negotiation: our initiator and responder logic, given the frames siw
//!    sent, reach the parameters siw used;
//! 3. replays both directions in capture order through `wire::rx::RxParser`
//!    (fed with the bytes each TCP segment added), checking every untagged
//!    segment with `RxUntagged::check`, every tagged message's STag/TO
//!    continuity, Read Responses against the Read Requests of the other
//!    direction with `OrdQueue`, and the responder's IRD with `IrdCredits`;
//! 4. walks the FPDU framing independently: pad and CRC field (zero, as CRC
//!    is off), and every FPDU within the sender's MSS (MULPDU);
//! 5. parses each direction again in other chunkings (whole stream, 1 byte,
//!    MSS-sized, 7 bytes) and requires the same segments and payload;
//! 6. compares the message and FPDU counts per opcode with what the tool
//!    that made the capture does (rping, ib_write_bw, ib_read_bw,
//!    ib_send_bw), and requires the connection to end in a FIN (or a
//!    Terminate, decoded with siw's known field swap, anchors.md A.11).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use rsiw_wire::wire::crc::SoftCrc32c;
use rsiw_wire::wire::fpdu::{fpdu_len, mulpdu_from_mss, pad_len, CRC_LEN, LEN_LEN};
use rsiw_wire::wire::hdr::{Body, Opcode, Placement, QN_READ_REQ, QN_SEND, QN_TERMINATE};
use rsiw_wire::wire::mpa::{
    initiator_decide, responder_decide, Frame, FrameKind, InitiatorAction, LocalConfig,
    ResponderAction, RtrSet, FLAG_C, FLAG_M, FLAG_R, FLAG_RES, FLAG_S, HDR_LEN,
};
use rsiw_wire::wire::rx::{RxConfig, RxEvent, RxParser, Segment};
use rsiw_wire::wire::stream::{IrdCredits, OrdQueue, Request, RxUntagged};

// ---------------------------------------------------------------------------
// pcap, Ethernet, IPv4, TCP

#[derive(Clone, Debug)]
struct Pkt {
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    seq: u32,
    syn: bool,
    ack: bool,
    fin: bool,
    rst: bool,
    mss: Option<u16>,
    tsopt: bool,
    payload: Vec<u8>,
}

fn u16be(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

fn u32be(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Reads a classic pcap file of Ethernet frames and returns its IPv4 TCP
/// packets in capture order.
fn read_pcap(file: &[u8]) -> Vec<Pkt> {
    assert!(file.len() >= 24, "pcap too short");
    let magic = u32::from_le_bytes(file[0..4].try_into().unwrap());
    let le = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => panic!("not a pcap file (magic {m:#x})"),
    };
    let rd32 = |o: usize| -> u32 {
        let a: [u8; 4] = file[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    assert_eq!(rd32(20), 1, "link type must be Ethernet");
    let mut out = Vec::new();
    let mut off = 24;
    while off < file.len() {
        assert!(off + 16 <= file.len(), "truncated pcap record header");
        let incl = rd32(off + 8) as usize;
        let orig = rd32(off + 12) as usize;
        let f = &file[off + 16..off + 16 + incl];
        off += 16 + incl;
        assert_eq!(incl, orig, "a frame was truncated by the snap length");
        if f.len() < 14 || u16be(f, 12) != 0x0800 {
            continue;
        }
        let ip = &f[14..];
        assert_eq!(ip[0] >> 4, 4);
        let ihl = usize::from(ip[0] & 0xf) * 4;
        let tot = usize::from(u16be(ip, 2));
        // Ethernet pads short frames; a GSO frame may have tot_len 0.
        let ip = if tot >= ihl && tot <= ip.len() {
            &ip[..tot]
        } else {
            ip
        };
        if ip[9] != 6 {
            continue;
        }
        let frag = u16be(ip, 6);
        assert_eq!(frag & 0x3fff, 0, "IP fragments are not expected");
        let src = ip[12..16].try_into().unwrap();
        let dst = ip[16..20].try_into().unwrap();
        let t = &ip[ihl..];
        let doff = usize::from(t[12] >> 4) * 4;
        let flags = t[13];
        let (mut mss, mut tsopt) = (None, false);
        let mut o = 20;
        while o < doff {
            match t[o] {
                0 => break,
                1 => o += 1,
                k => {
                    let l = usize::from(t[o + 1]);
                    assert!(l >= 2, "bad TCP option length");
                    if k == 2 {
                        mss = Some(u16be(t, o + 2));
                    } else if k == 8 {
                        tsopt = true;
                    }
                    o += l;
                }
            }
        }
        out.push(Pkt {
            src: (src, u16be(t, 0)),
            dst: (dst, u16be(t, 2)),
            seq: u32be(t, 4),
            syn: flags & 0x02 != 0,
            ack: flags & 0x10 != 0,
            fin: flags & 0x01 != 0,
            rst: flags & 0x04 != 0,
            mss,
            tsopt,
            payload: t[doff..].to_vec(),
        });
    }
    out
}

// ---------------------------------------------------------------------------
// TCP stream reassembly

type Addr = ([u8; 4], u16);

/// One direction of a TCP connection.
#[derive(Default, Debug)]
struct Dir {
    isn: Option<u32>,
    /// Reassembled payload.
    data: Vec<u8>,
    /// Out-of-order segments, by relative sequence number.
    ooo: BTreeMap<u32, Vec<u8>>,
    /// MSS option of this direction's SYN (what the sender can receive).
    syn_mss: Option<u16>,
    syn_ts: bool,
    fin_at: Option<usize>,
    rst: bool,
    dups: usize,
    reordered: usize,
}

impl Dir {
    /// Takes a segment; returns the range of `data` it made contiguous.
    fn push(&mut self, seq: u32, payload: &[u8]) -> std::ops::Range<usize> {
        let start = self.data.len();
        let isn = self.isn.expect("data before the SYN");
        let rel = seq.wrapping_sub(isn.wrapping_add(1));
        assert!(rel < 1 << 30, "sequence number far outside the window");
        let rel = rel as usize;
        let end = rel + payload.len();
        if end <= self.data.len() {
            assert_eq!(
                &self.data[rel..end],
                payload,
                "a retransmission carries different bytes"
            );
            self.dups += 1;
            return start..start;
        }
        if rel > self.data.len() {
            self.reordered += 1;
            self.ooo.insert(rel as u32, payload.to_vec());
            return start..start;
        }
        let have = self.data.len();
        assert_eq!(
            &self.data[rel..have],
            &payload[..have - rel],
            "overlap differs"
        );
        self.data.extend_from_slice(&payload[have - rel..]);
        // Drain what became contiguous.
        while let Some((&r, _)) = self.ooo.first_key_value() {
            let r = r as usize;
            if r > self.data.len() {
                break;
            }
            let p = self.ooo.pop_first().unwrap().1;
            if r + p.len() > self.data.len() {
                let have = self.data.len();
                self.data.extend_from_slice(&p[have - r..]);
            }
        }
        start..self.data.len()
    }
}

/// A TCP connection: direction 0 from the initiator (SYN sender).
#[derive(Debug)]
struct Conn {
    addr: [Addr; 2],
    dir: [Dir; 2],
    /// (direction, range of that direction's data), in capture order.
    chunks: Vec<(usize, std::ops::Range<usize>)>,
}

fn reassemble(pkts: &[Pkt]) -> Vec<Conn> {
    let mut conns: Vec<Conn> = Vec::new();
    let mut index: HashMap<(Addr, Addr), (usize, usize)> = HashMap::new();
    for p in pkts {
        if p.syn && !p.ack {
            if let Some(&(c, _)) = index.get(&(p.src, p.dst)) {
                assert_eq!(conns[c].dir[0].isn, Some(p.seq), "SYN reuses a 4-tuple");
                continue; // retransmitted SYN
            }
            let mut d0 = Dir {
                isn: Some(p.seq),
                syn_mss: p.mss,
                syn_ts: p.tsopt,
                ..Default::default()
            };
            d0.data.reserve(1 << 16);
            conns.push(Conn {
                addr: [p.src, p.dst],
                dir: [d0, Dir::default()],
                chunks: Vec::new(),
            });
            let c = conns.len() - 1;
            index.insert((p.src, p.dst), (c, 0));
            index.insert((p.dst, p.src), (c, 1));
            continue;
        }
        let Some(&(c, d)) = index.get(&(p.src, p.dst)) else {
            panic!("packet of a connection whose SYN was not captured");
        };
        let conn = &mut conns[c];
        let dir = &mut conn.dir[d];
        if p.syn {
            assert!(dir.isn.is_none() || dir.isn == Some(p.seq));
            dir.isn = Some(p.seq);
            dir.syn_mss = p.mss;
            dir.syn_ts = p.tsopt;
        }
        if !p.payload.is_empty() {
            let r = dir.push(p.seq, &p.payload);
            if !r.is_empty() {
                conn.chunks.push((d, r));
            }
        }
        if p.fin {
            let at =
                p.seq.wrapping_sub(dir.isn.unwrap().wrapping_add(1)) as usize + p.payload.len();
            dir.fin_at = Some(at);
        }
        if p.rst {
            dir.rst = true;
        }
    }
    for c in &conns {
        for d in &c.dir {
            assert!(d.ooo.is_empty(), "a hole in the stream was never filled");
        }
    }
    conns
}

// ---------------------------------------------------------------------------
// MPA

/// The MPA exchange of one connection, as siw ran it.
#[derive(Debug)]
struct Mpa {
    req_len: usize,
    rep_len: usize,
    crc: bool,
    /// The enhanced IRD/ORD words of the Request and the Reply.
    req_ird_ord: (u16, u16),
    rep_ird_ord: (u16, u16),
    /// IRD/ORD in effect at the initiator and at the responder.
    init_ird_ord: (u16, u16),
    resp_ird_ord: (u16, u16),
}

fn check_mpa(c: &Conn) -> Mpa {
    let req = Frame::parse(&c.dir[0].data, FrameKind::Request).expect("MPA Request");
    let rep = Frame::parse(&c.dir[1].data, FrameKind::Reply).expect("MPA Reply");
    // siw in 7.3: Rev 2 (mpa_version), enhanced, no markers, CRC off
    // (mpa_crc_required = false), no GSO hint (try_gso = false), no
    // private data of its own; rdma_cm puts none for these tools either.
    for (what, f) in [("request", &req), ("reply", &rep)] {
        assert_eq!(f.hdr.rev, 2, "{what}: MPA revision");
        assert_eq!(
            f.hdr.flags & (FLAG_M | FLAG_C | FLAG_R | FLAG_S | FLAG_RES),
            FLAG_S,
            "{what}: flags"
        );
        assert!(f.hdr.enhanced() && !f.hdr.markers() && !f.hdr.crc() && !f.hdr.reject());
    }
    let ie = req.enhanced.expect("enhanced request");
    let re = rep.enhanced.expect("enhanced reply");
    // peer_to_peer = false: no P2P, no RTR flags either way.
    assert!(!ie.p2p && ie.rtr == RtrSet::NONE, "request P2P/RTR: {ie:?}");
    assert!(!re.p2p && re.rtr == RtrSet::NONE, "reply P2P/RTR: {re:?}");

    // Our responder, configured with the IRD/ORD the ULP gave siw (which siw
    // echoes in its reply), answers this request as siw did.
    let rcfg = LocalConfig {
        ird: re.ird,
        ord: re.ord,
        ..LocalConfig::default()
    };
    let req_pd = &c.dir[0].data[HDR_LEN..HDR_LEN + usize::from(req.hdr.pd_len)];
    let rp = match responder_decide(&rcfg, &req.hdr, req_pd) {
        ResponderAction::Accept {
            flags,
            rev,
            enhanced,
            params,
        } => {
            assert_eq!(flags, rep.hdr.flags & !FLAG_S, "our reply flags");
            assert_eq!(rev, rep.hdr.rev, "our reply revision");
            assert_eq!(enhanced, Some(re), "our reply's enhanced data");
            params
        }
        a => panic!("our responder would not accept siw's request: {a:?}"),
    };
    assert!(rp.enhanced && !rp.crc && !rp.p2p && rp.rev == 2);
    assert_eq!(rp.peer_ird, Some(ie.ird));
    assert_eq!(rp.peer_ord, Some(ie.ord));

    // Our initiator, with the request's IRD/ORD, accepts siw's reply.
    let icfg = LocalConfig {
        ird: ie.ird,
        ord: ie.ord,
        ..LocalConfig::default()
    };
    let rep_pd = &c.dir[1].data[HDR_LEN..HDR_LEN + usize::from(rep.hdr.pd_len)];
    let ip = match initiator_decide(&icfg, &rep.hdr, rep_pd) {
        InitiatorAction::Established(p) => p,
        a => panic!("our initiator would not accept siw's reply: {a:?}"),
    };
    assert!(ip.enhanced && !ip.crc && !ip.p2p && ip.rev == 2 && ip.rtr_send.is_none());
    // siw's initiator takes the reply's values (cep->ird = rep_ord,
    // cep->ord = rep_ird); with the relaxed negotiation both ends agree:
    // initiator ORD <= responder IRD, responder ORD <= initiator IRD.
    assert!(
        ip.ord <= re.ird && rp.ord <= ip.ird,
        "IRD/ORD: {ip:?} {rp:?}"
    );
    Mpa {
        req_len: HDR_LEN + usize::from(req.hdr.pd_len),
        rep_len: HDR_LEN + usize::from(rep.hdr.pd_len),
        crc: false,
        req_ird_ord: (ie.ird, ie.ord),
        rep_ird_ord: (re.ird, re.ord),
        init_ird_ord: (ip.ird, ip.ord),
        resp_ird_ord: (rp.ird, rp.ord),
    }
}

// ---------------------------------------------------------------------------
// FPDU parsing

/// A segment and its payload, as the parser produced them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seg {
    seg: Segment,
    payload: Vec<u8>,
}

/// Feeds `input` to `p`, collecting finished segments into `out` and the
/// one in progress into `cur`.
fn feed(p: &mut RxParser<SoftCrc32c>, mut input: &[u8], cur: &mut Option<Seg>, out: &mut Vec<Seg>) {
    loop {
        let (n, ev) = p.feed(input);
        match ev {
            RxEvent::NeedMore => {
                assert_eq!(n, input.len());
                return;
            }
            RxEvent::Segment(seg) => {
                assert!(cur.is_none());
                *cur = Some(Seg {
                    seg,
                    payload: Vec::new(),
                });
            }
            RxEvent::Payload { offset, data } => {
                let c = cur.as_mut().expect("payload outside a segment");
                assert_eq!(offset as usize, c.payload.len());
                c.payload.extend_from_slice(data);
            }
            RxEvent::End => {
                let c = cur.take().expect("end outside a segment");
                assert_eq!(c.payload.len(), c.seg.payload_len as usize);
                out.push(c);
            }
            RxEvent::Error(e) => panic!(
                "the parser rejects siw's bytes: {e:?}, Terminate {:?}",
                p.terminate()
            ),
        }
        input = &input[n..];
    }
}

fn parse_chunked(cfg: RxConfig, data: &[u8], chunk: usize) -> Vec<Seg> {
    let mut p = RxParser::new(cfg, SoftCrc32c);
    let (mut cur, mut out) = (None, Vec::new());
    for c in data.chunks(chunk.max(1)) {
        feed(&mut p, c, &mut cur, &mut out);
    }
    assert!(
        cur.is_none() && !p.in_segment(),
        "stream ends inside an FPDU"
    );
    out
}

/// `siw`'s `MAX_HDR_INLINE` (siw_qp_tx.c): payloads up to this size are
/// copied behind the header and sent as one FPDU by `siw_qp_prepare_tx()`.
const SIW_MAX_HDR_INLINE: u32 = 32;

/// One FPDU as the length fields frame it.
#[derive(Debug)]
struct Fpdu {
    off: usize,
    total: usize,
    /// The pad bytes are not all zero.
    dirty_pad: bool,
}

/// Walks the FPDUs of one direction by their length fields, independently
/// of the parser; checks size against the MULPDU and the CRC field.
fn walk_fpdus(data: &[u8], crc: bool, mulpdu: u16) -> Vec<Fpdu> {
    let (mut off, mut out) = (0, Vec::new());
    while off < data.len() {
        let ulpdu = usize::from(u16be(data, off));
        let total = fpdu_len(ulpdu);
        assert!(off + total <= data.len(), "FPDU at {off} runs past the end");
        assert!(
            ulpdu <= usize::from(mulpdu),
            "FPDU at {off}: ULPDU {ulpdu} > MULPDU {mulpdu}"
        );
        let pad = &data[off + LEN_LEN + ulpdu..off + LEN_LEN + ulpdu + pad_len(ulpdu)];
        let crcf = &data[off + total - CRC_LEN..off + total];
        if !crc {
            // siw writes a zero CRC field when CRC is off (MPA-24 leaves it
            // unspecified).
            assert_eq!(crcf, [0; 4], "FPDU at {off}: CRC field with CRC off");
        }
        out.push(Fpdu {
            off,
            total,
            dirty_pad: pad.iter().any(|&b| b != 0),
        });
        off += total;
    }
    out
}

// ---------------------------------------------------------------------------
// Replay with stream state

/// Counts per opcode: messages (segments with L), FPDUs, payload bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Count {
    msgs: usize,
    fpdus: usize,
    bytes: u64,
}

#[derive(Debug, Default)]
struct Side {
    counts: BTreeMap<Opcode, Count>,
    terminate: Option<Segment>,
    max_fpdu: usize,
    max_inflight_reads: u16,
    /// FPDUs whose pad bytes are not zero (siw's inline path).
    dirty_pads: usize,
    /// The direction ended with a FIN (else with a RST).
    fin: bool,
    /// Every segment, in order.
    segs: Vec<Seg>,
}

fn mss_of(c: &Conn, d: usize) -> u32 {
    // The sender of direction d sends at most the MSS the receiver announced
    // in its SYN, less 12 bytes of timestamp option if both sides use them.
    let peer = &c.dir[1 - d];
    let mss = u32::from(peer.syn_mss.expect("SYN without MSS option"));
    if c.dir[0].syn_ts && c.dir[1].syn_ts {
        mss - 12
    } else {
        mss
    }
}

fn replay(c: &Conn, mpa: &Mpa) -> [Side; 2] {
    // The peer is siw: accept its little-endian Terminate layout.
    let cfg = RxConfig {
        crc: mpa.crc,
        siw_terminate: true,
        ..RxConfig::default()
    };
    let skip = [mpa.req_len, mpa.rep_len];
    let mut parsers = [
        RxParser::new(cfg, SoftCrc32c),
        RxParser::new(cfg, SoftCrc32c),
    ];
    let mut cur: [Option<Seg>; 2] = [None, None];
    let mut untagged = [RxUntagged::new(), RxUntagged::new()];
    // Open tagged messages per direction: (opcode, STag) -> next TO.
    let mut open: [HashMap<(Opcode, u32), u64>; 2] = [HashMap::new(), HashMap::new()];
    // Side 0 is the initiator. ORD queue of the requester, IRD of the
    // responder.
    let (iird, iord) = mpa.init_ird_ord;
    let (rird, rord) = mpa.resp_ird_ord;
    let mut ord = [OrdQueue::<128>::new(iord), OrdQueue::<128>::new(rord)];
    let mut ird = [IrdCredits::new(iird), IrdCredits::new(rird)];
    let mut sides = [Side::default(), Side::default()];
    let mut natural: [Vec<Seg>; 2] = [Vec::new(), Vec::new()];

    for (d, r) in &c.chunks {
        let d = *d;
        let start = r.start.max(skip[d]);
        if start >= r.end {
            continue;
        }
        let mut done = Vec::new();
        feed(
            &mut parsers[d],
            &c.dir[d].data[start..r.end],
            &mut cur[d],
            &mut done,
        );
        assert!(
            sides[d].terminate.is_none() || done.is_empty(),
            "an FPDU follows a Terminate"
        );
        for s in done {
            let seg = s.seg;
            let op = seg.hdr.opcode;
            let e = sides[d].counts.entry(op).or_default();
            e.fpdus += 1;
            e.bytes += u64::from(seg.payload_len);
            if seg.hdr.last {
                e.msgs += 1;
            }
            match seg.hdr.placement {
                Placement::Untagged { qn, .. } => {
                    let pos = untagged[d].check(&seg, Some(u64::MAX)).unwrap_or_else(|t| {
                        panic!("dir {d}: MSN/MO check failed: {t:?} on {seg:?}")
                    });
                    if qn == QN_READ_REQ {
                        let Body::ReadRequest(rr) = seg.body else {
                            panic!("QN 1 without a Read Request header")
                        };
                        assert!(pos.first && pos.complete);
                        // The requester (side d) issues, the responder
                        // (side 1-d) takes an IRD slot.
                        ord[d]
                            .issue(Request::Read {
                                sink_stag: rr.sink_stag,
                                sink_to: rr.sink_to,
                                size: rr.size,
                            })
                            .unwrap_or_else(|b| {
                                panic!("dir {d}: Read beyond ORD {}: {b:?}", [iord, rord][d])
                            });
                        sides[d].max_inflight_reads =
                            sides[d].max_inflight_reads.max(ord[d].inflight());
                        ird[1 - d].take().unwrap_or_else(|t| {
                            panic!("dir {d}: Read beyond the peer's IRD: {t:?}")
                        });
                    } else if qn == QN_TERMINATE {
                        sides[d].terminate = Some(seg);
                    } else {
                        assert_eq!(qn, QN_SEND, "dir {d}: unexpected queue in {seg:?}");
                    }
                }
                Placement::Tagged { stag, to } => {
                    let key = (op, stag);
                    if let Some(&next) = open[d].get(&key) {
                        assert_eq!(
                            to, next,
                            "dir {d}: TO does not continue the message: {seg:?}"
                        );
                    }
                    if seg.hdr.last {
                        open[d].remove(&key);
                    } else {
                        open[d].insert(key, to + u64::from(seg.payload_len));
                    }
                    if op == Opcode::ReadResponse {
                        // Matches the oldest Read the other side issued.
                        let fin = ord[1 - d]
                            .on_read_response(stag, to, seg.payload_len, seg.hdr.last)
                            .unwrap_or_else(|t| {
                                panic!("dir {d}: Read Response mismatch {t:?}: {seg:?}")
                            });
                        if fin {
                            ird[d].release();
                            assert!(ord[1 - d].pop_completed().is_some());
                        }
                    }
                }
            }
            natural[d].push(s);
        }
    }
    for d in 0..2 {
        assert!(
            cur[d].is_none() && !parsers[d].in_segment(),
            "dir {d} ends inside an FPDU"
        );
        assert!(
            open[d].is_empty(),
            "dir {d}: tagged message left open: {:?}",
            open[d]
        );
        assert_eq!(ord[d].inflight(), 0, "side {d}: Reads never answered");
        assert_eq!(ird[d].used(), 0, "side {d}: IRD slots never released");
        let body = &c.dir[d].data[skip[d]..];
        // FPDU framing and size, independently of the parser.
        let mss = mss_of(c, d);
        let mulpdu = mulpdu_from_mss(mss).expect("MULPDU");
        let fpdus = walk_fpdus(body, mpa.crc, mulpdu);
        assert_eq!(fpdus.len(), natural[d].len(), "dir {d}: FPDU count");
        for (f, s) in fpdus.iter().zip(&natural[d]) {
            assert!(
                f.total <= mss as usize,
                "dir {d}: FPDU of {} bytes > MSS {mss}",
                f.total
            );
            sides[d].max_fpdu = sides[d].max_fpdu.max(f.total);
            if f.dirty_pad {
                // RFC 5044 §4.1: pad is zero at the sender, ignored by the
                // receiver. siw's short-message path (siw_qp_prepare_tx)
                // rounds the inline payload up to 4 bytes without clearing
                // the pad, so stale bytes of its packet buffer go out. Only
                // there: single-FPDU messages with at most
                // MAX_HDR_INLINE bytes of payload.
                assert!(
                    s.seg.hdr.last && s.seg.payload_len <= SIW_MAX_HDR_INLINE,
                    "dir {d}: non-zero pad at {} outside siw's inline path: {:?}",
                    f.off,
                    s.seg
                );
                sides[d].dirty_pads += 1;
            }
        }
        // Any chunking gives the same segments and payload.
        for chunk in [body.len(), 1, mss as usize, 7] {
            assert!(
                parse_chunked(cfg, body, chunk) == natural[d],
                "dir {d}: chunks of {chunk} give other segments"
            );
        }
        // The connection ends with a FIN after the last FPDU (or the stream
        // was reset after a Terminate).
        match (c.dir[d].fin_at, c.dir[d].rst) {
            (Some(at), _) => {
                assert_eq!(at, c.dir[d].data.len(), "dir {d}: data after FIN");
                sides[d].fin = true;
            }
            (None, true) => {}
            (None, false) => panic!("dir {d}: neither FIN nor RST"),
        }
        sides[d].segs = std::mem::take(&mut natural[d]);
    }
    sides
}

// ---------------------------------------------------------------------------
// The fixtures

/// Reads a fixture from `tests/wire/fixtures`, or from `$RSIW_SIW_FIXTURES`
/// (to check a fresh capture, see scripts/rsiw/capture-siw.sh).
fn fixture(name: &str) -> Vec<u8> {
    let dir = std::env::var_os("RSIW_SIW_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures"));
    let p = dir.join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

struct Report {
    conns: Vec<(Mpa, [Side; 2])>,
}

fn run(name: &str) -> Report {
    run_bytes(name, &fixture(name))
}

fn run_bytes(name: &str, file: &[u8]) -> Report {
    let pkts = read_pcap(file);
    let conns = reassemble(&pkts);
    assert!(!conns.is_empty(), "{name}: no TCP connection");
    let mut out = Vec::new();
    for (i, c) in conns.iter().enumerate() {
        let mpa = check_mpa(c);
        let sides = replay(c, &mpa);
        for (d, s) in sides.iter().enumerate() {
            eprintln!(
                "{name} conn {i} dir {d} ({}:{} ->): {} bytes, {} dups, {} reordered, max FPDU {}, {} dirty pads, {:?}",
                fmt_ip(c.addr[d].0),
                c.addr[d].1,
                c.dir[d].data.len(),
                c.dir[d].dups,
                c.dir[d].reordered,
                s.max_fpdu,
                s.dirty_pads,
                s.counts
            );
        }
        eprintln!("{name} conn {i} MPA: {mpa:?}");
        out.push((mpa, sides));
    }
    Report { conns: out }
}

fn fmt_ip(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

fn count(msgs: usize, fpdus: usize, bytes: u64) -> Count {
    Count { msgs, fpdus, bytes }
}

/// Per connection: the MPA IRD/ORD words (request, reply) and, per
/// direction, the expected counts per opcode.
type Expect<'a> = ((u16, u16), (u16, u16), [&'a [(Opcode, Count)]; 2]);

fn check(name: &str, expect: &[Expect<'_>]) -> Report {
    let r = run(name);
    assert_eq!(r.conns.len(), expect.len(), "{name}: connections");
    for (i, ((mpa, sides), (req, rep, dirs))) in r.conns.iter().zip(expect).enumerate() {
        assert_eq!(mpa.req_ird_ord, *req, "{name} conn {i}: Request IRD/ORD");
        assert_eq!(mpa.rep_ird_ord, *rep, "{name} conn {i}: Reply IRD/ORD");
        for d in 0..2 {
            let want: BTreeMap<Opcode, Count> = dirs[d].iter().copied().collect();
            assert_eq!(sides[d].counts, want, "{name} conn {i} dir {d}: opcodes");
            assert_eq!(
                sides[d].terminate.is_some(),
                want.contains_key(&Opcode::Terminate),
                "{name} conn {i} dir {d}: Terminate"
            );
            assert!(sides[d].fin, "{name} conn {i} dir {d}: no FIN");
        }
    }
    r
}

/// The largest FPDU a direction carrying multi-FPDU messages sends is
/// exactly the MSS: siw fills one FPDU per TCP segment (siw_update_tcpseg;
/// the link MTU is 1500 with timestamps, so 1448 bytes).
fn assert_full_fpdus(r: &Report, conn: usize, dir: usize) {
    assert_eq!(
        r.conns[conn].1[dir].max_fpdu, 1448,
        "conn {conn} dir {dir}: FPDU size"
    );
}

/// rping -C 3 -S 100: per ping the client Sends its source buffer's
/// address/rkey/length (16 bytes), the server Reads the 100 bytes, Sends a
/// go-ahead, the client Sends its sink buffer's, the server Writes the 100
/// bytes back and Sends a go-ahead. IRD = ORD = 1 (rping's conn_param).
#[test]
fn siw_rping() {
    let r = check(
        "siw-rping.pcap",
        &[(
            (1, 1),
            (1, 1),
            [
                &[
                    (Opcode::ReadResponse, count(3, 3, 300)),
                    (Opcode::Send, count(6, 6, 96)),
                ],
                &[
                    (Opcode::Write, count(3, 3, 300)),
                    (Opcode::ReadRequest, count(3, 3, 0)),
                    (Opcode::Send, count(6, 6, 96)),
                ],
            ],
        )],
    );
    let (mpa, sides) = &r.conns[0];
    assert_eq!((mpa.init_ird_ord, mpa.resp_ird_ord), ((1, 1), (1, 1)));
    assert_eq!(sides[1].max_inflight_reads, 1);
}

/// perftest with -R opens two rdma_cm connections: the first exchanges the
/// test parameters and buffer addresses in Sends (IRD = ORD = 0), the second
/// runs the test.
const PERFTEST_XCHG: [(Opcode, Count); 1] = [(
    Opcode::Send,
    Count {
        msgs: 16,
        fpdus: 16,
        bytes: 458,
    },
)];

/// ib_write_bw -s 8192 -n 20: 20 Writes of 8192 bytes, 6 FPDUs each (five
/// of 1428 payload bytes, one of 1052), nothing back on the test QP.
#[test]
fn siw_write_bw() {
    let r = check(
        "siw-write-bw.pcap",
        &[
            ((0, 0), (0, 0), [&PERFTEST_XCHG, &PERFTEST_XCHG]),
            (
                (0, 0),
                (0, 0),
                [&[(Opcode::Write, count(20, 120, 20 * 8192))], &[]],
            ),
        ],
    );
    assert_full_fpdus(&r, 1, 0);
}

/// ib_read_bw -s 8192 -n 20: 20 Read Requests, answered by 20 Read
/// Responses of 6 FPDUs each. perftest asks for 128 outstanding Reads
/// (IRD = ORD = 128, siw's maximum).
#[test]
fn siw_read_bw() {
    let r = check(
        "siw-read-bw.pcap",
        &[
            ((0, 0), (0, 0), [&PERFTEST_XCHG, &PERFTEST_XCHG]),
            (
                (128, 128),
                (128, 128),
                [
                    &[(Opcode::ReadRequest, count(20, 20, 0))],
                    &[(Opcode::ReadResponse, count(20, 120, 20 * 8192))],
                ],
            ),
        ],
    );
    assert_full_fpdus(&r, 1, 1);
    let (mpa, sides) = &r.conns[1];
    assert_eq!(
        (mpa.init_ird_ord, mpa.resp_ird_ord),
        ((128, 128), (128, 128))
    );
    assert!(sides[0].max_inflight_reads >= 1);
}

/// ib_send_bw -s 2048 -n 5: 5 Sends of 2 FPDUs each (1424 + 624 payload
/// bytes); the server returns receive credits as 4-byte Writes (perftest's
/// send_bw flow control).
#[test]
fn siw_send_bw() {
    let xchg = [(Opcode::Send, count(11, 11, 418))];
    let r = check(
        "siw-send-bw.pcap",
        &[
            ((0, 0), (0, 0), [&xchg, &xchg]),
            (
                (0, 0),
                (0, 0),
                [
                    &[(Opcode::Send, count(5, 10, 5 * 2048))],
                    &[(Opcode::Write, count(2, 2, 8))],
                ],
            ),
        ],
    );
    assert_full_fpdus(&r, 1, 0);
}

/// siw's short-message path leaves stale bytes in the pad (see
/// SIW_MAX_HDR_INLINE); the parser ignores pad content as RFC 5044 asks.
/// The fixtures have such FPDUs, so this stays covered.
#[test]
fn siw_dirty_pad_is_ignored() {
    let r = run("siw-write-bw.pcap");
    let n: usize = r
        .conns
        .iter()
        .flat_map(|c| c.1.iter())
        .map(|s| s.dirty_pads)
        .sum();
    assert!(n > 0, "no FPDU with a non-zero pad left in the fixture");
}

// ---------------------------------------------------------------------------
// The checks themselves can fail

fn fails(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(f);
    std::panic::set_hook(prev);
    match r {
        Ok(()) => panic!("the check passed on corrupted input"),
        Err(e) => e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}

/// Offset in the pcap file of the TCP payload of the `nth` frame (1-based)
/// carrying data to (`to == true`) or from port `port`.
fn payload_offset(file: &[u8], port: u16, to: bool, nth: usize) -> usize {
    let mut off = 24;
    let mut k = 0;
    loop {
        let incl = u32::from_le_bytes(file[off + 8..off + 12].try_into().unwrap()) as usize;
        let f = off + 16;
        let ihl = usize::from(file[f + 14] & 0xf) * 4;
        let t = f + 14 + ihl;
        let doff = usize::from(file[t + 12] >> 4) * 4;
        if u16be(file, if to { t + 2 } else { t }) == port && t + doff < f + incl {
            k += 1;
            if k == nth {
                return t + doff;
            }
        }
        off = f + incl;
    }
}

#[test]
fn siw_fixture_checks_catch_corruption() {
    let file = fixture("siw-rping.pcap");
    // Data frame 1 from the client is the MPA Request, 2 its first Send,
    // 3 the first Read Response; frame 1 from the server is the MPA Reply.
    let send = payload_offset(&file, 7174, true, 2);
    assert_eq!(file[send + 3] & 0x0f, Opcode::Send as u8);
    // DDP version 2 in the first Send: the parser must reject it.
    let mut bad = file.clone();
    bad[send + 2] = (bad[send + 2] & !3) | 2;
    let msg = fails(move || {
        run_bytes("corrupt-ddp-version", &bad);
    });
    assert!(msg.contains("rejects siw's bytes"), "{msg}");
    // An MSN off by one: the stream check must catch it.
    let mut bad = file.clone();
    bad[send + 15] ^= 0x02;
    let msg = fails(move || {
        run_bytes("corrupt-msn", &bad);
    });
    assert!(msg.contains("MSN/MO check failed"), "{msg}");
    // A Read Response to a different STag: the ORD queue must catch it.
    let rresp = payload_offset(&file, 7174, true, 3);
    assert_eq!(file[rresp + 3] & 0x0f, Opcode::ReadResponse as u8);
    let mut bad = file.clone();
    bad[rresp + 7] ^= 0x01;
    let msg = fails(move || {
        run_bytes("corrupt-stag", &bad);
    });
    assert!(msg.contains("Read Response mismatch"), "{msg}");
    // MPA Reply with markers: the negotiation check must refuse it.
    let rep = payload_offset(&file, 7174, false, 1);
    let mut bad = file.clone();
    bad[rep + 16] |= FLAG_M;
    let msg = fails(move || {
        run_bytes("corrupt-mpa", &bad);
    });
    assert!(msg.contains("flags"), "{msg}");
}

/// Reassembly: duplicates dropped, out-of-order data held until the hole is
/// filled, a retransmission with different bytes refused.
#[test]
fn siw_fixture_reassembly() {
    let mut d = Dir {
        isn: Some(u32::MAX - 2),
        ..Default::default()
    };
    // Relative sequence numbers wrap through 0 here.
    let seq = |rel: u32| (u32::MAX - 1).wrapping_add(rel);
    assert_eq!(d.push(seq(0), b"abcd"), 0..4);
    assert_eq!(d.push(seq(8), b"ijkl"), 4..4);
    assert_eq!(d.push(seq(2), b"cd"), 4..4);
    assert_eq!(d.push(seq(4), b"efghij"), 4..12);
    assert_eq!(d.data, b"abcdefghijkl");
    assert_eq!((d.dups, d.reordered), (1, 1));
    assert!(d.ooo.is_empty());
    let msg = fails(move || {
        d.push(seq(4), b"XX");
    });
    assert!(msg.contains("different bytes"), "{msg}");
}

// ---------------------------------------------------------------------------
// siw's Terminate layout (anchors.md A.11)

/// The Terminate siw sends for a Write to an unknown STag (siw_proc_write ->
/// DDP, tagged buffer, invalid STag, with M and D) from a little-endian host:
/// control word, "DDP Segment Length" (siw puts the payload length, 64),
/// the echoed 14-byte tagged header.
fn siw_le_term_invalid_stag() -> Vec<u8> {
    let mut b = vec![0x11, 0x00, 0x03, 0x00, 0x00, 0x40];
    b.extend_from_slice(&[
        0xc1, 0x40, 0x5a, 0x5a, 0x5a, 0x00, 0, 0, 0, 0, 0, 0, 0x10, 0,
    ]);
    b
}

/// An FPDU carrying a Terminate header `t` (QN 2, MSN 1), CRC off.
fn term_fpdu(t: &[u8]) -> Vec<u8> {
    let mut u = vec![0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0];
    u.extend_from_slice(t);
    let mut f = (u.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(&u);
    f.resize(fpdu_len(u.len()), 0);
    f
}

#[test]
fn siw_terminate_little_endian_layout() {
    use rsiw_wire::wire::term::{TermCode, Terminate};
    let b = siw_le_term_invalid_stag();
    // Per RFC 5040 the flags say "no headers" but 16 bytes follow.
    assert_eq!(Terminate::decode(&b), None);
    let t = Terminate::decode_siw_le(&b).expect("siw layout");
    assert_eq!(t.code, TermCode::new(1, 1, 0));
    assert!(t.m && t.rdma_hdr.is_none());
    assert_eq!((t.ddp_seg_len, t.ddp_hdr_len), (64, 14));
    assert_eq!(&t.ddp_hdr[..14], &b[6..]);
    assert_eq!(Terminate::decode_compat(&b), Some(t));
    // An asymmetric code: DDP/untagged/invalid QN (1/2/01) is 0x21 from siw.
    let mut u = vec![0x21, 0x01, 0x03, 0x00, 0x00, 0x10];
    u.extend_from_slice(&[0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0]);
    let t = Terminate::decode_compat(&u).expect("siw layout");
    assert_eq!(t.code, TermCode::new(1, 2, 1));
    assert_eq!(t.ddp_hdr_len, 18);
    // siw's bits in byte 2: M 0x01, D 0x02, R 0x04.
    use rsiw_wire::wire::term::{SIW_LE_TERM_D, SIW_LE_TERM_M, SIW_LE_TERM_R};
    assert_eq!((SIW_LE_TERM_M, SIW_LE_TERM_D, SIW_LE_TERM_R), (1, 2, 4));
    // M, D and R (Read Request echoed) in siw's bits.
    let mut r = vec![0x10, 0x00, 0x07, 0x00, 0x00, 0x00];
    r.extend_from_slice(&[0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0]);
    r.extend_from_slice(&[7; 28]);
    let t = Terminate::decode_compat(&r).expect("siw layout with R");
    assert_eq!(t.code, TermCode::new(0, 1, 0));
    assert_eq!(t.rdma_hdr, Some([7; 28]));
    // Reserved bits set, or a length that does not match siw's flags: no.
    let mut bad = b.clone();
    bad[2] |= 0x08;
    assert_eq!(Terminate::decode_siw_le(&bad), None);
    assert_eq!(Terminate::decode_compat(&bad), None);
    assert_eq!(Terminate::decode_compat(&b[..b.len() - 1]), None);
    // RFC 5040 Terminates decode the same with and without compat.
    let rfc = Terminate::with_headers(TermCode::new(1, 2, 1), 18, &u[6..], None);
    let mut buf = [0u8; 64];
    let n = rfc.encode(&mut buf).unwrap();
    assert_eq!(Terminate::decode_compat(&buf[..n]), Some(rfc));
    assert_eq!(Terminate::decode(&buf[..n]), Some(rfc));
    // Without flags the layouts cannot be told apart: read per RFC 5040, so
    // siw's RDMAP/operation/opcode (0/2/06, sent as 0x20) reads as 2/0/06.
    let t = Terminate::decode_compat(&[0x20, 0x06, 0, 0]).unwrap();
    assert_eq!(t.code, TermCode::new(2, 0, 6));
}

/// siw answers an RDMA Write to an STag it never issued with a Terminate
/// (tests/vm/tools/siw-terminate.py): DDP layer, tagged buffer error,
/// invalid STag (1/1/00), echoing the Write's DDP header, then a FIN. It is
/// sent in siw's little-endian layout (anchors.md A.11), which the parser
/// reads with `siw_terminate` set.
#[test]
fn siw_terminate() {
    use rsiw_wire::wire::term::TermCode;
    let r = check(
        "siw-terminate.pcap",
        &[(
            (128, 128),
            (128, 128),
            [
                &[
                    (Opcode::Write, count(1, 1, 64)),
                    (Opcode::Send, count(1, 1, 32)),
                ],
                &[(Opcode::Terminate, count(1, 1, 0))],
            ],
        )],
    );
    let sides = &r.conns[0].1;
    let term = sides[1].terminate.unwrap();
    let Body::Terminate(t) = term.body else {
        panic!("{term:?}")
    };
    assert_eq!(
        t.code,
        TermCode::new(1, 1, 0),
        "layer/etype/code in RFC terms"
    );
    assert!(t.m && t.rdma_hdr.is_none());
    // The echoed header is the Write's, byte for byte.
    let write = sides[0]
        .segs
        .iter()
        .find(|s| s.seg.hdr.opcode == Opcode::Write)
        .unwrap();
    let mut hdr = [0u8; 14];
    assert_eq!(write.seg.hdr.encode(&mut hdr), Some(14));
    assert_eq!((t.ddp_hdr_len, &t.ddp_hdr[..14]), (14, &hdr[..]));
    assert_eq!(
        write.seg.hdr.placement,
        Placement::Tagged {
            stag: 0x5a5a_5a00,
            to: 0x1000
        }
    );
    // siw puts the payload length where RFC 5040 wants the DDP segment
    // length (78 here).
    assert_eq!((t.ddp_seg_len, write.seg.ulpdu_len), (64, 78));
}

/// The parser option: off, a siw Terminate with echoed headers is a decode
/// failure (0/2/07); on, it is a Terminate segment in RFC terms.
#[test]
fn siw_terminate_parser_option() {
    use rsiw_wire::wire::term::TermCode;
    let f = term_fpdu(&siw_le_term_invalid_stag());
    let strict = RxConfig::default();
    let mut p = RxParser::new(strict, SoftCrc32c);
    match p.feed(&f).1 {
        RxEvent::Error(e) => assert_eq!(e.code, TermCode::new(0, 2, 7)),
        ev => panic!("strict parser accepted siw's Terminate: {ev:?}"),
    }
    let compat = RxConfig {
        siw_terminate: true,
        ..strict
    };
    let segs = parse_chunked(compat, &f, 1);
    assert_eq!(segs.len(), 1);
    let Body::Terminate(t) = segs[0].seg.body else {
        panic!("not a Terminate: {:?}", segs[0]);
    };
    assert_eq!(t.code, TermCode::new(1, 1, 0));
    assert_eq!(t.ddp_hdr_len, 14);
}
