//! The segment engine: items packed into fixed-size segments, a compact tagged hash
//! index, lock-free hits, per-thread allocation regions, S3-FIFO eviction of whole
//! segments with reinsertion of hot items, and TTL-grouped segments that expire whole.
//!
//! ```text
//!   get ──hash──► Index (4096 partitions, 64-B buckets of 8-B tagged slots)  [no lock]
//!                   └─ slot = tag | segment id | offset ──► Desc[id].ptr + offset ──► item
//!
//!   set ──► Region[thread] (Mutex, uncontended) ─► active segment of the item's TTL bucket
//!            │  bump-allocate, write the item                 ▲ full: seal it, open another
//!            │                                                │
//!            └─► partition lock: check the mode, link the slot Arena (Mutex): free list,
//!                                                             FIFO of sealed segments,
//!                                                             eviction, epoch limbo
//! ```
//!
//! `docs/storage.md` explains the design, its concurrency protocol and why it is
//! safe, with the measurements behind each choice.
//!
//! Lock order: region → arena → partition. A partition lock is never held while a
//! region or the arena is locked by the same thread, and nothing allocates while
//! pinned, so reclamation (which waits for pinned readers while holding the arena
//! lock) cannot deadlock. A function that expects a lock held says so in its type:
//! it takes the guard or what it guards (`&mut Arena` for the arena lock, `&Locked`
//! or `&mut Locked` for a partition lock); the two that need a region's lock or the
//! arena's for a segment they write or walk (`Active::append`, `Seg::sweep_segment`)
//! say so in their safety contracts. Every other function takes the locks it needs
//! itself and expects none held.
//!
//! The files, each using only those below it, and the lock its functions expect
//! held. `mod.rs` defines [`Seg`]; the `impl Seg` files above the line read its
//! fields and its two helpers (`hash`, `open`) and add methods for the files above
//! them; the files below the line know nothing of `Seg`. This is the one map of
//! `seg/`; the crate docs point here:
//!
//! ```text
//!   file          holds                                                  lock held
//!   mod.rs        Seg, its constructor, the Engine impl (lock-free get)  none
//!                 and next_unique (the uniques a place cannot order); its
//!                 unit tests: tests.rs, cas_tests.rs, persist_tests.rs
//!   persist.rs    warm restart (-e): open_memory_file, restore, save     none (all threads stopped)
//!                 (public: the server opens its memory file through it)
//!   ops.rs        get_exclusive, touch_copy, store, delete, incr/decr    none
//!   upkeep.rs     maintain (expiry, flush sweep, index shrink), flush_all none
//!   walk.rs       walk: the key dump's lock-free walk of the index       none (pins)
//!   write.rs      write_item, a thread's region, take_segment, make_room none / arena
//!   evict.rs      evict_one, compact_mostly_dead, empty_segment          arena
//!   link.rs       find_live_locked, link, unlink, link_if_current,       partition
//!                 check_order (a new version's unique above the key's past)
//!   ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ below: no Seg ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─ ─
//!   lease.rs      Lender, Lease: values lent past the lookup (lend count)  none
//!                 (the crate root's `Item` names them from here)
//!   arena.rs      Arena: ids, memory, free list, limbo, spare; Active,   arena
//!                 Region (a region's active segments)
//!   segments.rs   Desc, Descs (the table), segment memory, Life, Flush   none
//!   mapfile.rs    MemFile: the -e memory file, its units' allocator       arena
//!   index.rs      Index: partitions of tagged slots; Locked              pinned / partition
//!     index/stats.rs  its figures for stats: counts, sizes, rebuilds, moves  partition / none
//!                 (its unit tests: index_tests.rs)
//!   cuckoo.rs     the index's cuckoo displacement: search, moves         partition
//!                 (Table's place_new and place_or_move)
//!   tables.rs     the index's slots and tables: Loc, the slot encoding,  none
//!                 a key's two buckets, Table (a table's buckets as
//!                 readers see them), Bucket, alloc, packing
//!   fifo.rs       Fifo: S3-FIFO's small and main queues, victim choice   arena
//!   meta.rs       the restart metadata file: encode, strict decode       none
//!   strict.rs     opening -e's files as sshd's StrictModes: owner, mode   none
//!   keyhash.rs    KeyHasher: the index hash under a secret seed           none
//!   item.rs       the item layout: New (write), View (read)              none
//!   epoch.rs      epoch-based reclamation: pin, advance, is_quiescent    none
//! ```

mod arena;
mod cuckoo;
mod epoch;
mod evict;
mod fifo;
mod index;
mod item;
mod keyhash;
// The crate root's `Item` names `Lease` and `Lender` here, not through this file.
pub(crate) mod lease;
mod link;
mod mapfile;
// Public for the warm-restart fuzz target (fuzz/checks), which forges metadata files.
pub mod meta;
mod ops;
// Public: the server opens its `-e` memory file through it.
pub mod persist;
mod segments;
mod strict;
mod tables;
mod upkeep;
mod walk;
mod write;

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::clock::{Clock, RelTime};
use crate::{
    Config, DeleteOpts, DeleteResult, Delta, DeltaOpts, Engine, EvictionListener, Fetch, GetOpts,
    Item, Met, Mode, SegmentStats, Stats, StoreOpts, StoreResult, WalkCursor, Walked,
};
use arena::{Arena, Region, REGIONS, TTL_BUCKETS};
use index::Index;
use segments::{Descs, Flush, Life};

pub use index::same_buckets_everywhere;
pub use keyhash::KeyHasher;
pub use lease::{Lease, Lender};
pub use segments::segment_bytes;

/// Cumulative counters, relaxed atomics (each is a plain statistic).
#[derive(Default)]
struct Counters {
    evictions: AtomicU64,
    reclaimed: AtomicU64,
    expired_unfetched: AtomicU64,
    evicted_unfetched: AtomicU64,
    evicted_active: AtomicU64,
    evicted_nonzero: AtomicU64,
    evicted_time: AtomicU32,
    outofmemory: AtomicU64,
    crawler_reclaimed: AtomicU64,
    /// Hot items moved forward by eviction instead of being dropped (and live items
    /// moved by compaction).
    reinserted: AtomicU64,
    /// Mostly dead segments compacted and reused instead of growing the arena.
    compacted: AtomicU64,
    /// New versions whose place did not order their CAS unique after the key's
    /// past, so that they carry one ([`Seg::next_unique`]).
    explicit_cas: AtomicU64,
    /// New versions written again because a link found them out of order (a set
    /// learns the key's last unique only when it links).
    rewritten: AtomicU64,
}

pub struct Seg {
    clock: Arc<Clock>,
    evict: bool,
    use_cas: bool,
    item_size_max: usize,
    /// `-m`, changeable by cache_memlimit. Relaxed: a plain setting.
    limit: AtomicU64,
    seg_size: u32,
    /// Items larger than this get a segment of their own.
    large_min: u32,
    /// The index hash under this engine's secret seed (keyhash.rs).
    hasher: KeyHasher,
    index: Index,
    /// Descriptor table; owns the segments' memory. Shared with the leases
    /// ([`Lease`]), which keep it (and so the memory they lend) alive.
    descs: Arc<Descs>,
    /// Segment allocation, sealing, eviction and reclamation. Taken after a region's
    /// lock and before any partition's (the lock order in the module docs).
    arena: Mutex<Arena>,
    /// Per-thread allocation regions: the active segment of each TTL bucket. A
    /// region's lock is the first of the lock order; no thread holds two.
    regions: Box<[Mutex<Region>]>,
    /// Generation counter for segments and flushes (starts at 1). SeqCst-free: each
    /// value is taken with fetch_add and compared only with other values of it.
    gen: AtomicU64,
    /// The last unique [`Seg::next_unique`] gave out. Only changed by its
    /// compare-exchange loop, so the values it gives are distinct and increasing;
    /// Relaxed, as `gen` (see `next_unique` for why the loads suffice).
    explicit: AtomicU64,
    /// What flush_all invalidated: the flushed generation and `oldest_live`.
    flush: Flush,
    /// Delayed flushes requested / swept by `maintain`. Relaxed: a sweep that runs
    /// twice, or one tick late, is harmless.
    flush_seq: AtomicU64,
    swept_seq: AtomicU64,
    /// The next slice of index partitions `maintain` checks for shrinking
    /// (`upkeep.rs`). Only `maintain` touches it; Relaxed, as a slice checked
    /// twice or skipped once is harmless.
    shrink_next: AtomicUsize,
    counters: Counters,
    /// Told of every eviction (`watch evictions`); set at most once, read (one
    /// acquire load) per eviction.
    eviction_listener: OnceLock<Arc<dyn EvictionListener>>,
}

impl Life {
    /// What a lookup that met an item in this state answers.
    fn fetch(self) -> Fetch {
        match self {
            Life::Live => Fetch::Hit,
            Life::Expired => Fetch::Expired,
            Life::Flushed => Fetch::Flushed,
        }
    }
}

impl Seg {
    pub fn new(cfg: Config, clock: Arc<Clock>) -> Seg {
        Seg::with_memory(cfg, clock, None)
    }

    /// An empty engine whose segment memory comes from `file` when given (`-e`).
    fn with_memory(cfg: Config, clock: Arc<Clock>, file: Option<Arc<mapfile::MemFile>>) -> Seg {
        let seg_size = segment_bytes(cfg.limit_bytes);
        let seg = Seg {
            clock,
            evict: cfg.evict,
            use_cas: cfg.use_cas,
            item_size_max: cfg.item_size_max,
            limit: AtomicU64::new(cfg.limit_bytes),
            seg_size,
            large_min: seg_size / 4,
            hasher: cfg
                .hash_seed
                .map_or_else(KeyHasher::random, KeyHasher::with_seed),
            index: Index::new(),
            descs: Arc::new(Descs::new(file)),
            arena: Mutex::new(Arena::new(seg_size)),
            regions: (0..REGIONS)
                .map(|_| Mutex::new([None; TTL_BUCKETS]))
                .collect(),
            gen: AtomicU64::new(1),
            explicit: AtomicU64::new(0),
            flush: Flush::default(),
            flush_seq: AtomicU64::new(0),
            swept_seq: AtomicU64::new(0),
            shrink_next: AtomicUsize::new(0),
            counters: Counters::default(),
            eviction_listener: OnceLock::new(),
        };
        seg.set_lease_bounds(cfg.limit_bytes);
        seg
    }

    /// What leases may hold back: no segment's first lease while held segments
    /// (retired while lent) add up to a sixteenth of the limit (at least two
    /// segments), or lent ones to half of it. Held bytes up to the sixteenth are not
    /// charged against `-m` (nobody waits for a lease), those beyond it are
    /// (`Arena::charged`), so segment memory stays within `-m` and a sixteenth.
    fn set_lease_bounds(&self, limit: u64) {
        let held_max = (limit / 16).max(2 * u64::from(self.seg_size));
        self.descs.held_max.store(held_max, Ordering::Relaxed);
        let lent_max = (limit / 2).max(4 * u64::from(self.seg_size));
        self.descs.lent_max.store(lent_max, Ordering::Relaxed);
        self.arena.lock().held_max = held_max;
    }

    /// What segments may hold: `-m` less what the index holds (its tables, current
    /// and retired but not yet freed), so that more items per megabyte means fewer
    /// segments rather than more memory (`docs/storage.md`, "The memory bound"). Never less than a quarter of `-m`, so that a cache whose index grew
    /// for a larger limit (`cache_memlimit` lowered it) still stores.
    fn segment_limit(&self) -> u64 {
        let limit = self.limit.load(Ordering::Relaxed);
        limit.saturating_sub(self.index.bytes()).max(limit / 4)
    }

    /// The segment size this engine uses.
    pub fn segment_size(&self) -> u32 {
        self.seg_size
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash(key)
    }

    /// Whether `cas` is a unique this engine gave (derived from a place or from
    /// [`Seg::next_unique`]): all are below the next generation's range. A larger
    /// one came from a client (`E`), and, as with memcached's counter, the next
    /// version of its key need not exceed it.
    fn is_ours(&self, cas: u64) -> bool {
        cas < self.gen.load(Ordering::Relaxed) << segments::PLACE_BITS
    }

    /// What a new version of a key must exceed: its current unique `cur` (0 for
    /// none) when that is ours, and what left its partition (`floor`).
    fn must_exceed(&self, cur: u64, floor: u64) -> u64 {
        if self.use_cas && self.is_ours(cur) {
            cur.max(floor)
        } else {
            floor
        }
    }

    /// A unique no place derives and none given before, larger than `above` and
    /// than every unique derived so far: for a new version whose place's unique
    /// does not exceed its key's past. In the newest generation's range above its
    /// places (from [`segments::EXPLICIT_LOW`]), or, when that range is used up,
    /// in a generation taken for it that no segment will have. Every unique that
    /// `above` can be was given before this call, so the `gen` loaded here is at
    /// least the one it was derived from.
    fn next_unique(&self, above: u64) -> u64 {
        use segments::{EXPLICIT_LOW, PLACE_BITS};
        self.counters.explicit_cas.fetch_add(1, Ordering::Relaxed);
        let low = (1u64 << PLACE_BITS) - 1;
        let mut last = self.explicit.load(Ordering::Relaxed);
        loop {
            let newest = self.gen.load(Ordering::Relaxed) - 1;
            let mut next = (last + 1)
                .max(above.saturating_add(1))
                .max(newest << PLACE_BITS | EXPLICIT_LOW);
            if next & low < EXPLICIT_LOW {
                // Past the top of a generation's range: a fresh generation.
                let fresh = self.gen.fetch_add(1, Ordering::Relaxed);
                next = (fresh << PLACE_BITS | EXPLICIT_LOW).max(next);
            }
            match self.explicit.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(x) => last = x,
            }
        }
    }

    /// New versions that carry their unique because their place's did not order
    /// after the key's past (for the tests that measure how often).
    pub fn explicit_cas_count(&self) -> u64 {
        self.counters.explicit_cas.load(Ordering::Relaxed)
    }

    /// New versions written again because their first copy linked out of order.
    pub fn rewritten_count(&self) -> u64 {
        self.counters.rewritten.load(Ordering::Relaxed)
    }

    /// Prepares segment `id` for writing (a fresh generation, empty counters), as a
    /// reinsertion segment if `main`. By whoever took it from the arena.
    fn open(&self, id: u32, main: bool) {
        let gen = self.gen.fetch_add(1, Ordering::Relaxed);
        self.descs.get(id).open(gen, self.clock.now(), main);
    }
}

impl Engine for Seg {
    fn get(&self, key: &[u8], opts: &GetOpts, visit: &mut dyn FnMut(Item<'_>) -> bool) -> Fetch {
        if opts.vivify.is_some() || opts.exclusive {
            return self.get_exclusive(key, opts, visit);
        }
        let h = self.hash(key);
        let now = self.clock.now();
        let g = epoch::pin();
        // SAFETY: pinned; locations come from the index while pinned.
        let Some(loc) = self
            .index
            .find(h, &g, |loc| unsafe { self.descs.view(loc) }.1.key == key)
        else {
            return Fetch::Miss;
        };
        // SAFETY: as above.
        let (d, v) = unsafe { self.descs.view(loc) };
        match self.flush.life(d, &v, now) {
            Life::Live => {}
            why => {
                drop(g);
                return self.drop_dead(h, loc, why);
            }
        }
        let pre = v.state();
        let claim = visit(self.item(loc, d, &v, pre, false));
        if let Some(t) = self.after_visit(d, &v, pre, claim, opts) {
            drop(g);
            self.touch_copy(h, key, loc, t);
        }
        Fetch::Hit
    }

    fn peek(&self, key: &[u8], visit: &mut dyn FnMut(Item<'_>)) -> Fetch {
        let h = self.hash(key);
        let g = epoch::pin();
        // SAFETY: pinned; locations come from the index while pinned.
        let Some(loc) = self
            .index
            .find(h, &g, |loc| unsafe { self.descs.view(loc) }.1.key == key)
        else {
            return Fetch::Miss;
        };
        // SAFETY: as above.
        let (d, v) = unsafe { self.descs.view(loc) };
        match self.flush.life(d, &v, self.clock.now()) {
            Life::Live => {
                visit(self.item(loc, d, &v, v.state(), false));
                Fetch::Hit
            }
            why => why.fetch(),
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
        let mut dead = None;
        let r = self.store_impl(mode, key, flags, exptime, value, opts, &mut dead);
        Met { result: r, dead }
    }

    fn delete_met(&self, key: &[u8], opts: &DeleteOpts) -> Met<DeleteResult> {
        let mut dead = None;
        let r = self.delete_impl(key, opts, &mut dead);
        Met { result: r, dead }
    }

    fn delta_met(&self, key: &[u8], incr: bool, delta: u64, opts: &DeltaOpts) -> Met<Delta> {
        let mut dead = None;
        let r = self.delta_impl(key, incr, delta, opts, &mut dead);
        Met { result: r, dead }
    }

    fn flush_all(&self, at: Option<RelTime>) {
        self.flush_all_impl(at);
    }

    fn set_limit(&self, limit_bytes: u64) {
        self.limit.store(limit_bytes, Ordering::Relaxed);
        self.set_lease_bounds(limit_bytes);
    }

    fn stats(&self) -> Stats {
        let c = self.index.counts();
        let (buckets, hash_bytes) = self.index.size();
        let (index_rebuilds, index_rehashed_items) = self.index.rebuild_counts();
        let now = self.clock.now();
        let (oldest, segments) = {
            let arena = self.arena.lock();
            let (oldest, segments) = arena.stats(&self.descs, now);
            (
                oldest,
                SegmentStats {
                    reinserted: self.counters.reinserted.load(Ordering::Relaxed),
                    compacted: self.counters.compacted.load(Ordering::Relaxed),
                    lent_bytes: self.descs.lent_bytes.load(Ordering::Relaxed).max(0) as u64,
                    ..segments
                },
            )
        };
        let k = &self.counters;
        let slots = buckets * index::SLOTS_PER_BUCKET as u64;
        Stats {
            curr_items: c.items,
            total_items: c.total_items,
            bytes: c.bytes,
            limit_maxbytes: self.limit.load(Ordering::Relaxed),
            evictions: k.evictions.load(Ordering::Relaxed),
            reclaimed: k.reclaimed.load(Ordering::Relaxed),
            expired_unfetched: k.expired_unfetched.load(Ordering::Relaxed),
            evicted_unfetched: k.evicted_unfetched.load(Ordering::Relaxed),
            evicted_active: k.evicted_active.load(Ordering::Relaxed),
            evicted_nonzero: k.evicted_nonzero.load(Ordering::Relaxed),
            evicted_time: k.evicted_time.load(Ordering::Relaxed),
            outofmemory: k.outofmemory.load(Ordering::Relaxed),
            oldest_item_age: oldest,
            crawler_reclaimed: k.crawler_reclaimed.load(Ordering::Relaxed),
            hash_power_level: 63 - slots.max(1).leading_zeros(),
            hash_bytes,
            hash_is_expanding: self.index.is_expanding(),
            index_rebuilds,
            index_rehashed_items,
            index_cuckoo_chains: self.index.cuckoo_chains(),
            segments,
        }
    }

    fn reset_stats(&self) {
        let k = &self.counters;
        for a in [
            &k.evictions,
            &k.reclaimed,
            &k.expired_unfetched,
            &k.evicted_unfetched,
            &k.evicted_active,
            &k.evicted_nonzero,
            &k.outofmemory,
            &k.crawler_reclaimed,
            &k.reinserted,
            &k.compacted,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        self.index.reset_total_items();
    }

    fn clock(&self) -> &Clock {
        &self.clock
    }

    fn walk(&self, cursor: &mut WalkCursor, visit: &mut dyn FnMut(&Walked<'_>) -> bool) {
        self.walk_impl(cursor, visit);
    }

    fn prefetch_index(&self, key: &[u8]) {
        let g = epoch::pin();
        self.index.prefetch(self.hash(key), &g);
    }

    fn prefetch_item(&self, key: &[u8]) {
        let g = epoch::pin();
        if let Some(loc) = self.index.peek(self.hash(key), &g) {
            let d = self.descs.get(loc.seg);
            let base = d.ptr.load(Ordering::Acquire);
            // A hint only: the addresses are computed, never dereferenced here. Two
            // lines: a 100-byte value with its header and key spans two.
            let p = base.wrapping_add(loc.off as usize);
            index::prefetch(p);
            index::prefetch(p.wrapping_add(64));
        }
    }

    fn maintain(&self) {
        self.maintain_impl();
    }

    fn set_eviction_listener(&self, listener: Arc<dyn EvictionListener>) -> bool {
        self.eviction_listener.set(listener).is_ok()
    }
}

#[cfg(test)]
mod cas_tests;
#[cfg(test)]
mod persist_tests;
#[cfg(test)]
mod tests;
