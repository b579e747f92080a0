// SPDX-License-Identifier: GPL-2.0

//! Terminate codes and the Terminate message (RFC 5040 §4.8).
//!
//! The condensed RFC 5040 in the project specs gives wrong code values and a
//! wrong layout (spec-map X-03, X-04). The values here are those of RFC 5040,
//! RFC 5041 and RFC 5044, as checked against Linux `siw` and Wireshark.
//!
//! Wire layout of the Terminate header (after the 18-byte untagged DDP
//! header, QN 2):
//!
//! ```text
//! byte 0: Layer (high nibble) | EType (low nibble)
//! byte 1: Error Code
//! byte 2-3: M (0x8000) | D (0x4000) | R (0x2000) | reserved (13 bits)
//! if D: u16 DDP Segment Length, then the Terminated DDP Header
//!       (14 bytes if its T bit is set, else 18 bytes)
//! if R: the 28-byte Terminated RDMA Header (a Read Request header)
//! ```

use crate::wire::hdr::{READ_REQ_LEN, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN};

/// Terminate layer: RDMAP.
pub const LAYER_RDMAP: u8 = 0x0;
/// Terminate layer: DDP.
pub const LAYER_DDP: u8 = 0x1;
/// Terminate layer: LLP (MPA).
pub const LAYER_LLP: u8 = 0x2;

/// RDMAP error type: local catastrophic.
pub const RDMAP_ETYPE_CATASTROPHIC: u8 = 0x0;
/// RDMAP error type: remote protection.
pub const RDMAP_ETYPE_PROTECTION: u8 = 0x1;
/// RDMAP error type: remote operation.
pub const RDMAP_ETYPE_OPERATION: u8 = 0x2;

/// DDP error type: local catastrophic.
pub const DDP_ETYPE_CATASTROPHIC: u8 = 0x0;
/// DDP error type: tagged buffer.
pub const DDP_ETYPE_TAGGED: u8 = 0x1;
/// DDP error type: untagged buffer.
pub const DDP_ETYPE_UNTAGGED: u8 = 0x2;
/// DDP error type reserved for the LLP.
pub const DDP_ETYPE_RSVD_LLP: u8 = 0x3;

/// LLP error type: MPA.
pub const LLP_ETYPE_MPA: u8 = 0x0;

/// RDMAP Remote Protection and Remote Operation error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RdmapCode {
    /// Invalid STag (protection).
    InvalidStag = 0x00,
    /// Base or bounds violation (protection).
    BaseBounds = 0x01,
    /// Access rights violation (protection).
    AccessRights = 0x02,
    /// STag not associated with RDMAP Stream (protection).
    StagNotAssociated = 0x03,
    /// TO wrap (protection).
    ToWrap = 0x04,
    /// Invalid RDMAP version (operation).
    InvalidVersion = 0x05,
    /// Unexpected OpCode (operation).
    UnexpectedOpcode = 0x06,
    /// Catastrophic error, localized to RDMAP Stream (operation).
    CatastrophicStream = 0x07,
    /// Catastrophic error, global (operation).
    CatastrophicGlobal = 0x08,
    /// STag cannot be Invalidated (protection or operation).
    CannotInvalidate = 0x09,
    /// Unspecified error (protection or operation).
    Unspecified = 0xFF,
}

/// DDP tagged buffer error codes (EType 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DdpTaggedCode {
    /// Invalid STag.
    InvalidStag = 0x00,
    /// Base or bounds violation.
    BaseBounds = 0x01,
    /// STag not associated with DDP Stream.
    StagNotAssociated = 0x02,
    /// TO wrap.
    ToWrap = 0x03,
    /// Invalid DDP version.
    InvalidVersion = 0x04,
}

/// DDP untagged buffer error codes (EType 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DdpUntaggedCode {
    /// Invalid QN.
    InvalidQn = 0x01,
    /// Invalid MSN, no buffer available.
    NoBuffer = 0x02,
    /// Invalid MSN, MSN range is not valid.
    MsnRange = 0x03,
    /// Invalid MO.
    InvalidMo = 0x04,
    /// DDP Message too long for available buffer.
    TooLong = 0x05,
    /// Invalid DDP version.
    InvalidVersion = 0x06,
}

/// LLP (MPA) error codes (Layer 2, EType 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LlpCode {
    /// TCP connection closed, terminated or lost.
    ConnectionLost = 0x01,
    /// MPA CRC error.
    Crc = 0x02,
    /// MPA Marker and ULPDU Length field mismatch (invalid FPDU start).
    FpduStart = 0x03,
    /// Invalid MPA Request or Reply frame.
    InvalidFrame = 0x04,
    /// Local catastrophic error (MPA2 §8).
    LocalCatastrophic = 0x05,
    /// Insufficient IRD resources (MPA2 §8).
    InsufficientIrd = 0x06,
    /// No matching RTR option (MPA2 §8).
    NoMatchingRtr = 0x07,
}

/// A Terminate triple: Layer, Error Type and Error Code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TermCode {
    /// Layer (4 bits).
    pub layer: u8,
    /// Error Type (4 bits).
    pub etype: u8,
    /// Error Code.
    pub ecode: u8,
}

impl TermCode {
    /// Builds a triple from raw values (layer and etype masked to 4 bits).
    pub const fn new(layer: u8, etype: u8, ecode: u8) -> Self {
        TermCode {
            layer: layer & 0xF,
            etype: etype & 0xF,
            ecode,
        }
    }

    /// RDMAP Local Catastrophic error (0/0/00).
    pub const fn rdmap_catastrophic() -> Self {
        Self::new(LAYER_RDMAP, RDMAP_ETYPE_CATASTROPHIC, 0)
    }

    /// An RDMAP Remote Protection error (0/1/xx).
    pub const fn protection(c: RdmapCode) -> Self {
        Self::new(LAYER_RDMAP, RDMAP_ETYPE_PROTECTION, c as u8)
    }

    /// An RDMAP Remote Operation error (0/2/xx).
    pub const fn operation(c: RdmapCode) -> Self {
        Self::new(LAYER_RDMAP, RDMAP_ETYPE_OPERATION, c as u8)
    }

    /// A DDP tagged buffer error (1/1/xx).
    pub const fn tagged(c: DdpTaggedCode) -> Self {
        Self::new(LAYER_DDP, DDP_ETYPE_TAGGED, c as u8)
    }

    /// A DDP untagged buffer error (1/2/xx).
    pub const fn untagged(c: DdpUntaggedCode) -> Self {
        Self::new(LAYER_DDP, DDP_ETYPE_UNTAGGED, c as u8)
    }

    /// An LLP (MPA) error (2/0/xx).
    pub const fn llp(c: LlpCode) -> Self {
        Self::new(LAYER_LLP, LLP_ETYPE_MPA, c as u8)
    }

    /// True if the triple names an error defined by RFC 5040, 5041, 5044 or
    /// MPA2 §8 (the TERM-02 tables).
    pub fn is_known(&self) -> bool {
        match (self.layer, self.etype) {
            (LAYER_RDMAP, RDMAP_ETYPE_CATASTROPHIC) => self.ecode == 0,
            (LAYER_RDMAP, RDMAP_ETYPE_PROTECTION) => {
                matches!(self.ecode, 0x00..=0x04 | 0x09 | 0xFF)
            }
            (LAYER_RDMAP, RDMAP_ETYPE_OPERATION) => matches!(self.ecode, 0x05..=0x09 | 0xFF),
            (LAYER_DDP, DDP_ETYPE_CATASTROPHIC) => self.ecode == 0,
            (LAYER_DDP, DDP_ETYPE_TAGGED) => self.ecode <= 0x04,
            (LAYER_DDP, DDP_ETYPE_UNTAGGED) => matches!(self.ecode, 0x01..=0x06),
            (LAYER_LLP, LLP_ETYPE_MPA) => matches!(self.ecode, 0x01..=0x07),
            _ => false,
        }
    }

    /// The first two bytes of the Terminate Control field.
    pub fn to_bytes(&self) -> [u8; 2] {
        [(self.layer << 4) | (self.etype & 0xF), self.ecode]
    }

    /// Parses the first two bytes of the Terminate Control field.
    pub fn from_bytes(b: [u8; 2]) -> Self {
        Self::new(b[0] >> 4, b[0] & 0xF, b[1])
    }
}

/// Terminate Control bit M: DDP Segment Length valid.
pub const TERM_M: u16 = 0x8000;
/// Terminate Control bit D: Terminated DDP Header included.
pub const TERM_D: u16 = 0x4000;
/// Terminate Control bit R: Terminated RDMA Header included.
pub const TERM_R: u16 = 0x2000;
/// Fixed part of the Terminate header.
pub const TERM_CTRL_LEN: usize = 4;
/// Largest Terminate header: control, length, untagged header, RDMA header.
pub const TERM_MAX_LEN: usize = TERM_CTRL_LEN + 2 + UNTAGGED_HDR_LEN + READ_REQ_LEN;

/// M in the Terminate control word of Linux `siw` on little-endian hosts
/// (byte 2; see [`Terminate::decode_siw_le`]).
pub const SIW_LE_TERM_M: u8 = 0x01;
/// D in the Terminate control word of `siw` on little-endian hosts.
pub const SIW_LE_TERM_D: u8 = 0x02;
/// R in the Terminate control word of `siw` on little-endian hosts.
pub const SIW_LE_TERM_R: u8 = 0x04;

/// Which headers of the offending segment a Terminate echoes (TERM-03).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermEcho {
    /// No header (errors found while building an outgoing message, LLP
    /// errors before a header was complete, catastrophic errors).
    None,
    /// The DDP header of the offending segment (D=1).
    Ddp,
    /// The DDP header and the 28-byte RDMA Read Request header (D=1, R=1).
    DdpAndRdma,
}

/// A decoded or to-be-encoded Terminate header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Terminate {
    /// Layer/EType/ErrorCode.
    pub code: TermCode,
    /// M: `ddp_seg_len` is valid.
    pub m: bool,
    /// The DDP Segment Length of the offending segment (valid if M).
    pub ddp_seg_len: u16,
    /// Length of the Terminated DDP Header (0, 14 or 18); D = (len != 0).
    pub ddp_hdr_len: u8,
    /// The Terminated DDP Header (first `ddp_hdr_len` bytes are valid).
    pub ddp_hdr: [u8; UNTAGGED_HDR_LEN],
    /// The Terminated RDMA Header, if R.
    pub rdma_hdr: Option<[u8; READ_REQ_LEN]>,
}

impl Terminate {
    /// A Terminate echoing no header.
    pub fn bare(code: TermCode) -> Self {
        Terminate {
            code,
            m: false,
            ddp_seg_len: 0,
            ddp_hdr_len: 0,
            ddp_hdr: [0; UNTAGGED_HDR_LEN],
            rdma_hdr: None,
        }
    }

    /// A Terminate echoing the DDP header `ddp` (14 or 18 bytes, taken from
    /// its T bit) of a segment of ULPDU length `seg_len`, and optionally the
    /// RDMA header.
    pub fn with_headers(
        code: TermCode,
        seg_len: u16,
        ddp: &[u8],
        rdma: Option<&[u8; READ_REQ_LEN]>,
    ) -> Self {
        let mut t = Terminate::bare(code);
        let len = match ddp.first() {
            Some(c) if c & crate::wire::hdr::DDP_T != 0 => TAGGED_HDR_LEN,
            Some(_) => UNTAGGED_HDR_LEN,
            None => 0,
        };
        if let (Some(src), Some(dst)) = (ddp.get(..len), t.ddp_hdr.get_mut(..len)) {
            dst.copy_from_slice(src);
            t.ddp_hdr_len = len as u8;
            t.m = true;
            t.ddp_seg_len = seg_len;
            t.rdma_hdr = rdma.copied();
        }
        t
    }

    /// Encoded length of this header.
    pub fn len(&self) -> usize {
        let mut n = TERM_CTRL_LEN;
        if self.ddp_hdr_len != 0 {
            n = n
                .saturating_add(2)
                .saturating_add(usize::from(self.ddp_hdr_len));
        }
        if self.rdma_hdr.is_some() {
            n = n.saturating_add(READ_REQ_LEN);
        }
        n
    }

    /// True if the header is only the control word.
    pub fn is_empty(&self) -> bool {
        self.len() == TERM_CTRL_LEN
    }

    /// Encodes into `out`; returns the length or `None` if `out` is short.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let n = self.len();
        let o = out.get_mut(..n)?;
        let c = self.code.to_bytes();
        let mut bits = 0u16;
        if self.m {
            bits |= TERM_M;
        }
        if self.ddp_hdr_len != 0 {
            bits |= TERM_D;
        }
        if self.rdma_hdr.is_some() {
            bits |= TERM_R;
        }
        let b = bits.to_be_bytes();
        let mut off = 0usize;
        let mut ok = crate::wire::put(o, off, &[c[0], c[1], b[0], b[1]]);
        off = TERM_CTRL_LEN;
        if self.ddp_hdr_len != 0 {
            let dl = usize::from(self.ddp_hdr_len);
            ok = ok
                && crate::wire::put(o, off, &self.ddp_seg_len.to_be_bytes())
                && crate::wire::put(o, off.saturating_add(2), self.ddp_hdr.get(..dl)?);
            off = off.saturating_add(2).saturating_add(dl);
        }
        if let Some(r) = &self.rdma_hdr {
            ok = ok && crate::wire::put(o, off, r);
        }
        if ok {
            Some(n)
        } else {
            None
        }
    }

    /// Decodes a Terminate header in the layout Linux `siw` sends from a
    /// little-endian host and returns it in RFC 5040 terms.
    ///
    /// `siw` declares the Terminate control word as a C bitfield (`struct
    /// iwarp_terminate`, `drivers/infiniband/sw/siw/iwarp.h`) that
    /// little-endian compilers lay out as: byte 0 = EType (high nibble) |
    /// Layer (low nibble), byte 1 = Error Code, byte 2 = M
    /// ([`SIW_LE_TERM_M`]) | D ([`SIW_LE_TERM_D`]) | R ([`SIW_LE_TERM_R`]),
    /// the rest reserved. What follows is laid out as in RFC 5040 (`siw`
    /// fills DDP Segment Length with the offending segment's payload length
    /// rather than its length; it is passed through as received).
    ///
    /// Returns `None` if a reserved bit is set or the length does not match
    /// the flags.
    pub fn decode_siw_le(b: &[u8]) -> Option<Terminate> {
        let c = b.get(..TERM_CTRL_LEN)?;
        let (c0, c1, c2, c3) = (*c.first()?, *c.get(1)?, *c.get(2)?, *c.get(3)?);
        let flags = SIW_LE_TERM_M | SIW_LE_TERM_D | SIW_LE_TERM_R;
        if c2 & !flags != 0 || c3 != 0 {
            return None;
        }
        let mut bits = 0u16;
        for (siw, rfc) in [
            (SIW_LE_TERM_M, TERM_M),
            (SIW_LE_TERM_D, TERM_D),
            (SIW_LE_TERM_R, TERM_R),
        ] {
            if c2 & siw != 0 {
                bits |= rfc;
            }
        }
        // Rewrite the control word in RFC layout, then decode as usual.
        let mut rfc = [0u8; TERM_MAX_LEN];
        let out = rfc.get_mut(..b.len())?;
        out.copy_from_slice(b);
        let [b2, b3] = bits.to_be_bytes();
        let c0 = c0.rotate_left(4);
        if !crate::wire::put(out, 0, &[c0, c1, b2, b3]) {
            return None;
        }
        Self::decode(out)
    }

    /// Decodes a received Terminate, accepting both the RFC 5040 layout and
    /// that of `siw` on little-endian hosts ([`Terminate::decode_siw_le`]).
    ///
    /// The `siw` layout is recognised by its flag bits: byte 2 has M, D or R
    /// at `siw`'s positions and nothing else, which RFC 5040 forbids (those
    /// are reserved bits). A Terminate without flags cannot be told apart:
    /// it is read per RFC 5040, so one from `siw` keeps Layer and EType
    /// swapped. Treat a received Terminate's fields as diagnostic.
    pub fn decode_compat(b: &[u8]) -> Option<Terminate> {
        let flags = SIW_LE_TERM_M | SIW_LE_TERM_D | SIW_LE_TERM_R;
        match (b.get(2), b.get(3)) {
            (Some(&c2), Some(&0)) if c2 & flags != 0 && c2 & !flags == 0 => Self::decode_siw_le(b),
            _ => Self::decode(b),
        }
    }

    /// Decodes a Terminate header occupying exactly `b`.
    ///
    /// Returns `None` if the length does not match the flags.
    pub fn decode(b: &[u8]) -> Option<Terminate> {
        let (ctrl, mut rest) = b.split_first_chunk::<TERM_CTRL_LEN>()?;
        let bits = u16::from_be_bytes([ctrl[2], ctrl[3]]);
        let mut t = Terminate::bare(TermCode::from_bytes([ctrl[0], ctrl[1]]));
        t.m = bits & TERM_M != 0;
        if bits & TERM_D != 0 {
            let (sl, r) = rest.split_first_chunk::<2>()?;
            t.ddp_seg_len = u16::from_be_bytes(*sl);
            let len = if r.first()? & crate::wire::hdr::DDP_T != 0 {
                TAGGED_HDR_LEN
            } else {
                UNTAGGED_HDR_LEN
            };
            let (h, r2) = r.split_at_checked(len)?;
            t.ddp_hdr.get_mut(..len)?.copy_from_slice(h);
            t.ddp_hdr_len = len as u8;
            rest = r2;
        }
        if bits & TERM_R != 0 {
            let (h, r2) = rest.split_first_chunk::<READ_REQ_LEN>()?;
            t.rdma_hdr = Some(*h);
            rest = r2;
        }
        if rest.is_empty() {
            Some(t)
        } else {
            None
        }
    }
}
