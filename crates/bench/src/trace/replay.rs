//! Replays a trace against one server over one text-protocol connection, as a
//! look-aside cache's client would, and counts what the server answered.
//!
//! - `get`/`gets`: a read. A miss is followed by `set key 0 TTL LEN noreply` (the
//!   look-aside fill), sent before the next batch.
//! - `add`: `add … noreply`; `cas`: `replace … noreply` (see `shape::Op`).
//!
//! Requests go in pipelined batches of at most `BATCH_MAX`, and a batch ends before
//! a key it already holds, so a fill always reaches the server before the next
//! request for its key: the server sees the requests and fills in the trace's order.
//! With `paced`, a batch is sent no earlier than its first request's trace time
//! (what makes TTLs mean the same on the server as in the trace).
//!
//! Reads from index `warmup` on are counted; `stats` is read at that point and at
//! the end, so the server's own `get_hits`/`get_misses` can be checked against the
//! replayer's count. Afterwards every distinct key is probed with multi-key `get`s:
//! the key + value bytes the server held at the end (the simulators' capacity).

use std::collections::HashSet;
use std::io::Read;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::gen::Trace;
use super::shape::Op;
use crate::textconn::{stat, TextConn};

const BATCH_MAX: usize = 64;
/// Counted requests between two `stats` samples of `curr_items`.
const SAMPLE_EVERY: usize = 20_000;
/// Keys per multi-key `get` when probing what the server holds.
/// (24 keys of at most 62 bytes keep the line under 2 KB, memcached's ordinary line.)
const PROBE_KEYS: usize = 24;

/// What the replay reads besides stores and `stats`.
impl TextConn {
    /// Reads get replies up to the `ends`th `END`, calling `on_value` with the
    /// number of `END`s before each `VALUE` (a single get's position in the batch)
    /// and its key.
    fn read_values(
        &mut self,
        ends: usize,
        mut on_value: impl FnMut(usize, &[u8]),
    ) -> anyhow::Result<()> {
        let mut ended = 0;
        while ended < ends {
            self.read_line()?;
            if self.line.starts_with(b"VALUE ") {
                let mut it = self.line.split(|&b| b == b' ');
                let key = it.nth(1).context("VALUE line without key")?.to_vec();
                let n: usize = it
                    .nth(1)
                    .and_then(|t| std::str::from_utf8(t).ok())
                    .and_then(|t| t.trim_end().parse().ok())
                    .context("bad VALUE line")?;
                let mut skip = vec![0; n + 2];
                self.r.read_exact(&mut skip)?;
                on_value(ended, &key);
            } else if self.line == b"END\r\n" {
                ended += 1;
            } else {
                bail!("unexpected reply {:?}", String::from_utf8_lossy(&self.line));
            }
        }
        Ok(())
    }
}

/// What one replay measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Reads at or after the warm-up index, and the misses among them.
    pub reads: u64,
    pub misses: u64,
    /// Reads and fills over the whole trace.
    pub reads_all: u64,
    pub fills: u64,
    /// `get_hits + get_misses` and `get_hits` over the counted window, from `stats`.
    pub server_gets: u64,
    pub server_hits: u64,
    /// At the end: `curr_items`; live items evicted (`evictions`); expired items
    /// whose memory was taken back on store (`reclaimed`) or by the crawler
    /// (`crawler_reclaimed`), and expired items never read (`expired_unfetched`).
    pub curr_items: u64,
    pub evictions: u64,
    pub expired_unfetched: u64,
    pub reclaimed: u64,
    pub crawler_reclaimed: u64,
    /// Distinct keys the probe found, and their key + value bytes.
    pub resident_items: u64,
    pub resident_bytes: u64,
    /// `curr_items`, averaged over samples every `SAMPLE_EVERY` counted requests.
    pub curr_items_mean: f64,
    pub secs: f64,
}

impl Outcome {
    pub fn miss_ratio(&self) -> f64 {
        self.misses as f64 / self.reads.max(1) as f64
    }

    /// The key + value bytes the server held on average over the counted window:
    /// the mean `curr_items` times the mean key + value bytes of what it held at
    /// the end (the probe cannot run during the window: a get changes what a
    /// policy keeps).
    pub fn capacity_bytes(&self) -> u64 {
        let per_item = self.resident_bytes as f64 / self.resident_items.max(1) as f64;
        (self.curr_items_mean * per_item) as u64
    }
}

pub fn replay(trace: &Trace, port: u16, warmup: usize, paced: bool) -> anyhow::Result<Outcome> {
    let mut c = TextConn::connect(port)?;
    let mut o = Outcome::default();
    let start = Instant::now();
    let mut before = None;
    let mut names: Vec<Vec<u8>> = Vec::with_capacity(BATCH_MAX);
    let mut reads_at: Vec<(usize, u64)> = Vec::with_capacity(BATCH_MAX);
    let mut in_batch: HashSet<u64> = HashSet::with_capacity(BATCH_MAX * 2);
    let mut hits = Vec::with_capacity(BATCH_MAX);
    let mut i = 0;
    let n = trace.reqs.len();
    let mut next_sample = warmup;
    let mut samples = Vec::new();
    while i < n {
        if i >= warmup && before.is_none() {
            before = Some(c.stats()?);
        }
        if i >= next_sample {
            samples.push(stat(&c.stats()?, "curr_items") as f64);
            next_sample = i + SAMPLE_EVERY;
        }
        if paced {
            let due = Duration::from_secs(u64::from(trace.reqs[i].time_secs));
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        // One batch: distinct keys, and not across the warm-up boundary.
        names.clear();
        reads_at.clear();
        in_batch.clear();
        let end_cap = if i < warmup { warmup } else { n };
        let mut j = i;
        while j < end_cap && j - i < BATCH_MAX && in_batch.insert(trace.reqs[j].key) {
            let r = trace.reqs[j];
            let mut name = Vec::new();
            trace.key_name(r.key, &mut name);
            let m = trace.meta(r.key);
            match r.op {
                Op::Get | Op::Gets => {
                    c.out
                        .extend_from_slice(if r.op == Op::Get { b"get " } else { b"gets " });
                    c.out.extend_from_slice(&name);
                    c.out.extend_from_slice(b"\r\n");
                    reads_at.push((names.len(), r.key));
                }
                Op::Add => c.store_noreply(b"add", &name, m.ttl_secs, m.value_bytes as usize),
                Op::Cas => c.store_noreply(b"replace", &name, m.ttl_secs, m.value_bytes as usize),
            }
            names.push(name);
            j += 1;
        }
        c.send()?;
        hits.clear();
        c.read_values(reads_at.len(), |pos, _| hits.push(pos))?;
        let counted = i >= warmup;
        let mut h = hits.iter().peekable();
        for (pos, &(name_at, key)) in reads_at.iter().enumerate() {
            let hit = h.next_if(|&&p| p == pos).is_some();
            o.reads_all += 1;
            if counted {
                o.reads += 1;
                o.misses += u64::from(!hit);
            }
            if !hit {
                let m = trace.meta(key);
                let name = std::mem::take(&mut names[name_at]);
                c.store_noreply(b"set", &name, m.ttl_secs, m.value_bytes as usize);
                o.fills += 1;
            }
        }
        i = j;
    }
    c.send()?;
    o.secs = start.elapsed().as_secs_f64();
    // `stats` after a final no-op round trip: every noreply fill has been applied.
    let after = c.stats()?;
    let before = before.unwrap_or_default();
    let delta = |name: &str| stat(&after, name).saturating_sub(stat(&before, name));
    o.server_hits = delta("get_hits");
    o.server_gets = o.server_hits + delta("get_misses");
    o.curr_items = stat(&after, "curr_items");
    o.evictions = stat(&after, "evictions");
    o.expired_unfetched = stat(&after, "expired_unfetched");
    o.reclaimed = stat(&after, "reclaimed");
    o.crawler_reclaimed = stat(&after, "crawler_reclaimed");
    samples.push(o.curr_items as f64);
    o.curr_items_mean = samples.iter().sum::<f64>() / samples.len() as f64;
    probe(trace, &mut c, &mut o)?;
    Ok(o)
}

/// Sums the key + value bytes of every distinct key of the trace the server holds.
fn probe(trace: &Trace, c: &mut TextConn, o: &mut Outcome) -> anyhow::Result<()> {
    let mut keys: Vec<u64> = trace.reqs.iter().map(|r| r.key).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut name = Vec::new();
    let mut hits: Vec<u64> = Vec::new();
    for chunk in keys.chunks(PROBE_KEYS) {
        c.out.extend_from_slice(b"get");
        for &k in chunk {
            trace.key_name(k, &mut name);
            c.out.push(b' ');
            c.out.extend_from_slice(&name);
        }
        c.out.extend_from_slice(b"\r\n");
        c.send()?;
        hits.clear();
        let mut bad = false;
        c.read_values(1, |_, k| match key_id(k) {
            Some(id) => hits.push(id),
            None => bad = true,
        })?;
        if bad {
            bail!("probe: the server returned a key the trace does not name");
        }
        for &k in &hits {
            let m = trace.meta(k);
            o.resident_items += 1;
            o.resident_bytes += m.key_bytes as u64 + u64::from(m.value_bytes);
        }
    }
    Ok(())
}

/// A key name back to its id (`Trace::key_name` pads the hex id with `_`).
fn key_id(name: &[u8]) -> Option<u64> {
    let hex = std::str::from_utf8(name).ok()?.trim_start_matches('_');
    u64::from_str_radix(hex, 16).ok()
}
