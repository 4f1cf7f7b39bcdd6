//! Hot keys: a sampled Space-Saving top-K per worker, for reads, for writes, and for
//! the bytes each key moves; merged when read (`stats hotkeys`, `/metrics`).
//!
//! ```text
//!   request ── sampled()? (1 in SAMPLE_RATE, a per-worker xorshift) ── no ──► done
//!                  │ yes
//!                  ▼
//!   worker's HotKeys ── reads  Mutex<SpaceSaving> (CAPACITY counters, min-heap)
//!                    ├─ writes Mutex<SpaceSaving>
//!                    └─ bytes  Mutex<SpaceSaving> (weighted by value bytes)
//!                  │ top() on the reader's thread: counts summed per key over the
//!                  ▼ workers, times SAMPLE_RATE, the K largest
//!   [(key, estimate)] ── keys URI-encoded as `watch` prints them
//! ```
//!
//! Space-Saving (Metwally, Agrawal, El Abbadi, 2005) keeps `CAPACITY` counters; a
//! key not held replaces the smallest and inherits its count, so a count is an
//! overestimate by at most that inherited error. With 1,024 counters per worker and
//! one request in 128 sampled, the true top 16 of a Zipf 0.99 or 1.2 load are found
//! (the recall test below). Goals: no lock on an unsampled request, a bounded
//! memory (CAPACITY keys per kind per worker). Non-goals: exact counts; keys seen
//! only before a `reset`.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// One request in this many is sampled (a power of two).
pub const SAMPLE_RATE: u64 = 128;
/// Counters per kind per worker.
pub const CAPACITY: usize = 1024;
/// Keys reported per kind (`stats hotkeys`, `/metrics`): twice the 16 that the
/// recall target names, so that sampling noise between ranks 16 and 17 (a few
/// percent apart under Zipf 0.99) does not push a true top-16 key off the list.
pub const TOP_K: usize = 32;
/// The top that the recall target is set for.
#[cfg(test)]
pub const RECALL_TOP: usize = 16;

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

#[derive(Debug)]
struct Slot {
    /// The key (its allocation is reused by the key that replaces it).
    key: Vec<u8>,
    /// The key's hash (its entry in `pos`).
    hash: u64,
    count: u64,
    /// Where this slot is in the heap.
    at: usize,
}

/// Space-Saving's counters: slots that never move, a binary min-heap of slot numbers
/// on count, and a map from each held key's 64-bit hash to its slot. A sampled
/// request hashes its key once (SipHash with a random key, so a client cannot
/// choose colliding keys); heap moves touch only the two arrays. Two keys with the
/// same 64-bit hash would share a counter (about one chance in 2^54 with 1,024
/// keys held), which an estimate can afford.
#[derive(Debug)]
pub struct SpaceSaving {
    cap: usize,
    slots: Vec<Slot>,
    heap: Vec<usize>,
    pos: HashMap<u64, usize, BuildHasherDefault<Prehashed>>,
}

/// The map's hasher: its keys are hashes already.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl SpaceSaving {
    pub fn new(cap: usize) -> Self {
        SpaceSaving {
            cap: cap.max(1),
            slots: Vec::new(),
            heap: Vec::new(),
            pos: HashMap::default(),
        }
    }

    /// Counts `weight` for `key`.
    #[cfg(test)]
    pub fn offer(&mut self, key: &[u8], weight: u64) {
        let h = BuildHasherDefault::<std::hash::DefaultHasher>::default().hash_one(key);
        self.offer_hashed(h, key, weight);
    }

    /// Counts `weight` for `key`, whose hash (by the hasher all of a worker's
    /// sketches share) is `h`.
    pub fn offer_hashed(&mut self, h: u64, key: &[u8], weight: u64) {
        if let Some(&slot) = self.pos.get(&h) {
            let s = &mut self.slots[slot];
            s.count = s.count.saturating_add(weight);
            let at = s.at;
            self.sift_down(at);
            return;
        }
        if self.slots.len() < self.cap {
            let slot = self.slots.len();
            self.slots.push(Slot {
                key: key.to_vec(),
                hash: h,
                count: weight,
                at: self.heap.len(),
            });
            self.heap.push(slot);
            self.pos.insert(h, slot);
            self.sift_up(self.heap.len() - 1);
            return;
        }
        // Replace the smallest: the newcomer inherits its count.
        let slot = self.heap[0];
        let s = &mut self.slots[slot];
        let old = std::mem::replace(&mut s.hash, h);
        s.key.clear();
        s.key.extend_from_slice(key);
        s.count = s.count.saturating_add(weight);
        self.pos.remove(&old);
        self.pos.insert(h, slot);
        self.sift_down(0);
    }

    /// Every (key, count) held.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.slots.iter().map(|s| (&*s.key, s.count))
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.heap.clear();
        self.pos.clear();
    }

    fn count_at(&self, i: usize) -> u64 {
        self.slots[self.heap[i]].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        let (sa, sb) = (self.heap[a], self.heap[b]);
        self.slots[sa].at = a;
        self.slots[sb].at = b;
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.count_at(parent) <= self.count_at(i) {
                break;
            }
            self.swap(parent, i);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.count_at(l) < self.count_at(m) {
                m = l;
            }
            if r < n && self.count_at(r) < self.count_at(m) {
                m = r;
            }
            if m == i {
                return;
            }
            self.swap(i, m);
            i = m;
        }
    }
}

/// One worker's hot-key sketches.
pub struct HotKeys {
    /// The sampler's xorshift64 state: only the owning worker loads and stores it
    /// (Relaxed: no other memory depends on it).
    rng: AtomicU64,
    /// Requests until the next sample (owner only, as `rng`).
    left: AtomicU64,
    /// The output's length when the sampled request in flight started, for a
    /// read's reply bytes (owner only, as `rng`).
    out_at: AtomicU64,
    /// Each sketch's lock is taken by the owning worker on a sampled request and by a
    /// reader (`stats hotkeys`, `/metrics`) while it copies the counts out; neither
    /// holds it while taking another lock.
    sketches: [Mutex<SpaceSaving>; 3],
    /// Hashes a sampled key once for every sketch (SipHash, keyed at random).
    hasher: RandomState,
}

impl HotKeys {
    /// A worker's sketches; `seed` varies the sampler between workers.
    pub fn new(seed: u64) -> Self {
        HotKeys {
            rng: AtomicU64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            left: AtomicU64::new(1),
            out_at: AtomicU64::new(0),
            sketches: std::array::from_fn(|_| Mutex::new(SpaceSaving::new(CAPACITY))),
            hasher: RandomState::new(),
        }
    }

    /// Whether to sample this request (one in [`SAMPLE_RATE`] on average). Only the
    /// owning worker calls this. A countdown (a load, a decrement and a store per
    /// request) whose every restart draws the next gap uniformly from
    /// 1..2 * SAMPLE_RATE, so that no periodic pattern in the requests lines up
    /// with the samples.
    #[inline]
    pub fn sampled(&self) -> bool {
        let left = self.left.load(Ordering::Relaxed);
        if left > 1 {
            self.left.store(left - 1, Ordering::Relaxed);
            return false;
        }
        self.left.store(self.gap(), Ordering::Relaxed);
        true
    }

    /// Notes the output's length as a sampled request starts (owner only).
    #[cold]
    pub fn start_sample(&self, out_len: usize) {
        self.out_at.store(out_len as u64, Ordering::Relaxed);
    }

    /// The reply bytes of the sampled request that started at
    /// [`HotKeys::start_sample`], given the output's length now.
    pub fn reply_bytes(&self, out_len: usize) -> u64 {
        (out_len as u64).saturating_sub(self.out_at.load(Ordering::Relaxed))
    }

    /// A gap between samples, uniform in 1..2 * SAMPLE_RATE (mean SAMPLE_RATE).
    fn gap(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        1 + x % (2 * SAMPLE_RATE - 1)
    }

    /// Counts a sampled request: a read or a write of `key` that moved `bytes` value
    /// bytes. Call only when [`HotKeys::sampled`] said yes.
    pub fn note(&self, write: bool, key: &[u8], bytes: u64) {
        let kind = if write { Kind::Writes } else { Kind::Reads };
        let h = self.hasher.hash_one(key);
        self.sketch(kind).lock().offer_hashed(h, key, 1);
        if bytes > 0 {
            self.sketch(Kind::Bytes).lock().offer_hashed(h, key, bytes);
        }
    }

    fn sketch(&self, kind: Kind) -> &Mutex<SpaceSaving> {
        &self.sketches[kind as usize]
    }

    pub fn clear(&self) {
        for s in &self.sketches {
            s.lock().clear();
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
            let s = w.sketch(kind).lock();
            for (key, c) in s.entries() {
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
    fn space_saving_is_exact_below_capacity_and_bounded_above() {
        let mut s = SpaceSaving::new(4);
        for (k, n) in [(b"a", 5), (b"b", 3), (b"c", 1)] {
            for _ in 0..n {
                s.offer(k, 1);
            }
        }
        let mut e: Vec<_> = s.entries().map(|(k, c)| (k.to_vec(), c)).collect();
        e.sort();
        assert_eq!(
            e,
            vec![(b"a".to_vec(), 5), (b"b".to_vec(), 3), (b"c".to_vec(), 1)]
        );
        for k in [b"d", b"e", b"f"] {
            s.offer(k, 1);
        }
        assert_eq!(s.entries().count(), 4, "never more than capacity");
        // The heavy keys survive; the total is conserved (Space-Saving's invariant).
        assert!(s.entries().any(|(k, c)| k == b"a" && c == 5));
        assert_eq!(s.entries().map(|(_, c)| c).sum::<u64>(), 12);
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

    /// Recall of the true top 16 among the reported [`TOP_K`], with the default
    /// sampling, 4 workers and 1,000,000 requests over 100,000 keys (it also prints
    /// the strict figure: among the reported top 16).
    fn recall(s: f64) -> f64 {
        const WORKERS: usize = 4;
        let workers: Vec<HotKeys> = (0..WORKERS as u64).map(HotKeys::new).collect();
        let mut z = Zipf::new(100_000, s, 0x5eed ^ s.to_bits());
        let key = |r: usize| format!("key:{r}").into_bytes();
        for i in 0..1_000_000usize {
            let w = &workers[i % WORKERS];
            let r = z.next();
            if w.sampled() {
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
        let n = (0..160_000).filter(|_| h.sampled()).count() as f64;
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
