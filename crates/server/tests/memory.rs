//! The memory bound: with `-m 64`, writing 1 GB of distinct items keeps the server's
//! resident memory under the bound the README documents (`-m` × 1.25 + 16 MB), and
//! `stats` shows the evictions that made room.

mod common;

use common::Server;

/// The README's bound for `-m 64`: 64 MB × 1.25 + 16 MB.
const RSS_BOUND_KIB: u64 = (64 * 5 / 4 + 16) * 1024;

/// Writes `total` bytes of values as pipelined noreply sets with sizes from `size`,
/// sampling the server's RSS every batch; returns the peak in KiB.
fn fill(s: &Server, total: usize, size: impl Fn(usize) -> usize) -> u64 {
    let mut c = s.connect();
    let big = vec![b'x'; 64 * 1024];
    let (mut written, mut i, mut peak) = (0usize, 0usize, 0u64);
    let mut batch = Vec::with_capacity(1 << 20);
    while written < total {
        batch.clear();
        while batch.len() < 512 * 1024 && written < total {
            let n = size(i);
            batch.extend_from_slice(format!("set key:{i:010} 0 0 {n} noreply\r\n").as_bytes());
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
    let peak = fill(&s, 1 << 30, |_| 1000);
    check(&s, peak, "1000-byte values");
}

#[test]
fn one_gigabyte_of_mixed_values_in_64_mb() {
    let s = Server::tcp(&["-m", "64"]);
    // Small, medium and large values interleaved: the allocator's worst case.
    let peak = fill(&s, 1 << 30, |i| match i % 3 {
        0 => 10 + (i * 7919) % 190,
        1 => 200 + (i * 104_729) % 2800,
        _ => 3000 + (i * 1_299_709) % 57_000,
    });
    check(&s, peak, "mixed values");
}
