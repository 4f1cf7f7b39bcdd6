//! Classic text-protocol requests (`proto_text.c`'s `process_*_command`): each maps
//! its options onto a command family's call and encodes memcached's reply.
//! `lru_crawler`, `slabs` and `lru` go on to [`super::lru`]. Meta requests arrive
//! through the same parser, but the request step hands them to `exec/meta.rs`,
//! which stands beside this file.

use std::iter::once;

use memcrab_proto::text::watch::DeleteCmd;
use memcrab_proto::text::{reply, Keys, Request, StoreCmd, KEY_MAX_LEN};
use memcrab_store::{
    DeleteOpts, DeleteResult, Delta, DeltaOpts, GetOpts, Mode, StoreOpts, StoreResult,
};

use super::admin::{self, MemLimitRefused, Shutdown};
use super::arith::arith;
use super::delete::{self, Delete};
use super::fetch::{self, Counts, Fetcher, Visit};
use super::probe::{hot, mark, mark_read};
use super::store::{self, Store};
use super::{Flow, Resume};
use crate::admin::latency::{CAS, DECR, DELETE, GAT, GET, INCR, OTHER, SET, TEXT, TOUCH};
use crate::out::Out;
use crate::server::{Ctx, VERSION};

/// How many keys ahead a multiget prefetches index buckets, and items.
const PREFETCH_INDEX_AHEAD: usize = 8;
const PREFETCH_ITEM_AHEAD: usize = 4;

/// Appends `r` unless the request said `noreply`.
#[inline]
fn put(out: &mut Vec<u8>, noreply: bool, r: &[u8]) {
    if !noreply {
        out.extend_from_slice(r);
    }
}

/// Executes one request, appending its reply to `out`. `resume` carries a suspended
/// multi-get's or key dump's progress between calls; `out_limit` is where they pause.
/// Meta requests are `exec/meta.rs`'s, where the request step sends them. Each
/// request is [`mark`]ed with its latency series (`exec/probe.rs`).
///
/// Kept out of line: inlined into the request step's `run_text`, the multi-get
/// loop compiled to 0.8% more instructions per request on W3
/// (`scripts/bench-instructions`).
#[inline(never)]
pub fn execute(
    req: Request<'_>,
    cx: &Ctx<'_>,
    out: &mut Out,
    resume: &mut Resume,
    out_limit: usize,
) -> Flow {
    mark(cx, TEXT + OTHER);
    match req {
        Request::Get { keys, cas, touch } => {
            return get(keys, cas, touch, cx, out, resume, out_limit)
        }
        Request::Store {
            cmd,
            key,
            flags,
            exptime,
            data,
            cas_unique,
            noreply,
        } => {
            mark(cx, TEXT + store_series(cmd));
            hot(cx, || once(key), data.len(), out);
            let r = set(cmd, key, flags, exptime, data, cas_unique, cx);
            put(out, noreply, r);
        }
        Request::TooLarge {
            cmd,
            key,
            swallow,
            noreply,
        } => {
            mark(cx, TEXT + store_series(cmd));
            hot(cx, || once(key), 0, out);
            // memcached: a failed set must not leave the old value readable.
            store::too_large(cx, key, Some(cmd), true, cmd == StoreCmd::Set);
            put(out, noreply, reply::TOO_LARGE);
            return Flow::Swallow(swallow);
        }
        Request::Delete { key, noreply } => {
            mark(cx, TEXT + DELETE);
            hot(cx, || once(key), 0, out);
            put(out, noreply, delete(key, cx));
        }
        Request::Arith {
            key,
            delta,
            incr,
            noreply,
        } => {
            mark(cx, TEXT + if incr { INCR } else { DECR });
            hot(cx, || once(key), 0, out);
            match arith(cx, key, incr, delta, &DeltaOpts::default(), false) {
                Delta::Value(v) if !noreply => reply::number(out, v.value),
                Delta::Value(_) => {}
                Delta::NotFound => put(out, noreply, reply::NOT_FOUND),
                // Exists needs a compare_cas, which classic incr/decr never pass.
                Delta::NonNumeric | Delta::Exists => put(out, noreply, reply::NON_NUMERIC),
                Delta::OutOfMemory => put(out, noreply, reply::DELTA_OUT_OF_MEMORY),
            }
        }
        Request::Touch {
            key,
            exptime,
            noreply,
        } => {
            mark(cx, TEXT + TOUCH);
            hot(cx, || once(key), 0, out);
            put(out, noreply, touch(key, exptime, cx));
        }
        Request::Stats { sub, arg } => {
            crate::admin::stats::render(cx.server, sub, arg, cx.fd.get(), out)
        }
        Request::FlushAll { delay, noreply } => {
            // memcached counts the command and checks -F before it reads the delay.
            let r: &[u8] = match delay {
                None if cx.server.settings.flush_enabled => {
                    cx.counters.cmd_flush.incr();
                    reply::BAD_EXPTIME
                }
                _ if admin::flush_all(cx, i64::from(delay.unwrap_or(0)), true) => reply::OK,
                _ => b"CLIENT_ERROR flush_all not allowed\r\n",
            };
            put(out, noreply, r);
        }
        Request::Version => {
            out.extend_from_slice(b"VERSION ");
            out.extend_from_slice(VERSION.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Request::Verbosity { level, noreply } => {
            admin::verbosity(cx, level);
            put(out, noreply, reply::OK);
        }
        // The request step hands meta requests to exec/meta.rs; none come here.
        Request::Meta(_) => {}
        Request::Admin(a) => return super::lru::execute(a, cx, out, resume, out_limit),
        Request::Quit => return Flow::Quit,
        Request::Shutdown { mode, noreply } => match admin::shutdown(cx, mode) {
            Shutdown::Started => return Flow::Quit,
            Shutdown::Disabled => put(out, noreply, reply::SHUTDOWN_DISABLED),
            Shutdown::InvalidMode => put(out, noreply, reply::SHUTDOWN_INVALID_MODE),
        },
        // memcached's process_refresh_certs_command: noreply silences OK only; an
        // error is always written.
        Request::RefreshCerts { noreply } => match admin::refresh_certs(cx) {
            Ok(()) => put(out, noreply, reply::OK),
            Err(msg) => {
                out.extend_from_slice(msg.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        },
        Request::CacheMemlimit { megabytes, noreply } => {
            let r = match admin::cache_memlimit(cx, megabytes) {
                Ok(()) => reply::OK,
                Err(MemLimitRefused::TooSmall) => reply::MEMLIMIT_TOO_SMALL,
                Err(MemLimitRefused::NotMegabytes) => reply::MEMLIMIT_NOT_MEGABYTES,
            };
            put(out, noreply, r);
        }
    }
    Flow::Next
}

/// A store's latency series within its protocol: `cas`'s own, the rest `set`'s.
#[inline]
fn store_series(cmd: StoreCmd) -> usize {
    if cmd == StoreCmd::Cas {
        CAS
    } else {
        SET
    }
}

/// `set`/`add`/`replace`/`append`/`prepend`/`cas`: the reply line.
fn set(
    cmd: StoreCmd,
    key: &[u8],
    flags: u32,
    exptime: i32,
    data: &[u8],
    cas_unique: u64,
    cx: &Ctx<'_>,
) -> &'static [u8] {
    let mode = match cmd {
        StoreCmd::Set => Mode::Set,
        StoreCmd::Add => Mode::Add,
        StoreCmd::Replace => Mode::Replace,
        StoreCmd::Append => Mode::Append,
        StoreCmd::Prepend => Mode::Prepend,
        StoreCmd::Cas => Mode::Cas(cas_unique),
    };
    let s = Store {
        mode,
        key,
        flags,
        exptime: cx.engine.clock().realtime(i64::from(exptime)),
        value: data,
        opts: StoreOpts::default(),
        cmd,
        prefix: true,
        oom_drops_old: false,
    };
    match store::store(cx, &s) {
        StoreResult::Stored(_) => reply::STORED,
        StoreResult::NotStored => reply::NOT_STORED,
        StoreResult::Exists => reply::EXISTS,
        StoreResult::NotFound => reply::NOT_FOUND,
        StoreResult::OutOfMemory => reply::OUT_OF_MEMORY,
    }
}

/// `delete`: the reply line.
fn delete(key: &[u8], cx: &Ctx<'_>) -> &'static [u8] {
    let d = Delete {
        key,
        opts: DeleteOpts::default(),
        watched_as: Some(DeleteCmd::Delete),
        prefix: true,
        cas_mismatch_misses: true,
    };
    match delete::delete(cx, &d) {
        DeleteResult::Deleted => reply::DELETED,
        _ => reply::NOT_FOUND,
    }
}

/// `touch`: the reply line.
fn touch(key: &[u8], exptime: i32, cx: &Ctx<'_>) -> &'static [u8] {
    let opts = GetOpts {
        touch: Some(cx.engine.clock().realtime(i64::from(exptime))),
        ..GetOpts::default()
    };
    let found = Fetcher::new(cx, Counts::Touch, false).get(key, &opts, |_| Visit::Shown);
    if found.is_hit() {
        reply::TOUCHED
    } else {
        reply::NOT_FOUND
    }
}

/// `get`/`gets`/`gat`/`gats`: a `VALUE` block per hit, then `END`. A multi-get
/// pauses between keys once the output passes `out_limit` ([`Flow::Suspend`]; never
/// after the last key, so `END` always follows), and carries on from `resume.keys`.
/// Its latency series is a hit's when a key looked up in this call was found.
fn get(
    keys: Keys<'_>,
    cas: bool,
    touch: Option<i32>,
    cx: &Ctx<'_>,
    out: &mut Out,
    resume: &mut Resume,
    out_limit: usize,
) -> Flow {
    let opts = GetOpts {
        touch: touch.map(|t| cx.engine.clock().realtime(i64::from(t))),
        ..GetOpts::default()
    };
    let counts = if touch.is_some() {
        Counts::Touch
    } else {
        Counts::Get
    };
    let series = TEXT + if touch.is_some() { GAT } else { GET };
    hot(cx, || keys.clone(), 0, out);
    let fetcher = Fetcher::new(cx, counts, true);
    let mut hit = false;
    let start = out.len();
    let all = keys.clone();
    // Start loading later keys' index buckets, then their items, so the cache
    // misses of many keys overlap instead of adding up. The key being looked up
    // next gains nothing: only later ones are hinted.
    let mut ahead_index = keys.clone().skip(resume.keys + 1);
    let mut ahead_item = keys.clone().skip(resume.keys + 1);
    for k in ahead_index.by_ref().take(PREFETCH_INDEX_AHEAD) {
        cx.engine.prefetch_index(k);
    }
    for k in ahead_item.by_ref().take(PREFETCH_ITEM_AHEAD) {
        cx.engine.prefetch_item(k);
    }
    for (i, key) in keys.enumerate().skip(resume.keys) {
        if let Some(k) = ahead_index.next() {
            cx.engine.prefetch_index(k);
        }
        if let Some(k) = ahead_item.next() {
            cx.engine.prefetch_item(k);
        }
        if i > resume.keys && out.len() > out_limit {
            resume.keys = i;
            return Flow::Suspend;
        }
        if key.len() > KEY_MAX_LEN {
            // memcached drops what this get produced so far and reports the error.
            out.truncate(start);
            key_too_long(all.clone(), touch.is_none(), out);
            resume.keys = 0;
            mark_read(cx, series, hit);
            return Flow::Next;
        }
        let found = fetcher.get(key, &opts, |it| {
            // `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n`, the data lent by
            // the store when the output lends values this long, else copied.
            let cas = cas.then_some(it.cas);
            if out.lends(it.value.len()) {
                reply::value_head(out, key, it.flags, it.value.len(), cas);
                fetch::value(cx, out, it);
                out.extend_from_slice(b"\r\n");
            } else {
                reply::value(out, key, it.flags, it.value, cas);
            }
            Visit::Shown
        });
        hit |= found.is_hit();
    }
    resume.keys = 0;
    out.extend_from_slice(reply::END);
    mark_read(cx, series, hit);
    Flow::Next
}

/// memcached 1.6.45's reply to a get that meets a key over 250 bytes: its
/// `process_get_command_err` copies the error line it wrote, `\r\n` included, and
/// writes that as a new line, so the error ends in `\r\n\r\n`. Under `noreply` (a
/// get's last token, within mcmc's 23; gat takes none) the first write was skipped
/// and only the empty line goes out.
#[cold]
fn key_too_long(keys: Keys<'_>, takes_noreply: bool, out: &mut Out) {
    // The tokens mcmc keeps: the command and 22 keys.
    const KEYS_TOKENIZED: usize = 22;
    let last = keys.take(KEYS_TOKENIZED).last();
    if !(takes_noreply && last == Some(&b"noreply"[..])) {
        out.extend_from_slice(reply::BAD_FORMAT);
    }
    out.extend_from_slice(b"\r\n");
}
