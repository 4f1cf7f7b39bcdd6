//! The invariants memcrab's fuzz targets assert, as plain functions that panic on a
//! violation. libFuzzer calls them from `fuzz/fuzz_targets/*.rs` (nightly); the tests
//! in `tests/corpus.rs` replay every committed seed and regression input through the
//! same functions on stable.
//!
//! | target   | input                       | checked                                        |
//! |----------|-----------------------------|------------------------------------------------|
//! | `text`   | bytes a client sends        | text parser: progress, key rules, round trip,  |
//! |          |                             | same requests however the bytes are split      |
//! | `meta`   | same, seeded with meta      | the above, plus meta/text reply parsers and    |
//! |          |                             | base64 round trip                              |
//! | `binary` | bytes a client sends        | framing and validation: lengths agree with the |
//! |          |                             | header, nothing waited for beyond `-I`, round  |
//! |          |                             | trip, split-invariance                         |
//! | `store`  | an operation program        | seg vs reference engine reply by reply; under  |
//! |          |                             | a tiny limit: accounting and last-write gets   |
//! | `tls`    | a client's TLS records, cut | through `memcrab -Z`: exact replies however    |
//! |          | and corrupted anywhere      | cut; a broken stream closes; the server lives  |
//! | `restart`| edits to a saved memory     | warm restart: refused or read consistently,    |
//! |          | file and its `.meta`        | accounting within `-m`, untouched state intact |
//!
//! Each target's file is named for it; `reader.rs` is the input read as numbers,
//! which every program-driven check uses.

mod binary;
mod reader;
mod restart;
mod store;
mod text;
mod tls;

pub use binary::binary;
pub use restart::restart;
pub use store::store;
pub use text::{meta, text};
pub use tls::tls;

/// What a read-loop model does with the front of its buffer.
enum Step {
    /// Wait for the next chunk.
    Wait,
    /// Drop `used` bytes, then discard the next `swallow` bytes as they arrive.
    Consume { used: usize, swallow: usize },
    /// The connection is done (closed or quit).
    Stop,
}

/// The server's read loop, as the models share it: feeds `chunks` one after the other
/// into a buffer, discards what a request said to swallow as it arrives, and hands
/// the rest to `step` until it waits for more or stops.
fn read_loop(chunks: &[&[u8]], mut step: impl FnMut(&[u8]) -> Step) {
    let mut buf: Vec<u8> = Vec::new();
    let mut swallow = 0usize;
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            if swallow > 0 {
                let n = swallow.min(buf.len());
                buf.drain(..n);
                swallow -= n;
                if swallow > 0 {
                    break;
                }
                continue;
            }
            match step(&buf) {
                Step::Wait => break,
                Step::Consume { used, swallow: n } => {
                    buf.drain(..used);
                    swallow = n;
                }
                Step::Stop => return,
            }
        }
    }
}

/// The split point a fuzz input picks for the "fed in two pieces" checks: taken from
/// the input's first two bytes so libFuzzer can steer it.
fn split_point(data: &[u8]) -> usize {
    let seed = match data {
        [a, b, ..] => usize::from(*a) << 8 | usize::from(*b),
        _ => 0,
    };
    if data.is_empty() {
        0
    } else {
        seed % (data.len() + 1)
    }
}
