//! The arena: the pool of segments behind `Seg::arena` ([`Arena`]): descriptor ids,
//! segment memory and its accounting against the limit, the free list, limbo
//! (retired segments waiting for readers to leave), the sealed segments' queues,
//! the reinsertion segment and its spare. Also [`Active`], an open segment being
//! filled (a region's, or the arena's reinsertion segment), and [`Region`], the
//! active segments of a region's TTL groups.
//!
//! Locks: the arena lock. An `Arena` is only reachable through `Seg::arena`'s guard,
//! so its methods (`&mut self`) run under it; they take no other lock and never
//! wait. [`Active::append`] needs whoever owns the open segment: its region's lock,
//! or the arena lock for the reinsertion segment.
//!
//! Imports: segments, fifo, item (to write), index's [`Loc`], epoch (limbo).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use super::epoch;
use super::fifo::Fifo;
use super::index::{Loc, MAX_SEGMENTS};
use super::item;
use super::segments::{derived_cas, Descs};
use crate::clock::RelTime;
use crate::SegmentStats;

/// Sealed segments `stats` looks through for the oldest of each kind.
const AGE_SCAN_MAX: usize = 1024;

/// Where a new item went, and its CAS unique as [`super::segments::Desc::cas_of`]
/// gives it with CAS on (the caller, who knows whether it is, reports 0 if not).
#[derive(Clone, Copy)]
pub struct Written {
    pub loc: Loc,
    pub cas: u64,
}

/// TTL groups: items that never expire, then TTLs under 8 s, 64 s, 512 s, … 2^18 s.
pub const TTL_BUCKETS: usize = 8;
/// Allocation regions; threads are spread over them round-robin.
pub const REGIONS: usize = 16;

/// A region: the active segment of each TTL group, under the region's lock
/// (`Seg::regions`).
pub type Region = [Option<Active>; TTL_BUCKETS];

/// An open segment being filled.
#[derive(Clone, Copy)]
pub struct Active {
    pub seg: u32,
    pub off: u32,
    pub cap: u32,
}

impl Active {
    /// Segment `seg` of `cap` bytes, just opened.
    pub fn fresh(seg: u32, cap: u32) -> Active {
        Active { seg, off: 0, cap }
    }

    /// Whether `size` more bytes fit.
    pub fn fits(&self, size: u32) -> bool {
        self.off + size <= self.cap
    }

    /// Bytes left.
    pub fn room(&self) -> u64 {
        u64::from(self.cap - self.off)
    }

    /// Writes `new`, whose [`item::New::size`] [`Active::fits`], after the segment's
    /// items, raises the segment's `max_exptime` for it, and returns where it went.
    /// It takes `new.size_at(off)` bytes, at most its `size()`.
    ///
    /// # Safety
    /// The caller owns this open segment (it is its region's active segment and the
    /// region is locked, or it is the reinsertion segment and the arena is locked):
    /// bytes from `off` on are written by no one else and read by no one until
    /// linked. `descs` is the table that holds its descriptor.
    pub unsafe fn append(&mut self, descs: &Descs, new: &item::New<'_>) -> Written {
        debug_assert!(self.fits(new.size() as u32));
        let d = descs.get(self.seg);
        let base = d.ptr.load(Ordering::Acquire);
        // SAFETY: per the contract the bytes from `off` on are ours; the segment has
        // `cap` bytes and `off + size() <= cap`; `off` is 2-aligned (item sizes
        // are even) and the segment 64-aligned.
        unsafe { new.write(base.add(self.off as usize)) };
        d.raise_expiry(new.exptime);
        let loc = Loc {
            seg: self.seg,
            off: self.off,
        };
        self.off += new.size_at(self.off as usize) as u32;
        Written {
            loc,
            cas: new
                .cas
                .unwrap_or_else(|| derived_cas(d.gen.load(Ordering::Relaxed), loc.off)),
        }
    }
}

/// The arena's state, under `Seg::arena`.
pub struct Arena {
    /// Bytes of a normal segment (fixed; larger or smaller ones are large items').
    seg_size: u32,
    /// Normal segments with memory, ready to open.
    pub free: Vec<u32>,
    /// Retired segments waiting for readers: (epoch, id).
    pub limbo: VecDeque<(u64, u32)>,
    /// Retired segments readers have left but leases still hold (`Desc::lent` >
    /// 0): reused once their leases drop (see `lease.rs`). Up to `held_max` bytes
    /// of them are not charged against the limit, so that nobody waits for a lease.
    held: Vec<u32>,
    /// Bytes of the `held` segments' memory (part of `used`; mirrored in
    /// `Descs::held_bytes` for `lend`).
    held_bytes: u64,
    /// Held bytes not charged against the limit (`Descs::held_max`, set with it).
    pub held_max: u64,
    /// Sealed segments, oldest first in each of S3-FIFO's two queues.
    pub fifo: Fifo,
    /// Descriptor ids without memory, for large items.
    spare_ids: Vec<u32>,
    /// Next never-used descriptor id (ids start at 1).
    next_id: u32,
    /// Bytes of segment memory held (normal and large).
    pub used: u64,
    /// Of `used`, bytes and count of large segments.
    large_used: u64,
    large_count: u64,
    /// Eviction's destination for reinserted (hot) items.
    pub reinsert: Option<Active>,
    /// A free segment kept for the next reinsertion segment: each evicted segment
    /// refills it on its way out of limbo, so eviction never needs the free list.
    pub spare: Option<u32>,
    /// A lower bound of the sealed segments' `max_exptime` (touches only raise
    /// those): until the clock reaches it, and with no flush_all since the last
    /// scan, `expire_segments` has nothing to free and skips its walk.
    pub next_expiry: RelTime,
    /// The flush generation `expire_segments` last scanned for.
    pub scanned_flush_gen: u64,
}

impl Arena {
    pub fn new(seg_size: u32) -> Arena {
        Arena {
            seg_size,
            free: Vec::new(),
            limbo: VecDeque::new(),
            held: Vec::new(),
            held_bytes: 0,
            held_max: 0,
            fifo: Fifo::default(),
            spare_ids: Vec::new(),
            next_id: 1,
            used: 0,
            large_used: 0,
            large_count: 0,
            reinsert: None,
            spare: None,
            next_expiry: 0,
            scanned_flush_gen: 0,
        }
    }

    fn new_id(&mut self) -> Option<u32> {
        if let Some(id) = self.spare_ids.pop() {
            return Some(id);
        }
        if self.next_id >= MAX_SEGMENTS {
            return None;
        }
        self.next_id += 1;
        Some(self.next_id - 1)
    }

    /// A new segment of `cap` bytes with fresh memory (the caller checked the
    /// limit); large when `cap` is not the normal size. None when there is no id or
    /// the allocator has no memory.
    pub fn alloc(&mut self, descs: &Descs, cap: u32) -> Option<u32> {
        let p = descs.alloc_memory(cap);
        if p.is_null() {
            return None;
        }
        let id = self.adopt(descs, cap, p);
        if id.is_none() {
            // SAFETY: just allocated with this capacity; nothing else has it.
            unsafe { descs.free_memory(p, cap) };
        }
        id
    }

    /// A new segment id for memory `p` of `cap` bytes that the caller got from
    /// `descs` (alloc above, or a restart adopting a saved segment of the memory
    /// file); None when there is no id.
    pub fn adopt(&mut self, descs: &Descs, cap: u32, p: *mut u8) -> Option<u32> {
        let id = self.new_id()?;
        let d = descs.get(id);
        d.cap.store(cap, Ordering::Relaxed);
        d.ptr.store(p, Ordering::Release);
        self.used += u64::from(cap);
        if cap != self.seg_size {
            self.large_used += u64::from(cap);
            self.large_count += 1;
        }
        Some(id)
    }

    fn release_memory(&mut self, descs: &Descs, id: u32) {
        let d = descs.get(id);
        let p = d.ptr.swap(std::ptr::null_mut(), Ordering::AcqRel);
        let cap = d.cap.swap(0, Ordering::Relaxed);
        if !p.is_null() {
            // SAFETY: the segment is out of limbo (no reader can be in it) or free,
            // and none of its items is linked.
            unsafe { descs.free_memory(p, cap) };
            self.used -= u64::from(cap);
            if cap != self.seg_size {
                self.large_used -= u64::from(cap);
                self.large_count -= 1;
            }
        }
        self.spare_ids.push(id);
    }

    /// Bytes of segment memory charged against the limit: all of it but what
    /// leases hold in retired segments (`held`), up to `held_max`. Held bytes past
    /// that are charged, so that segment memory stays within the limit and
    /// `held_max` however long stalled readers keep their leases: eviction then
    /// shrinks the cache instead (`lend` stops taking new segments meanwhile).
    pub fn charged(&self) -> u64 {
        self.used - self.held_bytes.min(self.held_max)
    }

    /// Changes `held_bytes` by `add` less `sub`, and publishes it for `lend`.
    fn set_held(&mut self, descs: &Descs, add: u64, sub: u64) {
        self.held_bytes = self.held_bytes + add - sub;
        descs.held_bytes.store(self.held_bytes, Ordering::Relaxed);
    }

    /// Gives free segments' memory back while `charged + need` is over `limit` (free
    /// segments count as charged). Returns whether `charged + need` is within it now.
    pub fn release_over(&mut self, descs: &Descs, need: u64, limit: u64) -> bool {
        while self.charged() + need > limit {
            match self.free.pop().or_else(|| self.spare.take()) {
                Some(id) => self.release_memory(descs, id),
                None => break,
            }
        }
        self.charged() + need <= limit
    }

    /// Moves quiescent segments from limbo to the free list (or frees large ones),
    /// and held segments whose leases have all dropped. A quiescent segment with
    /// leases goes to `held` instead; the segments behind it are not held up.
    pub fn reclaim_limbo(&mut self, descs: &Descs) {
        let mut i = 0;
        while i < self.held.len() {
            let id = self.held[i];
            // Acquire: pairs with the last lease's Release decrement.
            if descs.get(id).lent.load(Ordering::Acquire) == 0 {
                self.held.swap_remove(i);
                self.set_held(
                    descs,
                    0,
                    u64::from(descs.get(id).cap.load(Ordering::Relaxed)),
                );
                self.recycle(descs, id);
            } else {
                i += 1;
            }
        }
        while let Some(&(e, id)) = self.limbo.front() {
            if !epoch::is_quiescent(e) {
                break;
            }
            self.limbo.pop_front();
            // Acquire, after the quiescence check's: a lease taken by a reader that
            // has left is counted (see lease.rs), and a dropped one's reads are done.
            if descs.get(id).lent.load(Ordering::Acquire) != 0 {
                self.held.push(id);
                self.set_held(
                    descs,
                    u64::from(descs.get(id).cap.load(Ordering::Relaxed)),
                    0,
                );
                continue;
            }
            self.recycle(descs, id);
        }
    }

    /// A retired segment nothing can reach any more: the spare, the free list, or
    /// (large) its memory given back.
    fn recycle(&mut self, descs: &Descs, id: u32) {
        let cap = descs.get(id).cap.load(Ordering::Relaxed);
        if cap == self.seg_size {
            if self.spare.is_none() {
                self.spare = Some(id);
            } else {
                self.free.push(id);
            }
        } else {
            self.release_memory(descs, id);
        }
    }

    /// Retires an emptied segment: reusable once no reader can be in it.
    pub fn retire(&mut self, id: u32) {
        self.limbo.push_back((epoch::advance(), id));
    }

    /// Appends a sealed segment to its queue and lowers `next_expiry` to its expiry.
    pub fn enqueue(&mut self, descs: &Descs, id: u32, main: bool) {
        self.fifo.push(id, main);
        let max = descs.get(id).max_exptime.load(Ordering::Relaxed);
        self.next_expiry = self.next_expiry.min(max);
    }

    /// Seals an open segment: its items end where it was filled; it joins its queue.
    pub fn seal(&mut self, descs: &Descs, a: Active) {
        let d = descs.get(a.seg);
        d.end.store(a.off, Ordering::Relaxed);
        self.enqueue(descs, a.seg, d.main.load(Ordering::Relaxed));
    }

    /// Bytes left in the reinsertion segment (0 without one).
    pub fn reinsert_room(&self) -> u64 {
        self.reinsert.map_or(0, |a| a.room())
    }

    /// The age of the oldest sealed segment at `now`, and the segment figures of
    /// `stats` (without the counters, which the engine keeps).
    pub fn stats(&self, descs: &Descs, now: RelTime) -> (u32, SegmentStats) {
        let age = |id: &u32| now.saturating_sub(descs.get(*id).opened.load(Ordering::Relaxed));
        let normal = |id: &u32| descs.get(*id).cap.load(Ordering::Relaxed) == self.seg_size;
        // Each queue is oldest first; large segments are only in the small queue, so
        // its first normal and first large segment are the oldest of their kind. The
        // search is bounded (this runs under the arena lock): past the bound, the age
        // of the last segment looked at stands in, a lower bound.
        let (main, small) = (&self.fifo.main, &self.fifo.small);
        let first = |want_normal: bool| {
            let found = small
                .iter()
                .take(AGE_SCAN_MAX)
                .find(|id| normal(id) == want_normal);
            found.or_else(|| small.get(AGE_SCAN_MAX))
        };
        let oldest_normal_age = [main.front(), first(true)]
            .into_iter()
            .flatten()
            .map(age)
            .max()
            .unwrap_or(0);
        let oldest_large_age = if self.large_count > 0 {
            first(false).map_or(0, age)
        } else {
            0
        };
        let oldest = oldest_normal_age.max(oldest_large_age);
        let normal_count = (self.used - self.large_used) / u64::from(self.seg_size);
        let segments = SegmentStats {
            segment_bytes: u64::from(self.seg_size),
            segments: normal_count,
            free_segments: (self.free.len()
                + usize::from(self.spare.is_some())
                + self.limbo.iter().filter(|(_, id)| normal(id)).count())
                as u64,
            large_segments: self.large_count,
            memory_bytes: self.used,
            held_bytes: self.held_bytes,
            held_segments: self.held.len() as u64,
            oldest_normal_age,
            oldest_large_age,
            ..SegmentStats::default()
        };
        (oldest, segments)
    }
}
