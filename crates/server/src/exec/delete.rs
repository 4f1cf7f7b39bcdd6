//! The deleting commands: text `delete`, meta `md`, binary DELETE and DELETEQ.
//! [`delete`] makes the engine call and does all of its bookkeeping once, for every
//! protocol: `delete_hits`/`delete_misses`, `watch fetchers` (the delete's own
//! lookup), `watch deletions` and `stats detail`'s prefixes. The executors map
//! their options onto a [`Delete`] and encode the [`DeleteResult`].

use memcrab_proto::text::watch::{self as line, DeleteCmd};
use memcrab_store::{DeleteOpts, DeleteResult, Met};

use super::fetch::{look_always, report_looked, Looked};
use super::Seen;
use crate::admin::prefix::Op;
use crate::server::Ctx;

/// A delete, whatever its protocol.
#[derive(Clone, Copy)]
pub struct Delete<'a> {
    pub key: &'a [u8],
    pub opts: DeleteOpts,
    /// The command `watch deletions` names (memcached 1.6.20 logs text `delete` and
    /// `md`); `None` for a binary delete, which memcached does not log.
    pub watched_as: Option<DeleteCmd>,
    /// `stats detail` records it (text and binary deletes; not `md`).
    pub prefix: bool,
    /// A CAS that differed counts as a delete miss (memcached's `md` does; its binary
    /// delete counts nothing then).
    pub cas_mismatch_misses: bool,
}

/// Deletes (or, with `I`, invalidates) `d.key` and counts it: `delete_hits` when an
/// item was removed, `delete_misses` when none was live (and for a CAS that differed,
/// when `cas_mismatch_misses`); an invalidation counts neither, as in memcached. A
/// dead item the lookup met counts `get_expired`/`get_flushed` (memcached's delete
/// looks the key up with `do_item_get`, which `watch fetchers` logs).
#[inline]
pub fn delete(cx: &Ctx<'_>, d: &Delete<'_>) -> DeleteResult {
    if d.prefix {
        cx.server.prefixes.record(d.key, Op::Delete);
    }
    // The one Relaxed load while nobody watches. (`d` by value: a reference would
    // keep it in memory on the hot path.)
    if cx.server.watch.wants(line::FETCHERS | line::DELETIONS) {
        return delete_watched(cx, *d);
    }
    delete_counted(cx, d)
}

/// [`delete`] while somebody watches fetchers or deletions: the lookup (before the
/// delete), the delete, then the lines.
#[cold]
#[inline(never)]
fn delete_watched(cx: &Ctx<'_>, d: Delete<'_>) -> DeleteResult {
    let looked = look_always(cx, d.key);
    let r = delete_counted(cx, &d);
    report_both(cx, &d, r, looked);
    r
}

/// [`delete`]'s engine call and counting.
#[inline(always)]
fn delete_counted(cx: &Ctx<'_>, d: &Delete<'_>) -> DeleteResult {
    let Met { result: r, dead } = cx.engine.delete_met(d.key, &d.opts);
    cx.counters.count_dead(dead);
    let c = cx.counters;
    match r {
        DeleteResult::Deleted => c.delete_hits.incr(),
        DeleteResult::NotFound => c.delete_misses.incr(),
        DeleteResult::Exists if d.cas_mismatch_misses => c.delete_misses.incr(),
        DeleteResult::Exists | DeleteResult::Invalidated(_) => {}
    }
    r
}

/// `watch deletions` for a delete that kept its item (meta `md x`, which empties the
/// value): memcached logs the item as it is afterwards.
pub fn report_kept(cx: &Ctx<'_>, key: &[u8], cmd: DeleteCmd) {
    if cx.server.watch.wants(line::DELETIONS) {
        if let Some(seen) = look_always(cx, key).seen() {
            report(cx, key, cmd, seen);
        }
    }
}

/// A watched delete's lines: `watch fetchers`' line of its lookup, then `watch
/// deletions`' of the item it removed, which that lookup saw (a store to the key
/// between the two may be shown instead).
#[cold]
#[inline(never)]
fn report_both(cx: &Ctx<'_>, d: &Delete<'_>, r: DeleteResult, looked: Looked) {
    if cx.server.watch.wants(line::FETCHERS) {
        report_looked(cx, d.key, Some(looked));
    }
    if let (DeleteResult::Deleted, Some(seen), Some(cmd)) = (r, looked.seen(), d.watched_as) {
        if cx.server.watch.wants(line::DELETIONS) {
            report(cx, d.key, cmd, seen);
        }
    }
}

/// `watch deletions`: the `type=deleted` line of an item the delete removed.
#[cold]
#[inline(never)]
fn report(cx: &Ctx<'_>, key: &[u8], cmd: DeleteCmd, seen: Seen) {
    let clsid = cx.classes().of(key.len(), seen.flags, seen.value_len);
    cx.server.watch.emit(line::DELETIONS, &mut |out| {
        line::deleted(out, key, cmd, clsid, seen.value_len)
    });
}
