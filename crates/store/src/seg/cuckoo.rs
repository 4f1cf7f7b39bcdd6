//! Cuckoo displacement in an index table (MemC3's BFS cuckoo path): when both of a
//! key's buckets are full, a chain of slots each moves to its other bucket to make
//! room. The scheme, and how lock-free readers stay correct while slots move, is
//! in index.rs's module docs.
//!
//! Locks: none taken; called under the partition's lock, or on an unpublished
//! table. Imports: tables (whose `Table` it adds `place_new` and `place_or_move` to).

use std::sync::atomic::{fence, AtomicU64, Ordering};

use super::tables::{alt_bucket, slot_tag, Table};

/// A step of the displacement search: a bucket, and how it was reached.
#[derive(Clone, Copy, Default)]
struct Node {
    bucket: u32,
    /// The node whose bucket's slot `slot` would move into this bucket (a root
    /// node, one of the new key's buckets, has none: `u16::MAX`).
    parent: u16,
    slot: u8,
    depth: u8,
}

/// Buckets the displacement search looks at, at most, and the longest chain of
/// moves it makes (MemC3 uses 5 and a few hundred).
const SEARCH_NODES: usize = 128;
const SEARCH_DEPTH: u8 = 4;

impl Table<'_> {
    /// Places a slot value in an unpublished table, displacing others if need be.
    pub(super) fn place_new(&self, h: u64, value: u64) -> bool {
        self.place_or_move(h, value, &AtomicU64::new(0))
    }

    /// Places a slot value: in a free slot of its two buckets, or else by cuckoo
    /// displacement ([`Table::displace_for`]); false when neither finds room.
    pub(super) fn place_or_move(&self, h: u64, value: u64, moves: &AtomicU64) -> bool {
        self.place(h, value) || self.displace_for(h, value, moves)
    }

    /// Makes room for `value` (hash `h`, both of whose buckets are full) by moving
    /// a chain of slots each to its other bucket, found by a breadth-first search
    /// of at most [`SEARCH_NODES`] buckets and [`SEARCH_DEPTH`] moves (MemC3's
    /// BFS cuckoo path), then places it. False, with every slot still in one of its
    /// key's buckets, when no chain is found. Called under the partition lock, or
    /// on an unpublished table. `moves` is the partition's move count: odd while
    /// the chain moves (see the module docs: readers that miss meanwhile retry).
    fn displace_for(&self, h: u64, value: u64, moves: &AtomicU64) -> bool {
        let n = self.len();
        let (b1, b2) = self.buckets_of(h);
        let mut q = [Node::default(); SEARCH_NODES];
        q[0] = Node {
            bucket: b1 as u32,
            parent: u16::MAX,
            ..Node::default()
        };
        let mut len = 1;
        if b2 != b1 {
            q[1] = Node {
                bucket: b2 as u32,
                parent: u16::MAX,
                ..Node::default()
            };
            len = 2;
        }
        let mut head = 0;
        while head < len {
            let node = q[head];
            if node.depth < SEARCH_DEPTH {
                let from = node.bucket as usize;
                for (s, slot) in self.buckets[from].slots.iter().enumerate() {
                    let v = slot.load(Ordering::Relaxed);
                    let to = alt_bucket(from, slot_tag(v), n);
                    // A move back into one of the new key's own (full) buckets, or
                    // within a bucket, makes no room.
                    if v == 0 || to == b1 || to == b2 || to == from {
                        continue;
                    }
                    if len == SEARCH_NODES {
                        return false;
                    }
                    q[len] = Node {
                        bucket: to as u32,
                        parent: head as u16,
                        slot: s as u8,
                        depth: node.depth + 1,
                    };
                    len += 1;
                    if self.free_slot(to).is_some() {
                        return self.shift(&q, len - 1, value, moves);
                    }
                }
            }
            head += 1;
        }
        false
    }

    /// Moves the chain of slots that ends at node `end` (whose bucket has a free
    /// slot) one step each, last move first, then puts `value` in the root bucket's
    /// freed slot. Each move copies the slot into its other bucket before clearing
    /// it, so the key is in one of its buckets at every moment. Checks each move
    /// (a chain may pass a bucket twice); false if one no longer fits, with the
    /// moves made so far kept (each one valid).
    fn shift(&self, q: &[Node], end: usize, value: u64, moves: &AtomicU64) -> bool {
        let mut path = [0u16; SEARCH_DEPTH as usize + 1];
        let mut depth = 0;
        let mut i = end;
        while q[i].parent != u16::MAX {
            path[depth] = i as u16;
            depth += 1;
            i = q[i].parent as usize;
        }
        let root = q[i].bucket as usize;
        // The seqlock's write side: the odd count is visible before any slot moved.
        let m = moves.load(Ordering::Relaxed);
        moves.store(m + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let mut done = true;
        for &k in &path[..depth] {
            let node = q[k as usize];
            let (from, to) = (
                q[node.parent as usize].bucket as usize,
                node.bucket as usize,
            );
            let src = &self.buckets[from].slots[node.slot as usize];
            let v = src.load(Ordering::Relaxed);
            let free = self.free_slot(to);
            match free {
                Some(d) if v != 0 && alt_bucket(from, slot_tag(v), self.len()) == to => {
                    self.buckets[to].slots[d].store(v, Ordering::Release);
                    src.store(0, Ordering::Release);
                }
                _ => {
                    done = false;
                    break;
                }
            }
        }
        let placed = done
            && match self.free_slot(root) {
                Some(s) => {
                    self.buckets[root].slots[s].store(value, Ordering::Release);
                    true
                }
                None => false,
            };
        moves.store(m + 2, Ordering::Release);
        placed
    }
}
