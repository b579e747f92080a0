// SPDX-License-Identifier: GPL-2.0

//! The owned socket: creation, addresses, options and lifetime.

use super::{
    callbacks::Attachment,
    sk_err,
    sk_state,
    Connect,
    Shutdown,
    TcpState, //
};
use crate::{
    alloc::Flags,
    bindings,
    error::to_result,
    net::socket::{
        Family,
        SockAddrStorage, //
    },
    prelude::*,
    sync::{
        atomic::Atomic,
        LockClassKey, //
    },
};
use core::{
    net::SocketAddr,
    ptr::{
        self,
        NonNull, //
    },
};

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

/// An owned kernel TCP socket.
///
/// Dropping it detaches any callbacks and releases the socket (`sock_release()`, which closes
/// the connection gracefully), so it may sleep.
///
/// # Invariants
///
/// - `sock` points to a `struct socket` of type `SOCK_STREAM` and protocol TCP, created by
///   `sock_create*()` or `kernel_accept()`, owned by this object (released exactly once, on
///   drop), with a non-NULL `sk` that does not change while it is owned.
/// - `sk_user_data` of `sk` is null or ours: `attachment` is null, or the [`Attachment`] this
///   object installed as `sk_user_data` (with `SK_USER_DATA_NOCOPY`), which stays installed
///   until this object removes it. `attachment` only changes with `sk_callback_lock` held for
///   writing. A socket whose `sk_user_data` another owner set (a BPF sockmap, for instance) is
///   refused when it is accepted, and an attachment fails on it; its owner's data and callbacks
///   are never touched.
pub struct TcpSocket {
    pub(super) sock: NonNull<bindings::socket>,
    pub(super) attachment: Atomic<*mut Attachment>,
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
        // an `sk` from creation to release. Nothing is attached yet.
        Ok(Self {
            sock,
            attachment: Atomic::new(ptr::null_mut()),
        })
    }

    #[inline]
    pub(super) fn sk(&self) -> NonNull<bindings::sock> {
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
    /// [`Callbacks::data_ready`](super::Callbacks::data_ready) signals one. The new socket has
    /// the callbacks this listener had before any [`TcpSocket::attach`]; it has no attachment of
    /// its own.
    ///
    /// A connection whose socket another owner took before it was accepted (a BPF sockops
    /// program that put it in a sockmap, which sets `sk_user_data`) is refused: it is released
    /// (the peer sees it closed) without touching that owner's data or callbacks, and the next
    /// connection is accepted instead. May sleep.
    pub fn accept(&self) -> Result<TcpSocket> {
        loop {
            let mut new = ptr::null_mut();
            // SAFETY: `sock` is valid; `new` is a valid location for the result.
            to_result(unsafe {
                bindings::kernel_accept(self.sock.as_ptr(), &mut new, bindings::O_NONBLOCK as c_int)
            })?;
            let new = Self::from_raw_owned(new)?;
            if new.has_owner() {
                pr_debug!("tcp: refusing an accepted connection: its sk_user_data is taken\n");
                // Dropping it releases it: nothing is attached, so nothing else is touched.
                continue;
            }
            new.restore_cloned_callbacks(self);
            return Ok(new);
        }
    }

    /// Returns whether something set `sk_user_data` of the socket. Any context.
    fn has_owner(&self) -> bool {
        let sk = self.sk().as_ptr();
        // SAFETY: `sk` is valid; lock and unlock are paired.
        unsafe {
            bindings::sk_callback_read_lock_bh(sk);
            let owned = !bindings::sk_user_data_locked(sk).is_null();
            bindings::sk_callback_read_unlock_bh(sk);
            owned
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

    /// Prepares the socket for use on the memory reclaim path: it allocates its buffers with
    /// `gfp` (`sk->sk_allocation`).
    ///
    /// A socket that block or file system IO goes through (a storage transport, or an RDMA
    /// provider that storage ULPs such as NVMe-oF and NFS run over) must not allocate with
    /// `GFP_KERNEL`: direct reclaim could then wait for IO over the same socket. Such sockets
    /// use [`GFP_NOIO`] (as drbd's and nbd's do; nvme-tcp's use [`GFP_ATOMIC`]). The task's
    /// page fragment (`sk->sk_use_task_frag`) is left as it is: those drivers turn it off
    /// because they send from the context of whichever task submitted the IO, which may have
    /// entered reclaim in the middle of a send of its own; a user that sends only from its
    /// own work items and system calls need not, and saves the socket's own fragment (up to
    /// 32 KiB a socket). May sleep (takes the socket lock).
    pub fn set_allocation(&self, gfp: Flags) {
        // SAFETY: `sk` is valid; the helper takes the socket lock and only stores the field,
        // which TCP reads under that lock or with `READ_ONCE`.
        unsafe { bindings::sk_set_allocation(self.sk().as_ptr(), gfp.as_raw()) }
    }

    /// Returns the raw flags the socket allocates its buffers with (`sk->sk_allocation`) and
    /// whether it may use the task's page fragment (`sk->sk_use_task_frag`), for the tests.
    /// Any context.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(super) fn allocation_raw(&self) -> (u32, bool) {
        let sk = self.sk().as_ptr();
        // SAFETY: `sk` is valid; the helpers read with `READ_ONCE`.
        unsafe {
            (
                bindings::sk_allocation_read(sk),
                bindings::sk_use_task_frag_read(sk),
            )
        }
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
