// SPDX-License-Identifier: GPL-2.0

//! RDMA (InfiniBand, RoCE and iWARP) provider abstractions.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/iw_cm.h`](srctree/include/rdma/iw_cm.h) and
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).
//!
//! - [`device`]: the `struct ib_device` of a provider, its lifetime and its device-wide
//!   operations ([`device::Driver`]), which name the types of the provider's objects.
//! - One module per verbs object, each with its operations trait and its callbacks:
//!   [`ucontext`] (user contexts and the mappings of their queues), [`pd`], [`cq`] (and work
//!   completions), [`qp`], [`srq`] and [`mr`] (with access flags, keys and the memory behind a
//!   region); [`wr`] holds the work requests posted to QPs and SRQs.
//! - [`iwcm`]: the iWARP connection manager's operations and connection ids.
//! - [`object`]: the layout all verbs objects share ("C struct at offset 0, driver data behind
//!   it").
//! - [`attr`]: device and port attributes, GIDs and events.
//! - [`udata`]: driver-private data of uverbs commands.
//! - [`link`]: `rdma link` types, which create devices and fence their lifetime.
//! - [`mmap`]: queue memory shared with user space and its mmap entries.
//! - [`umem`]: pinned user memory (`ib_umem`) with page lookup and copy helpers.
//!
//! The `struct ib_device_ops` table is assembled from all of these in `vtable`.

pub mod attr;
pub mod cq;
pub mod device;
pub mod iwcm;
pub mod link;
pub mod mmap;
pub mod mr;
pub mod object;
pub mod pd;
pub mod qp;
pub mod srq;
pub mod ucontext;
pub mod udata;
pub mod umem;
mod vtable;
pub mod wr;
