//! memcrab-proto: memcached's wire protocols as pure codecs.
//!
//! Goals: parse requests straight out of a connection's read buffer without copying
//! (keys and values are slices of that buffer), report "need more bytes" as a value
//! (`None`), and reproduce memcached 1.6's accept/reject decisions byte for byte,
//! because clients depend on its exact replies.
//!
//! Non-goals: I/O, storage, time. Of our crates this one depends only on
//! memcrab-limits (key length, item size against `-I`), which store and server share;
//! the server maps parsed requests onto the store.
//!
//! Modules:
//! - [`text`]: the classic text protocol (`doc/protocol.txt`, "Commands"), parsed by
//!   [`text::parse`].
//! - [`text::meta`]: the meta commands (`mg ms md ma mn me`). They are text commands
//!   (same line, same tokenizer), so [`text::parse`] hands them to this child module.
//! - [`binary`]: the binary protocol (framing, validation, responses).
//! - [`num`]: memcached's `safe_strto*` number parsing (and `safe_strtod`), quirks
//!   included.
//!
//! Files, what each holds, and what it imports of this crate (`──►`). No file imports
//! its parent module's file, and no file imports one that imports it, directly or
//! through others. Unit tests (`tests.rs`, `tests/`, `mod tests` blocks) may import
//! anything. Each folder draws its own files in its module docs ([`text`],
//! [`text::meta`], [`binary`]).
//!
//! ```text
//!   lib.rs
//!   ├── text/     the text protocol; the meta commands in text/meta/
//!   │                                         ──► num, memcrab_limits
//!   ├── binary/   frame, decode (Reject), responses, test client
//!   │                                         ──► memcrab_limits
//!   └── num.rs    safe_strtoull/strtoul/strtol, NotANumber; a leaf
//! ```
//!
//! Limits: every memcached limit the codecs share with store and server
//! (`KEY_MAX_LEN`, the item size rule) comes from memcrab-limits; proto re-exports
//! only [`text::KEY_MAX_LEN`]. The limits that are the protocol's own stay with their
//! parser ([`text::MAX_TOKENS`], [`text::LINE_MAX_NO_NEWLINE`],
//! [`text::meta::MAX_TOKENS`], [`text::meta::OPAQUE_MAX_LEN`],
//! [`binary::MAX_SASL_MECH_LEN`]).

pub mod binary;
pub mod num;
pub mod text;
