//! memcached's classic text protocol, server side: request parsing and reply encoding;
//! the meta commands ([`meta`]) are text commands too and are parsed from here.
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
//!
//! The files under `text/` and what they import are drawn in the crate docs
//! ([`crate`]): `mod.rs` (this file) holds the parser and the classic commands, and
//! imports the tokenizer, `Config`, the request types and [`meta`]; none of them
//! imports it back.

use crate::num::{safe_strtod, safe_strtol, safe_strtoul, safe_strtoull, NotANumber};
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

/// Parses one request from the front of `buf`. Returns `None` when more bytes are
/// needed, otherwise the request or error and the number of bytes consumed.
pub fn parse<'a>(buf: &'a [u8], cfg: &Config) -> Option<Parsed<'a>> {
    let (line, consumed) = match token::find_line(buf, cfg.max_get_line) {
        Found::Line { line, consumed } => (line, consumed),
        Found::NeedMore => return None,
        Found::TooLong => return Some((Err(Error::LineTooLong), buf.len())),
    };
    let toks = Tokens::new(line);
    match dispatch(&toks, line, &buf[consumed..], cfg) {
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
                Ok(level) => Ok(Request::Verbosity { level, noreply }),
                Err(NotANumber) => Err(Error::BadFormat { noreply }),
            }
        }),
        b"cache_memlimit" => want(nt == 3 || nt == 4, &|| {
            let noreply = t.noreply();
            match safe_strtoul(t.get(1)) {
                Ok(megabytes) => Ok(Request::CacheMemlimit { megabytes, noreply }),
                Err(NotANumber) => Err(Error::Rejected { noreply }),
            }
        }),
        b"refresh_certs" => Done(Ok(Request::RefreshCerts {
            noreply: t.noreply(),
        })),
        b"lru_crawler" => Done(lru_crawler(t)),
        b"slabs" => Done(slabs(t)),
        b"lru" => want(nt >= 3, &|| lru(t)),
        // `process_watch_command`: every token after the command is an event type.
        b"watch" => Done(Ok(Request::Admin(Admin::Watch {
            events: watch::parse_events(t.as_slice().get(1..).unwrap_or_default()),
            noreply: t.noreply(),
        }))),
        // Meta commands are all two bytes long and start with `m`.
        _ if cmd[0] == b'm' && cmd.len() == 2 => match meta::parse(line, after, cfg) {
            meta::Parsed::Request(m, data) => Line::Data(Ok(Request::Meta(m)), data),
            meta::Parsed::UnknownCommand => Done(Err(Error::UnknownCommand)),
            meta::Parsed::NeedData => Line::NeedData,
        },
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
        Ok(exptime) => Ok(get(t, line, cas, Some(exptime))),
        Err(NotANumber) => Err(Error::InvalidExptime { noreply: false }),
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
    let (Ok(flags), Ok(exptime), Ok(vlen)) = (
        safe_strtoul(t.get(2)),
        safe_strtol(t.get(3)),
        safe_strtol(t.get(4)),
    ) else {
        return bad;
    };
    let mut cas_unique = 0;
    if cmd == StoreCmd::Cas {
        match safe_strtoull(t.get(5)) {
            Ok(c) => cas_unique = c,
            Err(NotANumber) => return bad,
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
        Ok(delta) => Ok(Request::Arith {
            key,
            delta,
            incr,
            noreply,
        }),
        Err(NotANumber) => Err(Error::InvalidDelta { noreply }),
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
        Ok(exptime) => Ok(Request::Touch {
            key,
            exptime,
            noreply,
        }),
        Err(NotANumber) => Err(Error::InvalidExptime { noreply }),
    }
}

fn flush_all<'a>(t: &Tokens<'a>) -> Result<Request<'a>, Error> {
    let noreply = t.noreply();
    let mut delay = 0;
    if t.ntokens() != if noreply { 3 } else { 2 } {
        match safe_strtol(t.get(1)) {
            Ok(d) => delay = d,
            Err(NotANumber) => return Err(Error::InvalidExptime { noreply }),
        }
    }
    Ok(Request::FlushAll { delay, noreply })
}

/// `process_lru_crawler_command`. No `noreply` here: memcached never looks for it.
fn lru_crawler<'a>(t: &Tokens<'a>) -> Result<Request<'a>, Error> {
    // 1.6.45 reads these with mcmc's strict u32 converter (1.6.18: strtoul).
    let number = |tok: &[u8]| {
        token::tok_u64(tok, token::TOK_U32_MAX_LEN)
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or(Error::BadFormat { noreply: false })
    };
    let crawl = |kind| Admin::Crawl {
        kind,
        classes: Classes::parse(t.get(2)),
    };
    let admin = match (t.ntokens(), t.get(1)) {
        (4, b"crawl") => crawl(CrawlKind::Crawl),
        (4, b"metadump") => crawl(CrawlKind::Metadump),
        (4, b"mgdump") => crawl(CrawlKind::Mgdump),
        (4, b"tocrawl") => Admin::CrawlerTocrawl(number(t.get(2))?),
        (4, b"sleep") => Admin::CrawlerSleep(number(t.get(2))?),
        (3, b"enable") => Admin::CrawlerEnable(true),
        (3, b"disable") => Admin::CrawlerEnable(false),
        _ => return Err(Error::UnknownCommand),
    };
    Ok(Request::Admin(admin))
}

/// `process_slabs_command` and `process_slabs_automove_command`. Only `automove`
/// honours `noreply`.
fn slabs<'a>(t: &Tokens<'a>) -> Result<Request<'a>, Error> {
    let nt = t.ntokens();
    let admin = if nt == 5 && t.get(1) == b"reassign" {
        match (safe_strtol(t.get(2)), safe_strtol(t.get(3))) {
            (Ok(src), Ok(dst)) => Admin::SlabsReassign { src, dst },
            _ => return Err(Error::BadFormat { noreply: false }),
        }
    } else if nt >= 4 && t.get(1) == b"automove" {
        let noreply = t.noreply();
        if t.get(2) == b"ratio" {
            match safe_strtod(t.get(3)) {
                Ok(r) if nt >= 5 => Admin::SlabsAutomoveRatio {
                    ratio: Float(r),
                    noreply,
                },
                _ => return Err(Error::Rejected { noreply }),
            }
        } else if t.get(2) == b"window" {
            match safe_strtoul(t.get(3)) {
                Ok(window) if nt >= 5 => Admin::SlabsAutomoveWindow { window, noreply },
                _ => return Err(Error::BadFormat { noreply }),
            }
        } else {
            match safe_strtoul(t.get(2)) {
                Ok(level) => Admin::SlabsAutomove { level, noreply },
                Err(NotANumber) => return Err(Error::BadFormat { noreply }),
            }
        }
    } else {
        return Err(Error::UnknownCommand);
    };
    Ok(Request::Admin(admin))
}

/// `process_lru_command`: every reply, errors included, honours `noreply`.
fn lru<'a>(t: &Tokens<'a>) -> Result<Request<'a>, Error> {
    let nt = t.ntokens();
    let noreply = t.noreply();
    let rejected = Error::Rejected { noreply };
    let admin = match t.get(1) {
        b"tune" if nt >= 7 => match (
            safe_strtoul(t.get(2)),
            safe_strtoul(t.get(3)),
            safe_strtod(t.get(4)),
            safe_strtod(t.get(5)),
        ) {
            (Ok(hot_pct), Ok(warm_pct), Ok(hot), Ok(warm)) => Admin::LruTune {
                hot_pct,
                warm_pct,
                hot_factor: Float(hot),
                warm_factor: Float(warm),
                noreply,
            },
            _ => return Err(rejected),
        },
        b"mode" if nt >= 4 => match t.get(2) {
            b"flat" => Admin::LruMode {
                segmented: false,
                noreply,
            },
            b"segmented" => Admin::LruMode {
                segmented: true,
                noreply,
            },
            _ => return Err(rejected),
        },
        b"temp_ttl" if nt >= 4 => match safe_strtol(t.get(2)) {
            Ok(ttl) => Admin::LruTempTtl { ttl, noreply },
            Err(NotANumber) => return Err(rejected),
        },
        _ => return Err(rejected),
    };
    Ok(Request::Admin(admin))
}

fn shutdown_mode(t: &Tokens<'_>) -> ShutdownMode {
    match t.ntokens() {
        2 => ShutdownMode::Now,
        3 if t.get(1) == b"graceful" => ShutdownMode::Graceful,
        _ => ShutdownMode::Invalid,
    }
}

#[cfg(test)]
mod tests;
