// SPDX-License-Identifier: GPL-2.0

//! The transmit segmenter: a message in, FPDUs out.
//!
//! The segmenter cuts a message into DDP segments no larger than the MULPDU
//! (derived from the TCP MSS with [`crate::wire::fpdu::mulpdu_from_mss`]).
//! For each FPDU it yields an [`FpduPlan`]: the header bytes in a fixed-size
//! buffer (MPA length, DDP header, fixed RDMAP header), the byte range of the
//! message payload that follows, and the means to build the trailer. The
//! caller sends header, payload pages (zero-copy) and trailer; it runs the
//! payload through [`FpduCrc`] piece by piece, so scattered pages never need
//! to be contiguous. Nothing is allocated.

use crate::wire::crc::{crc_to_wire, Crc32c, CRC_INIT};
use crate::wire::fpdu::{pad_len, trailer, CRC_LEN, LEN_LEN};
use crate::wire::hdr::{
    Body, DdpHeader, Opcode, Placement, DDP_L, DDP_T, DDP_VERSION, OPCODE_MASK5, QN_SEND,
    RDMAP_VERSION, TAGGED_HDR_LEN, UNTAGGED_HDR_LEN,
};
use crate::wire::put;
use crate::wire::rx::HDR_BUF;

/// Why a message cannot be segmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxError {
    /// Tagged opcode with untagged placement, or the reverse.
    PlacementMismatch,
    /// The fixed RDMAP header does not belong to the opcode.
    BodyMismatch,
    /// The opcode carries no payload but `payload_len` is not zero.
    UnexpectedPayload,
    /// The MULPDU cannot carry the header (and, for single-segment
    /// messages, the payload).
    MulpduTooSmall,
    /// TO + length wraps (tagged) or MO + length wraps (untagged).
    Wrap,
    /// [`whole_fpdu`]: the message needs more than one FPDU, or the buffer is too short.
    NotWhole,
    /// [`whole_fpdu`]: the payload could not be written.
    Payload,
}

/// A message to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxMessage {
    /// The opcode.
    pub opcode: Opcode,
    /// Tagged: STag and TO of the first byte. Untagged: Invalidate STag
    /// (Send with Invalidate only), MSN and the MO of the first byte; the QN
    /// is taken from the opcode.
    pub placement: Placement,
    /// The fixed RDMAP header.
    pub body: Body,
    /// Total payload length (ULP data, or the Verify hash).
    pub payload_len: u32,
}

/// One FPDU to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpduPlan {
    hdr: [u8; HDR_BUF],
    hdr_len: usize,
    /// Offset of this FPDU's payload within the message payload.
    pub payload_off: u32,
    /// Payload bytes in this FPDU.
    pub payload_len: u32,
    /// The ULPDU_Length (DDP segment length).
    pub ulpdu_len: u16,
    /// The L bit of this segment.
    pub last: bool,
}

impl FpduPlan {
    /// The header bytes to send first: ULPDU_Length, DDP and RDMAP headers.
    pub fn header(&self) -> &[u8] {
        self.hdr.get(..self.hdr_len).unwrap_or(&[])
    }

    /// A CRC accumulator primed with the header, when CRC is on.
    pub fn crc<'c, C: Crc32c>(&self, c: &'c C, on: bool) -> FpduCrc<'c, C> {
        FpduCrc {
            c,
            reg: if on {
                Some(c.update(CRC_INIT, self.header()))
            } else {
                None
            },
            ulpdu_len: usize::from(self.ulpdu_len),
        }
    }
}

/// Incremental CRC over one FPDU's scattered payload.
#[derive(Debug)]
pub struct FpduCrc<'c, C: Crc32c> {
    c: &'c C,
    reg: Option<u32>,
    ulpdu_len: usize,
}

impl<C: Crc32c> FpduCrc<'_, C> {
    /// Adds payload bytes, in order.
    pub fn update(&mut self, data: &[u8]) {
        if let Some(r) = self.reg {
            self.reg = Some(self.c.update(r, data));
        }
    }

    /// The trailer bytes (pad and CRC, 4 to 7 bytes) and their count.
    pub fn trailer(&self) -> ([u8; 7], usize) {
        trailer(self.c, self.reg, self.ulpdu_len)
    }
}

/// Cuts one message into FPDUs.
#[derive(Clone, Copy, Debug)]
pub struct Segmenter {
    msg: TxMessage,
    max_payload: u32,
    sent: u32,
    done: bool,
}

impl Segmenter {
    /// A segmenter with nothing to send, to be [`Segmenter::reset`] in place.
    pub const fn idle() -> Segmenter {
        Segmenter {
            msg: TxMessage {
                opcode: Opcode::Write,
                placement: Placement::Tagged { stag: 0, to: 0 },
                body: Body::None,
                payload_len: 0,
            },
            max_payload: 0,
            sent: 0,
            done: true,
        }
    }

    /// Prepares `msg` for a MULPDU of `mulpdu` bytes.
    pub fn new(msg: TxMessage, mulpdu: u16) -> Result<Segmenter, TxError> {
        let mut s = Segmenter::idle();
        s.reset(msg, mulpdu)?;
        Ok(s)
    }

    /// Prepares `msg` for a MULPDU of `mulpdu` bytes in place, as [`Segmenter::new`] does
    /// (for a caller that keeps the segmenter: a message is large to move). On error the
    /// segmenter is idle: it plans no FPDU.
    pub fn reset(&mut self, msg: TxMessage, mulpdu: u16) -> Result<(), TxError> {
        self.msg = msg;
        self.sent = 0;
        self.done = true;
        self.max_payload = normalize(&mut self.msg, mulpdu)?;
        self.done = false;
        Ok(())
    }

    /// Changes the MULPDU for the FPDUs not yet planned (the TCP MSS
    /// changed in the middle of a message). On error nothing changes.
    pub fn set_mulpdu(&mut self, mulpdu: u16) -> Result<(), TxError> {
        self.max_payload = max_payload(&self.msg, mulpdu)?;
        Ok(())
    }

    /// Payload bytes already planned into FPDUs.
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// Number of FPDUs the message needs.
    ///
    /// After [`Segmenter::set_mulpdu`] this is the count for a message
    /// segmented at the new MULPDU from the start; [`Segmenter::remaining`]
    /// gives the FPDUs still to come.
    pub fn fpdu_count(&self) -> u32 {
        if self.msg.payload_len == 0 {
            1
        } else {
            self.msg.payload_len.div_ceil(self.max_payload.max(1))
        }
    }

    /// Number of FPDUs still to come at the current MULPDU.
    pub fn remaining(&self) -> u32 {
        if self.done {
            0
        } else {
            let left = self.msg.payload_len.saturating_sub(self.sent);
            left.div_ceil(self.max_payload.max(1)).max(1)
        }
    }

    /// The next FPDU, or `None` when the message is done.
    pub fn next_fpdu(&mut self) -> Option<FpduPlan> {
        if self.msg.body.is_empty() {
            self.next_data_fpdu()
        } else {
            self.next_any_fpdu()
        }
    }

    /// The payload bytes of the next FPDU and its L bit, or `None` when the message is done.
    fn cut(&self) -> Option<(u32, bool)> {
        if self.done {
            return None;
        }
        let left = self.msg.payload_len.saturating_sub(self.sent);
        let n = left.min(self.max_payload);
        Some((n, n == left))
    }

    /// The DDP header of the next FPDU: the message's, its TO or MO advanced by the bytes
    /// already planned.
    #[inline(always)]
    fn header(&self, last: bool) -> DdpHeader {
        let placement = match self.msg.placement {
            Placement::Tagged { stag, to } => Placement::Tagged {
                stag,
                to: to.wrapping_add(u64::from(self.sent)),
            },
            Placement::Untagged {
                inv_stag,
                qn,
                msn,
                mo,
            } => Placement::Untagged {
                inv_stag,
                qn,
                msn,
                mo: mo.wrapping_add(self.sent),
            },
        };
        DdpHeader {
            opcode: self.msg.opcode,
            last,
            placement,
        }
    }

    /// Accounts the FPDU planned.
    fn planned(&mut self, p: FpduPlan) -> Option<FpduPlan> {
        self.sent = self.sent.saturating_add(p.payload_len);
        self.done = p.last;
        Some(p)
    }

    /// [`Segmenter::next_fpdu`] of a message without a fixed RDMAP header (the bulk data of
    /// Writes, Read Responses and Sends): the header written field by field at fixed
    /// offsets, the bytes [`Segmenter::next_any_fpdu`] encodes (the QN and the Invalidate
    /// STag or reserved word are those [`normalize`] set, as [`DdpHeader::encode`] writes
    /// them).
    fn next_data_fpdu(&mut self) -> Option<FpduPlan> {
        let (n, last) = self.cut()?;
        let mut hdr = [0u8; HDR_BUF];
        let dl = self.header(last).encode(hdr.get_mut(LEN_LEN..)?)?;
        let ulpdu = u16::try_from(dl.saturating_add(usize::try_from(n).ok()?)).ok()?;
        if !put(&mut hdr, 0, &ulpdu.to_be_bytes()) {
            return None;
        }
        self.planned(FpduPlan {
            hdr,
            hdr_len: LEN_LEN.saturating_add(dl),
            payload_off: self.sent,
            payload_len: n,
            ulpdu_len: ulpdu,
            last,
        })
    }

    /// [`Segmenter::next_fpdu`] of any message: DDP header and fixed RDMAP header encoded.
    ///
    /// Out of line: inlined into [`Segmenter::next_fpdu`], it costs the data path registers
    /// saved and a stack copy of the header on every FPDU.
    #[inline(never)]
    fn next_any_fpdu(&mut self) -> Option<FpduPlan> {
        let (n, last) = self.cut()?;
        let mut hdr = [0u8; HDR_BUF];
        let dl = self.header(last).encode(hdr.get_mut(LEN_LEN..)?)?;
        let bl = if self.msg.body.is_empty() {
            0
        } else {
            self.msg
                .body
                .encode(hdr.get_mut(LEN_LEN.saturating_add(dl)..)?)?
        };
        let hb = dl.saturating_add(bl);
        let ulpdu = u16::try_from(hb.saturating_add(usize::try_from(n).ok()?)).ok()?;
        crate::wire::put(&mut hdr, 0, &ulpdu.to_be_bytes());
        self.planned(FpduPlan {
            hdr,
            hdr_len: LEN_LEN.saturating_add(hb),
            payload_off: self.sent,
            payload_len: n,
            ulpdu_len: ulpdu,
            last,
        })
    }
}

/// Encodes `msg` as one whole FPDU at the start of `out`, when it fits in one at `mulpdu`:
/// the header, the `msg.payload_len` payload bytes that `payload` writes into the slice it
/// is given, the pad, and the CRC (when `crc_on`) computed over the contiguous bytes.
/// Returns the FPDU's length.
///
/// The bytes are those [`Segmenter`] plans for a message of one FPDU, followed by the payload
/// and the trailer: a small message is so built in one pass over one buffer, without a
/// segmenter. Errors as [`Segmenter::new`], [`TxError::NotWhole`] if the message needs more
/// than one FPDU or `out` is too short, [`TxError::Payload`] if `payload` returns `false`.
pub fn whole_fpdu<C: Crc32c>(
    c: &C,
    crc_on: bool,
    msg: TxMessage,
    mulpdu: u16,
    out: &mut [u8],
    payload: impl FnOnce(&mut [u8]) -> bool,
) -> Result<usize, TxError> {
    let mut msg = msg;
    let max = normalize(&mut msg, mulpdu)?;
    if msg.payload_len > max {
        return Err(TxError::NotWhole);
    }
    let h = DdpHeader {
        opcode: msg.opcode,
        last: true,
        placement: msg.placement,
    };
    let short = TxError::NotWhole;
    let dl = h
        .encode(out.get_mut(LEN_LEN..).ok_or(short)?)
        .ok_or(short)?;
    let bl = if msg.body.is_empty() {
        0
    } else {
        let at = LEN_LEN.saturating_add(dl);
        msg.body
            .encode(out.get_mut(at..).ok_or(short)?)
            .ok_or(short)?
    };
    let hl = LEN_LEN.saturating_add(dl).saturating_add(bl);
    let n = usize::try_from(msg.payload_len).map_err(|_| short)?;
    let ulpdu = dl.saturating_add(bl).saturating_add(n);
    let ulpdu16 = u16::try_from(ulpdu).map_err(|_| short)?;
    let end = hl.checked_add(n).ok_or(short)?;
    let tl = pad_len(ulpdu).saturating_add(CRC_LEN);
    let total = end.checked_add(tl).ok_or(short)?;
    let o = out.get_mut(..total).ok_or(short)?;
    crate::wire::put(o, 0, &ulpdu16.to_be_bytes());
    if !payload(o.get_mut(hl..end).ok_or(short)?) {
        return Err(TxError::Payload);
    }
    let crc = crc_on.then(|| c.update(CRC_INIT, o.get(..end).unwrap_or(&[])));
    let (t, _) = trailer(c, crc, ulpdu);
    if let (Some(d), Some(s)) = (o.get_mut(end..total), t.get(..tl)) {
        d.copy_from_slice(s);
    }
    Ok(total)
}

/// [`whole_fpdu`] at the largest MULPDU into a fixed-size buffer, with the header of a Write
/// or a Send variant (no fixed RDMAP header: the messages of a latency-bound exchange)
/// written field by field and the pad and CRC in one pass; any other message takes
/// [`whole_fpdu`]. The result (bytes and errors) is that of
/// `whole_fpdu(c, crc_on, msg, u16::MAX, out, payload)`. Every byte of `out[..total]` is
/// written (if `payload` fills its slice), so `out` need not be cleared between messages.
pub fn quick_fpdu<C: Crc32c, const N: usize>(
    c: &C,
    crc_on: bool,
    msg: TxMessage,
    out: &mut [u8; N],
    payload: impl FnOnce(&mut [u8]) -> bool,
) -> Result<usize, TxError> {
    let n = msg.payload_len;
    let c1 = RDMAP_VERSION | (msg.opcode as u8 & OPCODE_MASK5);
    let mut h = [0u8; LEN_LEN + UNTAGGED_HDR_LEN];
    let ok;
    let hl = match (msg.opcode, msg.placement, msg.body) {
        (Opcode::Write, Placement::Tagged { stag, to }, Body::None) => {
            to.checked_add(u64::from(n)).ok_or(TxError::Wrap)?;
            ok = put(&mut h, 2, &[DDP_T | DDP_L | DDP_VERSION, c1])
                && put(&mut h, 4, &stag.to_be_bytes())
                && put(&mut h, 8, &to.to_be_bytes());
            LEN_LEN + TAGGED_HDR_LEN
        }
        (
            Opcode::Send | Opcode::SendInv | Opcode::SendSe | Opcode::SendSeInv,
            Placement::Untagged {
                inv_stag, msn, mo, ..
            },
            Body::None,
        ) => {
            mo.checked_add(n).ok_or(TxError::Wrap)?;
            let inv = msg.opcode.untagged_word(inv_stag);
            ok = put(&mut h, 2, &[DDP_L | DDP_VERSION, c1])
                && put(&mut h, 4, &inv.to_be_bytes())
                && put(&mut h, 8, &QN_SEND.to_be_bytes())
                && put(&mut h, 12, &msn.to_be_bytes())
                && put(&mut h, 16, &mo.to_be_bytes());
            LEN_LEN + UNTAGGED_HDR_LEN
        }
        _ => return whole_fpdu(c, crc_on, msg, u16::MAX, out, payload),
    };
    let short = TxError::NotWhole;
    let n = usize::try_from(n).map_err(|_| short)?;
    let ulpdu = hl.saturating_sub(LEN_LEN).saturating_add(n);
    let ulpdu16 = u16::try_from(ulpdu).map_err(|_| short)?;
    // No saturation: `ulpdu` fits 16 bits.
    let end = LEN_LEN.saturating_add(ulpdu);
    let padded = end.saturating_add(pad_len(ulpdu));
    let total = padded.saturating_add(CRC_LEN);
    let o = out.get_mut(..total).ok_or(short)?;
    let head = h.get_mut(..hl).ok_or(short)?;
    if !ok || !put(head, 0, &ulpdu16.to_be_bytes()) || !put(o, 0, head) {
        return Err(short);
    }
    if !payload(o.get_mut(hl..end).ok_or(short)?) {
        return Err(TxError::Payload);
    }
    if let Some(p) = o.get_mut(end..padded) {
        p.fill(0);
    }
    let crc = if crc_on {
        crc_to_wire(c.update(CRC_INIT, o.get(..padded).unwrap_or(&[])))
    } else {
        [0; CRC_LEN]
    };
    if !put(o, padded, &crc) {
        return Err(short);
    }
    Ok(total)
}

/// Checks `msg` for a MULPDU of `mulpdu` bytes, sets the fields the opcode fixes (the QN
/// of an untagged message, a zero Invalidate STag unless the opcode carries one) and returns
/// the largest payload per FPDU.
fn normalize(msg: &mut TxMessage, mulpdu: u16) -> Result<u32, TxError> {
    let op = msg.opcode;
    let len = msg.payload_len;
    match (&mut msg.placement, op.queue()) {
        (Placement::Tagged { to, .. }, None) => {
            to.checked_add(u64::from(len)).ok_or(TxError::Wrap)?;
        }
        (
            Placement::Untagged {
                qn, mo, inv_stag, ..
            },
            Some(q),
        ) => {
            *qn = q;
            *inv_stag = op.untagged_word(*inv_stag);
            mo.checked_add(len).ok_or(TxError::Wrap)?;
        }
        _ => return Err(TxError::PlacementMismatch),
    }
    if !msg.body.matches(op) {
        return Err(TxError::BodyMismatch);
    }
    if !op.has_payload() && len != 0 {
        return Err(TxError::UnexpectedPayload);
    }
    max_payload(msg, mulpdu)
}

/// The largest payload per FPDU of `msg` at `mulpdu`.
fn max_payload(msg: &TxMessage, mulpdu: u16) -> Result<u32, TxError> {
    let op = msg.opcode;
    let ddp = if op.is_tagged() {
        TAGGED_HDR_LEN
    } else {
        UNTAGGED_HDR_LEN
    };
    let hl = ddp.saturating_add(msg.body.len());
    let max_payload = usize::from(mulpdu)
        .checked_sub(hl)
        .ok_or(TxError::MulpduTooSmall)?;
    let max_payload = u32::try_from(max_payload).map_err(|_| TxError::MulpduTooSmall)?;
    if msg.payload_len > 0 && max_payload == 0 {
        return Err(TxError::MulpduTooSmall);
    }
    if op == Opcode::VerifyRequest && msg.payload_len > max_payload {
        return Err(TxError::MulpduTooSmall);
    }
    Ok(max_payload)
}

/// Responses built back to back in one buffer of `N` bytes (at most `M` of
/// them), handed to the transport together, and what of them is still to
/// hand over: each response's IRD credit may be freed only once its last
/// byte was handed over (T-05), however the transport cuts the bytes.
///
/// The sender builds each response into [`RespBurst::slot`] and adds it with
/// [`RespBurst::commit`], sends [`RespBurst::unsent`] and reports what the
/// transport took with [`RespBurst::sent`], which returns how many responses
/// that finished: the credits to free. What is not taken stays, for another
/// sender to go on with the same way (the rest is a valid byte stream: it
/// starts where the last call stopped). No response is added once sending
/// began. Nothing is allocated.
#[derive(Clone, Copy, Debug)]
pub struct RespBurst<const N: usize, const M: usize> {
    buf: [u8; N],
    /// The end of each response in `buf`; the first `count` are in use.
    ends: [usize; M],
    count: usize,
    /// Bytes built.
    len: usize,
    /// Bytes handed over.
    at: usize,
    /// Responses whose last byte was handed over.
    finished: usize,
}

impl<const N: usize, const M: usize> Default for RespBurst<N, M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const M: usize> RespBurst<N, M> {
    /// An empty burst.
    pub const fn new() -> Self {
        RespBurst {
            buf: [0; N],
            ends: [0; M],
            count: 0,
            len: 0,
            at: 0,
            finished: 0,
        }
    }

    /// Drops every response (what was not handed over is not sent).
    pub fn clear(&mut self) {
        self.count = 0;
        self.len = 0;
        self.at = 0;
        self.finished = 0;
    }

    /// Responses built.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bytes built.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is built.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every byte built was handed over (so every credit is free).
    pub fn is_done(&self) -> bool {
        self.at >= self.len
    }

    /// The room for the next response, `K` bytes after the responses built:
    /// `None` if `M` responses are built, fewer than `K` bytes are left, or
    /// sending began.
    pub fn slot<const K: usize>(&mut self) -> Option<&mut [u8; K]> {
        if self.count >= M || self.at > 0 {
            return None;
        }
        let end = self.len.checked_add(K)?;
        self.buf.get_mut(self.len..end)?.try_into().ok()
    }

    /// Adds the response of `n` bytes just built into [`RespBurst::slot`].
    /// Returns false (and adds nothing) if it does not fit or a slot could
    /// not be had.
    pub fn commit(&mut self, n: usize) -> bool {
        let Some(end) = self.len.checked_add(n) else {
            return false;
        };
        if n == 0 || end > N || self.at > 0 {
            return false;
        }
        let Some(e) = self.ends.get_mut(self.count) else {
            return false;
        };
        *e = end;
        self.count = self.count.saturating_add(1);
        self.len = end;
        true
    }

    /// The bytes still to hand over.
    pub fn unsent(&self) -> &[u8] {
        self.buf.get(self.at..self.len).unwrap_or(&[])
    }

    /// The transport took the next `n` bytes of [`RespBurst::unsent`] (at
    /// most all of them). Returns how many responses ended within them:
    /// their last bytes are now handed over, and so many credits are free.
    pub fn sent(&mut self, n: usize) -> usize {
        self.at = self.at.saturating_add(n).min(self.len);
        let mut k = 0usize;
        while let Some(&end) = self
            .ends
            .get(..self.count)
            .and_then(|e| e.get(self.finished))
        {
            if end > self.at {
                break;
            }
            self.finished = self.finished.saturating_add(1);
            k = k.saturating_add(1);
        }
        k
    }

    /// Responses whose last byte is not yet handed over (credits still
    /// held).
    pub fn pending(&self) -> usize {
        self.count.saturating_sub(self.finished)
    }
}

/// The RTR message an initiator sends in peer-to-peer mode (MPA-17).
///
/// - Send: zero-length Send on QN 0 (the caller passes MSN 1, T-13);
/// - Write: zero-length RDMA Write to STag 1, TO 0 (as `siw`: some hardware
///   treats STag 0 specially);
/// - Read: Read Request of size 0 on QN 1 (MSN 1) for sink and source STag 1.
pub fn rtr_message(kind: crate::wire::mpa::RtrKind, msn: u32) -> TxMessage {
    use crate::wire::hdr::ReadRequest;
    use crate::wire::mpa::RtrKind;
    let untagged = Placement::Untagged {
        inv_stag: 0,
        qn: 0,
        msn,
        mo: 0,
    };
    match kind {
        RtrKind::Send => TxMessage {
            opcode: Opcode::Send,
            placement: untagged,
            body: Body::None,
            payload_len: 0,
        },
        RtrKind::Write => TxMessage {
            opcode: Opcode::Write,
            placement: Placement::Tagged { stag: 1, to: 0 },
            body: Body::None,
            payload_len: 0,
        },
        RtrKind::Read => TxMessage {
            opcode: Opcode::ReadRequest,
            placement: untagged,
            body: Body::ReadRequest(ReadRequest {
                sink_stag: 1,
                sink_to: 0,
                size: 0,
                src_stag: 1,
                src_to: 0,
            }),
            payload_len: 0,
        },
    }
}

/// One piece of a scatter list that a payload range covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SgPiece {
    /// Index of the scatter element.
    pub index: usize,
    /// Offset within the element.
    pub offset: u64,
    /// Length of the piece.
    pub len: u64,
}

/// Iterator mapping a payload range onto a scatter list given by element
/// lengths. Bounded by the number of elements; never allocates.
#[derive(Clone, Debug)]
pub struct SgPieces<'a> {
    lens: &'a [u64],
    index: usize,
    skip: u64,
    left: u64,
}

/// Maps `[off, off + len)` of a message onto the scatter list `lens`.
pub fn sg_pieces(lens: &[u64], off: u64, len: u64) -> SgPieces<'_> {
    SgPieces {
        lens,
        index: 0,
        skip: off,
        left: len,
    }
}

impl Iterator for SgPieces<'_> {
    type Item = SgPiece;

    fn next(&mut self) -> Option<SgPiece> {
        while self.left > 0 {
            let l = *self.lens.get(self.index)?;
            let i = self.index;
            self.index = self.index.saturating_add(1);
            if self.skip >= l {
                self.skip = self.skip.saturating_sub(l);
                continue;
            }
            let offset = self.skip;
            let n = l.saturating_sub(offset).min(self.left);
            self.skip = 0;
            self.left = self.left.saturating_sub(n);
            return Some(SgPiece {
                index: i,
                offset,
                len: n,
            });
        }
        None
    }
}
