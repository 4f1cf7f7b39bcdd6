//! S3-FIFO's two queues of sealed segments ([`Fifo`]) and the policy that picks the
//! next segment to evict or compact from them. Segment ids only: what happens to the
//! chosen segment's items is `evict.rs`'s business.
//!
//! Locks: the arena lock. A `Fifo` lives in the arena's state (`Seg::arena`), so
//! a `&mut Fifo` is only had under that lock; nothing here takes a lock.
//!
//! Imports: nothing of the engine's.

use std::collections::VecDeque;

/// The small queue's share of sealed segments, in percent (S3-FIFO's 10%).
const SMALL_PERCENT: usize = 10;

/// The sealed segments, in S3-FIFO's two queues (see `Seg::evict_one`), each oldest
/// first. Two queues, not one list with a flag per segment, so that choosing the
/// next victim takes no walk over all sealed segments (65K of them at `-m 64g`).
#[derive(Default)]
pub struct Fifo {
    /// Segments written by stores (and large items' own segments).
    pub small: VecDeque<u32>,
    /// Reinsertion segments: items that were hit, moved forward by eviction.
    pub main: VecDeque<u32>,
}

impl Fifo {
    pub fn push(&mut self, id: u32, main: bool) {
        if main {
            self.main.push_back(id);
        } else {
            self.small.push_back(id);
        }
    }

    pub fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &u32> {
        self.small.iter().chain(self.main.iter())
    }

    /// Removes and returns the first segment (small queue first, each oldest first)
    /// for which `pick` holds.
    pub fn take_first(&mut self, mut pick: impl FnMut(u32) -> bool) -> Option<u32> {
        if let Some(i) = self.small.iter().position(|&id| pick(id)) {
            return self.small.remove(i);
        }
        let i = self.main.iter().position(|&id| pick(id))?;
        self.main.remove(i)
    }

    /// S3-FIFO over segments: segments written by stores form the small queue,
    /// reinsertion segments the main queue. While stored items take more than
    /// SMALL_PERCENT of the sealed segments, the oldest of those is the victim (its
    /// items that were hit move to main, the rest, mostly one-hit wonders, leave
    /// early); otherwise the oldest main segment is (its items hit since they moved
    /// are reinserted: CLOCK). Removes and returns it.
    pub fn pop_victim(&mut self) -> Option<u32> {
        let from_main =
            self.small.len() * 100 <= self.len() * SMALL_PERCENT && !self.main.is_empty();
        if from_main {
            self.main.pop_front()
        } else {
            self.small.pop_front()
        }
    }

    /// The queue whose oldest segment is the emptier of the two fronts, if that one
    /// has at most `most` bytes live (`live` of a segment id): `Some(true)` for the
    /// small queue, `Some(false)` for main.
    pub fn mostly_dead_front(&self, most: u64, live: impl Fn(u32) -> u64) -> Option<bool> {
        let front = |q: &VecDeque<u32>| q.front().map(|&id| live(id));
        match (front(&self.small), front(&self.main)) {
            (Some(s), m) if s <= most && m.is_none_or(|m| s <= m) => Some(true),
            (_, Some(m)) if m <= most => Some(false),
            _ => None,
        }
    }

    /// Removes and returns the oldest segment of the small queue or of main.
    pub fn pop_front(&mut self, small: bool) -> Option<u32> {
        if small {
            self.small.pop_front()
        } else {
            self.main.pop_front()
        }
    }
}
