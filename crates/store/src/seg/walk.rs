//! The key dump's walk ([`Seg::walk_impl`], [`crate::Engine::walk`]): every live item,
//! read through the hash index the way a lock-free get reads it.
//!
//! ```text
//!   cursor: partition p, slot number i (bucket × 8 + slot), stamp = p's table word
//!
//!   pin ─► word = tables[p] ─► slots i .. i+512 of that table ─► unpin ─► next chunk
//!                                  │ occupied slot → loc → item (as `get` does)
//!                                  ├─ dead (expired, flushed)?          skip
//!                                  ├─ tables[p] no longer `word`,
//!                                  │  or a cuckoo chain moved slots?    start p again
//!                                  └─ visit
//!   end of p: a chain moved slots since p started?                      start p again
//! ```
//!
//! Why the index and not the segments: a key lives in one partition for good, and
//! overwrites, touches and the engine's own moves (eviction's reinsertion,
//! compaction, a touch that copies) replace the location in the key's slot without
//! moving the slot. So a walk of the slots meets every key that stays live, once,
//! whatever the writers do meanwhile; a walk of the segments could pass a segment
//! just before an item moved into it. A slot moves only when its partition's table
//! is rebuilt, or when cuckoo displacement moves it to its key's other bucket
//! (`index.rs`, "Cuckoo moves"): a walk that finds the table replaced, or the
//! partition's move count changed since it started the partition, starts the
//! partition again, so keys of that partition may be visited twice, never missed.
//! The move count is checked before each item is shown and once more before the
//! walk leaves the partition, so a move that carried a slot into the part already
//! walked is always seen.
//!
//! Safety is the lock-free get's: the walk is pinned while it holds a table or an
//! item, and loaded both while pinned (see `epoch.rs`); it re-pins every
//! [`SLOTS_PER_PIN`] slots so that no writer waiting for readers waits long. An item
//! is shown only if it is live and its slot was read from the partition's current
//! table (checked after the item, so a table replaced meanwhile, whose copy may have
//! lost the key since, is never trusted).
//!
//! Locks: none taken; the caller must hold none and not be pinned. The visitor runs
//! pinned and must not call the engine (it could wait for a lock whose holder waits
//! for this pin to end).
//!
//! Imports: `super::Seg` (its fields), index, segments, item, epoch.

use std::sync::atomic::Ordering;

use super::epoch;
use super::index::PARTITIONS;
use super::item::{ATIME_MASK, FETCHED};
use super::segments::Life;
use super::Seg;
use crate::{WalkCursor, Walked};

/// Slots read per pin: 64 buckets, a few microseconds of work.
const SLOTS_PER_PIN: usize = 512;

impl Seg {
    /// [`crate::Engine::walk`].
    pub(super) fn walk_impl(
        &self,
        cur: &mut WalkCursor,
        visit: &mut dyn FnMut(&Walked<'_>) -> bool,
    ) {
        let now = self.clock.now();
        while !cur.done {
            let p = cur.part as usize;
            if p >= PARTITIONS {
                cur.done = true;
                return;
            }
            let g = epoch::pin();
            let word = self.index.table_word(p);
            if word != cur.stamp || cur.pos == 0 {
                // A new partition, or this one's table was rebuilt: from its start.
                cur.pos = 0;
                cur.stamp = word;
                cur.moves = self.index.moves_word(p);
            }
            // SAFETY: pinned, `word` loaded while pinned, and `t` is dropped before
            // `g` (it does not leave this iteration).
            let t = unsafe { self.index.table_of(word, &g) };
            let end = t.slot_count();
            let stop = (cur.pos as usize + SLOTS_PER_PIN).min(end);
            let mut rebuilt = false;
            while (cur.pos as usize) < stop {
                let Some(loc) = t.slot(cur.pos as usize) else {
                    cur.pos += 1;
                    continue;
                };
                // SAFETY: pinned, and `loc` came from the index while pinned.
                let (d, v) = unsafe { self.descs.view(loc) };
                if self.flush.life(d, &v, now) != Life::Live {
                    cur.pos += 1;
                    continue;
                }
                if self.index.table_word(p) != word || self.index.moved_since(p, cur.moves) {
                    rebuilt = true;
                    break;
                }
                cur.pos += 1;
                let state = v.state();
                let item = Walked {
                    key: v.key,
                    flags: v.flags,
                    exptime: v.exptime(),
                    atime: state & ATIME_MASK,
                    cas: d.cas_of(loc, &v, self.use_cas),
                    fetched: state & FETCHED != 0,
                    size: v.size as u64,
                    class: if d.cap.load(Ordering::Relaxed) == self.seg_size {
                        1
                    } else {
                        2
                    },
                };
                if !visit(&item) {
                    return;
                }
            }
            if !rebuilt && cur.pos as usize >= end && self.index.moved_since(p, cur.moves) {
                rebuilt = true;
            }
            if rebuilt {
                // The next pass loads the table and starts the partition again.
                cur.pos = 0;
                cur.stamp = 0;
                continue;
            }
            if cur.pos as usize >= end {
                cur.part += 1;
                cur.pos = 0;
            }
        }
    }
}
