//! The ring's set-up: a ring with the features the io_uring driver needs
//! (registered files, a provided buffer ring, waits with a timeout), and the
//! provided buffer ring itself, whose buffers the kernel fills with what the
//! multishot receives bring.
//!
//! ```text
//!   entries: [addr,len,bid] × BUFFERS   (the kernel takes from its head; we add at the tail)
//!   bufs:    [BUFFER_BYTES] × BUFFERS   (a completion names one by its bid)
//! ```

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{types, IoUring};

/// Submission queue entries; the completion queue is four times as long.
const SQ_ENTRIES: u32 = 1024;
/// Provided receive buffers per worker, and their size: at most 1 MiB per worker,
/// of which small requests touch one page per buffer.
const BUFFERS: u16 = 128;
const BUFFER_BYTES: usize = 8 * 1024;
/// The provided buffer group's id.
pub const BGID: u16 = 0;
/// Registered file table slots asked for (fewer where `RLIMIT_NOFILE` is lower);
/// connections in slots past it use their plain descriptor.
const FIXED_FILES_MAX: u32 = 16 * 1024;

/// The provided buffer ring: `BUFFERS` entries the kernel picks receive buffers
/// from, and the buffers themselves, both in anonymous mappings owned here.
pub struct BufRing {
    entries: *mut types::BufRingEntry,
    entries_len: usize,
    bufs: *mut u8,
    bufs_len: usize,
    /// Our copy of the ring's tail (the kernel owns the head).
    tail: u16,
}

impl BufRing {
    fn new(ring: &IoUring) -> io::Result<BufRing> {
        let entries_len = usize::from(BUFFERS) * std::mem::size_of::<types::BufRingEntry>();
        let bufs_len = usize::from(BUFFERS) * BUFFER_BYTES;
        let entries = map(entries_len)?.cast::<types::BufRingEntry>();
        let bufs = match map(bufs_len) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: `entries` was mapped just above with this length.
                unsafe { libc::munmap(entries.cast(), entries_len) };
                return Err(e);
            }
        };
        let mut br = BufRing {
            entries,
            entries_len,
            bufs,
            bufs_len,
            tail: 0,
        };
        for bid in 0..BUFFERS {
            br.add(bid);
        }
        br.publish();
        // SAFETY: the entries' mapping is page aligned, BUFFERS long, and lives until
        // this BufRing is dropped, which the worker does only after the ring.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(br.entries as u64, BUFFERS, BGID, 0)?;
        }
        Ok(br)
    }

    /// Puts buffer `bid` back at the tail (seen by the kernel after `publish`).
    pub fn add(&mut self, bid: u16) {
        let i = usize::from(self.tail & (BUFFERS - 1));
        // SAFETY: i < BUFFERS, the number of entries mapped; the kernel reads only
        // entries between its head and the published tail, which this one is not.
        let e = unsafe { &mut *self.entries.add(i) };
        // SAFETY: bid < BUFFERS, so the offset is inside the buffers' mapping.
        e.set_addr(unsafe { self.bufs.add(usize::from(bid) * BUFFER_BYTES) } as u64);
        e.set_len(BUFFER_BYTES as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the buffers added so far visible to the kernel.
    pub fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's reserved field, inside
        // the mapping; the kernel reads it concurrently, hence the atomic store.
        let tail =
            unsafe { AtomicU16::from_ptr(types::BufRingEntry::tail(self.entries).cast_mut()) };
        // Release: the entries written by `add` are visible before the new tail.
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which a completion just handed us.
    pub fn buf(&self, bid: u16, len: usize) -> &[u8] {
        let bid = usize::from(bid) % usize::from(BUFFERS);
        let len = len.min(BUFFER_BYTES);
        // SAFETY: the range is inside the buffers' mapping; the kernel wrote it
        // before posting the completion and will not touch it again until the
        // buffer is put back with `add`, after the caller is done with the slice.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid * BUFFER_BYTES), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: both were mapped with these lengths in `new`; the ring that used
        // them is gone (the worker drops it first).
        unsafe {
            libc::munmap(self.bufs.cast(), self.bufs_len);
            libc::munmap(self.entries.cast(), self.entries_len);
        }
    }
}

/// An anonymous, page-aligned, zeroed mapping.
fn map(len: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing
    // touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// A ring with the features this worker needs: registered files, a provided
/// buffer ring, waits with a timeout. Also `main`'s probe for `-o io=uring`.
pub fn setup(max_conns: usize) -> io::Result<(IoUring, BufRing, u32)> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(SQ_ENTRIES * 4)
        .build(SQ_ENTRIES)
        .or_else(|_| {
            IoUring::builder()
                .setup_cqsize(SQ_ENTRIES * 4)
                .build(SQ_ENTRIES)
        })?;
    if !ring.params().is_feature_ext_arg() || !ring.params().is_feature_nodrop() {
        return Err(io::Error::other("kernel lacks IORING_FEAT_EXT_ARG/NODROP"));
    }
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(1024);
    let fixed = (max_conns as u64 + 64)
        .min(u64::from(FIXED_FILES_MAX))
        .min(nofile) as u32;
    ring.submitter().register_files_sparse(fixed)?;
    let bufs = BufRing::new(&ring)?;
    Ok((ring, bufs, fixed))
}

/// Whether io_uring works here; the error says why not.
pub fn probe(max_conns: usize) -> io::Result<()> {
    setup(max_conns).map(drop)
}
