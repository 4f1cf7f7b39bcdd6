//! The item layout inside a segment: a 6-byte header, optional fields, key, value.
//!
//! ```text
//!  item at a 4-aligned place:   0 ─ state ─ 4 ─ w ─ 6 ┬ [pad 2][exptime]┬ [vlen 1–4 B] ┬ [flags] ┬ [cas] ┬ key … ┬ value … ┬ pad to 2
//!  item at a place 2 past that: 0 ─ w ─ 2 ─ state ─ 6 ┴ [exptime] ──────┘   (+1..4)      (+4)      (+8)
//!  w (16 bits, immutable):  key length (8) | HAS_FLAGS | HAS_CAS | HAS_EXP | value length code (5)
//!  state (atomic u32):      last access (28 bits) | ACCESSED | FETCHED | STALE | TOKEN_SENT
//!  exptime (atomic u32):    RelTime, 0 = never; present only when the item was stored with one
//! ```
//!
//! Items are 2-aligned, so a segment wastes under a byte per item on padding. The two
//! atomics must be 4-aligned: the item's place says which of its first two 2-byte
//! halves of the header holds `w` and which starts `state` (the 4-aligned one), and
//! an `exptime` field of an item at a 4-aligned place follows 2 bytes of padding. An
//! item's size therefore depends on its place ([`size_at`]); [`New::size`] is the
//! larger of the two, what a writer must find room for.
//!
//! The value length code is the length itself below [`INLINE_VLEN`] (28 bytes);
//! codes 28–31 say that 1–4 little-endian bytes follow, holding the length less
//! the first length that needs that many ([`VLEN_BASE`]): 1 byte up to 283, 2 up to
//! 65,819, 3 up to 16,843,035. Each length has one encoding. An item stored without an expiry time has no `exptime` field (the most
//! common item); touching such an item to a non-zero time cannot write in place,
//! so the engine writes a new copy that has the field (`View::set_exptime` says when).
//! Flags take 4 bytes only when non-zero, and the CAS unique takes 8 only when it
//! cannot be derived from the item's place (see `Desc::cas_of` in segments.rs): when
//! an item was moved by eviction or compaction, was given an explicit CAS, or is a
//! new version whose place derives a unique no larger than its key's last one
//! (`Seg::next_unique`). Everything but `exptime` and `state` is written once, before
//! the item is published in the index, and never changed while the item is reachable.
//!
//! Locks: none taken or expected; `state` and `exptime` are atomics. Whoever reads
//! or writes an item keeps its segment alive (pinned, partition-locked, or owning
//! it): see the safety contracts of [`New::write`] and [`View::read`].
//!
//! Imports: nothing of the engine's.

use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes of the fixed header (`w` and `state`).
pub const HEADER: usize = 6;

const KLEN_MASK: u16 = 0xff;
const HAS_FLAGS: u16 = 1 << 8;
const HAS_CAS: u16 = 1 << 9;
const HAS_EXP: u16 = 1 << 10;
const VLEN_SHIFT: u16 = 11;
/// Value lengths below this are their own length code; codes from here up say how
/// many bytes of length follow the header (code − 27).
pub const INLINE_VLEN: usize = 28;
/// The first value length written with 1, 2, 3 and 4 bytes of length; those bytes
/// hold the length less this.
const VLEN_BASE: [usize; 4] = [
    INLINE_VLEN,
    INLINE_VLEN + (1 << 8),
    INLINE_VLEN + (1 << 8) + (1 << 16),
    INLINE_VLEN + (1 << 8) + (1 << 16) + (1 << 24),
];

/// Last access time bits of `state` (a RelTime of 28 bits: 8.5 years of uptime).
pub const ATIME_MASK: u32 = (1 << 28) - 1;
/// CLOCK bit: set by a hit, cleared when eviction reinserts the item.
pub const ACCESSED: u32 = 1 << 28;
/// The item has been read since it was stored (memcached's ITEM_FETCHED).
pub const FETCHED: u32 = 1 << 29;
/// Marked stale by meta invalidation (`md I`, a stale `ms I`): memcached's ITEM_STALE.
pub const STALE: u32 = 1 << 30;
/// A meta win token has been handed out (memcached's ITEM_TOKEN_SENT).
pub const TOKEN_SENT: u32 = 1 << 31;

/// Bytes of value length after the header (see [`VLEN_BASE`]).
fn vlen_bytes(vlen: usize) -> usize {
    match vlen {
        v if v < VLEN_BASE[0] => 0,
        v if v < VLEN_BASE[1] => 1,
        v if v < VLEN_BASE[2] => 2,
        v if v < VLEN_BASE[3] => 3,
        _ => 4,
    }
}

/// Where, from the item's start at address (or segment offset) `at`, the `state`
/// word and `w` lie: `state` takes the 4-aligned one of the two places.
fn places(at: usize) -> (usize, usize) {
    if at.is_multiple_of(4) {
        (0, 4)
    } else {
        (2, 0)
    }
}

/// Padding before `exptime` for an item at `at` (the header ends 2 past a 4-aligned
/// address when the item starts on one).
fn exp_pad(at: usize) -> usize {
    if at.is_multiple_of(4) {
        2
    } else {
        0
    }
}

/// The bytes an item with these fields takes in a segment at address or offset
/// `at` (2-aligned; only `at` mod 4 matters, and segments are 64-aligned). A
/// multiple of 2.
pub fn size_at(
    at: usize,
    klen: usize,
    vlen: usize,
    flags: u32,
    explicit_cas: bool,
    has_exp: bool,
) -> usize {
    let mut n = HEADER + vlen_bytes(vlen) + klen + vlen;
    if has_exp {
        n += exp_pad(at) + 4;
    }
    if flags != 0 {
        n += 4;
    }
    if explicit_cas {
        n += 8;
    }
    (n + 1) & !1
}

/// What [`checked`] found at the start of a buffer: the item's size in bytes and
/// its value's length.
pub struct Checked {
    pub size: usize,
    pub vlen: usize,
}

/// Reads the header of the item at the start of `buf`, at segment offset `at`
/// (bytes of a segment a restart found in the memory file), using only `buf`'s
/// bytes: None unless the header is one [`New::write`] could have written (a
/// 2-aligned place, the optional fields agree with the header bits, the shortest
/// length encoding, zero padding, a key of at least 1 byte) and the whole item fits
/// in `buf`. A header that passes can be given to [`View::read`].
pub fn checked(buf: &[u8], at: usize) -> Option<Checked> {
    if !at.is_multiple_of(2) {
        return None;
    }
    let bytes = |from: usize, n: usize| buf.get(from..from.checked_add(n)?);
    let le = |from: usize, n: usize| -> Option<u64> {
        let b = bytes(from, n)?;
        Some(b.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x)))
    };
    let (_, w_at) = places(at);
    let wb = bytes(w_at, 2)?;
    let w = u16::from_ne_bytes([wb[0], wb[1]]);
    let klen = usize::from(w & KLEN_MASK);
    if klen == 0 {
        return None;
    }
    let has_exp = w & HAS_EXP != 0;
    let mut p = HEADER;
    if has_exp {
        if bytes(p, exp_pad(at))?.iter().any(|&b| b != 0) {
            return None;
        }
        p += exp_pad(at) + 4;
    }
    let code = usize::from(w >> VLEN_SHIFT);
    let vlen = if code < INLINE_VLEN {
        code
    } else {
        let n = code - INLINE_VLEN + 1;
        let v = usize::try_from(le(p, n)?)
            .ok()?
            .checked_add(VLEN_BASE[n - 1])?;
        p += n;
        // Holds for every n below 4 (each length has one encoding); a 4-byte
        // length is refused past what New::write can write.
        if vlen_bytes(v) != n || u32::try_from(v).is_err() {
            return None;
        }
        v
    };
    let flags = if w & HAS_FLAGS != 0 {
        // Written only for non-zero flags.
        let f = le(p, 4)? as u32;
        if f == 0 {
            return None;
        }
        f
    } else {
        0
    };
    let n = size_at(at, klen, vlen, flags, w & HAS_CAS != 0, has_exp);
    (n <= buf.len()).then_some(Checked { size: n, vlen })
}

/// The fields of a new item.
pub struct New<'a> {
    pub key: &'a [u8],
    /// The value, as parts written back to back (append/prepend join two).
    pub value: [&'a [u8]; 2],
    pub flags: u32,
    pub exptime: u32,
    /// Initial `state`: access time and bits.
    pub state: u32,
    pub cas: Option<u64>,
}

impl New<'_> {
    pub fn value_len(&self) -> usize {
        self.value[0].len() + self.value[1].len()
    }

    /// The bytes the item takes at `at` (see [`size_at`]).
    pub fn size_at(&self, at: usize) -> usize {
        size_at(
            at,
            self.key.len(),
            self.value_len(),
            self.flags,
            self.cas.is_some(),
            self.exptime != 0,
        )
    }

    /// The most bytes the item can take, wherever it goes: what to find room for.
    pub fn size(&self) -> usize {
        self.size_at(0)
    }

    /// Writes the item at `dst`; it then takes `self.size_at(dst as usize)` bytes.
    ///
    /// # Safety
    /// `dst` is 2-aligned, valid for writes of `self.size()` bytes, and no other
    /// thread accesses those bytes until the item is published (with a Release store
    /// that readers Acquire).
    pub unsafe fn write(&self, dst: *mut u8) {
        let at = dst as usize;
        debug_assert!(at.is_multiple_of(2));
        let vlen = self.value_len();
        debug_assert!(u32::try_from(vlen).is_ok());
        let ext = vlen_bytes(vlen);
        let code = if ext == 0 {
            vlen
        } else {
            INLINE_VLEN + ext - 1
        };
        let mut w = (self.key.len() as u16 & KLEN_MASK) | (code as u16) << VLEN_SHIFT;
        if self.flags != 0 {
            w |= HAS_FLAGS;
        }
        if self.cas.is_some() {
            w |= HAS_CAS;
        }
        if self.exptime != 0 {
            w |= HAS_EXP;
        }
        let (state_at, w_at) = places(at);
        // SAFETY: the caller gives us `size()` writable, 2-aligned, unshared bytes;
        // every write below stays inside the first `size_at(at)` of them (the offsets
        // add up to it), and `state` and `exptime` land 4-aligned (`places`, `exp_pad`).
        unsafe {
            (dst.add(w_at) as *mut u16).write(w);
            (dst.add(state_at) as *mut u32).write(self.state);
            let mut p = dst.add(HEADER);
            if self.exptime != 0 {
                if exp_pad(at) == 2 {
                    (p as *mut [u8; 2]).write([0; 2]);
                    p = p.add(2);
                }
                (p as *mut u32).write(self.exptime);
                p = p.add(4);
            }
            if ext != 0 {
                // Fixed-size writes: a variable-length copy would call memcpy.
                let len = ((vlen - VLEN_BASE[ext - 1]) as u32).to_le_bytes();
                match ext {
                    1 => p.write(len[0]),
                    2 => (p as *mut [u8; 2]).write([len[0], len[1]]),
                    3 => (p as *mut [u8; 3]).write([len[0], len[1], len[2]]),
                    _ => (p as *mut [u8; 4]).write(len),
                }
                p = p.add(ext);
            }
            if self.flags != 0 {
                (p as *mut [u8; 4]).write(self.flags.to_le_bytes());
                p = p.add(4);
            }
            if let Some(cas) = self.cas {
                (p as *mut u64).write_unaligned(cas);
                p = p.add(8);
            }
            std::ptr::copy_nonoverlapping(self.key.as_ptr(), p, self.key.len());
            p = p.add(self.key.len());
            for part in self.value {
                std::ptr::copy_nonoverlapping(part.as_ptr(), p, part.len());
                p = p.add(part.len());
            }
        }
    }
}

/// The header of the item at `src`: `w` and the `state` word's address.
///
/// # Safety
/// As [`View::read`].
unsafe fn header(src: *const u8) -> (u16, *const AtomicU32) {
    let at = src as usize;
    let (state_at, w_at) = places(at);
    // SAFETY: per the contract the header lies inside the item, `w` written before
    // publication and not changed since; `state` is 4-aligned (`places`).
    unsafe {
        let w = (src.add(w_at) as *const u16).read();
        let state = src.add(state_at) as *const AtomicU32;
        (w, state)
    }
}

/// Where the fields after the value length start (an offset from `src`), and the
/// value's length, for the item at `src` with header `w`.
///
/// # Safety
/// As [`View::read`].
unsafe fn vlen_of(src: *const u8, w: u16) -> (usize, usize) {
    let at = src as usize;
    let mut p = HEADER;
    if w & HAS_EXP != 0 {
        p += exp_pad(at) + 4;
    }
    let code = usize::from(w >> VLEN_SHIFT);
    if code < INLINE_VLEN {
        return (p, code);
    }
    let n = code - INLINE_VLEN + 1;
    // SAFETY: per the contract the `n` length bytes lie inside the item. Fixed-size
    // reads per case: a variable-length copy would be a call to memcpy.
    let stored = unsafe {
        let at = src.add(p);
        let u16_at = |q: *const u8| u16::from_le_bytes((q as *const [u8; 2]).read());
        match n {
            1 => usize::from(at.read()),
            2 => usize::from(u16_at(at)),
            3 => usize::from(u16_at(at)) | usize::from(at.add(2).read()) << 16,
            _ => u32::from_le_bytes((at as *const [u8; 4]).read()) as usize,
        }
    };
    (p + n, stored + VLEN_BASE[n - 1])
}

/// The stored CAS of the item at `src`, if it carries one: [`View::read`]'s
/// `explicit_cas` from the header alone (the check of a new version's order reads
/// two items' uniques and nothing else of them).
///
/// # Safety
/// As [`View::read`].
pub unsafe fn explicit_cas(src: *const u8) -> Option<u64> {
    // SAFETY: per the contract the header and the fields it announces lie inside
    // the item, written before publication and not changed since.
    unsafe {
        let (w, _) = header(src);
        if w & HAS_CAS == 0 {
            return None;
        }
        let (mut p, _) = vlen_of(src, w);
        if w & HAS_FLAGS != 0 {
            p += 4;
        }
        Some((src.add(p) as *const u64).read_unaligned())
    }
}

/// A view of a published item.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub flags: u32,
    /// The stored CAS, when the item carries one.
    pub explicit_cas: Option<u64>,
    /// The expiry time, when the item has the field (stored with a non-zero one).
    /// Touch changes it in place; Relaxed, as for `state`.
    exptime: Option<&'a AtomicU32>,
    /// The item's state word (last access, [`ACCESSED`], [`FETCHED`], ...), which
    /// changes after publication. Relaxed: each bit is set by one `fetch_or` and
    /// read as a flag; no other memory is published through the word.
    pub state: &'a AtomicU32,
    /// Bytes the item takes in its segment.
    pub size: usize,
}

impl<'a> View<'a> {
    /// Reads the item at `src`.
    ///
    /// # Safety
    /// `src` points at an item written by [`New::write`] and published, and the memory
    /// stays valid and unreused for `'a` (the caller is pinned, or holds the lock of
    /// the partition that links the item, or owns the segment).
    pub unsafe fn read(src: *const u8) -> View<'a> {
        // SAFETY: per the contract, the header and the lengths it encodes lie inside
        // the item's bytes, which nobody writes while we read them; `exptime` and
        // `state` are 4-aligned and only ever accessed atomically after publication.
        unsafe {
            let at = src as usize;
            let (w, state) = header(src);
            let state = &*state;
            let exptime =
                (w & HAS_EXP != 0).then(|| &*(src.add(HEADER + exp_pad(at)) as *const AtomicU32));
            let (mut p, vlen) = vlen_of(src, w);
            let flags = if w & HAS_FLAGS != 0 {
                let f = u32::from_le_bytes((src.add(p) as *const [u8; 4]).read());
                p += 4;
                f
            } else {
                0
            };
            let explicit_cas = if w & HAS_CAS != 0 {
                let c = (src.add(p) as *const u64).read_unaligned();
                p += 8;
                Some(c)
            } else {
                None
            };
            let klen = usize::from(w & KLEN_MASK);
            let key = std::slice::from_raw_parts(src.add(p), klen);
            let value = std::slice::from_raw_parts(src.add(p + klen), vlen);
            View {
                key,
                value,
                flags,
                explicit_cas,
                exptime,
                state,
                // What `size_at` gives for these fields: `p` is past them.
                size: (p + klen + vlen + 1) & !1,
            }
        }
    }

    pub fn exptime(&self) -> u32 {
        self.exptime.map_or(0, |e| e.load(Ordering::Relaxed))
    }

    /// Sets the expiry time in place; false when the item has no `exptime` field and
    /// `t` is not 0, so the caller must write a copy of the item that has one.
    pub fn set_exptime(&self, t: u32) -> bool {
        match self.exptime {
            Some(e) => {
                e.store(t, Ordering::Relaxed);
                true
            }
            None => t == 0,
        }
    }

    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Relaxed)
    }

    /// Sets state bits that are not set yet (no write when they all are, so hot items
    /// do not bounce their cache line between cores).
    pub fn set_bits(&self, bits: u32) {
        if self.state() & bits != bits {
            self.state.fetch_or(bits, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4-aligned buffer of at least `n` + 2 bytes.
    fn buffer(n: usize) -> Vec<u32> {
        vec![0u32; n / 4 + 2]
    }

    fn roundtrip(key: &[u8], a: &[u8], b: &[u8], flags: u32, cas: Option<u64>, exptime: u32) {
        let n = New {
            key,
            value: [a, b],
            flags,
            exptime,
            state: 5 | FETCHED,
            cas,
        };
        let mut buf = buffer(n.size());
        // Both placements: 4-aligned, and 2 past that.
        for shift in [0, 2] {
            // SAFETY: `buf` is 4-aligned and `size() + 2` bytes long, so the shifted
            // place is 2-aligned with room for the item.
            let p = unsafe { (buf.as_mut_ptr() as *mut u8).add(shift) };
            // SAFETY: `buf` is ours alone and holds the item (as above).
            let v = unsafe {
                n.write(p);
                View::read(p)
            };
            assert_eq!(v.key, key);
            let mut joined = a.to_vec();
            joined.extend_from_slice(b);
            assert_eq!(v.value, &joined[..]);
            assert_eq!(v.flags, flags);
            assert_eq!(v.explicit_cas, cas);
            // SAFETY: as above.
            assert_eq!(unsafe { explicit_cas(p) }, cas);
            assert_eq!(v.exptime(), exptime);
            assert_eq!(v.state(), 5 | FETCHED);
            assert_eq!(v.size, n.size_at(shift));
            assert!(v.size <= n.size());
            assert_eq!(v.size % 2, 0);
            v.set_bits(ACCESSED);
            assert_eq!(v.state(), 5 | FETCHED | ACCESSED);
            // The state word does not overlap what is immutable.
            // SAFETY: as above.
            let again = unsafe { View::read(p) };
            assert_eq!((again.key, again.value), (v.key, v.value));
        }
    }

    #[test]
    fn layouts() {
        for exptime in [0, 77] {
            roundtrip(b"key:0000001", &[7u8; 32], b"", 0, None, exptime);
            roundtrip(b"k", b"ab", b"cd", 0xdead_beef, Some(u64::MAX), exptime);
            roundtrip(&[b'x'; 250], b"", b"", 1, None, exptime);
            for len in [27, 28, 283, 284, 65_819, 65_820, 16_843_035, 16_843_036] {
                roundtrip(b"big", &vec![1u8; len - 4], b"tail", 3, Some(9), exptime);
            }
        }
    }

    #[test]
    fn set_exptime_needs_the_field() {
        let mut buf = [0u32; 16];
        let p = buf.as_mut_ptr() as *mut u8;
        let n = New {
            key: b"k",
            value: [b"v", b""],
            flags: 0,
            exptime: 0,
            state: 0,
            cas: None,
        };
        // SAFETY: `buf` is 4-aligned, larger than the item and ours alone.
        let v = unsafe {
            n.write(p);
            View::read(p)
        };
        assert!(v.set_exptime(0));
        assert!(!v.set_exptime(5));
        assert_eq!(v.exptime(), 0);
        let n = New { exptime: 9, ..n };
        // SAFETY: as above; the first view is not used again.
        let v = unsafe {
            n.write(p);
            View::read(p)
        };
        assert!(v.set_exptime(5));
        assert_eq!(v.exptime(), 5);
        assert!(v.set_exptime(0));
        assert_eq!(v.exptime(), 0);
    }

    #[test]
    fn checked_agrees_with_view_and_refuses_short_buffers() {
        let big = vec![3u8; 1 << 16];
        let mut buf = buffer(big.len() + 64);
        for (key, val, flags, cas, exp) in [
            (&b"k"[..], &b"v"[..], 0, None, 0),
            (&b"key"[..], &b"value"[..], 7, Some(5), 9),
            (&b"key"[..], &[1u8; 28][..], 0, None, 9),
            (&b"big"[..], &big[..], 0, None, 1),
        ] {
            let n = New {
                key,
                value: [val, b""],
                flags,
                exptime: exp,
                state: 0,
                cas,
            };
            for shift in [0, 2] {
                // SAFETY: `buf` is 4-aligned, `size() + 2` bytes long and ours alone.
                let size = unsafe {
                    let p = (buf.as_mut_ptr() as *mut u8).add(shift);
                    n.write(p);
                    View::read(p).size
                };
                // SAFETY: `buf` holds this many initialized bytes past `shift`.
                let bytes = unsafe {
                    std::slice::from_raw_parts((buf.as_ptr() as *const u8).add(shift), size)
                };
                let c = checked(bytes, shift).expect("a written item passes");
                assert_eq!((c.size, c.vlen), (size, val.len()));
                assert!(checked(&bytes[..size - 1], shift).is_none());
                assert!(checked(bytes, shift + 1).is_none(), "odd place");
            }
        }
        assert!(checked(&[0u8; 64], 0).is_none(), "no key");
        let mut w = [0u8; 16];
        w[..2].copy_from_slice(&(1u16 | HAS_FLAGS).to_ne_bytes());
        assert!(checked(&w, 2).is_none(), "flags bit with zero flags");
        w[..2].copy_from_slice(&(1u16 | (INLINE_VLEN as u16) << VLEN_SHIFT).to_ne_bytes());
        assert!(
            checked(&w, 2).is_none(),
            "1 + 28 value bytes do not fit in 16"
        );
        let mut w = [0u8; 64];
        w[..2].copy_from_slice(&(1u16 | (INLINE_VLEN as u16) << VLEN_SHIFT).to_ne_bytes());
        assert_eq!(checked(&w, 2).map(|c| (c.size, c.vlen)), Some((36, 28)));
        w[6] = 5;
        assert_eq!(checked(&w, 2).map(|c| (c.size, c.vlen)), Some((42, 33)));
    }

    #[test]
    fn sizes() {
        // The bytes-per-item target's case: 6 + 1 (length) + 11 + 100 = 118.
        assert_eq!(size_at(0, 11, 100, 0, false, false), 118);
        assert_eq!(size_at(2, 11, 100, 0, false, false), 118);
        // cluster25's shape, 49-byte keys and 28-byte values: 6 + 1 + 77 = 84.
        assert_eq!(size_at(0, 49, 28, 0, false, false), 84);
        // cluster52's, 20-byte keys and 273-byte values: 6 + 1 + 293 = 300.
        assert_eq!(size_at(2, 20, 273, 0, false, false), 300);
        assert_eq!(size_at(2, 20, 284, 0, false, false), 312);
        // With an expiry time: 4 bytes, and 2 of padding at a 4-aligned place.
        assert_eq!(size_at(2, 11, 32, 0, false, true), 54);
        assert_eq!(size_at(0, 11, 32, 0, false, true), 56);
        assert_eq!(size_at(0, 11, 20, 1, true, true), 6 + 6 + 4 + 8 + 31 + 1);
    }
}
