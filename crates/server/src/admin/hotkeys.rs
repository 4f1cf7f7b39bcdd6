//! Hot keys: a sampled count-min sketch with a small top list per worker, for
//! reads, for writes, and for the bytes each key moves; merged when read (`stats
//! hotkeys`, `/metrics`).
//!
//! ```text
//!   request ── sampled? (1 in SAMPLE_RATE: the worker's countdown, gap()) ── no ──► done
//!                  │ yes: its key(s) kept (HotKeys::begin), counted as it ends
//!                  ▼
//!   worker's HotKeys ── Mutex<Sketches> ── reads:  Sketch (count-min + top list)
//!                                       ├─ writes: Sketch
//!                                       └─ bytes:  Sketch (weighted by value bytes)
//!                  │ top() on the reader's thread: list counts summed per key over
//!                  ▼ the workers, times SAMPLE_RATE, the K largest
//!   [(key, estimate)] ── keys URI-encoded as `watch` prints them
//! ```
//!
//! A [`Sketch`] is a count-min sketch (Cormode and Muthukrishnan, 2005) of `ROWS`
//! rows of `WIDTH` 32-bit counters with conservative update (a key's counters rise
//! only to its new estimate), 4 KiB, and a list of the `LIST` keys with the largest
//! estimates: a sampled key not in the list enters it when its estimate passes the
//! list's smallest count (which it replaces), and a listed key counts exactly from
//! then on (64-bit). Reads and bytes are thus ranked by counts that overestimate by
//! at most what colliding keys put in the key's counters before it was listed;
//! under a Zipf load the heavy keys are listed after a few samples and stay.
//!
//! Why not Space-Saving (the first design: 1,024 counters, a heap and a hash map
//! per kind, some 100 KiB per kind and worker): a sample walked three of them,
//! which the request load had pushed out of the caches, and a uniform load
//! replaced a counter (and copied its key) on nearly every sample. Here a sample
//! touches two cache lines of counters per kind, skips the list when its estimate
//! is below the list's smallest count, and otherwise compares its fingerprint with
//! the list's 64 (256 bytes, a count of matches the compiler vectorises); counts
//! and keys are touched only when the key is listed or enters. A worker's three
//! sketches take some 19 KiB, the listed keys aside.
//!
//! With one request in 128 sampled, the true top 16 of a Zipf 0.99 or 1.2 load are
//! found among the 32 reported (the recall test below; `memcrab-bench hotkeys`
//! checks the server). Goals: no lock on an unsampled request, a few KiB per
//! kind and worker. Non-goals: exact counts; keys seen only before a `reset`.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// One request in this many is sampled (a power of two).
pub const SAMPLE_RATE: u64 = 128;
/// Count-min rows and counters per row (a power of two) of each sketch.
const ROWS: usize = 2;
const WIDTH_BITS: usize = 9;
const WIDTH: usize = 1 << WIDTH_BITS;
/// Keys listed per kind per worker: twice [`TOP_K`], so that a key near the 32nd
/// rank in one worker is still summed from the others.
const LIST: usize = 64;
/// Keys reported per kind (`stats hotkeys`, `/metrics`): twice the 16 that the
/// recall target names, so that sampling noise between ranks 16 and 17 (a few
/// percent apart under Zipf 0.99) does not push a true top-16 key off the list.
pub const TOP_K: usize = 32;
/// The top that the recall target is set for.
#[cfg(test)]
pub const RECALL_TOP: usize = 16;
/// Keys of one sampled request kept until it ends (a multi-get's first ones).
const PENDING_KEYS: usize = 32;

/// What a hot-key list ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Requests that read a key (get, gets, gat, mg, ...).
    Reads,
    /// Requests that write a key (set, add, delete, incr, ...).
    Writes,
    /// Value bytes sent or stored for a key.
    Bytes,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Reads, Kind::Writes, Kind::Bytes];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Reads => "reads",
            Kind::Writes => "writes",
            Kind::Bytes => "bytes",
        }
    }
}

/// One kind's count-min sketch and top list (see the module's notes).
struct Sketch {
    /// `ROWS` rows of `WIDTH` counters; a key's counter in row `r` is at bits
    /// `9r..9r+9` of its hash, and its estimate is the least of them.
    rows: [[u32; WIDTH]; ROWS],
    /// The listed keys: fingerprints (the hash's high 32 bits), counts and keys
    /// in parallel, at most `LIST`. Two listed keys with one fingerprint (about
    /// one chance in 2^26 per sample) would share a count, which an estimate can
    /// afford.
    fps: Vec<u32>,
    counts: Vec<u64>,
    /// A replaced key's allocation is reused by the key that replaces it.
    keys: Vec<Vec<u8>>,
    /// The smallest listed count once the list is full (0 before). A listed key's
    /// estimate is never below its count (its counters rose to at least its
    /// estimate at each of its samples, the list count by no more), so a key
    /// whose estimate is below this is neither listed nor enters: the list is
    /// not searched.
    least: u64,
    /// How many listed counts equal `least` (once the list is full): while others
    /// do, a count that leaves `least` (replaced, or counted up) does not move it,
    /// so the list is scanned for its smallest count only when the last one does.
    ties: usize,
}

impl Sketch {
    fn new() -> Self {
        Sketch {
            rows: [[0; WIDTH]; ROWS],
            fps: Vec::with_capacity(LIST),
            counts: Vec::with_capacity(LIST),
            keys: Vec::with_capacity(LIST),
            least: 0,
            ties: 0,
        }
    }

    /// Counts `weight` for `key`, whose hash is `h`.
    fn offer(&mut self, h: u64, key: &[u8], weight: u64) {
        let at = |r: usize| ((h >> (WIDTH_BITS * r)) as usize) & (WIDTH - 1);
        let fp = (h >> 32) as u32;
        let w = u32::try_from(weight).unwrap_or(u32::MAX);
        let mut est = u32::MAX;
        for (r, row) in self.rows.iter().enumerate() {
            est = est.min(row[at(r)]);
        }
        let est = est.saturating_add(w);
        for (r, row) in self.rows.iter_mut().enumerate() {
            let c = &mut row[at(r)];
            *c = (*c).max(est);
        }
        let est = u64::from(est);
        // (A saturated estimate says nothing: search then.)
        if est < self.least && est < u64::from(u32::MAX) {
            return;
        }
        // Most samples of a flat load miss the list: a count of matches (which the
        // compiler vectorises) says so without a search that stops early.
        let listed = self.fps.iter().map(|&f| u32::from(f == fp)).sum::<u32>() > 0;
        if let Some(i) = listed
            .then(|| self.fps.iter().position(|&f| f == fp))
            .flatten()
        {
            let Some(c) = self.counts.get_mut(i) else {
                return;
            };
            let old = *c;
            *c = c.saturating_add(weight);
            if old == self.least && *c != old && self.fps.len() == LIST {
                self.untie();
            }
        } else if self.fps.len() < LIST {
            self.fps.push(fp);
            self.counts.push(est);
            self.keys.push(key.to_vec());
            if self.fps.len() == LIST {
                self.rescan();
            }
        } else if est > self.least {
            // Replace the (first) smallest.
            let i = self
                .counts
                .iter()
                .position(|&c| c == self.least)
                .unwrap_or(0);
            self.fps[i] = fp;
            self.counts[i] = est;
            self.keys[i].clear();
            self.keys[i].extend_from_slice(key);
            self.untie();
        }
    }

    /// A count that equalled `least` (in a full list) has risen above it.
    fn untie(&mut self) {
        self.ties = self.ties.saturating_sub(1);
        if self.ties == 0 {
            self.rescan();
        }
    }

    /// The full list's smallest count, and how many counts equal it.
    fn rescan(&mut self) {
        self.least = self.counts.iter().copied().min().unwrap_or(0);
        self.ties = self.counts.iter().filter(|&&c| c == self.least).count();
    }

    /// Every listed (key, count).
    fn entries(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.keys
            .iter()
            .map(Vec::as_slice)
            .zip(self.counts.iter().copied())
    }

    fn clear(&mut self) {
        for row in &mut self.rows {
            row.fill(0);
        }
        self.fps.clear();
        self.counts.clear();
        self.keys.clear();
        self.least = 0;
        self.ties = 0;
    }
}

/// A worker's three sketches, and the sampled request in flight.
struct Sketches {
    kinds: [Sketch; 3],
    /// The keys of the sampled request in flight, one after another (at most
    /// `PENDING_KEYS` of them), and where each ends.
    keys: Vec<u8>,
    ends: Vec<usize>,
    /// How many keys it has (those past `PENDING_KEYS` are not counted, but share
    /// the reply bytes).
    all: usize,
    /// Its value bytes when it stores (0 for a read).
    stored: usize,
    /// The output's length when it started, for a read's reply bytes.
    out_at: usize,
}

/// One worker's hot-key sketches.
pub struct HotKeys {
    /// The sampler's xorshift64 state: only the owning worker loads and stores it
    /// (Relaxed: no other memory depends on it). The countdown it draws gaps for
    /// is the worker's own (`Ctx::hot_left`).
    rng: AtomicU64,
    /// Taken by the owning worker twice per sampled request (as it starts and as it
    /// ends) and by a reader (`stats hotkeys`, `/metrics`, `reset`) while it copies
    /// the lists out or clears them; neither holds it while taking another lock.
    sketches: Mutex<Box<Sketches>>,
    /// The hash's two keys, drawn at random at start-up, so that a client cannot
    /// aim its keys at one counter.
    seed: [u64; 2],
}

/// The high and low halves of a 128-bit product, folded (as wyhash and foldhash
/// mix).
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

impl HotKeys {
    /// A worker's sketches; `seed` varies the sampler between workers.
    pub fn new(seed: u64) -> Self {
        let random = RandomState::new();
        HotKeys {
            rng: AtomicU64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            sketches: Mutex::new(Box::new(Sketches {
                kinds: std::array::from_fn(|_| Sketch::new()),
                keys: Vec::new(),
                ends: Vec::new(),
                all: 0,
                stored: 0,
                out_at: 0,
            })),
            seed: [random.hash_one(seed), random.hash_one(!seed) | 1],
        }
    }

    /// The gap to the next sampled request, uniform in 1..2 * SAMPLE_RATE (mean
    /// SAMPLE_RATE), so that no periodic pattern in the requests lines up with the
    /// samples. The worker counts it down itself, one decrement a request with a
    /// key (`exec/probe.rs`, `hot`, with `Ctx::hot_left`), and draws the next gap
    /// when it runs out. Only the owning worker calls this.
    pub fn gap(&self) -> u32 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        1 + (x % (2 * SAMPLE_RATE - 1)) as u32
    }

    /// A key's hash: 8 bytes at a time, each folded with the seed, then once more.
    /// Keyed, fast, and good enough for counters that can afford a collision.
    fn hash(&self, key: &[u8]) -> u64 {
        let [a, b] = self.seed;
        let mut h = a ^ key.len() as u64;
        let mut words = key.chunks_exact(8);
        for w in &mut words {
            h = fold(h ^ u64::from_le_bytes(w.try_into().unwrap_or([0; 8])), b);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            h = fold(h ^ u64::from_le_bytes(last), b);
        }
        fold(h ^ a, b ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// A sampled request starts (only after [`HotKeys::sampled`] said yes): keeps
    /// its key(s), the value bytes it stores, and the output's length, until
    /// [`HotKeys::end`].
    pub fn begin<'k>(&self, keys: impl Iterator<Item = &'k [u8]>, stored: usize, out_len: usize) {
        let mut s = self.sketches.lock();
        let s = &mut **s;
        s.keys.clear();
        s.ends.clear();
        s.all = 0;
        for k in keys {
            s.all += 1;
            if s.ends.len() < PENDING_KEYS {
                s.keys.extend_from_slice(k);
                s.ends.push(s.keys.len());
            }
        }
        s.stored = stored;
        s.out_at = out_len;
    }

    /// The sampled request that [`HotKeys::begin`] kept ends, with `out_len` bytes
    /// of output: each of its keys counts as a read (sharing the reply bytes
    /// evenly), or its key as a write of the bytes it stored.
    pub fn end(&self, read: bool, out_len: usize) {
        let mut s = self.sketches.lock();
        let s = &mut **s;
        let n = s.all.max(1) as u64;
        let bytes = if read {
            out_len.saturating_sub(s.out_at) as u64 / n
        } else {
            s.stored as u64
        };
        let mut start = 0;
        for &end in &s.ends {
            let key = s.keys.get(start..end).unwrap_or_default();
            start = end;
            let h = self.hash(key);
            let kind = if read { Kind::Reads } else { Kind::Writes };
            s.kinds[kind as usize].offer(h, key, 1);
            if bytes > 0 {
                s.kinds[Kind::Bytes as usize].offer(h, key, bytes);
            }
            if !read {
                break;
            }
        }
        s.ends.clear();
    }

    /// Counts a sampled request: a read or a write of `key` that moved `bytes` value
    /// bytes (the tests' shortcut for [`HotKeys::begin`] and [`HotKeys::end`]).
    #[cfg(test)]
    pub fn note(&self, write: bool, key: &[u8], bytes: u64) {
        let kind = if write { Kind::Writes } else { Kind::Reads };
        let h = self.hash(key);
        let mut s = self.sketches.lock();
        s.kinds[kind as usize].offer(h, key, 1);
        if bytes > 0 {
            s.kinds[Kind::Bytes as usize].offer(h, key, bytes);
        }
    }

    pub fn clear(&self) {
        let mut s = self.sketches.lock();
        for k in &mut s.kinds {
            k.clear();
        }
    }

    /// The `k` keys with the largest estimates of `kind` over `workers`, largest
    /// first (ties by key): each estimate is the summed sampled count times
    /// [`SAMPLE_RATE`].
    pub fn top<'a>(
        workers: impl IntoIterator<Item = &'a HotKeys>,
        kind: Kind,
        k: usize,
    ) -> Vec<(Vec<u8>, u64)> {
        let mut sum: HashMap<Vec<u8>, u64> = HashMap::new();
        for w in workers {
            let s = w.sketches.lock();
            for (key, c) in s.kinds[kind as usize].entries() {
                let e = sum.entry(key.to_vec()).or_default();
                *e = e.saturating_add(c);
            }
        }
        let mut all: Vec<(Vec<u8>, u64)> = sum
            .into_iter()
            .map(|(key, c)| (key, c.saturating_mul(SAMPLE_RATE)))
            .collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(k);
        all
    }
}
/// `stats hotkeys`' lines: for each kind, rank from 1, `<kind>:<rank>:key` (URI
/// encoded) and `<kind>:<rank>:count` (the estimate).
pub fn render_stats<'a>(workers: impl IntoIterator<Item = &'a HotKeys> + Clone, out: &mut Vec<u8>) {
    use memcrab_proto::text::reply::{stat, uriencoded};
    for kind in Kind::ALL {
        for (rank, (key, n)) in HotKeys::top(workers.clone(), kind, TOP_K)
            .iter()
            .enumerate()
        {
            let k = kind.name();
            stat(out, &format!("{k}:{}:key", rank + 1), uriencoded(key));
            stat(out, &format!("{k}:{}:count", rank + 1), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sketch_lists_keys_exactly_below_its_size_and_keeps_the_heavy_ones_above() {
        let h = HotKeys::new(3);
        let mut s = Sketch::new();
        let offer = |s: &mut Sketch, k: &[u8], n: u64| {
            for _ in 0..n {
                s.offer(h.hash(k), k, 1);
            }
        };
        offer(&mut s, b"a", 50);
        offer(&mut s, b"b", 30);
        offer(&mut s, b"c", 1);
        let mut e: Vec<_> = s.entries().map(|(k, c)| (k.to_vec(), c)).collect();
        e.sort();
        assert_eq!(
            e,
            vec![(b"a".to_vec(), 50), (b"b".to_vec(), 30), (b"c".to_vec(), 1)]
        );
        // Far more keys than the list holds, each seen twice: the list stays full,
        // and the heavy keys stay in it with their exact counts.
        for i in 0..4 * WIDTH {
            offer(&mut s, format!("k{i}").as_bytes(), 2);
        }
        assert_eq!(s.entries().count(), LIST, "never more than the list");
        assert!(s.entries().any(|(k, c)| k == b"a" && c == 50));
        assert!(s.entries().any(|(k, c)| k == b"b" && c == 30));
        // The smallest count and its ties, kept as counts change, are the list's.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = format!("z{}", x % 300);
            s.offer(h.hash(k.as_bytes()), k.as_bytes(), 1 + (x >> 60) % 3);
            let min = s.counts.iter().copied().min().unwrap_or(0);
            assert_eq!(s.least, min);
            assert_eq!(s.ties, s.counts.iter().filter(|&&c| c == min).count());
        }
        s.clear();
        assert_eq!(s.entries().count(), 0);
    }

    #[test]
    fn a_sampled_request_counts_its_keys_as_it_ends() {
        let h = HotKeys::new(5);
        // A two-key read whose reply took 40 bytes: each key is read once and moved
        // 20 bytes.
        let keys: [&[u8]; 2] = [b"x", b"y"];
        h.begin(keys.into_iter(), 0, 100);
        h.end(true, 140);
        // A write of 7 bytes.
        h.begin([&b"w"[..]].into_iter(), 7, 140);
        h.end(false, 150);
        let top = |kind| HotKeys::top([&h], kind, TOP_K);
        let r = SAMPLE_RATE;
        assert_eq!(
            top(Kind::Reads),
            vec![(b"x".to_vec(), r), (b"y".to_vec(), r)]
        );
        assert_eq!(top(Kind::Writes), vec![(b"w".to_vec(), r)]);
        assert_eq!(
            top(Kind::Bytes),
            vec![
                (b"x".to_vec(), 20 * r),
                (b"y".to_vec(), 20 * r),
                (b"w".to_vec(), 7 * r)
            ]
        );
        // A read of more keys than are kept: the first PENDING_KEYS count, and
        // each moved its share of the whole reply.
        h.clear();
        let many: Vec<Vec<u8>> = (0..PENDING_KEYS + 8)
            .map(|i| format!("m{i:02}").into_bytes())
            .collect();
        h.begin(many.iter().map(Vec::as_slice), 0, 0);
        h.end(true, 400);
        let reads = top(Kind::Reads);
        assert_eq!(reads.len(), TOP_K.min(PENDING_KEYS));
        assert!(reads.iter().all(|(k, _)| k.as_slice() < b"m32".as_slice()));
        // The first key offered after `clear` meets zeroed counters, so its count
        // is exactly its share: 400 bytes over 40 keys, not over the 32 kept.
        let bytes = top(Kind::Bytes);
        assert!(
            bytes.iter().any(|(k, n)| k == b"m00" && *n == 10 * r),
            "{bytes:?}"
        );
        // A later key may meet both its counters already raised by earlier keys
        // (the hash is seeded at random; count-min overestimates, by whole shares
        // here), never less than its share.
        assert!(
            bytes
                .iter()
                .all(|(_, n)| *n >= 10 * r && *n % (10 * r) == 0),
            "{bytes:?}"
        );
    }

    /// Zipf(s) over `n` ranks: a cumulative table and a xorshift uniform.
    struct Zipf {
        cdf: Vec<f64>,
        x: u64,
    }

    impl Zipf {
        fn new(n: usize, s: f64, seed: u64) -> Self {
            let mut cdf = Vec::with_capacity(n);
            let mut run = 0.0;
            for r in 1..=n {
                run += 1.0 / (r as f64).powf(s);
                cdf.push(run);
            }
            for c in &mut cdf {
                *c /= run;
            }
            Zipf { cdf, x: seed | 1 }
        }

        /// A rank, 0 the most frequent.
        fn next(&mut self) -> usize {
            self.x ^= self.x << 13;
            self.x ^= self.x >> 7;
            self.x ^= self.x << 17;
            let u = (self.x >> 11) as f64 / (1u64 << 53) as f64;
            self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
        }
    }

    /// The request step's countdown (`exec/probe.rs`, `hot`) over `left`.
    fn sampled(h: &HotKeys, left: &mut u32) -> bool {
        *left -= 1;
        if *left > 0 {
            return false;
        }
        *left = h.gap();
        true
    }

    /// Recall of the true top 16 among the reported [`TOP_K`], with the default
    /// sampling, 4 workers and 1,000,000 requests over 100,000 keys (it also prints
    /// the strict figure: among the reported top 16).
    fn recall(s: f64) -> f64 {
        const WORKERS: usize = 4;
        let workers: Vec<HotKeys> = (0..WORKERS as u64).map(HotKeys::new).collect();
        let mut left = [1u32; WORKERS];
        let mut z = Zipf::new(100_000, s, 0x5eed ^ s.to_bits());
        let key = |r: usize| format!("key:{r}").into_bytes();
        for i in 0..1_000_000usize {
            let w = &workers[i % WORKERS];
            let r = z.next();
            if sampled(w, &mut left[i % WORKERS]) {
                w.note(r % 10 == 9, &key(r), 100);
            }
        }
        // Writes are one rank in ten; reads are the rest. The true top 16 reads are
        // the 16 lowest ranks that are not 9 mod 10.
        let truth: Vec<Vec<u8>> = (0..)
            .filter(|r| r % 10 != 9)
            .take(RECALL_TOP)
            .map(key)
            .collect();
        let got = HotKeys::top(&workers, Kind::Reads, TOP_K);
        let found = |n: usize| {
            truth
                .iter()
                .filter(|k| got.iter().take(n).any(|(g, _)| g == *k))
                .count()
        };
        // Every request moves 100 bytes, so bytes rank all keys: ranks 0..16.
        let bytes = HotKeys::top(&workers, Kind::Bytes, TOP_K);
        let bytes_found = (0..RECALL_TOP)
            .filter(|&r| bytes.iter().any(|(g, _)| *g == key(r)))
            .count();
        eprintln!(
            "zipf {s}: reads: {}/16 of the true top 16 in the reported {TOP_K}, {}/16 in \
             the reported 16; bytes: {bytes_found}/16 in the reported {TOP_K}",
            found(TOP_K),
            found(RECALL_TOP)
        );
        assert!(
            bytes_found * 100 >= 95 * RECALL_TOP,
            "bytes recall {bytes_found}/16"
        );
        found(TOP_K) as f64 / RECALL_TOP as f64
    }

    #[test]
    fn recall_of_the_true_top_16_at_zipf_099_and_12() {
        for s in [0.99, 1.2] {
            let r = recall(s);
            assert!(r >= 0.95, "zipf {s}: recall {r}");
        }
    }

    #[test]
    fn sampling_rate_is_about_one_in_sample_rate() {
        let h = HotKeys::new(7);
        let mut left = 1;
        let n = (0..160_000).filter(|_| sampled(&h, &mut left)).count() as f64;
        let want = 160_000.0 / SAMPLE_RATE as f64;
        assert!((n - want).abs() / want < 0.05, "{n} sampled");
    }

    #[test]
    fn stats_hotkeys_lines() {
        let h = HotKeys::new(1);
        h.note(false, b"a b", 10);
        h.note(true, b"w", 0);
        let mut out = Vec::new();
        render_stats([&h], &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "STAT reads:1:key a%20b\r\nSTAT reads:1:count 128\r\n\
             STAT writes:1:key w\r\nSTAT writes:1:count 128\r\n\
             STAT bytes:1:key a%20b\r\nSTAT bytes:1:count 1280\r\n"
        );
    }
}
