//! What an operator reads and tunes at run time: `stats` and its counters, `watch`,
//! `stats detail`'s per-prefix counters, memcached's slab classes as reports name them,
//! and the settings admin commands change.

pub mod counters;
pub mod prefix;
pub mod slab;
pub mod stats;
pub mod tunables;
pub mod watch;
