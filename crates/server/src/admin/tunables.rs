//! Settings the admin commands change at run time (`lru_crawler`, `slabs automove`,
//! `lru`), and the crawler's own counter. `stats settings`
//! reports them under memcached's names, floats as [`stat_float`] prints them.
//!
//! Most of them tune machinery memcrab does not have (slab classes and their page
//! mover, a segmented LRU, a crawler thread): the segment engine has one memory pool
//! for all sizes and expires whole segments, so nothing reads these values. They are
//! kept and reported so that a deployment script that sets them gets memcached's
//! answers and can read its setting back (docs/operations.md lists each and what it
//! does here).
//!
//! Locks: none but [`Tunables::lru`]'s mutex, a leaf (taken by `lru` commands and
//! `stats settings`, holding no other lock). Every atomic is Relaxed: each is a
//! plain setting or statistic, read with no ordering against other data.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::startup::settings::Settings;

/// `lru tune`, `lru mode` and `lru temp_ttl` values (memcached's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lru {
    pub hot_pct: u32,
    pub warm_pct: u32,
    pub hot_max_factor: f64,
    pub warm_max_factor: f64,
    pub segmented: bool,
    pub temp_lru: bool,
    pub temporary_ttl: i32,
}

impl Default for Lru {
    fn default() -> Self {
        Lru {
            hot_pct: 20,
            warm_pct: 40,
            hot_max_factor: 0.2,
            warm_max_factor: 2.0,
            segmented: true,
            temp_lru: false,
            temporary_ttl: 61,
        }
    }
}

#[derive(Debug)]
pub struct Tunables {
    /// `lru_crawler enable|disable`: whether crawls and key dumps may start.
    pub crawler: AtomicBool,
    /// `lru_crawler sleep` (microseconds) and `tocrawl` (items per class).
    pub crawler_sleep_us: AtomicU32,
    pub crawler_tocrawl: AtomicU32,
    /// Crawls and key dumps started (memcached's `lru_crawler_starts`).
    pub crawler_starts: AtomicU64,
    /// Items key dumps walked (memcached's `crawler_items_checked`, which counts
    /// the items its crawler looks at, in dumps too).
    pub crawler_items_checked: AtomicU64,
    /// `slabs automove <0|1|2>`.
    pub slab_automove: AtomicU32,
    /// `slabs automove window <secs>` (memcached's default 10).
    pub slab_automove_window: AtomicU32,
    /// `slabs automove ratio <r>`, as f64 bits.
    slab_automove_ratio: AtomicU64,
    /// `slabs automove freeratio <r>` (memcached 1.6.34; its default 0.01), as f64
    /// bits.
    slab_automove_freeratio: AtomicU64,
    /// `lru ...` values; see [`Lru`].
    pub lru: Mutex<Lru>,
    /// `stats sizes` is enabled (`-o track_sizes`).
    pub track_sizes: AtomicBool,
}

impl Tunables {
    /// The start-up values: `-o track_sizes`, whether the LRU crawler starts on,
    /// and memcached's slab, LRU and crawler sub-options (`-o`, settings/tuning.rs).
    pub fn new(s: &Settings) -> Tunables {
        let t = &s.tuning;
        Tunables {
            crawler: AtomicBool::new(s.lru_crawler),
            crawler_sleep_us: AtomicU32::new(t.lru_crawler_sleep.max(0) as u32),
            crawler_tocrawl: AtomicU32::new(t.lru_crawler_tocrawl),
            crawler_starts: AtomicU64::new(0),
            crawler_items_checked: AtomicU64::new(0),
            slab_automove: AtomicU32::new(t.slab_automove),
            slab_automove_window: AtomicU32::new(t.slab_automove_window),
            slab_automove_ratio: AtomicU64::new(t.slab_automove_ratio.to_bits()),
            slab_automove_freeratio: AtomicU64::new(0.01f64.to_bits()),
            lru: Mutex::new(Lru {
                hot_pct: t.hot_lru_pct as u32,
                warm_pct: t.warm_lru_pct as u32,
                hot_max_factor: t.hot_max_factor,
                warm_max_factor: t.warm_max_factor,
                segmented: t.lru_segmented,
                temp_lru: t.temp_lru,
                temporary_ttl: t.temporary_ttl,
            }),
            track_sizes: AtomicBool::new(s.track_sizes),
        }
    }

    pub fn slab_automove_ratio(&self) -> f64 {
        f64::from_bits(self.slab_automove_ratio.load(Ordering::Relaxed))
    }

    pub fn set_slab_automove_ratio(&self, r: f64) {
        self.slab_automove_ratio
            .store(r.to_bits(), Ordering::Relaxed);
    }

    pub fn slab_automove_freeratio(&self) -> f64 {
        f64::from_bits(self.slab_automove_freeratio.load(Ordering::Relaxed))
    }

    pub fn set_slab_automove_freeratio(&self, r: f64) {
        self.slab_automove_freeratio
            .store(r.to_bits(), Ordering::Relaxed);
    }
}

/// Key dumps under way (`lru_crawler metadump|mgdump`): memcached's
/// `lru_crawler_running`, 0 or 1 there (one crawler thread); memcrab walks each on
/// the worker that asked, so several may run at once. A `lru_crawler crawl` has
/// nothing to do here and never counts. Raised by [`CrawlRunning::start`], lowered
/// when that guard drops: when the dump ends or its connection closes. One server
/// per process, so one count. Relaxed: a statistic, ordered against nothing.
static CRAWLS_RUNNING: AtomicU32 = AtomicU32::new(0);

/// A key dump under way, counted in `stats`' `lru_crawler_running` while it lives.
#[derive(Debug)]
pub struct CrawlRunning(());

impl CrawlRunning {
    pub fn start() -> CrawlRunning {
        CRAWLS_RUNNING.fetch_add(1, Ordering::Relaxed);
        CrawlRunning(())
    }

    /// The dumps under way now.
    pub fn count() -> u32 {
        CRAWLS_RUNNING.load(Ordering::Relaxed)
    }
}

impl Drop for CrawlRunning {
    fn drop(&mut self) {
        CRAWLS_RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// memcached's longest stat value: `append_stat` prints into 127 bytes, and a
/// longer value is cut (a ratio set to 1e300, say).
const STAT_VALUE_MAX_BYTES: usize = 126;

/// A float setting as memcached's `APPEND_STAT("%.Nf")` prints it with glibc, `digits`
/// being N: Rust's `{:.N}` gives the same exact, ties-to-even digits; glibc spells
/// the specials `nan`, `-nan`, `inf` and `-inf` (the commands accept them, as
/// `strtod` does); and the value is cut at memcached's stat buffer.
pub fn stat_float(v: f64, digits: usize) -> String {
    let mut s = if v.is_nan() {
        let sign = if v.is_sign_negative() { "-" } else { "" };
        format!("{sign}nan")
    } else {
        format!("{v:.digits$}")
    };
    s.truncate(STAT_VALUE_MAX_BYTES);
    s
}

#[cfg(test)]
mod tests {
    use super::stat_float;

    #[test]
    fn floats_print_as_glibc() {
        let rows: &[(f64, usize, &str)] = &[
            (0.8, 2, "0.80"),
            (0.01, 3, "0.010"),
            (0.125, 2, "0.12"),
            (0.0005, 3, "0.001"),
            (-0.0, 3, "-0.000"),
            (-3.0, 3, "-3.000"),
            (f64::NAN, 3, "nan"),
            (-f64::NAN, 3, "-nan"),
            (f64::INFINITY, 2, "inf"),
            (f64::NEG_INFINITY, 2, "-inf"),
            (1e30, 3, "1000000000000000019884624838656.000"),
        ];
        for &(v, digits, want) in rows {
            assert_eq!(stat_float(v, digits), want, "{v}");
        }
        // 1e308 has 309 digits; memcached shows the first 126.
        let long = stat_float(1e308, 2);
        assert_eq!(long.len(), 126);
        assert!(long.starts_with("1000000000000000010979063629440455417404923096773118"));
    }
}
