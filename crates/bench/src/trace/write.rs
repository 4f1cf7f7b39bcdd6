//! Writes a trace in the two forms PyPI's `libcachesim` reads:
//!
//! - `NAME.oracleGeneral.bin`: libCacheSim's oracleGeneral binary, one packed
//!   little-endian record per request, `u32 clock_time` (s), `u64 obj_id`,
//!   `u32 obj_size` (key + value bytes), `i64 next_access_vtime` (the index of the
//!   next request for the same object, -1 if none; Belady needs it). Read with
//!   `TraceReader(path, TraceType.ORACLE_GENERAL_TRACE)`.
//! - `NAME.csv`: `time,obj_id,obj_size,op,ttl` with a header; `op` is the
//!   memcached command (get, gets, add, cas) and `ttl` the key's TTL in seconds.
//!   libcachesim's csv reader takes it with `ReaderInitParam(has_header=True)` and
//!   the field numbers set; it knows `get` and reads the other ops as NOP, so
//!   the harness (scripts/hitratio_sim.py) reads the ops from this file itself.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;

use super::gen::Trace;

/// Each request's next-access index (-1: none), by a backward pass.
pub fn next_access(trace: &Trace) -> Vec<i64> {
    let space = trace.reqs.iter().map(|r| r.key).max().map_or(0, |k| k + 1);
    let mut last = vec![-1i64; space as usize];
    let mut next = vec![-1i64; trace.reqs.len()];
    for (i, r) in trace.reqs.iter().enumerate().rev() {
        let slot = &mut last[r.key as usize];
        next[i] = *slot;
        *slot = i as i64;
    }
    next
}

pub fn oracle_general(trace: &Trace, path: &Path) -> anyhow::Result<()> {
    let f = File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    for (r, next) in trace.reqs.iter().zip(next_access(trace)) {
        let m = trace.meta(r.key);
        let size = m.key_bytes as u32 + m.value_bytes;
        w.write_all(&r.time_secs.to_le_bytes())?;
        w.write_all(&r.key.to_le_bytes())?;
        w.write_all(&size.to_le_bytes())?;
        w.write_all(&next.to_le_bytes())?;
    }
    w.flush()?;
    Ok(())
}

pub fn csv(trace: &Trace, path: &Path) -> anyhow::Result<()> {
    let f = File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    writeln!(w, "time,obj_id,obj_size,op,ttl")?;
    for r in &trace.reqs {
        let m = trace.meta(r.key);
        writeln!(
            w,
            "{},{},{},{},{}",
            r.time_secs,
            r.key,
            m.key_bytes as u32 + m.value_bytes,
            r.op.name(),
            m.ttl_secs
        )?;
    }
    w.flush()?;
    Ok(())
}
