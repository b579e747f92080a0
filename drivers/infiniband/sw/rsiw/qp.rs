// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation, the iWARP QP state machine, posting and flushing.
//!
//! Like `siw`, a QP's send and receive queues are rings of `siw_sqe` / `siw_rqe` ([`Sqe`],
//! [`Rqe`]) for kernel and user QPs alike: kernel consumers' work requests are validated and
//! converted into ring elements by [`RsiwQp::post_send`] / [`RsiwQp::post_recv`]; user space
//! writes the mapped rings itself and rings the send queue doorbell with an empty `post_send`
//! ([`RsiwQp::doorbell`]). Every element the kernel consumes is copied out of the ring once and
//! validated ([`crate::wqe::check_sqe`]) before use.
//!
//! # For the data path
//!
//! - [`RsiwQp::next_sqe`] takes the next valid SQE (copied and validated) off the send queue;
//!   its completion is posted with [`RsiwQp::complete_sq`]. Invalid SQEs come back as `Err` with
//!   the status to complete them with; the QP should then go to ERROR ([`RsiwQp::set_error`]).
//! - [`RsiwQp::next_rqe`] takes the next RQE off the QP's receive queue or its SRQ, completed
//!   with [`RsiwQp::complete_rq`].
//! - [`RsiwQp::cm_establish`] is the hook for the connection manager: it moves IDLE/RTR to
//!   RTS.

use crate::{
    abi::{
        UrespCreateQp,
        INVAL_UOBJ_KEY, //
    },
    conn::Conn,
    cq::RsiwCq,
    device::{
        self,
        RsiwDevice,
        RsiwUcontext, //
    },
    limits,
    mem::{
        self,
        Kind,
        RegMr, //
    },
    ring::{
        self,
        Ring, //
    },
    srq::RsiwSrq,
    stag::{
        self,
        PdId,
        Rights, //
    },
    wqe::{
        self,
        build_rqe,
        check_rqe,
        check_sqe,
        copy_sges,
        flags,
        op,
        sanitise_opcode,
        status,
        AtomicArgs,
        Completion,
        Consumer,
        FlushArgs,
        Rqe,
        SqCompletion,
        Sqe, //
    },
};
use kernel::{
    new_mutex, new_spinlock_irq,
    prelude::*,
    rdma::{
        attr::Mtu,
        device::Device,
        mr::AccessFlags,
        qp::{
            Qp,
            QpAttr,
            QpAttrFlag,
            QpAttrMask,
            QpCap,
            QpCreateFlags,
            QpInitAttr,
            QpQuery,
            QpState as IbQpState,
            QpType, //
        },
        udata::Udata,
        wr::{
            PostError,
            RecvWr,
            SendWr,
            SendWrFlag,
            WrOpcode, //
        },
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        rcu,
        Arc,
        Mutex,
        RcuArc,
        SpinLockIrq, //
    },
};

/// iWARP QP states (RFC 5040 section 6 / `enum siw_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum QpState {
    /// Created, not connected (`IB_QPS_RESET` and `IB_QPS_INIT`).
    Idle = 0,
    /// Ready to receive, not connected (`IB_QPS_RTR`).
    Rtr = 1,
    /// Connected, running (`IB_QPS_RTS`).
    Rts = 2,
    /// Closing the connection (`IB_QPS_SQD`).
    Closing = 3,
    /// Terminate sent or received (`IB_QPS_SQE`).
    Terminate = 4,
    /// Error, final (`IB_QPS_ERR`).
    Error = 5,
}

impl QpState {
    /// Maps an `IB_QPS_*` state to the iWARP state, as `siw` does.
    pub(crate) fn from_ib(s: IbQpState) -> Self {
        match s {
            IbQpState::Reset | IbQpState::Init => Self::Idle,
            IbQpState::Rtr => Self::Rtr,
            IbQpState::Rts => Self::Rts,
            IbQpState::Sqd => Self::Closing,
            IbQpState::Sqe => Self::Terminate,
            IbQpState::Error => Self::Error,
        }
    }

    /// Maps the iWARP state to the `IB_QPS_*` state reported by `query_qp`.
    pub(crate) fn to_ib(self) -> IbQpState {
        match self {
            Self::Idle => IbQpState::Init,
            Self::Rtr => IbQpState::Rtr,
            Self::Rts => IbQpState::Rts,
            Self::Closing => IbQpState::Sqd,
            Self::Terminate => IbQpState::Sqe,
            Self::Error => IbQpState::Error,
        }
    }

    fn from_u32(v: u32) -> Self {
        match v {
            0 => Self::Idle,
            1 => Self::Rtr,
            2 => Self::Rts,
            3 => Self::Closing,
            4 => Self::Terminate,
            _ => Self::Error,
        }
    }
}

/// What a state transition requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Actions {
    /// Flush the send queue.
    pub(crate) flush_sq: bool,
    /// Flush the receive queue.
    pub(crate) flush_rq: bool,
    /// Close the connection (and send a Terminate first, for TERMINATE).
    pub(crate) drop_conn: bool,
}

const FLUSH_BOTH: Actions = Actions {
    flush_sq: true,
    flush_rq: true,
    drop_conn: false,
};

/// The QP state machine: returns the next state and what to do for a request to move from
/// `cur` to `req`, or the error to fail the modify with. `connected` says whether a connection
/// (from the connection manager) is attached, which RTS requires.
///
/// Differences from `siw`, which silently ignores requests it cannot honour: moving from
/// IDLE/RTR to CLOSING or TERMINATE, from RTS back to IDLE/RTR, from TERMINATE to anything but
/// ERROR, and out of ERROR all fail with `EINVAL`; IDLE to ERROR flushes the send queue too.
/// ERROR to CLOSING is the exception, a no-op as in `siw`: librdmacm's `rdma_disconnect()`
/// asks for it (`IB_QPS_SQD`) on iWARP, also after the peer or an error closed the connection.
pub(crate) fn next_state(
    cur: QpState,
    req: QpState,
    connected: bool,
) -> Result<(QpState, Actions)> {
    use QpState::*;
    let none = Actions::default();
    match (cur, req) {
        (Idle | Rtr, Idle) => Ok((Idle, none)),
        (Idle | Rtr, Rtr) => Ok((Rtr, none)),
        (Idle | Rtr, Rts) if connected => Ok((Rts, none)),
        (Idle | Rtr, Rts) => Err(EINVAL),
        (Idle | Rtr, Error) => Ok((Error, FLUSH_BOTH)),
        (Rts, Rts) => Ok((Rts, none)),
        (Rts, Closing) => Ok((
            Closing,
            Actions {
                flush_sq: false,
                flush_rq: true,
                drop_conn: true,
            },
        )),
        (Rts, Terminate) => Ok((
            Terminate,
            Actions {
                drop_conn: true,
                ..none
            },
        )),
        (Rts | Closing | Terminate, Error) => Ok((
            Error,
            Actions {
                drop_conn: cur == Rts,
                ..FLUSH_BOTH
            },
        )),
        (Closing, Idle) => Ok((Idle, none)),
        (Closing, Closing) => Ok((Closing, none)),
        (Closing, _) => Err(ECONNABORTED),
        (Terminate, Terminate) => Ok((Terminate, none)),
        // ERROR is final. A graceful close requested in ERROR (`rdma_disconnect()` after the
        // peer or a fatal error tore the connection down) has nothing left to do: a no-op,
        // as in `siw`, which ignores every request in ERROR.
        (Error, Error | Closing) => Ok((Error, none)),
        _ => Err(EINVAL),
    }
}

/// The `IB_ACCESS_*` flags a QP has until they are set with `modify_qp`: local write, remote
/// write and remote read, as siw reports and as iw_cm grants.
const DEFAULT_ACCESS: u32 = 0x7;

/// `RsiwQp::access` before `modify_qp` set it.
const ACCESS_UNSET: u32 = u32::MAX;

/// Fixed attributes of a QP.
#[derive(Clone, Copy)]
struct Caps {
    sq_max_sge: u32,
    rq_max_sge: u32,
    sig_all: bool,
}

/// What [`RsiwQp::alloc`] prepares for a new QP.
struct NewQp {
    qp_num: u32,
    caps: Caps,
    sq: Ring<Sqe>,
    rq: Option<Ring<Rqe>>,
}

/// Per-QP data.
#[pin_data]
pub(crate) struct RsiwQp {
    qp_num: u32,
    user: bool,
    /// Who posts to the send queue: a kernel ULP, or a user context and its ABI extensions.
    who: Consumer,
    caps: Caps,
    sq: Ring<Sqe>,
    rq: Option<Ring<Rqe>>,
    /// The `QpState`.
    state: Atomic<u32>,
    /// ORD and IRD.
    ord: Atomic<u32>,
    ird: Atomic<u32>,
    /// `IB_ACCESS_*` flags set with modify_qp.
    access: Atomic<u32>,
    /// Whether a connection is attached (set by the connection manager).
    connected: Atomic<u32>,
    /// Serialises state changes.
    #[pin]
    modify: Mutex<()>,
    /// The producer counters of the send and receive queues, for kernel QPs (a user QP's are
    /// in user space).
    #[pin]
    sq_put: SpinLockIrq<u32>,
    #[pin]
    rq_put: SpinLockIrq<u32>,
    /// The consumer counters: the TX or RX engine and a flush take elements without a lock
    /// ([`Ring::take_into`]).
    sq_get: Atomic<u32>,
    rq_get: Atomic<u32>,
    /// The data path of the connection, once the connection manager established it.
    #[pin]
    conn: RcuArc<Conn>,
}

/// The extensions a device has on, for the kernel send opcodes it takes.
#[derive(Clone, Copy)]
struct Ext {
    /// RFC 7306 (module parameter `rfc7306`).
    rfc7306: bool,
    /// RDMA Flush and Atomic Write (module parameter `commit`).
    commit: bool,
}

impl Ext {
    fn of(qp: &Qp<RsiwDevice>) -> Self {
        let d = qp.device();
        Self {
            rfc7306: d.rfc7306(),
            commit: d.commit(),
        }
    }
}

/// Maps a kernel send opcode to the ring opcode (`siw_post_send()`), or `None` if rsiw does
/// not support it: like `siw`, plus the RFC 7306 operations when `rfc7306` is on and Flush and
/// Atomic Write (64-bit only, as the device capability) when `commit` is.
fn sq_opcode(opcode: Option<WrOpcode>, ext: Ext) -> Option<u8> {
    let rfc7306 = ext.rfc7306;
    Some(match opcode? {
        WrOpcode::Flush if ext.commit => op::FLUSH,
        WrOpcode::AtomicWrite if ext.commit && cfg!(CONFIG_64BIT) => op::ATOMIC_WRITE,
        WrOpcode::Send => op::SEND,
        WrOpcode::SendWithInv => op::SEND_REMOTE_INV,
        WrOpcode::RdmaWrite => op::WRITE,
        WrOpcode::RdmaRead => op::READ,
        WrOpcode::RdmaReadWithInv => op::READ_LOCAL_INV,
        WrOpcode::LocalInv => op::INVAL_STAG,
        WrOpcode::RegMr => op::REG_MR,
        _ if !rfc7306 => return None,
        WrOpcode::SendWithImm => op::SEND_WITH_IMM,
        WrOpcode::RdmaWriteWithImm => op::WRITE_WITH_IMM,
        WrOpcode::AtomicFetchAndAdd => op::FETCH_AND_ADD,
        WrOpcode::AtomicCmpAndSwp => op::COMP_AND_SWAP,
        WrOpcode::MaskedAtomicFetchAndAdd => op::MASKED_FETCH_AND_ADD,
        WrOpcode::MaskedAtomicCmpAndSwp => op::MASKED_COMP_AND_SWAP,
        _ => return None,
    })
}

/// Returns the PD id of a QP (`EINVAL` if it has none, which ib_core never allows).
fn qp_pd(qp: &Qp<RsiwDevice>) -> Result<PdId> {
    qp.pd().map(device::pd_id).ok_or(EINVAL)
}

/// The post-time lkey check of the SGEs of a kernel work request ([`MemTable::check_lkey`]):
/// every SGE must name a region of the QP's PD that grants `need` and contains it (fast
/// registration MRs: that exists in the PD). Fails with `EINVAL`.
///
/// [`MemTable::check_lkey`]: crate::mem::MemTable::check_lkey
fn check_lkeys(qp: &Qp<RsiwDevice>, sges: &[wqe::Sge], need: Rights) -> Result {
    let pd = qp_pd(qp)?;
    let mem = qp.device().mem();
    sges.iter().try_for_each(|s| mem.check_lkey(pd, s, need))
}

/// The post-time key checks of a kernel send work request turned into `sqe`: the lkeys of its
/// SGEs (sources need local read, RDMA Read sinks local write); for a Local Invalidate, that
/// the STag names a region of the QP's PD; for a Register MR, that the MR is a
/// fast-registration MR of this device and PD, that the new key keeps the MR's index and that
/// the access flags are valid; it then stores the request in the SQE ([`RegMr`]).
fn check_send_keys(qp: &Qp<RsiwDevice>, w: &SendWr, sqe: &mut Sqe) -> Result {
    let pd = qp_pd(qp)?;
    let dev = qp.device();
    match sqe.opcode {
        op::REG_MR => {
            let reg = w.reg_mr(dev).ok_or(EINVAL)?;
            let mr = reg.mr.mem();
            if mr.kind() != Kind::FastReg
                || mr.pd() != pd
                || stag::stag_index(reg.key) != stag::stag_index(reg.mr.stag())
            {
                return Err(EINVAL);
            }
            mem::fast_reg_rights(reg.access)?;
            RegMr {
                stag: reg.key,
                access: reg.access,
                iova: reg.iova,
            }
            .to_sqe(sqe);
            Ok(())
        }
        op::INVAL_STAG => dev.mem().check_local_stag(pd, sqe.rkey),
        _ if sqe.flags & flags::INLINE != 0 => Ok(()),
        opcode => {
            let need =
                if opcode == op::READ || opcode == op::READ_LOCAL_INV || op::is_atomic(opcode) {
                    Rights::LOCAL_WRITE
                } else {
                    Rights::LOCAL_READ
                };
            let n = usize::from(sqe.num_sge);
            check_lkeys(qp, sqe.sge.get(..n).ok_or(EINVAL)?, need)
        }
    }
}

impl RsiwQp {
    /// Creates the data of a new QP (`siw_create_qp()`).
    pub(crate) fn new(
        dev: &Device<RsiwDevice>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> impl PinInit<Self, Error> {
        let res = Self::alloc(dev, attr, udata);
        let user = udata.is_some();
        let who = match udata {
            Some(_) => Consumer::User(RsiwUcontext::ext_of(dev, udata)),
            None => Consumer::Kernel,
        };
        pin_init::pin_init_scope(move || {
            let NewQp {
                qp_num,
                caps,
                sq,
                rq,
            } = res?;
            Ok(try_pin_init!(Self {
                qp_num,
                user,
                who,
                caps,
                sq,
                rq,
                state: Atomic::new(QpState::Idle as u32),
                ord: Atomic::new(0),
                ird: Atomic::new(0),
                access: Atomic::new(ACCESS_UNSET),
                connected: Atomic::new(0),
                modify <- new_mutex!(()),
                sq_put <- new_spinlock_irq!(0, "rsiw_sq"),
                rq_put <- new_spinlock_irq!(0, "rsiw_rq"),
                sq_get: Atomic::new(0),
                rq_get: Atomic::new(0),
                conn: RcuArc::new(None),
            }))
        })
    }

    /// Checks the attributes, takes a QP slot, allocates the rings and reports them.
    fn alloc(
        dev: &Device<RsiwDevice>,
        attr: &mut QpInitAttr,
        udata: Option<&Udata>,
    ) -> Result<NewQp> {
        if attr.create_flags() != QpCreateFlags::empty() {
            return Err(EOPNOTSUPP);
        }
        if attr.qp_type() != Ok(QpType::Rc) {
            return Err(EOPNOTSUPP);
        }
        let cap = attr.cap();
        if cap.max_send_wr > limits::MAX_QP_WR
            || cap.max_recv_wr > limits::MAX_QP_WR
            || cap.max_send_sge > limits::MAX_SGE
            || cap.max_recv_sge > limits::MAX_SGE
            || cap.max_inline_data as usize > wqe::MAX_INLINE
            // A QP must be able to hold at least one SQE.
            || cap.max_send_wr == 0
        {
            return Err(EINVAL);
        }
        let (scq, rcq, srq) = attr.has_cqs_srq();
        if !scq || (!rcq && !srq) {
            return Err(EINVAL);
        }
        let sig_all = attr.sq_sig_all().ok_or(EINVAL)?;
        if let Some(u) = udata {
            if u.outlen() < core::mem::size_of::<UrespCreateQp>() {
                return Err(EINVAL);
            }
        }
        let num_sqe = ring::ring_size(cap.max_send_wr, limits::MAX_QP_WR).ok_or(EINVAL)?;
        // With an SRQ the RQ size is ignored (verbs 6.3.7).
        let num_rqe = if srq || cap.max_recv_wr == 0 {
            0
        } else {
            ring::ring_size(cap.max_recv_wr, limits::MAX_QP_WR).ok_or(EINVAL)?
        };
        dev.qps.take()?;
        let r = (|| {
            let sq = Ring::<Sqe>::new(num_sqe, 0, udata)?;
            let rq = if num_rqe > 0 {
                Some(Ring::<Rqe>::new(num_rqe, 0, udata)?)
            } else {
                None
            };
            let qp_num = dev.next_qpn();
            if let Some(u) = udata {
                u.respond(&UrespCreateQp {
                    qp_id: qp_num,
                    num_sqe,
                    num_rqe,
                    pad: 0,
                    sq_key: sq.mmap_key().unwrap_or(INVAL_UOBJ_KEY),
                    // Without an RQ (SRQ), the key is 0 as in siw: libsiw rejects
                    // `SIW_INVAL_UOBJ_KEY` even when it does not map the RQ.
                    rq_key: rq.as_ref().and_then(|r| r.mmap_key()).unwrap_or(0),
                })?;
            }
            Ok((qp_num, sq, rq))
        })();
        let (qp_num, sq, rq) = r.inspect_err(|_: &Error| dev.qps.put())?;
        attr.set_cap(QpCap {
            max_send_wr: num_sqe,
            max_recv_wr: num_rqe,
            max_send_sge: cap.max_send_sge,
            max_recv_sge: cap.max_recv_sge,
            max_inline_data: wqe::MAX_INLINE as u32,
        });
        let caps = Caps {
            sq_max_sge: cap.max_send_sge,
            rq_max_sge: cap.max_recv_sge,
            sig_all,
        };
        Ok(NewQp {
            qp_num,
            caps,
            sq,
            rq,
        })
    }

    /// Returns the QP number.
    pub(crate) fn qp_num(&self) -> u32 {
        self.qp_num
    }

    /// Whether the QP takes Immediate Data: not if it belongs to a legacy user context,
    /// whose CQ cannot show it.
    pub(crate) fn takes_imm(&self) -> bool {
        !self.who.user() || self.who.extended()
    }

    /// The remote rights the QP grants (its `IB_ACCESS_*` flags: remote write, read and
    /// atomic), which every inbound request must have besides the region's.
    ///
    /// Flags that grant no remote right at all count as remote write and read, the rights a
    /// QP has before its flags are set, as `siw` reports: an rdma_cm user's QP on the active
    /// side keeps the flags 0 that librdmacm gives it when it creates the QP (it applies
    /// iw_cm's flags only on the passive side; the kernel's rdma_cm applies them on both), and
    /// must still take Reads and Writes. Remote atomic access is never implied.
    pub(crate) fn remote_rights(&self) -> Rights {
        let remote = Rights::REMOTE_WRITE.0 | Rights::REMOTE_READ.0 | Rights::REMOTE_ATOMIC.0;
        match self.access.load(Relaxed) & remote {
            0 => Rights(DEFAULT_ACCESS & remote),
            a => Rights(a),
        }
    }

    /// Returns the current state.
    pub(crate) fn state(&self) -> QpState {
        QpState::from_u32(self.state.load(Relaxed))
    }

    /// Installs the data path of a new connection ([`Conn::new`]). Process context.
    pub(crate) fn attach_conn(qp: &Qp<RsiwDevice>, conn: Arc<Conn>) {
        let this: &RsiwQp = qp;
        let old = this.conn.replace(Some(conn));
        if let Some(old) = old {
            // Cannot happen: the connection manager attaches one connection per QP.
            old.stop();
        }
    }

    /// Returns the data path of the connection, if any. Any context (RCU, no lock).
    pub(crate) fn conn(&self) -> Option<Arc<Conn>> {
        self.conn.clone_value()
    }

    /// Queues the TX engine, if connected. Any context.
    fn kick_tx(&self) {
        let rcu = rcu::read_lock();
        if let Some(c) = self.conn.get(&rcu) {
            Conn::kick(c);
        }
    }

    /// Detaches and stops the data path: for `destroy_qp`, which waits for the connection's
    /// reference on the QP to be dropped. Process context, no QP lock held.
    pub(crate) fn detach_conn(qp: &Qp<RsiwDevice>) {
        let this: &RsiwQp = qp;
        let conn = this.conn.replace(None);
        if let Some(c) = conn {
            c.disconnect(true);
            c.stop();
        }
    }

    /// Modifies the QP (`siw_verbs_modify_qp()`).
    pub(crate) fn modify(qp: &Qp<RsiwDevice>, attr: &QpAttr, mask: QpAttrMask) -> Result {
        let this: &RsiwQp = qp;
        if !QpAttrMask::STANDARD.contains_all(mask) {
            return Err(EOPNOTSUPP);
        }
        let _g = this.modify.lock();
        // Check everything before changing anything.
        if mask.contains(QpAttrFlag::MaxQpRdAtomic)
            && u32::from(attr.max_rd_atomic()) > limits::MAX_ORD
        {
            return Err(EINVAL);
        }
        if mask.contains(QpAttrFlag::MaxDestRdAtomic)
            && u32::from(attr.max_dest_rd_atomic()) > limits::MAX_IRD
        {
            return Err(EINVAL);
        }
        let next = if mask.contains(QpAttrFlag::State) {
            let req = QpState::from_ib(attr.qp_state()?);
            let connected = this.connected.load(Relaxed) != 0;
            Some(next_state(this.state(), req, connected)?)
        } else {
            None
        };
        if mask.contains(QpAttrFlag::MaxQpRdAtomic) {
            this.ord.store(u32::from(attr.max_rd_atomic()), Relaxed);
        }
        if mask.contains(QpAttrFlag::MaxDestRdAtomic) {
            this.ird
                .store(u32::from(attr.max_dest_rd_atomic()), Relaxed);
        }
        if mask.contains(QpAttrFlag::AccessFlags) {
            this.access
                .store(u32::from(attr.qp_access_flags()), Relaxed);
        }
        if let Some((state, act)) = next {
            this.state.store(state as u32, Relaxed);
            if act.flush_sq {
                Self::flush_sq(qp);
            }
            if act.flush_rq {
                Self::flush_rq(qp);
            }
            if act.drop_conn || state == QpState::Error {
                if let Some(c) = this.conn() {
                    c.disconnect(state != QpState::Closing);
                    // The TX engine flushes what it holds once it sees ERROR.
                    Conn::kick(c.as_arc_borrow());
                }
            }
        }
        Ok(())
    }

    /// Moves the QP to ERROR and flushes its queues (for the data path on fatal errors).
    pub(crate) fn set_error(qp: &Qp<RsiwDevice>) {
        let this: &RsiwQp = qp;
        let _g = this.modify.lock();
        if this.state() != QpState::Error {
            this.state.store(QpState::Error as u32, Relaxed);
            Self::flush_sq(qp);
            Self::flush_rq(qp);
        }
    }

    /// The connection manager's move to RTS after a successful MPA exchange, with the
    /// negotiated IRD and ORD (`siw_qp_modify()` with `SIW_QP_ATTR_LLP_HANDLE`). Fails with
    /// `EINVAL` unless the QP is in IDLE or RTR. Process context.
    pub(crate) fn cm_establish(qp: &Qp<RsiwDevice>, ird: u32, ord: u32) -> Result {
        let this: &RsiwQp = qp;
        let _g = this.modify.lock();
        let (state, _) = next_state(this.state(), QpState::Rts, true)?;
        if state != QpState::Rts || this.state() == QpState::Rts {
            return Err(EINVAL);
        }
        this.ird.store(ird.min(limits::MAX_IRD), Relaxed);
        this.ord.store(ord.min(limits::MAX_ORD), Relaxed);
        this.connected.store(1, Relaxed);
        this.state.store(QpState::Rts as u32, Relaxed);
        Ok(())
    }

    /// The connection manager closed the QP's connection (`siw_qp_llp_close()`): the QP goes
    /// to ERROR and its queues are flushed. Process context.
    pub(crate) fn cm_disconnected(qp: &Qp<RsiwDevice>) {
        let this: &RsiwQp = qp;
        this.connected.store(0, Relaxed);
        Self::set_error(qp);
    }

    /// Returns the QP's attributes (`siw_query_qp()`).
    pub(crate) fn query(qp: &Qp<RsiwDevice>) -> Result<QpQuery> {
        let this: &RsiwQp = qp;
        let mtu = qp
            .device()
            .netdev(limits::PORT)
            .map(|n| n.mtu())
            .ok_or(ENODEV)?;
        let access = this.access.load(Relaxed);
        let access = if access == ACCESS_UNSET {
            DEFAULT_ACCESS
        } else {
            access
        };
        Ok(QpQuery {
            state: this.state().to_ib(),
            cap: QpCap {
                max_send_wr: this.sq.size(),
                max_recv_wr: this.rq.as_ref().map_or(0, |r| r.size()),
                max_send_sge: this.caps.sq_max_sge,
                max_recv_sge: this.caps.rq_max_sge,
                max_inline_data: wqe::MAX_INLINE as u32,
            },
            path_mtu: Mtu::from_bytes(mtu),
            max_rd_atomic: this.ord.load(Relaxed) as u8,
            max_dest_rd_atomic: this.ird.load(Relaxed) as u8,
            qp_access_flags: AccessFlags::from_raw(access),
            sq_sig_all: this.caps.sig_all,
        })
    }

    /// Completes a send queue work request into the send CQ.
    pub(crate) fn complete_sq(qp: &Qp<RsiwDevice>, c: SqCompletion) {
        if let Some(cq) = qp.send_cq() {
            let _ = RsiwCq::complete(cq, qp, &c.into());
        }
    }

    /// Completes a receive work request into the receive CQ.
    pub(crate) fn complete_rq(qp: &Qp<RsiwDevice>, c: &Completion) {
        if let Some(cq) = qp.recv_cq() {
            let _ = RsiwCq::complete(cq, qp, c);
        }
    }

    /// Completes every valid SQE with `IB_WC_WR_FLUSH_ERR` (`siw_sq_flush()`).
    ///
    /// At most one ring's worth is flushed per call, so a user refilling the ring concurrently
    /// cannot keep the kernel here.
    fn flush_sq(qp: &Qp<RsiwDevice>) {
        let this: &RsiwQp = qp;
        let mut s = Sqe::default();
        for _ in 0..this.sq.size() {
            if !this.sq.take_into(&this.sq_get, &mut s) {
                break;
            }
            let op = sanitise_opcode(s.opcode, this.who);
            Self::complete_sq(qp, SqCompletion::new(s.id, op, status::WR_FLUSH_ERR, 0));
        }
    }

    /// Completes every valid RQE with `IB_WC_WR_FLUSH_ERR` (`siw_rq_flush()`). The RQEs of an
    /// SRQ are shared and not flushed.
    fn flush_rq(qp: &Qp<RsiwDevice>) {
        let this: &RsiwQp = qp;
        let Some(rq) = &this.rq else {
            return;
        };
        let mut r = Rqe::default();
        for _ in 0..rq.size() {
            if !rq.take_into(&this.rq_get, &mut r) {
                break;
            }
            Self::complete_rq(qp, &flushed_rqe(r.id));
        }
    }

    /// Posts kernel send work requests (`siw_post_send()`).
    pub(crate) fn post_send<'a>(
        qp: &Qp<RsiwDevice>,
        wr: &'a SendWr,
    ) -> Result<(), PostError<'a, SendWr>> {
        let this: &RsiwQp = qp;
        if this.user {
            // User QPs post through the mapped ring; the command must be an empty doorbell.
            return Err((EINVAL, wr));
        }
        match this.state() {
            QpState::Error => {
                // ERROR is final: complete every WR as flushed, so `ib_drain_qp()` finishes.
                let ext = Ext::of(qp);
                for w in wr.iter() {
                    let Some(opcode) = sq_opcode(w.opcode(), ext) else {
                        return Err((EINVAL, w));
                    };
                    let c = SqCompletion::new(w.wr_id(), opcode, status::WR_FLUSH_ERR, 0);
                    Self::complete_sq(qp, c);
                }
                Ok(())
            }
            QpState::Rts => {
                let mut queued = false;
                let ext = Ext::of(qp);
                let res = wr.iter().try_for_each(|w| {
                    let mut sqe = this.build_sqe(w, ext).map_err(|e| (e, w))?;
                    check_send_keys(qp, w, &mut sqe).map_err(|e| (e, w))?;
                    let mut put_guard = this.sq_put.lock();
                    let put = *put_guard;
                    if this.sq.flags(put) != 0 {
                        return Err((ENOMEM, w));
                    }
                    this.sq.write(put, &sqe).map_err(|e| (e, w))?;
                    this.sq
                        .publish16(put, sqe.flags | flags::VALID)
                        .map_err(|e| (e, w))?;
                    *put_guard = put.wrapping_add(1);
                    queued = true;
                    Ok(())
                });
                // The WRs before a bad one stay posted: they must go out too.
                if queued {
                    this.kick_tx();
                }
                res
            }
            _ => Err((ENOTCONN, wr)),
        }
    }

    /// Converts a kernel send work request into a validated SQE; the RFC 7306 operations only
    /// if `rfc7306` is on.
    fn build_sqe(&self, w: &SendWr, ext: Ext) -> Result<Sqe> {
        let opcode = sq_opcode(w.opcode(), ext).ok_or(EINVAL)?;
        let sf = w.send_flags();
        let mut sqe = Sqe {
            id: w.wr_id(),
            opcode,
            ..Sqe::default()
        };
        if sf.contains(SendWrFlag::Signaled) || self.caps.sig_all {
            sqe.flags |= flags::SIGNALLED;
        }
        if sf.contains(SendWrFlag::Solicited) {
            sqe.flags |= flags::SOLICITED;
        }
        if sf.contains(SendWrFlag::Fence) {
            sqe.flags |= flags::READ_FENCE;
        }
        match opcode {
            op::INVAL_STAG => sqe.rkey = w.invalidate_rkey(),
            op::REG_MR => {
                let reg = w.reg().ok_or(EINVAL)?;
                sqe.rkey = reg.key;
                sqe.sge[0].length = u32::from(reg.access);
            }
            // Kernel Flush (`Documentation/infiniband/rsiw-extensions.rst`): a `struct
            // ib_rdma_wr`, the Flags in `ex.invalidate_rkey`, the length in the one SGE (none:
            // 0); no local memory is accessed.
            op::FLUSH => {
                let t = w.rdma().ok_or(EINVAL)?;
                sqe.raddr = t.remote_addr;
                sqe.rkey = t.rkey;
                let length = match w.num_sge() {
                    0 => 0,
                    1 => w.sges(1)?.next().map_or(0, |s| s.length),
                    _ => return Err(EINVAL),
                };
                let flags = w.invalidate_rkey();
                let known = FlushArgs::PERSISTENT | FlushArgs::GLOBAL | FlushArgs::REGION;
                if flags & !known != 0 || flags & (FlushArgs::PERSISTENT | FlushArgs::GLOBAL) == 0 {
                    return Err(EINVAL);
                }
                FlushArgs { length, flags }.to_sqe(&mut sqe);
            }
            // Kernel Atomic Write: a `struct ib_rdma_wr`, the 8 bytes at the kernel virtual
            // address of the one SGE, taken now.
            op::ATOMIC_WRITE => {
                let t = w.rdma().ok_or(EINVAL)?;
                sqe.raddr = t.remote_addr;
                sqe.rkey = t.rkey;
                let mut data = [0u8; 8];
                if w.num_sge() != 1 || w.copy_sge_data(&mut data, 1)? != 8 {
                    return Err(EINVAL);
                }
                wqe::set_atomic_write_data(&mut sqe, data);
            }
            o if op::is_atomic(o) => {
                let a = w.atomic().ok_or(EINVAL)?;
                sqe.raddr = a.remote_addr;
                sqe.rkey = a.rkey;
                // The original value goes to the one SGE (8 bytes, checked below).
                if w.num_sge() != 1 {
                    return Err(EINVAL);
                }
                sqe.num_sge = copy_sges(&mut sqe.sge, w.sges(1)?)?;
                AtomicArgs {
                    compare_add: a.compare_add,
                    swap: a.swap,
                    compare_add_mask: a.compare_add_mask,
                    swap_mask: a.swap_mask,
                }
                .to_sqe(&mut sqe);
            }
            _ => {
                if let Some(t) = w.rdma() {
                    sqe.raddr = t.remote_addr;
                    sqe.rkey = t.rkey;
                }
                match opcode {
                    op::SEND_REMOTE_INV => sqe.rkey = w.invalidate_rkey(),
                    op::SEND_WITH_IMM => sqe.rkey = w.imm_data(),
                    _ => {}
                }
                let write_imm = opcode == op::WRITE_WITH_IMM;
                let inline_ok = matches!(
                    opcode,
                    op::SEND | op::WRITE | op::SEND_WITH_IMM | op::WRITE_WITH_IMM
                );
                if sf.contains(SendWrFlag::Inline) && inline_ok {
                    let mut data = [0u8; wqe::MAX_INLINE];
                    let room = if write_imm {
                        wqe::MAX_INLINE_WRITE_IMM
                    } else {
                        wqe::MAX_INLINE
                    };
                    let len =
                        w.copy_inline(data.get_mut(..room).ok_or(EINVAL)?, self.caps.sq_max_sge)?;
                    sqe.flags |= flags::INLINE;
                    sqe.num_sge = 1;
                    sqe.sge[0].length = len as u32;
                    let dst = sqe.sge[1..].as_mut_bytes();
                    dst.get_mut(..len)
                        .ok_or(EINVAL)?
                        .copy_from_slice(&data[..len]);
                } else {
                    let max = if opcode == op::READ || opcode == op::READ_LOCAL_INV {
                        // The RDMA Read sink is exactly one SGE, as in siw.
                        if w.num_sge() != 1 {
                            return Err(EINVAL);
                        }
                        limits::MAX_SGE_RD
                    } else if write_imm {
                        // The immediate takes the last SGE slot.
                        self.caps.sq_max_sge.min(wqe::imm_slot() as u32)
                    } else {
                        self.caps.sq_max_sge
                    };
                    sqe.num_sge = copy_sges(&mut sqe.sge, w.sges(max)?)?;
                }
                if write_imm {
                    sqe.sge[wqe::imm_slot()].lkey = w.imm_data();
                }
            }
        }
        // The same check the TX engine applies to user SQEs.
        check_sqe(&sqe, self.caps.sq_max_sge, Consumer::Kernel).map_err(|_| EINVAL)?;
        Ok(sqe)
    }

    /// The doorbell of a user QP: an empty `post_send`.
    ///
    /// As in `siw`, a QP that is not connected answers `ENOTCONN`; in ERROR every SQE in the
    /// ring is completed as flushed (`siw` leaves them).
    pub(crate) fn doorbell(qp: &Qp<RsiwDevice>) -> Result {
        let this: &RsiwQp = qp;
        match this.state() {
            QpState::Error => {
                Self::flush_sq(qp);
                Ok(())
            }
            QpState::Rts => {
                if let Some(c) = this.conn() {
                    c.tx_inline(qp);
                }
                Ok(())
            }
            _ => Err(ENOTCONN),
        }
    }

    /// Posts kernel receive work requests (`siw_post_receive()`).
    pub(crate) fn post_recv<'a>(
        qp: &Qp<RsiwDevice>,
        wr: &'a RecvWr,
    ) -> Result<(), PostError<'a, RecvWr>> {
        let this: &RsiwQp = qp;
        let Some(rq) = &this.rq else {
            // No RQ: the QP uses an SRQ or was created without receive WRs.
            return Err((EINVAL, wr));
        };
        if this.user {
            return Err((EINVAL, wr));
        }
        match this.state() {
            QpState::Error => {
                for w in wr.iter() {
                    Self::complete_rq(qp, &flushed_rqe(w.wr_id()));
                }
                return Ok(());
            }
            // The connection is going: as `siw_post_receive()` and our `post_send`.
            QpState::Closing | QpState::Terminate => return Err((ENOTCONN, wr)),
            _ => {}
        }
        let pd = qp_pd(qp).map_err(|e| (e, wr))?;
        let mem = qp.device().mem();
        let mut put_guard = this.rq_put.lock();
        for w in wr.iter() {
            let rqe = build_rqe(w, this.caps.rq_max_sge, |s| {
                mem.check_lkey(pd, s, Rights::LOCAL_WRITE)
            })
            .map_err(|e| (e, w))?;
            let put = *put_guard;
            if rq.flags(put) != 0 {
                return Err((ENOMEM, w));
            }
            rq.write(put, &rqe).map_err(|e| (e, w))?;
            rq.publish16(put, flags::VALID).map_err(|e| (e, w))?;
            *put_guard = put.wrapping_add(1);
        }
        Ok(())
    }

    /// Takes the next SQE off the send queue for the TX engine: copied once into `sqe`, then
    /// validated.
    ///
    /// Returns `None` if the queue is empty, `Some(Err(completion))` for an invalid SQE
    /// (already released; complete it so and move the QP to ERROR).
    pub(crate) fn next_sqe(&self, sqe: &mut Sqe) -> Option<Result<(), SqCompletion>> {
        // Into the caller's buffer: the 120 bytes are not moved again.
        if !self.sq.take_into(&self.sq_get, sqe) {
            return None;
        }
        Some(match check_sqe(sqe, self.caps.sq_max_sge, self.who) {
            Ok(_) => Ok(()),
            Err(e) => Err(SqCompletion::new(
                sqe.id,
                sanitise_opcode(sqe.opcode, self.who),
                e.status(),
                0,
            )),
        })
    }

    /// Returns whether another SQE waits behind the ones taken (a hint: the producer may post
    /// one at any time).
    pub(crate) fn sq_more(&self) -> bool {
        self.sq.is_valid(self.sq_get.load(Relaxed))
    }

    /// Takes the next RQE off the receive queue (or the SRQ) for the RX engine, validated.
    /// An invalid RQE comes back as its error completion.
    pub(crate) fn next_rqe(qp: &Qp<RsiwDevice>, rqe: &mut Rqe) -> Option<Result<(), Completion>> {
        let this: &RsiwQp = qp;
        if let Some(srq) = qp.srq() {
            return RsiwSrq::next_rqe(srq).map(|r| r.map(|e| *rqe = e));
        }
        let rq = this.rq.as_ref()?;
        // Into the caller's buffer: the 112 bytes are not moved again.
        if !rq.take_into(&this.rq_get, rqe) {
            return None;
        }
        Some(match check_rqe(rqe, this.caps.rq_max_sge) {
            Ok(_) => Ok(()),
            Err(e) => Err(Completion::recv(rqe.id, e.status())),
        })
    }
}

/// The completion of a flushed receive.
pub(crate) fn flushed_rqe(id: u64) -> Completion {
    Completion::recv(id, status::WR_FLUSH_ERR)
}

#[cfg(CONFIG_RDMA_RSIW_KUNIT_TEST)]
#[kernel::prelude::kunit_tests(rsiw_qp_state)]
mod tests {
    use super::*;

    const ALL: [QpState; 6] = [
        QpState::Idle,
        QpState::Rtr,
        QpState::Rts,
        QpState::Closing,
        QpState::Terminate,
        QpState::Error,
    ];

    #[test]
    fn ib_mapping_round_trips() {
        for s in ALL {
            assert_eq!(QpState::from_ib(s.to_ib()), s);
        }
        assert_eq!(QpState::from_ib(IbQpState::Reset), QpState::Idle);
        assert!(IbQpState::try_from(7).is_err());
    }

    #[test]
    fn rts_needs_a_connection() {
        assert_eq!(
            next_state(QpState::Idle, QpState::Rts, false).map_err(|e| e.to_errno()),
            Err(EINVAL.to_errno())
        );
        assert!(matches!(
            next_state(QpState::Rtr, QpState::Rts, true),
            Ok((QpState::Rts, _))
        ));
    }

    #[test]
    fn error_is_final_and_flushes() {
        for s in ALL {
            let r = next_state(s, QpState::Error, false);
            match s {
                QpState::Idle
                | QpState::Rtr
                | QpState::Rts
                | QpState::Closing
                | QpState::Terminate => {
                    let (n, a) = r
                        .map_err(|_| ())
                        .unwrap_or((QpState::Idle, Actions::default()));
                    assert_eq!(n, QpState::Error);
                    assert!(a.flush_sq && a.flush_rq);
                }
                QpState::Error => {
                    assert!(matches!(r, Ok((QpState::Error, a)) if a == Actions::default()))
                }
            }
            // Out of ERROR only a graceful close is accepted, as a no-op; the rest fail.
            let out = next_state(QpState::Error, s, true);
            match s {
                QpState::Error | QpState::Closing => {
                    assert!(matches!(out, Ok((QpState::Error, a)) if a == Actions::default()))
                }
                _ => assert!(out.is_err()),
            }
        }
    }

    #[test]
    fn illegal_transitions() {
        assert!(next_state(QpState::Idle, QpState::Closing, false).is_err());
        assert!(next_state(QpState::Idle, QpState::Terminate, false).is_err());
        assert!(next_state(QpState::Rts, QpState::Idle, true).is_err());
        assert!(next_state(QpState::Terminate, QpState::Rts, true).is_err());
        assert!(next_state(QpState::Closing, QpState::Rts, true).is_err());
        assert!(matches!(
            next_state(QpState::Rts, QpState::Closing, true),
            Ok((
                QpState::Closing,
                Actions {
                    drop_conn: true,
                    flush_rq: true,
                    ..
                }
            ))
        ));
    }
}
