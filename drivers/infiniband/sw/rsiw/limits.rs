// SPDX-License-Identifier: GPL-2.0

//! Device limits and identity reported by rsiw.
//!
//! The values start from the C `siw` driver's (`drivers/infiniband/sw/siw/siw.h` and
//! `include/uapi/rdma/siw-abi.h`), so that applications and rdma-core's `siw` provider see the
//! same device shape. They are documented, with the reasons, in
//! `Documentation/infiniband/rsiw.rst`; keep the two in sync.

/// The user ABI version of rdma-core's `siw` provider (`SIW_ABI_VERSION`).
pub(crate) const ABI_VERSION: u32 = 1;

/// Vendor id reported in the device attributes: the siw value (`SIW_VENDOR_ID`, "bmt").
pub(crate) const VENDOR_ID: u32 = 0x0062_6d74;

/// Node description of every rsiw device.
pub(crate) const NODE_DESC: &kernel::prelude::CStr = c"Software iWARP stack (rsiw)";

/// The only port of a device (one device per net device).
pub(crate) const PORT: u32 = 1;

/// Maximum number of QPs per device (`SIW_MAX_QP`).
pub(crate) const MAX_QP: u32 = 1024 * 100;
/// Maximum number of work requests per QP (`SIW_MAX_QP_WR`).
pub(crate) const MAX_QP_WR: u32 = 1024 * 32;
/// Maximum outbound RDMA READs per QP (ORD, `SIW_MAX_ORD_QP`).
pub(crate) const MAX_ORD: u32 = 128;
/// Maximum inbound RDMA READs per QP (IRD, `SIW_MAX_IRD_QP`).
pub(crate) const MAX_IRD: u32 = 128;
/// Maximum SGEs per send, receive and SRQ work request (`SIW_MAX_SGE`, fixed by the ABI: the
/// SQE and RQE hold 6 SGEs).
pub(crate) const MAX_SGE: u32 = 6;
/// Maximum SGEs of an RDMA READ sink (`SIW_MAX_SGE_RD`).
pub(crate) const MAX_SGE_RD: u32 = 1;
/// Maximum number of CQs per device (`SIW_MAX_CQ`).
pub(crate) const MAX_CQ: u32 = 1024 * 100;
/// Maximum number of entries per CQ (`SIW_MAX_CQE`).
pub(crate) const MAX_CQE: u32 = MAX_QP_WR * 100;
/// Maximum number of MRs per device (`SIW_MAX_MR`).
pub(crate) const MAX_MR: u32 = MAX_QP * 10;
/// Maximum number of PDs per device (`SIW_MAX_PD`).
pub(crate) const MAX_PD: u32 = MAX_QP;
/// Maximum number of memory windows (`SIW_MAX_MW`): none.
pub(crate) const MAX_MW: u32 = 0;
/// Maximum number of SRQs per device (`SIW_MAX_SRQ`).
pub(crate) const MAX_SRQ: u32 = MAX_QP;
/// Maximum number of work requests per SRQ (`SIW_MAX_SRQ_WR`).
pub(crate) const MAX_SRQ_WR: u32 = MAX_QP_WR * 10;
/// Maximum number of user contexts per device (`SIW_MAX_CONTEXT`).
pub(crate) const MAX_CONTEXT: u32 = MAX_PD;
/// Maximum number of pages of a fast registration (`SIW_MAX_SGE_PBL`).
pub(crate) const MAX_FAST_REG_PAGE_LIST_LEN: u32 = 256;
/// Largest message (`max_msg_sz`): 4 GiB - 1, the iWARP message length limit.
pub(crate) const MAX_MSG_SIZE: u32 = u32::MAX;
/// Number of GIDs per port: one, derived from the MAC address.
pub(crate) const GID_TABLE_LEN: i32 = 1;
/// The first QP number of a device (QP numbers are never 0, as with `siw`'s `XA_FLAGS_ALLOC1`).
pub(crate) const FIRST_QPN: u32 = 1;
