//! The trace generator: a seeded, deterministic request sequence with a cluster's
//! published popularity, one-hit-wonder share, sizes, TTLs and op mix (`shape.rs`).
//!
//! How each figure is met:
//! - **Popularity**: ranks drawn from Zipf(`zipf_alpha`) over `keys` keys; rank r
//!   is key r-1.
//! - **One-hit wonders**: a Zipf tail alone already holds many keys requested once,
//!   more the larger the key space is against the trace. `keys_for_share` picks the
//!   largest key space whose expected share of once-requested keys is at most the
//!   published share (so the key space follows from the trace length and the
//!   share); then U fresh keys, requested once each, are added so that
//!   (U + keys the draws requested once) / (U + distinct keys drawn) equals the
//!   share exactly, and the sequence is shuffled. The Zipf part is cut so that the
//!   total stays at `requests`.
//! - **Sizes** (fixed per key, from a hash of seed and key): key length uniform in
//!   ±25% of the published mean; value length log-normal with σ = 0.5 and the
//!   published mean. The table publishes means only: the spread is our assumption.
//! - **TTL**: fixed per key, drawn from the published mix (over keys), divided by
//!   `ttl_divisor` (1 keeps the published TTLs).
//! - **Ops**: each request's op is drawn from the published mix.
//! - **Time**: request i happens at i / `requests_per_sec` seconds.
//!
//! Not matched: the published mean frequency and compulsory miss ratio describe a
//! week of traffic (about 11 billion requests for cluster25); a trace of a few
//! million requests over a key space larger than the cache has more compulsory
//! misses. The summary prints the trace's own figures beside the published ones.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

use super::shape::{pick, Op, Shape};

/// The value length's log-normal spread (σ of the underlying normal).
const VALUE_SIGMA: f64 = 0.5;
/// Value lengths are kept under memcached's default 1 MB item size.
const VALUE_BYTES_MAX: u32 = 512 * 1024;
/// The memcached key limit (protocol.txt).
const KEY_BYTES_MAX: usize = 250;

/// What to generate.
#[derive(Clone, Debug)]
pub struct Params {
    pub requests: usize,
    /// Distinct keys the Zipf part draws from; 0: `keys_for_share`.
    pub keys: u64,
    pub seed: u64,
    pub ttl_divisor: u32,
}

/// One request: when, which key, what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Req {
    pub time_secs: u32,
    pub key: u64,
    pub op: Op,
}

/// A key's fixed attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyMeta {
    pub key_bytes: usize,
    pub value_bytes: u32,
    pub ttl_secs: u32,
}

pub struct Trace {
    pub shape: &'static Shape,
    pub params: Params,
    pub reqs: Vec<Req>,
    /// Keys `zipf_keys..` are the one-hit wonders.
    pub zipf_keys: u64,
}

/// splitmix64: the per-key attributes are a pure function of (seed, key).
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

impl Trace {
    pub fn generate(shape: &'static Shape, mut params: Params) -> anyhow::Result<Trace> {
        anyhow::ensure!(params.requests > 0, "empty trace");
        if params.keys == 0 {
            params.keys = keys_for_share(
                params.requests,
                shape.zipf_alpha,
                shape.one_hit_wonder_share,
            );
        }
        anyhow::ensure!(params.ttl_divisor > 0, "ttl divisor must be positive");
        let mut rng = SmallRng::seed_from_u64(params.seed);
        let zipf = Zipf::new(params.keys as f64, shape.zipf_alpha)
            .map_err(|e| anyhow::anyhow!("zipf: {e}"))?;
        let mut keys: Vec<u64> = (0..params.requests)
            .map(|_| {
                (zipf.sample(&mut rng) as u64)
                    .saturating_sub(1)
                    .min(params.keys - 1)
            })
            .collect();
        // Two rounds: the wonders needed for all the draws, then for the draws that
        // remain once the Zipf part is cut to make room for them.
        let first = wonders_needed(&keys, params.keys, shape.one_hit_wonder_share);
        keys.truncate(params.requests.saturating_sub(first as usize).max(1));
        let wonders = wonders_needed(&keys, params.keys, shape.one_hit_wonder_share);
        keys.extend(params.keys..params.keys + wonders);
        keys.shuffle(&mut rng);
        let reqs = keys
            .into_iter()
            .enumerate()
            .map(|(i, key)| Req {
                time_secs: (i as f64 / shape.requests_per_sec) as u32,
                key,
                op: pick(shape.op_mix, rng.random::<f64>()),
            })
            .collect();
        let zipf_keys = params.keys;
        Ok(Trace {
            shape,
            params,
            reqs,
            zipf_keys,
        })
    }

    /// A key's sizes and TTL.
    pub fn meta(&self, key: u64) -> KeyMeta {
        let s = self.shape;
        let h1 = mix64(self.params.seed ^ mix64(key));
        let h2 = mix64(h1);
        let h3 = mix64(h2);
        let h4 = mix64(h3);
        let lo = (s.key_bytes_mean * 0.75).round();
        let hi = (s.key_bytes_mean * 1.25).round();
        let key_bytes = (lo + (unit(h1) * (hi - lo + 1.0)).floor()) as usize;
        let key_bytes = key_bytes.max(hex_digits(key) + 1).min(KEY_BYTES_MAX);
        // Box–Muller from two uniforms; (0, 1] keeps ln finite.
        let u1 = 1.0 - unit(h2);
        let n = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * unit(h3)).cos();
        let mu = s.value_bytes_mean.ln() - VALUE_SIGMA * VALUE_SIGMA / 2.0;
        let value_bytes = ((mu + VALUE_SIGMA * n).exp().round() as u32).clamp(1, VALUE_BYTES_MAX);
        let ttl_secs = (pick(s.ttl_mix, unit(h4)) / self.params.ttl_divisor).max(1);
        KeyMeta {
            key_bytes,
            value_bytes,
            ttl_secs,
        }
    }

    /// The key's name: its id in hex, left-padded with `_` to its length (unique:
    /// dropping the padding gives the id back).
    pub fn key_name(&self, key: u64, buf: &mut Vec<u8>) {
        let len = self.meta(key).key_bytes;
        buf.clear();
        let hex = format!("{key:x}");
        buf.resize(len.saturating_sub(hex.len()), b'_');
        buf.extend_from_slice(hex.as_bytes());
    }

    /// Figures of the generated trace, to print beside the published ones.
    pub fn stats(&self) -> TraceStats {
        let mut counts = std::collections::HashMap::<u64, u32>::new();
        let mut reads = 0usize;
        for r in &self.reqs {
            *counts.entry(r.key).or_default() += 1;
            reads += usize::from(r.op.is_read());
        }
        let distinct = counts.len();
        let once = counts.values().filter(|&&c| c == 1).count();
        let (mut kb, mut vb) = (0f64, 0f64);
        for &k in counts.keys() {
            let m = self.meta(k);
            kb += m.key_bytes as f64;
            vb += f64::from(m.value_bytes);
        }
        let d = distinct.max(1) as f64;
        TraceStats {
            requests: self.reqs.len(),
            reads,
            distinct,
            wonders_added: counts.keys().filter(|&&k| k >= self.zipf_keys).count(),
            one_hit_wonder_share: once as f64 / d,
            mean_freq: self.reqs.len() as f64 / d,
            key_bytes_mean: kb / d,
            value_bytes_mean: vb / d,
            object_bytes_total: (kb + vb) as u64,
        }
    }
}

fn hex_digits(key: u64) -> usize {
    (64 - key.leading_zeros() as usize).div_ceil(4).max(1)
}

/// The largest Zipf key space (within 1%) whose expected share of keys requested
/// once in `requests` draws is at most `share`: with p_k the probability of rank k,
/// E[distinct] = Σ 1 - (1 - p_k)^N and E[once] = Σ N p_k (1 - p_k)^(N-1).
pub fn keys_for_share(requests: usize, alpha: f64, share: f64) -> u64 {
    let n = requests as f64;
    let once_share = |k: u64| {
        let h: f64 = (1..=k).map(|r| (r as f64).powf(-alpha)).sum();
        let (mut once, mut distinct) = (0.0, 0.0);
        for r in 1..=k {
            let p = (r as f64).powf(-alpha) / h;
            let miss = ((n - 1.0) * (-p).ln_1p()).exp();
            once += n * p * miss;
            distinct += 1.0 - miss * (1.0 - p);
        }
        once / distinct
    };
    let (mut lo, mut hi) = (16u64, (requests as u64).max(32));
    if once_share(hi) <= share {
        return hi;
    }
    while hi as f64 / lo as f64 > 1.01 {
        let mid = ((lo as f64 * hi as f64).sqrt()) as u64;
        if once_share(mid) <= share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// One-hit wonders to add so that the share of keys requested once is `share`.
fn wonders_needed(keys: &[u64], space: u64, share: f64) -> u64 {
    let mut counts = vec![0u8; space as usize];
    for &k in keys {
        if let Some(c) = counts.get_mut(k as usize) {
            *c = c.saturating_add(1);
        }
    }
    let distinct = counts.iter().filter(|&&c| c > 0).count() as f64;
    let once = counts.iter().filter(|&&c| c == 1).count() as f64;
    if share >= 1.0 {
        return 0;
    }
    ((share * distinct - once) / (1.0 - share)).max(0.0).round() as u64
}

#[derive(Debug)]
pub struct TraceStats {
    pub requests: usize,
    pub reads: usize,
    pub distinct: usize,
    /// Keys added as one-hit wonders (not drawn from the Zipf part).
    pub wonders_added: usize,
    pub one_hit_wonder_share: f64,
    pub mean_freq: f64,
    pub key_bytes_mean: f64,
    pub value_bytes_mean: f64,
    /// Key + value bytes over distinct keys: the working set.
    pub object_bytes_total: u64,
}

#[cfg(test)]
#[path = "gen_tests.rs"]
mod tests;
