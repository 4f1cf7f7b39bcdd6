//! In-process engine throughput: 90% get / 10% set, 100-byte values, 100k keys,
//! uniform, from 1 and 2 threads at once (the machine has 2 cores). Each thread
//! runs `iters` operations; the time is the wall time until all threads finish, so
//! criterion's throughput is operations per second across threads.
//!
//! `cargo bench -p memcrab-store --bench engine` (both engines, 1 and 2 threads);
//! `MEMCRAB_BENCH_THREADS=1,2,4,8,16 MEMCRAB_BENCH_ENGINES=seg` selects others, and
//! `MEMCRAB_BENCH_KEYS` the key count.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{Clock, Config, Engine, GetOpts, Mode, StoreOpts};

/// Keys in the key space: 100k by default (13 MB of items, which fits in a 32 MiB
/// L3); `MEMCRAB_BENCH_KEYS=1000000` makes most lookups miss every cache.
fn keys() -> u64 {
    std::env::var("MEMCRAB_BENCH_KEYS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(100_000)
}

/// `key:` and 12 zero-padded digits, without allocating.
fn key(buf: &mut Vec<u8>, mut i: u64) {
    buf.clear();
    buf.extend_from_slice(b"key:000000000000");
    for d in buf[4..].iter_mut().rev() {
        *d = b'0' + (i % 10) as u8;
        i /= 10;
    }
}

fn run(engine: &Arc<dyn Engine>, threads: usize, iters: u64) -> Duration {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (e, b) = (Arc::clone(engine), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let value = [b'v'; 100];
                let mut k = Vec::with_capacity(32);
                let nkeys = keys();
                // xorshift: cheap, and different per thread.
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
                b.wait();
                let mut hits = 0u64;
                for _ in 0..iters {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    key(&mut k, x % nkeys);
                    if x.is_multiple_of(10) {
                        e.store(Mode::Set, &k, 0, 0, &value, &StoreOpts::default());
                    } else if e
                        .get(&k, &GetOpts::default(), &mut |it| {
                            hits += it.value.len() as u64;
                            false
                        })
                        .is_hit()
                    {
                        hits += 1;
                    }
                }
                std::hint::black_box(hits);
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        let _ = h.join();
    }
    start.elapsed()
}

fn build(name: &str, limit_mb: u64) -> Arc<dyn Engine> {
    let cfg = Config {
        limit_bytes: limit_mb << 20,
        evict: true,
        use_cas: true,
        item_size_max: 0,
        hash_seed: None,
    };
    let clock = Arc::new(Clock::new());
    let e: Arc<dyn Engine> = match name {
        "reference" => Arc::new(Reference::new(cfg, 17, clock)),
        _ => Arc::new(Seg::new(cfg, clock)),
    };
    let value = [b'v'; 100];
    let mut k = Vec::new();
    for i in 0..keys() {
        key(&mut k, i);
        e.store(Mode::Set, &k, 0, 0, &value, &StoreOpts::default());
    }
    e
}

fn engine_90_10(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_90_10");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    // MEMCRAB_BENCH_THREADS=1,2,4,8,16 for the many-core scaling run.
    let threads: Vec<usize> = std::env::var("MEMCRAB_BENCH_THREADS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    let engines = std::env::var("MEMCRAB_BENCH_ENGINES").unwrap_or_else(|_| "reference,seg".into());
    for name in engines.split(',') {
        let e = build(name, 1024);
        for &t in &threads {
            g.throughput(Throughput::Elements(t as u64));
            g.bench_function(format!("{name}/{t}_threads"), |b| {
                b.iter_custom(|iters| run(&e, t, iters))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, engine_90_10);
criterion_main!(benches);
