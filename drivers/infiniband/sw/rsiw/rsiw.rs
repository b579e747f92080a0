// SPDX-License-Identifier: GPL-2.0

//! rsiw: software iWARP RDMA over kernel TCP sockets.

use kernel::prelude::*;

module! {
    type: Rsiw,
    name: "rsiw",
    authors: ["The rsiw developers"],
    description: "Software iWARP RDMA driver (Rust)",
    license: "GPL",
    alias: ["rdma-link-rsiw"],
}

struct Rsiw;

impl kernel::Module for Rsiw {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("rsiw loaded\n");
        Ok(Rsiw)
    }
}
