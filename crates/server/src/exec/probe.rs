//! The request step's measurement hook: a [`Probe`] is made when a request has been
//! parsed and finished when its reply is queued, and records what
//! `crate::admin::observe` keeps: the request's time in its latency series, a
//! sampled request's keys in the hot-key sketches, and a slow request in the slow
//! log (and `watch slowlog`).
//!
//! ```text
//!   request.rs: parsed ──► Probe::text / Probe::binary   (series, key, 1st clock read)
//!                           exec::{text,binary}::execute
//!                          probe.done(cx, out, &flow)     (2nd clock read, record)
//! ```
//!
//! Cost, when everything is on: two reads of the time-stamp counter, a match on the
//! request to pick its series and key, two counter loads for a read's hit or miss,
//! a histogram bucket, and one xorshift step for hot-key sampling (a sampled
//! request, one in `hotkeys::SAMPLE_RATE`, also takes its worker's sketch locks).
//! With `-o latency=off,hotkeys=off` and no slow log, one load and a branch.
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

use super::{Ctx, Flow};
use crate::admin::latency::{
    self, BINARY, CAS, DECR, DELETE, GAT, GET, INCR, META, OTHER, SET, TEXT, TOUCH,
};
use crate::admin::observe::WorkerObs;
use crate::io::out::Out;

/// One request in flight: what it is, and when it started.
pub struct Probe<'r> {
    /// Timed: the clock reading at the start; else not timed.
    start: Option<u64>,
    /// Its latency series (for a read, the hit's).
    series: usize,
    /// A read: hit or miss series, reply bytes for hot keys.
    read: bool,
    /// Hot keys sample this request.
    sampled: bool,
    /// The request's key (empty: none).
    key: &'r [u8],
    /// A text get's keys, all of them (hot keys count each).
    keys: Option<Keys<'r>>,
    /// A write's value bytes.
    stored: usize,
    /// `get_hits + touch_hits` before a read.
    hits: u64,
    /// The output's length before (a sampled read's reply bytes).
    out: usize,
}

/// What a request is, for the probe: its series within the protocol, key(s) and
/// stored bytes.
struct What<'r> {
    offset: usize,
    key: &'r [u8],
    keys: Option<Keys<'r>>,
    stored: usize,
}

impl<'r> What<'r> {
    fn new(offset: usize, key: &'r [u8], stored: usize) -> Self {
        What {
            offset,
            key,
            keys: None,
            stored,
        }
    }
}

impl<'r> Probe<'r> {
    /// A probe for a parsed text (or meta) request.
    #[inline]
    pub fn text(cx: &Ctx<'_>, req: &Request<'r>, out: &Out) -> Option<Self> {
        let obs = &cx.server.observe;
        if !obs.timed && !obs.hotkeys {
            return None;
        }
        let (base, what) = match req {
            Request::Get { keys, touch, .. } => {
                let mut k = keys.clone();
                let first = k.next().unwrap_or_default();
                let offset = if touch.is_some() { GAT } else { GET };
                let mut w = What::new(offset, first, 0);
                w.keys = Some(keys.clone());
                (TEXT, w)
            }
            Request::Store { cmd, key, data, .. } => {
                (TEXT, What::new(store(*cmd), key, data.len()))
            }
            Request::TooLarge { cmd, key, .. } => (TEXT, What::new(store(*cmd), key, 0)),
            Request::Delete { key, .. } => (TEXT, What::new(DELETE, key, 0)),
            Request::Arith { key, incr, .. } => {
                (TEXT, What::new(if *incr { INCR } else { DECR }, key, 0))
            }
            Request::Touch { key, .. } => (TEXT, What::new(TOUCH, key, 0)),
            Request::Meta(m) => (META, meta(m)),
            _ => (TEXT, What::new(OTHER, &[], 0)),
        };
        Some(Probe::start(cx, base, what, out))
    }

    /// A probe for a decoded binary request whose value is `value_len` bytes.
    #[inline]
    pub fn binary(cx: &Ctx<'_>, req: &BinRequest<'r>, value_len: usize, out: &Out) -> Option<Self> {
        let obs = &cx.server.observe;
        if !obs.timed && !obs.hotkeys {
            return None;
        }
        let what = match *req {
            BinRequest::Get {
                key,
                touch,
                no_value,
                ..
            } => What::new(
                match (touch, no_value) {
                    (None, _) => GET,
                    (Some(_), true) => TOUCH,
                    (Some(_), false) => GAT,
                },
                key,
                0,
            ),
            BinRequest::Store { kind, key, cas, .. } => {
                let offset = if cas != 0 && kind != StoreKind::Add {
                    CAS
                } else {
                    SET
                };
                What::new(offset, key, value_len)
            }
            BinRequest::Delete { key, .. } => What::new(DELETE, key, 0),
            BinRequest::Arith { key, incr, .. } => {
                What::new(if incr { INCR } else { DECR }, key, 0)
            }
            _ => What::new(OTHER, &[], 0),
        };
        Some(Probe::start(cx, BINARY, what, out))
    }

    #[inline]
    fn start(cx: &Ctx<'_>, base: usize, what: What<'r>, out: &Out) -> Self {
        let obs = &cx.server.observe;
        let read = latency::is_read(what.offset);
        let sampled =
            obs.hotkeys && !what.key.is_empty() && worker(cx).is_some_and(|w| w.hotkeys.sampled());
        let c = cx.counters;
        Probe {
            start: obs.timed.then(|| obs.ticks.now()),
            series: base + what.offset,
            read,
            sampled,
            key: what.key,
            keys: what.keys,
            stored: what.stored,
            hits: if read {
                c.get_hits.get().wrapping_add(c.touch_hits.get())
            } else {
                0
            },
            out: out.len(),
        }
    }

    /// The reply is queued (or the request ended as `flow` says): record.
    #[inline]
    pub fn done(self, cx: &Ctx<'_>, out: &Out, flow: &Flow) {
        if *flow == Flow::Suspend {
            return;
        }
        let obs = &cx.server.observe;
        let Some(w) = worker(cx) else { return };
        let (mut series, read) = (self.series, self.read);
        if read {
            let c = cx.counters;
            let hits = c.get_hits.get().wrapping_add(c.touch_hits.get());
            series += usize::from(hits == self.hits);
        }
        if let Some(start) = self.start {
            let ns = obs.ticks.ns(start, obs.ticks.now());
            if obs.latency {
                w.latencies.record(series, ns);
            }
            let us = ns / 1000;
            if obs.slowlog.is_slow(us) {
                slow(cx, series, self.key, us);
            }
        }
        if self.sampled {
            let bytes = if read {
                out.len().saturating_sub(self.out)
            } else {
                self.stored
            };
            note(w, read, self.key, self.keys, bytes as u64);
        }
    }
}

/// The worker's recorders.
#[inline]
fn worker<'a>(cx: &Ctx<'a>) -> Option<&'a WorkerObs> {
    cx.server.observe.workers.get(cx.worker)
}

fn store(cmd: StoreCmd) -> usize {
    if cmd == StoreCmd::Cas {
        CAS
    } else {
        SET
    }
}

fn meta<'r>(m: &Meta<'r>) -> What<'r> {
    match m {
        Meta::Get { key, .. } => What::new(GET, key.raw(), 0),
        Meta::Set { key, data, .. } => What::new(SET, key.raw(), data.len()),
        Meta::SetTooLarge { key, .. } => What::new(SET, key.raw(), 0),
        Meta::Delete { key, .. } => What::new(DELETE, key.raw(), 0),
        Meta::Arith { key, incr, .. } => What::new(if *incr { INCR } else { DECR }, key.raw(), 0),
        _ => What::new(OTHER, &[], 0),
    }
}

/// Counts a sampled request in the hot-key sketches: each key of a multi-get, which
/// share its reply bytes evenly.
#[cold]
#[inline(never)]
fn note(w: &WorkerObs, read: bool, key: &[u8], keys: Option<Keys<'_>>, bytes: u64) {
    match keys {
        Some(keys) if read => {
            let n = keys.clone().count().max(1) as u64;
            for k in keys {
                w.hotkeys.note(false, k, bytes / n);
            }
        }
        _ => w.hotkeys.note(!read, key, bytes),
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
