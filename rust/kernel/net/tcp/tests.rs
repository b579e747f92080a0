// SPDX-License-Identifier: GPL-2.0

//! KUnit tests of the kernel TCP socket abstractions over loopback.
//!
//! Each round connects a client to a listener without blocking, accepts from the listener's
//! data-ready callback through a work item, attaches data-ready handlers that read with the read
//! actor, sends with copied buffers, spliced pages and copied page fragments, checks every
//! received byte, fills a small send buffer until `EAGAIN` and waits for `sk_write_space`, then
//! detaches and closes. An echo server replies from its data-ready callback
//! ([`DataReadySock::send`]), and the task that owns the socket when it cannot.
//! The rounds repeat to shake out lifetime bugs; KASAN, lockdep and kmemleak watch them.
//!
//! The suite is built in, so it runs at boot, before init scripts bring the loopback device up:
//! it brings it up itself.

use super::{
    CallbackSock,
    Callbacks,
    Connect,
    DataReadySock,
    SocketGuard,
    StagingPage,
    TcpSocket,
    TcpState,
    ZcNotif,
    ZcOwner, //
};
use crate::{
    bindings,
    error::to_result,
    net::{
        skb::{
            PageFrag,
            SkbData, //
        },
        socket::{
            Family,
            SendFlags, //
        },
    },
    new_spinlock_irq, new_work,
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        SpinLockIrq, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
    workqueue::{
        self,
        Work,
        WorkItem, //
    },
    ThisModule,
};
use core::net::{
    IpAddr,
    Ipv4Addr,
    Ipv6Addr,
    SocketAddr, //
};

/// Brings the loopback device of the initial network namespace up (`dev_open()`), as init
/// scripts do; nothing if it is up already.
fn loopback_up() -> Result {
    // SAFETY: `init_net` lives forever; the name is a C string. On success we own a reference
    // to the device, dropped below.
    let lo = unsafe { bindings::dev_get_by_name(&raw mut bindings::init_net, c"lo".as_char_ptr()) };
    if lo.is_null() {
        return Err(ENODEV);
    }
    // SAFETY: `lo` is a live device we hold a reference on; `dev_open()` needs the RTNL lock,
    // which is taken and released around it.
    let ret = unsafe {
        bindings::rtnl_lock();
        let ret = bindings::dev_open(lo, core::ptr::null_mut());
        bindings::rtnl_unlock();
        bindings::dev_put(lo);
        ret
    };
    to_result(ret)
}

/// Fails the round (returning `EINVAL`) with a message if `$cond` does not hold.
///
/// The KUnit assertion macros only work inside the test functions themselves.
macro_rules! check {
    ($cond:expr) => {
        if !($cond) {
            pr_err!("check failed at line {}: {}\n", line!(), stringify!($cond));
            return Err(EINVAL);
        }
    };
}

/// How long to wait for an event before failing.
const TIMEOUT_MS: i64 = 10_000;

/// Polls `cond` every millisecond until it holds or [`TIMEOUT_MS`] pass.
fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..TIMEOUT_MS {
        if cond() {
            return true;
        }
        fsleep(Delta::from_millis(1));
    }
    cond()
}

/// The listener's handler: a connection to accept is signalled by `data_ready`, which defers
/// the accept to a work item (accepting may sleep).
#[pin_data]
struct Listener {
    sock: TcpSocket,
    #[pin]
    accepted: SpinLockIrq<Option<TcpSocket>>,
    wakeups: Atomic<u32>,
    #[pin]
    work: Work<Listener>,
}

crate::impl_has_work! {
    impl HasWork<Self> for Listener { self.work }
}

impl Listener {
    /// A listener on the loopback address of `family`, port chosen by the kernel, with this
    /// handler attached. Returns it and the address to connect to.
    fn new_lo(family: Family) -> Result<(Arc<Self>, SocketAddr)> {
        let lo: IpAddr = match family {
            Family::Inet => Ipv4Addr::LOCALHOST.into(),
            Family::Inet6 => Ipv6Addr::LOCALHOST.into(),
        };
        let lsock = TcpSocket::new_kern(family)?;
        lsock.set_reuseaddr();
        if family == Family::Inet6 {
            lsock.set_v6only()?;
        }
        lsock.bind(&SocketAddr::new(lo, 0))?;
        lsock.listen(8)?;
        check!((lsock.state()) == (TcpState::LISTEN));
        let port = lsock.local_addr()?.port();
        check!((port) != (0));
        let listener = Arc::pin_init(
            pin_init!(Listener {
                sock: lsock,
                accepted <- new_spinlock_irq!(None),
                wakeups: Atomic::new(0),
                work <- new_work!("rsiw_net_test::accept"),
            }),
            GFP_KERNEL,
        )?;
        listener.sock.attach(listener.clone())?;
        Ok((listener, SocketAddr::new(lo, port)))
    }
}

impl WorkItem for Listener {
    type Pointer = Arc<Listener>;

    fn run(this: Arc<Listener>) {
        // Accept everything that is queued; keep the first connection.
        while let Ok(sock) = this.sock.accept() {
            let mut slot = this.accepted.lock();
            if slot.is_none() {
                *slot = Some(sock);
            }
        }
    }
}

#[vtable]
impl Callbacks for Listener {
    fn data_ready(this: ArcBorrow<'_, Self>, sk: &mut DataReadySock<'_>) {
        this.wakeups.add(1, Relaxed);
        // A listener cannot be read.
        if sk.read_sock(|_| Ok(0)) != Err(ENOTCONN) {
            this.wakeups.add(1000, Relaxed);
        }
        let _ = workqueue::system().enqueue(Arc::from(this));
    }
}

/// What a connected end records.
struct Rx {
    /// Received bytes, in order.
    buf: KVec<u8>,
    /// Bytes received beyond `buf`'s capacity (only counted).
    overflow: usize,
    /// Errors the read actor saw.
    errors: u32,
}

/// A connected end's handler.
#[pin_data]
struct Conn {
    #[pin]
    rx: SpinLockIrq<Rx>,
    states: Atomic<u32>,
    established: Atomic<u32>,
    closed: Atomic<u32>,
    write_space: Atomic<u32>,
    /// While set, `data_ready` leaves the data queued.
    paused: Atomic<u32>,
}

impl Conn {
    fn new(cap: usize) -> Result<Arc<Self>> {
        let buf = KVec::with_capacity(cap, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                rx <- new_spinlock_irq!(Rx {
                    buf,
                    overflow: 0,
                    errors: 0,
                }),
                states: Atomic::new(0),
                established: Atomic::new(0),
                closed: Atomic::new(0),
                write_space: Atomic::new(0),
                paused: Atomic::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// The read actor: copies `data` into the receive buffer.
    ///
    /// `read_sock` may transmit (ACKs), which must not happen with interrupts disabled, so the
    /// IRQ-safe lock is only taken here, inside the actor.
    fn consume(&self, data: &SkbData<'_>) -> Result<usize> {
        let mut rx = self.rx.lock();
        let n = data.len();
        let room = rx.buf.capacity() - rx.buf.len();
        let take = n.min(room);
        if take > 0 {
            let start = rx.buf.len();
            // Copy straight into the final buffer: grow it by `take` zeroed bytes (within the
            // reserved capacity, so no allocation) and fill them from the skb.
            rx.buf.extend_with(take, 0, GFP_ATOMIC)?;
            data.copy_to(0, &mut rx.buf[start..start + take])?;
            // The CRC over the skb (`skb_crc32c()`, chained in two pieces) matches the CRC
            // over the bytes copied from it.
            #[cfg(all(CONFIG_NET_CRC32C, CONFIG_CRC32))]
            {
                let half = take / 2;
                let crc = data.crc32c(half, take - half, data.crc32c(0, half, !0)?)?;
                if crc != crate::crc::crc32c(!0, &rx.buf[start..start + take]) {
                    rx.errors += 1;
                }
            }
            // Piece by piece (skipping some), then back to earlier bytes: the same bytes as
            // the whole copy, from wherever the last copy left the fragment cursor.
            let mut piece = [0u8; 97];
            let mut at = 0usize;
            let mut back = [take.saturating_sub(200), take / 3, 1];
            while at < take || back.iter().any(|&b| b != usize::MAX) {
                if at >= take {
                    let Some(b) = back.iter_mut().find(|b| **b != usize::MAX) else {
                        break;
                    };
                    at = core::mem::replace(b, usize::MAX);
                }
                let m = (take - at).min(piece.len());
                data.copy_to(at, &mut piece[..m])?;
                if rx.buf.get(start + at..start + at + m) != Some(&piece[..m]) {
                    rx.errors += 1;
                }
                at += m + (at % 7) * 301;
            }
        }
        // Bounds: an empty range at the end leaves the register alone; one byte more fails.
        #[cfg(CONFIG_NET_CRC32C)]
        if data.crc32c(n, 0, 7) != Ok(7) || data.crc32c(0, n + 1, !0).is_ok() {
            rx.errors += 1;
        }
        if n > take {
            // Beyond capacity: count the bytes; check the skb bounds are enforced.
            let mut scratch = [0u8; 64];
            let m = (n - take).min(scratch.len());
            data.copy_to(take, &mut scratch[..m])?;
            if data.copy_to(n, &mut scratch[..1]).is_ok() {
                rx.errors += 1;
            }
            rx.overflow += n - take;
        }
        Ok(n)
    }

    fn received(&self) -> usize {
        let rx = self.rx.lock();
        rx.buf.len() + rx.overflow
    }
}

#[vtable]
impl Callbacks for Conn {
    fn data_ready(this: ArcBorrow<'_, Self>, sk: &mut DataReadySock<'_>) {
        if this.paused.load(Relaxed) != 0 {
            return;
        }
        if sk.read_sock(|data| this.consume(data)).is_err() {
            this.rx.lock().errors += 1;
        }
    }

    fn write_space(this: ArcBorrow<'_, Self>, sk: &CallbackSock<'_>) {
        if sk.stream_wspace() >= sk.stream_min_wspace() {
            sk.clear_nospace();
            this.write_space.add(1, Relaxed);
        }
    }

    fn state_change(this: ArcBorrow<'_, Self>, sk: &CallbackSock<'_>) {
        this.states.add(1, Relaxed);
        match sk.state() {
            TcpState::ESTABLISHED => this.established.add(1, Relaxed),
            TcpState::CLOSE | TcpState::CLOSE_WAIT => this.closed.add(1, Relaxed),
            _ => {}
        }
    }
}

/// Bytes an [`Echo`] received and did not send back yet.
struct Pending {
    b: [u8; 256],
    n: usize,
}

/// A server end that sends back what it receives from its data-ready callback
/// ([`DataReadySock::send`]), and counts the calls that could not (a task owned the socket).
#[pin_data]
struct Echo {
    #[pin]
    pending: SpinLockIrq<Pending>,
    echoed: Atomic<u32>,
    busy: Atomic<u32>,
    errors: Atomic<u32>,
}

impl Echo {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                pending <- new_spinlock_irq!(Pending { b: [0; 256], n: 0 }),
                echoed: Atomic::new(0),
                busy: Atomic::new(0),
                errors: Atomic::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// A copy of the pending bytes (the lock disables interrupts: nothing is sent under it).
    fn snapshot(&self) -> ([u8; 256], usize) {
        let p = self.pending.lock();
        (p.b, p.n)
    }

    /// The first `k` pending bytes went out.
    fn sent(&self, k: usize) {
        let mut p = self.pending.lock();
        let n = p.n;
        let k = k.min(n);
        p.b.copy_within(k..n, 0);
        p.n = n - k;
        self.echoed.add(k as u32, Relaxed);
    }
}

#[vtable]
impl Callbacks for Echo {
    fn data_ready(this: ArcBorrow<'_, Self>, sk: &mut DataReadySock<'_>) {
        let r = sk.read_sock(|data| {
            let mut p = this.pending.lock();
            let (at, n) = (p.n, data.len());
            let take = n.min(p.b.len() - at);
            data.copy_to(0, &mut p.b[at..at + take])?;
            p.n = at + take;
            if take < n {
                this.errors.add(1, Relaxed);
            }
            Ok(n)
        });
        if r.is_err() {
            this.errors.add(1, Relaxed);
        }
        let (buf, n) = this.snapshot();
        if n == 0 {
            return;
        }
        match sk.send(&[&buf[..n]]) {
            Ok(k) => this.sent(k),
            Err(e) if e == EBUSY => this.busy.add(1, Relaxed),
            Err(e) if e == EAGAIN => {}
            Err(_) => this.errors.add(1, Relaxed),
        }
    }
}

/// Replies from the data-ready callback: in softirq [`DataReadySock::send`] sends; while a task
/// owns the socket (the callback runs from `release_sock()`) it refuses with `EBUSY`, and the
/// owner sends. The client gets every byte back, in order.
fn echo(family: Family) -> Result {
    let (listener, addr) = Listener::new_lo(family)?;
    const MSGS: usize = 20;
    const LEN: usize = 8;
    const TOTAL: usize = (MSGS + 1) * LEN;
    // Shared with the work item that sends while this task owns the server socket.
    let client = Arc::new(TcpSocket::new_kern(family)?, GFP_KERNEL)?;
    client.set_nodelay();
    let cconn = Conn::new(TOTAL)?;
    client.attach(cconn.clone())?;
    match client.connect(&addr)? {
        Connect::Done | Connect::InProgress => {}
    }
    check!(wait_for(|| cconn.established.load(Relaxed) > 0));
    check!(wait_for(|| listener.accepted.lock().is_some()));
    let server = listener.accepted.lock().take().ok_or(EINVAL)?;
    server.set_nodelay();
    let echo = Echo::new()?;
    server.attach(echo.clone())?;
    let mut expected = KVec::with_capacity(TOTAL, GFP_KERNEL)?;
    // Ping-pong: each message comes back from the server's softirq.
    for i in 0..MSGS {
        let msg = [pattern(i); LEN];
        send_all(&client, &[&msg])?;
        expected.extend_from_slice(&msg, GFP_KERNEL)?;
        check!(wait_for(|| cconn.received() >= (i + 1) * LEN));
    }
    check!((echo.echoed.load(Relaxed) as usize) == (MSGS * LEN));
    check!((echo.busy.load(Relaxed)) == (0));
    // Owned by this task: the bytes wait in the backlog, and the callback runs when the lock
    // is released, from `release_sock()`, where `send` refuses.
    // The client sends from a work item: this task sending on it while it owns the server
    // socket would nest two socket locks of one lockdep class.
    let msg = [0xa5u8; LEN];
    let sent = Arc::new(Atomic::<i32>::new(0), GFP_KERNEL)?;
    {
        let guard = server.lock();
        let (c, done) = (client.clone(), sent.clone());
        workqueue::system().try_spawn(GFP_KERNEL, move || {
            let r = send_all(&c, &[&msg]);
            done.store(if r.is_ok() { 1 } else { -1 }, Relaxed);
        })?;
        check!(wait_for(|| sent.load(Relaxed) != 0));
        fsleep(Delta::from_millis(20));
        drop(guard);
    }
    check!((sent.load(Relaxed)) == (1));
    expected.extend_from_slice(&msg, GFP_KERNEL)?;
    check!(wait_for(|| echo.busy.load(Relaxed) > 0));
    // The owner echoes.
    {
        let mut guard = server.lock();
        let (buf, n) = echo.snapshot();
        check!((n) == (LEN));
        let k = guard.send(&[&buf[..n]], SendFlags::DONTWAIT)?;
        echo.sent(k);
    }
    check!(wait_for(|| cconn.received() >= TOTAL));
    check!((echo.errors.load(Relaxed)) == (0));
    {
        let rx = cconn.rx.lock();
        check!((rx.errors) == (0));
        check!((rx.overflow) == (0));
        check!(rx.buf[..] == expected[..]);
    }
    check!(server.detach());
    check!(client.detach());
    drop(client);
    drop(server);
    check!(listener.sock.detach());
    drop(listener);
    Ok(())
}

/// The byte at position `i` of the copied parts of the stream.
/// The module a test [`ZcOwner`] lives in: built in.
// SAFETY: A null module is the built-in kernel, which `__module_get()`/`module_put()` ignore.
static BUILT_IN: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };

/// Counts the releases of zero-copy notifications.
struct ZcCount {
    releases: Atomic<u32>,
    copied: Atomic<u32>,
    tag: Atomic<u32>,
}

impl ZcOwner for ZcCount {
    fn released(this: ArcBorrow<'_, Self>, tag: u32, copied: bool) {
        this.tag.store(tag, Relaxed);
        this.copied.fetch_add(u32::from(copied), Relaxed);
        this.releases.fetch_add(1, Relaxed);
    }
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(7).wrapping_add(i >> 8)) as u8
}

/// Sends `bufs` completely, retrying on `EAGAIN`.
fn send_all(sock: &TcpSocket, bufs: &[&[u8]]) -> Result {
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let mut flat = KVec::with_capacity(total, GFP_KERNEL)?;
    for b in bufs {
        flat.extend_from_slice(b, GFP_KERNEL)?;
    }
    let mut off = 0;
    let mut first = true;
    while off < total {
        let r = if first {
            // The first attempt sends the buffers as separate kvecs.
            sock.send(bufs, SendFlags::DONTWAIT)
        } else {
            sock.send(&[&flat[off..]], SendFlags::DONTWAIT)
        };
        first = false;
        match r {
            Ok(n) => off += n,
            Err(e) if e == EAGAIN => fsleep(Delta::from_millis(1)),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One round over the loopback address of `family`.
/// Sends bytes `range` under the socket lock with `send(guard, offset)`, which sends without
/// blocking from `offset` on; whenever the socket is full it drops the lock for a millisecond
/// (so that the peer's ACKs are processed) and takes it again. Returns the guard.
fn send_locked<'a>(
    sock: &'a TcpSocket,
    mut guard: SocketGuard<'a>,
    range: core::ops::Range<usize>,
    mut send: impl FnMut(&mut SocketGuard<'a>, usize) -> Result<usize>,
) -> Result<SocketGuard<'a>> {
    let mut off = range.start;
    while off < range.end {
        match send(&mut guard, off) {
            Ok(n) => off += n,
            Err(e) if e == EAGAIN => {
                drop(guard);
                fsleep(Delta::from_millis(1));
                guard = sock.lock();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(guard)
}

fn round(family: Family, spliced: &Page) -> Result {
    // Listener.
    let (listener, addr) = Listener::new_lo(family)?;
    let port = addr.port();
    // Attaching twice is refused.
    check!((listener.sock.attach(listener.clone())) == (Err(EBUSY)));

    // Client: small send buffer, non-blocking connect completed via state_change; its buffers
    // allocated as on the memory reclaim path, the task's page fragment still allowed.
    let client = TcpSocket::new_kern(family)?;
    check!((client.allocation_raw()) == (GFP_KERNEL.as_raw(), true));
    client.set_allocation(GFP_NOIO);
    check!((client.allocation_raw()) == (GFP_NOIO.as_raw(), true));
    client.set_nodelay();
    client.set_keepalive();
    client.set_sndbuf(4096)?;
    let cconn = Conn::new(0)?;
    client.attach(cconn.clone())?;
    match client.connect(&addr)? {
        Connect::Done | Connect::InProgress => {}
    }
    check!(wait_for(|| cconn.established.load(Relaxed) > 0));
    check!((client.state()) == (TcpState::ESTABLISHED));
    check!((client.error()) == (0));
    check!((client.peer_addr()?.port()) == (port));
    check!(client.mss_cache() > 0);

    // Server side, accepted from the work item.
    check!(wait_for(|| listener.accepted.lock().is_some()));
    let server = listener.accepted.lock().take().ok_or(EINVAL)?;
    check!(listener.wakeups.load(Relaxed) >= 1);
    check!(listener.wakeups.load(Relaxed) < 1000);
    check!((server.state()) == (TcpState::ESTABLISHED));
    check!((server.peer_addr()?) == (client.local_addr()?));

    // Data: copied parts with a pattern, spliced pages (zeroed) in between.
    const COPIED: usize = 3000;
    const STAGED: usize = 64;
    const ZC: usize = STAGED + 200;
    const TOTAL: usize = 3 * COPIED + PAGE_SIZE + 100 + STAGED + 100 + ZC;
    let sconn = Conn::new(TOTAL)?;
    server.attach(sconn.clone())?;
    let mut expected = KVec::with_capacity(TOTAL, GFP_KERNEL)?;
    let mut src = KVec::with_capacity(COPIED, GFP_KERNEL)?;
    for i in 0..COPIED {
        src.push(pattern(i), GFP_KERNEL)?;
    }
    let mut staging = StagingPage::new(GFP_NOIO | __GFP_NORETRY)?;
    staging.with_slice_mut(0, STAGED, |s| {
        for (i, b) in s.iter_mut().enumerate() {
            *b = pattern(i + 7);
        }
    })?;
    check!((staging.with_slice_mut(PAGE_SIZE - 1, 2, |_| ()).err()) == (Some(EINVAL)));
    // Header and payload as two kvecs.
    send_all(&client, &[&src[..16], &src[16..]])?;
    expected.extend_from_slice(&src, GFP_KERNEL)?;
    // Spliced: a whole page, then 100 bytes at an offset (zero-copy, page-referenced by TCP).
    {
        let frags = [
            PageFrag::new(spliced, 0, PAGE_SIZE)?,
            PageFrag::new(spliced, 1000, 100)?,
        ];
        check!((PageFrag::new(spliced, PAGE_SIZE - 10, 11).err()) == (Some(EINVAL)));
        const SPLICED: usize = PAGE_SIZE + 100;
        let mut guard = client.lock();
        let n = guard.send_pages(&frags, SendFlags::MORE)?;
        check!(n <= SPLICED);
        // The rest (if the small send buffer took only part) goes page by page.
        guard = send_locked(&client, guard, n..SPLICED, |g, off| {
            let frag = if off < PAGE_SIZE {
                PageFrag::new(spliced, off, PAGE_SIZE - off)?
            } else {
                PageFrag::new(spliced, 1000 + off - PAGE_SIZE, SPLICED - off)?
            };
            g.send_pages(&[frag], SendFlags::DONTWAIT)
        })?;
        // Copied data under the same lock.
        guard = send_locked(&client, guard, 0..COPIED, |g, off| {
            g.send(&[&src[off..]], SendFlags::DONTWAIT)
        })?;
        // Staged bytes and a page fragment, copied during the call (`send_pages_copy`).
        // Staging fragments are never spliced.
        check!(
            (guard
                .send_pages(&[staging.frag(0, STAGED)?], SendFlags::DONTWAIT)
                .err())
                == (Some(EINVAL))
        );
        let staged = &staging;
        drop(send_locked(&client, guard, 0..STAGED + 100, |g, done| {
            if done < STAGED {
                let frags = [
                    staged.frag(done, STAGED - done)?,
                    PageFrag::new(spliced, 2000, 100)?,
                ];
                g.send_pages_copy(&frags, SendFlags::DONTWAIT)
            } else {
                let frag = PageFrag::new(spliced, 2000 + done - STAGED, STAGED + 100 - done)?;
                g.send_pages_copy(&[frag], SendFlags::DONTWAIT)
            }
        })?);
        // TCP has its own copy: rewriting the page does not change what the peer gets.
        staging.with_slice_mut(0, STAGED, |s| s.fill(0xff))?;
    }
    expected.extend_with(PAGE_SIZE + 100, 0, GFP_KERNEL)?;
    expected.extend_from_slice(&src, GFP_KERNEL)?;
    for i in 0..STAGED {
        expected.push(pattern(i + 7), GFP_KERNEL)?;
    }
    expected.extend_with(100, 0, GFP_KERNEL)?;
    send_all(&client, &[&src])?;
    expected.extend_from_slice(&src, GFP_KERNEL)?;
    // By reference with a notification (`send_pages_zc`): staged bytes of a page the
    // notification holds, and a page fragment. The notification is released once TCP let go
    // of both (here: delivered over loopback, which copies them), and only then.
    let zc = Arc::new(
        ZcCount {
            releases: Atomic::new(0),
            copied: Atomic::new(0),
            tag: Atomic::new(0),
        },
        GFP_KERNEL,
    )?;
    {
        let mut notif = ZcNotif::new(&BUILT_IN, zc.clone(), 7, GFP_KERNEL)?;
        let mut page = StagingPage::new(GFP_KERNEL)?;
        page.with_slice_mut(0, STAGED, |s| {
            for (i, b) in s.iter_mut().enumerate() {
                *b = pattern(i + 11);
            }
        })?;
        let mut pages = KVec::new();
        pages.push(page, GFP_KERNEL)?;
        check!(notif.hold(pages).is_ok());
        // A second set of pages is refused (handed back).
        check!(notif.hold(KVec::new()).is_err());
        // Fragments of a staging page the notification does not hold are refused.
        let mut guard = client.lock();
        check!(
            (guard
                .send_pages_zc(&[staging.frag(0, 1)?], SendFlags::DONTWAIT, &notif)
                .err())
                == (Some(EINVAL))
        );
        let held = notif.pages().first().ok_or(EINVAL)?;
        drop(send_locked(&client, guard, 0..ZC, |g, done| {
            if done < STAGED {
                let frags = [
                    held.frag(done, STAGED - done)?,
                    PageFrag::new(spliced, 3000, 200)?,
                ];
                g.send_pages_zc(&frags, SendFlags::DONTWAIT, &notif)
            } else {
                let frag = PageFrag::new(spliced, 3000 + done - STAGED, ZC - done)?;
                g.send_pages_zc(&[frag], SendFlags::DONTWAIT, &notif)
            }
        })?);
        // The sender's reference keeps it.
        check!((zc.releases.load(Relaxed)) == (0));
    }
    for i in 0..STAGED {
        expected.push(pattern(i + 11), GFP_KERNEL)?;
    }
    expected.extend_with(200, 0, GFP_KERNEL)?;
    check!((expected.len()) == (TOTAL));
    check!(wait_for(|| sconn.received() >= TOTAL));
    {
        let rx = sconn.rx.lock();
        check!((rx.errors) == (0));
        check!((rx.overflow) == (0));
        check!((rx.buf.len()) == (TOTAL));
        check!(rx.buf[..] == expected[..]);
    }
    check!(wait_for(|| zc.releases.load(Relaxed) > 0));
    check!((zc.releases.load(Relaxed)) == (1));
    check!((zc.tag.load(Relaxed)) == (7));
    // Loopback delivers the skb to a local socket, which copies its pages first.
    check!((zc.copied.load(Relaxed)) == (1));

    // Stop reading on the server and fill the small send buffer until EAGAIN; then drain the
    // server from process context (`SocketGuard::read_sock`), and `sk_write_space` fires.
    server.set_rcvbuf(4096)?;
    sconn.paused.store(1, Relaxed);
    let chunk = [0x5au8; 1024];
    let mut sent = 0usize;
    let mut eagain = false;
    for _ in 0..100_000 {
        match client.send(&[&chunk], SendFlags::DONTWAIT) {
            Ok(n) => sent += n,
            Err(e) if e == EAGAIN => {
                eagain = true;
                break;
            }
            Err(e) => return Err(e),
        }
    }
    check!(eagain);
    check!(client.stream_wspace() < client.stream_min_wspace() || client.stream_wspace() < 1024);
    sconn.paused.store(0, Relaxed);
    let mut drain_err = None;
    let drained = wait_for(|| {
        if let Err(e) = server.lock().read_sock(|data| sconn.consume(data)) {
            if e != EAGAIN {
                drain_err = Some(e);
            }
        }
        sconn.received() >= TOTAL + sent
    });
    check!(drain_err.is_none());
    check!(drained);
    check!(wait_for(|| cconn.write_space.load(Relaxed) > 0));
    check!((sconn.received()) == (TOTAL + sent));
    // The flags stay what they were set to; the accepted socket has the default ones.
    check!((client.allocation_raw()) == (GFP_NOIO.as_raw(), true));
    check!((server.allocation_raw()) == (GFP_KERNEL.as_raw(), true));
    check!((sconn.rx.lock().errors) == (0));

    // Detach, then graceful close from the client: the server sees no more callbacks into
    // `sconn` (detached), but the client's handler saw its state changes until detached.
    let states = sconn.states.load(Relaxed);
    check!(server.detach());
    check!(!server.detach());
    check!(client.detach());
    drop(client);
    check!(wait_for(|| server.state() == TcpState::CLOSE_WAIT));
    check!((sconn.states.load(Relaxed)) == (states));
    // Only the test holds the handlers now.
    check!(sconn.received() == TOTAL + sent);
    drop(server);

    // Closing the listener: detach first (the attachment holds a reference to `listener`,
    // which owns the socket), then drop the last reference.
    check!(listener.sock.detach());
    drop(listener);
    Ok(())
}

/// A client whose connect is refused sees the failure through `state_change`.
fn refused(family: Family) -> Result {
    let lo: IpAddr = match family {
        Family::Inet => Ipv4Addr::LOCALHOST.into(),
        Family::Inet6 => Ipv6Addr::LOCALHOST.into(),
    };
    // Find a free port: bind, read it, close.
    let port = {
        let s = TcpSocket::new_kern(family)?;
        s.bind(&SocketAddr::new(lo, 0))?;
        s.local_addr()?.port()
    };
    let client = TcpSocket::new_kern(family)?;
    let conn = Conn::new(0)?;
    client.attach(conn.clone())?;
    // The attachment holds one reference.
    match client.connect(&SocketAddr::new(lo, port)) {
        Ok(_) => {
            check!(wait_for(|| conn.closed.load(Relaxed) > 0));
            check!((client.error()) == (ECONNREFUSED.to_errno()));
        }
        Err(e) => check!(e == ECONNREFUSED),
    }
    check!((conn.established.load(Relaxed)) == (0));
    // Dropping the socket detaches.
    drop(client);
    Ok(())
}

#[macros::kunit_tests(rust_net_tcp)]
mod kunit {
    use super::*;

    const ROUNDS: usize = 50;

    #[test]
    fn loopback_ipv4() -> Result {
        loopback_up()?;
        let page = Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?;
        for _ in 0..ROUNDS {
            round(Family::Inet, &page)?;
        }
        Ok(())
    }

    #[test]
    fn loopback_ipv6() -> Result {
        loopback_up()?;
        let page = Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?;
        for _ in 0..ROUNDS {
            round(Family::Inet6, &page)?;
        }
        Ok(())
    }

    #[test]
    fn echo_from_data_ready() -> Result {
        loopback_up()?;
        for _ in 0..10 {
            echo(Family::Inet)?;
            echo(Family::Inet6)?;
        }
        Ok(())
    }

    #[test]
    fn connect_refused() -> Result {
        loopback_up()?;
        refused(Family::Inet)?;
        refused(Family::Inet6)
    }
}
