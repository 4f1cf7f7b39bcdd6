//! The engine's operations, as [`crate::Engine`] calls them: lookups beyond the lock-free
//! hit (`get_exclusive`, and what a visit does to the item: [`Seg::after_visit`],
//! [`Seg::touch_copy`]), and every read-modify-write, built as read without a lock
//! ([`Seg::snapshot`]), write a new item, link it if the item read is still current:
//! [`Seg::store_impl`], [`Seg::delete_impl`], [`Seg::delta_impl`].
//!
//! Locks: none expected. Each function takes the locks it needs itself (a region and
//! the arena through `write_item`, then a partition lock to link), never one inside
//! another but in the order region → arena → partition, and never while pinned; so
//! callers hold no lock and are not pinned. (`item`, `after_visit` and `bump` only
//! read or set atomics of an item the caller keeps alive: pinned or partition-locked.)
//!
//! Imports: `super::Seg` (its fields), write (`Seg::write_item`), link, segments,
//! index, item, epoch.

use std::sync::atomic::Ordering;

use super::arena::Written;
use super::epoch;
use super::index::Loc;
use super::item::{self, View, ACCESSED, ATIME_MASK, FETCHED, STALE, TOKEN_SENT};
use super::segments::{Desc, Life};
use super::Seg;
use crate::clock::RelTime;
use crate::{
    apply_delta, memcached_item_bytes, note_dead, Counter, Dead, DeleteOpts, DeleteResult, Delta,
    DeltaOpts, Fetch, GetOpts, Item, Mode, StoreOpts, StoreResult,
};

/// A copy of what a read-modify-write needs from the current item.
struct Snapshot {
    loc: Loc,
    value: Vec<u8>,
    flags: u32,
    exptime: RelTime,
    state: u32,
    cas: u64,
}

impl Seg {
    /// Copies what a read-modify-write needs from the live item for `key`: always
    /// its location, flags, exptime, state and CAS; its value only if `copy_value`
    /// (append, prepend, incr/decr and md I need it; add, replace and cas do not).
    fn snapshot(&self, h: u64, key: &[u8], copy_value: bool) -> Result<Snapshot, Fetch> {
        let g = epoch::pin();
        let now = self.clock.now();
        // SAFETY: pinned, and the location came from the index while pinned.
        let loc = self
            .index
            .find(h, &g, |loc| unsafe { self.descs.view(loc) }.1.key == key)
            .ok_or(Fetch::Miss)?;
        // SAFETY: as above.
        let (d, v) = unsafe { self.descs.view(loc) };
        let why = match self.flush.life(d, &v, now) {
            Life::Live => {
                return Ok(Snapshot {
                    loc,
                    value: if copy_value {
                        v.value.to_vec()
                    } else {
                        Vec::new()
                    },
                    flags: v.flags,
                    exptime: v.exptime(),
                    state: v.state(),
                    cas: d.cas_of(loc, &v, self.use_cas),
                })
            }
            why => why,
        };
        drop(g);
        Err(self.drop_dead(h, loc, why))
    }

    fn new_state(&self) -> u32 {
        self.clock.now() & ATIME_MASK
    }

    /// The item as a visitor sees it, from its state before this request.
    pub(super) fn item<'a>(
        &'a self,
        loc: Loc,
        d: &Desc,
        v: &View<'a>,
        pre: u32,
        created: bool,
    ) -> Item<'a> {
        Item {
            key: v.key,
            value: v.value,
            flags: v.flags,
            cas: d.cas_of(loc, v, self.use_cas),
            exptime: if created { 0 } else { v.exptime() },
            atime: pre & ATIME_MASK,
            fetched: pre & FETCHED != 0,
            stale: pre & STALE != 0,
            token_sent: pre & TOKEN_SENT != 0,
            created,
            replaced: None,
            lender: Some(super::Lender {
                descs: &self.descs,
                seg: loc.seg,
            }),
        }
    }

    /// After a visit: the token claim, the touch and the bump, in that order.
    /// Returns the expiry time still to apply when the touch could not be done in
    /// place (the item has no exptime field): the caller, unpinned and holding no
    /// lock, then calls [`Seg::touch_copy`].
    #[must_use]
    pub(super) fn after_visit(
        &self,
        d: &Desc,
        v: &View<'_>,
        pre: u32,
        claim: bool,
        opts: &GetOpts,
    ) -> Option<RelTime> {
        if claim {
            v.set_bits(TOKEN_SENT);
        }
        let mut pending_touch = None;
        if let Some(t) = opts.touch {
            if v.set_exptime(t) {
                d.raise_expiry(t);
            } else {
                pending_touch = Some(t);
            }
        }
        if !opts.no_bump {
            self.bump(v, pre);
        }
        pending_touch
    }

    /// Records a fetch in the item's state: FETCHED and ACCESSED, and the access time.
    fn bump(&self, v: &View<'_>, pre: u32) {
        if pre & FETCHED == 0 {
            v.set_bits(FETCHED | ACCESSED);
            return;
        }
        // A second fetch refreshes the access time (at most one write a second).
        let now = self.clock.now() & ATIME_MASK;
        let mut cur = v.state();
        while cur & ATIME_MASK != now || cur & ACCESSED == 0 {
            let new = (cur & !ATIME_MASK) | now | ACCESSED;
            match v
                .state
                .compare_exchange_weak(cur, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
    }

    /// A lookup that takes the partition lock (not one that expects it held):
    /// vivify, or a visitor whose token claim must be atomic.
    pub(super) fn get_exclusive(
        &self,
        key: &[u8],
        opts: &GetOpts,
        visit: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Fetch {
        let h = self.hash(key);
        let mut pending: Option<Written> = None;
        // What the vivified item's unique must exceed (what left the partition).
        let mut after = 0;
        // The dead item a lookup met (the first; it is unlinked then).
        let mut dead = None;
        loop {
            let mut l = self.index.lock(h);
            let why = match self.find_live_locked(&mut l, h, key) {
                Ok((_, loc)) => {
                    // SAFETY: linked in the locked partition.
                    let (d, v) = unsafe { self.descs.view(loc) };
                    let pre = v.state();
                    let claim = visit(self.item(loc, d, &v, pre, false));
                    if let Some(t) = self.after_visit(d, &v, pre, claim, opts) {
                        drop(l);
                        self.touch_copy(h, key, loc, t);
                    }
                    return Fetch::Hit;
                }
                Err(why) => why,
            };
            note_dead(&mut dead, why);
            let Some(ttl) = opts.vivify else {
                return why;
            };
            let ordered = match pending {
                Some(new) if opts.new_cas.is_none() => self.check_order(&l, None, new.cas),
                _ => Ok(()),
            };
            if let Err(need) = ordered {
                // Write it again, above what left the partition meanwhile.
                after = need;
                pending = None;
            }
            if let Some(Written { loc: new_loc, .. }) = pending {
                self.link(&mut l, h, None, new_loc);
                l.counts.total_items += 1;
                // SAFETY: just linked in the locked partition.
                let (d, v) = unsafe { self.descs.view(new_loc) };
                let pre = v.state();
                let created = Item {
                    replaced: dead,
                    ..self.item(new_loc, d, &v, pre, true)
                };
                if visit(created) {
                    v.set_bits(TOKEN_SENT);
                }
                // memcached's mg bumps the item it vivified too (do_item_bump after
                // the reply is built): it is FETCHED from then on, unless `u`.
                if !opts.no_bump {
                    self.bump(&v, pre);
                }
                return Fetch::Hit;
            }
            after = self.must_exceed(0, after.max(l.counts.floor));
            drop(l);
            let new = item::New {
                key,
                value: [&[], &[]],
                flags: 0,
                exptime: ttl,
                state: self.new_state(),
                cas: opts.new_cas.filter(|_| self.use_cas),
            };
            match self.write_item(&new, after) {
                Some(w) => pending = Some(w),
                None => {
                    self.counters.outofmemory.fetch_add(1, Ordering::Relaxed);
                    // The lookup's answer: what it met first (now unlinked).
                    return match dead {
                        Some(Dead::Expired) => Fetch::Expired,
                        Some(Dead::Flushed) => Fetch::Flushed,
                        None => why,
                    };
                }
            }
        }
    }

    /// Applies a touch to the item at `loc`, which has no exptime field, by linking a
    /// copy that has one: the same value, flags, state and CAS unique (a touch keeps
    /// the unique, as in memcached). If the item has changed since it was visited,
    /// the touch is ordered before that change, which replaced the item with its own
    /// expiry time, and nothing is left to do. Not while pinned or holding a lock.
    pub(super) fn touch_copy(&self, h: u64, key: &[u8], loc: Loc, t: RelTime) {
        let Ok(old) = self.snapshot(h, key, true) else {
            return;
        };
        if old.loc != loc {
            return;
        }
        let new = item::New {
            key,
            value: [&old.value, &[]],
            flags: old.flags,
            exptime: t,
            state: old.state,
            cas: Some(old.cas).filter(|_| self.use_cas),
        };
        // Out of memory under -M: the item keeps its old (unlimited) lifetime; the
        // touch still reports success, as it found the item.
        // The same version (a touch keeps the unique): no order to check.
        if let Some(written) = self.write_or_oom(&new, 0) {
            // A failed link means a writer replaced the item meanwhile: see above.
            let _ = self.link_if_current(h, key, Some(loc), written, false, false, &mut None);
        }
    }

    /// Every storage mode. Reads the current item without a lock, builds the new one
    /// without a lock, then links it if the item it was built from is still current
    /// (else starts over), so no lock is held while allocating. A dead item met on
    /// the way is noted in `dead`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn store_impl(
        &self,
        mode: Mode,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        opts: &StoreOpts,
        dead: &mut Option<Dead>,
    ) -> StoreResult {
        let h = self.hash(key);
        // compare_cas turns set/replace into a CAS store; add never compares.
        let mode = match (mode, opts.compare_cas) {
            (Mode::Set | Mode::Replace, Some(c)) => Mode::Cas(c),
            _ => mode,
        };
        let new_cas = opts.new_cas.filter(|_| self.use_cas);
        // A plain set replaces whatever is there (decided under the partition lock
        // below); the other modes decide on the item they read here.
        let copy_value = matches!(mode, Mode::Append | Mode::Prepend);
        // What the new version's unique must exceed, learnt from a link that found
        // it out of order (a plain set learns it only then).
        let mut hint = 0;
        loop {
            let old = match mode {
                Mode::Set => None,
                _ => self
                    .snapshot(h, key, copy_value)
                    .map_err(|found| note_dead(dead, found))
                    .ok(),
            };
            let mut new_exptime = exptime;
            let mut new_state = self.new_state();
            let mut new_flags = flags;
            let joined: Vec<u8>;
            let mut parts: [&[u8]; 2] = [value, &[]];
            match (mode, &old) {
                (Mode::Add, Some(o)) => {
                    // memcached refreshes the existing item on a failed add.
                    let mut l = self.index.lock(h);
                    let cur = self.find_live_locked(&mut l, h, key);
                    if let Ok((_, loc)) = cur.map_err(|found| note_dead(dead, found)) {
                        if loc == o.loc {
                            // SAFETY: linked in the locked partition.
                            let v = unsafe { self.descs.view(loc) }.1;
                            let now = self.clock.now() & ATIME_MASK;
                            let _ =
                                v.state
                                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                                        Some((s & !ATIME_MASK) | now | ACCESSED)
                                    });
                        }
                        return StoreResult::NotStored;
                    }
                    continue;
                }
                (Mode::Replace, None) => return StoreResult::NotStored,
                (Mode::Cas(_), None) => return StoreResult::NotFound,
                (Mode::Cas(want), Some(o)) => {
                    if want != 0 && want == o.cas && self.use_cas {
                        // A match.
                    } else if opts.invalidate && self.use_cas && want != 0 && want < o.cas {
                        // ms I with an older CAS: store, but stale, keeping the TTL
                        // and the token.
                        new_exptime = o.exptime;
                        new_state |= STALE | (o.state & TOKEN_SENT);
                    } else {
                        return StoreResult::Exists;
                    }
                }
                (Mode::Append | Mode::Prepend, None) => match opts.vivify {
                    None => return StoreResult::NotStored,
                    Some(ttl) => new_exptime = ttl,
                },
                (Mode::Append | Mode::Prepend, Some(o)) => {
                    if let Some(c) = opts.compare_cas {
                        if self.use_cas && c != 0 && c != o.cas {
                            return StoreResult::Exists;
                        }
                    }
                    let len = o.value.len() + value.len();
                    if self.item_size_max != 0
                        && memcached_item_bytes(key.len(), o.flags, len, self.use_cas)
                            > self.item_size_max
                    {
                        return StoreResult::NotStored;
                    }
                    let mut v = Vec::with_capacity(len);
                    if mode == Mode::Append {
                        v.extend_from_slice(&o.value);
                        v.extend_from_slice(value);
                    } else {
                        v.extend_from_slice(value);
                        v.extend_from_slice(&o.value);
                    }
                    joined = v;
                    parts = [&joined, &[]];
                    new_flags = o.flags;
                    new_exptime = o.exptime;
                }
                _ => {}
            }
            let new = item::New {
                key,
                value: parts,
                flags: new_flags,
                exptime: new_exptime,
                state: new_state,
                cas: new_cas,
            };
            let after = self.must_exceed(old.as_ref().map_or(0, |o| o.cas), hint);
            let Some(written) = self.write_or_oom(&new, after) else {
                if mode == Mode::Set {
                    // memcached drops the old value when a set cannot be stored.
                    self.delete_impl(key, &DeleteOpts::default(), dead);
                }
                return StoreResult::OutOfMemory;
            };
            let expect = match mode {
                // Set replaces whatever is there.
                Mode::Set => {
                    let mut l = self.index.lock(h);
                    let cur = self
                        .find_live_locked(&mut l, h, key)
                        .map_err(|found| note_dead(dead, found))
                        .ok();
                    let cur_loc = cur.map(|c| c.1);
                    if new_cas.is_some() {
                        self.keep_past(&mut l, cur_loc, written.cas);
                    } else if let Err(need) = self.check_order(&l, cur_loc, written.cas) {
                        // Out of order (written in an older segment than the key's
                        // last version): the copy stays unlinked, and the next one
                        // carries a unique above `need`.
                        hint = need;
                        continue;
                    }
                    self.link(&mut l, h, cur, written.loc);
                    l.counts.total_items += 1;
                    return StoreResult::Stored(if self.use_cas { written.cas } else { 0 });
                }
                _ => old.as_ref().map(|o| o.loc),
            };
            let order = new_cas.is_none();
            match self.link_if_current(h, key, expect, written, true, order, dead) {
                Ok((cas, _)) => return StoreResult::Stored(cas),
                Err(need) => hint = need,
            }
            // The item changed between the read and the link: the written copy stays
            // unlinked (dead bytes, reclaimed with its segment) and we start over.
        }
    }

    /// [`crate::Engine::delete`]; a dead item met on the way is noted in `dead`.
    pub(super) fn delete_impl(
        &self,
        key: &[u8],
        opts: &DeleteOpts,
        dead: &mut Option<Dead>,
    ) -> DeleteResult {
        let h = self.hash(key);
        if !opts.invalidate {
            let mut l = self.index.lock(h);
            let (pos, loc) = match self.find_live_locked(&mut l, h, key) {
                Ok(found) => found,
                Err(found) => {
                    note_dead(dead, found);
                    return DeleteResult::NotFound;
                }
            };
            if let Some(c) = opts.compare_cas {
                // SAFETY: linked in the locked partition.
                let (d, v) = unsafe { self.descs.view(loc) };
                if d.cas_of(loc, &v, self.use_cas) != c {
                    return DeleteResult::Exists;
                }
            }
            self.unlink(&mut l, pos, loc, None);
            return DeleteResult::Deleted;
        }
        // md I: a stale copy with a new CAS replaces the item.
        let mut hint = 0;
        loop {
            let old = match self.snapshot(h, key, true) {
                Ok(old) => old,
                Err(found) => {
                    note_dead(dead, found);
                    return DeleteResult::NotFound;
                }
            };
            if opts.compare_cas.is_some_and(|c| c != old.cas) {
                return DeleteResult::Exists;
            }
            let new = item::New {
                key,
                value: [&old.value, &[]],
                flags: old.flags,
                exptime: opts.touch.unwrap_or(old.exptime),
                state: (old.state | STALE) & !TOKEN_SENT & !ACCESSED,
                cas: opts.new_cas.filter(|_| self.use_cas),
            };
            let after = self.must_exceed(old.cas, hint);
            let Some(written) = self.write_or_oom(&new, after) else {
                // No memory for the copy: mark the item itself, keeping its CAS.
                let mut l = self.index.lock(h);
                if let Ok((_, loc)) = self.find_live_locked(&mut l, h, key) {
                    // SAFETY: linked in the locked partition.
                    let v = unsafe { self.descs.view(loc) }.1;
                    let _ = v
                        .state
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                            Some((s | STALE) & !TOKEN_SENT)
                        });
                    return DeleteResult::Invalidated(old.cas);
                }
                return DeleteResult::NotFound;
            };
            let order = opts.new_cas.is_none();
            match self.link_if_current(h, key, Some(old.loc), written, false, order, dead) {
                Ok((cas, _)) => return DeleteResult::Invalidated(cas),
                Err(need) => hint = need,
            }
        }
    }

    /// [`crate::Engine::delta`]; a dead item met on the way is noted in `dead`.
    pub(super) fn delta_impl(
        &self,
        key: &[u8],
        incr: bool,
        delta: u64,
        opts: &DeltaOpts,
        dead: &mut Option<Dead>,
    ) -> Delta {
        let h = self.hash(key);
        let new_cas = opts.new_cas.filter(|_| self.use_cas);
        let order = new_cas.is_none();
        let mut hint = 0;
        loop {
            let old = match self.snapshot(h, key, true) {
                Ok(old) => old,
                Err(found) => {
                    note_dead(dead, found);
                    let Some(viv) = opts.vivify else {
                        return Delta::NotFound;
                    };
                    let digits = viv.initial.to_string();
                    let new = item::New {
                        key,
                        value: [digits.as_bytes(), &[]],
                        flags: 0,
                        exptime: viv.exptime,
                        state: self.new_state(),
                        cas: new_cas,
                    };
                    let Some(written) = self.write_or_oom(&new, hint) else {
                        return Delta::OutOfMemory;
                    };
                    match self.link_if_current(h, key, None, written, true, order, dead) {
                        Ok((cas, _)) => {
                            return Delta::Value(Counter {
                                value: viv.initial,
                                cas,
                                exptime: 0,
                                created: true,
                            })
                        }
                        Err(need) => {
                            hint = need;
                            continue;
                        }
                    }
                }
            };
            // memcached's do_add_delta: empty or chunked values before the CAS.
            if old.value.is_empty()
                || memcrab_limits::memcached_chunked(
                    key.len(),
                    old.flags,
                    old.value.len(),
                    self.use_cas,
                )
            {
                return Delta::NonNumeric;
            }
            if let Some(c) = opts.compare_cas.filter(|&c| c != 0) {
                if c != old.cas {
                    return Delta::Exists;
                }
            }
            let Some((n, digits)) = apply_delta(&old.value, incr, delta) else {
                return Delta::NonNumeric;
            };
            // memcached rewrites a counter in place when the digits fit: the item
            // keeps its bits and is not counted as a new item.
            let in_place = digits.len() <= old.value.len();
            let now = self.clock.now() & ATIME_MASK;
            let new = item::New {
                key,
                value: [digits.as_slice(), &[]],
                flags: old.flags,
                exptime: opts.touch.unwrap_or(old.exptime),
                state: if in_place {
                    (old.state & !ATIME_MASK) | now
                } else {
                    now
                },
                cas: new_cas,
            };
            let after = self.must_exceed(old.cas, hint);
            let Some(written) = self.write_or_oom(&new, after) else {
                return Delta::OutOfMemory;
            };
            let count = !in_place;
            match self.link_if_current(h, key, Some(old.loc), written, count, order, dead) {
                Ok((cas, _)) => {
                    return Delta::Value(Counter {
                        value: n,
                        cas,
                        exptime: old.exptime,
                        created: false,
                    })
                }
                Err(need) => hint = need,
            }
        }
    }
}
