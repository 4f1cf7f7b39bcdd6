//! Response statuses (`protocol_binary.h`'s `PROTOCOL_BINARY_RESPONSE_*`) and the
//! text memcached's `write_bin_error` sends with each. A leaf.

pub const SUCCESS: u16 = 0x00;
pub const KEY_ENOENT: u16 = 0x01;
pub const KEY_EEXISTS: u16 = 0x02;
pub const E2BIG: u16 = 0x03;
pub const EINVAL: u16 = 0x04;
pub const NOT_STORED: u16 = 0x05;
pub const DELTA_BADVAL: u16 = 0x06;
pub const AUTH_ERROR: u16 = 0x20;
pub const AUTH_CONTINUE: u16 = 0x21;
pub const UNKNOWN_COMMAND: u16 = 0x81;
pub const ENOMEM: u16 = 0x82;

/// memcached's `write_bin_error` default text for a status.
pub fn text(status: u16) -> &'static [u8] {
    match status {
        ENOMEM => b"Out of memory",
        UNKNOWN_COMMAND => b"Unknown command",
        KEY_ENOENT => b"Not found",
        EINVAL => b"Invalid arguments",
        KEY_EEXISTS => b"Data exists for key.",
        E2BIG => b"Too large.",
        DELTA_BADVAL => b"Non-numeric server-side value for incr or decr",
        NOT_STORED => b"Not stored.",
        AUTH_ERROR => b"Auth failure.",
        _ => b"UNHANDLED ERROR",
    }
}
