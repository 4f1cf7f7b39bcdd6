//! State shared by every thread of one server: settings, the engine, the workers'
//! counters, connection bookkeeping, the authentication users, what admin commands
//! tune, `stats detail`'s counters, `watch`'s streams, TLS, the shutdown switch, and
//! what the request step measures ([`Observe`]); and [`Ctx`], one worker's view of
//! it, which every executor and transport is handed.
//!
//! Everything this file imports is a leaf (imports nothing of the server's), so
//! that the executors, which take a `Ctx`, stand one floor above it.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use memcrab_store::Engine;
use parking_lot::{Mutex, RwLock};

use crate::admin::clock::Ticks;
use crate::admin::counters::{Counters, Totals};
use crate::admin::hotkeys::HotKeys;
use crate::admin::latency::{Latencies, Snapshot};
use crate::admin::prefix::Prefixes;
use crate::admin::slab::Classes;
use crate::admin::slowlog::SlowLog;
use crate::admin::tunables::Tunables;
use crate::admin::watch::Hub;
use crate::startup::auth::{Format, Users};
use crate::startup::settings::Settings;
use crate::startup::tls::Tls;

/// The version `version` (text and binary) and `stats` report: the memcached release
/// whose protocol memcrab implements, as `X.Y.Z` and nothing after it, because
/// clients parse it (one widely used Node.js client takes the last `X.Y.Z` it finds)
/// and gate features on it. memcrab's own version is [`MEMCRAB_VERSION`].
pub const VERSION: &str = "1.6.45";

/// memcrab's own version: `-V`, `stats`'s `memcrab_version`, the start-up log line.
pub const MEMCRAB_VERSION: &str = env!("CARGO_PKG_VERSION");

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
    /// A TCP client's address (`watch connevents`' rip and rport); None for a unix
    /// socket client and for listeners.
    pub peer: Option<std::net::SocketAddr>,
    /// What a client connection waits for, one of [`ConnState`]'s values, for
    /// `stats conns` (which shows the asking connection as parsing). Written by the
    /// owning worker when it waits for input; read by `stats conns` on any worker;
    /// Relaxed, as it is informational.
    pub state: AtomicU8,
    /// `-l proto[...]:`: the protocol of the listener that accepted it, if it
    /// names one (the connection speaks it instead of `-B`'s).
    pub protocol: Option<crate::startup::settings::Protocol>,
}

/// A client connection's state in `stats conns`, named as memcached's
/// `state_text` names its connection states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ConnState {
    /// Accepted, nothing read yet.
    NewCmd = 0,
    /// Waiting to read a command (or the rest of one).
    Read = 1,
    /// A complete storage line (or binary header) waits for its value.
    Nread = 2,
    /// Discarding a refused value.
    Swallow = 3,
}

impl ConnState {
    pub fn name(v: u8) -> &'static str {
        match v {
            0 => "conn_new_cmd",
            1 => "conn_read",
            2 => "conn_nread",
            3 => "conn_swallow",
            _ => "conn_read",
        }
    }
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
    /// The users that `-Y` and `-S` authenticate against, replaced whole by SIGHUP
    /// (`startup::service::reload`). The lock protects only the pointer: readers (one
    /// per auth request, never per ordinary request) hold it just to clone the Arc,
    /// so a check runs against one file's users, old or new, never a mix, and a
    /// reload never waits for checks.
    users: RwLock<Option<Arc<Users>>>,
    /// Set once to stop; read by every loop. Release/Acquire so that a thread that
    /// sees it also sees what was done before it was set.
    shutdown: AtomicBool,
    /// Set (before `shutdown`) by SIGUSR1 and `shutdown graceful`: save the cache
    /// for a warm restart once everything stopped (`-e`). Release/Acquire with
    /// `shutdown`'s own ordering: whoever sees the stop sees this.
    graceful: AtomicBool,
    /// How to wake each event loop (acceptor first), set once at start.
    pub wakers: OnceLock<Vec<Arc<mio::Waker>>>,
    /// TLS (`-Z`): the configuration new TLS connections get, and its stats.
    pub tls: Option<Arc<Tls>>,
    /// What admin commands set at run time (see its docs for its locks).
    pub tunables: Tunables,
    /// `stats detail` counters (see its docs for its lock).
    pub prefixes: Prefixes,
    /// `watch`'s log streams (see its docs for its locks and atomics).
    pub watch: Arc<Hub>,
    /// Latency histograms, hot keys and the slow log (see its docs).
    pub observe: Observe,
}

impl Server {
    /// The server for `settings`, over `engine`, with the TLS state `-Z` built and
    /// the users `-Y` or `-S` named (as the command line's parse read them).
    pub fn new(
        settings: Settings,
        engine: Arc<dyn Engine>,
        tls: Option<Arc<Tls>>,
        users: Option<Arc<Users>>,
    ) -> Self {
        Server {
            users: RwLock::new(users),
            counters: (0..settings.workers).map(|_| Arc::default()).collect(),
            verbosity: AtomicU32::new(settings.verbose),
            tunables: Tunables::new(&settings),
            prefixes: Prefixes::new(settings.stat_prefix),
            watch: Arc::new(Hub::new(settings.watcher_buf_bytes)),
            observe: Observe::new(
                settings.workers,
                settings.latency,
                settings.hotkeys,
                settings.slowlog_us,
                settings.slowlog_len,
                settings.monotonic_clock,
            ),
            settings,
            engine,
            baseline: Mutex::default(),
            curr_connections: AtomicUsize::new(0),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            conns: Mutex::default(),
            shutdown: AtomicBool::new(false),
            graceful: AtomicBool::new(false),
            wakers: OnceLock::new(),
            tls,
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

    /// The users to authenticate against now (None: no `-Y`/`-S`).
    pub fn users(&self) -> Option<Arc<Users>> {
        self.users.read().clone()
    }

    /// Reads the `-Y` (or `MEMCACHED_SASL_PWDB`) file again and, if it parses,
    /// makes its users the ones checked from now on; on an error the users stay
    /// as they were (as memcached's authfile_load) and the error is returned.
    pub fn load_users(&self) -> Result<(), String> {
        let Some(path) = &self.settings.users_file else {
            return Ok(());
        };
        let (format, flag) = if self.settings.sasl {
            (Format::SaslPwdb, "-S: MEMCACHED_SASL_PWDB")
        } else {
            (Format::AuthFile, "-Y")
        };
        let users = Users::load(path, format).map_err(|e| format!("{flag}: {e}"))?;
        *self.users.write() = Some(Arc::new(users));
        Ok(())
    }

    /// The waker of worker `id`'s event loop (None before the workers started).
    pub fn worker_waker(&self, id: usize) -> Option<Arc<mio::Waker>> {
        self.wakers.get()?.get(id + 1).cloned()
    }

    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// memcached's graceful stop (SIGUSR1, `shutdown graceful`): as
    /// [`Server::begin_shutdown`], and the cache is saved for a warm restart (`-e`).
    pub fn begin_graceful_shutdown(&self) {
        self.graceful.store(true, Ordering::Release);
        self.begin_shutdown();
    }

    /// Whether the stop under way is graceful.
    pub fn is_graceful(&self) -> bool {
        self.graceful.load(Ordering::Acquire)
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

/// One worker's recorders, with a copy of what is on, so that a request reads its
/// worker's cache lines only.
pub struct WorkerObs {
    pub latencies: Latencies,
    pub hotkeys: HotKeys,
    /// Requests are timed: latency histograms on, or a slow log threshold set.
    pub timed: bool,
    /// [`Observe::latency`].
    pub latency: bool,
    /// [`Observe::hotkeys`].
    pub sample: bool,
    /// A slow log threshold is set (`-o slowlog_us` above 0): each request is timed
    /// on its own and compared with it.
    pub slowlog_on: bool,
    /// Histograms on and no slow log: pipelined requests share their batch's time
    /// (`exec/probe.rs`, `Batch`).
    pub batched: bool,
    /// [`Observe::ticks`].
    pub ticks: Ticks,
}

/// What the request step measures for operators, held together, and whether each
/// is on (`-o latency`, `-o hotkeys`, `-o slowlog_us`). The request step records
/// through `exec/probe.rs`; `stats latency|hotkeys|slowlog` (`admin/stats.rs`),
/// `/metrics` and `watch slowlog` read it.
///
/// ```text
///   Observe ── ticks: Ticks (admin/clock.rs: the CPU's time-stamp counter, ns per
///           │         tick calibrated once at start-up against the monotonic clock)
///           ├─ workers[w]: Latencies (admin/latency.rs) + HotKeys (admin/hotkeys.rs)
///           │              written only by worker w
///           └─ slowlog: SlowLog (admin/slowlog.rs), any worker, under its lock
/// ```
pub struct Observe {
    /// Anything is measured: `timed || hotkeys` (the request step's one check).
    pub any: bool,
    /// Histograms recorded (`-o latency=on`, the default).
    pub latency: bool,
    /// Hot keys sampled (`-o hotkeys=on`, the default).
    pub hotkeys: bool,
    pub ticks: Ticks,
    pub workers: Vec<WorkerObs>,
    pub slowlog: SlowLog,
}

impl Observe {
    pub fn new(
        workers: usize,
        latency: bool,
        hotkeys: bool,
        slowlog_us: u64,
        slowlog_len: usize,
        monotonic_clock: bool,
    ) -> Self {
        let timed = latency || slowlog_us > 0;
        let ticks = match (timed, monotonic_clock) {
            (false, _) => Ticks::off(),
            (true, false) => Ticks::calibrate(),
            (true, true) => Ticks::monotonic(),
        };
        Observe {
            any: timed || hotkeys,
            latency,
            hotkeys,
            ticks,
            workers: (0..workers)
                .map(|w| WorkerObs {
                    latencies: Latencies::new(ticks),
                    hotkeys: HotKeys::new(w as u64 + 1),
                    timed,
                    latency,
                    sample: hotkeys,
                    slowlog_on: slowlog_us > 0,
                    batched: latency && slowlog_us == 0,
                    ticks,
                })
                .collect(),
            slowlog: SlowLog::new(slowlog_us, slowlog_len),
        }
    }

    /// Every worker's histograms merged, in `latency::series` order.
    pub fn latencies(&self) -> Vec<Snapshot> {
        Latencies::merged(self.workers.iter().map(|w| &w.latencies))
    }

    /// Every worker's hot-key sketches.
    pub fn hotkeys(&self) -> impl Iterator<Item = &HotKeys> + Clone {
        self.workers.iter().map(|w| &w.hotkeys)
    }
}

/// What a worker needs to execute requests (one per worker thread).
pub struct Ctx<'a> {
    pub server: &'a Server,
    pub engine: &'a dyn Engine,
    /// The executing worker's own counters.
    pub counters: &'a Counters,
    /// The executing worker's number (its event loop is what a new watcher wakes).
    pub worker: usize,
    /// The socket whose requests are being served (`watch`'s `cfd`): each transport
    /// sets it before it serves a connection or a UDP socket.
    pub fd: Cell<i32>,
    /// The executing worker's latency histograms and hot-key sketches; `None` when
    /// nothing is measured (`-o latency=off,hotkeys=off` and no slow log), so that
    /// the request step's one check is this field.
    pub obs: Option<&'a WorkerObs>,
    /// The latency series (`admin/latency.rs`'s index) of the request being
    /// executed: its executor sets it where it counts the request (a read's hit or
    /// miss included), and the request step reads it when the reply is queued
    /// (`exec/probe.rs`). Only this worker's thread touches it.
    pub series: Cell<u8>,
    /// Keyed requests until the next hot-key sample: each one's executor counts it
    /// down (`exec/probe.rs`, `hot`), and the one that brings it to 0 is sampled
    /// (with hot keys off it only re-arms, every 2^32 requests). Kept here rather
    /// than in the worker's `HotKeys`, so that a request pays one decrement for it.
    /// Only this worker's thread touches it.
    pub hot_left: Cell<u32>,
    /// Why the request being executed ends off the common path (`exec/probe.rs`,
    /// `done`), 0 when it does not: [`Ctx::RARE_SAMPLED`] (hot keys sample it: its
    /// executor kept its key(s), to count when the reply is queued) or
    /// [`Ctx::RARE_WORKER`] (set for good: this worker's histograms are off, or the
    /// slow log times each request, or its clock is not the time-stamp counter,
    /// which the common path reads without asking). One byte, so that the common
    /// path checks one thing. Only this worker's thread touches it.
    pub rare: Cell<u8>,
    /// How a batch's start reads the request clock (`exec/probe.rs`,
    /// `Batch::begin`): [`Ctx::CLOCK_TSC`] the time-stamp counter,
    /// [`Ctx::CLOCK_MONOTONIC`] the monotonic clock, 0 when nothing is timed. A
    /// sign, so that one comparison tells the three apart.
    pub clock: i8,
}

impl Ctx<'_> {
    /// [`Ctx::rare`]: a hot-key sample is in flight.
    pub const RARE_SAMPLED: u8 = 1;
    /// [`Ctx::rare`]: the worker's requests never take the common path.
    pub const RARE_WORKER: u8 = 2;
    /// [`Ctx::clock`]: requests are timed on the time-stamp counter.
    pub const CLOCK_TSC: i8 = -1;
    /// [`Ctx::clock`]: requests are timed on the monotonic clock.
    pub const CLOCK_MONOTONIC: i8 = 1;

    /// memcached's slab classes under these settings, for the `clsid` of log lines.
    pub(crate) fn classes(&self) -> Classes {
        let s = &self.server.settings;
        Classes {
            chunk_size: s.chunk_size,
            growth_factor: s.growth_factor,
            use_cas: s.use_cas,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_means_untimed() {
        let o = Observe::new(2, false, false, 0, 4, false);
        assert!(!o.workers[0].timed && o.workers.len() == 2);
        assert!(
            Observe::new(1, false, true, 5, 4, false).workers[0].timed,
            "the slow log times"
        );
    }
}
