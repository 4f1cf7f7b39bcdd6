//! Writing new items: the allocation regions and TTL groups ([`Seg::write_item`]),
//! large items' own segments ([`Seg::write_large`]), and taking segments from the
//! arena, making room by reclaiming, waiting for readers or evicting
//! ([`Seg::take_segment`], [`Seg::make_room`], [`Seg::wait_or_evict`]).
//!
//! Locks: `write_item`, `write_large` and `write_or_oom` take a region lock and then
//! the arena lock themselves (region → arena), so they must be called with no lock
//! held and unpinned (making room may wait for readers). The others take the arena's
//! state (`&mut Arena`: the arena lock is held) and may take partition locks inside,
//! through eviction.
//!
//! Imports: `super::Seg` (its fields), evict (`Seg::evict_one`,
//! `Seg::compact_mostly_dead`), arena, segments, index, item, epoch.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::arena::{Active, Arena, Region, Written, REGIONS, TTL_BUCKETS};
use super::epoch;
use super::index::Loc;
use super::item;
use super::segments::{derived_cas, expiry_bound};
use super::Seg;
use crate::clock::RelTime;

/// The TTL group of an item.
pub fn ttl_bucket(exptime: RelTime, now: RelTime) -> usize {
    if exptime == 0 {
        return 0;
    }
    let ttl = exptime.saturating_sub(now).max(1);
    // 1..8 → 1, 8..64 → 2, … ≥ 2^18 → 7.
    (1 + (31 - ttl.leading_zeros()) as usize / 3).min(TTL_BUCKETS - 1)
}

thread_local! {
    static REGION: usize = next_region();
}

fn next_region() -> usize {
    /// Round-robin assignment of threads to regions. Relaxed: any spread will
    /// do, and the region's own lock orders what its threads write.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) % REGIONS
}

impl Seg {
    /// Writes a new item and returns where; None when memory cannot be found.
    /// Must not be called while pinned or holding a partition lock.
    ///
    /// A new version of a key passes what its unique must exceed as `after` (0: no
    /// bound; see `Seg::must_exceed`). An item without a unique of its own then
    /// gets one ([`Seg::next_unique`], 8 bytes) only when its place's derived
    /// unique is not above `after`: in a segment opened before the one that holds
    /// the key's last version (another TTL group or region).
    pub(super) fn write_item(&self, new: &item::New<'_>, after: u64) -> Option<Written> {
        let size = new.size();
        if size > self.large_min as usize {
            // A segment of its own, opened now: its generation is above every
            // unique given so far, `after` included.
            return self.write_large(new, size);
        }
        let now = self.clock.now();
        let b = ttl_bucket(new.exptime, now);
        let mut region = self.regions[REGION.with(|r| *r)].lock();
        let size = size as u32;
        let mut a = match region[b] {
            Some(a) if a.fits(size) => a,
            _ => self.active_fitting(&mut region, b, size)?,
        };
        let paid;
        let ordered = || {
            let gen = self.descs.get(a.seg).gen.load(Ordering::Relaxed);
            derived_cas(gen, a.off) > after
        };
        let new = if after != 0 && new.cas.is_none() && !ordered() {
            paid = item::New {
                cas: Some(self.next_unique(after)),
                ..*new
            };
            let size = paid.size() as u32;
            if !a.fits(size) {
                // The 8 bytes do not fit: seal `a`, write in a fresh segment.
                region[b] = Some(a);
                a = self.active_fitting(&mut region, b, size)?;
            }
            &paid
        } else {
            new
        };
        // SAFETY: the region owns `a` (it is this region's active segment, and the
        // region is locked): bytes from `a.off` on are written by no one else and
        // read by no one until linked.
        let written = unsafe { a.append(&self.descs, new) };
        region[b] = Some(a);
        Some(written)
    }

    /// The region's active segment of TTL group `b` if `size` more bytes fit in
    /// it, else a fresh one (the old one sealed). Takes it out of the region: the
    /// caller puts it back after writing.
    #[cold]
    fn active_fitting(&self, region: &mut Region, b: usize, size: u32) -> Option<Active> {
        match region[b].take() {
            Some(a) if a.fits(size) => Some(a),
            old => {
                let mut arena = self.arena.lock();
                if let Some(old) = old {
                    arena.seal(&self.descs, old);
                }
                let seg = self.take_segment(&mut arena)?;
                Some(Active::fresh(seg, self.seg_size))
            }
        }
    }

    /// An item too large for a shared segment gets a segment of its own size.
    fn write_large(&self, new: &item::New<'_>, size: usize) -> Option<Written> {
        let cap = u32::try_from(size).ok()?;
        let id = {
            let mut arena = self.arena.lock();
            let id = self.take_large(&mut arena, cap)?;
            self.open(id, false);
            id
        };
        let d = self.descs.get(id);
        // SAFETY: the segment was just given memory of `cap` bytes and is not in the
        // FIFO or linked anywhere yet: it is ours.
        unsafe { new.write(d.ptr.load(Ordering::Acquire)) };
        d.max_exptime
            .store(expiry_bound(new.exptime), Ordering::Relaxed);
        d.end.store(cap, Ordering::Relaxed);
        // A large item's own segment is in the small queue (its descriptor's `main`
        // flag may be left from an earlier use).
        self.arena.lock().enqueue(&self.descs, id, false);
        Some(Written {
            loc: Loc { seg: id, off: 0 },
            cas: new
                .cas
                .unwrap_or_else(|| derived_cas(d.gen.load(Ordering::Relaxed), 0)),
        })
    }

    /// Writes `new` (`after` as for [`Seg::write_item`]), counting out-of-memory.
    pub(super) fn write_or_oom(&self, new: &item::New<'_>, after: u64) -> Option<Written> {
        let loc = self.write_item(new, after);
        if loc.is_none() {
            self.counters.outofmemory.fetch_add(1, Ordering::Relaxed);
        }
        loc
    }

    /// Memory for `need` more bytes: frees memory above the limit, then evicts until
    /// `used + need <= limit`. False when nothing more can be evicted.
    fn make_room(&self, arena: &mut Arena, need: u64) -> bool {
        let limit = self.segment_limit();
        loop {
            arena.reclaim_limbo(&self.descs);
            // Free segments count as used; give memory back while over the limit.
            if arena.release_over(&self.descs, need, limit) {
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
            arena.reclaim_limbo(&self.descs);
            let limit = self.segment_limit();
            // Over the limit (cache_memlimit lowered it): give free segments back
            // instead of reusing them, and evict until a segment fits again.
            if self.evict && !arena.release_over(&self.descs, 0, limit) {
                if !self.wait_or_evict(arena) {
                    return None;
                }
                continue;
            }
            if self.evict && arena.charged() + u64::from(self.seg_size) <= limit {
                // Keep two segments on their way to the free list (see
                // compact_mostly_dead): what this compacts is free for a later call,
                // once readers have left it, so nobody waits for readers. Not under
                // -M, whose own compaction (evict_one) keeps the spare for its moves:
                // there a compacted segment could end up as an idle spare while
                // stores answer out of memory.
                while arena.free.len() + arena.limbo.len() < 2 && self.compact_mostly_dead(arena) {}
            }
            if let Some(id) = arena.free.pop() {
                self.open(id, false);
                return Some(id);
            }
            // Again: compaction may have taken memory for a spare segment.
            if arena.charged() + u64::from(self.seg_size) <= limit {
                let id = arena.alloc(&self.descs, self.seg_size)?;
                self.open(id, false);
                if !self.evict && arena.reinsert.is_none() {
                    // Under -M, compaction needs somewhere to move live items: the
                    // first segment becomes the reinsertion segment.
                    arena.reinsert = Some(Active::fresh(id, self.seg_size));
                    continue;
                }
                return Some(id);
            }
            if !self.wait_or_evict(arena) {
                return None;
            }
        }
    }

    /// A segment of its own for a large item, of `cap` bytes (not yet opened).
    fn take_large(&self, arena: &mut Arena, cap: u32) -> Option<u32> {
        if !self.make_room(arena, u64::from(cap)) {
            return None;
        }
        arena.alloc(&self.descs, cap)
    }
}
