//! Upkeep: flush_all ([`Seg::flush_all_impl`], which frees an immediate flush's
//! segments before it returns) and what `maintain` does once a second
//! ([`Seg::maintain_impl`]): shrinking index tables left mostly empty
//! (`Seg::shrink_index`), collecting retired index tables, freeing sealed
//! segments that expired or were flushed whole ([`Seg::expire_segments`]), and
//! sweeping the items of a delayed flush_all once it is due
//! ([`Seg::sweep_delayed_flush`], [`Seg::sweep_segment`]).
//!
//! Locks: the public entry points take every lock they need themselves, in the
//! order region → arena → partition, so they must be called with no lock held and
//! unpinned. `sweep_segment` expects the lock that owns the segment it walks (see its
//! contract).
//!
//! Imports: `super::Seg` (its fields), evict (`Seg::empty_segment`), link
//! (`Seg::unlink`), arena (through `Seg::arena`), segments, index, item.

use std::sync::atomic::Ordering;

use super::index::{self, Loc};
use super::item::View;
use super::segments::{Desc, Life, NEVER};
use super::Seg;
use crate::clock::RelTime;

/// How many calls of `maintain` one pass of [`Seg::shrink_index`] over every index
/// partition takes (a divisor of `index::PARTITIONS`).
const SHRINK_SLICES: usize = 16;

impl Seg {
    /// Walks a segment's items up to `end`, unlinking those `pred` selects.
    ///
    /// # Safety
    /// The caller holds the lock that keeps segment `id` from being emptied or reused
    /// (the arena's for sealed segments and the reinsertion segment, the region's for
    /// its active ones), and its items up to `end` are completely written.
    unsafe fn sweep_segment(
        &self,
        id: u32,
        end: u32,
        pred: impl Fn(&Desc, &View<'_>) -> Option<Life>,
    ) {
        let d = self.descs.get(id);
        let base = d.ptr.load(Ordering::Acquire);
        let mut off = 0u32;
        while off < end {
            let loc = Loc { seg: id, off };
            // SAFETY: per the contract the segment is neither emptied nor reused
            // while we walk it, and items up to `end` are completely written.
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

    /// Frees sealed segments that expired or were flushed as a whole.
    fn expire_segments(&self) {
        let now = self.clock.now();
        let flush_gen = self.flush.gen.load(Ordering::Acquire);
        let mut arena = self.arena.lock();
        arena.reclaim_limbo(&self.descs);
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
                let d = self.descs.get(id);
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
            arena.retire(id);
        }
    }

    /// Unlinks every item a delayed flush_all invalidated, in every segment.
    fn sweep_delayed_flush(&self) {
        let now = self.clock.now();
        let flushed = |d: &Desc, v: &View<'_>| {
            (self.flush.life(d, v, now) == Life::Flushed).then_some(Life::Flushed)
        };
        for r in self.regions.iter() {
            let region = r.lock();
            for a in region.iter().flatten() {
                // SAFETY: the region is locked: its active segments stay its own,
                // written up to `a.off`.
                unsafe { self.sweep_segment(a.seg, a.off, flushed) };
            }
        }
        let arena = self.arena.lock();
        if let Some(a) = arena.reinsert {
            // SAFETY: the arena is locked: the reinsertion segment stays its own,
            // written up to `a.off`.
            unsafe { self.sweep_segment(a.seg, a.off, flushed) };
        }
        for &id in arena.fifo.iter() {
            let end = self.descs.get(id).end.load(Ordering::Relaxed);
            // SAFETY: the arena is locked: a sealed segment in its queues is neither
            // emptied nor reused, and its items up to `end` were written before it
            // was sealed.
            unsafe { self.sweep_segment(id, end, flushed) };
        }
    }

    /// [`crate::Engine::flush_all`].
    pub(super) fn flush_all_impl(&self, at: Option<RelTime>) {
        let now = self.clock.now();
        let oldest_live = at.unwrap_or(now).saturating_sub(1).max(1);
        self.flush.oldest_live.store(oldest_live, Ordering::Relaxed);
        if oldest_live <= now {
            // Immediate: every segment opened before this generation is flushed. Seal
            // the active ones, so later stores go to segments opened after it.
            let f = self.gen.fetch_add(1, Ordering::Relaxed);
            for r in self.regions.iter() {
                let mut region = r.lock();
                let mut arena = self.arena.lock();
                for slot in region.iter_mut() {
                    if let Some(a) = slot.take() {
                        arena.seal(&self.descs, a);
                    }
                }
            }
            {
                let mut arena = self.arena.lock();
                if let Some(a) = arena.reinsert.take() {
                    arena.seal(&self.descs, a);
                }
            }
            self.flush.gen.fetch_max(f, Ordering::Release);
            // memcached 1.6.25+ unlinks the flushed items at once (item_flush_expired):
            // curr_items and bytes drop before the OK, and a later lookup is a plain
            // miss. Freeing the flushed segments here does that; nothing is left for
            // `maintain` to sweep.
            self.expire_segments();
            let seq = self.flush_seq.fetch_add(1, Ordering::Relaxed) + 1;
            self.swept_seq.store(seq, Ordering::Relaxed);
            return;
        }
        self.flush_seq.fetch_add(1, Ordering::Relaxed);
    }

    /// Shrinks the index tables left mostly empty (after a burst of small items,
    /// evictions, deletes or a flush), so that the memory they hold, charged
    /// against `-m`, goes back to segments. One partition lock at a time; a
    /// partition that is not mostly empty costs a lock and a comparison. Each call
    /// checks one slice of [`SHRINK_SLICES`], so that the maintainer's pass every
    /// 100 ms touches 256 partitions rather than all 4096 (all of them took some
    /// 115,000 instructions, most of an idle server's CPU): a table left empty is
    /// given back within a second and a half.
    fn shrink_index(&self) {
        let slice = self.shrink_next.fetch_add(1, Ordering::Relaxed) % SHRINK_SLICES;
        let per = index::PARTITIONS / SHRINK_SLICES;
        for p in slice * per..(slice + 1) * per {
            let mut l = self.index.lock_part(p);
            l.shrink(|loc| {
                // SAFETY: rebuilds read keys of items linked in this locked
                // partition, which are not freed while it is locked.
                let v = unsafe { self.descs.view(loc) }.1;
                self.hash(v.key)
            });
        }
    }

    /// [`crate::Engine::maintain`].
    pub(super) fn maintain_impl(&self) {
        self.shrink_index();
        self.index.collect();
        self.expire_segments();
        let seq = self.flush_seq.load(Ordering::Relaxed);
        let oldest_live = self.flush.oldest_live.load(Ordering::Relaxed);
        if seq != self.swept_seq.load(Ordering::Relaxed)
            && oldest_live != 0
            && oldest_live <= self.clock.now()
        {
            self.swept_seq.store(seq, Ordering::Relaxed);
            self.sweep_delayed_flush();
        }
    }
}
