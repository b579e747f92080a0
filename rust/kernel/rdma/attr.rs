// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes, GIDs and events.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).

use crate::{
    bindings,
    impl_flags,
    net::device::NetDevice, //
};

impl_flags!(
    /// Device capability flags (`enum ib_device_cap_flags`), for [`DeviceAttr::device_cap_flags`].
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct DeviceCapFlags(u64);

    /// A device capability.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum DeviceCapFlag {
        /// `IB_DEVICE_RESIZE_MAX_WR`.
        ResizeMaxWr = bindings::ib_device_cap_flags_IB_DEVICE_RESIZE_MAX_WR as u64,
        /// `IB_DEVICE_BAD_PKEY_CNTR`.
        BadPkeyCntr = bindings::ib_device_cap_flags_IB_DEVICE_BAD_PKEY_CNTR as u64,
        /// `IB_DEVICE_BAD_QKEY_CNTR`.
        BadQkeyCntr = bindings::ib_device_cap_flags_IB_DEVICE_BAD_QKEY_CNTR as u64,
        /// `IB_DEVICE_RAW_MULTI`.
        RawMulti = bindings::ib_device_cap_flags_IB_DEVICE_RAW_MULTI as u64,
        /// `IB_DEVICE_AUTO_PATH_MIG`.
        AutoPathMig = bindings::ib_device_cap_flags_IB_DEVICE_AUTO_PATH_MIG as u64,
        /// `IB_DEVICE_CHANGE_PHY_PORT`.
        ChangePhyPort = bindings::ib_device_cap_flags_IB_DEVICE_CHANGE_PHY_PORT as u64,
        /// `IB_DEVICE_UD_AV_PORT_ENFORCE`.
        UdAvPortEnforce = bindings::ib_device_cap_flags_IB_DEVICE_UD_AV_PORT_ENFORCE as u64,
        /// `IB_DEVICE_CURR_QP_STATE_MOD`.
        CurrQpStateMod = bindings::ib_device_cap_flags_IB_DEVICE_CURR_QP_STATE_MOD as u64,
        /// `IB_DEVICE_SHUTDOWN_PORT`.
        ShutdownPort = bindings::ib_device_cap_flags_IB_DEVICE_SHUTDOWN_PORT as u64,
        /// `IB_DEVICE_PORT_ACTIVE_EVENT`.
        PortActiveEvent = bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64,
        /// `IB_DEVICE_SYS_IMAGE_GUID`.
        SysImageGuid = bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64,
        /// `IB_DEVICE_RC_RNR_NAK_GEN`.
        RcRnrNakGen = bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64,
        /// `IB_DEVICE_SRQ_RESIZE`.
        SrqResize = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64,
        /// `IB_DEVICE_N_NOTIFY_CQ`.
        NNotifyCq = bindings::ib_device_cap_flags_IB_DEVICE_N_NOTIFY_CQ as u64,
        /// `IB_DEVICE_MEM_WINDOW`.
        MemWindow = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64,
        /// `IB_DEVICE_UD_IP_CSUM`.
        UdIpCsum = bindings::ib_device_cap_flags_IB_DEVICE_UD_IP_CSUM as u64,
        /// `IB_DEVICE_XRC`.
        Xrc = bindings::ib_device_cap_flags_IB_DEVICE_XRC as u64,
        /// Memory management extensions: fast registration, local invalidate, send with
        /// invalidate (`IB_DEVICE_MEM_MGT_EXTENSIONS`).
        MemMgtExtensions = bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64,
        /// `IB_DEVICE_MEM_WINDOW_TYPE_2A`.
        MemWindowType2A = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2A as u64,
        /// `IB_DEVICE_MEM_WINDOW_TYPE_2B`.
        MemWindowType2B = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64,
        /// `IB_DEVICE_RC_IP_CSUM`.
        RcIpCsum = bindings::ib_device_cap_flags_IB_DEVICE_RC_IP_CSUM as u64,
        /// `IB_DEVICE_RAW_IP_CSUM`.
        RawIpCsum = bindings::ib_device_cap_flags_IB_DEVICE_RAW_IP_CSUM as u64,
        /// `IB_DEVICE_MANAGED_FLOW_STEERING`.
        ManagedFlowSteering = bindings::ib_device_cap_flags_IB_DEVICE_MANAGED_FLOW_STEERING as u64,
        /// `IB_DEVICE_RAW_SCATTER_FCS`.
        RawScatterFcs = bindings::ib_device_cap_flags_IB_DEVICE_RAW_SCATTER_FCS as u64,
        /// `IB_DEVICE_PCI_WRITE_END_PADDING`.
        PciWriteEndPadding = bindings::ib_device_cap_flags_IB_DEVICE_PCI_WRITE_END_PADDING as u64,
        /// RDMA Flush to global visibility (`IB_DEVICE_FLUSH_GLOBAL`).
        FlushGlobal = bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64,
        /// RDMA Flush to persistence (`IB_DEVICE_FLUSH_PERSISTENT`).
        FlushPersistent = bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT as u64,
        /// RDMA Atomic Write (`IB_DEVICE_ATOMIC_WRITE`).
        AtomicWrite = bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64,
    }
);

impl_flags!(
    /// Kernel-only capability flags (`enum ib_kernel_cap_flags`), for
    /// [`DeviceAttr::kernel_cap_flags`].
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct KernelCapFlags(u64);

    /// A kernel-only capability.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum KernelCapFlag {
        /// `IBK_LOCAL_DMA_LKEY`.
        LocalDmaLkey = bindings::ib_kernel_cap_flags_IBK_LOCAL_DMA_LKEY as u64,
        /// `IBK_INTEGRITY_HANDOVER`.
        IntegrityHandover = bindings::ib_kernel_cap_flags_IBK_INTEGRITY_HANDOVER as u64,
        /// `IBK_ON_DEMAND_PAGING`.
        OnDemandPaging = bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING as u64,
        /// `IBK_SG_GAPS_REG`.
        SgGapsReg = bindings::ib_kernel_cap_flags_IBK_SG_GAPS_REG as u64,
        /// The device may be deleted by the user with `rdma link delete` (`IBK_ALLOW_USER_UNREG`).
        AllowUserUnreg = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64,
        /// `IBK_BLOCK_MULTICAST_LOOPBACK`.
        BlockMulticastLoopback = bindings::ib_kernel_cap_flags_IBK_BLOCK_MULTICAST_LOOPBACK as u64,
        /// `IBK_UD_TSO`.
        UdTso = bindings::ib_kernel_cap_flags_IBK_UD_TSO as u64,
        /// `IBK_VIRTUAL_FUNCTION`.
        VirtualFunction = bindings::ib_kernel_cap_flags_IBK_VIRTUAL_FUNCTION as u64,
        /// `IBK_RDMA_NETDEV_OPA`.
        RdmaNetdevOpa = bindings::ib_kernel_cap_flags_IBK_RDMA_NETDEV_OPA as u64,
    }
);

impl_flags!(
    /// Port capability flags (`enum ib_port_capability_mask_bits`), for
    /// [`PortAttr::port_cap_flags`].
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct PortCapFlags(u32);

    /// A port capability.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum PortCapFlag {
        /// `IB_PORT_SM`.
        Sm = bindings::ib_port_capability_mask_bits_IB_PORT_SM,
        /// `IB_PORT_SYS_IMAGE_GUID_SUP`.
        SysImageGuidSup = bindings::ib_port_capability_mask_bits_IB_PORT_SYS_IMAGE_GUID_SUP,
        /// Supports connection management (`IB_PORT_CM_SUP`).
        CmSup = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP,
        /// Supports device management (`IB_PORT_DEVICE_MGMT_SUP`).
        DeviceMgmtSup = bindings::ib_port_capability_mask_bits_IB_PORT_DEVICE_MGMT_SUP,
    }
);

impl_flags!(
    /// Core capability flags of a port (`RDMA_CORE_CAP_*`), for
    /// [`PortImmutable::core_cap_flags`].
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct CoreCapFlags(u32);

    /// A core capability of a port.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CoreCapFlag {
        /// `RDMA_CORE_CAP_IB_MAD`.
        IbMad = bindings::RDMA_CORE_CAP_IB_MAD,
        /// `RDMA_CORE_CAP_IB_SMI`.
        IbSmi = bindings::RDMA_CORE_CAP_IB_SMI,
        /// `RDMA_CORE_CAP_IB_CM`.
        IbCm = bindings::RDMA_CORE_CAP_IB_CM,
        /// `RDMA_CORE_CAP_IW_CM`.
        IwCm = bindings::RDMA_CORE_CAP_IW_CM,
        /// `RDMA_CORE_CAP_IB_SA`.
        IbSa = bindings::RDMA_CORE_CAP_IB_SA,
        /// `RDMA_CORE_CAP_OPA_MAD`.
        OpaMad = bindings::RDMA_CORE_CAP_OPA_MAD,
        /// `RDMA_CORE_CAP_AF_IB`.
        AfIb = bindings::RDMA_CORE_CAP_AF_IB,
        /// `RDMA_CORE_CAP_ETH_AH`.
        EthAh = bindings::RDMA_CORE_CAP_ETH_AH,
        /// `RDMA_CORE_CAP_OPA_AH`.
        OpaAh = bindings::RDMA_CORE_CAP_OPA_AH,
        /// `RDMA_CORE_CAP_IB_GRH_REQUIRED`.
        IbGrhRequired = bindings::RDMA_CORE_CAP_IB_GRH_REQUIRED,
        /// `RDMA_CORE_CAP_PROT_IB`.
        ProtIb = bindings::RDMA_CORE_CAP_PROT_IB,
        /// `RDMA_CORE_CAP_PROT_ROCE`.
        ProtRoce = bindings::RDMA_CORE_CAP_PROT_ROCE,
        /// `RDMA_CORE_CAP_PROT_IWARP`.
        ProtIwarp = bindings::RDMA_CORE_CAP_PROT_IWARP,
        /// `RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP`.
        ProtRoceUdpEncap = bindings::RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP,
        /// `RDMA_CORE_CAP_PROT_RAW_PACKET`.
        ProtRawPacket = bindings::RDMA_CORE_CAP_PROT_RAW_PACKET,
        /// `RDMA_CORE_CAP_PROT_USNIC`.
        ProtUsnic = bindings::RDMA_CORE_CAP_PROT_USNIC,
    }
);

impl CoreCapFlags {
    /// The capabilities of an iWARP port (`RDMA_CORE_PORT_IWARP`).
    pub const PORT_IWARP: Self = Self(bindings::RDMA_CORE_PORT_IWARP);
}

/// Atomic operation support (`enum ib_atomic_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtomicCap {
    /// No atomic operations (`IB_ATOMIC_NONE`).
    #[default]
    None,
    /// Atomic operations are atomic with respect to this device only (`IB_ATOMIC_HCA`).
    Hca,
    /// Atomic operations are atomic with respect to the CPU as well (`IB_ATOMIC_GLOB`).
    Glob,
}

impl AtomicCap {
    fn as_raw(self) -> bindings::ib_atomic_cap {
        match self {
            Self::None => bindings::ib_atomic_cap_IB_ATOMIC_NONE,
            Self::Hca => bindings::ib_atomic_cap_IB_ATOMIC_HCA,
            Self::Glob => bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
        }
    }
}

/// Device attributes (the subset of `struct ib_device_attr` a provider reports).
///
/// Fields not listed here are reported as zero.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttr {
    /// Firmware version.
    pub fw_ver: u64,
    /// System image GUID, in network byte order.
    pub sys_image_guid: [u8; 8],
    /// Largest memory region, in bytes.
    pub max_mr_size: u64,
    /// Supported page sizes (bit `n` set: `2^n` bytes).
    pub page_size_cap: u64,
    /// IEEE OUI of the vendor.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Maximum number of QPs.
    pub max_qp: u32,
    /// Maximum number of outstanding work requests per QP.
    pub max_qp_wr: u32,
    /// Device capability flags.
    pub device_cap_flags: DeviceCapFlags,
    /// Kernel capability flags.
    pub kernel_cap_flags: KernelCapFlags,
    /// Maximum number of scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Maximum number of scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Maximum number of scatter/gather entries per RDMA READ.
    pub max_sge_rd: u32,
    /// Maximum number of CQs.
    pub max_cq: u32,
    /// Maximum number of entries per CQ.
    pub max_cqe: u32,
    /// Maximum number of MRs.
    pub max_mr: u32,
    /// Maximum number of PDs.
    pub max_pd: u32,
    /// Maximum number of incoming RDMA READ/atomic requests per QP (IRD).
    pub max_qp_rd_atom: u32,
    /// Maximum number of incoming RDMA READ/atomic requests for the device.
    pub max_res_rd_atom: u32,
    /// Maximum number of outgoing RDMA READ/atomic requests per QP (ORD).
    pub max_qp_init_rd_atom: u32,
    /// Atomic operation support.
    pub atomic_cap: AtomicCap,
    /// Masked atomic operation support.
    pub masked_atomic_cap: AtomicCap,
    /// Maximum number of memory windows.
    pub max_mw: u32,
    /// Maximum number of SRQs.
    pub max_srq: u32,
    /// Maximum number of outstanding work requests per SRQ.
    pub max_srq_wr: u32,
    /// Maximum number of scatter/gather entries per SRQ work request.
    pub max_srq_sge: u32,
    /// Maximum number of pages in a fast registration work request.
    pub max_fast_reg_page_list_len: u32,
    /// Number of P_Keys.
    pub max_pkeys: u16,
}

impl DeviceAttr {
    /// Writes the attributes into `raw`, leaving the fields not covered unchanged.
    ///
    /// # Safety
    ///
    /// `raw` must be valid for writes.
    pub(crate) unsafe fn write_to(&self, raw: *mut bindings::ib_device_attr) {
        // SAFETY: `raw` is valid for writes per the safety requirements.
        let a = unsafe { &mut *raw };
        a.fw_ver = self.fw_ver;
        a.sys_image_guid = u64::from_ne_bytes(self.sys_image_guid);
        a.max_mr_size = self.max_mr_size;
        a.page_size_cap = self.page_size_cap;
        a.vendor_id = self.vendor_id;
        a.vendor_part_id = self.vendor_part_id;
        a.hw_ver = self.hw_ver;
        a.max_qp = self.max_qp;
        a.max_qp_wr = self.max_qp_wr;
        a.device_cap_flags = self.device_cap_flags.into();
        a.kernel_cap_flags = self.kernel_cap_flags.into();
        a.max_send_sge = self.max_send_sge;
        a.max_recv_sge = self.max_recv_sge;
        a.max_sge_rd = self.max_sge_rd;
        a.max_cq = self.max_cq;
        a.max_cqe = self.max_cqe;
        a.max_mr = self.max_mr;
        a.max_pd = self.max_pd;
        a.max_qp_rd_atom = self.max_qp_rd_atom;
        a.max_res_rd_atom = self.max_res_rd_atom;
        a.max_qp_init_rd_atom = self.max_qp_init_rd_atom;
        a.atomic_cap = self.atomic_cap.as_raw();
        a.masked_atomic_cap = self.masked_atomic_cap.as_raw();
        a.max_mw = self.max_mw;
        a.max_srq = self.max_srq;
        a.max_srq_wr = self.max_srq_wr;
        a.max_srq_sge = self.max_srq_sge;
        a.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        a.max_pkeys = self.max_pkeys;
    }
}

/// An IB MTU (`enum ib_mtu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mtu {
    /// 256 bytes.
    #[default]
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl Mtu {
    /// Returns the largest IB MTU not larger than `bytes` (at least 256), like
    /// `ib_mtu_int_to_enum()`.
    pub fn from_bytes(bytes: u32) -> Self {
        match bytes {
            4096.. => Self::Mtu4096,
            2048.. => Self::Mtu2048,
            1024.. => Self::Mtu1024,
            512.. => Self::Mtu512,
            _ => Self::Mtu256,
        }
    }

    pub(crate) fn as_raw(self) -> bindings::ib_mtu {
        match self {
            Self::Mtu256 => bindings::ib_mtu_IB_MTU_256,
            Self::Mtu512 => bindings::ib_mtu_IB_MTU_512,
            Self::Mtu1024 => bindings::ib_mtu_IB_MTU_1024,
            Self::Mtu2048 => bindings::ib_mtu_IB_MTU_2048,
            Self::Mtu4096 => bindings::ib_mtu_IB_MTU_4096,
        }
    }
}

/// The logical state of a port (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortState {
    /// Down (`IB_PORT_DOWN`).
    #[default]
    Down,
    /// Active (`IB_PORT_ACTIVE`).
    Active,
}

impl PortState {
    /// Returns the state of a port backed by `ndev`: active if it is up and has carrier, like
    /// `ib_get_curr_port_state()`.
    pub fn of_netdev(ndev: &NetDevice) -> Self {
        if ndev.is_operational() {
            Self::Active
        } else {
            Self::Down
        }
    }

    fn as_raw(self) -> bindings::ib_port_state {
        match self {
            Self::Down => bindings::ib_port_state_IB_PORT_DOWN,
            Self::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
        }
    }

    /// Returns the physical state matching the logical state, as iWARP and RoCE drivers
    /// report it (`LINK_UP` when active, `DISABLED` otherwise).
    fn phys_state(self) -> u8 {
        let s = match self {
            Self::Active => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
            Self::Down => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
        };
        // CAST: The physical states are small (at most 7).
        s as u8
    }
}

/// Port attributes (the subset of `struct ib_port_attr` an Ethernet-based provider reports).
///
/// Fields not listed here are reported as zero; the physical state is derived from
/// [`PortAttr::state`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PortAttr {
    /// The logical port state.
    pub state: PortState,
    /// The largest MTU the port supports.
    pub max_mtu: Mtu,
    /// The active MTU.
    pub active_mtu: Mtu,
    /// Number of GID table entries.
    pub gid_tbl_len: i32,
    /// Port capability flags.
    pub port_cap_flags: PortCapFlags,
    /// Largest message size.
    pub max_msg_sz: u32,
    /// Active width (`IB_WIDTH_*`).
    pub active_width: u8,
    /// Active speed (`IB_SPEED_*`).
    pub active_speed: u16,
}

impl PortAttr {
    /// Writes the attributes into `raw`, after zeroing it.
    ///
    /// # Safety
    ///
    /// `raw` must be valid for writes.
    pub(crate) unsafe fn write_to(&self, raw: *mut bindings::ib_port_attr) {
        // SAFETY: `raw` is valid for writes; all-zero is a valid `ib_port_attr`.
        unsafe { raw.write(pin_init::zeroed()) };
        // SAFETY: `raw` is valid for writes and now initialised.
        let a = unsafe { &mut *raw };
        a.state = self.state.as_raw();
        a.phys_state = self.state.phys_state();
        a.max_mtu = self.max_mtu.as_raw();
        a.active_mtu = self.active_mtu.as_raw();
        a.gid_tbl_len = self.gid_tbl_len;
        a.port_cap_flags = self.port_cap_flags.into();
        a.max_msg_sz = self.max_msg_sz;
        a.active_width = self.active_width;
        a.active_speed = self.active_speed;
    }
}

/// Immutable port attributes (`struct ib_port_immutable`).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortImmutable {
    /// Number of P_Key table entries.
    pub pkey_tbl_len: i32,
    /// Number of GID table entries.
    pub gid_tbl_len: i32,
    /// Core capability flags.
    pub core_cap_flags: CoreCapFlags,
    /// Largest MAD size.
    pub max_mad_size: u32,
}

impl PortImmutable {
    /// Writes the attributes into `raw`.
    ///
    /// # Safety
    ///
    /// `raw` must be valid for writes.
    pub(crate) unsafe fn write_to(&self, raw: *mut bindings::ib_port_immutable) {
        // SAFETY: `raw` is valid for writes per the safety requirements.
        unsafe {
            raw.write(bindings::ib_port_immutable {
                pkey_tbl_len: self.pkey_tbl_len,
                gid_tbl_len: self.gid_tbl_len,
                core_cap_flags: self.core_cap_flags.into(),
                max_mad_size: self.max_mad_size,
            })
        };
    }
}

/// A GID (`union ib_gid`), as 16 raw bytes in network byte order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// Returns the GID an iWARP device derives from a MAC address: the MAC in the first six
    /// bytes, the rest zero (as `siw` and the iWARP CM expect).
    pub fn from_mac(mac: [u8; 6]) -> Self {
        let mut raw = [0u8; 16];
        for (d, s) in raw.iter_mut().zip(mac) {
            *d = s;
        }
        Self(raw)
    }
}

/// An asynchronous event type (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventType(bindings::ib_event_type);

impl EventType {
    /// The port became active (`IB_EVENT_PORT_ACTIVE`).
    pub const PORT_ACTIVE: Self = Self(bindings::ib_event_type_IB_EVENT_PORT_ACTIVE);
    /// The port went down (`IB_EVENT_PORT_ERR`).
    pub const PORT_ERR: Self = Self(bindings::ib_event_type_IB_EVENT_PORT_ERR);
    /// The GID table of the port changed (`IB_EVENT_GID_CHANGE`); ib_core re-reads it.
    pub const GID_CHANGE: Self = Self(bindings::ib_event_type_IB_EVENT_GID_CHANGE);
    /// The LID (for iWARP: the address) of the port changed (`IB_EVENT_LID_CHANGE`).
    pub const LID_CHANGE: Self = Self(bindings::ib_event_type_IB_EVENT_LID_CHANGE);
    /// A CQ overflowed or failed (`IB_EVENT_CQ_ERR`).
    pub const CQ_ERR: Self = Self(bindings::ib_event_type_IB_EVENT_CQ_ERR);
    /// A QP went to the error state because of a fatal error (`IB_EVENT_QP_FATAL`).
    pub const QP_FATAL: Self = Self(bindings::ib_event_type_IB_EVENT_QP_FATAL);
    /// A QP detected an invalid request from its peer (`IB_EVENT_QP_REQ_ERR`).
    pub const QP_REQ_ERR: Self = Self(bindings::ib_event_type_IB_EVENT_QP_REQ_ERR);
    /// A QP detected an access violation (`IB_EVENT_QP_ACCESS_ERR`).
    pub const QP_ACCESS_ERR: Self = Self(bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR);
    /// The last WQE of a QP attached to an SRQ was consumed (`IB_EVENT_QP_LAST_WQE_REACHED`).
    pub const QP_LAST_WQE_REACHED: Self =
        Self(bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED);
    /// The connection of a QP was established (`IB_EVENT_COMM_EST`).
    pub const COMM_EST: Self = Self(bindings::ib_event_type_IB_EVENT_COMM_EST);
    /// The SQ of a QP drained (`IB_EVENT_SQ_DRAINED`).
    pub const SQ_DRAINED: Self = Self(bindings::ib_event_type_IB_EVENT_SQ_DRAINED);
    /// An SRQ failed (`IB_EVENT_SRQ_ERR`).
    pub const SRQ_ERR: Self = Self(bindings::ib_event_type_IB_EVENT_SRQ_ERR);
    /// The number of WQEs of an SRQ dropped below its armed limit
    /// (`IB_EVENT_SRQ_LIMIT_REACHED`).
    pub const SRQ_LIMIT_REACHED: Self = Self(bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);

    pub(crate) fn as_raw(self) -> bindings::ib_event_type {
        self.0
    }
}
