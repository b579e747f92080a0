// SPDX-License-Identifier: GPL-2.0

//! Kernel TCP sockets.
//!
//! [`TcpSocket`] owns a kernel `struct socket` of type `SOCK_STREAM`/`IPPROTO_TCP`. It can bind,
//! listen, accept and connect without blocking, send with a copy (`kvec`s or page fragments) or
//! by splicing pages (`MSG_SPLICE_PAGES`), receive through `tcp_read_sock()` into a closure, and
//! set the options an in-kernel transport needs.
//!
//! Event-driven users attach an [`Arc<T>`] where `T: `[`Callbacks`] (see [`TcpSocket::attach`]).
//! The socket's `sk_data_ready`, `sk_write_space`, `sk_state_change` and `sk_error_report` then
//! call into `T` in the context the networking core runs them in (usually softirq), with the
//! socket's `sk_callback_lock` held for reading. [`TcpSocket::detach`] takes that lock for
//! writing, so when it returns no callback into `T` is running and none will run again.
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
    alloc::{
        flags::{
            __GFP_ZERO,
            GFP_KERNEL, //
        },
        KBox, //
    },
    bindings,
    error::{
        code::*,
        to_result,
        Error,
        Result,
        VTABLE_DEFAULT_ERROR, //
    },
    ffi::{
        c_int,
        c_uint,
        c_void, //
    },
    net::socket::{
        Family,
        SendFlags,
        SockAddrStorage, //
    },
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    str::CStr,
    sync::{
        Arc,
        ArcBorrow,
        LockClassKey, //
    },
    ThisModule, //
};
use core::{
    marker::PhantomData,
    net::SocketAddr,
    ptr::{
        self,
        NonNull, //
    },
};

/// The maximum number of buffers in one [`TcpSocket::send`] or [`SocketGuard::send`] call.
pub const MAX_SEND_BUFS: usize = 8;

/// The maximum number of page fragments in one [`SocketGuard::send_pages`] or
/// [`SocketGuard::send_pages_copy`] call.
pub const MAX_SEND_PAGES: usize = 32;

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

/// Lockdep classes for a socket's locks (see [`TcpSocket::reclassify`]).
///
/// A subsystem that uses TCP sockets underneath another lock (for example an RDMA provider, whose
/// socket locks are taken inside locks that network file systems also take around their own
/// sockets) gives its sockets their own classes, so that lockdep does not report false
/// circular dependencies between the two kinds of socket. The keys come from
/// [`static_lock_class!`](crate::sync::static_lock_class).
pub struct SockLockClass {
    /// Name of the `sk_lock.slock` class, e.g. `"slock-AF_INET-RDMA-SIW"`.
    pub slock_name: &'static CStr,
    /// Key of the `sk_lock.slock` class.
    pub slock_key: Pin<&'static LockClassKey>,
    /// Name of the `sk_lock` class, e.g. `"sk_lock-AF_INET-RDMA-SIW"`.
    pub name: &'static CStr,
    /// Key of the `sk_lock` class.
    pub key: Pin<&'static LockClassKey>,
}

/// A borrowed `struct sock`, as seen from a socket callback.
///
/// Only operations that do not sleep and do not need the socket lock are available.
///
/// # Invariants
///
/// `sk` points to a live `struct sock` for `'a`.
pub struct CallbackSock<'a> {
    sk: NonNull<bindings::sock>,
    _p: PhantomData<&'a bindings::sock>,
}

impl CallbackSock<'_> {
    /// Returns the TCP state. Any context.
    #[inline]
    pub fn state(&self) -> TcpState {
        sk_state(self.sk)
    }

    /// Returns the pending socket error as a negative errno (0 if none), without clearing it.
    /// Any context.
    pub fn error(&self) -> i32 {
        sk_err(self.sk)
    }

    /// Returns the free space in the send buffer (`sk_stream_wspace()`). Any context.
    pub fn stream_wspace(&self) -> i32 {
        // SAFETY: By the type invariant `sk` is valid; the helper only reads two fields with
        // `READ_ONCE`.
        unsafe { bindings::sk_stream_wspace(self.sk.as_ptr()) }
    }

    /// Returns the free space TCP waits for before calling `sk_write_space`
    /// (`sk_stream_min_wspace()`). Any context.
    pub fn stream_min_wspace(&self) -> i32 {
        // SAFETY: As above.
        unsafe { bindings::sk_stream_min_wspace(self.sk.as_ptr()) }
    }

    /// Returns the current MSS (`tcp_sk(sk)->mss_cache`). Any context; the value can change.
    #[inline]
    pub fn mss_cache(&self) -> u32 {
        // SAFETY: `sk` is a valid TCP socket; the helper reads the field with `READ_ONCE`.
        unsafe { bindings::tcp_sk_mss_cache(self.sk.as_ptr()) }
    }

    /// Returns the bytes received in order and not read yet (`tcp_inq()`). Any context; the
    /// value can change unless the socket is locked.
    #[inline]
    pub fn inq(&self) -> usize {
        // SAFETY: By the type invariant `sk` is a valid socket; `tcp_inq()` reads the state
        // and two sequence numbers.
        let n = unsafe { bindings::tcp_inq(self.sk.as_ptr()) };
        usize::try_from(n).unwrap_or(0)
    }

    /// Clears `SOCK_NOSPACE`, as a write-space handler does once it has room to send again.
    /// Any context.
    pub fn clear_nospace(&self) {
        // SAFETY: `sk` is valid. The helper checks `sk->sk_socket`, which is set while our
        // callbacks run (they are detached before the socket is released, see
        // `TcpSocket::drop`), and clears the bit atomically.
        unsafe { bindings::sk_clear_nospace(self.sk.as_ptr()) }
    }
}

/// A borrowed `struct sock` in `sk_data_ready`, which can also read the receive queue.
///
/// `sk_data_ready` runs with the socket locked, by the softirq (`bh_lock_sock()`) or by a task
/// (`lock_sock()`, when the backlog is processed in `release_sock()`), which is what
/// `tcp_read_sock()` requires.
pub struct DataReadySock<'a> {
    inner: CallbackSock<'a>,
}

impl<'a> core::ops::Deref for DataReadySock<'a> {
    type Target = CallbackSock<'a>;

    fn deref(&self) -> &CallbackSock<'a> {
        &self.inner
    }
}

impl DataReadySock<'_> {
    /// Reads from the receive queue with `tcp_read_sock()`; see [`SkbData`] and [`read_sock`].
    ///
    /// Atomic context (called from the data-ready callback), but not with interrupts disabled:
    /// consuming data can send an ACK. Returns `ENOTCONN` on a listening
    /// socket, whose `sk_data_ready` signals a connection to accept and runs without the socket
    /// lock.
    pub fn read_sock<F>(&mut self, actor: F) -> Result<usize>
    where
        F: FnMut(&SkbData<'_>) -> Result<usize>,
    {
        if self.state() == TcpState::LISTEN {
            return Err(ENOTCONN);
        }
        // SAFETY: `sk` is a TCP socket locked by our caller (see the type's documentation), and
        // it is not a listener.
        unsafe { read_sock(self.inner.sk, actor) }
    }
}

/// A contiguous range of received bytes inside one `sk_buff`, passed to a read actor.
///
/// # Invariants
///
/// `skb` is a valid `sk_buff` for `'a` holding at least `offset + len` bytes.
pub struct SkbData<'a> {
    skb: NonNull<bindings::sk_buff>,
    offset: u32,
    len: usize,
    _p: PhantomData<&'a bindings::sk_buff>,
}

impl SkbData<'_> {
    /// Returns the number of bytes available.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns true if no bytes are available (TCP never passes an empty range).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns `EINVAL` unless bytes `[offset, offset + len)` are inside this range.
    pub fn check_range(&self, offset: usize, len: usize) -> Result {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Copies `dst.len()` bytes starting at `offset` into `dst` (`skb_copy_bits()`).
    ///
    /// Returns `EINVAL` if the range is out of bounds. Any context.
    #[inline]
    pub fn copy_to(&self, offset: usize, dst: &mut [u8]) -> Result {
        // SAFETY: `dst` is valid for writes of `dst.len()` bytes and is not aliased.
        unsafe { self.copy_to_raw(offset, dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies `len` bytes starting at `offset` to `dst`.
    ///
    /// This is for destinations that cannot be a `&mut [u8]`, such as pages mapped from user
    /// memory that user space may change concurrently. Returns `EINVAL` if the range is out of
    /// bounds. Any context.
    ///
    /// # Safety
    ///
    /// `dst` must be valid for writes of `len` bytes, and no Rust reference may be used to access
    /// that memory during the call.
    pub unsafe fn copy_to_raw(&self, offset: usize, dst: *mut u8, len: usize) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        // `self.offset + self.len` fits in the skb's `u32` length (invariant), so these fit.
        let off = c_int::try_from(self.offset as usize + offset).map_err(|_| EINVAL)?;
        let n = c_int::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: The skb is valid (invariant) and holds `self.offset + self.len >= off + n`
        // bytes; `dst` is valid for `len` bytes (caller).
        to_result(unsafe { bindings::skb_copy_bits(self.skb.as_ptr(), off, dst.cast(), n) })
    }

    /// Updates the CRC-32C register `crc` over the `len` bytes starting at `offset`
    /// (`skb_crc32c()`), in the convention of [`crate::crc::crc32c`]: no inversion on input or
    /// output, so calls chain over consecutive ranges.
    ///
    /// Returns `EINVAL` if the range is out of bounds. Any context.
    #[cfg(CONFIG_NET_CRC32C)]
    pub fn crc32c(&self, offset: usize, len: usize, crc: u32) -> Result<u32> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        if len == 0 {
            return Ok(crc);
        }
        // `self.offset + self.len` fits in the skb's `u32` length (invariant), so these fit.
        let off = c_int::try_from(self.offset as usize + offset).map_err(|_| EINVAL)?;
        let n = c_int::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: The skb is valid (invariant) and holds `self.offset + self.len >= off + n`
        // bytes, so `skb_crc32c()` stays within it.
        Ok(unsafe { bindings::skb_crc32c(self.skb.as_ptr(), off, n, crc) })
    }
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
    // INVARIANT: `tcp_read_sock()` passes a live skb with `offset + len <= skb->len`.
    let data = SkbData {
        skb,
        offset,
        len,
        _p: PhantomData,
    };
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

/// Handlers for the events of a TCP socket (see [`TcpSocket::attach`]).
///
/// Each handler is optional; a socket whose `T` does not provide one keeps the original callback
/// (which wakes up waiters). `state_change` and `error_report` call the original callback after
/// the handler.
///
/// Handlers run in atomic context (usually softirq) with the socket's `sk_callback_lock` held for
/// reading. They must not sleep and must not attach or detach callbacks on the same socket
/// (which would deadlock); they typically record the event and queue work.
#[vtable]
pub trait Callbacks: Send + Sync + 'static {
    /// Data arrived (`sk_data_ready`). On a listening socket: a connection is ready to accept.
    fn data_ready(_this: ArcBorrow<'_, Self>, _sk: &mut DataReadySock<'_>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Send buffer space became available (`sk_write_space`).
    fn write_space(_this: ArcBorrow<'_, Self>, _sk: &CallbackSock<'_>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The TCP state changed (`sk_state_change`), e.g. a connect completed or the peer closed.
    fn state_change(_this: ArcBorrow<'_, Self>, _sk: &CallbackSock<'_>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A socket error was recorded (`sk_error_report`); see [`CallbackSock::error`].
    fn error_report(_this: ArcBorrow<'_, Self>, _sk: &CallbackSock<'_>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

type SkCallback = Option<unsafe extern "C" fn(*mut bindings::sock)>;

/// Compares two callbacks by address.
///
/// The trampolines are distinct, non-generic functions of the kernel crate, which is built as a
/// single codegen unit, so each has one address (C compares callbacks the same way, e.g.
/// `sk->sk_write_space == sock_def_write_space`).
fn same_callback(a: SkCallback, b: SkCallback) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => core::ptr::fn_addr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

const DATA_READY: usize = 0;
const WRITE_SPACE: usize = 1;
const STATE_CHANGE: usize = 2;
const ERROR_REPORT: usize = 3;

/// The type-erased handlers of an attached `Arc<T>`.
struct AttachVTable {
    data_ready: Option<unsafe fn(*const c_void, &mut DataReadySock<'_>)>,
    write_space: Option<unsafe fn(*const c_void, &CallbackSock<'_>)>,
    state_change: Option<unsafe fn(*const c_void, &CallbackSock<'_>)>,
    error_report: Option<unsafe fn(*const c_void, &CallbackSock<'_>)>,
    drop: unsafe fn(*const c_void),
}

struct VTableFor<T>(PhantomData<T>);

impl<T: Callbacks> VTableFor<T> {
    /// # Safety
    ///
    /// `data` comes from `Arc::<T>::into_raw` and the `Arc` is alive for the call.
    unsafe fn data_ready(data: *const c_void, sk: &mut DataReadySock<'_>) {
        // SAFETY: Per the safety requirements.
        T::data_ready(unsafe { ArcBorrow::from_raw(data.cast()) }, sk)
    }

    /// # Safety
    ///
    /// As for `data_ready`.
    unsafe fn write_space(data: *const c_void, sk: &CallbackSock<'_>) {
        // SAFETY: Per the safety requirements.
        T::write_space(unsafe { ArcBorrow::from_raw(data.cast()) }, sk)
    }

    /// # Safety
    ///
    /// As for `data_ready`.
    unsafe fn state_change(data: *const c_void, sk: &CallbackSock<'_>) {
        // SAFETY: Per the safety requirements.
        T::state_change(unsafe { ArcBorrow::from_raw(data.cast()) }, sk)
    }

    /// # Safety
    ///
    /// As for `data_ready`.
    unsafe fn error_report(data: *const c_void, sk: &CallbackSock<'_>) {
        // SAFETY: Per the safety requirements.
        T::error_report(unsafe { ArcBorrow::from_raw(data.cast()) }, sk)
    }

    /// # Safety
    ///
    /// `data` comes from `Arc::<T>::into_raw` and is not used afterwards.
    unsafe fn drop(data: *const c_void) {
        // SAFETY: Per the safety requirements.
        drop(unsafe { Arc::<T>::from_raw(data.cast()) })
    }

    const VTABLE: AttachVTable = AttachVTable {
        data_ready: if T::HAS_DATA_READY {
            Some(Self::data_ready)
        } else {
            None
        },
        write_space: if T::HAS_WRITE_SPACE {
            Some(Self::write_space)
        } else {
            None
        },
        state_change: if T::HAS_STATE_CHANGE {
            Some(Self::state_change)
        } else {
            None
        },
        error_report: if T::HAS_ERROR_REPORT {
            Some(Self::error_report)
        } else {
            None
        },
        drop: Self::drop,
    };
}

/// What `sk->sk_user_data` points to while callbacks are attached.
///
/// # Invariants
///
/// `data` comes from `Arc::into_raw` of the type `vtable` was made for, and that reference is
/// owned by this attachment. `saved` holds the callbacks that were installed before.
struct Attachment {
    vtable: &'static AttachVTable,
    data: *const c_void,
    saved: [SkCallback; 4],
}

/// The four trampolines installed in an attached socket. They are not generic, so that they can
/// be recognised in sockets cloned from an attached listener.
///
/// Their addresses are only taken and compared in non-generic, non-inlinable functions of this
/// crate (`#[inline(never)]`), so that no other crate instantiates a copy with another address.
const TRAMPOLINES: [SkCallback; 4] = [
    Some(tramp_data_ready),
    Some(tramp_write_space),
    Some(tramp_state_change),
    Some(tramp_error_report),
];

/// Reads the four callbacks of `sk` (with `READ_ONCE`), indexed by `DATA_READY` etc.
///
/// The fields are accessed by C helpers: the bindings' layout of `struct sock` does not match
/// C's for these fields.
///
/// # Safety
///
/// `sk` is valid.
unsafe fn sk_callbacks(sk: *mut bindings::sock) -> [SkCallback; 4] {
    let mut cbs: [SkCallback; 4] = [None; 4];
    // SAFETY: `sk` is valid (caller) and `cbs` has room for the four pointers.
    unsafe { bindings::sk_callbacks_get(sk, cbs.as_mut_ptr()) };
    cbs
}

/// Writes the four callbacks of `sk` (with `WRITE_ONCE`).
///
/// # Safety
///
/// `sk` is valid and its `sk_callback_lock` is held for writing.
unsafe fn set_sk_callbacks(sk: *mut bindings::sock, cbs: &[SkCallback; 4]) {
    // SAFETY: `sk` is valid and the lock is held (caller); `cbs` holds four pointers.
    unsafe { bindings::sk_callbacks_set(sk, cbs.as_ptr()) };
}

/// Returns the attachment of `sk`, or `None` if our callbacks are not attached to it.
///
/// # Safety
///
/// `sk` is valid and its `sk_callback_lock` is held. The returned reference must not be used
/// after the lock is released.
#[inline(never)]
unsafe fn attachment<'a>(sk: *mut bindings::sock, idx: usize) -> Option<&'a Attachment> {
    // SAFETY: The lock is held (caller).
    let data = unsafe { bindings::sk_user_data_locked(sk) };
    // Our trampolines and our `sk_user_data` are installed and removed together under the write
    // lock, and nothing else sets `sk_user_data` on a socket we own. A socket cloned from an
    // attached listener inherits the trampolines but not `sk_user_data` (`SK_USER_DATA_NOCOPY`).
    // SAFETY: `sk` is valid.
    if data.is_null() || !same_callback(unsafe { sk_callbacks(sk) }[idx], TRAMPOLINES[idx]) {
        return None;
    }
    // SAFETY: `data` was set by `TcpSocket::attach` to a leaked `KBox<Attachment>`, which is
    // only freed by `TcpSocket::detach` after clearing it under the write lock, which cannot be
    // taken while the caller holds the read lock.
    Some(unsafe { &*data.cast::<Attachment>() })
}

/// The body shared by the trampolines.
///
/// # Safety
///
/// `sk` is a valid socket passed to one of its callbacks.
#[inline(never)]
unsafe fn dispatch(sk: *mut bindings::sock, idx: usize) {
    let Some(nn) = NonNull::new(sk) else {
        return;
    };
    // SAFETY: `sk` is valid. Socket callbacks run in process or softirq context, never in
    // hardirq context, so taking the lock with BHs disabled is correct.
    unsafe { bindings::sk_callback_read_lock_bh(sk) };
    // SAFETY: The read lock is held and the reference is not used after it is released.
    let chain = match unsafe { attachment(sk, idx) } {
        Some(att) => {
            let csk = CallbackSock {
                sk: nn,
                _p: PhantomData,
            };
            let data = att.data;
            // `data` is the attachment's `Arc<T>` for the `T` the vtable was
            // made for, alive until detach, which waits for the read lock.
            match idx {
                DATA_READY => match att.vtable.data_ready {
                    Some(f) => {
                        let mut dsk = DataReadySock { inner: csk };
                        // SAFETY: See above.
                        unsafe { f(data, &mut dsk) };
                        None
                    }
                    None => att.saved[idx],
                },
                WRITE_SPACE => match att.vtable.write_space {
                    Some(f) => {
                        // SAFETY: See above.
                        unsafe { f(data, &csk) };
                        None
                    }
                    None => att.saved[idx],
                },
                STATE_CHANGE => {
                    if let Some(f) = att.vtable.state_change {
                        // SAFETY: See above.
                        unsafe { f(data, &csk) };
                    }
                    att.saved[idx]
                }
                _ => {
                    if let Some(f) = att.vtable.error_report {
                        // SAFETY: See above.
                        unsafe { f(data, &csk) };
                    }
                    att.saved[idx]
                }
            }
        }
        None => {
            // Not (or no longer) attached. Either the callback was detached after the caller
            // loaded the pointer, and the restored callback gets the event; or `sk` is a child
            // cloned from an attached listener and not yet accepted, which has no wait queue
            // (`sk_wq` is NULL until `sock_graft()`) so there is nobody to wake.
            // SAFETY: `sk` is valid.
            let cur = unsafe { sk_callbacks(sk) }[idx];
            if same_callback(cur, TRAMPOLINES[idx]) {
                None
            } else {
                cur
            }
        }
    };
    // SAFETY: Taken above.
    unsafe { bindings::sk_callback_read_unlock_bh(sk) };
    if let Some(cb) = chain {
        // SAFETY: `cb` was a callback of `sk` (its original one), which C calls with `sk`.
        unsafe { cb(sk) };
    }
}

/// # Safety
///
/// Called by the networking core as `sk->sk_data_ready` with a valid socket.
#[inline(never)]
unsafe extern "C" fn tramp_data_ready(sk: *mut bindings::sock) {
    // SAFETY: Per the safety requirements.
    unsafe { dispatch(sk, DATA_READY) }
}

/// # Safety
///
/// Called by the networking core as `sk->sk_write_space` with a valid socket.
#[inline(never)]
unsafe extern "C" fn tramp_write_space(sk: *mut bindings::sock) {
    // SAFETY: Per the safety requirements.
    unsafe { dispatch(sk, WRITE_SPACE) }
}

/// # Safety
///
/// Called by the networking core as `sk->sk_state_change` with a valid socket.
#[inline(never)]
unsafe extern "C" fn tramp_state_change(sk: *mut bindings::sock) {
    // SAFETY: Per the safety requirements.
    unsafe { dispatch(sk, STATE_CHANGE) }
}

/// # Safety
///
/// Called by the networking core as `sk->sk_error_report` with a valid socket.
#[inline(never)]
unsafe extern "C" fn tramp_error_report(sk: *mut bindings::sock) {
    // SAFETY: Per the safety requirements.
    unsafe { dispatch(sk, ERROR_REPORT) }
}

/// An owned kernel TCP socket.
///
/// Dropping it detaches any callbacks and releases the socket (`sock_release()`, which closes
/// the connection gracefully), so it may sleep.
///
/// # Invariants
///
/// `sock` points to a `struct socket` of type `SOCK_STREAM` and protocol TCP, created by
/// `sock_create*()` or `kernel_accept()`, owned by this object (released exactly once, on drop),
/// with a non-NULL `sk` that does not change while it is owned.
pub struct TcpSocket {
    sock: NonNull<bindings::socket>,
}

// SAFETY: A `struct socket` may be used and released from any task.
unsafe impl Send for TcpSocket {}

// SAFETY: All methods taking `&self` are safe to call concurrently: the socket calls take the
// socket lock, the callback (de)attachment takes `sk_callback_lock`, and lockless reads use
// `READ_ONCE` semantics.
unsafe impl Sync for TcpSocket {}

impl TcpSocket {
    fn from_raw_owned(sock: *mut bindings::socket) -> Result<Self> {
        let sock = NonNull::new(sock).ok_or(EINVAL)?;
        // SAFETY: `sock` is a valid socket just created.
        if unsafe { bindings::socket_sk(sock.as_ptr()) }.is_null() {
            // SAFETY: We own it.
            unsafe { bindings::sock_release(sock.as_ptr()) };
            return Err(EINVAL);
        }
        // INVARIANT: The caller created a TCP socket and passes its ownership; TCP sockets have
        // an `sk` from creation to release.
        Ok(Self { sock })
    }

    #[inline]
    fn sk(&self) -> NonNull<bindings::sock> {
        // SAFETY: `sock` is valid and `sk` is set and constant (type invariants).
        unsafe { NonNull::new_unchecked(bindings::socket_sk(self.sock.as_ptr())) }
    }

    /// Creates a TCP socket in the calling task's network namespace (`sock_create()`).
    ///
    /// The socket holds a reference to that namespace, like a user socket. May sleep.
    pub fn new(family: Family) -> Result<Self> {
        let mut sock = ptr::null_mut();
        // SAFETY: `sock` is a valid location for the result.
        to_result(unsafe {
            bindings::sock_create(
                c_int::from(family.as_raw()),
                bindings::sock_type_SOCK_STREAM as c_int,
                bindings::IPPROTO_TCP as c_int,
                &mut sock,
            )
        })?;
        Self::from_raw_owned(sock)
    }

    /// Creates a kernel TCP socket in the initial network namespace (`sock_create_kern()`).
    ///
    /// May sleep.
    pub fn new_kern(family: Family) -> Result<Self> {
        let mut sock = ptr::null_mut();
        // SAFETY: `init_net` lives forever; `sock` is a valid location for the result.
        to_result(unsafe {
            bindings::sock_create_kern(
                &raw mut bindings::init_net,
                c_int::from(family.as_raw()),
                bindings::sock_type_SOCK_STREAM as c_int,
                bindings::IPPROTO_TCP as c_int,
                &mut sock,
            )
        })?;
        Self::from_raw_owned(sock)
    }

    /// Gives the socket's locks the lockdep classes `v4` or `v6`, according to its family.
    ///
    /// `owner` is the module the keys live in; the socket holds a reference to it until it is
    /// freed, so that the keys outlive it. Only possible on a fresh socket (closed, unbound,
    /// never locked by anyone else); returns `EBUSY` otherwise. Without lockdep
    /// (`CONFIG_DEBUG_LOCK_ALLOC`) this does nothing. Process context.
    pub fn reclassify(
        &mut self,
        owner: &'static ThisModule,
        v4: &SockLockClass,
        v6: &SockLockClass,
    ) -> Result {
        let sk = self.sk().as_ptr();
        // SAFETY: `sk` is valid; the family is constant.
        let family = unsafe { bindings::sk_family_read(sk) };
        let class = match Family::from_raw(family) {
            Some(Family::Inet) => v4,
            Some(Family::Inet6) => v6,
            None => return Err(EAFNOSUPPORT),
        };
        // SAFETY: `sk` is valid. `&mut self` excludes other users through this object, and the
        // helper refuses sockets that are bound, not closed, or locked, which the network stack
        // cannot be using concurrently. The names and keys are `'static`, and `owner` is held by
        // the socket for as long as the keys are referenced.
        let ok = unsafe {
            bindings::sock_reclassify(
                sk,
                owner.as_ptr(),
                class.slock_name.as_char_ptr(),
                class.slock_key.as_ptr(),
                class.name.as_char_ptr(),
                class.key.as_ptr(),
            )
        };
        if ok {
            Ok(())
        } else {
            Err(EBUSY)
        }
    }

    /// Sets `SO_REUSEADDR`. May sleep.
    pub fn set_reuseaddr(&self) {
        // SAFETY: `sk` is valid.
        unsafe { bindings::sock_set_reuseaddr(self.sk().as_ptr()) }
    }

    /// Restricts an IPv6 socket to IPv6 (`IPV6_V6ONLY`), so that a wildcard `[::]` listener does
    /// not also take IPv4 connections. Must be called before binding. May sleep.
    pub fn set_v6only(&self) -> Result {
        // SAFETY: `sk` is valid.
        to_result(unsafe { bindings::ip6_sock_set_v6only(self.sk().as_ptr()) })
    }

    /// Restricts the socket to the net device with index `ifindex` (`SO_BINDTODEVICE`,
    /// `sock_bindtoindex()`), e.g. so that a wildcard listener only takes connections arriving
    /// on one device. Call it before binding. May sleep.
    pub fn bind_to_ifindex(&self, ifindex: i32) -> Result {
        // SAFETY: `sk` is valid; `lock_sk` asks the function to take the socket lock itself.
        to_result(unsafe { bindings::sock_bindtoindex(self.sk().as_ptr(), ifindex, true) })
    }

    /// Binds to `addr` (`kernel_bind()`); a zero port picks an ephemeral one. May sleep.
    pub fn bind(&self, addr: &SocketAddr) -> Result {
        let sa = SockAddrStorage::new(addr);
        // SAFETY: `sock` is valid; `sa` is a valid address of `sa.len()` bytes that
        // `kernel_bind` copies.
        to_result(unsafe {
            bindings::kernel_bind(self.sock.as_ptr(), sa.as_unsized_ptr(), sa.len() as c_int)
        })
    }

    /// Starts listening (`kernel_listen()`). May sleep.
    pub fn listen(&self, backlog: u32) -> Result {
        let backlog = c_int::try_from(backlog).unwrap_or(c_int::MAX);
        // SAFETY: `sock` is valid.
        to_result(unsafe { bindings::kernel_listen(self.sock.as_ptr(), backlog) })
    }

    /// Accepts a connection without blocking (`kernel_accept(O_NONBLOCK)`).
    ///
    /// Returns `EAGAIN` if no connection is waiting; a listener's
    /// [`Callbacks::data_ready`] signals one. The new socket has the callbacks this listener had
    /// before any [`TcpSocket::attach`]; it has no attachment of its own. May sleep.
    pub fn accept(&self) -> Result<TcpSocket> {
        let mut new = ptr::null_mut();
        // SAFETY: `sock` is valid; `new` is a valid location for the result.
        to_result(unsafe {
            bindings::kernel_accept(self.sock.as_ptr(), &mut new, bindings::O_NONBLOCK as c_int)
        })?;
        let new = Self::from_raw_owned(new)?;
        new.restore_cloned_callbacks(self);
        Ok(new)
    }

    /// Replaces the trampolines a freshly accepted socket inherited from an attached listener
    /// by the listener's original callbacks.
    #[inline(never)]
    fn restore_cloned_callbacks(&self, listener: &TcpSocket) {
        let lsk = listener.sk().as_ptr();
        let orig: [SkCallback; 4];
        // SAFETY: `lsk` is valid; lock/unlock are paired; the attachment is only used under the
        // lock.
        unsafe {
            bindings::sk_callback_read_lock_bh(lsk);
            orig = match attachment(lsk, DATA_READY) {
                Some(att) => att.saved,
                None => sk_callbacks(lsk),
            };
            bindings::sk_callback_read_unlock_bh(lsk);
        }
        let sk = self.sk().as_ptr();
        // SAFETY: `sk` is valid; the write lock is held for the writes.
        unsafe {
            bindings::sk_callback_write_lock_bh(sk);
            let mut cur = sk_callbacks(sk);
            for (idx, c) in cur.iter_mut().enumerate() {
                if same_callback(*c, TRAMPOLINES[idx])
                    && !same_callback(orig[idx], TRAMPOLINES[idx])
                {
                    *c = orig[idx];
                }
            }
            set_sk_callbacks(sk, &cur);
            bindings::sk_callback_write_unlock_bh(sk);
        }
    }

    /// Starts connecting to `addr` without blocking (`kernel_connect(O_NONBLOCK)`).
    ///
    /// Returns [`Connect::InProgress`] while the handshake runs; its end is reported through
    /// [`Callbacks::state_change`] (state [`TcpState::ESTABLISHED`], or [`TcpState::CLOSE`] with
    /// [`CallbackSock::error`] set, e.g. `ECONNREFUSED` or `ETIMEDOUT`). May sleep (briefly, for
    /// the socket lock; it does not wait for the peer).
    pub fn connect(&self, addr: &SocketAddr) -> Result<Connect> {
        let sa = SockAddrStorage::new(addr);
        // SAFETY: `sock` is valid; `sa` is a valid address of `sa.len()` bytes.
        let ret = unsafe {
            bindings::kernel_connect(
                self.sock.as_ptr(),
                sa.as_unsized_ptr(),
                sa.len() as c_int,
                bindings::O_NONBLOCK as c_int,
            )
        };
        match ret {
            0 => Ok(Connect::Done),
            r if r == -(bindings::EINPROGRESS as c_int) => Ok(Connect::InProgress),
            r => Err(Error::from_errno(r)),
        }
    }

    fn name(&self, peer: bool) -> Result<SocketAddr> {
        let mut ss = bindings::__kernel_sockaddr_storage::default();
        let p = ptr::from_mut(&mut ss).cast::<bindings::sockaddr>();
        // SAFETY: `sock` is valid; `ss` has room for any address the socket can have.
        let ret = unsafe {
            if peer {
                bindings::kernel_getpeername(self.sock.as_ptr(), p)
            } else {
                bindings::kernel_getsockname(self.sock.as_ptr(), p)
            }
        };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        SockAddrStorage::decode(&ss)
    }

    /// Returns the local address. May sleep.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.name(false)
    }

    /// Returns the peer's address (`ENOTCONN` if not connected). May sleep.
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        self.name(true)
    }

    /// Shuts down one or both directions (`kernel_sock_shutdown()`). May sleep.
    pub fn shutdown(&self, how: Shutdown) -> Result {
        let how = match how {
            Shutdown::Read => bindings::sock_shutdown_cmd_SHUT_RD,
            Shutdown::Write => bindings::sock_shutdown_cmd_SHUT_WR,
            Shutdown::Both => bindings::sock_shutdown_cmd_SHUT_RDWR,
        };
        // SAFETY: `sock` is valid.
        to_result(unsafe { bindings::kernel_sock_shutdown(self.sock.as_ptr(), how) })
    }

    /// Returns the TCP state. Any context.
    #[inline]
    pub fn state(&self) -> TcpState {
        sk_state(self.sk())
    }

    /// Returns the pending socket error as a negative errno (0 if none), without clearing it.
    /// Any context.
    pub fn error(&self) -> i32 {
        sk_err(self.sk())
    }

    /// Attaches `data` as the socket's event handler; see [`Callbacks`].
    ///
    /// The current callbacks are saved and restored by [`TcpSocket::detach`] (or on drop).
    /// Events that happened before attaching are not replayed: data already queued can be read
    /// with [`SocketGuard::read_sock`]. Returns `EBUSY` if something is already attached.
    /// May sleep (allocates); must not be called from a callback of this socket.
    pub fn attach<T: Callbacks>(&self, data: Arc<T>) -> Result {
        // Allocate first, so that nothing needs undoing if this fails.
        let mut att = KBox::new(
            Attachment {
                vtable: &VTableFor::<T>::VTABLE,
                data: ptr::null(),
                saved: [None; 4],
            },
            GFP_KERNEL,
        )?;
        // INVARIANT: The attachment owns the reference from `into_raw`.
        att.data = Arc::into_raw(data).cast();
        self.attach_boxed(att)
    }

    #[inline(never)]
    fn attach_boxed(&self, mut att: KBox<Attachment>) -> Result {
        let sk = self.sk().as_ptr();
        // SAFETY: `sk` is valid; the write lock is held for the reads and writes below.
        unsafe {
            bindings::sk_callback_write_lock_bh(sk);
            if !bindings::sk_user_data_locked(sk).is_null() {
                bindings::sk_callback_write_unlock_bh(sk);
                // The data is ours and was never published.
                (att.vtable.drop)(att.data);
                return Err(EBUSY);
            }
            att.saved = sk_callbacks(sk);
            let p = KBox::into_raw(att);
            // `KBox` allocations are at least pointer-aligned, so the low bit used for
            // `SK_USER_DATA_NOCOPY` is free.
            bindings::sk_set_user_data_nocopy(sk, p.cast());
            set_sk_callbacks(sk, &TRAMPOLINES);
            bindings::sk_callback_write_unlock_bh(sk);
        }
        Ok(())
    }

    /// Detaches the handler attached by [`TcpSocket::attach`] and restores the saved callbacks.
    ///
    /// When it returns, no handler of the attachment is running or will run, and the `Arc` has
    /// been dropped. Returns false if nothing was attached. Must not be called from a callback
    /// of this socket or with interrupts disabled; may be called in atomic context otherwise.
    #[inline(never)]
    pub fn detach(&self) -> bool {
        let sk = self.sk().as_ptr();
        // SAFETY: `sk` is valid; the write lock is held for the reads and writes.
        let att = unsafe {
            bindings::sk_callback_write_lock_bh(sk);
            let att = bindings::sk_user_data_locked(sk).cast::<Attachment>();
            if !att.is_null() {
                set_sk_callbacks(sk, &(*att).saved);
                bindings::sk_set_user_data_nocopy(sk, ptr::null_mut());
            }
            bindings::sk_callback_write_unlock_bh(sk);
            att
        };
        if att.is_null() {
            return false;
        }
        // SAFETY: `att` came from `KBox::into_raw` in `attach`. It is unreachable now: it was
        // removed from `sk_user_data` under the write lock, so no callback holds it (callbacks
        // only use it under the read lock).
        let att = unsafe { KBox::from_raw(att) };
        // SAFETY: The attachment owned this reference (type invariant).
        unsafe { (att.vtable.drop)(att.data) };
        true
    }

    /// Locks the socket (`lock_sock()`) for operations that need the lock. May sleep.
    #[inline]
    pub fn lock(&self) -> SocketGuard<'_> {
        // SAFETY: `sk` is valid.
        unsafe { bindings::lock_sock(self.sk().as_ptr()) };
        // INVARIANT: The lock was just taken.
        SocketGuard {
            sk: self.sk(),
            _p: PhantomData,
        }
    }

    /// Sends the concatenation of `bufs`, copying it (`kernel_sendmsg()`).
    ///
    /// Returns the number of bytes queued, which with [`SendFlags::DONTWAIT`] can be fewer than
    /// the total, or `EAGAIN` if none fit. At most [`MAX_SEND_BUFS`] buffers (`EINVAL`).
    /// May sleep.
    pub fn send(&self, bufs: &[&[u8]], flags: SendFlags) -> Result<usize> {
        let (mut kv, n, total) = kvecs::<MAX_SEND_BUFS>(bufs)?;
        // SAFETY: `sock` is valid; `kv[..n]` describe `total` readable bytes borrowed for the
        // call; `kernel_sendmsg` only reads them.
        let ret = unsafe {
            bindings::kernel_sendmsg_kvec(
                self.sock.as_ptr(),
                kv.as_mut_ptr(),
                n,
                total,
                flags.as_raw(),
            )
        };
        if ret < 0 {
            Err(Error::from_errno(ret))
        } else {
            Ok(ret as usize)
        }
    }

    /// Disables Nagle's algorithm (`TCP_NODELAY`). May sleep.
    pub fn set_nodelay(&self) {
        // SAFETY: `sk` is a valid TCP socket.
        unsafe { bindings::tcp_sock_set_nodelay(self.sk().as_ptr()) }
    }

    /// Makes releasing the socket abort the connection with a RST instead of a FIN
    /// (`SO_LINGER` with a zero timeout, `sock_no_linger()`). May sleep.
    pub fn set_no_linger(&self) {
        // SAFETY: `sk` is valid; the function takes the socket lock itself.
        unsafe { bindings::sock_no_linger(self.sk().as_ptr()) }
    }

    /// Enables keepalive probes (`SO_KEEPALIVE`). May sleep.
    pub fn set_keepalive(&self) {
        // SAFETY: `sk` is valid.
        unsafe { bindings::sock_set_keepalive(self.sk().as_ptr()) }
    }

    fn setsockopt_int(&self, name: u32, val: c_int) -> Result {
        // SAFETY: `sock` is valid.
        to_result(unsafe {
            bindings::sock_setsockopt_int(
                self.sock.as_ptr(),
                bindings::SOL_SOCKET as c_int,
                name as c_int,
                val,
            )
        })
    }

    /// Sets the send buffer size (`SO_SNDBUF`; the kernel doubles `bytes` for overhead) and
    /// locks it against autotuning (`SOCK_SNDBUF_LOCK`). May sleep.
    pub fn set_sndbuf(&self, bytes: u32) -> Result {
        self.setsockopt_int(
            bindings::SO_SNDBUF,
            c_int::try_from(bytes).unwrap_or(c_int::MAX),
        )
    }

    /// Sets the receive buffer size (`SO_RCVBUF`; doubled like `SO_SNDBUF`) and locks it against
    /// autotuning (`SOCK_RCVBUF_LOCK`). May sleep.
    pub fn set_rcvbuf(&self, bytes: u32) -> Result {
        self.setsockopt_int(
            bindings::SO_RCVBUF,
            c_int::try_from(bytes).unwrap_or(c_int::MAX),
        )
    }

    /// Returns the current MSS (`tcp_sk(sk)->mss_cache`). Any context; the value can change.
    #[inline]
    pub fn mss_cache(&self) -> u32 {
        // SAFETY: `sk` is a valid TCP socket; the helper reads with `READ_ONCE`.
        unsafe { bindings::tcp_sk_mss_cache(self.sk().as_ptr()) }
    }

    /// Returns the number of segments TCP puts in one GSO packet (`tcp_sk(sk)->gso_segs`, 0
    /// before the first send). Any context; the value can change.
    pub fn gso_segs(&self) -> u32 {
        // SAFETY: As above.
        unsafe { bindings::tcp_sk_gso_segs(self.sk().as_ptr()) }
    }

    /// Returns the free space in the send buffer (`sk_stream_wspace()`). Any context.
    pub fn stream_wspace(&self) -> i32 {
        // SAFETY: `sk` is valid; the helper reads with `READ_ONCE`.
        unsafe { bindings::sk_stream_wspace(self.sk().as_ptr()) }
    }

    /// Returns `sk_stream_min_wspace()`. Any context.
    pub fn stream_min_wspace(&self) -> i32 {
        // SAFETY: As above.
        unsafe { bindings::sk_stream_min_wspace(self.sk().as_ptr()) }
    }
}

impl Drop for TcpSocket {
    fn drop(&mut self) {
        // Callbacks must not outlive the attachment: after `sock_release()` the `struct sock`
        // can live on (e.g. in FIN_WAIT) and still run its callbacks.
        self.detach();
        // SAFETY: We own the socket (type invariant) and release it exactly once.
        unsafe { bindings::sock_release(self.sock.as_ptr()) };
    }
}

fn kvecs<const N: usize>(bufs: &[&[u8]]) -> Result<([bindings::kvec; N], usize, usize)> {
    if bufs.len() > N || N > MAX_SEND_BUFS {
        return Err(EINVAL);
    }
    let mut kv = [bindings::kvec::default(); N];
    let mut total = 0usize;
    for (k, b) in kv.iter_mut().zip(bufs) {
        k.iov_base = b.as_ptr().cast_mut().cast();
        k.iov_len = b.len();
        total = total.checked_add(b.len()).ok_or(EINVAL)?;
    }
    if total > c_int::MAX as usize {
        return Err(EINVAL);
    }
    Ok((kv, bufs.len(), total))
}

/// A page fragment to send, by reference ([`SocketGuard::send_pages`]) or copied
/// ([`SocketGuard::send_pages_copy`]).
///
/// # Invariants
///
/// `page` is a page that stays allocated for `'a`, and `offset + len <= PAGE_SIZE`. If
/// `splice` is false, the fragment lies in a [`StagingPage`].
#[derive(Clone, Copy)]
pub struct PageFrag<'a> {
    page: NonNull<bindings::page>,
    offset: u32,
    len: u32,
    splice: bool,
    _p: PhantomData<&'a Page>,
}

impl<'a> PageFrag<'a> {
    /// Describes `len` bytes of `page` at `offset`; `EINVAL` if they do not fit in the page.
    #[inline]
    pub fn new(page: &'a Page, offset: usize, len: usize) -> Result<Self> {
        // SAFETY: `page` is allocated for `'a`.
        unsafe { Self::from_raw(NonNull::new(page.as_ptr()).ok_or(EINVAL)?, offset, len) }
    }

    /// Describes `len` bytes at `offset` of a page owned by another abstraction (e.g. pinned user
    /// memory). `EINVAL` if they do not fit in the page.
    ///
    /// # Safety
    ///
    /// The caller holds a reference on `page` for `'a`, and it is not a slab page.
    #[inline]
    pub unsafe fn from_raw(
        page: NonNull<bindings::page>,
        offset: usize,
        len: usize,
    ) -> Result<Self> {
        if offset.checked_add(len).ok_or(EINVAL)? > PAGE_SIZE {
            return Err(EINVAL);
        }
        // INVARIANT: Checked above; the page stays allocated (caller).
        Ok(Self {
            page,
            offset: offset as u32,
            len: len as u32,
            splice: true,
            _p: PhantomData,
        })
    }

    /// Returns the length of the fragment.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Returns `true` if the fragment is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A page whose bytes are assembled in place and sent with a copy
/// ([`SocketGuard::send_pages_copy`]), then rewritten for the next send: e.g. protocol headers
/// and trailers between payload fragments of other pages, in one `sendmsg`.
///
/// Its fragments cannot be sent by reference: [`SocketGuard::send_pages`] refuses them, so TCP
/// never reads the page after the call that copied from it.
///
/// # Invariants
///
/// The page is zeroed when allocated. No reference to it is held outside `self` and the
/// [`PageFrag`]s borrowed from it; those are only ever copied from, during a
/// [`SocketGuard::send_pages_copy`] call.
pub struct StagingPage {
    page: Page,
}

impl StagingPage {
    /// Allocates a zeroed page. May sleep.
    pub fn new() -> Result<Self> {
        // INVARIANT: Zeroed at allocation; nothing else refers to the new page.
        Ok(Self {
            page: Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?,
        })
    }

    /// Calls `f` with bytes `[offset, offset + len)` of the page, to read or write them;
    /// `EINVAL` if they do not fit in the page. Does not sleep (if `f` does not).
    pub fn with_slice_mut<T>(
        &mut self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> T,
    ) -> Result<T> {
        if offset.checked_add(len).ok_or(EINVAL)? > PAGE_SIZE {
            return Err(EINVAL);
        }
        // SAFETY: We own the page, which stays allocated while `self` is borrowed.
        let base = unsafe { bindings::kmap_local_page(self.page.as_ptr()) }.cast::<u8>();
        // SAFETY: `base` maps the whole page and `offset + len <= PAGE_SIZE` (checked above).
        // The bytes are initialized (zeroed at allocation). Nobody else accesses them while
        // the slice lives: we borrow `self` mutably, so no `PageFrag` of the page is alive,
        // and TCP only read them during earlier `send_pages_copy` calls (type invariant).
        let slice = unsafe { core::slice::from_raw_parts_mut(base.add(offset), len) };
        let ret = f(slice);
        // SAFETY: `base` was mapped just above; mappings made by `f` were undone before it
        // returned (`kmap_local` nesting), so this one is the innermost.
        unsafe { bindings::kunmap_local(base.cast::<c_void>()) };
        Ok(ret)
    }

    /// Describes bytes `[offset, offset + len)` of the page, to send them with
    /// [`SocketGuard::send_pages_copy`]; `EINVAL` if they do not fit in the page.
    #[inline]
    pub fn frag(&self, offset: usize, len: usize) -> Result<PageFrag<'_>> {
        let mut f = PageFrag::new(&self.page, offset, len)?;
        // INVARIANT: The fragment lies in a `StagingPage`.
        f.splice = false;
        Ok(f)
    }
}

/// A page for small data sent by reference ([`SocketGuard::send_pages`]), e.g. protocol headers
/// between payload pages sent by reference, written append-only: bytes once appended are never
/// changed, so TCP may keep (re)transmitting them after the call. Dropping it releases only our
/// reference on the page; TCP keeps its own for what it queued.
///
/// # Invariants
///
/// `used <= PAGE_SIZE`; bytes `[0, used)` of `page` are never written again.
pub struct AppendPage {
    page: Page,
    used: usize,
}

impl AppendPage {
    /// Allocates an empty page. May sleep.
    pub fn new() -> Result<Self> {
        // INVARIANT: Nothing is used yet.
        Ok(Self {
            page: Page::alloc_page(GFP_KERNEL)?,
            used: 0,
        })
    }

    /// Returns the number of bytes appended.
    pub fn len(&self) -> usize {
        self.used
    }

    /// Returns `true` if nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Returns the number of bytes that can still be appended.
    pub fn room(&self) -> usize {
        PAGE_SIZE - self.used
    }

    /// Appends `data` and returns its offset in the page; `ENOSPC` if it does not fit.
    pub fn append(&mut self, data: &[u8]) -> Result<usize> {
        let off = self.used;
        if data.len() > self.room() {
            return Err(ENOSPC);
        }
        // SAFETY: `data` is valid for reading `data.len()` bytes. The bytes written lie beyond
        // `used`: no fragment handed out by `frag()` covers them, so TCP does not read them.
        unsafe { self.page.write_raw(data.as_ptr(), off, data.len())? };
        // INVARIANT: `off + data.len() <= PAGE_SIZE` (checked above).
        self.used = off + data.len();
        Ok(off)
    }

    /// Describes appended bytes `[offset, offset + len)` for sending; `EINVAL` if they were not
    /// appended.
    #[inline]
    pub fn frag(&self, offset: usize, len: usize) -> Result<PageFrag<'_>> {
        if offset.checked_add(len).ok_or(EINVAL)? > self.used {
            return Err(EINVAL);
        }
        PageFrag::new(&self.page, offset, len)
    }
}

/// A locked TCP socket (`lock_sock()`), unlocked on drop (`release_sock()`, which also
/// processes the packets that arrived meanwhile and may run callbacks).
///
/// # Invariants
///
/// The socket lock of `sk` is held by this guard.
pub struct SocketGuard<'a> {
    sk: NonNull<bindings::sock>,
    _p: PhantomData<&'a TcpSocket>,
}

impl SocketGuard<'_> {
    /// Reads from the receive queue with `tcp_read_sock()`; see [`DataReadySock::read_sock`].
    /// Returns `ENOTCONN` on a listening socket. Process context, socket locked.
    pub fn read_sock<F>(&mut self, actor: F) -> Result<usize>
    where
        F: FnMut(&SkbData<'_>) -> Result<usize>,
    {
        // SAFETY: The socket is locked (type invariant); `tcp_read_sock` itself refuses
        // listeners.
        unsafe { read_sock(self.sk, actor) }
    }

    fn sent(ret: c_int) -> Result<usize> {
        if ret < 0 {
            Err(Error::from_errno(ret))
        } else {
            Ok(ret as usize)
        }
    }

    /// Sends the concatenation of `bufs`, copying it (`tcp_sendmsg_locked()`); see
    /// [`TcpSocket::send`]. Socket locked; blocks unless [`SendFlags::DONTWAIT`] is given.
    pub fn send(&mut self, bufs: &[&[u8]], flags: SendFlags) -> Result<usize> {
        // Most calls send one or two buffers (a small message): an array sized for them saves
        // initialising the large one on every send.
        if bufs.len() <= 2 {
            self.send_n::<2>(bufs, flags)
        } else {
            self.send_n::<MAX_SEND_BUFS>(bufs, flags)
        }
    }

    fn send_n<const N: usize>(&mut self, bufs: &[&[u8]], flags: SendFlags) -> Result<usize> {
        let (kv, n, total) = kvecs::<N>(bufs)?;
        // SAFETY: The socket is locked (type invariant) and is a TCP socket; `kv[..n]` lives
        // across the call and describes `total` readable bytes, which TCP only reads.
        Self::sent(unsafe {
            bindings::tcp_sendmsg_kvec_locked(
                self.sk.as_ptr(),
                kv.as_ptr(),
                n,
                total,
                flags.as_raw(),
            )
        })
    }

    /// Sends page fragments without copying (`MSG_SPLICE_PAGES`).
    ///
    /// TCP takes a reference on each page and transmits (and retransmits) from it until the
    /// peer acknowledges the data, so the pages must not be modified until then if the bytes
    /// on the wire matter; their lifetime is safe either way. Returns the number of bytes queued
    /// (possibly fewer than asked with [`SendFlags::DONTWAIT`]), or `EAGAIN`. At most
    /// [`MAX_SEND_PAGES`] fragments, none of a [`StagingPage`] (`EINVAL`). Socket locked;
    /// blocks unless [`SendFlags::DONTWAIT`].
    pub fn send_pages(&mut self, frags: &[PageFrag<'_>], flags: SendFlags) -> Result<usize> {
        if frags.iter().any(|f| !f.splice) {
            return Err(EINVAL);
        }
        self.send_bvec(frags, flags.as_raw() | bindings::MSG_SPLICE_PAGES)
    }

    /// Sends the bytes of page fragments, copying them into the socket's buffers during the
    /// call (`sendmsg` over a `bio_vec` iterator, without `MSG_SPLICE_PAGES`).
    ///
    /// TCP keeps no reference on the pages: once the call returned, the bytes it queued are
    /// TCP's own, and the pages may change or go. This gathers headers and payload from
    /// different pages into one send at the cost of one copy, as `send()` on a user socket.
    /// Returns the number of bytes queued (possibly fewer than asked with
    /// [`SendFlags::DONTWAIT`]), or `EAGAIN`. At most [`MAX_SEND_PAGES`] fragments (`EINVAL`).
    /// Socket locked; blocks unless [`SendFlags::DONTWAIT`].
    pub fn send_pages_copy(&mut self, frags: &[PageFrag<'_>], flags: SendFlags) -> Result<usize> {
        self.send_bvec(frags, flags.as_raw())
    }

    fn send_bvec(&mut self, frags: &[PageFrag<'_>], flags: u32) -> Result<usize> {
        // Most calls carry one or two fragments (a small message): an array sized for them
        // saves initialising the large one on every send.
        if frags.len() <= 4 {
            self.send_bvec_n::<4>(frags, flags)
        } else {
            self.send_bvec_n::<MAX_SEND_PAGES>(frags, flags)
        }
    }

    fn send_bvec_n<const N: usize>(&mut self, frags: &[PageFrag<'_>], flags: u32) -> Result<usize> {
        if frags.len() > N {
            return Err(EINVAL);
        }
        let mut bv = [bindings::bio_vec::default(); N];
        let mut total = 0usize;
        for (b, f) in bv.iter_mut().zip(frags) {
            b.bv_page = f.page.as_ptr();
            b.bv_offset = f.offset;
            b.bv_len = f.len;
            total += f.len as usize; // At most MAX_SEND_PAGES * PAGE_SIZE.
        }
        // SAFETY: The socket is locked (type invariant) and is a TCP socket; `bv[..frags.len()]`
        // lives across the call and describes `total` bytes of pages that stay allocated for the
        // call (`PageFrag` invariant). With `MSG_SPLICE_PAGES` TCP takes its own page references
        // for what it queues, and `StagingPage` fragments are not spliced (the callers check);
        // without it, TCP copies the bytes during the call.
        Self::sent(unsafe {
            bindings::tcp_sendmsg_bvec_locked(
                self.sk.as_ptr(),
                bv.as_ptr(),
                frags.len(),
                total,
                flags,
            )
        })
    }
}

impl Drop for SocketGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: The lock is held (type invariant).
        unsafe { bindings::release_sock(self.sk.as_ptr()) };
    }
}
