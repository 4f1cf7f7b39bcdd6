//! `watch evictions`: the engine's eviction listener, which writes memcached's
//! `type=eviction` lines into `watch`'s hub (`admin/watch.rs`), each with the slab
//! class memcached would have evicted the item from (`admin/slab.rs`).

use std::sync::Arc;

use memcrab_proto::text::watch as line;
use memcrab_store::{Clock, Evicted, EvictionListener};

use crate::admin::slab::Classes;
use crate::admin::watch::Hub;

/// The engine's eviction listener: `type=eviction` lines for `watch evictions`.
pub struct EvictionReport {
    pub hub: Arc<Hub>,
    pub clock: Arc<Clock>,
    pub classes: Classes,
}

impl EvictionListener for EvictionReport {
    fn evicted(&self, it: &Evicted<'_>) {
        if !self.hub.wants(line::EVICTIONS) {
            return;
        }
        let now = self.clock.now();
        // memcached: `exptime - current_time` in unsigned arithmetic, widened, or -1
        // for no expiry; `current_time - it->time` printed with %d.
        let ttl = if it.exptime == 0 {
            -1
        } else {
            i64::from(it.exptime.wrapping_sub(now))
        };
        let la = now.wrapping_sub(it.atime) as i32;
        let clsid = self.classes.of(it.key.len(), it.flags, it.value_len);
        self.hub.emit(line::EVICTIONS, &mut |out| {
            line::eviction(out, it.key, it.fetched, ttl, la, clsid, it.value_len)
        });
    }
}
