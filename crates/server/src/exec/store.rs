//! The storage commands: text `set`/`add`/`replace`/`append`/`prepend`/`cas`, meta
//! `ms`, binary SET/ADD/REPLACE/APPEND/PREPEND and their quiet forms. [`store`] makes
//! the engine call and does all of its bookkeeping once, for every protocol, as
//! memcached's `process_update_command` and `do_store_item` do: the counters,
//! `watch fetchers` (the store's own lookup) and `mutations`, and `stats detail`'s
//! prefixes. So does [`too_large`] for a store refused before its value arrived.
//! The executors map their options onto a [`Store`] and encode the
//! [`StoreResult`].

use memcrab_proto::text::watch::{self as line, StoreStatus};
use memcrab_proto::text::StoreCmd;
use memcrab_store::{DeleteOpts, Met, Mode, RelTime, StoreOpts, StoreResult};

use super::fetch::{look, report_looked, Looked};
use crate::admin::prefix::Op;
use crate::server::Ctx;

/// A storage request, whatever its protocol.
#[derive(Clone, Copy)]
pub struct Store<'a> {
    pub mode: Mode,
    pub key: &'a [u8],
    pub flags: u32,
    pub exptime: RelTime,
    pub value: &'a [u8],
    pub opts: StoreOpts,
    /// The command memcached names for it (`watch mutations`), and counts as a CAS
    /// command when it is [`StoreCmd::Cas`] (`cas`, a binary store with a CAS, `ms`
    /// set/replace with `C`).
    pub cmd: StoreCmd,
    /// `stats detail` records it (text and binary stores; not `ms`).
    pub prefix: bool,
    /// Out of memory drops the old item whatever the mode (memcached's `ms`; the
    /// engine itself drops it for a set).
    pub oom_drops_old: bool,
}

/// The command memcached names for a store in `mode` (binary stores map onto these, a
/// CAS store to `cas`).
pub fn cmd_of(mode: Mode) -> StoreCmd {
    match mode {
        Mode::Set => StoreCmd::Set,
        Mode::Add => StoreCmd::Add,
        Mode::Replace => StoreCmd::Replace,
        Mode::Append => StoreCmd::Append,
        Mode::Prepend => StoreCmd::Prepend,
        Mode::Cas(_) => StoreCmd::Cas,
    }
}

/// Stores `s` and counts it: `cmd_set` always; for a CAS command `cas_hits` when it
/// stored and `cas_badval` when the CAS differed; `cas_misses` when a CAS found no
/// item; `store_no_memory` when there was no memory. (An append with a CAS that
/// differs answers EXISTS without counting `cas_badval`, as in memcached.) A dead
/// item the lookup met counts `get_expired`/`get_flushed` (`do_store_item`'s
/// `do_item_get`), except in a store refused for memory: memcached allocates before
/// it looks, and then looks only for a set or an `ms`, to drop the old item. Then
/// `watch fetchers` is told of that lookup and `watch mutations` of the store.
#[inline(always)]
pub fn store(cx: &Ctx<'_>, s: &Store<'_>) -> StoreResult {
    if s.prefix {
        cx.server.prefixes.record(s.key, Op::Set);
    }
    // The one Relaxed load while nobody watches. (`s` by value: a reference would
    // keep it in memory on the hot path.)
    if cx.server.watch.wants(line::FETCHERS | line::MUTATIONS) {
        return store_watched(cx, *s);
    }
    store_counted(cx, s)
}

/// [`store`] while somebody watches fetchers or mutations: the lookup's line (taken
/// before the store), the store, then the store's line.
#[cold]
#[inline(never)]
fn store_watched(cx: &Ctx<'_>, s: Store<'_>) -> StoreResult {
    let looked = look(cx, s.key);
    let r = store_counted(cx, &s);
    let m = Mutation {
        key: s.key,
        cmd: s.cmd,
        flags: s.flags,
        exptime: s.exptime,
        value_len: s.value.len(),
        drops_old: s.mode == Mode::Set || s.oom_drops_old,
    };
    report(cx, r, m, looked);
    r
}

/// [`store`]'s engine call and counting.
#[inline(always)]
fn store_counted(cx: &Ctx<'_>, s: &Store<'_>) -> StoreResult {
    let Met { result: r, dead } = cx
        .engine
        .store_met(s.mode, s.key, s.flags, s.exptime, s.value, &s.opts);
    if dead.is_some() && (r != StoreResult::OutOfMemory || s.mode == Mode::Set || s.oom_drops_old) {
        cx.counters.count_dead(dead);
    }
    let c = cx.counters;
    c.cmd_set.incr();
    let cas_cmd = s.cmd == StoreCmd::Cas;
    match r {
        StoreResult::Stored(_) if cas_cmd => c.cas_hits.incr(),
        StoreResult::Exists if cas_cmd => c.cas_badval.incr(),
        StoreResult::NotFound => c.cas_misses.incr(),
        StoreResult::OutOfMemory => c.store_no_memory.incr(),
        StoreResult::Stored(_) | StoreResult::Exists | StoreResult::NotStored => {}
    }
    if r == StoreResult::OutOfMemory && s.oom_drops_old && s.mode != Mode::Set {
        cx.counters
            .count_dead(cx.engine.delete_met(s.key, &DeleteOpts::default()).dead);
    }
    r
}

/// What `watch mutations` shows of a store: the item the request made.
struct Mutation<'a> {
    key: &'a [u8],
    cmd: StoreCmd,
    flags: u32,
    exptime: RelTime,
    value_len: usize,
    /// Refused for memory, the old item is dropped (a set, or any `ms`).
    drops_old: bool,
}

/// `watch fetchers`' line of the store's lookup, then `watch mutations`' of the
/// store. memcached allocates before it looks: a store refused for memory logs its
/// `item_store` first, and a lookup only when it drops the old item.
#[cold]
#[inline(never)]
fn report(cx: &Ctx<'_>, r: StoreResult, s: Mutation<'_>, looked: Option<Looked>) {
    if r == StoreResult::OutOfMemory {
        if cx.server.watch.wants(line::MUTATIONS) {
            report_refused(cx, s.key, Some(s.cmd), r);
        }
        if s.drops_old {
            report_looked(cx, s.key, looked);
        }
        return;
    }
    report_looked(cx, s.key, looked);
    if !cx.server.watch.wants(line::MUTATIONS) {
        return;
    }
    let status = match r {
        StoreResult::Stored(_) => StoreStatus::Stored,
        // (Out of memory was reported above.)
        StoreResult::NotStored | StoreResult::OutOfMemory => StoreStatus::NotStored,
        StoreResult::Exists => StoreStatus::Exists,
        StoreResult::NotFound => StoreStatus::NotFound,
    };
    let (mut flags, mut exptime, mut value_len) = (s.flags, s.exptime, s.value_len);
    if status == StoreStatus::Stored && matches!(s.cmd, StoreCmd::Append | StoreCmd::Prepend) {
        // memcached logs the joined item: its length, and the flags and exptime it
        // kept. Read back with a peek (a store to the key in between would show its
        // item instead).
        cx.engine.peek(s.key, &mut |it| {
            (flags, exptime, value_len) = (it.flags, it.exptime, it.value.len());
        });
    }
    // memcached: `exptime - current_time`, unsigned, or 0 for no expiry.
    let ttl = match exptime {
        0 => 0,
        t => t.wrapping_sub(cx.engine.clock().now()),
    };
    let clsid = cx.classes().of(s.key.len(), flags, value_len);
    let fd = cx.fd.get();
    cx.server.watch.emit(line::MUTATIONS, &mut |out| {
        line::item_store(out, s.key, status, Some(s.cmd), ttl, clsid, fd, value_len)
    });
}

/// The `watch` lines of a set made outside [`store`] (meta `md x`, which stores an
/// empty value: memcached's `do_store_item` looks the key up, logged as `looked`,
/// then logs the store), when somebody watches fetchers or mutations.
#[cold]
#[inline(never)]
pub fn report_set(
    cx: &Ctx<'_>,
    key: &[u8],
    flags: u32,
    exptime: RelTime,
    r: StoreResult,
    looked: Looked,
) {
    let m = Mutation {
        key,
        cmd: StoreCmd::Set,
        flags,
        exptime,
        value_len: 0,
        drops_old: true,
    };
    // A line for fetchers goes nowhere when nobody watches them (`Hub::emit`).
    report(cx, r, m, Some(looked));
}

/// A storage request refused before it reached the store because its item cannot
/// fit `-I`: counts `store_too_large`, tells `watch mutations` (`cmd` is `None` for a
/// binary store: memcached names no command there), records `stats detail` when
/// `prefix`, and, when `drop_old`, removes the old item (memcached: a failed set, or
/// any failed `ms`, must not leave the old value readable; a dead item met there
/// counts `get_expired`/`get_flushed`, and `watch fetchers` logs that lookup after
/// the `item_store` line).
pub fn too_large(cx: &Ctx<'_>, key: &[u8], cmd: Option<StoreCmd>, prefix: bool, drop_old: bool) {
    cx.counters.store_too_large.incr();
    if cx.server.watch.wants(line::MUTATIONS) {
        report_refused(cx, key, cmd, StoreResult::NotStored);
    }
    if prefix {
        cx.server.prefixes.record(key, Op::Set);
    }
    if drop_old {
        if cx.server.watch.wants(line::FETCHERS) {
            report_looked(cx, key, look(cx, key));
        }
        cx.counters
            .count_dead(cx.engine.delete_met(key, &DeleteOpts::default()).dead);
    }
}

/// An `ms` whose data block did not end in `\r\n`: memcached counts the set.
pub fn bad_chunk(cx: &Ctx<'_>) {
    cx.counters.cmd_set.incr();
}

/// The `item_store` line of a store without an item: too large (`r` is `NotStored`)
/// or out of memory. memcached logs these with ttl, clsid and size 0 (its clsid and
/// cfd there are uninitialised memory; memcrab prints 0 and the socket).
#[cold]
#[inline(never)]
fn report_refused(cx: &Ctx<'_>, key: &[u8], cmd: Option<StoreCmd>, r: StoreResult) {
    let status = match r {
        StoreResult::OutOfMemory => StoreStatus::NoMemory,
        _ => StoreStatus::TooLarge,
    };
    let fd = cx.fd.get();
    cx.server.watch.emit(line::MUTATIONS, &mut |out| {
        line::item_store(out, key, status, cmd, 0, 0, fd, 0)
    });
}
