//! The memory bound: with `-m 64`, writing 1 GB of distinct items keeps the server's
//! resident memory under the bound the README documents (`-m` × 1.25 + 16 MB), and
//! `stats` shows the evictions that made room. And overwrites do not grow memory
//! toward a large `-m` (the segment engine's compaction before growth).
//!
//! The bound holds for every item size: the `bound_*` tests write tiny
//! items (1-byte values under 10- and 250-byte keys, where the index costs as much as
//! the items), 100-byte values, values at `-I`, and a churn of mixed sizes, each at
//! `-m 16` and `-m 64` with eviction and under `-M`, and compare the peak resident
//! memory (VmHWM) with the bound. Under `-M` the stores past the limit must answer
//! out of memory. `scripts/soak` runs the same cases with more data
//! (`MEMCRAB_MEMORY_SCALE`).

mod common;

use common::Server;

/// The README's bound for `-m 64`: 64 MB × 1.25 + 16 MB.
const RSS_BOUND_KIB: u64 = (64 * 5 / 4 + 16) * 1024;

/// Writes `total` bytes of values as pipelined noreply sets, the i-th of key number
/// `key(i)` and `size(i)` bytes, sampling the server's RSS every batch; returns the
/// peak in KiB.
fn fill(
    s: &Server,
    total: usize,
    key: impl Fn(usize) -> usize,
    size: impl Fn(usize) -> usize,
) -> u64 {
    let mut c = s.connect();
    let big = vec![b'x'; 64 * 1024];
    let (mut written, mut i, mut peak) = (0usize, 0usize, 0u64);
    let mut batch = Vec::with_capacity(1 << 20);
    while written < total {
        batch.clear();
        while batch.len() < 512 * 1024 && written < total {
            let (k, n) = (key(i), size(i));
            batch.extend_from_slice(format!("set key:{k:010} 0 0 {n} noreply\r\n").as_bytes());
            batch.extend_from_slice(&big[..n]);
            batch.extend_from_slice(b"\r\n");
            written += n;
            i += 1;
        }
        c.send(&batch);
        peak = peak.max(s.rss_kib());
    }
    // A reply proves every set before it was processed.
    c.sync();
    peak.max(s.rss_kib())
}

fn check(s: &Server, peak_kib: u64, what: &str) {
    eprintln!(
        "{what}: peak RSS {} MiB (bound {} MiB)",
        peak_kib / 1024,
        RSS_BOUND_KIB / 1024
    );
    let mut c = s.connect();
    let st = c.stats("");
    let num = |k: &str| st[k].parse::<u64>().expect("number");
    assert!(
        peak_kib < RSS_BOUND_KIB,
        "{what}: peak RSS {} MiB over the bound {} MiB",
        peak_kib / 1024,
        RSS_BOUND_KIB / 1024
    );
    assert!(num("evictions") > 0, "{what}: no evictions: {st:?}");
    assert!(num("bytes") <= 64 << 20, "{what}: bytes over -m: {st:?}");
    assert!(num("curr_items") > 0, "{what}: {st:?}");
}

#[test]
fn one_gigabyte_of_1000_byte_values_in_64_mb() {
    let s = Server::tcp(&["-m", "64"]);
    let peak = fill(&s, 1 << 30, |i| i, |_| 1000);
    check(&s, peak, "1000-byte values");
}

#[test]
fn one_gigabyte_of_mixed_values_in_64_mb() {
    let s = Server::tcp(&["-m", "64"]);
    // Small, medium and large values interleaved: the allocator's worst case.
    let peak = fill(
        &s,
        1 << 30,
        |i| i,
        |i| match i % 3 {
            0 => 10 + (i * 7919) % 190,
            1 => 200 + (i * 104_729) % 2800,
            _ => 3000 + (i * 1_299_709) % 57_000,
        },
    );
    check(&s, peak, "mixed values");
}

/// 2,000 keys of 10,000 bytes (20 MB live) overwritten 15 times over (300 MB
/// written) under `-m 1024`: the segment engine compacts segments whose items were
/// overwritten instead of touching fresh memory, so resident memory stays a small
/// multiple of the live data rather than growing toward 300 MB, and nothing is
/// evicted. memcrab only (`1:compacted` is its stat).
#[test]
fn overwrites_stay_near_their_live_size() {
    let s = Server::tcp(&["-m", "1024"]);
    // A stride coprime with 2000 spreads the overwrites over every key each pass.
    let peak = fill(&s, 300 << 20, |i| (i * 7) % 2000, |_| 10_000);
    eprintln!("overwrites: peak RSS {} MiB", peak / 1024);
    let mut c = s.connect();
    let st = c.stats("");
    let slabs = c.stats("slabs");
    assert_eq!(st["evictions"], "0", "{st:?}");
    assert_eq!(st["curr_items"], "2000", "{st:?}");
    let compacted: u64 = slabs["1:compacted"].parse().expect("number");
    assert!(compacted > 0, "{slabs:?}");
    assert!(
        peak < 120 * 1024,
        "peak RSS {} MiB for 20 MB of live data",
        peak / 1024
    );
}

/// What the `bound_*` tests write: key length and value size of the i-th set, and
/// which key number it writes (distinct keys, or a churn over fewer keys).
struct Kind {
    name: &'static str,
    key_len: usize,
    /// Value size of the i-th set at `-m m`.
    size: fn(usize, u64) -> usize,
    /// Key number of the i-th set at `-m m`.
    key: fn(usize, u64) -> usize,
    /// Item bytes to write, as a multiple of `-m` (with eviction; under `-M`, 1.5).
    times_m: f64,
    /// Overwrites free memory, so under `-M` a store after the fill may succeed.
    churn: bool,
}

/// How much more data than the CI run the tests write (`scripts/soak` raises it).
fn scale() -> f64 {
    std::env::var("MEMCRAB_MEMORY_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0)
}

/// The README's bound for `-m m`: m MB × 1.25 + 16 MB, in KiB.
fn bound_kib(m: u64) -> u64 {
    (m * 1024 * 5 / 4) + 16 * 1024
}

/// The key of number `k`, exactly `len` bytes.
fn key_of(k: usize, len: usize) -> String {
    format!("{k:k>len$}")
}

/// Runs `kind` at `-m 16` and `-m 64` with eviction and under `-M`; prints each
/// peak and fails if any is over the bound.
fn bound_case(kind: &Kind) {
    bound_case_at(kind, &[(16, true), (64, true), (16, false), (64, false)]);
}

/// As [`bound_case`], at each (`-m`, eviction on) of `configs`.
fn bound_case_at(kind: &Kind, configs: &[(u64, bool)]) {
    let mut failures = Vec::new();
    for &(m, evict) in configs {
        let m_text = m.to_string();
        let mut args = vec!["-m", m_text.as_str()];
        if !evict {
            args.push("-M");
        }
        let s = Server::tcp(&args);
        let times = if evict { kind.times_m * scale() } else { 1.5 };
        let budget = (times * (m << 20) as f64) as usize;
        // Item bytes per set, roughly (an 8-byte header).
        let item = |i: usize| kind.key_len + (kind.size)(i, m) + 8;
        let (mut n, mut total) = (0usize, 0usize);
        while total < budget {
            total += item(n);
            n += 1;
        }
        let mut c = s.connect();
        let value = vec![b'v'; (0..n).map(|i| (kind.size)(i, m)).max().unwrap_or(0)];
        let mut batch = Vec::with_capacity(1 << 20);
        let mut i = 0;
        while i < n {
            batch.clear();
            while batch.len() < 512 * 1024 && i < n {
                let (k, v) = (key_of((kind.key)(i, m), kind.key_len), (kind.size)(i, m));
                batch.extend_from_slice(format!("set {k} 0 0 {v} noreply\r\n").as_bytes());
                batch.extend_from_slice(&value[..v]);
                batch.extend_from_slice(b"\r\n");
                i += 1;
            }
            c.send(&batch);
        }
        c.sync();
        let st = c.stats("");
        let items = c.stats("items");
        let num = |k: &str| st[k].parse::<u64>().expect("number");
        let oom: u64 = items
            .iter()
            .filter(|(k, _)| k.ends_with(":outofmemory"))
            .map(|(_, v)| v.parse::<u64>().expect("number"))
            .sum();
        let peak = s.hwm_kib();
        let used = st
            .get("limit_used_bytes")
            .map(|v| v.parse::<u64>().expect("number"));
        let what = format!(
            "{} at -m {m}{}: {n} sets, peak RSS (VmHWM) {:.1} MiB, bound {} MiB; \
             curr_items {}, bytes {}, hash_bytes {}, limit_used_bytes {}, evictions {}, \
             outofmemory {oom}",
            kind.name,
            if evict { "" } else { " -M" },
            peak as f64 / 1024.0,
            bound_kib(m) / 1024,
            num("curr_items"),
            num("bytes"),
            num("hash_bytes"),
            used.map_or("missing".to_string(), |u| u.to_string()),
            num("evictions"),
        );
        eprintln!("{what}");
        if peak >= bound_kib(m) {
            failures.push(format!("over the bound: {what}"));
        }
        // Segments and index within -m, but for the index growth since the last
        // segment was taken (a few percent).
        if used.is_none_or(|u| u > (m << 20) * 9 / 8) {
            failures.push(format!("charged over -m: {what}"));
        }
        if num("curr_items") == 0 {
            failures.push(format!("nothing stored: {what}"));
        }
        if evict {
            if num("evictions") == 0 {
                failures.push(format!("no evictions: {what}"));
            }
            // The newest item is there: the cache still works.
            let (k, v) = (
                key_of((kind.key)(n - 1, m), kind.key_len),
                (kind.size)(n - 1, m),
            );
            c.send(format!("mg {k} s\r\n").as_bytes());
            c.expect(format!("HD s{v}\r\n").as_bytes());
        } else {
            if num("evictions") != 0 || oom == 0 {
                failures.push(format!("-M must refuse, not evict: {what}"));
            }
        }
        if !evict && !kind.churn {
            // One more store like the last answers out of memory.
            let (k, v) = (key_of(n, kind.key_len), (kind.size)(n - 1, m));
            c.send(format!("set {k} 0 0 {v}\r\n").as_bytes());
            c.send(&value[..v]);
            c.send(b"\r\n");
            c.expect(b"SERVER_ERROR out of memory storing object\r\n");
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// How many tiny (1–8 B values, 12-byte keys) items `-m m` holds, roughly.
fn tiny_count(m: u64) -> usize {
    (m << 20) as usize / 24
}

fn distinct(i: usize, _m: u64) -> usize {
    i
}

/// The smallest items: 1-byte values under distinct 10-byte keys.
fn one_byte_values() -> Kind {
    Kind {
        name: "1-byte values, 10-byte keys",
        key_len: 10,
        size: |_, _| 1,
        key: distinct,
        times_m: 2.0,
        churn: false,
    }
}

#[test]
fn bound_1_byte_values_10_byte_keys() {
    bound_case(&one_byte_values());
}

/// The smallest `-m` the README promises the bound for, with the smallest items.
#[test]
fn bound_1_byte_values_at_8_mb() {
    bound_case_at(&one_byte_values(), &[(8, true), (8, false)]);
}

#[test]
fn bound_1_byte_values_250_byte_keys() {
    bound_case(&Kind {
        name: "1-byte values, 250-byte keys",
        key_len: 250,
        size: |_, _| 1,
        key: distinct,
        times_m: 2.0,
        churn: false,
    });
}

#[test]
fn bound_100_byte_values() {
    bound_case(&Kind {
        name: "100-byte values",
        key_len: 16,
        size: |_, _| 100,
        key: distinct,
        times_m: 2.0,
        churn: false,
    });
}

#[test]
fn bound_values_at_item_size_max() {
    bound_case(&Kind {
        name: "values at -I (1 MiB)",
        key_len: 16,
        // The largest value memcached accepts under the default -I 1m.
        size: |_, _| {
            memcrab_limits::ITEM_SIZE_MAX_DEFAULT
                - memcrab_limits::memcached_item_bytes(16, 0, 0, true)
        },
        key: distinct,
        times_m: 3.0,
        churn: false,
    });
}

#[test]
fn bound_mixed_size_churn() {
    bound_case(&Kind {
        name: "mixed-size churn",
        key_len: 12,
        // Tiny items until they alone would fill -m (growing the index), then mixed
        // sizes up to 230 KB (large ones get segments of their own) over the same
        // keys, then tiny items again.
        size: |i, m| {
            let r = (i.wrapping_mul(2_654_435_761)) >> 7;
            let tiny = tiny_count(m);
            if i < tiny || i >= tiny + tiny / 3000 {
                1 + r % 8
            } else {
                [100, 3000, 60_000, 200_000][r % 4] + r % 30_000
            }
        },
        key: |i, m| i % tiny_count(m),
        times_m: 3.0,
        churn: true,
    });
}

/// The index gives memory back: after a million tiny items are flushed, `maintain`
/// shrinks the index tables, whose bytes were charged against `-m`, to near their
/// first size within a few seconds, and the cache takes tiny items again.
#[test]
fn index_shrinks_after_flush() {
    let s = Server::tcp(&["-m", "64"]);
    let mut c = s.connect();
    let mut batch = Vec::with_capacity(1 << 20);
    let n = 1_000_000;
    let mut i = 0;
    while i < n {
        batch.clear();
        while batch.len() < 512 * 1024 && i < n {
            batch.extend_from_slice(
                format!("set {} 0 0 1 noreply\r\nv\r\n", key_of(i, 10)).as_bytes(),
            );
            i += 1;
        }
        c.send(&batch);
    }
    c.sync();
    let grown = c.stat("hash_bytes");
    assert!(grown > 8 << 20, "hash_bytes {grown} after {n} items");
    c.call(b"flush_all\r\n", b"OK\r\n");
    let mut last = grown;
    common::wait_until(
        "the index to shrink",
        std::time::Duration::from_secs(10),
        || {
            last = c.stat("hash_bytes");
            last < 2 << 20
        },
    );
    eprintln!("index: {grown} bytes with {n} items, {last} after flush_all");
    assert_eq!(c.stat("curr_items"), 0);
    c.call(b"set after 0 0 1\r\nv\r\n", b"STORED\r\n");
}
