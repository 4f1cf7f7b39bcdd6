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
use memcrab_proto::text::{Config, Keys, Request, StoreCmd};

use super::Flow;
use crate::admin::latency::{
    self, BINARY, CAS, DECR, DELETE, GAT, GET, INCR, META, OTHER, SET, TEXT, TOUCH,
};
use crate::out::Out;
use crate::server::{Ctx, WorkerObs};

/// One request in flight: its series, and what its record needs after the
/// executor. Two words, so that it is returned and kept in registers; the key is
/// not kept (a sampled or slow request finds it again in the request's bytes, which
/// outlive the step), nor, for a sampled read, the output's length before (the
/// worker's `HotKeys` keeps it).
pub struct Probe {
    /// Its latency series (for a read, the hit's).
    series: u32,
    /// Hot keys sample this request.
    sampled: bool,
    /// For a read, `get_hits + touch_hits` before; else [`NOT_READ`].
    hits: u64,
}

/// `Probe::hits` of a request that is not a read.
const NOT_READ: u64 = u64::MAX;

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

/// The request clock's reading that starts a request's interval: the end of the
/// previous request in the same batch, or the batch's start ([`now`]); 0 when
/// nothing is timed.
pub type Mark = u64;

/// A reading of this worker's request clock, where requests are timed (else 0).
#[inline(always)]
pub fn now(cx: &Ctx<'_>) -> Mark {
    match cx.obs {
        Some(w) if w.timed => w.ticks.now(),
        _ => 0,
    }
}

impl Probe {
    /// A probe for a parsed text (or meta) request; `None` when nothing is measured.
    /// Kept out of line: inlined into the request step, it made the compiler copy
    /// the parsed request before its executor (some 30 instructions a request, with
    /// measurement on or off).
    #[inline(never)]
    pub fn text(cx: &Ctx<'_>, req: &Request<'_>, out: &Out) -> Option<Self> {
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
        Some(Probe::start(cx, w, base, kind, out))
    }

    /// A probe for a decoded binary request.
    #[inline]
    pub fn binary(cx: &Ctx<'_>, req: &BinRequest<'_>, out: &Out) -> Option<Self> {
        let w = cx.obs?;
        let offset = match *req {
            BinRequest::Get {
                touch, no_value, ..
            } => match (touch, no_value) {
                (None, _) => GET,
                (Some(_), true) => TOUCH,
                (Some(_), false) => GAT,
            },
            BinRequest::Store { kind, cas, .. } => {
                if cas != 0 && kind != StoreKind::Add {
                    CAS
                } else {
                    SET
                }
            }
            BinRequest::Delete { .. } => DELETE,
            BinRequest::Arith { incr, .. } => {
                if incr {
                    INCR
                } else {
                    DECR
                }
            }
            _ => OTHER,
        };
        Some(Probe::start(cx, w, BINARY, offset, out))
    }

    #[inline(always)]
    fn start(cx: &Ctx<'_>, w: &WorkerObs, base: usize, kind: usize, out: &Out) -> Self {
        let read = latency::is_read(kind);
        let sampled = w.sample && kind != OTHER && w.hotkeys.sampled();
        if sampled {
            w.hotkeys.start_sample(out.len());
        }
        Probe {
            series: (base + kind) as u32,
            sampled,
            hits: if read { hits(cx) } else { NOT_READ },
        }
    }

    /// The reply is queued (or the request ended as `flow` says): records the
    /// interval from `start` to now, and returns now (the next request's start).
    /// `key` says where the request's key(s) and value bytes are found again, for a
    /// sampled request, or any when the slow log is on.
    #[inline(always)]
    pub fn done<'r>(
        self,
        cx: &Ctx<'_>,
        out: &Out,
        flow: &Flow,
        start: Mark,
        key: impl FnOnce() -> Source<'r>,
    ) -> Mark {
        if *flow == Flow::Suspend {
            return start;
        }
        let Some(w) = cx.obs else { return start };
        let mut series = self.series as usize;
        if self.hits != NOT_READ {
            series += usize::from(hits(cx) == self.hits);
        }
        let mut end = start;
        if w.timed {
            end = w.ticks.now();
            if w.latency {
                w.latencies.record(series, end.saturating_sub(start));
            }
        }
        if self.sampled || w.slowlog_on {
            kept(
                cx,
                w,
                self,
                key(),
                series,
                w.ticks.ns(start, end),
                out.len(),
            );
        }
        end
    }
}

/// After a sampled request, or any while the slow log is on: the slow log when it
/// took `ns` or longer, and the hot keys when sampled.
#[cold]
#[inline(never)]
fn kept(
    cx: &Ctx<'_>,
    w: &WorkerObs,
    probe: Probe,
    source: Source<'_>,
    series: usize,
    ns: u64,
    out: usize,
) {
    let slow = w.slowlog_on && cx.server.observe.slowlog.is_slow_ns(ns);
    if !slow && !probe.sampled {
        return;
    }
    let (key, stored) = match source {
        Source::Text(input, cfg) => text_key_in(input, cfg),
        Source::Binary(key, value_len) => (Key::One(key), value_len),
    };
    if slow {
        slow_request(cx, series, key.first(), ns / 1000);
    }
    if probe.sampled {
        let read = probe.hits != NOT_READ;
        let bytes = if read {
            w.hotkeys.reply_bytes(out)
        } else {
            stored as u64
        };
        note(w, read, key, bytes);
    }
}

/// Where a finished request's key(s) are found again: a text request at the front
/// of this input (parsed again with this configuration: the request itself went to
/// its executor), or a binary request's key and value length.
pub enum Source<'r> {
    Text(&'r [u8], &'r Config),
    Binary(&'r [u8], usize),
}

/// The key(s) and value bytes of the text request at the front of `input`.
fn text_key_in<'r>(input: &'r [u8], cfg: &Config) -> (Key<'r>, usize) {
    match memcrab_proto::text::parse(input, cfg) {
        Some((Ok(req), _)) => text_key(&req),
        _ => (Key::One(&[]), 0),
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
fn slow_request(cx: &Ctx<'_>, series: usize, key: &[u8], us: u64) {
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
