// SPDX-License-Identifier: GPL-2.0

//! Socket callbacks: the [`Callbacks`] of an attached handler, the trampolines installed in the
//! socket and the attachment kept in `sk_user_data`.

use super::{
    read_sock,
    send::kvecs,
    sk_err,
    sk_state,
    TcpSocket,
    TcpState, //
};
use crate::{
    bindings,
    error::VTABLE_DEFAULT_ERROR,
    net::skb::SkbData,
    prelude::*,
    sync::{
        atomic::Relaxed,
        Arc,
        ArcBorrow, //
    },
};
use core::{
    marker::PhantomData,
    ptr::{
        self,
        NonNull, //
    },
};

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
///
/// # Invariants
///
/// `inner.sk` is a TCP socket whose lock (`bh_lock_sock()` or `lock_sock()`) is held by the
/// caller of its `sk_data_ready` for `'a`: only [`dispatch`] creates the value, for the duration
/// of that callback.
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

    /// Sends the concatenation of `bufs` (at most two), copying it, from the callback itself
    /// (`tcp_sendmsg_locked()` with `MSG_DONTWAIT`): a reply that need not wait for a task.
    ///
    /// Only when the softirq runs the callback: `EBUSY` when a task owns the socket (the
    /// callback runs from `release_sock()`; the owner sends). Allocates atomically, with the
    /// socket's own page fragment. Returns the number of bytes queued, which can be fewer than
    /// the total, or `EAGAIN` if none fit; `ENOTCONN` unless the connection is established (or
    /// the peer closed its side only).
    pub fn send(&mut self, bufs: &[&[u8]]) -> Result<usize> {
        let st = self.state();
        if st != TcpState::ESTABLISHED && st != TcpState::CLOSE_WAIT {
            return Err(ENOTCONN);
        }
        let (kv, n, total) = kvecs::<2>(bufs)?;
        // SAFETY: `sk` is a TCP socket whose spinlock our caller holds (see the type's
        // documentation; not a listener, checked above); the helper sends only if no task owns
        // it, which makes the socket ours for the call. `kv[..n]` lives across the call and
        // describes `total` readable bytes, which TCP only reads.
        let ret =
            unsafe { bindings::tcp_sendmsg_kvec_bh(self.inner.sk.as_ptr(), kv.as_ptr(), n, total) };
        if ret < 0 {
            Err(Error::from_errno(ret))
        } else {
            Ok(ret as usize)
        }
    }
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
/// It is installed with `SK_USER_DATA_NOCOPY` and no other flag (see [`attachment`]).
///
/// # Invariants
///
/// `data` comes from `Arc::into_raw` of the type `vtable` was made for, and that reference is
/// owned by this attachment. `saved` holds the callbacks that were installed before.
pub(super) struct Attachment {
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
/// `sk_user_data` is ours if it was set with `SK_USER_DATA_NOCOPY` alone (as
/// [`TcpSocket::attach`] sets it) and the trampoline of `idx` is installed. The trampolines reach
/// sockets we never attached to in two ways: a child cloned from an attached listener inherits
/// them (but not `sk_user_data`, which `SK_USER_DATA_NOCOPY` clears in the clone), and another
/// owner of a socket's `sk_user_data` may keep them as the callbacks it saved and call them.
/// Before `accept()` the only code that can set `sk_user_data` of such a child is BPF's: a
/// sockmap's psock (`SK_USER_DATA_PSOCK`) or a reuseport array (`SK_USER_DATA_BPF`), both
/// flagged; after `accept()` [`TcpSocket::accept`] refuses a child with an owner.
///
/// # Safety
///
/// `sk` is valid and its `sk_callback_lock` is held. The returned reference must not be used
/// after the lock is released.
#[inline(never)]
unsafe fn attachment<'a>(sk: *mut bindings::sock, idx: usize) -> Option<&'a Attachment> {
    // SAFETY: The lock is held (caller).
    let data = unsafe { bindings::sk_user_data_nocopy_locked(sk) };
    // SAFETY: `sk` is valid.
    if data.is_null() || !same_callback(unsafe { sk_callbacks(sk) }[idx], TRAMPOLINES[idx]) {
        return None;
    }
    // SAFETY: As argued above, `data` was set by `TcpSocket::attach` to a leaked
    // `KBox<Attachment>`, which is only freed by `TcpSocket::detach` after clearing it under the
    // write lock, which cannot be taken while the caller holds the read lock.
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
                        // INVARIANT: `sk_data_ready` runs with the socket locked, and `dsk`
                        // does not outlive this call.
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
            // Not (or no longer) attached:
            // - the callback was detached after the caller loaded the pointer: `sk_user_data`
            //   is clear and the restored callback gets the event;
            // - `sk` is a child cloned from an attached listener and not yet accepted, which
            //   inherited the trampolines and has no wait queue (`sk_wq` is NULL until
            //   `sock_graft()`): there is nobody to wake;
            // - another owner of `sk_user_data` (a sockmap's psock on such a child) calls the
            //   trampoline it saved, from its own callback: the current callback may be that
            //   one, which would call us again. Nothing is chained then.
            // SAFETY: `sk` is valid and the lock is held.
            let (cur, owned) = unsafe {
                (
                    sk_callbacks(sk)[idx],
                    !bindings::sk_user_data_locked(sk).is_null(),
                )
            };
            if owned || same_callback(cur, TRAMPOLINES[idx]) {
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

impl TcpSocket {
    /// Replaces the trampolines a freshly accepted socket inherited from an attached listener
    /// by the listener's original callbacks.
    #[inline(never)]
    pub(super) fn restore_cloned_callbacks(&self, listener: &TcpSocket) {
        let lsk = listener.sk().as_ptr();
        let orig: [SkCallback; 4];
        // SAFETY: `lsk` is valid; lock/unlock are paired. The listener's attachment, if any, is
        // installed and stays so while the lock is held (`TcpSocket` invariant); it is only
        // read under the lock.
        unsafe {
            bindings::sk_callback_read_lock_bh(lsk);
            let att = listener.attachment.load(Relaxed);
            orig = if att.is_null() {
                sk_callbacks(lsk)
            } else {
                (*att).saved
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

    /// Attaches `data` as the socket's event handler; see [`Callbacks`].
    ///
    /// The current callbacks are saved and restored by [`TcpSocket::detach`] (or on drop).
    /// Events that happened before attaching are not replayed: data already queued can be read
    /// with [`SocketGuard::read_sock`](super::SocketGuard::read_sock). Returns `EBUSY` if the
    /// socket's `sk_user_data` is taken, by an earlier attachment or by another owner (a BPF
    /// sockmap, say), whose callbacks and data are left alone. May sleep (allocates); must not be
    /// called from a callback of this socket.
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
            // `KBox` allocations are at least pointer-aligned, so the low bits used for the
            // `SK_USER_DATA_*` flags are free.
            bindings::sk_set_user_data_nocopy(sk, p.cast());
            set_sk_callbacks(sk, &TRAMPOLINES);
            // INVARIANT: `p` is installed as `sk_user_data`, under the write lock.
            self.attachment.store(p, Relaxed);
            bindings::sk_callback_write_unlock_bh(sk);
        }
        Ok(())
    }

    /// Detaches the handler attached by [`TcpSocket::attach`] and restores the saved callbacks.
    ///
    /// When it returns, no handler of the attachment is running or will run, and the `Arc` has
    /// been dropped. Returns false if nothing was attached; the socket is then left as it is,
    /// including an `sk_user_data` that another owner set. Must not be called from a callback of
    /// this socket or with interrupts disabled; may be called in atomic context otherwise.
    #[inline(never)]
    pub fn detach(&self) -> bool {
        let sk = self.sk().as_ptr();
        // SAFETY: `sk` is valid; the write lock is held for the reads and writes. A non-null
        // `attachment` is ours and installed as `sk_user_data` (type invariant).
        let att = unsafe {
            bindings::sk_callback_write_lock_bh(sk);
            let att = self.attachment.load(Relaxed);
            if !att.is_null() {
                set_sk_callbacks(sk, &(*att).saved);
                bindings::sk_set_user_data_nocopy(sk, ptr::null_mut());
                // INVARIANT: Removed from `sk_user_data` just above, under the write lock.
                self.attachment.store(ptr::null_mut(), Relaxed);
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
}
