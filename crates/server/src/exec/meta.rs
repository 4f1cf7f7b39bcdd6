//! Meta commands (`mg ms md ma mn me`): each maps its flags onto a command family's
//! call (`super::fetch`, `store`, `delete`, `arith`) and encodes memcached 1.6.45's
//! replies with its quiet-mode rules (`proto_parser.c`'s `process_m*_cmd`).
//!
//! Flags take effect in request order, as in memcached: `mg k t T30` reports the
//! TTL before the touch, `mg k T30 t` after it. The engine is asked once per request
//! (see `memcrab_store::GetOpts` and friends) and reports the item as it was before
//! the request; the reply is rebuilt from that in token order.
//!
//! Quiet mode (`q`) hides only the "nominal" reply, which differs per command as in
//! 1.6.45: `mg` hides `EN` (a hit still answers); `ms` hides `HD`; `md` hides `HD`
//! (not `NF`/`EX`); `ma` hides a successful `HD`/`VA`, also for an item just created
//! by `N`. Errors are never hidden.
//!
//! The meta protocol is memcached 1.6.45's: `ms s` (stored size), `ms N` on append
//! and prepend (autovivify), `md x` (empty the value), `mg C` (the value only when
//! the item changed), `E` (explicit new CAS). Deliberate differences from memcached,
//! documented in docs/compatibility.md:
//! - `k` and `me` print the key base64-encoded when *this request* used `b`;
//!   memcached remembers per item whether it was stored with `b`.
//! - `ma T` keeps the new TTL, and `ma E` the new unique, even when the incremented
//!   number grows longer than the old value (memcached then applies both to the
//!   item it replaced: the TTL is lost, the item keeps a counter unique).
//! - `me`'s `cls` is computed from memcached's default slab classes for the item's
//!   size (`-n`, `-f` honoured); `la` follows the engine's access time rules.

use std::iter::once;

use memcrab_proto::text::meta::{
    errors, reply, Flags, Key, KeyBuf, Meta, SetMode, DECODED_KEY_MAX,
};
use memcrab_proto::text::watch::{self as line, DeleteCmd};
use memcrab_proto::text::StoreCmd;
use memcrab_store::{
    memcached_item_bytes, DeleteOpts, DeleteResult, Delta, DeltaOpts, Fetch, GetOpts, Mode,
    RelTime, StoreOpts, StoreResult, Vivify,
};

use super::arith;
use super::delete::{self, Delete};
use super::fetch::{self, Counts, Fetcher, Looked, Visit};
use super::probe::{hot, mark, mark_read};
use super::store::{self, Store};
use super::{Flow, Seen};
use crate::admin::latency::{DECR, DELETE, GET, INCR, META, OTHER, SET};
use crate::out::Out;
use crate::server::Ctx;

/// Executes one meta request, appending its reply to `out`, and [`mark`]s it with
/// its latency series (`exec/probe.rs`).
pub fn execute(m: Meta<'_>, cx: &Ctx<'_>, out: &mut Out) -> Flow {
    mark(cx, META + OTHER);
    match m {
        Meta::Get { key, flags } => {
            hot(cx, || once(key.raw()), 0, out);
            get(&key, &flags, cx, out)
        }
        Meta::Set {
            key,
            flags,
            mode,
            data,
        } => {
            mark(cx, META + SET);
            hot(cx, || once(key.raw()), data.len(), out);
            set(&key, &flags, mode, data, cx, out)
        }
        Meta::SetTooLarge {
            key,
            mode,
            cas,
            swallow,
        } => {
            mark(cx, META + SET);
            hot(cx, || once(key.raw()), 0, out);
            let mut kb: KeyBuf = [0; DECODED_KEY_MAX];
            let kbytes = key.decode(&mut kb);
            // memcached: a failed ms must not leave the old value readable (any mode).
            store::too_large(cx, kbytes, Some(ms_cmd(mode, cas)), false, true);
            out.extend_from_slice(errors::TOO_LARGE);
            Flow::Swallow(swallow)
        }
        Meta::SetBadChunk => {
            store::bad_chunk(cx);
            out.extend_from_slice(errors::BAD_DATA_CHUNK);
            Flow::Next
        }
        Meta::Delete { key, flags } => {
            mark(cx, META + DELETE);
            hot(cx, || once(key.raw()), 0, out);
            delete(&key, &flags, cx, out)
        }
        Meta::Arith { key, flags, incr } => {
            mark(cx, META + if incr { INCR } else { DECR });
            hot(cx, || once(key.raw()), 0, out);
            arith(&key, &flags, incr, cx, out)
        }
        Meta::Noop => {
            out.extend_from_slice(reply::MN);
            Flow::Next
        }
        Meta::Debug { key } => debug(&key, cx, out),
        Meta::Fail {
            reply,
            swallow,
            set_cmd,
        } => {
            if set_cmd {
                // memcached counted the set when it allocated the item.
                cx.counters.cmd_set.incr();
            }
            out.extend_from_slice(reply);
            if swallow > 0 {
                Flow::Swallow(swallow)
            } else {
                Flow::Next
            }
        }
    }
}

/// A wire TTL as memcached's meta flags convert it
/// (`realtime(EXPTIME_TO_POSITIVE_TIME(t))`).
fn rel(cx: &Ctx<'_>, t: i32) -> RelTime {
    cx.engine.clock().realtime(i64::from(t))
}

/// The TTL flags as they take effect: memcached applies `T` and `N` while walking
/// the tokens and stops at an over-long opaque (answering an error), so later ones
/// never happen. Returns (`T` for an existing item, exptime of a created item).
fn ttl_effects(
    flags: &Flags<'_>,
    ttl: Option<RelTime>,
    viv: Option<RelTime>,
) -> (Option<RelTime>, RelTime) {
    let mut touch = None;
    let mut created = 0;
    for t in flags.tokens() {
        match t[0] {
            b'T' => {
                touch = ttl;
                created = ttl.unwrap_or(created);
            }
            b'N' => created = viv.unwrap_or(created),
            b'O' if t.len() > memcrab_proto::text::meta::OPAQUE_MAX_LEN => break,
            _ => {}
        }
    }
    (touch, created)
}

/// Echoes the `O` and `k` flags in order (the miss / failure lines).
fn opaque_and_key(out: &mut Vec<u8>, flags: &Flags<'_>, key: &Key<'_>) {
    for t in flags.tokens() {
        match t[0] {
            b'O' => reply::opaque(out, t),
            b'k' => reply::key(out, key),
            _ => {}
        }
    }
}

fn get(key: &Key<'_>, flags: &Flags<'_>, cx: &Ctx<'_>, out: &mut Out) -> Flow {
    let mut kb: KeyBuf = [0; DECODED_KEY_MAX];
    let kbytes = key.decode(&mut kb);
    let now = cx.engine.clock().now();
    let ttl = flags.ttl.map(|t| rel(cx, t));
    let viv = flags.vivify.map(|t| rel(cx, t));
    let recache = flags.recache.map(|t| rel(cx, t));
    let long_opaque = flags.opaque_too_long();
    // memcached fetches "locked" (bumping only after the reply is built, and not at
    // all when an error cuts it short) when any of these flags is present.
    let locked = [b'N', b'T', b'R', b'l', b'h'].iter().any(|&f| flags.has(f));
    let (touch, created_exptime) = ttl_effects(flags, ttl, viv);
    let opts = GetOpts {
        touch,
        no_bump: flags.no_bump || (long_opaque && locked),
        vivify: viv.map(|_| created_exptime),
        new_cas: flags.new_cas,
        // The W/Z decision must be atomic with the lookup (two mg on a stale item
        // must not both win), as memcached's item lock makes it.
        exclusive: true,
    };
    // memcached's mg counts a touch only once it found the item (`ttl_set` is set
    // while walking a hit's flags); a miss is a get miss whatever the flags.
    let counts = if ttl.is_some() {
        Counts::TouchIfHit
    } else {
        Counts::Get
    };
    let fetcher = Fetcher::new(cx, counts, false);
    let start = out.len();
    let mut failed = false;
    let found = fetcher.get(kbytes, &opts, |it| {
        // memcached 1.6.40: with `C`, the value comes only when the item changed.
        let value = flags.value && flags.compare_cas != Some(it.cas);
        if value {
            out.extend_from_slice(b"VA ");
            out.extend_from_slice(itoa::Buffer::new().format(it.value.len()).as_bytes());
        } else {
            out.extend_from_slice(b"HD");
        }
        let mut exptime = it.exptime;
        let mut won = false;
        for t in flags.tokens() {
            match t[0] {
                b'T' => exptime = ttl.unwrap_or(exptime),
                b'N' if it.created => {
                    exptime = viv.unwrap_or(exptime);
                    won = true;
                }
                b'R' => {
                    if let Some(r) = recache {
                        if !it.token_sent && !it.created && exptime != 0 && exptime < r {
                            won = true;
                        }
                    }
                }
                b's' => reply::flag_num(out, b's', it.value.len()),
                b't' => reply::ttl(out, exptime, now),
                b'c' => reply::flag_num(out, b'c', it.cas),
                b'f' => reply::flag_num(out, b'f', it.flags),
                b'l' => reply::flag_num(out, b'l', now.wrapping_sub(it.atime)),
                b'h' => reply::flag_num(out, b'h', u8::from(it.fetched)),
                b'O' if t.len() > memcrab_proto::text::meta::OPAQUE_MAX_LEN => {
                    failed = true;
                    return Visit::Refused;
                }
                b'O' => reply::opaque(out, t),
                b'k' => reply::key(out, key),
                _ => {}
            }
        }
        // Z before X before W, as memcached; a stale item hands out one token.
        if it.token_sent {
            reply::flag(out, b'Z');
        }
        if it.stale {
            reply::flag(out, b'X');
            if !it.token_sent {
                won = true;
            }
        }
        if won {
            reply::flag(out, b'W');
        }
        out.extend_from_slice(b"\r\n");
        if value {
            // Lent by the store when it is long enough (see out.rs), else copied.
            fetch::value(cx, out, it);
            out.extend_from_slice(b"\r\n");
        }
        if won {
            Visit::Won
        } else {
            Visit::Shown
        }
    });
    // A hit whose reply failed was not counted: its series is the miss's.
    mark_read(cx, META + GET, found == Fetch::Hit && !failed);
    if found == Fetch::Hit && failed {
        out.truncate(start);
        out.extend_from_slice(errors::OPAQUE_TOO_LONG);
        return Flow::Next;
    }
    if found == Fetch::Hit {
        return Flow::Next;
    }
    if long_opaque {
        out.extend_from_slice(errors::OPAQUE_TOO_LONG);
    } else if !flags.quiet {
        out.extend_from_slice(b"EN");
        opaque_and_key(out, flags, key);
        out.extend_from_slice(b"\r\n");
    }
    Flow::Next
}

fn set(
    key: &Key<'_>,
    flags: &Flags<'_>,
    mode: SetMode,
    data: &[u8],
    cx: &Ctx<'_>,
    out: &mut Vec<u8>,
) -> Flow {
    let mut kb: KeyBuf = [0; DECODED_KEY_MAX];
    let kbytes = key.decode(&mut kb);
    let exptime = flags.ttl.map_or(0, |t| rel(cx, t));
    let mode = match mode {
        SetMode::Set => Mode::Set,
        SetMode::Add => Mode::Add,
        SetMode::Append => Mode::Append,
        SetMode::Prepend => Mode::Prepend,
        SetMode::Replace => Mode::Replace,
    };
    // memcached turns set and replace with a CAS into its cas command.
    let cas_mode = flags.compare_cas.is_some() && matches!(mode, Mode::Set | Mode::Replace);
    let opts = StoreOpts {
        compare_cas: flags.compare_cas,
        invalidate: flags.invalidate,
        // memcached 1.6.20: append and prepend with `N` create a missing item, with
        // N's TTL (`T` is not used then); the other modes ignore it.
        vivify: flags.vivify.map(|t| rel(cx, t)),
        new_cas: flags.new_cas,
    };
    let r = store::store(
        cx,
        &Store {
            mode,
            key: kbytes,
            flags: flags.client_flags,
            exptime,
            value: data,
            opts,
            cmd: if cas_mode {
                StoreCmd::Cas
            } else {
                store::cmd_of(mode)
            },
            prefix: false,
            // memcached drops the old item whatever the ms mode.
            oom_drops_old: true,
        },
    );
    let (status, cas): (&[u8], u64) = match r {
        StoreResult::Stored(cas) => {
            if flags.quiet {
                return Flow::Next;
            }
            (b"HD", cas)
        }
        StoreResult::NotStored => (b"NS", 0),
        StoreResult::Exists => (b"EX", 0),
        StoreResult::NotFound => (b"NF", 0),
        StoreResult::OutOfMemory => {
            out.extend_from_slice(errors::OUT_OF_MEMORY);
            return Flow::Next;
        }
    };
    out.extend_from_slice(status);
    for t in flags.tokens() {
        match t[0] {
            b'O' => reply::opaque(out, t),
            b'k' => reply::key(out, key),
            b'c' => reply::flag_num(out, b'c', cas),
            b's' => reply::flag_num(
                out,
                b's',
                stored_size(cx, kbytes, mode, status == b"HD", data),
            ),
            _ => {}
        }
    }
    out.extend_from_slice(b"\r\n");
    Flow::Next
}

/// `ms s` (memcached 1.6.20): the size of the stored value, which after an append or
/// prepend is the joined value's (read back without a bump; memcached takes it from
/// the item it made). A refused store reports the request's data length, as memcached.
fn stored_size(cx: &Ctx<'_>, key: &[u8], mode: Mode, stored: bool, data: &[u8]) -> usize {
    let mut size = data.len();
    if stored && matches!(mode, Mode::Append | Mode::Prepend) {
        let opts = GetOpts {
            no_bump: true,
            ..GetOpts::default()
        };
        cx.engine.get(key, &opts, &mut |it| {
            size = it.value.len();
            false
        });
    }
    size
}

fn delete(key: &Key<'_>, flags: &Flags<'_>, cx: &Ctx<'_>, out: &mut Vec<u8>) -> Flow {
    let mut kb: KeyBuf = [0; DECODED_KEY_MAX];
    let kbytes = key.decode(&mut kb);
    if flags.remove_value {
        return empty_value(key, kbytes, flags, cx, out);
    }
    let d = Delete {
        key: kbytes,
        opts: DeleteOpts {
            compare_cas: flags.compare_cas,
            invalidate: flags.invalidate,
            touch: flags.ttl.map(|t| rel(cx, t)),
            new_cas: flags.new_cas,
        },
        watched_as: Some(DeleteCmd::Md),
        prefix: false,
        cas_mismatch_misses: true,
    };
    let status: &[u8] = match delete::delete(cx, &d) {
        DeleteResult::Deleted | DeleteResult::Invalidated(_) => b"HD",
        DeleteResult::NotFound => b"NF",
        DeleteResult::Exists => b"EX",
    };
    if status == b"HD" && flags.quiet {
        return Flow::Next;
    }
    out.extend_from_slice(status);
    opaque_and_key(out, flags, key);
    out.extend_from_slice(b"\r\n");
    Flow::Next
}

/// `md x` (memcached 1.6.27's `process_mdelete_command` with `remove_val`): the
/// item's value is replaced by an empty one that keeps its CAS unique (or takes
/// `E`'s), with the request's `F` flags and `T` TTL (none without `T`); with `I` that
/// item is then marked stale as a plain `md I` marks it (`HD` even when that TTL has
/// passed). Counts as a delete hit (without `I`) or miss, as memcached's. The replacement is a CAS store of the unique
/// just read, so a write in between makes it answer `NS`, memcached's answer when its
/// store fails; under `-C` (no uniques) it is a replace.
fn empty_value(
    key: &Key<'_>,
    kbytes: &[u8],
    flags: &Flags<'_>,
    cx: &Ctx<'_>,
    out: &mut Vec<u8>,
) -> Flow {
    let no_bump = GetOpts {
        no_bump: true,
        ..GetOpts::default()
    };
    let mut cas = None;
    let mut seen = Seen::default();
    let found = cx.engine.get(kbytes, &no_bump, &mut |it| {
        cas = Some(it.cas);
        seen = Seen::of(&it);
        false
    });
    cx.counters.count_dead(found.dead());
    // `watch fetchers`: memcached's md looks the key up, and the set it makes looks
    // again; the one Relaxed load while nobody watches.
    let looked = Looked::of(found, seen);
    let watched = cx.server.watch.wants(line::FETCHERS | line::MUTATIONS);
    if watched {
        fetch::report_looked(cx, kbytes, Some(looked));
    }
    let status: &[u8] = match cas {
        None => {
            cx.counters.delete_misses.incr();
            b"NF"
        }
        Some(c) if flags.compare_cas.is_some_and(|want| want != c) => {
            cx.counters.delete_misses.incr();
            b"EX"
        }
        Some(c) => {
            let mode = if cx.server.settings.use_cas {
                Mode::Cas(c)
            } else {
                Mode::Replace
            };
            let opts = StoreOpts {
                new_cas: Some(flags.new_cas.unwrap_or(c)),
                ..StoreOpts::default()
            };
            let exptime = flags.ttl.map_or(0, |t| rel(cx, t));
            let r = cx
                .engine
                .store(mode, kbytes, flags.client_flags, exptime, b"", &opts);
            if watched {
                store::report_set(cx, kbytes, flags.client_flags, exptime, r, looked);
            }
            match r {
                StoreResult::Stored(_) if flags.invalidate => {
                    // memcached marks the item it just stored, even one whose TTL
                    // has already passed (then this finds nothing), counting and
                    // logging nothing, and answers HD.
                    let opts = DeleteOpts {
                        compare_cas: None,
                        invalidate: true,
                        touch: flags.ttl.map(|t| rel(cx, t)),
                        new_cas: flags.new_cas,
                    };
                    cx.engine.delete(kbytes, &opts);
                    b"HD"
                }
                StoreResult::Stored(_) => {
                    cx.counters.delete_hits.incr();
                    delete::report_kept(cx, kbytes, DeleteCmd::Md);
                    b"HD"
                }
                StoreResult::OutOfMemory => {
                    out.extend_from_slice(b"SERVER_ERROR out of memory\r\n");
                    return Flow::Next;
                }
                StoreResult::NotStored | StoreResult::Exists | StoreResult::NotFound => b"NS",
            }
        }
    };
    if status == b"HD" && flags.quiet {
        return Flow::Next;
    }
    out.extend_from_slice(status);
    opaque_and_key(out, flags, key);
    out.extend_from_slice(b"\r\n");
    Flow::Next
}

fn arith(key: &Key<'_>, flags: &Flags<'_>, incr: bool, cx: &Ctx<'_>, out: &mut Vec<u8>) -> Flow {
    let mut kb: KeyBuf = [0; DECODED_KEY_MAX];
    let kbytes = key.decode(&mut kb);
    let now = cx.engine.clock().now();
    let ttl = flags.ttl.map(|t| rel(cx, t));
    let viv = flags.vivify.map(|t| rel(cx, t));
    let (touch, created_exptime) = ttl_effects(flags, ttl, viv);
    let opts = DeltaOpts {
        compare_cas: flags.compare_cas,
        vivify: viv.map(|_| Vivify {
            initial: flags.initial,
            exptime: created_exptime,
        }),
        touch,
        new_cas: flags.new_cas,
    };
    let start = out.len();
    match arith::arith(cx, kbytes, incr, flags.delta, &opts, false) {
        Delta::Value(v) => {
            let mut digits = itoa::Buffer::new();
            let digits = digits.format(v.value).as_bytes();
            if flags.value {
                out.extend_from_slice(b"VA ");
                out.extend_from_slice(itoa::Buffer::new().format(digits.len()).as_bytes());
            } else {
                out.extend_from_slice(b"HD");
            }
            let mut exptime = v.exptime;
            for t in flags.tokens() {
                match t[0] {
                    b'c' => reply::flag_num(out, b'c', v.cas),
                    b't' => reply::ttl(out, exptime, now),
                    b'T' => exptime = ttl.unwrap_or(exptime),
                    b'N' if v.created => exptime = viv.unwrap_or(exptime),
                    b'O' => reply::opaque(out, t),
                    b'k' => reply::key(out, key),
                    _ => {}
                }
            }
            if flags.value {
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(digits);
            }
            out.extend_from_slice(b"\r\n");
            // memcached 1.6.45 hides a successful reply under q, for an item it
            // just created too (1.6.18 showed that one).
            if flags.quiet {
                out.truncate(start);
            }
        }
        Delta::NotFound => {
            out.extend_from_slice(b"NF");
            opaque_and_key(out, flags, key);
            out.extend_from_slice(b"\r\n");
        }
        Delta::Exists => {
            out.extend_from_slice(b"EX");
            opaque_and_key(out, flags, key);
            out.extend_from_slice(b"\r\n");
        }
        Delta::NonNumeric => {
            out.extend_from_slice(errors::NON_NUMERIC);
            return Flow::Next;
        }
        Delta::OutOfMemory => {
            out.extend_from_slice(errors::DELTA_OUT_OF_MEMORY);
            return Flow::Next;
        }
    }
    if flags.opaque_too_long() {
        // memcached notices while writing the reply, after the change is made.
        out.truncate(start);
        out.extend_from_slice(errors::OPAQUE_TOO_LONG);
    }
    Flow::Next
}

fn debug(key: &Key<'_>, cx: &Ctx<'_>, out: &mut Vec<u8>) -> Flow {
    let mut kb: KeyBuf = [0; DECODED_KEY_MAX];
    let kbytes = key.decode(&mut kb);
    cx.counters.cmd_meta.incr();
    let now = cx.engine.clock().now();
    let settings = &cx.server.settings;
    let opts = GetOpts {
        no_bump: true,
        ..GetOpts::default()
    };
    // memcached's `me` looks the key up with item_get, which `watch fetchers` logs.
    let found = Fetcher::new(cx, Counts::WatchOnly, false).get(kbytes, &opts, |it| {
        use std::io::Write;
        out.extend_from_slice(b"ME ");
        if key.is_binary() {
            memcrab_proto::text::meta::base64_encode(kbytes, out);
        } else {
            out.extend_from_slice(kbytes);
        }
        let exp: i64 = if it.exptime == 0 {
            -1
        } else {
            // memcached 1.6.45 prints `exptime - current_time` (unsigned) with %d
            // (1.6.18 printed `current_time - exptime`).
            i64::from(it.exptime.wrapping_sub(now) as i32)
        };
        let size =
            memcached_item_bytes(it.key.len(), it.flags, it.value.len(), settings.use_cas) as u32;
        let cls = crate::admin::slab::slab_class(size, settings.chunk_size, settings.growth_factor);
        // Writing to a Vec cannot fail.
        let _ = write!(
            out,
            " exp={exp} la={} cas={} fetch={} cls={cls} size={size}\r\n",
            now.wrapping_sub(it.atime),
            it.cas,
            if it.fetched { "yes" } else { "no" },
        );
        Visit::Shown
    });
    if found != Fetch::Hit {
        out.extend_from_slice(reply::EN);
    }
    Flow::Next
}

/// The command `watch mutations` names for an `ms` (memcached upgrades set and
/// replace with a `C` to cas).
fn ms_cmd(mode: SetMode, cas: bool) -> StoreCmd {
    match mode {
        SetMode::Set | SetMode::Replace if cas => StoreCmd::Cas,
        SetMode::Set => StoreCmd::Set,
        SetMode::Add => StoreCmd::Add,
        SetMode::Append => StoreCmd::Append,
        SetMode::Prepend => StoreCmd::Prepend,
        SetMode::Replace => StoreCmd::Replace,
    }
}
