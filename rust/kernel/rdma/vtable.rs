// SPDX-License-Identifier: GPL-2.0

//! The `struct ib_device_ops` table of a [`Driver`].
//!
//! The table is one C struct for the whole device. It is assembled here, at compile time, from
//! the callbacks of the device ([`Driver`], below) and of each object type, which live with the
//! object in its module (e.g. the CQ callbacks in [`super::cq`]), as `impl VTable<T>` blocks. An
//! optional operation that the driver does not implement is left `NULL`.

use super::{
    attr::Gid,
    cq::Cq,
    device::{
        kmalloc_size,
        Device,
        Driver, //
    },
    iwcm, mmap, mr,
    object::udata_opt,
    pd::Pd,
    qp::{
        self,
        Qp, //
    },
    srq::{
        self,
        Srq, //
    },
    ucontext::{
        self,
        Ucontext, //
    },
};
use crate::{
    bindings,
    error::from_result,
    module::this_module,
    prelude::*, //
};
use core::marker::PhantomData;

/// The callbacks of the `struct ib_device_ops` table for a [`Driver`].
pub(crate) struct VTable<T: Driver>(PhantomData<T>);

impl<T: Driver> VTable<T> {
    pub(crate) const VTABLE: bindings::ib_device_ops = bindings::ib_device_ops {
        owner: this_module::<T::OwnerModule>().as_ptr(),
        driver_id: T::DRIVER_ID.as_raw(),
        uverbs_abi_ver: T::UVERBS_ABI_VER,
        // The device.
        dealloc_driver: Some(Self::dealloc_driver_callback),
        query_device: Some(Self::query_device_callback),
        query_port: Some(Self::query_port_callback),
        get_port_immutable: Some(Self::get_port_immutable_callback),
        query_gid: if T::HAS_QUERY_GID {
            Some(Self::query_gid_callback)
        } else {
            None
        },
        alloc_hw_port_stats: if T::HAS_HW_COUNTERS && !T::HW_COUNTERS.is_empty() {
            Some(Self::alloc_hw_port_stats_callback)
        } else {
            None
        },
        get_hw_stats: if T::HAS_HW_COUNTERS && !T::HW_COUNTERS.is_empty() {
            Some(Self::get_hw_stats_callback)
        } else {
            None
        },
        // User contexts and their mappings (see `super::ucontext`).
        alloc_ucontext: if <T::Ucontext as ucontext::Operations>::HAS_ALLOC {
            Some(Self::alloc_ucontext_callback)
        } else {
            None
        },
        dealloc_ucontext: if <T::Ucontext as ucontext::Operations>::HAS_ALLOC {
            Some(Self::dealloc_ucontext_callback)
        } else {
            None
        },
        disassociate_ucontext: if <T::Ucontext as ucontext::Operations>::HAS_ALLOC
            && <T::Ucontext as ucontext::Operations>::HAS_DISASSOCIATE
        {
            Some(Self::disassociate_ucontext_callback)
        } else {
            None
        },
        mmap: if <T::Ucontext as ucontext::Operations>::HAS_ALLOC {
            Some(Self::mmap_callback)
        } else {
            None
        },
        mmap_free: if <T::Ucontext as ucontext::Operations>::HAS_ALLOC {
            Some(mmap::mmap_free_callback)
        } else {
            None
        },
        // Protection domains (see `super::pd`).
        alloc_pd: Some(Self::alloc_pd_callback),
        dealloc_pd: Some(Self::dealloc_pd_callback),
        // Completion queues (see `super::cq`).
        create_cq: Some(Self::create_cq_callback),
        destroy_cq: Some(Self::destroy_cq_callback),
        poll_cq: Some(Self::poll_cq_callback),
        req_notify_cq: Some(Self::req_notify_cq_callback),
        // Queue pairs (see `super::qp`).
        create_qp: Some(Self::create_qp_callback),
        modify_qp: Some(Self::modify_qp_callback),
        destroy_qp: Some(Self::destroy_qp_callback),
        post_send: Some(Self::post_send_callback),
        post_recv: Some(Self::post_recv_callback),
        query_qp: if <T::Qp as qp::Operations>::HAS_QUERY {
            Some(Self::query_qp_callback)
        } else {
            None
        },
        // Shared receive queues (see `super::srq`).
        create_srq: if <T::Srq as srq::Operations>::HAS_CREATE {
            Some(Self::create_srq_callback)
        } else {
            None
        },
        destroy_srq: if <T::Srq as srq::Operations>::HAS_CREATE {
            Some(Self::destroy_srq_callback)
        } else {
            None
        },
        modify_srq: if <T::Srq as srq::Operations>::HAS_MODIFY {
            Some(Self::modify_srq_callback)
        } else {
            None
        },
        query_srq: if <T::Srq as srq::Operations>::HAS_QUERY {
            Some(Self::query_srq_callback)
        } else {
            None
        },
        post_srq_recv: if <T::Srq as srq::Operations>::HAS_POST_RECV {
            Some(Self::post_srq_recv_callback)
        } else {
            None
        },
        // Memory regions (see `super::mr`).
        get_dma_mr: Some(Self::get_dma_mr_callback),
        reg_user_mr: Some(Self::reg_user_mr_callback),
        dereg_mr: Some(Self::dereg_mr_callback),
        alloc_mr: if <T::Mr as mr::Operations>::HAS_ALLOC {
            Some(Self::alloc_mr_callback)
        } else {
            None
        },
        map_mr_sg: if <T::Mr as mr::Operations>::HAS_ALLOC {
            Some(Self::map_mr_sg_callback)
        } else {
            None
        },
        // The iWARP connection manager (see `super::iwcm`): all or nothing.
        iw_create_listen: if <T::IwCm as iwcm::Operations>::HAS_CONNECT {
            Some(Self::iw_create_listen_callback)
        } else {
            None
        },
        iw_destroy_listen: if <T::IwCm as iwcm::Operations>::HAS_CONNECT {
            Some(Self::iw_destroy_listen_callback)
        } else {
            None
        },
        iw_connect: if <T::IwCm as iwcm::Operations>::HAS_CONNECT {
            Some(Self::iw_connect_callback)
        } else {
            None
        },
        iw_accept: if <T::IwCm as iwcm::Operations>::HAS_CONNECT {
            Some(Self::iw_accept_callback)
        } else {
            None
        },
        iw_reject: if <T::IwCm as iwcm::Operations>::HAS_CONNECT {
            Some(Self::iw_reject_callback)
        } else {
            None
        },
        iw_get_qp: if <T::IwCm as iwcm::Operations>::HAS_CONNECT {
            Some(Self::iw_get_qp_callback)
        } else {
            None
        },
        iw_add_ref: if <T::IwCm as iwcm::Operations>::HAS_CONNECT {
            Some(Self::iw_add_ref_callback)
        } else {
            None
        },
        iw_rem_ref: if <T::IwCm as iwcm::Operations>::HAS_CONNECT {
            Some(Self::iw_rem_ref_callback)
        } else {
            None
        },
        size_ib_ucontext: kmalloc_size::<Ucontext<T>>(),
        size_ib_pd: kmalloc_size::<Pd<T>>(),
        size_ib_cq: kmalloc_size::<Cq<T>>(),
        size_ib_qp: kmalloc_size::<Qp<T>>(),
        size_ib_srq: kmalloc_size::<Srq<T>>(),
        ..pin_init::zeroed()
    };

    /// Drops the driver data of a device.
    ///
    /// # Safety
    ///
    /// Called by ib_core exactly once per device, from `ib_dealloc_device()`, after which no op
    /// of the device is called any more. `ibdev` is a [`Device<T>`] with initialised data (the op
    /// is only set once the data is initialised).
    pub(crate) unsafe extern "C" fn dealloc_driver_callback(ibdev: *mut bindings::ib_device) {
        // SAFETY: Per the safety requirements the data is initialised and never used again.
        unsafe { Device::<T>::drop_data(ibdev) };
    }

    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `attr` is valid for writes; `udata` is NULL or valid.
    unsafe extern "C" fn query_device_callback(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let (dev, udata) = unsafe { (Device::<T>::from_raw(ibdev), udata_opt(udata)) };
            let a = T::query_device(dev, udata)?;
            // SAFETY: `attr` is valid for writes.
            unsafe { a.write_to(attr) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `attr` is valid for writes.
    unsafe extern "C" fn query_port_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let a = T::query_port(dev, port)?;
            // SAFETY: `attr` is valid for writes.
            unsafe { a.write_to(attr) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `imm` is valid for writes.
    unsafe extern "C" fn get_port_immutable_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let a = T::get_port_immutable(dev, port)?;
            // SAFETY: `imm` is valid for writes.
            unsafe { a.write_to(imm) };
            Ok(0)
        })
    }

    /// Allocates the counters of a port ([`Driver::HW_COUNTERS`]); ib_core frees them.
    ///
    /// # Safety
    ///
    /// Called by ib_core for a device of this driver.
    unsafe extern "C" fn alloc_hw_port_stats_callback(
        _ibdev: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        let descs = T::HW_COUNTERS;
        let Ok(n) = c_int::try_from(descs.len()) else {
            return core::ptr::null_mut();
        };
        // SAFETY: `descs` is a `'static` array of `n` descriptions (`HwCounter` is a transparent
        // `struct rdma_stat_desc` whose name is a `'static` string), which the counters keep
        // pointing to.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                descs.as_ptr().cast(),
                n,
                bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as c_ulong,
            )
        }
    }

    /// Reads the counters of port `port` into `stats` ([`Driver::hw_counters`]) and returns how
    /// many it updated: all of them.
    ///
    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `stats` was allocated by `alloc_hw_port_stats_callback`
    /// (its `value` array has `num_counters` entries) and ib_core holds its lock.
    unsafe extern "C" fn get_hw_stats_callback(
        ibdev: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: Per the safety requirements.
        let (dev, n) = unsafe { (Device::<T>::from_raw(ibdev), (*stats).num_counters) };
        let len = usize::try_from(n).unwrap_or(0);
        // SAFETY: `value` has `num_counters` entries, which nothing else accesses while ib_core
        // holds the lock of `stats`.
        let values = unsafe {
            core::slice::from_raw_parts_mut((&raw mut (*stats).value).cast::<u64>(), len)
        };
        T::hw_counters(dev, port, values);
        n
    }

    /// # Safety
    ///
    /// `ibdev` is a live [`Device<T>`]; `gid` is valid for writes.
    unsafe extern "C" fn query_gid_callback(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: c_int,
        gid: *mut bindings::ib_gid,
    ) -> c_int {
        from_result(|| {
            // SAFETY: Per the safety requirements.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let Gid(g) = T::query_gid(dev, port, index)?;
            // SAFETY: `gid` is valid for writes; `raw` is a 16-byte array in the union.
            unsafe { (*gid).raw = g };
            Ok(0)
        })
    }
}
