//! Classic text-protocol requests against the store (`proto_text.c`'s
//! `process_*_command`), with memcached's replies. Meta requests, which arrive
//! through the same parser, go to [`super::meta`]; admin requests (`lru_crawler`,
//! `slabs`, `lru`) to [`super::admin`].

use memcrab_proto::text::watch::DeleteCmd;
use memcrab_proto::text::{reply, Request, ShutdownMode, StoreCmd, KEY_MAX_LEN};
use memcrab_store::{
    DeleteOpts, DeleteResult, Delta, DeltaOpts, GetOpts, Item, Mode, StoreOpts, StoreResult,
};

use super::{
    before_delete, count_fetch, count_store, count_too_large, note_delete, Ctx, FetchWatch, Flow,
    Mutation, Resume,
};
use crate::admin::prefix::Op;
use crate::io::out::Out;
use crate::server::VERSION;

/// How many keys ahead a multiget prefetches index buckets, and items.
const PREFETCH_INDEX_AHEAD: usize = 8;
const PREFETCH_ITEM_AHEAD: usize = 4;

/// `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n`, the data lent by the store
/// when the output lends values this long (see `out.rs`), else copied.
#[inline]
fn value(cx: &Ctx<'_>, out: &mut Out, key: &[u8], it: &Item<'_>, cas: bool) {
    let cas = cas.then_some(it.cas);
    if out.lends(it.value.len()) {
        reply::value_head(out, key, it.flags, it.value.len(), cas);
        if out.value(it) {
            cx.counters.values_lent.incr();
        }
        out.extend_from_slice(b"\r\n");
    } else {
        reply::value(out, key, it.flags, it.value, cas);
    }
}

/// Executes one request, appending its reply to `out`. `resume` carries a suspended
/// multi-get's or key dump's progress between calls; `out_limit` is where they pause.
pub fn execute(
    req: Request<'_>,
    cx: &Ctx<'_>,
    out: &mut Out,
    resume: &mut Resume,
    out_limit: usize,
) -> Flow {
    let c = cx.counters;
    let put = |out: &mut Vec<u8>, noreply: bool, r: &[u8]| {
        if !noreply {
            out.extend_from_slice(r);
        }
    };
    match req {
        Request::Get { keys, cas, touch } => {
            let opts = GetOpts {
                touch: touch.map(|t| cx.engine.clock().realtime(i64::from(t))),
                ..GetOpts::default()
            };
            let start = out.len();
            let mut fw = FetchWatch::new(cx);
            // Multigets: start loading later keys' index buckets, then their items,
            // so the cache misses of many keys overlap instead of adding up.
            // The key being looked up next gains nothing: only later ones are hinted.
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
                // Pause between keys (never after the last, so END always follows).
                if i > resume.keys && out.len() > out_limit {
                    resume.keys = i;
                    return Flow::Suspend;
                }
                if key.len() > KEY_MAX_LEN {
                    // memcached drops what this get produced so far and reports the error.
                    out.truncate(start);
                    out.extend_from_slice(reply::BAD_FORMAT);
                    resume.keys = 0;
                    return Flow::Next;
                }
                let found = cx.engine.get(key, &opts, &mut |it| {
                    fw.hit(&it);
                    value(cx, out, key, &it, cas);
                    false
                });
                count_fetch(cx, key, touch.is_some(), found, &fw);
                let hit = found.is_hit();
                cx.server.prefixes.record(key, Op::Get { hit });
            }
            resume.keys = 0;
            out.extend_from_slice(reply::END);
            Flow::Next
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
            let mode = match cmd {
                StoreCmd::Set => Mode::Set,
                StoreCmd::Add => Mode::Add,
                StoreCmd::Replace => Mode::Replace,
                StoreCmd::Append => Mode::Append,
                StoreCmd::Prepend => Mode::Prepend,
                StoreCmd::Cas => Mode::Cas(cas_unique),
            };
            cx.server.prefixes.record(key, Op::Set);
            let exptime = cx.engine.clock().realtime(i64::from(exptime));
            let r = cx
                .engine
                .store(mode, key, flags, exptime, data, &StoreOpts::default());
            count_store(cx, cmd == StoreCmd::Cas, r, || Mutation {
                key,
                cmd,
                flags,
                exptime,
                value_len: data.len(),
            });
            let r = match r {
                StoreResult::Stored(_) => reply::STORED,
                StoreResult::NotStored => reply::NOT_STORED,
                StoreResult::Exists => reply::EXISTS,
                StoreResult::NotFound => reply::NOT_FOUND,
                StoreResult::OutOfMemory => reply::OUT_OF_MEMORY,
            };
            put(out, noreply, r);
            Flow::Next
        }
        Request::TooLarge {
            cmd,
            key,
            swallow,
            noreply,
        } => {
            count_too_large(cx, key, Some(cmd));
            cx.server.prefixes.record(key, Op::Set);
            if cmd == StoreCmd::Set {
                // memcached: a failed set must not leave the old value readable.
                cx.engine.delete(key, &DeleteOpts::default());
            }
            put(out, noreply, reply::TOO_LARGE);
            Flow::Swallow(swallow)
        }
        Request::Delete { key, noreply } => {
            cx.server.prefixes.record(key, Op::Delete);
            let before = before_delete(cx, key);
            let r = cx.engine.delete(key, &DeleteOpts::default());
            note_delete(cx, key, DeleteCmd::Delete, r, before);
            let r = if r == DeleteResult::Deleted {
                c.delete_hits.incr();
                reply::DELETED
            } else {
                c.delete_misses.incr();
                reply::NOT_FOUND
            };
            put(out, noreply, r);
            Flow::Next
        }
        Request::Arith {
            key,
            delta,
            incr,
            noreply,
        } => {
            match cx.engine.delta(key, incr, delta, &DeltaOpts::default()) {
                Delta::Value(v) => {
                    c.count_delta(incr, true);
                    if !noreply {
                        reply::number(out, v.value);
                    }
                }
                Delta::NotFound => {
                    c.count_delta(incr, false);
                    put(out, noreply, reply::NOT_FOUND);
                }
                // Exists needs a compare_cas, which classic incr/decr never pass.
                Delta::NonNumeric | Delta::Exists => put(out, noreply, reply::NON_NUMERIC),
                Delta::OutOfMemory => put(out, noreply, reply::DELTA_OUT_OF_MEMORY),
            }
            Flow::Next
        }
        Request::Touch {
            key,
            exptime,
            noreply,
        } => {
            // Engine::touch, with the visitor that records the item for `watch`.
            let opts = GetOpts {
                touch: Some(cx.engine.clock().realtime(i64::from(exptime))),
                ..GetOpts::default()
            };
            let mut fw = FetchWatch::new(cx);
            let found = cx.engine.get(key, &opts, &mut |it| {
                fw.hit(&it);
                false
            });
            count_fetch(cx, key, true, found, &fw);
            let r = if found.is_hit() {
                reply::TOUCHED
            } else {
                reply::NOT_FOUND
            };
            put(out, noreply, r);
            Flow::Next
        }
        Request::Stats { sub, arg } => {
            crate::admin::stats::render(cx.server, sub, arg, out);
            Flow::Next
        }
        Request::FlushAll { delay, noreply } => {
            c.cmd_flush.incr();
            if !cx.server.settings.flush_enabled {
                put(out, noreply, b"CLIENT_ERROR flush_all not allowed\r\n");
                return Flow::Next;
            }
            let at = (delay > 0).then(|| cx.engine.clock().realtime(i64::from(delay)));
            cx.engine.flush_all(at);
            put(out, noreply, reply::OK);
            Flow::Next
        }
        Request::Version => {
            out.extend_from_slice(b"VERSION ");
            out.extend_from_slice(VERSION.as_bytes());
            out.extend_from_slice(b"\r\n");
            Flow::Next
        }
        Request::Verbosity { level, noreply } => {
            cx.server.verbosity.store(
                level.min(MAX_VERBOSITY_LEVEL),
                std::sync::atomic::Ordering::Relaxed,
            );
            put(out, noreply, reply::OK);
            Flow::Next
        }
        Request::Meta(m) => super::meta::execute(m, cx, out),
        Request::Admin(a) => super::admin::execute(a, cx, out, &mut resume.walk, out_limit),
        Request::Quit => Flow::Quit,
        Request::Shutdown { mode } => {
            if !cx.server.settings.shutdown_command {
                out.extend_from_slice(reply::SHUTDOWN_DISABLED);
                return Flow::Next;
            }
            if mode == ShutdownMode::Invalid {
                out.extend_from_slice(reply::SHUTDOWN_INVALID_MODE);
                return Flow::Next;
            }
            // Both stop accepting and flush what is in flight; a graceful one also
            // saves the cache for a warm restart (-e), as memcached's GRACE_STOP.
            // The replies to requests before it are sent, then the connection
            // closes (memcached answers them too).
            if mode == ShutdownMode::Graceful {
                cx.server.begin_graceful_shutdown();
            } else {
                cx.server.begin_shutdown();
            }
            Flow::Quit
        }
        Request::RefreshCerts { noreply } => {
            // memcached's process_refresh_certs_command: noreply silences OK only;
            // an error is always written.
            match crate::io::tls::reload_certs(cx.server.tls.as_deref()) {
                Ok(()) => put(out, noreply, reply::OK),
                Err(msg) => {
                    out.extend_from_slice(msg.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
            }
            Flow::Next
        }
        Request::CacheMemlimit { megabytes, noreply } => {
            let r = if megabytes < 8 {
                reply::MEMLIMIT_TOO_SMALL
            } else if megabytes > 1_000_000_000 {
                reply::MEMLIMIT_NOT_MEGABYTES
            } else {
                cx.engine.set_limit(u64::from(megabytes) * 1024 * 1024);
                reply::OK
            };
            put(out, noreply, r);
            Flow::Next
        }
    }
}

/// memcached's `MAX_VERBOSITY_LEVEL`.
const MAX_VERBOSITY_LEVEL: u32 = 2;
