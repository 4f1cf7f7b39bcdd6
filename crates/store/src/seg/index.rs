//! The hash index: 4096 partitions, each a table of 64-byte buckets of eight 8-byte
//! slots, two candidate buckets per key, cuckoo displacement, lock-free lookups.
//!
//! ```text
//!  hash (64 bits): [63..52] partition  [47..32] tag  [31..0] first bucket
//!  slot (64 bits): tag (16) | segment id (24) | offset / 2 (24)      0 = empty
//!  buckets: b1 = reduce(rotl(hash low 32, salt), n)   b2 = g(tag) - b1 mod n
//!
//!  locks[p]:  Mutex<Counts>    writers of partition p, one at a time
//!  heads[p]:  table: AtomicU64 = bucket count (16 bits) | address (48) ──► [Bucket; n]
//!             moves: AtomicU64   sequence count of cuckoo moves (odd: moving)
//!                                       Bucket = [AtomicU64; 8]  (one cache line)
//! ```
//!
//! A key may live in bucket `b1` or `b2`; an insert takes the emptier one
//! (MemC3-style two choices). `b2` is `b1`'s partner under the key's tag (partial-key
//! cuckoo hashing), so a slot's other bucket is known from the slot alone. When both
//! are full, a breadth-first search (at most 128 buckets, chains of at most 4 moves)
//! finds a chain of slots each movable to its other bucket, ending at a bucket with
//! room; the chain moves, last slot first, and the key takes the freed slot. Tables
//! so run 95–99% full before they grow. A table grows (or, under 85% full, is first
//! rebuilt at its size under the next bucket salt, a rotation of the hash's low 32
//! bits kept in the table's packed word) only when the search fails; it grows by an
//! eighth, and doubles on each further failure of the same insert (hash flooding:
//! keys sharing partition, tag and first bucket can never be moved apart). A
//! rebuild re-reads each item's key to rehash it, under the partition's lock, so it
//! pauses only that partition's writers, for a time bounded by the partition's item
//! count (1/4096 of the cache). Readers never wait for a rebuild: they go on
//! reading the old table, which is freed through [`super::epoch`] once no reader
//! can hold it. `maintain` rebuilds a table under a quarter full smaller the same
//! way ([`Locked::shrink`]), so the index, charged against `-m`, does not keep
//! memory sized for items long gone.
//!
//! Cuckoo moves and lock-free readers (MemC3's scheme): each move copies the slot
//! into its other bucket before clearing the old one, so a key is always in one of
//! its buckets; but a reader that scanned `b1` before the key came into it and
//! `b2` after it left would miss it. The partition's `moves` count is a seqlock
//! around each chain: the writer makes it odd (Relaxed store, Release fence), moves,
//! and makes it even (Release store). [`Index::find`] loads it (Acquire) before its
//! scan; on a miss, after an Acquire fence, loads it again and scans again if it
//! was odd or changed: a slot value a move wrote, seen by the scan, makes the second
//! load see the odd count. Hits cost one more load (in the table word's cache
//! line); misses two. The unit test `readers_never_miss_a_key_that_moves` runs readers
//! against a churning writer. A key dump's walk ([`Index::table_of`]) checks the
//! count too ([`Index::moves_word`], [`Index::moved_since`]): a chain of moves in
//! the partition it is walking starts that partition again (`walk.rs`).
//!
//! Readers load slots with Acquire; writers change slots with Release stores under
//! the partition lock, after the item the slot names is completely written.
//!
//! Locks: a partition lock, the only lock here. [`Index::find`], [`Index::peek`],
//! [`Index::prefetch`] and [`Index::table_of`] (a key dump's walk) take none: they
//! take an [`epoch::Guard`] (the caller is pinned). [`Index::lock`] takes a
//! partition's lock and returns it as a [`Locked`], whose methods run under it (the
//! guard proves it). `counts`, `size`
//! and `reset_total_items` take each partition's lock in turn, so they must be
//! called with none held. `collect` takes only the retired-table list's own lock.
//!
//! Imports: epoch, tables (slots, buckets, the tables' memory); inserts go through
//! cuckoo.rs's `Table::place_new` and `Table::place_or_move`.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use super::epoch;
use super::tables::{
    decode, encode, free_table, initial_table, new_table, slot_tag, table_bytes, table_len, tag_of,
    trim_malloc, unpack, INITIAL_BUCKETS, MAP_MIN_BUCKETS, MAX_BUCKETS, RESALT_LOAD_PCT,
    TRIM_BYTES,
};
pub use super::tables::{Loc, Table, MAX_OFFSET, MAX_SEGMENTS, SLOTS_PER_BUCKET};

mod stats;

pub const PARTITIONS: usize = 4096;
const PARTITION_SHIFT: u32 = 52;

/// Whether two hashes share a partition and both candidate buckets at every table
/// size and salt, and so cannot be moved apart by cuckoo displacement: what a
/// hash-flooding attacker needs of his keys (60 bits equal: partition, tag and the
/// 32 bits that choose the first bucket).
pub fn same_buckets_everywhere(a: u64, b: u64) -> bool {
    Index::part(a) == Index::part(b) && a as u32 == b as u32 && tag_of(a) == tag_of(b)
}

impl Table<'_> {
    /// Places every item of `from` in this (unpublished) table, hashing each by its
    /// location with `rehash`; false when one does not fit. Counts the items it
    /// re-read, and the rebuild, in `index`'s counters.
    fn take_all(&self, from: &Table<'_>, rehash: &impl Fn(Loc) -> u64, index: &Index) -> bool {
        index.rebuilds.fetch_add(1, Ordering::Relaxed);
        let mut n = 0u64;
        let all = from
            .buckets
            .iter()
            .flat_map(|b| b.slots.iter())
            .map(|s| s.load(Ordering::Relaxed))
            .filter(|&v| v != 0)
            .all(|v| {
                n += 1;
                self.place_new(rehash(decode(v)), v)
            });
        index.rehashed.fetch_add(n, Ordering::Relaxed);
        all
    }
}

/// Per-partition counts, kept under the partition lock.
#[derive(Default, Clone, Copy)]
pub struct Counts {
    /// Linked items.
    pub items: u64,
    /// Bytes of linked items (their size in segments).
    pub bytes: u64,
    /// Items ever linked by a store (memcached's total_items).
    pub total_items: u64,
    /// The largest engine-given CAS unique of the items that left this partition
    /// (deleted, evicted, expired, flushed): a new version of any key here gets a
    /// larger one, so a key deleted and stored again still orders after its past
    /// (memcached's one counter does that).
    pub floor: u64,
}

/// A partition's two words, side by side so that a lookup's second load is in the
/// cache line of its first.
#[repr(C, align(16))]
struct Head {
    /// The partition's current table, packed (see `pack` in tables.rs). Replaced
    /// only under the partition's lock; a replaced table is retired to the epoch
    /// limbo because readers may still be in it.
    table: AtomicU64,
    /// Cuckoo moves in the current table, a sequence count: odd while a chain of
    /// slots moves, changed only under the partition's lock (Relaxed store, then a
    /// Release fence, before the moves; a Release store after). [`Index::find`]
    /// loads it (Acquire) before its scan and again (after an Acquire fence) on a
    /// miss, and retries when it was odd or changed.
    moves: AtomicU64,
}

pub struct Index {
    /// Per partition, its writers' lock: every slot change, table rebuilds, and the
    /// counts of the partition are made under it.
    locks: Box<[Mutex<Counts>]>,
    /// Per partition, its current table and its move count ([`Head`]).
    heads: Box<[Head]>,
    /// Replaced tables waiting for readers to leave them: (epoch, packed table).
    retired: Mutex<Vec<(u64, u64)>>,
    /// Bytes of every table allocated and not yet freed (current and retired): what
    /// the index holds, charged against `-m` by the engine. Relaxed: a sum, changed
    /// under a partition lock or the retired list's, read as an estimate.
    bytes: AtomicU64,
    /// Bytes of small (malloc) tables freed since malloc was last trimmed. Relaxed:
    /// a threshold counter; two threads trimming at once is harmless.
    small_freed: AtomicU64,
    /// Table rebuilds in progress (memcached's hash_is_expanding). Relaxed: only
    /// `stats` reads it, and nothing is published through it.
    expanding: AtomicU64,
    /// Tables built by rebuilds (grow or shrink, each attempt), and the items those
    /// rebuilds re-read to rehash (`stats`: memcrab_index_rebuilds,
    /// memcrab_index_rehashed_items): the work hash flooding would multiply.
    /// Relaxed: plain statistics.
    rebuilds: AtomicU64,
    rehashed: AtomicU64,
}

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

impl Index {
    pub fn new() -> Index {
        Index {
            locks: (0..PARTITIONS)
                .map(|_| Mutex::new(Counts::default()))
                .collect(),
            heads: (0..PARTITIONS)
                .map(|_| Head {
                    table: AtomicU64::new(initial_table()),
                    moves: AtomicU64::new(0),
                })
                .collect(),
            retired: Mutex::new(Vec::new()),
            bytes: AtomicU64::new((PARTITIONS * table_bytes(INITIAL_BUCKETS)) as u64),
            small_freed: AtomicU64::new(0),
            expanding: AtomicU64::new(0),
            rebuilds: AtomicU64::new(0),
            rehashed: AtomicU64::new(0),
        }
    }

    fn part(h: u64) -> usize {
        (h >> PARTITION_SHIFT) as usize
    }

    /// The current table of `h`'s partition.
    ///
    /// # Safety
    /// The caller is pinned or holds the partition's lock, and does not keep the
    /// table past that.
    unsafe fn table(&self, h: u64) -> Table<'_> {
        // SAFETY: per the contract the table is not freed meanwhile.
        unsafe { unpack(self.heads[Self::part(h)].table.load(Ordering::Acquire)) }
    }

    /// Partition `p`'s current table, packed: compare two of these to learn whether
    /// the table was replaced in between (see [`Index::table_of`]).
    pub fn table_word(&self, p: usize) -> u64 {
        self.heads[p].table.load(Ordering::Acquire)
    }

    /// Partition `p`'s cuckoo move count ([`Head::moves`]), for a lock-free walk:
    /// slots read after this load (Acquire) and before [`Index::moved_since`]
    /// returns `false` saw no chain of moves in between.
    pub fn moves_word(&self, p: usize) -> u64 {
        self.heads[p].moves.load(Ordering::Acquire)
    }

    /// Whether a chain of cuckoo moves ran in partition `p` since `before` was loaded
    /// by [`Index::moves_word`], or was running then (odd): the seqlock's read side,
    /// as in [`Index::find`].
    pub fn moved_since(&self, p: usize, before: u64) -> bool {
        fence(Ordering::Acquire);
        before & 1 != 0 || self.heads[p].moves.load(Ordering::Relaxed) != before
    }

    /// The table a word from [`Index::table_word`] names, for a lock-free walk of
    /// its slots.
    ///
    /// # Safety
    /// The caller is pinned, loaded `word` while pinned, and does not keep the table
    /// past its pin (a replaced table is freed once no reader pinned before its
    /// retirement remains).
    pub unsafe fn table_of<'a>(&'a self, word: u64, _pin: &'a epoch::Guard) -> Table<'a> {
        // SAFETY: per the contract the table is not freed while the pin lives.
        unsafe { unpack(word) }
    }

    /// Lock-free lookup: the location of the item whose key `is_key` accepts.
    /// A miss is checked against the partition's move count: a key a concurrent
    /// cuckoo chain moved from the second bucket into the first, after this scan
    /// passed the first, is searched for again ([`Head::moves`]).
    pub fn find(
        &self,
        h: u64,
        _pin: &epoch::Guard,
        mut is_key: impl FnMut(Loc) -> bool,
    ) -> Option<Loc> {
        let head = &self.heads[Self::part(h)];
        loop {
            // SAFETY: tables are freed only after an epoch no pinned reader
            // predates, and the caller is pinned (`_pin`).
            let t = unsafe { unpack(head.table.load(Ordering::Acquire)) };
            let before = head.moves.load(Ordering::Acquire);
            let (b1, b2) = t.buckets_of(h);
            let tag = tag_of(h);
            for b in [b1, b2] {
                for s in &t.buckets[b].slots {
                    let v = s.load(Ordering::Acquire);
                    if v != 0 && slot_tag(v) == tag {
                        let loc = decode(v);
                        if is_key(loc) {
                            return Some(loc);
                        }
                    }
                }
                if b1 == b2 {
                    break;
                }
            }
            // The seqlock's read side: a slot value a move wrote, seen above, makes
            // the count loaded here differ from `before`.
            fence(Ordering::Acquire);
            if before & 1 == 0 && head.moves.load(Ordering::Relaxed) == before {
                return None;
            }
            // A chain moves a few slots under the partition lock; wait it out.
            std::hint::spin_loop();
        }
    }

    /// Starts loading the two candidate buckets of `h` into the cache.
    pub fn prefetch(&self, h: u64, _pin: &epoch::Guard) {
        // SAFETY: pinned, so the table is not freed (see `find`).
        let t = unsafe { self.table(h) };
        let (b1, b2) = t.buckets_of(h);
        prefetch(&t.buckets[b1]);
        prefetch(&t.buckets[b2]);
    }

    /// The location a slot with `h`'s tag names, without comparing keys (a hint).
    pub fn peek(&self, h: u64, _pin: &epoch::Guard) -> Option<Loc> {
        // SAFETY: pinned, so the table is not freed (see `find`).
        let t = unsafe { self.table(h) };
        let (b1, b2) = t.buckets_of(h);
        let tag = tag_of(h);
        [b1, b2].into_iter().find_map(|b| {
            t.buckets[b].slots.iter().find_map(|s| {
                let v = s.load(Ordering::Relaxed);
                (v != 0 && slot_tag(v) == tag).then(|| decode(v))
            })
        })
    }

    pub fn lock(&self, h: u64) -> Locked<'_> {
        self.lock_part(Self::part(h))
    }

    /// Partition `part`'s lock (`part < PARTITIONS`).
    pub fn lock_part(&self, part: usize) -> Locked<'_> {
        Locked {
            index: self,
            part,
            counts: self.locks[part].lock(),
        }
    }

    /// Frees a table and takes it out of the byte count. Small tables go back to
    /// malloc, which keeps freed memory; once [`TRIM_BYTES`] of them were freed,
    /// `malloc_trim` gives the free pages back to the kernel.
    ///
    /// # Safety
    /// `table` came from [`new_table`], and no reader or writer can reach it.
    unsafe fn free(&self, table: u64) {
        let n = (table >> 48) as usize;
        // SAFETY: per the contract.
        unsafe { free_table(table) };
        let b = table_bytes(n) as u64;
        self.bytes.fetch_sub(b, Ordering::Relaxed);
        if n < MAP_MIN_BUCKETS && self.small_freed.fetch_add(b, Ordering::Relaxed) + b >= TRIM_BYTES
        {
            self.small_freed.store(0, Ordering::Relaxed);
            trim_malloc();
        }
    }

    /// Bytes of all tables, current and retired but not yet freed.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Frees retired tables no reader can be in.
    pub fn collect(&self) {
        let mut retired = self.retired.lock();
        self.free_quiescent(&mut retired);
    }

    /// Frees the tables of `retired` (the locked list) that no reader can be in.
    fn free_quiescent(&self, retired: &mut Vec<(u64, u64)>) {
        retired.retain(|&(e, table)| {
            if !epoch::is_quiescent(e) {
                return true;
            }
            // SAFETY: retired, and no reader can be in it any more.
            unsafe { self.free(table) };
            false
        });
    }
}

/// The bucket count a full table of `n` buckets grows to: an eighth more (at least
/// the first table's size), at most [`MAX_BUCKETS`].
fn grown(n: usize) -> usize {
    (n + (n / 8).max(INITIAL_BUCKETS)).min(MAX_BUCKETS)
}

/// Asks the CPU to start loading the cache line at `p`; a no-op elsewhere.
#[inline]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A locked partition.
pub struct Locked<'a> {
    index: &'a Index,
    part: usize,
    pub counts: MutexGuard<'a, Counts>,
}

/// A slot found under the lock: (bucket, slot) in the current table.
#[derive(Clone, Copy, Debug)]
pub struct SlotPos(usize, usize);

impl Locked<'_> {
    fn table(&self) -> Table<'_> {
        // SAFETY: we hold the partition lock, so the table is neither replaced nor
        // freed while `self` lives.
        unsafe { unpack(self.index.heads[self.part].table.load(Ordering::Acquire)) }
    }

    /// The slot of the item whose key `is_key` accepts.
    pub fn find(&self, h: u64, mut is_key: impl FnMut(Loc) -> bool) -> Option<(SlotPos, Loc)> {
        let t = self.table();
        let (b1, b2) = t.buckets_of(h);
        let tag = tag_of(h);
        for b in [b1, b2] {
            for (i, s) in t.buckets[b].slots.iter().enumerate() {
                let v = s.load(Ordering::Relaxed);
                if v != 0 && slot_tag(v) == tag {
                    let loc = decode(v);
                    if is_key(loc) {
                        return Some((SlotPos(b, i), loc));
                    }
                }
            }
            if b1 == b2 {
                break;
            }
        }
        None
    }

    /// The slot that points exactly at `loc` (an item's own slot, if it is linked).
    pub fn find_loc(&self, h: u64, loc: Loc) -> Option<SlotPos> {
        let want = encode(h, loc);
        let t = self.table();
        let (b1, b2) = t.buckets_of(h);
        for b in [b1, b2] {
            if let Some(i) = t.buckets[b]
                .slots
                .iter()
                .position(|s| s.load(Ordering::Relaxed) == want)
            {
                return Some(SlotPos(b, i));
            }
        }
        None
    }

    pub fn replace(&mut self, pos: SlotPos, h: u64, loc: Loc) {
        self.table().buckets[pos.0].slots[pos.1].store(encode(h, loc), Ordering::Release);
    }

    pub fn remove(&mut self, pos: SlotPos) {
        self.table().buckets[pos.0].slots[pos.1].store(0, Ordering::Release);
    }

    /// Links a new item. When both candidate buckets are full, rebuilds the table
    /// larger first; `rehash` gives the hash of the item at a location (its key is
    /// read from segment memory, which stays valid: linked items are not freed while
    /// their partition is locked). A table already at its largest (65,535 buckets,
    /// half a million items in this partition), or one that cannot grow because the
    /// kernel has no memory, makes room by dropping a slot of the first bucket
    /// instead: its location is returned, for the caller to account.
    pub fn insert(&mut self, h: u64, loc: Loc, rehash: impl Fn(Loc) -> u64) -> Option<Loc> {
        let value = encode(h, loc);
        let old = self.table();
        if old.place_or_move(h, value, &self.index.heads[self.part].moves) {
            return None;
        }
        let displace = |t: &Table<'_>| {
            let (b1, _) = t.buckets_of(h);
            decode(t.buckets[b1].slots[0].swap(value, Ordering::AcqRel))
        };
        if old.len() >= MAX_BUCKETS {
            return Some(displace(&old));
        }
        if (self.counts.items as usize) * 100 < old.slot_count() * RESALT_LOAD_PCT {
            if let Some(packed) = self.rebuilt(&old, old.len(), old.salt + 1, &rehash, h, value) {
                self.publish(packed);
                return None;
            }
        }
        self.index.expanding.fetch_add(1, Ordering::Relaxed);
        let mut n = table_len(grown(old.len()));
        let (packed, victim) = loop {
            let Some(packed) = self.new_table(n, old.salt) else {
                self.index.expanding.fetch_sub(1, Ordering::Relaxed);
                return Some(displace(&old));
            };
            // SAFETY: just made, and not yet shared with anyone.
            let t = unsafe { unpack(packed) };
            if t.take_all(&old, &rehash, self.index) && t.place_new(h, value) {
                break (packed, None);
            }
            if n == MAX_BUCKETS {
                // At the largest size a last failed place can only be the new item's
                // (old items fit before): make room for it as above.
                break (packed, Some(displace(&t)));
            }
            // SAFETY: unpublished: no reader can be in it.
            unsafe { self.index.free(packed) };
            // Once an eighth more did not do, hash flooding is likelier than bad luck:
            // double, so that a flood reaches the largest table in a few rebuilds.
            n = table_len((n * 2).min(MAX_BUCKETS));
        };
        self.publish(packed);
        self.index.expanding.fetch_sub(1, Ordering::Relaxed);
        victim
    }

    /// The table rebuilt as `n` buckets under bucket salt `salt`, with the new slot
    /// `value` of hash `h` placed, to publish; None (nothing changed) when something
    /// does not fit or there is no memory. `rehash` as for `insert`.
    fn rebuilt(
        &self,
        old: &Table<'_>,
        n: usize,
        salt: u32,
        rehash: &impl Fn(Loc) -> u64,
        h: u64,
        value: u64,
    ) -> Option<u64> {
        let packed = self.new_table(n, salt)?;
        // SAFETY: just made, and not yet shared with anyone.
        let t = unsafe { unpack(packed) };
        if t.take_all(old, rehash, self.index) && t.place_new(h, value) {
            return Some(packed);
        }
        // SAFETY: unpublished: no reader can be in it.
        unsafe { self.index.free(packed) };
        None
    }

    /// Sizes an empty partition's table for about `items` items at 80% load, so
    /// that a bulk load whose size is known (a warm restart) does not rebuild the
    /// table a dozen times on the way up, re-reading every key each time. Does
    /// nothing to a partition that holds items or already has room.
    pub fn reserve(&mut self, items: usize) {
        let old = self.table();
        let want = (items + items / 4)
            .div_ceil(SLOTS_PER_BUCKET)
            .clamp(INITIAL_BUCKETS, MAX_BUCKETS);
        let n = table_len(want);
        if self.counts.items != 0 || n <= old.len() {
            return;
        }
        let Some(packed) = self.new_table(n, old.salt) else {
            return;
        };
        self.publish(packed);
    }

    /// Rebuilds the table smaller when under a quarter of its slots hold items
    /// (none of the partition's items were lost: tables only grow on insert, so a
    /// table sized for a burst of tiny items would stay charged against `-m` after
    /// the workload moved to larger ones). The new table is about half full, so it
    /// does not grow back soon. `rehash` as for [`Locked::insert`]. Returns whether
    /// it shrank.
    pub fn shrink(&mut self, rehash: impl Fn(Loc) -> u64) -> bool {
        let old = self.table();
        let items = self.counts.items as usize;
        if old.len() <= INITIAL_BUCKETS || items * 4 >= old.slot_count() {
            return false;
        }
        let mut n = table_len((items * 2).div_ceil(SLOTS_PER_BUCKET).max(INITIAL_BUCKETS));
        while n < old.len() {
            let Some(packed) = self.new_table(n, old.salt) else {
                return false;
            };
            // SAFETY: just made, and not yet shared with anyone.
            let t = unsafe { unpack(packed) };
            if t.take_all(&old, &rehash, self.index) {
                self.publish(packed);
                return true;
            }
            // SAFETY: unpublished: no reader can be in it.
            unsafe { self.index.free(packed) };
            n = table_len(n + (n / 4).max(1));
        }
        false
    }

    /// A new table of `n` buckets, its bytes counted in the index's total (charged
    /// against `-m`) from now until it is freed.
    fn new_table(&self, n: usize, salt: u32) -> Option<u64> {
        let packed = new_table(n, salt)?;
        self.index
            .bytes
            .fetch_add(table_bytes(n) as u64, Ordering::Relaxed);
        Some(packed)
    }

    /// Makes `packed` the partition's table; the one it replaces goes to
    /// [`Locked::retire`].
    fn publish(&mut self, packed: u64) {
        let old = self.index.heads[self.part]
            .table
            .swap(packed, Ordering::AcqRel);
        self.retire(old);
    }

    /// Hands a replaced table to the epoch limbo: freed once no reader can be in it.
    fn retire(&self, packed: u64) {
        let e = epoch::advance();
        let mut retired = self.index.retired.lock();
        self.index.free_quiescent(&mut retired);
        retired.push((e, packed));
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        let tables = self.heads.iter().map(|t| t.table.load(Ordering::Relaxed));
        let retired = self.retired.get_mut().drain(..).map(|(_, t)| t);
        for table in tables.chain(retired).collect::<Vec<_>>() {
            // SAFETY: with `&mut self` no reader or writer can hold a table.
            unsafe { self.free(table) };
        }
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
