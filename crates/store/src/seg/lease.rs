//! Leases: a value's bytes lent past the lookup that found them ([`Lease`]), so
//! that the server can hand segment memory to the kernel (writev, io_uring's
//! sendmsg) instead of copying it into its output.
//!
//! ```text
//!   get (pinned, or under the partition lock) ──► Lender::lend ──► Desc::lent += 1
//!        … the reply is sent …                                     Lease dropped ──► lent -= 1
//!   arena: retired segment, quiescent ─► lent == 0 ? free list : held (Arena::held)
//! ```
//!
//! Why the bytes stay valid: a lease raises its segment's `lent` while the reader can
//! still reach the item (pinned, or holding the lock of the partition linking it), so
//! before the segment is retired, or at least before a reclaimer can see it as
//! quiescent (the reader's unpin, a Release, comes after the raise; a reclaimer reads
//! the pin slots with Acquire before it reads `lent`). A reclaimer reuses a retired
//! segment only when `lent` reads 0 (Acquire, pairing with the lease's Release
//! decrement), so every read through a lease happens before the reuse. Items are
//! immutable once published, so the bytes are the value as the lookup saw it.
//!
//! Nobody waits for a lease: eviction retires a lent segment like any other, and
//! the arena moves it, once quiescent, out of limbo into its held list and goes on
//! with the segments behind it. A lent segment still in the cache costs nothing: it
//! is charged against `-m` like the rest. Only held segments are memory beyond
//! `-m`, so only they are bounded: a segment gets no first lease while held
//! segments add up to [`super::segments::Descs::held_max`] bytes (a sixteenth of
//! `-m`), and the caller copies instead. Held bytes past that bound (segments lent
//! before it was reached and retired after) are charged against `-m`
//! (`Arena::charged`), so memory stays within `-m` and the bound whatever readers
//! do; a second bound on lent segments, [`super::segments::Descs::lent_max`] (half
//! of `-m`), keeps what stalled readers can make eviction charge that way to half
//! the cache. A segment already lent always lends: it costs nothing more.
//!
//! A lease owns an `Arc` of the descriptor table, which owns the segment memory (and
//! the `-e` memory file's mapping), so a lease may outlive the engine: the memory
//! goes when the last of them drops. A warm-restart save only reads segments, so a
//! lease still held then changes nothing it saves.
//!
//! Locks: none. Imports: segments.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::segments::Descs;

/// What an item found in a segment needs to lend its value: the descriptor table
/// and the segment. Part of [`crate::Item`]; used by [`crate::Item::lend`].
#[derive(Clone, Copy)]
pub struct Lender<'a> {
    pub(super) descs: &'a Arc<Descs>,
    pub(super) seg: u32,
}

impl std::fmt::Debug for Lender<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lender(segment {})", self.seg)
    }
}

impl Lender<'_> {
    /// A lease of `value`, bytes of this lender's segment; None when the segment
    /// has no lease yet and held segments already add up to their bound (or lent
    /// ones to theirs).
    ///
    /// The caller (the engine's lookup, through [`crate::Item::lend`]) guarantees
    /// that `value` lies in the segment and that the segment cannot be retired
    /// and found quiescent before this returns: the lookup is pinned and found the
    /// item while pinned, or holds the lock of the partition linking it.
    pub(crate) fn lend(&self, value: &[u8]) -> Option<Lease> {
        let descs = self.descs;
        let d = descs.get(self.seg);
        // Stable while the item is reachable: `cap` changes only with `ptr`, when
        // the segment's memory is given back, which waits for `lent` to be 0.
        let cap = d.cap.load(Ordering::Relaxed);
        // Relaxed: ordered before the reclaimer's check by the unpin (Release) or
        // the partition unlock that follows, see the module docs.
        if d.lent.fetch_add(1, Ordering::Relaxed) == 0 {
            // A segment no lease held yet: lent only while held segments are
            // under their bound, and lent ones under theirs. (One that is already
            // lent costs nothing more, so it is always lent.)
            let held = descs.held_bytes.load(Ordering::Relaxed);
            let lent = descs.lent_bytes.load(Ordering::Relaxed);
            if held >= descs.held_max.load(Ordering::Relaxed)
                || lent >= descs.lent_max.load(Ordering::Relaxed) as i64
            {
                // Refused: take the count back. If another lease came in meanwhile
                // (it saw a count above 0, so did not count the segment), the
                // segment stays lent and is counted now, for that lease's drop.
                if d.lent.fetch_sub(1, Ordering::Release) != 1 {
                    descs
                        .lent_bytes
                        .fetch_add(i64::from(cap), Ordering::Relaxed);
                }
                return None;
            }
            descs
                .lent_bytes
                .fetch_add(i64::from(cap), Ordering::Relaxed);
        }
        Some(Lease {
            descs: Arc::clone(descs),
            seg: self.seg,
            cap,
            ptr: value.as_ptr(),
            len: value.len(),
        })
    }
}

/// A value's bytes, valid until the lease drops; see the module docs. Taking one
/// costs two atomic additions (the segment's count and the table's `Arc`; a
/// segment's first lease also reads the held and lent counts and adds to the
/// latter) and no lock;
/// so does dropping it.
pub struct Lease {
    descs: Arc<Descs>,
    seg: u32,
    /// The segment's capacity when the lease was taken (what `lent_bytes` counts).
    cap: u32,
    ptr: *const u8,
    len: usize,
}

// SAFETY: a lease is a shared borrow of immutable bytes whose memory its owner
// (`descs`) keeps allocated and the arena keeps unreused while `lent` > 0; the
// count is atomic, so it may be dropped on any thread, and read from any (the
// bytes are never written while lent).
unsafe impl Send for Lease {}
// SAFETY: as above; `&Lease` only gives `&[u8]`.
unsafe impl Sync for Lease {}

impl Lease {
    /// The lent bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` was a published item's value when the lease was
        // taken; its segment's `lent` has been above 0 since, so the arena has not
        // reused (or given back) its memory, and published items are never written.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::ops::Deref for Lease {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({} bytes of segment {})", self.len, self.seg)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let d = self.descs.get(self.seg);
        // Release: this lease's reads happen before a reclaimer's Acquire load of 0.
        if d.lent.fetch_sub(1, Ordering::Release) == 1 {
            self.descs
                .lent_bytes
                .fetch_sub(i64::from(self.cap), Ordering::Relaxed);
        }
    }
}

/// Loom explores every interleaving of a reader that pins, finds an item, lends it,
/// unpins and reads through its lease afterwards, against a reclaimer that unlinks
/// the item, advances the epoch, waits for quiescence and then reuses the memory
/// only when the lend count reads 0 (else it holds the segment and looks again
/// later, as `Arena::reclaim_limbo` does). The lend count's orderings are the
/// engine's: a Relaxed raise while pinned, a Release drop, an Acquire check.
#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::super::epoch::{advance_on, pin_slot, quiescent_on, unpin_slot};
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicU32, AtomicU64};
    use loom::sync::Arc;
    use std::sync::atomic::Ordering;

    fn loom_fence() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }

    struct Shared {
        global: AtomicU64,
        slots: [AtomicU64; 1],
        /// The index slot: 1 while it links the item.
        link: AtomicU64,
        /// The segment's `Desc::lent`.
        lent: AtomicU32,
        memory: UnsafeCell<u64>,
    }

    #[test]
    fn loom_lease_holds_the_segment_past_quiescence() {
        loom::model(|| {
            let sh = Arc::new(Shared {
                global: AtomicU64::new(1),
                slots: [AtomicU64::new(0)],
                link: AtomicU64::new(1),
                lent: AtomicU32::new(0),
                memory: UnsafeCell::new(42),
            });
            let r = Arc::clone(&sh);
            let reader = loom::thread::spawn(move || {
                pin_slot(&r.global, &r.slots[0], loom_fence);
                let lent = r.link.load(Ordering::Acquire) == 1;
                if lent {
                    r.lent.fetch_add(1, Ordering::Relaxed);
                }
                unpin_slot(&r.slots[0]);
                if lent {
                    let v = r.memory.with(|p| {
                        // SAFETY: (checked by loom) the reclaimer does not reuse the
                        // memory while the lease is counted.
                        unsafe { *p }
                    });
                    assert_eq!(v, 42, "read reused memory through a lease");
                    r.lent.fetch_sub(1, Ordering::Release);
                }
            });
            sh.link.store(0, Ordering::Release);
            let e = advance_on(&sh.global);
            while !quiescent_on(sh.slots.iter(), e, loom_fence) {
                loom::thread::yield_now();
            }
            // Quiescent: now only the lend count can hold the segment.
            while sh.lent.load(Ordering::Acquire) != 0 {
                loom::thread::yield_now();
            }
            sh.memory.with_mut(|p| {
                // SAFETY: (checked by loom) quiescent and no lease: nobody reads it.
                unsafe { *p = 7 }
            });
            reader.join().expect("reader");
        });
    }
}
