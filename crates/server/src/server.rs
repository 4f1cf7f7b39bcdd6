//! State shared by every thread of one server: settings, the engine, the workers'
//! counters, connection bookkeeping, what admin commands tune, `stats detail`'s
//! counters and the shutdown switch.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use memcrab_store::Engine;
use parking_lot::Mutex;

use crate::counters::{Counters, Totals};
use crate::prefix::Prefixes;
use crate::settings::Settings;
use crate::tunables::Tunables;

/// The version memcrab reports: the memcached release whose protocol it implements,
/// then its own, so that clients that gate features on the version number work.
pub const VERSION: &str = concat!("1.6.18-memcrab-", env!("CARGO_PKG_VERSION"));

/// What `stats conns` shows of one socket.
#[derive(Debug)]
pub struct ConnInfo {
    pub fd: i32,
    /// `tcp:1.2.3.4:5678` or `unix:/path`, as memcached prints them.
    pub addr: String,
    /// The local address, for client connections.
    pub listen_addr: Option<String>,
    /// The clock second of the last command. Written by the owning worker, read by
    /// `stats conns` on any worker; Relaxed, as it is informational.
    pub last_cmd: AtomicU32,
}

pub struct Server {
    pub settings: Settings,
    pub engine: Arc<dyn Engine>,
    /// One per worker, written only by that worker (see `stats`).
    pub counters: Vec<Arc<Counters>>,
    /// Totals at the last `stats reset`; taken only by `stats` and `stats reset`.
    pub baseline: Mutex<Totals>,
    /// Client connections open now. Incremented by the acceptor, decremented by the
    /// worker that closes the connection; Relaxed, as it only gates `-c`.
    pub curr_connections: AtomicUsize,
    /// Cumulative accepted connections (Relaxed; a statistic).
    pub total_connections: AtomicU64,
    /// Connections refused by `-c` (Relaxed; a statistic).
    pub rejected_connections: AtomicU64,
    /// `verbosity` level (Relaxed; a setting).
    pub verbosity: AtomicU32,
    /// Every open socket by fd, for `stats conns`. Taken on connect, close and `stats
    /// conns` only, never per request.
    pub conns: Mutex<BTreeMap<i32, Arc<ConnInfo>>>,
    /// Set once to stop; read by every loop. Release/Acquire so that a thread that
    /// sees it also sees what was done before it was set.
    shutdown: AtomicBool,
    /// How to wake each event loop (acceptor first), set once at start.
    pub wakers: OnceLock<Vec<Arc<mio::Waker>>>,
    /// What admin commands set at run time (see its docs for its locks).
    pub tunables: Tunables,
    /// `stats detail` counters (see its docs for its lock).
    pub prefixes: Prefixes,
}

impl Server {
    pub fn new(settings: Settings, engine: Arc<dyn Engine>) -> Self {
        Server {
            counters: (0..settings.workers).map(|_| Arc::default()).collect(),
            verbosity: AtomicU32::new(settings.verbose),
            tunables: Tunables::new(&settings),
            prefixes: Prefixes::new(settings.stat_prefix),
            settings,
            engine,
            baseline: Mutex::default(),
            curr_connections: AtomicUsize::new(0),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            conns: Mutex::default(),
            shutdown: AtomicBool::new(false),
            wakers: OnceLock::new(),
        }
    }

    /// Every worker's counters summed, less the `stats reset` baseline.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for c in &self.counters {
            t.add(&c.snapshot());
        }
        t.since(&self.baseline.lock())
    }

    pub fn reset_stats(&self) {
        let mut t = Totals::default();
        for c in &self.counters {
            t.add(&c.snapshot());
        }
        *self.baseline.lock() = t;
        self.total_connections.store(0, Ordering::Relaxed);
        self.rejected_connections.store(0, Ordering::Relaxed);
        self.prefixes.clear();
        self.engine.reset_stats();
    }

    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Stops accepting, and asks every worker to flush and exit.
    pub fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        if let Some(wakers) = self.wakers.get() {
            for w in wakers {
                let _ = w.wake();
            }
        }
    }
}
