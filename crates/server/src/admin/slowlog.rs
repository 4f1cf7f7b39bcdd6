//! The slow log: the last requests slower than a threshold (`-o slowlog_us=N`), in a
//! bounded ring, read with a text command and streamed by `watch`.
//!
//! ```text
//!   request step ── is_slow(us)? (one relaxed load) ── no ──► done
//!                        │ yes (rare)
//!                        ▼
//!   SlowLog { ring: Mutex<VecDeque<Entry>> (at most `capacity`, oldest dropped) }
//!                        │ entries() / clear() on the reader's thread
//! ```
//!
//! Goals: a request under the threshold pays one relaxed load and a compare; a slow
//! one pays a short lock and one small allocation for its key. Non-goals: a
//! complete record (a ring forgets the oldest; `logged` counts every entry ever).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Key bytes kept per entry (memcached's longest key).
const KEY_KEEP: usize = memcrab_limits::KEY_MAX_LEN;

/// One slow request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its number: 1 for the first entry ever logged, counting on across clears.
    pub id: u64,
    /// When it finished, in Unix seconds.
    pub unix_secs: u64,
    /// The request's latency series (`text_get_hit`, `meta_set`, `binary_other`,
    /// ...: `stats latency`'s names).
    pub command: &'static str,
    /// The first key, at most 250 bytes (raw; [`Entry::key_uri`] prints it).
    pub key: Vec<u8>,
    pub micros: u64,
    /// The client as `stats conns` names it (`tcp:127.0.0.1:5000`, `unix:/path`,
    /// `udp:...`), or `-` when unknown.
    pub client: String,
}

impl Entry {
    /// The key URI-encoded as `watch` prints keys.
    pub fn key_uri(&self) -> String {
        memcrab_proto::text::reply::uriencoded(&self.key)
    }
}

/// A threshold in nanoseconds: `u64::MAX` (nothing is that slow) for 0, off.
fn ns_of(us: u64) -> u64 {
    match us {
        0 => u64::MAX,
        us => us.saturating_mul(1000),
    }
}

/// The ring and its threshold.
pub struct SlowLog {
    /// Microseconds at or above which a request is slow; 0 = off. Written by the
    /// command that changes it and read by every worker: Relaxed, a request that
    /// sees the old value for a moment is logged (or not) by the old rule.
    threshold_us: AtomicU64,
    /// The same in nanoseconds, `u64::MAX` when off (what the request step compares;
    /// written and read as `threshold_us`).
    threshold_ns: AtomicU64,
    /// Entries ever logged (the next id is this plus one). Changed only under `ring`'s
    /// lock; read with Relaxed for `stats`.
    logged: AtomicU64,
    capacity: usize,
    /// The newest `capacity` entries, oldest first. Taken by a worker logging a slow
    /// request and by a reader copying the entries out; no other lock is taken
    /// while it is held.
    ring: Mutex<VecDeque<Entry>>,
}

impl SlowLog {
    pub fn new(threshold_us: u64, capacity: usize) -> Self {
        SlowLog {
            threshold_us: AtomicU64::new(threshold_us),
            threshold_ns: AtomicU64::new(ns_of(threshold_us)),
            logged: AtomicU64::new(0),
            capacity: capacity.max(1),
            ring: Mutex::new(VecDeque::new()),
        }
    }

    pub fn threshold_us(&self) -> u64 {
        self.threshold_us.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub fn set_threshold_us(&self, us: u64) {
        self.threshold_us.store(us, Ordering::Relaxed);
        self.threshold_ns.store(ns_of(us), Ordering::Relaxed);
    }

    /// Whether a request of `micros` belongs in the log.
    #[cfg(test)]
    pub fn is_slow(&self, micros: u64) -> bool {
        let t = self.threshold_us.load(Ordering::Relaxed);
        t > 0 && micros >= t
    }

    /// Whether a request of `ns` nanoseconds belongs in the log: one load and a
    /// compare (the threshold is kept in nanoseconds too, `u64::MAX` when off).
    #[inline]
    pub fn is_slow_ns(&self, ns: u64) -> bool {
        ns >= self.threshold_ns.load(Ordering::Relaxed)
    }

    /// Logs a slow request (the caller checked [`SlowLog::is_slow`]); returns its id.
    pub fn push(
        &self,
        unix_secs: u64,
        command: &'static str,
        key: &[u8],
        micros: u64,
        client: String,
    ) -> u64 {
        let key = key[..key.len().min(KEY_KEEP)].to_vec();
        let mut ring = self.ring.lock();
        let id = self.logged.load(Ordering::Relaxed) + 1;
        self.logged.store(id, Ordering::Relaxed);
        if ring.len() == self.capacity {
            ring.pop_front();
        }
        ring.push_back(Entry {
            id,
            unix_secs,
            command,
            key,
            micros,
            client,
        });
        id
    }

    /// The entries held, oldest first.
    pub fn entries(&self) -> Vec<Entry> {
        self.ring.lock().iter().cloned().collect()
    }

    /// Entries ever logged, including those the ring has dropped or a clear removed.
    pub fn logged(&self) -> u64 {
        self.logged.load(Ordering::Relaxed)
    }

    pub fn clear(&self) {
        self.ring.lock().clear();
    }
}

/// The slow log as `STAT` lines, oldest first: `<id>:time`, `:command`, `:key`
/// (URI-encoded), `:us`, `:client`.
pub fn render_stats(entries: &[Entry], out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::stat;
    for e in entries {
        let id = e.id;
        stat(out, &format!("{id}:time"), e.unix_secs);
        stat(out, &format!("{id}:command"), e.command);
        stat(out, &format!("{id}:key"), e.key_uri());
        stat(out, &format!("{id}:us"), e.micros);
        stat(out, &format!("{id}:client"), &e.client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_zero_is_off() {
        let log = SlowLog::new(0, 4);
        assert!(!log.is_slow(u64::MAX));
        log.set_threshold_us(1000);
        assert!(!log.is_slow(999));
        assert!(log.is_slow(1000));
        assert!(!log.is_slow_ns(999_999) && log.is_slow_ns(1_000_000));
        assert!(!SlowLog::new(0, 1).is_slow_ns(u64::MAX - 1));
    }

    #[test]
    fn the_ring_keeps_the_newest_entries() {
        let log = SlowLog::new(10, 3);
        let peer = "tcp:127.0.0.1:5000".to_string();
        for i in 0..5u64 {
            let id = log.push(
                1_700_000_000 + i,
                "get",
                format!("k {i}").as_bytes(),
                10 + i,
                peer.clone(),
            );
            assert_eq!(id, i + 1);
        }
        let e = log.entries();
        assert_eq!(e.iter().map(|e| e.id).collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!(e[0].key_uri(), "k%202");
        assert_eq!(
            (e[2].micros, e[2].client.as_str(), e[2].command),
            (14, peer.as_str(), "get")
        );
        assert_eq!(log.logged(), 5);
        log.clear();
        assert!(log.entries().is_empty());
        assert_eq!(
            log.push(0, "set", b"x", 10, "-".into()),
            6,
            "ids go on after a clear"
        );
    }

    #[test]
    fn long_keys_are_cut_to_the_protocol_limit() {
        let log = SlowLog::new(1, 1);
        log.push(0, "mg", &[b'a'; 1000], 5, "-".into());
        assert_eq!(log.entries()[0].key.len(), 250);
    }

    #[test]
    fn stats_lines() {
        let log = SlowLog::new(1, 2);
        log.push(1_700_000_000, "get", b"k/1", 2500, "tcp:127.0.0.1:9".into());
        log.push(1_700_000_001, "set", b"k", 1500, "unix:/tmp/m".into());
        let mut out = Vec::new();
        render_stats(&log.entries(), &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "STAT 1:time 1700000000\r\nSTAT 1:command get\r\nSTAT 1:key k%2F1\r\n\
             STAT 1:us 2500\r\nSTAT 1:client tcp:127.0.0.1:9\r\n\
             STAT 2:time 1700000001\r\nSTAT 2:command set\r\nSTAT 2:key k\r\n\
             STAT 2:us 1500\r\nSTAT 2:client unix:/tmp/m\r\n"
        );
    }
}
