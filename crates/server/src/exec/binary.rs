//! Binary-protocol requests: each maps its fields onto a command family's call
//! (`super::fetch`, `store`, `delete`, `arith`, `admin`) and encodes memcached
//! 1.6.18's responses (`proto_bin.c`): statuses and error texts, CAS in every
//! mutation's response, quiet forms that hide only what memcached hides (successes;
//! a getq/getkq/gatq miss), SASL PLAIN, and `stats` groups as packets.
//!
//! Framing and validation live in `memcrab_proto::binary`; the request step
//! (`crate::request`) frames packets, checks value sizes with [`with_value_len`]
//! before waiting for a value, and calls [`execute`] once the whole packet is
//! buffered.

use std::iter::once;

use memcrab_proto::binary::{self as bin, status, Header, Request, StoreKind, NO_CREATE};
use memcrab_proto::text;
use memcrab_store::{
    DeleteOpts, DeleteResult, Delta, DeltaOpts, GetOpts, Mode, StoreOpts, StoreResult, Vivify,
};

use super::admin;
use super::arith::arith;
use super::delete::{self, Delete};
use super::fetch::{self, Counts, Fetcher, Visit};
use super::probe::{hot, mark, mark_read};
use super::store::{self, Store};
use super::Flow;
use crate::admin::latency::{BINARY, CAS, DECR, DELETE, GAT, GET, INCR, OTHER, SET, TOUCH};
use crate::out::Out;
use crate::server::{Ctx, VERSION};
use crate::startup::auth;

/// A connection's SASL state.
#[derive(Debug, Default)]
pub struct SaslState {
    /// A SASL exchange succeeded (cleared when a new one starts, as memcached).
    pub authenticated: bool,
    /// `SASL_AUTH` started an exchange that `SASL_STEP` may continue.
    pub started: bool,
    /// PLAIN was started without data: the next step carries the message.
    pub awaiting_plain: bool,
    /// An exchange succeeded on this connection: cyrus SASL (memcached's) refuses
    /// every later start or step on the same SASL connection object.
    pub completed: bool,
}

/// A decoded request with the number of value bytes that follow its key, or, when
/// its item cannot fit `-I`, `Reject::Swallow` of the error status and the value's
/// length. Values are checked before they are waited for, as memcached's item_alloc
/// is called once the key has arrived; a refused set also removes the old value,
/// and counts as too large.
#[inline]
pub fn with_value_len<'a>(
    req: Request<'a>,
    cfg: &text::Config,
    cx: &Ctx<'_>,
) -> Result<(Request<'a>, usize), bin::Reject> {
    match req {
        Request::Store {
            kind,
            key,
            flags,
            value_len,
            ..
        } => {
            if text::item_size_ok(key.len(), flags, value_len, cfg) {
                return Ok((req, value_len));
            }
            // memcached names no command for a binary store refused here. A
            // failed set must not leave the old value readable.
            store::too_large(cx, key, None, true, kind == StoreKind::Set);
            Err(bin::Reject::Swallow(status::E2BIG, value_len))
        }
        Request::SaslAuth {
            mech, value_len, ..
        } => {
            if text::item_size_ok(mech.len(), 0, value_len, cfg) {
                return Ok((req, value_len));
            }
            Err(bin::Reject::Swallow(status::ENOMEM, value_len))
        }
        _ => Ok((req, 0)),
    }
}

/// Executes one validated request whose value (if any) is `value`, and [`mark`]s it
/// with its latency series (`exec/probe.rs`).
pub fn execute(
    h: &Header,
    req: Request<'_>,
    value: &[u8],
    cx: &Ctx<'_>,
    out: &mut Out,
    sasl: &mut SaslState,
) -> Flow {
    let clock = cx.engine.clock();
    let ok = |out: &mut Vec<u8>, quiet: bool| {
        if !quiet {
            bin::simple(out, h, status::SUCCESS, 0, b"");
        }
    };
    mark(cx, BINARY + OTHER);
    match req {
        Request::Get {
            key,
            quiet,
            with_key,
            touch,
            no_value,
        } => {
            hot(cx, || once(key), 0, out);
            let touch = touch.map(|t| clock.realtime(i64::from(t)));
            let found = get(h, key, touch, with_key, no_value, cx, out);
            // TOUCH is no read: one series, hit or miss.
            match (touch, no_value) {
                (None, _) => mark_read(cx, BINARY + GET, found.is_hit()),
                (Some(_), true) => mark(cx, BINARY + TOUCH),
                (Some(_), false) => mark_read(cx, BINARY + GAT, found.is_hit()),
            }
            if !found.is_hit() && !quiet {
                if with_key {
                    bin::miss_with_key(out, h, key);
                } else {
                    bin::error(out, h, status::KEY_ENOENT);
                }
            }
        }
        Request::Store {
            kind,
            key,
            quiet,
            flags,
            exptime,
            cas,
            ..
        } => {
            // A store with a CAS is `cas` (an add's CAS is ignored), even under -C.
            let series = if cas != 0 && kind != StoreKind::Add {
                CAS
            } else {
                SET
            };
            mark(cx, BINARY + series);
            hot(cx, || once(key), value.len(), out);
            // Under -C items carry no CAS, so memcached never sees the request's.
            let cas = if cx.server.settings.use_cas { cas } else { 0 };
            let (mode, opts) = store_mode(kind, cas);
            let s = Store {
                mode,
                key,
                flags,
                exptime: clock.realtime(i64::from(exptime)),
                value,
                opts,
                cmd: store::cmd_of(mode),
                prefix: true,
                oom_drops_old: false,
            };
            let r = store::store(cx, &s);
            stored(out, h, mode, quiet, r);
        }
        Request::Delete { key, quiet, cas } => {
            mark(cx, BINARY + DELETE);
            hot(cx, || once(key), 0, out);
            let d = Delete {
                key,
                opts: DeleteOpts {
                    compare_cas: (cas != 0).then_some(cas),
                    ..DeleteOpts::default()
                },
                watched_as: None,
                prefix: true,
                cas_mismatch_misses: false,
            };
            match delete::delete(cx, &d) {
                DeleteResult::Deleted | DeleteResult::Invalidated(_) => ok(out, quiet),
                DeleteResult::NotFound => bin::error(out, h, status::KEY_ENOENT),
                DeleteResult::Exists => bin::error(out, h, status::KEY_EEXISTS),
            }
        }
        Request::Arith {
            key,
            quiet,
            incr,
            delta,
            initial,
            exptime,
            cas,
        } => {
            mark(cx, BINARY + if incr { INCR } else { DECR });
            hot(cx, || once(key), 0, out);
            let opts = DeltaOpts {
                compare_cas: (cas != 0).then_some(cas),
                vivify: (exptime != NO_CREATE).then(|| Vivify {
                    initial,
                    exptime: clock.realtime(i64::from(exptime)),
                }),
                ..DeltaOpts::default()
            };
            let r = arith(cx, key, incr, delta, &opts, true);
            counted(out, h, quiet, r);
        }
        Request::Quit { quiet } => {
            ok(out, quiet);
            return Flow::Quit;
        }
        Request::Flush { quiet, delay } => {
            if admin::flush_all(cx, i64::from(delay), false) {
                ok(out, quiet);
            } else {
                bin::error(out, h, status::AUTH_ERROR);
            }
        }
        Request::Noop => ok(out, false),
        Request::Version => bin::simple(out, h, status::SUCCESS, 0, VERSION.as_bytes()),
        Request::Stat { key } => stat(h, key, cx, out),
        Request::SaslListMechs => bin::simple(out, h, status::SUCCESS, 0, auth::SASL_MECHS),
        Request::SaslAuth { step, mech, .. } => sasl_auth(h, step, mech, value, cx, out, sasl),
    }
    Flow::Next
}

/// GET/GETK/GAT/GATK/TOUCH and their quiet forms: the hit's response (its key with
/// `with_key`, its value unless `no_value`, TOUCH), or nothing on a miss.
fn get(
    h: &Header,
    key: &[u8],
    touch: Option<memcrab_store::RelTime>,
    with_key: bool,
    no_value: bool,
    cx: &Ctx<'_>,
    out: &mut Out,
) -> memcrab_store::Fetch {
    let opts = GetOpts {
        touch,
        ..GetOpts::default()
    };
    let counts = if touch.is_some() {
        Counts::Touch
    } else {
        Counts::Get
    };
    let fetcher = Fetcher::new(cx, counts, true);
    fetcher.get(key, &opts, |it| {
        let key = with_key.then_some(key);
        if !no_value && out.lends(it.value.len()) {
            // Sent from the store's memory (see out.rs) unless it won't lend.
            bin::hit_head(out, h, it.cas, it.flags, key, it.value.len());
            fetch::value(cx, out, it);
        } else {
            let value = (!no_value).then_some(it.value);
            bin::hit(out, h, it.cas, it.flags, key, value);
        }
        Visit::Shown
    })
}

/// INCREMENT/DECREMENT's response: the new value and CAS (a quiet success says
/// nothing), or memcached's status.
fn counted(out: &mut Vec<u8>, h: &Header, quiet: bool, r: Delta) {
    match r {
        Delta::Value(v) => {
            if !quiet {
                bin::simple(out, h, status::SUCCESS, v.cas, &v.value.to_be_bytes());
            }
        }
        Delta::NotFound => bin::error(out, h, status::KEY_ENOENT),
        Delta::NonNumeric => bin::error(out, h, status::DELTA_BADVAL),
        Delta::Exists => bin::error(out, h, status::KEY_EEXISTS),
        Delta::OutOfMemory => bin::simple(
            out,
            h,
            status::ENOMEM,
            0,
            b"Out of memory incrementing value",
        ),
    }
}

/// A store's mode and options: append and prepend compare a CAS, other stores with
/// one are memcached's cas.
fn store_mode(kind: StoreKind, cas: u64) -> (Mode, StoreOpts) {
    match kind {
        StoreKind::Append | StoreKind::Prepend => (
            if kind == StoreKind::Append {
                Mode::Append
            } else {
                Mode::Prepend
            },
            StoreOpts {
                compare_cas: (cas != 0).then_some(cas),
                ..StoreOpts::default()
            },
        ),
        _ if cas != 0 => (Mode::Cas(cas), StoreOpts::default()),
        StoreKind::Set => (Mode::Set, StoreOpts::default()),
        StoreKind::Add => (Mode::Add, StoreOpts::default()),
        StoreKind::Replace => (Mode::Replace, StoreOpts::default()),
    }
}

/// A store's response (`process_bin_update`'s statuses; a quiet success says nothing).
fn stored(out: &mut Vec<u8>, h: &Header, mode: Mode, quiet: bool, r: StoreResult) {
    match r {
        StoreResult::Stored(new_cas) => {
            if !quiet {
                bin::simple(out, h, status::SUCCESS, new_cas, b"");
            }
        }
        StoreResult::Exists => bin::error(out, h, status::KEY_EEXISTS),
        StoreResult::NotFound => bin::error(out, h, status::KEY_ENOENT),
        StoreResult::NotStored => {
            let st = match mode {
                Mode::Add => status::KEY_EEXISTS,
                Mode::Replace => status::KEY_ENOENT,
                _ => status::NOT_STORED,
            };
            bin::error(out, h, st);
        }
        StoreResult::OutOfMemory => {
            if matches!(mode, Mode::Append | Mode::Prepend) {
                bin::error(out, h, status::NOT_STORED);
            } else {
                bin::simple(out, h, status::ENOMEM, 0, b"Out of memory allocating item");
            }
        }
    }
}

/// `process_bin_complete_sasl_auth` with PLAIN as the only mechanism.
fn sasl_auth(
    h: &Header,
    step: bool,
    mech: &[u8],
    data: &[u8],
    cx: &Ctx<'_>,
    out: &mut Vec<u8>,
    st: &mut SaslState,
) {
    // memcached's init_sasl_conn: every exchange starts unauthenticated.
    st.authenticated = false;
    let users = cx.server.users();
    let users = users.as_deref();
    enum R {
        Ok,
        Continue,
        Fail,
    }
    let r = if st.completed {
        R::Fail
    } else if !step {
        if mech != b"PLAIN" {
            st.started = false;
            R::Fail
        } else if data.is_empty() {
            st.started = true;
            st.awaiting_plain = true;
            R::Continue
        } else {
            st.started = true;
            st.awaiting_plain = false;
            if users.is_some_and(|u| auth::sasl_plain(u, data)) {
                R::Ok
            } else {
                R::Fail
            }
        }
    } else if st.started && st.awaiting_plain {
        st.awaiting_plain = false;
        if users.is_some_and(|u| auth::sasl_plain(u, data)) {
            R::Ok
        } else {
            R::Fail
        }
    } else {
        R::Fail
    };
    let c = cx.counters;
    match r {
        R::Ok => {
            st.authenticated = true;
            st.completed = true;
            c.auth_cmds.incr();
            bin::simple(out, h, status::SUCCESS, 0, b"Authenticated");
        }
        R::Continue => bin::simple(out, h, status::AUTH_CONTINUE, 0, b""),
        R::Fail => {
            c.auth_cmds.incr();
            c.auth_errors.incr();
            bin::error(out, h, status::AUTH_ERROR);
        }
    }
}

/// `process_bin_stat`: the text rendering of a stats group, one packet per line.
fn stat(h: &Header, key: &[u8], cx: &Ctx<'_>, out: &mut Vec<u8>) {
    let mut text = Vec::new();
    let group: Option<&[u8]> = if key.is_empty() {
        None
    } else if key.starts_with(b"reset") {
        cx.server.reset_stats();
        bin::stat(out, h.opaque, b"", b"");
        return;
    } else if key.starts_with(b"settings") {
        Some(b"settings")
    } else if let Some(rest) = key.strip_prefix(b"detail") {
        // memcached 1.6.44: `-X` refuses binary `stats detail` too.
        if !cx.server.settings.dump_enabled {
            bin::error(out, h, status::KEY_ENOENT);
            return;
        }
        // Prefix stats are never collected by memcrab: "on"/"off" are accepted,
        // "dump" shows memcached's empty dump.
        if rest.starts_with(b" dump") {
            bin::stat(out, h.opaque, b"detailed", b"END\r\n");
        } else if !(rest.starts_with(b" on") || rest.starts_with(b" off")) {
            bin::error(out, h, status::KEY_ENOENT);
            return;
        }
        bin::stat(out, h.opaque, b"", b"");
        return;
    } else if matches!(key, b"items" | b"slabs" | b"sizes") {
        Some(key)
    } else {
        bin::error(out, h, status::KEY_ENOENT);
        return;
    };
    crate::admin::stats::render(cx.server, group, None, cx.fd.get(), &mut text);
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(kv) = line.strip_prefix(b"STAT ") {
            let (k, v) = match kv.iter().position(|&b| b == b' ') {
                Some(i) => (&kv[..i], &kv[i + 1..]),
                None => (kv, &b""[..]),
            };
            bin::stat(out, h.opaque, k, v);
        }
    }
    bin::stat(out, h.opaque, b"", b"");
}
