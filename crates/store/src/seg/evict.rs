//! Eviction and compaction: emptying a sealed segment the queues chose
//! ([`Seg::evict_one`], [`Seg::compact_mostly_dead`]), item by item
//! ([`Seg::empty_segment`]), moving the items worth keeping into the reinsertion
//! segment ([`Seg::reinsert`]) and unlinking the rest.
//!
//! Locks: the arena lock, held by the caller: every function here takes the
//! arena's state (`&mut Arena`, the guard's contents). They take partition locks
//! one at a time inside (arena → partition), and `evict_one` may wait for pinned
//! readers, so the caller must not hold a partition lock nor be pinned.
//!
//! Imports: `super::Seg` (its fields), link (`Seg::link`, `Seg::unlink`), arena,
//! fifo (through the arena), segments, index, item, epoch.

use std::sync::atomic::Ordering;

use super::arena::{Active, Arena};
use super::epoch;
use super::index::Loc;
use super::item::{self, View, ACCESSED};
use super::segments::{Desc, Life};
use super::Seg;

impl Seg {
    /// While the arena may still grow: if the oldest segment of either queue is mostly
    /// dead (at most a quarter of it still linked, the rest overwritten or deleted),
    /// moves its live items to the reinsertion segment, keeping their state, and
    /// retires it, so that a later `take_segment` reuses it instead of growing. Nothing
    /// is evicted, and nobody waits for readers. Returns whether it retired one.
    ///
    /// Without this, an overwrite-heavy load writes fresh memory
    /// until the whole of `-m` has been touched once, and the first touch of each page
    /// (a page fault, and the kernel zeroing it) cost W4, 1 KB sets over 100k keys at
    /// `-m 1024`, 0.09x–0.21x the do-nothing floor's CPU per request in two runs
    /// (docs/storage.md, "Compaction before growth", has the command).
    pub(super) fn compact_mostly_dead(&self, arena: &mut Arena) -> bool {
        let quarter = u64::from(self.seg_size) / 4;
        let flush_gen = self.flush.gen.load(Ordering::Acquire);
        // The emptier of the two queues' oldest segments, if it is mostly dead.
        let live = |id: u32| {
            let d = self.descs.get(id);
            // A segment emptied by flush_all is left to `maintain`, which frees it
            // whole within a second; until then its items answer as flushed, as in
            // memcached.
            if d.gen.load(Ordering::Relaxed) < flush_gen {
                u64::MAX
            } else {
                d.live.load(Ordering::Relaxed)
            }
        };
        let Some(from_small) = arena.fifo.mostly_dead_front(quarter, live) else {
            return false;
        };
        // Room for the moved items (each may grow by its CAS and exptime fields, so
        // ask for twice their bytes): the reinsertion segment's rest, or a whole spare.
        if arena.reinsert_room() < 2 * quarter && arena.spare.is_none() && arena.free.is_empty() {
            if arena.charged() + u64::from(self.seg_size) > self.segment_limit() {
                return false;
            }
            match arena.alloc(&self.descs, self.seg_size) {
                Some(id) => arena.spare = Some(id),
                None => return false,
            }
        }
        let Some(id) = arena.fifo.pop_front(from_small) else {
            return false;
        };
        self.empty_segment(arena, id, u64::MAX, true);
        arena.retire(id);
        self.counters.compacted.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Evicts the oldest sealed segment of the small or the main queue (as
    /// [`super::fifo::Fifo::pop_victim`] chooses): hot items (a hit since they were
    /// written or last moved) are copied forward into the reinsertion segment while
    /// it has room and the budget (three quarters of a segment, so that each
    /// eviction frees at least a quarter) lasts; the rest are dropped. Under `-M`,
    /// nothing live is dropped: only a segment whose live items all fit in the
    /// reinsertion segment is compacted. Returns false when nothing was freed.
    pub(super) fn evict_one(&self, arena: &mut Arena) -> bool {
        let pick = if self.evict {
            arena.fifo.pop_victim()
        } else {
            let room = arena.reinsert_room()
                + if arena.spare.is_some() {
                    u64::from(self.seg_size)
                } else {
                    0
                };
            arena.fifo.take_first(|id| {
                let d = self.descs.get(id);
                let live = d.live.load(Ordering::Relaxed);
                // Compacting must free something: some dead bytes, and room for the rest.
                // A moved item may grow by its CAS (8 bytes, at least 12 before), so
                // the rest needs up to twice its bytes: with less, the last items would
                // not fit and be dropped, which -M must never do (a churn of mixed
                // sizes under -M saw such evictions: crates/server/tests/memory.rs).
                2 * live <= room && live < u64::from(d.end.load(Ordering::Relaxed)).max(1)
            })
        };
        let Some(id) = pick else {
            return false;
        };
        if arena.spare.is_none() {
            // Let the last evicted segment out of limbo to serve as the spare.
            if let Some(&(e, _)) = arena.limbo.back() {
                epoch::wait_quiescent(e);
                arena.reclaim_limbo(&self.descs);
            }
        }
        let budget = if self.evict {
            u64::from(self.seg_size) * 3 / 4
        } else {
            u64::MAX
        };
        self.empty_segment(arena, id, budget, !self.evict);
        arena.retire(id);
        true
    }

    /// Unlinks every linked item of segment `id`, except that live items that are
    /// hot (or all live items, with `keep_all`) are moved to the reinsertion segment
    /// while `budget` bytes last and it has room. Dead items are counted as expired or
    /// flushed, dropped live ones as evictions. The segment is sealed and out of the
    /// queues: the caller owns it.
    pub(super) fn empty_segment(
        &self,
        arena: &mut Arena,
        id: u32,
        mut budget: u64,
        keep_all: bool,
    ) {
        let d = self.descs.get(id);
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
            let life = self.flush.life(d, &v, now);
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
            cas: Some(d.cas_of(loc, v, self.use_cas)).filter(|_| self.use_cas),
        };
        let size = new.size() as u32;
        // A large item keeps its own segment; one that only grew past the large size
        // by its CAS field still fits a shared segment.
        if v.size as u32 > self.large_min || size > self.seg_size {
            return None;
        }
        let mut a = match arena.reinsert {
            Some(a) if a.fits(size) => a,
            old => {
                arena.reclaim_limbo(&self.descs);
                let id = arena.spare.take().or_else(|| arena.free.pop())?;
                if let Some(old) = old {
                    arena.seal(&self.descs, old);
                }
                self.open(id, true);
                Active::fresh(id, self.seg_size)
            }
        };
        // SAFETY: the reinsertion segment is owned by the arena, whose lock we hold
        // (`arena` is its guard's contents); bytes from `a.off` on are unwritten and
        // unlinked.
        let new_loc = unsafe { a.append(&self.descs, &new) }.loc;
        arena.reinsert = Some(a);
        Some(new_loc)
    }
}
