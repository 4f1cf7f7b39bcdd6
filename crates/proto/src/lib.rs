//! memcrab-proto: memcached's wire protocols as pure codecs.
//!
//! Goals: parse requests straight out of a connection's read buffer without copying
//! (keys and values are slices of that buffer), report "need more bytes" as a value
//! (`None`), and reproduce memcached 1.6's accept/reject decisions byte for byte,
//! because clients depend on its exact replies.
//!
//! Non-goals: I/O, storage, time. This crate depends on nothing of ours; the server
//! maps parsed requests onto the store.
//!
//! Modules:
//! - [`text`]: the classic text protocol (`doc/protocol.txt`, "Commands"), and under
//!   it [`text::meta`], the meta commands (`mg ms md ma mn me`), reached through
//!   [`text::parse`].
//! - [`binary`]: the binary protocol (framing, validation, responses).
//! - [`num`]: memcached's `safe_strto*` number parsing, quirks included.

pub mod binary;
pub mod num;
pub mod text;
