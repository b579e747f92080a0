// SPDX-License-Identifier: GPL-2.0

//! The connection manager: the iw_cm provider operations, listeners, connection endpoints and
//! the MPA Request/Reply exchange (`siw_cm.c`).
//!
//! # Objects
//!
//! - A [`Listener`] owns a listening socket for one listening iw_cm id. Its `data_ready`
//!   callback queues work that accepts the waiting connections, each into a new passive
//!   [`Cep`].
//! - A [`Cep`] (connection endpoint) owns one TCP connection for its whole life: the socket
//!   (`Arc<TcpSocket>`) with the `Cep` attached as its only [`Callbacks`], the iw_cm id of the
//!   connection, the QP it is bound to, and the MPA exchange. Once the QP is in RTS the socket's
//!   `data_ready` and `write_space` go to the data path ([`Conn`]); `state_change` and
//!   `error_report` always come here.
//! - [`CmDev`] is the per-device part: the ordered work queue all CM work runs on, and the
//!   registry of live listeners and endpoints (for the iw_cm's provider tokens, for the QP's
//!   hooks, and for tearing everything down with the device). Endpoints are found by token and
//!   by QP number in red-black trees, in O(log n) however many connections a peer opens.
//!
//! # Limits
//!
//! A passive endpoint waits for its MPA Request for at most [`REQUEST_TIMEOUT`], holding a
//! socket and its state. A device holds at most `max_mpa_pending` (a module parameter) such
//! endpoints: a listener resets connections beyond it at once, and says so once in the kernel
//! log, as TCP does for a SYN flood.
//!
//! # Contexts
//!
//! Socket callbacks and timers only record an event ([`Cep::raise`]) and queue the endpoint's
//! work item; everything else (reading MPA frames, sending, iw_cm events, QP changes, releasing
//! the socket) runs in the work item or in the iw_cm operations, in process context, under the
//! endpoint's `inner` mutex.
//!
//! Lock order: the registry, then a `Cep`'s or `Listener`'s `inner` mutex, then the QP's
//! `modify` mutex, then the socket lock, then the `fast` spinlock. The QP number map (`qpns`)
//! is a leaf. The socket callbacks find the data path under RCU.

use crate::{
    conn::{
        Conn,
        ConnParams,
        Endpoint, //
    },
    crc::KernelCrc32c,
    device::RsiwDevice,
    limits,
    qp::{
        QpState,
        RsiwQp, //
    },
    wire::{
        hdr::{
            Body,
            Opcode,
            Placement,
            QN_TERMINATE, //
        },
        mpa::{
            self,
            FrameHeader,
            FrameKind,
            FrameReader,
            InitiatorAction,
            LocalConfig,
            ReadStatus,
            ResponderAction,
            RtrSet, //
        },
        term::{
            TermCode,
            Terminate, //
        },
        tx::{
            Segmenter,
            TxMessage, //
        },
    },
};
use core::net::SocketAddr;
use kernel::{
    net::{
        socket::{
            Family,
            SendFlags, //
        },
        tcp::{
            CallbackSock,
            Callbacks,
            Connect,
            DataReadySock,
            Shutdown,
            SockLockClass,
            TcpSocket,
            TcpState, //
        },
    },
    new_condvar, new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
    rdma::{
        device::Device,
        iwcm::{
            CmId,
            ConnParam,
            Event,
            EventKind,
            MAX_PRIVATE_DATA, //
        },
        qp::Qp,
    },
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        rcu,
        Arc,
        ArcBorrow,
        CondVar,
        CondVarTimeoutResult,
        Mutex,
        RcuArc,
        SpinLockIrq, //
    },
    time::{
        hrtimer::{
            ArcHrTimerHandle,
            HrTimer,
            HrTimerCallback,
            HrTimerCallbackContext,
            HrTimerPointer,
            HrTimerRestart,
            RelativeSoftMode, //
        },
        msecs_to_jiffies,
        Delta,
        Monotonic, //
    },
    workqueue::{
        OwnedQueue,
        QueueFlags,
        Work,
        WorkItem, //
    },
    ThisModule,
};

/// Lockdep class of the IPv4 sockets of the connection manager (see `siw_reclassify_socket()`):
/// their locks are taken under RDMA locks that network file systems also take around their own
/// sockets.
static SOCK_CLASS_V4: SockLockClass = SockLockClass {
    slock_name: c"slock-AF_INET-RDMA-RSIW",
    slock_key: kernel::static_lock_class!(),
    name: c"sk_lock-AF_INET-RDMA-RSIW",
    key: kernel::static_lock_class!(),
};

/// Lockdep class of the IPv6 sockets of the connection manager.
static SOCK_CLASS_V6: SockLockClass = SockLockClass {
    slock_name: c"slock-AF_INET6-RDMA-RSIW",
    slock_key: kernel::static_lock_class!(),
    name: c"sk_lock-AF_INET6-RDMA-RSIW",
    key: kernel::static_lock_class!(),
};

/// This module, which the reclassified sockets keep loaded while they use its lock keys.
pub(crate) static THIS: ThisModule = <crate::RsiwModule as kernel::ModuleMetadata>::THIS_MODULE;

/// How long an initiator waits for the TCP handshake and the MPA Reply (`MPAREQ_TIMEOUT`).
const REPLY_TIMEOUT: Delta = Delta::from_secs(10);

/// How long `iw_connect` waits for the TCP handshake before it leaves the rest to the work
/// item: about one initial retransmission timeout.
const CONNECT_WAIT_MS: u32 = 1000;
/// How long a responder waits for the MPA Request after accepting the TCP connection.
const REQUEST_TIMEOUT: Delta = Delta::from_secs(5);

/// The longest `established_delay_ms` honoured.
const MAX_ESTABLISHED_DELAY_MS: u32 = 1000;

/// What the module parameters ask for (see `rsiw.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    /// Highest MPA revision to use (1 or 2).
    pub(crate) mpa_rev: u8,
    /// Ask for (and always answer with) MPA CRC.
    pub(crate) crc_required: bool,
    /// Refuse peers that ask for CRC when `crc_required` is off.
    pub(crate) crc_strict: bool,
    /// Ask for the peer-to-peer model as initiator.
    pub(crate) p2p: bool,
    /// RTR kinds offered (initiator) or accepted (responder).
    pub(crate) rtr: RtrSet,
    /// Responder: adopt a lower initiator IRD instead of rejecting (siw's
    /// `relaxed_ird_negotiation`); initiator: accept a responder IRD below our ORD.
    pub(crate) relaxed_ird: bool,
    /// Initiator: how long the ULP waits for the connect reply after the MPA Reply.
    pub(crate) established_delay: Delta,
}

impl Policy {
    /// Reads the module parameters.
    pub(crate) fn get() -> Self {
        use crate::module_parameters as p;
        let rtr = p::rtr_type.value();
        Self {
            mpa_rev: p::mpa_version.value().clamp(1, 2),
            crc_required: p::mpa_crc_required.value(),
            crc_strict: p::mpa_crc_strict.value(),
            p2p: p::peer_to_peer.value(),
            rtr: RtrSet {
                write: rtr & 1 != 0,
                read: rtr & 2 != 0,
                send: rtr & 4 != 0,
            },
            relaxed_ird: p::relaxed_ird_negotiation.value(),
            established_delay: Delta::from_millis(i64::from(
                p::established_delay_ms
                    .value()
                    .min(MAX_ESTABLISHED_DELAY_MS),
            )),
        }
    }

    /// The wire core's configuration for a connection whose ULP asked for `ird` and `ord`.
    fn local_config(&self, ird: u32, ord: u32) -> LocalConfig {
        let c = |v: u32, max: u32| v.min(max).min(u32::from(mpa::IRD_ORD_MAX)) as u16;
        let rtr = self.rtr;
        LocalConfig {
            max_rev: self.mpa_rev,
            crc: self.crc_required,
            ird: c(ird, limits::MAX_IRD),
            ord: c(ord, limits::MAX_ORD),
            max_ird: c(limits::MAX_IRD, limits::MAX_IRD),
            max_ord: c(limits::MAX_ORD, limits::MAX_ORD),
            p2p: self.p2p && !rtr.is_empty(),
            rtr,
            relaxed_ord: self.relaxed_ird,
        }
    }
}

/// Clamps an IRD/ORD value to what an iw_cm event carries.
fn ev_u8(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

// ---------------------------------------------------------------------------------------------
// Per-device state.

/// Live listeners and endpoints of a device.
struct Registry {
    listeners: KVec<Arc<Listener>>,
    /// The endpoints, by provider token.
    ceps: RBTree<usize, Arc<Cep>>,
    /// Set when the device goes away: nothing new is registered.
    dead: bool,
}

/// The connection manager's per-device state, shared by its listeners and endpoints.
#[pin_data]
pub(crate) struct CmDev {
    /// The ordered queue all CM work of the device runs on.
    queue: OwnedQueue,
    /// The next provider token (never 0).
    next_token: Atomic<usize>,
    /// Passive endpoints waiting for their MPA Request (at most `max_mpa_pending`).
    pending: Atomic<usize>,
    #[pin]
    reg: Mutex<Registry>,
    /// The endpoints bound to a QP, by QP number (for the QP's hooks). A leaf lock.
    #[pin]
    qpns: Mutex<RBTree<u32, Arc<Cep>>>,
}

impl CmDev {
    fn new_token(&self) -> usize {
        loop {
            let t = self.next_token.fetch_add(1, Relaxed);
            if t != 0 {
                return t;
            }
        }
    }

    fn register_cep(&self, cep: &Arc<Cep>) -> Result {
        // Allocated before the lock: the tree takes no allocation failure half-way.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut r = self.reg.lock();
        if r.dead {
            return Err(ENODEV);
        }
        // Tokens are unique (a 64-bit counter): nothing is replaced.
        drop(r.ceps.insert(node.into_node(cep.token, cep.clone())));
        Ok(())
    }

    fn unregister_cep(&self, cep: &Cep) -> Option<Arc<Cep>> {
        let mut r = self.reg.lock();
        let mine = matches!(r.ceps.get(&cep.token), Some(c) if core::ptr::eq(&**c, cep));
        if mine {
            r.ceps.remove(&cep.token)
        } else {
            None
        }
    }

    fn cep_by_token(&self, token: usize) -> Option<Arc<Cep>> {
        self.reg.lock().ceps.get(&token).cloned()
    }

    fn cep_by_qpn(&self, qpn: u32) -> Option<Arc<Cep>> {
        if qpn == 0 {
            return None;
        }
        self.qpns.lock().get(&qpn).cloned()
    }

    /// Binds `cep` to QP number `qpn`; `EBUSY` if another endpoint has that QP.
    fn bind_qpn(&self, cep: &Arc<Cep>, qpn: u32) -> Result {
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut m = self.qpns.lock();
        if m.get(&qpn).is_some() {
            return Err(EBUSY);
        }
        drop(m.insert(node.into_node(qpn, cep.clone())));
        cep.qpn.store(qpn, Relaxed);
        Ok(())
    }

    /// Unbinds `cep` from its QP number, if bound.
    fn unbind_qpn(&self, cep: &Cep) {
        let qpn = cep.qpn.xchg(0, Relaxed);
        if qpn == 0 {
            return;
        }
        let old = {
            let mut m = self.qpns.lock();
            let mine = matches!(m.get(&qpn), Some(c) if core::ptr::eq(&**c, cep));
            if mine {
                m.remove(&qpn)
            } else {
                None
            }
        };
        // Outside the lock: this may be the last reference but one (the caller holds one).
        drop(old);
    }

    /// Whether a listener may take one more passive endpoint (`max_mpa_pending`, 0: no
    /// limit).
    fn may_accept(&self) -> bool {
        let max = crate::module_parameters::max_mpa_pending.value() as usize;
        max == 0 || self.pending.load(Relaxed) < max
    }
}

/// The connection manager of one device; a field of [`RsiwDevice`]. Dropping it (when the
/// device is freed) closes whatever is left and waits for the CM work of the device.
pub(crate) struct DeviceCm {
    cm: Arc<CmDev>,
}

impl DeviceCm {
    /// Creates the connection manager of a device. May sleep.
    pub(crate) fn new() -> Result<Self> {
        let queue = OwnedQueue::new_ordered(c"rsiw_cm", QueueFlags::MEM_RECLAIM)?;
        let cm = Arc::pin_init(
            pin_init!(CmDev {
                queue,
                next_token: Atomic::new(1),
                pending: Atomic::new(0),
                reg <- new_mutex!(
                    Registry {
                        listeners: KVec::new(),
                        ceps: RBTree::new(),
                        dead: false,
                    },
                    "rsiw_cm_registry"
                ),
                qpns <- new_mutex!(RBTree::new(), "rsiw_cm_qpns"),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self { cm })
    }
}

impl Drop for DeviceCm {
    fn drop(&mut self) {
        // ib_core has destroyed every iw_cm id and QP of the device by now, but accepted
        // connections still in the MPA exchange, or endpoints whose close work is pending, may
        // remain. Close them all, then wait for their work.
        let (listeners, ceps) = {
            let mut r = self.cm.reg.lock();
            r.dead = true;
            (
                core::mem::take(&mut r.listeners),
                core::mem::take(&mut r.ceps),
            )
        };
        for l in listeners.iter() {
            l.shutdown();
        }
        for c in ceps.values() {
            c.teardown(None);
        }
        drop(listeners);
        drop(ceps);
        self.cm.queue.drain();
    }
}

// ---------------------------------------------------------------------------------------------
// Listeners.

/// A listening socket for one listening iw_cm id.
#[pin_data]
pub(crate) struct Listener {
    cm: Arc<CmDev>,
    /// The provider token stored in the listening id.
    token: usize,
    /// The listening id; reports `ConnectRequest`.
    id: ARef<CmId>,
    /// Connections the listener reset for `max_mpa_pending`.
    refused: Atomic<usize>,
    /// The socket, until the listener is destroyed.
    #[pin]
    sock: Mutex<Option<TcpSocket>>,
    #[pin]
    work: Work<Listener>,
}

kernel::impl_has_work! {
    impl HasWork<Self> for Listener { self.work }
}

#[vtable]
impl Callbacks for Listener {
    fn data_ready(this: ArcBorrow<'_, Self>, _sk: &mut DataReadySock<'_>) {
        // A connection is waiting; accepting may sleep.
        let _ = this.cm.queue.enqueue(Arc::from(this));
    }
}

impl WorkItem for Listener {
    type Pointer = Arc<Listener>;

    fn run(this: Arc<Listener>) {
        let sock = this.sock.lock();
        let Some(s) = sock.as_ref() else {
            return;
        };
        // Bounded: a flood of connections is served in several runs.
        for _ in 0..64 {
            match s.accept() {
                Ok(new) if !this.cm.may_accept() => this.refuse(new),
                Ok(new) => {
                    if let Err(e) = Cep::new_passive(&this, new) {
                        pr_debug!("cm: dropping a new connection: {:?}\n", e);
                    }
                }
                Err(_) => return,
            }
        }
        drop(sock);
        let _ = this.cm.queue.enqueue(this.clone());
    }
}

impl Listener {
    /// Resets a connection that would exceed `max_mpa_pending`: the flood of a peer that
    /// opens connections and never sends its MPA Request ends here, at the cost of a TCP
    /// handshake. Process context.
    fn refuse(&self, sock: TcpSocket) {
        sock.set_no_linger();
        drop(sock);
        if self.refused.fetch_add(1, Relaxed) == 0 {
            pr_info!(
                "cm: {} connections wait for their MPA Request (max_mpa_pending): resetting new ones\n",
                self.cm.pending.load(Relaxed)
            );
        }
    }

    /// Closes the listening socket; connections already accepted live on. Process context.
    fn shutdown(&self) {
        let s = self.sock.lock().take();
        // Dropping detaches the callbacks (waiting for running ones) and releases the socket.
        drop(s);
        let n = self.refused.xchg(0, Relaxed);
        if n != 0 {
            pr_info!("cm: a listener reset {} connections (max_mpa_pending)\n", n);
        }
    }
}

/// Creates the socket of a new endpoint or listener for `addr`'s family, in the caller's
/// network namespace, with the CM's lockdep classes.
fn new_socket(addr: &SocketAddr) -> Result<TcpSocket> {
    let mut s = TcpSocket::new(Family::of(addr))?;
    s.reclassify(&THIS, &SOCK_CLASS_V4, &SOCK_CLASS_V6)?;
    Ok(s)
}

/// A socket for an active connection from `laddr` to `raddr`, bound and not connected.
fn active_socket(id: &CmId, laddr: &SocketAddr, raddr: &SocketAddr) -> Result<TcpSocket> {
    let s = new_socket(raddr)?;
    s.set_reuseaddr();
    if matches!(raddr, SocketAddr::V6(_)) && id.afonly() {
        s.set_v6only()?;
    }
    s.set_nodelay();
    // As on the passive side: detect a peer that died silently.
    s.set_keepalive();
    // As on the passive side: storage ULPs send over it from the memory reclaim path.
    s.set_allocation(GFP_NOIO);
    s.bind(laddr)?;
    Ok(s)
}

/// `iw_create_listen`: listens on `id`'s address; a wildcard address only takes connections
/// that arrive on the device's net device, as in `siw`.
pub(crate) fn create_listen(dev: &Device<RsiwDevice>, id: &CmId, backlog: u32) -> Result {
    let cm = &dev.cm.cm;
    let addr = id.mapped_local_addr()?;
    let s = new_socket(&addr)?;
    s.set_reuseaddr();
    if matches!(addr, SocketAddr::V6(_)) && id.afonly() {
        s.set_v6only()?;
    }
    if addr.ip().is_unspecified() {
        let ndev = dev.netdev(limits::PORT).ok_or(ENODEV)?;
        s.bind_to_ifindex(ndev.ifindex())?;
    }
    s.bind(&addr)?;
    s.listen(backlog.max(1))?;
    let l = Arc::pin_init(
        pin_init!(Listener {
            cm: cm.clone(),
            token: cm.new_token(),
            id: ARef::from(id),
            refused: Atomic::new(0),
            sock <- new_mutex!(None, "rsiw_listener_sock"),
            work <- new_work!("rsiw_listener_work"),
        }),
        GFP_KERNEL,
    )?;
    s.attach(l.clone())?;
    *l.sock.lock() = Some(s);
    {
        let mut r = cm.reg.lock();
        if r.dead {
            drop(r);
            l.shutdown();
            return Err(ENODEV);
        }
        if let Err(e) = r.listeners.push(l.clone(), GFP_KERNEL) {
            drop(r);
            l.shutdown();
            return Err(e.into());
        }
    }
    id.set_provider_token(l.token);
    // Connections that completed between listen() and attach() signalled nobody.
    let _ = cm.queue.enqueue(l);
    Ok(())
}

/// `iw_destroy_listen`: closes the listener and the connections it accepted that were not yet
/// handed to the iw_cm.
pub(crate) fn destroy_listen(dev: &Device<RsiwDevice>, id: &CmId) -> Result {
    let cm = &dev.cm.cm;
    let token = id.provider_token();
    let l = {
        let mut r = cm.reg.lock();
        let i = r.listeners.iter().position(|l| l.token == token);
        i.and_then(|i| r.listeners.remove(i).ok())
    };
    let Some(l) = l else {
        return Ok(());
    };
    l.shutdown();
    // Endpoints still waiting for their MPA Request belong to the listener.
    let orphans: KVec<Arc<Cep>> = {
        let r = cm.reg.lock();
        let mut v = KVec::new();
        for c in r.ceps.values() {
            if c.listener_token == token {
                v.push(c.clone(), GFP_KERNEL)?;
            }
        }
        v
    };
    for c in orphans.iter() {
        let mut g = c.inner.lock();
        if g.state == State::AwaitRequest {
            c.close_locked(&mut g, None);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Connection endpoints.

/// The state of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Active: the TCP handshake is under way.
    Connecting,
    /// Active: the MPA Request was sent; waiting for the Reply.
    AwaitReply,
    /// Passive: the TCP connection was accepted; waiting for the MPA Request.
    AwaitRequest,
    /// Passive: the Request was handed to the iw_cm; waiting for accept or reject.
    RecvdRequest,
    /// Passive, peer-to-peer: accepted, waiting for the initiator's RTR.
    AwaitRtr,
    /// Connected: the QP is in RTS and the data path owns the stream.
    Rdma,
    /// Closed: nothing left.
    Closed,
}

/// Events recorded by callbacks, timers and [`Cep::disconnect`] for the work item.
mod ev {
    /// The socket may hold MPA bytes.
    pub(super) const DATA: u32 = 1 << 0;
    /// The TCP state changed (connected, or the peer closed).
    pub(super) const STATE: u32 = 1 << 1;
    /// A socket error was reported.
    pub(super) const ERROR: u32 = 1 << 2;
    /// The MPA timer fired.
    pub(super) const TIMEOUT: u32 = 1 << 3;
    /// The QP asks for a graceful close.
    pub(super) const CLOSE: u32 = 1 << 4;
    /// The QP asks for an abortive close.
    pub(super) const ABORT: u32 = 1 << 5;
    /// The data path received the peer's RTR.
    pub(super) const RTR: u32 = 1 << 6;
}

/// What callbacks record: pending events.
struct Fast {
    pending: u32,
}

/// The parts of an endpoint that the work item and the iw_cm operations use.
struct Inner {
    state: State,
    sock: Option<Arc<TcpSocket>>,
    /// The iw_cm id of the connection (active: from `iw_connect`; passive: from `iw_accept`).
    id: Option<ARef<CmId>>,
    /// Passive, until the Request is handed over: the listener.
    listener: Option<Arc<Listener>>,
    qp: Option<ARef<Qp<RsiwDevice>>>,
    reader: Option<KBox<FrameReader>>,
    /// The configuration of the exchange (initiator: the one the Request was built from).
    cfg: LocalConfig,
    /// Passive: the Request's header and private data (enhanced data included).
    req_hdr: Option<FrameHeader>,
    req_pd: KVec<u8>,
    /// The data path, once connected.
    conn: Option<Arc<Conn>>,
    /// The MPA timer, while armed.
    timer: Option<ArcHrTimerHandle<Cep>>,
    /// The negotiated IRD and ORD, reported in the events.
    ird: u32,
    ord: u32,
    /// Close with a RST instead of a FIN.
    abort: bool,
    /// Passive: counted in [`CmDev::pending`] (waiting for the MPA Request).
    pending: bool,
    /// Active, `established_delay_ms`: the connection is in RDMA mode and the connect reply,
    /// with the responder's private data, waits for the MPA timer.
    held_reply: Option<KVec<u8>>,
}

/// A connection endpoint.
#[pin_data]
pub(crate) struct Cep {
    cm: Arc<CmDev>,
    /// The provider token (passive: the new iw_cm id's `provider_data`).
    token: usize,
    /// Passive: the token of the listener that accepted it; 0 for active endpoints.
    listener_token: usize,
    active: bool,
    /// The QP number once bound, for the QP's hooks.
    qpn: Atomic<u32>,
    #[pin]
    fast: SpinLockIrq<Fast>,
    /// The data path once established, for the socket callbacks: looked up under RCU on every
    /// received segment.
    conn: RcuArc<Conn>,
    #[pin]
    inner: Mutex<Inner>,
    /// Signalled when an active endpoint leaves [`State::Connecting`].
    #[pin]
    left_connecting: CondVar,
    #[pin]
    timer: HrTimer<Cep>,
    #[pin]
    work: Work<Cep>,
}

kernel::impl_has_work! {
    impl HasWork<Self> for Cep { self.work }
}

kernel::impl_has_hr_timer! {
    impl HasHrTimer<Self> for Cep {
        mode: RelativeSoftMode<Monotonic>,
        field: self.timer
    }
}

impl HrTimerCallback for Cep {
    type Pointer<'a> = Arc<Cep>;

    fn run(this: ArcBorrow<'_, Cep>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        Cep::raise(this, ev::TIMEOUT);
        HrTimerRestart::NoRestart
    }
}

impl WorkItem for Cep {
    type Pointer = Arc<Cep>;

    fn run(this: Arc<Cep>) {
        this.process();
    }
}

#[vtable]
impl Callbacks for Cep {
    fn data_ready(this: ArcBorrow<'_, Self>, sk: &mut DataReadySock<'_>) {
        let rcu = rcu::read_lock();
        match this.conn.get(&rcu) {
            Some(c) => Conn::data_ready(c, sk),
            None => Self::raise(this, ev::DATA),
        }
    }

    fn write_space(this: ArcBorrow<'_, Self>, sk: &CallbackSock<'_>) {
        let rcu = rcu::read_lock();
        if let Some(c) = this.conn.get(&rcu) {
            Conn::write_space(c, sk);
        }
    }

    fn state_change(this: ArcBorrow<'_, Self>, _sk: &CallbackSock<'_>) {
        Self::raise(this, ev::STATE);
    }

    fn error_report(this: ArcBorrow<'_, Self>, _sk: &CallbackSock<'_>) {
        Self::raise(this, ev::ERROR);
    }
}

impl Endpoint for Cep {
    fn disconnect(self: ArcBorrow<'_, Self>, abortive: bool) {
        Self::raise(self, if abortive { ev::ABORT } else { ev::CLOSE });
    }

    /// The data path received the initiator's RTR (passive, peer-to-peer): the connection is
    /// established.
    fn rtr_received(self: ArcBorrow<'_, Self>) {
        Self::raise(self, ev::RTR);
    }
}

impl Cep {
    fn alloc(
        cm: &Arc<CmDev>,
        active: bool,
        listener_token: usize,
        cfg: LocalConfig,
    ) -> Result<Arc<Self>> {
        let state = if active {
            State::Connecting
        } else {
            State::AwaitRequest
        };
        Arc::pin_init(
            pin_init!(Cep {
                cm: cm.clone(),
                token: cm.new_token(),
                listener_token,
                active,
                qpn: Atomic::new(0),
                fast <- new_spinlock_irq!(Fast { pending: 0 }, "rsiw_cep_fast"),
                conn: RcuArc::new(None),
                inner <- new_mutex!(
                    Inner {
                        state,
                        sock: None,
                        id: None,
                        listener: None,
                        qp: None,
                        reader: None,
                        cfg,
                        req_hdr: None,
                        req_pd: KVec::new(),
                        conn: None,
                        timer: None,
                        ird: 0,
                        ord: 0,
                        abort: false,
                        pending: false,
                        held_reply: None,
                    },
                    "rsiw_cep"
                ),
                left_connecting <- new_condvar!("rsiw_cep_connecting"),
                timer <- HrTimer::new(),
                work <- new_work!("rsiw_cep_work"),
            }),
            GFP_KERNEL,
        )
    }

    /// Records `events` and queues the work item. Any context but hard IRQ.
    fn raise(this: ArcBorrow<'_, Self>, events: u32) {
        this.fast.lock().pending |= events;
        // Fails only if it is already queued, and then it will see the events.
        let _ = this.cm.queue.enqueue(Arc::from(this));
    }

    /// Closes the connection: gracefully (FIN after what was queued) or abortively. Any
    /// context; the close runs in the CM's work item, which reports `Close` to the iw_cm, moves
    /// the QP to ERROR and stops the data path.
    pub(crate) fn disconnect(self: &Arc<Self>, abortive: bool) {
        Self::raise(
            self.as_arc_borrow(),
            if abortive { ev::ABORT } else { ev::CLOSE },
        );
    }

    fn arm_timer(self: &Arc<Self>, g: &mut Inner, t: Delta) {
        // Dropping an old handle cancels that timer (never from its own callback: it only
        // queues work).
        g.timer = Some(self.clone().start(t));
    }

    /// Creates a passive endpoint for a connection `l` accepted.
    fn new_passive(l: &Arc<Listener>, sock: TcpSocket) -> Result {
        let cfg = Policy::get().local_config(limits::MAX_IRD, limits::MAX_ORD);
        let cep = Self::alloc(&l.cm, false, l.token, cfg)?;
        sock.set_nodelay();
        // A peer that dies silently (power off, link down) must not leave an idle QP
        // connected forever: keepalive probes fail the socket, which fails the QP.
        sock.set_keepalive();
        // Storage ULPs (NVMe-oF, NFS, rnbd) send over it from the memory reclaim path: its
        // buffers must not be allocated by starting IO that may need this connection.
        sock.set_allocation(GFP_NOIO);
        let sock = Arc::new(sock, GFP_KERNEL)?;
        let reader = KBox::new(FrameReader::new(FrameKind::Request), GFP_KERNEL)?;
        // Everything that can fail before the endpoint is registered; after it, every failure
        // goes through `close_locked`, which unregisters it.
        l.cm.register_cep(&cep)?;
        {
            let mut g = cep.inner.lock();
            g.pending = true;
            l.cm.pending.fetch_add(1, Relaxed);
            g.listener = Some(l.clone());
            g.reader = Some(reader);
            g.sock = Some(sock.clone());
            if let Err(e) = sock.attach(cep.clone()) {
                cep.close_locked(&mut g, None);
                return Err(e);
            }
            cep.arm_timer(&mut g, REQUEST_TIMEOUT);
        }
        // The Request may have arrived before the callbacks were attached.
        Self::raise(cep.as_arc_borrow(), ev::DATA | ev::STATE);
        Ok(())
    }

    /// The work item: handles the recorded events.
    fn process(self: &Arc<Self>) {
        let events = core::mem::take(&mut self.fast.lock().pending);
        let mut g = self.inner.lock();
        if g.state == State::Closed {
            return;
        }
        if events & ev::ABORT != 0 {
            self.local_close(&mut g, true);
            return;
        }
        if events & ev::CLOSE != 0 {
            self.local_close(&mut g, false);
            return;
        }
        if events & ev::STATE != 0 && g.state == State::Connecting {
            self.connected(&mut g);
        }
        if g.state != State::Connecting {
            self.left_connecting.notify_all();
        }
        if events & ev::DATA != 0 {
            self.read_mpa(&mut g);
        }
        if events & ev::RTR != 0 && g.state == State::AwaitRtr {
            self.established(&mut g);
        }
        if events & ev::TIMEOUT != 0 {
            self.timeout(&mut g);
        }
        if events & (ev::STATE | ev::ERROR) != 0 {
            self.check_socket(&mut g);
        }
    }

    /// Active: the TCP handshake ended; send the MPA Request.
    fn connected(self: &Arc<Self>, g: &mut Inner) {
        let Some(sock) = g.sock.clone() else {
            return;
        };
        if sock.state() != TcpState::ESTABLISHED {
            // Refused or failed: `check_socket` reports it.
            return;
        }
        let pd = core::mem::take(&mut g.req_pd);
        let (flags, rev, enh) = mpa::initiator_request(&g.cfg);
        let r = send_frame(&sock, FrameKind::Request, flags, rev, enh.as_ref(), &pd);
        if let Err(e) = r {
            self.fail_connect(g, e);
            return;
        }
        g.state = State::AwaitReply;
        // The Reply may already be there.
        self.read_mpa(g);
    }

    /// Reads MPA bytes, exactly up to the end of the frame, and acts on a complete frame.
    fn read_mpa(self: &Arc<Self>, g: &mut Inner) {
        if !matches!(g.state, State::AwaitReply | State::AwaitRequest) {
            return;
        }
        let (Some(sock), Some(reader)) = (g.sock.clone(), g.reader.as_mut()) else {
            return;
        };
        let mut status = ReadStatus::NeedMore;
        {
            let mut lk = sock.lock();
            let _ = lk.read_sock(|skb| {
                if status != ReadStatus::NeedMore {
                    return Ok(0);
                }
                let mut buf = [0u8; 128];
                let mut off = 0usize;
                while off < skb.len() && status == ReadStatus::NeedMore {
                    let n = (skb.len() - off).min(buf.len());
                    skb.copy_to(off, &mut buf[..n])?;
                    let (used, st) = reader.feed(&buf[..n]);
                    off += used;
                    status = st;
                    if used == 0 {
                        break;
                    }
                }
                Ok(off)
            });
        }
        match status {
            ReadStatus::NeedMore => {}
            ReadStatus::Invalid(e) => {
                pr_debug!("cm: invalid MPA frame: {:?}\n", e);
                if self.active {
                    self.fail_connect(g, EPROTO);
                } else {
                    self.close_locked(g, None);
                }
            }
            ReadStatus::Done => {
                if self.active {
                    self.got_reply(g);
                } else {
                    self.got_request(g);
                }
            }
        }
    }

    /// Passive: a complete Request arrived.
    fn got_request(self: &Arc<Self>, g: &mut Inner) {
        g.timer = None;
        let Some(reader) = g.reader.take() else {
            return;
        };
        let Some(Ok(frame)) = reader.frame() else {
            self.close_locked(g, None);
            return;
        };
        let hdr = frame.hdr;
        let policy = Policy::get();
        // Refuse what no ULP answer can fix before the ULP sees it (siw does the same).
        let refuse_crc = hdr.crc() && policy.crc_strict && !policy.crc_required;
        let Ok(pd_all) = raw_pd(&reader) else {
            self.close_locked(g, None);
            return;
        };
        let action = mpa::responder_decide(&g.cfg, &hdr, &pd_all);
        let reject = match action {
            ResponderAction::Close(_) => {
                self.close_locked(g, None);
                return;
            }
            ResponderAction::Reject {
                flags,
                rev,
                enhanced,
                ..
            } => Some((flags, rev, enhanced)),
            ResponderAction::Accept { flags, rev, .. } if refuse_crc => {
                Some((flags | mpa::FLAG_R, rev, None))
            }
            ResponderAction::Accept { .. } => None,
        };
        if let Some((flags, rev, enh)) = reject {
            if let Some(sock) = g.sock.clone() {
                let _ = send_frame(&sock, FrameKind::Reply, flags, rev, enh.as_ref(), &[]);
            }
            self.close_locked(g, None);
            return;
        }
        let Some(listener) = g.listener.take() else {
            self.close_locked(g, None);
            return;
        };
        // The ULP sees the initiator's IRD and ORD (MPA-10), as `siw` reports them.
        let (ird, ord) = match frame.enhanced {
            Some(e) => (
                u32::from(e.ird).min(limits::MAX_ORD),
                u32::from(e.ord).min(limits::MAX_IRD),
            ),
            None => (limits::MAX_ORD, limits::MAX_IRD),
        };
        // Our reject carries what we could offer: IRD at least its ORD, ORD at most its IRD.
        g.ird = ord;
        g.ord = ird;
        let ulp_pd = frame.ulp_pd;
        let pd = ulp_pd
            .get(..ulp_pd.len().min(MAX_PRIVATE_DATA))
            .unwrap_or(&[]);
        let sock = g.sock.clone();
        let (local, remote) = addrs(sock.as_deref());
        g.req_hdr = Some(hdr);
        g.req_pd = pd_all;
        g.state = State::RecvdRequest;
        self.not_pending(g);
        let r = listener.id.event(&Event {
            kind: EventKind::ConnectRequest,
            status: None,
            local,
            remote,
            private_data: pd,
            provider_token: self.token,
            ird: ev_u8(ird),
            ord: ev_u8(ord),
        });
        if r.is_err() {
            self.close_locked(g, None);
        }
    }

    /// Active: a complete Reply arrived.
    fn got_reply(self: &Arc<Self>, g: &mut Inner) {
        g.timer = None;
        let Some(reader) = g.reader.take() else {
            return;
        };
        let Some(Ok(frame)) = reader.frame() else {
            self.fail_connect(g, EPROTO);
            return;
        };
        let hdr = frame.hdr;
        let policy = Policy::get();
        let Ok(pd_all) = raw_pd(&reader) else {
            self.fail_connect(g, ENOMEM);
            return;
        };
        let action = mpa::initiator_decide(&g.cfg, &hdr, &pd_all);
        let ulp_pd = frame.ulp_pd;
        let pd = ulp_pd
            .get(..ulp_pd.len().min(MAX_PRIVATE_DATA))
            .unwrap_or(&[]);
        match action {
            InitiatorAction::Rejected { peer_ird, peer_ord } => {
                pr_info!(
                    "cm: connect rejected by the peer (MPA Reply R=1: {:?}, ird {:?} ord {:?})\n",
                    hdr,
                    peer_ird,
                    peer_ord
                );
                // The responder's values, as the ULP must see them (MPA-06).
                g.ird = peer_ird.map_or(0, u32::from);
                g.ord = peer_ord.map_or(0, u32::from);
                self.report_connect(g, Some(ECONNREFUSED), pd);
                self.close_locked(g, None);
            }
            InitiatorAction::Close(e) => {
                pr_debug!("cm: bad MPA Reply: {:?}\n", e);
                self.fail_connect(g, EPROTO);
            }
            InitiatorAction::Terminate(code) => {
                // The stream is in full operation (FPDU mode): tell the responder why with a
                // Terminate before closing (MPA-11, MPA-15, MPA-19), as siw does. Not when the
                // responder asked for Markers towards it: we cannot frame them (D-03).
                pr_info!("cm: MPA Reply refused: {:?} ({:?})\n", code, hdr);
                if let (Some(sock), false) = (g.sock.clone(), hdr.markers()) {
                    if let Err(e) = send_terminate(&sock, code, g.cfg.crc || hdr.crc()) {
                        pr_debug!("cm: Terminate not sent: {:?}\n", e);
                    }
                }
                self.fail_connect(g, ECONNREFUSED);
            }
            InitiatorAction::Established(p) => {
                if policy.crc_strict && !policy.crc_required && hdr.crc() {
                    pr_info!("cm: MPA Reply refused: CRC asked for (crc_strict)\n");
                    self.fail_connect(g, ECONNREFUSED);
                    return;
                }
                g.ird = u32::from(p.ird);
                g.ord = u32::from(p.ord);
                let cp = ConnParams {
                    rev: p.rev,
                    crc: p.crc,
                    ird: g.ird,
                    ord: g.ord,
                    initiator: true,
                    rtr: p.rtr_send,
                    rtr_offered: None,
                };
                if let Err(e) = self.go_rts(g, cp) {
                    self.fail_connect(g, e);
                    return;
                }
                // With peer-to-peer the data path sends the RTR first (Conn::start), before
                // anything the ULP posts after this event (MPA-16).
                if let Some(c) = g.conn.clone() {
                    Conn::start(&c);
                }
                // A responder such as C siw moves its QP to RTS and sends the Reply before it
                // installs its receive path, and bytes that arrive in between stay unread
                // until more come: a ULP whose first message waits for an answer (an NVMe-oF
                // Connect) then waits forever. The administrator can hold the ULP back.
                if !policy.established_delay.is_zero() {
                    let mut held = KVec::new();
                    if held.extend_from_slice(pd, GFP_KERNEL).is_ok() {
                        g.held_reply = Some(held);
                        self.arm_timer(g, policy.established_delay);
                        return;
                    }
                }
                self.report_connect(g, None, pd);
            }
        }
    }

    /// Binds the data path to the QP and moves the QP to RTS (both sides).
    fn go_rts(self: &Arc<Self>, g: &mut Inner, p: ConnParams) -> Result {
        let (Some(qp), Some(sock)) = (g.qp.clone(), g.sock.clone()) else {
            return Err(ENOTCONN);
        };
        RsiwQp::cm_establish(&qp, p.ird, p.ord)?;
        let conn = match Conn::new(qp.clone(), sock, self.clone(), p) {
            Ok(c) => c,
            Err(e) => {
                RsiwQp::set_error(&qp);
                return Err(e);
            }
        };
        g.conn = Some(conn.clone());
        // Empty until now: no grace period to wait for.
        let _ = self.conn.replace(Some(conn));
        g.state = State::Rdma;
        Ok(())
    }

    /// Reports the outcome of `iw_connect` (active).
    fn report_connect(&self, g: &mut Inner, status: Option<Error>, pd: &[u8]) {
        let Some(id) = g.id.clone() else {
            return;
        };
        let (local, remote) = addrs(g.sock.as_deref());
        let _ = id.event(&Event {
            kind: EventKind::ConnectReply,
            status,
            local,
            remote,
            private_data: pd,
            provider_token: 0,
            ird: ev_u8(g.ird),
            ord: ev_u8(g.ord),
        });
        if status.is_some() {
            // The iw_cm expects nothing more for this connection.
            g.id = None;
        }
    }

    /// Active: the connection attempt failed with `e` before it was established.
    fn fail_connect(self: &Arc<Self>, g: &mut Inner, e: Error) {
        self.report_connect(g, Some(e), &[]);
        self.close_locked(g, None);
    }

    /// Passive: the connection is established (after the Reply, or the RTR in peer-to-peer
    /// mode).
    fn established(self: &Arc<Self>, g: &mut Inner) {
        g.state = State::Rdma;
        if let Some(id) = g.id.clone() {
            let (local, remote) = addrs(g.sock.as_deref());
            let _ = id.event(&Event {
                kind: EventKind::Established,
                status: None,
                local,
                remote,
                private_data: &[],
                provider_token: 0,
                ird: ev_u8(g.ird),
                ord: ev_u8(g.ord),
            });
        }
    }

    /// The MPA timer fired.
    fn timeout(self: &Arc<Self>, g: &mut Inner) {
        g.timer = None;
        match g.state {
            State::Connecting | State::AwaitReply => self.fail_connect(g, ETIMEDOUT),
            State::AwaitRequest => self.close_locked(g, None),
            State::Rdma => {
                if let Some(pd) = g.held_reply.take() {
                    self.report_connect(g, None, &pd);
                }
            }
            _ => {}
        }
    }

    /// Looks at the socket after a state change or error: a failed connect, or the peer
    /// closed or reset the connection.
    fn check_socket(self: &Arc<Self>, g: &mut Inner) {
        let Some(sock) = g.sock.clone() else {
            return;
        };
        let st = sock.state();
        let err = sock.error();
        let gone = st == TcpState::CLOSE || st == TcpState::CLOSE_WAIT || err != 0;
        if !gone {
            return;
        }
        match g.state {
            State::Connecting | State::AwaitReply => {
                let e = if err != 0 {
                    Error::from_errno(err)
                } else {
                    ECONNRESET
                };
                pr_info!("cm: connect failed: {:?} (TCP state {:?})\n", e, st);
                self.fail_connect(g, e);
            }
            // The ULP answers with accept, which then fails (it checks the socket), or
            // reject.
            State::RecvdRequest => {}
            State::AwaitRequest => self.close_locked(g, None),
            State::AwaitRtr | State::Rdma => {
                // The iw_cm only takes a close in ESTABLISHED (it BUG()s otherwise): an
                // accepted peer-to-peer connection that dies before the RTR is reported
                // established first.
                if g.state == State::AwaitRtr {
                    self.established(g);
                }
                // A close (FIN) or a reset (RST) ends the stream after everything the peer
                // sent, which TCP keeps queued either way: place it, then report the
                // disconnect. A peer that fails the connection sends its Terminate and then
                // often a reset (a socket released with unread bytes, as the C siw's after a
                // bad FPDU): the Terminate may still wait for the work item, and it decides
                // the status of the oldest outstanding request (`completer::flush`).
                if let Some(c) = self.conn.clone_value() {
                    c.drain_rx();
                }
                // The peer closed (FIN) or reset: the iw_cm moves to CLOSING, then CLOSED.
                if let Some(id) = g.id.clone() {
                    let _ = id.event(&Event::new(EventKind::Disconnect));
                }
                self.close_locked(g, Some(EventKind::Close));
            }
            State::Closed => {}
        }
    }

    /// The QP asked to close the connection (QP to CLOSING, ERROR or TERMINATE, or destroyed).
    fn local_close(self: &Arc<Self>, g: &mut Inner, abortive: bool) {
        g.abort = abortive;
        match g.state {
            State::AwaitRtr => {
                // See `check_socket`.
                self.established(g);
                self.close_locked(g, Some(EventKind::Close));
            }
            State::Rdma => self.close_locked(g, Some(EventKind::Close)),
            State::Connecting | State::AwaitReply => self.fail_connect(g, ECONNABORTED),
            _ => self.close_locked(g, None),
        }
    }

    /// Tears the endpoint down: reports `last` (if any) to the connection's iw_cm id, stops
    /// the data path, moves the QP to ERROR, releases the socket and every reference.
    fn close_locked(self: &Arc<Self>, g: &mut Inner, last: Option<EventKind>) {
        if g.state == State::Closed {
            return;
        }
        g.state = State::Closed;
        self.not_pending(g);
        g.timer = None;
        // After a grace period: no socket callback uses the data path any more.
        let conn = self.conn.replace(None);
        let sock = g.sock.take();
        // No callback runs after this; the attachment's reference to `self` is dropped.
        if let Some(s) = &sock {
            s.detach();
        }
        let mut terminated = false;
        if let Some(c) = conn.or_else(|| g.conn.take()) {
            c.stop();
            // After `stop`: a fatal error handled meanwhile has sent its Terminate.
            terminated = c.terminated();
        }
        g.conn = None;
        self.cm.unbind_qpn(self);
        if let Some(qp) = g.qp.take() {
            RsiwQp::cm_disconnected(&qp);
        }
        if g.held_reply.take().is_some() {
            // The iw_cm still waits for the connect reply: it takes no close event before.
            self.report_connect(g, Some(ECONNRESET), &[]);
        }
        if let (Some(kind), Some(id)) = (last, g.id.as_ref()) {
            let _ = id.event(&Event::new(kind));
        }
        g.id = None;
        g.listener = None;
        g.reader = None;
        g.req_pd = KVec::new();
        // An abortive close sends a RST, which discards what TCP has not sent yet; a
        // Terminate is therefore always followed by a FIN (TERM-04). The FIN goes out now,
        // right behind what is queued. Releasing a socket with unread bytes also sends a RST:
        // nobody reads them any more, so they are discarded first. Bytes that arrive after
        // that still get the peer a RST on release, but after the Terminate and the FIN,
        // which it reads before it sees the reset.
        if let Some(s) = &sock {
            if g.abort && !terminated {
                s.set_no_linger();
            } else {
                // Fails only on a socket that never connected.
                let _ = s.shutdown(Shutdown::Write);
                discard_rx(s);
            }
        }
        drop(sock);
        drop(self.cm.unregister_cep(self));
    }

    /// A passive endpoint stops waiting for its MPA Request (it arrived, or the endpoint
    /// closes): it no longer counts against `max_mpa_pending`.
    fn not_pending(&self, g: &mut Inner) {
        if core::mem::replace(&mut g.pending, false) {
            self.cm.pending.fetch_sub(1, Relaxed);
        }
    }

    /// Closes the endpoint, from outside its work item.
    fn teardown(self: &Arc<Self>, last: Option<EventKind>) {
        let mut g = self.inner.lock();
        self.close_locked(&mut g, last);
    }
}

/// Returns the whole private data (enhanced data included) of the complete frame in `reader`,
/// as the wire core's decisions take it.
fn raw_pd(reader: &FrameReader) -> Result<KVec<u8>> {
    let mut v = KVec::new();
    if let Some(Ok(f)) = reader.frame() {
        if let Some(e) = f.enhanced {
            v.extend_from_slice(&e.encode(), GFP_KERNEL)?;
        }
        v.extend_from_slice(f.ulp_pd, GFP_KERNEL)?;
    }
    Ok(v)
}

/// Returns the local and remote address of `sock`, if connected.
fn addrs(sock: Option<&TcpSocket>) -> (Option<SocketAddr>, Option<SocketAddr>) {
    match sock {
        Some(s) => (
            s.local_addr().ok().map(unmapped),
            s.peer_addr().ok().map(unmapped),
        ),
        None => (None, None),
    }
}

/// `addr` as iw_cm users expect it: an IPv4 connection accepted on a dual-stack IPv6 listener
/// (an rdma_cm wildcard listener on `[::]`, as RTRS opens) has IPv4-mapped IPv6 socket
/// addresses, which rdma_cm would look up as IPv6 addresses of the net device and refuse;
/// they are reported as the IPv4 addresses they are, as hardware iWARP devices report them.
fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), a.port()),
            None => addr,
        },
        v4 => v4,
    }
}

/// Consumes what the peer sent and nobody will read, so that releasing `sock` does not send a
/// RST (`tcp_close()` resets a connection with unread data). Bytes that arrive after this
/// still make it one: a peer that keeps sending to a closed endpoint gets one anyway.
/// Process context.
fn discard_rx(sock: &TcpSocket) {
    let mut lk = sock.lock();
    let _ = lk.read_sock(|skb| Ok(skb.len()));
}

/// Encodes and sends an MPA frame. Process context.
fn send_frame(
    sock: &TcpSocket,
    kind: FrameKind,
    flags: u8,
    rev: u8,
    enh: Option<&mpa::Enhanced>,
    pd: &[u8],
) -> Result {
    let mut buf = KVec::from_elem(0u8, mpa::MAX_FRAME, GFP_KERNEL)?;
    let n = mpa::encode_frame(kind, flags, rev, enh, pd, &mut buf).map_err(|_| EINVAL)?;
    send_all(sock, buf.get(..n).ok_or(EINVAL)?)
}

/// Sends all of `bytes` on the connection socket (blocking; process context).
fn send_all(sock: &TcpSocket, bytes: &[u8]) -> Result {
    let mut off = 0usize;
    while off < bytes.len() {
        let rest = bytes.get(off..).ok_or(EINVAL)?;
        let sent = sock.send(&[rest], SendFlags::NOSIGNAL)?;
        if sent == 0 {
            return Err(EPIPE);
        }
        off = off.saturating_add(sent);
    }
    Ok(())
}

/// MULPDU for the setup Terminate: it fits one FPDU whatever the MSS (22-byte ULPDU).
const SETUP_TERM_MULPDU: u16 = 128;

/// Sends a Terminate FPDU with `code` and no echoed header (QN 2, MSN 1: the stream's first
/// Terminate), markers off and the MPA CRC if `crc`: the stream entered FPDU mode with the
/// Reply, but no data path is set up yet. Process context.
fn send_terminate(sock: &TcpSocket, code: TermCode, crc: bool) -> Result {
    let msg = TxMessage {
        opcode: Opcode::Terminate,
        placement: Placement::Untagged {
            inv_stag: 0,
            qn: QN_TERMINATE,
            msn: 1,
            mo: 0,
        },
        body: Body::Terminate(Terminate::bare(code)),
        payload_len: 0,
    };
    let mut seg = Segmenter::new(msg, SETUP_TERM_MULPDU).map_err(|_| EINVAL)?;
    let plan = seg.next_fpdu().ok_or(EINVAL)?;
    let (trailer, tl) = plan.crc(&KernelCrc32c, crc).trailer();
    let trailer = trailer.get(..tl).ok_or(EINVAL)?;
    let mut fpdu = KVec::with_capacity(plan.header().len().saturating_add(tl), GFP_KERNEL)?;
    fpdu.extend_from_slice(plan.header(), GFP_KERNEL)?;
    fpdu.extend_from_slice(trailer, GFP_KERNEL)?;
    send_all(sock, &fpdu)
}

// ---------------------------------------------------------------------------------------------
// The iw_cm operations.

/// `iw_connect`: connects to `id`'s remote address with the QP `param.qpn()` and sends the MPA
/// Request; the outcome is reported with `ConnectReply`.
pub(crate) fn connect(dev: &Device<RsiwDevice>, id: &CmId, param: &ConnParam<'_>) -> Result {
    let cm = &dev.cm.cm;
    let policy = Policy::get();
    let (ird, ord) = (param.ird(), param.ord());
    if ird > limits::MAX_IRD || ord > limits::MAX_ORD {
        return Err(ENOMEM);
    }
    let pd = param.private_data();
    let mut cfg = policy.local_config(ird, ord);
    let max_pd = if cfg.max_rev >= 2 {
        mpa::MAX_ULP_PD_ENHANCED
    } else {
        mpa::MAX_PD
    };
    if pd.len() > max_pd.min(MAX_PRIVATE_DATA) {
        return Err(EINVAL);
    }
    if cfg.p2p && cfg.ord == 0 && cfg.rtr.read && !cfg.rtr.write {
        // A Read RTR needs one ORD slot.
        cfg.ord = 1;
    }
    let qp = dev.qp_by_num(param.qpn()).ok_or(EINVAL)?;
    // Another process's QP, or a kernel ULP's, is refused as a QP that does not exist: the
    // number comes from the caller (user space: `rdma_connect()`'s `qp_num`).
    if !id.may_bind(&qp) {
        pr_debug!("cm: connect: QP {} is not the caller's\n", param.qpn());
        return Err(EINVAL);
    }
    if !matches!(qp.state(), QpState::Idle | QpState::Rtr) {
        return Err(EINVAL);
    }
    if cm.cep_by_qpn(param.qpn()).is_some() {
        return Err(EBUSY);
    }
    let laddr = id.mapped_local_addr()?;
    let raddr = id.mapped_remote_addr()?;
    let mut sock = Arc::new(active_socket(id, &laddr, &raddr)?, GFP_KERNEL)?;
    let cep = Cep::alloc(cm, true, 0, cfg)?;
    let reader = KBox::new(FrameReader::new(FrameKind::Reply), GFP_KERNEL)?;
    let mut req_pd = KVec::new();
    req_pd.extend_from_slice(pd, GFP_KERNEL)?;
    cm.register_cep(&cep)?;
    let mut g = cep.inner.lock();
    if let Err(e) = cm.bind_qpn(&cep, param.qpn()) {
        cep.close_locked(&mut g, None);
        return Err(e);
    }
    g.id = Some(ARef::from(id));
    g.qp = Some(qp);
    g.reader = Some(reader);
    g.req_pd = req_pd;
    g.sock = Some(sock.clone());
    let mut r = sock.attach(cep.clone()).and_then(|()| sock.connect(&raddr));
    if r == Err(EADDRNOTAVAIL) && laddr.port() != 0 {
        // The connection's TCP 4-tuple is taken. The rdma_cm lets ids with SO_REUSEADDR share
        // a port: RTRS binds each connection of a path to the address and port of its first
        // one, which TCP cannot give twice to the same peer; an earlier connection from the
        // port can also be in TIME-WAIT. Connect from an ephemeral port of the same address
        // instead; the events carry the socket's own addresses, so the rdma_cm learns it.
        sock.detach();
        let mut any = laddr;
        any.set_port(0);
        r = active_socket(id, &any, &raddr)
            .and_then(|s| Arc::new(s, GFP_KERNEL).map_err(Error::from))
            .and_then(|s| {
                sock = s;
                g.sock = Some(sock.clone());
                sock.attach(cep.clone())
            })
            .and_then(|()| sock.connect(&raddr));
    }
    match r {
        Ok(c) => {
            cep.arm_timer(&mut g, REPLY_TIMEOUT);
            if c == Connect::Done {
                cep.connected(&mut g);
            }
            // As siw (whose connect blocks), return once the MPA Request is on its way, or
            // the attempt failed, but wait no longer than about one SYN retransmission: the
            // rest is reported by events either way. Connections a ULP opens one after the
            // other then reach the peer in that order: perftest pairs its QPs by that order,
            // and a siw listener can reorder Requests that arrive back to back.
            let mut left = msecs_to_jiffies(CONNECT_WAIT_MS);
            while g.state == State::Connecting {
                match cep.left_connecting.wait_interruptible_timeout(&mut g, left) {
                    CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                    _ => break,
                }
            }
            Ok(())
        }
        Err(e) => {
            // Synchronous failure: the iw_cm gets the error from this call, not an event.
            g.id = None;
            cep.close_locked(&mut g, None);
            Err(e)
        }
    }
}

/// Finds the passive endpoint behind the iw_cm id of a connection request.
fn passive_cep(dev: &Device<RsiwDevice>, id: &CmId) -> Result<Arc<Cep>> {
    dev.cm
        .cm
        .cep_by_token(id.provider_token())
        .ok_or(ECONNRESET)
}

/// `iw_accept`: binds the QP `param.qpn()`, sends the MPA Reply and moves the QP to RTS;
/// reports `Established` (after the peer's RTR in peer-to-peer mode).
pub(crate) fn accept(dev: &Device<RsiwDevice>, id: &CmId, param: &ConnParam<'_>) -> Result {
    let cep = passive_cep(dev, id)?;
    let mut g = cep.inner.lock();
    if g.state != State::RecvdRequest {
        dev_info!(dev, "cm: accept in state {:?}\n", g.state);
        return Err(ECONNRESET);
    }
    let (ird, ord) = (param.ird(), param.ord());
    let fail = |cep: &Arc<Cep>, g: &mut Inner, e: Error| {
        dev_info!(dev, "cm: accept failed: {:?}\n", e);
        cep.close_locked(g, None);
        Err(e)
    };
    // A peer that closed or reset the connection while its Request waited for the ULP has
    // given up (before the Reply an initiator sends nothing but its Request), and its close
    // was seen in `RecvdRequest`, where nothing reports it: refuse, as siw does.
    if let Some(s) = g.sock.as_deref() {
        if s.state() != TcpState::ESTABLISHED || s.error() != 0 {
            return fail(&cep, &mut g, ECONNRESET);
        }
    }
    if ird > limits::MAX_IRD || ord > limits::MAX_ORD {
        return fail(&cep, &mut g, EINVAL);
    }
    // As in `connect`: only a QP the caller may bind.
    let Some(qp) = dev.qp_by_num(param.qpn()).filter(|qp| id.may_bind(qp)) else {
        return fail(&cep, &mut g, EINVAL);
    };
    let Some(hdr) = g.req_hdr else {
        return fail(&cep, &mut g, EINVAL);
    };
    let policy = Policy::get();
    let cfg = policy.local_config(ird, ord);
    let pd = param.private_data();
    let max_pd = if hdr.enhanced() && cfg.max_rev >= 2 {
        mpa::MAX_ULP_PD_ENHANCED
    } else {
        mpa::MAX_PD
    };
    if pd.len() > max_pd {
        return fail(&cep, &mut g, EINVAL);
    }
    let action = mpa::responder_decide(&cfg, &hdr, &g.req_pd);
    let (flags, rev, enh, p) = match action {
        ResponderAction::Accept {
            flags,
            rev,
            enhanced,
            params,
        } => (flags, rev, enhanced, params),
        ResponderAction::Reject {
            flags,
            rev,
            enhanced,
            reason,
        } => {
            dev_info!(
                dev,
                "cm: accept refused: {:?} (request {:?}, ird {} ord {})\n",
                reason,
                hdr,
                ird,
                ord
            );
            if let Some(s) = g.sock.clone() {
                let _ = send_frame(&s, FrameKind::Reply, flags, rev, enhanced.as_ref(), &[]);
            }
            return fail(&cep, &mut g, EINVAL);
        }
        ResponderAction::Close(e) => {
            dev_info!(dev, "cm: accept refused: bad request {:?}\n", e);
            return fail(&cep, &mut g, EINVAL);
        }
    };
    if let Err(e) = dev.cm.cm.bind_qpn(&cep, param.qpn()) {
        return fail(&cep, &mut g, e);
    }
    g.id = Some(ARef::from(id));
    g.qp = Some(qp);
    g.ird = u32::from(p.ird);
    g.ord = u32::from(p.ord);
    let cp = ConnParams {
        rev: p.rev,
        crc: p.crc,
        ird: g.ird,
        ord: g.ord,
        initiator: false,
        rtr: None,
        // Peer-to-peer: the initiator's first FPDU must be one of the RTRs our Reply offered.
        rtr_offered: p.p2p.then_some(p.rtr_set),
    };
    // The data path must be in place before the Reply goes out: the initiator's first FPDU
    // can follow it immediately.
    if let Err(e) = cep.go_rts(&mut g, cp) {
        g.id = None;
        return fail(&cep, &mut g, e);
    }
    let sock = g.sock.clone();
    let sent = match &sock {
        Some(s) => send_frame(s, FrameKind::Reply, flags, rev, enh.as_ref(), pd),
        None => Err(ECONNRESET),
    };
    if let Err(e) = sent {
        g.id = None;
        return fail(&cep, &mut g, e);
    }
    if p.p2p {
        // Established once the initiator's RTR arrives (MPA-16).
        g.state = State::AwaitRtr;
    } else {
        cep.established(&mut g);
    }
    if let Some(c) = g.conn.clone() {
        Conn::start(&c);
    }
    Ok(())
}

/// `iw_reject`: sends an MPA Reply with R=1 and `pdata`, then closes.
pub(crate) fn reject(dev: &Device<RsiwDevice>, id: &CmId, pdata: &[u8]) -> Result {
    let cep = passive_cep(dev, id)?;
    let mut g = cep.inner.lock();
    dev_info!(
        dev,
        "cm: reject ({} bytes of private data) in state {:?}\n",
        pdata.len(),
        g.state
    );
    if g.state != State::RecvdRequest {
        cep.close_locked(&mut g, None);
        return Err(ECONNRESET);
    }
    if let (Some(hdr), Some(s)) = (g.req_hdr, g.sock.clone()) {
        let policy = Policy::get();
        let rev = hdr.rev.min(policy.mpa_rev);
        let crc = if hdr.crc() || policy.crc_required {
            mpa::FLAG_C
        } else {
            0
        };
        // An enhanced request gets an enhanced reject with our IRD/ORD (MPA-06).
        let enh = (hdr.enhanced() && rev >= 2).then(|| mpa::Enhanced {
            ird: g.ird.min(u32::from(mpa::IRD_ORD_MAX)) as u16,
            ord: g.ord.min(u32::from(mpa::IRD_ORD_MAX)) as u16,
            p2p: false,
            rtr: RtrSet::NONE,
        });
        let max = if enh.is_some() {
            mpa::MAX_ULP_PD_ENHANCED
        } else {
            mpa::MAX_PD
        };
        let pd = pdata.get(..pdata.len().min(max)).unwrap_or(&[]);
        let _ = send_frame(
            &s,
            FrameKind::Reply,
            crc | mpa::FLAG_R,
            rev,
            enh.as_ref(),
            pd,
        );
    }
    cep.close_locked(&mut g, None);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Hooks for the QP.

/// The QP `qp` leaves RTS (to CLOSING, TERMINATE or ERROR) or is being destroyed: closes its
/// connection, if any. Process context.
pub(crate) fn qp_drop_conn(qp: &Qp<RsiwDevice>, abortive: bool) {
    if let Some(cep) = qp.device().cm.cm.cep_by_qpn(qp.qp_num()) {
        cep.disconnect(abortive);
    }
}
