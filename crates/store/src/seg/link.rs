//! Linking items into the index and unlinking them, with the counters that go with
//! each (and the eviction listener's report of an eviction): [`Seg::find_locked`], [`Seg::find_live_locked`], [`Seg::link`],
//! [`Seg::unlink`], and the two that lock a partition themselves,
//! [`Seg::drop_dead`] and [`Seg::link_if_current`].
//!
//! Locks: a partition lock. The functions that take a [`Locked`] guard expect that
//! partition's lock held (the guard proves it); `drop_dead` and `link_if_current`
//! take it and must be called with no partition lock held and unpinned. Nothing here
//! takes the arena or a region lock, so callers may hold either (lock order: region
//! → arena → partition).
//!
//! Imports: `super::Seg` (its fields), index, segments, item.

use std::sync::atomic::Ordering;

use super::arena::Written;
use super::index::{Loc, Locked, SlotPos};
use super::item::{View, ACCESSED, ATIME_MASK, FETCHED};
use super::segments::Life;
use super::Seg;
use crate::{note_dead, Dead, Evicted, Fetch};

impl Seg {
    /// Finds the linked item for `key` under a partition lock: (slot, loc).
    pub(super) fn find_locked(&self, l: &Locked<'_>, h: u64, key: &[u8]) -> Option<(SlotPos, Loc)> {
        // SAFETY: items linked in a locked partition are not freed while it is locked.
        l.find(h, |loc| unsafe { self.descs.view(loc) }.1.key == key)
    }

    /// Unlinks an item under its partition lock and counts why: `None` for a
    /// delete, `Some(Live)` for an eviction, else as expired or flushed.
    pub(super) fn unlink(&self, l: &mut Locked<'_>, pos: SlotPos, loc: Loc, why: Option<Life>) {
        // SAFETY: `loc` is linked in the locked partition.
        let (d, v) = unsafe { self.descs.view(loc) };
        self.raise_floor(l, d.cas_of(loc, &v, self.use_cas));
        l.remove(pos);
        l.counts.items = l.counts.items.saturating_sub(1);
        l.counts.bytes = l.counts.bytes.saturating_sub(v.size as u64);
        d.live.fetch_sub(v.size as u64, Ordering::Relaxed);
        let unfetched = v.state() & FETCHED == 0;
        match why {
            Some(Life::Expired) => {
                self.counters.reclaimed.fetch_add(1, Ordering::Relaxed);
                if unfetched {
                    self.counters
                        .expired_unfetched
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            Some(Life::Flushed) => {
                self.counters
                    .crawler_reclaimed
                    .fetch_add(1, Ordering::Relaxed);
            }
            Some(Life::Live) => {
                self.report_eviction(&v);
                let c = &self.counters;
                c.evictions.fetch_add(1, Ordering::Relaxed);
                if unfetched {
                    c.evicted_unfetched.fetch_add(1, Ordering::Relaxed);
                }
                // Read since it was stored or last reinserted, and evicted anyway
                // (eviction's reinsertion budget was spent): memcached's
                // evicted_active.
                if v.state() & ACCESSED != 0 {
                    c.evicted_active.fetch_add(1, Ordering::Relaxed);
                }
                if v.exptime() != 0 {
                    c.evicted_nonzero.fetch_add(1, Ordering::Relaxed);
                }
                let now = self.clock.now();
                c.evicted_time.store(
                    now.saturating_sub(v.state() & ATIME_MASK),
                    Ordering::Relaxed,
                );
            }
            None => {}
        }
    }

    /// Shows an item being evicted to the eviction listener, if one is set (under
    /// the partition lock that links it, so the view stays valid).
    fn report_eviction(&self, v: &View<'_>) {
        if let Some(listener) = self.eviction_listener.get() {
            let state = v.state();
            listener.evicted(&Evicted {
                key: v.key,
                value_len: v.value.len(),
                flags: v.flags,
                exptime: v.exptime(),
                atime: state & ATIME_MASK,
                fetched: state & FETCHED != 0,
            });
        }
    }

    /// A lookup's lazy unlink of a dead item (`why` is not `Live`), as memcached's:
    /// an expired item counts as reclaimed; a flushed one is left uncounted (the
    /// lookup counts it as get_flushed).
    fn unlink_dead(&self, l: &mut Locked<'_>, pos: SlotPos, loc: Loc, why: Life) {
        self.unlink(l, pos, loc, Some(why).filter(|w| *w == Life::Expired));
    }

    /// Links a new item at `new_loc`, replacing `old` if given.
    pub(super) fn link(
        &self,
        l: &mut Locked<'_>,
        h: u64,
        old: Option<(SlotPos, Loc)>,
        new_loc: Loc,
    ) {
        // SAFETY: the new item is written and ours until linked; the old one is
        // linked in the locked partition.
        let (nd, nv) = unsafe { self.descs.view(new_loc) };
        nd.live.fetch_add(nv.size as u64, Ordering::Relaxed);
        l.counts.bytes += nv.size as u64;
        l.counts.items += 1;
        match old {
            Some((pos, old_loc)) => {
                // SAFETY: linked in the locked partition.
                let (od, ov) = unsafe { self.descs.view(old_loc) };
                od.live.fetch_sub(ov.size as u64, Ordering::Relaxed);
                l.counts.bytes = l.counts.bytes.saturating_sub(ov.size as u64);
                l.counts.items -= 1;
                l.replace(pos, h, new_loc);
            }
            None => {
                let displaced = l.insert(h, new_loc, |loc| {
                    // SAFETY: rebuilds read keys of items linked in this locked
                    // partition, which are not freed while it is locked.
                    let v = unsafe { self.descs.view(loc) }.1;
                    self.hash(v.key)
                });
                if let Some(victim) = displaced {
                    // A full partition at its largest table dropped an item: account
                    // for it as an eviction.
                    // SAFETY: it was linked in this locked partition until just now,
                    // and its segment is not reused while we hold the lock.
                    let (d, v) = unsafe { self.descs.view(victim) };
                    self.raise_floor(l, d.cas_of(victim, &v, self.use_cas));
                    self.report_eviction(&v);
                    d.live.fetch_sub(v.size as u64, Ordering::Relaxed);
                    l.counts.items = l.counts.items.saturating_sub(1);
                    l.counts.bytes = l.counts.bytes.saturating_sub(v.size as u64);
                    self.counters.evictions.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// The live item for a key under its partition lock; an expired or flushed one
    /// found on the way is unlinked (and the error says which it was).
    pub(super) fn find_live_locked(
        &self,
        l: &mut Locked<'_>,
        h: u64,
        key: &[u8],
    ) -> Result<(SlotPos, Loc), Fetch> {
        let (pos, loc) = self.find_locked(l, h, key).ok_or(Fetch::Miss)?;
        // SAFETY: linked in the locked partition.
        let (d, v) = unsafe { self.descs.view(loc) };
        match self.flush.life(d, &v, self.clock.now()) {
            Life::Live => Ok((pos, loc)),
            why => {
                self.unlink_dead(l, pos, loc, why);
                Err(why.fetch())
            }
        }
    }

    /// Unlinks a dead item met by a lock-free lookup (if it is still linked), so that
    /// the next lookup misses, as after memcached's lazy unlink, and returns what the
    /// lookup answers. Not while pinned.
    pub(super) fn drop_dead(&self, h: u64, loc: Loc, why: Life) -> Fetch {
        let mut l = self.index.lock(h);
        if let Some(pos) = l.find_loc(h, loc) {
            self.unlink_dead(&mut l, pos, loc, why);
        }
        why.fetch()
    }

    /// Raises the partition's floor (see `Counts::floor`) for an item with unique
    /// `cas` that leaves it.
    fn raise_floor(&self, l: &mut Locked<'_>, cas: u64) {
        if self.use_cas && cas > l.counts.floor && self.is_ours(cas) {
            l.counts.floor = cas;
        }
    }

    /// Whether the new version with unique `new_cas` may replace `cur` (the key's live item,
    /// if any) in time order: Ok when its unique exceeds `cur`'s and the
    /// partition's floor, else Err with what it must exceed, for the caller to
    /// write it again ([`Seg::write_item`]'s `after`).
    pub(super) fn check_order(
        &self,
        l: &Locked<'_>,
        cur: Option<Loc>,
        new_cas: u64,
    ) -> Result<(), u64> {
        if !self.use_cas {
            return Ok(());
        }
        // SAFETY: linked in the locked partition.
        let cur_cas = cur.map_or(0, |loc| unsafe { self.descs.cas_at(loc, true) });
        let need = self.must_exceed(cur_cas, l.counts.floor);
        if need == 0 || new_cas > need {
            Ok(())
        } else {
            self.counters.rewritten.fetch_add(1, Ordering::Relaxed);
            Err(need)
        }
    }

    /// A version with a client's unique (`E`) replaces `cur`: memcached's counter
    /// still orders the key's next version after `cur`, which the new unique may
    /// not do, so `cur`'s unique joins the partition's floor (unless the new item
    /// is the same version: a touch's copy).
    pub(super) fn keep_past(&self, l: &mut Locked<'_>, cur: Option<Loc>, new_cas: u64) {
        if let Some(loc) = cur.filter(|_| self.use_cas) {
            // SAFETY: linked in the locked partition.
            let cas = unsafe { self.descs.cas_at(loc, true) };
            if cas != new_cas {
                self.raise_floor(l, cas);
            }
        }
    }

    /// Links the new item `new` in place of the item at `old` if that is still the live item
    /// for `key` (counting a new item in `total_items` if `count`), and, if `order`
    /// (a new version whose unique the engine gives), if its unique orders after
    /// the key's past ([`Seg::check_order`]). Returns the new item's CAS unique and
    /// the partition, still locked; else Err with what the unique of the caller's
    /// next try must exceed (the caller reads again and writes a new copy). A dead
    /// item met under the key (it died since the caller read it) is noted in `dead`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn link_if_current(
        &self,
        h: u64,
        key: &[u8],
        old: Option<Loc>,
        new: Written,
        count: bool,
        order: bool,
        dead: &mut Option<Dead>,
    ) -> Result<(u64, Locked<'_>), u64> {
        let mut l = self.index.lock(h);
        let cur = self
            .find_live_locked(&mut l, h, key)
            .map_err(|found| note_dead(dead, found))
            .ok();
        let cur_loc = cur.map(|(_, loc)| loc);
        if order {
            self.check_order(&l, cur_loc, new.cas)?;
        }
        if cur_loc != old {
            return Err(0);
        }
        if !order {
            self.keep_past(&mut l, cur_loc, new.cas);
        }
        self.link(&mut l, h, cur, new.loc);
        if count {
            l.counts.total_items += 1;
        }
        Ok((if self.use_cas { new.cas } else { 0 }, l))
    }
}
