// SPDX-License-Identifier: GPL-2.0

//! Host wrapper around the rsiw iWARP wire core.
//!
//! The kernel module compiles `drivers/infiniband/sw/rsiw/wire/mod.rs` as the
//! `wire` module of its crate. This crate includes the very same file so that
//! it can be unit tested, property tested, fuzzed and benchmarked on the host.

#![no_std]
#![deny(missing_docs)]
#![deny(unreachable_pub)]
#![deny(rust_2018_idioms)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]
#![warn(clippy::all)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(clippy::cast_lossless)]
#![warn(clippy::as_underscore)]
#![warn(clippy::ptr_as_ptr)]
#![warn(clippy::indexing_slicing)]
#![warn(clippy::arithmetic_side_effects)]
#![warn(clippy::unwrap_used)]
#![warn(clippy::expect_used)]
#![warn(clippy::panic)]

#[path = "../../drivers/infiniband/sw/rsiw/wire/mod.rs"]
pub mod wire;
