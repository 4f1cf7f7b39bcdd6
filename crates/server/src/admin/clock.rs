//! The request clock: what the request step times requests with (`exec/probe.rs`),
//! kept in the server's `Observe` (`server.rs`).
//!
//! Why the time-stamp counter: a batch of requests is timed with two reads of it
//! (a request with the slow log on, one), about 25 cycles each and one instruction
//! under valgrind, where `Instant::now()` costs a
//! vDSO `clock_gettime` (some 50 instructions and 20 ns) each. The counter runs at a
//! constant rate on every x86-64 CPU Linux calls `constant_tsc` (all since 2008) and
//! is synchronised across cores, which is what a request that starts and ends on
//! one worker thread needs anyway. Elsewhere (or where the kernel does not report a
//! constant, non-stop counter) the monotonic clock is read instead.

use std::time::{Duration, Instant};

/// The request clock: raw readings ([`Ticks::now`]) and their conversion to
/// nanoseconds, `ns = ticks * mult >> 32`.
#[derive(Clone, Copy)]
pub struct Ticks {
    /// Nanoseconds per tick, times 2^32 (set once at start-up).
    mult: u64,
    /// Read the time-stamp counter (else the monotonic clock, in ns since `base`).
    tsc: bool,
    base: Instant,
}

impl Ticks {
    /// A clock that is never read (nothing is timed).
    pub fn off() -> Self {
        Ticks::monotonic()
    }

    /// The monotonic clock, in nanoseconds since now (`-o latency_clock=monotonic`,
    /// and where the counter cannot be trusted).
    pub fn monotonic() -> Self {
        Ticks {
            mult: 1 << 32,
            tsc: false,
            base: Instant::now(),
        }
    }

    /// Measures the time-stamp counter's rate against the monotonic clock over 2 ms
    /// (an error of a few parts per million: the clock's resolution over the span),
    /// where the counter can be trusted; else the monotonic clock.
    pub fn calibrate() -> Self {
        if !tsc_usable() {
            return Ticks::monotonic();
        }
        let (t0, i0) = tsc_and_clock();
        std::thread::sleep(Duration::from_millis(2));
        let (t1, i1) = tsc_and_clock();
        let ns = i1.duration_since(i0).as_nanos() as f64;
        let ticks = t1.wrapping_sub(t0) as f64;
        if ticks < 1.0 || ns < 1.0 {
            return Ticks::monotonic();
        }
        Ticks {
            mult: ((ns / ticks) * (1u64 << 32) as f64) as u64,
            tsc: true,
            base: Instant::now(),
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

    /// Whether readings come from the time-stamp counter ([`rdtsc`]), so that a
    /// caller that knows it may read the counter without [`Ticks::now`]'s check.
    pub fn is_tsc(&self) -> bool {
        self.tsc
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

/// A counter reading and a monotonic clock reading taken together: of a few tries,
/// the one whose clock read the two counter reads around it bracket most tightly
/// (the counter at their midpoint). A thread preempted between the two reads of a
/// plain pair would skew a 2 ms calibration by the time it was away, 5% per
/// 100 µs on a busy machine.
fn tsc_and_clock() -> (u64, Instant) {
    let mut best = (u64::MAX, 0, Instant::now());
    for _ in 0..8 {
        let before = rdtsc();
        let at = Instant::now();
        let width = rdtsc().wrapping_sub(before);
        if width < best.0 {
            best = (width, before.wrapping_add(width / 2), at);
        }
    }
    (best.1, best.2)
}

/// A reading of the time-stamp counter (0 where there is none).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC reads the time-stamp counter and has no other effect; every
    // x86-64 CPU has it (`tsc_usable` checks that it runs at a constant rate).
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn rdtsc() -> u64 {
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
        for t in [Ticks::calibrate(), Ticks::monotonic()] {
            measures_a_sleep(t);
        }
        assert_eq!(Ticks::monotonic().source(), "monotonic");
    }

    fn measures_a_sleep(t: Ticks) {
        // Each monotonic reading sits between two of the request clock, so that a
        // preemption between reads widens the bounds instead of failing the test:
        // the request clock's span over [i0, i1] lies between ns(a1, b0) and
        // ns(a0, b1).
        let (a0, i0, a1) = (t.now(), Instant::now(), t.now());
        std::thread::sleep(Duration::from_millis(20));
        let (b0, i1, b1) = (t.now(), Instant::now(), t.now());
        let real = i1.duration_since(i0).as_nanos() as f64;
        let (low, high) = (t.ns(a1, b0) as f64, t.ns(a0, b1) as f64);
        assert!(
            low < real * 1.02 && high > real * 0.98,
            "{low}..{high} ns against {real} ns"
        );
        assert_eq!(t.ns(b0, a0), 0, "a reading before the start is 0");
    }
}
