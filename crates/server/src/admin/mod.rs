//! What an operator reads and tunes at run time: `stats` and its counters, `watch`,
//! `stats detail`'s per-prefix counters, memcached's slab classes as reports name them,
//! and the settings admin commands change. The executors (`crate::exec`) count into
//! these and answer the admin commands from them.
//!
//! ```text
//!   admin/stats.rs      the `stats` writer (memcached's process_stat and its groups)
//!         │ reads
//!         ├── counters.rs   per-worker request counters (get_hits, cmd_set, ...)
//!         ├── prefix.rs     `stats detail`: per key prefix counters
//!         ├── slab.rs       memcached's slab classes (`cls`, `clsid`, `stats slabs`)
//!         └── tunables.rs   what lru_crawler, slabs and lru change at run time
//!   admin/watch.rs      `watch`'s hub and log streams (fetchers, mutations,
//!                       evictions, connevents, deletions)
//!   admin/evictions.rs  the engine's eviction listener: `watch evictions`' lines
//!   admin/metrics/      the `/metrics` listener (-o metrics_listen): its own thread,
//!                       memcached_exporter's series rendered from `stats`
//!   the request step's measurements, held together by server.rs's Observe and
//!   read by `stats latency|hotkeys|slowlog` (admin/stats.rs):
//!   admin/clock.rs      the request clock (the CPU's time-stamp counter)
//!   admin/latency.rs    per-worker request latency histograms
//!   admin/hotkeys.rs    sampled top-K keys by reads, writes and bytes
//!   admin/slowlog.rs    the bounded ring of slow requests
//! ```

pub mod clock;
pub mod counters;
pub mod evictions;
pub mod hotkeys;
pub mod latency;
pub mod metrics;
pub mod prefix;
pub mod slab;
pub mod slowlog;
pub mod stats;
pub mod tunables;
pub mod watch;
