//! `hotkeys`: does the server's `stats hotkeys` find the true hottest keys? The
//! load generator knows the true distribution: under Zipf(θ) over the key space,
//! key `i` is rank `i + 1`, so the true top 16 are keys 0..16. For each θ it resets
//! the server's sketches (`stats hotkeys reset`), sends `requests` reads drawn from
//! that Zipf over `conns` connections (so several workers' sketches are merged),
//! reads `stats hotkeys`, and reports the recall: the share of the true top 16 among
//! the reported read keys (the server reports 32), and among its first 16. It fails
//! when the recall is under `--min-recall` (95%, the goal memcrab's hot keys are
//! built for).
//!
//! The reads are `mg <key> q` (quiet: a miss sends nothing) in batches closed by
//! `mn`, so no key needs to exist and the client reads one line per batch.

use std::collections::HashMap;

use anyhow::{bail, Context};
use clap::Args;

use crate::textconn::TextConn;
use crate::workload::{Gen, KeyDist, Workload};

/// The top the recall is measured for.
const TOP: usize = 16;
/// Reads per batch (one `mn` each).
const BATCH: usize = 500;

#[derive(Args)]
pub struct HotkeysArgs {
    /// The server's port on 127.0.0.1.
    #[arg(long)]
    pub port: u16,
    /// Zipf exponents to check, comma-separated.
    #[arg(long, default_value = "0.99,1.2", value_delimiter = ',')]
    pub thetas: Vec<f64>,
    /// Size of the key space.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Reads per exponent.
    #[arg(long, default_value_t = 1_000_000)]
    pub requests: u64,
    /// Connections (each on a thread of its own).
    #[arg(long, default_value_t = 4)]
    pub conns: u64,
    /// Fail under this recall (0..1) of the true top 16 among the reported keys.
    #[arg(long, default_value_t = 0.95)]
    pub min_recall: f64,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// One exponent's result.
pub struct Recall {
    /// True top-16 keys among all the reported read keys.
    pub found: usize,
    /// Among the first 16 reported.
    pub found_in_16: usize,
    pub reported: usize,
}

pub fn main(a: HotkeysArgs) -> anyhow::Result<()> {
    let mut failed = false;
    for &theta in &a.thetas {
        let r = check(&a, theta)?;
        let recall = r.found as f64 / TOP as f64;
        println!(
            "zipf {theta}: recall {:.0}% ({}/{TOP} of the true top {TOP} among the {} reported; \
             {}/{TOP} among the first {TOP})",
            recall * 100.0,
            r.found,
            r.reported,
            r.found_in_16
        );
        failed |= recall < a.min_recall;
    }
    if failed {
        bail!("recall under {:.0}%", a.min_recall * 100.0);
    }
    Ok(())
}

/// Resets the sketches, sends the reads, and compares `stats hotkeys` with the truth.
pub fn check(a: &HotkeysArgs, theta: f64) -> anyhow::Result<Recall> {
    let mut admin = TextConn::connect(a.port)?;
    admin.out.extend_from_slice(b"stats hotkeys reset\r\n");
    admin.send()?;
    admin.read_line()?;
    if admin.line != b"RESET\r\n" {
        bail!(
            "stats hotkeys reset: {}",
            String::from_utf8_lossy(&admin.line).trim_end()
        );
    }
    let w = Workload {
        get_ratio: 1.0,
        keys: a.keys,
        key_dist: KeyDist::Zipf(theta),
        ..Workload::default()
    };
    let conns = a.conns.max(1);
    std::thread::scope(|s| -> anyhow::Result<()> {
        let threads: Vec<_> = (0..conns)
            .map(|c| {
                let w = &w;
                let n = a.requests / conns + u64::from(c < a.requests % conns);
                let seed = a.seed.wrapping_mul(1000).wrapping_add(c);
                s.spawn(move || reads(a.port, w, seed, n))
            })
            .collect();
        for t in threads {
            t.join()
                .map_err(|_| anyhow::anyhow!("a reader thread panicked"))??;
        }
        Ok(())
    })?;
    let reported = hot_reads(&mut admin)?;
    let mut key = Vec::new();
    let truth: Vec<Vec<u8>> = (0..TOP as u64)
        .map(|i| {
            crate::workload::write_key(&mut key, i, w.key_size);
            key.clone()
        })
        .collect();
    let found_in = |n: usize| {
        truth
            .iter()
            .filter(|k| reported.iter().take(n).any(|r| r == *k))
            .count()
    };
    Ok(Recall {
        found: found_in(reported.len()),
        found_in_16: found_in(TOP),
        reported: reported.len(),
    })
}

/// Sends `n` quiet reads from `w`'s distribution on a connection of its own.
fn reads(port: u16, w: &Workload, seed: u64, n: u64) -> anyhow::Result<()> {
    let mut c = TextConn::connect(port)?;
    let mut g = Gen::new(w, seed, 0);
    let mut left = n;
    while left > 0 {
        let batch = left.min(BATCH as u64);
        for _ in 0..batch {
            let i = g.key_index();
            c.out.extend_from_slice(b"mg ");
            c.out.extend_from_slice(g.key(i));
            c.out.extend_from_slice(b" q\r\n");
        }
        c.out.extend_from_slice(b"mn\r\n");
        c.send()?;
        c.read_line()?;
        if c.line != b"MN\r\n" {
            bail!("expected MN, got {}", String::from_utf8_lossy(&c.line));
        }
        left -= batch;
    }
    Ok(())
}

/// `stats hotkeys`' read keys in rank order, URI-decoded (the server encodes them
/// as `watch` does: `key:1` is `key%3A1`).
fn hot_reads(c: &mut TextConn) -> anyhow::Result<Vec<Vec<u8>>> {
    c.out.extend_from_slice(b"stats hotkeys\r\n");
    c.send()?;
    let mut by_rank: HashMap<usize, Vec<u8>> = HashMap::new();
    loop {
        c.read_line()?;
        if c.line == b"END\r\n" {
            break;
        }
        let text = String::from_utf8_lossy(&c.line).trim_end().to_string();
        let Some(rest) = text.strip_prefix("STAT reads:") else {
            continue;
        };
        let (field, value) = rest
            .split_once(' ')
            .context("a STAT line without a value")?;
        if let Some(rank) = field.strip_suffix(":key") {
            by_rank.insert(rank.parse()?, uri_decode(value.as_bytes()));
        }
    }
    let mut ranks: Vec<_> = by_rank.into_iter().collect();
    ranks.sort();
    Ok(ranks.into_iter().map(|(_, k)| k).collect())
}

/// Undoes `%XX` escapes (a malformed one is kept as it is).
fn uri_decode(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match (
            s[i],
            s.get(i + 1).copied().and_then(hex),
            s.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(h << 4 | l);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn uri_decode() {
        assert_eq!(super::uri_decode(b"key%3A0%20x%2"), b"key:0 x%2");
    }
}
