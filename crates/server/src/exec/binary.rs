//! Binary-protocol requests against the store, with memcached 1.6.18's responses
//! (`proto_bin.c`): statuses and error texts, CAS in every mutation's response,
//! quiet forms that hide only what memcached hides (successes; a getq/getkq/gatq
//! miss), SASL PLAIN, and memcached's stats counters.
//!
//! Framing and validation live in `memcrab_proto::binary`; the request step
//! (`crate::request`) frames packets, checks value sizes with [`with_value_len`]
//! before waiting for a value, and calls [`execute`] once the whole packet is
//! buffered.

use memcrab_proto::binary::{self as bin, status, Header, Request, StoreKind, NO_CREATE};
use memcrab_proto::text;
use memcrab_store::{
    DeleteOpts, DeleteResult, Delta, DeltaOpts, GetOpts, Mode, StoreOpts, StoreResult, Vivify,
};

use super::{
    count_fetch, count_store, count_too_large, store_cmd, Ctx, FetchWatch, Flow, Mutation,
};
use crate::admin::prefix::Op;
use crate::io::out::Out;
use crate::server::VERSION;
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
            // memcached names no command for a binary store refused here.
            count_too_large(cx, key, None);
            cx.server.prefixes.record(key, Op::Set);
            if kind == StoreKind::Set {
                // A failed set must not leave the old value readable.
                cx.engine.delete(key, &DeleteOpts::default());
            }
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

/// Executes one validated request whose value (if any) is `value`.
pub fn execute(
    h: &Header,
    req: Request<'_>,
    value: &[u8],
    cx: &Ctx<'_>,
    out: &mut Out,
    sasl: &mut SaslState,
) -> Flow {
    let c = cx.counters;
    let clock = cx.engine.clock();
    match req {
        Request::Get {
            key,
            quiet,
            with_key,
            touch,
            no_value,
        } => {
            let opts = GetOpts {
                touch: touch.map(|t| clock.realtime(i64::from(t))),
                ..GetOpts::default()
            };
            let mut fw = FetchWatch::new(cx);
            let found = cx.engine.get(key, &opts, &mut |it| {
                fw.hit(&it);
                let key = with_key.then_some(key);
                if !no_value && out.lends(it.value.len()) {
                    // Sent from the store's memory (see out.rs) unless it won't lend.
                    bin::hit_head(out, h, it.cas, it.flags, key, it.value.len());
                    if out.value(&it) {
                        c.values_lent.incr();
                    }
                } else {
                    bin::hit(
                        out,
                        h,
                        it.cas,
                        it.flags,
                        key,
                        (!no_value).then_some(it.value),
                    );
                }
                false
            });
            count_fetch(cx, key, touch.is_some(), found, &fw);
            let hit = found.is_hit();
            cx.server.prefixes.record(key, Op::Get { hit });
            if !hit && !quiet {
                if with_key {
                    bin::miss_with_key(out, h, key);
                } else {
                    bin::error(out, h, status::KEY_ENOENT);
                }
            }
            Flow::Next
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
            // Under -C items carry no CAS, so memcached never sees the request's.
            let cas = if cx.server.settings.use_cas { cas } else { 0 };
            let (mode, opts) = match kind {
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
            };
            cx.server.prefixes.record(key, Op::Set);
            let exptime = clock.realtime(i64::from(exptime));
            let r = cx.engine.store(mode, key, flags, exptime, value, &opts);
            count_store(cx, matches!(mode, Mode::Cas(_)), r, || Mutation {
                key,
                cmd: store_cmd(mode),
                flags,
                exptime,
                value_len: value.len(),
            });
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
            Flow::Next
        }
        Request::Delete { key, quiet, cas } => {
            cx.server.prefixes.record(key, Op::Delete);
            let opts = DeleteOpts {
                compare_cas: (cas != 0).then_some(cas),
                ..DeleteOpts::default()
            };
            match cx.engine.delete(key, &opts) {
                DeleteResult::Deleted | DeleteResult::Invalidated(_) => {
                    c.delete_hits.incr();
                    if !quiet {
                        bin::simple(out, h, status::SUCCESS, 0, b"");
                    }
                }
                DeleteResult::NotFound => {
                    c.delete_misses.incr();
                    bin::error(out, h, status::KEY_ENOENT);
                }
                DeleteResult::Exists => bin::error(out, h, status::KEY_EEXISTS),
            }
            Flow::Next
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
            let opts = DeltaOpts {
                compare_cas: (cas != 0).then_some(cas),
                vivify: (exptime != NO_CREATE).then(|| Vivify {
                    initial,
                    exptime: clock.realtime(i64::from(exptime)),
                }),
                ..DeltaOpts::default()
            };
            match cx.engine.delta(key, incr, delta, &opts) {
                Delta::Value(v) => {
                    if !v.created {
                        c.count_delta(incr, true);
                    }
                    if !quiet {
                        bin::simple(out, h, status::SUCCESS, v.cas, &v.value.to_be_bytes());
                    }
                }
                Delta::NotFound => {
                    c.count_delta(incr, false);
                    bin::error(out, h, status::KEY_ENOENT);
                }
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
            Flow::Next
        }
        Request::Quit { quiet } => {
            if !quiet {
                bin::simple(out, h, status::SUCCESS, 0, b"");
            }
            Flow::Quit
        }
        Request::Flush { quiet, delay } => {
            if !cx.server.settings.flush_enabled {
                bin::error(out, h, status::AUTH_ERROR);
                return Flow::Next;
            }
            c.cmd_flush.incr();
            let at = (delay > 0).then(|| clock.realtime(i64::from(delay)));
            cx.engine.flush_all(at);
            if !quiet {
                bin::simple(out, h, status::SUCCESS, 0, b"");
            }
            Flow::Next
        }
        Request::Noop => {
            bin::simple(out, h, status::SUCCESS, 0, b"");
            Flow::Next
        }
        Request::Version => {
            bin::simple(out, h, status::SUCCESS, 0, VERSION.as_bytes());
            Flow::Next
        }
        Request::Stat { key } => {
            stat(h, key, cx, out);
            Flow::Next
        }
        Request::SaslListMechs => {
            bin::simple(out, h, status::SUCCESS, 0, auth::SASL_MECHS);
            Flow::Next
        }
        Request::SaslAuth { step, mech, .. } => {
            sasl_auth(h, step, mech, value, cx, out, sasl);
            Flow::Next
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
    crate::admin::stats::render(cx.server, group, None, &mut text);
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
