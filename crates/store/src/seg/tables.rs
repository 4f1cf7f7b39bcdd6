//! The index's slots and tables: where an item lives ([`Loc`]) and how a slot
//! encodes it with the key's tag, a key's two candidate buckets ([`buckets_of`],
//! [`alt_bucket`]), [`Table`] (a table's buckets as a reader sees them), the
//! 64-byte [`Bucket`], table allocation (malloc for small tables, `mmap` for large
//! ones) and freeing, and the one-word packed form readers load (address, bucket
//! count, bucket salt). Who may read or write a table's slots, and when, is
//! `index.rs`'s.
//!
//! Locks: none. Imports: nothing of the engine's.

use std::sync::atomic::{AtomicU64, Ordering};

pub const SLOTS_PER_BUCKET: usize = 8;
/// A partition's first table's bucket count.
pub(super) const INITIAL_BUCKETS: usize = 2;

#[repr(align(64))]
#[derive(Default)]
pub(super) struct Bucket {
    /// Item slots; index.rs's module docs give the encoding.
    pub(super) slots: [AtomicU64; SLOTS_PER_BUCKET],
}

/// Most buckets one partition's table may have (the count is packed in 16 bits).
pub(super) const MAX_BUCKETS: usize = (1 << 16) - 1;
pub(super) const PTR_MASK: u64 = (1 << 48) - 1;
/// Low bits of a packed table that hold its bucket salt (tables are 64-aligned).
pub(super) const SALT_MASK: u64 = 63;
/// A table whose items fill less than this share of its slots (in percent) is
/// rebuilt at its size under another salt when a key's two buckets are full,
/// before it grows: under churn every partition meets two full buckets sooner or
/// later, and growing each time left tables 57% full.
pub(super) const RESALT_LOAD_PCT: usize = 85;

/// Tables of at least this many buckets (16 KiB) are mapped straight from the
/// kernel with `mmap` and given back with `munmap` once retired, so what index
/// growth retires leaves the process (malloc would keep retired tables). Their
/// bucket count is rounded up to whole pages (at most a quarter more than asked
/// for, and used: the mapping has no slack). Smaller tables (4096 of them hold at
/// most 64 MiB, about 3.5M items) come from malloc; every partition's growth steps
/// through the same sizes, so a freed small table is often the next partition's new
/// one, and `malloc_trim` returns the rest (see `Index::free` in index.rs).
pub(super) const MAP_MIN_BUCKETS: usize = 4 * PAGE / std::mem::size_of::<Bucket>();
pub(super) const PAGE: usize = 4096;
/// Small tables freed between two `malloc_trim`s.
pub(super) const TRIM_BYTES: u64 = 4 << 20;

/// Gives malloc's free pages back to the kernel (glibc's `malloc_trim` releases
/// whole free pages anywhere in its heaps, not only at the top).
pub(super) fn trim_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory malloc holds free; any thread may
    // call it at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes a table of `n` buckets holds: whole pages when mapped.
pub(super) fn table_bytes(n: usize) -> usize {
    let b = n * std::mem::size_of::<Bucket>();
    if n >= MAP_MIN_BUCKETS {
        b.div_ceil(PAGE) * PAGE
    } else {
        b
    }
}

/// The bucket count a table asked to have at least `n` buckets gets: a mapped one
/// fills its last page.
pub(super) fn table_len(n: usize) -> usize {
    if n >= MAP_MIN_BUCKETS {
        (table_bytes(n) / std::mem::size_of::<Bucket>()).min(MAX_BUCKETS)
    } else {
        n
    }
}

pub(super) fn small_layout(n: usize) -> std::alloc::Layout {
    // n ≥ 1 buckets of 64 bytes, aligned as a Bucket: never an invalid layout.
    std::alloc::Layout::array::<Bucket>(n.max(1)).unwrap_or(std::alloc::Layout::new::<Bucket>())
}

/// A zeroed table of `n` buckets (an all-zero Bucket is empty) with bucket salt
/// `salt`, packed (see [`pack`]); None when the kernel or the allocator has no memory.
pub(super) fn new_table(n: usize, salt: u32) -> Option<u64> {
    debug_assert!(n == table_len(n) && n <= MAX_BUCKETS);
    let p = if n >= MAP_MIN_BUCKETS {
        // SAFETY: an anonymous private mapping of a non-zero length at an address the
        // kernel chooses touches no existing memory; its pages read as zeros.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                table_bytes(n),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        p as *mut Bucket
    } else {
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(small_layout(n)) } as *mut Bucket;
        if p.is_null() {
            return None;
        }
        p
    };
    Some(pack(p, n) | u64::from(salt) & SALT_MASK)
}

/// A table as readers load it, in one word: the bucket array's address in the low 48
/// bits (user-space addresses fit in 47; the lowest 6, zero in a 64-aligned address,
/// hold the bucket salt) and the bucket count in the high 16. One
/// atomic load in a dense 32 KiB array, instead of a pointer to a table header that
/// is one more cache miss on every lookup.
pub(super) fn pack(p: *mut Bucket, n: usize) -> u64 {
    let (p, n) = (p as u64, n as u64);
    if p > PTR_MASK || n > MAX_BUCKETS as u64 {
        // Not input-dependent: an address space this engine does not support.
        eprintln!("memcrab: index table at {p:#x} does not fit in 48 bits");
        std::process::abort();
    }
    n << 48 | p
}

/// Frees a packed table.
///
/// # Safety
/// `v` came from [`new_table`], and no reader or writer can reach the table any more.
pub(super) unsafe fn free_table(v: u64) {
    let (p, n) = (
        (v & PTR_MASK & !SALT_MASK) as *mut Bucket,
        (v >> 48) as usize,
    );
    if n >= MAP_MIN_BUCKETS {
        // SAFETY: per the contract this is the whole mapping `new_table` made for
        // `n` buckets, and nothing uses it any more.
        unsafe { libc::munmap(p as *mut libc::c_void, table_bytes(n)) };
    } else {
        // SAFETY: per the contract, allocated by `new_table` with this layout.
        unsafe { std::alloc::dealloc(p as *mut u8, small_layout(n)) };
    }
}

/// A partition's first table. Not input-dependent: without 512 KiB at startup
/// nothing can run.
pub(super) fn initial_table() -> u64 {
    new_table(INITIAL_BUCKETS, 0).unwrap_or_else(|| {
        eprintln!("memcrab: no memory for the index");
        std::process::abort()
    })
}

/// Where an item lives: a segment id (≥ 1) and a byte offset (a multiple of 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loc {
    pub seg: u32,
    pub off: u32,
}

pub const MAX_SEGMENTS: u32 = 1 << 24;
/// The largest segment (a large item's own, whose item is at offset 0); offsets
/// in shared segments (at most 1 MiB) are below 2^25, what a slot holds.
pub const MAX_OFFSET: u32 = 1 << 26;

pub(super) fn tag_of(h: u64) -> u64 {
    (h >> 32) & 0xffff
}

pub(super) fn encode(h: u64, loc: Loc) -> u64 {
    debug_assert!(loc.seg != 0 && loc.seg < MAX_SEGMENTS && loc.off < 1 << 25);
    tag_of(h) << 48 | u64::from(loc.seg) << 24 | u64::from(loc.off >> 1)
}

pub(super) fn decode(slot: u64) -> Loc {
    Loc {
        seg: ((slot >> 24) & 0xff_ffff) as u32,
        off: ((slot & 0xff_ffff) as u32) << 1,
    }
}

pub(super) fn slot_tag(slot: u64) -> u64 {
    slot >> 48
}

/// Maps 32 hash bits onto `0..n` without a division.
pub(super) fn reduce(x: u32, n: usize) -> usize {
    ((u64::from(x) * n as u64) >> 32) as usize
}

/// A key's two candidate buckets in a table of `n` buckets and bucket salt `salt`.
/// The salt rotates the hash's low 32 bits (by `salt` mod 32, one instruction),
/// which brings other bits up to where they choose the first bucket; a bijection,
/// so keys that agree there share buckets under every salt too. The second bucket
/// is the first's partner under the key's tag ([`alt_bucket`]), so a slot's other
/// bucket is known from the slot alone when cuckoo displacement moves it.
pub(super) fn buckets_of(h: u64, n: usize, salt: u32) -> (usize, usize) {
    let x = (h as u32).rotate_left(salt);
    let b1 = reduce(x, n);
    (b1, alt_bucket(b1, tag_of(h), n))
}

/// The other candidate bucket of a slot with tag `tag` in bucket `b` (MemC3's
/// partial-key cuckoo hashing): `g - b` modulo `n` for a `g` drawn from the tag,
/// an involution, so either bucket of a key leads to the other without its hash.
pub(super) fn alt_bucket(b: usize, tag: u64, n: usize) -> usize {
    let g = reduce(
        (tag as u32 | (tag as u32) << 16).wrapping_mul(0x9E37_79B1),
        n,
    );
    if g >= b {
        g - b
    } else {
        g + n - b
    }
}

/// The buckets of a packed table.
///
/// # Safety
/// `v` came from [`new_table`] and the table has not been freed.
pub(super) unsafe fn unpack<'a>(v: u64) -> Table<'a> {
    let p = (v & PTR_MASK & !SALT_MASK) as *const Bucket;
    let n = (v >> 48) as usize;
    // SAFETY: per the contract, `new_table` made this from `n` zeroed buckets that
    // are still allocated.
    let buckets = unsafe { std::slice::from_raw_parts(p, n) };
    Table {
        buckets,
        salt: (v & SALT_MASK) as u32,
    }
}

#[derive(Clone, Copy)]
pub struct Table<'a> {
    pub(super) buckets: &'a [Bucket],
    /// Mixed into the hash to choose buckets ([`buckets_of`]).
    pub(super) salt: u32,
}

impl Table<'_> {
    pub(super) fn len(&self) -> usize {
        self.buckets.len()
    }

    /// The two candidate buckets of hash `h` in this table.
    pub(super) fn buckets_of(&self, h: u64) -> (usize, usize) {
        buckets_of(h, self.len(), self.salt)
    }

    /// How many slots the table has (numbered bucket × 8 + slot).
    pub fn slot_count(&self) -> usize {
        self.buckets.len() * SLOTS_PER_BUCKET
    }

    /// Where slot number `i` points, if it is occupied (Acquire, as [`Index::find`]
    /// loads slots).
    pub fn slot(&self, i: usize) -> Option<Loc> {
        let v = self.buckets.get(i / SLOTS_PER_BUCKET)?.slots[i % SLOTS_PER_BUCKET]
            .load(Ordering::Acquire);
        (v != 0).then(|| decode(v))
    }

    pub(super) fn free_slot(&self, b: usize) -> Option<usize> {
        self.buckets[b]
            .slots
            .iter()
            .position(|s| s.load(Ordering::Relaxed) == 0)
    }

    pub(super) fn occupancy(&self, b: usize) -> usize {
        self.buckets[b]
            .slots
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) != 0)
            .count()
    }

    /// Places a slot value in the emptier candidate bucket; false when both are full.
    pub(super) fn place(&self, h: u64, value: u64) -> bool {
        let (b1, b2) = self.buckets_of(h);
        let b = if b1 != b2 && self.occupancy(b2) < self.occupancy(b1) {
            b2
        } else {
            b1
        };
        let b = match self.free_slot(b) {
            Some(_) => b,
            None if b != b2 && self.free_slot(b2).is_some() => b2,
            None if b != b1 && self.free_slot(b1).is_some() => b1,
            None => return false,
        };
        if let Some(s) = self.free_slot(b) {
            self.buckets[b].slots[s].store(value, Ordering::Release);
            return true;
        }
        false
    }
}
