//! The index's figures for `stats`: item and byte counts, table sizes, rebuilds and
//! cuckoo moves (a child of `index.rs`, so that it reads the partitions directly).
//!
//! Locks: `counts`, `size` and `reset_total_items` take each partition's lock in
//! turn (call them with none held); the rest read atomics.
//!
//! Imports: its parent, index.

use std::sync::atomic::Ordering;

use super::{Counts, Index};
use crate::seg::tables::unpack;

impl Index {
    /// Sums of every partition's counts.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for l in self.locks.iter() {
            let pc = *l.lock();
            c.items += pc.items;
            c.bytes += pc.bytes;
            c.total_items += pc.total_items;
            c.floor = c.floor.max(pc.floor);
        }
        c
    }

    pub fn reset_total_items(&self) {
        for l in self.locks.iter() {
            l.lock().total_items = 0;
        }
    }

    /// Buckets of all current tables, and the bytes of all tables (current, and
    /// retired but not yet freed: [`Index::bytes`]).
    pub fn size(&self) -> (u64, u64) {
        let mut n = 0u64;
        for (l, head) in self.locks.iter().zip(self.heads.iter()) {
            let _l = l.lock();
            // SAFETY: under the partition lock the table cannot be replaced or freed.
            n += unsafe { unpack(head.table.load(Ordering::Acquire)) }.len() as u64;
        }
        (n, self.bytes())
    }

    /// Tables built by rebuilds, and the items they re-read (see the fields).
    pub fn rebuild_counts(&self) -> (u64, u64) {
        (
            self.rebuilds.load(Ordering::Relaxed),
            self.rehashed.load(Ordering::Relaxed),
        )
    }

    /// Chains of cuckoo moves made since start (each chain adds 2 to its
    /// partition's count).
    pub fn cuckoo_chains(&self) -> u64 {
        self.heads
            .iter()
            .map(|h| h.moves.load(Ordering::Relaxed) / 2)
            .sum()
    }

    pub fn is_expanding(&self) -> bool {
        self.expanding.load(Ordering::Relaxed) != 0
    }
}
