//! The reference engine: correct, simple, concurrent.
//!
//! ```text
//!   key ──hash──► shard = hash % 64 ──► Mutex<Shard>
//!                                        ├─ table: HashTable<u32>   hash → slot index
//!                                        ├─ slots: Vec<Slot>        key+value in one Box
//!                                        └─ LRU:   head ⇄ … ⇄ tail  (indices into slots)
//!   used: AtomicU64 ── bytes charged to items + reservations, across shards
//! ```
//!
//! Every operation takes exactly one shard lock at a time, so there is no lock order
//! to get wrong. Memory is reserved before an item is built: `Reference::reserve`
//! adds the item's charge to `used` and then evicts LRU tails, one shard at a time
//! and with no other lock held, until `used` is back under the limit. So `used` never
//! exceeds the limit by more than the reservations in flight.
//!
//! This engine stays in the tree as the model that property tests hold faster
//! engines against; it trades speed (a lock per get, an allocation per item, 80 B of
//! overhead per item) for obviousness.
//!
//! Files, each using only those below it:
//!
//! ```text
//!   ops.rs    vivify, and store, delete and incr/decr past the lookup  none, or the key's shard's
//!   mod.rs    Reference: reservation, flush, stats, the Engine impl   takes one shard lock at a time
//!   shard.rs  Shard: slots, hash table, LRU list, liveness, eviction  its shard's lock (held by the caller)
//!   tests.rs  unit tests
//! ```
//!
//! Locks: functions that expect a shard's lock held take the shard (`&mut Shard`,
//! the guard's contents); every other function takes the locks it needs itself and
//! expects none held.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::clock::{Clock, RelTime};
use crate::{
    note_dead, Config, DeleteOpts, DeleteResult, Delta, DeltaOpts, Engine, EvictionListener, Fetch,
    GetOpts, Item, Met, Mode, Stats, StoreOpts, StoreResult, WalkCursor, Walked,
};

use shard::{Counters, Epoch, Shard, Slot, NIL, SHARDS};

pub use shard::ITEM_OVERHEAD_BYTES;

mod ops;
mod shard;
#[cfg(test)]
mod tests;

/// Slots a walk examines per hold of a shard lock.
const WALK_SLOTS_PER_LOCK: usize = 256;

/// Largest growth of a counter by incr: 20 digits.
const DELTA_MAX_GROWTH_BYTES: u64 = 20;

/// The reference engine. See the module docs.
pub struct Reference {
    /// One lock per shard; it protects everything in that shard (table, slots, LRU,
    /// counters). Never held while taking another shard's lock.
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    /// Bytes charged to live items plus reservations in flight. Updated with Relaxed
    /// atomics: it is an accounting total, read only to decide whether to evict, and a
    /// momentarily stale value only makes an eviction early or late by one item.
    used: AtomicU64,
    /// The byte limit (`-m`, changed by `cache_memlimit`). Relaxed: a plain setting.
    limit: AtomicU64,
    /// flush_all calls so far, and how many of them `maintain` has swept for. Relaxed:
    /// a sweep that runs twice, or one tick late, is harmless.
    flush_gen: AtomicU64,
    swept_gen: AtomicU64,
    /// memcached's `settings.oldest_live` (see [`Epoch`]). Relaxed: written by
    /// flush_all, whose per-shard `oldest_cas` writes are ordered by the shard locks;
    /// a get that races a flush_all may see either side of it, as in memcached.
    oldest_live: AtomicU32,
    evict: bool,
    use_cas: bool,
    item_size_max: usize,
    /// Stores refused for lack of memory (Relaxed; a statistic).
    outofmemory: AtomicU64,
    clock: Arc<Clock>,
    /// Told of every eviction (`watch evictions`); set at most once, read (one
    /// acquire load) per eviction.
    eviction_listener: OnceLock<Arc<dyn EvictionListener>>,
}

impl Reference {
    /// A new engine. `hash_power` sizes the index up front for `2^hash_power` items
    /// (memcached's `-o hashpower`); it grows as needed anyway.
    pub fn new(cfg: Config, hash_power: u8, clock: Arc<Clock>) -> Self {
        let per_shard = (1usize << hash_power.min(32)) / SHARDS;
        Reference {
            shards: (0..SHARDS)
                .map(|i| Mutex::new(Shard::new(i, per_shard)))
                .collect(),
            hasher: foldhash::fast::RandomState::default(),
            used: AtomicU64::new(0),
            limit: AtomicU64::new(cfg.limit_bytes),
            oldest_live: AtomicU32::new(0),
            flush_gen: AtomicU64::new(0),
            swept_gen: AtomicU64::new(0),
            evict: cfg.evict,
            use_cas: cfg.use_cas,
            item_size_max: cfg.item_size_max,
            outofmemory: AtomicU64::new(0),
            clock,
            eviction_listener: OnceLock::new(),
        }
    }

    fn locate(&self, key: &[u8]) -> (u64, usize) {
        let hash = self.hasher.hash_one(key);
        (hash, (hash % SHARDS as u64) as usize)
    }

    fn epoch(&self) -> Epoch {
        Epoch {
            now: self.clock.now(),
            oldest_live: self.oldest_live.load(Ordering::Relaxed),
        }
    }

    fn cas_out(&self, cas: u64) -> u64 {
        if self.use_cas {
            cas
        } else {
            0
        }
    }

    /// Adds `need` bytes to `used`, then frees LRU tails (starting at shard `home`)
    /// until `used` is within the limit. On failure the reservation is taken back.
    /// Must be called with no shard lock held.
    fn reserve(&self, need: u64, home: usize) -> bool {
        self.used.fetch_add(need, Ordering::Relaxed);
        let mut start = home;
        while self.used.load(Ordering::Relaxed) > self.limit.load(Ordering::Relaxed) {
            let e = self.epoch();
            let freed = (0..SHARDS).any(|i| {
                let s = (start + i) % SHARDS;
                let listener = self.eviction_listener.get().map(|l| &**l);
                let ok = self.shards[s]
                    .lock()
                    .evict_tail(e, self.evict, &self.used, listener);
                if ok {
                    start = s;
                }
                ok
            });
            if !freed {
                self.used.fetch_sub(need, Ordering::Relaxed);
                return false;
            }
        }
        true
    }

    /// Frees every flushed item in every shard, one shard lock at a time.
    fn sweep_flushed(&self) {
        let e = self.epoch();
        for shard in self.shards.iter() {
            shard.lock().remove_flushed(e, &self.used);
        }
    }

    fn unreserve(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    fn new_cas(&self, explicit: Option<u64>) -> Option<u64> {
        if self.use_cas {
            explicit
        } else {
            None
        }
    }

    /// The hit half of [`Engine::get`]: visit, mark the token, touch, bump.
    fn visit_hit(
        &self,
        sh: &mut Shard,
        idx: u32,
        opts: &GetOpts,
        now: RelTime,
        visit: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Fetch {
        let won = visit(self.item_at(&sh.slots[idx as usize]));
        let s = &mut sh.slots[idx as usize];
        if won {
            s.token_sent = true;
        }
        if let Some(exptime) = opts.touch {
            s.exptime = exptime;
        }
        if !opts.no_bump {
            sh.bump_fetch(idx, now);
        }
        Fetch::Hit
    }

    /// A stored item as a visitor sees it.
    fn item_at<'s>(&self, s: &'s Slot) -> Item<'s> {
        Item {
            key: s.key(),
            value: s.value(),
            flags: s.flags,
            cas: self.cas_out(s.cas),
            exptime: s.exptime,
            atime: s.time,
            fetched: s.fetched,
            stale: s.stale,
            token_sent: s.token_sent,
            created: false,
            replaced: None,
            lender: None,
        }
    }
}

impl Engine for Reference {
    fn get(&self, key: &[u8], opts: &GetOpts, visit: &mut dyn FnMut(Item<'_>) -> bool) -> Fetch {
        let (hash, si) = self.locate(key);
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        match sh.find_live(hash, key, e, &self.used) {
            Ok(idx) => self.visit_hit(&mut sh, idx, opts, e.now, visit),
            Err(miss) => {
                drop(sh);
                match opts.vivify {
                    Some(ttl) => self.vivify(key, (hash, si), opts, ttl, miss, visit),
                    None => miss,
                }
            }
        }
    }

    fn peek(&self, key: &[u8], visit: &mut dyn FnMut(Item<'_>)) -> Fetch {
        let (hash, si) = self.locate(key);
        let e = self.epoch();
        let sh = self.shards[si].lock();
        match sh.peek(hash, key, e) {
            Ok(idx) => {
                visit(self.item_at(&sh.slots[idx as usize]));
                Fetch::Hit
            }
            Err(dead) => dead,
        }
    }

    fn store_met(
        &self,
        mode: Mode,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        opts: &StoreOpts,
    ) -> Met<StoreResult> {
        let (hash, si) = self.locate(key);
        let mut dead = None;
        let mut need = (key.len() + value.len()) as u64 + ITEM_OVERHEAD_BYTES;
        if matches!(mode, Mode::Append | Mode::Prepend) {
            // Peek at the current size so the reservation covers the joined value.
            let e = self.epoch();
            let mut sh = self.shards[si].lock();
            match sh.find_live(hash, key, e, &self.used) {
                Ok(idx) => need += sh.slots[idx as usize].value().len() as u64,
                Err(found) => {
                    note_dead(&mut dead, found);
                    if opts.vivify.is_none() {
                        return Met {
                            result: StoreResult::NotStored,
                            dead,
                        };
                    }
                }
            }
        }
        if !self.reserve(need, si) {
            self.outofmemory.fetch_add(1, Ordering::Relaxed);
            if mode == Mode::Set {
                // memcached drops the old value when a set cannot be stored, so a
                // reader never sees stale data for a key whose write failed.
                let removed = self.delete_met(key, &DeleteOpts::default());
                dead = dead.or(removed.dead);
            }
            return Met {
                result: StoreResult::OutOfMemory,
                dead,
            };
        }
        let mut sh = self.shards[si].lock();
        let r = self.store_locked(
            &mut sh, mode, hash, key, flags, exptime, value, need, opts, &mut dead,
        );
        Met { result: r, dead }
    }

    fn delete_met(&self, key: &[u8], opts: &DeleteOpts) -> Met<DeleteResult> {
        let (hash, si) = self.locate(key);
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        let idx = match sh.find_live(hash, key, e, &self.used) {
            Ok(idx) => idx,
            Err(found) => {
                return Met {
                    result: DeleteResult::NotFound,
                    dead: found.dead(),
                }
            }
        };
        Met {
            result: self.delete_live(&mut sh, idx, opts),
            dead: None,
        }
    }

    fn delta_met(&self, key: &[u8], incr: bool, delta: u64, opts: &DeltaOpts) -> Met<Delta> {
        let (hash, si) = self.locate(key);
        if !self.reserve(DELTA_MAX_GROWTH_BYTES, si) {
            return Met {
                result: Delta::OutOfMemory,
                dead: None,
            };
        }
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        let idx = match sh.find_live(hash, key, e, &self.used) {
            Ok(idx) => idx,
            Err(found) => {
                self.unreserve(DELTA_MAX_GROWTH_BYTES);
                let r = match opts.vivify {
                    None => Delta::NotFound,
                    Some(v) => {
                        drop(sh);
                        self.vivify_counter(key, (hash, si), incr, delta, opts, v)
                    }
                };
                return Met {
                    result: r,
                    dead: found.dead(),
                };
            }
        };
        let r = self.delta_live(&mut sh, (idx, hash, e), key, incr, delta, opts);
        Met {
            result: r,
            dead: None,
        }
    }

    fn flush_all(&self, at: Option<RelTime>) {
        let now = self.clock.now();
        // memcached: oldest_live = (at or now) - 1; when that is already due, every
        // item with a CAS below the next one is invalid too (same-second stores).
        let oldest_live = at.unwrap_or(now).saturating_sub(1).max(1);
        self.oldest_live.store(oldest_live, Ordering::Relaxed);
        if oldest_live <= now {
            for shard in self.shards.iter() {
                let mut sh = shard.lock();
                sh.oldest_cas = sh.upcoming_cas();
            }
        }
        // An immediate flush frees its items before it returns, as memcached 1.6.25+
        // unlinks them at once (item_flush_expired). A delayed one is freed by
        // `maintain` once due; until then a lookup meets them and counts get_flushed.
        let gen = self.flush_gen.fetch_add(1, Ordering::Relaxed) + 1;
        if oldest_live <= now {
            self.swept_gen.store(gen, Ordering::Relaxed);
            self.sweep_flushed();
        }
    }

    fn set_limit(&self, limit_bytes: u64) {
        self.limit.store(limit_bytes, Ordering::Relaxed);
    }

    fn stats(&self) -> Stats {
        let mut st = Stats {
            limit_maxbytes: self.limit.load(Ordering::Relaxed),
            ..Stats::default()
        };
        let mut buckets = 0u64;
        let now = self.clock.now();
        let mut latest_eviction = 0;
        for shard in self.shards.iter() {
            let sh = shard.lock();
            st.evicted_nonzero += sh.counters.evicted_nonzero;
            st.crawler_reclaimed += sh.counters.crawler_reclaimed;
            if sh.counters.last_eviction.0 > latest_eviction {
                latest_eviction = sh.counters.last_eviction.0;
                st.evicted_time = sh.counters.last_eviction.1;
            }
            if sh.tail != NIL {
                st.oldest_item_age = st
                    .oldest_item_age
                    .max(now.saturating_sub(sh.slots[sh.tail as usize].time));
            }
            st.curr_items += sh.curr_items;
            st.total_items += sh.counters.total_items;
            st.evictions += sh.counters.evictions;
            st.reclaimed += sh.counters.reclaimed;
            st.expired_unfetched += sh.counters.expired_unfetched;
            st.evicted_unfetched += sh.counters.evicted_unfetched;
            buckets += (sh.table.capacity() as u64 * 8 / 7).next_power_of_two();
        }
        // Item bytes only: reservations in flight are not items yet.
        st.bytes = self.used.load(Ordering::Relaxed);
        st.hash_power_level = 63 - buckets.max(1).leading_zeros();
        st.hash_bytes = buckets * 5;
        st.outofmemory = self.outofmemory.load(Ordering::Relaxed);
        st
    }

    fn reset_stats(&self) {
        for shard in self.shards.iter() {
            shard.lock().counters = Counters::default();
        }
        self.outofmemory.store(0, Ordering::Relaxed);
    }

    fn clock(&self) -> &Clock {
        &self.clock
    }

    /// One shard at a time, at most `WALK_SLOTS_PER_LOCK` slots per hold of its
    /// lock. A slot keeps its item until the item is removed or replaced, so only
    /// keys written during the walk can be missed (their new slot lay behind it).
    fn walk(&self, cursor: &mut WalkCursor, visit: &mut dyn FnMut(&Walked<'_>) -> bool) {
        while !cursor.done {
            let Some(shard) = self.shards.get(cursor.part as usize) else {
                cursor.done = true;
                return;
            };
            let sh = shard.lock();
            let (next, stopped) = sh.walk(
                cursor.pos,
                WALK_SLOTS_PER_LOCK,
                self.epoch(),
                self.use_cas,
                visit,
            );
            cursor.pos = next;
            if stopped {
                return;
            }
            if sh.walked_past(next) {
                cursor.part += 1;
                cursor.pos = 0;
            }
        }
    }

    fn maintain(&self) {
        // A flush_all whose time has come: free its items, once.
        let gen = self.flush_gen.load(Ordering::Relaxed);
        let oldest_live = self.oldest_live.load(Ordering::Relaxed);
        if gen != self.swept_gen.load(Ordering::Relaxed)
            && oldest_live != 0
            && oldest_live <= self.clock.now()
        {
            self.swept_gen.store(gen, Ordering::Relaxed);
            self.sweep_flushed();
        }
    }

    fn set_eviction_listener(&self, listener: Arc<dyn EvictionListener>) -> bool {
        self.eviction_listener.set(listener).is_ok()
    }
}
