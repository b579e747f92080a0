// SPDX-License-Identifier: GPL-2.0

//! Verbs objects: user contexts, PDs, CQs, QPs, SRQs and MRs.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! ib_core allocates ucontexts, PDs, CQs, QPs and SRQs itself, with the size the provider
//! declares through `INIT_RDMA_OBJ_SIZE()`: the C struct comes first and the driver's data
//! follows it. Every object type is represented by the same Rust type, [`Object<T, K>`]: the C
//! struct at offset 0, then the driver data of kind `K` (e.g. [`Driver::Pd`]).
//!
//! - The create callback (e.g. [`Driver::alloc_pd`]) returns an initialiser for the data, which
//!   the abstraction runs in place in the memory ib_core allocated. If it fails, ib_core frees
//!   the memory without calling the destroy op, and nothing is dropped.
//! - The destroy callback (e.g. [`Driver::dealloc_pd`]) is a hook that runs with the object
//!   still intact; afterwards the abstraction drops the data and ib_core frees the memory.
//! - ib_core destroys all objects of a device (including those of user contexts that are still
//!   open, through uverbs disassociation) before the device's driver data is dropped, so an
//!   object's [`Object::device`] is always valid.
//!
//! Memory regions are allocated by the provider in C (`get_dma_mr`/`reg_user_mr` return a
//! `struct ib_mr *`). The abstraction allocates them with the same layout, so [`Mr<T>`] is an
//! [`Object`] as well, freed after [`Driver::dereg_mr`].

use super::device::{
    Device,
    Driver, //
};
use crate::{
    bindings,
    prelude::*,
    sync::{
        aref::AlwaysRefCounted,
        Completion,
        Refcount, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    mem::MaybeUninit,
    ops::Deref,
    ptr::NonNull, //
};

/// A kind of verbs object.
///
/// # Safety
///
/// - `Raw` must be the C struct of the object kind, with a `struct ib_device *device` field
///   that [`ObjectKind::device`] returns.
/// - For kinds allocated by ib_core, the matching `size_ib_*` field of the device's ops must be
///   at least the size of [`Object<T, Self>`].
pub unsafe trait ObjectKind<T: Driver>: 'static {
    /// The C struct of the object (e.g. `struct ib_pd`).
    type Raw;
    /// The driver's data for this kind of object.
    type Data: Send + Sync;

    /// Returns the `device` field of `raw`.
    ///
    /// # Safety
    ///
    /// `raw` must point to a live object whose `device` field has been set by ib_core.
    unsafe fn device(raw: *mut Self::Raw) -> *mut bindings::ib_device;
}

macro_rules! object_kind {
    ($(#[$meta:meta])* $kind:ident, $raw:ident, $data:ident, $alias:ident) => {
        $(#[$meta])*
        pub struct $kind;

        // SAFETY: `$raw` has a `device` field, which is what `device()` returns. The matching
        // `size_$raw` op field is set to the size of `Object<T, Self>` by the device's vtable.
        unsafe impl<T: Driver> ObjectKind<T> for $kind {
            type Raw = bindings::$raw;
            type Data = T::$data;

            unsafe fn device(raw: *mut Self::Raw) -> *mut bindings::ib_device {
                // SAFETY: Per the safety requirements `raw` is a live object.
                unsafe { (*raw).device }
            }
        }

        #[doc = concat!("A `struct ", stringify!($raw), "` with the driver's [`Driver::",
                        stringify!($data), "`] data.")]
        pub type $alias<T> = Object<T, $kind>;
    };
}

object_kind!(
    /// User contexts (`struct ib_ucontext`).
    UcontextKind, ib_ucontext, Ucontext, Ucontext
);
object_kind!(
    /// Protection domains (`struct ib_pd`).
    PdKind, ib_pd, Pd, Pd
);
object_kind!(
    /// Completion queues (`struct ib_cq`).
    CqKind, ib_cq, Cq, Cq
);
/// Queue pairs (`struct ib_qp`).
///
/// Unlike the other kinds, QPs are reference counted ([`ARef<Qp<T>>`](crate::sync::aref::ARef)):
/// connection managers
/// and data paths refer to a QP from socket callbacks and work items, and the iw_cm takes
/// references (`iw_add_ref`). ib_core frees a QP when its `destroy_qp` op returns, so the
/// abstraction's destroy op runs the driver's hook ([`Driver::destroy_qp`]), which must make
/// every holder drop its reference, and then waits until the last reference is gone before it
/// drops the data (siw's `qp_free` completion).
pub struct QpKind;

// SAFETY: `ib_qp` has a `device` field, which is what `device()` returns. `size_ib_qp` is set to
// the size of `Object<T, Self>` by the device's vtable.
unsafe impl<T: Driver> ObjectKind<T> for QpKind {
    type Raw = bindings::ib_qp;
    type Data = Counted<T::Qp>;

    unsafe fn device(raw: *mut Self::Raw) -> *mut bindings::ib_device {
        // SAFETY: Per the safety requirements `raw` is a live object.
        unsafe { (*raw).device }
    }
}

/// A `struct ib_qp` with the driver's [`Driver::Qp`] data.
pub type Qp<T> = Object<T, QpKind>;

/// Driver data with a reference count that the destruction of the object waits for.
///
/// Dereferences to the data.
///
/// # Invariants
///
/// `refs` is the number of [`ARef`](crate::sync::aref::ARef)s to the object plus one for ib_core, which it gives up when
/// it destroys the object; `released` is completed when `refs` drops to zero, and never before.
#[pin_data]
pub struct Counted<D> {
    refs: Refcount,
    #[pin]
    released: Completion,
    #[pin]
    data: D,
}

impl<D> Counted<D> {
    /// Returns an initialiser for `data` with ib_core's reference.
    pub(crate) fn new(data: impl PinInit<D, Error>) -> impl PinInit<Self, Error> {
        // INVARIANT: The count starts with ib_core's reference; nothing completed.
        try_pin_init!(Self {
            refs: Refcount::new(1),
            released <- Completion::new(),
            data <- data,
        }? Error)
    }
}

impl<D> Deref for Counted<D> {
    type Target = D;

    fn deref(&self) -> &D {
        &self.data
    }
}

impl<T: Driver> Object<T, QpKind> {
    /// Drops ib_core's reference and waits until all other references are dropped.
    ///
    /// Called once, by the destroy op, after the driver's hook. May sleep.
    pub(crate) fn release_and_wait(&self) {
        if !self.data.refs.dec_and_test() {
            self.data.released.wait_for_completion();
        }
    }
}

// SAFETY: `inc_ref` is only called through a live reference, so the count is at least one and
// the object alive; the object is not freed before the count drops to zero, because the destroy
// op waits for `released` (see `release_and_wait`), which `dec_ref` completes only then.
unsafe impl<T: Driver> AlwaysRefCounted for Object<T, QpKind> {
    fn inc_ref(&self) {
        self.data.refs.inc();
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference, so the object is alive.
        let this = unsafe { obj.as_ref() };
        if this.data.refs.dec_and_test() {
            // The destroy op frees the object after `wait_for_completion()` returns, which
            // needs the completion's lock that `complete_all()` holds until it is done with it.
            this.data.released.complete_all();
        }
    }
}
object_kind!(
    /// Shared receive queues (`struct ib_srq`).
    SrqKind, ib_srq, Srq, Srq
);
object_kind!(
    /// Memory regions (`struct ib_mr`). Unlike the other kinds, they are allocated by the
    /// abstraction (in the same layout), not by ib_core.
    MrKind, ib_mr, Mr, Mr
);

/// A verbs object: its C struct followed by the driver's data. Dereferences to the data.
///
/// # Invariants
///
/// - `raw` is at offset 0; it is a live object of device `Device<T>`, whose `device` field is
///   set.
/// - `data` is initialised and pinned while a reference to the object is handed out.
#[repr(C)]
pub struct Object<T: Driver, K: ObjectKind<T>> {
    raw: Opaque<K::Raw>,
    data: K::Data,
    _p: PhantomData<T>,
}

impl<T: Driver, K: ObjectKind<T>> Object<T, K> {
    /// Returns a raw pointer to the C struct.
    pub fn as_raw(&self) -> *mut K::Raw {
        self.raw.get()
    }

    /// Returns the device the object belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant the object is live and its `device` field is set; the
        // device outlives all its objects (see the module documentation).
        unsafe { Device::from_raw(K::device(self.as_raw())) }
    }

    /// Creates a reference to an object from a pointer to its C struct.
    ///
    /// # Safety
    ///
    /// `raw` must be the C struct of a live `Object<T, K>` with initialised data that stays alive
    /// for `'a`.
    pub(crate) unsafe fn from_raw<'a>(raw: *mut K::Raw) -> &'a Self {
        // SAFETY: `raw` is at offset 0 (type invariant); the caller guarantees the rest.
        unsafe { &*raw.cast::<Self>() }
    }

    /// Initialises the driver data of an object allocated by ib_core.
    ///
    /// On failure nothing needs to be dropped.
    ///
    /// # Safety
    ///
    /// `raw` must point to an allocation of at least the size of `Self` that starts with an
    /// initialised `K::Raw` (whose `device` field is a live [`Device<T>`]) and whose driver part
    /// is uninitialised and will not move.
    pub(crate) unsafe fn init_data(raw: *mut K::Raw, init: impl PinInit<K::Data, Error>) -> Result {
        const_assert!(core::mem::offset_of!(Self, raw) == 0);
        let this = raw.cast::<Self>();
        // SAFETY: Per the safety requirements `data` is uninitialised memory that does not move.
        unsafe { pin_init::raw_try_init(&raw mut (*this).data, init) }
    }

    /// Drops the driver data.
    ///
    /// # Safety
    ///
    /// `raw` must be the C struct of an `Object<T, K>` with initialised data, and the data must
    /// not be used afterwards.
    pub(crate) unsafe fn drop_data(raw: *mut K::Raw) {
        let this = raw.cast::<Self>();
        // SAFETY: Per the safety requirements.
        unsafe { core::ptr::drop_in_place(&raw mut (*this).data) };
    }
}

impl<T: Driver> Object<T, MrKind> {
    /// Allocates a zeroed `struct ib_mr` followed by the driver data initialised with `init`,
    /// sets its keys from [`Driver::mr_keys`], and returns a pointer to the `ib_mr` for ib_core
    /// (which fills in the other common fields).
    ///
    /// The object must be freed with [`Self::free_raw`].
    pub(crate) fn new_raw(init: impl PinInit<T::Mr, Error>) -> Result<*mut bindings::ib_mr> {
        const_assert!(core::mem::offset_of!(Self, raw) == 0);
        let b = KBox::<Self>::new_uninit(GFP_KERNEL)?;
        let this = KBox::into_raw(b).cast::<Self>();
        // SAFETY: `this` is a valid, exclusively owned allocation for a `Self`.
        unsafe { (&raw mut (*this).raw).write(Opaque::zeroed()) };
        // SAFETY: `data` is uninitialised memory inside the allocation, which does not move
        // until it is freed.
        if let Err(e) = unsafe { pin_init::raw_try_init(&raw mut (*this).data, init) } {
            // SAFETY: `this` came from `KBox::into_raw` of a `KBox<MaybeUninit<Self>>`; nothing
            // in it needs dropping.
            drop(unsafe { KBox::from_raw(this.cast::<MaybeUninit<Self>>()) });
            return Err(e);
        }
        // SAFETY: `data` was initialised above; nobody else has access to `this` yet.
        let (lkey, rkey) = T::mr_keys(unsafe { &(*this).data });
        // SAFETY: `raw` is a zeroed `ib_mr`, exclusively owned.
        unsafe {
            let raw = (*this).raw.get();
            (*raw).lkey = lkey;
            (*raw).rkey = rkey;
        }
        Ok(this.cast())
    }

    /// Drops the driver data of an MR and frees it.
    ///
    /// # Safety
    ///
    /// `mr` must have been returned by [`Self::new_raw`] and must not be used afterwards.
    pub(crate) unsafe fn free_raw(mr: *mut bindings::ib_mr) {
        let this = mr.cast::<Self>();
        // SAFETY: Per the safety requirements the data is initialised and not used again.
        unsafe { core::ptr::drop_in_place(&raw mut (*this).data) };
        // SAFETY: `this` came from `KBox::into_raw` of a `KBox<MaybeUninit<Self>>`.
        drop(unsafe { KBox::from_raw(this.cast::<MaybeUninit<Self>>()) });
    }
}

impl<T: Driver, K: ObjectKind<T>> Deref for Object<T, K> {
    type Target = K::Data;

    fn deref(&self) -> &K::Data {
        &self.data
    }
}

// SAFETY: The C part is managed by ib_core, which allows objects to be used and destroyed from
// any thread; the driver data is `Send`.
unsafe impl<T: Driver, K: ObjectKind<T>> Send for Object<T, K> {}

// SAFETY: Only `&self` methods that are safe to call concurrently are provided; the driver data
// is `Sync`.
unsafe impl<T: Driver, K: ObjectKind<T>> Sync for Object<T, K> {}

macro_rules! raw_wrapper {
    ($(#[$meta:meta])* $name:ident, $raw:ident) => {
        $(#[$meta])*
        ///
        /// # Invariants
        ///
        /// A reference to it is only handed out while the C struct is valid.
        #[repr(transparent)]
        pub struct $name(Opaque<bindings::$raw>);

        impl $name {
            /// Creates a reference from a pointer to the C struct.
            ///
            /// # Safety
            ///
            /// `ptr` must be valid (and, for a mutable reference, not aliased) for `'a`.
            pub unsafe fn from_raw<'a>(ptr: *const bindings::$raw) -> &'a mut Self {
                // SAFETY: `Self` is a transparent wrapper of the C struct; valid per the safety
                // requirements.
                unsafe { &mut *ptr.cast_mut().cast::<Self>() }
            }

            /// Returns a raw pointer to the C struct.
            pub fn as_raw(&self) -> *mut bindings::$raw {
                self.0.get()
            }
        }
    };
}

raw_wrapper!(
    /// Attributes of a CQ to create (`struct ib_cq_init_attr`).
    CqInitAttr, ib_cq_init_attr
);
raw_wrapper!(
    /// Attributes of a QP to create (`struct ib_qp_init_attr`).
    QpInitAttr, ib_qp_init_attr
);
raw_wrapper!(
    /// Attributes of an SRQ to create (`struct ib_srq_init_attr`).
    SrqInitAttr, ib_srq_init_attr
);
raw_wrapper!(
    /// QP attributes to modify (`struct ib_qp_attr`).
    QpAttr, ib_qp_attr
);
raw_wrapper!(
    /// A send work request (`struct ib_send_wr`), part of a chain.
    SendWr, ib_send_wr
);
raw_wrapper!(
    /// A receive work request (`struct ib_recv_wr`), part of a chain.
    RecvWr, ib_recv_wr
);
raw_wrapper!(
    /// A work completion slot to fill (`struct ib_wc`); may be uninitialised.
    Wc, ib_wc
);

impl CqInitAttr {
    /// Returns the requested number of CQ entries.
    pub fn cqe(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).cqe }
    }

    /// Returns the requested completion vector.
    pub fn comp_vector(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).comp_vector }
    }

    /// Returns the `IB_UVERBS_CQ_FLAGS_*` creation flags.
    pub fn flags(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).flags }
    }
}

impl QpInitAttr {
    /// Returns the QP type (`IB_QPT_*`).
    pub fn qp_type(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).qp_type }
    }

    /// Returns the creation flags (`IB_QP_CREATE_*`).
    pub fn create_flags(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).create_flags }
    }
}

impl QpAttr {
    /// Returns the requested QP state (`IB_QPS_*`), valid if `IB_QP_STATE` is in the mask.
    pub fn qp_state(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).qp_state }
    }
}

impl SendWr {
    /// Returns the next work request of the chain.
    pub fn next(&self) -> Option<&SendWr> {
        // SAFETY: By the type invariant the struct is valid; the chain it links to is valid for
        // as long as the first request is.
        let next = unsafe { (*self.as_raw()).next };
        if next.is_null() {
            None
        } else {
            // SAFETY: See above; only shared references to the chain are handed out.
            Some(unsafe { &*next.cast::<SendWr>() })
        }
    }

    /// Returns the opcode (`IB_WR_*`).
    pub fn opcode(&self) -> u32 {
        // SAFETY: By the type invariant the struct is valid.
        unsafe { (*self.as_raw()).opcode }
    }
}

impl RecvWr {
    /// Returns the next work request of the chain.
    pub fn next(&self) -> Option<&RecvWr> {
        // SAFETY: By the type invariant the struct is valid; the chain it links to is valid for
        // as long as the first request is.
        let next = unsafe { (*self.as_raw()).next };
        if next.is_null() {
            None
        } else {
            // SAFETY: See above; only shared references to the chain are handed out.
            Some(unsafe { &*next.cast::<RecvWr>() })
        }
    }
}
