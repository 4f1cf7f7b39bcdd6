//! Segments: the descriptor table ([`Descs`], chunks allocated on first use), segment
//! memory ([`Descs::alloc_memory`], [`Descs::free_memory`]: the heap, or the memory
//! file of `-e`), and what an item in a segment looks
//! like from outside: its descriptor, its [`View`], its CAS unique
//! ([`Desc::cas_of`]) and whether it is live ([`Flush::life`]).
//!
//! Locks: none are taken here, and none is needed to call these functions. Every
//! descriptor field is an atomic whose comment says who writes it (the arena lock's
//! holder, a partition lock's, or the owner of an open segment). What a view may be
//! trusted for depends on the caller: see [`Descs::view`].
//!
//! Imports: the index's [`Loc`], the item layout and the memory file only.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::index::{Loc, MAX_SEGMENTS};
use super::item::{self, View, ATIME_MASK};
use super::mapfile::MemFile;
use crate::clock::RelTime;

/// `max_exptime` of a segment holding an item that never expires.
pub const NEVER: u32 = u32::MAX;
/// Descriptors per lazily allocated chunk of the descriptor table.
const DESC_CHUNK: usize = 4096;

/// Bits of a derived CAS unique below the segment's generation ([`Desc::cas_of`]).
pub const PLACE_BITS: u32 = 24;
/// Low parts of a unique from here up are never derived: an item's offset over 4 is
/// below 2^18, as segments are at most 1 MiB ([`segment_bytes`]) and a large item
/// sits at offset 0 of its own segment. `Seg::next_unique` gives out these, so an
/// explicit unique is never the derived unique of any place. Offsets are 2-aligned,
/// but an item takes at least 8 bytes (item.rs), so no two items of a segment share
/// an offset over 4, and later items derive larger uniques.
pub const EXPLICIT_LOW: u64 = 1 << 18;

/// The unique an item at offset `off` of a segment of generation `gen` derives.
pub fn derived_cas(gen: u64, off: u32) -> u64 {
    gen << PLACE_BITS | u64::from(off >> 2)
}

/// Segment size for a memory limit: about 1/128 of it, a power of two between
/// 64 KiB and 1 MiB, so that even `-m 8` has enough segments for every active region.
pub fn segment_bytes(limit: u64) -> u32 {
    // At most 1 MiB: derived uniques keep offsets below EXPLICIT_LOW.
    let target = (limit / 128).clamp(64 * 1024, 1024 * 1024);
    1u32 << (63 - target.leading_zeros())
}

/// What an item with this exptime makes of its segment's `max_exptime`: the exptime
/// itself, or [`NEVER`] for 0.
pub fn expiry_bound(exptime: RelTime) -> u32 {
    if exptime == 0 {
        NEVER
    } else {
        exptime
    }
}

/// A segment's descriptor.
///
/// Ordering: `ptr` is stored Release after `cap` and loaded Acquire, so whoever
/// sees the memory sees its capacity; `lent` is described at the field. Every other
/// field is Relaxed: `gen` and `opened` are written before any item of the opening
/// is linked, and the link's Release store (which [`Index::find`] loads Acquire)
/// publishes them to lock-free readers; the rest are read under the lock that
/// writes them (arena or partition), or only as statistics and bounds.
///
/// [`Index::find`]: super::index::Index::find
#[derive(Default)]
pub struct Desc {
    /// The segment's memory, null while it has none. Changed only under the arena
    /// lock, while no item of the segment is linked and no reader can be in it.
    pub ptr: AtomicPtr<u8>,
    /// Bytes of memory at `ptr`. Written with `ptr`.
    pub cap: AtomicU32,
    /// Generation, from `Seg::gen`, set when the segment is opened for writing: the
    /// high bits of its items' CAS uniques, and compared with [`Flush::gen`].
    /// Written before any item of the opening is written.
    pub gen: AtomicU64,
    /// When the segment was opened (for `oldest_item_age`).
    pub opened: AtomicU32,
    /// The latest exptime of its items, NEVER if one never expires (fetch_max).
    pub max_exptime: AtomicU32,
    /// Bytes of its linked items (changed under partition locks).
    pub live: AtomicU64,
    /// Where its written items end; set when it is sealed (arena lock).
    pub end: AtomicU32,
    /// A reinsertion segment: items that were hit (S3-FIFO's main queue), as
    /// opposed to items as they were stored (the small queue). Written under the
    /// arena lock when the segment is opened; read under it by eviction.
    pub main: AtomicBool,
    /// Leases ([`super::lease::Lease`]) holding bytes of this segment's memory.
    /// Raised (Relaxed) by a reader that found one of its items while pinned or
    /// under the item's partition lock, so before the segment can be retired or its
    /// retirement seen as quiescent; lowered (Release) when a lease drops. The
    /// arena reuses a retired segment only when this reads 0 (Acquire) after
    /// quiescence, so every read through a lease happens before the reuse.
    pub lent: AtomicU32,
}

impl Desc {
    /// Prepares the segment for writing: generation `gen`, opened `now`, empty
    /// counters, in the main queue or not. By whoever takes the segment to write it
    /// (under the arena lock), before any of its items is written.
    pub fn open(&self, gen: u64, now: RelTime, main: bool) {
        self.gen.store(gen, Ordering::Relaxed);
        self.opened.store(now, Ordering::Relaxed);
        self.max_exptime.store(0, Ordering::Relaxed);
        self.live.store(0, Ordering::Relaxed);
        self.end.store(0, Ordering::Relaxed);
        self.main.store(main, Ordering::Relaxed);
    }

    /// Raises `max_exptime` for an item written or touched to `exptime`.
    pub fn raise_expiry(&self, exptime: RelTime) {
        self.max_exptime
            .fetch_max(expiry_bound(exptime), Ordering::Relaxed);
    }

    /// The CAS unique of the item `v` at `loc` in this segment (0 when CAS is off):
    /// the one it carries, or else the generation and the offset.
    pub fn cas_of(&self, loc: Loc, v: &View<'_>, use_cas: bool) -> u64 {
        if !use_cas {
            return 0;
        }
        v.explicit_cas
            .unwrap_or_else(|| derived_cas(self.gen.load(Ordering::Relaxed), loc.off))
    }
}

/// The descriptor table: one [`Desc`] per segment id, in chunks allocated on first
/// use. It owns the segments' memory and frees it when dropped.
pub struct Descs {
    /// Chunks of [`DESC_CHUNK`] descriptors; the OnceLock publishes each once.
    chunks: Box<[OnceLock<Box<[Desc]>>]>,
    /// `-e`: segment memory comes from this file first (heap when it is full).
    file: Option<Arc<MemFile>>,
    /// Bytes of the segments that have at least one lease (each segment's `cap`,
    /// added by the lease that raises its `lent` from 0 and taken off by the one
    /// that lowers it to 0). A bound, not a lock: Relaxed, and signed because an
    /// addition and a subtraction for the same segment may land in either order.
    pub lent_bytes: AtomicI64,
    /// The arena's held bytes (retired segments that leases still hold), stored by
    /// the arena lock's holder whenever they change, so that `lend` can read them
    /// without the lock. Relaxed: a bound, read by nothing that needs more.
    pub held_bytes: AtomicU64,
    /// No first lease of a segment while `held_bytes` is at least this (a sixteenth of
    /// `-m`, at least two segments; set with the limit). Relaxed: a plain setting.
    pub held_max: AtomicU64,
    /// Nor while `lent_bytes` is at least this (half of `-m`): what stalled readers
    /// can lend, and eviction then charge against `-m` as held past `held_max`
    /// (see `Arena::charged`), so that the cache keeps about half of `-m` at least.
    /// Relaxed: a plain setting.
    pub lent_max: AtomicU64,
}

impl Descs {
    pub fn new(file: Option<Arc<MemFile>>) -> Descs {
        Descs {
            chunks: (0..(MAX_SEGMENTS as usize / DESC_CHUNK))
                .map(|_| OnceLock::new())
                .collect(),
            file,
            lent_bytes: AtomicI64::new(0),
            held_bytes: AtomicU64::new(0),
            held_max: AtomicU64::new(0),
            lent_max: AtomicU64::new(0),
        }
    }

    /// The memory file, with `-e`.
    pub fn file(&self) -> Option<&MemFile> {
        self.file.as_deref()
    }

    /// Memory for a segment of `cap` bytes: from the memory file when there is one
    /// and it has room, else zeroed heap memory; null when there is none. Called by
    /// the arena lock's holder.
    pub fn alloc_memory(&self, cap: u32) -> *mut u8 {
        if let Some(f) = &self.file {
            let p = f.alloc(cap);
            if !p.is_null() {
                return p;
            }
        }
        alloc_segment(cap)
    }

    /// Gives back memory from [`Descs::alloc_memory`].
    ///
    /// # Safety
    /// `p` came from `alloc_memory(cap)` (or the memory file's `claim`) and nothing
    /// can reach it any more.
    pub unsafe fn free_memory(&self, p: *mut u8, cap: u32) {
        if self.file.as_ref().is_some_and(|f| f.free(p, cap)) {
            return;
        }
        // SAFETY: not the file's, so from `alloc_segment(cap)`; unreachable per the
        // contract.
        unsafe { free_segment(p, cap) }
    }

    /// The descriptor of segment `id`.
    pub fn get(&self, id: u32) -> &Desc {
        let chunk = self.chunks[id as usize / DESC_CHUNK]
            .get_or_init(|| (0..DESC_CHUNK).map(|_| Desc::default()).collect());
        &chunk[id as usize % DESC_CHUNK]
    }

    /// The item at `loc`.
    ///
    /// # Safety
    /// `loc` names a published item whose segment cannot be reused while the view
    /// lives: the caller is pinned and loaded `loc` from the index while pinned, or
    /// holds the lock of the partition linking it, or owns the segment.
    pub unsafe fn view(&self, loc: Loc) -> (&Desc, View<'_>) {
        let d = self.get(loc.seg);
        let base = d.ptr.load(Ordering::Acquire);
        // SAFETY: per the contract the segment's memory is live and holds a
        // published item at `loc.off`.
        (d, unsafe { View::read(base.add(loc.off as usize)) })
    }

    /// The CAS unique of the item at `loc`, as [`Desc::cas_of`] gives it, reading
    /// only the item's header.
    ///
    /// # Safety
    /// As [`Descs::view`].
    pub unsafe fn cas_at(&self, loc: Loc, use_cas: bool) -> u64 {
        if !use_cas {
            return 0;
        }
        let d = self.get(loc.seg);
        let base = d.ptr.load(Ordering::Acquire);
        // SAFETY: as in `view`.
        unsafe { item::explicit_cas(base.add(loc.off as usize)) }
            .unwrap_or_else(|| derived_cas(d.gen.load(Ordering::Relaxed), loc.off))
    }
}

impl Drop for Descs {
    fn drop(&mut self) {
        let file = self.file.take();
        for chunk in self.chunks.iter_mut() {
            if let Some(chunk) = chunk.get_mut() {
                for d in chunk.iter_mut() {
                    let p = *d.ptr.get_mut();
                    // The memory file's segments go with its mapping.
                    let in_file = file.as_ref().is_some_and(|f| f.offset_of(p).is_some());
                    if !p.is_null() && !in_file {
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
    // 64-byte alignment: item places are 2-aligned, their atomics 4-aligned
    // (item.rs), and the first item sits on a cache line.
    std::alloc::Layout::from_size_align(cap.max(64) as usize, 64)
        .unwrap_or(std::alloc::Layout::new::<[u8; 64]>())
}

/// Zeroed memory for a segment of `cap` bytes; null when the allocator has none.
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

/// Why an item is not live.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Life {
    Live,
    Expired,
    Flushed,
}

/// What flush_all has invalidated, read by every liveness check.
#[derive(Default)]
pub struct Flush {
    /// Segments with a smaller generation were flushed by an immediate flush_all
    /// (raised with Release after the active segments are sealed; read Acquire).
    pub gen: AtomicU64,
    /// memcached's `settings.oldest_live`: items last accessed at or before it are
    /// invalid once it is due. 0 = none. Relaxed: a plain setting.
    pub oldest_live: AtomicU32,
}

impl Flush {
    /// Whether the item `v` of segment `d` is live at `now`, else why not.
    pub fn life(&self, d: &Desc, v: &View<'_>, now: RelTime) -> Life {
        let oldest_live = self.oldest_live.load(Ordering::Relaxed);
        if d.gen.load(Ordering::Relaxed) < self.gen.load(Ordering::Acquire)
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
}
