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
//! to get wrong. Memory is reserved before an item is built: [`Reference::reserve`]
//! adds the item's charge to `used` and then evicts LRU tails, one shard at a time
//! and with no other lock held, until `used` is back under the limit. So `used` never
//! exceeds the limit by more than the reservations in flight.
//!
//! This engine stays in the tree as the model that property tests hold faster
//! engines against; it trades speed (a lock per get, an allocation per item, 80 B of
//! overhead per item) for obviousness.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use hashbrown::HashTable;
use parking_lot::Mutex;

use crate::clock::{Clock, RelTime};
use crate::{
    apply_delta, memcached_item_bytes, Config, Counter, DeleteOpts, DeleteResult, Delta, DeltaOpts,
    Engine, Fetch, GetOpts, Item, Mode, Stats, StoreOpts, StoreResult, Vivify,
};

/// Shards: enough that 4–16 workers rarely meet on one lock.
const SHARDS: usize = 64;
const NIL: u32 = u32::MAX;
/// Bytes charged per item on top of its key and value: the slot (56 B), its hash
/// table entry (4 B + 1 control byte, at 7/8 load), and the allocator's header for
/// the data box (about 16 B).
pub const ITEM_OVERHEAD_BYTES: u64 = 80;
/// Largest growth of a counter by incr: 20 digits.
const DELTA_MAX_GROWTH_BYTES: u64 = 20;

struct Slot {
    /// Key followed by value; empty while the slot is free.
    data: Box<[u8]>,
    hash: u64,
    /// Internal CAS unique, always non-zero for a used slot (reported as 0 with -C).
    cas: u64,
    flags: u32,
    exptime: RelTime,
    /// memcached's `it->time`: when the item was stored or last accessed as
    /// [`Item::atime`] describes (read by delayed flush_all and eviction ages).
    time: RelTime,
    prev: u32,
    next: u32,
    klen: u8,
    fetched: bool,
    stale: bool,
    token_sent: bool,
}

impl Slot {
    fn key(&self) -> &[u8] {
        &self.data[..usize::from(self.klen)]
    }
    fn value(&self) -> &[u8] {
        &self.data[usize::from(self.klen)..]
    }
    fn charge(&self) -> u64 {
        self.data.len() as u64 + ITEM_OVERHEAD_BYTES
    }
}

/// Why a stored item is not live.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Life {
    Live,
    Expired,
    Flushed,
}

/// The flush markers every liveness check reads.
#[derive(Clone, Copy)]
struct Epoch {
    now: RelTime,
    /// memcached's `settings.oldest_live`: items stored at or before it are invalid
    /// once it is in the past. 0 = no flush.
    oldest_live: RelTime,
}

#[derive(Default)]
struct Counters {
    total_items: u64,
    evictions: u64,
    reclaimed: u64,
    expired_unfetched: u64,
    evicted_unfetched: u64,
    evicted_nonzero: u64,
    crawler_reclaimed: u64,
    /// (when, seconds since last use) of this shard's latest eviction.
    last_eviction: (RelTime, u32),
}

struct Shard {
    index: u64,
    table: HashTable<u32>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used: the next to evict.
    tail: u32,
    /// Next CAS sequence in this shard; uniques are `seq * SHARDS + index`.
    next_seq: u64,
    /// memcached's `settings.oldest_cas`, per shard: items with a smaller CAS are
    /// invalid once a flush is due. 0 = none.
    oldest_cas: u64,
    curr_items: u64,
    counters: Counters,
}

impl Shard {
    fn new(index: usize, capacity: usize) -> Self {
        Shard {
            index: index as u64,
            table: HashTable::with_capacity(capacity),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            next_seq: 1,
            oldest_cas: 0,
            curr_items: 0,
            counters: Counters::default(),
        }
    }

    fn next_cas(&mut self) -> u64 {
        let cas = self.next_seq * SHARDS as u64 + self.index;
        self.next_seq += 1;
        cas
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let slots = &self.slots;
        self.table
            .find(hash, |&i| slots[i as usize].key() == key)
            .copied()
    }

    /// memcached's `item_is_flushed` and then the exptime check of `do_item_get`.
    ///
    /// One deliberate difference: memcached checks its `oldest_cas` only while
    /// `oldest_live` is due, so `flush_all` followed by `flush_all 60` brings the
    /// first flush's items back for a minute. Here an immediate flush is final.
    fn life(&self, idx: u32, e: Epoch) -> Life {
        let s = &self.slots[idx as usize];
        if (self.oldest_cas != 0 && s.cas < self.oldest_cas)
            || (e.oldest_live != 0 && e.oldest_live <= e.now && s.time <= e.oldest_live)
        {
            return Life::Flushed;
        }
        if s.exptime != 0 && s.exptime <= e.now {
            return Life::Expired;
        }
        Life::Live
    }

    /// Finds a live item; a dead one found on the way is removed.
    fn find_live(
        &mut self,
        hash: u64,
        key: &[u8],
        e: Epoch,
        used: &AtomicU64,
    ) -> Result<u32, Fetch> {
        let Some(idx) = self.find(hash, key) else {
            return Err(Fetch::Miss);
        };
        match self.life(idx, e) {
            Life::Live => Ok(idx),
            Life::Expired => {
                self.remove(idx, used);
                Err(Fetch::Expired)
            }
            Life::Flushed => {
                self.remove(idx, used);
                Err(Fetch::Flushed)
            }
        }
    }

    fn unlink_lru(&mut self, idx: u32) {
        let (prev, next) = {
            let s = &self.slots[idx as usize];
            (s.prev, s.next)
        };
        if prev != NIL {
            self.slots[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.slots[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    fn push_head(&mut self, idx: u32) {
        let old = self.head;
        {
            let s = &mut self.slots[idx as usize];
            s.prev = NIL;
            s.next = old;
        }
        if old != NIL {
            self.slots[old as usize].prev = idx;
        } else {
            self.tail = idx;
        }
        self.head = idx;
    }

    fn bump(&mut self, idx: u32) {
        if self.head != idx {
            self.unlink_lru(idx);
            self.push_head(idx);
        }
    }

    /// Unlinks and frees a slot, returning its bytes to `used`.
    fn remove(&mut self, idx: u32, used: &AtomicU64) {
        let hash = self.slots[idx as usize].hash;
        if let Ok(entry) = self.table.find_entry(hash, |&i| i == idx) {
            entry.remove();
        }
        self.unlink_lru(idx);
        let charge = self.slots[idx as usize].charge();
        self.slots[idx as usize].data = Box::default();
        self.free.push(idx);
        self.curr_items -= 1;
        used.fetch_sub(charge, Ordering::Relaxed);
    }

    /// Links a new item whose bytes are already reserved in `used`. `cas` overrides
    /// the next unique (explicit CAS, `E`). Returns the slot and its unique.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        hash: u64,
        klen: u8,
        data: Box<[u8]>,
        flags: u32,
        exptime: RelTime,
        now: RelTime,
        cas: Option<u64>,
    ) -> (u32, u64) {
        let cas = match cas {
            Some(c) => c,
            None => self.next_cas(),
        };
        let slot = Slot {
            data,
            hash,
            cas,
            flags,
            exptime,
            time: now,
            prev: NIL,
            next: NIL,
            klen,
            fetched: false,
            stale: false,
            token_sent: false,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        self.table
            .insert_unique(hash, idx, |&i| slots[i as usize].hash);
        self.push_head(idx);
        self.curr_items += 1;
        self.counters.total_items += 1;
        (idx, cas)
    }

    /// memcached's `do_item_bump` as [`GetOpts::no_bump`] describes it.
    fn bump_fetch(&mut self, idx: u32, now: RelTime) {
        self.bump(idx);
        let s = &mut self.slots[idx as usize];
        if s.fetched {
            s.time = now;
        }
        s.fetched = true;
    }

    /// Frees the LRU tail if it may go: an expired or flushed item always, a live one
    /// only when eviction is on. Returns whether something was freed.
    fn evict_tail(&mut self, e: Epoch, evict: bool, used: &AtomicU64) -> bool {
        let idx = self.tail;
        if idx == NIL {
            return false;
        }
        let fetched = self.slots[idx as usize].fetched;
        match self.life(idx, e) {
            Life::Expired | Life::Flushed => {
                self.counters.reclaimed += 1;
                if !fetched {
                    self.counters.expired_unfetched += 1;
                }
            }
            Life::Live if evict => {
                let s = &self.slots[idx as usize];
                let age = e.now.saturating_sub(s.time);
                let nonzero = s.exptime != 0;
                let c = &mut self.counters;
                c.evictions += 1;
                c.evicted_nonzero += u64::from(nonzero);
                c.last_eviction = (e.now, age);
                if !fetched {
                    c.evicted_unfetched += 1;
                }
            }
            Life::Live => return false,
        }
        self.remove(idx, used);
        true
    }
}

fn make_data(key: &[u8], parts: &[&[u8]]) -> Box<[u8]> {
    let len = key.len() + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(key);
    for p in parts {
        v.extend_from_slice(p);
    }
    v.into_boxed_slice()
}

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
                let ok = self.shards[s].lock().evict_tail(e, self.evict, &self.used);
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
            let mut sh = shard.lock();
            let mut idx = sh.tail;
            while idx != NIL {
                let prev = sh.slots[idx as usize].prev;
                if sh.life(idx, e) == Life::Flushed {
                    sh.remove(idx, &self.used);
                    sh.counters.crawler_reclaimed += 1;
                }
                idx = prev;
            }
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
        let s = &sh.slots[idx as usize];
        let won = visit(Item {
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
        });
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

    /// [`GetOpts::vivify`] after a miss: reserve, then create the empty item unless
    /// another request made the key live meanwhile (then it is an ordinary hit).
    fn vivify(
        &self,
        key: &[u8],
        (hash, si): (u64, usize),
        opts: &GetOpts,
        ttl: RelTime,
        miss: Fetch,
        visit: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Fetch {
        let need = key.len() as u64 + ITEM_OVERHEAD_BYTES;
        if !self.reserve(need, si) {
            self.outofmemory.fetch_add(1, Ordering::Relaxed);
            return miss;
        }
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        if let Ok(idx) = sh.find_live(hash, key, e, &self.used) {
            self.unreserve(need);
            return self.visit_hit(&mut sh, idx, opts, e.now, visit);
        }
        let cas = self.new_cas(opts.new_cas);
        let (idx, _) = sh.insert(
            hash,
            key.len() as u8,
            make_data(key, &[]),
            0,
            ttl,
            e.now,
            cas,
        );
        let s = &sh.slots[idx as usize];
        let won = visit(Item {
            key: s.key(),
            value: s.value(),
            flags: 0,
            cas: self.cas_out(s.cas),
            exptime: 0,
            atime: s.time,
            fetched: false,
            stale: false,
            token_sent: false,
            created: true,
        });
        if won {
            sh.slots[idx as usize].token_sent = true;
        }
        Fetch::Hit
    }

    /// [`DeltaOpts::vivify`] after a miss: create the counter unless another request
    /// made the key live meanwhile (then the delta is applied to it after all).
    fn vivify_counter(
        &self,
        key: &[u8],
        (hash, si): (u64, usize),
        incr: bool,
        delta: u64,
        opts: &DeltaOpts,
        v: Vivify,
    ) -> Delta {
        let digits = v.initial.to_string();
        let need = (key.len() + digits.len()) as u64 + ITEM_OVERHEAD_BYTES;
        if !self.reserve(need, si) {
            self.outofmemory.fetch_add(1, Ordering::Relaxed);
            return Delta::OutOfMemory;
        }
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        if sh.find_live(hash, key, e, &self.used).is_ok() {
            self.unreserve(need);
            drop(sh);
            return self.delta(key, incr, delta, opts);
        }
        let data = make_data(key, &[digits.as_bytes()]);
        let cas = self.new_cas(opts.new_cas);
        let (_, cas) = sh.insert(hash, key.len() as u8, data, 0, v.exptime, e.now, cas);
        Delta::Value(Counter {
            value: v.initial,
            cas: self.cas_out(cas),
            exptime: 0,
            created: true,
        })
    }

    /// The body of [`Engine::store`], with the shard locked and `reserved` bytes
    /// already counted in `used` (the request's fields travel unbundled, as in the
    /// trait method).
    #[allow(clippy::too_many_arguments)]
    fn store_locked(
        &self,
        sh: &mut Shard,
        mode: Mode,
        hash: u64,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        reserved: u64,
        opts: &StoreOpts,
    ) -> StoreResult {
        let e = self.epoch();
        let old = sh.find_live(hash, key, e, &self.used).ok();
        let klen = key.len() as u8;
        // memcached's do_store_item: a set or replace with a unique is a cas.
        let (mode, cas_want) = match mode {
            Mode::Cas(c) => (Mode::Set, Some(c)),
            Mode::Set | Mode::Replace if opts.compare_cas.is_some() => {
                (Mode::Set, opts.compare_cas)
            }
            m => (m, None),
        };
        // Items carry no unique under -C: every requested unique compares as 0.
        let want = |c: u64| if self.use_cas { c } else { 0 };
        let refuse = |r: StoreResult| {
            self.unreserve(reserved);
            r
        };
        // (exptime, token_sent) of the old item for a stale store (`ms I`).
        let mut stale_from: Option<(RelTime, bool)> = None;
        let (data, flags, exptime) = match (cas_want, mode, old) {
            (Some(_), _, None) => return refuse(StoreResult::NotFound),
            (Some(c), _, Some(idx)) => {
                let w = want(c);
                let s = &sh.slots[idx as usize];
                let have = self.cas_out(s.cas);
                if w != 0 && w == have {
                    (make_data(key, &[value]), flags, exptime)
                } else if opts.invalidate && w != 0 && w < have {
                    stale_from = Some((s.exptime, s.token_sent));
                    (make_data(key, &[value]), flags, s.exptime)
                } else {
                    return refuse(StoreResult::Exists);
                }
            }
            (None, Mode::Add, Some(idx)) => {
                // memcached refreshes the existing item on a failed add.
                sh.bump(idx);
                sh.slots[idx as usize].time = e.now;
                return refuse(StoreResult::NotStored);
            }
            (None, Mode::Replace, None) => return refuse(StoreResult::NotStored),
            (None, Mode::Append | Mode::Prepend, None) => match opts.vivify {
                Some(t) => (make_data(key, &[value]), flags, t),
                None => return refuse(StoreResult::NotStored),
            },
            (None, Mode::Append | Mode::Prepend, Some(idx)) => {
                let s = &sh.slots[idx as usize];
                if let Some(c) = opts.compare_cas {
                    let w = want(c);
                    if w != 0 && w != self.cas_out(s.cas) {
                        return refuse(StoreResult::Exists);
                    }
                }
                let joined = s.value().len() + value.len();
                // memcached cannot allocate a joined item over -I: NOT_STORED.
                if self.item_size_max != 0
                    && memcached_item_bytes(key.len(), s.flags, joined, self.use_cas)
                        > self.item_size_max
                {
                    return refuse(StoreResult::NotStored);
                }
                let parts: [&[u8]; 2] = if mode == Mode::Append {
                    [s.value(), value]
                } else {
                    [value, s.value()]
                };
                (make_data(key, &parts), s.flags, s.exptime)
            }
            _ => (make_data(key, &[value]), flags, exptime),
        };
        let charge = data.len() as u64 + ITEM_OVERHEAD_BYTES;
        // The reservation was an estimate for append/prepend; settle the difference.
        if charge > reserved {
            self.used.fetch_add(charge - reserved, Ordering::Relaxed);
        } else {
            self.unreserve(reserved - charge);
        }
        if let Some(idx) = old {
            sh.remove(idx, &self.used);
        }
        let (idx, cas) = sh.insert(
            hash,
            klen,
            data,
            flags,
            exptime,
            e.now,
            self.new_cas(opts.new_cas),
        );
        if let Some((_, token_sent)) = stale_from {
            let s = &mut sh.slots[idx as usize];
            s.stale = true;
            s.token_sent = token_sent;
        }
        StoreResult::Stored(self.cas_out(cas))
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

    fn store(
        &self,
        mode: Mode,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        opts: &StoreOpts,
    ) -> StoreResult {
        let (hash, si) = self.locate(key);
        let mut need = (key.len() + value.len()) as u64 + ITEM_OVERHEAD_BYTES;
        if matches!(mode, Mode::Append | Mode::Prepend) {
            // Peek at the current size so the reservation covers the joined value.
            let e = self.epoch();
            let mut sh = self.shards[si].lock();
            match sh.find_live(hash, key, e, &self.used) {
                Ok(idx) => need += sh.slots[idx as usize].value().len() as u64,
                Err(_) if opts.vivify.is_some() => {}
                Err(_) => return StoreResult::NotStored,
            }
        }
        if !self.reserve(need, si) {
            self.outofmemory.fetch_add(1, Ordering::Relaxed);
            if mode == Mode::Set {
                // memcached drops the old value when a set cannot be stored, so a
                // reader never sees stale data for a key whose write failed.
                self.delete(key, &DeleteOpts::default());
            }
            return StoreResult::OutOfMemory;
        }
        let mut sh = self.shards[si].lock();
        self.store_locked(&mut sh, mode, hash, key, flags, exptime, value, need, opts)
    }

    fn delete(&self, key: &[u8], opts: &DeleteOpts) -> DeleteResult {
        let (hash, si) = self.locate(key);
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        let Ok(idx) = sh.find_live(hash, key, e, &self.used) else {
            return DeleteResult::NotFound;
        };
        if let Some(c) = opts.compare_cas {
            if self.cas_out(sh.slots[idx as usize].cas) != c {
                return DeleteResult::Exists;
            }
        }
        if !opts.invalidate {
            sh.remove(idx, &self.used);
            return DeleteResult::Deleted;
        }
        let cas = match self.new_cas(opts.new_cas) {
            Some(c) => c,
            None => sh.next_cas(),
        };
        let s = &mut sh.slots[idx as usize];
        if let Some(t) = opts.touch {
            s.exptime = t;
        }
        s.stale = true;
        s.token_sent = false;
        s.cas = cas;
        DeleteResult::Invalidated(self.cas_out(cas))
    }

    fn delta(&self, key: &[u8], incr: bool, delta: u64, opts: &DeltaOpts) -> Delta {
        let (hash, si) = self.locate(key);
        if !self.reserve(DELTA_MAX_GROWTH_BYTES, si) {
            return Delta::OutOfMemory;
        }
        let e = self.epoch();
        let mut sh = self.shards[si].lock();
        let idx = match sh.find_live(hash, key, e, &self.used) {
            Ok(idx) => idx,
            Err(_) => {
                self.unreserve(DELTA_MAX_GROWTH_BYTES);
                let Some(v) = opts.vivify else {
                    return Delta::NotFound;
                };
                drop(sh);
                return self.vivify_counter(key, (hash, si), incr, delta, opts, v);
            }
        };
        let explicit = self.new_cas(opts.new_cas);
        let (old_len, item_cas) = {
            let s = &sh.slots[idx as usize];
            (s.value().len(), self.cas_out(s.cas))
        };
        // memcached's do_add_delta: empty values first, then the CAS, then the number.
        if old_len == 0 {
            self.unreserve(DELTA_MAX_GROWTH_BYTES);
            return Delta::NonNumeric;
        }
        if let Some(c) = opts.compare_cas {
            if c != 0 && c != item_cas {
                self.unreserve(DELTA_MAX_GROWTH_BYTES);
                return Delta::Exists;
            }
        }
        let Some((n, digits)) = apply_delta(sh.slots[idx as usize].value(), incr, delta) else {
            self.unreserve(DELTA_MAX_GROWTH_BYTES);
            return Delta::NonNumeric;
        };
        let old_exptime = sh.slots[idx as usize].exptime;
        let new_exptime = opts.touch.unwrap_or(old_exptime);
        if digits.len() <= old_len {
            // memcached rewrites a counter in place when the new number fits (padded
            // with spaces by apply_delta): same item, new CAS, no new link.
            self.unreserve(DELTA_MAX_GROWTH_BYTES);
            let cas = match explicit {
                Some(c) => c,
                None => sh.next_cas(),
            };
            let s = &mut sh.slots[idx as usize];
            let klen = usize::from(s.klen);
            s.data[klen..].copy_from_slice(&digits);
            s.cas = cas;
            s.time = e.now;
            s.exptime = new_exptime;
            return Delta::Value(Counter {
                value: n,
                cas: self.cas_out(cas),
                exptime: old_exptime,
                created: false,
            });
        }
        let flags = sh.slots[idx as usize].flags;
        let growth = (digits.len() - old_len) as u64;
        self.unreserve(DELTA_MAX_GROWTH_BYTES - growth.min(DELTA_MAX_GROWTH_BYTES));
        let data = make_data(key, &[&digits]);
        // The new item's charge is the old one plus `growth`, which is reserved.
        let old_charge = sh.slots[idx as usize].charge();
        sh.remove(idx, &self.used);
        self.used.fetch_add(old_charge, Ordering::Relaxed);
        let (_, cas) = sh.insert(
            hash,
            key.len() as u8,
            data,
            flags,
            new_exptime,
            e.now,
            explicit,
        );
        Delta::Value(Counter {
            value: n,
            cas: self.cas_out(cas),
            exptime: old_exptime,
            created: false,
        })
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
                sh.oldest_cas = sh.next_seq * SHARDS as u64 + sh.index;
            }
        }
        // `maintain` frees the flushed items once the flush is due, as memcached's LRU
        // crawler does within moments; until then a lookup meets them and counts
        // get_flushed, as in memcached.
        self.flush_gen.fetch_add(1, Ordering::Relaxed);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(limit: u64, evict: bool) -> Reference {
        let cfg = Config {
            limit_bytes: limit,
            evict,
            use_cas: true,
            item_size_max: 0,
        };
        Reference::new(cfg, 10, Arc::new(Clock::new()))
    }

    fn get(e: &Reference, key: &[u8]) -> Option<(Vec<u8>, u32, u64)> {
        let mut out = None;
        e.get(key, &GetOpts::default(), &mut |it| {
            out = Some((it.value.to_vec(), it.flags, it.cas));
            false
        });
        out
    }

    #[test]
    fn modes() {
        let e = engine(1 << 20, true);
        assert_eq!(
            e.store(Mode::Add, b"k", 1, 0, b"a", &StoreOpts::default()),
            StoreResult::Stored(get_cas_after(&e))
        );
        assert_eq!(
            e.store(Mode::Add, b"k", 1, 0, b"b", &StoreOpts::default()),
            StoreResult::NotStored
        );
        assert_eq!(
            e.store(Mode::Replace, b"x", 1, 0, b"b", &StoreOpts::default()),
            StoreResult::NotStored
        );
        assert!(matches!(
            e.store(Mode::Append, b"k", 9, 0, b"z", &StoreOpts::default()),
            StoreResult::Stored(_)
        ));
        assert!(matches!(
            e.store(Mode::Prepend, b"k", 9, 0, b"y", &StoreOpts::default()),
            StoreResult::Stored(_)
        ));
        let (v, f, cas) = get(&e, b"k").expect("hit");
        assert_eq!((v.as_slice(), f), (&b"yaz"[..], 1));
        assert_eq!(
            e.store(Mode::Cas(cas + 1), b"k", 0, 0, b"c", &StoreOpts::default()),
            StoreResult::Exists
        );
        assert!(
            matches!(e.store(Mode::Cas(cas), b"k", 0, 0, b"c", &StoreOpts::default()), StoreResult::Stored(c) if c != cas)
        );
        assert_eq!(
            e.store(Mode::Cas(1), b"nope", 0, 0, b"c", &StoreOpts::default()),
            StoreResult::NotFound
        );
        assert_eq!(
            e.delete(b"k", &DeleteOpts::default()),
            DeleteResult::Deleted
        );
        assert_eq!(
            e.delete(b"k", &DeleteOpts::default()),
            DeleteResult::NotFound
        );
    }

    fn get_cas_after(e: &Reference) -> u64 {
        // The first item in an empty shard gets sequence 1.
        let (_, si) = e.locate(b"k");
        SHARDS as u64 + si as u64
    }

    #[test]
    fn append_stops_at_item_size_max() {
        let cfg = Config {
            limit_bytes: 1 << 20,
            evict: true,
            use_cas: true,
            item_size_max: 1024,
        };
        let e = Reference::new(cfg, 10, Arc::new(Clock::new()));
        assert!(matches!(
            e.store(Mode::Set, b"k", 0, 0, &[b'y'; 600], &StoreOpts::default()),
            StoreResult::Stored(_)
        ));
        assert_eq!(
            e.store(
                Mode::Append,
                b"k",
                0,
                0,
                &[b'z'; 600],
                &StoreOpts::default()
            ),
            StoreResult::NotStored
        );
        assert_eq!(
            e.store(
                Mode::Prepend,
                b"k",
                0,
                0,
                &[b'z'; 600],
                &StoreOpts::default()
            ),
            StoreResult::NotStored
        );
        // 1024 - 48 header - 2 (key + NUL) - 2 (CRLF) - 8 (CAS) = 964 bytes fit.
        assert!(matches!(
            e.store(
                Mode::Append,
                b"k",
                0,
                0,
                &[b'z'; 364],
                &StoreOpts::default()
            ),
            StoreResult::Stored(_)
        ));
        assert_eq!(
            e.store(Mode::Append, b"k", 0, 0, b"z", &StoreOpts::default()),
            StoreResult::NotStored
        );
    }

    #[test]
    fn expiry_and_touch() {
        let e = engine(1 << 20, true);
        e.clock.set(100);
        e.store(Mode::Set, b"k", 0, 101, b"v", &StoreOpts::default());
        assert!(get(&e, b"k").is_some());
        e.clock.set(101);
        assert_eq!(
            e.get(b"k", &GetOpts::default(), &mut |_| false),
            Fetch::Expired
        );
        assert_eq!(
            e.get(b"k", &GetOpts::default(), &mut |_| false),
            Fetch::Miss
        );
        e.store(Mode::Set, b"t", 0, 102, b"v", &StoreOpts::default());
        assert!(e.touch(b"t", 0));
        e.clock.set(1000);
        assert!(get(&e, b"t").is_some());
    }

    #[test]
    fn flush_now_and_delayed() {
        let e = engine(1 << 20, true);
        e.clock.set(100);
        e.store(Mode::Set, b"a", 0, 0, b"v", &StoreOpts::default());
        e.store(Mode::Set, b"z", 0, 0, b"v", &StoreOpts::default());
        e.flush_all(None);
        assert_eq!(
            e.get(b"a", &GetOpts::default(), &mut |_| false),
            Fetch::Flushed
        );
        // maintain() frees the rest, as memcached's crawler would.
        assert_eq!(e.stats().curr_items, 1);
        e.maintain();
        assert_eq!((e.stats().curr_items, e.stats().bytes), (0, 0));
        // Stored in the same second after the flush: live.
        e.store(Mode::Set, b"b", 0, 0, b"v", &StoreOpts::default());
        assert!(get(&e, b"b").is_some());
        e.flush_all(Some(110));
        e.clock.set(105);
        assert!(get(&e, b"b").is_some());
        e.clock.set(110);
        assert_eq!(
            e.get(b"b", &GetOpts::default(), &mut |_| false),
            Fetch::Flushed
        );
        // maintain() frees a due delayed flush's items without a lookup.
        e.store(Mode::Set, b"d", 0, 0, b"v", &StoreOpts::default());
        e.flush_all(Some(115));
        e.clock.set(115);
        assert_eq!(e.stats().curr_items, 1);
        e.maintain();
        assert_eq!(e.stats().curr_items, 0);
        e.clock.set(116);
        e.store(Mode::Set, b"c", 0, 0, b"v", &StoreOpts::default());
        assert!(get(&e, b"c").is_some());
    }

    #[test]
    fn incr_decr() {
        let e = engine(1 << 20, true);
        e.store(Mode::Set, b"n", 5, 0, b"10", &StoreOpts::default());
        let total = e.stats().total_items;
        assert!(matches!(
            e.delta(b"n", false, 1, &DeltaOpts::default()),
            Delta::Value(Counter { value: 9, .. })
        ));
        assert_eq!(get(&e, b"n").map(|g| g.0), Some(b"9 ".to_vec()));
        assert_eq!(e.stats().total_items, total, "in place: no new item");
        assert!(matches!(
            e.delta(b"n", true, 91, &DeltaOpts::default()),
            Delta::Value(Counter { value: 100, .. })
        ));
        assert_eq!(
            get(&e, b"n").map(|g| (g.0, g.1)),
            Some((b"100".to_vec(), 5))
        );
        assert_eq!(
            e.delta(b"missing", true, 1, &DeltaOpts::default()),
            Delta::NotFound
        );
        e.store(Mode::Set, b"s", 0, 0, b"abc", &StoreOpts::default());
        assert_eq!(
            e.delta(b"s", true, 1, &DeltaOpts::default()),
            Delta::NonNumeric
        );
    }

    #[test]
    fn eviction_keeps_memory_bounded() {
        let limit = 64 * 1024;
        let e = engine(limit, true);
        for i in 0..10_000u32 {
            let key = format!("key:{i}");
            assert!(matches!(
                e.store(
                    Mode::Set,
                    key.as_bytes(),
                    0,
                    0,
                    &[b'x'; 100],
                    &StoreOpts::default()
                ),
                StoreResult::Stored(_)
            ));
            assert!(e.stats().bytes <= limit);
        }
        let st = e.stats();
        assert!(st.evictions > 0);
        assert!(st.curr_items < 10_000);
        assert_eq!(
            st.bytes,
            st.curr_items * (ITEM_OVERHEAD_BYTES + 100 + 8) - extra_digits(&e)
        );
    }

    /// Keys "key:0".."key:9999" differ in length; count the bytes below 4 digits.
    fn extra_digits(e: &Reference) -> u64 {
        let mut short = 0;
        for i in 0..10_000u32 {
            let key = format!("key:{i}");
            if get(e, key.as_bytes()).is_some() {
                short += 8 - key.len() as u64;
            }
        }
        short
    }

    #[test]
    fn no_evict_reports_out_of_memory() {
        let e = engine(4096, false);
        let mut stored = 0;
        for i in 0..100u32 {
            match e.store(
                Mode::Set,
                format!("k{i}").as_bytes(),
                0,
                0,
                &[b'x'; 100],
                &StoreOpts::default(),
            ) {
                StoreResult::Stored(_) => stored += 1,
                StoreResult::OutOfMemory => break,
                other => panic!("{other:?}"),
            }
        }
        assert!(stored > 0 && stored < 100);
        assert_eq!(e.stats().evictions, 0);
        // A failed set removes the old value.
        assert_eq!(
            e.store(Mode::Set, b"k0", 0, 0, &[b'x'; 1000], &StoreOpts::default()),
            StoreResult::OutOfMemory
        );
        assert!(get(&e, b"k0").is_none());
    }
}
