//! The item layout inside a segment: an 8-byte header, optional fields, key, value.
//!
//! ```text
//!  0        4          8           (+4)       (+4)       (+4)     (+8)
//!  ├ word0 ─┼─ state ──┼ [exptime] ─┼ [vlen32] ┼ [flags] ─┼ [cas] ─┼ key … ┼ value … ┼ pad to 4
//!  word0 (immutable): key length (8 bits) | HAS_FLAGS | HAS_CAS | LONG | HAS_EXP | value length (20 bits)
//!  state (atomic):    last access (28 bits) | ACCESSED | FETCHED | STALE | TOKEN_SENT
//!  exptime (atomic):  RelTime, 0 = never; present only when the item was stored with one
//! ```
//!
//! An item stored without an expiry time has no `exptime` field (4 bytes saved on the
//! most common item); touching such an item to a non-zero time cannot write in place,
//! so the engine writes a new copy that has the field (`View::set_exptime` says when).
//! Flags take 4 bytes only when non-zero, a value length over 20 bits takes 4 more,
//! and the CAS unique takes 8 only when it cannot be derived from the item's place
//! (see `Desc::cas_of` in segments.rs): when an item was moved by eviction or
//! compaction, was given an explicit CAS, or is a new version whose place derives
//! a unique no larger than its key's last one (`Seg::next_unique`).
//! Everything but `exptime` and `state` is written once, before the item is
//! published in the index, and never changed while the item is reachable.
//!
//! Locks: none taken or expected; `state` and `exptime` are atomics. Whoever reads
//! or writes an item keeps its segment alive (pinned, partition-locked, or owning
//! it): see the safety contracts of [`New::write`] and [`View::read`].
//!
//! Imports: nothing of the engine's.

use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes of the fixed header.
pub const HEADER: usize = 8;

const KLEN_MASK: u32 = 0xff;
const HAS_FLAGS: u32 = 1 << 8;
const HAS_CAS: u32 = 1 << 9;
const LONG: u32 = 1 << 10;
const HAS_EXP: u32 = 1 << 11;
const VLEN_SHIFT: u32 = 12;
/// Values shorter than this keep their length in word0.
const SHORT_VLEN_LIMIT: usize = 1 << 20;

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

/// The bytes an item with these fields takes in a segment (a multiple of 4).
pub fn size(klen: usize, vlen: usize, flags: u32, explicit_cas: bool, has_exp: bool) -> usize {
    let mut n = HEADER + klen + vlen;
    if has_exp {
        n += 4;
    }
    if vlen >= SHORT_VLEN_LIMIT {
        n += 4;
    }
    if flags != 0 {
        n += 4;
    }
    if explicit_cas {
        n += 8;
    }
    (n + 3) & !3
}

/// What [`checked`] found at the start of a buffer: the item's size in bytes and
/// its value's length.
pub struct Checked {
    pub size: usize,
    pub vlen: usize,
}

/// Reads the header of the item at the start of `buf` (bytes of a segment a
/// restart found in the memory file) using only `buf`'s bytes: None unless the
/// header is one [`New::write`] could have written (the optional fields agree with
/// the header bits, a key of at least 1 byte) and the whole item fits in `buf`. A
/// header that passes can be given to [`View::read`].
pub fn checked(buf: &[u8]) -> Option<Checked> {
    let word = |at: usize| -> Option<u32> {
        let b = buf.get(at..at.checked_add(4)?)?;
        Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let w0 = word(0)?;
    let klen = (w0 & KLEN_MASK) as usize;
    if klen == 0 {
        return None;
    }
    let mut p = HEADER;
    let has_exp = w0 & HAS_EXP != 0;
    if has_exp {
        p += 4;
    }
    let vlen = if w0 & LONG != 0 {
        let v = word(p)? as usize;
        p += 4;
        // New::write sets LONG exactly for values this long, with no short length.
        if v < SHORT_VLEN_LIMIT || w0 >> VLEN_SHIFT != 0 {
            return None;
        }
        v
    } else {
        (w0 >> VLEN_SHIFT) as usize
    };
    let flags = if w0 & HAS_FLAGS != 0 {
        // Written only for non-zero flags.
        let f = word(p)?;
        if f == 0 {
            return None;
        }
        f
    } else {
        0
    };
    let n = size(klen, vlen, flags, w0 & HAS_CAS != 0, has_exp);
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

    pub fn size(&self) -> usize {
        size(
            self.key.len(),
            self.value_len(),
            self.flags,
            self.cas.is_some(),
            self.exptime != 0,
        )
    }

    /// Writes the item at `dst`.
    ///
    /// # Safety
    /// `dst` is 4-byte aligned, valid for writes of `self.size()` bytes, and no other
    /// thread accesses those bytes until the item is published (with a Release store
    /// that readers Acquire).
    pub unsafe fn write(&self, dst: *mut u8) {
        let vlen = self.value_len();
        let mut w0 = (self.key.len() as u32) & KLEN_MASK;
        if vlen < SHORT_VLEN_LIMIT {
            w0 |= (vlen as u32) << VLEN_SHIFT;
        } else {
            w0 |= LONG;
        }
        if self.flags != 0 {
            w0 |= HAS_FLAGS;
        }
        if self.cas.is_some() {
            w0 |= HAS_CAS;
        }
        if self.exptime != 0 {
            w0 |= HAS_EXP;
        }
        // SAFETY: the caller gives us `size()` writable, aligned, unshared bytes; every
        // write below stays inside them (the offsets add up to `size()`).
        unsafe {
            (dst as *mut u32).write(w0);
            (dst.add(4) as *mut u32).write(self.state);
            let mut p = dst.add(HEADER);
            if w0 & HAS_EXP != 0 {
                // 4-aligned: items are, and the header is 8 bytes.
                (p as *mut u32).write(self.exptime);
                p = p.add(4);
            }
            if w0 & LONG != 0 {
                (p as *mut u32).write_unaligned(vlen as u32);
                p = p.add(4);
            }
            if self.flags != 0 {
                (p as *mut u32).write_unaligned(self.flags);
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
        let w0 = (src as *const u32).read();
        if w0 & HAS_CAS == 0 {
            return None;
        }
        let before = [HAS_EXP, LONG, HAS_FLAGS]
            .iter()
            .filter(|&&bit| w0 & bit != 0)
            .count();
        Some((src.add(HEADER + 4 * before) as *const u64).read_unaligned())
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
    exptime: Option<&'a AtomicU32>,
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
            let w0 = (src as *const u32).read();
            let state = &*(src.add(4) as *const AtomicU32);
            let mut p = src.add(HEADER);
            let exptime = if w0 & HAS_EXP != 0 {
                let e = &*(p as *const AtomicU32);
                p = p.add(4);
                Some(e)
            } else {
                None
            };
            let vlen = if w0 & LONG != 0 {
                let v = (p as *const u32).read_unaligned() as usize;
                p = p.add(4);
                v
            } else {
                (w0 >> VLEN_SHIFT) as usize
            };
            let flags = if w0 & HAS_FLAGS != 0 {
                let f = (p as *const u32).read_unaligned();
                p = p.add(4);
                f
            } else {
                0
            };
            let explicit_cas = if w0 & HAS_CAS != 0 {
                let c = (p as *const u64).read_unaligned();
                p = p.add(8);
                Some(c)
            } else {
                None
            };
            let klen = (w0 & KLEN_MASK) as usize;
            let key = std::slice::from_raw_parts(p, klen);
            let value = std::slice::from_raw_parts(p.add(klen), vlen);
            View {
                key,
                value,
                flags,
                explicit_cas,
                exptime,
                state,
                size: size(klen, vlen, flags, explicit_cas.is_some(), exptime.is_some()),
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

    fn roundtrip(key: &[u8], a: &[u8], b: &[u8], flags: u32, cas: Option<u64>, exptime: u32) {
        let n = New {
            key,
            value: [a, b],
            flags,
            exptime,
            state: 5 | FETCHED,
            cas,
        };
        let mut buf = vec![0u32; n.size() / 4 + 1];
        let p = buf.as_mut_ptr() as *mut u8;
        // SAFETY: `buf` is 4-aligned, larger than the item and ours alone.
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
        assert_eq!(v.size, n.size());
        assert_eq!(v.size % 4, 0);
    }

    #[test]
    fn layouts() {
        for exptime in [0, 77] {
            roundtrip(b"key:0000001", &[7u8; 32], b"", 0, None, exptime);
            roundtrip(b"k", b"ab", b"cd", 0xdead_beef, Some(u64::MAX), exptime);
            roundtrip(&[b'x'; 250], b"", b"", 1, None, exptime);
            roundtrip(
                b"big",
                &vec![1u8; SHORT_VLEN_LIMIT],
                b"tail",
                3,
                Some(9),
                exptime,
            );
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
        let mut buf = vec![0u32; (SHORT_VLEN_LIMIT + 64) / 4];
        let p = buf.as_mut_ptr() as *mut u8;
        let big = vec![3u8; SHORT_VLEN_LIMIT];
        for (key, val, flags, cas, exp) in [
            (&b"k"[..], &b"v"[..], 0, None, 0),
            (&b"key"[..], &b"value"[..], 7, Some(5), 9),
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
            // SAFETY: `buf` is 4-aligned, larger than the item and ours alone.
            let size = unsafe {
                n.write(p);
                View::read(p).size
            };
            // SAFETY: `buf` holds this many initialized bytes.
            let bytes = unsafe { std::slice::from_raw_parts(p, size) };
            let c = checked(bytes).expect("a written item passes");
            assert_eq!((c.size, c.vlen), (size, val.len()));
            assert!(checked(&bytes[..size - 1]).is_none());
        }
        assert!(checked(&[0u8; 64]).is_none(), "no key");
        let mut w = [0u8; 16];
        w[..4].copy_from_slice(&(1u32 | HAS_FLAGS).to_ne_bytes());
        assert!(checked(&w).is_none(), "flags bit with zero flags");
    }

    #[test]
    fn sizes() {
        // The bytes-per-item target's small case: 8 + 11 + 32 = 51 → 52.
        assert_eq!(size(11, 32, 0, false, false), 52);
        assert_eq!(size(11, 32, 0, false, true), 56);
        assert_eq!(size(11, 32, 1, true, true), 68);
    }
}
