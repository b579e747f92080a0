// SPDX-License-Identifier: GPL-2.0

//! DDP and RDMAP headers (RFC 5040, RFC 5041, RFC 7306, RDMA commit draft).
//!
//! ```text
//! byte 0 (DDP):   T=0x80 L=0x40 Rsvd=0x3C DV=0x03 (DV = 01b)
//! byte 1 (RDMAP): RV=0xC0 (01b) Rsv=0x30 Opcode=0x0F
//!                 with the commit extensions: Rsv=0x20 Opcode=0x1F (X-07)
//! tagged:   ctrl(2) STag(4) TO(8)                        = 14 bytes
//! untagged: ctrl(2) InvStag/Rsvd(4) QN(4) MSN(4) MO(4)   = 18 bytes
//! ```
//!
//! The Invalidate STag sits right after the control bytes (X-05).

use crate::wire::{be32, be64, put};

/// DDP control: Tagged flag.
pub const DDP_T: u8 = 0x80;
/// DDP control: Last flag.
pub const DDP_L: u8 = 0x40;
/// DDP control: reserved bits (zero on send, not checked).
pub const DDP_RSVD: u8 = 0x3C;
/// DDP control: version mask.
pub const DDP_DV_MASK: u8 = 0x03;
/// The only DDP version.
pub const DDP_VERSION: u8 = 0x01;
/// RDMAP control: version mask.
pub const RDMAP_RV_MASK: u8 = 0xC0;
/// The only RDMAP version (01b), in place.
pub const RDMAP_VERSION: u8 = 0x40;
/// RDMAP control: 4-bit opcode mask (RFC 5040, RFC 7306).
pub const OPCODE_MASK4: u8 = 0x0F;
/// RDMAP control: 5-bit opcode mask (commit draft, X-07).
pub const OPCODE_MASK5: u8 = 0x1F;

/// Tagged DDP header length (control included).
pub const TAGGED_HDR_LEN: usize = 14;
/// Untagged DDP header length (control included).
pub const UNTAGGED_HDR_LEN: usize = 18;
/// RDMA Read Request header length.
pub const READ_REQ_LEN: usize = 28;
/// Atomic Request header length (RFC 7306 Fig. 4).
pub const ATOMIC_REQ_LEN: usize = 52;
/// Atomic Response header length (RFC 7306 Fig. 6; X-13).
pub const ATOMIC_RESP_LEN: usize = 12;
/// Immediate Data length.
pub const IMM_LEN: usize = 8;
/// RDMA Flush Request header length.
pub const FLUSH_REQ_LEN: usize = 20;
/// RDMA Verify Request fixed header length (a hash may follow).
pub const VERIFY_REQ_LEN: usize = 16;
/// Atomic Write Request header length.
pub const ATOMIC_WRITE_REQ_LEN: usize = 24;

/// Queue number of Sends and Immediate Data.
pub const QN_SEND: u32 = 0;
/// Queue number of Read, Atomic, Flush, Verify and Atomic Write Requests.
pub const QN_READ_REQ: u32 = 1;
/// Queue number of Terminate.
pub const QN_TERMINATE: u32 = 2;
/// Queue number of Atomic, Flush, Verify and Atomic Write Responses.
pub const QN_RESPONSE: u32 = 3;
/// Number of queue numbers in use.
pub const NUM_QN: usize = 4;

/// Atomic operation code: FetchAdd.
pub const AOP_FETCH_ADD: u8 = 0x0;
/// Atomic operation code 0x1 is registered as reserved.
pub const AOP_RESERVED: u8 = 0x1;
/// Atomic operation code: CmpSwap.
pub const AOP_CMP_SWAP: u8 = 0x2;

/// The value rsiw puts into the reserved 32-bit field of a Send or Send with
/// Solicited Event (the Invalidate STag slot of the Send variants that
/// invalidate) when an Immediate Data message of the same work request
/// follows it: a verbs Send with Immediate. RFC 5040 has the field set to
/// zero on send and ignored on receive, so a peer that does not know the
/// mark delivers the Send and the Immediate Data as two messages (RFC 7306
/// §6.3); an rsiw receiver completes them as one receive with the
/// immediate data (spec-map D-01, T-11).
pub const SEND_IMM_FOLLOWS: u32 = 0x7273_494d;

/// Flush flag: to persistence.
pub const FLUSH_P: u32 = 0x01;
/// Flush flag: to global visibility ("V" or "G", X-25).
pub const FLUSH_V: u32 = 0x02;
/// Flush flag: entire region (Length and TO ignored).
pub const FLUSH_R: u32 = 0x04;

/// RDMAP opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Opcode {
    /// RDMA Write.
    Write = 0x0,
    /// RDMA Read Request.
    ReadRequest = 0x1,
    /// RDMA Read Response.
    ReadResponse = 0x2,
    /// Send.
    Send = 0x3,
    /// Send with Invalidate.
    SendInv = 0x4,
    /// Send with Solicited Event.
    SendSe = 0x5,
    /// Send with Solicited Event and Invalidate.
    SendSeInv = 0x6,
    /// Terminate.
    Terminate = 0x7,
    /// Immediate Data (RFC 7306).
    ImmData = 0x8,
    /// Immediate Data with Solicited Event (RFC 7306).
    ImmDataSe = 0x9,
    /// Atomic Request (RFC 7306).
    AtomicRequest = 0xA,
    /// Atomic Response (RFC 7306).
    AtomicResponse = 0xB,
    /// RDMA Flush Request (commit draft).
    FlushRequest = 0xC,
    /// RDMA Flush Response (commit draft).
    FlushResponse = 0xD,
    /// RDMA Verify Request (commit draft).
    VerifyRequest = 0xE,
    /// RDMA Verify Response (commit draft).
    VerifyResponse = 0xF,
    /// Atomic Write Request (commit draft, 5-bit opcode).
    AtomicWriteRequest = 0x10,
    /// Atomic Write Response (commit draft, 5-bit opcode; X-08).
    AtomicWriteResponse = 0x11,
}

/// Which protocol extension defines an opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extension {
    /// RFC 5040.
    Base,
    /// RFC 7306 (atomics and immediate data).
    Rfc7306,
    /// The RDMA commit draft (Flush, Verify, Atomic Write).
    Commit,
}

impl Opcode {
    /// All opcodes, in numeric order.
    pub const ALL: [Opcode; 18] = [
        Opcode::Write,
        Opcode::ReadRequest,
        Opcode::ReadResponse,
        Opcode::Send,
        Opcode::SendInv,
        Opcode::SendSe,
        Opcode::SendSeInv,
        Opcode::Terminate,
        Opcode::ImmData,
        Opcode::ImmDataSe,
        Opcode::AtomicRequest,
        Opcode::AtomicResponse,
        Opcode::FlushRequest,
        Opcode::FlushResponse,
        Opcode::VerifyRequest,
        Opcode::VerifyResponse,
        Opcode::AtomicWriteRequest,
        Opcode::AtomicWriteResponse,
    ];

    /// Maps a raw (already masked) opcode value.
    pub fn from_u8(v: u8) -> Option<Opcode> {
        Self::ALL.get(usize::from(v)).copied()
    }

    /// The extension that defines this opcode.
    pub fn extension(self) -> Extension {
        match self as u8 {
            0x0..=0x7 => Extension::Base,
            0x8..=0xB => Extension::Rfc7306,
            _ => Extension::Commit,
        }
    }

    /// True for the tagged messages (Write and Read Response).
    pub fn is_tagged(self) -> bool {
        matches!(self, Opcode::Write | Opcode::ReadResponse)
    }

    /// The queue number an untagged message uses (`None` if tagged).
    pub fn queue(self) -> Option<u32> {
        use Opcode::*;
        match self {
            Write | ReadResponse => None,
            Send | SendInv | SendSe | SendSeInv | ImmData | ImmDataSe => Some(QN_SEND),
            ReadRequest | AtomicRequest | FlushRequest | VerifyRequest | AtomicWriteRequest => {
                Some(QN_READ_REQ)
            }
            Terminate => Some(QN_TERMINATE),
            AtomicResponse | FlushResponse | VerifyResponse | AtomicWriteResponse => {
                Some(QN_RESPONSE)
            }
        }
    }

    /// True for the Send variants carrying an Invalidate STag.
    pub fn has_invalidate(self) -> bool {
        matches!(self, Opcode::SendInv | Opcode::SendSeInv)
    }

    /// The 32-bit field after the control bytes of an untagged header, as
    /// sent and as decoded: the Invalidate STag of the Send variants that
    /// invalidate, [`SEND_IMM_FOLLOWS`] for a Send or Send with Solicited
    /// Event that carries it, zero otherwise (reserved: zero on send, ignored
    /// on receive).
    pub fn untagged_word(self, inv_stag: u32) -> u32 {
        match self {
            Opcode::SendInv | Opcode::SendSeInv => inv_stag,
            Opcode::Send | Opcode::SendSe if inv_stag == SEND_IMM_FOLLOWS => inv_stag,
            _ => 0,
        }
    }

    /// True for the messages that ask for a solicited event.
    pub fn is_solicited(self) -> bool {
        matches!(self, Opcode::SendSe | Opcode::SendSeInv | Opcode::ImmDataSe)
    }

    /// Length of the fixed RDMAP header following the DDP header.
    ///
    /// For Terminate this is the fixed control word only.
    pub fn rdmap_hdr_len(self) -> usize {
        use Opcode::*;
        match self {
            ReadRequest => READ_REQ_LEN,
            AtomicRequest => ATOMIC_REQ_LEN,
            AtomicResponse => ATOMIC_RESP_LEN,
            ImmData | ImmDataSe => IMM_LEN,
            FlushRequest => FLUSH_REQ_LEN,
            VerifyRequest => VERIFY_REQ_LEN,
            AtomicWriteRequest => ATOMIC_WRITE_REQ_LEN,
            Terminate => crate::wire::term::TERM_CTRL_LEN,
            _ => 0,
        }
    }

    /// True if the message must be a single segment with exactly
    /// `rdmap_hdr_len()` bytes and no ULP payload.
    pub fn is_fixed_size(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            ReadRequest
                | AtomicRequest
                | AtomicResponse
                | ImmData
                | ImmDataSe
                | FlushRequest
                | FlushResponse
                | AtomicWriteRequest
                | AtomicWriteResponse
        )
    }

    /// True if the message carries payload bytes to place or pass up after
    /// its fixed header (Write, Read Response, Sends, Verify hash).
    pub fn has_payload(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Write
                | ReadResponse
                | Send
                | SendInv
                | SendSe
                | SendSeInv
                | VerifyRequest
                | VerifyResponse
        )
    }

    /// Length of the whole DDP+RDMAP header of a segment.
    pub fn header_len(self) -> usize {
        let ddp = if self.is_tagged() {
            TAGGED_HDR_LEN
        } else {
            UNTAGGED_HDR_LEN
        };
        ddp.saturating_add(self.rdmap_hdr_len())
    }
}

/// Where a segment's payload goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Tagged buffer model.
    Tagged {
        /// Steering Tag.
        stag: u32,
        /// Tagged Offset of the first payload byte.
        to: u64,
    },
    /// Untagged buffer model.
    Untagged {
        /// Invalidate STag (Send with Invalidate) or reserved.
        inv_stag: u32,
        /// Queue Number.
        qn: u32,
        /// Message Sequence Number.
        msn: u32,
        /// Message Offset.
        mo: u32,
    },
}

/// A decoded DDP + RDMAP control and placement header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DdpHeader {
    /// The opcode.
    pub opcode: Opcode,
    /// The L bit.
    pub last: bool,
    /// The placement fields.
    pub placement: Placement,
}

impl DdpHeader {
    /// Encodes into `out` (14 or 18 bytes); returns the length.
    #[inline(always)]
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let mut c0 = DDP_VERSION;
        if self.last {
            c0 |= DDP_L;
        }
        let c1 = RDMAP_VERSION | (self.opcode as u8 & OPCODE_MASK5);
        match self.placement {
            Placement::Tagged { stag, to } => {
                let ok = put(out, 0, &[c0 | DDP_T, c1])
                    && put(out, 2, &stag.to_be_bytes())
                    && put(out, 6, &to.to_be_bytes());
                ok.then_some(TAGGED_HDR_LEN)
            }
            Placement::Untagged {
                inv_stag,
                qn,
                msn,
                mo,
            } => {
                // Reserved (zero) unless the opcode carries an
                // Invalidate STag (RFC 5040 §4.3), or rsiw's mark of a
                // Send with Immediate.
                let inv = self.opcode.untagged_word(inv_stag);
                let ok = put(out, 0, &[c0, c1])
                    && put(out, 2, &inv.to_be_bytes())
                    && put(out, 6, &qn.to_be_bytes())
                    && put(out, 10, &msn.to_be_bytes())
                    && put(out, 14, &mo.to_be_bytes());
                ok.then_some(UNTAGGED_HDR_LEN)
            }
        }
    }
}

/// RDMA Read Request header (RFC 5040; field order confirmed with `siw`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadRequest {
    /// Data Sink STag.
    pub sink_stag: u32,
    /// Data Sink Tagged Offset.
    pub sink_to: u64,
    /// RDMA Read Message Size.
    pub size: u32,
    /// Data Source STag.
    pub src_stag: u32,
    /// Data Source Tagged Offset.
    pub src_to: u64,
}

impl ReadRequest {
    /// Encodes the 28 bytes.
    pub fn encode(&self) -> [u8; READ_REQ_LEN] {
        let mut b = [0u8; READ_REQ_LEN];
        let _ = put(&mut b, 0, &self.sink_stag.to_be_bytes())
            && put(&mut b, 4, &self.sink_to.to_be_bytes())
            && put(&mut b, 12, &self.size.to_be_bytes())
            && put(&mut b, 16, &self.src_stag.to_be_bytes())
            && put(&mut b, 20, &self.src_to.to_be_bytes());
        b
    }

    /// Decodes the 28 bytes.
    pub fn decode(b: &[u8; READ_REQ_LEN]) -> Self {
        ReadRequest {
            sink_stag: be32(b, 0).unwrap_or(0),
            sink_to: be64(b, 4).unwrap_or(0),
            size: be32(b, 12).unwrap_or(0),
            src_stag: be32(b, 16).unwrap_or(0),
            src_to: be64(b, 20).unwrap_or(0),
        }
    }
}

/// RFC 7306 Atomic Request header (52 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicRequest {
    /// Atomic operation code (4 bits; the 28 bits before it are reserved).
    pub aopcode: u8,
    /// Request Identifier.
    pub req_id: u32,
    /// Remote STag.
    pub stag: u32,
    /// Remote Tagged Offset.
    pub to: u64,
    /// Add Data or Swap Data.
    pub add_swap: u64,
    /// Add Mask or Swap Mask.
    pub add_swap_mask: u64,
    /// Compare Data.
    pub compare: u64,
    /// Compare Mask.
    pub compare_mask: u64,
}

impl AtomicRequest {
    /// A plain (unmasked) FetchAdd (ATOM-09, T-09).
    pub fn fetch_add(req_id: u32, stag: u32, to: u64, add: u64) -> Self {
        AtomicRequest {
            aopcode: AOP_FETCH_ADD,
            req_id,
            stag,
            to,
            add_swap: add,
            add_swap_mask: 0,
            compare: 0,
            compare_mask: !0,
        }
    }

    /// A plain (unmasked) CmpSwap (ATOM-09, T-09).
    pub fn cmp_swap(req_id: u32, stag: u32, to: u64, compare: u64, swap: u64) -> Self {
        AtomicRequest {
            aopcode: AOP_CMP_SWAP,
            req_id,
            stag,
            to,
            add_swap: swap,
            add_swap_mask: !0,
            compare,
            compare_mask: !0,
        }
    }

    /// Checks the AOpCode: only FetchAdd and CmpSwap exist (0x1 is
    /// reserved, X-15). Anything else is 0/2/06 (ATOM-03, D-02).
    pub fn check_aopcode(&self) -> Result<(), crate::wire::term::TermCode> {
        use crate::wire::term::{RdmapCode, TermCode};
        match self.aopcode {
            AOP_FETCH_ADD | AOP_CMP_SWAP => Ok(()),
            _ => Err(TermCode::operation(RdmapCode::UnexpectedOpcode)),
        }
    }

    /// Encodes the 52 bytes.
    pub fn encode(&self) -> [u8; ATOMIC_REQ_LEN] {
        let mut b = [0u8; ATOMIC_REQ_LEN];
        let _ = put(&mut b, 0, &u32::from(self.aopcode & 0xF).to_be_bytes())
            && put(&mut b, 4, &self.req_id.to_be_bytes())
            && put(&mut b, 8, &self.stag.to_be_bytes())
            && put(&mut b, 12, &self.to.to_be_bytes())
            && put(&mut b, 20, &self.add_swap.to_be_bytes())
            && put(&mut b, 28, &self.add_swap_mask.to_be_bytes())
            && put(&mut b, 36, &self.compare.to_be_bytes())
            && put(&mut b, 44, &self.compare_mask.to_be_bytes());
        b
    }

    /// Decodes the 52 bytes (the reserved bits are ignored).
    pub fn decode(b: &[u8; ATOMIC_REQ_LEN]) -> Self {
        AtomicRequest {
            aopcode: b[3] & 0xF,
            req_id: be32(b, 4).unwrap_or(0),
            stag: be32(b, 8).unwrap_or(0),
            to: be64(b, 12).unwrap_or(0),
            add_swap: be64(b, 20).unwrap_or(0),
            add_swap_mask: be64(b, 28).unwrap_or(0),
            compare: be64(b, 36).unwrap_or(0),
            compare_mask: be64(b, 44).unwrap_or(0),
        }
    }
}

/// RFC 7306 Atomic Response header (12 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicResponse {
    /// Original Request Identifier.
    pub req_id: u32,
    /// Original Remote Data Value.
    pub orig: u64,
}

impl AtomicResponse {
    /// Encodes the 12 bytes.
    pub fn encode(&self) -> [u8; ATOMIC_RESP_LEN] {
        let mut b = [0u8; ATOMIC_RESP_LEN];
        let _ =
            put(&mut b, 0, &self.req_id.to_be_bytes()) && put(&mut b, 4, &self.orig.to_be_bytes());
        b
    }

    /// Decodes the 12 bytes.
    pub fn decode(b: &[u8; ATOMIC_RESP_LEN]) -> Self {
        AtomicResponse {
            req_id: be32(b, 0).unwrap_or(0),
            orig: be64(b, 4).unwrap_or(0),
        }
    }
}

/// The Data Sink STag/Length/TO triple of the commit-draft requests.
///
/// Field order is STag, Length, TO (unlike the Read Request).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SinkRange {
    /// Data Sink STag.
    pub stag: u32,
    /// Data Sink Length.
    pub len: u32,
    /// Data Sink Tagged Offset.
    pub to: u64,
}

impl SinkRange {
    fn put(&self, b: &mut [u8]) -> bool {
        put(b, 0, &self.stag.to_be_bytes())
            && put(b, 4, &self.len.to_be_bytes())
            && put(b, 8, &self.to.to_be_bytes())
    }

    fn get(b: &[u8]) -> Self {
        SinkRange {
            stag: be32(b, 0).unwrap_or(0),
            len: be32(b, 4).unwrap_or(0),
            to: be64(b, 8).unwrap_or(0),
        }
    }
}

/// RDMA Flush Request header (20 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlushRequest {
    /// Target range.
    pub sink: SinkRange,
    /// Flags ([`FLUSH_P`], [`FLUSH_V`], [`FLUSH_R`]).
    pub flags: u32,
}

impl FlushRequest {
    /// Encodes the 20 bytes.
    pub fn encode(&self) -> [u8; FLUSH_REQ_LEN] {
        let mut b = [0u8; FLUSH_REQ_LEN];
        let _ = self.sink.put(&mut b) && put(&mut b, 16, &self.flags.to_be_bytes());
        b
    }

    /// Decodes the 20 bytes.
    pub fn decode(b: &[u8; FLUSH_REQ_LEN]) -> Self {
        FlushRequest {
            sink: SinkRange::get(b),
            flags: be32(b, 16).unwrap_or(0),
        }
    }

    /// Checks the flags (D-05): only P, V and R may be set, and at least
    /// one of P and V. Otherwise the responder sends 0/2/FF.
    pub fn check_flags(&self) -> Result<(), crate::wire::term::TermCode> {
        use crate::wire::term::{RdmapCode, TermCode};
        if self.flags & !(FLUSH_P | FLUSH_V | FLUSH_R) != 0 || self.flags & (FLUSH_P | FLUSH_V) == 0
        {
            return Err(TermCode::operation(RdmapCode::Unspecified));
        }
        Ok(())
    }

    /// True if the whole region is to be flushed (Length and TO ignored).
    pub fn whole_region(&self) -> bool {
        self.flags & FLUSH_R != 0
    }
}

/// RDMA Verify Request fixed header (16 bytes; the hash is payload).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VerifyRequest {
    /// Target range.
    pub sink: SinkRange,
}

impl VerifyRequest {
    /// Encodes the 16 bytes.
    pub fn encode(&self) -> [u8; VERIFY_REQ_LEN] {
        let mut b = [0u8; VERIFY_REQ_LEN];
        let _ = self.sink.put(&mut b);
        b
    }

    /// Decodes the 16 bytes.
    pub fn decode(b: &[u8; VERIFY_REQ_LEN]) -> Self {
        VerifyRequest {
            sink: SinkRange::get(b),
        }
    }
}

/// Atomic Write Request header (24 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AtomicWriteRequest {
    /// Target range; Length MUST be 8.
    pub sink: SinkRange,
    /// The 8 data bytes, an opaque memory image (D-06).
    pub data: [u8; 8],
}

impl AtomicWriteRequest {
    /// Checks the Data Sink Length, which MUST be 8; otherwise 0/2/07
    /// (AWRITE-01, D-02).
    pub fn check_len(&self) -> Result<(), crate::wire::term::TermCode> {
        use crate::wire::term::{RdmapCode, TermCode};
        if self.sink.len == 8 {
            Ok(())
        } else {
            Err(TermCode::operation(RdmapCode::CatastrophicStream))
        }
    }

    /// Encodes the 24 bytes.
    pub fn encode(&self) -> [u8; ATOMIC_WRITE_REQ_LEN] {
        let mut b = [0u8; ATOMIC_WRITE_REQ_LEN];
        let _ = self.sink.put(&mut b) && put(&mut b, 16, &self.data);
        b
    }

    /// Decodes the 24 bytes.
    pub fn decode(b: &[u8; ATOMIC_WRITE_REQ_LEN]) -> Self {
        let (_, d) = b.split_last_chunk::<8>().unwrap_or((&[], &[0; 8]));
        AtomicWriteRequest {
            sink: SinkRange::get(b),
            data: *d,
        }
    }
}

/// Immediate Data helpers (D-01).
pub mod imm {
    /// Packs a 32-bit verbs immediate (`__be32`, as given) into the 8-byte
    /// RFC 7306 field: bytes 0-3 are the value, bytes 4-7 are zero.
    pub fn from_verbs(imm_be: [u8; 4]) -> [u8; 8] {
        [imm_be[0], imm_be[1], imm_be[2], imm_be[3], 0, 0, 0, 0]
    }

    /// The 32-bit verbs immediate carried in the 8-byte field. Hardware
    /// peers place it differently: in bytes 0-3 (cxgb4, and rsiw's
    /// [`from_verbs`]) or zero-extended to 64 bits, in bytes 4-7 (irdma).
    /// Bytes 0-3 are taken unless they are zero and bytes 4-7 are not.
    pub fn to_verbs(b: [u8; 8]) -> [u8; 4] {
        let [a0, a1, a2, a3, b0, b1, b2, b3] = b;
        if [a0, a1, a2, a3] == [0; 4] {
            [b0, b1, b2, b3]
        } else {
            [a0, a1, a2, a3]
        }
    }
}

/// The fixed RDMAP header of a message, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// No fixed RDMAP header (Write, Read Response, Sends, responses
    /// without payload, Verify Response).
    None,
    /// RDMA Read Request.
    ReadRequest(ReadRequest),
    /// Atomic Request.
    AtomicRequest(AtomicRequest),
    /// Atomic Response.
    AtomicResponse(AtomicResponse),
    /// Immediate Data (8 bytes).
    Immediate([u8; IMM_LEN]),
    /// Flush Request.
    FlushRequest(FlushRequest),
    /// Verify Request (the hash is the payload).
    VerifyRequest(VerifyRequest),
    /// Atomic Write Request.
    AtomicWriteRequest(AtomicWriteRequest),
    /// Terminate.
    Terminate(crate::wire::term::Terminate),
}

impl Body {
    /// Encodes the fixed header into `out`; returns its length.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let n = match self {
            Body::None => 0,
            Body::ReadRequest(r) => put(out, 0, &r.encode()).then_some(READ_REQ_LEN)?,
            Body::AtomicRequest(r) => put(out, 0, &r.encode()).then_some(ATOMIC_REQ_LEN)?,
            Body::AtomicResponse(r) => put(out, 0, &r.encode()).then_some(ATOMIC_RESP_LEN)?,
            Body::Immediate(d) => put(out, 0, d).then_some(IMM_LEN)?,
            Body::FlushRequest(r) => put(out, 0, &r.encode()).then_some(FLUSH_REQ_LEN)?,
            Body::VerifyRequest(r) => put(out, 0, &r.encode()).then_some(VERIFY_REQ_LEN)?,
            Body::AtomicWriteRequest(r) => {
                put(out, 0, &r.encode()).then_some(ATOMIC_WRITE_REQ_LEN)?
            }
            Body::Terminate(t) => t.encode(out)?,
        };
        Some(n)
    }

    /// Encoded length.
    pub fn len(&self) -> usize {
        match self {
            Body::None => 0,
            Body::ReadRequest(_) => READ_REQ_LEN,
            Body::AtomicRequest(_) => ATOMIC_REQ_LEN,
            Body::AtomicResponse(_) => ATOMIC_RESP_LEN,
            Body::Immediate(_) => IMM_LEN,
            Body::FlushRequest(_) => FLUSH_REQ_LEN,
            Body::VerifyRequest(_) => VERIFY_REQ_LEN,
            Body::AtomicWriteRequest(_) => ATOMIC_WRITE_REQ_LEN,
            Body::Terminate(t) => t.len(),
        }
    }

    /// True if this is the fixed header kind that `op` carries.
    pub fn matches(&self, op: Opcode) -> bool {
        use Opcode::*;
        matches!(
            (op, self),
            (ReadRequest, Body::ReadRequest(_))
                | (AtomicRequest, Body::AtomicRequest(_))
                | (AtomicResponse, Body::AtomicResponse(_))
                | (ImmData | ImmDataSe, Body::Immediate(_))
                | (FlushRequest, Body::FlushRequest(_))
                | (VerifyRequest, Body::VerifyRequest(_))
                | (AtomicWriteRequest, Body::AtomicWriteRequest(_))
                | (Terminate, Body::Terminate(_))
                | (
                    Write
                        | ReadResponse
                        | Send
                        | SendInv
                        | SendSe
                        | SendSeInv
                        | FlushResponse
                        | VerifyResponse
                        | AtomicWriteResponse,
                    Body::None
                )
        )
    }

    /// True for [`Body::None`].
    pub fn is_empty(&self) -> bool {
        matches!(self, Body::None)
    }

    /// Decodes the fixed header of `op` from exactly `b`.
    pub fn decode(op: Opcode, b: &[u8]) -> Option<Body> {
        use Opcode::*;
        Some(match op {
            ReadRequest => Body::ReadRequest(self::ReadRequest::decode(b.try_into().ok()?)),
            AtomicRequest => Body::AtomicRequest(self::AtomicRequest::decode(b.try_into().ok()?)),
            AtomicResponse => {
                Body::AtomicResponse(self::AtomicResponse::decode(b.try_into().ok()?))
            }
            ImmData | ImmDataSe => Body::Immediate(b.try_into().ok()?),
            FlushRequest => Body::FlushRequest(self::FlushRequest::decode(b.try_into().ok()?)),
            VerifyRequest => Body::VerifyRequest(self::VerifyRequest::decode(b.try_into().ok()?)),
            AtomicWriteRequest => {
                Body::AtomicWriteRequest(self::AtomicWriteRequest::decode(b.try_into().ok()?))
            }
            Terminate => Body::Terminate(crate::wire::term::Terminate::decode(b)?),
            _ => {
                if !b.is_empty() {
                    return None;
                }
                Body::None
            }
        })
    }
}
