//! Executors: where a parsed request meets the store. Each request becomes engine
//! calls, counter updates and reply bytes, with memcached's replies.
//!
//! ```text
//!   exec/mod.rs   Ctx, Flow, Resume, and the one place that counts fetches and stores
//!      ▲    ▲    ▲    ▲
//!      │    │    │    └── admin.rs   lru_crawler (crawls, key dumps), slabs, lru
//!      │    │    └─────── binary.rs  binary packets (proto_bin.c), SASL
//!      │    └──────────── meta.rs    mg ms md ma mn me (proto_text.c's process_m*)
//!      └───────────────── text.rs    classic text commands; hands meta to meta.rs and
//!                                    admin commands to admin.rs
//! ```
//!
//! Executors know nothing of connections: they read a request and append to an
//! output buffer. The request step (`crate::request`) feeds them, and the transports
//! (`conn.rs`, `udp.rs`) feed the request step.

pub mod admin;
pub mod binary;
pub mod meta;
pub mod text;

use memcrab_store::{Engine, Fetch, StoreResult, WalkCursor};

use crate::counters::Counters;
use crate::server::Server;

/// What a worker needs to execute requests.
pub struct Ctx<'a> {
    pub server: &'a Server,
    pub engine: &'a dyn Engine,
    /// The executing worker's own counters.
    pub counters: &'a Counters,
}

/// What the connection does after a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Consume the request and go on.
    Next,
    /// Consume the request line, then discard this many more bytes (a data block that
    /// was refused before it arrived).
    Swallow(usize),
    /// Send what is pending, then close (`quit`).
    Quit,
    /// Nothing after this request can be served (a line too long to wait for, a
    /// binary packet that can never be valid): send what is pending, this request's
    /// error reply included, then close. The rest of the input is dropped.
    Hangup,
    /// Close now, without sending anything more (`shutdown`, a bad binary magic).
    Close,
    /// A multi-get or a key dump paused (the output buffer is full, or a dump did its
    /// share of the walk for this turn); run the same request again later. The
    /// request step keeps how far it got ([`Resume`]).
    Suspend,
}

/// How far a suspended request got ([`Flow::Suspend`]), kept by the request step
/// until the same request runs again; back to the default when it completes.
#[derive(Debug, Default)]
pub struct Resume {
    /// Keys of a multi-get already answered.
    pub keys: usize,
    /// Where a key dump's walk of the store stands (`lru_crawler metadump`/`mgdump`).
    pub walk: Option<WalkCursor>,
}

/// Counts one lookup, for every protocol alike, as memcached does: `get_expired` or
/// `get_flushed` when the key held a dead item (`do_item_get`, whatever the command),
/// then the command's own counters. A lookup that touches (`gat`, binary GAT and
/// TOUCH, an `mg` with `T` that hit) counts `cmd_touch` and
/// `touch_hits`/`touch_misses`; any other counts `cmd_get` and
/// `get_hits`/`get_misses`.
#[inline]
pub fn count_fetch(c: &Counters, touch: bool, found: Fetch) {
    match found {
        Fetch::Expired => c.get_expired.incr(),
        Fetch::Flushed => c.get_flushed.incr(),
        Fetch::Hit | Fetch::Miss => {}
    }
    match (touch, found.is_hit()) {
        (true, true) => {
            c.cmd_touch.incr();
            c.touch_hits.incr();
        }
        (true, false) => {
            c.cmd_touch.incr();
            c.touch_misses.incr();
        }
        (false, true) => {
            c.cmd_get.incr();
            c.get_hits.incr();
        }
        (false, false) => {
            c.cmd_get.incr();
            c.get_misses.incr();
        }
    }
}

/// Counts one storage request, for every protocol alike, as memcached's
/// `process_update_command` and `do_store_item` do: `cmd_set` always; for a CAS
/// command (`cas`, a binary store with a CAS, `ms` set/replace with `C`) `cas_hits` when
/// it stored and `cas_badval` when the CAS differed; `cas_misses` when a CAS found no
/// item; `store_no_memory` when there was no memory. (An append with a CAS that
/// differs answers EXISTS without counting `cas_badval`, as in memcached.)
#[inline]
pub fn count_store(c: &Counters, cas_cmd: bool, r: StoreResult) {
    c.cmd_set.incr();
    match r {
        StoreResult::Stored(_) if cas_cmd => c.cas_hits.incr(),
        StoreResult::Exists if cas_cmd => c.cas_badval.incr(),
        StoreResult::NotFound => c.cas_misses.incr(),
        StoreResult::OutOfMemory => c.store_no_memory.incr(),
        StoreResult::Stored(_) | StoreResult::Exists | StoreResult::NotStored => {}
    }
}
