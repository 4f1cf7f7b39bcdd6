//! The memory bound: with `-m 64`, writing 1 GB of distinct items keeps the server's
//! resident memory under the bound the README documents (`-m` × 1.25 + 16 MB), and
//! `stats` shows the evictions that made room. And overwrites do not grow memory
//! toward a large `-m` (the segment engine's compaction before growth).

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
