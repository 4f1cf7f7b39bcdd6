//! The request step's measurement hook: a [`Probe`] is made when a request has been
//! parsed and finished when its reply is queued; it records what the server's
//! `Observe` keeps: the request in its latency series (through the [`Batch`] of
//! its `Session::serve` call), a sampled request's keys in the hot-key sketches,
//! and a slow request in the slow log (and `watch slowlog`).
//!
//! ```text
//!   request.rs: serve ──► Batch::begin                (clock read)
//!     each request: parsed ──► Probe::text / Probe::binary  (series; hot-key countdown)
//!                               exec::{text,meta,binary}::execute
//!                              probe.done(cx, out, &flow, &mut batch, key)
//!                                 (hit or miss; the series joins the batch)
//!   serve ends ──► Batch::end                          (clock read; each request of
//!                                                       the batch gets 1/n of it)
//! ```
//!
//! What a request's time is: the clock is read at a batch's start and end, not per
//! request (one read of the time-stamp counter costs 15-25 ns here, 2-3% of a
//! pipelined request's CPU by itself), and each of the batch's `n` requests is
//! recorded as `1/n` of the time between: exact for a request served alone, its
//! batch's average for pipelined ones. The time covers the parse, the execution,
//! the parse-ahead for the requests after, and whatever else the batch did (a parse
//! error's reply, discarded bytes, a paused multi-get's first keys). With the slow
//! log on, each request is timed on its own instead (from the previous one's end),
//! so that a slow one is found.
//!
//! Cost, with histograms and hot keys on (the default): per request, a call that
//! picks the series (a match on the request), the hot-key countdown and, for a
//! read, a load of the hit counters; after it, the hit check and a byte appended to
//! the batch; per batch, two clock reads and a bucket increment, sum and maximum
//! per request. A sampled request, one in `hotkeys::SAMPLE_RATE`, also copies its
//! key(s) out of the parsed request as it starts (`HotKeys::begin`, out of line)
//! and counts them as it ends (`HotKeys::end`: a hash and two small sketches,
//! under its worker's sketch lock, taken once each time). With `-o
//! latency=off,hotkeys=off` and no slow log, one load and a branch. Measured in
//! docs/benchmarks.md ("Latency histograms and hot keys: the cost").
//!
//! What counts as what: a read (`get`, `gat`, `mg`, binary GET/GAT) is a hit when a
//! key of it was found (`get_hits` or `touch_hits` moved: a multi-get with any key
//! found is a hit). A multi-get that pauses for a full output buffer is recorded in
//! the batch of its last resumption. Parse errors are not requests and are not
//! recorded.

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
/// executor. One word, so that it is returned and kept in a register; the key is
/// not kept (a sampled request's key(s) wait in its worker's `HotKeys`, a slow
/// request's is found again in the request's bytes, which outlive the step), nor,
/// for a sampled read, the output's length before (`HotKeys` keeps it too).
pub struct Probe {
    /// For a read, the low 32 bits of `get_hits + touch_hits` before (a request
    /// does not move them by 2^32).
    hits: u32,
    /// Its latency series (for a read, the hit's).
    series: u8,
    /// A read: `hits` is set, and the series is the miss's if they do not move.
    read: bool,
    /// Hot keys sample this request.
    sampled: bool,
    /// `sampled`, or the slow log is on: [`kept`] sees it when it ends.
    kept: bool,
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

impl Probe {
    /// A probe for a parsed text (or meta) request; `None` when nothing is measured.
    /// Kept out of line: inlined into the request step, it made the compiler copy
    /// the parsed request before its executor (some 30 instructions a request, with
    /// measurement on or off); with the `obs` check outside it, a measured request
    /// cost some 16 instructions more (callgrind, W2).
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
        let p = Probe::start(cx, w, base, kind);
        if p.sampled {
            begin_text(w, req, out.len());
        }
        Some(p)
    }

    /// A probe for a decoded binary request, whose packet has this key and
    /// `value_len` value bytes.
    #[inline]
    pub fn binary(
        cx: &Ctx<'_>,
        req: &BinRequest<'_>,
        key: &[u8],
        value_len: usize,
        out: &Out,
    ) -> Option<Self> {
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
        let p = Probe::start(cx, w, BINARY, offset);
        if p.sampled {
            let stored = if p.read { 0 } else { value_len };
            w.hotkeys.begin(std::iter::once(key), stored, out.len());
        }
        Some(p)
    }

    #[inline(always)]
    fn start(cx: &Ctx<'_>, w: &WorkerObs, base: usize, kind: usize) -> Self {
        let read = latency::is_read(kind);
        let sampled = w.sample && kind != OTHER && w.hotkeys.sampled();
        Probe {
            hits: if read { hits(cx) } else { 0 },
            series: (base + kind) as u8,
            read,
            sampled,
            kept: sampled || w.slowlog_on,
        }
    }

    /// The reply is queued (or the request ended as `flow` says): the request
    /// joins `batch` (or, while the slow log is on, is timed on its own), and a
    /// sampled one is counted in the hot keys. `key` says where the request's key
    /// is found again for the slow log.
    #[inline(always)]
    pub fn done<'r>(
        self,
        cx: &Ctx<'_>,
        out: &Out,
        flow: &Flow,
        batch: &mut Batch,
        key: impl FnOnce() -> Source<'r>,
    ) {
        if *flow == Flow::Suspend {
            return;
        }
        let Some(w) = cx.obs else { return };
        let mut series = self.series as usize;
        if self.read {
            series += usize::from(hits(cx) == self.hits);
        }
        if w.batched {
            batch.push(w, series);
        }
        if self.kept {
            let ns = if w.slowlog_on {
                batch.exact(w, series)
            } else {
                0
            };
            kept(cx, w, self, key(), series, ns, out.len());
        }
    }
}

/// Requests per [`Batch`] at most: a fuller one is recorded early.
const BATCH: usize = 32;

/// The timed requests of one `Session::serve` (or `step`) call, recorded together
/// when it ends: the clock is read at its start and its end, and each of its `n`
/// requests is recorded as `1/n` of the time between, in its own series. A request
/// served alone is thus timed exactly; pipelined requests share their batch's time
/// evenly (one clock read a request would cost some 2-3% of a pipelined request's
/// CPU). While the slow log is on, each request is timed on its own instead (the
/// interval from the previous one's end), so that a slow one is found.
#[derive(Debug)]
pub struct Batch {
    /// The clock reading where the batch (or, while the slow log is on, the next
    /// request) starts; 0 when nothing is timed.
    start: u64,
    /// Series of the requests finished so far.
    series: [u8; BATCH],
    n: usize,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            start: 0,
            series: [0; BATCH],
            n: 0,
        }
    }
}

impl Batch {
    /// A batch starts: reads the clock, where requests are timed.
    #[inline(always)]
    pub fn begin(&mut self, cx: &Ctx<'_>) {
        self.n = 0;
        self.start = match cx.obs {
            Some(w) if w.timed => w.ticks.now(),
            _ => 0,
        };
    }

    /// The batch ends: records its requests (one alone, here: a request that comes
    /// alone is the common case of a client that waits for each reply).
    #[inline(always)]
    pub fn end(&mut self, cx: &Ctx<'_>) {
        if self.n == 0 {
            return;
        }
        let Some(w) = cx.obs else { return };
        if self.n == 1 {
            let now = w.ticks.now();
            w.latencies
                .record(usize::from(self.series[0]), now.saturating_sub(self.start));
            self.n = 0;
        } else {
            self.record(w);
        }
    }

    #[inline(always)]
    fn push(&mut self, w: &WorkerObs, series: usize) {
        if let Some(s) = self.series.get_mut(self.n) {
            *s = series as u8;
            self.n += 1;
        }
        if self.n == BATCH {
            self.record(w);
        }
    }

    /// Records the requests so far, each as its share of the time since the start,
    /// and starts anew.
    #[inline(never)]
    fn record(&mut self, w: &WorkerObs) {
        let now = w.ticks.now();
        let span = now.saturating_sub(self.start);
        match self.n {
            1 => w.latencies.record(usize::from(self.series[0]), span),
            n => {
                let share = span / n.max(1) as u64;
                w.latencies.record_all(&self.series[..n.min(BATCH)], share);
            }
        }
        self.n = 0;
        self.start = now;
    }

    /// While the slow log is on: the request just finished took the time since the
    /// previous one (or the batch's start), in nanoseconds; recorded in its series
    /// when the histograms are on.
    #[cold]
    #[inline(never)]
    fn exact(&mut self, w: &WorkerObs, series: usize) -> u64 {
        let now = w.ticks.now();
        let units = now.saturating_sub(self.start);
        self.start = now;
        if w.latency {
            w.latencies.record(series, units);
        }
        w.ticks.ns(0, units)
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
    if probe.sampled {
        w.hotkeys.end(probe.read, out);
    }
    if w.slowlog_on && cx.server.observe.slowlog.is_slow_ns(ns) {
        let key = match source {
            Source::Text(input, cfg) => text_key_in(input, cfg).0,
            Source::Binary(key) => Key::One(key),
        };
        slow_request(cx, series, key.first(), ns / 1000);
    }
}

/// A sampled text request starts: its key(s), and the value bytes it stores, are
/// kept until it ends ([`HotKeys::begin`](crate::admin::hotkeys::HotKeys::begin)).
#[cold]
#[inline(never)]
fn begin_text(w: &WorkerObs, req: &Request<'_>, out: usize) {
    match text_key(req) {
        (Key::One(k), stored) => w.hotkeys.begin(std::iter::once(k), stored, out),
        (Key::Many(keys), stored) => w.hotkeys.begin(keys, stored, out),
    }
}

/// Where a finished request's key(s) are found again for the slow log: a text
/// request at the front of this input (parsed again with this configuration: the
/// request itself went to its executor), or a binary request's key.
pub enum Source<'r> {
    Text(&'r [u8], &'r Config),
    Binary(&'r [u8]),
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

/// `get_hits + touch_hits` of this worker (their low 32 bits): a read hit moves
/// one of them.
#[inline]
fn hits(cx: &Ctx<'_>) -> u32 {
    let c = cx.counters;
    c.get_hits.get().wrapping_add(c.touch_hits.get()) as u32
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
