// SPDX-License-Identifier: GPL-2.0

//! The receive parser: FPDUs in, validated segments and payload out.
//!
//! The parser consumes the TCP byte stream in chunks of any size (MPA-26) and
//! yields, per FPDU:
//!
//! 1. [`RxEvent::Segment`]: the validated DDP/RDMAP header with its
//!    placement fields (tagged: STag/TO; untagged: QN/MSN/MO) and the decoded
//!    fixed RDMAP header, plus the number of payload bytes that follow;
//! 2. zero or more [`RxEvent::Payload`]: slices of the caller's input (no
//!    copy) with their offset in the segment's payload. The parser has already
//!    run them through the CRC; the caller places them;
//! 3. [`RxEvent::End`]: the pad and CRC were checked, the segment is
//!    complete.
//!
//! A caller that moves payload itself (for example `skb_copy_bits()` straight
//! into memory region pages) uses [`RxParser::payload_remaining`] and
//! [`RxParser::consume_payload`] (handing the bytes to the CRC) or
//! [`RxParser::advance_payload`] (computing the CRC itself, over its source)
//! instead of the `Payload` event, and copies header and trailer bytes at most
//! [`RxParser::want`] at a time into a small staging buffer for
//! [`RxParser::feed`]. Placed data is not known good before `End`: the
//! driver completes nothing earlier. Errors found only at `End` (a Verify
//! mismatch) still get the segment's headers in [`RxParser::terminate_for`]
//! until more input is fed.
//!
//! On any violation the parser stops in a failed state and returns
//! [`RxEvent::Error`] with the Terminate code and which header to echo;
//! [`RxParser::terminate`] builds the Terminate header. State is bounded (one
//! header buffer of [`HDR_BUF`] bytes) and nothing here allocates, recurses,
//! panics or reads out of bounds.
//!
//! Stream-level checks that need driver state (MSN order, MO continuity,
//! buffers, credits, STag validity) are done with [`crate::wire::stream`] and
//! reported through [`RxParser::terminate_for`].

use crate::wire::crc::{crc_from_wire, Crc32c, CRC_INIT};
use crate::wire::fpdu::{pad_len, CRC_LEN, LEN_LEN};
use crate::wire::hdr::{
    Body, DdpHeader, Extension, Opcode, Placement, DDP_DV_MASK, DDP_L, DDP_T, DDP_VERSION,
    OPCODE_MASK4, OPCODE_MASK5, RDMAP_RV_MASK, RDMAP_VERSION, READ_REQ_LEN, TAGGED_HDR_LEN,
    UNTAGGED_HDR_LEN,
};
use crate::wire::term::{
    DdpTaggedCode, DdpUntaggedCode, LlpCode, RdmapCode, TermCode, TermEcho, Terminate, TERM_MAX_LEN,
};
use crate::wire::{be16, be32, be64};

/// Size of the header buffer: length field, untagged header and the largest
/// fixed RDMAP header (Atomic Request or a full Terminate).
pub const HDR_BUF: usize = LEN_LEN + UNTAGGED_HDR_LEN + TERM_MAX_LEN;

/// The bytes [`RxParser::quick_header`] decodes: the length field and an untagged DDP header
/// (a tagged one and the first bytes of its payload or CRC).
const QUICK_HDR: usize = LEN_LEN + UNTAGGED_HDR_LEN;

/// Receive configuration, fixed at full operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxConfig {
    /// MPA CRC negotiated: check the CRC field.
    pub crc: bool,
    /// Accept the RFC 7306 opcodes (0x8-0xB).
    pub rfc7306: bool,
    /// Accept the commit-draft opcodes (0xC-0x11) and decode the RDMAP
    /// opcode as 5 bits. When off, the 0x10 bit is reserved and
    /// ignored, as RFC 5040 says.
    pub commit: bool,
    /// Largest ULPDU_Length accepted; larger is an LLP error (2/0/03).
    pub max_ulpdu: u16,
    /// Also accept a received Terminate in the layout Linux `siw` sends
    /// from little-endian hosts (Layer/EType nibbles swapped, M/D/R in the
    /// low bits of byte 2; [`Terminate::decode_compat`]). Without it such a
    /// Terminate with echoed headers fails to decode (0/2/07).
    pub siw_terminate: bool,
}

impl Default for RxConfig {
    fn default() -> Self {
        RxConfig {
            crc: false,
            rfc7306: false,
            commit: false,
            max_ulpdu: u16::MAX,
            siw_terminate: false,
        }
    }
}

/// A validated segment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Opcode, L bit and placement fields.
    pub hdr: DdpHeader,
    /// The MPA ULPDU_Length (DDP segment length).
    pub ulpdu_len: u16,
    /// The decoded fixed RDMAP header.
    pub body: Body,
    /// Number of payload bytes following the headers.
    pub payload_len: u32,
}

/// A parser failure: the Terminate to send and what to echo.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxError {
    /// Layer/EType/ErrorCode.
    pub code: TermCode,
    /// Which headers to copy into the Terminate.
    pub echo: TermEcho,
}

/// One step of the parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxEvent<'a> {
    /// All input was consumed; feed more.
    NeedMore,
    /// A new segment's header was validated.
    Segment(Segment),
    /// Payload of the current segment, at `offset` within its payload.
    Payload {
        /// Offset of `data` within the segment's payload.
        offset: u32,
        /// The bytes, borrowed from the input.
        data: &'a [u8],
    },
    /// The current segment ended and its CRC (if on) matched.
    End,
    /// A protocol violation. The parser accepts no more input.
    Error(RxError),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Header,
    Payload,
    Trailer,
    Failed,
}

/// The receive parser of one stream.
#[derive(Clone, Debug)]
pub struct RxParser<C: Crc32c> {
    cfg: RxConfig,
    crc: C,
    stage: Stage,
    hdr: [u8; HDR_BUF],
    have: usize,
    need: usize,
    ulpdu_len: usize,
    payload_len: usize,
    payload_done: usize,
    reg: u32,
    tail: [u8; 7],
    tail_have: usize,
    op: Opcode,
    hstep: u8,
    /// The last segment ended; its headers stay in `hdr` (for a Terminate
    /// the driver decides on after `End`) until the next byte arrives.
    ended: bool,
    err: Option<RxError>,
}

/// Copies `src` into `dst` from `at` on and returns the new fill level, or `None` (nothing
/// copied) if it does not fit. Without a panic path: `copy_from_slice()` keeps a length
/// assertion the compiler cannot always prove away.
fn fill(dst: &mut [u8], at: usize, src: &[u8]) -> Option<usize> {
    let end = at.checked_add(src.len())?;
    let d = dst.get_mut(at..end)?;
    d.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
    Some(end)
}

fn fail(code: TermCode, echo: TermEcho) -> RxError {
    RxError { code, echo }
}

impl<C: Crc32c> RxParser<C> {
    /// A parser at the start of full operation.
    pub fn new(cfg: RxConfig, crc: C) -> Self {
        RxParser {
            cfg,
            crc,
            stage: Stage::Header,
            hdr: [0; HDR_BUF],
            have: 0,
            need: LEN_LEN + 2,
            ulpdu_len: 0,
            payload_len: 0,
            payload_done: 0,
            reg: CRC_INIT,
            tail: [0; 7],
            tail_have: 0,
            op: Opcode::Write,
            hstep: 0,
            ended: false,
            err: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RxConfig {
        &self.cfg
    }

    /// The error the parser stopped on, if any.
    pub fn error(&self) -> Option<RxError> {
        self.err
    }

    /// True between a segment's header and its end.
    pub fn in_segment(&self) -> bool {
        matches!(self.stage, Stage::Payload | Stage::Trailer)
    }

    /// Payload bytes of the current segment still to come.
    pub fn payload_remaining(&self) -> usize {
        if self.stage == Stage::Payload {
            self.payload_len.saturating_sub(self.payload_done)
        } else {
            0
        }
    }

    /// Bytes the parser needs before its next event: the rest of the
    /// header or trailer being buffered, or the payload still to come
    /// (which a caller placing payload itself moves and passes to
    /// [`RxParser::consume_payload`]). Zero after an error.
    ///
    /// A caller that copies from non-linear buffers (`skb_copy_bits()`)
    /// copies at most this many bytes per step, so header bytes never end
    /// up in a staging buffer together with payload; or it copies a few
    /// more (up to [`HDR_BUF`]), feeds them only while
    /// [`RxParser::payload_remaining`] is zero, and goes on after the bytes
    /// fed (the kernel RX path, to take a trailer and the next header in one
    /// copy).
    pub fn want(&self) -> usize {
        match self.stage {
            Stage::Header => {
                if self.ended {
                    LEN_LEN + 2
                } else {
                    self.need.saturating_sub(self.have)
                }
            }
            Stage::Payload => self.payload_remaining(),
            Stage::Trailer => pad_len(self.ulpdu_len)
                .saturating_add(CRC_LEN)
                .saturating_sub(self.tail_have),
            Stage::Failed => 0,
        }
    }

    /// Ends the current segment past its pad and CRC field without reading them, when the
    /// parser would not read them anyway (MPA CRC off: the field is ignored, MPA-05) and the
    /// `avail` bytes of input at hand hold all of them. Returns how many bytes to skip; the
    /// caller moves on past them and handles [`RxEvent::End`] as if [`RxParser::feed`] had
    /// returned it for those bytes. `None`, with nothing changed, otherwise (CRC on, not at a
    /// trailer, or a trailer longer than `avail`): `feed` then takes the bytes.
    ///
    /// A caller copying the stream piece by piece (the kernel RX path) so copies no trailer,
    /// and its next copy starts at the next FPDU's header.
    pub fn skip_trailer(&mut self, avail: usize) -> Option<usize> {
        if self.cfg.crc || self.stage != Stage::Trailer {
            return None;
        }
        let n = pad_len(self.ulpdu_len)
            .saturating_add(CRC_LEN)
            .checked_sub(self.tail_have)?;
        if n > avail {
            return None;
        }
        // The state the trailer's `End` in `feed` leaves.
        self.tail_have = self.tail_have.saturating_add(n);
        self.stage = Stage::Header;
        self.ended = true;
        self.need = LEN_LEN + 2;
        self.hstep = 0;
        Some(n)
    }

    /// Accounts for payload bytes that the caller moved itself and runs them
    /// through the CRC. Returns their offset in the segment's payload, or
    /// `None` (and changes nothing) if the parser is not inside a segment's
    /// payload or more bytes are passed than remain.
    ///
    /// The bytes must be the ones the parser would have returned as
    /// [`RxEvent::Payload`]: the next `data.len()` bytes of the stream. The
    /// caller must not complete the message before [`RxEvent::End`], which
    /// is when the CRC over the placed bytes has been checked.
    pub fn consume_payload(&mut self, data: &[u8]) -> Option<u32> {
        if self.stage != Stage::Payload || data.len() > self.payload_remaining() {
            return None;
        }
        let reg = self.cfg.crc.then(|| self.crc.update(self.reg, data));
        self.advance_payload(data.len(), |r| Some(reg.unwrap_or(r)))
    }

    /// Accounts for `n` payload bytes that the caller moved itself without
    /// showing them to the parser, for example straight from a socket
    /// buffer into memory region pages. Returns their offset in the
    /// segment's payload, or `None` (and changes nothing) if the parser is
    /// not inside a segment's payload, more bytes are passed than remain, or
    /// `crc` fails.
    ///
    /// With the MPA CRC on, `crc` is called once with the current CRC
    /// register and returns it updated over exactly those `n` bytes of the
    /// stream, in the [`Crc32c::update`] convention (the kernel computes it
    /// over the socket buffer with `skb_crc32c()`); `None` means it could not
    /// (nothing is accounted then). Without the CRC, `crc` is not called.
    /// As for [`RxParser::consume_payload`], the caller completes nothing
    /// before [`RxEvent::End`].
    pub fn advance_payload<F>(&mut self, n: usize, crc: F) -> Option<u32>
    where
        F: FnOnce(u32) -> Option<u32>,
    {
        if self.stage != Stage::Payload || n > self.payload_remaining() {
            return None;
        }
        let off = u32::try_from(self.payload_done).ok()?;
        if self.cfg.crc {
            self.reg = crc(self.reg)?;
        }
        self.payload_done = self.payload_done.saturating_add(n);
        if self.payload_done >= self.payload_len {
            self.stage = Stage::Trailer;
        }
        Some(off)
    }

    /// The raw DDP header of the current (or failed) segment, if complete.
    pub fn ddp_header_bytes(&self) -> Option<&[u8]> {
        let c = *self.hdr.get(LEN_LEN)?;
        let len = if c & DDP_T != 0 {
            TAGGED_HDR_LEN
        } else {
            UNTAGGED_HDR_LEN
        };
        let end = LEN_LEN.saturating_add(len);
        if self.have < end {
            return None;
        }
        self.hdr.get(LEN_LEN..end)
    }

    /// Builds the Terminate header for `code`, echoing the current
    /// segment's headers as `echo` asks (and as far as they were received).
    ///
    /// The current segment is the one being received or, after
    /// [`RxEvent::End`] and until more input is fed, the one that just
    /// ended (for errors found only once the whole segment is in, such as
    /// a Verify hash mismatch).
    pub fn terminate_for(&self, code: TermCode, echo: TermEcho) -> Terminate {
        let ddp = match (echo, self.ddp_header_bytes()) {
            (TermEcho::None, _) | (_, None) => return Terminate::bare(code),
            (_, Some(d)) => d,
        };
        let seg_len = u16::try_from(self.ulpdu_len).unwrap_or(u16::MAX);
        let rdma: Option<[u8; READ_REQ_LEN]> = match echo {
            TermEcho::DdpAndRdma if ddp.len() == UNTAGGED_HDR_LEN => {
                let s = LEN_LEN + UNTAGGED_HDR_LEN;
                if self.have >= s + READ_REQ_LEN {
                    self.hdr
                        .get(s..s + READ_REQ_LEN)
                        .and_then(|b| b.try_into().ok())
                } else {
                    None
                }
            }
            _ => None,
        };
        Terminate::with_headers(code, seg_len, ddp, rdma.as_ref())
    }

    /// The Terminate for the error the parser stopped on.
    pub fn terminate(&self) -> Option<Terminate> {
        self.err.map(|e| self.terminate_for(e.code, e.echo))
    }

    fn set_err(&mut self, e: RxError) -> RxError {
        self.stage = Stage::Failed;
        self.err = Some(e);
        e
    }

    /// First look at a header `h`: length field and control bytes. Returns
    /// the full header length needed.
    fn check_len(&self, h: &[u8]) -> Result<usize, RxError> {
        let ulpdu = usize::from(be16(h, 0).unwrap_or(0));
        let c0 = h.get(2).copied().unwrap_or(0);
        let ddp_min = if c0 & DDP_T != 0 {
            TAGGED_HDR_LEN
        } else {
            UNTAGGED_HDR_LEN
        };
        if ulpdu < ddp_min || ulpdu > usize::from(self.cfg.max_ulpdu) {
            return Err(fail(TermCode::llp(LlpCode::FpduStart), TermEcho::None));
        }
        Ok(LEN_LEN.saturating_add(ddp_min))
    }

    /// Checks the control bytes once the DDP header is complete (so that a
    /// Terminate can echo it). Returns the opcode and the full header
    /// length needed.
    fn check_ctrl(&self, h: &[u8]) -> Result<(Opcode, usize), RxError> {
        let ulpdu = usize::from(be16(h, 0).unwrap_or(0));
        let c0 = h.get(2).copied().unwrap_or(0);
        let c1 = h.get(3).copied().unwrap_or(0);
        let tagged = c0 & DDP_T != 0;
        let llp = fail(TermCode::llp(LlpCode::FpduStart), TermEcho::None);
        if c0 & DDP_DV_MASK != DDP_VERSION {
            let code = if tagged {
                TermCode::tagged(DdpTaggedCode::InvalidVersion)
            } else {
                TermCode::untagged(DdpUntaggedCode::InvalidVersion)
            };
            return Err(fail(code, TermEcho::Ddp));
        }
        let opfail = fail(
            TermCode::operation(RdmapCode::UnexpectedOpcode),
            TermEcho::Ddp,
        );
        if c1 & RDMAP_RV_MASK != RDMAP_VERSION {
            return Err(fail(
                TermCode::operation(RdmapCode::InvalidVersion),
                TermEcho::Ddp,
            ));
        }
        let mask = if self.cfg.commit {
            OPCODE_MASK5
        } else {
            OPCODE_MASK4
        };
        let op = Opcode::from_u8(c1 & mask).ok_or(opfail)?;
        let enabled = match op.extension() {
            Extension::Base => true,
            Extension::Rfc7306 => self.cfg.rfc7306,
            Extension::Commit => self.cfg.commit,
        };
        if !enabled || op.is_tagged() != tagged {
            return Err(opfail);
        }
        let hl = op.header_len();
        if ulpdu < hl {
            if matches!(op, Opcode::ImmData | Opcode::ImmDataSe) {
                // Whole DDP header, fewer than 8 bytes of Immediate Data
                // (IMM-02): the same error as more than 8 (D-02).
                return Err(fail(
                    TermCode::operation(RdmapCode::CatastrophicStream),
                    TermEcho::Ddp,
                ));
            }
            return Err(llp);
        }
        let need = if op == Opcode::Terminate {
            // The whole Terminate header is buffered.
            if ulpdu > UNTAGGED_HDR_LEN + TERM_MAX_LEN {
                return Err(fail(
                    TermCode::operation(RdmapCode::CatastrophicStream),
                    TermEcho::Ddp,
                ));
            }
            ulpdu
        } else {
            hl
        };
        Ok((op, LEN_LEN.saturating_add(need)))
    }

    /// Full header validation once `need` bytes are in `h`.
    #[inline(always)]
    fn check_header(&self, op: Opcode, h: &[u8]) -> Result<Segment, RxError> {
        let ulpdu = usize::from(be16(h, 0).unwrap_or(0));
        let c0 = h.get(2).copied().unwrap_or(0);
        let last = c0 & DDP_L != 0;
        let ddp = fail(TermCode::rdmap_catastrophic(), TermEcho::Ddp);
        let opfail = fail(
            TermCode::operation(RdmapCode::UnexpectedOpcode),
            TermEcho::Ddp,
        );
        let placement = if op.is_tagged() {
            Placement::Tagged {
                stag: be32(h, 4).ok_or(ddp)?,
                to: be64(h, 8).ok_or(ddp)?,
            }
        } else {
            let qn = be32(h, 8).ok_or(ddp)?;
            if qn > crate::wire::hdr::QN_RESPONSE {
                return Err(fail(
                    TermCode::untagged(DdpUntaggedCode::InvalidQn),
                    TermEcho::Ddp,
                ));
            }
            if Some(qn) != op.queue() {
                return Err(opfail);
            }
            Placement::Untagged {
                inv_stag: op.untagged_word(be32(h, 4).ok_or(ddp)?),
                qn,
                msn: be32(h, 12).ok_or(ddp)?,
                mo: be32(h, 16).ok_or(ddp)?,
            }
        };
        let hl = op.header_len();
        let payload = ulpdu.saturating_sub(hl);
        let mo = match placement {
            Placement::Untagged { mo, .. } => mo,
            Placement::Tagged { .. } => 0,
        };
        if op.is_fixed_size() && (!last || payload != 0) {
            // Requests: single segment, exact size (X-09, IMM-02 -> 0/2/07);
            // responses: invalid response (D-02 -> 0/2/06).
            let code = if op.queue() == Some(crate::wire::hdr::QN_RESPONSE) {
                RdmapCode::UnexpectedOpcode
            } else {
                RdmapCode::CatastrophicStream
            };
            return Err(fail(TermCode::operation(code), TermEcho::Ddp));
        }
        if op == Opcode::VerifyRequest && !last {
            return Err(fail(
                TermCode::operation(RdmapCode::CatastrophicStream),
                TermEcho::Ddp,
            ));
        }
        if op == Opcode::VerifyResponse && last && mo == 0 && payload == 0 {
            // The hash is "variable and non-zero" (VERIFY-05).
            return Err(opfail);
        }
        let ddp_len = if op.is_tagged() {
            TAGGED_HDR_LEN
        } else {
            UNTAGGED_HDR_LEN
        };
        let bstart = LEN_LEN.saturating_add(ddp_len);
        let bend = if op == Opcode::Terminate {
            LEN_LEN.saturating_add(ulpdu)
        } else {
            LEN_LEN.saturating_add(hl)
        };
        let bbytes = h.get(bstart..bend).ok_or(ddp)?;
        let body = if bbytes.is_empty() && op != Opcode::Terminate {
            // No fixed RDMAP header: what `Body::decode()` returns, without the call.
            Some(Body::None)
        } else if op == Opcode::Terminate && self.cfg.siw_terminate {
            Terminate::decode_compat(bbytes).map(Body::Terminate)
        } else {
            Body::decode(op, bbytes)
        };
        let body = match body {
            Some(b) => b,
            None => {
                return Err(fail(
                    TermCode::operation(RdmapCode::CatastrophicStream),
                    TermEcho::Ddp,
                ))
            }
        };
        let payload_len = if op == Opcode::Terminate { 0 } else { payload };
        Ok(Segment {
            hdr: DdpHeader {
                opcode: op,
                last,
                placement,
            },
            ulpdu_len: u16::try_from(ulpdu).unwrap_or(u16::MAX),
            body,
            payload_len: u32::try_from(payload_len).unwrap_or(u32::MAX),
        })
    }

    /// Validates a header that is whole in `h`, without buffering it. Returns
    /// the segment and the header length, or `None` if `h` is too short or
    /// the header is bad (the caller then goes step by step, which buffers
    /// the header as far as a Terminate echoes it and reports the error).
    #[inline(always)]
    fn whole_header(&self, h: &[u8]) -> Option<(Segment, usize)> {
        let n = self.check_len(h).ok()?;
        if h.len() < n {
            return None;
        }
        let (op, need) = self.check_ctrl(h).ok()?;
        let h = h.get(..need)?;
        let seg = self.check_header(op, h).ok()?;
        Some((seg, need))
    }

    /// [`RxParser::whole_header`] for the headers of data messages: a Write, a Read Response
    /// or a Send variant (no fixed RDMAP header), decoded from the first [`QUICK_HDR`] bytes
    /// of `h` with the checks of the general path for these opcodes. `None` for anything else,
    /// which the general path then takes (and reports if it is bad); where both give a
    /// segment, it is the same (`quick_header_matches` in the tests).
    #[inline(always)]
    fn quick_header(&self, h: &[u8]) -> Option<(Segment, usize)> {
        let h: &[u8; QUICK_HDR] = h.get(..QUICK_HDR)?.try_into().ok()?;
        let [l0, l1, c0, c1, f @ ..] = *h;
        let ulpdu = usize::from(u16::from_be_bytes([l0, l1]));
        if c0 & DDP_DV_MASK != DDP_VERSION || c1 & RDMAP_RV_MASK != RDMAP_VERSION {
            return None;
        }
        let mask = if self.cfg.commit {
            OPCODE_MASK5
        } else {
            OPCODE_MASK4
        };
        let word = |i: usize| be32(&f, i);
        let (opcode, placement, hl) = match (c1 & mask, c0 & DDP_T != 0) {
            (op @ (0x0 | 0x2), true) => {
                let to = u64::from(word(4)?) << 32 | u64::from(word(8)?);
                let stag = word(0)?;
                let opcode = if op == 0x0 {
                    Opcode::Write
                } else {
                    Opcode::ReadResponse
                };
                (opcode, Placement::Tagged { stag, to }, TAGGED_HDR_LEN)
            }
            (op @ 0x3..=0x6, false) => {
                let opcode = Opcode::from_u8(op)?;
                if word(4)? != crate::wire::hdr::QN_SEND {
                    return None;
                }
                let inv_stag = opcode.untagged_word(word(0)?);
                let placement = Placement::Untagged {
                    inv_stag,
                    qn: crate::wire::hdr::QN_SEND,
                    msn: word(8)?,
                    mo: word(12)?,
                };
                (opcode, placement, UNTAGGED_HDR_LEN)
            }
            _ => return None,
        };
        if ulpdu < hl || ulpdu > usize::from(self.cfg.max_ulpdu) {
            return None;
        }
        let seg = Segment {
            hdr: DdpHeader {
                opcode,
                last: c0 & DDP_L != 0,
                placement,
            },
            ulpdu_len: u16::try_from(ulpdu).ok()?,
            body: Body::None,
            payload_len: u32::try_from(ulpdu.saturating_sub(hl)).ok()?,
        };
        Some((seg, LEN_LEN.saturating_add(hl)))
    }

    /// Starts the segment whose header (`self.need` bytes) is buffered and
    /// valid.
    fn begin<'a>(&mut self, seg: Segment) -> RxEvent<'a> {
        self.ulpdu_len = usize::from(seg.ulpdu_len);
        if self.cfg.crc {
            let hb = self.hdr.get(..self.need).unwrap_or(&[]);
            self.reg = self.crc.update(CRC_INIT, hb);
        }
        self.payload_len = usize::try_from(seg.payload_len).unwrap_or(0);
        self.payload_done = 0;
        self.tail_have = 0;
        self.stage = if self.payload_len == 0 {
            Stage::Trailer
        } else {
            Stage::Payload
        };
        RxEvent::Segment(seg)
    }

    fn take_hdr(&mut self, input: &[u8], used: &mut usize) -> bool {
        let want = self.need.saturating_sub(self.have);
        let rest = input.get(*used..).unwrap_or(&[]);
        let n = want.min(rest.len());
        if let Some(end) = rest
            .get(..n)
            .and_then(|s| fill(&mut self.hdr, self.have, s))
        {
            self.have = end;
            *used = used.saturating_add(n);
        }
        self.have >= self.need
    }

    /// Takes a whole FPDU at the start of `input` in one step, when the
    /// parser is between FPDUs, the FPDU is entirely in `input`, its header
    /// is valid, it is not a Terminate, and its CRC (when on) matches.
    /// Returns the number of bytes consumed, the segment and its payload
    /// (borrowed from `input`), and leaves the parser as [`RxParser::feed`]
    /// would after the events `Segment`, `Payload` and `End` of that FPDU.
    ///
    /// Otherwise it returns `None` and changes nothing: [`RxParser::feed`]
    /// then takes the same bytes step by step and reports what is wrong.
    /// A caller that copied a small FPDU anyway (the header copy of the
    /// kernel RX path) so handles it without feeding header, payload and
    /// trailer one after the other.
    pub fn feed_whole<'a>(&mut self, input: &'a [u8]) -> Option<(usize, Segment, &'a [u8])> {
        if self.stage != Stage::Header || !(self.ended || self.have == 0) {
            return None;
        }
        // An FPDU longer than the input (a bulk transfer's, whose header alone was copied) is
        // not decoded here: `feed` takes it.
        let ulpdu = usize::from(be16(input, 0)?);
        if input.len() < ulpdu.saturating_add(LEN_LEN + CRC_LEN) {
            return None;
        }
        let (seg, need) = match self.quick_header(input) {
            Some(q) => q,
            None => self.whole_header(input)?,
        };
        if seg.hdr.opcode == Opcode::Terminate {
            return None;
        }
        let ulpdu = usize::from(seg.ulpdu_len);
        let pad = pad_len(ulpdu);
        let body_end = LEN_LEN.checked_add(ulpdu)?.checked_add(pad)?;
        let total = body_end.checked_add(CRC_LEN)?;
        let fpdu = input.get(..total)?;
        let n = usize::try_from(seg.payload_len).ok()?;
        let payload = fpdu.get(need..need.checked_add(n)?)?;
        if self.cfg.crc {
            let r = self.crc.update(CRC_INIT, fpdu.get(..body_end)?);
            let got: [u8; 4] = fpdu.get(body_end..total)?.try_into().ok()?;
            if crc_from_wire(got) != r {
                return None;
            }
        }
        // The state `feed` leaves after the segment's `End`: its headers kept.
        self.have = fill(&mut self.hdr, 0, fpdu.get(..need)?)?;
        self.op = seg.hdr.opcode;
        self.ulpdu_len = ulpdu;
        self.payload_len = n;
        self.payload_done = n;
        self.tail_have = pad.saturating_add(CRC_LEN);
        self.stage = Stage::Header;
        self.ended = true;
        self.need = LEN_LEN + 2;
        self.hstep = 0;
        Some((total, seg, payload))
    }

    /// Feeds input. Returns the number of bytes consumed and one event.
    ///
    /// Call again with the unconsumed rest until [`RxEvent::NeedMore`].
    pub fn feed<'a>(&mut self, input: &'a [u8]) -> (usize, RxEvent<'a>) {
        let mut used = 0usize;
        loop {
            match self.stage {
                Stage::Failed => {
                    let e = self.err.unwrap_or(fail(
                        TermCode::llp(LlpCode::LocalCatastrophic),
                        TermEcho::None,
                    ));
                    return (used, RxEvent::Error(e));
                }
                Stage::Header => {
                    if self.ended {
                        if used >= input.len() {
                            return (used, RxEvent::NeedMore);
                        }
                        // The next FPDU starts: drop the ended segment's
                        // headers.
                        self.ended = false;
                        self.have = 0;
                    }
                    if self.have == 0 {
                        // Fast path: the whole header is in the input. Validated in place
                        // (a data message's by the quick decoder) and copied once; anything
                        // else (a short or a bad header) takes the step-by-step path below,
                        // which reports errors.
                        let rest = input.get(used..).unwrap_or(&[]);
                        let quick = match self.quick_header(rest) {
                            Some(q) => Some(q),
                            None => self.whole_header(rest),
                        };
                        if let Some((seg, need)) = quick {
                            if let Some(have) =
                                rest.get(..need).and_then(|b| fill(&mut self.hdr, 0, b))
                            {
                                self.have = have;
                                self.need = need;
                                self.op = seg.hdr.opcode;
                                self.hstep = 2;
                                used = used.saturating_add(need);
                                return (used, self.begin(seg));
                            }
                        }
                    }
                    if !self.take_hdr(input, &mut used) {
                        return (used, RxEvent::NeedMore);
                    }
                    if self.hstep == 0 {
                        // Length and control are in: wait for the DDP header.
                        match self.check_len(&self.hdr) {
                            Ok(need) => {
                                self.need = need;
                                self.hstep = 1;
                                continue;
                            }
                            Err(e) => return (used, RxEvent::Error(self.set_err(e))),
                        }
                    }
                    if self.hstep == 1 {
                        // DDP header is in: validate control, size the rest.
                        match self.check_ctrl(&self.hdr) {
                            Ok((op, need)) => {
                                self.op = op;
                                self.need = need;
                                self.hstep = 2;
                                continue;
                            }
                            Err(e) => {
                                self.ulpdu_len = usize::from(be16(&self.hdr, 0).unwrap_or(0));
                                return (used, RxEvent::Error(self.set_err(e)));
                            }
                        }
                    }
                    match self.check_header(self.op, &self.hdr) {
                        Ok(seg) => return (used, self.begin(seg)),
                        Err(e) => {
                            self.ulpdu_len = usize::from(be16(&self.hdr, 0).unwrap_or(0));
                            return (used, RxEvent::Error(self.set_err(e)));
                        }
                    }
                }
                Stage::Payload => {
                    let rest = input.get(used..).unwrap_or(&[]);
                    let n = self.payload_remaining().min(rest.len());
                    if n == 0 {
                        return (used, RxEvent::NeedMore);
                    }
                    let data = rest.get(..n).unwrap_or(&[]);
                    let Some(offset) = self.consume_payload(data) else {
                        let e = fail(TermCode::llp(LlpCode::LocalCatastrophic), TermEcho::None);
                        return (used, RxEvent::Error(self.set_err(e)));
                    };
                    used = used.saturating_add(n);
                    return (used, RxEvent::Payload { offset, data });
                }
                Stage::Trailer => {
                    let pad = pad_len(self.ulpdu_len);
                    let tneed = pad.saturating_add(CRC_LEN);
                    let rest = input.get(used..).unwrap_or(&[]);
                    let n = tneed.saturating_sub(self.tail_have).min(rest.len());
                    if !self.cfg.crc {
                        // Pad and CRC field are skipped unread (the field is ignored
                        // without CRC, MPA-05).
                        self.tail_have = self.tail_have.saturating_add(n);
                        used = used.saturating_add(n);
                    } else if let Some(end) = rest
                        .get(..n)
                        .and_then(|s| fill(&mut self.tail, self.tail_have, s))
                    {
                        self.tail_have = end;
                        used = used.saturating_add(n);
                    }
                    if self.tail_have < tneed {
                        return (used, RxEvent::NeedMore);
                    }
                    if self.cfg.crc {
                        let r = self
                            .crc
                            .update(self.reg, self.tail.get(..pad).unwrap_or(&[]));
                        let got: [u8; 4] = self
                            .tail
                            .get(pad..tneed)
                            .and_then(|s| s.try_into().ok())
                            .unwrap_or([0; 4]);
                        if crc_from_wire(got) != r {
                            let e = fail(TermCode::llp(LlpCode::Crc), TermEcho::None);
                            return (used, RxEvent::Error(self.set_err(e)));
                        }
                    }
                    self.stage = Stage::Header;
                    self.ended = true;
                    self.need = LEN_LEN + 2;
                    self.hstep = 0;
                    return (used, RxEvent::End);
                }
            }
        }
    }
}
