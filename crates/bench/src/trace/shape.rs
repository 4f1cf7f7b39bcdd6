//! The published figures each generated trace is shaped on.
//!
//! Every number below is from the twitter/cache-trace repository's statistics table,
//! `stat/2020Mar.md` (one row per cluster, the week of March 2020 analysed in Yang,
//! Yue and Rashmi, "A large scale analysis of hundreds of in-memory cache clusters at
//! Twitter", OSDI 2020). The table gives means only; what it does not give (the
//! spread of key and value sizes) is an assumption named in `gen.rs`.

/// A request's operation, as Twemcache saw it. On the wire (`replay.rs`): `Get` and
/// `Gets` are reads (look-aside: a miss is followed by a `set`), `Add` is `add`, and
/// `Cas` is sent as `replace` (the replayer holds no CAS token; `replace` stores when
/// the key is present, which is what a `cas` without a conflict does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Get,
    Gets,
    Add,
    Cas,
}

impl Op {
    pub fn is_read(self) -> bool {
        matches!(self, Op::Get | Op::Gets)
    }

    /// The memcached command name, as the trace's csv writes it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Gets => "gets",
            Op::Add => "add",
            Op::Cas => "cas",
        }
    }
}

const DAY_SECS: u32 = 86_400;
const HOUR_SECS: u32 = 3_600;

/// One cluster's published workload statistics.
#[derive(Debug)]
pub struct Shape {
    pub name: &'static str,
    /// `Zipf alpha`: the popularity skew of the keys requested.
    pub zipf_alpha: f64,
    /// `one-hit-wonder ratio (%)` / 100: the share of distinct keys requested once.
    pub one_hit_wonder_share: f64,
    /// `key size`: mean key bytes.
    pub key_bytes_mean: f64,
    /// `value size`: mean value bytes.
    pub value_bytes_mean: f64,
    /// `common TTL`: (TTL, share), renormalised to sum to 1 (the table rounds).
    pub ttl_mix: &'static [(u32, f64)],
    /// `operation`: (op, share), renormalised to sum to 1.
    pub op_mix: &'static [(Op, f64)],
    /// `request rate (kqps)` × 1000: the trace's clock advances at this rate.
    pub requests_per_sec: f64,
    /// `mean freq`, `compulsory miss ratio (%)` / 100 and `production miss ratio`:
    /// reported next to the generated trace's own, not matched (see `gen.rs`).
    pub mean_freq: f64,
    pub compulsory_miss_ratio: f64,
    pub production_miss_ratio: f64,
}

/// cluster52: `0.0189 | 1 | 20 | 273 | 24.25 | 32.6 | 19.36 | 3.07 |
/// 1d:0.65, 14d:0.27, 12h:0.07 | … | get:0.91 add:0.04 gets:0.02 cas:0.02 | 1.2117`.
/// The repository's README recommends it for miss-ratio and TTL studies.
pub const CLUSTER52: Shape = Shape {
    name: "cluster52",
    zipf_alpha: 1.2117,
    one_hit_wonder_share: 0.1936,
    key_bytes_mean: 20.0,
    value_bytes_mean: 273.0,
    ttl_mix: &[
        (DAY_SECS, 0.65),
        (14 * DAY_SECS, 0.27),
        (12 * HOUR_SECS, 0.07),
    ],
    op_mix: &[
        (Op::Get, 0.91),
        (Op::Add, 0.04),
        (Op::Gets, 0.02),
        (Op::Cas, 0.02),
    ],
    requests_per_sec: 24_250.0,
    mean_freq: 32.6,
    compulsory_miss_ratio: 0.0307,
    production_miss_ratio: 0.0189,
};

/// cluster25: `0.0002 | 1 | 49 | 28 | 18.97 | 662.7 | 3.22 | 0.15 | 30d:0.99 | … |
/// get:0.95 add:0.02 gets:0.02 cas:0.02 | 0.9929`.
pub const CLUSTER25: Shape = Shape {
    name: "cluster25",
    zipf_alpha: 0.9929,
    one_hit_wonder_share: 0.0322,
    key_bytes_mean: 49.0,
    value_bytes_mean: 28.0,
    ttl_mix: &[(30 * DAY_SECS, 0.99)],
    op_mix: &[
        (Op::Get, 0.95),
        (Op::Add, 0.02),
        (Op::Gets, 0.02),
        (Op::Cas, 0.02),
    ],
    requests_per_sec: 18_970.0,
    mean_freq: 662.7,
    compulsory_miss_ratio: 0.0015,
    production_miss_ratio: 0.0002,
};

pub const SHAPES: &[&Shape] = &[&CLUSTER52, &CLUSTER25];

pub fn by_name(name: &str) -> Option<&'static Shape> {
    SHAPES.iter().copied().find(|s| s.name == name)
}

/// Picks from a (value, share) mix with `u` uniform in [0, 1); shares need not sum
/// to 1 (they are scaled by their sum).
pub fn pick<T: Copy>(mix: &[(T, f64)], u: f64) -> T {
    let total: f64 = mix.iter().map(|(_, s)| s).sum();
    let mut at = u * total;
    for &(v, s) in mix {
        if at < s {
            return v;
        }
        at -= s;
    }
    mix[mix.len() - 1].0
}
