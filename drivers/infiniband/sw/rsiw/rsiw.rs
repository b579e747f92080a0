// SPDX-License-Identifier: GPL-2.0

//! rsiw: software iWARP RDMA over kernel TCP sockets.
//!
//! rsiw attaches an iWARP RDMA device to a network device on request (`rdma link add <name>
//! type rsiw netdev <if>`). It speaks the user ABI of the C `siw` driver, so rdma-core's stock
//! `siw` provider drives it; rsiw and siw must therefore never be loaded in the same kernel.
//! See `Documentation/infiniband/rsiw.rst`.

use kernel::{
    net::notifier,
    prelude::*,
    rdma::link, //
};

mod abi;
mod batch;
mod cm;
mod completer;
mod conn;
mod cq;
mod crc;
mod device;
mod limits;
mod mem;
mod msg;
mod path;
mod qp;
mod recv;
mod requester;
mod responder;
mod ring;
mod rx;
mod srq;
mod stag;
mod tx;
mod wqe;

/// The sans-IO iWARP wire core: MPA, DDP, RDMAP framing and validation.
pub mod wire;

module! {
    type: RsiwModule,
    name: "rsiw",
    authors: ["The rsiw developers"],
    description: "Software iWARP RDMA driver (Rust)",
    license: "GPL",
    alias: ["rdma-link-rsiw"],
    params: {
        mpa_version: u8 {
            default: 2,
            description: "Highest MPA revision offered as initiator and accepted as responder (1 or 2; 2 adds IRD/ORD negotiation)",
        },
        mpa_crc_required: bool {
            default: false,
            description: "Ask for MPA CRC (as initiator) and always use it (as responder)",
        },
        mpa_crc_strict: bool {
            default: false,
            description: "Refuse peers that ask for MPA CRC when mpa_crc_required is off",
        },
        peer_to_peer: bool {
            default: false,
            description: "Ask for the MPA peer-to-peer model with an RTR message as initiator",
        },
        rtr_type: u8 {
            default: 3,
            description: "RTR kinds offered as initiator and accepted as responder: 1 zero-length Write, 2 zero-length Read, 4 zero-length Send (bit mask)",
        },
        fpdu_segments: u8 {
            default: 1,
            description: "TCP segments per FPDU: 1 sizes FPDUs to the MSS as RFC 5044 asks; up to 45 sends larger FPDUs (at most 64 KiB), which every receiver must take but not all place as fast",
        },
        rfc7306: bool {
            default: false,
            description: "RFC 7306 atomics and immediate data on devices added from now on: advertised (IB_ATOMIC_GLOB), posted by kernel ULPs, accepted from peers. Off by default: ULPs must not assume them (RFC 7306 1.1)",
        },
        commit: bool {
            default: false,
            description: "RDMA Flush (global visibility; persistence on persistent memory), Atomic Write and Verify of draft-talpey-rdma-commit on devices added from now on: advertised (IB_DEVICE_FLUSH_GLOBAL, IB_DEVICE_FLUSH_PERSISTENT, IB_DEVICE_ATOMIC_WRITE), posted by kernel ULPs (Verify: user space only), accepted from peers. Off by default: ULPs must not assume them (draft 2.4)",
        },
        fault_work_delay_ms: u32 {
            default: 0,
            description: "Testing only: every connection work item sleeps this long in module code after it dropped its connection (0: off)",
        },
        fault_dram_persistent: bool {
            default: false,
            description: "Testing only: a user memory region that is not persistent memory may be registered flushable to persistence (IB_ACCESS_FLUSH_PERSISTENT, with commit) as if it were, so that Flush to persistence and its deferred write-back run without persistent memory; nothing is made durable. Fast registrations and DMA MRs still refuse the flag",
        },
        fault_tx_nomem: bool {
            default: false,
            description: "Testing only: the TX batch of a connection cannot grow beyond its first staging page, as if every allocation failed (sends must go on in smaller FPDUs)",
        },
        zerocopy_min: u32 {
            default: 0,
            description: "Send a TX batch by reference (MSG_ZEROCOPY, its work requests complete once TCP released the pages) when it carries at least this many bytes of user memory and MPA CRC is off; smaller batches are copied into the socket (0, the default: always copy, which costs less under QEMU TCG at every size measured)",
        },
        bh_respond: bool {
            default: true,
            description: "Send the responses to small RDMA Reads from the receive softirq when nothing else waits to be sent, instead of waking the connection's work item (read for every response)",
        },
        bh_respond_qn3: bool {
            default: true,
            description: "Send the QN 3 responses (atomics, Flush, Atomic Write, Verify) from the receive softirq when nothing else waits to be sent, instead of waking the connection's work item (read for every response)",
        },
        max_mpa_pending: u32 {
            default: 1024,
            description: "Passive connections per device that may wait for their MPA Request (5 s at most); a listener resets more at once (0: no limit)",
        },
        relaxed_ird_negotiation: bool {
            default: true,
            description: "Adopt the peer's smaller IRD/ORD instead of refusing the connection (as siw)",
        },
        established_delay_ms: u32 {
            default: 0,
            description: "Initiator: report the connection established to the ULP this long after the MPA Reply (at most 1000 ms; 0: at once), for responders that install their receive path only after sending the Reply (C siw), which may otherwise leave the ULP's first message unread",
        },
    },
}

/// The module state: its registrations, torn down in declaration order.
///
/// Like `siw`, the netdev notifier goes first, then the link type; dropping the link
/// registration also unregisters every remaining rsiw device (`ib_unregister_driver()`) and
/// waits for them, so no device outlives the module.
#[pin_data]
struct RsiwModule {
    #[pin]
    netdev_events: notifier::Registration<device::NetdevEvents>,
    #[pin]
    link: link::Registration<device::RsiwLink>,
}

impl kernel::InPlaceModule for RsiwModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            netdev_events <- notifier::Registration::new(device::NetdevEvents),
            link <- link::Registration::new(),
        })
    }
}
