//! memcached's classic text protocol, server side: request parsing and reply encoding;
//! the meta commands ([`meta`]) are text commands too and are parsed from here.
//!
//! The parser is a faithful model of memcached 1.6.45's `try_read_command_ascii`,
//! `process_request` (`proto_parser.c`) and `process_command_ascii` (`proto_text.c`):
//! a line ends at `\n` (a `\r` before it is dropped), a line under 4 bytes is refused,
//! the command is the text before the first space, tokens are split on spaces only
//! (runs of spaces collapse; tabs and NULs are part of a token), at most 23 tokens are
//! looked at, numbers are read with mcmc's strict converters where 1.6.45 does, and
//! every accept/reject decision, error string and swallowed data block matches
//! memcached's, because clients are written against it.
//!
//! ```text
//!   read buffer:  "set k 0 0 5\r\nhello\r\nget k\r\n..."
//!                  ^-- parse() --^^-- data --^ consumed = 20
//!                  Request::Store { key: &buf[4..5], data: &buf[13..18], .. }
//! ```
//!
//! `parse` never copies: keys and values borrow from the input. `None` means more
//! bytes are needed; the caller keeps the bytes and calls again when more arrive.
//!
//! The files, what each holds, and what it imports of this crate (`──►`). `mod.rs`
//! calls into `meta/` and `request.rs`, and what they need of text (tokenizer,
//! `Config`, reply lines) sits in the leaf files below, so none imports it back.
//!
//! ```text
//!   mod.rs       parse: find the line, tokenize, dispatch; the classic commands
//!                (get, set, delete, incr, ...) and the admin ones
//!                    ──► token, config, request, meta, admin, watch, num,
//!                        memcrab_limits
//!   request.rs   Request, StoreCmd, Keys; Error and the Action it asks of the
//!                connection       ──► meta (Request::Meta), admin (Request::Admin)
//!   admin.rs     Admin (lru_crawler, slabs, lru, watch), Classes, CrawlKind, Float
//!                                 ──► num
//!   watch.rs     `watch`'s event types and memcached's log lines
//!                                 ──► reply, request (StoreCmd)
//!   meta/        the meta commands; its files are drawn in its own docs ([`meta`])
//!                                 ──► token, config, reply, client, num,
//!                                     memcrab_limits
//!   token.rs     line finding and memcached's tokenize_command (Tokens, MAX_TOKENS,
//!                LINE_MAX_NO_NEWLINE, READ_BUFFER_SIZE); imports nothing
//!   config.rs    Config, item_size_ok  ──► memcrab_limits
//!   reply.rs     reply lines and encoders; imports nothing
//!   client.rs    client side: request encoders, reply parser
//!                                 ──► request (StoreCmd), num
//!   tests/       unit tests: mod.rs (the classic commands), admin_commands.rs
//! ```

use crate::num::{safe_strtod, safe_strtol, safe_strtoul, NotANumber};
use admin::{Admin, Classes, CrawlKind, Float};
use token::{Found, Tokens};

pub mod admin;
pub mod client;
mod config;
pub mod meta;
pub mod reply;
mod request;
mod token;
pub mod watch;

pub use config::{item_size_ok, Config};
/// The longest key. [`memcrab_limits`] defines it; this is proto's one re-export of it
/// (binary and meta use it from there too).
pub use memcrab_limits::KEY_MAX_LEN;
pub use request::{Action, Error, Keys, Parsed, Request, ShutdownMode, StoreCmd};
pub use token::{LINE_MAX_NO_NEWLINE, MAX_TOKENS, READ_BUFFER_SIZE};

/// memcached 1.6.45's `process_request` refuses a line shorter than this, newline
/// included ("min command length is 2, plus the \\r\\n"), with `CLIENT_ERROR bad
/// command line format`: an empty line, or a lone `x\\r\\n`.
const LINE_MIN_LEN: usize = 4;

/// Parses one request from the front of `buf`. Returns `None` when more bytes are
/// needed, otherwise the request or error and the number of bytes consumed.
pub fn parse<'a>(buf: &'a [u8], cfg: &Config) -> Option<Parsed<'a>> {
    let (line, consumed) = match token::find_line(buf, cfg.max_get_line) {
        Found::Line { line, consumed } => (line, consumed),
        Found::NeedMore => return None,
        Found::TooLong => return Some((Err(Error::LineTooLong), buf.len())),
    };
    if consumed < LINE_MIN_LEN {
        return Some((Err(Error::BadFormat { noreply: false }), consumed));
    }
    match dispatch(line, &buf[consumed..], cfg) {
        Line::Done(r) => Some((r, consumed)),
        Line::Data(r, data_len) => Some((r, consumed + data_len)),
        Line::NeedData => None,
    }
}

/// What [`dispatch`] made of a line.
enum Line<'a> {
    /// The command line alone was the whole request.
    Done(Result<Request<'a>, Error>),
    /// The request included this many data bytes after the line.
    Data(Result<Request<'a>, Error>, usize),
    /// A storage command (or `ms`) whose data block has not fully arrived.
    NeedData,
}

/// memcached 1.6.45's `process_request`: the command is the line up to its first
/// space (a line that starts with a space has an empty one, and a tab is part of
/// it), matched exactly; each command checks its own token count and answers
/// `CLIENT_ERROR bad command line format` when it is short. What no command matches
/// goes to [`other`].
fn dispatch<'a>(line: &'a [u8], after: &'a [u8], cfg: &Config) -> Line<'a> {
    use Line::Done;
    let cmd = &line[..memchr::memchr(b' ', line).unwrap_or(line.len())];
    let t = Tokens::new(line);
    // The real tokens, the command included (mcmc's `ntokens`).
    let n = t.ntokens() - 1;
    let short = |min: usize| n < min;
    match cmd {
        // A line too short for its command is refused before memcached looks for
        // `noreply`: the error is always written.
        b"get" | b"gets" if short(2) => Done(Err(Error::BadFormat { noreply: false })),
        b"get" => Done(Ok(get(line, false, None))),
        b"gets" => Done(Ok(get(line, true, None))),
        b"gat" | b"gats" if short(3) => Done(Err(Error::BadFormat { noreply: false })),
        b"gat" => Done(gat(&t, line, false)),
        b"gats" => Done(gat(&t, line, true)),
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            let sc = match cmd {
                b"set" => StoreCmd::Set,
                b"add" => StoreCmd::Add,
                b"replace" => StoreCmd::Replace,
                b"append" => StoreCmd::Append,
                b"prepend" => StoreCmd::Prepend,
                _ => StoreCmd::Cas,
            };
            storage(&t, n, sc, after, cfg)
        }
        b"incr" | b"decr" | b"touch" | b"delete" => {
            if short(if cmd == b"delete" { 2 } else { 3 }) {
                return Done(Err(Error::BadFormat { noreply: false }));
            }
            let noreply = t.noreply();
            let key = t.get(1);
            if key.len() > KEY_MAX_LEN {
                return Done(Err(Error::BadFormat { noreply }));
            }
            Done(match cmd {
                b"incr" | b"decr" => arith(&t, cmd == b"incr"),
                b"touch" => touch(&t),
                // 1.6.45 dropped the old hold-time check: what follows the key is
                // ignored (`delete k 5` deletes).
                _ => Ok(Request::Delete { key, noreply }),
            })
        }
        b"stats" => Done(Ok(Request::Stats {
            sub: (n > 1).then(|| stats_sub(t.get(1))),
            arg: (n > 2).then(|| t.get(2)),
        })),
        b"version" => Done(Ok(Request::Version)),
        b"quit" => Done(Ok(Request::Quit)),
        // `process_watch_command`: every token after the command is an event type.
        b"watch" => Done(Ok(Request::Admin(Admin::Watch {
            events: watch::parse_events(t.as_slice().get(1..).unwrap_or_default()),
            noreply: false,
        }))),
        // The meta commands: two bytes, `m` and one of these.
        [b'm', b'g' | b's' | b'd' | b'n' | b'a' | b'e'] => match meta::parse(line, after, cfg) {
            meta::Parsed::Request(m, data) => Line::Data(Ok(Request::Meta(m)), data),
            meta::Parsed::UnknownCommand => Done(Err(Error::UnknownCommand)),
            meta::Parsed::NeedData => Line::NeedData,
        },
        _ => Done(other(&t, n)),
    }
}

/// A line `process_request` does not know: memcached 1.6.45 looks its first token
/// up (leading spaces skipped, so ` flush_all` runs) among the rarer commands, whose
/// every reply `noreply` silences; a line ending in an `HTTP/` token closes; the rest
/// answer `ERROR`, which `noreply` silences too.
fn other<'a>(t: &Tokens<'a>, n: usize) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    let error = if noreply {
        Error::Rejected { noreply }
    } else {
        Error::UnknownCommand
    };
    let quiet = |r: Result<Request<'a>, Error>| match r {
        Err(Error::UnknownCommand) => Err(error),
        r => r,
    };
    match t.get(0) {
        b"flush_all" => flush_all(t, n),
        b"verbosity" => match token::tok_u64(t.get(1), token::TOK_U32_MAX_LEN)
            .ok()
            .and_then(|v| u32::try_from(v).ok())
        {
            Some(level) => Ok(Request::Verbosity { level, noreply }),
            None => Err(Error::BadFormat { noreply }),
        },
        b"cache_memlimit" => match token::tok_u64(t.get(1), token::TOK_U32_MAX_LEN)
            .ok()
            .and_then(|v| u32::try_from(v).ok())
        {
            Some(megabytes) => Ok(Request::CacheMemlimit { megabytes, noreply }),
            None => Err(Error::Rejected { noreply }),
        },
        b"shutdown" => Ok(Request::Shutdown {
            mode: shutdown_mode(t, n),
            noreply,
        }),
        b"refresh_certs" => Ok(Request::RefreshCerts { noreply }),
        // No form of it ends in `noreply` and does anything: the argument `noreply`
        // stands in is refused (or names no class), silently.
        b"lru_crawler" if noreply => Err(error),
        b"lru_crawler" => quiet(lru_crawler(t, n)),
        b"slabs" => quiet(slabs(t, n)),
        b"lru" => quiet(lru(t, n)),
        _ if n > 1 && t.get(n - 1).starts_with(b"HTTP/") => Err(Error::Http),
        _ => Err(error),
    }
}

/// `strncmp(token, name, len)` as memcached 1.6.45 compares subcommands: the token
/// is `name` or a prefix of it (`stats s` is `stats settings`).
fn abbrev(token: &[u8], name: &[u8]) -> bool {
    !token.is_empty() && name.starts_with(token)
}

/// `process_stat`'s subcommand, with an abbreviation spelled out: `reset`,
/// `detail`, `settings`, `cachedump`, `conns` and `extstore` are matched as
/// prefixes, in that order; `items`, `slabs` and `sizes` only whole.
fn stats_sub(tok: &[u8]) -> &[u8] {
    const ABBREVIATED: [&[u8]; 6] = [
        b"reset",
        b"detail",
        b"settings",
        b"cachedump",
        b"conns",
        b"extstore",
    ];
    ABBREVIATED
        .into_iter()
        .find(|name| abbrev(tok, name))
        .unwrap_or(tok)
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

fn get<'a>(line: &'a [u8], cas: bool, touch: Option<i32>) -> Request<'a> {
    let skip = if touch.is_some() { 2 } else { 1 };
    Request::Get {
        keys: Keys::new(after_tokens(line, skip)),
        cas,
        touch,
    }
}

/// `gat`/`gats`: the exptime as mcmc's strict `mcmc_tokto32` reads it. `noreply`
/// means nothing to them.
fn gat<'a>(t: &Tokens<'a>, line: &'a [u8], cas: bool) -> Result<Request<'a>, Error> {
    match token::tok_i32(t.get(1)) {
        Ok(exptime) => Ok(get(line, cas, Some(exptime))),
        Err(NotANumber) => Err(Error::InvalidExptime { noreply: false }),
    }
}

/// mcmc's strict `mcmc_toktou64`, as 1.6.45 reads a cas unique and a delta.
fn tok_u64(tok: &[u8]) -> Result<u64, NotANumber> {
    token::tok_u64(tok, token::TOK_U64_MAX_LEN)
}

/// mcmc's strict `mcmc_toktou32`.
fn tok_u32(tok: &[u8]) -> Result<u32, NotANumber> {
    token::tok_u64(tok, token::TOK_U32_MAX_LEN)
        .and_then(|v| u32::try_from(v).map_err(|_| NotANumber))
}

/// `process_update_command` followed by `complete_nread_ascii`, as memcached 1.6.45
/// orders the checks: the token count and the length (mcmc's strict `tokto32`) come
/// first and refuse the line alone; once the length is known, every later refusal
/// (key, flags, exptime, cas unique, size) swallows the data block.
fn storage<'a>(t: &Tokens<'a>, n: usize, cmd: StoreCmd, after: &'a [u8], cfg: &Config) -> Line<'a> {
    // Refused before memcached looks for `noreply`: always written.
    let bad = Line::Done(Err(Error::BadFormat { noreply: false }));
    if n < 5 {
        return bad;
    }
    // memcached: `vlen < 0 || vlen > (INT_MAX - 2)`.
    let Some(vlen) = token::tok_i32(t.get(4))
        .ok()
        .and_then(|v| usize::try_from(v).ok())
        .filter(|&v| v <= i32::MAX as usize - 2)
    else {
        return bad;
    };
    let total = vlen + 2;
    let noreply = t.noreply();
    let refused = Line::Done(Err(Error::BadStoreLine {
        noreply,
        swallow: total,
    }));
    let key = t.get(1);
    if key.len() > KEY_MAX_LEN {
        return refused;
    }
    let (Ok(flags), Ok(exptime)) = (safe_strtoul(t.get(2)), safe_strtol(t.get(3))) else {
        return refused;
    };
    let mut cas_unique = 0;
    if cmd == StoreCmd::Cas {
        match tok_u64(t.get(5)) {
            Ok(c) if n > 5 => cas_unique = c,
            _ => return refused,
        }
    }
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

/// `incr`/`decr` once the count and key passed: the delta, strictly.
fn arith<'a>(t: &Tokens<'a>, incr: bool) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    match tok_u64(t.get(2)) {
        Ok(delta) => Ok(Request::Arith {
            key: t.get(1),
            delta,
            incr,
            noreply,
        }),
        Err(NotANumber) => Err(Error::InvalidDelta { noreply }),
    }
}

/// `touch` once the count and key passed: the exptime, strictly.
fn touch<'a>(t: &Tokens<'a>) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    match token::tok_i32(t.get(2)) {
        Ok(exptime) => Ok(Request::Touch {
            key: t.get(1),
            exptime,
            noreply,
        }),
        Err(NotANumber) => Err(Error::InvalidExptime { noreply }),
    }
}

/// `process_flush_all_command`: a delay is read (strictly) unless the line is
/// `flush_all` or `flush_all noreply`; later tokens are ignored. A bad delay is
/// answered by the server, after `-F`'s check and the count, as memcached orders them.
fn flush_all<'a>(t: &Tokens<'a>, n: usize) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    let delay = if n == if noreply { 2 } else { 1 } {
        Some(0)
    } else {
        token::tok_i32(t.get(1)).ok()
    };
    Ok(Request::FlushAll { delay, noreply })
}

/// `process_lru_crawler_command`: subcommands by prefix, each with its exact token
/// count; numbers read with mcmc's strict u32 converter (1.6.18: strtoul).
fn lru_crawler<'a>(t: &Tokens<'a>, n: usize) -> Result<Request<'a>, Error> {
    let number = |tok: &[u8]| tok_u32(tok).map_err(|_| Error::BadFormat { noreply: false });
    let crawl = |kind| Admin::Crawl {
        kind,
        classes: Classes::parse(t.get(2)),
    };
    let sub = t.get(1);
    let admin = if n == 3 && abbrev(sub, b"crawl") {
        crawl(CrawlKind::Crawl)
    } else if n == 3 && abbrev(sub, b"metadump") {
        crawl(CrawlKind::Metadump)
    } else if n == 3 && abbrev(sub, b"mgdump") {
        crawl(CrawlKind::Mgdump)
    } else if n == 3 && abbrev(sub, b"tocrawl") {
        Admin::CrawlerTocrawl(number(t.get(2))?)
    } else if n == 3 && abbrev(sub, b"sleep") {
        Admin::CrawlerSleep(number(t.get(2))?)
    } else if n == 2 && abbrev(sub, b"enable") {
        Admin::CrawlerEnable(true)
    } else if n == 2 && abbrev(sub, b"disable") {
        Admin::CrawlerEnable(false)
    } else {
        return Err(Error::UnknownCommand);
    };
    Ok(Request::Admin(admin))
}

/// `process_slabs_command` and `process_slabs_automove_command`: subcommands by
/// prefix; numbers strictly (mcmc), ratios with `safe_strtod`.
fn slabs<'a>(t: &Tokens<'a>, n: usize) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    let admin = if n == 4 && abbrev(t.get(1), b"reassign") {
        match (token::tok_i32(t.get(2)), token::tok_i32(t.get(3))) {
            (Ok(src), Ok(dst)) => Admin::SlabsReassign { src, dst },
            _ => return Err(Error::BadFormat { noreply }),
        }
    } else if n >= 3 && abbrev(t.get(1), b"automove") {
        let arg = t.get(2);
        let ratio = || match safe_strtod(t.get(3)) {
            Ok(r) if n >= 4 && t.get(3).len() < 32 => Ok(Float(r)),
            _ => Err(Error::Rejected { noreply }),
        };
        if abbrev(arg, b"ratio") {
            let ratio = ratio()?;
            Admin::SlabsAutomoveRatio { ratio, noreply }
        } else if abbrev(arg, b"freeratio") {
            let ratio = ratio()?;
            Admin::SlabsAutomoveFreeratio { ratio, noreply }
        } else if abbrev(arg, b"window") {
            match tok_u32(t.get(3)) {
                Ok(window) if n >= 4 => Admin::SlabsAutomoveWindow { window, noreply },
                _ => return Err(Error::BadFormat { noreply }),
            }
        } else {
            match tok_u32(arg) {
                Ok(level) => Admin::SlabsAutomove { level, noreply },
                Err(NotANumber) => return Err(Error::BadFormat { noreply }),
            }
        }
    } else {
        return Err(Error::UnknownCommand);
    };
    Ok(Request::Admin(admin))
}

/// `process_lru_command`: subcommands by prefix, each with a least token count;
/// every reply, errors included, honours `noreply`.
fn lru<'a>(t: &Tokens<'a>, n: usize) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    let rejected = Error::Rejected { noreply };
    let float = |tok: &[u8]| match safe_strtod(tok) {
        Ok(f) if tok.len() < 32 => Ok(Float(f)),
        _ => Err(rejected),
    };
    let sub = t.get(1);
    let admin = if n >= 6 && abbrev(sub, b"tune") {
        match (tok_u32(t.get(2)), tok_u32(t.get(3))) {
            (Ok(hot_pct), Ok(warm_pct)) => Admin::LruTune {
                hot_pct,
                warm_pct,
                hot_factor: float(t.get(4))?,
                warm_factor: float(t.get(5))?,
                noreply,
            },
            _ => return Err(rejected),
        }
    } else if n >= 3 && abbrev(sub, b"mode") {
        if abbrev(t.get(2), b"flat") {
            Admin::LruMode {
                segmented: false,
                noreply,
            }
        } else if abbrev(t.get(2), b"segmented") {
            Admin::LruMode {
                segmented: true,
                noreply,
            }
        } else {
            return Err(rejected);
        }
    } else if n >= 3 && abbrev(sub, b"temp_ttl") {
        match token::tok_i32(t.get(2)) {
            Ok(ttl) => Admin::LruTempTtl { ttl, noreply },
            Err(NotANumber) => return Err(rejected),
        }
    } else {
        return Err(rejected);
    };
    Ok(Request::Admin(admin))
}

/// `process_shutdown_command`'s mode: none, or `graceful` (or a prefix of it).
fn shutdown_mode(t: &Tokens<'_>, n: usize) -> ShutdownMode {
    match n {
        1 => ShutdownMode::Now,
        2 if abbrev(t.get(1), b"graceful") => ShutdownMode::Graceful,
        _ => ShutdownMode::Invalid,
    }
}

#[cfg(test)]
mod tests;
