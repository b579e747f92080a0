// SPDX-License-Identifier: GPL-2.0

//! Outgoing messages: what the requester and the responder hand the TX engine.
//!
//! A message is a [`TxMessage`] of the wire core cut into FPDUs by a [`Segmenter`], the
//! source of its payload ([`Src`]) and what to do once its last byte is with TCP ([`Done`]).
//! [`Outgoing`] holds the one message being sent and the MSN counters; a role starts a message
//! in it in place (a message and its payload source are too large to move on every message).

use crate::{
    mem::Placement,
    path::Fail,
    wire::{
        stream::TxMsn,
        tx::{
            Segmenter,
            TxError,
            TxMessage, //
        },
    },
    wqe::{
        SqCompletion, //
        MAX_INLINE,
        NUM_SGE,
    },
};

/// Where a message's payload comes from.
pub(crate) enum Src {
    /// No payload.
    None,
    /// Inline data of the send queue element.
    Inline([u8; MAX_INLINE], usize),
    /// The SGEs of a send queue element, checked once when the message starts.
    Sgl([Option<Placement>; NUM_SGE], [u64; NUM_SGE], usize),
    /// Our memory, read by the peer (Read Response): STag and TO, checked per FPDU; the
    /// previous FPDU's check, whose region the next one is checked against again
    /// (`MemTable::check_again`).
    Remote(u32, u64, Option<Placement>),
}

/// What to do once the last FPDU of a message is handed to TCP.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Done {
    /// Nothing (a request, whose response completes it; the RTR; a Terminate).
    Nothing,
    /// Complete a send queue element (if signalled).
    Sq {
        /// Its completion.
        wr: SqCompletion,
        /// Whether it asked for one.
        signalled: bool,
    },
    /// A response went out: release its IRD credit.
    Response,
    /// The work request it carries is in the ORQ, posted behind requests that expect a
    /// response: it is done ([`crate::path::Path::local_done`]) and completes after them
    /// (T-01).
    InOrder,
}

impl Done {
    /// The send queue element a fatal error while sending the message completes, and how
    /// (one in the ORQ completes from there).
    pub(crate) fn failed(&self, status: u16) -> Option<SqCompletion> {
        match *self {
            Done::Sq { wr, .. } => Some(wr.failed(status)),
            _ => None,
        }
    }

    /// Whether the message's end completes a work request by itself (success is reported
    /// only when it was signalled).
    pub(crate) fn completes(&self) -> bool {
        matches!(
            self,
            Done::Sq {
                signalled: true,
                ..
            }
        )
    }
}

/// A message being sent.
pub(crate) struct TxMsg {
    /// Its FPDUs.
    pub(crate) seg: Segmenter,
    /// The MULPDU `seg` cuts at.
    pub(crate) mulpdu: u16,
    /// What its end does.
    pub(crate) done: Done,
}

/// A fatal error found by TX: complete `wr` (if any) so and fail the connection.
pub(crate) struct Fatal {
    /// The work request that failed, with its completion.
    pub(crate) wr: Option<SqCompletion>,
    /// How the connection fails.
    pub(crate) fail: Fail,
}

impl Fatal {
    /// A local error while sending `wr`: it completes so, and the peer gets a catastrophic
    /// Terminate.
    pub(crate) fn local(wr: Option<SqCompletion>) -> Self {
        Self {
            wr,
            fail: Fail::local(),
        }
    }

    /// The work request `wr` is bad: it completes so, and the connection fails without a
    /// Terminate (the peer did nothing wrong, and nothing is sent half).
    pub(crate) fn wr(wr: SqCompletion) -> Self {
        Self {
            wr: Some(wr),
            fail: Fail::Silent,
        }
    }
}

/// The message being sent, its payload source and the MSN counters.
pub(crate) struct Outgoing {
    msn: TxMsn,
    cur: Option<TxMsg>,
    /// Where the payload of `cur` comes from (`Src::None` without `cur`).
    src: Src,
}

impl Outgoing {
    /// Nothing being sent; every queue's first MSN is 1.
    pub(crate) fn new() -> Self {
        Self {
            msn: TxMsn::new(),
            cur: None,
            src: Src::None,
        }
    }

    /// Takes the MSN for the next message on queue `qn`.
    pub(crate) fn take_msn(&mut self, qn: u32) -> Option<u32> {
        self.msn.take(qn)
    }

    /// The MSN the next message on queue `qn` will carry.
    pub(crate) fn peek_msn(&self, qn: u32) -> Option<u32> {
        self.msn.peek(qn)
    }

    /// Whether a message is being sent.
    pub(crate) fn busy(&self) -> bool {
        self.cur.is_some()
    }

    /// The payload source of the message being started, to fill in place before
    /// [`Outgoing::start_filled`].
    pub(crate) fn src_mut(&mut self) -> &mut Src {
        &mut self.src
    }

    /// Starts `msg` with payload from `src`.
    pub(crate) fn start(
        &mut self,
        msg: TxMessage,
        src: Src,
        done: Done,
        mulpdu: u16,
    ) -> Result<(), TxError> {
        self.src = src;
        self.start_filled(msg, done, mulpdu)
    }

    /// Starts `msg` with the payload source filled in place. On error nothing is being sent.
    pub(crate) fn start_filled(
        &mut self,
        msg: TxMessage,
        done: Done,
        mulpdu: u16,
    ) -> Result<(), TxError> {
        // Segmented where it stays.
        let m = self.cur.insert(TxMsg {
            seg: Segmenter::idle(),
            mulpdu,
            done,
        });
        if let Err(e) = m.seg.reset(msg, mulpdu) {
            self.end();
            return Err(e);
        }
        Ok(())
    }

    /// The message being sent and its payload source.
    pub(crate) fn current(&mut self) -> Option<(&mut TxMsg, &mut Src)> {
        self.cur.as_mut().map(|m| (m, &mut self.src))
    }

    /// Changes what the end of the message being sent does.
    pub(crate) fn set_done(&mut self, done: Done) {
        if let Some(m) = self.cur.as_mut() {
            m.done = done;
        }
    }

    /// Ends the current message: drops its payload source (and the references to memory its
    /// placements hold) with it.
    pub(crate) fn end(&mut self) -> Option<TxMsg> {
        self.src = Src::None;
        self.cur.take()
    }
}
