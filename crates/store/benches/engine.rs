//! In-process engine throughput: 90% get / 10% set, 100-byte values, 100k keys,
//! uniform, from 1 and 2 threads at once (the machine has 2 cores). Each thread
//! runs `iters` operations; the time is the wall time until all threads finish, so
//! criterion's throughput is operations per second across threads.
//!
//! `cargo bench -p memcrab-store --bench engine`

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memcrab_store::reference::Reference;
use memcrab_store::{Clock, Config, Engine, Mode};

const KEYS: u64 = 100_000;

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
                // xorshift: cheap, and different per thread.
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
                b.wait();
                let mut hits = 0u64;
                for _ in 0..iters {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    key(&mut k, x % KEYS);
                    if x.is_multiple_of(10) {
                        e.store(Mode::Set, &k, 0, 0, &value);
                    } else if e
                        .get(&k, None, &mut |it| hits += it.value.len() as u64)
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

fn reference(limit_mb: u64) -> Arc<dyn Engine> {
    let cfg = Config {
        limit_bytes: limit_mb << 20,
        evict: true,
        use_cas: true,
        item_size_max: 0,
    };
    let e: Arc<dyn Engine> = Arc::new(Reference::new(cfg, 17, Arc::new(Clock::new())));
    let value = [b'v'; 100];
    let mut k = Vec::new();
    for i in 0..KEYS {
        key(&mut k, i);
        e.store(Mode::Set, &k, 0, 0, &value);
    }
    e
}

fn engine_90_10(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_90_10");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    let e = reference(1024);
    for threads in [1usize, 2] {
        g.throughput(Throughput::Elements(threads as u64));
        g.bench_function(format!("reference/{threads}_threads"), |b| {
            b.iter_custom(|iters| run(&e, threads, iters))
        });
    }
    g.finish();
}

criterion_group!(benches, engine_90_10);
criterion_main!(benches);
