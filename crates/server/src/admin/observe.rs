//! What the request step measures for operators, held together for the server: each
//! worker's latency histograms and hot-key sketches, the slow log, and the cheap
//! clock that times requests. The request step records through
//! `crate::exec::probe`; `stats latency|hotkeys|slowlog`, `/metrics` and
//! `watch slowlog` read from here.
//!
//! ```text
//!   Observe ── ticks: Ticks (the CPU's time-stamp counter, ns per tick calibrated
//!           │         once at start-up against the monotonic clock)
//!           ├─ workers[w]: Latencies (admin/latency.rs) + HotKeys (admin/hotkeys.rs)
//!           │              written only by worker w
//!           └─ slowlog: SlowLog (admin/slowlog.rs), any worker, under its lock
//! ```
//!
//! Why the time-stamp counter: a request is timed with two reads of it, about 25
//! cycles each and one instruction under valgrind, where `Instant::now()` costs a
//! vDSO `clock_gettime` (some 50 instructions and 20 ns) each. The counter runs at a
//! constant rate on every x86-64 CPU Linux calls `constant_tsc` (all since 2008) and
//! is synchronised across cores, which is what a request that starts and ends on
//! one worker thread needs anyway. Elsewhere (or where the kernel does not report a
//! constant, non-stop counter) the monotonic clock is read instead.

use std::time::{Duration, Instant};

use super::hotkeys::HotKeys;
use super::latency::Latencies;
use super::slowlog::SlowLog;

/// One worker's recorders.
pub struct WorkerObs {
    pub latencies: Latencies,
    pub hotkeys: HotKeys,
}

/// The server's measurements, and whether each is on (`-o latency`, `-o hotkeys`,
/// `-o slowlog_us`).
pub struct Observe {
    /// Anything is measured: `timed || hotkeys` (the request step's one check).
    pub any: bool,
    /// Requests are timed: latency histograms on, or a slow log threshold set.
    pub timed: bool,
    /// Histograms recorded (`-o latency=on`, the default).
    pub latency: bool,
    /// Hot keys sampled (`-o hotkeys=on`, the default).
    pub hotkeys: bool,
    /// A slow log threshold is set (`-o slowlog_us` above 0): every request keeps
    /// its key until it is timed.
    pub slowlog_on: bool,
    pub ticks: Ticks,
    pub workers: Vec<WorkerObs>,
    pub slowlog: SlowLog,
}

impl Observe {
    pub fn new(
        workers: usize,
        latency: bool,
        hotkeys: bool,
        slowlog_us: u64,
        slowlog_len: usize,
    ) -> Self {
        let timed = latency || slowlog_us > 0;
        Observe {
            any: timed || hotkeys,
            timed,
            latency,
            hotkeys,
            slowlog_on: slowlog_us > 0,
            ticks: if timed {
                Ticks::calibrate()
            } else {
                Ticks::off()
            },
            workers: (0..workers)
                .map(|w| WorkerObs {
                    latencies: Latencies::default(),
                    hotkeys: HotKeys::new(w as u64 + 1),
                })
                .collect(),
            slowlog: SlowLog::new(slowlog_us, slowlog_len),
        }
    }

    /// Every worker's histograms merged, in `latency::series` order.
    pub fn latencies(&self) -> Vec<super::latency::Snapshot> {
        Latencies::merged(self.workers.iter().map(|w| &w.latencies))
    }

    /// Every worker's hot-key sketches.
    pub fn hotkeys(&self) -> impl Iterator<Item = &HotKeys> + Clone {
        self.workers.iter().map(|w| &w.hotkeys)
    }
}

impl Observe {
    /// `stats latency`, `stats hotkeys [reset]` and `stats slowlog [reset|<n>]`
    /// (`sub` is one of the three): their `STAT` lines and `END`, `RESET` after a
    /// reset, or `CLIENT_ERROR` with the usage for another argument. A measurement
    /// that is off answers `END` alone (`stats settings` says which are on).
    pub fn render(&self, sub: &[u8], arg: Option<&[u8]>, out: &mut Vec<u8>) {
        use memcrab_proto::text::reply;
        match (sub, arg) {
            (b"latency", None) => super::latency::render_stats(&self.latencies(), out),
            (b"hotkeys", None) => super::hotkeys::render_stats(self.hotkeys(), out),
            (b"hotkeys", Some(b"reset")) => {
                self.hotkeys().for_each(HotKeys::clear);
                out.extend_from_slice(reply::RESET);
                return;
            }
            (b"slowlog", None) => super::slowlog::render_stats(&self.slowlog.entries(), out),
            (b"slowlog", Some(b"reset")) => {
                self.slowlog.clear();
                out.extend_from_slice(reply::RESET);
                return;
            }
            (b"slowlog", Some(n)) if memcrab_proto::num::safe_strtoul(n).is_ok() => {
                // Redis' SLOWLOG GET <count>: the newest `n`, oldest first.
                let n = memcrab_proto::num::safe_strtoul(n).unwrap_or(0) as usize;
                let all = self.slowlog.entries();
                super::slowlog::render_stats(&all[all.len().saturating_sub(n)..], out);
            }
            _ => {
                out.extend_from_slice(match sub {
                    b"latency" => USAGE_LATENCY,
                    b"hotkeys" => USAGE_HOTKEYS,
                    _ => USAGE_SLOWLOG,
                });
                return;
            }
        }
        out.extend_from_slice(reply::END);
    }
}

pub const USAGE_LATENCY: &[u8] = b"CLIENT_ERROR usage: stats latency\r\n";
pub const USAGE_HOTKEYS: &[u8] = b"CLIENT_ERROR usage: stats hotkeys [reset]\r\n";
pub const USAGE_SLOWLOG: &[u8] = b"CLIENT_ERROR usage: stats slowlog [reset|<count>]\r\n";

/// The request clock: raw readings ([`Ticks::now`]) and their conversion to
/// nanoseconds, `ns = ticks * mult >> 32`.
pub struct Ticks {
    /// Nanoseconds per tick, times 2^32 (set once at start-up).
    mult: u64,
    /// Read the time-stamp counter (else the monotonic clock, in ns since `base`).
    tsc: bool,
    base: Instant,
}

impl Ticks {
    /// A clock that is never read (nothing is timed).
    fn off() -> Self {
        Ticks {
            mult: 1 << 32,
            tsc: false,
            base: Instant::now(),
        }
    }

    /// Measures the time-stamp counter's rate against the monotonic clock over 2 ms
    /// (an error of a few parts per million: the clock's resolution over the span),
    /// where the counter can be trusted; else the monotonic clock.
    fn calibrate() -> Self {
        let base = Instant::now();
        if !tsc_usable() {
            return Ticks {
                mult: 1 << 32,
                tsc: false,
                base,
            };
        }
        let (t0, i0) = (rdtsc(), Instant::now());
        std::thread::sleep(Duration::from_millis(2));
        let (t1, i1) = (rdtsc(), Instant::now());
        let ns = i1.duration_since(i0).as_nanos() as f64;
        let ticks = t1.wrapping_sub(t0) as f64;
        if ticks < 1.0 || ns < 1.0 {
            return Ticks {
                mult: 1 << 32,
                tsc: false,
                base,
            };
        }
        Ticks {
            mult: ((ns / ticks) * (1u64 << 32) as f64) as u64,
            tsc: true,
            base,
        }
    }

    /// A reading.
    #[inline]
    pub fn now(&self) -> u64 {
        if self.tsc {
            rdtsc()
        } else {
            self.base.elapsed().as_nanos() as u64
        }
    }

    /// Nanoseconds between two readings (0 if `end` is before `start`).
    #[inline]
    pub fn ns(&self, start: u64, end: u64) -> u64 {
        let d = end.saturating_sub(start);
        ((u128::from(d) * u128::from(self.mult)) >> 32) as u64
    }

    /// Where readings come from, for `stats settings`' `latency_clock`.
    pub fn source(&self) -> &'static str {
        if self.tsc {
            "tsc"
        } else {
            "monotonic"
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC reads the time-stamp counter and has no other effect; every
    // x86-64 CPU has it (`tsc_usable` checks that it runs at a constant rate).
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn rdtsc() -> u64 {
    0
}

/// Whether the kernel says the time-stamp counter runs at one rate, in every power
/// state (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo's flags).
fn tsc_usable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    info.lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| {
            let has = |name: &str| l.split_whitespace().any(|x| x == name);
            has("constant_tsc") && has("nonstop_tsc")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_measure_a_sleep() {
        let t = Ticks::calibrate();
        let a = t.now();
        let i = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let (b, real) = (t.now(), i.elapsed().as_nanos() as f64);
        let got = t.ns(a, b) as f64;
        assert!(
            (got - real).abs() / real < 0.02,
            "{got} ns against {real} ns"
        );
        assert_eq!(t.ns(b, a), 0, "a reading before the start is 0");
    }

    #[test]
    fn stats_subcommands() {
        let o = Observe::new(1, true, true, 1, 4);
        let w = &o.workers[0];
        w.latencies.record(super::super::latency::TEXT, 2_000);
        w.hotkeys.note(false, b"hot", 10);
        for i in 0..3 {
            o.slowlog.push(i, "text_get_hit", b"k", 5 + i, "-".into());
        }
        let run = |sub: &[u8], arg: Option<&[u8]>| {
            let mut out = Vec::new();
            o.render(sub, arg, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        };
        let l = run(b"latency", None);
        assert!(
            l.starts_with("STAT text_get_hit:count 1\r\n") && l.ends_with("END\r\n"),
            "{l}"
        );
        assert!(run(b"hotkeys", None).contains("STAT reads:1:key hot\r\n"));
        let s = run(b"slowlog", Some(b"2"));
        assert!(
            !s.contains("STAT 1:") && s.contains("STAT 2:us 6\r\n"),
            "{s}"
        );
        assert_eq!(run(b"slowlog", Some(b"reset")), "RESET\r\n");
        assert_eq!(run(b"slowlog", None), "END\r\n");
        assert_eq!(run(b"hotkeys", Some(b"reset")), "RESET\r\n");
        assert_eq!(run(b"hotkeys", None), "END\r\n");
        assert_eq!(run(b"latency", Some(b"reset")).as_bytes(), USAGE_LATENCY);
        assert_eq!(run(b"slowlog", Some(b"x")).as_bytes(), USAGE_SLOWLOG);
    }

    #[test]
    fn off_means_untimed() {
        let o = Observe::new(2, false, false, 0, 4);
        assert!(!o.timed && o.workers.len() == 2);
        assert!(
            Observe::new(1, false, true, 5, 4).timed,
            "the slow log times"
        );
    }
}
