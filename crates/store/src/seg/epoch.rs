//! Epoch-based reclamation: when may memory that readers reached without a lock be
//! reused?
//!
//! A reader *pins* before it loads an index slot and unpins after its last read of
//! the item the slot led to. A writer that unlinks memory (a segment's items, an old
//! index table) calls [`advance`] afterwards and keeps the returned epoch; the memory
//! may be reused once [`is_quiescent`] says no reader pinned before that epoch is
//! still pinned.
//!
//! ```text
//!   reader:  e = GLOBAL (Acquire) ─► slot[t] = e ─► fence(SeqCst) ─► load index ─► read item ─► slot[t] = 0 (Release)
//!   writer:  unlink (index stores) ─► E = GLOBAL.fetch_add(1)+1 ─► … ─► fence(SeqCst) ─► every slot is 0 or ≥ E ⇒ reuse
//! ```
//!
//! Why it is safe. Take a reader still able to reach the unlinked memory. If the
//! writer's check reads the reader's slot as 0, either the reader unpinned (its
//! Release store orders all its reads before the reuse), or it has not stored its
//! slot yet: then the writer's SeqCst fence precedes the reader's in the single
//! total order of SeqCst fences, so the reader's later index loads see the unlink
//! and cannot reach the memory. If the slot reads `e ≥ E`, the reader's Acquire load
//! of GLOBAL read the writer's `fetch_add` (a release), so again its index loads see
//! the unlink. Only `0 < e < E` is unsafe, and then the writer waits.
//!
//! The registry is process-wide (all engines share it): a thread takes a slot on its
//! first pin and gives it back when it exits. Threads beyond [`SLOTS`] share one
//! counter that blocks all reclamation while any of them is pinned. So a reader of
//! one engine delays reclamation in every other: harmless for the server, which runs
//! one engine, but a test that asserts how soon retired memory is reused must not
//! share its process with tests that pin (see `tests/overwrite_reuse.rs`).
//!
//! Locks: none; the registry is atomics only. [`wait_quiescent`] spins until the
//! readers it waits for unpin, so whoever calls it must not be pinned (it would wait
//! for itself) and must not hold a lock a pinned reader could be waiting for (none
//! does: readers take no lock while pinned).
//!
//! Imports: nothing of the engine's.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

/// Thread slots in the registry.
pub const SLOTS: usize = 512;

/// One cache line per slot, so pinning threads do not share lines.
#[repr(align(64))]
struct Slot {
    /// 0 when the owning thread is not pinned, else the GLOBAL epoch it saw when it
    /// pinned. Written only by the owner; read by reclaimers.
    epoch: AtomicU64,
    /// Whether a live thread owns this slot (claimed with a CAS, released on exit).
    taken: AtomicBool,
}

struct Registry {
    /// The global epoch. Starts at 1 so that 0 can mean "not pinned".
    global: AtomicU64,
    slots: [Slot; SLOTS],
    /// Pinned threads that found no free slot; while non-zero nothing is reclaimed.
    overflow_pinned: AtomicU64,
}

static REGISTRY: Registry = Registry {
    global: AtomicU64::new(1),
    slots: [const {
        Slot {
            epoch: AtomicU64::new(0),
            taken: AtomicBool::new(false),
        }
    }; SLOTS],
    overflow_pinned: AtomicU64::new(0),
};

/// This thread's slot index, or `SLOTS` for the shared overflow counter.
struct Local {
    index: usize,
    depth: Cell<u32>,
}

impl Local {
    fn claim() -> Local {
        let index = (0..SLOTS)
            .find(|&i| {
                REGISTRY.slots[i]
                    .taken
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .unwrap_or(SLOTS);
        Local {
            index,
            depth: Cell::new(0),
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if self.index < SLOTS {
            REGISTRY.slots[self.index].epoch.store(0, Ordering::Release);
            REGISTRY.slots[self.index]
                .taken
                .store(false, Ordering::Release);
        }
    }
}

thread_local! {
    static LOCAL: Local = Local::claim();
}

/// A pinned section: while it lives, memory reachable from the index is not reused.
pub struct Guard {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// The protocol's three steps, written once over any 64-bit atomic so that the loom
/// test checks the very code the engine runs.
pub(crate) trait Atomic64 {
    fn load(&self, o: Ordering) -> u64;
    fn store(&self, v: u64, o: Ordering);
    fn fetch_add(&self, v: u64, o: Ordering) -> u64;
}

impl Atomic64 for AtomicU64 {
    fn load(&self, o: Ordering) -> u64 {
        AtomicU64::load(self, o)
    }
    fn store(&self, v: u64, o: Ordering) {
        AtomicU64::store(self, v, o)
    }
    fn fetch_add(&self, v: u64, o: Ordering) -> u64 {
        AtomicU64::fetch_add(self, v, o)
    }
}

/// Publishes a pin of `slot`: the epoch seen, then a SeqCst fence (see the module docs).
#[inline]
pub(crate) fn pin_slot<A: Atomic64>(global: &A, slot: &A, fence_seq_cst: fn()) {
    let e = global.load(Ordering::Acquire);
    slot.store(e, Ordering::Relaxed);
    fence_seq_cst();
}

/// Ends a pin: every read made while pinned happens before a reclaimer sees the 0.
#[inline]
pub(crate) fn unpin_slot<A: Atomic64>(slot: &A) {
    slot.store(0, Ordering::Release);
}

/// Starts a new epoch after an unlink; the memory waits for the returned epoch.
pub(crate) fn advance_on<A: Atomic64>(global: &A) -> u64 {
    global.fetch_add(1, Ordering::SeqCst) + 1
}

/// Whether no slot is pinned at an epoch before `epoch`.
pub(crate) fn quiescent_on<'a, A: Atomic64 + 'a>(
    slots: impl IntoIterator<Item = &'a A>,
    epoch: u64,
    fence_seq_cst: fn(),
) -> bool {
    fence_seq_cst();
    slots.into_iter().all(|s| {
        let e = s.load(Ordering::Acquire);
        e == 0 || e >= epoch
    })
}

fn std_fence() {
    fence(Ordering::SeqCst);
}

/// Pins the calling thread (re-entrant).
#[inline]
pub fn pin() -> Guard {
    LOCAL.with(|l| {
        let d = l.depth.get();
        l.depth.set(d + 1);
        if d == 0 {
            if l.index < SLOTS {
                pin_slot(&REGISTRY.global, &REGISTRY.slots[l.index].epoch, std_fence);
            } else {
                REGISTRY.overflow_pinned.fetch_add(1, Ordering::Relaxed);
                fence(Ordering::SeqCst);
            }
        }
    });
    Guard {
        _not_send: std::marker::PhantomData,
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        // try_with: during thread teardown the local may be gone; it unpinned then.
        let _ = LOCAL.try_with(|l| {
            let d = l.depth.get().saturating_sub(1);
            l.depth.set(d);
            if d == 0 {
                if l.index < SLOTS {
                    unpin_slot(&REGISTRY.slots[l.index].epoch);
                } else {
                    REGISTRY.overflow_pinned.fetch_sub(1, Ordering::Release);
                }
            }
        });
    }
}

/// Starts a new epoch, to be called after unlinking memory; returns the epoch the
/// memory must wait for.
pub fn advance() -> u64 {
    advance_on(&REGISTRY.global)
}

/// Whether every reader that could have reached memory retired at `epoch` is gone.
pub fn is_quiescent(epoch: u64) -> bool {
    quiescent_on(REGISTRY.slots.iter().map(|s| &s.epoch), epoch, std_fence)
        && REGISTRY.overflow_pinned.load(Ordering::Acquire) == 0
}

/// Waits until [`is_quiescent`]; pins are short (one lookup), so this spins briefly
/// and then yields. The caller must not be pinned.
pub fn wait_quiescent(epoch: u64) {
    let mut spins = 0u32;
    while !is_quiescent(epoch) {
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Loom explores every interleaving (and every weak-memory outcome loom models) of a
/// reader that pins, follows an index slot and reads the memory it names, against a
/// writer that unlinks the slot, advances the epoch, waits for quiescence and then
/// reuses the memory. A reuse racing with the read is reported by loom's UnsafeCell.
#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicU64 as LoomU64;
    use loom::sync::Arc;

    impl Atomic64 for LoomU64 {
        fn load(&self, o: Ordering) -> u64 {
            LoomU64::load(self, o)
        }
        fn store(&self, v: u64, o: Ordering) {
            LoomU64::store(self, v, o)
        }
        fn fetch_add(&self, v: u64, o: Ordering) -> u64 {
            LoomU64::fetch_add(self, v, o)
        }
    }

    fn loom_fence() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }

    struct Shared {
        global: LoomU64,
        slots: [LoomU64; 2],
        /// The index slot: 1 while it links the memory.
        link: LoomU64,
        memory: UnsafeCell<u64>,
    }

    #[test]
    fn loom_reuse_waits_for_pinned_readers() {
        loom::model(|| {
            let sh = Arc::new(Shared {
                global: LoomU64::new(1),
                slots: [LoomU64::new(0), LoomU64::new(0)],
                link: LoomU64::new(1),
                memory: UnsafeCell::new(42),
            });
            let r = Arc::clone(&sh);
            let reader = loom::thread::spawn(move || {
                pin_slot(&r.global, &r.slots[0], loom_fence);
                if r.link.load(Ordering::Acquire) == 1 {
                    let v = r.memory.with(|p| {
                        // SAFETY: (checked by loom) the writer does not reuse the
                        // memory while this pin could have reached it.
                        unsafe { *p }
                    });
                    assert_eq!(v, 42, "read reused memory");
                }
                unpin_slot(&r.slots[0]);
            });
            // Writer: unlink, advance, wait, reuse.
            sh.link.store(0, Ordering::Release);
            let e = advance_on(&sh.global);
            while !quiescent_on(sh.slots.iter(), e, loom_fence) {
                loom::thread::yield_now();
            }
            sh.memory.with_mut(|p| {
                // SAFETY: (checked by loom) quiescent, so no reader can be in it.
                unsafe { *p = 7 }
            });
            reader.join().expect("reader");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_reader_blocks_reclamation() {
        let g = pin();
        let e = advance();
        assert!(
            !is_quiescent(e),
            "a reader pinned before the epoch must block it"
        );
        drop(g);
        // Other tests' threads may be pinned briefly; wait rather than assert.
        wait_quiescent(e);
        // A pin taken after the advance does not block it.
        let _g = pin();
        let mut later_ok = false;
        for _ in 0..1000 {
            if is_quiescent(e) {
                later_ok = true;
                break;
            }
            std::thread::yield_now();
        }
        assert!(later_ok);
    }

    #[test]
    fn nested_pins() {
        let a = pin();
        let b = pin();
        drop(b);
        let e = advance();
        assert!(!is_quiescent(e), "outer pin still held");
        drop(a);
        wait_quiescent(e);
    }
}
