//! Executors: where a parsed request meets the store. Each request becomes engine
//! calls, counter updates and reply bytes, with memcached's replies.
//!
//! Two layers. A command family's file makes the engine call and does all of its
//! bookkeeping (counters, `watch`, `stats detail`'s prefixes, lent values) once for
//! every protocol, and returns a result that belongs to no protocol. A protocol's
//! executor maps its request's options onto the family's call and encodes the result
//! as that protocol's reply.
//!
//! ```text
//!   exec/mod.rs   Flow (what the caller does next), Resume (a paused request's
//!                 progress), Seen (what a lookup showed, for `watch`)
//!   protocols:
//!     text.rs     classic text commands; hands lru_crawler, slabs and lru to
//!                 lru.rs (the request step sends meta requests to meta.rs)
//!     meta.rs     mg ms md ma mn me (proto_text.c's process_m*)
//!     binary.rs   binary packets (proto_bin.c), SASL
//!     lru.rs      lru_crawler (crawls, key dumps), slabs, lru
//!        │  each calls
//!        ▼
//!   families:
//!     fetch.rs    get gets gat gats touch, mg me, binary GET GAT TOUCH (Fetcher)
//!     store.rs    set add replace append prepend cas, ms, binary stores
//!     delete.rs   delete, md, binary DELETE
//!     arith.rs    incr decr, ma, binary INCREMENT DECREMENT
//!     admin.rs    flush_all, shutdown, verbosity, cache_memlimit, refresh_certs,
//!                 watch's checks
//!   probe.rs      the request step's measurement hook: latency, hot keys, slow log
//! ```
//!
//! Executors know nothing of connections: they read a request and append to an
//! output buffer, with the worker's `Ctx` (`crate::server`, beside the state it
//! points into). The request step (`crate::request`) feeds them, and the transports
//! (`crate::io`) feed the request step.

pub mod admin;
pub mod arith;
pub mod binary;
pub mod delete;
pub mod fetch;
pub mod lru;
pub mod meta;
pub mod probe;
pub mod store;
pub mod text;

use memcrab_store::{Item, WalkCursor};

/// What the connection does after a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Consume the request and go on.
    Next,
    /// Consume the request line, then discard this many more bytes (a data block that
    /// was refused before it arrived).
    Swallow(usize),
    /// Send what is pending, then close (`quit`, `shutdown`).
    Quit,
    /// Nothing after this request can be served (a line too long to wait for, a
    /// binary packet that can never be valid): send what is pending, this request's
    /// error reply included, then close. The rest of the input is dropped.
    Hangup,
    /// Close now, without sending anything more (a bad binary magic).
    Close,
    /// A multi-get or a key dump paused (the output buffer is full, or a dump did its
    /// share of the walk for this turn); run the same request again later. The
    /// request step keeps how far it got ([`Resume`]).
    Suspend,
    /// `watch`: the request step checks it ([`admin::watch`]), as that needs what
    /// came before it in the batch; if it stands, the connection becomes a log
    /// stream. (No payload: the request path stays as it was without `watch`.)
    Watch,
}

/// How far a suspended request got ([`Flow::Suspend`]), kept by the request step
/// until the same request runs again; back to the default when it completes.
#[derive(Debug, Default)]
pub struct Resume {
    /// Keys of a multi-get already answered.
    pub keys: usize,
    /// Where a key dump's walk of the store stands (`lru_crawler metadump`/`mgdump`).
    pub walk: Option<WalkCursor>,
    /// The suspended dump, counted in `stats`' `lru_crawler_running` while it lives.
    pub running: Option<crate::admin::tunables::CrawlRunning>,
    /// Before a key dump: replies of earlier requests in its batch are still
    /// queued (memcached's `resp_has_stack`), so it is refused. Set by the request
    /// step for `lru_crawler` requests only.
    pub stacked: bool,
}

/// What a lookup showed of the item it found: its size and class, as `watch`
/// reports them (for fetches and deletes).
#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    value_len: usize,
    flags: u32,
    /// The lookup created the item (`mg N`): memcached logs the miss before it.
    created: bool,
}

impl Seen {
    #[inline]
    pub fn of(it: &Item<'_>) -> Seen {
        Seen {
            value_len: it.value.len(),
            flags: it.flags,
            created: it.created,
        }
    }
}
