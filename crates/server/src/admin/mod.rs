//! What an operator reads and tunes at run time: `stats` and its counters, `watch`,
//! `stats detail`'s per-prefix counters, memcached's slab classes as reports name them,
//! and the settings admin commands change; the `/metrics` listener (metrics/), and
//! the request latency, hot key and slow log structures (latency.rs, hotkeys.rs,
//! slowlog.rs).

pub mod counters;
pub mod hotkeys;
pub mod latency;
pub mod metrics;
pub mod prefix;
pub mod slab;
pub mod slowlog;
pub mod stats;
pub mod tunables;
pub mod watch;
