//! Polling with a deadline: the one kind of wait the harness allows, for
//! conditions the test can observe (a file written, a socket accepting).

use std::thread;
use std::time::{Duration, Instant};

/// How often a condition is polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(2);

/// Polls `cond` every [`POLL_INTERVAL`] until it holds; panics with `what` after
/// `within`.
#[track_caller]
pub fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        thread::sleep(POLL_INTERVAL);
    }
}
