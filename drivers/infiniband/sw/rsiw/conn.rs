// SPDX-License-Identifier: GPL-2.0

//! The data path of a connected QP: its engines, the contexts they run in, and its life.
//!
//! The connection manager creates a [`Conn`] once the MPA exchange succeeded
//! ([`Conn::new`], which installs it in the QP), forwards the socket's `data_ready` and
//! `write_space` callbacks to it, and calls [`Conn::start`] once the QP is in RTS and
//! [`Conn::stop`] when the connection goes away. The connection manager's endpoint is an
//! [`Endpoint`] here: the data path tells it when the connection must close and when the
//! initiator's RTR arrived.
//!
//! The engines ([`crate::tx`], [`crate::rx`] and the roles they run, see [`crate::path`])
//! share a [`Path`].
//!
//! # Contexts and locks
//!
//! - RX runs with the socket locked: in the socket's `data_ready` callback (softirq, or process
//!   context when TCP processes its backlog in `release_sock()`) while at most
//!   [`RX_INLINE_MAX`] bytes are queued, otherwise in the work item (`lock_sock()`). It takes
//!   the `rx` spinlock per chunk of received bytes, never across `tcp_read_sock()` (which may
//!   send an ACK), and never sleeps. What needs a sleeping lock (moving the QP to ERROR) is
//!   deferred to the work item, and so is a long write-back of a Flush to persistence
//!   ([`crate::responder::DeferredFlush`]): RX stops at the Flush until the work item wrote the
//!   bytes back, with no lock held, and executed it ([`Conn::flush_work`]).
//! - TX runs in the work item (`tx` mutex) on the device's high-priority queue ([`ConnQueue`]),
//!   or in the doorbell's system call: it may sleep, and it is the only place that sends on the
//!   socket but one: `data_ready` in softirq sends the responses to small Reads and the QN 3
//!   responses while TX holds nothing ([`tx::respond_bh`]). `post_send`, `write_space` and RX
//!   (other responses, errors to report) only queue it.
//! - The path's `shared` spinlock (IRQ-safe) holds what both engines change.
//!
//! Lock order: `tx` mutex, then the QP's `modify` mutex (via [`RsiwQp::set_error`]), then the
//! socket lock, then `rx` / `shared` / the QP's and CQs' spinlocks. The QP never calls into the
//! `Conn` with its `modify` mutex held other than to queue work.
//!
//! # Life
//!
//! Work items run module code, so they run on a queue the device owns ([`ConnQueue`]), not
//! on a system queue, which nothing flushes: the device drains it when it is freed, and
//! `rmmod` waits for that. [`Conn::stop`] only keeps the work items off the QP, the socket and
//! the endpoint, and waits for a pass that may still complete receives.

use crate::{
    completer,
    crc::KernelCrc32c,
    device::RsiwDevice,
    msg::Fatal,
    path::{
        Fail,
        Path,
        PathParams,
        RxOut, //
    },
    qp::{
        QpState,
        RsiwQp, //
    },
    rx::RxState,
    stag::PdId,
    tx::{
        self,
        Pass,
        TxState,
        ZcTrack, //
    },
    wire::{
        mpa::{
            RtrKind,
            RtrSet, //
        },
        rx::{
            RxConfig,
            RxParser, //
        },
    },
};
use kernel::{
    net::{
        skb::SkbData,
        tcp::{
            CallbackSock,
            DataReadySock,
            TcpSocket, //
        },
    },
    new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    rdma::{
        attr::EventType,
        qp::Qp, //
    },
    sync::{
        aref::ARef,
        atomic::{
            Acquire,
            Atomic,
            AtomicFlag,
            Full,
            Relaxed,
            Release, //
        },
        Arc,
        ArcBorrow,
        Mutex,
        SpinLockIrq, //
    },
    time::{
        delay::fsleep,
        Delta,
        Instant,
        Monotonic, //
    },
    workqueue::{
        OwnedQueue,
        QueueFlags,
        Work,
        WorkItem, //
    },
};

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
const RX_INLINE_MAX: usize = 8192;

/// The work queue the connections of one device run their work items on; a field of
/// [`RsiwDevice`], dropped after the connection manager.
///
/// A per-CPU queue like `system_highpri`, whose latency the data path needs (see
/// [`RX_INLINE_MAX`]), with a rescuer (`WQ_MEM_RECLAIM`): NVMe-oF and NFS run over it, so it may
/// have to make progress on the memory reclaim path. It need not be ordered: a work item never
/// runs on two CPUs at once, and each connection has one.
///
/// Dropping it drains the queue: no work item of the device's connections runs afterwards,
/// not even the end of its function after [`Conn::stop`] returned, so no rsiw code runs after
/// `rmmod` (which waits for every device to be freed). By then every QP is destroyed and the
/// connection manager has stopped every connection and drained its own queue, so nothing
/// outside the queue queues work any more. Each [`Conn`] holds a reference to the queue; the
/// last one, normally the device's (no connection outlives its device), destroys it.
pub(crate) struct ConnQueue {
    queue: Arc<OwnedQueue>,
    /// How long the work items waited to run, for the device's counters.
    pub(crate) stats: Arc<WorkStats>,
}

/// How long the work items of a device's connections waited between being queued and
/// running, reported as the hardware counters of its ports (`RsiwDevice::HW_COUNTERS`).
///
/// Every deferred hop of the data path (bulk RX, Read Responses, a Read that waited for an
/// ORD credit) costs one such wait: on a vCPU where an application busy-polls its CQ, the
/// woken worker may run only when the poller's slice ends. A run counts once per queueing,
/// however many kicks it answers, from the first kick after the previous run began.
pub(crate) struct WorkStats {
    /// When the counters started: kick times are kept as nanoseconds since then.
    epoch: Instant<Monotonic>,
    /// Work item runs that had a kick time.
    runs: Atomic<u64>,
    /// The sum of their waits, in microseconds.
    wait_us: Atomic<u64>,
    /// The runs by wait: below 16, 64, 256, 1024 and 4096 microseconds, and longer.
    buckets: [Atomic<u64>; WAIT_BUCKETS],
    /// Passes of the work item that stopped at their budget and queued it again.
    budget_passes: Atomic<u64>,
    /// Deliveries whose completions freed an ORD credit a request waited for (the work item
    /// sends it).
    credit_kicks: Atomic<u64>,
    /// TX batches sent by reference (`zerocopy_min`).
    pub(crate) zc_batches: Atomic<u64>,
    /// Of those, the ones the network stack copied after all (e.g. delivered to a local
    /// socket).
    pub(crate) zc_copied: Atomic<u64>,
}

/// The number of wait buckets of [`WorkStats`]: every bucket is four times the one before,
/// from 16 microseconds.
const WAIT_BUCKETS: usize = 6;

impl WorkStats {
    fn new() -> Self {
        Self {
            epoch: Instant::now(),
            runs: Atomic::new(0),
            wait_us: Atomic::new(0),
            buckets: [const { Atomic::new(0) }; WAIT_BUCKETS],
            budget_passes: Atomic::new(0),
            credit_kicks: Atomic::new(0),
            zc_batches: Atomic::new(0),
            zc_copied: Atomic::new(0),
        }
    }

    /// Nanoseconds since [`WorkStats::epoch`], at least 1 (0 stands for no kick).
    fn now(&self) -> i64 {
        (Instant::now() - self.epoch).as_nanos().max(1)
    }

    /// Counts a run that waited since `kicked` (a value of [`WorkStats::now`]).
    fn count_run(&self, kicked: i64) {
        let us = u64::try_from((self.now() - kicked) / 1000).unwrap_or(0);
        self.runs.fetch_add(1, Relaxed);
        self.wait_us.fetch_add(us, Relaxed);
        self.buckets[wait_bucket(us)].fetch_add(1, Relaxed);
    }

    /// The counters, in the order of their names in `RsiwDevice::HW_COUNTERS`.
    pub(crate) fn values(&self) -> [u64; 6 + WAIT_BUCKETS] {
        let mut v = [0; 6 + WAIT_BUCKETS];
        v[0] = self.runs.load(Relaxed);
        v[1] = self.wait_us.load(Relaxed);
        for (v, b) in v[2..].iter_mut().zip(&self.buckets) {
            *v = b.load(Relaxed);
        }
        v[2 + WAIT_BUCKETS] = self.budget_passes.load(Relaxed);
        v[3 + WAIT_BUCKETS] = self.credit_kicks.load(Relaxed);
        v[4 + WAIT_BUCKETS] = self.zc_batches.load(Relaxed);
        v[5 + WAIT_BUCKETS] = self.zc_copied.load(Relaxed);
        v
    }
}

/// The bucket of [`WorkStats::buckets`] of a wait of `us` microseconds.
fn wait_bucket(us: u64) -> usize {
    let mut b = 0;
    let mut bound = 16;
    while b + 1 < WAIT_BUCKETS && us >= bound {
        b += 1;
        bound *= 4;
    }
    b
}

impl ConnQueue {
    /// Allocates the queue of a device. May sleep.
    pub(crate) fn new() -> Result<Self> {
        let queue = OwnedQueue::new(
            c"rsiw_conn",
            QueueFlags::PERCPU | QueueFlags::HIGHPRI | QueueFlags::MEM_RECLAIM,
            0,
        )?;
        Ok(Self {
            queue: Arc::new(queue, GFP_KERNEL)?,
            stats: Arc::new(WorkStats::new(), GFP_KERNEL)?,
        })
    }
}

impl Drop for ConnQueue {
    fn drop(&mut self) {
        self.queue.drain();
    }
}

/// The connection manager's side of a connection.
pub(crate) trait Endpoint: Send + Sync {
    /// Closes the connection: abortively, or gracefully (FIN after what was queued). Any
    /// context.
    fn disconnect(self: ArcBorrow<'_, Self>, abortive: bool);

    /// The initiator's RTR (or its first FPDU) arrived (passive side, peer-to-peer). Any
    /// context.
    fn rtr_received(self: ArcBorrow<'_, Self>);
}

/// Connection parameters agreed by the MPA exchange.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnParams {
    /// MPA revision (1 or 2).
    pub(crate) rev: u8,
    /// MPA CRC in use.
    pub(crate) crc: bool,
    /// Inbound requests the peer may have outstanding (our IRD).
    pub(crate) ird: u32,
    /// Outbound requests we may have outstanding (our ORD).
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
struct Links {
    qp: ARef<Qp<RsiwDevice>>,
    sock: Arc<TcpSocket>,
    ep: Arc<dyn Endpoint>,
}

/// The data path of one connection.
#[pin_data]
pub(crate) struct Conn {
    /// QP, socket and endpoint, until [`Conn::stop`].
    #[pin]
    links: SpinLockIrq<Option<Links>>,
    /// What the engines share.
    #[pin]
    path: Path,
    /// Set by [`Conn::stop`]: nothing runs any more.
    stopped: AtomicFlag,
    /// A Terminate was handed to TCP: the connection must end with a FIN after it, not a
    /// RST that would discard it ([`Conn::terminated`]).
    terminated: AtomicFlag,
    /// TX stopped on a full socket and waits for `write_space`.
    tx_blocked: AtomicFlag,
    /// `data_ready` left received bytes to the work item.
    rx_pending: AtomicFlag,
    /// RX stopped at a Flush whose write-back the work item does.
    flush_pending: AtomicFlag,
    /// Work items queued or running (up to the end of their passes, see [`Conn::stop`]).
    busy: Atomic<u32>,
    /// The device's connection queue ([`ConnQueue`]), which the work item runs on.
    queue: Arc<OwnedQueue>,
    /// The device's work item statistics.
    stats: Arc<WorkStats>,
    /// When the work item was queued and has not started since ([`WorkStats::now`]), or 0.
    kicked: Atomic<i64>,
    /// The TX engine.
    #[pin]
    tx: Mutex<TxState>,
    /// The TX engine's releases of batches sent by reference, which kick the work item from
    /// [`Conn::start`] to [`Conn::stop`].
    zc: Arc<ZcTrack>,
    /// The RX engine.
    #[pin]
    rx: SpinLockIrq<RxState>,
    #[pin]
    work: Work<Conn>,
}

kernel::impl_has_work! {
    impl HasWork<Self> for Conn { self.work }
}

impl WorkItem for Conn {
    type Pointer = Arc<Conn>;

    fn run(this: Arc<Conn>) {
        let kicked = this.kicked.xchg(0, Relaxed);
        if kicked != 0 {
            this.stats.count_run(kicked);
        }
        this.flush_work();
        this.rx_work();
        this.tx_work();
        this.busy.fetch_sub(1, Full);
        // From here `Conn::stop` may have returned and the connection may be freed; the rest
        // of the function is module code that only the device's queue drain waits for.
        drop(this);
        fault_work_delay();
    }
}

/// Fault injection for tests (`fault_work_delay_ms`, 0 by default): holds a work item in
/// module code after it dropped its connection, for as long as `rmmod` needs to free the
/// module if nothing waited for the work item (`tests/vm/cases/rmmod-work-delay.sh`).
fn fault_work_delay() {
    let ms = crate::module_parameters::fault_work_delay_ms.value();
    if ms != 0 {
        pr_info!("fault_work_delay_ms: a work item sleeps {} ms\n", ms);
        fsleep(Delta::from_millis(ms.into()));
    }
}

/// Returns the id the access checks use for the PD of `qp` (as `device::pd_id`).
fn qp_pd(qp: &Qp<RsiwDevice>) -> Result<PdId> {
    let pd = qp.pd().ok_or(EINVAL)?;
    Ok(PdId(pd.as_raw() as usize))
}

impl Conn {
    /// Builds the data path and installs it in the QP. Process context.
    pub(crate) fn new(
        qp: ARef<Qp<RsiwDevice>>,
        sock: Arc<TcpSocket>,
        ep: Arc<dyn Endpoint>,
        p: ConnParams,
    ) -> Result<Arc<Conn>> {
        let qpn = qp.qp_num();
        dev_dbg!(
            qp.device(),
            "QP {}: data path: rev {} crc {} ird {} ord {} initiator {} rtr {:?}\n",
            qpn,
            p.rev,
            p.crc,
            p.ird,
            p.ord,
            p.initiator,
            p.rtr
        );
        let path = Path::new(PathParams {
            pd: qp_pd(&qp)?,
            qpn,
            crc: p.crc,
            ird: p.ird,
            ord: p.ord,
            responder: !p.initiator,
        })?;
        let rxcfg = RxConfig {
            crc: p.crc,
            // A peer that sends an extension this device has not enabled gets 0/2/06.
            rfc7306: qp.device().rfc7306(),
            commit: qp.device().commit(),
            max_ulpdu: u16::MAX,
            siw_terminate: true,
        };
        let rx = RxState::new(
            RxParser::new(rxcfg, KernelCrc32c),
            p.rtr_offered,
            qp.clone(),
        );
        let queue = qp.device().conn_queue.queue.clone();
        let stats = qp.device().conn_queue.stats.clone();
        let tx = TxState::new(p.rtr, sock.clone(), stats.clone())?;
        let zc = tx.zc_track().clone();
        let links = Links {
            qp: qp.clone(),
            sock,
            ep,
        };
        let conn = Arc::pin_init(
            try_pin_init!(Conn {
                links <- new_spinlock_irq!(Some(links), "rsiw_conn_links"),
                path <- path,
                stopped: AtomicFlag::new(false),
                terminated: AtomicFlag::new(false),
                tx_blocked: AtomicFlag::new(false),
                rx_pending: AtomicFlag::new(false),
                flush_pending: AtomicFlag::new(false),
                busy: Atomic::new(0),
                queue,
                stats,
                kicked: Atomic::new(0),
                tx <- new_mutex!(tx, "rsiw_conn_tx"),
                zc,
                rx <- new_spinlock_irq!(rx, "rsiw_conn_rx"),
                work <- new_work!("rsiw_conn_work"),
            }),
            GFP_KERNEL,
        )?;
        RsiwQp::attach_conn(&qp, conn.clone());
        Ok(conn)
    }

    /// Returns the QP, or `None` once stopped.
    fn qp(&self) -> Option<ARef<Qp<RsiwDevice>>> {
        self.links.lock().as_ref().map(|l| l.qp.clone())
    }

    /// Returns the socket, or `None` once stopped. Not for atomic context (the caller may
    /// drop the last reference).
    fn sock(&self) -> Option<Arc<TcpSocket>> {
        self.links.lock().as_ref().map(|l| l.sock.clone())
    }

    /// Returns the endpoint, or `None` once stopped. Not for atomic context.
    fn endpoint(&self) -> Option<Arc<dyn Endpoint>> {
        self.links.lock().as_ref().map(|l| l.ep.clone())
    }

    /// Has the connection manager close the connection: abortively, or gracefully. Process
    /// context.
    pub(crate) fn disconnect(&self, abortive: bool) {
        if let Some(ep) = self.endpoint() {
            ep.as_arc_borrow().disconnect(abortive);
        }
    }

    /// Queues the work item. Any context.
    pub(crate) fn kick(this: ArcBorrow<'_, Conn>) {
        if this.stopped.load(Acquire) {
            return;
        }
        this.busy.fetch_add(1, Full);
        // The first kick since the run began times the wait; the run takes the time back.
        let _ = this.kicked.cmpxchg(0, this.stats.now(), Relaxed);
        if this.queue.enqueue(Arc::from(this)).is_err() {
            // Already queued; it will see the new work.
            this.busy.fetch_sub(1, Full);
        }
    }

    /// Records a fatal error (and the Terminate to send, if any) and queues the work that
    /// moves the QP to ERROR. Any context.
    fn fail(this: ArcBorrow<'_, Conn>, f: Fail) {
        this.path.set_fatal(f);
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
        // A read error is the socket's; the CM sees it through state_change/error_report.
        let mut respond = None;
        let _ = sk.read_sock(|skb| Ok(Self::rx_chunk(this, skb, Some(&mut respond))));
        // Responses to small Reads and QN 3 responses go from here, without waking the work
        // item for them.
        if let Some(qp) = respond {
            if !tx::respond_bh(&this.path, &qp, sk) {
                Self::kick(this);
            }
        }
    }

    /// The read actor: runs the RX engine on a run of received bytes, then posts what it
    /// completed and reports errors. Returns how many bytes were consumed; `tcp_read_sock()`
    /// calls again for the rest. Atomic context.
    ///
    /// Responses to send are left to the caller if `respond` is given (the QP goes there),
    /// else TX is kicked for them.
    fn rx_chunk(
        this: ArcBorrow<'_, Conn>,
        skb: &SkbData<'_>,
        respond: Option<&mut Option<ARef<Qp<RsiwDevice>>>>,
    ) -> usize {
        let mut out = RxOut::new();
        let Some((consumed, qp)) = this.rx.lock().chunk(&this.path, skb, &mut out) else {
            return 0;
        };
        Self::rx_report(this, &qp, &out, respond);
        consumed
    }

    /// Reports what an RX pass did (`out`): delivers completed requests, posts the receive
    /// completions, records a failure, or kicks the work item for what it has to do (a Flush
    /// to execute, something to send). Any context; does not sleep.
    ///
    /// Responses to send are left to the caller if `respond` is given (the QP goes there),
    /// else TX is kicked for them.
    fn rx_report(
        this: ArcBorrow<'_, Conn>,
        qp: &ARef<Qp<RsiwDevice>>,
        out: &RxOut,
        respond: Option<&mut Option<ARef<Qp<RsiwDevice>>>>,
    ) {
        if out.defer {
            this.flush_pending.store(true, Release);
        }
        let kick = out.deliver && completer::deliver(&this.path, qp);
        if kick {
            this.stats.credit_kicks.fetch_add(1, Relaxed);
        }
        for c in out.rq() {
            RsiwQp::complete_rq(qp, c);
        }
        if let Some(f) = out.fail {
            Self::fail(this, f);
        } else if kick || out.kick || out.defer {
            Self::kick(this);
        } else if out.respond {
            match respond {
                Some(r) => *r = Some(qp.clone()),
                None => Self::kick(this),
            }
        }
    }

    /// The work item's part of a Flush to persistence RX stopped at
    /// ([`crate::responder::DeferredFlush`]): writes its bytes back here, in process context
    /// with no lock held, executes it under the RX engine's lock, and has RX go on past it
    /// (the bytes after the Flush are still in the socket: [`Conn::rx_work`] reads them next).
    /// The write-back stops early once the connection stops. Process context.
    fn flush_work(self: &Arc<Self>) {
        if !self.flush_pending.xchg(false, Full) || self.stopped.load(Acquire) {
            return;
        }
        let Some(d) = self.rx.lock().take_flush() else {
            return;
        };
        let written = crate::responder::write_back_deferred(&d, || self.stopped.load(Acquire));
        let mut out = RxOut::new();
        let qp = self.rx.lock().flush_done(&self.path, written, &mut out);
        // The region reference goes here, not under the engine's lock.
        drop(d);
        self.rx_pending.store(true, Release);
        if let Some(qp) = qp {
            Self::rx_report(self.as_arc_borrow(), &qp, &out, None);
        }
    }

    /// The work item's RX: reads what `data_ready` left to it. Process context.
    fn rx_work(self: &Arc<Self>) {
        if !self.rx_pending.xchg(false, Full) || self.stopped.load(Acquire) {
            return;
        }
        let Some(sock) = self.sock() else {
            return;
        };
        let mut g = sock.lock();
        let b = self.as_arc_borrow();
        let _ = g.read_sock(|skb| Ok(Self::rx_chunk(b, skb, None)));
    }

    /// The peer closed its side (FIN) or reset the connection (RST): places what TCP queued
    /// before, which the work item may not have read yet (bytes that arrived before the QP's
    /// RX was attached, or bulk data left to the work item). Process context.
    pub(crate) fn drain_rx(self: &Arc<Self>) {
        // A Flush RX stopped at first, unless the work item is executing it (then it reads
        // the rest after it).
        self.flush_work();
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
        {
            let mut c = this.zc.conn.lock();
            // Not after `stop` took it (it sets `stopped` before): that reference would never
            // be dropped.
            if !this.stopped.load(Acquire) {
                *c = Some(this.clone());
            }
        }
        this.rx_pending.store(true, Release);
        Self::kick(this.as_arc_borrow());
    }

    /// The connection is going away: stops using the socket and drops the QP reference;
    /// returns when no TX/RX pass runs any more. Process context, not from the work item.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Release);
        // No RX chunk is processed after this.
        let rx_qp = self.rx.lock().stop();
        drop(rx_qp);
        // Wait for a running TX work item; later ones see `stopped`.
        let mut tx = self.tx.lock();
        let tx_sock = tx.take_sock();
        let links = self.links.lock().take();
        if let Some(l) = &links {
            // Without a connection nothing the engines hold can complete any more (the QP
            // goes to ERROR, whose flush only sees the rings).
            if tx.kill() {
                self.flush_inflight(&l.qp, &mut tx);
            }
        }
        drop(tx);
        drop(tx_sock);
        drop(links);
        // Releases of batches TCP still holds kick nothing any more.
        drop(self.zc.set_conn(None));
        // A work item that started before `stopped` was set may still be in `rx_work`, placing
        // and completing receives: wait for it, so that nothing completes after the flush
        // above. Work items queued later see `stopped` and do nothing. The end of the work
        // function, after its last decrement, is not waited for here: that is module code only,
        // which the device's queue drain waits for ([`ConnQueue`]).
        //
        // The wait has no bound, and ends: the work item sleeps only on the `tx` mutex, the
        // QP's `modify` mutex and the socket lock, none of which the callers hold (they hold at
        // most the endpoint's mutex, which the work item never takes: it reports to the
        // endpoint by queueing the endpoint's work), and ULP handlers it calls (completions,
        // QP events) must not sleep. The warning reports a hang; it does not end the wait.
        let mut ms = 0u32;
        while self.busy.load(Acquire) != 0 {
            if ms == 10_000 {
                pr_warn!(
                    "QP {}: stopping: a work item still runs after 10 s\n",
                    self.path.qpn()
                );
            }
            fsleep(Delta::from_millis(1));
            ms = ms.saturating_add(1);
        }
    }

    /// Completes everything the engines hold with `IB_WC_WR_FLUSH_ERR`, in send queue order:
    /// the messages being sent, the outstanding requests, the element waiting; and the
    /// receive being filled. Drops the inbound requests. Process context, `tx` held by the
    /// caller.
    fn flush_inflight(&self, qp: &Qp<RsiwDevice>, tx: &mut TxState) {
        completer::flush(&self.path, qp);
        tx.flush(qp);
        self.path.drain_inbound();
        let rqes = self.rx.lock().take_rqe();
        for id in rqes.into_iter().flatten() {
            RsiwQp::complete_rq(qp, &crate::qp::flushed_rqe(id));
        }
    }

    /// Handles a fatal error in process context: sends the pending Terminate, moves the QP
    /// to ERROR, flushes, raises `IB_EVENT_QP_FATAL` and closes the connection (after the
    /// Terminate; abortively if there was none).
    fn fatal(&self, qp: &Qp<RsiwDevice>, tx: &mut TxState, sock: &TcpSocket) {
        if !tx.kill() {
            return;
        }
        let term = self.path.take_terminate();
        match &term {
            Some(t) => dev_info!(
                qp.device(),
                "QP {}: terminating: layer {} type {} code {:#x}\n",
                self.path.qpn(),
                t.code.layer,
                t.code.etype,
                t.code.ecode
            ),
            None => dev_info!(qp.device(), "QP {}: connection failed\n", self.path.qpn()),
        }
        if let Some(t) = term {
            tx.send_terminate(&self.path, qp, sock, t);
            self.terminated.store(true, Release);
        }
        RsiwQp::set_error(qp);
        self.flush_inflight(qp, tx);
        qp.dispatch_event(EventType::QP_FATAL);
        // The Terminate must reach the peer before the connection ends (TERM-04): a graceful
        // close, which sends the FIN after it. Without one, abort.
        self.disconnect(!self.terminated());
    }

    /// Returns true once a Terminate was sent: closing the connection then sends a FIN after
    /// it, even if the close was asked to be abortive. Any context.
    pub(crate) fn terminated(&self) -> bool {
        self.terminated.load(Acquire)
    }

    /// The work item: sends what there is to send, or handles a fatal error. Process context.
    fn tx_work(self: &Arc<Self>) {
        if self.stopped.load(Acquire) {
            return;
        }
        let Some(qp) = self.qp() else {
            return;
        };
        self.tx_pass(&qp, false);
    }

    /// Sends in the calling context: the doorbell of a user QP, as `siw_post_send()` does
    /// for user QPs (`in_syscall`). This saves the work queue's wakeup on every message, the
    /// bulk of the small-message latency. If the work item holds the engine, or the socket
    /// is full, the work item (now or after `write_space`) sends instead. Process context,
    /// may sleep.
    ///
    /// `qp` is the doorbell's QP, which the caller holds; the socket is the engine's.
    pub(crate) fn tx_inline(self: &Arc<Self>, qp: &Qp<RsiwDevice>) {
        if self.tx_blocked.load(Acquire) || self.stopped.load(Acquire) {
            return;
        }
        self.tx_pass(qp, true);
    }

    /// One pass of the TX engine: the work item, or `inline` from [`Conn::tx_inline`].
    fn tx_pass(self: &Arc<Self>, qp: &Qp<RsiwDevice>, inline: bool) {
        let mut tx = if inline {
            match self.tx.try_lock() {
                Some(g) => g,
                None => {
                    // The work item (or `stop`) holds the engine: make sure the work item
                    // runs once more for what was just posted.
                    Conn::kick(self.as_arc_borrow());
                    return;
                }
            }
        } else {
            self.tx.lock()
        };
        if self.stopped.load(Acquire) || tx.is_dead() {
            return;
        }
        // Out of the engine for the pass, and back after it: `stop` takes it under the mutex
        // this pass holds.
        let Some(sock) = tx.take_sock() else {
            return;
        };
        self.tx_pass_locked(qp, &mut tx, &sock);
        tx.put_sock(sock);
    }

    fn tx_pass_locked(self: &Arc<Self>, qp: &Qp<RsiwDevice>, tx: &mut TxState, sock: &TcpSocket) {
        if self.path.is_fatal() {
            self.fatal(qp, tx, sock);
            return;
        }
        if self.path.take_rtr_seen() {
            if let Some(ep) = self.endpoint() {
                ep.as_arc_borrow().rtr_received();
            }
        }
        match qp.state() {
            QpState::Error => {
                if tx.kill() {
                    self.flush_inflight(qp, tx);
                }
                return;
            }
            QpState::Rts | QpState::Closing => {}
            _ => return,
        }
        let r = {
            let mut g = sock.lock();
            tx.run(&self.path, qp, sock, &mut g)
        };
        match r {
            Ok(Pass::Idle) => {}
            Ok(Pass::Budget) => {
                self.stats.budget_passes.fetch_add(1, Relaxed);
                Conn::kick(self.as_arc_borrow());
            }
            Ok(Pass::Blocked) => {
                self.tx_blocked.store(true, Release);
                // `write_space` may have run before the flag was set.
                if sock.stream_wspace() >= sock.stream_min_wspace() {
                    self.tx_blocked.store(false, Release);
                    Conn::kick(self.as_arc_borrow());
                }
            }
            Err(f) => self.pass_failed(qp, tx, sock, f),
        }
    }

    /// A pass found a fatal error: completes its work request, records the error (and its
    /// Terminate) and handles it.
    #[cold]
    #[inline(never)]
    fn pass_failed(&self, qp: &Qp<RsiwDevice>, tx: &mut TxState, sock: &TcpSocket, f: Fatal) {
        if let Some(c) = f.wr {
            RsiwQp::complete_sq(qp, c);
        }
        self.path.set_fatal(f.fail);
        self.fatal(qp, tx, sock);
    }
}
