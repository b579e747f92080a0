// SPDX-License-Identifier: GPL-2.0

//! The data path of a connected QP: the state shared by the TX engine ([`crate::tx`]) and the
//! RX engine ([`crate::rx`]).
//!
//! The connection manager creates a [`Conn`] once the MPA exchange succeeded
//! ([`Conn::new`], which installs it in the QP), forwards the socket's `data_ready` and
//! `write_space` callbacks to it, and calls [`Conn::start`] once the QP is in RTS and
//! [`Conn::stop`] when the connection goes away.
//!
//! # Contexts and locks
//!
//! - RX runs with the socket locked: in the socket's `data_ready` callback (softirq, or process
//!   context when TCP processes its backlog in `release_sock()`) while at most
//!   [`RX_INLINE_MAX`] bytes are queued, otherwise in the work item (`lock_sock()`). It takes
//!   the `rx` spinlock per chunk of received bytes, never across `tcp_read_sock()` (which may
//!   send an ACK), and never sleeps. What needs a sleeping lock (moving the QP to ERROR) is
//!   deferred to the work item.
//! - TX runs in the work item (`tx` mutex) on the high-priority system work queue, or in the
//!   doorbell's system call: it may sleep, and it is the only place that sends on the socket.
//!   `post_send`, `write_space` and RX (Read Requests to answer, errors to report) only queue
//!   it.
//! - `shared` (IRQ-safe spinlock) holds what both engines touch: the outstanding Read
//!   Requests (ORD), the inbound Read Requests to answer (IRD) and a pending error.
//!
//! Lock order: `tx` mutex, then the QP's `modify` mutex (via [`RsiwQp::set_error`]), then the
//! socket lock, then `rx` / `shared` / the QP's and CQs' spinlocks. The QP never calls into the
//! `Conn` with its `modify` mutex held other than to queue work.

#![allow(dead_code, reason = "the connection manager (cm.rs) calls these")]

use crate::{
    crc::KernelCrc32c,
    device::RsiwDevice,
    limits,
    qp::RsiwQp,
    rx::RxState,
    stag::PdId,
    tx::TxState,
    wire::{
        mpa::{
            RtrKind,
            RtrSet, //
        },
        rx::{
            RxConfig,
            RxParser, //
        },
        stream::{
            IrdCredits,
            OrdQueue,
            Request, //
        },
        term::Terminate,
    },
    wqe::{
        op,
        status,
        Sge, //
    },
};
use core::sync::atomic::{
    AtomicBool, AtomicU32,
    Ordering::{
        AcqRel,
        Acquire,
        Release, //
    },
};
use kernel::{
    net::tcp::{
        CallbackSock,
        DataReadySock,
        TcpSocket, //
    },
    new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    rdma::{
        attr::EventType,
        qp::Qp, //
    },
    sync::{
        aref::ARef,
        Arc,
        ArcBorrow,
        Mutex,
        SpinLockIrq, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
    workqueue::{
        self,
        Work,
        WorkItem, //
    },
};

/// The connection manager's endpoint of a connection.
pub(crate) use crate::cm::Cep;

/// The most received bytes `data_ready` places itself; with more queued it leaves them to the
/// work item.
///
/// Placing a small message at once saves a work item wakeup on its latency. Bulk data is placed
/// at the high-priority work queue's priority instead: under load the network softirq moves to
/// `ksoftirqd`, an ordinary thread that a busy-polling application (perftest, any ULP polling
/// its CQ in a loop) gets half the CPU from, and the bulk of the receive work is placement.
/// nvme-tcp receives in a high-priority work item for the same reason. Measured over a QEMU
/// link (1 vCPU per side): ib_write_bw 64 KiB 75 -> 102 MB/s (TCP on that link: 111 MB/s), while
/// placing everything in the work item lengthened 2-byte ib_write_lat by half.
pub(crate) const RX_INLINE_MAX: usize = 8192;

/// Capacity of the outstanding Read Request ring: the ORD actually used is at most this
/// (using fewer credits than the peer's IRD allows is always correct).
pub(crate) const ORQ_SIZE: usize = 64;

/// Connection parameters agreed by the MPA exchange.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnParams {
    /// MPA revision (1 or 2).
    pub(crate) rev: u8,
    /// MPA CRC in use.
    pub(crate) crc: bool,
    /// Inbound Read Requests the peer may have outstanding (our IRD).
    pub(crate) ird: u32,
    /// Outbound Read Requests we may have outstanding (our ORD).
    pub(crate) ord: u32,
    /// We initiated the connection.
    pub(crate) initiator: bool,
    /// The RTR message to send first (initiator in peer-to-peer mode).
    pub(crate) rtr: Option<RtrKind>,
    /// Responder in peer-to-peer mode: the RTR options its Reply offered. RX refuses a first
    /// FPDU that is none of them (MPA-16) and absorbs a zero-length Send RTR without a receive
    /// (MPA-17).
    pub(crate) rtr_offered: Option<RtrSet>,
}

/// What the connection refers to; taken away by [`Conn::stop`].
pub(crate) struct Links {
    pub(crate) qp: ARef<Qp<RsiwDevice>>,
    pub(crate) sock: Arc<TcpSocket>,
    pub(crate) cep: Arc<Cep>,
}

/// The local side of an outstanding Read Request (in ORD order).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OrqWr {
    /// The send queue element's id, or `None` for the RTR Read.
    pub(crate) id: Option<u64>,
    /// `SIW_OP_READ` or `SIW_OP_READ_LOCAL_INV`.
    pub(crate) opcode: u8,
    /// Complete it on success.
    pub(crate) signalled: bool,
    /// Bytes to read.
    pub(crate) len: u32,
    /// The local sink.
    pub(crate) sink: Sge,
}

/// An inbound Read Request to answer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct InRead {
    /// Data Sink STag and TO (of the peer).
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    /// Size.
    pub(crate) size: u32,
    /// Data Source STag and TO (ours; checked when the request arrived and per FPDU).
    pub(crate) src_stag: u32,
    pub(crate) src_to: u64,
}

/// A fixed-capacity FIFO.
pub(crate) struct Fifo<T: Copy + Default> {
    buf: KVec<T>,
    head: usize,
    len: usize,
}

impl<T: Copy + Default> Fifo<T> {
    fn new(cap: usize) -> Result<Self> {
        let mut buf = KVec::with_capacity(cap, GFP_KERNEL)?;
        for _ in 0..cap {
            buf.push(T::default(), GFP_KERNEL)?;
        }
        Ok(Self {
            buf,
            head: 0,
            len: 0,
        })
    }

    /// Appends `v`; fails if full.
    pub(crate) fn push(&mut self, v: T) -> Result<(), T> {
        let cap = self.buf.len();
        if self.len >= cap {
            return Err(v);
        }
        let i = self
            .head
            .wrapping_add(self.len)
            .checked_rem(cap)
            .unwrap_or(0);
        match self.buf.get_mut(i) {
            Some(s) => *s = v,
            None => return Err(v),
        }
        self.len += 1;
        Ok(())
    }

    /// Removes the oldest element.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = *self.buf.get(self.head)?;
        self.head = self
            .head
            .wrapping_add(1)
            .checked_rem(self.buf.len())
            .unwrap_or(0);
        self.len -= 1;
        Some(v)
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// State shared by RX (softirq) and TX (work).
pub(crate) struct Shared {
    /// Outstanding Read Requests (credits and response matching).
    pub(crate) ord: KBox<OrdQueue<ORQ_SIZE>>,
    /// Their local side, in the same order.
    pub(crate) orq: Fifo<OrqWr>,
    /// IRD credits of the peer's Read Requests.
    pub(crate) ird: IrdCredits,
    /// Read Requests to answer, in arrival order.
    pub(crate) irq: Fifo<InRead>,
    /// A Terminate to send before closing (RX found an error, or TX did).
    pub(crate) term: Option<Terminate>,
    /// The connection failed (our Terminate, a peer's Terminate, or a socket error): the TX
    /// work moves the QP to ERROR and aborts the connection.
    pub(crate) fatal: bool,
    /// The completion status a peer's Terminate gives the oldest outstanding Read (the one
    /// it refers to); the others are flushed.
    pub(crate) peer_term: Option<u16>,
    /// TX holds a send queue element back until a Read completes (no ORD credit, or a Read
    /// fence): a completed Read must kick TX. Otherwise RX does not wake TX for it.
    pub(crate) tx_waits_read: bool,
}

/// The data path of one connection.
#[pin_data]
pub(crate) struct Conn {
    /// QP, socket and endpoint, until [`Conn::stop`].
    #[pin]
    pub(crate) links: SpinLockIrq<Option<Links>>,
    /// The QP's PD, for the access checks.
    pub(crate) pd: PdId,
    /// The QP number (for messages).
    pub(crate) qpn: u32,
    /// MPA CRC in use.
    pub(crate) crc: bool,
    /// The ORD in use: 0 means no Read Request may be sent.
    pub(crate) ord: u32,
    /// The kernel CRC32c.
    pub(crate) crc32c: KernelCrc32c,
    /// Set by [`Conn::stop`]: nothing runs any more.
    pub(crate) stopped: AtomicBool,
    /// TX stopped on a full socket and waits for `write_space`.
    pub(crate) tx_blocked: AtomicBool,
    /// `shared.fatal`, readable without the lock: set with it (under the lock) and never
    /// cleared, so the TX pass of every message need not take `shared` to check it.
    pub(crate) fatal_hint: AtomicBool,
    /// Whether `shared.irq` is not empty, changed only under `shared` with it: TX takes the
    /// lock for a Read Request only if there is one. RX kicks TX after queueing one.
    pub(crate) irq_hint: AtomicBool,
    /// We are the responder: the first FPDU received is the peer's RTR in peer-to-peer mode,
    /// which the connection manager waits for.
    pub(crate) responder: bool,
    /// RX saw the first FPDU (responder); the work item tells the connection manager.
    pub(crate) rtr_seen: AtomicBool,
    /// `data_ready` left received bytes to the work item.
    pub(crate) rx_pending: AtomicBool,
    /// Work items queued or running.
    pub(crate) busy: AtomicU32,
    /// The TX engine.
    #[pin]
    pub(crate) tx: Mutex<TxState>,
    /// The RX engine.
    #[pin]
    pub(crate) rx: SpinLockIrq<RxState>,
    /// Shared by both.
    #[pin]
    pub(crate) shared: SpinLockIrq<Shared>,
    #[pin]
    work: Work<Conn>,
}

kernel::impl_has_work! {
    impl HasWork<Self> for Conn { self.work }
}

impl WorkItem for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        this.rx_work();
        this.tx_work();
        this.busy.fetch_sub(1, AcqRel);
    }
}

/// Returns the id the access checks use for the PD of `qp` (as `device::pd_id`).
fn qp_pd(qp: &Qp<RsiwDevice>) -> Result<PdId> {
    let pd = qp.pd().ok_or(EINVAL)?;
    Ok(PdId(pd.as_raw() as usize))
}

impl Conn {
    /// Builds the data-path state and installs it in the QP. Process context.
    pub(crate) fn new(
        qp: ARef<Qp<RsiwDevice>>,
        sock: Arc<TcpSocket>,
        cep: Arc<Cep>,
        p: ConnParams,
    ) -> Result<Arc<Conn>> {
        let pd = qp_pd(&qp)?;
        let qpn = qp.qp_num();
        pr_debug!(
            "rsiw: QP {}: data path: rev {} crc {} ird {} ord {} initiator {} rtr {:?}\n",
            qpn,
            p.rev,
            p.crc,
            p.ird,
            p.ord,
            p.initiator,
            p.rtr
        );
        // The negotiated ORD is at most the peer's IRD (MPA-11, RDMAP-07): never raise it, or
        // the peer terminates with "IRQ exceeded". With ORD 0 a Read fails at once (as in siw)
        // instead of waiting for a credit that never comes.
        let ord = p.ord.min(ORQ_SIZE as u32);
        let ird = p.ird.min(limits::MAX_IRD);
        let shared = Shared {
            ord: KBox::new(OrdQueue::new(ord as u16), GFP_KERNEL)?,
            orq: Fifo::new(ORQ_SIZE)?,
            ird: IrdCredits::new(ird as u16),
            irq: Fifo::new(ird.max(1) as usize)?,
            term: None,
            fatal: false,
            peer_term: None,
            tx_waits_read: false,
        };
        let rxcfg = RxConfig {
            crc: p.crc,
            rfc7306: false,
            commit: false,
            max_ulpdu: u16::MAX,
            siw_terminate: true,
        };
        let rx = RxState::new(
            RxParser::new(rxcfg, KernelCrc32c),
            p.rtr_offered,
            qp.clone(),
        )?;
        let tx = TxState::new(p.rtr, sock.clone())?;
        let links = Links {
            qp: qp.clone(),
            sock,
            cep,
        };
        let conn = Arc::pin_init(
            pin_init!(Conn {
                links <- new_spinlock_irq!(Some(links), "rsiw_conn_links"),
                pd,
                qpn,
                crc: p.crc,
                ord,
                crc32c: KernelCrc32c,
                stopped: AtomicBool::new(false),
                tx_blocked: AtomicBool::new(false),
                fatal_hint: AtomicBool::new(false),
                irq_hint: AtomicBool::new(false),
                responder: !p.initiator,
                rtr_seen: AtomicBool::new(false),
            rx_pending: AtomicBool::new(false),
                busy: AtomicU32::new(0),
                tx <- new_mutex!(tx, "rsiw_conn_tx"),
                rx <- new_spinlock_irq!(rx, "rsiw_conn_rx"),
                shared <- new_spinlock_irq!(shared, "rsiw_conn_shared"),
                work <- new_work!("rsiw_conn_work"),
            }),
            GFP_KERNEL,
        )?;
        let _ = p.rev;
        RsiwQp::attach_conn(&qp, conn.clone());
        Ok(conn)
    }

    /// Returns the QP, or `None` once stopped.
    pub(crate) fn qp(&self) -> Option<ARef<Qp<RsiwDevice>>> {
        self.links.lock().as_ref().map(|l| l.qp.clone())
    }

    /// Returns the socket, or `None` once stopped. Not for atomic context (the caller may
    /// drop the last reference).
    pub(crate) fn sock(&self) -> Option<Arc<TcpSocket>> {
        self.links.lock().as_ref().map(|l| l.sock.clone())
    }

    /// Returns the endpoint, or `None` once stopped. Not for atomic context.
    pub(crate) fn cep(&self) -> Option<Arc<Cep>> {
        self.links.lock().as_ref().map(|l| l.cep.clone())
    }

    /// Queues the TX work. Any context.
    pub(crate) fn kick(this: ArcBorrow<'_, Conn>) {
        if this.stopped.load(Acquire) {
            return;
        }
        this.busy.fetch_add(1, AcqRel);
        if workqueue::system_highpri()
            .enqueue(Arc::from(this))
            .is_err()
        {
            // Already queued; it will see the new work.
            this.busy.fetch_sub(1, AcqRel);
        }
    }

    /// Records a fatal error (and the Terminate to send, if any) and queues the work that
    /// moves the QP to ERROR. Any context.
    pub(crate) fn fail(this: ArcBorrow<'_, Conn>, term: Option<Terminate>) {
        {
            let mut sh = this.shared.lock();
            if !sh.fatal {
                sh.fatal = true;
                sh.term = term;
                this.fatal_hint.store(true, Release);
            }
        }
        Self::kick(this);
    }

    /// Socket callback: data arrived. Places it, or with more than [`RX_INLINE_MAX`] bytes
    /// queued leaves it to the work item. Softirq (or process context from `release_sock()`),
    /// `sk_callback_lock` held for reading; does not sleep.
    pub(crate) fn data_ready(this: ArcBorrow<'_, Conn>, sk: &mut DataReadySock<'_>) {
        if this.stopped.load(Acquire) {
            return;
        }
        if this.rx_pending.load(Acquire) {
            // The work item reads everything queued, these bytes too.
            return;
        }
        if sk.inq() > RX_INLINE_MAX {
            this.rx_pending.store(true, Release);
            Self::kick(this);
            return;
        }
        let r = sk.read_sock(|skb| Ok(crate::rx::rx_chunk(this, skb)));
        if r.is_err() {
            // A read error is the socket's; the CM sees it through state_change/error_report.
        }
    }

    /// The work item's RX: reads what `data_ready` left to it. Process context.
    fn rx_work(self: &Arc<Self>) {
        if !self.rx_pending.swap(false, AcqRel) || self.stopped.load(Acquire) {
            return;
        }
        let Some(sock) = self.sock() else {
            return;
        };
        let mut g = sock.lock();
        let b = self.as_arc_borrow();
        let _ = g.read_sock(|skb| Ok(crate::rx::rx_chunk(b, skb)));
    }

    /// The peer closed its side (FIN): places what TCP queued before the FIN, which the work
    /// item may not have read yet (bytes that arrived before the QP's RX was attached, or bulk
    /// data left to the work item). Process context.
    pub(crate) fn drain_rx(self: &Arc<Self>) {
        self.rx_pending.store(true, Release);
        self.rx_work();
    }

    /// Socket callback: send space became available. Any context; does not sleep.
    pub(crate) fn write_space(this: ArcBorrow<'_, Conn>, sk: &CallbackSock<'_>) {
        if this.tx_blocked.load(Acquire) && sk.stream_wspace() >= sk.stream_min_wspace() {
            sk.clear_nospace();
            this.tx_blocked.store(false, Release);
            Self::kick(this);
        }
    }

    /// After the QP is in RTS: has the work item process bytes already queued in the socket and
    /// start TX. Any context.
    pub(crate) fn start(this: &Arc<Conn>) {
        this.rx_pending.store(true, Release);
        Self::kick(this.as_arc_borrow());
    }

    /// The connection is going away: stops using the socket and drops the QP reference;
    /// returns when no TX/RX work runs any more. Process context.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Release);
        // No RX chunk is processed after this.
        let rx_qp = {
            let mut rx = self.rx.lock();
            rx.stopped = true;
            rx.qp.take()
        };
        drop(rx_qp);
        // Wait for a running TX work item; later ones see `stopped`.
        let mut tx = self.tx.lock();
        let tx_sock = tx.sock.take();
        let links = self.links.lock().take();
        if let Some(l) = &links {
            // Without a connection nothing the engines hold can complete any more (the QP
            // goes to ERROR, whose flush only sees the rings).
            if !tx.dead {
                tx.dead = true;
                self.flush_inflight(&l.qp, &mut tx);
            }
        }
        drop(tx);
        drop(tx_sock);
        drop(links);
        // Queued work items hold a reference to `self` and run module code: wait for them.
        let mut n = 0u32;
        while self.busy.load(Acquire) != 0 && n < 10_000 {
            fsleep(Delta::from_millis(1));
            n += 1;
        }
    }

    /// Completes everything the engines hold with `IB_WC_WR_FLUSH_ERR`: the send queue element
    /// being sent or waiting, the outstanding Reads and the receive being filled. Process
    /// context, `tx` held by the caller (`tx`).
    pub(crate) fn flush_inflight(&self, qp: &Qp<RsiwDevice>, tx: &mut TxState) {
        tx.flush(qp);
        let mut reads = KVec::<OrqWr>::new();
        let peer_term;
        {
            let mut sh = self.shared.lock();
            peer_term = sh.peer_term.take();
            sh.ord.clear();
            while let Some(w) = sh.orq.pop() {
                // Bounded by ORQ_SIZE; allocation failure only loses the flush completion.
                let _ = reads.push(w, GFP_ATOMIC);
            }
            while sh.irq.pop().is_some() {}
            self.irq_hint.store(false, Release);
        }
        for (i, w) in reads.iter().enumerate() {
            if let Some(id) = w.id {
                let st = match peer_term {
                    Some(st) if i == 0 => st,
                    _ => status::WR_FLUSH_ERR,
                };
                RsiwQp::complete_sq(qp, id, w.opcode, st, 0);
            }
        }
        let rqe = self.rx.lock().take_rqe();
        if let Some(id) = rqe {
            RsiwQp::complete_rq(qp, &crate::qp::flushed_rqe(id));
        }
    }

    /// Handles a fatal error in process context: sends the pending Terminate, moves the QP
    /// to ERROR, flushes, raises `IB_EVENT_QP_FATAL` and aborts the connection.
    pub(crate) fn fatal(&self, qp: &Qp<RsiwDevice>, tx: &mut TxState, sock: &TcpSocket) {
        if tx.dead {
            return;
        }
        tx.dead = true;
        let term = self.shared.lock().term.take();
        match &term {
            Some(t) => pr_info!(
                "rsiw: QP {}: terminating: layer {} type {} code {:#x}\n",
                self.qpn,
                t.code.layer,
                t.code.etype,
                t.code.ecode
            ),
            None => pr_info!("rsiw: QP {}: connection failed\n", self.qpn),
        }
        if let Some(t) = term {
            tx.send_terminate(self, sock, t);
        }
        RsiwQp::set_error(qp);
        self.flush_inflight(qp, tx);
        qp.dispatch_event(EventType::QP_FATAL);
        if let Some(cep) = self.cep() {
            cep.disconnect(true);
        }
    }
}

/// Returns the opcode a completion of a Read carries.
pub(crate) fn read_opcode(local_inv: bool) -> u8 {
    if local_inv {
        op::READ_LOCAL_INV
    } else {
        op::READ
    }
}

/// Records a Read Request before it is sent. Fails if no ORD credit is left.
pub(crate) fn issue_read(sh: &mut Shared, req: Request, wr: OrqWr) -> bool {
    if sh.orq.len() >= ORQ_SIZE || sh.ord.issue(req).is_err() {
        return false;
    }
    // Cannot fail: `orq` holds as many as `ord`'s ring.
    sh.orq.push(wr).is_ok()
}
