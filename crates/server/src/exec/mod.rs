//! Executors: where a parsed request meets the store. Each request becomes engine
//! calls, counter updates and reply bytes, with memcached's replies.
//!
//! ```text
//!   exec/mod.rs   Ctx, Flow, Resume, and the one place that counts fetches and stores
//!                 (and tells `watch` about them, and about deletions)
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

use std::cell::Cell;

use memcrab_proto::text::watch::{self as line, DeleteCmd, GetStatus, StoreStatus};
use memcrab_proto::text::StoreCmd;
use memcrab_store::{
    DeleteResult, Engine, Fetch, GetOpts, Item, Mode, RelTime, StoreResult, WalkCursor,
};

use crate::admin::counters::Counters;
use crate::admin::slab::Classes;
use crate::server::Server;

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
}

impl Ctx<'_> {
    /// memcached's slab classes under these settings, for the `clsid` of log lines.
    fn classes(&self) -> Classes {
        let s = &self.server.settings;
        Classes {
            chunk_size: s.chunk_size,
            growth_factor: s.growth_factor,
            use_cas: s.use_cas,
        }
    }
}

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
}

/// What a lookup showed of the item it found: its size and class, as `watch`
/// reports them.
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

/// `watch fetchers` for one request's lookups: whether somebody watches (one
/// Relaxed load, per request, not per key), and, only then, what the last hit
/// showed of its item ([`FetchWatch::hit`], called by lookup visitors).
#[derive(Clone, Copy, Debug)]
pub struct FetchWatch {
    on: bool,
    seen: Seen,
}

impl FetchWatch {
    #[inline]
    pub fn new(cx: &Ctx<'_>) -> FetchWatch {
        FetchWatch {
            on: cx.server.watch.wants(line::FETCHERS),
            seen: Seen::default(),
        }
    }

    /// A lookup's visitor was shown `it`.
    #[inline]
    pub fn hit(&mut self, it: &Item<'_>) {
        if self.on {
            self.seen = Seen::of(it);
        }
    }
}

/// Counts one lookup, for every protocol alike, as memcached does: `get_expired` or
/// `get_flushed` when the key held a dead item (`do_item_get`, whatever the command),
/// then the command's own counters. A lookup that touches (`gat`, `touch`, binary GAT
/// and TOUCH, an `mg` with `T` that hit) counts `cmd_touch` and
/// `touch_hits`/`touch_misses`; any other counts `cmd_get` and
/// `get_hits`/`get_misses`. Then `watch fetchers` is told ([`note_fetch`]).
#[inline]
pub fn count_fetch(cx: &Ctx<'_>, key: &[u8], touch: bool, found: Fetch, fw: &FetchWatch) {
    let c = cx.counters;
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
    note_fetch(cx, key, found, fw);
}

/// `watch fetchers`: an `item_get` line for a lookup of `key`, if `fw` says
/// somebody watches. (memcached also logs the lookups inside stores, deletes and
/// incr/decr; memcrab logs the lookups of the fetching commands only, see
/// docs/operations.md.)
#[inline]
pub fn note_fetch(cx: &Ctx<'_>, key: &[u8], found: Fetch, fw: &FetchWatch) {
    if fw.on {
        report_fetch(cx, key, found, fw.seen);
    }
}

#[cold]
#[inline(never)]
fn report_fetch(cx: &Ctx<'_>, key: &[u8], found: Fetch, seen: Seen) {
    let (status, clsid, size) = match found {
        Fetch::Hit if !seen.created => (
            GetStatus::Found,
            cx.classes().of(key.len(), seen.flags, seen.value_len),
            seen.value_len,
        ),
        Fetch::Hit | Fetch::Miss => (GetStatus::NotFound, 0, 0),
        Fetch::Expired => (GetStatus::Expired, 0, 0),
        Fetch::Flushed => (GetStatus::Flushed, 0, 0),
    };
    let fd = cx.fd.get();
    cx.server.watch.emit(line::FETCHERS, &mut |out| {
        line::item_get(out, key, status, clsid, fd, size)
    });
}

/// A storage request as `watch mutations` shows it: memcached logs the item the
/// request made (key, command, flags, exptime, value), whatever the result.
pub struct Mutation<'a> {
    pub key: &'a [u8],
    pub cmd: StoreCmd,
    pub flags: u32,
    pub exptime: RelTime,
    pub value_len: usize,
}

/// The command memcached names for a store in `mode` (binary and meta stores map
/// onto these, a CAS store to `cas`).
pub fn store_cmd(mode: Mode) -> StoreCmd {
    match mode {
        Mode::Set => StoreCmd::Set,
        Mode::Add => StoreCmd::Add,
        Mode::Replace => StoreCmd::Replace,
        Mode::Append => StoreCmd::Append,
        Mode::Prepend => StoreCmd::Prepend,
        Mode::Cas(_) => StoreCmd::Cas,
    }
}

/// Counts one storage request, for every protocol alike, as memcached's
/// `process_update_command` and `do_store_item` do: `cmd_set` always; for a CAS
/// command (`cas`, a binary store with a CAS, `ms` set/replace with `C`) `cas_hits` when
/// it stored and `cas_badval` when the CAS differed; `cas_misses` when a CAS found no
/// item; `store_no_memory` when there was no memory. (An append with a CAS that
/// differs answers EXISTS without counting `cas_badval`, as in memcached.) Then
/// `watch mutations` is told: `what` describes the request, and is called only if
/// somebody watches.
#[inline]
pub fn count_store<'k>(
    cx: &Ctx<'_>,
    cas_cmd: bool,
    r: StoreResult,
    what: impl FnOnce() -> Mutation<'k>,
) {
    let c = cx.counters;
    c.cmd_set.incr();
    match r {
        StoreResult::Stored(_) if cas_cmd => c.cas_hits.incr(),
        StoreResult::Exists if cas_cmd => c.cas_badval.incr(),
        StoreResult::NotFound => c.cas_misses.incr(),
        StoreResult::OutOfMemory => c.store_no_memory.incr(),
        StoreResult::Stored(_) | StoreResult::Exists | StoreResult::NotStored => {}
    }
    if cx.server.watch.wants(line::MUTATIONS) {
        report_store(cx, r, &what());
    }
}

#[cold]
#[inline(never)]
fn report_store(cx: &Ctx<'_>, r: StoreResult, m: &Mutation<'_>) {
    let status = match r {
        StoreResult::Stored(_) => StoreStatus::Stored,
        StoreResult::NotStored => StoreStatus::NotStored,
        StoreResult::Exists => StoreStatus::Exists,
        StoreResult::NotFound => StoreStatus::NotFound,
        StoreResult::OutOfMemory => return report_refused(cx, m.key, Some(m.cmd), r),
    };
    let (mut flags, mut exptime, mut value_len) = (m.flags, m.exptime, m.value_len);
    if status == StoreStatus::Stored && matches!(m.cmd, StoreCmd::Append | StoreCmd::Prepend) {
        // memcached logs the joined item: its length, and the flags and exptime it
        // kept. Read back without a bump (a store to the key in between would show
        // its item instead).
        let opts = GetOpts {
            no_bump: true,
            ..GetOpts::default()
        };
        cx.engine.get(m.key, &opts, &mut |it| {
            (flags, exptime, value_len) = (it.flags, it.exptime, it.value.len());
            false
        });
    }
    // memcached: `exptime - current_time`, unsigned, or 0 for no expiry.
    let ttl = match exptime {
        0 => 0,
        t => t.wrapping_sub(cx.engine.clock().now()),
    };
    let clsid = cx.classes().of(m.key.len(), flags, value_len);
    let fd = cx.fd.get();
    cx.server.watch.emit(line::MUTATIONS, &mut |out| {
        line::item_store(out, m.key, status, Some(m.cmd), ttl, clsid, fd, value_len)
    });
}

/// Counts a storage request refused before it reached the store because its item
/// cannot fit `-I` (`store_too_large`), and tells `watch mutations`. `cmd` is `None`
/// for a binary store (memcached names no command there).
pub fn count_too_large(cx: &Ctx<'_>, key: &[u8], cmd: Option<StoreCmd>) {
    cx.counters.store_too_large.incr();
    if cx.server.watch.wants(line::MUTATIONS) {
        report_refused(cx, key, cmd, StoreResult::NotStored);
    }
}

/// The `item_store` line of a store without an item: too large (`r` is `NotStored`)
/// or out of memory. memcached logs these with ttl, clsid and size 0 (its clsid and
/// cfd there are uninitialised memory; memcrab prints 0 and the socket).
#[cold]
#[inline(never)]
fn report_refused(cx: &Ctx<'_>, key: &[u8], cmd: Option<StoreCmd>, r: StoreResult) {
    let status = match r {
        StoreResult::OutOfMemory => StoreStatus::NoMemory,
        _ => StoreStatus::TooLarge,
    };
    let fd = cx.fd.get();
    cx.server.watch.emit(line::MUTATIONS, &mut |out| {
        line::item_store(out, key, status, cmd, 0, 0, fd, 0)
    });
}

/// `watch deletions`, step one: what the item a delete may remove holds (`None`
/// unless somebody watches; then a lookup without a bump, so a store to the key
/// between this and the delete may be shown instead). When nobody watches, one
/// Relaxed load.
#[inline]
pub fn before_delete(cx: &Ctx<'_>, key: &[u8]) -> Option<Seen> {
    if cx.server.watch.wants(line::DELETIONS) {
        peek(cx, key)
    } else {
        None
    }
}

#[cold]
#[inline(never)]
fn peek(cx: &Ctx<'_>, key: &[u8]) -> Option<Seen> {
    let opts = GetOpts {
        no_bump: true,
        ..GetOpts::default()
    };
    let mut seen = None;
    cx.engine.get(key, &opts, &mut |it| {
        seen = Some(Seen::of(&it));
        false
    });
    seen
}

/// `watch deletions`, step two: a `type=deleted` line if the delete removed the item
/// `before` described (memcached 1.6.20 logs text `delete` and `md` without `I`).
#[inline]
pub fn note_delete(
    cx: &Ctx<'_>,
    key: &[u8],
    cmd: DeleteCmd,
    r: DeleteResult,
    before: Option<Seen>,
) {
    if let (DeleteResult::Deleted, Some(seen)) = (r, before) {
        report_delete(cx, key, cmd, seen);
    }
}

#[cold]
#[inline(never)]
fn report_delete(cx: &Ctx<'_>, key: &[u8], cmd: DeleteCmd, seen: Seen) {
    let clsid = cx.classes().of(key.len(), seen.flags, seen.value_len);
    cx.server.watch.emit(line::DELETIONS, &mut |out| {
        line::deleted(out, key, cmd, clsid, seen.value_len)
    });
}
