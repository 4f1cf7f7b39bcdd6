//! The segment engine: items packed into fixed-size segments, a compact tagged hash
//! index, lock-free hits, per-thread allocation regions, FIFO-reinsertion eviction
//! of whole segments, and TTL-grouped segments that expire whole.
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
//! lock) cannot deadlock.

mod epoch;
mod index;
mod item;

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::clock::{Clock, RelTime};
use crate::{
    apply_delta, memcached_item_bytes, Config, Counter, DeleteOpts, DeleteResult, Delta, DeltaOpts,
    Engine, Fetch, GetOpts, Item, Mode, Stats, StoreOpts, StoreResult,
};
use index::{Index, Loc, Locked, SlotPos, MAX_SEGMENTS};
use item::{View, ACCESSED, ATIME_MASK, FETCHED, STALE, TOKEN_SENT};

/// TTL groups: items that never expire, then TTLs under 8 s, 64 s, 512 s, … 2^18 s.
const TTL_BUCKETS: usize = 8;
/// Allocation regions; threads are spread over them round-robin.
const REGIONS: usize = 16;
/// `max_exptime` of a segment holding an item that never expires.
const NEVER: u32 = u32::MAX;
/// The small queue's share of sealed segments, in percent (S3-FIFO's 10%).
const SMALL_PERCENT: usize = 10;
/// Descriptors per lazily allocated chunk of the descriptor table.
const DESC_CHUNK: usize = 4096;

/// The TTL group of an item.
fn ttl_bucket(exptime: RelTime, now: RelTime) -> usize {
    if exptime == 0 {
        return 0;
    }
    let ttl = exptime.saturating_sub(now).max(1);
    // 1..8 → 1, 8..64 → 2, … ≥ 2^18 → 7.
    (1 + (31 - ttl.leading_zeros()) as usize / 3).min(TTL_BUCKETS - 1)
}

/// Segment size for a memory limit: about 1/128 of it, a power of two between
/// 64 KiB and 1 MiB, so that even `-m 8` has enough segments for every active region.
pub fn segment_bytes(limit: u64) -> u32 {
    let target = (limit / 128).clamp(64 * 1024, 1024 * 1024);
    1u32 << (63 - target.leading_zeros())
}

/// A segment's descriptor.
#[derive(Default)]
struct Desc {
    /// The segment's memory, null while it has none. Changed only under the arena
    /// lock, while no item of the segment is linked and no reader can be in it.
    ptr: AtomicPtr<u8>,
    /// Bytes of memory at `ptr`. Written with `ptr`.
    cap: AtomicU32,
    /// Generation, from `Seg::gen`, set when the segment is opened for writing: the
    /// high bits of its items' CAS uniques, and compared with `Seg::flush_gen`.
    /// Written before any item of the opening is written.
    gen: AtomicU64,
    /// When the segment was opened (for `oldest_item_age`).
    opened: AtomicU32,
    /// The latest exptime of its items, NEVER if one never expires (fetch_max).
    max_exptime: AtomicU32,
    /// Bytes of its linked items (changed under partition locks).
    live: AtomicU64,
    /// Where its written items end; set when it is sealed (arena lock).
    end: AtomicU32,
    /// A reinsertion segment: items that were hit (S3-FIFO's main queue), as
    /// opposed to items as they were stored (the small queue). Written under the
    /// arena lock when the segment is opened; read under it by eviction.
    main: AtomicBool,
}

/// An open segment being filled.
#[derive(Clone, Copy)]
struct Active {
    seg: u32,
    off: u32,
    cap: u32,
}

/// The sealed segments, in S3-FIFO's two queues (see `Seg::evict_one`), each oldest
/// first. Two queues, not one list with a flag per segment, so that choosing the
/// next victim takes no walk over all sealed segments (65K of them at `-m 64g`).
#[derive(Default)]
struct Fifo {
    /// Segments written by stores (and large items' own segments).
    small: VecDeque<u32>,
    /// Reinsertion segments: items that were hit, moved forward by eviction.
    main: VecDeque<u32>,
}

impl Fifo {
    fn push(&mut self, id: u32, main: bool) {
        if main {
            self.main.push_back(id);
        } else {
            self.small.push_back(id);
        }
    }

    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }

    fn iter(&self) -> impl Iterator<Item = &u32> {
        self.small.iter().chain(self.main.iter())
    }

    /// Removes and returns the first segment (small queue first, each oldest first)
    /// for which `pick` holds.
    fn take_first(&mut self, mut pick: impl FnMut(u32) -> bool) -> Option<u32> {
        if let Some(i) = self.small.iter().position(|&id| pick(id)) {
            return self.small.remove(i);
        }
        let i = self.main.iter().position(|&id| pick(id))?;
        self.main.remove(i)
    }
}

/// The arena's state, under `Seg::arena`.
#[derive(Default)]
struct Arena {
    /// Normal segments with memory, ready to open.
    free: Vec<u32>,
    /// Retired segments waiting for readers: (epoch, id).
    limbo: VecDeque<(u64, u32)>,
    /// Sealed segments, oldest first in each of S3-FIFO's two queues.
    fifo: Fifo,
    /// Descriptor ids without memory, for large items.
    spare_ids: Vec<u32>,
    /// Next never-used descriptor id (ids start at 1).
    next_id: u32,
    /// Bytes of segment memory held (normal and large).
    used: u64,
    /// Of `used`, bytes and count of large segments.
    large_used: u64,
    large_count: u64,
    /// Eviction's destination for reinserted (hot) items.
    reinsert: Option<Active>,
    /// A free segment kept for the next reinsertion segment: each evicted segment
    /// refills it on its way out of limbo, so eviction never needs the free list.
    spare: Option<u32>,
    /// A lower bound of the sealed segments' `max_exptime` (touches only raise
    /// those): until the clock reaches it, and with no flush_all since the last
    /// scan, `expire_segments` has nothing to free and skips its walk.
    next_expiry: RelTime,
    /// The flush generation `expire_segments` last scanned for.
    scanned_flush_gen: u64,
}

/// Cumulative counters, relaxed atomics (each is a plain statistic).
#[derive(Default)]
struct Counters {
    evictions: AtomicU64,
    reclaimed: AtomicU64,
    expired_unfetched: AtomicU64,
    evicted_unfetched: AtomicU64,
    evicted_nonzero: AtomicU64,
    evicted_time: AtomicU32,
    outofmemory: AtomicU64,
    crawler_reclaimed: AtomicU64,
    /// Hot items moved forward by eviction instead of being dropped (and live items
    /// moved by compaction).
    reinserted: AtomicU64,
    /// Mostly dead segments compacted and reused instead of growing the arena.
    compacted: AtomicU64,
}

/// Why an item is not live.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Life {
    Live,
    Expired,
    Flushed,
}

/// A copy of what a read-modify-write needs from the current item.
struct Snapshot {
    loc: Loc,
    value: Vec<u8>,
    flags: u32,
    exptime: RelTime,
    state: u32,
    cas: u64,
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
    hasher: foldhash::fast::FixedState,
    index: Index,
    /// Descriptor table, in chunks allocated on first use (OnceLock publishes them).
    descs: Box<[OnceLock<Box<[Desc]>>]>,
    /// Segment allocation, sealing, eviction and reclamation.
    arena: Mutex<Arena>,
    /// Per-thread allocation regions: the active segment of each TTL bucket.
    regions: Box<[Mutex<[Option<Active>; TTL_BUCKETS]>]>,
    /// Generation counter for segments and flushes (starts at 1). SeqCst-free: each
    /// value is taken with fetch_add and compared only with other values of it.
    gen: AtomicU64,
    /// Segments with a smaller generation were flushed by an immediate flush_all.
    flush_gen: AtomicU64,
    /// memcached's `settings.oldest_live`: items last accessed at or before it are
    /// invalid once it is due. 0 = none.
    oldest_live: AtomicU32,
    /// Delayed flushes requested / swept by `maintain`.
    flush_seq: AtomicU64,
    swept_seq: AtomicU64,
    counters: Counters,
}

thread_local! {
    static REGION: usize = next_region();
}

fn next_region() -> usize {
    /// Round-robin assignment of threads to regions.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) % REGIONS
}

impl Drop for Seg {
    fn drop(&mut self) {
        for chunk in self.descs.iter_mut() {
            if let Some(chunk) = chunk.get_mut() {
                for d in chunk.iter_mut() {
                    let p = *d.ptr.get_mut();
                    if !p.is_null() {
                        // SAFETY: `p` was allocated by `alloc_segment` with this
                        // capacity, and with `&mut self` nothing can reach it.
                        unsafe { free_segment(p, *d.cap.get_mut()) };
                    }
                }
            }
        }
    }
}

fn segment_layout(cap: u32) -> std::alloc::Layout {
    // 64-byte alignment: items are 4-aligned and the first sits on a cache line.
    std::alloc::Layout::from_size_align(cap.max(64) as usize, 64)
        .unwrap_or(std::alloc::Layout::new::<[u8; 64]>())
}

fn alloc_segment(cap: u32) -> *mut u8 {
    // SAFETY: the layout has a non-zero size. Zeroed memory comes from calloc/mmap,
    // so untouched pages of a new segment cost no resident memory.
    unsafe { std::alloc::alloc_zeroed(segment_layout(cap)) }
}

/// # Safety
/// `p` came from `alloc_segment(cap)` and nothing can reach it any more.
unsafe fn free_segment(p: *mut u8, cap: u32) {
    // SAFETY: per the contract, same layout as the allocation, and unreachable.
    unsafe { std::alloc::dealloc(p, segment_layout(cap)) }
}

impl Seg {
    pub fn new(cfg: Config, clock: Arc<Clock>) -> Seg {
        let seg_size = segment_bytes(cfg.limit_bytes);
        Seg {
            clock,
            evict: cfg.evict,
            use_cas: cfg.use_cas,
            item_size_max: cfg.item_size_max,
            limit: AtomicU64::new(cfg.limit_bytes),
            seg_size,
            large_min: seg_size / 4,
            hasher: foldhash::fast::FixedState::with_seed(0x6d65_6d63_7261_6221),
            index: Index::new(),
            descs: (0..(MAX_SEGMENTS as usize / DESC_CHUNK))
                .map(|_| OnceLock::new())
                .collect(),
            arena: Mutex::new(Arena {
                next_id: 1,
                ..Arena::default()
            }),
            regions: (0..REGIONS)
                .map(|_| Mutex::new([None; TTL_BUCKETS]))
                .collect(),
            gen: AtomicU64::new(1),
            flush_gen: AtomicU64::new(0),
            oldest_live: AtomicU32::new(0),
            flush_seq: AtomicU64::new(0),
            swept_seq: AtomicU64::new(0),
            counters: Counters::default(),
        }
    }

    /// The segment size this engine uses.
    pub fn segment_size(&self) -> u32 {
        self.seg_size
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn desc(&self, id: u32) -> &Desc {
        let chunk = self.descs[id as usize / DESC_CHUNK]
            .get_or_init(|| (0..DESC_CHUNK).map(|_| Desc::default()).collect());
        &chunk[id as usize % DESC_CHUNK]
    }

    /// The item at `loc`.
    ///
    /// # Safety
    /// `loc` names a published item whose segment cannot be reused while the view
    /// lives: the caller is pinned and loaded `loc` from the index while pinned, or
    /// holds the lock of the partition linking it, or owns the segment.
    unsafe fn view(&self, loc: Loc) -> (&Desc, View<'_>) {
        let d = self.desc(loc.seg);
        let base = d.ptr.load(Ordering::Acquire);
        // SAFETY: per the contract the segment's memory is live and holds a
        // published item at `loc.off`.
        (d, unsafe { View::read(base.add(loc.off as usize)) })
    }

    fn cas_of(&self, loc: Loc, d: &Desc, v: &View<'_>) -> u64 {
        if !self.use_cas {
            return 0;
        }
        v.explicit_cas
            .unwrap_or_else(|| d.gen.load(Ordering::Relaxed) << 24 | u64::from(loc.off >> 2))
    }

    fn life(&self, d: &Desc, v: &View<'_>, now: RelTime) -> Life {
        let oldest_live = self.oldest_live.load(Ordering::Relaxed);
        if d.gen.load(Ordering::Relaxed) < self.flush_gen.load(Ordering::Acquire)
            || (oldest_live != 0 && oldest_live <= now && v.state() & ATIME_MASK <= oldest_live)
        {
            return Life::Flushed;
        }
        let exp = v.exptime();
        if exp != 0 && exp <= now {
            return Life::Expired;
        }
        Life::Live
    }

    /// Finds the linked item for `key` under a partition lock: (slot, loc, life).
    fn find_locked(&self, l: &Locked<'_>, h: u64, key: &[u8]) -> Option<(SlotPos, Loc)> {
        // SAFETY: items linked in a locked partition are not freed while it is locked.
        l.find(h, |loc| unsafe { self.view(loc) }.1.key == key)
    }

    /// Unlinks an item under its partition lock and counts why.
    fn unlink(&self, l: &mut Locked<'_>, pos: SlotPos, loc: Loc, why: Option<Life>) {
        // SAFETY: `loc` is linked in the locked partition.
        let (d, v) = unsafe { self.view(loc) };
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
                let c = &self.counters;
                c.evictions.fetch_add(1, Ordering::Relaxed);
                if unfetched {
                    c.evicted_unfetched.fetch_add(1, Ordering::Relaxed);
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

    /// Links a new item at `new_loc`, replacing `old` if given.
    fn link(&self, l: &mut Locked<'_>, h: u64, old: Option<(SlotPos, Loc)>, new_loc: Loc) {
        // SAFETY: the new item is written and ours until linked; the old one is
        // linked in the locked partition.
        let (nd, nv) = unsafe { self.view(new_loc) };
        nd.live.fetch_add(nv.size as u64, Ordering::Relaxed);
        l.counts.bytes += nv.size as u64;
        l.counts.items += 1;
        match old {
            Some((pos, old_loc)) => {
                // SAFETY: linked in the locked partition.
                let (od, ov) = unsafe { self.view(old_loc) };
                od.live.fetch_sub(ov.size as u64, Ordering::Relaxed);
                l.counts.bytes = l.counts.bytes.saturating_sub(ov.size as u64);
                l.counts.items -= 1;
                l.replace(pos, h, new_loc);
            }
            None => {
                let displaced = l.insert(h, new_loc, |loc| {
                    // SAFETY: rebuilds read keys of items linked in this locked
                    // partition, which are not freed while it is locked.
                    let v = unsafe { self.view(loc) }.1;
                    self.hash(v.key)
                });
                if let Some(victim) = displaced {
                    // A full partition at its largest table dropped an item: account
                    // for it as an eviction.
                    // SAFETY: it was linked in this locked partition until just now,
                    // and its segment is not reused while we hold the lock.
                    let (d, v) = unsafe { self.view(victim) };
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
    fn find_live_locked(
        &self,
        l: &mut Locked<'_>,
        h: u64,
        key: &[u8],
    ) -> Result<(SlotPos, Loc), Fetch> {
        let (pos, loc) = self.find_locked(l, h, key).ok_or(Fetch::Miss)?;
        // SAFETY: linked in the locked partition.
        let (d, v) = unsafe { self.view(loc) };
        match self.life(d, &v, self.clock.now()) {
            Life::Live => Ok((pos, loc)),
            why => {
                self.unlink(l, pos, loc, Some(why).filter(|w| *w == Life::Expired));
                Err(if why == Life::Expired {
                    Fetch::Expired
                } else {
                    Fetch::Flushed
                })
            }
        }
    }

    /// Unlinks a dead item met by a lock-free lookup (if it is still linked), so that
    /// the next lookup misses, as after memcached's lazy unlink. Not while pinned.
    fn drop_dead(&self, h: u64, loc: Loc, why: Life) {
        let mut l = self.index.lock(h);
        if let Some(pos) = l.find_loc(h, loc) {
            self.unlink(&mut l, pos, loc, Some(why).filter(|w| *w == Life::Expired));
        }
    }

    /// Copies what a read-modify-write needs from the live item for `key`: always
    /// its location, flags, exptime, state and CAS; its value only if `copy_value`
    /// (append, prepend, incr/decr and md I need it; add, replace and cas do not).
    fn snapshot(&self, h: u64, key: &[u8], copy_value: bool) -> Result<Snapshot, Fetch> {
        let g = epoch::pin();
        let now = self.clock.now();
        // SAFETY: pinned, and the location came from the index while pinned.
        let loc = self
            .index
            .find(h, &g, |loc| unsafe { self.view(loc) }.1.key == key)
            .ok_or(Fetch::Miss)?;
        // SAFETY: as above.
        let (d, v) = unsafe { self.view(loc) };
        let why = match self.life(d, &v, now) {
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
                    cas: self.cas_of(loc, d, &v),
                })
            }
            why => why,
        };
        drop(g);
        self.drop_dead(h, loc, why);
        Err(if why == Life::Expired {
            Fetch::Expired
        } else {
            Fetch::Flushed
        })
    }

    // ----- allocation -----

    /// Writes a new item and returns where; None when memory cannot be found.
    /// Must not be called while pinned or holding a partition lock.
    fn write_item(&self, new: &item::New<'_>) -> Option<Loc> {
        let size = new.size();
        if size > self.large_min as usize {
            return self.write_large(new, size);
        }
        let size = size as u32;
        let now = self.clock.now();
        let b = ttl_bucket(new.exptime, now);
        let mut region = self.regions[REGION.with(|r| *r)].lock();
        let a = match region[b] {
            Some(a) if a.off + size <= a.cap => a,
            old => {
                region[b] = None;
                let mut arena = self.arena.lock();
                if let Some(old) = old {
                    self.seal(&mut arena, old);
                }
                let seg = self.take_segment(&mut arena)?;
                Active {
                    seg,
                    off: 0,
                    cap: self.seg_size,
                }
            }
        };
        let d = self.desc(a.seg);
        let base = d.ptr.load(Ordering::Acquire);
        // SAFETY: the region owns `a` (it is this region's active segment): bytes from
        // `a.off` on are written by no one else and read by no one until linked; the
        // segment has `a.cap` bytes and `a.off + size <= a.cap`.
        unsafe { new.write(base.add(a.off as usize)) };
        d.max_exptime.fetch_max(
            if new.exptime == 0 { NEVER } else { new.exptime },
            Ordering::Relaxed,
        );
        region[b] = Some(Active {
            off: a.off + size,
            ..a
        });
        Some(Loc {
            seg: a.seg,
            off: a.off,
        })
    }

    /// An item too large for a shared segment gets a segment of its own size.
    fn write_large(&self, new: &item::New<'_>, size: usize) -> Option<Loc> {
        let cap = u32::try_from(size).ok()?;
        let id = {
            let mut arena = self.arena.lock();
            let id = self.take_large(&mut arena, cap)?;
            self.open(id);
            id
        };
        let d = self.desc(id);
        // SAFETY: the segment was just given memory of `cap` bytes and is not in the
        // FIFO or linked anywhere yet: it is ours.
        unsafe { new.write(d.ptr.load(Ordering::Acquire)) };
        d.max_exptime.store(
            if new.exptime == 0 { NEVER } else { new.exptime },
            Ordering::Relaxed,
        );
        d.end.store(cap, Ordering::Relaxed);
        // A large item's own segment is in the small queue (its descriptor's `main`
        // flag may be left from an earlier use).
        self.enqueue(&mut self.arena.lock(), id, false);
        Some(Loc { seg: id, off: 0 })
    }

    /// Prepares a segment for writing: a fresh generation, empty counters.
    fn open(&self, id: u32) {
        let d = self.desc(id);
        d.gen
            .store(self.gen.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        d.opened.store(self.clock.now(), Ordering::Relaxed);
        d.max_exptime.store(0, Ordering::Relaxed);
        d.live.store(0, Ordering::Relaxed);
        d.end.store(0, Ordering::Relaxed);
        d.main.store(false, Ordering::Relaxed);
    }

    fn seal(&self, arena: &mut Arena, a: Active) {
        let d = self.desc(a.seg);
        d.end.store(a.off, Ordering::Relaxed);
        self.enqueue(arena, a.seg, d.main.load(Ordering::Relaxed));
    }

    /// Appends a sealed segment to its queue and lowers `next_expiry` to its expiry.
    fn enqueue(&self, arena: &mut Arena, id: u32, main: bool) {
        arena.fifo.push(id, main);
        let max = self.desc(id).max_exptime.load(Ordering::Relaxed);
        arena.next_expiry = arena.next_expiry.min(max);
    }

    fn new_id(&self, arena: &mut Arena) -> Option<u32> {
        if let Some(id) = arena.spare_ids.pop() {
            return Some(id);
        }
        if arena.next_id >= MAX_SEGMENTS {
            return None;
        }
        arena.next_id += 1;
        Some(arena.next_id - 1)
    }

    /// Moves quiescent segments from limbo to the free list (or frees large ones).
    fn reclaim_limbo(&self, arena: &mut Arena) {
        while let Some(&(e, id)) = arena.limbo.front() {
            if !epoch::is_quiescent(e) {
                break;
            }
            arena.limbo.pop_front();
            let d = self.desc(id);
            let cap = d.cap.load(Ordering::Relaxed);
            if cap == self.seg_size {
                if arena.spare.is_none() {
                    arena.spare = Some(id);
                } else {
                    arena.free.push(id);
                }
            } else {
                self.release_memory(arena, id);
            }
        }
    }

    fn release_memory(&self, arena: &mut Arena, id: u32) {
        let d = self.desc(id);
        let p = d.ptr.swap(std::ptr::null_mut(), Ordering::AcqRel);
        let cap = d.cap.swap(0, Ordering::Relaxed);
        if !p.is_null() {
            // SAFETY: the segment is out of limbo (no reader can be in it) or free,
            // and none of its items is linked.
            unsafe { free_segment(p, cap) };
            arena.used -= u64::from(cap);
            if cap != self.seg_size {
                arena.large_used -= u64::from(cap);
                arena.large_count -= 1;
            }
        }
        arena.spare_ids.push(id);
    }

    /// Retires an emptied segment: reusable once no reader can be in it.
    fn retire(&self, arena: &mut Arena, id: u32) {
        arena.limbo.push_back((epoch::advance(), id));
    }

    /// Memory for `need` more bytes: frees memory above the limit, then evicts until
    /// `used + need <= limit`. False when nothing more can be evicted.
    fn make_room(&self, arena: &mut Arena, need: u64) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        loop {
            self.reclaim_limbo(arena);
            // Free segments count as used; give memory back while over the limit.
            while arena.used + need > limit {
                match arena.free.pop().or_else(|| arena.spare.take()) {
                    Some(id) => self.release_memory(arena, id),
                    None => break,
                }
            }
            if arena.used + need <= limit {
                return true;
            }
            if !self.wait_or_evict(arena) {
                return false;
            }
        }
    }

    /// The slow way to free memory: wait for the readers of the newest retired
    /// segment (evicted memory on its way back; readers leave within a lookup), or
    /// else evict one. False when neither can free anything.
    fn wait_or_evict(&self, arena: &mut Arena) -> bool {
        if let Some(&(e, _)) = arena.limbo.back() {
            epoch::wait_quiescent(e);
            return true;
        }
        self.evict_one(arena)
    }

    /// A normal segment, opened for writing.
    fn take_segment(&self, arena: &mut Arena) -> Option<u32> {
        loop {
            self.reclaim_limbo(arena);
            let limit = self.limit.load(Ordering::Relaxed);
            if self.evict && arena.used + u64::from(self.seg_size) <= limit {
                // Keep two segments on their way to the free list (see
                // compact_mostly_dead): what this compacts is free for a later call,
                // once readers have left it, so nobody waits for readers. Not under
                // -M, whose own compaction (evict_one) keeps the spare for its moves:
                // there a compacted segment could end up as an idle spare while
                // stores answer out of memory.
                while arena.free.len() + arena.limbo.len() < 2 && self.compact_mostly_dead(arena) {}
            }
            if let Some(id) = arena.free.pop() {
                self.open(id);
                return Some(id);
            }
            // Again: compaction may have taken memory for a spare segment.
            if arena.used + u64::from(self.seg_size) <= limit {
                let id = self.alloc_normal(arena)?;
                self.open(id);
                if !self.evict && arena.reinsert.is_none() {
                    // Under -M, compaction needs somewhere to move live items: the
                    // first segment becomes the reinsertion segment.
                    arena.reinsert = Some(Active {
                        seg: id,
                        off: 0,
                        cap: self.seg_size,
                    });
                    continue;
                }
                return Some(id);
            }
            if !self.wait_or_evict(arena) {
                return None;
            }
        }
    }

    /// A new normal segment with fresh memory (the caller checked the limit).
    fn alloc_normal(&self, arena: &mut Arena) -> Option<u32> {
        let id = self.new_id(arena)?;
        let p = alloc_segment(self.seg_size);
        if p.is_null() {
            arena.spare_ids.push(id);
            return None;
        }
        let d = self.desc(id);
        d.cap.store(self.seg_size, Ordering::Relaxed);
        d.ptr.store(p, Ordering::Release);
        arena.used += u64::from(self.seg_size);
        Some(id)
    }

    /// While the arena may still grow: if the oldest segment of either queue is mostly
    /// dead (at most a quarter of it still linked, the rest overwritten or deleted),
    /// moves its live items to the reinsertion segment, keeping their state, and
    /// retires it, so that a later `take_segment` reuses it instead of growing. Nothing
    /// is evicted, and nobody waits for readers. Returns whether it retired one.
    ///
    /// Without this, an overwrite-heavy load writes fresh memory
    /// until the whole of `-m` has been touched once, and the first touch of each page
    /// (a page fault, and the kernel zeroing it) cost W4, 1 KB sets over 100k keys at
    /// `-m 1024`, about 0.1x the do-nothing floor's CPU per request (2026-11-23).
    fn compact_mostly_dead(&self, arena: &mut Arena) -> bool {
        let quarter = u64::from(self.seg_size) / 4;
        let flush_gen = self.flush_gen.load(Ordering::Acquire);
        // The emptier of the two queues' oldest segments, if it is mostly dead.
        let live = |q: &VecDeque<u32>| {
            q.front().map(|&id| {
                let d = self.desc(id);
                // A segment emptied by flush_all is left to `maintain`, which frees it
                // whole within a second; until then its items answer as flushed, as
                // in memcached.
                if d.gen.load(Ordering::Relaxed) < flush_gen {
                    u64::MAX
                } else {
                    d.live.load(Ordering::Relaxed)
                }
            })
        };
        let from_small = match (live(&arena.fifo.small), live(&arena.fifo.main)) {
            (Some(s), m) if s <= quarter && m.is_none_or(|m| s <= m) => true,
            (_, Some(m)) if m <= quarter => false,
            _ => return false,
        };
        // Room for the moved items (each may grow by its CAS and exptime fields, so
        // ask for twice their bytes): the reinsertion segment's rest, or a whole spare.
        let room = arena.reinsert.map_or(0, |a| u64::from(a.cap - a.off));
        if room < 2 * quarter && arena.spare.is_none() && arena.free.is_empty() {
            if arena.used + u64::from(self.seg_size) > self.limit.load(Ordering::Relaxed) {
                return false;
            }
            match self.alloc_normal(arena) {
                Some(id) => arena.spare = Some(id),
                None => return false,
            }
        }
        let queue = if from_small {
            &mut arena.fifo.small
        } else {
            &mut arena.fifo.main
        };
        let Some(id) = queue.pop_front() else {
            return false;
        };
        self.empty_segment(arena, id, u64::MAX, true);
        self.retire(arena, id);
        self.counters.compacted.fetch_add(1, Ordering::Relaxed);
        true
    }

    fn take_large(&self, arena: &mut Arena, cap: u32) -> Option<u32> {
        if !self.make_room(arena, u64::from(cap)) {
            return None;
        }
        let id = self.new_id(arena)?;
        let p = alloc_segment(cap);
        if p.is_null() {
            arena.spare_ids.push(id);
            return None;
        }
        let d = self.desc(id);
        d.cap.store(cap, Ordering::Relaxed);
        d.ptr.store(p, Ordering::Release);
        arena.used += u64::from(cap);
        if cap != self.seg_size {
            arena.large_used += u64::from(cap);
            arena.large_count += 1;
        }
        Some(id)
    }

    /// Evicts the oldest sealed segment of the small or the main queue: hot items (a
    /// hit since they were written or last moved) are copied forward into the
    /// reinsertion segment while it has room and the budget (three quarters of a
    /// segment, so that each eviction frees at least a quarter) lasts; the rest are
    /// dropped. Under `-M`, nothing live is dropped: only a segment whose live items
    /// all fit in the reinsertion segment is compacted. Returns false when nothing
    /// was freed.
    fn evict_one(&self, arena: &mut Arena) -> bool {
        let pick = if self.evict {
            // S3-FIFO over segments: segments written by stores form the small
            // queue, reinsertion segments the main queue. While stored items take
            // more than SMALL_PERCENT of the sealed segments, the oldest of those is
            // evicted (its items that were hit move to main, the rest, mostly
            // one-hit wonders, leave early); otherwise the oldest main segment is
            // (its items hit since they moved are reinserted: CLOCK).
            let fifo = &mut arena.fifo;
            let small = fifo.small.len();
            let from_main = small * 100 <= fifo.len() * SMALL_PERCENT && !fifo.main.is_empty();
            if from_main {
                fifo.main.pop_front()
            } else {
                fifo.small.pop_front()
            }
        } else {
            let room = arena
                .reinsert
                .map(|a| u64::from(a.cap - a.off))
                .unwrap_or(0)
                + if arena.spare.is_some() {
                    u64::from(self.seg_size)
                } else {
                    0
                };
            arena.fifo.take_first(|id| {
                let d = self.desc(id);
                let live = d.live.load(Ordering::Relaxed);
                // Compacting must free something: some dead bytes, and room for the rest.
                live <= room && live < u64::from(d.end.load(Ordering::Relaxed)).max(1)
            })
        };
        let Some(id) = pick else {
            return false;
        };
        if arena.spare.is_none() {
            // Let the last evicted segment out of limbo to serve as the spare.
            if let Some(&(e, _)) = arena.limbo.back() {
                epoch::wait_quiescent(e);
                self.reclaim_limbo(arena);
            }
        }
        let budget = if self.evict {
            u64::from(self.seg_size) * 3 / 4
        } else {
            u64::MAX
        };
        self.empty_segment(arena, id, budget, !self.evict);
        self.retire(arena, id);
        true
    }

    /// Unlinks every linked item of segment `id`, except that live items that are
    /// hot (or all live items, with `keep_all`) are moved to the reinsertion segment
    /// while `budget` bytes last and it has room. Dead items are counted as expired or
    /// flushed, dropped live ones as evictions.
    fn empty_segment(&self, arena: &mut Arena, id: u32, mut budget: u64, keep_all: bool) {
        let d = self.desc(id);
        let base = d.ptr.load(Ordering::Acquire);
        let end = d.end.load(Ordering::Relaxed);
        let now = self.clock.now();
        let mut off = 0u32;
        while off < end {
            let loc = Loc { seg: id, off };
            // SAFETY: the segment is sealed and out of the FIFO: it is ours, and every
            // item up to `end` was completely written before it was sealed.
            let v = unsafe { View::read(base.add(off as usize)) };
            off += v.size as u32;
            let h = self.hash(v.key);
            let mut l = self.index.lock(h);
            let Some(pos) = l.find_loc(h, loc) else {
                continue;
            };
            let life = self.life(d, &v, now);
            let hot = keep_all || v.state() & ACCESSED != 0;
            if life == Life::Live && hot && budget >= v.size as u64 {
                // Eviction's second chance clears ACCESSED; moving everything live
                // (compaction, -M, expiry) keeps it.
                if let Some(new_loc) = self.reinsert(arena, d, loc, &v, !keep_all) {
                    budget -= v.size as u64;
                    self.link(&mut l, h, Some((pos, loc)), new_loc);
                    self.counters.reinserted.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            self.unlink(&mut l, pos, loc, Some(life));
        }
    }

    /// Copies an item into the reinsertion segment, keeping its CAS, flags, exptime
    /// and bits, but clearing ACCESSED if `clear_accessed`. None when there is no room
    /// and no free segment.
    fn reinsert(
        &self,
        arena: &mut Arena,
        d: &Desc,
        loc: Loc,
        v: &View<'_>,
        clear_accessed: bool,
    ) -> Option<Loc> {
        let bits = if clear_accessed { ACCESSED } else { 0 };
        let new = item::New {
            key: v.key,
            value: [v.value, &[]],
            flags: v.flags,
            exptime: v.exptime(),
            state: v.state() & !bits,
            cas: Some(self.cas_of(loc, d, v)).filter(|_| self.use_cas),
        };
        let size = new.size() as u32;
        if size > self.large_min {
            return None;
        }
        let a = match arena.reinsert {
            Some(a) if a.off + size <= a.cap => a,
            old => {
                self.reclaim_limbo(arena);
                let id = arena.spare.take().or_else(|| arena.free.pop())?;
                if let Some(old) = old {
                    self.seal(arena, old);
                }
                self.open(id);
                self.desc(id).main.store(true, Ordering::Relaxed);
                Active {
                    seg: id,
                    off: 0,
                    cap: self.seg_size,
                }
            }
        };
        let nd = self.desc(a.seg);
        // SAFETY: the reinsertion segment is owned by the arena, whose lock we hold;
        // bytes from `a.off` on are unwritten and unlinked.
        unsafe { new.write(nd.ptr.load(Ordering::Acquire).add(a.off as usize)) };
        nd.max_exptime.fetch_max(
            if new.exptime == 0 { NEVER } else { new.exptime },
            Ordering::Relaxed,
        );
        arena.reinsert = Some(Active {
            off: a.off + size,
            ..a
        });
        Some(Loc {
            seg: a.seg,
            off: a.off,
        })
    }

    fn new_state(&self) -> u32 {
        self.clock.now() & ATIME_MASK
    }

    /// The item as a visitor sees it, from its state before this request.
    fn item<'a>(&self, loc: Loc, d: &Desc, v: &View<'a>, pre: u32, created: bool) -> Item<'a> {
        Item {
            key: v.key,
            value: v.value,
            flags: v.flags,
            cas: self.cas_of(loc, d, v),
            exptime: if created { 0 } else { v.exptime() },
            atime: pre & ATIME_MASK,
            fetched: pre & FETCHED != 0,
            stale: pre & STALE != 0,
            token_sent: pre & TOKEN_SENT != 0,
            created,
        }
    }

    /// After a visit: the token claim, the touch and the bump, in that order.
    /// Returns the expiry time still to apply when the touch could not be done in
    /// place (the item has no exptime field): the caller, unpinned and holding no
    /// lock, then calls [`Seg::touch_copy`].
    #[must_use]
    fn after_visit(
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
                d.max_exptime
                    .fetch_max(if t == 0 { NEVER } else { t }, Ordering::Relaxed);
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

    /// A lookup under the partition lock: vivify, or a visitor whose token claim must
    /// be atomic.
    fn get_locked(
        &self,
        key: &[u8],
        opts: &GetOpts,
        visit: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Fetch {
        let h = self.hash(key);
        let mut pending: Option<Loc> = None;
        loop {
            let mut l = self.index.lock(h);
            let why = match self.find_live_locked(&mut l, h, key) {
                Ok((_, loc)) => {
                    // SAFETY: linked in the locked partition.
                    let (d, v) = unsafe { self.view(loc) };
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
            let Some(ttl) = opts.vivify else {
                return why;
            };
            if let Some(new_loc) = pending {
                self.link(&mut l, h, None, new_loc);
                l.counts.total_items += 1;
                // SAFETY: just linked in the locked partition.
                let (d, v) = unsafe { self.view(new_loc) };
                let pre = v.state();
                if visit(self.item(new_loc, d, &v, pre, true)) {
                    v.set_bits(TOKEN_SENT);
                }
                return Fetch::Hit;
            }
            drop(l);
            let new = item::New {
                key,
                value: [&[], &[]],
                flags: 0,
                exptime: ttl,
                state: self.new_state(),
                cas: opts.new_cas.filter(|_| self.use_cas),
            };
            match self.write_item(&new) {
                Some(loc) => pending = Some(loc),
                None => {
                    self.counters.outofmemory.fetch_add(1, Ordering::Relaxed);
                    return why;
                }
            }
        }
    }

    /// Applies a touch to the item at `loc`, which has no exptime field, by linking a
    /// copy that has one: the same value, flags, state and CAS unique (a touch keeps
    /// the unique, as in memcached). If the item has changed since it was visited,
    /// the touch is ordered before that change, which replaced the item with its own
    /// expiry time, and nothing is left to do. Not while pinned or holding a lock.
    fn touch_copy(&self, h: u64, key: &[u8], loc: Loc, t: RelTime) {
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
        if let Some(new_loc) = self.write_or_oom(&new) {
            // A failed link means a writer replaced the item meanwhile: see above.
            let _ = self.link_if_current(h, key, Some(loc), new_loc, false);
        }
    }

    /// Writes `new`, counting out-of-memory.
    fn write_or_oom(&self, new: &item::New<'_>) -> Option<Loc> {
        let loc = self.write_item(new);
        if loc.is_none() {
            self.counters.outofmemory.fetch_add(1, Ordering::Relaxed);
        }
        loc
    }

    /// Links `new_loc` in place of the item at `old` if that is still the live item
    /// for `key`; None when it changed meanwhile (the caller reads again).
    fn link_if_current(
        &self,
        h: u64,
        key: &[u8],
        old: Option<Loc>,
        new_loc: Loc,
        count: bool,
    ) -> Option<(u64, Locked<'_>)> {
        let mut l = self.index.lock(h);
        let cur = self.find_live_locked(&mut l, h, key).ok();
        if cur.map(|(_, loc)| loc) != old {
            return None;
        }
        self.link(&mut l, h, cur, new_loc);
        if count {
            l.counts.total_items += 1;
        }
        // SAFETY: just linked in the locked partition.
        let (d, v) = unsafe { self.view(new_loc) };
        Some((self.cas_of(new_loc, d, &v), l))
    }

    /// Every storage mode. Reads the current item without a lock, builds the new one
    /// without a lock, then links it if the item it was built from is still current
    /// (else starts over), so no lock is held while allocating.
    #[allow(clippy::too_many_arguments)]
    fn store_impl(
        &self,
        mode: Mode,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        opts: &StoreOpts,
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
        loop {
            let old = match mode {
                Mode::Set => None,
                _ => self.snapshot(h, key, copy_value).ok(),
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
                    if let Ok((_, loc)) = self.find_live_locked(&mut l, h, key) {
                        if loc == o.loc {
                            // SAFETY: linked in the locked partition.
                            let v = unsafe { self.view(loc) }.1;
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
            let Some(new_loc) = self.write_or_oom(&new) else {
                if mode == Mode::Set {
                    // memcached drops the old value when a set cannot be stored.
                    self.delete(key, &DeleteOpts::default());
                }
                return StoreResult::OutOfMemory;
            };
            let expect = match mode {
                // Set replaces whatever is there.
                Mode::Set => {
                    let mut l = self.index.lock(h);
                    let cur = self.find_live_locked(&mut l, h, key).ok();
                    self.link(&mut l, h, cur, new_loc);
                    l.counts.total_items += 1;
                    // SAFETY: just linked in the locked partition.
                    let (d, v) = unsafe { self.view(new_loc) };
                    return StoreResult::Stored(self.cas_of(new_loc, d, &v));
                }
                _ => old.as_ref().map(|o| o.loc),
            };
            if let Some((cas, _)) = self.link_if_current(h, key, expect, new_loc, true) {
                return StoreResult::Stored(cas);
            }
            // The item changed between the read and the link: the written copy stays
            // unlinked (dead bytes, reclaimed with its segment) and we start over.
        }
    }

    /// Walks a segment's items up to `end`, unlinking those `pred` selects.
    fn sweep_segment(&self, id: u32, end: u32, pred: impl Fn(&Desc, &View<'_>) -> Option<Life>) {
        let d = self.desc(id);
        let base = d.ptr.load(Ordering::Acquire);
        let mut off = 0u32;
        while off < end {
            let loc = Loc { seg: id, off };
            // SAFETY: the caller holds the lock that keeps this segment from being
            // emptied or reused (the arena's for sealed segments, the region's for
            // active ones), and items up to `end` are completely written.
            let v = unsafe { View::read(base.add(off as usize)) };
            off += v.size as u32;
            if let Some(why) = pred(d, &v) {
                let h = self.hash(v.key);
                let mut l = self.index.lock(h);
                if let Some(pos) = l.find_loc(h, loc) {
                    self.unlink(&mut l, pos, loc, Some(why));
                }
            }
        }
    }

    /// Frees sealed segments that expired or were flushed as a whole, and sweeps a
    /// delayed flush_all that came due.
    fn expire_segments(&self) {
        let now = self.clock.now();
        let flush_gen = self.flush_gen.load(Ordering::Acquire);
        let mut arena = self.arena.lock();
        self.reclaim_limbo(&mut arena);
        if flush_gen == arena.scanned_flush_gen && now < arena.next_expiry {
            return;
        }
        // One pass over both queues: what is dead leaves them, and the earliest
        // expiry of the rest is the next time to look.
        let mut dead = Vec::new();
        let mut next = NEVER;
        let fifo = &mut arena.fifo;
        for q in [&mut fifo.small, &mut fifo.main] {
            q.retain(|&id| {
                let d = self.desc(id);
                let max = d.max_exptime.load(Ordering::Relaxed);
                let gone =
                    d.gen.load(Ordering::Relaxed) < flush_gen || (max != NEVER && max <= now);
                if gone {
                    dead.push(id);
                } else {
                    next = next.min(max);
                }
                !gone
            });
        }
        arena.next_expiry = next;
        arena.scanned_flush_gen = flush_gen;
        for id in dead {
            // Dead items are reclaimed; one still live (touched meanwhile) is moved,
            // or evicted if there is no room.
            self.empty_segment(&mut arena, id, u64::MAX, true);
            self.retire(&mut arena, id);
        }
    }

    fn sweep_delayed_flush(&self) {
        let now = self.clock.now();
        let flushed = |d: &Desc, v: &View<'_>| {
            (self.life(d, v, now) == Life::Flushed).then_some(Life::Flushed)
        };
        for r in self.regions.iter() {
            let region = r.lock();
            for a in region.iter().flatten() {
                self.sweep_segment(a.seg, a.off, flushed);
            }
        }
        let arena = self.arena.lock();
        if let Some(a) = arena.reinsert {
            self.sweep_segment(a.seg, a.off, flushed);
        }
        for &id in arena.fifo.iter() {
            self.sweep_segment(id, self.desc(id).end.load(Ordering::Relaxed), flushed);
        }
    }
}

impl Engine for Seg {
    fn get(&self, key: &[u8], opts: &GetOpts, visit: &mut dyn FnMut(Item<'_>) -> bool) -> Fetch {
        if opts.vivify.is_some() || opts.exclusive {
            return self.get_locked(key, opts, visit);
        }
        let h = self.hash(key);
        let now = self.clock.now();
        let g = epoch::pin();
        // SAFETY: pinned; locations come from the index while pinned.
        let Some(loc) = self
            .index
            .find(h, &g, |loc| unsafe { self.view(loc) }.1.key == key)
        else {
            return Fetch::Miss;
        };
        // SAFETY: as above.
        let (d, v) = unsafe { self.view(loc) };
        match self.life(d, &v, now) {
            Life::Live => {}
            why => {
                drop(g);
                self.drop_dead(h, loc, why);
                return if why == Life::Expired {
                    Fetch::Expired
                } else {
                    Fetch::Flushed
                };
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

    fn store(
        &self,
        mode: Mode,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        opts: &StoreOpts,
    ) -> StoreResult {
        self.store_impl(mode, key, flags, exptime, value, opts)
    }

    fn delete(&self, key: &[u8], opts: &DeleteOpts) -> DeleteResult {
        let h = self.hash(key);
        if !opts.invalidate {
            let mut l = self.index.lock(h);
            let Ok((pos, loc)) = self.find_live_locked(&mut l, h, key) else {
                return DeleteResult::NotFound;
            };
            if let Some(c) = opts.compare_cas {
                // SAFETY: linked in the locked partition.
                let (d, v) = unsafe { self.view(loc) };
                if self.cas_of(loc, d, &v) != c {
                    return DeleteResult::Exists;
                }
            }
            self.unlink(&mut l, pos, loc, None);
            return DeleteResult::Deleted;
        }
        // md I: a stale copy with a new CAS replaces the item.
        loop {
            let Ok(old) = self.snapshot(h, key, true) else {
                return DeleteResult::NotFound;
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
            let Some(new_loc) = self.write_or_oom(&new) else {
                // No memory for the copy: mark the item itself, keeping its CAS.
                let mut l = self.index.lock(h);
                if let Ok((_, loc)) = self.find_live_locked(&mut l, h, key) {
                    // SAFETY: linked in the locked partition.
                    let v = unsafe { self.view(loc) }.1;
                    let _ = v
                        .state
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                            Some((s | STALE) & !TOKEN_SENT)
                        });
                    return DeleteResult::Invalidated(old.cas);
                }
                return DeleteResult::NotFound;
            };
            if let Some((cas, _)) = self.link_if_current(h, key, Some(old.loc), new_loc, false) {
                return DeleteResult::Invalidated(cas);
            }
        }
    }

    fn delta(&self, key: &[u8], incr: bool, delta: u64, opts: &DeltaOpts) -> Delta {
        let h = self.hash(key);
        let new_cas = opts.new_cas.filter(|_| self.use_cas);
        loop {
            let old = match self.snapshot(h, key, true) {
                Ok(old) => old,
                Err(_) => {
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
                    let Some(new_loc) = self.write_or_oom(&new) else {
                        return Delta::OutOfMemory;
                    };
                    match self.link_if_current(h, key, None, new_loc, true) {
                        Some((cas, _)) => {
                            return Delta::Value(Counter {
                                value: viv.initial,
                                cas,
                                exptime: 0,
                                created: true,
                            })
                        }
                        None => continue,
                    }
                }
            };
            if old.value.is_empty() {
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
            let Some(new_loc) = self.write_or_oom(&new) else {
                return Delta::OutOfMemory;
            };
            if let Some((cas, _)) = self.link_if_current(h, key, Some(old.loc), new_loc, !in_place)
            {
                return Delta::Value(Counter {
                    value: n,
                    cas,
                    exptime: old.exptime,
                    created: false,
                });
            }
        }
    }

    fn flush_all(&self, at: Option<RelTime>) {
        let now = self.clock.now();
        let oldest_live = at.unwrap_or(now).saturating_sub(1).max(1);
        self.oldest_live.store(oldest_live, Ordering::Relaxed);
        if oldest_live <= now {
            // Immediate: every segment opened before this generation is flushed. Seal
            // the active ones, so later stores go to segments opened after it.
            let f = self.gen.fetch_add(1, Ordering::Relaxed);
            for r in self.regions.iter() {
                let mut region = r.lock();
                let mut arena = self.arena.lock();
                for slot in region.iter_mut() {
                    if let Some(a) = slot.take() {
                        self.seal(&mut arena, a);
                    }
                }
            }
            {
                let mut arena = self.arena.lock();
                if let Some(a) = arena.reinsert.take() {
                    self.seal(&mut arena, a);
                }
            }
            self.flush_gen.fetch_max(f, Ordering::Release);
        }
        self.flush_seq.fetch_add(1, Ordering::Relaxed);
    }

    fn set_limit(&self, limit_bytes: u64) {
        self.limit.store(limit_bytes, Ordering::Relaxed);
    }

    fn stats(&self) -> Stats {
        let c = self.index.counts();
        let (buckets, hash_bytes) = self.index.size();
        let now = self.clock.now();
        let (oldest, segments) = {
            let arena = self.arena.lock();
            let oldest = [arena.fifo.small.front(), arena.fifo.main.front()]
                .into_iter()
                .flatten()
                .map(|&id| now.saturating_sub(self.desc(id).opened.load(Ordering::Relaxed)))
                .max()
                .unwrap_or(0);
            let normal = |id: &u32| self.desc(*id).cap.load(Ordering::Relaxed) == self.seg_size;
            let normal_count = (arena.used - arena.large_used) / u64::from(self.seg_size);
            (
                oldest,
                crate::SegmentStats {
                    segment_bytes: u64::from(self.seg_size),
                    segments: normal_count,
                    free_segments: (arena.free.len()
                        + usize::from(arena.spare.is_some())
                        + arena.limbo.iter().filter(|(_, id)| normal(id)).count())
                        as u64,
                    large_segments: arena.large_count,
                    memory_bytes: arena.used,
                    reinserted: self.counters.reinserted.load(Ordering::Relaxed),
                    compacted: self.counters.compacted.load(Ordering::Relaxed),
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
            evicted_nonzero: k.evicted_nonzero.load(Ordering::Relaxed),
            evicted_time: k.evicted_time.load(Ordering::Relaxed),
            outofmemory: k.outofmemory.load(Ordering::Relaxed),
            oldest_item_age: oldest,
            crawler_reclaimed: k.crawler_reclaimed.load(Ordering::Relaxed),
            hash_power_level: 63 - slots.max(1).leading_zeros(),
            hash_bytes,
            hash_is_expanding: self.index.is_expanding(),
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

    fn prefetch_index(&self, key: &[u8]) {
        let g = epoch::pin();
        self.index.prefetch(self.hash(key), &g);
    }

    fn prefetch_item(&self, key: &[u8]) {
        let g = epoch::pin();
        if let Some(loc) = self.index.peek(self.hash(key), &g) {
            let d = self.desc(loc.seg);
            let base = d.ptr.load(Ordering::Acquire);
            // A hint only: the addresses are computed, never dereferenced here. Two
            // lines: a 100-byte value with its header and key spans two.
            let p = base.wrapping_add(loc.off as usize);
            index::prefetch(p);
            index::prefetch(p.wrapping_add(64));
        }
    }

    fn maintain(&self) {
        self.index.collect();
        self.expire_segments();
        let seq = self.flush_seq.load(Ordering::Relaxed);
        let oldest_live = self.oldest_live.load(Ordering::Relaxed);
        if seq != self.swept_seq.load(Ordering::Relaxed)
            && oldest_live != 0
            && oldest_live <= self.clock.now()
        {
            self.swept_seq.store(seq, Ordering::Relaxed);
            self.sweep_delayed_flush();
        }
    }
}

#[cfg(test)]
mod tests;
