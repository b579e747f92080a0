// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand, RoCE and iWARP) provider abstractions.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/iw_cm.h`](srctree/include/rdma/iw_cm.h) and
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).
