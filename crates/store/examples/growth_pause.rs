//! How long does a store wait while its index partition is rebuilt larger?
//!
//! Fills the segment engine with N items (default 1,000,000; 11-byte keys, 32-byte
//! values, as the bytes-per-item benchmark) from one thread, timing every store, and
//! prints the distribution. A rebuild pauses only the writers of one of the 1024
//! partitions; readers never wait.
//!
//! `cargo run --release -p memcrab-store --example growth_pause [N]`

use std::sync::Arc;
use std::time::Instant;

use memcrab_store::seg::Seg;
use memcrab_store::{Clock, Config, Engine, Mode, StoreOpts};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let e = Seg::new(
        Config {
            limit_bytes: 4 << 30,
            evict: true,
            use_cas: true,
            item_size_max: 1 << 20,
            hash_seed: None,
        },
        Arc::new(Clock::new()),
    );
    let value = [b'v'; 32];
    let mut times = Vec::with_capacity(n as usize);
    let start = Instant::now();
    for i in 0..n {
        let key = format!("key:{i:07}");
        let t = Instant::now();
        e.store(
            Mode::Set,
            key.as_bytes(),
            0,
            0,
            &value,
            &StoreOpts::default(),
        );
        times.push(t.elapsed().as_nanos() as u64);
    }
    let total = start.elapsed();
    times.sort_unstable();
    let q = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    let st = e.stats();
    println!("items {} in {:.2?}", st.curr_items, total);
    println!(
        "store ns: p50 {} p99 {} p99.9 {} p99.99 {} max {}",
        q(0.5),
        q(0.99),
        q(0.999),
        q(0.9999),
        q(1.0)
    );
    println!(
        "stores over 100 us: {}",
        times.iter().filter(|&&t| t > 100_000).count()
    );
    println!(
        "index: {} bytes ({:.1} B/item), hash_power_level {}",
        st.hash_bytes,
        st.hash_bytes as f64 / st.curr_items as f64,
        st.hash_power_level
    );
}
