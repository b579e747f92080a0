// SPDX-License-Identifier: GPL-2.0

//! MPA Request/Reply frames and connection negotiation.
//!
//! Covers RFC 5044 as updated by draft-ietf-storm-mpa-peer-connect-09 (RFC
//! 6581, "MPA v2"): the 20-byte frame header, private data (at most 512
//! bytes), the enhanced connection data (14-bit IRD/ORD, peer-to-peer flag
//! and the three RTR kinds), a streaming frame reader that never reads past
//! the private data, and the negotiation rules as pure functions for both
//! the initiator and the responder.

use crate::wire::{
    hdr::{
        Body,
        Opcode,
        Placement,
        QN_SEND, //
    },
    rx::Segment,
    term::{
        LlpCode,
        TermCode, //
    },
};

/// Key of an MPA Request frame.
pub const KEY_REQ: [u8; 16] = *b"MPA ID Req Frame";
/// Key of an MPA Reply frame.
pub const KEY_REP: [u8; 16] = *b"MPA ID Rep Frame";
/// Length of the MPA Request/Reply header.
pub const HDR_LEN: usize = 20;
/// Maximum private data length, enhanced data included (MPA2 §7).
pub const MAX_PD: usize = 512;
/// Length of the enhanced connection establishment data.
pub const ENHANCED_LEN: usize = 4;
/// Maximum ULP private data when enhanced data is present.
pub const MAX_ULP_PD_ENHANCED: usize = MAX_PD - ENHANCED_LEN;
/// Maximum size of a whole frame (header plus private data).
pub const MAX_FRAME: usize = HDR_LEN + MAX_PD;

/// Flag bit M: the sender of the frame wants Markers towards itself.
pub const FLAG_M: u8 = 0x80;
/// Flag bit C: CRC wanted.
pub const FLAG_C: u8 = 0x40;
/// Flag bit R: reject (only meaningful in a Reply).
pub const FLAG_R: u8 = 0x20;
/// Flag bit S: private data starts with the enhanced data (Rev >= 2).
pub const FLAG_S: u8 = 0x10;
/// Reserved flag bits: zero on send, never checked on receive.
pub const FLAG_RES: u8 = 0x0F;

/// IRD word bit A: peer-to-peer connection model.
pub const IRD_A_P2P: u16 = 0x8000;
/// IRD word bit B: zero-length Send (FULPDU) RTR.
pub const IRD_B_SEND_RTR: u16 = 0x4000;
/// ORD word bit C: zero-length RDMA Write RTR.
pub const ORD_C_WRITE_RTR: u16 = 0x8000;
/// ORD word bit D: zero-length RDMA Read RTR.
pub const ORD_D_READ_RTR: u16 = 0x4000;
/// Mask of the 14-bit IRD/ORD value.
pub const IRD_ORD_MASK: u16 = 0x3FFF;
/// The "ULP negotiates, do not auto-negotiate" IRD/ORD value.
pub const IRD_ORD_ULP: u16 = 0x3FFF;
/// Largest IRD/ORD a stack can actually use (0x3FFF is reserved).
pub const IRD_ORD_MAX: u16 = 0x3FFE;

/// Which of the two frame kinds a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// An MPA Request (sent by the initiator).
    Request,
    /// An MPA Reply (sent by the responder).
    Reply,
}

impl FrameKind {
    /// The 16-byte key of this frame kind.
    pub fn key(self) -> &'static [u8; 16] {
        match self {
            FrameKind::Request => &KEY_REQ,
            FrameKind::Reply => &KEY_REP,
        }
    }
}

/// A set of RTR (ready-to-receive) indication kinds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtrSet {
    /// B: a zero-length Send.
    pub send: bool,
    /// C: a zero-length RDMA Write.
    pub write: bool,
    /// D: a zero-length RDMA Read.
    pub read: bool,
}

impl RtrSet {
    /// The empty set.
    pub const NONE: RtrSet = RtrSet {
        send: false,
        write: false,
        read: false,
    };

    /// True if no kind is in the set.
    pub fn is_empty(self) -> bool {
        !(self.send || self.write || self.read)
    }

    /// Intersection of two sets.
    pub fn and(self, o: RtrSet) -> RtrSet {
        RtrSet {
            send: self.send && o.send,
            write: self.write && o.write,
            read: self.read && o.read,
        }
    }

    /// The kind an initiator sends, by preference: Write, Read, then Send.
    pub fn pick(self) -> Option<RtrKind> {
        if self.write {
            Some(RtrKind::Write)
        } else if self.read {
            Some(RtrKind::Read)
        } else if self.send {
            Some(RtrKind::Send)
        } else {
            None
        }
    }
}

/// One RTR indication kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtrKind {
    /// Zero-length Send on QN 0 (flag B).
    Send,
    /// Zero-length RDMA Write (flag C).
    Write,
    /// Zero-length RDMA Read Request on QN 1 (flag D).
    Read,
}

/// The enhanced RDMA connection establishment data (MPA2 §9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Enhanced {
    /// IRD, 14 bits.
    pub ird: u16,
    /// ORD, 14 bits.
    pub ord: u16,
    /// Flag A: peer-to-peer connection model.
    pub p2p: bool,
    /// Flags B, C and D.
    pub rtr: RtrSet,
}

impl Enhanced {
    /// Encodes into the 4 wire bytes. IRD and ORD are masked to 14 bits.
    pub fn encode(&self) -> [u8; 4] {
        let mut ird = self.ird & IRD_ORD_MASK;
        let mut ord = self.ord & IRD_ORD_MASK;
        if self.p2p {
            ird |= IRD_A_P2P;
            if self.rtr.send {
                ird |= IRD_B_SEND_RTR;
            }
            if self.rtr.write {
                ord |= ORD_C_WRITE_RTR;
            }
            if self.rtr.read {
                ord |= ORD_D_READ_RTR;
            }
        }
        let i = ird.to_be_bytes();
        let o = ord.to_be_bytes();
        [i[0], i[1], o[0], o[1]]
    }

    /// Decodes the 4 wire bytes. B, C and D are ignored when A is 0
    /// (MPA2 §9.2).
    pub fn decode(b: [u8; 4]) -> Enhanced {
        let ird = u16::from_be_bytes([b[0], b[1]]);
        let ord = u16::from_be_bytes([b[2], b[3]]);
        let p2p = ird & IRD_A_P2P != 0;
        let rtr = if p2p {
            RtrSet {
                send: ird & IRD_B_SEND_RTR != 0,
                write: ord & ORD_C_WRITE_RTR != 0,
                read: ord & ORD_D_READ_RTR != 0,
            }
        } else {
            RtrSet::NONE
        };
        Enhanced {
            ird: ird & IRD_ORD_MASK,
            ord: ord & IRD_ORD_MASK,
            p2p,
            rtr,
        }
    }
}

/// Why a frame could not be parsed or built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpaError {
    /// Neither key matches the expected frame kind.
    BadKey,
    /// PD_Length is above 512.
    PdTooLong,
    /// Rev is 0.
    BadRev,
    /// S=1 (with Rev >= 2) but fewer than 4 bytes of private data.
    ShortEnhanced,
    /// The frame is shorter than its header says.
    Truncated,
    /// The output buffer is too small.
    NoSpace,
}

/// The fixed part of a frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Request or Reply.
    pub kind: FrameKind,
    /// The flag byte (M, C, R, S and the reserved bits).
    pub flags: u8,
    /// Revision.
    pub rev: u8,
    /// Total private data length, enhanced data included.
    pub pd_len: u16,
}

impl FrameHeader {
    /// Parses a 20-byte header that must carry the key of `kind`.
    ///
    /// The reserved flag bits are not checked (MPA-02).
    pub fn parse(b: &[u8; HDR_LEN], kind: FrameKind) -> Result<FrameHeader, MpaError> {
        if b.get(..16) != Some(&kind.key()[..]) {
            return Err(MpaError::BadKey);
        }
        let pd_len = u16::from_be_bytes([b[18], b[19]]);
        if usize::from(pd_len) > MAX_PD {
            return Err(MpaError::PdTooLong);
        }
        if b[17] == 0 {
            return Err(MpaError::BadRev);
        }
        Ok(FrameHeader {
            kind,
            flags: b[16],
            rev: b[17],
            pd_len,
        })
    }

    /// True if the frame carries enhanced data (Rev >= 2 and S = 1, T-16).
    pub fn enhanced(&self) -> bool {
        self.rev >= 2 && self.flags & FLAG_S != 0
    }

    /// True if M is set.
    pub fn markers(&self) -> bool {
        self.flags & FLAG_M != 0
    }

    /// True if C is set.
    pub fn crc(&self) -> bool {
        self.flags & FLAG_C != 0
    }

    /// True if R is set.
    pub fn reject(&self) -> bool {
        self.flags & FLAG_R != 0
    }
}

/// A whole parsed frame, borrowing its private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The header.
    pub hdr: FrameHeader,
    /// The enhanced data, if the frame carries it.
    pub enhanced: Option<Enhanced>,
    /// The ULP private data (enhanced data stripped).
    pub ulp_pd: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Parses a whole frame. `b` must hold exactly the header and the
    /// private data, or more (the surplus is ignored).
    pub fn parse(b: &'a [u8], kind: FrameKind) -> Result<Frame<'a>, MpaError> {
        let h: &[u8; HDR_LEN] = b
            .get(..HDR_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(MpaError::Truncated)?;
        let hdr = FrameHeader::parse(h, kind)?;
        let pd = b
            .get(HDR_LEN..HDR_LEN.saturating_add(usize::from(hdr.pd_len)))
            .ok_or(MpaError::Truncated)?;
        Self::from_parts(hdr, pd)
    }

    /// Builds a frame from a parsed header and its private data.
    pub fn from_parts(hdr: FrameHeader, pd: &'a [u8]) -> Result<Frame<'a>, MpaError> {
        if hdr.enhanced() {
            let (e, rest) = pd
                .split_first_chunk::<ENHANCED_LEN>()
                .ok_or(MpaError::ShortEnhanced)?;
            Ok(Frame {
                hdr,
                enhanced: Some(Enhanced::decode(*e)),
                ulp_pd: rest,
            })
        } else {
            Ok(Frame {
                hdr,
                enhanced: None,
                ulp_pd: pd,
            })
        }
    }
}

/// Encodes a frame into `out` and returns its length.
///
/// `flags` must not contain S: it is set when `enhanced` is `Some`, which
/// also requires `rev >= 2`. Fails with [`MpaError::PdTooLong`] if the
/// private data (enhanced data included) would exceed 512 bytes (MPA-07).
pub fn encode_frame(
    kind: FrameKind,
    flags: u8,
    rev: u8,
    enhanced: Option<&Enhanced>,
    ulp_pd: &[u8],
    out: &mut [u8],
) -> Result<usize, MpaError> {
    if rev == 0 || (enhanced.is_some() && rev < 2) {
        return Err(MpaError::BadRev);
    }
    let elen = if enhanced.is_some() { ENHANCED_LEN } else { 0 };
    let pd_len = ulp_pd.len().checked_add(elen).ok_or(MpaError::PdTooLong)?;
    if pd_len > MAX_PD {
        return Err(MpaError::PdTooLong);
    }
    let total = HDR_LEN.checked_add(pd_len).ok_or(MpaError::NoSpace)?;
    let o = out.get_mut(..total).ok_or(MpaError::NoSpace)?;
    let mut f = flags & !(FLAG_S | FLAG_RES);
    if enhanced.is_some() {
        f |= FLAG_S;
    }
    let pd16 = u16::try_from(pd_len).map_err(|_| MpaError::PdTooLong)?;
    let ok = crate::wire::put(o, 0, kind.key())
        && crate::wire::put(o, 16, &[f, rev])
        && crate::wire::put(o, 18, &pd16.to_be_bytes())
        && match enhanced {
            Some(e) => crate::wire::put(o, HDR_LEN, &e.encode()),
            None => true,
        }
        && crate::wire::put(o, HDR_LEN.saturating_add(elen), ulp_pd);
    if ok {
        Ok(total)
    } else {
        Err(MpaError::NoSpace)
    }
}

/// Progress of a [`FrameReader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadStatus {
    /// More bytes are needed.
    NeedMore,
    /// The whole frame has been read; call [`FrameReader::frame`].
    Done,
    /// The bytes are not a valid frame; close the connection.
    Invalid(MpaError),
}

/// Streaming reader of one MPA Request or Reply frame.
///
/// Bytes arrive in arbitrary chunks. The reader takes exactly the header and
/// the private data and never more (MPA-22): the bytes after the frame are
/// the first FPDUs and belong to the FPDU parser.
#[derive(Clone, Debug)]
pub struct FrameReader {
    kind: FrameKind,
    buf: [u8; MAX_FRAME],
    have: usize,
    hdr: Option<FrameHeader>,
    err: Option<MpaError>,
}

impl FrameReader {
    /// A reader expecting a frame of `kind`.
    pub fn new(kind: FrameKind) -> Self {
        FrameReader {
            kind,
            buf: [0; MAX_FRAME],
            have: 0,
            hdr: None,
            err: None,
        }
    }

    fn need(&self) -> usize {
        match &self.hdr {
            Some(h) => HDR_LEN.saturating_add(usize::from(h.pd_len)),
            None => HDR_LEN,
        }
    }

    /// Feeds bytes. Returns how many were consumed and the status. Bytes
    /// beyond the end of the frame are not consumed.
    pub fn feed(&mut self, input: &[u8]) -> (usize, ReadStatus) {
        let mut used = 0usize;
        loop {
            if let Some(e) = self.err {
                return (used, ReadStatus::Invalid(e));
            }
            let need = self.need();
            if self.have >= need {
                if self.hdr.is_some() {
                    return (used, ReadStatus::Done);
                }
                // The header is complete: parse it, then go for the PD.
                let h: Option<&[u8; HDR_LEN]> =
                    self.buf.get(..HDR_LEN).and_then(|s| s.try_into().ok());
                match h.map(|h| FrameHeader::parse(h, self.kind)) {
                    Some(Ok(h)) => self.hdr = Some(h),
                    Some(Err(e)) => self.err = Some(e),
                    None => self.err = Some(MpaError::Truncated),
                }
                continue;
            }
            let want = need.saturating_sub(self.have);
            let rest = input.get(used..).unwrap_or(&[]);
            let n = want.min(rest.len());
            if n == 0 {
                return (used, ReadStatus::NeedMore);
            }
            let end = self.have.saturating_add(n);
            match (self.buf.get_mut(self.have..end), rest.get(..n)) {
                (Some(d), Some(s)) => d.copy_from_slice(s),
                _ => {
                    self.err = Some(MpaError::Truncated);
                    continue;
                }
            }
            self.have = end;
            used = used.saturating_add(n);
        }
    }

    /// The frame, once [`ReadStatus::Done`] was returned.
    pub fn frame(&self) -> Option<Result<Frame<'_>, MpaError>> {
        let h = self.hdr?;
        let pd = self.buf.get(HDR_LEN..self.need())?;
        if self.have < self.need() {
            return None;
        }
        Some(Frame::from_parts(h, pd))
    }
}

/// Local configuration of one end of the MPA exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalConfig {
    /// Highest revision to use (1 or 2). With 1 no enhanced data is sent.
    pub max_rev: u8,
    /// Whether this end wants MPA CRC.
    pub crc: bool,
    /// IRD the ULP wants, or [`IRD_ORD_ULP`].
    pub ird: u16,
    /// ORD the ULP wants (responder: the ORD the ULP needs), or
    /// [`IRD_ORD_ULP`].
    pub ord: u16,
    /// Device maximum IRD.
    pub max_ird: u16,
    /// Device maximum ORD.
    pub max_ord: u16,
    /// Initiator: ask for the peer-to-peer model (flag A).
    pub p2p: bool,
    /// RTR kinds this end can send (initiator) or absorb (responder).
    pub rtr: RtrSet,
    /// Responder: adopt the initiator's IRD as ORD instead of rejecting when
    /// it is below the ULP's ORD (as `siw`'s relaxed negotiation does).
    /// Initiator: lower the ORD to the responder's IRD and raise the IRD to
    /// its ORD instead of terminating.
    pub relaxed_ord: bool,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            max_rev: 2,
            crc: false,
            ird: 16,
            ord: 16,
            max_ird: 128,
            max_ord: 128,
            p2p: false,
            rtr: RtrSet {
                send: false,
                write: true,
                read: true,
            },
            relaxed_ord: true,
        }
    }
}

/// Parameters of an established connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnParams {
    /// Revision in use (of the reply).
    pub rev: u8,
    /// Whether MPA CRC is generated and checked (both directions).
    pub crc: bool,
    /// Whether enhanced data was exchanged.
    pub enhanced: bool,
    /// Local IRD to configure.
    pub ird: u16,
    /// Local ORD to configure.
    pub ord: u16,
    /// Peer-to-peer model in use.
    pub p2p: bool,
    /// Initiator: the RTR to send. Responder: unused (`None`).
    pub rtr_send: Option<RtrKind>,
    /// Responder: the RTR kinds it accepts. Initiator: the peer's set.
    pub rtr_set: RtrSet,
    /// The peer's IRD as received (for the ULP), if enhanced.
    pub peer_ird: Option<u16>,
    /// The peer's ORD as received (for the ULP), if enhanced.
    pub peer_ord: Option<u16>,
}

/// Why a responder rejects a request (reply with R=1, then close).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The initiator asked for Markers (D-03).
    Markers,
    /// S=1 but not enough private data for the enhanced data (MPA-08).
    ShortEnhanced,
    /// The initiator IRD is below the ORD the ULP needs (MPA-10); the
    /// reply's ORD carries the required ORD.
    InsufficientIrd,
    /// Peer-to-peer requested but this end supports no RTR kind.
    NoRtr,
}

/// What a responder does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponderAction {
    /// Send this reply (R=0) and enter full operation with `params`.
    Accept {
        /// Reply flags (without S).
        flags: u8,
        /// Reply revision.
        rev: u8,
        /// Enhanced data to put in the reply, if any.
        enhanced: Option<Enhanced>,
        /// The agreed parameters.
        params: ConnParams,
    },
    /// Send a reply with R=1 (and this enhanced data, if any), then close.
    Reject {
        /// Reply flags (R included, without S).
        flags: u8,
        /// Reply revision.
        rev: u8,
        /// Enhanced data to put in the reject, if any.
        enhanced: Option<Enhanced>,
        /// Why.
        reason: RejectReason,
    },
    /// The request is not a valid frame: close the socket without a reply.
    Close(MpaError),
}

fn clamp(v: u16, max: u16) -> u16 {
    v.min(max).min(IRD_ORD_MAX)
}

/// Builds the initiator's request: flags, revision and enhanced data.
///
/// Private data limits: with enhanced data the ULP may send at most 508
/// bytes ([`MAX_ULP_PD_ENHANCED`]); [`encode_frame`] enforces it.
pub fn initiator_request(cfg: &LocalConfig) -> (u8, u8, Option<Enhanced>) {
    let flags = if cfg.crc { FLAG_C } else { 0 };
    if cfg.max_rev < 2 {
        return (flags, 1, None);
    }
    let ird = if cfg.ird == IRD_ORD_ULP {
        IRD_ORD_ULP
    } else {
        clamp(cfg.ird, cfg.max_ird)
    };
    let ord = if cfg.ord == IRD_ORD_ULP {
        IRD_ORD_ULP
    } else {
        clamp(cfg.ord, cfg.max_ord)
    };
    let e = Enhanced {
        ird,
        ord,
        p2p: cfg.p2p,
        rtr: if cfg.p2p { cfg.rtr } else { RtrSet::NONE },
    };
    (flags, 2, Some(e))
}

/// The responder's decision on a request frame (MPA2 §9.1, §9.2, §10).
///
/// `req` must be a parsed Request header and its complete private data.
pub fn responder_decide(cfg: &LocalConfig, req: &FrameHeader, pd: &[u8]) -> ResponderAction {
    if req.kind != FrameKind::Request {
        return ResponderAction::Close(MpaError::BadKey);
    }
    let rev = req.rev.min(cfg.max_rev.clamp(1, 2));
    let crc = req.crc() || cfg.crc;
    let base = if crc { FLAG_C } else { 0 };
    // An enhanced reply answers an enhanced request only.
    let enhanced_req = req.enhanced() && cfg.max_rev >= 2;
    let frame = match Frame::from_parts(*req, pd) {
        Ok(f) => f,
        Err(_) => {
            return ResponderAction::Reject {
                flags: base | FLAG_R,
                rev,
                enhanced: None,
                reason: RejectReason::ShortEnhanced,
            }
        }
    };
    if req.markers() {
        return ResponderAction::Reject {
            flags: base | FLAG_R,
            rev,
            enhanced: None,
            reason: RejectReason::Markers,
        };
    }
    let Some(ie) = frame.enhanced.filter(|_| enhanced_req) else {
        // Unenhanced exchange: IRD/ORD stay what the ULP set.
        return ResponderAction::Accept {
            flags: base,
            rev,
            enhanced: None,
            params: ConnParams {
                rev,
                crc,
                enhanced: false,
                ird: clamp(cfg.ird, cfg.max_ird),
                ord: clamp(cfg.ord, cfg.max_ord),
                p2p: false,
                rtr_send: None,
                rtr_set: RtrSet::NONE,
                peer_ird: None,
                peer_ord: None,
            },
        };
    };
    // RTR selection (MPA2 §9.2).
    let mut rtr = RtrSet::NONE;
    if ie.p2p {
        rtr = ie.rtr.and(cfg.rtr);
        if rtr.is_empty() {
            rtr = cfg.rtr;
        }
    }
    // Responder IRD (MPA2 §9.1): at least the initiator ORD, unless 0x3FFF.
    let local_ird = clamp(cfg.ird, cfg.max_ird);
    let (ird, reply_ird) = if ie.ord == IRD_ORD_ULP {
        (local_ird, IRD_ORD_ULP)
    } else {
        let mut want = local_ird.max(ie.ord);
        if rtr.read {
            want = want.max(1);
        }
        let v = clamp(want, cfg.max_ird);
        (v, v)
    };
    if rtr.read && ird == 0 {
        // A Read RTR needs one IRD slot (MPA-17).
        rtr.read = false;
    }
    if ie.p2p && rtr.is_empty() {
        let e = Enhanced {
            ird: reply_ird,
            ord: 0,
            p2p: true,
            rtr: RtrSet::NONE,
        };
        return ResponderAction::Reject {
            flags: base | FLAG_R,
            rev,
            enhanced: Some(e),
            reason: RejectReason::NoRtr,
        };
    }
    // Responder ORD: at most the initiator IRD (MUST, X-10), unless 0x3FFF.
    let local_ord = if cfg.ord == IRD_ORD_ULP {
        0
    } else {
        clamp(cfg.ord, cfg.max_ord)
    };
    let (ord, reply_ord) = if ie.ird == IRD_ORD_ULP {
        (local_ord, IRD_ORD_ULP)
    } else if local_ord > ie.ird && !cfg.relaxed_ord {
        let e = Enhanced {
            ird: reply_ird,
            ord: local_ord,
            p2p: ie.p2p,
            rtr,
        };
        return ResponderAction::Reject {
            flags: base | FLAG_R,
            rev,
            enhanced: Some(e),
            reason: RejectReason::InsufficientIrd,
        };
    } else {
        let v = local_ord.min(ie.ird);
        (v, v)
    };
    let e = Enhanced {
        ird: reply_ird,
        ord: reply_ord,
        p2p: ie.p2p,
        rtr,
    };
    ResponderAction::Accept {
        flags: base,
        rev,
        enhanced: Some(e),
        params: ConnParams {
            rev,
            crc,
            enhanced: true,
            ird,
            ord,
            p2p: ie.p2p,
            rtr_send: None,
            rtr_set: rtr,
            peer_ird: Some(ie.ird),
            peer_ord: Some(ie.ord),
        },
    }
}

/// What an initiator does with the responder's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitiatorAction {
    /// Full operation: configure `params`, send the RTR if
    /// `params.rtr_send` is set, then report the connection established.
    Established(ConnParams),
    /// The responder rejected (R=1). Report `-ECONNREFUSED` with the
    /// responder's IRD/ORD (MPA-06) and close.
    Rejected {
        /// The responder's IRD, if the reject carried enhanced data.
        peer_ird: Option<u16>,
        /// The responder's ORD (the ORD it requires), if enhanced.
        peer_ord: Option<u16>,
    },
    /// The stream is in full operation but cannot be used: send this
    /// Terminate (layer LLP) and close (MPA-11, MPA-15, MPA-19).
    Terminate(TermCode),
    /// The reply is not a valid frame: close without a Terminate.
    Close(MpaError),
}

/// The initiator's decision on the reply (MPA2 §9.1, §9.2).
///
/// `cfg` is the same configuration [`initiator_request`] was called with.
pub fn initiator_decide(cfg: &LocalConfig, rep: &FrameHeader, pd: &[u8]) -> InitiatorAction {
    if rep.kind != FrameKind::Reply {
        return InitiatorAction::Close(MpaError::BadKey);
    }
    let (_, req_rev, req_e) = initiator_request(cfg);
    if rep.rev > req_rev {
        return InitiatorAction::Close(MpaError::BadRev);
    }
    let frame = match Frame::from_parts(*rep, pd) {
        Ok(f) => f,
        Err(e) => return InitiatorAction::Close(e),
    };
    let re = frame.enhanced.filter(|_| req_e.is_some());
    if rep.reject() {
        return InitiatorAction::Rejected {
            peer_ird: re.map(|e| e.ird),
            peer_ord: re.map(|e| e.ord),
        };
    }
    if rep.markers() {
        // The responder wants Markers towards it: not supported (D-03).
        return InitiatorAction::Terminate(TermCode::llp(LlpCode::LocalCatastrophic));
    }
    let crc = cfg.crc || rep.crc();
    let local_ird = if cfg.ird == IRD_ORD_ULP {
        0
    } else {
        clamp(cfg.ird, cfg.max_ird)
    };
    let local_ord = if cfg.ord == IRD_ORD_ULP {
        0
    } else {
        clamp(cfg.ord, cfg.max_ord)
    };
    let Some(re) = re else {
        if cfg.p2p && req_e.is_some() {
            // No enhanced reply, hence no RTR negotiated.
            return InitiatorAction::Terminate(TermCode::llp(LlpCode::NoMatchingRtr));
        }
        return InitiatorAction::Established(ConnParams {
            rev: rep.rev,
            crc,
            enhanced: false,
            ird: local_ird,
            ord: local_ord,
            p2p: false,
            rtr_send: None,
            rtr_set: RtrSet::NONE,
            peer_ird: None,
            peer_ord: None,
        });
    };
    // ORD at most the responder IRD; IRD at least the responder ORD. Strict
    // negotiation (`relaxed_ord` off, as `siw` with `relaxed_ird_negotiation`
    // false) keeps what the ULP asked for or terminates: 2/0/06 (MPA-11).
    let ord = if re.ird == IRD_ORD_ULP {
        local_ord
    } else if re.ird < local_ord && !cfg.relaxed_ord {
        return InitiatorAction::Terminate(TermCode::llp(LlpCode::InsufficientIrd));
    } else {
        local_ord.min(re.ird)
    };
    let ird = if re.ord == IRD_ORD_ULP {
        local_ird
    } else if re.ord > cfg.max_ird.min(IRD_ORD_MAX) || (re.ord > local_ird && !cfg.relaxed_ord) {
        return InitiatorAction::Terminate(TermCode::llp(LlpCode::InsufficientIrd));
    } else {
        local_ird.max(re.ord)
    };
    let mut rtr_send = None;
    let mut ord = ord;
    if cfg.p2p {
        if !re.p2p {
            return InitiatorAction::Terminate(TermCode::llp(LlpCode::NoMatchingRtr));
        }
        let mut usable = re.rtr.and(cfg.rtr);
        // A Read RTR needs a responder IRD slot.
        if re.ird == 0 {
            usable.read = false;
        }
        match usable.pick() {
            Some(k) => rtr_send = Some(k),
            None => {
                return InitiatorAction::Terminate(TermCode::llp(LlpCode::NoMatchingRtr));
            }
        }
        if rtr_send == Some(RtrKind::Read) {
            ord = ord.max(1);
        }
    } else if re.p2p {
        // The responder MUST mirror A=0 (MPA2 §9.2).
        return InitiatorAction::Terminate(TermCode::llp(LlpCode::NoMatchingRtr));
    }
    InitiatorAction::Established(ConnParams {
        rev: rep.rev,
        crc,
        enhanced: true,
        ird,
        ord,
        p2p: cfg.p2p,
        rtr_send,
        rtr_set: re.rtr,
        peer_ird: Some(re.ird),
        peer_ord: Some(re.ord),
    })
}

/// Checks the first FPDU a peer-to-peer responder receives against the RTR options its
/// Reply offered (MPA-16, MPA-17): it must be one of them, a zero-length Send (B), a
/// zero-length RDMA Write (C) or a zero-length RDMA Read Request (D). Anything else, a ULP
/// message among them, would pass MPA Fencing, and is refused with "no matching RTR option"
/// (LLP 2/0/07, MPA-19), the code the initiator uses for a Reply without a usable option.
///
/// The caller checks the rest as for any message (MSN 1 and MO 0 of the Send and the Read
/// Request through the untagged checks); a Terminate is not an RTR and fails the connection
/// on its own, so the caller does not ask about it.
pub fn responder_rtr(offered: RtrSet, seg: &Segment) -> Result<RtrKind, TermCode> {
    let no = TermCode::llp(LlpCode::NoMatchingRtr);
    let last = seg.hdr.last && seg.payload_len == 0;
    match (seg.hdr.opcode, seg.hdr.placement, seg.body) {
        (Opcode::Send, Placement::Untagged { qn: QN_SEND, .. }, _) if last && offered.send => {
            Ok(RtrKind::Send)
        }
        (Opcode::Write, Placement::Tagged { .. }, _) if last && offered.write => Ok(RtrKind::Write),
        (Opcode::ReadRequest, _, Body::ReadRequest(r)) if r.size == 0 && offered.read => {
            Ok(RtrKind::Read)
        }
        _ => Err(no),
    }
}
