// SPDX-License-Identifier: GPL-2.0

//! Fuzzes MPA frame parsing and both negotiation functions.
//!
//! Input: 16 bytes of local configuration, then the peer's frame bytes.
//! Checks the invariants MPA2 §9.1 and §9.2 promise for every outcome.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rsiw_wire::wire::mpa::*;

fn cfg(b: &[u8]) -> LocalConfig {
    let w = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    LocalConfig {
        max_rev: 1 + (b[0] & 1),
        crc: b[0] & 2 != 0,
        p2p: b[0] & 4 != 0,
        relaxed_ord: b[0] & 8 != 0,
        rtr: RtrSet {
            send: b[0] & 16 != 0,
            write: b[0] & 32 != 0,
            read: b[0] & 64 != 0,
        },
        ird: w(2) & 0x3FFF,
        ord: w(4) & 0x3FFF,
        max_ird: w(6),
        max_ord: w(8),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let c = cfg(&data[..16]);
    let frame = &data[16..];
    for kind in [FrameKind::Request, FrameKind::Reply] {
        let mut r = FrameReader::new(kind);
        let mut used = 0;
        let mut st = ReadStatus::NeedMore;
        for ch in frame.chunks(7) {
            let (n, s) = r.feed(ch);
            assert!(n <= ch.len());
            used += n;
            st = s;
            if s != ReadStatus::NeedMore {
                break;
            }
        }
        assert!(used <= MAX_FRAME);
        if st != ReadStatus::Done {
            continue;
        }
        let Some(Ok(f)) = r.frame() else { continue };
        let pd_start = 20;
        let pd = &frame[pd_start..pd_start + usize::from(f.hdr.pd_len)];
        match kind {
            FrameKind::Request => match responder_decide(&c, &f.hdr, pd) {
                ResponderAction::Accept {
                    rev,
                    enhanced,
                    params,
                    flags,
                } => {
                    assert!(rev <= 2 && rev >= 1);
                    assert_eq!(flags & FLAG_R, 0);
                    assert!(params.ird <= IRD_ORD_MAX && params.ord <= IRD_ORD_MAX);
                    assert!(params.ird <= c.max_ird.max(c.ird.min(c.max_ird)));
                    if let (Some(e), Some(ie)) = (enhanced, f.enhanced) {
                        assert_eq!(e.p2p, ie.p2p);
                        if ie.p2p {
                            assert!(!e.rtr.is_empty());
                        }
                        if ie.ird != IRD_ORD_ULP {
                            assert!(params.ord <= ie.ird);
                        }
                        let mut out = [0u8; MAX_FRAME];
                        encode_frame(FrameKind::Reply, flags, rev, Some(&e), &[], &mut out)
                            .unwrap();
                    }
                }
                ResponderAction::Reject { flags, .. } => assert_ne!(flags & FLAG_R, 0),
                ResponderAction::Close(_) => {}
            },
            FrameKind::Reply => match initiator_decide(&c, &f.hdr, pd) {
                InitiatorAction::Established(p) => {
                    assert!(p.ird <= IRD_ORD_MAX && p.ord <= IRD_ORD_MAX);
                    if let Some(e) = f.enhanced.filter(|_| p.enhanced) {
                        if e.ird != IRD_ORD_ULP {
                            assert!(p.ord <= e.ird.max(1));
                        }
                        if e.ord != IRD_ORD_ULP {
                            assert!(p.ird >= e.ord);
                        }
                    }
                    if c.p2p && c.max_rev >= 2 {
                        assert!(p.rtr_send.is_some());
                    }
                }
                InitiatorAction::Terminate(t) => assert!(t.is_known() && t.layer == 2),
                _ => {}
            },
        }
    }
});
