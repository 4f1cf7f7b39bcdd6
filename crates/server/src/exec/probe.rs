//! The request step's measurement hook. The executor names each request's latency
//! series as it counts it ([`mark`], [`mark_read`]: `Ctx::series`), and a request
//! with a key counts down to the next hot-key sample where its executor holds the
//! key ([`hot`]: `Ctx::hot_left`; a sampled one keeps its key(s) and sets
//! `Ctx::rare`). The request step, once the reply is queued, records the request
//! ([`done`]): in its latency series (through the [`Batch`] of its
//! `Session::serve` call), a sampled request's keys in the hot-key sketches, and a
//! slow request in the slow log (and `watch slowlog`).
//!
//! ```text
//!   request.rs: serve ──► Batch::begin                  (clock read; none for an
//!                                                        empty input)
//!     each request: parsed ──► exec::{text,meta,binary}::execute
//!                                 hot(cx, keys, ..)     (a request with a key: the
//!                                                        hot-key countdown)
//!                                 mark(cx, series)      (where it counts: a read's
//!                                                        hit or miss)
//!                              done(cx, out, &mut batch, last)
//!                                 (alone in its batch and last of its input: clock
//!                                  read, recorded; else the series joins the batch;
//!                                  off the common path (Ctx::rare): a sample is
//!                                  counted, or slow(cx, &mut batch, key))
//!                              (or suspended(cx): a paused multi-get)
//!   serve ends ──► Batch::end                            (if requests joined: clock
//!                                                        read; each gets 1/n of it)
//! ```
//!
//! What a request's time is: the clock is read at a batch's start and end, not per
//! request (one read of the time-stamp counter costs 15-25 ns here, 2-3% of a
//! pipelined request's CPU by itself), and each of the batch's `n` requests is
//! recorded as `1/n` of the time between: exact for a request served alone (whose
//! batch ends as its reply is queued, so it is recorded right there), its batch's
//! average for pipelined ones. The time covers the parse, the execution, the
//! parse-ahead for the requests after, and whatever else the batch did (a parse
//! error's reply, discarded bytes, a paused multi-get's first keys). With the slow
//! log on, each request is timed on its own instead (from the previous one's end),
//! so that a slow one is found.
//!
//! Cost, with histograms and hot keys on (the default): per request, a byte stored
//! by the executor (its series) and, for a request with a key, one decrement of
//! the hot-key countdown; after it, a load of the series, a check of `Ctx::rare`
//! and either a byte appended to the batch or, for a request alone, the record;
//! per batch, a sign check and two clock reads and, per run of one series, a
//! bucket increment, sum and maximum. A sampled request, one in
//! `hotkeys::SAMPLE_RATE` of those with a key, copies its key(s) as its executor
//! starts it (`HotKeys::begin`) and counts them as it ends (`HotKeys::end`: a hash
//! and two small sketches, under its worker's sketch lock, taken once each time).
//! With `-o latency=off,hotkeys=off` and no slow log, the series byte, the
//! countdown's decrement, a check of `Ctx::clock` per batch and one of `Ctx::obs`
//! per request. Measured in docs/benchmarks.md ("Latency histograms and hot keys:
//! the cost").
//!
//! What counts as what: a read (`get`, `gat`, `mg`, binary GET/GAT) is a hit when a
//! key of it was found and counted (`get_hits` or `touch_hits`: a multi-get with
//! any key found is a hit). A multi-get that pauses for a full output buffer is
//! recorded in the batch of its last resumption, as a hit when a key of that
//! resumption was (a sample taken as it paused is dropped). Parse errors are not
//! requests and are not recorded.

use std::time::{SystemTime, UNIX_EPOCH};

use memcrab_proto::text::meta::Meta;
use memcrab_proto::text::watch as line;
use memcrab_proto::text::{Config, Keys, Request};

use crate::admin::{clock, latency};
use crate::out::Out;
use crate::server::{Ctx, WorkerObs};

/// The executor names the request's latency series (`latency::TEXT +
/// latency::SET`, ...), where it counts the request.
#[inline(always)]
pub fn mark(cx: &Ctx<'_>, series: usize) {
    cx.series.set(series as u8);
}

/// [`mark`] for a read: `series` is its hit's, and a miss's is the next.
#[inline(always)]
pub fn mark_read(cx: &Ctx<'_>, series: usize, hit: bool) {
    mark(cx, series + usize::from(!hit));
}

/// A request with a key (every one whose series is not `other`) starts: it counts
/// down to the next hot-key sample (`Ctx::hot_left`: one decrement), and a sampled
/// one keeps its key(s) (`keys`, called only then), the value bytes it stores and
/// the output's length until [`done`] counts it. Called by its executor, which
/// holds the key(s), before the request changes anything.
#[inline(always)]
pub fn hot<'k, I: Iterator<Item = &'k [u8]>>(
    cx: &Ctx<'_>,
    keys: impl FnOnce() -> I,
    stored: usize,
    out: &Out,
) {
    let left = cx.hot_left.get().wrapping_sub(1);
    cx.hot_left.set(left);
    if left == 0 {
        sample(cx, keys, stored, out.len());
    }
}

/// [`hot`]'s countdown ran out: with hot keys on, the request's key(s) are kept
/// (`HotKeys::begin`) and the next gap drawn; else the countdown is re-armed.
#[cold]
#[inline(never)]
fn sample<'k, I: Iterator<Item = &'k [u8]>>(
    cx: &Ctx<'_>,
    keys: impl FnOnce() -> I,
    stored: usize,
    at: usize,
) {
    match cx.obs {
        Some(w) if w.sample => {
            w.hotkeys.begin(keys(), stored, at);
            cx.hot_left.set(w.hotkeys.gap());
            cx.rare.set(cx.rare.get() | Ctx::RARE_SAMPLED);
        }
        _ => cx.hot_left.set(u32::MAX),
    }
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

/// The request's reply is queued (or the request ended otherwise, but for a pause:
/// [`suspended`]), and its executor has [`mark`]ed its series: the request joins
/// `batch` (or, the first and `last` of its batch, the input used up, is recorded
/// at once, from the batch's start to now: a request that comes alone), and a
/// sampled one is counted in the hot keys. True when the slow log times requests
/// instead of the batch: the caller then hands the request's key to [`slow`] (kept
/// apart, so that no other request builds that argument).
#[inline(always)]
#[must_use]
pub fn done(cx: &Ctx<'_>, out: &Out, batch: &mut Batch, last: bool) -> bool {
    let Some(w) = cx.obs else { return false };
    let series = cx.series.get();
    if cx.rare.get() == 0 {
        if batch.n == 0 && last {
            // (The common path's clock is the time-stamp counter: `Ctx::rare`.)
            batch.alone(w, series, clock::rdtsc());
        } else {
            batch.push(w, series);
        }
        return false;
    }
    done_rare(cx, w, series, out.len(), batch, last)
}

/// [`done`] off its common path (`Ctx::rare`): a sampled request is counted, and
/// the request is recorded as there, or left to [`slow`] (true) while the slow
/// log is on.
#[inline(never)]
fn done_rare(
    cx: &Ctx<'_>,
    w: &WorkerObs,
    series: u8,
    out: usize,
    batch: &mut Batch,
    last: bool,
) -> bool {
    let rare = cx.rare.get();
    if rare & Ctx::RARE_SAMPLED != 0 {
        cx.rare.set(rare & !Ctx::RARE_SAMPLED);
        w.hotkeys
            .end(latency::is_read_series(usize::from(series)), out);
    }
    if !w.batched {
        return w.slowlog_on;
    }
    if batch.n == 0 && last {
        batch.alone(w, series, w.ticks.now());
    } else {
        batch.push(w, series);
    }
    false
}

/// A multi-get (or key dump) paused for a full output buffer: it is recorded in the
/// batch of its last resumption, not now, and a sample it took is dropped
/// (resumed, it starts, and counts down to a sample, again).
#[inline(always)]
pub fn suspended(cx: &Ctx<'_>) {
    cx.rare.set(cx.rare.get() & !Ctx::RARE_SAMPLED);
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
    /// request) starts; not read when nothing is timed.
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
    /// A batch starts: reads the clock, where requests are timed. (No request is
    /// pending: [`Batch::end`] records them all.)
    #[inline(always)]
    pub fn begin(&mut self, cx: &Ctx<'_>) {
        // (Untimed, `start` is never read.)
        if cx.clock < 0 {
            self.start = clock::rdtsc();
        } else if cx.clock > 0 {
            if let Some(w) = cx.obs {
                self.start = w.ticks.now();
            }
        }
    }

    /// The batch ends: records its requests, if any are left (a request that came
    /// alone was recorded as it ended: [`done`]).
    #[inline(always)]
    pub fn end(&mut self, cx: &Ctx<'_>) {
        if self.n == 0 {
            return;
        }
        if let Some(w) = cx.obs {
            self.record(w);
        }
    }

    /// The only request of the batch, its input used up, ends at `now`: recorded
    /// with the time since the batch's start (one clock read, no run of the batch).
    #[inline(always)]
    fn alone(&mut self, w: &WorkerObs, series: u8, now: u64) {
        w.latencies
            .record(usize::from(series), now.saturating_sub(self.start));
    }

    /// A request of `series` joins the batch (a full batch is recorded early).
    #[inline(always)]
    fn push(&mut self, w: &WorkerObs, series: u8) {
        // `n` stays below BATCH: the mask only spares a bounds check.
        self.series[self.n % BATCH] = series;
        self.n += 1;
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

/// While the slow log is on, a request ends ([`done`] said so): timed on its own,
/// and logged when it took long enough, with its key found where `source` says.
#[cold]
#[inline(never)]
pub fn slow(cx: &Ctx<'_>, batch: &mut Batch, source: Source<'_>) {
    let Some(w) = cx.obs else { return };
    let series = usize::from(cx.series.get());
    let ns = batch.exact(w, series);
    if cx.server.observe.slowlog.is_slow_ns(ns) {
        let key = match source {
            Source::Text(input, cfg) => text_key_in(input, cfg),
            Source::Binary(key) => Key::One(key),
        };
        slow_request(cx, series, key.first(), ns / 1000);
    }
}

/// Where a finished request's key(s) are found again for the slow log: a text
/// request at the front of this input (parsed again with this configuration: the
/// request itself went to its executor), or a binary request's key.
pub enum Source<'r> {
    Text(&'r [u8], &'r Config),
    Binary(&'r [u8]),
}

/// The key(s) of the text request at the front of `input`.
fn text_key_in<'r>(input: &'r [u8], cfg: &Config) -> Key<'r> {
    let Some((Ok(req), _)) = memcrab_proto::text::parse(input, cfg) else {
        return Key::One(&[]);
    };
    match req {
        Request::Get { keys, .. } => Key::Many(keys),
        Request::Store { key, .. }
        | Request::TooLarge { key, .. }
        | Request::Delete { key, .. }
        | Request::Arith { key, .. }
        | Request::Touch { key, .. } => Key::One(key),
        Request::Meta(
            Meta::Get { key, .. }
            | Meta::Set { key, .. }
            | Meta::SetTooLarge { key, .. }
            | Meta::Delete { key, .. }
            | Meta::Arith { key, .. },
        ) => Key::One(key.raw()),
        _ => Key::One(&[]),
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
