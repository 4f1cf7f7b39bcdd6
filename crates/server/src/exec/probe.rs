//! The request step's measurement hook: a [`Probe`] is made when a request has been
//! parsed and finished when its reply is queued, and records what
//! the server's `Observe` keeps: the request's time in its latency series, a
//! sampled request's keys in the hot-key sketches, and a slow request in the slow
//! log (and `watch slowlog`).
//!
//! ```text
//!   request.rs: parsed ──► Probe::text / Probe::binary   (series, 1st clock read;
//!                                                        the key only if sampled
//!                                                        or the slow log is on)
//!                           exec::{text,binary}::execute
//!                          probe.done(cx, out, &flow)     (2nd clock read, record)
//! ```
//!
//! Cost, when everything is on: two reads of the time-stamp counter, a match on the
//! request to pick its series, two counter loads for a read's hit or miss, a
//! histogram bucket, and a countdown for hot-key sampling (a sampled request, one
//! in `hotkeys::SAMPLE_RATE`, also copies out its key, hashes it and takes its
//! worker's sketch locks). With `-o latency=off,hotkeys=off` and no slow log, one
//! load and a branch. Measured in docs/benchmarks.md ("Latency histograms and hot
//! keys: the cost").
//!
//! What counts as what: a read (`get`, `gat`, `mg`, binary GET/GAT) is a hit when a
//! key of it was found (`get_hits` or `touch_hits` moved: a multi-get with any key
//! found is a hit). A multi-get that pauses for a full output buffer is timed from
//! its last resumption. Parse errors are not requests and are not timed.

use std::time::{SystemTime, UNIX_EPOCH};

use memcrab_proto::binary::{Request as BinRequest, StoreKind};
use memcrab_proto::text::meta::Meta;
use memcrab_proto::text::watch as line;
use memcrab_proto::text::{Keys, Request, StoreCmd};

use super::Flow;
use crate::admin::latency::{
    self, BINARY, CAS, DECR, DELETE, GAT, GET, INCR, META, OTHER, SET, TEXT, TOUCH,
};
use crate::out::Out;
use crate::server::{Ctx, WorkerObs};

/// One request in flight: what it is, and when it started. Small, so that it stays
/// in registers across the executor call; the key is kept only when needed.
pub struct Probe<'r> {
    /// The clock reading at the start (0 when not timed).
    start: u64,
    /// Its latency series (for a read, the hit's).
    series: usize,
    /// For a read, `get_hits + touch_hits` before; else [`NOT_READ`].
    hits: u64,
    /// The key and what hot keys count: only when hot keys sample this request or
    /// the slow log is on.
    keep: Option<Keep<'r>>,
}

/// `Probe::hits` of a request that is not a read.
const NOT_READ: u64 = u64::MAX;

/// What a sampled (or possibly slow) request keeps for after its execution.
struct Keep<'r> {
    key: Key<'r>,
    /// A write's value bytes.
    stored: usize,
    /// The output's length before, for a read's reply bytes.
    out: usize,
    /// Hot keys sample this request.
    sampled: bool,
}

/// A request's key(s), split only when needed (a text get's keys stay one slice).
#[derive(Clone)]
enum Key<'r> {
    One(&'r [u8]),
    Many(Keys<'r>),
}

impl<'r> Key<'r> {
    /// The first key (empty when none).
    fn first(&self) -> &'r [u8] {
        match self {
            Key::One(k) => k,
            Key::Many(keys) => keys.clone().next().unwrap_or_default(),
        }
    }
}

impl<'r> Probe<'r> {
    /// A probe for a parsed text (or meta) request; `None` when nothing is measured.
    #[inline(always)]
    pub fn text(cx: &Ctx<'_>, req: &Request<'r>, out: &Out) -> Option<Self> {
        let w = cx.obs?;
        let (base, kind) = match req {
            Request::Get { touch: None, .. } => (TEXT, GET),
            Request::Get { .. } => (TEXT, GAT),
            Request::Store { cmd, .. } | Request::TooLarge { cmd, .. } => (TEXT, store(*cmd)),
            Request::Delete { .. } => (TEXT, DELETE),
            Request::Arith { incr: true, .. } => (TEXT, INCR),
            Request::Arith { .. } => (TEXT, DECR),
            Request::Touch { .. } => (TEXT, TOUCH),
            Request::Meta(m) => (META, meta(m)),
            _ => (TEXT, OTHER),
        };
        Some(Probe::start(cx, w, base, kind, out, &|| text_key(req)))
    }

    /// A probe for a decoded binary request whose value is `value_len` bytes.
    #[inline]
    pub fn binary(cx: &Ctx<'_>, req: &BinRequest<'r>, value_len: usize, out: &Out) -> Option<Self> {
        let w = cx.obs?;
        let (offset, key, stored) = match *req {
            BinRequest::Get {
                key,
                touch,
                no_value,
                ..
            } => match (touch, no_value) {
                (None, _) => (GET, key, 0),
                (Some(_), true) => (TOUCH, key, 0),
                (Some(_), false) => (GAT, key, 0),
            },
            BinRequest::Store { kind, key, cas, .. } => {
                let cas = cas != 0 && kind != StoreKind::Add;
                (if cas { CAS } else { SET }, key, value_len)
            }
            BinRequest::Delete { key, .. } => (DELETE, key, 0),
            BinRequest::Arith { key, incr, .. } => (if incr { INCR } else { DECR }, key, 0),
            _ => (OTHER, &[][..], 0),
        };
        Some(Probe::start(cx, w, BINARY, offset, out, &|| {
            (Key::One(key), stored)
        }))
    }

    #[inline(always)]
    fn start(
        cx: &Ctx<'_>,
        w: &WorkerObs,
        base: usize,
        kind: usize,
        out: &Out,
        key: &dyn Fn() -> (Key<'r>, usize),
    ) -> Self {
        let read = latency::is_read(kind);
        let sampled = w.sample && kind != OTHER && w.hotkeys.sampled();
        let keep = (sampled || w.slowlog_on).then(|| {
            let (key, stored) = key();
            Keep {
                key,
                stored,
                out: out.len(),
                sampled,
            }
        });
        Probe {
            start: if w.timed { w.ticks.now() } else { 0 },
            series: base + kind,
            hits: if read { hits(cx) } else { NOT_READ },
            keep,
        }
    }

    /// The reply is queued (or the request ended as `flow` says): record.
    #[inline(always)]
    pub fn done(self, cx: &Ctx<'_>, out: &Out, flow: &Flow) {
        if *flow == Flow::Suspend {
            return;
        }
        let Some(w) = cx.obs else { return };
        let mut series = self.series;
        let read = self.hits != NOT_READ;
        if read {
            series += usize::from(hits(cx) == self.hits);
        }
        let mut ns = 0;
        if w.timed {
            ns = w.ticks.ns(self.start, w.ticks.now());
            if w.latency {
                w.latencies.record(series, ns);
            }
        }
        if let Some(keep) = self.keep {
            kept(cx, w, keep, series, read, ns, out.len());
        }
    }
}

/// After a request that kept its key: the slow log, and the hot keys when sampled.
#[cold]
#[inline(never)]
fn kept(
    cx: &Ctx<'_>,
    w: &WorkerObs,
    keep: Keep<'_>,
    series: usize,
    read: bool,
    ns: u64,
    out: usize,
) {
    if cx.server.observe.timed && cx.server.observe.slowlog.is_slow_ns(ns) {
        slow(cx, series, keep.key.first(), ns / 1000);
    }
    if keep.sampled {
        let bytes = if read {
            out.saturating_sub(keep.out)
        } else {
            keep.stored
        };
        note(w, read, keep.key, bytes as u64);
    }
}

/// A text request's key(s) and value bytes.
fn text_key<'r>(req: &Request<'r>) -> (Key<'r>, usize) {
    match req {
        Request::Get { keys, .. } => (Key::Many(keys.clone()), 0),
        Request::Store { key, data, .. } => (Key::One(key), data.len()),
        Request::TooLarge { key, .. }
        | Request::Delete { key, .. }
        | Request::Arith { key, .. }
        | Request::Touch { key, .. } => (Key::One(key), 0),
        Request::Meta(m) => match m {
            Meta::Get { key, .. }
            | Meta::SetTooLarge { key, .. }
            | Meta::Delete { key, .. }
            | Meta::Arith { key, .. } => (Key::One(key.raw()), 0),
            Meta::Set { key, data, .. } => (Key::One(key.raw()), data.len()),
            _ => (Key::One(&[]), 0),
        },
        _ => (Key::One(&[]), 0),
    }
}

/// `get_hits + touch_hits` of this worker: a read hit moves one of them.
#[inline]
fn hits(cx: &Ctx<'_>) -> u64 {
    let c = cx.counters;
    c.get_hits.get().wrapping_add(c.touch_hits.get())
}

#[inline]
fn store(cmd: StoreCmd) -> usize {
    if cmd == StoreCmd::Cas {
        CAS
    } else {
        SET
    }
}

/// A meta request's series within the meta protocol.
#[inline]
fn meta(m: &Meta<'_>) -> usize {
    match m {
        Meta::Get { .. } => GET,
        Meta::Set { .. } | Meta::SetTooLarge { .. } => SET,
        Meta::Delete { .. } => DELETE,
        Meta::Arith { incr: true, .. } => INCR,
        Meta::Arith { .. } => DECR,
        _ => OTHER,
    }
}

/// Counts a sampled request in the hot-key sketches: each key of a multi-get, which
/// share its reply bytes evenly.
#[cold]
#[inline(never)]
fn note(w: &WorkerObs, read: bool, key: Key<'_>, bytes: u64) {
    match key {
        Key::Many(keys) => {
            let n = keys.clone().count().max(1) as u64;
            for k in keys {
                w.hotkeys.note(false, k, bytes / n);
            }
        }
        Key::One(k) => w.hotkeys.note(!read, k, bytes),
    }
}

/// Logs a slow request, and streams it to `watch slowlog`.
#[cold]
#[inline(never)]
fn slow(cx: &Ctx<'_>, series: usize, key: &[u8], us: u64) {
    let fd = cx.fd.get();
    let client = cx
        .server
        .conns
        .lock()
        .get(&fd)
        .map_or_else(|| "-".to_string(), |c| c.addr.clone());
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let cmd = latency::series_label(series);
    let id = cx
        .server
        .observe
        .slowlog
        .push(unix, cmd, key, us, client.clone());
    let hub = &cx.server.watch;
    if hub.wants(line::SLOWLOG) {
        hub.emit(line::SLOWLOG, &mut |out| {
            line::slow(out, id, cmd, key, us, &client, fd)
        });
    }
}
