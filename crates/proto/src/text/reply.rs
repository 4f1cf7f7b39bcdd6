//! Reply lines of the classic text protocol, exactly as memcached writes them.
//! Imports nothing of `text`.

pub const STORED: &[u8] = b"STORED\r\n";
pub const NOT_STORED: &[u8] = b"NOT_STORED\r\n";
pub const EXISTS: &[u8] = b"EXISTS\r\n";
pub const NOT_FOUND: &[u8] = b"NOT_FOUND\r\n";
pub const DELETED: &[u8] = b"DELETED\r\n";
pub const TOUCHED: &[u8] = b"TOUCHED\r\n";
pub const END: &[u8] = b"END\r\n";
pub const OK: &[u8] = b"OK\r\n";
pub const RESET: &[u8] = b"RESET\r\n";
pub const ERROR: &[u8] = b"ERROR\r\n";
pub const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
pub const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
pub const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
pub const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";
pub const DELTA_OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";
pub const SHUTDOWN_DISABLED: &[u8] = b"ERROR: shutdown not enabled\r\n";
pub const SHUTDOWN_INVALID_MODE: &[u8] = b"CLIENT_ERROR invalid shutdown mode\r\n";
pub const MEMLIMIT_TOO_SMALL: &[u8] = b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n";
pub const MEMLIMIT_NOT_MEGABYTES: &[u8] =
    b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n";
pub const TOO_MANY_CONNECTIONS: &[u8] = b"ERROR Too many open connections\r\n";
pub const STATS_DETAIL_USAGE: &[u8] = b"CLIENT_ERROR usage: stats detail on|off|dump\r\n";

/// `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n` (`make_ascii_get_suffix`).
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    let mut b = itoa::Buffer::new();
    out.reserve(key.len() + data.len() + 48);
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    out.extend_from_slice(b.format(flags).as_bytes());
    out.push(b' ');
    out.extend_from_slice(b.format(data.len()).as_bytes());
    if let Some(cas) = cas {
        out.push(b' ');
        out.extend_from_slice(b.format(cas).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A number on its own line: the reply to a successful `incr`/`decr`.
pub fn number(out: &mut Vec<u8>, n: u64) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `STAT <name> <value>\r\n`.
pub fn stat(out: &mut Vec<u8>, name: &str, value: impl std::fmt::Display) {
    use std::io::Write;
    // Stats are not on the hot path; `write!` keeps every value type simple.
    let _ = write!(out, "STAT {name} {value}\r\n");
}
