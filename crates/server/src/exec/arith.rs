//! The arithmetic commands: text `incr`/`decr`, meta `ma`, binary INCREMENT and
//! DECREMENT and their quiet forms. [`arith`] makes the engine call and counts it
//! once, for every protocol (memcached's `do_add_delta` callers); the executors map
//! their options onto [`DeltaOpts`] and encode the [`Delta`].

use crate::server::Ctx;
use memcrab_store::{Delta, DeltaOpts, Met};

/// incr (`incr`) or decr of `key` by `delta`, counted as memcached counts it:
/// `incr_hits`/`decr_hits` when it changed a live item (an item that `ma N` or a
/// binary initial value created is no hit), `incr_misses`/`decr_misses` when there
/// was none; a non-numeric value, a CAS that differed or no memory counts nothing.
/// A dead item the lookup met counts `get_expired`/`get_flushed` (`do_add_delta`'s
/// `do_item_get`), also when `ma N` or a binary initial value then created the key.
#[inline]
pub fn arith(cx: &Ctx<'_>, key: &[u8], incr: bool, delta: u64, opts: &DeltaOpts) -> Delta {
    let Met { result: r, dead } = cx.engine.delta_met(key, incr, delta, opts);
    cx.counters.count_dead(dead);
    match &r {
        Delta::Value(v) if !v.created => cx.counters.count_delta(incr, true),
        Delta::NotFound => cx.counters.count_delta(incr, false),
        Delta::Value(_) | Delta::NonNumeric | Delta::Exists | Delta::OutOfMemory => {}
    }
    r
}
