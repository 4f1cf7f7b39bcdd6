//! Workloads: the standard ones by name (defined in docs/benchmarks.md) and the knobs
//! that override them, plus the key and value generators.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

/// How keys are drawn from the key space.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    Uniform,
    /// Zipf with this exponent (theta), rank 1 = key 0.
    Zipf(f64),
    /// 0, 1, 2, ... wrapping, per connection.
    Sequential,
}

impl std::str::FromStr for KeyDist {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(KeyDist::Uniform),
            "sequential" | "seq" => Ok(KeyDist::Sequential),
            _ => match s.strip_prefix("zipf:").or_else(|| s.strip_prefix("zipf")) {
                Some("") => Ok(KeyDist::Zipf(0.99)),
                Some(theta) => theta
                    .trim_start_matches(':')
                    .parse()
                    .map(KeyDist::Zipf)
                    .map_err(|_| format!("bad zipf theta in \"{s}\"")),
                None => Err(format!(
                    "unknown key distribution \"{s}\" (uniform, zipf:THETA, sequential)"
                )),
            },
        }
    }
}

/// A value size: fixed or uniform in a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueSize {
    pub min: usize,
    pub max: usize,
}

impl std::str::FromStr for ValueSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parse = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad value size \"{s}\""))
        };
        match s.split_once('-') {
            Some((a, b)) => {
                let (min, max) = (parse(a)?, parse(b)?);
                if min > max {
                    return Err(format!("value size range \"{s}\" is empty"));
                }
                Ok(ValueSize { min, max })
            }
            None => {
                let v = parse(s)?;
                Ok(ValueSize { min: v, max: v })
            }
        }
    }
}

/// Everything that defines the load, independent of targets and duration.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Share of requests that are gets (the rest are sets), 0..=1.
    pub get_ratio: f64,
    pub keys: u64,
    pub key_dist: KeyDist,
    pub key_size: usize,
    pub value_size: ValueSize,
    /// Keys per get.
    pub multiget: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    pub conns: usize,
    /// Server memory to start with, in MB, when the bench launches the server.
    pub server_memory_mb: Option<u64>,
    /// A name for reports (e.g. a sets-then-gets phase).
    pub label: Option<String>,
}

impl Workload {
    pub fn labelled(self, label: &str) -> Self {
        Workload {
            label: Some(label.to_string()),
            ..self
        }
    }
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            get_ratio: 0.9,
            keys: 100_000,
            key_dist: KeyDist::Uniform,
            key_size: 16,
            value_size: ValueSize { min: 100, max: 100 },
            multiget: 1,
            pipeline: 1,
            conns: 50,
            server_memory_mb: None,
            label: None,
        }
    }
}

/// The standard workloads of docs/benchmarks.md.
pub fn named(name: &str) -> Option<Workload> {
    let w1 = Workload::default();
    Some(match name.to_ascii_uppercase().as_str() {
        "W1" => w1,
        "W2" => Workload { pipeline: 16, ..w1 },
        "W3" => Workload { multiget: 16, ..w1 },
        "W4" => Workload {
            get_ratio: 0.0,
            value_size: ValueSize {
                min: 1024,
                max: 1024,
            },
            ..w1
        },
        "W5" => Workload {
            keys: 10_000_000,
            key_dist: KeyDist::Zipf(0.99),
            value_size: ValueSize { min: 100, max: 300 },
            server_memory_mb: Some(64),
            ..w1
        },
        _ => return None,
    })
}

/// Per-connection request generator.
pub struct Gen {
    rng: SmallRng,
    zipf: Option<Zipf<f64>>,
    next_seq: u64,
    w: Workload,
    key_buf: Vec<u8>,
}

impl Gen {
    /// A generator; `seq_start` is where sequential keys begin.
    pub fn new(w: &Workload, seed: u64, seq_start: u64) -> Self {
        let zipf = match w.key_dist {
            KeyDist::Zipf(theta) => Zipf::new(w.keys.max(1) as f64, theta).ok(),
            _ => None,
        };
        Gen {
            rng: SmallRng::seed_from_u64(seed),
            zipf,
            next_seq: seq_start % w.keys.max(1),
            w: w.clone(),
            key_buf: Vec::with_capacity(64),
        }
    }

    pub fn is_get(&mut self) -> bool {
        self.w.get_ratio >= 1.0
            || (self.w.get_ratio > 0.0 && self.rng.random::<f64>() < self.w.get_ratio)
    }

    pub fn key_index(&mut self) -> u64 {
        let n = self.w.keys.max(1);
        match self.w.key_dist {
            KeyDist::Uniform => self.rng.random_range(0..n),
            KeyDist::Sequential => {
                let k = self.next_seq;
                self.next_seq = (self.next_seq + 1) % n;
                k
            }
            KeyDist::Zipf(_) => match &self.zipf {
                Some(z) => (z.sample(&mut self.rng) as u64)
                    .saturating_sub(1)
                    .min(n - 1),
                None => self.rng.random_range(0..n),
            },
        }
    }

    /// The key for an index, `key:` then the zero-padded index, `key_size` bytes
    /// (longer if the index needs more digits).
    pub fn key(&mut self, index: u64) -> &[u8] {
        write_key(&mut self.key_buf, index, self.w.key_size);
        &self.key_buf
    }

    pub fn value_len(&mut self) -> usize {
        let v = self.w.value_size;
        if v.min == v.max {
            v.min
        } else {
            self.rng.random_range(v.min..=v.max)
        }
    }
}

pub fn write_key(buf: &mut Vec<u8>, index: u64, key_size: usize) {
    buf.clear();
    buf.extend_from_slice(b"key:");
    let mut digits = itoa_buf(index);
    let width = key_size.saturating_sub(4);
    while digits.len() < width {
        digits.insert(0, b'0');
    }
    buf.extend_from_slice(&digits);
}

fn itoa_buf(n: u64) -> Vec<u8> {
    n.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_workloads() {
        assert_eq!(named("w2").map(|w| w.pipeline), Some(16));
        assert_eq!(named("W3").map(|w| w.multiget), Some(16));
        assert_eq!(named("W4").map(|w| w.get_ratio), Some(0.0));
        assert_eq!(named("W5").map(|w| w.key_dist), Some(KeyDist::Zipf(0.99)));
        assert!(named("W9").is_none());
    }

    #[test]
    fn keys_and_sizes() {
        let mut b = Vec::new();
        write_key(&mut b, 42, 16);
        assert_eq!(b, b"key:000000000042");
        assert_eq!("100-300".parse(), Ok(ValueSize { min: 100, max: 300 }));
        assert_eq!("zipf:0.9".parse(), Ok(KeyDist::Zipf(0.9)));
        let w = Workload {
            keys: 10,
            key_dist: KeyDist::Zipf(0.99),
            ..Workload::default()
        };
        let mut g = Gen::new(&w, 1, 0);
        let mut counts = [0u32; 10];
        for _ in 0..10_000 {
            counts[g.key_index() as usize] += 1;
        }
        assert!(
            counts[0] > counts[9] * 3,
            "zipf skews to low ranks: {counts:?}"
        );
    }
}
