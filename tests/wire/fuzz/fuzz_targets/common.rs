// SPDX-License-Identifier: GPL-2.0

//! What the RX fuzz targets share.

use rsiw_wire::wire::rx::RxConfig;

/// The receiver configuration a fuzz input's first byte selects: CRC, RFC 7306, the commit
/// extensions, a one-MSS ULPDU limit and siw's Terminate layout, one bit each.
pub(crate) fn rx_config(bits: u8) -> RxConfig {
    RxConfig {
        crc: bits & 1 != 0,
        rfc7306: bits & 2 != 0,
        commit: bits & 4 != 0,
        max_ulpdu: if bits & 8 != 0 { 1454 } else { u16::MAX },
        siw_terminate: bits & 16 != 0,
    }
}
