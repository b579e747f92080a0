// SPDX-License-Identifier: GPL-2.0

//! The MPA CRC through the kernel's `crc32c()`.
//!
//! The wire core computes CRC32c behind its [`Crc32c`] trait; on the host it uses a software
//! table, in the kernel this type, which calls the architecture's accelerated `crc32c()`.

use crate::wire::crc::Crc32c;

/// The wire core's CRC32c, computed by the kernel's `crc32c()`.
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(
    not(CONFIG_RDMA_RSIW_KUNIT_TEST),
    expect(
        dead_code,
        reason = "the data path is not there yet; the KUnit tests use it"
    )
)]
pub(crate) struct KernelCrc32c;

impl Crc32c for KernelCrc32c {
    #[inline]
    fn update(&self, crc: u32, data: &[u8]) -> u32 {
        kernel::crc::crc32c(crc, data)
    }
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_wire)]
mod tests {
    use super::KernelCrc32c;
    use crate::wire::{
        crc::{
            Crc32c,
            SoftCrc32c,
            CRC_INIT, //
        },
        hdr::{
            Body,
            Opcode,
            Placement, //
        },
        rx::{
            RxConfig,
            RxEvent,
            RxParser, //
        },
        tx::{
            Segmenter,
            TxMessage, //
        },
    };
    use kernel::prelude::*;

    /// A deterministic, non-repeating test pattern.
    fn pattern(buf: &mut [u8]) {
        let mut x: u32 = 0x9e37_79b9;
        for b in buf.iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x.to_le_bytes()[0];
        }
    }

    /// The standard CRC-32C check value, through the kernel implementation.
    #[test]
    fn crc_check_value() {
        assert_eq!(!KernelCrc32c.update(CRC_INIT, b"123456789"), 0xe306_9283);
    }

    /// The kernel and the wire core's software CRC agree on every length and alignment, and
    /// when updated in pieces (as the TX path does over scattered pages).
    #[test]
    fn crc_kernel_matches_software() {
        let mut buf = [0u8; 1536];
        pattern(&mut buf);
        for off in 0..4 {
            for len in [0usize, 1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 511, 1024, 1500] {
                let data = &buf[off..off + len];
                let k = KernelCrc32c.update(CRC_INIT, data);
                assert_eq!(k, SoftCrc32c.update(CRC_INIT, data));
                let (a, b) = data.split_at(len / 3);
                assert_eq!(k, KernelCrc32c.update(KernelCrc32c.update(CRC_INIT, a), b));
            }
        }
    }

    /// A 4000-byte Send segmented into FPDUs with the kernel CRC parses back, byte for byte,
    /// fed in odd-sized chunks; a flipped payload bit is caught by the CRC.
    #[test]
    fn fpdu_roundtrip_kernel_crc() -> Result {
        const LEN: usize = 4000;
        const MULPDU: u16 = 1000;
        let mut payload = KVec::from_elem(0u8, LEN, GFP_KERNEL)?;
        pattern(&mut payload);
        let msg = TxMessage {
            opcode: Opcode::Send,
            placement: Placement::Untagged {
                inv_stag: 0,
                qn: 0,
                msn: 1,
                mo: 0,
            },
            body: Body::None,
            payload_len: LEN as u32,
        };
        let mut seg = Segmenter::new(msg, MULPDU).map_err(|_| EINVAL)?;
        let fpdus = seg.fpdu_count();
        let mut wire = KVec::new();
        while let Some(p) = seg.next_fpdu() {
            wire.extend_from_slice(p.header(), GFP_KERNEL)?;
            let range = p.payload_off as usize..(p.payload_off + p.payload_len) as usize;
            let mut crc = p.crc(&KernelCrc32c, true);
            crc.update(&payload[range.clone()]);
            wire.extend_from_slice(&payload[range], GFP_KERNEL)?;
            let (trailer, n) = crc.trailer();
            wire.extend_from_slice(&trailer[..n], GFP_KERNEL)?;
        }

        let cfg = RxConfig {
            crc: true,
            ..RxConfig::default()
        };
        let (segments, ends, got) = parse(cfg, &wire, LEN)?;
        assert_eq!(segments, fpdus);
        assert_eq!(ends, fpdus);
        assert!(got == payload);

        // Corrupt one payload byte of the second FPDU: the parser must report an error.
        let at = wire.len() / 2;
        wire[at] ^= 0x01;
        assert!(parse(cfg, &wire, LEN).is_err());
        Ok(())
    }

    /// Feeds `wire` in 7-byte chunks; returns (segments, ends, payload), or `EBADMSG` if the
    /// parser reported a protocol error.
    fn parse(cfg: RxConfig, wire: &[u8], len: usize) -> Result<(u32, u32, KVec<u8>)> {
        let mut rx = RxParser::new(cfg, KernelCrc32c);
        let mut out = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        let (mut segments, mut ends, mut msg_off) = (0u32, 0u32, 0usize);
        let mut seg_base = 0usize;
        for chunk in wire.chunks(7) {
            let mut rest = chunk;
            loop {
                let (used, ev) = rx.feed(rest);
                rest = &rest[used..];
                match ev {
                    RxEvent::NeedMore => break,
                    RxEvent::Segment(s) => {
                        segments += 1;
                        seg_base = msg_off;
                        msg_off += s.payload_len as usize;
                    }
                    RxEvent::Payload { offset, data } => {
                        let at = seg_base + offset as usize;
                        out[at..at + data.len()].copy_from_slice(data);
                    }
                    RxEvent::End => ends += 1,
                    RxEvent::Error(_) => return Err(EBADMSG),
                }
            }
        }
        Ok((segments, ends, out))
    }
}
