//! The memory file (`-e <file>`): segment memory in a file-backed shared mapping, so
//! that a graceful stop can leave the items where a restart finds them.
//!
//! ```text
//!   file: | unit 0 | unit 1 | … | unit n-1 |     UNIT bytes each (64 KiB, the smallest
//!          └── a segment: a run of units ──┘      segment size), handed out first-fit
//! ```
//!
//! A normal segment takes `seg_size / UNIT` units (segment sizes are powers of two
//! from 64 KiB, so they divide evenly); a large item's segment takes its size
//! rounded up to whole units. The file is a little larger than `-m` (an eighth more
//! and one segment) so that large items' rounding rarely leaves a segment without
//! room; when it does, [`MemFile::alloc`] says no and the descriptor table falls
//! back to anonymous memory for that segment (its items work but are not kept over
//! a restart). Unused parts of a tmpfs file cost no memory.
//!
//! Locks: `units`, a mutex that only the arena lock's holder takes (segments are
//! given and taken back under it), so it is never contended.
//!
//! Imports: strict (how the file is opened); nothing of the engine's.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use memmap2::{MmapOptions, MmapRaw};

use super::strict;
use parking_lot::Mutex;

/// The allocation unit: the smallest segment size.
pub const UNIT: u64 = 64 * 1024;

/// A memory file, mapped shared.
pub struct MemFile {
    /// The `-m` the file was sized for: what a restart compares (`cache_memlimit`
    /// changes the engine's limit, not this).
    pub limit_bytes: u64,
    map: MmapRaw,
    /// Kept open for the life of the mapping (and for `set_len` at startup).
    _file: File,
    /// Bit per unit, set while a segment holds it, and where the next search
    /// starts. Taken only by the arena lock's holder (and at startup and teardown,
    /// single-threaded).
    units: Mutex<Units>,
}

struct Units {
    used: Vec<bool>,
    hint: usize,
}

/// The file size for a memory limit and segment size: `-m` rounded up to whole
/// segments, an eighth more for large items' rounding, and one more segment.
pub fn file_len(limit: u64, seg_size: u32) -> u64 {
    let seg = u64::from(seg_size);
    let segs = limit.div_ceil(seg);
    (segs + segs / 8 + 1) * seg
}

impl MemFile {
    /// Opens (creating it, mode 0600) the file at `path` for a memory limit and
    /// segment size, [`file_len`] bytes. When `keep` is false, or the file is not
    /// that long, its old contents are discarded first (truncated to 0), so a cold
    /// start never shares pages with a previous run. Returns the file and whether
    /// the old contents were kept.
    /// The file must pass [`strict::open`]'s checks (`trusted`: owners allowed
    /// besides this user and root).
    pub fn open(
        path: &Path,
        limit_bytes: u64,
        seg_size: u32,
        keep: bool,
        trusted: &[u32],
    ) -> io::Result<(MemFile, bool)> {
        let len = file_len(limit_bytes, seg_size);
        let file = strict::open(
            path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600),
            trusted,
        )?;
        // Two servers on one file would write over each other's items: the
        // first holds an exclusive lock for as long as it has the file open.
        // SAFETY: flock takes a descriptor we own and flags; it touches no memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "memory file {} is in use by another process ({e})",
                    path.display()
                ),
            ));
        }
        let old = file.metadata()?.len();
        let kept = keep && old == len;
        if !kept {
            file.set_len(0)?;
        }
        file.set_len(len)?;
        let size = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "memory file too large"))?;
        // Not MAP_POPULATE, even for a restart: it would allocate the file's holes
        // too (1 GB of items took 7.4 s to come back with it, 2.9 s without).
        let map = MmapOptions::new().len(size).map_raw(&file)?;
        let n = (len / UNIT) as usize;
        Ok((
            MemFile {
                limit_bytes,
                map,
                _file: file,
                units: Mutex::new(Units {
                    used: vec![false; n],
                    hint: 0,
                }),
            },
            kept,
        ))
    }

    /// Bytes mapped.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    fn base(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Units a segment of `cap` bytes takes.
    fn units_for(cap: u32) -> usize {
        u64::from(cap).max(1).div_ceil(UNIT) as usize
    }

    /// Memory for a segment of `cap` bytes, or null when no run of free units is
    /// long enough. Its contents are whatever the file held (the engine writes
    /// items before anything reads them and reads nothing past a segment's end).
    pub fn alloc(&self, cap: u32) -> *mut u8 {
        let need = Self::units_for(cap);
        let mut u = self.units.lock();
        let n = u.used.len();
        let start = u.hint.min(n);
        // First fit from the hint, then from the start.
        for from in [start, 0] {
            let mut i = from;
            while i + need <= n {
                match u.used[i..i + need].iter().rposition(|&b| b) {
                    Some(j) => i += j + 1,
                    None => {
                        u.used[i..i + need].fill(true);
                        u.hint = i + need;
                        // SAFETY: i + need <= n, so the run lies inside the mapping.
                        let p = unsafe { self.base().add(i * UNIT as usize) };
                        // Fault the segment's pages in with one call instead of one
                        // shared-memory fault per page as items are written (W4 costs
                        // less CPU per set, docs/benchmarks.md). Advice only: kernels
                        // before 5.14 refuse it and the pages fault in as before.
                        // SAFETY: the range lies inside our mapping; the advice
                        // only allocates pages and changes no contents.
                        unsafe {
                            libc::madvise(
                                p.cast(),
                                u64::from(cap) as usize,
                                libc::MADV_POPULATE_WRITE,
                            )
                        };
                        return p;
                    }
                }
            }
        }
        std::ptr::null_mut()
    }

    /// The file offset of `p` when it lies in the mapping.
    pub fn offset_of(&self, p: *const u8) -> Option<u64> {
        let base = self.base() as usize;
        let a = p as usize;
        (a >= base && a < base + self.map.len()).then(|| (a - base) as u64)
    }

    /// Takes back a segment's units, if `p` is in the mapping; false if it is not.
    pub fn free(&self, p: *const u8, cap: u32) -> bool {
        let Some(off) = self.offset_of(p) else {
            return false;
        };
        let first = (off / UNIT) as usize;
        let mut u = self.units.lock();
        let end = (first + Self::units_for(cap)).min(u.used.len());
        u.used[first..end].fill(false);
        true
    }

    /// Claims the units of a segment of `cap` bytes at file offset `off` (a restart
    /// adopting a saved segment). None when the run is out of the file, not
    /// unit-aligned, or overlaps one already claimed.
    pub fn claim(&self, off: u64, cap: u32) -> Option<*mut u8> {
        if !off.is_multiple_of(UNIT) || off.checked_add(u64::from(cap))? > self.len() {
            return None;
        }
        let first = (off / UNIT) as usize;
        let mut u = self.units.lock();
        let end = first + Self::units_for(cap);
        if end > u.used.len() || u.used[first..end].iter().any(|&b| b) {
            return None;
        }
        u.used[first..end].fill(true);
        // SAFETY: off + cap <= len: inside the mapping.
        Some(unsafe { self.base().add(off as usize) })
    }

    /// Writes dirty pages back to the file (a no-op on tmpfs; needed on a disk).
    pub fn flush(&self) -> io::Result<()> {
        self.map.flush()
    }
}

// SAFETY: the mapping is plain shared memory; the engine's own protocols (segment
// ownership, epochs, partition locks) decide who touches which bytes, exactly as
// for heap segments. `units` is behind a mutex.
unsafe impl Send for MemFile {}
// SAFETY: as above.
unsafe impl Sync for MemFile {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_claim() {
        let dir = std::env::temp_dir().join(format!("memcrab-mapfile-{}", std::process::id()));
        let (f, kept) = MemFile::open(&dir, 7 * UNIT, UNIT as u32, true, &[]).expect("open");
        assert!(!kept);
        let a = f.alloc(2 * UNIT as u32);
        let b = f.alloc(UNIT as u32 + 1);
        assert_eq!(f.offset_of(a), Some(0));
        assert_eq!(f.offset_of(b), Some(2 * UNIT));
        let c = f.alloc(5 * UNIT as u32);
        assert!(c.is_null(), "only 4 units left: a and b took 2 each");
        assert!(f.free(a, 2 * UNIT as u32));
        let c = f.alloc(3 * UNIT as u32);
        assert_eq!(f.offset_of(c), Some(4 * UNIT));
        let d = f.alloc(2 * UNIT as u32);
        assert_eq!(f.offset_of(d), Some(0), "wraps around to the freed run");
        assert!(f.claim(7 * UNIT, 1).is_some());
        assert!(f.claim(7 * UNIT, 1).is_none(), "overlap");
        assert!(f.claim(8 * UNIT, 1).is_none(), "outside");
        assert!(f.claim(UNIT / 2, 1).is_none(), "unaligned");
        assert!(
            MemFile::open(&dir, 7 * UNIT, UNIT as u32, true, &[]).is_err(),
            "a second opener must be refused while the first has the file"
        );
        let x = 0u8;
        assert!(!f.free(&x, 1));
        drop(f);
        std::fs::remove_file(&dir).expect("remove");
    }
}
