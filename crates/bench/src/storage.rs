//! `memcrab-bench storage`: memory per item and hit ratio at equal memory, on any
//! memcached-compatible servers started from command lines, side by side.
//!
//! - `bytes`: resident memory per item after storing N items with keys
//!   `key:0000001`… and fixed-size values, nothing evicted (each server gets
//!   `-m 4096`). RSS is read from `/proc/PID/status` after the fill, minus the RSS of
//!   the idle server with one connection open.
//! - `density`: items held at `-m 64` when far more than fit were written (4×
//!   64 MiB of keys and values, distinct keys, no TTL), at the object shapes of
//!   Twitter's published cache traces: cluster25 (49-byte keys, 28-byte values),
//!   cluster52 (20-byte keys, 273-byte values), and `bytes`' 100-byte values under
//!   11-byte keys. Items, their ratio to the first server's, and resident memory.
//! - `hit`: hit ratio at equal memory (`-m 64`) with the read-through pattern every
//!   cache sees in production: get, and on a miss set the key. Keys follow zipf 0.99
//!   over 10M keys; each key's value length is fixed, 100–300 B, from a hash of the
//!   key. 20M requests warm the cache, the next 5M are measured.
//! - `hitcurve`: `hit`'s workload from an empty cache, the hit ratio of every
//!   million requests over 25M: how long each server takes to settle, and so how
//!   much a short warm-up or a short window moves the comparison.
//! - `calcify`: `-m 64` filled with 100-byte items (more than fit), then the
//!   read-through pattern (zipf 0.99) over a new key space of 2 KB items, far more
//!   than fit; the hit ratio per
//!   tenth of a pass over the new key space, against a fresh server on the same 2 KB
//!   workload. A slab allocator keeps its memory in the 100-byte class and must move
//!   pages; a segment engine recycles whole segments.
//!
//! - `misscurve`: miss ratio by cache size on a cluster52-shaped trace, each server
//!   next to libcachesim's policies at the bytes it held (misscurve.rs; not by
//!   default).
//!
//! With `--plot DIR`, `bytes` draws `DIR/storage-items.svg` and `misscurve`
//! `DIR/storage-miss.svg` (crate::plot).
//!
//! The client is one blocking connection pipelining batches of requests, pinned to
//! `--client-cpus`; each server is pinned to `--server-cpus`. What is measured is
//! memory and hit ratios, not speed.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use rand::{rngs::SmallRng, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::compare::Server;
use crate::plot;
use crate::textconn::{stat, TextConn};

/// `memcrab-bench storage`.
#[derive(Args, Clone)]
pub struct StorageArgs {
    /// A server command line with `{port}`; `-m` is appended per experiment. Repeat
    /// for each server; the first is the baseline for ratios. `NAME=CMD` names it.
    #[arg(long = "server-cmd", required = true)]
    pub server_cmds: Vec<String>,
    /// Experiments to run: bytes, density, hit, calcify; also hitcurve and misscurve
    /// (not by default).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bytes,density,hit,calcify"
    )]
    pub experiments: Vec<String>,
    /// Smaller counts (200k items, 6M hit-ratio requests), for a quick look.
    #[arg(long)]
    pub quick: bool,
    /// CPUs the servers are pinned to.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub server_cpus: Vec<usize>,
    /// CPU the client is pinned to.
    #[arg(long, default_value_t = 1)]
    pub client_cpu: usize,
    /// Folder to draw `bytes` (storage-items.svg) and `misscurve` (storage-miss.svg)
    /// into.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub miss: crate::misscurve::MissCurveArgs,
}

/// Requests per pipelined batch.
const BATCH: usize = 64;

/// What `storage` reads besides stores and `stats`.
impl TextConn {
    /// Sends the queued requests plus `get` of each key; returns which were hits.
    fn gets(&mut self, keys: &[Vec<u8>], hits: &mut Vec<bool>) -> anyhow::Result<()> {
        for k in keys {
            self.out.extend_from_slice(b"get ");
            self.out.extend_from_slice(k);
            self.out.extend_from_slice(b"\r\n");
        }
        self.send()?;
        hits.clear();
        for _ in keys {
            self.read_line()?;
            if self.line.starts_with(b"VALUE ") {
                let text = String::from_utf8_lossy(&self.line);
                let n: usize = text
                    .split_whitespace()
                    .nth(3)
                    .and_then(|t| t.parse().ok())
                    .context("bad VALUE line")?;
                let mut skip = vec![0; n + 2];
                self.r.read_exact(&mut skip)?;
                self.read_line()?;
                if self.line != b"END\r\n" {
                    bail!(
                        "expected END, got {:?}",
                        String::from_utf8_lossy(&self.line)
                    );
                }
                hits.push(true);
            } else if self.line == b"END\r\n" {
                hits.push(false);
            } else {
                bail!("unexpected reply {:?}", String::from_utf8_lossy(&self.line));
            }
        }
        Ok(())
    }
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS")
}

fn pin_self(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes one bit of it; the
    // syscall reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn key(buf: &mut Vec<u8>, prefix: &str, width: usize, i: u64) {
    buf.clear();
    buf.extend_from_slice(prefix.as_bytes());
    buf.extend_from_slice(format!("{i:0width$}").as_bytes());
}

/// Zipf rank → key id, a bijection on `0..n` (multiplication by a prime that divides
/// no n used here), so that hot keys are spread over the space, not neighbours.
fn scatter(rank: u64, n: u64) -> u64 {
    const P: u128 = 2_654_435_761;
    ((u128::from(rank) * P) % u128::from(n.max(1))) as u64
}

/// A key's value length in `min..=max`, fixed per key.
fn value_len(i: u64, min: usize, max: usize) -> usize {
    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    min + (h % (max - min + 1) as u64) as usize
}

struct Named {
    name: String,
    cmd: String,
}

fn names(cmds: &[String]) -> Vec<Named> {
    cmds.iter()
        .map(|c| match c.split_once('=') {
            Some((n, rest))
                if !n.is_empty()
                    && n.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.') =>
            {
                Named {
                    name: n.into(),
                    cmd: rest.into(),
                }
            }
            _ => Named {
                name: c
                    .split_whitespace()
                    .next()
                    .and_then(|p| p.rsplit('/').next())
                    .unwrap_or("server")
                    .into(),
                cmd: c.clone(),
            },
        })
        .collect()
}

pub fn main(a: StorageArgs) -> anyhow::Result<()> {
    pin_self(a.client_cpu);
    let servers = names(&a.server_cmds);
    for e in &a.experiments {
        match e.as_str() {
            "bytes" => bytes(&a, &servers)?,
            "density" => density(&a, &servers)?,
            "hit" => hit(&a, &servers)?,
            "hitcurve" => hit_curve(&a, &servers)?,
            "misscurve" => crate::misscurve::miss_curve(&crate::misscurve::Run {
                miss: &a.miss,
                quick: a.quick,
                server_cpus: &a.server_cpus,
                plot: a.plot.as_deref(),
                servers: servers
                    .iter()
                    .map(|s| (s.name.clone(), s.cmd.clone()))
                    .collect(),
            })?,
            "calcify" => calcify(&a, &servers)?,
            other => {
                bail!(
                    "unknown experiment {other:?} \
                     (bytes, density, hit, calcify, hitcurve, misscurve)"
                )
            }
        }
    }
    Ok(())
}

fn start(a: &StorageArgs, s: &Named, mem_mb: u64) -> anyhow::Result<(Server, TextConn)> {
    let server = Server::start(&format!("{} -m {mem_mb}", s.cmd), &a.server_cpus)?;
    let c = TextConn::connect(server.port)?;
    Ok((server, c))
}

fn bytes(a: &StorageArgs, servers: &[Named]) -> anyhow::Result<()> {
    let n: u64 = if a.quick { 200_000 } else { 1_000_000 };
    println!("\n### Bytes per item\n");
    println!(
        "{n} items, keys `key:0000001`…, `-m 4096` (nothing evicted); resident memory \
         after the fill minus the idle server's, divided by the items stored.\n"
    );
    print!("| value | ");
    for s in servers {
        print!("{} B/item | ", s.name);
    }
    for s in &servers[1..] {
        print!("{} / {} | ", s.name, servers[0].name);
    }
    println!();
    println!("|---|{}", "---|".repeat(servers.len() * 2 - 1));
    let mut shapes = Vec::new();
    for vlen in [32usize, 100, 1000] {
        let mut per = Vec::new();
        for s in servers {
            let (server, mut c) = start(a, s, 4096)?;
            std::thread::sleep(Duration::from_millis(300));
            let before = rss_kib(server.pid)?;
            let mut k = Vec::new();
            for i in 1..=n {
                key(&mut k, "key:", 7, i);
                c.store_noreply(b"set", &k, 0, vlen);
                if i % 1000 == 0 {
                    c.send()?;
                }
            }
            let mut hits = Vec::new();
            c.gets(&[b"key:0000001".to_vec()], &mut hits)?;
            std::thread::sleep(Duration::from_millis(300));
            let after = rss_kib(server.pid)?;
            let items = stat(&c.stats()?, "curr_items");
            if items != n {
                eprintln!("{}: {items} of {n} items stored", s.name);
            }
            let b = (after.saturating_sub(before) * 1024) as f64 / items.max(1) as f64;
            eprintln!(
                "bytes {} {vlen} B: RSS {before} -> {after} KiB, {items} items, {b:.1} B/item",
                s.name
            );
            per.push(b);
        }
        print!("| {vlen} B | ");
        for b in &per {
            print!("{b:.0} | ");
        }
        for b in &per[1..] {
            print!("{:.2}x | ", b / per[0]);
        }
        println!();
        shapes.push(plot::ItemsShape {
            value_bytes: vlen,
            bytes_per_item: servers.iter().map(|s| s.name.clone()).zip(per).collect(),
        });
    }
    if let Some(dir) = &a.plot {
        let keys = format!("{n} items, RSS after the fill less the idle server's");
        write_plot(dir, "storage-items.svg", plot::items_svg(&shapes, &keys)?)?;
    }
    Ok(())
}

/// An object shape of `density`: name, key prefix, key length, value length.
const SHAPES: [(&str, &str, usize, usize); 3] = [
    ("cluster25", "c25:", 49, 28),
    ("cluster52", "c52:", 20, 273),
    ("100 B values", "key:", 11, 100),
];

fn density(a: &StorageArgs, servers: &[Named]) -> anyhow::Result<()> {
    let mem_mb: u64 = 64;
    let volume = if a.quick { 2 } else { 4 } * (mem_mb << 20);
    println!("\n### Items held at `-m {mem_mb}`\n");
    println!(
        "Distinct keys (a prefix and zero-padded numbers), no TTL, noreply sets of \
         {}× {mem_mb} MiB of keys and values, so every server evicts; then \
         `curr_items` and resident memory (VmRSS).\n",
        volume / (mem_mb << 20)
    );
    print!("| shape | sets |");
    for s in servers {
        print!(" {} items |", s.name);
    }
    for s in &servers[1..] {
        print!(" {} / {} |", s.name, servers[0].name);
    }
    for s in servers {
        print!(" {} RSS MiB |", s.name);
    }
    println!();
    println!("|---|---|{}", "---|".repeat(servers.len() * 3 - 1));
    for (name, prefix, klen, vlen) in SHAPES {
        let sets = volume / (klen + vlen) as u64;
        let (mut items, mut rss) = (Vec::new(), Vec::new());
        for s in servers {
            let (server, mut c) = start(a, s, mem_mb)?;
            let mut k = Vec::new();
            for i in 1..=sets {
                key(&mut k, prefix, klen - prefix.len(), i);
                c.store_noreply(b"set", &k, 0, vlen);
                if i % 1000 == 0 {
                    c.send()?;
                }
            }
            let mut hits = Vec::new();
            c.gets(&[k.clone()], &mut hits)?;
            let st = c.stats()?;
            let n = stat(&st, "curr_items");
            let kib = rss_kib(server.pid)?;
            eprintln!(
                "density {} {name}: {n} items of {sets}, RSS {kib} KiB, hash_bytes {}",
                s.name,
                stat(&st, "hash_bytes")
            );
            items.push(n);
            rss.push(kib);
        }
        print!("| {name} ({klen} B keys, {vlen} B values) | {sets} |");
        for n in &items {
            print!(" {n} |");
        }
        for n in &items[1..] {
            print!(" {:.2}x |", *n as f64 / items[0].max(1) as f64);
        }
        for kib in &rss {
            print!(" {:.1} |", *kib as f64 / 1024.0);
        }
        println!();
    }
    Ok(())
}

fn write_plot(dir: &std::path::Path, name: &str, svg: String) -> anyhow::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, svg).with_context(|| format!("--plot {}", path.display()))
}

/// Read-through requests: returns (gets, hits) over the measured ones.
#[allow(clippy::too_many_arguments)]
fn read_through(
    c: &mut TextConn,
    prefix: &str,
    width: usize,
    mut next: impl FnMut() -> u64,
    vlen: impl Fn(u64) -> usize,
    requests: u64,
    slices: u64,
    mut on_slice: impl FnMut(u64, u64, u64),
) -> anyhow::Result<()> {
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
    let mut ids = Vec::with_capacity(BATCH);
    let mut hits = Vec::with_capacity(BATCH);
    let per_slice = (requests / slices.max(1)).max(1);
    let (mut done, mut slice_gets, mut slice_hits) = (0u64, 0u64, 0u64);
    while done < requests {
        let n = (requests - done).min(BATCH as u64) as usize;
        keys.resize_with(n, Vec::new);
        ids.clear();
        for k in keys.iter_mut() {
            let id = next();
            key(k, prefix, width, id);
            ids.push(id);
        }
        c.gets(&keys, &mut hits)?;
        for (i, &h) in hits.iter().enumerate() {
            if !h {
                let k = keys[i].clone();
                c.store_noreply(b"set", &k, 0, vlen(ids[i]));
            }
            slice_gets += 1;
            slice_hits += u64::from(h);
            done += 1;
            if done % per_slice == 0 || done == requests {
                on_slice(done, slice_gets, slice_hits);
                slice_gets = 0;
                slice_hits = 0;
            }
        }
        // The sets go out with the next batch's gets.
    }
    c.send()?;
    Ok(())
}

fn hit(a: &StorageArgs, servers: &[Named]) -> anyhow::Result<()> {
    let keys: u64 = 10_000_000;
    // S3-FIFO-style queues take a few passes to settle: a long warm-up.
    let (warm, measured): (u64, u64) = if a.quick {
        (4_000_000, 2_000_000)
    } else {
        (20_000_000, 5_000_000)
    };
    println!("\n### Hit ratio at equal memory\n");
    println!(
        "`-m 64`, read-through (get; set on a miss), zipf 0.99 over {keys} keys \
         (`key:` and 12 digits), values 100–300 B fixed per key, {warm} requests to warm \
         up, then {measured} measured (same seed for every server).\n"
    );
    println!(
        "| server | hit ratio | vs {} | items | evictions |",
        servers[0].name
    );
    println!("|---|---|---|---|---|");
    let mut base = None;
    for s in servers {
        let (ratio, items, ev) = hit_at(a, s, 64, warm, measured)?;
        let b = *base.get_or_insert(ratio);
        eprintln!("hit {}: {ratio:.4}, {items} items, {ev} evictions", s.name);
        println!(
            "| {} | {ratio:.4} | {:+.1} pp | {items} | {ev} |",
            s.name,
            (ratio - b) * 100.0
        );
    }
    Ok(())
}

/// `hit`'s workload on a fresh server at `-m mem_mb`: (hit ratio over the
/// measured requests, items and evictions at the end).
fn hit_at(
    a: &StorageArgs,
    s: &Named,
    mem_mb: u64,
    warm: u64,
    measured: u64,
) -> anyhow::Result<(f64, u64, u64)> {
    let keys: u64 = 10_000_000;
    let (_server, mut c) = start(a, s, mem_mb)?;
    let zipf = Zipf::new(keys as f64, 0.99).context("zipf")?;
    let mut rng = SmallRng::seed_from_u64(42);
    let mut next = || scatter(zipf.sample(&mut rng) as u64 - 1, keys);
    let vl = |i: u64| value_len(i, 100, 300);
    read_through(&mut c, "key:", 12, &mut next, vl, warm, 1, |_, _, _| {})?;
    let mut ratio = 0.0;
    read_through(&mut c, "key:", 12, &mut next, vl, measured, 1, |_, g, h| {
        ratio = h as f64 / g.max(1) as f64;
    })?;
    let items = stat(&c.stats()?, "curr_items");
    let ev = stat(&c.stats()?, "evictions");
    Ok((ratio, items, ev))
}

fn hit_curve(a: &StorageArgs, servers: &[Named]) -> anyhow::Result<()> {
    let keys: u64 = 10_000_000;
    let slice: u64 = 1_000_000;
    let slices: u64 = if a.quick { 6 } else { 25 };
    let shown: Vec<u64> = [1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 25]
        .into_iter()
        .filter(|&m| m <= slices)
        .collect();
    println!("\n### Hit ratio over time\n");
    println!(
        "`hit`'s workload (`-m 64`, read-through, zipf 0.99 over {keys} keys, 100–300 B, \
         same seed) from an empty cache; each cell is the hit ratio within the million \
         requests that end at that many millions. The last columns average slices: \
         requests 2M–3M (a 2M warm-up and a 1M window) and {}M–{slices}M.\n",
        slices.saturating_sub(5)
    );
    let head: Vec<String> = shown.iter().map(|m| format!("{m}M")).collect();
    println!(
        "| server | {} | 2M–3M | {}M–{slices}M |",
        head.join(" | "),
        slices.saturating_sub(5)
    );
    println!("|---|{}---|---|", "---|".repeat(shown.len()));
    for s in servers {
        let (_server, mut c) = start(a, s, 64)?;
        let zipf = Zipf::new(keys as f64, 0.99).context("zipf")?;
        let mut rng = SmallRng::seed_from_u64(42);
        let mut next = || scatter(zipf.sample(&mut rng) as u64 - 1, keys);
        let vl = |i: u64| value_len(i, 100, 300);
        let mut ratios = Vec::new();
        read_through(
            &mut c,
            "key:",
            12,
            &mut next,
            vl,
            slice * slices,
            slices,
            |_, g, h| {
                ratios.push(h as f64 / g.max(1) as f64);
            },
        )?;
        let at = |m: u64| ratios.get(m as usize - 1).copied().unwrap_or(f64::NAN);
        let tail = slices.saturating_sub(5) as usize;
        let tail_mean = ratios[tail..].iter().sum::<f64>() / (ratios.len() - tail).max(1) as f64;
        let cells: Vec<String> = shown.iter().map(|&m| format!("{:.3}", at(m))).collect();
        eprintln!("hitcurve {}: {:?}", s.name, ratios);
        println!(
            "| {} | {} | {:.3} | {:.3} |",
            s.name,
            cells.join(" | "),
            at(3),
            tail_mean
        );
    }
    Ok(())
}

fn calcify(a: &StorageArgs, servers: &[Named]) -> anyhow::Result<()> {
    let fill: u64 = 1_000_000;
    // 1M keys of 2 KB (2 GB) against 64 MB: the new workload evicts too.
    let space: u64 = if a.quick { 200_000 } else { 1_000_000 };
    let passes: u64 = 2;
    println!("\n### No calcification\n");
    println!(
        "`-m 64`. Calcified: {fill} sets of 100-byte values (`a:` keys, more than fit), \
         then read-through over {space} new keys (`b:` keys, zipf 0.99) of 2 KB values \
         (far more than fit). Fresh: the same 2 KB phase on a new server. Hit ratio per \
         tenth of a pass over the new key space ({} requests each).\n",
        space / 10
    );
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    for s in servers {
        for calcified in [false, true] {
            let (_server, mut c) = start(a, s, 64)?;
            if calcified {
                let mut k = Vec::new();
                for i in 0..fill {
                    key(&mut k, "a:", 10, i);
                    c.store_noreply(b"set", &k, 0, 100);
                    if i % 1000 == 999 {
                        c.send()?;
                    }
                }
                let mut hits = Vec::new();
                c.gets(&[b"a:0000000000".to_vec()], &mut hits)?;
            }
            let mut rng = SmallRng::seed_from_u64(7);
            let zipf = Zipf::new(space as f64, 0.99).context("zipf")?;
            let mut curve = Vec::new();
            read_through(
                &mut c,
                "b:",
                10,
                || scatter(zipf.sample(&mut rng) as u64 - 1, space),
                |_| 2048,
                space * passes,
                passes * 10,
                |_, g, h| curve.push(h as f64 / g as f64),
            )?;
            let label = format!(
                "{} {}",
                s.name,
                if calcified { "calcified" } else { "fresh" }
            );
            eprintln!("calcify {label}: {curve:.3?}");
            rows.push((label, curve));
        }
    }
    // Every tenth of the first pass, then the end of each later half pass.
    let shown: Vec<usize> = (1..=(passes * 10) as usize)
        .filter(|&i| i <= 10 || i % 5 == 0)
        .collect();
    print!("| server | ");
    for &i in &shown {
        print!("{:.1} | ", i as f64 / 10.0);
    }
    println!();
    println!("|---|{}", "---|".repeat(shown.len()));
    for (label, curve) in &rows {
        print!("| {label} | ");
        for &i in &shown {
            print!("{:.3} | ", curve.get(i - 1).copied().unwrap_or(0.0));
        }
        println!();
    }
    println!(
        "\nColumns: passes over the new key space at the end of the slice; each cell is \
         the hit ratio within that tenth of a pass."
    );
    Ok(())
}
