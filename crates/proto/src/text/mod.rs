//! memcached's classic text protocol, server side: request parsing and reply encoding.
//!
//! The parser is a faithful model of memcached 1.6.18's `try_read_command_ascii` and
//! `process_command_ascii` (`proto_text.c`): a line ends at `\n` (a `\r` before it is
//! dropped when the line has more than one byte), the line is cut at the first NUL,
//! tokens are split on spaces only (runs of spaces collapse; tabs are part of a
//! token), at most 23 tokens are looked at per pass, and every accept/reject decision
//! and error string matches memcached's, because clients are written against it.
//!
//! ```text
//!   read buffer:  "set k 0 0 5\r\nhello\r\nget k\r\n..."
//!                  ^-- parse() --^^-- data --^ consumed = 20
//!                  Request::Store { key: &buf[4..5], data: &buf[13..18], .. }
//! ```
//!
//! `parse` never copies: keys and values borrow from the input. `None` means more
//! bytes are needed; the caller keeps the bytes and calls again when more arrive.

use crate::num::{safe_strtol, safe_strtoul, safe_strtoull};

pub mod client;

pub use memcrab_limits::KEY_MAX_LEN;
/// Tokens memcached looks at per tokenizer pass (`MAX_TOKENS`, proto_text.c),
/// including the terminal pseudo-token.
pub const MAX_TOKENS: usize = 24;
/// Bytes without a newline after which memcached closes a connection unless the line
/// is a `get`/`gets` (`try_read_command_ascii`).
pub const LINE_MAX_NO_NEWLINE: usize = 2048;
/// Leading spaces tolerated before a long get line (`try_read_command_ascii`).
const LONG_LINE_MAX_LEADING_SPACES: usize = 100;

/// What the parser needs to know of the server's settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `-I`: the largest item, counted as memcached counts it (see [`item_size_ok`]).
    pub item_size_max: usize,
    /// `-C` turns CAS off, which makes each item 8 bytes smaller for `-I`.
    pub use_cas: bool,
    /// The longest multi-get line we buffer before closing the connection. memcached
    /// has no bound (it reallocates); we keep per-connection memory bounded.
    pub max_get_line: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            item_size_max: memcrab_limits::ITEM_SIZE_MAX_DEFAULT,
            use_cas: true,
            max_get_line: 1024 * 1024,
        }
    }
}

/// memcached's `item_size_ok` ([`memcrab_limits::item_size_ok`]) under these settings.
pub fn item_size_ok(key_len: usize, flags: u32, value_len: usize, cfg: &Config) -> bool {
    memcrab_limits::item_size_ok(key_len, flags, value_len, cfg.use_cas, cfg.item_size_max)
}

/// The storage commands (protocol.txt "Storage commands").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreCmd {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

/// A parsed request. Slices borrow from the buffer given to [`parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets`/`bget`; `gat`/`gats` when `touch` is `Some(exptime)`.
    Get {
        keys: Keys<'a>,
        cas: bool,
        touch: Option<i32>,
    },
    /// A storage command with its data block complete and well formed.
    Store {
        cmd: StoreCmd,
        key: &'a [u8],
        flags: u32,
        exptime: i32,
        data: &'a [u8],
        cas_unique: u64,
        noreply: bool,
    },
    /// A storage command whose value is over `-I`. memcached answers
    /// `SERVER_ERROR object too large for cache`, drops an existing value on `set`,
    /// and swallows `swallow` bytes (the data block and its `\r\n`), which may not have
    /// arrived yet: `consumed` covers the command line only.
    TooLarge {
        cmd: StoreCmd,
        key: &'a [u8],
        swallow: usize,
        noreply: bool,
    },
    Delete {
        key: &'a [u8],
        noreply: bool,
    },
    /// `incr` (`incr == true`) or `decr`.
    Arith {
        key: &'a [u8],
        delta: u64,
        incr: bool,
        noreply: bool,
    },
    Touch {
        key: &'a [u8],
        exptime: i32,
        noreply: bool,
    },
    /// `stats [sub [arg]]`.
    Stats {
        sub: Option<&'a [u8]>,
        arg: Option<&'a [u8]>,
    },
    /// `flush_all [delay] [noreply]`; `delay == 0` flushes now.
    FlushAll {
        delay: i32,
        noreply: bool,
    },
    Version,
    Verbosity {
        level: u32,
        noreply: bool,
    },
    Quit,
    /// `shutdown [graceful]`. memcached checks `-A` before the mode, so an invalid
    /// mode is a request too and the server decides the reply.
    Shutdown {
        mode: ShutdownMode,
    },
    /// `cache_memlimit <megabytes>`; the server checks the range.
    CacheMemlimit {
        megabytes: u32,
        noreply: bool,
    },
    /// A meta command (`mg ms md ma mn me`), see [`crate::meta`].
    Meta(crate::meta::Meta<'a>),
}

/// The argument of `shutdown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    Now,
    Graceful,
    /// Anything else: `CLIENT_ERROR invalid shutdown mode` when shutdown is enabled.
    Invalid,
}

/// A request line memcached rejects, and how it rejects it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Unknown command or wrong token count: `ERROR`.
    UnknownCommand,
    /// `CLIENT_ERROR bad command line format`.
    BadFormat { noreply: bool },
    /// `delete` with a non-zero hold time or junk.
    DeleteUsage { noreply: bool },
    /// `CLIENT_ERROR invalid exptime argument`.
    InvalidExptime { noreply: bool },
    /// `CLIENT_ERROR invalid numeric delta argument`.
    InvalidDelta { noreply: bool },
    /// The data block did not end in `\r\n`: `CLIENT_ERROR bad data chunk`. The
    /// declared length plus two bytes were consumed; what follows is parsed as the next
    /// command, as in memcached.
    BadDataChunk { noreply: bool },
    /// `cache_memlimit` with a non-number: memcached answers a plain `ERROR`.
    MemlimitNotNumber { noreply: bool },
    /// Over [`LINE_MAX_NO_NEWLINE`] bytes without a newline and not a get: close.
    LineTooLong,
    /// A line ending in an `HTTP/...` token: memcached closes without a reply.
    Http,
}

/// What the connection does after an [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this reply (nothing when `None`, i.e. under `noreply`) and go on.
    Reply(Option<&'static [u8]>),
    /// Close the connection without a reply.
    Close,
}

impl Error {
    /// The one place that maps a protocol error to its wire reply and what follows.
    pub fn action(&self) -> Action {
        let (reply, noreply): (&'static [u8], bool) = match *self {
            Error::UnknownCommand => (b"ERROR\r\n", false),
            Error::BadFormat { noreply } => (b"CLIENT_ERROR bad command line format\r\n", noreply),
            Error::DeleteUsage { noreply } => (
                b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
                noreply,
            ),
            Error::InvalidExptime { noreply } => {
                (b"CLIENT_ERROR invalid exptime argument\r\n", noreply)
            }
            Error::InvalidDelta { noreply } => {
                (b"CLIENT_ERROR invalid numeric delta argument\r\n", noreply)
            }
            Error::BadDataChunk { noreply } => (b"CLIENT_ERROR bad data chunk\r\n", noreply),
            Error::MemlimitNotNumber { noreply } => (b"ERROR\r\n", noreply),
            Error::LineTooLong | Error::Http => return Action::Close,
        };
        Action::Reply(if noreply { None } else { Some(reply) })
    }
}

/// One tokenizer pass over a line, as memcached's `tokenize_command`: up to
/// `MAX_TOKENS - 1` tokens, and the unscanned rest when the pass stopped early.
struct Tokens<'a> {
    toks: [&'a [u8]; MAX_TOKENS - 1],
    n: usize,
    rest: Option<&'a [u8]>,
}

impl<'a> Tokens<'a> {
    fn new(line: &'a [u8]) -> Self {
        let mut t = Tokens {
            toks: [&[]; MAX_TOKENS - 1],
            n: 0,
            rest: None,
        };
        let mut start = 0;
        let mut i = 0;
        while i < line.len() {
            if line[i] == b' ' {
                if start != i {
                    t.toks[t.n] = &line[start..i];
                    t.n += 1;
                    if t.n == MAX_TOKENS - 1 {
                        // memcached skips the space and points at what follows.
                        if i + 1 < line.len() {
                            t.rest = Some(&line[i + 1..]);
                        }
                        return t;
                    }
                }
                start = i + 1;
            }
            i += 1;
        }
        if start != line.len() {
            t.toks[t.n] = &line[start..];
            t.n += 1;
        }
        t
    }

    /// memcached's `ntokens`: real tokens plus the terminal pseudo-token.
    fn ntokens(&self) -> usize {
        self.n + 1
    }

    fn get(&self, i: usize) -> &'a [u8] {
        if i < self.n {
            self.toks[i]
        } else {
            &[]
        }
    }

    /// `set_noreply_maybe`: is the last real token exactly `noreply`?
    fn noreply(&self) -> bool {
        self.n >= 1 && self.toks[self.n - 1] == b"noreply"
    }
}

/// The keys of a multi-key get: every space-separated token, in order. Keys longer
/// than [`KEY_MAX_LEN`] are yielded too; memcached serves the keys before one and then
/// answers `CLIENT_ERROR bad command line format`, so the caller decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys<'a> {
    rest: &'a [u8],
}

impl<'a> Keys<'a> {
    pub fn new(rest: &'a [u8]) -> Self {
        Keys { rest }
    }
}

impl<'a> Iterator for Keys<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&b| b != b' ')?;
        let rest = &self.rest[start..];
        let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        self.rest = &rest[end..];
        Some(&rest[..end])
    }
}

/// The outcome of one [`parse`] call that found a complete request (or a complete
/// error): what it was, and how many input bytes it used.
pub type Parsed<'a> = (Result<Request<'a>, Error>, usize);

/// Parses one request from the front of `buf`. Returns `None` when more bytes are
/// needed, otherwise the request or error and the number of bytes consumed.
pub fn parse<'a>(buf: &'a [u8], cfg: &Config) -> Option<Parsed<'a>> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        return incomplete_line(buf, cfg);
    };
    let mut line = &buf[..nl];
    if line.len() > 1 && line[line.len() - 1] == b'\r' {
        line = &line[..line.len() - 1];
    }
    // memcached handles the line as a C string: a NUL ends it.
    if let Some(nul) = memchr::memchr(0, line) {
        line = &line[..nul];
    }
    let consumed = nl + 1;
    let toks = Tokens::new(line);
    match dispatch(&toks, line, &buf[consumed..], cfg) {
        Line::Done(r) => Some((r, consumed)),
        Line::Data(r, data_len) => Some((r, consumed + data_len)),
        Line::NeedData => None,
    }
}

/// No newline yet: wait, or close when memcached would.
fn incomplete_line<'a>(buf: &'a [u8], cfg: &Config) -> Option<Parsed<'a>> {
    if buf.len() <= LINE_MAX_NO_NEWLINE {
        return None;
    }
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    let is_get = rest.starts_with(b"get ") || rest.starts_with(b"gets ");
    if spaces > LONG_LINE_MAX_LEADING_SPACES || !is_get || buf.len() > cfg.max_get_line {
        return Some((Err(Error::LineTooLong), buf.len()));
    }
    None
}

enum Line<'a> {
    /// The command line alone was the whole request.
    Done(Result<Request<'a>, Error>),
    /// The request included this many data bytes after the line.
    Data(Result<Request<'a>, Error>, usize),
    /// A storage command whose data block has not fully arrived.
    NeedData,
}

fn dispatch<'a>(t: &Tokens<'a>, line: &'a [u8], after: &'a [u8], cfg: &Config) -> Line<'a> {
    use Line::Done;
    let nt = t.ntokens();
    let cmd = t.get(0);
    if nt < 2 || cmd.len() < 2 {
        return Done(Err(Error::UnknownCommand));
    }
    let want = |ok: bool, f: &dyn Fn() -> Result<Request<'a>, Error>| {
        if ok {
            Done(f())
        } else {
            Done(Err(Error::UnknownCommand))
        }
    };
    match cmd {
        b"get" | b"bget" => want(nt >= 3, &|| Ok(get(t, line, false, None))),
        b"gets" => want(nt >= 3, &|| Ok(get(t, line, true, None))),
        b"gat" => want(nt >= 3, &|| gat(t, line, false)),
        b"gats" => want(nt >= 3, &|| gat(t, line, true)),
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            let (sc, n) = match cmd {
                b"set" => (StoreCmd::Set, 6),
                b"add" => (StoreCmd::Add, 6),
                b"replace" => (StoreCmd::Replace, 6),
                b"append" => (StoreCmd::Append, 6),
                b"prepend" => (StoreCmd::Prepend, 6),
                _ => (StoreCmd::Cas, 7),
            };
            if nt != n && nt != n + 1 {
                return Done(Err(Error::UnknownCommand));
            }
            storage(t, sc, after, cfg)
        }
        b"incr" | b"decr" => want(nt == 4 || nt == 5, &|| arith(t, cmd == b"incr")),
        b"delete" => want((3..=5).contains(&nt), &|| delete(t)),
        b"touch" => want(nt == 4 || nt == 5, &|| touch(t)),
        b"stats" => Done(Ok(Request::Stats {
            sub: (nt > 2).then(|| t.get(1)),
            arg: (nt > 3).then(|| t.get(2)),
        })),
        b"flush_all" => want((2..=4).contains(&nt), &|| flush_all(t)),
        b"version" => Done(Ok(Request::Version)),
        b"quit" => Done(Ok(Request::Quit)),
        b"shutdown" => Done(Ok(Request::Shutdown {
            mode: shutdown_mode(t),
        })),
        b"verbosity" => want(nt == 3 || nt == 4, &|| {
            let noreply = t.noreply();
            match safe_strtoul(t.get(1)) {
                Some(level) => Ok(Request::Verbosity { level, noreply }),
                None => Err(Error::BadFormat { noreply }),
            }
        }),
        b"cache_memlimit" => want(nt == 3 || nt == 4, &|| {
            let noreply = t.noreply();
            match safe_strtoul(t.get(1)) {
                Some(megabytes) => Ok(Request::CacheMemlimit { megabytes, noreply }),
                None => Err(Error::MemlimitNotNumber { noreply }),
            }
        }),
        // Meta commands are all two bytes long and start with `m`.
        _ if cmd[0] == b'm' && cmd.len() == 2 => {
            match crate::meta::parse(line, &t.toks[..t.n], nt, after, cfg) {
                crate::meta::Parsed::Done(r, 0) => {
                    Done(r.map(Request::Meta).map_err(|()| Error::UnknownCommand))
                }
                crate::meta::Parsed::Done(r, data) => Line::Data(
                    r.map(Request::Meta).map_err(|()| Error::UnknownCommand),
                    data,
                ),
                crate::meta::Parsed::NeedData => Line::NeedData,
            }
        }
        // memcached dispatches on the first byte first: an unknown command starting
        // with one of these letters is a plain ERROR; only other lines get the HTTP
        // check.
        _ if b"gsacidt".contains(&cmd[0]) => Done(Err(Error::UnknownCommand)),
        _ => {
            if t.get(nt - 2).starts_with(b"HTTP/") {
                Done(Err(Error::Http))
            } else {
                Done(Err(Error::UnknownCommand))
            }
        }
    }
}

/// The bytes of `line` after the first `skip` tokens (the keys of a get).
fn after_tokens(line: &[u8], skip: usize) -> &[u8] {
    let mut rest = line;
    for _ in 0..skip {
        let start = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
        rest = &rest[start..];
        let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    rest
}

fn get<'a>(_t: &Tokens<'a>, line: &'a [u8], cas: bool, touch: Option<i32>) -> Request<'a> {
    let skip = if touch.is_some() { 2 } else { 1 };
    Request::Get {
        keys: Keys::new(after_tokens(line, skip)),
        cas,
        touch,
    }
}

fn gat<'a>(t: &Tokens<'a>, line: &'a [u8], cas: bool) -> Result<Request<'a>, Error> {
    match safe_strtol(t.get(1)) {
        Some(exptime) => Ok(get(t, line, cas, Some(exptime))),
        None => Err(Error::InvalidExptime { noreply: false }),
    }
}

/// `process_update_command` followed by `complete_nread_ascii`.
fn storage<'a>(t: &Tokens<'a>, cmd: StoreCmd, after: &'a [u8], cfg: &Config) -> Line<'a> {
    let noreply = t.noreply();
    let bad = Line::Done(Err(Error::BadFormat { noreply }));
    let key = t.get(1);
    if key.len() > KEY_MAX_LEN {
        return bad;
    }
    let (Some(flags), Some(exptime), Some(vlen)) = (
        safe_strtoul(t.get(2)),
        safe_strtol(t.get(3)),
        safe_strtol(t.get(4)),
    ) else {
        return bad;
    };
    let mut cas_unique = 0;
    if cmd == StoreCmd::Cas {
        match safe_strtoull(t.get(5)) {
            Some(c) => cas_unique = c,
            None => return bad,
        }
    }
    // memcached: `vlen < 0 || vlen > (INT_MAX - 2)`.
    let Ok(vlen) = usize::try_from(vlen) else {
        return bad;
    };
    if vlen > i32::MAX as usize - 2 {
        return bad;
    }
    let total = vlen + 2;
    if !item_size_ok(key.len(), flags, vlen, cfg) {
        return Line::Done(Ok(Request::TooLarge {
            cmd,
            key,
            swallow: total,
            noreply,
        }));
    }
    if after.len() < total {
        return Line::NeedData;
    }
    if &after[vlen..total] != b"\r\n" {
        return Line::Data(Err(Error::BadDataChunk { noreply }), total);
    }
    Line::Data(
        Ok(Request::Store {
            cmd,
            key,
            flags,
            exptime,
            data: &after[..vlen],
            cas_unique,
            noreply,
        }),
        total,
    )
}

fn arith<'a>(t: &Tokens<'a>, incr: bool) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > KEY_MAX_LEN {
        return Err(Error::BadFormat { noreply });
    }
    match safe_strtoull(t.get(2)) {
        Some(delta) => Ok(Request::Arith {
            key,
            delta,
            incr,
            noreply,
        }),
        None => Err(Error::InvalidDelta { noreply }),
    }
}

fn delete<'a>(t: &Tokens<'a>) -> Result<Request<'a>, Error> {
    let nt = t.ntokens();
    let mut noreply = false;
    if nt > 3 {
        let hold_is_zero = t.get(2) == b"0";
        noreply = t.noreply();
        let valid = (nt == 4 && (hold_is_zero || noreply)) || (nt == 5 && hold_is_zero && noreply);
        if !valid {
            return Err(Error::DeleteUsage { noreply });
        }
    }
    let key = t.get(1);
    if key.len() > KEY_MAX_LEN {
        return Err(Error::BadFormat { noreply });
    }
    Ok(Request::Delete { key, noreply })
}

fn touch<'a>(t: &Tokens<'a>) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    let key = t.get(1);
    if key.len() > KEY_MAX_LEN {
        return Err(Error::BadFormat { noreply });
    }
    match safe_strtol(t.get(2)) {
        Some(exptime) => Ok(Request::Touch {
            key,
            exptime,
            noreply,
        }),
        None => Err(Error::InvalidExptime { noreply }),
    }
}

fn flush_all<'a>(t: &Tokens<'a>) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    let mut delay = 0;
    if t.ntokens() != if noreply { 3 } else { 2 } {
        match safe_strtol(t.get(1)) {
            Some(d) => delay = d,
            None => return Err(Error::InvalidExptime { noreply }),
        }
    }
    Ok(Request::FlushAll { delay, noreply })
}

fn shutdown_mode(t: &Tokens<'_>) -> ShutdownMode {
    match t.ntokens() {
        2 => ShutdownMode::Now,
        3 if t.get(1) == b"graceful" => ShutdownMode::Graceful,
        _ => ShutdownMode::Invalid,
    }
}

/// Reply lines, exactly as memcached writes them.
pub mod reply {
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
    pub const NON_NUMERIC: &[u8] =
        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
    pub const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
    pub const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";
    pub const DELTA_OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";
    pub const SHUTDOWN_DISABLED: &[u8] = b"ERROR: shutdown not enabled\r\n";
    pub const SHUTDOWN_INVALID_MODE: &[u8] = b"CLIENT_ERROR invalid shutdown mode\r\n";
    pub const MEMLIMIT_TOO_SMALL: &[u8] =
        b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n";
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config::default()
    }

    /// Parses `input` completely and checks that every proper prefix is incomplete
    /// (or, for errors decided on the line alone, at least never a different request).
    fn full(input: &[u8]) -> (Result<Request<'_>, Error>, usize) {
        let c = cfg();
        let got = parse(input, &c).expect("complete");
        for cut in 0..got.1 {
            assert!(
                parse(&input[..cut], &c).is_none(),
                "prefix {cut} of {:?} should be incomplete",
                String::from_utf8_lossy(input)
            );
        }
        got
    }

    fn keys(r: &Request<'_>) -> Vec<Vec<u8>> {
        match r {
            Request::Get { keys, .. } => keys.clone().map(|k| k.to_vec()).collect(),
            other => panic!("not a get: {other:?}"),
        }
    }

    /// Input, keys, `gets`?, gat exptime.
    type GetCase = (&'static [u8], &'static [&'static [u8]], bool, Option<i32>);

    #[test]
    fn get_variants() {
        let cases: &[GetCase] = &[
            (b"get a\r\n", &[b"a"], false, None),
            (b"get a b  c\r\n", &[b"a", b"b", b"c"], false, None),
            (b"gets a\n", &[b"a"], true, None),
            (b"bget a\r\n", &[b"a"], false, None),
            (b"gat 10 a b\r\n", &[b"a", b"b"], false, Some(10)),
            (b"gats -1 a\r\n", &[b"a"], true, Some(-1)),
            (b"gat 10\r\n", &[], false, Some(10)),
            (b"  get   a\tb \r\n", &[b"a\tb"], false, None),
        ];
        for (input, want_keys, want_cas, want_touch) in cases {
            let (r, n) = full(input);
            assert_eq!(n, input.len());
            let r = r.expect("ok");
            let got: Vec<Vec<u8>> = keys(&r);
            let want: Vec<Vec<u8>> = want_keys.iter().map(|k| k.to_vec()).collect();
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(input));
            match r {
                Request::Get { cas, touch, .. } => {
                    assert_eq!(cas, *want_cas);
                    assert_eq!(touch, *want_touch);
                }
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn get_many_keys_past_token_limit() {
        let mut line = b"get".to_vec();
        for i in 0..100 {
            line.extend_from_slice(format!(" k{i}").as_bytes());
        }
        line.extend_from_slice(b"\r\n");
        let (r, _) = full(&line);
        assert_eq!(keys(&r.expect("ok")).len(), 100);
    }

    #[test]
    fn storage_commands() {
        let (r, n) = full(b"set k 5 10 3\r\nabc\r\n");
        assert_eq!(n, 19);
        assert_eq!(
            r,
            Ok(Request::Store {
                cmd: StoreCmd::Set,
                key: b"k",
                flags: 5,
                exptime: 10,
                data: b"abc",
                cas_unique: 0,
                noreply: false
            })
        );
        let (r, _) = full(b"cas k 0 0 1 99 noreply\r\nx\r\n");
        assert_eq!(
            r,
            Ok(Request::Store {
                cmd: StoreCmd::Cas,
                key: b"k",
                flags: 0,
                exptime: 0,
                data: b"x",
                cas_unique: 99,
                noreply: true
            })
        );
        // Data may contain \r\n; only the declared length counts.
        let (r, n) = full(b"append k 0 0 4\r\n\r\n\r\n\r\nget k\r\n");
        assert_eq!(n, 22);
        assert!(matches!(
            r,
            Ok(Request::Store {
                data: b"\r\n\r\n",
                cmd: StoreCmd::Append,
                ..
            })
        ));
        // A 7th token that is not `noreply` is ignored, as in memcached.
        let (r, _) = full(b"set k 0 0 1 junk\r\nx\r\n");
        assert!(matches!(r, Ok(Request::Store { noreply: false, .. })));
    }

    #[test]
    fn storage_errors() {
        let c = cfg();
        let rows: &[(&[u8], Result<(), Error>, usize)] = &[
            (b"set k 0 0\r\n", Err(Error::UnknownCommand), 11),
            (b"set k 0 0 1 2 3\r\n", Err(Error::UnknownCommand), 17),
            (
                b"set k x 0 1\r\n",
                Err(Error::BadFormat { noreply: false }),
                13,
            ),
            (
                b"set k 0 0 -1\r\n",
                Err(Error::BadFormat { noreply: false }),
                14,
            ),
            (
                b"set k 0 0 -1 noreply\r\n",
                Err(Error::BadFormat { noreply: true }),
                22,
            ),
            (
                b"cas k 0 0 1 x\r\n",
                Err(Error::BadFormat { noreply: false }),
                15,
            ),
            (
                b"set k 0 0 1\r\nab\r\n",
                Err(Error::BadDataChunk { noreply: false }),
                16,
            ),
        ];
        for (input, want, n) in rows {
            let (got, used) = parse(input, &c).expect("complete");
            assert_eq!(
                got.map(|_| ()),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
            assert_eq!(used, *n, "{:?}", String::from_utf8_lossy(input));
        }
        let long_key = [b'k'; 251];
        let mut line = b"set ".to_vec();
        line.extend_from_slice(&long_key);
        line.extend_from_slice(b" 0 0 1\r\nx\r\n");
        let (got, used) = parse(&line, &c).expect("complete");
        assert_eq!(got, Err(Error::BadFormat { noreply: false }));
        assert_eq!(used, line.len() - 3, "the data line is not swallowed");
    }

    #[test]
    fn too_large_is_decided_on_the_line() {
        let c = Config {
            item_size_max: 1024,
            ..cfg()
        };
        let (r, n) = parse(b"set k 0 0 5000\r\n", &c).expect("decided");
        assert_eq!(n, 16);
        assert_eq!(
            r,
            Ok(Request::TooLarge {
                cmd: StoreCmd::Set,
                key: b"k",
                swallow: 5002,
                noreply: false
            })
        );
        // The boundary is memcached's: header 48 + key + 1 + value + 2 + cas 8.
        assert!(item_size_ok(1, 0, 1024 - 60, &c));
        assert!(!item_size_ok(1, 0, 1024 - 59, &c));
        assert!(!item_size_ok(1, 1, 1024 - 60, &c));
    }

    #[test]
    fn other_commands() {
        let rows: &[(&[u8], Result<Request<'static>, Error>)] = &[
            (
                b"delete k\r\n",
                Ok(Request::Delete {
                    key: b"k",
                    noreply: false,
                }),
            ),
            (
                b"delete k 0\r\n",
                Ok(Request::Delete {
                    key: b"k",
                    noreply: false,
                }),
            ),
            (
                b"delete k noreply\r\n",
                Ok(Request::Delete {
                    key: b"k",
                    noreply: true,
                }),
            ),
            (
                b"delete k 0 noreply\r\n",
                Ok(Request::Delete {
                    key: b"k",
                    noreply: true,
                }),
            ),
            (
                b"delete k 1\r\n",
                Err(Error::DeleteUsage { noreply: false }),
            ),
            (
                b"delete k 1 noreply\r\n",
                Err(Error::DeleteUsage { noreply: true }),
            ),
            (b"delete\r\n", Err(Error::UnknownCommand)),
            (
                b"incr k 5\r\n",
                Ok(Request::Arith {
                    key: b"k",
                    delta: 5,
                    incr: true,
                    noreply: false,
                }),
            ),
            (
                b"decr k +5 noreply\r\n",
                Ok(Request::Arith {
                    key: b"k",
                    delta: 5,
                    incr: false,
                    noreply: true,
                }),
            ),
            (
                b"incr k -1\r\n",
                Err(Error::InvalidDelta { noreply: false }),
            ),
            (b"incr k\r\n", Err(Error::UnknownCommand)),
            (
                b"touch k 10\r\n",
                Ok(Request::Touch {
                    key: b"k",
                    exptime: 10,
                    noreply: false,
                }),
            ),
            (
                b"touch k x\r\n",
                Err(Error::InvalidExptime { noreply: false }),
            ),
            (
                b"flush_all\r\n",
                Ok(Request::FlushAll {
                    delay: 0,
                    noreply: false,
                }),
            ),
            (
                b"flush_all 5\r\n",
                Ok(Request::FlushAll {
                    delay: 5,
                    noreply: false,
                }),
            ),
            (
                b"flush_all noreply\r\n",
                Ok(Request::FlushAll {
                    delay: 0,
                    noreply: true,
                }),
            ),
            (
                b"flush_all 5 noreply\r\n",
                Ok(Request::FlushAll {
                    delay: 5,
                    noreply: true,
                }),
            ),
            (
                b"flush_all x\r\n",
                Err(Error::InvalidExptime { noreply: false }),
            ),
            (b"flush_all 1 2 3\r\n", Err(Error::UnknownCommand)),
            (b"version\r\n", Ok(Request::Version)),
            (b"version junk\r\n", Ok(Request::Version)),
            (b"quit\r\n", Ok(Request::Quit)),
            (
                b"shutdown\r\n",
                Ok(Request::Shutdown {
                    mode: ShutdownMode::Now,
                }),
            ),
            (
                b"shutdown graceful\r\n",
                Ok(Request::Shutdown {
                    mode: ShutdownMode::Graceful,
                }),
            ),
            (
                b"shutdown now\r\n",
                Ok(Request::Shutdown {
                    mode: ShutdownMode::Invalid,
                }),
            ),
            (
                b"verbosity 1\r\n",
                Ok(Request::Verbosity {
                    level: 1,
                    noreply: false,
                }),
            ),
            (b"verbosity\r\n", Err(Error::UnknownCommand)),
            (
                b"verbosity x noreply\r\n",
                Err(Error::BadFormat { noreply: true }),
            ),
            (
                b"cache_memlimit 100\r\n",
                Ok(Request::CacheMemlimit {
                    megabytes: 100,
                    noreply: false,
                }),
            ),
            (
                b"cache_memlimit x\r\n",
                Err(Error::MemlimitNotNumber { noreply: false }),
            ),
            (
                b"stats\r\n",
                Ok(Request::Stats {
                    sub: None,
                    arg: None,
                }),
            ),
            (
                b"stats items\r\n",
                Ok(Request::Stats {
                    sub: Some(b"items"),
                    arg: None,
                }),
            ),
            (
                b"stats detail on\r\n",
                Ok(Request::Stats {
                    sub: Some(b"detail"),
                    arg: Some(b"on"),
                }),
            ),
            (b"bogus\r\n", Err(Error::UnknownCommand)),
            (b"\r\n", Err(Error::UnknownCommand)),
            (b"\n", Err(Error::UnknownCommand)),
            (b"g\r\n", Err(Error::UnknownCommand)),
            (b"get\r\n", Err(Error::UnknownCommand)),
            (b"GET / HTTP/1.1\r\n", Err(Error::Http)),
            (b"gogo HTTP/1.1\r\n", Err(Error::UnknownCommand)),
            (b"POST HTTP/1.0\r\n", Err(Error::Http)),
            (b"get\0 a\r\n", Err(Error::UnknownCommand)),
        ];
        for (input, want) in rows {
            let (got, n) = full(input);
            assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(input));
            assert_eq!(n, input.len());
        }
    }

    #[test]
    fn long_lines() {
        let c = cfg();
        let junk = vec![b'x'; LINE_MAX_NO_NEWLINE + 1];
        assert_eq!(
            parse(&junk, &c),
            Some((Err(Error::LineTooLong), junk.len()))
        );
        assert!(parse(&junk[..LINE_MAX_NO_NEWLINE], &c).is_none());
        let mut get = b"get ".to_vec();
        get.resize(LINE_MAX_NO_NEWLINE + 100, b'k');
        assert!(parse(&get, &c).is_none(), "a long get keeps waiting");
        let small = Config {
            max_get_line: 4096,
            ..c
        };
        get.resize(5000, b'k');
        assert_eq!(parse(&get, &small), Some((Err(Error::LineTooLong), 5000)));
    }

    #[test]
    fn error_actions() {
        assert_eq!(
            Error::UnknownCommand.action(),
            Action::Reply(Some(b"ERROR\r\n"))
        );
        assert_eq!(
            Error::BadFormat { noreply: true }.action(),
            Action::Reply(None)
        );
        assert_eq!(Error::LineTooLong.action(), Action::Close);
        assert_eq!(Error::Http.action(), Action::Close);
        assert_eq!(
            Error::DeleteUsage { noreply: false }.action(),
            Action::Reply(Some(
                &b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"[..]
            ))
        );
    }

    #[test]
    fn value_reply() {
        let mut out = Vec::new();
        reply::value(&mut out, b"k", 7, b"abc", Some(42));
        reply::value(&mut out, b"k", 0, b"", None);
        assert_eq!(out, b"VALUE k 7 3 42\r\nabc\r\nVALUE k 0 0\r\n\r\n");
    }
}
