//! A shard of the reference engine: its items ([`Slot`]s, key and value in one box),
//! the hash table over them, their LRU list, its CAS sequence and counters, and how
//! an item's liveness is decided ([`Shard::life`]).
//!
//! Locks: the shard's. A `Shard` is only reachable through its `Mutex` in
//! `Reference::shards`, so every method here (`&self`/`&mut self`) runs under that
//! lock; none takes another. `used` (the engine-wide byte total) is an atomic
//! passed in.
//!
//! Imports: nothing of the engine's but the crate's shared types.

use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashTable;

use crate::clock::RelTime;
use crate::{Evicted, EvictionListener, Fetch, Walked};

/// Shards: enough that 4–16 workers rarely meet on one lock.
pub const SHARDS: usize = 64;
/// No slot: the end of the LRU list.
pub const NIL: u32 = u32::MAX;
/// Bytes charged per item on top of its key and value: the slot (56 B), its hash
/// table entry (4 B + 1 control byte, at 7/8 load), and the allocator's header for
/// the data box (about 16 B).
pub const ITEM_OVERHEAD_BYTES: u64 = 80;

pub struct Slot {
    /// Key followed by value; empty while the slot is free.
    pub data: Box<[u8]>,
    hash: u64,
    /// Internal CAS unique, always non-zero for a used slot (reported as 0 with -C).
    pub cas: u64,
    pub flags: u32,
    pub exptime: RelTime,
    /// memcached's `it->time`: when the item was stored or last accessed as
    /// [`crate::Item::atime`] describes (read by delayed flush_all and eviction ages).
    pub time: RelTime,
    prev: u32,
    next: u32,
    pub klen: u8,
    pub fetched: bool,
    pub stale: bool,
    pub token_sent: bool,
}

impl Slot {
    pub fn key(&self) -> &[u8] {
        &self.data[..usize::from(self.klen)]
    }
    pub fn value(&self) -> &[u8] {
        &self.data[usize::from(self.klen)..]
    }
    pub fn charge(&self) -> u64 {
        self.data.len() as u64 + ITEM_OVERHEAD_BYTES
    }
}

/// Why a stored item is not live.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Life {
    Live,
    Expired,
    Flushed,
}

/// The flush markers every liveness check reads.
#[derive(Clone, Copy)]
pub struct Epoch {
    pub now: RelTime,
    /// memcached's `settings.oldest_live`: items stored at or before it are invalid
    /// once it is in the past. 0 = no flush.
    pub oldest_live: RelTime,
}

#[derive(Default)]
pub struct Counters {
    pub total_items: u64,
    pub evictions: u64,
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub evicted_unfetched: u64,
    pub evicted_nonzero: u64,
    pub crawler_reclaimed: u64,
    /// (when, seconds since last use) of this shard's latest eviction.
    pub last_eviction: (RelTime, u32),
}

pub struct Shard {
    index: u64,
    pub table: HashTable<u32>,
    pub slots: Vec<Slot>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used: the next to evict.
    pub tail: u32,
    /// Next CAS sequence in this shard; uniques are `seq * SHARDS + index`.
    next_seq: u64,
    /// memcached's `settings.oldest_cas`, per shard: items with a smaller CAS are
    /// invalid once a flush is due. 0 = none.
    pub oldest_cas: u64,
    pub curr_items: u64,
    pub counters: Counters,
}

impl Shard {
    pub fn new(index: usize, capacity: usize) -> Self {
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

    /// The unique [`Shard::next_cas`] will give next.
    pub fn upcoming_cas(&self) -> u64 {
        self.next_seq * SHARDS as u64 + self.index
    }

    pub fn next_cas(&mut self) -> u64 {
        let cas = self.upcoming_cas();
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

    /// A walk's step ([`crate::Engine::walk`]): shows `visit` the live items of slots
    /// `from..`, examining at most `max` slots. Returns the slot to go on from and
    /// whether `visit` asked to stop (after the item of the slot before it).
    pub fn walk(
        &self,
        from: u32,
        max: usize,
        e: Epoch,
        use_cas: bool,
        visit: &mut dyn FnMut(&Walked<'_>) -> bool,
    ) -> (u32, bool) {
        let end = self.slots.len().min(from as usize + max);
        for i in from as usize..end {
            let s = &self.slots[i];
            if s.data.is_empty() || self.life(i as u32, e) != Life::Live {
                continue;
            }
            let item = Walked {
                key: s.key(),
                flags: s.flags,
                exptime: s.exptime,
                atime: s.time,
                cas: if use_cas { s.cas } else { 0 },
                fetched: s.fetched,
                size: s.charge(),
                class: 1,
            };
            if !visit(&item) {
                return (i as u32 + 1, true);
            }
        }
        (end as u32, false)
    }

    /// Whether a walk at slot `pos` has passed the last slot.
    pub fn walked_past(&self, pos: u32) -> bool {
        pos as usize >= self.slots.len()
    }

    /// Finds a live item; a dead one found on the way is removed.
    /// [`Shard::find_live`] that leaves a dead item in place (`Engine::peek`).
    pub fn peek(&self, hash: u64, key: &[u8], e: Epoch) -> Result<u32, Fetch> {
        let idx = self.find(hash, key).ok_or(Fetch::Miss)?;
        match self.life(idx, e) {
            Life::Live => Ok(idx),
            Life::Expired => Err(Fetch::Expired),
            Life::Flushed => Err(Fetch::Flushed),
        }
    }

    pub fn find_live(
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

    pub fn bump(&mut self, idx: u32) {
        if self.head != idx {
            self.unlink_lru(idx);
            self.push_head(idx);
        }
    }

    /// Unlinks and frees a slot, returning its bytes to `used`.
    pub fn remove(&mut self, idx: u32, used: &AtomicU64) {
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
    pub fn insert(
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

    /// memcached's `do_item_bump` as [`crate::GetOpts::no_bump`] describes it.
    pub fn bump_fetch(&mut self, idx: u32, now: RelTime) {
        self.bump(idx);
        let s = &mut self.slots[idx as usize];
        if s.fetched {
            s.time = now;
        }
        s.fetched = true;
    }

    /// Frees the LRU tail if it may go: an expired or flushed item always, a live one
    /// only when eviction is on (shown to `listener` first). Returns whether something
    /// was freed.
    pub fn evict_tail(
        &mut self,
        e: Epoch,
        evict: bool,
        used: &AtomicU64,
        listener: Option<&dyn EvictionListener>,
    ) -> bool {
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
                if let Some(l) = listener {
                    l.evicted(&Evicted {
                        key: s.key(),
                        value_len: s.value().len(),
                        flags: s.flags,
                        exptime: s.exptime,
                        atime: s.time,
                        fetched,
                    });
                }
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

    /// Frees every flushed item (memcached's LRU crawler after a flush_all).
    pub fn remove_flushed(&mut self, e: Epoch, used: &AtomicU64) {
        let mut idx = self.tail;
        while idx != NIL {
            let prev = self.slots[idx as usize].prev;
            if self.life(idx, e) == Life::Flushed {
                self.remove(idx, used);
                self.counters.crawler_reclaimed += 1;
            }
            idx = prev;
        }
    }
}

pub fn make_data(key: &[u8], parts: &[&[u8]]) -> Box<[u8]> {
    let len = key.len() + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(key);
    for p in parts {
        v.extend_from_slice(p);
    }
    v.into_boxed_slice()
}
