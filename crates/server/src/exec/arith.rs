//! The arithmetic commands: text `incr`/`decr`, meta `ma`, binary INCREMENT and
//! DECREMENT and their quiet forms. [`arith`] makes the engine call and counts it
//! once, for every protocol (memcached's `do_add_delta` callers), and tells `watch
//! fetchers` of its lookup (and `watch mutations` of an item it creates); the
//! executors map their options onto [`DeltaOpts`] and encode the [`Delta`].

use memcrab_proto::text::watch::{self as line, StoreStatus};
use memcrab_proto::text::StoreCmd;
use memcrab_store::{Counter, Delta, DeltaOpts, Met};

use super::fetch::{look, report_looked, Looked};
use crate::server::Ctx;

/// incr (`incr`) or decr of `key` by `delta`, counted as memcached counts it:
/// `incr_hits`/`decr_hits` when it changed a live item (an item that `ma N` or a
/// binary initial value created is no hit), `incr_misses`/`decr_misses` when there
/// was none; a non-numeric value, a CAS that differed or no memory counts nothing.
/// A dead item the lookup met counts `get_expired`/`get_flushed` (`do_add_delta`'s
/// `do_item_get`), also when `ma N` or a binary initial value then created the key.
/// `binary`: a binary request, whose created item memcached stores with the
/// request's exptime (`ma N` stores it with none and sets the TTL afterwards).
#[inline]
pub fn arith(
    cx: &Ctx<'_>,
    key: &[u8],
    incr: bool,
    delta: u64,
    opts: &DeltaOpts,
    binary: bool,
) -> Delta {
    // The one Relaxed load while nobody watches.
    if cx.server.watch.wants(line::FETCHERS | line::MUTATIONS) {
        return arith_watched(cx, key, incr, delta, opts, binary);
    }
    arith_counted(cx, key, incr, delta, opts)
}

/// [`arith`] while somebody watches fetchers or mutations: the lookup (before the
/// write), the write, then the lines.
#[cold]
#[inline(never)]
fn arith_watched(
    cx: &Ctx<'_>,
    key: &[u8],
    incr: bool,
    delta: u64,
    opts: &DeltaOpts,
    binary: bool,
) -> Delta {
    let looked = look(cx, key);
    let r = arith_counted(cx, key, incr, delta, opts);
    let created_exptime = match opts.vivify {
        Some(v) if binary => v.exptime,
        _ => 0,
    };
    report(cx, key, &r, looked, created_exptime);
    r
}

/// [`arith`]'s engine call and counting.
#[inline(always)]
fn arith_counted(cx: &Ctx<'_>, key: &[u8], incr: bool, delta: u64, opts: &DeltaOpts) -> Delta {
    let Met { result: r, dead } = cx.engine.delta_met(key, incr, delta, opts);
    cx.counters.count_dead(dead);
    match &r {
        Delta::Value(v) if !v.created => cx.counters.count_delta(incr, true),
        Delta::NotFound => cx.counters.count_delta(incr, false),
        Delta::Value(_) | Delta::NonNumeric | Delta::Exists | Delta::OutOfMemory => {}
    }
    r
}

/// `watch fetchers`' line of the lookup; for an item created by `ma N` or a binary
/// initial value, memcached's `do_store_item` of an `add` follows, which looks the
/// key up again (a miss) and logs an `item_store`.
#[cold]
#[inline(never)]
fn report(cx: &Ctx<'_>, key: &[u8], r: &Delta, looked: Option<Looked>, exptime: u32) {
    report_looked(cx, key, looked);
    let Delta::Value(Counter {
        value,
        created: true,
        ..
    }) = *r
    else {
        return;
    };
    report_looked(cx, key, looked.map(|_| Looked::missing()));
    if cx.server.watch.wants(line::MUTATIONS) {
        let value_len = itoa::Buffer::new().format(value).len();
        // memcached: `exptime - current_time`, unsigned, or 0 for no expiry.
        let ttl = match exptime {
            0 => 0,
            t => t.wrapping_sub(cx.engine.clock().now()),
        };
        let clsid = cx.classes().of(key.len(), 0, value_len);
        let fd = cx.fd.get();
        cx.server.watch.emit(line::MUTATIONS, &mut |out| {
            let (status, cmd) = (StoreStatus::Stored, Some(StoreCmd::Add));
            line::item_store(out, key, status, cmd, ttl, clsid, fd, value_len)
        });
    }
}
