// SPDX-License-Identifier: GPL-2.0

//! Zero-copy sends that report when TCP let go of the pages ([`ZcNotif`]).
//!
//! [`SocketGuard::send_pages_zc`] hands page fragments to TCP by reference, as `MSG_ZEROCOPY`
//! does for user space, with a kernel `struct ubuf_info` (`msg->msg_ubuf`, as io_uring's
//! zero-copy sends use): every skb that carries bytes of such a send holds a reference on the
//! notification, and so does the [`ZcNotif`] the sender keeps while it sends. Once the last of
//! them is gone (the peer acknowledged the bytes and TCP freed its skbs and their clones, or the
//! socket dropped them), the owner's [`ZcOwner::released`] runs: from then on TCP no longer
//! reads the pages, and a transport may complete the request whose payload they carry, as a
//! copy-based send may at once. Where the stack copies the pages after all (an skb delivered to
//! a local socket), the release says so.
//!
//! The notification keeps the module whose [`ZcOwner`] it calls loaded until the call returned:
//! skbs may outlive the socket and the connection that sent them.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h) (`struct ubuf_info`).

use super::{
    send::StagingPage,
    SocketGuard, //
};
use crate::{
    alloc::Flags,
    bindings,
    net::{
        skb::PageFrag,
        socket::SendFlags, //
    },
    prelude::*,
    sync::{
        atomic::{
            AtomicFlag,
            Relaxed, //
        },
        Arc,
        ArcBorrow, //
    },
    types::Opaque,
    ThisModule,
};
use core::ptr::NonNull;

/// The owner of zero-copy notifications: told when TCP released what was sent with one.
pub trait ZcOwner: Send + Sync + Sized {
    /// Every skb that carried bytes sent with notification `tag` is gone, and so is the
    /// [`ZcNotif`]: TCP no longer reads the pages. `copied` is true if the stack copied some of
    /// them after all (e.g. delivered to a local socket).
    ///
    /// Any context (usually softirq, from the ACK that freed the last skb, or process context):
    /// must not sleep. Dropping the last reference on `Self` here must not sleep either.
    fn released(this: ArcBorrow<'_, Self>, tag: u32, copied: bool);
}

/// The part of a notification that TCP's callback reads (`ubuf` first: the callback gets its
/// address).
///
/// # Invariants
///
/// `finish` is [`finish::<T>`] for the `T` of the [`Inner<T>`] this header begins; `module` is
/// the module that defines that `T` (or null, built in), with a reference taken when the
/// notification was created.
#[repr(C)]
struct Header {
    ubuf: Opaque<bindings::ubuf_info>,
    finish: unsafe fn(*mut Header, bool),
    module: *mut bindings::module,
    copied: AtomicFlag,
}

#[repr(C)]
struct Inner<T: ZcOwner> {
    hdr: Header,
    owner: Arc<T>,
    tag: u32,
    pages: KVec<StagingPage>,
}

/// `struct ubuf_info_ops` of every [`ZcNotif`]: built in, so that TCP may call it after the
/// module that sent went away, if it could (it cannot: the notification pins it).
static ZC_OPS: bindings::ubuf_info_ops = bindings::ubuf_info_ops {
    complete: Some(zc_complete),
    link_skb: None,
};

/// `ubuf_info_ops::complete`: an skb that referenced the notification is freed (or the sender
/// dropped its [`ZcNotif`], `skb` null). Runs the owner's release with the last reference.
///
/// # Safety
///
/// `uarg` is the `ubuf` of a live [`Header`] and the caller gives up one reference on it.
unsafe extern "C" fn zc_complete(
    _skb: *mut bindings::sk_buff,
    uarg: *mut bindings::ubuf_info,
    success: bool,
) {
    let hdr = uarg.cast::<Header>();
    // SAFETY: `ubuf` is the first field of the `#[repr(C)]` `Header` (`Opaque` is transparent),
    // which is live while the caller holds its reference.
    let h = unsafe { &*hdr };
    if !success {
        h.copied.store(true, Relaxed);
    }
    // SAFETY: `uarg` is live; the caller's reference is given up here.
    if !unsafe { bindings::refcount_dec_and_test(&raw mut (*uarg).refcnt) } {
        return;
    }
    let module = h.module;
    let finish = h.finish;
    let copied = h.copied.load(Relaxed);
    // SAFETY: That was the last reference: nothing else refers to the notification, which
    // `finish` frees (type invariant of `Header`).
    unsafe { finish(hdr, copied) };
    // SAFETY: The reference taken in `ZcNotif::new` (type invariant). `finish` returned: no
    // code of that module runs for this notification any more, and this function is built in.
    unsafe { bindings::module_put(module) };
}

/// Runs `T::released` and frees the notification.
///
/// # Safety
///
/// `hdr` begins an `Inner<T>` allocated by [`ZcNotif::new`] that nothing refers to any more.
unsafe fn finish<T: ZcOwner>(hdr: *mut Header, copied: bool) {
    // SAFETY: `Header` is the first field of the `#[repr(C)]` `Inner<T>`, which `ZcNotif::new`
    // leaked from a `KBox`; nothing else refers to it (caller).
    let inner = unsafe { KBox::from_raw(hdr.cast::<Inner<T>>()) };
    T::released(inner.owner.as_arc_borrow(), inner.tag, copied);
    // The pages are freed with `inner`: TCP let go of them.
    drop(inner);
}

/// A zero-copy notification: pages sent with it ([`SocketGuard::send_pages_zc`]) stay TCP's
/// until every skb carrying them is freed; then [`ZcOwner::released`] runs. Dropping the
/// notification gives up the sender's reference (after its last send).
///
/// It owns the [`StagingPage`]s its sends may reference (headers and copied bytes next to pages
/// sent by reference): they are freed with the notification, never written again.
///
/// # Invariants
///
/// `inner` points to a live `Inner<T>` (a leaked `KBox`) whose `ubuf` holds one reference for
/// `self`; `ubuf.ops` is [`ZC_OPS`].
pub struct ZcNotif<T: ZcOwner> {
    inner: NonNull<Inner<T>>,
}

// SAFETY: The notification is reference counted by TCP and released through atomic operations;
// what it owns (`Arc<T>` with `T: Send + Sync`, pages) may be dropped on any CPU.
unsafe impl<T: ZcOwner> Send for ZcNotif<T> {}
// SAFETY: Shared references only read the pages and the header's address.
unsafe impl<T: ZcOwner> Sync for ZcNotif<T> {}

impl<T: ZcOwner> ZcNotif<T> {
    /// A notification reporting to `owner` with `tag`, without staging pages yet
    /// ([`ZcNotif::hold`]). `module` is the module that defines `T`: it stays loaded until the
    /// release ran. Does not sleep unless `flags` allow.
    pub fn new(module: &'static ThisModule, owner: Arc<T>, tag: u32, flags: Flags) -> Result<Self> {
        let ubuf = bindings::ubuf_info {
            ops: &ZC_OPS,
            refcnt: bindings::refcount_t {
                refs: bindings::atomic_t { counter: 1 },
            },
            // Page fragments whose pages the skb holds references on: they need not be copied
            // when an skb is orphaned on transmit (as for MSG_ZEROCOPY).
            flags: (bindings::SKBFL_ZEROCOPY_ENABLE
                | bindings::SKBFL_SHARED_FRAG
                | bindings::SKBFL_DONT_ORPHAN) as u8,
        };
        let b = KBox::new(
            Inner {
                hdr: Header {
                    ubuf: Opaque::new(ubuf),
                    finish: finish::<T>,
                    module: module.as_ptr(),
                    copied: AtomicFlag::new(false),
                },
                owner,
                tag,
                pages: KVec::new(),
            },
            flags,
        )?;
        // SAFETY: `module` is the live module defining `T` (caller), or null when built in,
        // which `__module_get` ignores.
        unsafe { bindings::__module_get(module.as_ptr()) };
        // INVARIANT: Leaked, with one reference (ours) and `ZC_OPS`; `finish::<T>` and the
        // module reference make the `Header` invariant hold.
        Ok(Self {
            inner: NonNull::from(KBox::leak(b)),
        })
    }

    /// Gives the notification `pages` to send fragments of (headers and copied bytes next to
    /// pages sent by reference): they are freed with it, never written again. Only once, while
    /// it holds none; otherwise returns them.
    pub fn hold(&mut self, pages: KVec<StagingPage>) -> Result<(), KVec<StagingPage>> {
        // SAFETY: Live while `self` holds its reference (type invariant). No other reference to
        // `pages` exists: TCP's callback reads only the header, and the pages are handed out
        // only through `&self`, which `&mut self` excludes.
        let inner = unsafe { self.inner.as_mut() };
        if !inner.pages.is_empty() {
            return Err(pages);
        }
        inner.pages = pages;
        Ok(())
    }

    fn inner(&self) -> &Inner<T> {
        // SAFETY: Live while `self` holds its reference (type invariant).
        unsafe { self.inner.as_ref() }
    }

    /// The staging pages the notification owns, to send fragments of.
    pub fn pages(&self) -> &[StagingPage] {
        &self.inner().pages
    }

    /// Whether `f` lies in one of the notification's pages.
    fn holds(&self, f: &PageFrag<'_>) -> bool {
        self.pages().iter().any(|p| p.same_page(f))
    }

    fn ubuf(&self) -> *mut bindings::ubuf_info {
        self.inner().hdr.ubuf.get()
    }
}

impl<T: ZcOwner> Drop for ZcNotif<T> {
    fn drop(&mut self) {
        // SAFETY: Our reference, given up (type invariant); `net_zcopy_put()` calls
        // `zc_complete`, which releases the notification if it was the last.
        unsafe { zc_complete(core::ptr::null_mut(), self.ubuf(), true) };
    }
}

impl SocketGuard<'_> {
    /// Sends page fragments by reference with a completion (`MSG_ZEROCOPY` with
    /// `msg->msg_ubuf`): each skb carrying their bytes holds `notif` until it is freed; the
    /// pages must not change until [`ZcOwner::released`] ran. Fragments of a [`StagingPage`]
    /// must be of one `notif` owns (`EINVAL`), so that none is rewritten meanwhile.
    ///
    /// If the route cannot gather pages (no `NETIF_F_SG`), TCP copies them during the call and
    /// never refers to `notif`. Returns the number of bytes queued (possibly fewer than asked
    /// with [`SendFlags::DONTWAIT`]), or `EAGAIN`. At most [`super::MAX_SEND_PAGES`] fragments
    /// (`EINVAL`). Socket locked; blocks unless [`SendFlags::DONTWAIT`].
    pub fn send_pages_zc<T: ZcOwner>(
        &mut self,
        frags: &[PageFrag<'_>],
        flags: SendFlags,
        notif: &ZcNotif<T>,
    ) -> Result<usize> {
        if frags.iter().any(|f| !f.may_splice() && !notif.holds(f)) {
            return Err(EINVAL);
        }
        self.send_bvec_ubuf(frags, flags.as_raw() | bindings::MSG_ZEROCOPY, notif.ubuf())
    }
}
