//! A connection's reply output ([`Out`]): owned bytes, and large values lent by the
//! store ([`memcrab_store::Lease`]) in their place in the byte stream instead of
//! copied, so that the socket (writev, io_uring's sendmsg) reads them from segment
//! memory.
//!
//! ```text
//!   buf:    [VALUE k1 0 9000\r\n]      [\r\nVALUE k2 0 9000\r\n]      [\r\nEND\r\n]
//!   lent:                       lease1 ▲ (at = 17)            lease2 ▲ (at = 38)
//!   stream: VALUE k1 0 9000\r\n <lease1> \r\nVALUE k2 0 9000\r\n <lease2> \r\nEND\r\n
//! ```
//!
//! Positions ([`Out::len`], [`Out::truncate`], what the transports count as sent)
//! are in the stream, lent bytes included, so the output limit counts lent bytes as
//! unsent output. An `Out` dereferences to its byte buffer for code that only
//! appends bytes (every reply but a value); only [`Out::value`] lends, called by
//! text get/gets/gat/gats (`exec/text.rs`), meta `mg … v` (`exec/meta.rs`) and the
//! binary GET/GAT family (`exec/binary.rs`). With a
//! `lend_min` of 0 (TLS, UDP, `-o value_lend_min=0`) it never lends and is exactly
//! the byte buffer it was before.
//!
//! Imports: the store's `Item` and `Lease` only.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::ops::{Deref, DerefMut};

use memcrab_store::{Item, Lease};

/// The most iovecs one `writev`/`sendmsg` takes (Linux's `IOV_MAX`).
pub const IOV_MAX: usize = 1024;

/// A lent value in the stream.
struct Lent {
    /// Where in `buf` it goes (after `buf[..at]`).
    at: usize,
    /// Where it starts in the stream.
    pos: usize,
    lease: Lease,
}

/// Reply bytes and lent values, in stream order; see the module docs.
#[derive(Default)]
pub struct Out {
    buf: Vec<u8>,
    /// Lent values not yet released, in stream order.
    lent: VecDeque<Lent>,
    /// Bytes of every value lent since the last clear (released ones included).
    lent_bytes: usize,
    /// Where the unreleased part starts: the buffer position and the stream position
    /// just after the last released lease (0, 0 when none was released).
    base_at: usize,
    base_pos: usize,
    /// Values at least this long are lent when the engine lends; 0: never.
    lend_min: usize,
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Out({} bytes, {} lent)", self.len(), self.lent.len())
    }
}

impl Out {
    /// An output that lends values of at least `lend_min` bytes (0: never).
    pub fn new(lend_min: usize) -> Out {
        Out {
            lend_min,
            ..Out::default()
        }
    }

    pub fn lend_min(&self) -> usize {
        self.lend_min
    }

    pub fn set_lend_min(&mut self, lend_min: usize) {
        self.lend_min = lend_min;
    }

    /// Bytes in the stream: owned and lent.
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len() + self.lent_bytes
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether any value is lent (not yet released).
    #[inline]
    pub fn has_leases(&self) -> bool {
        !self.lent.is_empty()
    }

    /// Whether a value of `len` bytes is one to lend (if the engine lends it).
    #[inline]
    pub fn lends(&self, len: usize) -> bool {
        self.lend_min != 0 && len >= self.lend_min
    }

    /// Appends `it`'s value: lent when it is at least `lend_min` bytes and the
    /// engine lends it, else copied. Returns whether it was lent.
    #[inline]
    pub fn value(&mut self, it: &Item<'_>) -> bool {
        if self.lends(it.value.len()) {
            if let Some(lease) = it.lend() {
                self.push_lease(lease);
                return true;
            }
        }
        self.buf.extend_from_slice(it.value);
        false
    }

    /// Appends lent bytes.
    pub fn push_lease(&mut self, lease: Lease) {
        let n = lease.len();
        self.lent.push_back(Lent {
            at: self.buf.len(),
            pos: self.len(),
            lease,
        });
        self.lent_bytes += n;
    }

    /// Cuts the stream back to `len` bytes, a position [`Out::len`] gave since the
    /// last clear (never inside a lent value, never before what was released).
    pub fn truncate(&mut self, len: usize) {
        while self.lent.back().is_some_and(|l| l.pos >= len) {
            if let Some(l) = self.lent.pop_back() {
                self.lent_bytes -= l.lease.len();
            }
        }
        self.buf.truncate(len - self.lent_bytes);
    }

    /// Empties it, dropping its leases; keeps the buffer's allocation.
    #[inline]
    pub fn clear(&mut self) {
        self.buf.clear();
        if self.lent_bytes != 0 {
            self.lent.clear();
            self.lent_bytes = 0;
            self.base_at = 0;
            self.base_pos = 0;
        }
    }

    /// Releases the leases of values wholly before stream position `sent`: their
    /// bytes are with the kernel.
    pub fn release_sent(&mut self, sent: usize) {
        while let Some(l) = self.lent.front() {
            let end = l.pos + l.lease.len();
            if end > sent {
                break;
            }
            self.base_at = l.at;
            self.base_pos = end;
            self.lent.pop_front();
        }
    }

    /// Calls `f` with each piece of the stream from position `from` on, in order
    /// (owned bytes and lent values; empty pieces skipped), while it returns true.
    pub fn pieces_from<'a>(&'a self, from: usize, mut f: impl FnMut(&'a [u8]) -> bool) {
        let (mut at, mut pos) = (self.base_at, self.base_pos);
        let mut piece = |bytes: &'a [u8], start: usize| -> bool {
            let end = start + bytes.len();
            if end <= from || bytes.is_empty() {
                return true;
            }
            f(&bytes[from.saturating_sub(start)..])
        };
        for l in &self.lent {
            if !piece(&self.buf[at..l.at], pos) {
                return;
            }
            if !piece(&l.lease, l.pos) {
                return;
            }
            at = l.at;
            pos = l.pos + l.lease.len();
        }
        piece(&self.buf[at..], pos);
    }

    /// The stream from `from` on, when it is owned bytes only (no lease left).
    #[inline]
    pub fn owned_from(&self, from: usize) -> Option<&[u8]> {
        if self.lent.is_empty() {
            // Every lent byte (all released) lies before `from`.
            self.buf.get(from - self.lent_bytes..)
        } else {
            None
        }
    }

    /// Shrinks the byte buffer's allocation to `keep` bytes if it grew over that
    /// (call when empty). Shrinking rather than freeing: a connection whose replies
    /// are a little over `keep` would otherwise map, fault in and unmap a fresh
    /// buffer for every reply (seen as 4,700 mmap/munmap pairs a second with 16 ×
    /// 8 KiB multi-gets, when a buffer's doubling happened to land just past
    /// 256 KiB).
    pub fn free_buffer_over(&mut self, keep: usize) {
        if self.buf.capacity() > keep {
            self.buf.shrink_to(keep);
        }
    }

    /// The stream from `from` on as at most [`IOV_MAX`] slices, for one `writev`.
    pub fn io_slices<'a>(&'a self, from: usize, into: &mut Vec<IoSlice<'a>>) {
        into.clear();
        self.pieces_from(from, |b| {
            into.push(IoSlice::new(b));
            into.len() < IOV_MAX
        });
    }
}

impl Deref for Out {
    type Target = Vec<u8>;
    #[inline]
    fn deref(&self) -> &Vec<u8> {
        &self.buf
    }
}

impl DerefMut for Out {
    #[inline]
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memcrab_store::seg::Seg;
    use memcrab_store::{Clock, Config, Engine, GetOpts, Mode, StoreOpts};

    use super::*;

    fn engine() -> Seg {
        let cfg = Config {
            limit_bytes: 8 << 20,
            evict: true,
            use_cas: true,
            item_size_max: 1 << 20,
            hash_seed: None,
        };
        let e = Seg::new(cfg, Arc::new(Clock::new()));
        for (k, v) in [(b"a", b"AAAA"), (b"b", b"BBBB")] {
            e.store(Mode::Set, k, 0, 0, v, &StoreOpts::default());
        }
        e
    }

    fn append_value(e: &Seg, o: &mut Out, key: &[u8]) {
        e.get(key, &GetOpts::default(), &mut |it| {
            o.value(&it);
            false
        });
    }

    fn stream(o: &Out, from: usize) -> Vec<u8> {
        let mut v = Vec::new();
        o.pieces_from(from, |b| {
            v.extend_from_slice(b);
            true
        });
        v
    }

    #[test]
    fn lent_values_sit_in_the_stream() {
        let e = engine();
        let mut o = Out::new(4);
        o.extend_from_slice(b"<");
        append_value(&e, &mut o, b"a");
        o.extend_from_slice(b"|");
        append_value(&e, &mut o, b"b");
        o.extend_from_slice(b">");
        assert!(o.has_leases());
        assert_eq!(o.len(), 11);
        assert_eq!(&o[..], b"<|>", "the values are lent, not copied");
        assert_eq!(stream(&o, 0), b"<AAAA|BBBB>");
        assert_eq!(stream(&o, 3), b"AA|BBBB>");
        let mut slices = Vec::new();
        o.io_slices(2, &mut slices);
        assert_eq!(slices.len(), 4);
        // Releasing what was sent keeps the positions.
        o.release_sent(5);
        assert_eq!(o.lent.len(), 1);
        assert_eq!(stream(&o, 5), b"|BBBB>");
        assert_eq!(stream(&o, 7), b"BBB>");
        // Truncating drops a lease behind the cut.
        o.truncate(6);
        assert_eq!(o.len(), 6);
        assert!(!o.has_leases());
        assert_eq!(stream(&o, 5), b"|");
        o.clear();
        assert!(o.is_empty());
    }

    #[test]
    fn short_values_and_lend_min_0_copy() {
        let e = engine();
        let mut o = Out::new(5);
        append_value(&e, &mut o, b"a");
        let mut never = Out::new(0);
        append_value(&e, &mut never, b"b");
        assert!(!o.has_leases() && !never.has_leases());
        assert_eq!((&o[..], &never[..]), (&b"AAAA"[..], &b"BBBB"[..]));
    }
}
