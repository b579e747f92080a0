// SPDX-License-Identifier: GPL-2.0

//! The common layout of verbs objects: user contexts, PDs, CQs, QPs, SRQs and MRs.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h).
//!
//! ib_core allocates ucontexts, PDs, CQs, QPs and SRQs itself, with the size the provider
//! declares through `INIT_RDMA_OBJ_SIZE()`: the C struct comes first and the driver's data
//! follows it. Every object type is represented by the same Rust type, [`Object<T, K>`]: the C
//! struct at offset 0, then the driver data of kind `K` (e.g. [`Driver::Pd`]). Each kind has its
//! own module with its alias and its operations (e.g. [`super::pd::Pd`] and
//! [`super::pd::Operations`]).
//!
//! - The create operation (e.g. [`super::pd::Operations::alloc`]) returns an initialiser for the
//!   data, which the abstraction runs in place in the memory ib_core allocated. If it fails,
//!   ib_core frees the memory without calling the destroy op, and nothing is dropped.
//! - The destroy operation (e.g. [`super::pd::Operations::dealloc`]) is a hook that runs with
//!   the object still intact; afterwards the abstraction drops the data and ib_core frees the
//!   memory.
//! - ib_core destroys all objects of a device (including those of user contexts that are still
//!   open, through uverbs disassociation) before the device's driver data is dropped, so an
//!   object's [`Object::device`] is always valid.
//!
//! Memory regions are allocated by the provider in C (`get_dma_mr`/`reg_user_mr` return a
//! `struct ib_mr *`). The abstraction allocates them with the same layout, so
//! [`Mr<T>`](super::mr::Mr) is an [`Object`] as well (see [`super::mr`]).

use super::device::{
    Device,
    Driver, //
};
use crate::{
    bindings,
    prelude::*,
    sync::{
        Completion,
        Refcount, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ops::Deref, //
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
    ($(#[$meta:meta])* $kind:ident, $raw:ident, $data:ty) => {
        $(#[$meta])*
        pub struct $kind;

        // SAFETY: `$raw` has a `device` field, which is what `device()` returns. The matching
        // `size_$raw` op field is set to the size of `Object<T, Self>` by the device's vtable
        // (or, for MRs, the abstraction allocates an `Object<T, Self>` itself).
        unsafe impl<T: Driver> ObjectKind<T> for $kind {
            type Raw = bindings::$raw;
            type Data = $data;

            unsafe fn device(raw: *mut Self::Raw) -> *mut bindings::ib_device {
                // SAFETY: Per the safety requirements `raw` is a live object.
                unsafe { (*raw).device }
            }
        }
    };
}

object_kind!(
    /// User contexts (`struct ib_ucontext`).
    UcontextKind, ib_ucontext, T::Ucontext
);
object_kind!(
    /// Protection domains (`struct ib_pd`).
    PdKind, ib_pd, T::Pd
);
object_kind!(
    /// Completion queues (`struct ib_cq`).
    CqKind, ib_cq, T::Cq
);
object_kind!(
    /// Queue pairs (`struct ib_qp`). Their data is reference counted, see
    /// [`super::qp::Qp`].
    QpKind, ib_qp, Counted<T::Qp>
);
object_kind!(
    /// Shared receive queues (`struct ib_srq`).
    SrqKind, ib_srq, T::Srq
);
object_kind!(
    /// Memory regions (`struct ib_mr`). Unlike the other kinds, they are allocated by the
    /// abstraction (in the same layout), not by ib_core.
    MrKind, ib_mr, T::Mr
);

/// Driver data with a reference count that the destruction of the object waits for.
///
/// Dereferences to the data.
///
/// # Invariants
///
/// `refs` is the number of [`ARef`](crate::sync::aref::ARef)s to the object plus one for
/// ib_core, which it gives up when it destroys the object; `released` is completed when `refs`
/// drops to zero, and never before.
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

    /// Takes a reference.
    pub(crate) fn inc(&self) {
        self.refs.inc();
    }

    /// Drops a reference; the last one completes `released`. Returns true if it was the last.
    pub(crate) fn dec(&self) -> bool {
        if self.refs.dec_and_test() {
            // The destroy op frees the object after `wait_for_completion()` returns, which needs
            // the completion's lock that `complete_all()` holds until it is done with it.
            self.released.complete_all();
            return true;
        }
        false
    }

    /// Drops ib_core's reference and waits until all other references are dropped. May sleep.
    pub(crate) fn release_and_wait(&self) {
        if !self.refs.dec_and_test() {
            self.released.wait_for_completion();
        }
    }
}

impl<D> Deref for Counted<D> {
    type Target = D;

    fn deref(&self) -> &D {
        &self.data
    }
}

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

    /// Returns the raw object pointer `p` as an object of `dev`, if it is set and of that device.
    ///
    /// # Safety
    ///
    /// `p` must be NULL or a live object of kind `K` that stays alive for `'a` (e.g. one that a
    /// QP or SRQ holds a use count on, for as long as that QP or SRQ is borrowed).
    pub(crate) unsafe fn peer<'a>(dev: &Device<T>, p: *mut K::Raw) -> Option<&'a Self> {
        if p.is_null() {
            return None;
        }
        // SAFETY: Per the safety requirements `p` is live.
        if unsafe { K::device(p) } != dev.as_raw() {
            return None;
        }
        // SAFETY: `p` is an object of this device, hence an `Object<T, K>` created by this
        // driver; the caller guarantees that it stays alive for `'a`.
        Some(unsafe { Self::from_raw(p) })
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

    /// Returns a pointer to the driver data of `raw`, without creating a reference.
    ///
    /// # Safety
    ///
    /// `raw` must be the C struct of an `Object<T, K>`.
    pub(crate) unsafe fn data_ptr(raw: *mut K::Raw) -> *mut K::Data {
        // SAFETY: `raw` is at offset 0 of an `Object<T, K>` (safety requirements).
        unsafe { &raw mut (*raw.cast::<Self>()).data }
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

/// Converts a possibly-NULL `struct ib_udata` pointer into an optional [`Udata`].
///
/// [`Udata`]: super::udata::Udata
///
/// # Safety
///
/// `udata` must be NULL or valid for `'a`.
pub(crate) unsafe fn udata_opt<'a>(
    udata: *mut bindings::ib_udata,
) -> Option<&'a super::udata::Udata> {
    if udata.is_null() {
        None
    } else {
        // SAFETY: Valid per the safety requirements.
        Some(unsafe { super::udata::Udata::from_raw(udata) })
    }
}

/// Declares a transparent wrapper of a C struct that the abstraction only lends out.
macro_rules! raw_wrapper {
    ($(#[$meta:meta])* $name:ident, $raw:ident) => {
        $(#[$meta])*
        ///
        /// # Invariants
        ///
        /// A reference to it is only handed out while the C struct is valid; a mutable one only
        /// while the caller of the operation lets the driver write it.
        #[repr(transparent)]
        pub struct $name($crate::types::Opaque<$crate::bindings::$raw>);

        impl $name {
            /// Creates a shared reference from a pointer to the C struct.
            ///
            /// # Safety
            ///
            /// `ptr` must be valid for reads for `'a`.
            pub unsafe fn from_raw<'a>(ptr: *const $crate::bindings::$raw) -> &'a Self {
                // SAFETY: `Self` is a transparent wrapper of the C struct; valid per the safety
                // requirements.
                unsafe { &*ptr.cast::<Self>() }
            }

            /// Creates a mutable reference from a pointer to the C struct.
            ///
            /// # Safety
            ///
            /// `ptr` must be valid for reads and writes for `'a`, and not accessed through any
            /// other pointer meanwhile.
            pub unsafe fn from_raw_mut<'a>(ptr: *mut $crate::bindings::$raw) -> &'a mut Self {
                // SAFETY: As for `from_raw`; exclusive per the safety requirements.
                unsafe { &mut *ptr.cast::<Self>() }
            }

            /// Returns a raw pointer to the C struct.
            pub fn as_raw(&self) -> *mut $crate::bindings::$raw {
                self.0.get()
            }
        }
    };
}
pub(crate) use raw_wrapper;
