//! Request latency histograms: per worker, lock-free, merged when read (for `stats
//! latency` and `/metrics`).
//!
//! ```text
//!   worker 0: Latencies ─┬─ Histogram (text get hit) ── 1024 AtomicU64 slots, sum, max
//!                        ├─ Histogram (text get miss)
//!                        └─ ... one per SERIES row
//!   worker 1: Latencies ─── ...
//!                  │ snapshot() on the reader's thread (relaxed loads)
//!                  ▼
//!   Snapshot (merged) ── quantile(0.99), summary(), prometheus_buckets(&LE_SECS)
//! ```
//!
//! Goals: recording costs a few instructions and no read-modify-write (each worker
//! writes only its own histograms, as [`crate::admin::counters`] does); at most 10%
//! relative error from 1 µs to 10 s (the layout below gives at most 6.25% for a
//! bucket's bounds, 3.2% for its midpoint, which quantiles report).
//! Non-goals: exact values; timing itself (the request step measures, and calls
//! [`Latencies::record_all`] for a batch's requests or [`Latencies::record`] for
//! one).
//!
//! Units: a worker records in the request clock's own units (`admin/clock.rs`:
//! time-stamp counter ticks, or nanoseconds where that clock is not used), so that
//! a request pays no conversion; a [`Snapshot`] is in nanoseconds, converted when
//! merged. A unit scales every bucket alike, so the relative error is the same.
//!
//! Layout (HdrHistogram's log-linear idea): values below 16 units have a bucket
//! each; above, each power of two `[2^e, 2^(e+1))` is cut into 16 equal buckets, so
//! a bucket is at most 1/16 of its lower bound wide. 34 powers of two (up to 2^38
//! units: 275 s in nanoseconds, 69 s in ticks of a 4 GHz counter, 10 s at 27 GHz)
//! make 560 buckets; longer values land in the last one (a record keeps them in
//! slots of their own up to 2^64, [`SLOTS`], merged into it when read).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::admin::clock::Ticks;

/// Linear sub-buckets per power of two, as bits (16 buckets).
const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
/// Powers of two covered above the linear start: up to 2^(SUB_BITS + POWERS) ns.
const POWERS: usize = 34;
/// Buckets in one histogram, as read.
pub const BUCKETS: usize = SUB + POWERS * SUB;
/// Slots a histogram records into: a power of two above every index [`slot_of`]
/// gives (at most `SUB * (63 - SUB_BITS) + 2 * SUB - 1`, 975), so that a record
/// masks the index instead of clamping it and needs no bounds check. Slots from
/// [`BUCKETS`] on (values past 2^38 units) are read as the last bucket; they are
/// never written in practice, so their pages stay untouched.
const SLOTS: usize = 1024;
const _: () = assert!(SUB * (63 - SUB_BITS as usize) + 2 * SUB - 1 < SLOTS && BUCKETS <= SLOTS);

/// The slot that records `ns`: its bucket, for values below 2^38 units. Without a
/// branch: with `e = floor(log2(ns | SUB))` (`SUB_BITS` for a value below `SUB`),
/// `ns >> (e - SUB_BITS)` is the value's top `SUB_BITS + 1` bits, `SUB + sub` (or
/// the value itself below `SUB`), so adding `SUB` per power above the linear
/// start gives the index. (The mask changes nothing: the index is below `SLOTS`.)
#[inline(always)]
fn slot_of(ns: u64) -> usize {
    let shift = 63 - (ns | SUB as u64).leading_zeros() - SUB_BITS;
    (((shift as usize) << SUB_BITS) + (ns >> shift) as usize) & (SLOTS - 1)
}

/// The bucket that holds `ns` (values past the last bucket's low bound are in it).
#[cfg(test)]
fn bucket_of(ns: u64) -> usize {
    slot_of(ns).min(BUCKETS - 1)
}

/// The lowest value in bucket `i`, in nanoseconds.
pub fn bucket_low(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let e = (i - SUB) / SUB + SUB_BITS as usize;
    let sub = ((i - SUB) % SUB) as u64;
    (1u64 << e) + (sub << (e - SUB_BITS as usize))
}

/// One past the highest value in bucket `i`.
pub fn bucket_high(i: usize) -> u64 {
    if i + 1 < BUCKETS {
        bucket_low(i + 1)
    } else {
        u64::MAX
    }
}

/// The value reported for bucket `i`: its midpoint (the last bucket: its low bound).
fn bucket_mid(i: usize) -> u64 {
    let (lo, hi) = (bucket_low(i), bucket_high(i));
    if hi == u64::MAX {
        lo
    } else {
        lo + (hi - lo) / 2
    }
}

/// A histogram written by one thread and read by any, in its [`Latencies`]' units.
/// Each field is an atomic that
/// only the owning worker stores to (load then store, no read-modify-write); readers
/// load with Relaxed and may see a request in `count` but not yet in `sum_ns` — the
/// same tolerance as `stats` totals.
pub struct Histogram {
    /// Requests per slot (owner writes, any thread reads): a fixed-size array of a
    /// power of two, so that [`slot_of`]'s index needs no bounds check, and in
    /// place, so that a record loads no pointer to it.
    buckets: [AtomicU64; SLOTS],
    /// Total units recorded (owner writes, any thread reads).
    sum: AtomicU64,
    /// The longest value recorded (owner writes, any thread reads).
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

/// Adds one with a single writer's load and store: Relaxed suffices, readers need no
/// order with other memory.
#[inline]
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Histogram {
    /// Records one request of `units`. Only the owning worker calls this.
    #[inline(always)]
    pub fn record(&self, units: u64) {
        self.record_in(slot_of(units), units, 1);
    }

    /// Records `n` requests of `units` each, in `slot_of(units)` (found by the
    /// caller).
    #[inline(always)]
    fn record_in(&self, slot: usize, units: u64, n: u64) {
        bump(&self.buckets[slot & (SLOTS - 1)], n);
        bump(&self.sum, units.wrapping_mul(n));
        if units > self.max.load(Ordering::Relaxed) {
            self.max.store(units, Ordering::Relaxed);
        }
    }

    /// Adds this histogram's current contents to `into`, whose units it must share;
    /// `clock` converts the sum and the maximum to nanoseconds.
    fn add_to(&self, into: &mut Snapshot, clock: &Ticks) {
        for (i, b) in self.buckets.iter().enumerate() {
            if let Some(c) = into.counts.get_mut(i.min(BUCKETS - 1)) {
                *c = c.wrapping_add(b.load(Ordering::Relaxed));
            }
        }
        let sum = clock.ns(0, self.sum.load(Ordering::Relaxed));
        into.sum_ns = into.sum_ns.wrapping_add(sum);
        into.max_ns = into
            .max_ns
            .max(clock.ns(0, self.max.load(Ordering::Relaxed)));
    }
}

/// A histogram's (or a merge of several) contents at one moment: bucket counts in
/// the recording units, the sum and the maximum in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub counts: Vec<u64>,
    pub sum_ns: u64,
    pub max_ns: u64,
    /// Nanoseconds per bucket unit, times 2^32.
    unit: u64,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            counts: vec![0; BUCKETS],
            sum_ns: 0,
            max_ns: 0,
            unit: 1 << 32,
        }
    }
}

/// `stats latency`'s figures for one series, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// The `le` bounds `/metrics` gives each histogram, in seconds: 1-2-5 steps from
/// 1 µs to 10 s.
pub const LE_SECS: [f64; 22] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1,
    0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

impl Snapshot {
    /// A bucket value in nanoseconds.
    fn ns(&self, units: u64) -> u64 {
        ((u128::from(units) * u128::from(self.unit)) >> 32) as u64
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &c| a.wrapping_add(c))
    }

    /// The value at quantile `q` (0..=1): the midpoint of the bucket holding the
    /// request of rank ceil(q * count), never above the maximum seen; 0 if empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(c);
            if seen >= rank {
                return self.ns(bucket_mid(i)).min(self.max_ns);
            }
        }
        self.max_ns
    }

    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count(),
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.max_ns,
        }
    }

    /// Cumulative counts for Prometheus' `le` bounds (seconds, ascending): a bucket
    /// counts under the first bound at or above its midpoint, so a request may sit
    /// one `le` off when it is within 3.2% of the bound. The `+Inf` bucket is
    /// [`Snapshot::count`].
    pub fn prometheus_buckets(&self, le_secs: &[f64]) -> Vec<u64> {
        let mut out = vec![0u64; le_secs.len()];
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let mid = self.ns(bucket_mid(i)) as f64 / 1e9;
            if let Some(j) = le_secs.iter().position(|&le| mid <= le) {
                out[j] = out[j].wrapping_add(c);
            }
        }
        let mut run = 0u64;
        for v in &mut out {
            run = run.wrapping_add(*v);
            *v = run;
        }
        out
    }
}

/// What a series measures: protocol, command and (for reads) hit or miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Series {
    pub protocol: &'static str,
    pub command: &'static str,
    /// `hit` or `miss` for reads, `` for the rest.
    pub outcome: &'static str,
}

/// The commands each protocol's series are kept for; every other command is `other`.
/// Reads (`get`, `gat`) have a hit and a miss series each.
const READS: [&str; 2] = ["get", "gat"];
const WRITES: [&str; 7] = ["set", "cas", "delete", "incr", "decr", "touch", "other"];
const PROTOCOLS: [&str; 3] = ["text", "meta", "binary"];
const PER_PROTOCOL: usize = READS.len() * 2 + WRITES.len();
/// Number of series, one histogram each per worker.
pub const SERIES_COUNT: usize = PROTOCOLS.len() * PER_PROTOCOL;

/// The series at `index` (0..SERIES_COUNT).
pub fn series(index: usize) -> Series {
    let protocol = PROTOCOLS[(index / PER_PROTOCOL) % PROTOCOLS.len()];
    let r = index % PER_PROTOCOL;
    if r < READS.len() * 2 {
        Series {
            protocol,
            command: READS[r / 2],
            outcome: if r.is_multiple_of(2) { "hit" } else { "miss" },
        }
    } else {
        Series {
            protocol,
            command: WRITES[r - READS.len() * 2],
            outcome: "",
        }
    }
}

/// Where each protocol's series start, and each command's offset within them (for
/// a read, the hit's; the miss is the next), so that the request step picks a series
/// with an addition ([`series_index`] is the same table by name).
pub const TEXT: usize = 0;
pub const META: usize = PER_PROTOCOL;
pub const BINARY: usize = 2 * PER_PROTOCOL;
pub const GET: usize = 0;
pub const GAT: usize = 2;
pub const SET: usize = 4;
pub const CAS: usize = 5;
pub const DELETE: usize = 6;
pub const INCR: usize = 7;
pub const DECR: usize = 8;
pub const TOUCH: usize = 9;
pub const OTHER: usize = 10;

/// Whether the series at `offset` within a protocol is a read's (hit, or miss at
/// `offset + 1`).
#[inline]
pub fn is_read(offset: usize) -> bool {
    offset < READS.len() * 2
}

/// Whether the series at `index` is a read's (any protocol, hit or miss).
#[inline]
pub fn is_read_series(index: usize) -> bool {
    is_read(index % PER_PROTOCOL)
}

/// The name of the series at `index`, as [`series_name`] writes it, made once.
pub fn series_label(index: usize) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| (0..SERIES_COUNT).map(|i| series_name(series(i))).collect());
    names.get(index).map_or("other", String::as_str)
}

/// The index of a series; unknown commands map to `other`, and `hit` for a
/// non-read is ignored. None for an unknown protocol.
#[cfg(test)]
pub fn series_index(protocol: &str, command: &str, hit: bool) -> Option<usize> {
    let p = PROTOCOLS.iter().position(|&x| x == protocol)?;
    let r = match READS.iter().position(|&x| x == command) {
        Some(i) => i * 2 + usize::from(!hit),
        None => {
            let w = WRITES.iter().position(|&x| x == command);
            READS.len() * 2 + w.unwrap_or(WRITES.len() - 1)
        }
    };
    Some(p * PER_PROTOCOL + r)
}

/// One worker's histograms, one per series, in the units of its request clock.
pub struct Latencies {
    hists: Vec<Histogram>,
    /// The request clock whose readings' differences are recorded.
    clock: Ticks,
}

impl Default for Latencies {
    /// Histograms in nanoseconds.
    fn default() -> Self {
        Latencies::new(Ticks::off())
    }
}

impl Latencies {
    /// Histograms recorded in `clock`'s units.
    pub fn new(clock: Ticks) -> Self {
        Latencies {
            hists: (0..SERIES_COUNT).map(|_| Histogram::default()).collect(),
            clock,
        }
    }

    /// Records a request of series `index` that took `units` of the clock. Only
    /// the owning worker.
    #[inline(always)]
    pub fn record(&self, index: usize, units: u64) {
        if let Some(h) = self.hists.get(index) {
            h.record(units);
        }
    }

    /// Records requests of the series `index` lists that took `units` each: a
    /// pipelined batch's share. The bucket is found once, and each run of requests
    /// of one series is recorded at once ([`run_len`]). Only the owning worker.
    #[inline]
    pub fn record_all(&self, index: &[u8], units: u64) {
        let bucket = slot_of(units);
        let mut rest = index;
        while let Some(&series) = rest.first() {
            let run = run_len(rest, series).max(1);
            self.record_run(series, bucket, units, run as u64);
            rest = rest.get(run..).unwrap_or_default();
        }
    }

    #[inline(always)]
    fn record_run(&self, series: u8, bucket: usize, units: u64, n: u64) {
        if let Some(h) = self.hists.get(usize::from(series)) {
            h.record_in(bucket, units, n);
        }
    }

    /// Every series merged over `workers` (which share one clock), in series order.
    pub fn merged<'a>(workers: impl IntoIterator<Item = &'a Latencies>) -> Vec<Snapshot> {
        let mut out = vec![Snapshot::default(); SERIES_COUNT];
        for w in workers {
            let unit = w.clock.ns(0, 1 << 32);
            for (s, h) in out.iter_mut().zip(&w.hists) {
                s.unit = unit;
                h.add_to(s, &w.clock);
            }
        }
        out
    }
}

/// How many of `index`'s first bytes are `s`, compared 8 at a time: the XOR of 8
/// bytes with 8 copies of `s` is 0 where they all match, else its lowest set bit
/// is in the first byte that differs.
#[inline(always)]
fn run_len(index: &[u8], s: u8) -> usize {
    let copies = u64::from(s) * 0x0101_0101_0101_0101;
    let mut n = 0;
    let mut words = index.chunks_exact(8);
    for w in &mut words {
        let diff = u64::from_le_bytes(w.try_into().unwrap_or_default()) ^ copies;
        if diff != 0 {
            return n + (diff.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + words.remainder().iter().take_while(|&&b| b == s).count()
}

/// The name `stats latency` gives a series: `text_get_hit`, `meta_set`, ...
pub fn series_name(s: Series) -> String {
    match s.outcome {
        "" => format!("{}_{}", s.protocol, s.command),
        o => format!("{}_{}_{o}", s.protocol, s.command),
    }
}

/// `stats latency`'s lines for every series with requests: `<series>:count`, then
/// `:p50_us`, `:p90_us`, `:p99_us`, `:p999_us` and `:max_us` in microseconds with
/// one decimal.
pub fn render_stats(merged: &[Snapshot], out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::stat;
    for (i, snap) in merged.iter().enumerate() {
        let s = snap.summary();
        if s.count == 0 {
            continue;
        }
        let name = series_name(series(i));
        stat(out, &format!("{name}:count"), s.count);
        for (field, ns) in [
            ("p50_us", s.p50),
            ("p90_us", s.p90),
            ("p99_us", s.p99),
            ("p999_us", s.p999),
            ("max_us", s.max),
        ] {
            stat(
                out,
                &format!("{name}:{field}"),
                format!("{:.1}", ns as f64 / 1e3),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range() {
        assert_eq!(bucket_low(0), 0);
        for i in 0..BUCKETS - 1 {
            assert_eq!(bucket_high(i), bucket_low(i + 1), "bucket {i}");
            assert!(bucket_low(i) < bucket_high(i));
            assert_eq!(bucket_of(bucket_low(i)), i);
            assert_eq!(bucket_of(bucket_high(i) - 1), i);
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        // Every value's slot is its bucket's below the last bucket, within the
        // slots above it.
        for e in 0..64 {
            for v in [1u64 << e, (1u64 << e) | ((1u64 << e) - 1), (1u64 << e) + 1] {
                let slot = slot_of(v);
                let unmasked = {
                    let shift = 63 - (v | SUB as u64).leading_zeros() - SUB_BITS;
                    ((shift as usize) << SUB_BITS) + (v >> shift) as usize
                };
                assert_eq!(slot, unmasked, "{v}: the mask changes nothing");
                assert_eq!(slot.min(BUCKETS - 1), bucket_of(v));
                assert!(slot < BUCKETS || v >= bucket_low(BUCKETS - 1), "{v}");
            }
        }
        // A value past the last bucket is read there.
        let h = Histogram::default();
        h.record(u64::MAX);
        h.record(1 << 40);
        let mut s = Snapshot::default();
        h.add_to(&mut s, &Ticks::off());
        assert_eq!(s.counts[BUCKETS - 1], 2);
        assert_eq!(s.count(), 2);
        // The last bucket starts past 10 s.
        assert!(bucket_low(BUCKETS - 1) > 10_000_000_000);
    }

    #[test]
    fn relative_error_at_most_ten_percent_from_1us_to_10s() {
        // Every bucket between 1 µs and 10 s: its width against its low bound, and
        // the midpoint's error against any value in it.
        let mut worst = 0f64;
        for i in bucket_of(1_000)..=bucket_of(10_000_000_000) {
            let (lo, hi) = (bucket_low(i) as f64, bucket_high(i) as f64);
            let mid = bucket_mid(i) as f64;
            worst = worst
                .max((mid - lo) / lo)
                .max((hi - 1.0 - mid) / (hi - 1.0));
            assert!((hi - lo) / lo <= 1.0 / 16.0 + 1e-12, "bucket {i}");
        }
        assert!(worst <= 0.033, "worst midpoint error {worst}");
        // And on values: quantiles of single values.
        let mut v = 1_000u64;
        while v <= 10_000_000_000 {
            let h = Histogram::default();
            h.record(v);
            let mut s = Snapshot::default();
            h.add_to(&mut s, &Ticks::off());
            let got = s.quantile(0.5) as f64;
            assert!((got - v as f64).abs() / v as f64 <= 0.10, "{v}: {got}");
            v = v * 7 / 5 + 1;
        }
    }

    #[test]
    fn quantiles_of_a_uniform_run_and_merging() {
        // Two "workers": 1..=1000 µs split between them by parity.
        let (a, b) = (Latencies::default(), Latencies::default());
        let i = series_index("text", "get", true).unwrap_or(0);
        for us in 1..=1000u64 {
            let w = if us % 2 == 0 { &a } else { &b };
            w.record(i, us * 1000);
        }
        let m = Latencies::merged([&a, &b]);
        let s = m[i].summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.max, 1_000_000);
        for (got, want) in [
            (s.p50, 500e3),
            (s.p90, 900e3),
            (s.p99, 990e3),
            (s.p999, 999e3),
        ] {
            assert!((got as f64 - want).abs() / want <= 0.05, "{got} vs {want}");
        }
        assert_eq!(m[i].sum_ns, 500_500_000);
        // Other series untouched.
        assert_eq!(m.iter().map(Snapshot::count).sum::<u64>(), 1000);
        assert_eq!(Snapshot::default().quantile(0.99), 0);
    }

    #[test]
    fn clock_units_become_nanoseconds_when_merged() {
        // The request clock's own units (time-stamp counter ticks where usable):
        // 10 µs of them reads back as 10 µs.
        let clock = Ticks::calibrate();
        let ns_per_2_32_units = clock.ns(0, 1 << 32);
        let units = (10_000u128 << 32) / u128::from(ns_per_2_32_units.max(1));
        let l = Latencies::new(clock);
        let i = series_index("text", "set", true).unwrap_or(0);
        l.record(i, units as u64);
        l.record(i, units as u64);
        let s = Latencies::merged([&l])[i].summary();
        assert_eq!(s.count, 2);
        for (what, got) in [("max", s.max), ("p50", s.p50)] {
            assert!((9_670..=10_330).contains(&got), "{what}: {got} ns");
        }
        let sum = Latencies::merged([&l])[i].sum_ns;
        assert!((19_990..=20_010).contains(&sum), "sum: {sum} ns");
    }

    #[test]
    fn a_batch_records_each_request_in_its_series() {
        let l = Latencies::default();
        let (a, b) = (TEXT + GET, TEXT + SET);
        let batch = [a, a, a, b, a, b, b, a].map(|s| s as u8);
        l.record_all(&batch, 3_000);
        l.record_all(&[], 1);
        let m = Latencies::merged([&l]);
        for (s, n) in [(a, 5), (b, 3)] {
            assert_eq!(m[s].count(), n);
            assert_eq!(m[s].sum_ns, 3_000 * n);
            assert_eq!(m[s].max_ns, 3_000);
            assert_eq!(m[s].counts[bucket_of(3_000)], n);
        }
        assert_eq!(m.iter().map(Snapshot::count).sum::<u64>(), 8);
        // Runs of every length across the 8-byte steps, against counting one by one.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..40 {
            for _ in 0..20 {
                let batch: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        [TEXT + GET, TEXT + SET, META + GET][(x % 8).min(2) as usize] as u8
                    })
                    .collect();
                let l = Latencies::default();
                l.record_all(&batch, 5_000);
                let m = Latencies::merged([&l]);
                for s in [TEXT + GET, TEXT + SET, META + GET] {
                    let want = batch.iter().filter(|&&b| usize::from(b) == s).count() as u64;
                    assert_eq!(m[s].count(), want, "{batch:?}");
                    assert_eq!(m[s].sum_ns, 5_000 * want, "{batch:?}");
                }
            }
        }
        for (i, s) in [(0, 7), (3, 7), (8, 7), (9, 7), (17, 7)] {
            let mut v = vec![s; 20];
            if let Some(b) = v.get_mut(i) {
                *b = 1;
            }
            assert_eq!(run_len(&v, s), i, "{v:?}");
        }
        assert_eq!(run_len(&[7; 20], 7), 20);
    }

    #[test]
    fn prometheus_buckets_are_cumulative() {
        let h = Histogram::default();
        for ns in [500, 1_500, 40_000, 3_000_000, 20_000_000_000] {
            h.record(ns);
        }
        let mut s = Snapshot::default();
        h.add_to(&mut s, &Ticks::off());
        let b = s.prometheus_buckets(&LE_SECS);
        assert_eq!(b[0], 1, "<= 1 µs");
        assert_eq!(b[1], 2, "<= 2 µs");
        assert_eq!(b[5], 3, "<= 50 µs");
        assert_eq!(b[11], 4, "<= 5 ms");
        assert_eq!(*b.last().unwrap_or(&0), 4, "20 s only in +Inf");
        assert!(b.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(s.count(), 5);
    }

    #[test]
    fn series_table_round_trips() {
        for i in 0..SERIES_COUNT {
            let s = series(i);
            let hit = s.outcome != "miss";
            assert_eq!(series_index(s.protocol, s.command, hit), Some(i), "{s:?}");
        }
        assert_eq!(
            series_index("meta", "flush_all", false),
            series_index("meta", "other", false)
        );
        assert_eq!(series_index("udp", "get", true), None);
        // The request step's offsets name the same series.
        for (p, base) in [("text", TEXT), ("meta", META), ("binary", BINARY)] {
            for (c, off) in [
                ("get", GET),
                ("gat", GAT),
                ("set", SET),
                ("cas", CAS),
                ("delete", DELETE),
                ("incr", INCR),
                ("decr", DECR),
                ("touch", TOUCH),
                ("other", OTHER),
            ] {
                assert_eq!(series_index(p, c, true), Some(base + off), "{p} {c}");
                assert_eq!(is_read(off), c == "get" || c == "gat");
            }
            assert_eq!(series_index(p, "get", false), Some(base + GET + 1));
        }
        for i in 0..SERIES_COUNT {
            let s = series(i);
            assert_eq!(is_read_series(i), !s.outcome.is_empty(), "{s:?}");
        }
        assert_eq!(series_label(META + GAT + 1), "meta_gat_miss");
        assert_eq!(series_label(BINARY + SET), "binary_set");
    }

    #[test]
    fn stats_latency_lines() {
        let l = Latencies::default();
        let i = series_index("meta", "get", false).unwrap_or(0);
        l.record(i, 12_000);
        let mut out = Vec::new();
        render_stats(&Latencies::merged([&l]), &mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("STAT meta_get_miss:count 1\r\n"), "{text}");
        assert!(
            text.contains("STAT meta_get_miss:max_us 12.0\r\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 6, "only series with requests: {text}");
    }
}
