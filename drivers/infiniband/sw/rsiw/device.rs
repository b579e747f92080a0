// SPDX-License-Identifier: GPL-2.0

//! The rsiw RDMA device: one iWARP device per net device.
//!
//! A device is created with `rdma link add <name> type rsiw netdev <if>` ([`RsiwLink`]) and
//! removed with `rdma link delete <name>` (by ib_core), when its net device is unregistered
//! ([`NetdevEvents`]) or when the module is unloaded (the fence of the link registration).

use crate::{
    abi::{
        self,
        UreqAllocCtx,
        UrespAllocCtx,
        UrespAllocCtxExt, //
    },
    cm,
    conn,
    cq::RsiwCq,
    limits,
    mem::{
        self,
        MemTable,
        RsiwMr,
        UrespRegMr, //
    },
    qp::RsiwQp,
    srq::RsiwSrq,
    stag::PdId, //
};
use kernel::{
    cpu,
    mm::pmem,
    net::{
        device::{
            random_ether_addr,
            HwType,
            NetDevice,
            ETH_ALEN, //
        },
        notifier::{
            self,
            Event, //
        },
    },
    prelude::*,
    rbtree::{
        Entry,
        RBTree,
        RBTreeNodeReservation, //
    },
    rdma::{
        attr::{
            AtomicCap,
            CoreCapFlags,
            DeviceAttr,
            DeviceCapFlag,
            DeviceCapFlags,
            EventType,
            Gid,
            KernelCapFlag,
            Mtu,
            PortAttr,
            PortCapFlag,
            PortImmutable,
            PortState, //
        },
        cq::{
            self,
            Cq,
            CqInitAttr,
            CqNotifyFlags,
            Wc, //
        },
        device::{
            Device,
            Driver,
            DriverId,
            HwCounter,
            NodeType,
            UnregisteredDevice,
            UverbsCmd, //
        },
        iwcm::{
            self,
            CmId,
            ConnParam,
            IwFlag, //
        },
        link::{
            LinkOps,
            NewLink, //
        },
        mr::{
            self,
            AccessFlags,
            KernelVa,
            MapStep,
            Mr,
            MrType, //
        },
        pd::{
            self,
            Pd, //
        },
        qp::{
            self,
            Qp,
            QpAttr,
            QpAttrMask,
            QpInitAttr,
            QpQuery, //
        },
        srq::{
            self,
            Srq,
            SrqAttrMask,
            SrqAttrs,
            SrqInitAttr, //
        },
        ucontext::{
            self,
            Ucontext, //
        },
        udata::Udata,
        umem::Umem,
        wr::{
            PostError,
            RecvWr,
            SendWr, //
        },
    },
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        new_spinlock,
        SpinLock, //
    },
};

/// The next vendor part id; each device gets its own, which is also the `dev_id` the `siw`
/// provider receives.
static NEXT_PART_ID: Atomic<u32> = Atomic::new(1);

/// A bounded counter of objects of one kind.
pub(crate) struct Counter {
    count: Atomic<u32>,
    max: u32,
}

impl Counter {
    const fn new(max: u32) -> Self {
        Self {
            count: Atomic::new(0),
            max,
        }
    }

    /// Takes a slot, or fails with `ENOMEM` if all `max` are in use.
    pub(crate) fn take(&self) -> Result {
        if self.count.fetch_add(1, Relaxed) >= self.max {
            self.count.fetch_sub(1, Relaxed);
            return Err(ENOMEM);
        }
        Ok(())
    }

    /// Returns a slot taken with [`Counter::take`].
    pub(crate) fn put(&self) {
        self.count.fetch_sub(1, Relaxed);
    }
}

/// Packs a MAC address into the low 48 bits of a `u64`.
fn mac_to_u64(mac: [u8; ETH_ALEN]) -> u64 {
    mac.iter().fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

/// Unpacks a MAC address packed with [`mac_to_u64`].
fn u64_to_mac(v: u64) -> [u8; ETH_ALEN] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// Returns the modified EUI-64 of a MAC address (RFC 4291 appendix A, like
/// `addrconf_addr_eui48()`), used as node GUID.
fn eui48_to_guid(mac: [u8; ETH_ALEN]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// Returns whether rsiw can run over a net device of type `ty`: Ethernet, IEEE 802, loopback
/// and `ARPHRD_NONE` (tun, wireguard, ...), like `siw`.
fn qualified(ty: HwType) -> bool {
    ty == HwType::ETHER || ty == HwType::IEEE802 || ty == HwType::LOOPBACK || ty == HwType::NONE
}

/// Per-device data of an rsiw device.
pub(crate) struct RsiwDevice {
    /// The vendor part id, unique per device since module load.
    part_id: u32,
    /// The node GUID, derived from the MAC address at creation.
    guid: [u8; 8],
    /// The current GID: the net device's MAC address, packed with [`mac_to_u64`]. Updated on
    /// `NETDEV_CHANGEADDR`.
    gid: Atomic<u64>,
    /// User contexts.
    contexts: Counter,
    /// Protection domains.
    pds: Counter,
    /// Memory regions.
    mrs: Counter,
    /// Completion queues.
    pub(crate) cqs: Counter,
    /// Queue pairs.
    pub(crate) qps: Counter,
    /// Shared receive queues.
    pub(crate) srqs: Counter,
    /// The next CQ id.
    next_cq_id: Atomic<u32>,
    /// The STag table: every memory region by STag index.
    mem: MemTable,
    /// QP numbers, and every QP by number (`iw_get_qp`), holding a reference until
    /// `destroy_qp`.
    qpns: QpNumbers<ARef<Qp<RsiwDevice>>>,
    /// The connection manager: listeners, connection endpoints and their work queue.
    pub(crate) cm: cm::DeviceCm,
    /// The queue the data path of its connections runs on; dropped after `cm`, which stops
    /// them, and drained then.
    pub(crate) conn_queue: conn::ConnQueue,
    /// RFC 7306 atomics and immediate data are on (the `rfc7306` module parameter when the
    /// device was added: ib_core caches the attributes that advertise them).
    rfc7306: bool,
    /// RDMA Flush to global visibility and Atomic Write are on (the `commit` module
    /// parameter when the device was added).
    commit: bool,
    /// What the responder's Flushes did (`RsiwDevice::HW_COUNTERS`).
    flushes: FlushCounters,
    /// Responses sent from `data_ready` (`RsiwDevice::HW_COUNTERS`).
    bh: BhCounters,
}

/// The responses the device's connections sent from `data_ready` in softirq
/// ([`crate::tx::respond_bh`]) rather than from their work item, reported as hardware counters
/// of its port next to [`FlushCounters`].
struct BhCounters {
    /// Read Responses.
    reads: Atomic<u64>,
    /// QN 3 responses (Atomic, Flush, Atomic Write and Verify Responses).
    qn3: Atomic<u64>,
}

/// The counters of the RDMA Flushes a device executed as the responder, reported as the hardware
/// counters of its port (`rdma statistic show link <dev>/1`, `RsiwDevice::HW_COUNTERS`):
/// they show that a Flush to persistence wrote back what it had to.
struct FlushCounters {
    /// Flush Requests executed (answered with a Flush Response).
    executed: Atomic<u64>,
    /// Of those, the Flushes to persistence.
    persistent: Atomic<u64>,
    /// Bytes of the CPU cache lines the Flushes to persistence wrote back to persistent memory.
    writeback_bytes: Atomic<u64>,
    /// Of the Flushes to persistence, those whose write-back was too long for the RX path and
    /// ran in the connection's work item (`responder::DeferredFlush`).
    deferred: Atomic<u64>,
}

/// The QP numbers of a device and what they name (a QP reference; any value for KUnit).
///
/// Numbers come from a 32-bit counter from [`limits::FIRST_QPN`], skipping 0 when it wraps
/// and every number that is published: a number names at most one QP. After 2^32 QPs were
/// created the counter comes back to the numbers of QPs that may still live (a kernel ULP's,
/// or another process's); taking one again would make `iw_get_qp` find either QP, and the
/// older QP's destroy unpublish the newer one.
///
/// # Invariants
///
/// The table holds each number at most once, and [`QpNumbers::publish`] never replaces an
/// entry.
pub(crate) struct QpNumbers<V> {
    inner: Pin<KBox<SpinLock<QpNumbersInner<V>>>>,
}

struct QpNumbersInner<V> {
    /// The next number to try.
    next: u32,
    /// The published numbers.
    table: RBTree<u32, V>,
}

impl<V: Clone + Unpin> QpNumbers<V> {
    /// No number used; the counter starts at `first`.
    fn new(first: u32) -> Result<Self> {
        let inner = QpNumbersInner {
            next: first,
            table: RBTree::new(),
        };
        Ok(Self {
            inner: KBox::pin_init(new_spinlock!(inner, "rsiw_qp_table"), GFP_KERNEL)?,
        })
    }

    /// Returns a new number: the counter's next one that is neither 0 nor published. The
    /// table holds at most [`limits::MAX_QP`] numbers, so this ends.
    fn alloc(&self) -> u32 {
        let mut g = self.inner.lock();
        loop {
            let n = g.next;
            g.next = n.wrapping_add(1);
            if n >= limits::FIRST_QPN && g.table.get(&n).is_none() {
                return n;
            }
        }
    }

    /// Publishes `v` under `n`, a number from [`QpNumbers::alloc`]. Fails with `EBUSY` if `n`
    /// was published meanwhile (the counter went round all 2^32 numbers since `n` was
    /// allocated): the entry is not replaced, and the new QP's creation fails.
    fn publish(&self, n: u32, v: V) -> Result {
        let res = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut g = self.inner.lock();
        let r = match g.table.entry(n) {
            Entry::Vacant(e) => {
                e.insert(v, res);
                Ok(())
            }
            Entry::Occupied(_) => Err(EBUSY),
        };
        // Unlocked before `v` and the reservation are dropped, if they were not used.
        drop(g);
        r
    }

    /// Returns what `n` names, if it is published.
    fn get(&self, n: u32) -> Option<V> {
        self.inner.lock().table.get(&n).cloned()
    }

    /// Unpublishes `n`; returns what it named, to be dropped outside the lock.
    fn remove(&self, n: u32) -> Option<V> {
        self.inner.lock().table.remove(&n)
    }
}

impl RsiwDevice {
    fn new(mac: [u8; ETH_ALEN], part_id: u32, rfc7306: bool) -> Result<Self> {
        Ok(Self {
            part_id,
            guid: eui48_to_guid(mac),
            gid: Atomic::new(mac_to_u64(mac)),
            contexts: Counter::new(limits::MAX_CONTEXT),
            pds: Counter::new(limits::MAX_PD),
            mrs: Counter::new(limits::MAX_MR),
            cqs: Counter::new(limits::MAX_CQ),
            qps: Counter::new(limits::MAX_QP),
            srqs: Counter::new(limits::MAX_SRQ),
            next_cq_id: Atomic::new(1),
            mem: MemTable::new()?,
            qpns: QpNumbers::new(limits::FIRST_QPN)?,
            cm: cm::DeviceCm::new()?,
            conn_queue: conn::ConnQueue::new()?,
            rfc7306,
            commit: crate::module_parameters::commit.value(),
            flushes: FlushCounters {
                executed: Atomic::new(0),
                persistent: Atomic::new(0),
                writeback_bytes: Atomic::new(0),
                deferred: Atomic::new(0),
            },
            bh: BhCounters {
                reads: Atomic::new(0),
                qn3: Atomic::new(0),
            },
        })
    }

    /// Counts a Flush Request the responder executed: one to persistence (`persistent`) wrote
    /// back the cache lines of `writeback_bytes` bytes, in the work item if `deferred`.
    pub(crate) fn count_flush(&self, persistent: bool, writeback_bytes: u64, deferred: bool) {
        self.flushes.executed.fetch_add(1, Relaxed);
        if persistent {
            self.flushes.persistent.fetch_add(1, Relaxed);
            self.flushes
                .writeback_bytes
                .fetch_add(writeback_bytes, Relaxed);
        }
        if deferred {
            self.flushes.deferred.fetch_add(1, Relaxed);
        }
    }

    /// Counts the responses `data_ready` sent: `reads` Read Responses and `qn3` QN 3 responses.
    pub(crate) fn count_bh(&self, reads: u64, qn3: u64) {
        if reads > 0 {
            self.bh.reads.fetch_add(reads, Relaxed);
        }
        if qn3 > 0 {
            self.bh.qn3.fetch_add(qn3, Relaxed);
        }
    }

    /// Whether RDMA Flush (global visibility) and Atomic Write are on.
    pub(crate) fn commit(&self) -> bool {
        self.commit
    }

    /// The device capabilities: memory management extensions, and with the commit extensions
    /// on, Flush to global visibility, (64-bit only: one store, AWRITE-03) Atomic Write and,
    /// where the architecture can write caches back to persistent memory
    /// ([`pmem::CAN_WRITE_BACK`]), Flush to persistence: the flag `IB_ACCESS_FLUSH_PERSISTENT`
    /// is then accepted, for regions whose every page is persistent memory
    /// ([`crate::mem::persistent`]).
    fn cap_flags(&self) -> DeviceCapFlags {
        let mut f = DeviceCapFlags::from(DeviceCapFlag::MemMgtExtensions);
        if self.commit {
            f |= DeviceCapFlag::FlushGlobal;
            if cfg!(CONFIG_64BIT) {
                f |= DeviceCapFlag::AtomicWrite;
            }
            if pmem::CAN_WRITE_BACK {
                f |= DeviceCapFlag::FlushPersistent;
            }
        }
        f
    }

    /// Whether RFC 7306 atomics and immediate data are on.
    pub(crate) fn rfc7306(&self) -> bool {
        self.rfc7306
    }

    /// Returns a reference to the QP numbered `qpn`, if it exists. Any context.
    pub(crate) fn qp_by_num(&self, qpn: u32) -> Option<ARef<Qp<RsiwDevice>>> {
        self.qpns.get(qpn)
    }

    /// Returns the STag table, for the data path's access checks.
    pub(crate) fn mem(&self) -> &MemTable {
        &self.mem
    }

    fn gid(&self) -> Gid {
        Gid::from_mac(u64_to_mac(self.gid.load(Relaxed)))
    }

    /// Returns a new CQ id (reported to user space; not used for lookups).
    pub(crate) fn next_cq_id(&self) -> u32 {
        self.next_cq_id.fetch_add(1, Relaxed)
    }

    /// Returns a new QP number ([`QpNumbers`]).
    pub(crate) fn next_qpn(&self) -> u32 {
        self.qpns.alloc()
    }
}

/// Per-ucontext data: the ABI extensions the context got (rings and mmap entries come with the
/// verbs objects).
pub(crate) struct RsiwUcontext {
    /// The [`abi::ext`] bits granted; 0 for a legacy context.
    ext: u64,
}

impl RsiwUcontext {
    /// Returns the [`abi::ext`] bits granted to the context of `udata`, if any: 0 for a legacy
    /// context, and for kernel objects (no `udata`).
    pub(crate) fn ext_of(dev: &Device<RsiwDevice>, udata: Option<&Udata>) -> u64 {
        udata
            .and_then(|u| u.ucontext(dev))
            .map_or(0, |c: &Ucontext<RsiwDevice>| c.ext)
    }

    /// Negotiates the extensions (`Documentation/infiniband/rsiw-abi.rst`): reads the optional
    /// request, answers with the extended reply only if it asked for something (a request
    /// longer than [`UreqAllocCtx`] is taken if its tail is zero). Returns the granted bits.
    fn negotiate(dev: &Device<RsiwDevice>, udata: &Udata) -> Result<u64> {
        let req: UreqAllocCtx = udata.copy_in(0)?;
        // C siw refuses a reply buffer smaller than its struct (the stock provider's).
        if udata.outlen() < core::mem::size_of::<UrespAllocCtx>() {
            return Err(EINVAL);
        }
        if req.ext_req == 0 {
            udata.respond(&UrespAllocCtx {
                dev_id: dev.part_id,
                pad: 0,
            })?;
            return Ok(0);
        }
        let ext = abi::ext::grant(req.ext_req, dev.rfc7306, dev.commit);
        udata.respond(&UrespAllocCtxExt {
            dev_id: dev.part_id,
            pad: 0,
            ext_caps: ext,
            verify_digest_len: abi::ext::verify_digest_len(ext),
            reserved: [0; 7],
        })?;
        Ok(ext)
    }
}

/// Per-PD data.
pub(crate) struct RsiwPd;

#[vtable]
impl Driver for RsiwDevice {
    const DRIVER_ID: DriverId = DriverId::SIW;
    const UVERBS_ABI_VER: u32 = limits::ABI_VERSION;

    type Ucontext = RsiwUcontext;
    type Pd = RsiwPd;
    type Cq = RsiwCq;
    type Qp = RsiwQp;
    type Srq = RsiwSrq;
    type Mr = RsiwMr;
    type IwCm = Self;

    /// The responder's Flushes ([`FlushCounters`]), the responses sent from `data_ready`
    /// ([`BhCounters`]), the work items' waits and the batches sent by reference
    /// ([`conn::WorkStats`]), in every port's
    /// `hw_counters`.
    const HW_COUNTERS: &'static [HwCounter] = &[
        HwCounter::new(c"flush_executed"),
        HwCounter::new(c"flush_persistent"),
        HwCounter::new(c"flush_writeback_bytes"),
        HwCounter::new(c"flush_deferred"),
        HwCounter::new(c"bh_read_responses"),
        HwCounter::new(c"bh_qn3_responses"),
        HwCounter::new(c"work_runs"),
        HwCounter::new(c"work_wait_us"),
        HwCounter::new(c"work_wait_lt16us"),
        HwCounter::new(c"work_wait_lt64us"),
        HwCounter::new(c"work_wait_lt256us"),
        HwCounter::new(c"work_wait_lt1ms"),
        HwCounter::new(c"work_wait_lt4ms"),
        HwCounter::new(c"work_wait_ge4ms"),
        HwCounter::new(c"work_budget_passes"),
        HwCounter::new(c"work_credit_kicks"),
        HwCounter::new(c"tx_zc_batches"),
        HwCounter::new(c"tx_zc_copied"),
    ];

    fn hw_counters(dev: &Device<Self>, _port: u32, values: &mut [u64]) {
        let f = &dev.flushes;
        let b = &dev.bh;
        let counters = [
            &f.executed,
            &f.persistent,
            &f.writeback_bytes,
            &f.deferred,
            &b.reads,
            &b.qn3,
        ];
        let work = dev.conn_queue.stats.values();
        let all = Iterator::chain(counters.iter().map(|c| c.load(Relaxed)), work);
        for (v, c) in values.iter_mut().zip(all) {
            *v = c;
        }
    }

    fn query_device(dev: &Device<Self>, udata: Option<&Udata>) -> Result<DeviceAttr> {
        if let Some(udata) = udata {
            udata.check_no_io()?;
        }
        Ok(DeviceAttr {
            sys_image_guid: dev.guid,
            max_mr_size: u64::MAX,
            page_size_cap: kernel::page::PAGE_SIZE as u64,
            vendor_id: limits::VENDOR_ID,
            vendor_part_id: dev.part_id,
            max_qp: limits::MAX_QP,
            max_qp_wr: limits::MAX_QP_WR,
            device_cap_flags: dev.cap_flags(),
            kernel_cap_flags: KernelCapFlag::AllowUserUnreg.into(),
            max_send_sge: limits::MAX_SGE,
            max_recv_sge: limits::MAX_SGE,
            max_sge_rd: limits::MAX_SGE_RD,
            max_cq: limits::MAX_CQ,
            max_cqe: limits::MAX_CQE,
            max_mr: limits::MAX_MR,
            max_pd: limits::MAX_PD,
            max_qp_rd_atom: limits::MAX_ORD,
            max_res_rd_atom: limits::MAX_QP.saturating_mul(limits::MAX_IRD),
            max_qp_init_rd_atom: limits::MAX_IRD,
            // A real 64-bit atomic on the mapped word: atomic against the CPU too (T-10).
            atomic_cap: if dev.rfc7306 {
                AtomicCap::Glob
            } else {
                AtomicCap::None
            },
            masked_atomic_cap: if dev.rfc7306 {
                AtomicCap::Glob
            } else {
                AtomicCap::None
            },
            max_mw: limits::MAX_MW,
            max_srq: limits::MAX_SRQ,
            max_srq_wr: limits::MAX_SRQ_WR,
            max_srq_sge: limits::MAX_SGE,
            max_fast_reg_page_list_len: limits::MAX_FAST_REG_PAGE_LIST_LEN,
            ..DeviceAttr::default()
        })
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        let (active_speed, active_width) = dev.eth_speed(port)?;
        let ndev = dev.netdev(port).ok_or(ENODEV)?;
        Ok(PortAttr {
            state: PortState::of_netdev(&ndev),
            max_mtu: Mtu::from_bytes(ndev.max_mtu()),
            active_mtu: Mtu::from_bytes(ndev.mtu()),
            gid_tbl_len: limits::GID_TABLE_LEN,
            port_cap_flags: PortCapFlag::CmSup | PortCapFlag::DeviceMgmtSup,
            max_msg_sz: limits::MAX_MSG_SIZE,
            active_width,
            active_speed,
        })
    }

    fn get_port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        let attr = Self::query_port(dev, port)?;
        Ok(PortImmutable {
            gid_tbl_len: attr.gid_tbl_len,
            core_cap_flags: CoreCapFlags::PORT_IWARP,
            ..PortImmutable::default()
        })
    }

    fn query_gid(dev: &Device<Self>, port: u32, index: i32) -> Result<Gid> {
        if port != limits::PORT || index != 0 {
            return Err(EINVAL);
        }
        Ok(dev.gid())
    }
}

#[vtable]
impl ucontext::Operations for RsiwUcontext {
    type Driver = RsiwDevice;

    fn alloc(dev: &Device<RsiwDevice>, udata: &Udata) -> impl PinInit<Self, Error> {
        dev.contexts
            .take()
            .and_then(|()| match RsiwUcontext::negotiate(dev, udata) {
                Ok(ext) => Ok(RsiwUcontext { ext }),
                Err(e) => {
                    dev.contexts.put();
                    Err(e)
                }
            })
    }

    fn dealloc(uctx: &Ucontext<RsiwDevice>) {
        uctx.device().contexts.put();
    }

    // Device removal (`rdma link delete`, the netdev going away, rmmod) with a process still
    // attached: uverbs has already destroyed the context's objects through the destroy methods
    // (a connected QP is detached from its connection, which is closed, so the peer sees the
    // disconnect). The process may still map their rings, whose pages its mappings keep, but
    // nothing reads or writes them any more; the context holds nothing else to revoke.
    // Providing the op is what lets the removal go on instead of waiting for the process.
    fn disassociate(_uctx: &Ucontext<RsiwDevice>) {}

    // The queues are mapped by key, the default `mmap` (siw's ABI).
}

#[vtable]
impl pd::Operations for RsiwPd {
    type Driver = RsiwDevice;

    fn alloc(dev: &Device<RsiwDevice>, udata: Option<&Udata>) -> impl PinInit<Self, Error> {
        let res = match udata {
            Some(udata) => udata.check_no_io(),
            None => Ok(()),
        };
        res.and_then(|()| dev.pds.take()).map(|()| RsiwPd)
    }

    fn dealloc(pd: &Pd<RsiwDevice>, _udata: Option<&Udata>) {
        pd.device().pds.put();
    }
}

#[vtable]
impl cq::Operations for RsiwCq {
    type Driver = RsiwDevice;

    fn create(
        dev: &Device<RsiwDevice>,
        attr: &CqInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error> {
        RsiwCq::new(dev, attr, udata)
    }

    fn entries(&self) -> u32 {
        self.size()
    }

    fn destroy(cq: &Cq<RsiwDevice>, _udata: Option<&Udata>) {
        cq.device().cqs.put();
    }

    fn poll(cq: &Cq<RsiwDevice>, wc: &mut [Wc]) -> Result<usize> {
        RsiwCq::poll(cq, wc)
    }

    fn req_notify(cq: &Cq<RsiwDevice>, flags: CqNotifyFlags) -> Result<bool> {
        RsiwCq::req_notify(cq, flags)
    }
}

#[vtable]
impl qp::Operations for RsiwQp {
    type Driver = RsiwDevice;

    fn create(
        dev: &Device<RsiwDevice>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error> {
        RsiwQp::new(dev, attr, udata)
    }

    fn number(&self) -> u32 {
        self.qp_num()
    }

    fn created(qp: &Qp<RsiwDevice>) -> Result {
        qp.device().qpns.publish(qp.qp_num(), ARef::from(qp))
    }

    fn modify(
        qp: &Qp<RsiwDevice>,
        attr: &QpAttr,
        mask: QpAttrMask,
        _udata: Option<&Udata>,
    ) -> Result {
        RsiwQp::modify(qp, attr, mask)
    }

    fn query(qp: &Qp<RsiwDevice>, _mask: QpAttrMask) -> Result<QpQuery> {
        RsiwQp::query(qp)
    }

    fn destroy(qp: &Qp<RsiwDevice>, _udata: Option<&Udata>) {
        // The data path holds a QP reference, which destroy waits for.
        RsiwQp::detach_conn(qp);
        // So does a connection still in its MPA exchange: abort it.
        cm::qp_drop_conn(qp, true);
        let dev = qp.device();
        // The table's reference; dropped outside the lock.
        drop(dev.qpns.remove(qp.qp_num()));
        dev.qps.put();
    }

    fn post_send<'a>(qp: &Qp<RsiwDevice>, wr: &'a SendWr) -> Result<(), PostError<'a, SendWr>> {
        RsiwQp::post_send(qp, wr)
    }

    // The siw provider rings the send queue doorbell of a user QP with an empty post.
    fn post_send_empty(qp: &Qp<RsiwDevice>) -> Result {
        RsiwQp::doorbell(qp)
    }

    fn post_recv<'a>(qp: &Qp<RsiwDevice>, wr: &'a RecvWr) -> Result<(), PostError<'a, RecvWr>> {
        RsiwQp::post_recv(qp, wr)
    }
}

#[vtable]
impl srq::Operations for RsiwSrq {
    type Driver = RsiwDevice;

    fn create(
        dev: &Device<RsiwDevice>,
        attr: &mut SrqInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error> {
        RsiwSrq::new(dev, attr, udata)
    }

    fn destroy(srq: &Srq<RsiwDevice>, _udata: Option<&Udata>) {
        srq.device().srqs.put();
    }

    fn modify(
        srq: &Srq<RsiwDevice>,
        attr: &SrqAttrs,
        mask: SrqAttrMask,
        _udata: Option<&Udata>,
    ) -> Result {
        srq.modify(attr, mask)
    }

    fn query(srq: &Srq<RsiwDevice>) -> Result<SrqAttrs> {
        Ok(srq.query())
    }

    fn post_recv<'a>(srq: &Srq<RsiwDevice>, wr: &'a RecvWr) -> Result<(), PostError<'a, RecvWr>> {
        RsiwSrq::post_recv(srq, wr)
    }
}

#[vtable]
impl mr::Operations for RsiwMr {
    type Driver = RsiwDevice;

    fn get_dma(
        pd: &Pd<RsiwDevice>,
        access: AccessFlags,
        kva: KernelVa,
    ) -> impl PinInit<Self, Error> {
        let dev = pd.device();
        mem::mr_rights(access)
            .and_then(|rights| dev.mrs.take().map(|()| rights))
            .and_then(|rights| {
                dev.mem
                    .add_dma(pd_id(pd), rights, kva)
                    .inspect_err(|_| dev.mrs.put())
            })
    }

    fn reg_user(
        pd: &Pd<RsiwDevice>,
        start: u64,
        length: u64,
        virt_addr: u64,
        access: AccessFlags,
        udata: &Udata,
    ) -> impl PinInit<Self, Error> {
        let dev = pd.device();
        let reg = || -> Result<RsiwMr> {
            let rights = mem::mr_rights(access)?;
            let umem = Umem::get(dev, start, length, access)?;
            dev.mrs.take()?;
            let mr = dev
                .mem
                .add_user(pd_id(pd), rights, virt_addr, umem)
                .inspect_err(|_| dev.mrs.put())?;
            // siw's provider passes a `siw_ureq_reg_mr` with a key of its choosing; rsiw picks
            // unguessable keys itself and ignores it. The response carries the STag.
            if udata.outlen() >= core::mem::size_of::<UrespRegMr>() {
                let resp = UrespRegMr {
                    stag: mr.stag(),
                    pad: 0,
                };
                if let Err(e) = udata.respond(&resp) {
                    dev.mem.remove(&mr);
                    dev.mrs.put();
                    return Err(e);
                }
            }
            Ok(mr)
        };
        reg()
    }

    fn keys(&self) -> (u32, u32) {
        (self.stag(), self.stag())
    }

    fn dereg(mr: &Mr<RsiwDevice>, _udata: Option<&Udata>) {
        let dev = mr.device();
        dev.mem.remove(mr);
        dev.mrs.put();
    }

    fn alloc(pd: &Pd<RsiwDevice>, mr_type: MrType, max_num_sg: u32) -> impl PinInit<Self, Error> {
        let dev = pd.device();
        let alloc = || -> Result<RsiwMr> {
            // Like siw: only plain fast registration (no gaps, no integrity).
            if mr_type != MrType::MemReg {
                return Err(EOPNOTSUPP);
            }
            if max_num_sg == 0 || max_num_sg > limits::MAX_FAST_REG_PAGE_LIST_LEN {
                return Err(EINVAL);
            }
            dev.mrs.take()?;
            dev.mem
                .add_fast_reg(pd_id(pd), max_num_sg)
                .inspect_err(|_| dev.mrs.put())
        };
        alloc()
    }

    fn map_step(mr: &Mr<RsiwDevice>, step: MapStep) -> Result {
        mr.mem().map_step(step)
    }
}

#[vtable]
impl iwcm::Operations for RsiwDevice {
    type Driver = Self;

    fn create_listen(dev: &Device<Self>, id: &CmId, backlog: u32) -> Result {
        cm::create_listen(dev, id, backlog)
    }

    fn destroy_listen(dev: &Device<Self>, id: &CmId) -> Result {
        cm::destroy_listen(dev, id)
    }

    fn connect(dev: &Device<Self>, id: &CmId, param: &ConnParam<'_>) -> Result {
        cm::connect(dev, id, param)
    }

    fn accept(dev: &Device<Self>, id: &CmId, param: &ConnParam<'_>) -> Result {
        cm::accept(dev, id, param)
    }

    fn reject(dev: &Device<Self>, id: &CmId, private_data: &[u8]) -> Result {
        cm::reject(dev, id, private_data)
    }

    fn get_qp(dev: &Device<Self>, qpn: u32) -> Option<ARef<Qp<Self>>> {
        dev.qp_by_num(qpn)
    }
}

/// Returns the id the access check uses for a PD: its address, unique among live PDs (a PD
/// outlives its MRs and QPs, whose `usecnt` ib_core keeps on it).
pub(crate) fn pd_id(pd: &Pd<RsiwDevice>) -> PdId {
    PdId(pd.as_raw() as usize)
}

/// The `rsiw` link type: `rdma link add <name> type rsiw netdev <if>`.
pub(crate) struct RsiwLink;

impl LinkOps for RsiwLink {
    type Driver = RsiwDevice;
    const TYPE: &'static CStr = c"rsiw";

    fn newlink(link: &NewLink<'_, RsiwDevice>, name: &CStr, ndev: &NetDevice) -> Result {
        if !qualified(ndev.hw_type()) {
            return Err(EINVAL);
        }
        // One device per net device, also counting a C siw device (same driver id).
        if Device::<RsiwDevice>::netdev_has_device(ndev) {
            return Err(EEXIST);
        }
        // A device without a hardware address (ARPHRD_NONE) still needs a unique GID.
        let mac = ndev.mac_address().unwrap_or_else(random_ether_addr);
        let part_id = NEXT_PART_ID.fetch_add(1, Relaxed);

        let rfc7306 = crate::module_parameters::rfc7306.value();
        let mut dev = UnregisteredDevice::new(link, RsiwDevice::new(mac, part_id, rfc7306)?)?;
        dev.set_node_type(NodeType::Rnic);
        dev.set_node_guid(eui48_to_guid(mac));
        dev.set_node_desc(limits::NODE_DESC);
        // The siw provider rings its send queue doorbell with an empty POST_SEND.
        dev.enable_uverbs_cmd(UverbsCmd::PostSend);
        dev.set_phys_port_cnt(1);
        dev.set_num_comp_vectors(i32::try_from(cpu::nr_cpu_ids()).unwrap_or(1));
        dev.set_netdev(limits::PORT, ndev)?;
        dev.set_iw_ifname(&ndev.name());
        // rsiw uses the host's TCP ports: no iwpmd port mapping.
        dev.set_iw_driver_flags(IwFlag::NoPortMap.into());
        dev.register(name)
    }
}

/// Follows the net devices rsiw devices are attached to.
pub(crate) struct NetdevEvents;

impl notifier::Handler for NetdevEvents {
    fn event(&self, event: Event, ndev: &NetDevice) {
        let Some(dev) = Device::<RsiwDevice>::get_by_netdev(ndev) else {
            return;
        };
        match event {
            // ib_core waits for the netdev reference of the port to be dropped; unregistering
            // synchronously under RTNL could deadlock, so queue it.
            Event::UNREGISTER => dev.unregister_queued(),
            // ib_core dispatches these from its own notifier too; the state is de-duplicated.
            Event::UP | Event::DOWN | Event::CHANGE => dev.dispatch_port_state_event(ndev),
            Event::CHANGEADDR => {
                if let Some(mac) = ndev.mac_address() {
                    dev.gid.store(mac_to_u64(mac), Relaxed);
                }
                dev.dispatch_port_event(limits::PORT, EventType::GID_CHANGE);
            }
            // The MTU is read from the net device on every query_port; nothing is cached.
            Event::CHANGEMTU => dev_dbg!(
                &*dev,
                "MTU of port {} changed to {}\n",
                limits::PORT,
                ndev.mtu()
            ),
            _ => {}
        }
    }
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_device)]
mod tests {
    use super::*;

    /// Issue 38: after the counter wraps, a number whose QP still lives is neither handed out
    /// again nor replaced in the table (which would make `iw_get_qp` find the wrong QP and
    /// the older QP's destroy unpublish the newer one).
    #[test]
    fn qp_numbers_wrap_skips_live_ones() -> Result {
        // Two QPs of the counter's previous round, 1 and 2, still live.
        let q = QpNumbers::<u32>::new(u32::MAX - 1)?;
        q.publish(1, 10)?;
        q.publish(2, 20)?;
        assert_eq!(q.alloc(), u32::MAX - 1);
        assert_eq!(q.alloc(), u32::MAX);
        // 0 is never a QP number; 1 and 2 are taken.
        let n = q.alloc();
        assert_eq!(n, 3);
        q.publish(n, 30)?;
        // A number that names a live QP is never replaced.
        assert_eq!(q.publish(1, 11), Err(EBUSY));
        assert_eq!(q.get(1), Some(10));
        assert_eq!(q.get(3), Some(30));
        // Once its QP is gone, a number may come back.
        assert_eq!(q.remove(2), Some(20));
        assert_eq!(q.alloc(), 4);
        assert_eq!(q.remove(3), Some(30));
        assert_eq!(q.remove(3), None);
        Ok(())
    }
}
