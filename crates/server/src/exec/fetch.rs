//! The fetching commands: text `get`/`gets`/`gat`/`gats`/`touch`, meta `mg` and `me`,
//! binary GET/GETK/GAT/TOUCH and their quiet forms. A [`Fetcher`] makes the engine
//! call and does all of a lookup's bookkeeping, once for every protocol, as
//! memcached's `do_item_get` does: the counters, `watch fetchers`, `stats detail`'s
//! prefixes; and [`value`] appends a hit's value, lent or copied, counting
//! `values_lent`. The executors only encode what a hit shows (their visitor) and the
//! miss. The writes' own lookups, which `do_item_get` logs too, are [`look`]ed at
//! here and reported with [`report_looked`] by store.rs, arith.rs, delete.rs and
//! meta.rs's `md x`.

use memcrab_proto::text::watch::{self as line, GetStatus};
use memcrab_store::{Fetch, GetOpts, Item};

use super::Seen;
use crate::admin::prefix::Op;
use crate::out::Out;
use crate::server::Ctx;

/// Which counters a lookup moves, as memcached counts each command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// `cmd_get` and `get_hits`/`get_misses`.
    Get,
    /// `cmd_touch` and `touch_hits`/`touch_misses` (`gat`, `touch`, binary GAT and
    /// TOUCH).
    Touch,
    /// `mg` with `T`: memcached sets `ttl_set` while it walks a hit's flags, so a hit
    /// is a touch and a miss a get miss.
    TouchIfHit,
    /// Only `get_expired`/`get_flushed` (`me`, whose `item_get` counts nothing
    /// else).
    WatchOnly,
}

/// What a hit's visitor did with the item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    /// Encoded it.
    Shown,
    /// Encoded it, and the request won the item's token (meta `W`: the engine sets
    /// `token_sent`).
    Won,
    /// Could not encode it (an `mg` whose opaque is too long): memcached stops before
    /// it counts anything, so the lookup is not counted (and no `watch` line).
    Refused,
}

/// One request's lookups, counted as [`Counts`] says; made once per request (a
/// multi-get looks up each of its keys with the same one).
pub struct Fetcher<'c, 'a> {
    cx: &'c Ctx<'a>,
    counts: Counts,
    /// `stats detail` records the lookups (text `get`/`gat` and every binary GET,
    /// GAT and TOUCH; not text `touch`, `mg` or `me`).
    prefix: bool,
    /// Whether somebody watches fetches (one Relaxed load per request, not per key).
    watched: bool,
}

impl<'c, 'a> Fetcher<'c, 'a> {
    #[inline]
    pub fn new(cx: &'c Ctx<'a>, counts: Counts, prefix: bool) -> Self {
        Fetcher {
            cx,
            counts,
            prefix,
            watched: cx.server.watch.wants(line::FETCHERS),
        }
    }

    /// Looks `key` up with `opts`; `show` encodes a hit. Then counts the lookup.
    #[inline]
    pub fn get(&self, key: &[u8], opts: &GetOpts, show: impl FnMut(&Item<'_>) -> Visit) -> Fetch {
        if opts.vivify.is_some() {
            return self.get_vivifying(key, opts, show);
        }
        self.lookup(key, opts, show)
    }

    /// [`Fetcher::get`] for a lookup that may create the item (`mg N`): a dead item
    /// met before the creation counts too (the visitor sees it in
    /// [`Item::replaced`]), as memcached's `do_item_get` counted it before `mg`
    /// allocated the new item. Apart, so that no other lookup pays for it.
    #[cold]
    #[inline(never)]
    fn get_vivifying(
        &self,
        key: &[u8],
        opts: &GetOpts,
        mut show: impl FnMut(&Item<'_>) -> Visit,
    ) -> Fetch {
        // Counted even when `show` refuses the item (memcached's lookup counted it
        // before the reply failed).
        let mut replaced = None;
        let found = self.lookup(key, opts, |it| {
            replaced = it.replaced;
            show(it)
        });
        self.cx.counters.count_dead(replaced);
        found
    }

    /// The lookup and its counting ([`Fetcher::get`], without `mg N`'s extra).
    #[inline]
    fn lookup(
        &self,
        key: &[u8],
        opts: &GetOpts,
        mut show: impl FnMut(&Item<'_>) -> Visit,
    ) -> Fetch {
        let mut refused = false;
        let mut visit = |it: &Item<'_>| match show(it) {
            Visit::Shown => false,
            Visit::Won => true,
            Visit::Refused => {
                refused = true;
                false
            }
        };
        // Two lookups, so that the usual one (nobody watches) does nothing for
        // `watch` per key.
        if self.watched {
            let mut seen = Seen::default();
            let found = self.cx.engine.get(key, opts, &mut |it| {
                seen = Seen::of(&it);
                visit(&it)
            });
            if !refused {
                self.count(key, found);
                report(self.cx, key, found, seen);
            }
            found
        } else {
            let found = self.cx.engine.get(key, opts, &mut |it| visit(&it));
            if !refused {
                self.count(key, found);
            }
            found
        }
    }

    /// memcached's counting for one lookup: `get_expired` or `get_flushed` when the
    /// key held a dead item (`do_item_get`, whatever the command), then the command's
    /// own counters and `stats detail`.
    #[inline]
    fn count(&self, key: &[u8], found: Fetch) {
        let cx = self.cx;
        let c = cx.counters;
        match found {
            Fetch::Expired | Fetch::Flushed => cx.counters.count_dead(found.dead()),
            Fetch::Hit | Fetch::Miss => {}
        }
        if self.counts != Counts::WatchOnly {
            let touch = match self.counts {
                Counts::Touch => true,
                Counts::TouchIfHit => found == Fetch::Hit,
                Counts::Get | Counts::WatchOnly => false,
            };
            match (touch, found.is_hit()) {
                (true, true) => {
                    c.cmd_touch.incr();
                    c.touch_hits.incr();
                }
                (true, false) => {
                    c.cmd_touch.incr();
                    c.touch_misses.incr();
                }
                (false, true) => {
                    c.cmd_get.incr();
                    c.get_hits.incr();
                }
                (false, false) => {
                    c.cmd_get.incr();
                    c.get_misses.incr();
                }
            }
        }
        if self.prefix {
            let hit = found.is_hit();
            cx.server.prefixes.record(key, Op::Get { hit });
        }
    }
}

/// Appends a hit's value to `out`: lent by the store when the output lends values
/// this long (see `out.rs`, counted as `values_lent`), else copied.
#[inline]
pub fn value(cx: &Ctx<'_>, out: &mut Out, it: &Item<'_>) {
    if out.value(it) {
        cx.counters.values_lent.incr();
    }
}

/// What the lookup inside a write saw: memcached's `do_store_item`, `do_add_delta`
/// and deletes look the key up with `do_item_get`, which `watch fetchers` logs (as
/// `item_get`, before the write's own line). Taken with [`Engine::peek`] before the
/// write, which moves nothing (no bump, and a dead item is left for the write to
/// meet and count), so watching changes what no client can see.
///
/// [`Engine::peek`]: memcrab_store::Engine::peek
#[derive(Clone, Copy, Debug)]
pub struct Looked {
    found: Fetch,
    seen: Seen,
}

impl Looked {
    /// What a lookup the caller made itself found (`md x`'s, before it stores).
    pub fn of(found: Fetch, seen: Seen) -> Looked {
        Looked { found, seen }
    }

    /// The item the lookup found, if live.
    pub fn seen(&self) -> Option<Seen> {
        (self.found == Fetch::Hit).then_some(self.seen)
    }

    /// What a second lookup of the same write sees of an item the first one saw
    /// missing (memcached's `ma N` and binary incr with an initial value look again in
    /// the `add` that creates the item).
    pub fn missing() -> Looked {
        Looked {
            found: Fetch::Miss,
            seen: Seen::default(),
        }
    }
}

/// [`Looked`] for `key`, when somebody watches fetchers (else `None`).
#[cold]
#[inline(never)]
pub fn look(cx: &Ctx<'_>, key: &[u8]) -> Option<Looked> {
    if !cx.server.watch.wants(line::FETCHERS) {
        return None;
    }
    Some(look_always(cx, key))
}

/// [`Looked`] for `key`, watched or not (a `watch deletions` line needs the item).
#[cold]
#[inline(never)]
pub fn look_always(cx: &Ctx<'_>, key: &[u8]) -> Looked {
    let mut seen = Seen::default();
    let found = cx.engine.peek(key, &mut |it| seen = Seen::of(&it));
    Looked { found, seen }
}

/// `watch fetchers`: the `item_get` line of a write's lookup ([`look`]).
#[cold]
#[inline(never)]
pub fn report_looked(cx: &Ctx<'_>, key: &[u8], looked: Option<Looked>) {
    if let Some(l) = looked {
        report(cx, key, l.found, l.seen);
    }
}

/// `watch fetchers`: the `item_get` line of a lookup of `key`.
#[cold]
#[inline(never)]
fn report(cx: &Ctx<'_>, key: &[u8], found: Fetch, seen: Seen) {
    let (status, clsid, size) = match found {
        Fetch::Hit if !seen.created => (
            GetStatus::Found,
            cx.classes().of(key.len(), seen.flags, seen.value_len),
            seen.value_len,
        ),
        Fetch::Hit | Fetch::Miss => (GetStatus::NotFound, 0, 0),
        Fetch::Expired => (GetStatus::Expired, 0, 0),
        Fetch::Flushed => (GetStatus::Flushed, 0, 0),
    };
    let fd = cx.fd.get();
    cx.server.watch.emit(line::FETCHERS, &mut |out| {
        line::item_get(out, key, status, clsid, fd, size)
    });
}
