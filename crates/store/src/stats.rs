//! The engines' counters and gauges ([`Stats`], [`SegmentStats`]), as
//! [`crate::Engine::stats`] reports them for the server's `stats`, `stats slabs` and
//! `stats items`.
//!
//! Imports: none (plain data).

/// The engine's counters and gauges, named as memcached's stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub curr_items: u64,
    pub total_items: u64,
    /// Bytes items take now, overhead included.
    pub bytes: u64,
    pub limit_maxbytes: u64,
    pub evictions: u64,
    /// Items whose memory was taken back after they expired.
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub evicted_unfetched: u64,
    /// Evicted items that had been read since they were stored or last given a
    /// second chance (memcached's evicted with ITEM_ACTIVE). The reference engine,
    /// a plain LRU, keeps no such bit and reports 0.
    pub evicted_active: u64,
    /// Evicted items that had an exptime.
    pub evicted_nonzero: u64,
    /// Seconds between last access and eviction of the most recent evicted item.
    pub evicted_time: u32,
    /// Stores refused for lack of memory.
    pub outofmemory: u64,
    /// Seconds since the least recently used item was stored or used.
    pub oldest_item_age: u32,
    /// Flushed items freed by background upkeep (memcached's LRU crawler's count).
    pub crawler_reclaimed: u64,
    pub hash_power_level: u32,
    pub hash_bytes: u64,
    /// An index table is being rebuilt larger right now.
    pub hash_is_expanding: bool,
    /// Index tables built by rebuilds (growing or shrinking a partition's table),
    /// and the items those rebuilds re-read to rehash.
    pub index_rebuilds: u64,
    pub index_rehashed_items: u64,
    /// Chains of slots the index's cuckoo displacement moved to make room (zero for
    /// engines without it).
    pub index_cuckoo_chains: u64,
    /// Segment figures (zero for engines without segments).
    pub segments: SegmentStats,
}

/// How an engine with segments uses its memory (reported by `stats slabs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentStats {
    /// Bytes of a normal segment.
    pub segment_bytes: u64,
    /// Normal segments holding memory.
    pub segments: u64,
    /// Of those, free (ready to be filled) or waiting for readers to leave them.
    pub free_segments: u64,
    /// Segments of their own holding one large item each.
    pub large_segments: u64,
    /// Bytes of segment memory held, normal and large (≤ the limit, plus
    /// `held_bytes` up to a sixteenth of the limit).
    pub memory_bytes: u64,
    /// Of `memory_bytes`, retired segments that leases ([`crate::Item::lend`]) still hold:
    /// up to a sixteenth of the limit is not charged against it, the rest is.
    pub held_bytes: u64,
    /// Segments `held_bytes` counts.
    pub held_segments: u64,
    /// Bytes of all the segments with at least one lease (live or retired).
    pub lent_bytes: u64,
    /// Items moved forward: by eviction because they had been read (CLOCK), and
    /// the live items of compacted segments.
    pub reinserted: u64,
    /// Mostly dead segments compacted and reused instead of growing the arena.
    pub compacted: u64,
    /// Seconds since the oldest sealed normal segment, and the oldest large one, was
    /// opened (`stats items`' `age` of classes 1 and 2). Exact unless over a thousand
    /// large segments are older than the oldest normal one, or the other way round;
    /// then a lower bound.
    pub oldest_normal_age: u32,
    pub oldest_large_age: u32,
}
