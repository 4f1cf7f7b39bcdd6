//! Shrinking a failing history: drop rounds, connections, segments and requests,
//! then write boundaries, keeping each cut that still shows the same difference
//! (same signature) on fresh servers. Greedy and time-boxed: the result is small,
//! not minimal.

use std::time::{Duration, Instant};

use crate::plan::Round;
use crate::servers::Config;
use crate::session::{Difference, Opts, Session};

/// Plays `rounds` on fresh servers; the first difference, if any.
pub fn replay(opts: &Opts, cfg: &Config, rounds: &[Round]) -> anyhow::Result<Option<Difference>> {
    let mut s = Session::start(opts, cfg)?;
    for (i, r) in rounds.iter().enumerate() {
        if let Some(d) = s.step(r, i) {
            return Ok(Some(d));
        }
    }
    Ok(None)
}

struct Shrinker<'a> {
    opts: &'a Opts,
    cfg: &'a Config,
    signature: &'a str,
    deadline: Instant,
    /// Replays per candidate before it counts as passing (for differences that
    /// do not show every time).
    attempts: usize,
    pub tries: usize,
}

impl Shrinker<'_> {
    /// Whether `rounds` still shows the difference.
    fn fails(&mut self, rounds: &[Round]) -> bool {
        (0..self.attempts).any(|_| {
            self.tries += 1;
            matches!(replay(self.opts, self.cfg, rounds), Ok(Some(d)) if d.signature == self.signature)
        })
    }

    fn out_of_time(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Removes items (addressed by `count`/`remove`) in chunks, halving the chunk
    /// size down to one, keeping every removal after which it still fails.
    fn ddmin(
        &mut self,
        rounds: &mut Vec<Round>,
        count: impl Fn(&[Round]) -> usize,
        remove: impl Fn(&mut Vec<Round>, usize, usize),
    ) {
        let mut chunk = count(rounds).div_ceil(2).max(1);
        loop {
            let mut start = 0;
            while start < count(rounds) {
                if self.out_of_time() {
                    return;
                }
                let mut cand = rounds.clone();
                let n = chunk.min(count(&cand) - start);
                remove(&mut cand, start, n);
                if cand != *rounds && self.fails(&cand) {
                    *rounds = cand;
                } else {
                    start += chunk;
                }
            }
            if chunk == 1 {
                return;
            }
            chunk = chunk.div_ceil(2);
        }
    }
}

/// Shrinks `rounds` (which fail with `signature`) within `budget`, replaying each
/// candidate up to `attempts` times. Returns the smallest failing history found
/// and how many replays it took.
pub fn shrink(
    opts: &Opts,
    cfg: &Config,
    rounds: Vec<Round>,
    signature: &str,
    budget: Duration,
    attempts: usize,
) -> (Vec<Round>, usize) {
    let mut s = Shrinker {
        opts,
        cfg,
        signature,
        deadline: Instant::now() + budget,
        attempts: attempts.max(1),
        tries: 0,
    };
    let mut rounds = rounds;
    // Whole rounds (the failing one is the last).
    s.ddmin(
        &mut rounds,
        |r| r.len(),
        |r, at, n| drop(r.drain(at..at + n)),
    );
    // Connections within rounds, segments, then requests: flattened indexes.
    s.ddmin(
        &mut rounds,
        |r| r.iter().map(|x| x.conns.len()).sum(),
        |r, at, n| {
            let mut idx = 0;
            for round in r.iter_mut() {
                remove_range(&mut round.conns, &mut idx, at, n);
            }
        },
    );
    // Every connection round keeps a segment: its sentinel tells whether the
    // connection is still open.
    s.ddmin(
        &mut rounds,
        |r| {
            r.iter()
                .flat_map(|x| &x.conns)
                .map(|c| c.segments.len())
                .sum()
        },
        |r, at, n| {
            let mut idx = 0;
            for c in r.iter_mut().flat_map(|x| &mut x.conns) {
                remove_range(&mut c.segments, &mut idx, at, n);
                if c.segments.is_empty() {
                    c.segments.push(Vec::new());
                }
            }
        },
    );
    s.ddmin(
        &mut rounds,
        |r| {
            r.iter()
                .flat_map(|x| &x.conns)
                .flat_map(|c| &c.segments)
                .map(Vec::len)
                .sum()
        },
        |r, at, n| {
            let mut idx = 0;
            for seg in r
                .iter_mut()
                .flat_map(|x| &mut x.conns)
                .flat_map(|c| &mut c.segments)
            {
                remove_range(seg, &mut idx, at, n);
            }
        },
    );
    // Write boundaries: all at once, else request by request.
    let mut flat = rounds.clone();
    for req in flat
        .iter_mut()
        .flat_map(|x| &mut x.conns)
        .flat_map(|c| &mut c.segments)
        .flatten()
    {
        req.cuts.clear();
        req.split_after = false;
    }
    if !s.out_of_time() && flat != rounds && s.fails(&flat) {
        rounds = flat;
    }
    (rounds, s.tries)
}

/// Removes the items of `v` whose running index (from `*idx`) is in `at..at + n`;
/// advances `*idx` past `v`.
fn remove_range<T>(v: &mut Vec<T>, idx: &mut usize, at: usize, n: usize) {
    let base = *idx;
    *idx += v.len();
    let mut i = 0;
    v.retain(|_| {
        let gi = base + i;
        i += 1;
        !(at..at + n).contains(&gi)
    });
}
