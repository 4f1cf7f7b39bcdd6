//! `watch`: memcached's live log streams. A connection that sends `watch fetchers`
//! (or `mutations`, `evictions`, `connevents`, `deletions`) gets `OK` and then one
//! line per event of those types, from every worker, in memcached's format
//! (`memcrab_proto::text::watch`), until it closes.
//!
//! ```text
//!   an event site, any worker              Hub                the watcher's worker
//!   hub.wants(FETCHERS)  ── one Relaxed load of `mask`; false: nothing else happens
//!     │ true (cold path)
//!     ▼
//!   hub.emit ── format the line once ──► Sink::push (each watcher of that type)
//!                                         │ pending ≤ -o watcher_logbuf_size, else
//!                                         │ skipped += 1; `skipped=N` before the next
//!                                         └─ first line since the last drain: wake ─► conn.drive:
//!                                              Watcher::drain_into(output) ─► socket
//! ```
//!
//! Memory is bounded whatever the event rate: each watcher has at most its pending
//! bytes here (256 KiB by default, memcached's `LOGGER_WATCHER_BUF_SIZE`) and its
//! connection's unsent output, which takes more only while it is small. A watcher
//! that never reads falls behind: its lines are dropped and counted, and it is told
//! how many (`skipped=`) once it catches up, as memcached's logger does. Events never
//! wait for a watcher; the only cost to the event's worker while somebody watches is
//! formatting the line and copying it under the watcher's lock.
//!
//! At most [`WATCHER_LIMIT`] watchers at once, as memcached. Imports nothing else of
//! the server's; the engine's evictions reach the hub through `admin/evictions.rs`.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use memcrab_proto::text::watch::{self as line, CloseReason, Transport};
use parking_lot::{Mutex, RwLock};

/// memcached's `WATCHER_LIMIT`.
pub const WATCHER_LIMIT: usize = 20;
/// Room a line needs beyond its own bytes to be taken (memcached requests the line's
/// length plus 128, the room for a `skipped=` line).
const SKIP_LINE_ROOM: usize = 128;

/// The log streams of one server: who watches what, and the lines on their way.
pub struct Hub {
    /// The event types somebody watches: every watcher's types or'ed. The one thing an
    /// event site reads when nobody watches. Written under `sinks`' write lock; read
    /// with Relaxed loads: an event that races a new watcher may be missed, as in
    /// memcached, and nothing else is published through it.
    mask: AtomicU32,
    /// The watchers. Written when a watcher starts or closes; read by every event of a
    /// watched type (never by an unwatched one).
    sinks: RwLock<Vec<Arc<Sink>>>,
    /// memcached's logger gid: one per event, and one per new watcher. Relaxed: only
    /// distinct, increasing numbers are needed.
    gid: AtomicU64,
    /// How many bytes of lines each watcher may have waiting.
    buf_bytes: usize,
    /// `stats`' log_worker_written, log_watcher_sent, log_watcher_skipped: events
    /// formatted, lines queued for watchers, lines dropped. Relaxed statistics.
    written: AtomicU64,
    sent: AtomicU64,
    skipped: AtomicU64,
}

/// One watcher's queue.
pub struct Sink {
    events: u16,
    /// Wakes the watcher's worker to drain this sink.
    waker: Arc<mio::Waker>,
    /// Lines not yet taken by the watcher's connection. Taken by event sites (any
    /// worker) to append a line, and by the watcher's worker to drain them; held only
    /// for a copy.
    pending: Mutex<Pending>,
}

struct Pending {
    bytes: Vec<u8>,
    /// Lines dropped since the last one queued.
    skipped: u64,
    /// The worker was woken and has not drained since: no need to wake it again.
    woken: bool,
}

/// `stats`' view of the hub.
pub struct HubStats {
    pub written: u64,
    pub sent: u64,
    pub skipped: u64,
    pub watchers: usize,
}

/// A connection's registration as a watcher; dropping it stops the stream.
pub struct Watcher {
    hub: Arc<Hub>,
    sink: Arc<Sink>,
}

thread_local! {
    /// The line being formatted, reused across events on this thread.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl Hub {
    pub fn new(buf_bytes: usize) -> Self {
        Hub {
            mask: AtomicU32::new(0),
            sinks: RwLock::new(Vec::new()),
            gid: AtomicU64::new(0),
            buf_bytes,
            written: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// Whether somebody watches any of `events` (the `LOG_*` bits): what every event
    /// site asks before doing anything else.
    #[inline]
    pub fn wants(&self, events: u16) -> bool {
        self.mask.load(Ordering::Relaxed) & u32::from(events) != 0
    }

    /// Starts a stream of `events` for a connection whose worker `waker` wakes;
    /// `None` when [`WATCHER_LIMIT`] watchers exist. The stream starts with `OK`.
    pub fn watch(self: &Arc<Self>, events: u16, waker: Arc<mio::Waker>) -> Option<Watcher> {
        let mut sinks = self.sinks.write();
        if sinks.len() >= WATCHER_LIMIT {
            return None;
        }
        // memcached's watcher takes a gid (its `min_gid`), so the first line it sees
        // is never gid 1.
        self.gid.fetch_add(1, Ordering::Relaxed);
        let sink = Arc::new(Sink {
            events,
            waker,
            pending: Mutex::new(Pending {
                bytes: line::OK.to_vec(),
                skipped: 0,
                woken: false,
            }),
        });
        sinks.push(Arc::clone(&sink));
        self.set_mask(&sinks);
        Some(Watcher {
            hub: Arc::clone(self),
            sink,
        })
    }

    fn set_mask(&self, sinks: &[Arc<Sink>]) {
        let mask = sinks.iter().fold(0, |m, s| m | u32::from(s.events));
        self.mask.store(mask, Ordering::Relaxed);
    }

    fn remove(&self, sink: &Arc<Sink>) {
        let mut sinks = self.sinks.write();
        sinks.retain(|s| !Arc::ptr_eq(s, sink));
        self.set_mask(&sinks);
    }

    pub fn stats(&self) -> HubStats {
        HubStats {
            written: self.written.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            watchers: self.sinks.read().len(),
        }
    }

    /// Sends one event to every watcher of `event`: the `ts=… gid=… ` prefix, then
    /// what `write` appends (one of `memcrab_proto::text::watch`'s lines). Call only
    /// when [`Hub::wants`] said yes.
    #[cold]
    #[inline(never)]
    pub fn emit(&self, event: u16, write: &mut dyn FnMut(&mut Vec<u8>)) {
        let sinks = self.sinks.read();
        if !sinks.iter().any(|s| s.events & event != 0) {
            return;
        }
        let gid = self.gid.fetch_add(1, Ordering::Relaxed) + 1;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.written.fetch_add(1, Ordering::Relaxed);
        let mut send = |buf: &mut Vec<u8>| {
            buf.clear();
            line::prefix(buf, now.as_secs(), now.subsec_micros(), gid);
            write(buf);
            for s in sinks.iter().filter(|s| s.events & event != 0) {
                s.push(buf, self);
            }
        };
        LINE.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => send(&mut buf),
            // Only if an event were reported while one is being formatted.
            Err(_) => send(&mut Vec::new()),
        });
    }

    /// `type=conn_new` for a connection a worker just took on.
    #[inline]
    pub fn conn_new(&self, peer: Option<SocketAddr>, transport: Transport, fd: i32) {
        if self.wants(line::CONNEVENTS) {
            self.emit(line::CONNEVENTS, &mut |out| {
                line::conn_new(out, peer, transport, fd)
            });
        }
    }

    /// `type=conntlserr fd=<fd> msg=<msg>`: a connection's TLS failed (memcached
    /// 1.6.30's `LOGGER_CONNECTION_TLSERROR`, which its `ssl_read`/`ssl_write` log;
    /// `msg` is OpenSSL's error text, or the socket error's).
    #[cold]
    pub fn conn_tls_error(&self, fd: i32, msg: &str) {
        if self.wants(line::CONNEVENTS) {
            self.emit(line::CONNEVENTS, &mut |out| {
                out.extend_from_slice(b"type=conntlserr fd=");
                out.extend_from_slice(itoa::Buffer::new().format(fd).as_bytes());
                out.extend_from_slice(b" msg=");
                out.extend_from_slice(msg.as_bytes());
                out.push(b'\n');
            });
        }
    }

    /// `type=conn_close` for a connection being closed.
    #[inline]
    pub fn conn_close(
        &self,
        peer: Option<SocketAddr>,
        transport: Transport,
        reason: CloseReason,
        fd: i32,
    ) {
        if self.wants(line::CONNEVENTS) {
            self.emit(line::CONNEVENTS, &mut |out| {
                line::conn_close(out, peer, transport, reason, fd)
            });
        }
    }
}

impl Sink {
    /// Queues one line, or counts it skipped when the watcher is behind; wakes the
    /// watcher's worker if this is the first line since it last drained.
    fn push(&self, text: &[u8], hub: &Hub) {
        let wake = {
            let mut p = self.pending.lock();
            if p.bytes.len() + text.len() + SKIP_LINE_ROOM > hub.buf_bytes {
                p.skipped += 1;
                hub.skipped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if p.skipped > 0 {
                let n = std::mem::take(&mut p.skipped);
                line::skipped(&mut p.bytes, n);
            }
            p.bytes.extend_from_slice(text);
            !std::mem::replace(&mut p.woken, true)
        };
        hub.sent.fetch_add(1, Ordering::Relaxed);
        if wake {
            // A failed wake (the poll is gone) means the worker is stopping.
            let _ = self.waker.wake();
        }
    }
}

impl Watcher {
    /// Moves the waiting lines to `out`; returns whether there were any. After this,
    /// the next line queued wakes the worker again.
    pub fn drain_into(&self, out: &mut Vec<u8>) -> bool {
        let mut p = self.sink.pending.lock();
        p.woken = false;
        if p.bytes.is_empty() {
            return false;
        }
        out.extend_from_slice(&p.bytes);
        p.bytes.clear();
        true
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.hub.remove(&self.sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waker() -> (mio::Poll, Arc<mio::Waker>) {
        let poll = mio::Poll::new().expect("poll");
        let waker = Arc::new(mio::Waker::new(poll.registry(), mio::Token(0)).expect("waker"));
        (poll, waker)
    }

    fn text(w: &Watcher) -> String {
        let mut out = Vec::new();
        w.drain_into(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn lines_reach_their_watchers_only() {
        let hub = Arc::new(Hub::new(4096));
        let (_poll, wk) = waker();
        assert!(!hub.wants(line::FETCHERS));
        let f = hub.watch(line::FETCHERS, Arc::clone(&wk)).expect("watch");
        let m = hub.watch(line::MUTATIONS, Arc::clone(&wk)).expect("watch");
        assert!(hub.wants(line::FETCHERS) && hub.wants(line::MUTATIONS));
        assert!(!hub.wants(line::EVICTIONS));
        hub.emit(line::FETCHERS, &mut |o| o.extend_from_slice(b"x\n"));
        let ft = text(&f);
        assert!(ft.starts_with("OK\r\nts="), "{ft}");
        assert!(ft.ends_with(" gid=3 x\n"), "{ft}");
        assert_eq!(text(&m), "OK\r\n");
        drop(f);
        assert!(!hub.wants(line::FETCHERS) && hub.wants(line::MUTATIONS));
        assert_eq!(hub.stats().watchers, 1);
    }

    #[test]
    fn a_watcher_behind_is_told_what_it_missed() {
        let hub = Arc::new(Hub::new(1024));
        let (_poll, wk) = waker();
        let w = hub.watch(line::FETCHERS, wk).expect("watch");
        let mut n = 0;
        while hub.stats().skipped < 5 {
            hub.emit(line::FETCHERS, &mut |o| {
                o.extend_from_slice(b"some event\n")
            });
            n += 1;
        }
        let t = text(&w);
        assert!(t.len() <= 1024, "{t}");
        assert!(!t.contains("skipped"), "{t}");
        hub.emit(line::FETCHERS, &mut |o| o.extend_from_slice(b"last\n"));
        let t = text(&w);
        assert!(t.starts_with("skipped=5\nts="), "{t}");
        assert!(t.ends_with(" last\n"), "{t}");
        let s = hub.stats();
        assert_eq!((s.sent + s.skipped, s.written), (n + 1, n + 1));
    }

    #[test]
    fn at_most_twenty_watchers() {
        let hub = Arc::new(Hub::new(1024));
        let (_poll, wk) = waker();
        let all: Vec<Watcher> = (0..WATCHER_LIMIT)
            .map(|_| hub.watch(line::FETCHERS, Arc::clone(&wk)).expect("watch"))
            .collect();
        assert!(hub.watch(line::FETCHERS, Arc::clone(&wk)).is_none());
        drop(all);
        assert!(hub.watch(line::FETCHERS, wk).is_some());
    }
}
