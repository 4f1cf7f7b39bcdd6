//! memcrab-store: the cache engine, with memcached's semantics and no wire knowledge.
//!
//! Goals: every operation memcached's protocols need (get, get-and-touch, touch, the
//! six storage modes, delete, incr/decr, flush with delay), memcached's exact
//! semantics for each (CAS uniqueness, append keeping flags, the incr in-place
//! padding, lazy expiry, flush by time and by CAS), memory bounded by a byte limit
//! with eviction (or out-of-memory errors with `-M`), and counters for `stats`.
//!
//! Non-goals: parsing, sockets, reply formats. Times are [`clock::RelTime`] seconds;
//! the server turns wire exptimes into them with [`clock::Clock::realtime`].
//!
//! ```text
//!   server worker ──► dyn Engine ─┬─► seg::Seg              (default: segments, lock-free hits)
//!                                 └─► reference::Reference  (-o engine=reference: maps + LRU)
//! ```
//!
//! [`Engine`] is the contract both engines keep; the reference engine is the simple
//! model that property tests hold the segment engine against.
//!
//! The files of this folder and the lock each one's functions expect held. This
//! file's shared types are used by every other; of them it uses only
//! `seg/lease.rs` (`Lease`, `Lender`), which reaches nothing that imports it back.
//! `seg/` and `reference/` draw their own files in their module docs ([`seg`],
//! [`mod@reference`]); `docs/storage.md` describes the segment engine.
//!
//! ```text
//!   lib.rs          Engine, its options and results, Config, Walked, Evicted,
//!                   EvictionListener, apply_delta (Item names seg's Lease)
//!   seg/            the segment engine                                   (its docs)
//!   reference/      the reference engine                                 (its docs)
//!   stats.rs        Stats, SegmentStats: the counters `stats` reports      none
//!   clock.rs        Clock, RelTime                                       none
//! ```
//!
//! Lock order in the segment engine: region → arena → partition, never the reverse
//! (see `seg/mod.rs`). The reference engine holds one shard lock at a time. A
//! function that expects a lock held takes the guard, or what it guards, as a
//! parameter (`&mut Arena`, `&mut Locked`, `&mut Shard`), so the type says which.
//!
//! How the protocols map onto the engine (each request is one call, atomic per key):
//!
//! | request | call |
//! |---|---|
//! | `get`/`gets`, binary GET | `get(key, GetOpts::default())` |
//! | `gat`/`gats`, `touch`, binary GAT/TOUCH | `get` with `touch` (or [`Engine::touch`]) |
//! | `mg` | `get` with `touch` (T), `no_bump` (u), `vivify` (N), `new_cas` (E); the visitor decides W (R, N, stale) and returns it |
//! | `me` | `get` with `no_bump` |
//! | `set`…`cas`, binary SET/ADD/REPLACE/APPEND/PREPEND (CAS ≠ 0 → `compare_cas`) | `store` |
//! | `ms` | `store` with `compare_cas` (C), `invalidate` (I), `new_cas` (E) |
//! | `delete`, binary DELETE (CAS ≠ 0 → `compare_cas`) | `delete` |
//! | `md` | `delete` with `compare_cas` (C), `invalidate` + `touch` (I, T), `new_cas` (E) |
//! | `incr`/`decr`, binary INCR/DECR (CAS ≠ 0 → `compare_cas`; expiration ≠ 0xffffffff → `vivify`) | `delta` |
//! | `ma` | `delta` with `compare_cas` (C), `vivify` (N, J), `touch` (T), `new_cas` (E) |
//! | `lru_crawler metadump`/`mgdump`, `stats sizes` | [`Engine::walk`], resumed until done |

pub mod clock;
pub mod reference;
pub mod seg;
mod stats;

pub use clock::{Clock, RelTime};
pub use seg::lease::Lease;
pub use stats::{SegmentStats, Stats};

use std::sync::Arc;

/// How a storage request treats an existing item (protocol.txt "Storage commands").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Store unconditionally.
    Set,
    /// Store only if the key holds no live item.
    Add,
    /// Store only if the key holds a live item.
    Replace,
    /// Add the data after the existing value, keeping its flags and exptime.
    Append,
    /// Add the data before the existing value, keeping its flags and exptime.
    Prepend,
    /// Store only if the item's CAS unique equals this one. 0 never matches (as in
    /// memcached), nor does anything when CAS is disabled.
    Cas(u64),
}

/// The result of a storage request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreResult {
    /// Stored; the new item's CAS unique: larger than every unique the key had
    /// before (memcached's one counter orders them so; meta `I` relies on it),
    /// unless a client gave one of its own (`E`), which the next version of the key
    /// need not exceed, as in memcached.
    Stored(u64),
    /// Add on a live key, or replace/append/prepend on a missing one.
    NotStored,
    /// CAS mismatch.
    Exists,
    /// CAS on a missing key.
    NotFound,
    /// No memory, and eviction is off (`-M`) or could not free enough.
    OutOfMemory,
}

/// A live item, lent to an [`Engine::get`] visitor while its shard (or whatever the
/// engine locks) is held, so the item cannot change until the visitor returns.
///
/// The per-item state every engine keeps is exactly: `flags`, `exptime`, `atime`
/// (last-access time), `cas`, and the bits `fetched`, `stale` and `token_sent`.
/// Everything below except `created` is that state as it was *before* this request
/// changed anything (before its touch and before its LRU bump).
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub flags: u32,
    /// 0 when CAS is disabled (`-C`).
    pub cas: u64,
    /// The exptime before this request's `touch` (0 = never). For an item this request
    /// created ([`GetOpts::vivify`]) it is 0: memcached allocates the vivified item with
    /// exptime 0 and sets N's TTL afterwards, so an `mg` `t` flag placed before `N`
    /// reports -1.
    pub exptime: RelTime,
    /// Last-access time before this request's bump (memcached's `it->time`). It is
    /// set to "now" when the item is stored (a new item, including one made by
    /// append/prepend/incr growth, gets "now"), by a failed `add` on the item, by an
    /// in-place incr/decr, and by a bump of an item that was already `fetched` (see
    /// [`GetOpts::no_bump`]). A bump of a never-fetched item leaves it alone. Delayed
    /// flush_all compares this time (memcached's `it->time <= oldest_live`).
    pub atime: RelTime,
    /// Whether a bumping lookup has seen the item before this request (memcached's
    /// `ITEM_FETCHED`): set by a bump, never cleared; a new item starts unfetched
    /// (one that a lookup vivifies is bumped by that lookup, unless `no_bump`); an
    /// in-place incr keeps it.
    pub fetched: bool,
    /// The item was invalidated (meta `md I`, or stored by a stale `ms I`): memcached's
    /// `ITEM_STALE`. A new item starts not stale, except as [`StoreOpts::invalidate`]
    /// says.
    pub stale: bool,
    /// A recache token (`W`) was already handed out for this item (memcached's
    /// `ITEM_TOKEN_SENT`, reported as `Z`). Set only when a visitor returns `true`;
    /// cleared by `md I`; a new item starts without it, except as
    /// [`StoreOpts::invalidate`] says.
    pub token_sent: bool,
    /// This request created the item ([`GetOpts::vivify`] on a miss).
    pub created: bool,
    /// For a created item, the dead item its lookup met under the key (as a miss
    /// does, memcached counts it), else None.
    pub replaced: Option<Dead>,
    /// How the engine can lend `value` past the visit ([`Item::lend`]); None for an
    /// engine that cannot (the reference engine).
    pub lender: Option<seg::lease::Lender<'a>>,
}

impl Item<'_> {
    /// The value's bytes, lent past the visit: valid until the [`Lease`] drops,
    /// whatever happens to the item meanwhile (overwritten, evicted, its memory
    /// compacted). None when the engine cannot lend, or will not now (leases
    /// already hold back as much memory as it allows): then copy `value`. Costs no
    /// lock, and no writer ever waits for a lease (see `seg/lease.rs`).
    pub fn lend(&self) -> Option<Lease> {
        self.lender.as_ref()?.lend(self.value)
    }
}

/// What a lookup found, for the `get_hits`/`get_expired`/`get_flushed` counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// The visitor was called (also when the item was created by [`GetOpts::vivify`]).
    Hit,
    Miss,
    /// The key held an item whose exptime had passed.
    Expired,
    /// The key held an item invalidated by `flush_all`.
    Flushed,
}

impl Fetch {
    pub fn is_hit(self) -> bool {
        self == Fetch::Hit
    }

    /// The dead item this lookup met, if it met one.
    pub fn dead(self) -> Option<Dead> {
        match self {
            Fetch::Expired => Some(Dead::Expired),
            Fetch::Flushed => Some(Dead::Flushed),
            Fetch::Hit | Fetch::Miss => None,
        }
    }
}

/// A dead item that a write's own lookup of its key met, and unlinked. memcached
/// counts it as `get_expired` or `get_flushed` whatever the command: the lookup is
/// `do_item_get`, which `do_store_item`, `do_add_delta` and delete call too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dead {
    /// Its exptime had passed.
    Expired,
    /// `flush_all` had invalidated it.
    Flushed,
}

/// A write's result ([`Engine::store_met`], [`Engine::delete_met`], [`Engine::delta_met`])
/// and the dead item its lookup met (at most one: an unlinked item is not met again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Met<R> {
    pub result: R,
    pub dead: Option<Dead>,
}

/// Records in `dead` the dead item a write's lookup `found`, unless one was met before.
pub(crate) fn note_dead(dead: &mut Option<Dead>, found: Fetch) {
    if dead.is_none() {
        *dead = found.dead();
    }
}

/// Options of a lookup ([`Engine::get`]): classic get/gets (all default), gat/gats and
/// touch (`touch`), meta `mg`, binary get/gat/touch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GetOpts {
    /// On a hit, set the item's exptime to this (after the visitor has been shown the
    /// old one in [`Item::exptime`]). Not applied to an item created by `vivify`.
    pub touch: Option<RelTime>,
    /// Do not bump (meta `u`, and `me`): the item keeps its LRU position, its
    /// `fetched` bit and its `atime`. Without it, a hit is bumped after the visitor
    /// returns: it moves to the LRU head, `fetched` is set, and when it was already
    /// `fetched` before this request its `atime` becomes now (memcached's segmented
    /// LRU updates `it->time` on the second fetch; a freshly stored item keeps its
    /// store time on its first fetch).
    pub no_bump: bool,
    /// On a miss (nothing live under the key, including an expired or flushed item,
    /// which is removed), create an item with an empty value, flags 0, a new CAS
    /// (or `new_cas`), exptime = this, `atime` = now, not fetched, and show it to the
    /// visitor with `created: true` (and `exptime: 0`, see [`Item::exptime`]); the
    /// result is then [`Fetch::Hit`]. If memory cannot be had the result is the miss.
    /// The created item is not bumped (memcached links it fresh, unfetched).
    pub vivify: Option<RelTime>,
    /// The CAS unique to give an item created by `vivify` instead of the next one
    /// (meta `E`, newer than memcached 1.6.18). Ignored under `-C`.
    pub new_cas: Option<u64>,
    /// The visitor's decision (its `true`, a meta win token) must be atomic with the
    /// lookup: no other request may see the item between the visit and the setting of
    /// `token_sent`. Meta `mg` sets this (memcached takes the item lock for it); an
    /// engine may otherwise serve a lookup without any lock, and then two concurrent
    /// visitors could both claim the token.
    pub exclusive: bool,
}

/// Options of a storage request ([`Engine::store`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreOpts {
    /// Compare the live item's CAS unique with this one, memcached's `do_store_item`
    /// with the new item's CAS set to it. Per mode:
    /// - `Set`, `Replace`: exactly [`Mode::Cas`] with this unique (missing key:
    ///   [`StoreResult::NotFound`]; mismatch, or a unique of 0: [`StoreResult::Exists`]).
    /// - `Add`: ignored (add never compares).
    /// - `Append`, `Prepend`: a unique other than 0 that differs from the item's:
    ///   `Exists`; 0 or equal: append as usual; missing key: `NotStored` (or
    ///   `vivify`).
    /// - `Cas(_)`: ignored; the mode's own unique is the one compared.
    ///
    /// Under `-C` items carry no unique, so every unique compares as 0 against 0:
    /// CAS mode always answers `Exists`, append/prepend always proceed.
    pub compare_cas: Option<u64>,
    /// Meta `ms I` (memcached's `CAS_STALE`), only in CAS mode (`Cas`, or `Set`/
    /// `Replace` with `compare_cas`): when the request's unique is not 0 and is
    /// *smaller* than the live item's, store anyway, but the new item keeps the old
    /// item's exptime (the request's is ignored), is marked `stale`, and keeps the
    /// old item's `token_sent`. The result is `Stored` (counted as a cas hit).
    pub invalidate: bool,
    /// Append/prepend on a missing key create the item from the request's value and
    /// flags with this exptime instead of answering `NotStored` (meta `ms N`, newer
    /// than memcached 1.6.18). Ignored by the other modes.
    pub vivify: Option<RelTime>,
    /// Give the stored item this CAS unique instead of the next one (meta `E`, newer
    /// than memcached 1.6.18). Ignored under `-C`.
    pub new_cas: Option<u64>,
}

/// Options of a delete ([`Engine::delete`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeleteOpts {
    /// Act only when the live item's CAS unique equals this, else
    /// [`DeleteResult::Exists`]. `Some(0)` compares too (meta `md C0` answers `EX`
    /// on an item with a unique); binary delete passes `None` for a CAS of 0. Under
    /// `-C` the item's unique is 0.
    pub compare_cas: Option<u64>,
    /// Meta `md I`: do not remove the item; mark it `stale`, clear `token_sent`, give
    /// it a new CAS unique (or `new_cas`), and set its exptime to `touch` when that is
    /// `Some`. No LRU bump, `atime` unchanged. Answers [`DeleteResult::Invalidated`].
    pub invalidate: bool,
    /// With `invalidate`: the new exptime (meta `T`). Ignored otherwise.
    pub touch: Option<RelTime>,
    /// With `invalidate`: the new CAS unique (meta `E`, newer than 1.6.18). Ignored
    /// under `-C` and without `invalidate`.
    pub new_cas: Option<u64>,
}

/// The result of [`Engine::delete`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteResult {
    /// The item was removed.
    Deleted,
    /// `invalidate`: the item was marked stale; its new CAS unique (0 under `-C`).
    Invalidated(u64),
    /// No live item.
    NotFound,
    /// `compare_cas` did not match; nothing changed.
    Exists,
}

/// Options of incr/decr ([`Engine::delta`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeltaOpts {
    /// Act only when the item's CAS unique equals this, else [`Delta::Exists`]. As in
    /// memcached's `do_add_delta`, `Some(0)` does not compare (same as `None`). An
    /// empty value, or one memcached would store in chunks
    /// ([`memcrab_limits::memcached_chunked`]), answers `NonNumeric` before the
    /// comparison; any other value is compared before it is parsed.
    pub compare_cas: Option<u64>,
    /// On a miss, create the item with the value `initial` (decimal digits), flags 0,
    /// exptime `exptime`, and answer [`Delta::Value`] with `value = initial` and
    /// `created = true` (the delta is not applied). Meta `ma N`/`J`, binary
    /// incr/decr's initial value (binary's expiration 0xffffffff means `None`).
    pub vivify: Option<Vivify>,
    /// On success on an existing item, set its exptime to this (meta `ma T`). Not
    /// applied to a created item (its exptime is `vivify.exptime`).
    pub touch: Option<RelTime>,
    /// Give the changed or created item this CAS unique instead of the next one (meta
    /// `E`, newer than 1.6.18). Ignored under `-C`.
    pub new_cas: Option<u64>,
}

/// What [`DeltaOpts::vivify`] creates on a miss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Vivify {
    pub initial: u64,
    pub exptime: RelTime,
}

/// The counter after a successful incr/decr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The new value (or `initial` when created).
    pub value: u64,
    /// The item's new CAS unique (0 under `-C`).
    pub cas: u64,
    /// The item's exptime before this request's `touch` (0 = never); 0 for a created
    /// item (memcached creates it with 0 and applies N's TTL afterwards).
    pub exptime: RelTime,
    /// The item was created by `vivify`.
    pub created: bool,
}

/// The result of incr/decr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    Value(Counter),
    NotFound,
    /// The value is not a decimal number of at most 20 digits.
    NonNumeric,
    /// `compare_cas` did not match.
    Exists,
    OutOfMemory,
}

/// Engine settings, from the command line.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `-m`: the most bytes items may take, overhead included.
    pub limit_bytes: u64,
    /// `false` with `-M`: answer out-of-memory instead of evicting.
    pub evict: bool,
    /// `false` with `-C`: CAS uniques are reported as 0.
    pub use_cas: bool,
    /// `-I`: append/prepend may not grow an item past this, counted as memcached
    /// counts it (see [`memcached_item_bytes`]). 0 = no limit.
    pub item_size_max: usize,
    /// The index hash's seed: None draws one from the OS (always, outside tests;
    /// `docs/security.md`, "Hash flooding"). A warm restart keeps the saved one.
    pub hash_seed: Option<u128>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limit_bytes: 64 * 1024 * 1024,
            evict: true,
            use_cas: true,
            item_size_max: memcrab_limits::ITEM_SIZE_MAX_DEFAULT,
            hash_seed: None,
        }
    }
}

/// A live item an engine dropped to make room (an eviction: never an expired, flushed
/// or deleted item), as an [`EvictionListener`] is shown it.
#[derive(Clone, Copy, Debug)]
pub struct Evicted<'a> {
    pub key: &'a [u8],
    pub value_len: usize,
    pub flags: u32,
    /// 0 = never.
    pub exptime: RelTime,
    /// Last access, as [`Item::atime`].
    pub atime: RelTime,
    /// As [`Item::fetched`].
    pub fetched: bool,
}

/// Told of every eviction, once set with [`Engine::set_eviction_listener`] (the
/// server's `watch evictions`). Engines call it on the evicting thread, at the moment
/// of the eviction, with their own locks held and the item borrowed from the store:
/// it must be quick, must not call the engine, and must not wait for anything that
/// may wait for the engine. An engine without a listener pays one load per eviction.
pub trait EvictionListener: Send + Sync {
    fn evicted(&self, item: &Evicted<'_>);
}

/// An item's size as memcached counts it against `-I`. proto applies the same rule to
/// incoming values; the engines apply it to append and prepend, which grow items.
pub use memcrab_limits::memcached_item_bytes;

/// One live item as [`Engine::walk`] shows it: what memcached's `lru_crawler metadump`
/// prints of an item, and its size for `stats sizes`.
#[derive(Clone, Copy, Debug)]
pub struct Walked<'a> {
    pub key: &'a [u8],
    pub flags: u32,
    /// 0 = never.
    pub exptime: RelTime,
    /// Last access, as [`Item::atime`].
    pub atime: RelTime,
    /// 0 when CAS is disabled (`-C`).
    pub cas: u64,
    /// As [`Item::fetched`].
    pub fetched: bool,
    /// Bytes the item takes, overhead included (what [`Stats::bytes`] adds up).
    pub size: u64,
    /// The item's size class as `stats slabs` reports it: 1 for items in shared
    /// memory, 2 for items big enough to get memory of their own (the segment
    /// engine's large items; the reference engine has class 1 only).
    pub class: u8,
}

/// Where a walk ([`Engine::walk`]) stands. Start with `WalkCursor::default()`; the
/// walk is over when [`WalkCursor::is_done`]. What the fields mean is the engine's
/// business: a cursor is only ever given back to the engine that moved it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkCursor {
    /// The part of the store the walk is in (an index partition, a shard).
    pub(crate) part: u32,
    /// The position inside that part.
    pub(crate) pos: u32,
    /// What the part looked like when `pos` was taken (engine-defined), so that a
    /// walk resumed after the part changed shape starts the part again.
    pub(crate) stamp: u64,
    /// A second engine-defined stamp of the part (the segment engine: its cuckoo
    /// move count), compared the same way.
    pub(crate) moves: u64,
    pub(crate) done: bool,
}

impl WalkCursor {
    /// Whether every part of the store has been walked.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// The cache engine contract. All methods are safe to call from any thread at once.
///
/// Times are relative seconds from the engine's [`Clock`]; an `exptime` of 0 is
/// "never". An item is live while `exptime == 0 || exptime > now` and no flush has
/// invalidated it. Every method that meets an expired or flushed item treats the key
/// as missing, unlinks the item, and says so ([`Fetch`], [`Met`]).
pub trait Engine: Send + Sync {
    /// Looks a key up. On a hit (or a creation by `opts.vivify`), calls `visit` once
    /// with the item as it was before this request (see [`Item`]) while the item cannot
    /// change; then, in this order: if `visit` returned `true` the item's `token_sent`
    /// bit is set (meta `W`); `opts.touch` sets the exptime (not on a created item);
    /// unless `opts.no_bump` (or the item was just created) the item is bumped as
    /// [`GetOpts::no_bump`] describes.
    fn get(&self, key: &[u8], opts: &GetOpts, visit: &mut dyn FnMut(Item<'_>) -> bool) -> Fetch;
    /// What [`Engine::get`] would find, changing nothing (`watch fetchers`): `visit`
    /// sees a live item; a dead one is reported, not unlinked; nothing is bumped.
    fn peek(&self, key: &[u8], visit: &mut dyn FnMut(Item<'_>)) -> Fetch;

    /// Sets a live item's exptime and bumps it (memcached's `touch`). Returns whether
    /// the key was live.
    fn touch(&self, key: &[u8], exptime: RelTime) -> bool {
        let opts = GetOpts {
            touch: Some(exptime),
            ..GetOpts::default()
        };
        self.get(key, &opts, &mut |_| false).is_hit()
    }

    /// A storage request. `flags` and `exptime` are ignored by append/prepend (which
    /// keep the item's, and its `stale`/`token_sent` are not carried: the joined item
    /// is new). Returns the new item's CAS unique on success. See [`StoreOpts`] for
    /// CAS comparison in every mode, `ms I`, vivifying append and explicit CAS. A
    /// failed `add` on a live item bumps it to the LRU head and sets its `atime` to
    /// now (memcached's `do_item_update`). A `Set` that fails for memory removes the
    /// old item. With the dead item the request's lookup met ([`Met`]; a `Set` that
    /// fails for memory reports the one its removal met).
    fn store_met(
        &self,
        mode: Mode,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        opts: &StoreOpts,
    ) -> Met<StoreResult>;

    /// [`Engine::store_met`] without what the lookup met.
    fn store(
        &self,
        mode: Mode,
        key: &[u8],
        flags: u32,
        exptime: RelTime,
        value: &[u8],
        opts: &StoreOpts,
    ) -> StoreResult {
        self.store_met(mode, key, flags, exptime, value, opts)
            .result
    }

    /// Removes a live item (or invalidates it, see [`DeleteOpts`]), with the dead
    /// item the lookup met ([`Met`]).
    fn delete_met(&self, key: &[u8], opts: &DeleteOpts) -> Met<DeleteResult>;

    /// [`Engine::delete_met`] without what the lookup met.
    fn delete(&self, key: &[u8], opts: &DeleteOpts) -> DeleteResult {
        self.delete_met(key, opts).result
    }

    /// incr (`incr == true`, wrapping at 2^64) or decr (stopping at 0) on a value that
    /// is a decimal number, as memcached's `do_add_delta`: when the new number's digits
    /// fit in the old value it is rewritten in place (padded with spaces, see
    /// [`apply_delta`]) keeping the item's flags, exptime and bits, with a new CAS and
    /// `atime` = now; otherwise a new item replaces it (same flags and exptime, bits
    /// cleared, `atime` = now). See [`DeltaOpts`] for CAS, vivify and touch. With the
    /// dead item the lookup met ([`Met`]; also when `vivify` then created the item).
    fn delta_met(&self, key: &[u8], incr: bool, delta: u64, opts: &DeltaOpts) -> Met<Delta>;

    /// [`Engine::delta_met`] without what the lookup met.
    fn delta(&self, key: &[u8], incr: bool, delta: u64, opts: &DeltaOpts) -> Delta {
        self.delta_met(key, incr, delta, opts).result
    }

    /// memcached's flush_all: with `at == None` every item stored so far becomes
    /// invalid now, and is freed before this returns (memcached 1.6.25+ unlinks
    /// them at once, so curr_items drops and a later lookup is a plain miss); with
    /// `Some(t)`, items last stored before `t` become invalid once the clock reaches
    /// `t`, and `maintain` frees them then. A later flush replaces a pending one.
    fn flush_all(&self, at: Option<RelTime>);

    /// `cache_memlimit`: a new byte limit; the excess is evicted on later stores.
    fn set_limit(&self, limit_bytes: u64);

    /// The engine's counters.
    fn stats(&self) -> Stats;

    /// `stats reset`: zeroes the cumulative counters (not the gauges).
    fn reset_stats(&self);

    /// The clock the engine reads.
    fn clock(&self) -> &Clock;

    /// Walks the live items for a key dump (`lru_crawler metadump`/`mgdump`, `stats
    /// sizes`), from where `cursor` stands, calling `visit` with each; stops after an
    /// item for which `visit` returns `false` (the cursor then stands after it) or
    /// when every item has been walked ([`WalkCursor::is_done`]). A walk is a series
    /// of such calls with the same cursor; writers run between them and during them.
    ///
    /// The contract, for both engines:
    /// - `visit` only ever sees an item that was live and linked under its key when
    ///   the walk looked at it: never one that had expired, been flushed, deleted or
    ///   replaced by then. Nothing is unlinked or bumped by walking.
    /// - A key whose item is neither stored, touched nor removed from the walk's first
    ///   call to its last, and stays live, is visited exactly once, except as an
    ///   engine documents below. A key written or removed during the walk may be
    ///   visited or not, and at most twice (once per item it held).
    /// - No writer waits for a walk longer than it would for one request: the walk
    ///   holds no lock (segment engine), or one shard lock for at most a few hundred
    ///   items at a time (reference engine).
    /// - `visit` runs while the walk is inside the store (pinned, or holding a shard
    ///   lock): it must not call the engine.
    ///
    /// The segment engine walks its hash index, partition by partition, without a
    /// lock, as a lock-free get reads it: overwrites, touches and the engine's own
    /// moves (eviction's reinsertion, compaction) keep a key in its slot, so every key
    /// live throughout the walk is visited, written or not; one whose partition's
    /// table grew while the walk was inside that partition may be visited twice. The
    /// reference engine walks each shard's item slots in order; a store gives the
    /// item a new slot, which may lie behind the walk.
    fn walk(&self, cursor: &mut WalkCursor, visit: &mut dyn FnMut(&Walked<'_>) -> bool);

    /// Sets the [`EvictionListener`], once: a later call changes nothing and returns
    /// `false`.
    fn set_eviction_listener(&self, listener: Arc<dyn EvictionListener>) -> bool;

    /// Background upkeep, called about once a second by the server's ticker (frees
    /// the items of a delayed flush_all once it is due).
    fn maintain(&self) {}

    /// A hint that `key` will be looked up soon (a multiget's later keys): start
    /// loading its index bucket into the cache. No effect on results.
    fn prefetch_index(&self, _key: &[u8]) {}

    /// A hint, given after [`Engine::prefetch_index`] had time to land, to start
    /// loading the item itself. No effect on results.
    fn prefetch_item(&self, _key: &[u8]) {}
}

/// Parses an item's value as memcached's incr/decr do (`safe_strtoull` on the data):
/// optional leading whitespace and a sign, decimal digits that fit in 64 bits, then
/// whitespace, a NUL (where C's `strtoull` stops) or the end. Length does not matter:
/// `00000000000000000000012` is 12. (memcached also refuses items over its slab
/// chunk size, 512 KiB, as "chunked"; a number that long would need half a megabyte
/// of leading zeros or spaces, and memcrab parses it.)
pub fn parse_counter(value: &[u8]) -> Option<u64> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut i = value.iter().take_while(|&&b| is_space(b)).count();
    let mut negative = false;
    if i < value.len() && (value[i] == b'+' || value[i] == b'-') {
        negative = value[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut n: u64 = 0;
    while i < value.len() && value[i].is_ascii_digit() {
        n = n.checked_mul(10)?.checked_add(u64::from(value[i] - b'0'))?;
        i += 1;
    }
    if i == start {
        return None;
    }
    // In memcached the data is followed by "\r\n", so the end is always whitespace.
    if i < value.len() && !is_space(value[i]) && value[i] != 0 {
        return None;
    }
    let n = if negative { n.wrapping_neg() } else { n };
    if (n as i64) < 0 && value.contains(&b'-') {
        return None;
    }
    Some(n)
}

/// Applies incr/decr to a counter and renders the new value as memcached stores it:
/// when the new number is shorter than the old value it is padded with spaces to the
/// old length (memcached rewrites the item in place), otherwise it is exactly the
/// digits.
pub fn apply_delta(old: &[u8], incr: bool, delta: u64) -> Option<(u64, Vec<u8>)> {
    let n = parse_counter(old)?;
    let v = if incr {
        n.wrapping_add(delta)
    } else {
        n.saturating_sub(delta)
    };
    let mut out = v.to_string().into_bytes();
    if out.len() < old.len() {
        out.resize(old.len(), b' ');
    }
    Some((v, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters() {
        let rows: &[(&[u8], Option<u64>)] = &[
            (b"0", Some(0)),
            (b"10", Some(10)),
            (b"9 ", Some(9)),
            (b" 7", Some(7)),
            (b"+7", Some(7)),
            (b"18446744073709551615", Some(u64::MAX)),
            (b"18446744073709551616", None),
            (b"-1", None),
            (b"", None),
            (b"abc", None),
            (b"1a", None),
            (b"0000000000000000000001", Some(1)),
            (b"000000000000000000001", Some(1)),
            (b"00000000000000000000000000000000000000012", Some(12)),
            (b"   12   ", Some(12)),
            (b"12\0abc", Some(12)),
            (b"-0", Some(0)),
            (b"- 1", None),
            (b"+", None),
        ];
        for (v, want) in rows {
            assert_eq!(parse_counter(v), *want, "{:?}", String::from_utf8_lossy(v));
        }
    }

    #[test]
    fn deltas() {
        assert_eq!(apply_delta(b"10", false, 1), Some((9, b"9 ".to_vec())));
        assert_eq!(apply_delta(b"9", true, 1), Some((10, b"10".to_vec())));
        assert_eq!(apply_delta(b"5", false, 10), Some((0, b"0".to_vec())));
        assert_eq!(
            apply_delta(b"18446744073709551615", true, 2),
            Some((1, b"1                   ".to_vec()))
        );
        assert_eq!(apply_delta(b"x", true, 1), None);
    }
}
