//! Reply lines of the classic text protocol, exactly as memcached writes them.
//! Imports nothing of `text`.

pub const STORED: &[u8] = b"STORED\r\n";
pub const NOT_STORED: &[u8] = b"NOT_STORED\r\n";
pub const EXISTS: &[u8] = b"EXISTS\r\n";
pub const NOT_FOUND: &[u8] = b"NOT_FOUND\r\n";
pub const DELETED: &[u8] = b"DELETED\r\n";
pub const TOUCHED: &[u8] = b"TOUCHED\r\n";
pub const END: &[u8] = b"END\r\n";
/// `slabs automove window` out of 3..=1800 (memcached 1.6.42).
pub const AUTOMOVE_WINDOW_RANGE: &[u8] = b"CLIENT_ERROR automove window too low or too high\r\n";
/// `stats detail` under `-X` (memcached 1.6.37).
pub const STATS_DETAIL_NOT_ALLOWED: &[u8] = b"CLIENT_ERROR stats detail not allowed\r\n";
pub const OK: &[u8] = b"OK\r\n";
pub const RESET: &[u8] = b"RESET\r\n";
pub const ERROR: &[u8] = b"ERROR\r\n";
pub const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
pub const BAD_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
pub const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
pub const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
pub const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";
pub const DELTA_OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";
pub const SHUTDOWN_DISABLED: &[u8] = b"SERVER_ERROR: shutdown not enabled\r\n";
pub const SHUTDOWN_INVALID_MODE: &[u8] = b"CLIENT_ERROR invalid shutdown mode\r\n";
pub const MEMLIMIT_TOO_SMALL: &[u8] = b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n";
pub const MEMLIMIT_NOT_MEGABYTES: &[u8] =
    b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n";
pub const TOO_MANY_CONNECTIONS: &[u8] = b"ERROR Too many open connections\r\n";
pub const STATS_DETAIL_USAGE: &[u8] = b"CLIENT_ERROR usage: stats detail on|off|dump\r\n";

// `lru_crawler` (`process_lru_crawler_command`).
pub const BADCLASS: &[u8] = b"BADCLASS invalid class id\r\n";
pub const CRAWLER_NOT_STARTED: &[u8] = b"NOTSTARTED no items to crawl\r\n";
pub const CRAWLER_DISABLED: &[u8] = b"CLIENT_ERROR lru crawler disabled\r\n";
pub const CRAWLER_ERROR: &[u8] = b"ERROR an unknown error happened\r\n";
pub const CRAWLER_ENABLE_FAILED: &[u8] = b"ERROR failed to start lru crawler thread\r\n";
pub const CRAWLER_SLEEP_TOO_LONG: &[u8] = b"CLIENT_ERROR sleep must be one second or less\r\n";
pub const METADUMP_NOT_ALLOWED: &[u8] = b"ERROR metadump not allowed\r\n";
/// A key dump after requests whose replies are still queued (memcached 1.6.45's
/// `resp_has_stack` check, as for `watch`).
pub const CANNOT_PIPELINE_METADUMP: &[u8] =
    b"ERROR cannot pipeline other commands before metadump\r\n";
pub const CANNOT_PIPELINE_MGDUMP: &[u8] = b"ERROR cannot pipeline other commands before mgdump\r\n";
/// `-X` refusing `lru_crawler mgdump` (memcached 1.6.19).
pub const KEY_DUMP_NOT_ALLOWED: &[u8] = b"ERROR key dump not allowed\r\n";

// `slabs reassign` (`process_slabs_command`).
pub const REASSIGN_SAME: &[u8] = b"SAME src and dst class are identical\r\n";
pub const REASSIGN_BADCLASS: &[u8] = b"BADCLASS invalid src or dst class id\r\n";

// `lru tune` (`process_lru_command`).
pub const LRU_PCTS_TOO_HIGH: &[u8] = b"ERROR hot and warm pcts must not exceed 80\r\n";
pub const LRU_FACTORS_NOT_POSITIVE: &[u8] =
    b"ERROR hot/warm age factors must be greater than 0\r\n";

/// `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n` (`make_ascii_get_suffix`).
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.reserve(HEAD_MAX_FIXED + key.len() + data.len() + 2);
    value_head(out, key, flags, data.len(), cas);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The longest `VALUE` line apart from its key: `VALUE `, three numbers (flags up
/// to 10 digits, length and CAS up to 20), their spaces and `\r\n`.
const HEAD_MAX_FIXED: usize = 6 + 1 + 10 + 1 + 20 + 1 + 20 + 2;

/// The `VALUE <key> <flags> <bytes>[ <cas>]\r\n` line alone, for a caller that sends
/// the `<bytes>` of data and the closing `\r\n` itself.
///
/// The numbers and their separators are put together in a small stack buffer, two
/// digits per step (`decimal`), so the line is appended with three copies (`VALUE `,
/// the key, the rest) and no per-byte pushes.
pub fn value_head(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    let mut tail = [0u8; HEAD_MAX_FIXED - 6];
    let n = head_tail(&mut tail, flags, len, cas);
    out.reserve(6 + key.len() + n);
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.extend_from_slice(&tail[..n]);
}

/// Writes ` <flags> <len>[ <cas>]\r\n` at the start of `buf` (at least
/// `HEAD_MAX_FIXED - 6` bytes) and returns its length.
fn head_tail(buf: &mut [u8], flags: u32, len: usize, cas: Option<u64>) -> usize {
    let mut p = 0;
    buf[p] = b' ';
    p += 1;
    if flags == 0 {
        buf[p] = b'0';
        p += 1;
    } else {
        p += decimal(&mut buf[p..], u64::from(flags));
    }
    buf[p] = b' ';
    p += 1;
    p += decimal(&mut buf[p..], len as u64);
    if let Some(cas) = cas {
        buf[p] = b' ';
        p += 1;
        p += decimal(&mut buf[p..], cas);
    }
    buf[p..p + 2].copy_from_slice(b"\r\n");
    p + 2
}

/// "00" to "99": two digits per table lookup.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// Writes `n` in decimal at the start of `buf` (at least 20 bytes) and returns how
/// many digits it took: the digits are made two at a time from the right into a
/// 20-byte scratch, then copied once. (Counting the digits first with `ilog10` and
/// writing in place measured 10 instructions more per VALUE line.)
fn decimal(buf: &mut [u8], mut n: u64) -> usize {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    while n >= 100 {
        let d = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    }
    if n >= 10 {
        let d = n as usize * 2;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    } else {
        i -= 1;
        tmp[i] = b'0' + n as u8;
    }
    let len = tmp.len() - i;
    buf[..len].copy_from_slice(&tmp[i..]);
    len
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

/// One `lru_crawler metadump` line (`crawler_metadump_eval`): `key=<key> exp=<exptime>
/// la=<last access> cas=<cas> fetch=yes|no cls=<class> size=<bytes> flags=<flags> `
/// (1.6.45's format, trailing space included) and a bare `\n`, as memcached ends these
/// lines (only the leading `OK` and the final `END` have `\r\n`). The key is
/// URI-encoded; `exp` is -1 for an item that never expires, else a unix time, as is
/// `la`.
#[allow(clippy::too_many_arguments)]
pub fn metadump_line(
    out: &mut Vec<u8>,
    key: &[u8],
    exp: i64,
    la: i64,
    cas: u64,
    fetched: bool,
    class: u8,
    size: u64,
    flags: u32,
) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b"key=");
    uriencode(out, key);
    out.extend_from_slice(b" exp=");
    out.extend_from_slice(b.format(exp).as_bytes());
    out.extend_from_slice(b" la=");
    out.extend_from_slice(b.format(la).as_bytes());
    out.extend_from_slice(b" cas=");
    out.extend_from_slice(b.format(cas).as_bytes());
    out.extend_from_slice(if fetched { b" fetch=yes" } else { b" fetch=no" });
    out.extend_from_slice(b" cls=");
    out.extend_from_slice(b.format(class).as_bytes());
    out.extend_from_slice(b" size=");
    out.extend_from_slice(b.format(size).as_bytes());
    // 1.6.45 (crawler_metadump_eval) ends every field with a space, flags= included.
    out.extend_from_slice(b" flags=");
    out.extend_from_slice(b.format(flags).as_bytes());
    out.extend_from_slice(b" \n");
}

/// memcached's `uriencode`: letters, digits and `-._~` as they are, every other byte
/// as `%XX` (upper-case hex).
pub fn uriencode(out: &mut Vec<u8>, src: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &c in src {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            out.push(c);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        }
    }
}

/// [`uriencode`] into a new string, as `watch`, `stats hotkeys` and `stats slowlog`
/// print keys.
pub fn uriencoded(src: &[u8]) -> String {
    let mut out = Vec::with_capacity(src.len());
    uriencode(&mut out, src);
    // uriencode writes ASCII only.
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadump_lines() {
        let mut out = Vec::new();
        metadump_line(&mut out, b"a b%/~", -1, 1700000000, 7, false, 1, 61, 0);
        metadump_line(
            &mut out, b"k", 1700000100, 1700000000, 8, true, 2, 300069, 5,
        );
        assert_eq!(
            String::from_utf8_lossy(&out),
            "key=a%20b%25%2F~ exp=-1 la=1700000000 cas=7 fetch=no cls=1 size=61 flags=0 \n\
             key=k exp=1700000100 la=1700000000 cas=8 fetch=yes cls=2 size=300069 flags=5 \n"
        );
    }

    #[test]
    fn keys_print_as_watch_prints_them() {
        assert_eq!(uriencoded(b"a b%/~_.-Z9"), "a%20b%25%2F~_.-Z9");
        assert_eq!(uriencoded(&[0, 0xff]), "%00%FF");
    }
}
