//! The engines ([`memcrab_store`]): an operation program decoded from the input.
//!
//! The first byte picks the mode:
//! - even: differential. The segment engine (the default) and the reference engine
//!   run the same program with plenty of memory (nothing is evicted) on one hand-driven
//!   clock; every result must be the same, item fields included. CAS uniques are each
//!   engine's own: requests that compare a unique use the one that engine last
//!   reported for the key (or one off, or 0), and replies are compared with uniques
//!   masked (each must be non-zero, or the explicit one asked for).
//! - odd: pressure. One engine (seg or reference by the next byte) with a tiny limit
//!   runs the program; after each step the bytes it accounts are at most the limit,
//!   and every hit returns the value last written for the key (evictions may turn any
//!   hit into a miss, never into another value).

use std::collections::HashMap;
use std::sync::Arc;

use memcrab_store::reference::Reference;
use memcrab_store::seg::Seg;
use memcrab_store::{
    apply_delta, Clock, Config, DeleteOpts, DeleteResult, Delta, DeltaOpts, Engine, GetOpts, Mode,
    StoreOpts, StoreResult, Vivify,
};

use crate::reader::Reader;

/// The `store` fuzz target.
pub fn store(data: &[u8]) {
    let mut r = Reader(data);
    if r.u8() % 2 == 0 {
        differential(r);
    } else {
        pressure(r);
    }
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.0.is_empty()
    }
    /// A key from a small set, so operations meet; sometimes a 250-byte one.
    fn key(&mut self) -> Vec<u8> {
        let k = self.u8();
        if k == 255 {
            return vec![b'L'; 250];
        }
        format!("key{}", k % 16).into_bytes()
    }
    /// A value: a few bytes from the input, sometimes numeric (for incr/decr),
    /// sometimes large (up to 200 KiB, for the large-item paths).
    fn value(&mut self) -> Vec<u8> {
        let sel = self.u8();
        match sel % 8 {
            0 => self.u64().to_string().into_bytes(),
            1 => {
                let n = usize::from(self.u8()) * 800 + usize::from(self.u8());
                vec![sel; n]
            }
            _ => {
                let n = usize::from(sel / 8).min(self.0.len());
                let (v, rest) = self.0.split_at(n);
                self.0 = rest;
                v.to_vec()
            }
        }
    }
    /// An exptime relative to `now`: never, soon, later, or in the past.
    fn exptime(&mut self, now: u32) -> u32 {
        match self.u8() % 5 {
            0 | 1 => 0,
            2 => now + 1,
            3 => now + 1 + u32::from(self.u8() % 8),
            _ => now.saturating_sub(1).max(1),
        }
    }
    fn opt_exptime(&mut self, now: u32) -> Option<u32> {
        if self.bool() {
            Some(self.exptime(now))
        } else {
            None
        }
    }
}

/// A CAS unique to compare with, relative to what the engine last reported.
fn pick_cas(sel: u8, known: Option<u64>) -> Option<u64> {
    let cur = known.unwrap_or(12345);
    match sel % 5 {
        0 => None,
        1 => Some(cur),
        2 => Some(cur.saturating_sub(1)),
        3 => Some(cur + 1),
        _ => Some(0),
    }
}

/// One operation, with CAS choices still relative.
#[derive(Clone, Debug)]
enum Op {
    Store {
        mode: u8,
        key: Vec<u8>,
        flags: u32,
        exptime: u32,
        value: Vec<u8>,
        cas: u8,
        invalidate: bool,
        vivify: Option<u32>,
        new_cas: Option<u64>,
    },
    Get {
        key: Vec<u8>,
        touch: Option<u32>,
        no_bump: bool,
        vivify: Option<u32>,
        new_cas: Option<u64>,
        exclusive: bool,
        take_token: bool,
    },
    Touch(Vec<u8>, u32),
    Delete {
        key: Vec<u8>,
        cas: u8,
        invalidate: bool,
        touch: Option<u32>,
        new_cas: Option<u64>,
    },
    Delta {
        key: Vec<u8>,
        incr: bool,
        delta: u64,
        cas: u8,
        vivify: Option<(u64, u32)>,
        touch: Option<u32>,
        new_cas: Option<u64>,
    },
    FlushNow,
    FlushAt(u32),
    Advance(u32),
    Maintain,
}

/// Decodes one operation. `explicit_cas`: whether `E`-style explicit uniques may be
/// used (not together with flushes, whose invalidation compares uniques with the
/// engine's own counter, as memcached does).
fn decode_op(r: &mut Reader<'_>, now: u32, explicit_cas: bool, timed: bool) -> Op {
    let new_cas = |r: &mut Reader<'_>| {
        if explicit_cas && r.u8().is_multiple_of(4) {
            Some(u64::from(r.u32()) + 1)
        } else {
            None
        }
    };
    match r.u8() % if timed { 12 } else { 8 } {
        0..=2 => {
            let mode = r.u8();
            let key = r.key();
            let flags = if r.bool() { r.u32() } else { 0 };
            let exptime = if timed { r.exptime(now) } else { 0 };
            let value = r.value();
            let cas = r.u8();
            let invalidate = r.u8().is_multiple_of(4);
            let vivify = if timed { r.opt_exptime(now) } else { None };
            Op::Store {
                mode,
                key,
                flags,
                exptime,
                value,
                cas,
                invalidate,
                vivify,
                new_cas: new_cas(r),
            }
        }
        3 | 4 => Op::Get {
            key: r.key(),
            touch: if timed { r.opt_exptime(now) } else { None },
            no_bump: r.bool(),
            vivify: if timed { r.opt_exptime(now) } else { None },
            new_cas: new_cas(r),
            exclusive: r.bool(),
            take_token: r.bool(),
        },
        5 => Op::Delete {
            key: r.key(),
            cas: r.u8(),
            invalidate: r.u8().is_multiple_of(3),
            touch: if timed { r.opt_exptime(now) } else { None },
            new_cas: new_cas(r),
        },
        6 => Op::Delta {
            key: r.key(),
            incr: r.bool(),
            delta: if r.bool() { u64::from(r.u8()) } else { r.u64() },
            cas: r.u8(),
            vivify: if r.bool() {
                Some((r.u64() % 1000, if timed { r.exptime(now) } else { 0 }))
            } else {
                None
            },
            touch: if timed { r.opt_exptime(now) } else { None },
            new_cas: new_cas(r),
        },
        7 => Op::FlushNow,
        8 => Op::Touch(r.key(), r.exptime(now)),
        9 => Op::FlushAt(now + 1 + u32::from(r.u8() % 3)),
        10 => Op::Advance(1 + u32::from(r.u8() % 3)),
        _ => Op::Maintain,
    }
}

fn mode_of(sel: u8, cas: Option<u64>) -> Mode {
    match sel % 6 {
        0 => Mode::Set,
        1 => Mode::Add,
        2 => Mode::Replace,
        3 => Mode::Append,
        4 => Mode::Prepend,
        _ => Mode::Cas(cas.unwrap_or(0)),
    }
}

/// One engine and the CAS uniques it reported, per key.
struct Under {
    engine: Arc<dyn Engine>,
    cas: HashMap<Vec<u8>, u64>,
}

impl Under {
    /// Remembers `got`, the CAS unique the engine reported for `key`, and checks it:
    /// the `explicit` one when one was asked for (and `explicit_ok`), else not 0.
    /// Returns its mask.
    fn reported(
        &mut self,
        key: &[u8],
        got: u64,
        explicit: Option<u64>,
        explicit_ok: bool,
    ) -> &'static str {
        self.cas.insert(key.to_vec(), got);
        match explicit {
            Some(x) if explicit_ok => assert_eq!(got, x, "explicit CAS not applied"),
            _ => assert_ne!(got, 0, "a CAS unique of 0 with CAS on"),
        }
        "cas"
    }
}

/// Runs `op` on one engine; returns the result with CAS uniques masked.
fn run(u: &mut Under, op: &Op, explicit_ok: bool) -> String {
    match op {
        Op::Store {
            mode,
            key,
            flags,
            exptime,
            value,
            cas,
            invalidate,
            vivify,
            new_cas,
        } => {
            let known = u.cas.get(key).copied();
            let pick = pick_cas(*cas, known);
            let m = mode_of(*mode, pick);
            let opts = StoreOpts {
                compare_cas: if matches!(m, Mode::Cas(_)) {
                    None
                } else {
                    pick
                },
                invalidate: *invalidate,
                vivify: *vivify,
                new_cas: *new_cas,
            };
            let res = u.engine.store(m, key, *flags, *exptime, value, &opts);
            match res {
                StoreResult::Stored(c) => {
                    format!("Stored({})", u.reported(key, c, *new_cas, explicit_ok))
                }
                other => format!("{other:?}"),
            }
        }
        Op::Get {
            key,
            touch,
            no_bump,
            vivify,
            new_cas,
            exclusive,
            take_token,
        } => {
            let opts = GetOpts {
                touch: *touch,
                no_bump: *no_bump,
                vivify: *vivify,
                new_cas: *new_cas,
                exclusive: *exclusive,
            };
            let mut seen = None;
            let fetch = u.engine.get(key, &opts, &mut |it| {
                assert_eq!(it.key, key.as_slice(), "a get returned another key");
                seen = Some((
                    it.value.to_vec(),
                    it.flags,
                    it.cas,
                    it.exptime,
                    it.atime,
                    it.fetched,
                    it.stale,
                    it.token_sent,
                    it.created,
                ));
                *take_token
            });
            assert_eq!(fetch.is_hit(), seen.is_some(), "hit without a visit");
            match seen {
                Some((v, fl, c, e, a, f, s, t, cr)) => {
                    let c = u.reported(key, c, if cr { *new_cas } else { None }, explicit_ok);
                    format!("{fetch:?} {v:?} {fl} {c} exp={e} at={a} f={f} s={s} t={t} cr={cr}")
                }
                None => format!("{fetch:?}"),
            }
        }
        Op::Touch(key, e) => format!("touch {}", u.engine.touch(key, *e)),
        Op::Delete {
            key,
            cas,
            invalidate,
            touch,
            new_cas,
        } => {
            let opts = DeleteOpts {
                compare_cas: pick_cas(*cas, u.cas.get(key).copied()),
                invalidate: *invalidate,
                touch: *touch,
                new_cas: *new_cas,
            };
            match u.engine.delete(key, &opts) {
                DeleteResult::Invalidated(c) => {
                    format!("Invalidated({})", u.reported(key, c, *new_cas, explicit_ok))
                }
                other => format!("{other:?}"),
            }
        }
        Op::Delta {
            key,
            incr,
            delta,
            cas,
            vivify,
            touch,
            new_cas,
        } => {
            let opts = DeltaOpts {
                compare_cas: pick_cas(*cas, u.cas.get(key).copied()),
                vivify: vivify.map(|(initial, exptime)| Vivify { initial, exptime }),
                touch: *touch,
                new_cas: *new_cas,
            };
            match u.engine.delta(key, *incr, *delta, &opts) {
                Delta::Value(c) => {
                    let cs = u.reported(key, c.cas, *new_cas, explicit_ok);
                    format!("Value({} {cs} exp={} cr={})", c.value, c.exptime, c.created)
                }
                other => format!("{other:?}"),
            }
        }
        Op::FlushNow => {
            u.engine.flush_all(None);
            "flushed".into()
        }
        Op::FlushAt(t) => {
            u.engine.flush_all(Some(*t));
            "flush later".into()
        }
        Op::Advance(_) => "tick".into(),
        Op::Maintain => {
            u.engine.maintain();
            "maintained".into()
        }
    }
}

fn differential(mut r: Reader<'_>) {
    let explicit_cas = r.bool();
    let clock = Arc::new(Clock::new());
    clock.set(10);
    let cfg = Config {
        limit_bytes: 256 << 20,
        evict: true,
        use_cas: true,
        item_size_max: 1 << 20,
        hash_seed: None,
    };
    let mut engines = [
        Under {
            engine: Arc::new(Seg::new(cfg, Arc::clone(&clock))),
            cas: HashMap::new(),
        },
        Under {
            engine: Arc::new(Reference::new(cfg, 12, Arc::clone(&clock))),
            cas: HashMap::new(),
        },
    ];
    let mut steps = 0;
    let mut maintained = false;
    while !r.done() && steps < 400 {
        steps += 1;
        let now = clock.now();
        let op = decode_op(&mut r, now, explicit_cas, true);
        if explicit_cas && matches!(op, Op::FlushNow | Op::FlushAt(_)) {
            continue;
        }
        let mut a = run(&mut engines[0], &op, true);
        let mut b = run(&mut engines[1], &op, true);
        if matches!(op, Op::Maintain) {
            maintained = true;
        }
        // The segment engine also compacts a mostly dead segment when a store needs
        // room, unlinking the expired items in it as upkeep does.
        if engines[0].engine.stats().segments.compacted > 0 {
            maintained = true;
        }
        if maintained {
            // Upkeep (and compaction) frees expired and flushed items on its own
            // schedule (memcached's LRU crawler does too): afterwards a lookup of such
            // a key may count as a plain miss in one engine and as expired/flushed in
            // the other. Only the counter it bumps differs; it is a miss either way.
            for r in [&mut a, &mut b] {
                if r == "Expired" || r == "Flushed" {
                    *r = "Miss".to_string();
                }
            }
        }
        assert_eq!(a, b, "step {steps}: seg and reference differ on {op:?}");
        if let Op::Advance(n) = op {
            clock.set(now + n);
        }
        let (sa, sb) = (engines[0].engine.stats(), engines[1].engine.stats());
        assert_eq!(sa.evictions, 0, "seg evicted with plenty of memory");
        assert_eq!(sb.evictions, 0, "reference evicted with plenty of memory");
    }
}

fn pressure(mut r: Reader<'_>) {
    let use_seg = r.bool();
    let clock = Arc::new(Clock::new());
    clock.set(10);
    // seg's smallest segment is 64 KiB: 1 MiB is 16 of them.
    let limit: u64 = if use_seg { 1 << 20 } else { 64 << 10 };
    let cfg = Config {
        limit_bytes: limit,
        evict: true,
        use_cas: true,
        item_size_max: 256 << 10,
        hash_seed: None,
    };
    let engine: Arc<dyn Engine> = if use_seg {
        Arc::new(Seg::new(cfg, Arc::clone(&clock)))
    } else {
        Arc::new(Reference::new(cfg, 8, Arc::clone(&clock)))
    };
    let mut u = Under {
        engine,
        cas: HashMap::new(),
    };
    // The value each key last held, as far as the program knows.
    let mut last: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut steps = 0;
    while !r.done() && steps < 2000 {
        steps += 1;
        // No expiry and no vivify here: a hit must be the last write.
        let op = decode_op(&mut r, 10, false, false);
        let (key, before) = match &op {
            Op::Store { key, .. } | Op::Get { key, .. } | Op::Delta { key, .. } => {
                (Some(key.clone()), last.get(key).cloned())
            }
            Op::Delete { key, .. } => (Some(key.clone()), None),
            _ => (None, None),
        };
        let out = run(&mut u, &op, false);
        match &op {
            Op::Store {
                mode, key, value, ..
            } if out.starts_with("Stored") => {
                let new = match mode % 6 {
                    3 => before.map(|old| [old.as_slice(), value].concat()),
                    4 => before.map(|old| [value.as_slice(), old.as_slice()].concat()),
                    _ => Some(value.clone()),
                };
                match new {
                    Some(v) => last.insert(key.clone(), v),
                    // Appended to a value the program never saw whole: forget it.
                    None => last.remove(key),
                };
            }
            // A failed set removes the old item; a failed anything else leaves at
            // most the old value, which `last` still holds or has forgotten.
            Op::Store { key, .. } if out == "OutOfMemory" => {
                last.remove(key);
            }
            Op::Get { key, .. } => {
                let mut got = None;
                u.engine.get(
                    key,
                    &GetOpts {
                        no_bump: true,
                        ..GetOpts::default()
                    },
                    &mut |it| {
                        got = Some(it.value.to_vec());
                        false
                    },
                );
                if let Some(v) = got {
                    if let Some(want) = &before {
                        assert_eq!(&v, want, "a get returned a value never last written");
                    }
                } else {
                    last.remove(key);
                }
            }
            Op::Delta {
                key, incr, delta, ..
            } if out.starts_with("Value") => {
                let new = before
                    .as_deref()
                    .and_then(|old| apply_delta(old, *incr, *delta))
                    .map(|(_, bytes)| bytes);
                match new {
                    Some(v) if !out.contains("cr=true") => last.insert(key.clone(), v),
                    _ => last.remove(key),
                };
            }
            Op::Delete { .. } | Op::FlushNow => {
                if let Some(k) = &key {
                    last.remove(k);
                } else {
                    last.clear();
                }
            }
            _ => {}
        }
        let used = u.engine.stats().bytes;
        assert!(
            used <= limit,
            "step {steps}: {used} bytes accounted, limit {limit}"
        );
    }
}
