//! The deleting commands: text `delete`, meta `md`, binary DELETE and DELETEQ.
//! [`delete`] makes the engine call and does all of its bookkeeping once, for every
//! protocol: `delete_hits`/`delete_misses`, `watch deletions` and `stats detail`'s
//! prefixes. The executors map their options onto a [`Delete`] and encode the
//! [`DeleteResult`].

use memcrab_proto::text::watch::{self as line, DeleteCmd};
use memcrab_store::{DeleteOpts, DeleteResult, GetOpts, Met};

use super::Seen;
use crate::admin::prefix::Op;
use crate::server::Ctx;

/// A delete, whatever its protocol.
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
/// looks the key up with `do_item_get`).
#[inline]
pub fn delete(cx: &Ctx<'_>, d: &Delete<'_>) -> DeleteResult {
    if d.prefix {
        cx.server.prefixes.record(d.key, Op::Delete);
    }
    let before = match d.watched_as {
        Some(_) if cx.server.watch.wants(line::DELETIONS) => peek(cx, d.key),
        _ => None,
    };
    let Met { result: r, dead } = cx.engine.delete_met(d.key, &d.opts);
    cx.counters.count_dead(dead);
    if let (DeleteResult::Deleted, Some(seen), Some(cmd)) = (r, before, d.watched_as) {
        report(cx, d.key, cmd, seen);
    }
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
        if let Some(seen) = peek(cx, key) {
            report(cx, key, cmd, seen);
        }
    }
}

/// `watch deletions`, step one: what the item a delete may remove holds (a lookup
/// without a bump, so a store to the key between this and the delete may be shown
/// instead). A dead item it meets is counted here: the delete then finds none.
#[cold]
#[inline(never)]
fn peek(cx: &Ctx<'_>, key: &[u8]) -> Option<Seen> {
    let opts = GetOpts {
        no_bump: true,
        ..GetOpts::default()
    };
    let mut seen = None;
    let found = cx.engine.get(key, &opts, &mut |it| {
        seen = Some(Seen::of(&it));
        false
    });
    cx.counters.count_dead(found.dead());
    seen
}

/// `watch deletions`, step two: the `type=deleted` line of an item the delete removed.
#[cold]
#[inline(never)]
fn report(cx: &Ctx<'_>, key: &[u8], cmd: DeleteCmd, seen: Seen) {
    let clsid = cx.classes().of(key.len(), seen.flags, seen.value_len);
    cx.server.watch.emit(line::DELETIONS, &mut |out| {
        line::deleted(out, key, cmd, clsid, seen.value_len)
    });
}
