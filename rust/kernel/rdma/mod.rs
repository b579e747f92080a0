// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand, RoCE and iWARP) provider abstractions.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/iw_cm.h`](srctree/include/rdma/iw_cm.h) and
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).
//!
//! - [`device`]: the `struct ib_device` of a provider, its lifetime and its operations, built
//!   from the [`device::Driver`] trait.
//! - [`object`]: verbs objects (ucontext, PD, CQ, QP, SRQ, MR), which all follow the same
//!   "C struct at offset 0, driver data behind it" pattern.
//! - [`attr`]: device and port attributes, GIDs and events.
//! - [`udata`]: driver-private data of uverbs commands.
//! - [`iwcm`]: the iWARP connection manager's provider operations and connection ids.
//! - [`link`]: `rdma link` types, which create devices and fence their lifetime.
//! - [`cq`], [`qp`], [`srq`]: completion queues and work completions, queue pairs and work
//!   requests, shared receive queues.
//! - [`mmap`]: queue memory shared with user space and its mmap entries.
//! - [`mr`]: memory region access flags, keys and the STag index table.
//! - [`umem`]: pinned user memory (`ib_umem`) with page lookup and copy helpers.

pub mod attr;
pub mod cq;
pub mod device;
pub mod iwcm;
pub mod link;
pub mod mmap;
pub mod mr;
pub mod object;
pub mod qp;
pub mod srq;
pub mod udata;
pub mod umem;
