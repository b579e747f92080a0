// SPDX-License-Identifier: GPL-2.0

//! Kernel TCP sockets.
//!
//! [`TcpSocket`] owns a kernel `struct socket` of type `SOCK_STREAM`/`IPPROTO_TCP`. It can bind,
//! listen, accept and connect without blocking, send with a copy (`kvec`s or page fragments) or
//! by splicing pages (`MSG_SPLICE_PAGES`), receive through `tcp_read_sock()` into a closure, and
//! set the options an in-kernel transport needs.
//!
//! Event-driven users attach an [`Arc<T>`](crate::sync::Arc) where `T: `[`Callbacks`] (see
//! [`TcpSocket::attach`]). The socket's `sk_data_ready`, `sk_write_space`, `sk_state_change`
//! and `sk_error_report` then call into `T` in the context the networking core runs them in
//! (usually softirq), with the socket's `sk_callback_lock` held for reading.
//! [`TcpSocket::detach`] takes that lock for writing, so when it returns no callback into `T` is
//! running and none will run again.
//!
//! The module is split by concern:
//!
//! - `socket`: [`TcpSocket`], its creation, addresses, options and lifetime;
//! - `callbacks`: [`Callbacks`], the socket callbacks and the ownership of `sk_user_data`;
//! - `send`: [`SocketGuard`] (the locked socket) and the page fragments it sends;
//! - `zerocopy`: sends by reference that report when TCP let go of the pages ([`ZcNotif`]);
//! - receiving: [`SocketGuard::read_sock`] and [`DataReadySock::read_sock`] hand the received
//!   bytes to a closure as [`SkbData`](super::skb::SkbData) (see [`super::skb`]).
//!
//! # Contexts
//!
//! Every method documents its context. "May sleep" methods need process context without
//! spinlocks held; they take the socket lock (`lock_sock()`). Callbacks run in atomic context and
//! get only the non-sleeping operations ([`CallbackSock`], [`DataReadySock`]).
//!
//! C headers: [`include/linux/net.h`](srctree/include/linux/net.h),
//! [`include/net/sock.h`](srctree/include/net/sock.h),
//! [`include/net/tcp.h`](srctree/include/net/tcp.h).

use crate::{
    bindings,
    net::skb::SkbData,
    prelude::*, //
};
use core::ptr::{
    self,
    NonNull, //
};

mod callbacks;
mod send;
mod socket;
#[cfg(CONFIG_KUNIT = "y")]
mod tests;
mod zerocopy;

pub use callbacks::{
    CallbackSock,
    Callbacks,
    DataReadySock, //
};
pub use send::{
    AppendPage,
    SocketGuard,
    StagingPage,
    MAX_SEND_BUFS,
    MAX_SEND_PAGES, //
};
pub use socket::{
    SockLockClass,
    TcpSocket, //
};
pub use zerocopy::{
    ZcNotif,
    ZcOwner, //
};

/// A TCP state (`sk->sk_state`, one of `TCP_*` in `include/net/tcp_states.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpState(u8);

impl TcpState {
    /// `TCP_ESTABLISHED`.
    pub const ESTABLISHED: Self = Self(bindings::TCP_ESTABLISHED as u8);
    /// `TCP_SYN_SENT`.
    pub const SYN_SENT: Self = Self(bindings::TCP_SYN_SENT as u8);
    /// `TCP_SYN_RECV`.
    pub const SYN_RECV: Self = Self(bindings::TCP_SYN_RECV as u8);
    /// `TCP_FIN_WAIT1`.
    pub const FIN_WAIT1: Self = Self(bindings::TCP_FIN_WAIT1 as u8);
    /// `TCP_FIN_WAIT2`.
    pub const FIN_WAIT2: Self = Self(bindings::TCP_FIN_WAIT2 as u8);
    /// `TCP_TIME_WAIT`.
    pub const TIME_WAIT: Self = Self(bindings::TCP_TIME_WAIT as u8);
    /// `TCP_CLOSE`.
    pub const CLOSE: Self = Self(bindings::TCP_CLOSE as u8);
    /// `TCP_CLOSE_WAIT`.
    pub const CLOSE_WAIT: Self = Self(bindings::TCP_CLOSE_WAIT as u8);
    /// `TCP_LAST_ACK`.
    pub const LAST_ACK: Self = Self(bindings::TCP_LAST_ACK as u8);
    /// `TCP_LISTEN`.
    pub const LISTEN: Self = Self(bindings::TCP_LISTEN as u8);
    /// `TCP_CLOSING`.
    pub const CLOSING: Self = Self(bindings::TCP_CLOSING as u8);

    /// Returns the raw `TCP_*` value.
    pub fn as_raw(self) -> u8 {
        self.0
    }
}

/// How to shut a connection down (`enum sock_shutdown_cmd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// No more receives (`SHUT_RD`).
    Read,
    /// No more sends: send a FIN (`SHUT_WR`).
    Write,
    /// Both (`SHUT_RDWR`).
    Both,
}

/// The result of a non-blocking [`TcpSocket::connect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Connect {
    /// The connection is established.
    Done,
    /// The handshake is under way; `sk_state_change` reports its end (the state becomes
    /// [`TcpState::ESTABLISHED`], or [`TcpState::CLOSE`] with a socket error).
    InProgress,
}

struct ActorState<F> {
    f: F,
    err: Option<Error>,
}

/// The `sk_read_actor_t` passed to `tcp_read_sock()`.
///
/// # Safety
///
/// `desc->arg.data` points to an `ActorState<F>` that is not otherwise accessed during the call,
/// and `skb` holds at least `offset + len` bytes.
unsafe extern "C" fn read_actor<F>(
    desc: *mut bindings::read_descriptor_t,
    skb: *mut bindings::sk_buff,
    offset: c_uint,
    len: usize,
) -> c_int
where
    F: FnMut(&SkbData<'_>) -> Result<usize>,
{
    // SAFETY: Per the function's safety requirements.
    let state = unsafe { &mut *(*desc).arg.data.cast::<ActorState<F>>() };
    let Some(skb) = NonNull::new(skb) else {
        return 0;
    };
    // SAFETY: `tcp_read_sock()` passes a live skb with `offset + len <= skb->len`, which it
    // keeps until the actor returns.
    let data = unsafe { SkbData::from_raw(skb, offset, len) };
    match (state.f)(&data) {
        Ok(n) => c_int::try_from(n.min(len)).unwrap_or(c_int::MAX),
        Err(e) => {
            state.err = Some(e);
            // SAFETY: `desc` is valid (see above).
            unsafe { (*desc).count = 0 };
            0
        }
    }
}

/// Reads from `sk`'s receive queue with `tcp_read_sock()`.
///
/// `actor` is called for each run of contiguous bytes, in order. It returns how many bytes it
/// consumed: TCP calls it again for the rest of the skb if it consumed fewer, and stops if it
/// consumed none (`Ok(0)`) or returned an error. Consumed bytes are removed from the queue and
/// acknowledged. Returns the number of bytes consumed, or the actor's error if it consumed none.
///
/// # Safety
///
/// `sk` is a valid, non-listening TCP socket locked by the caller (`lock_sock()` or, in
/// `sk_data_ready`, `bh_lock_sock()`).
unsafe fn read_sock<F>(sk: NonNull<bindings::sock>, actor: F) -> Result<usize>
where
    F: FnMut(&SkbData<'_>) -> Result<usize>,
{
    let mut state = ActorState {
        f: actor,
        err: None,
    };
    let mut desc = bindings::read_descriptor_t {
        count: 1,
        ..Default::default()
    };
    desc.arg.data = ptr::from_mut(&mut state).cast();
    // SAFETY: `sk` is a locked TCP socket (caller); `desc.arg.data` points to `state`, which
    // lives across the call and is only accessed by `read_actor::<F>`.
    let ret = unsafe { bindings::tcp_read_sock(sk.as_ptr(), &mut desc, Some(read_actor::<F>)) };
    match (ret, state.err) {
        (n, _) if n > 0 => Ok(n as usize),
        (_, Some(e)) => Err(e),
        (0, None) => Ok(0),
        (n, None) => Err(Error::from_errno(n)),
    }
}

fn sk_state(sk: NonNull<bindings::sock>) -> TcpState {
    // SAFETY: `sk` is valid (callers' invariants); the helper reads with `READ_ONCE`.
    TcpState(unsafe { bindings::sk_state_read(sk.as_ptr()) })
}

fn sk_err(sk: NonNull<bindings::sock>) -> i32 {
    // SAFETY: `sk` is valid; the helper reads with `READ_ONCE`.
    -unsafe { bindings::sk_err_read(sk.as_ptr()) }
}
