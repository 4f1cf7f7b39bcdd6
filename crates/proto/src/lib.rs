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
//! through others: `text/mod.rs` calls into `meta/` and `request.rs`, and what they
//! need of text (tokenizer, `Config`, reply lines) sits in the leaf files below.
//! Unit tests (`tests.rs`, `mod tests` blocks) may import anything.
//!
//! ```text
//!   lib.rs
//!   ├── text/
//!   │   ├── mod.rs         parse: find the line, tokenize, dispatch; the classic
//!   │   │                  commands (get, set, delete, incr, ...) and the admin ones
//!   │   │                  ──► token, config, request, meta, admin, watch, num,
//!   │   │                      memcrab_limits
//!   │   ├── request.rs     Request, StoreCmd, Keys; Error and the Action it asks of
//!   │   │                  the connection    ──► meta (Request::Meta), admin (Request::Admin)
//!   │   ├── admin.rs       Admin (lru_crawler, slabs, lru, watch), Classes, CrawlKind,
//!   │   │                  Float                       ──► num
//!   │   ├── watch.rs       `watch`'s event types and memcached's log lines
//!   │   │                                              ──► reply, request (StoreCmd)
//!   │   ├── meta/
//!   │   │   ├── mod.rs     meta::parse (returns Parsed), Meta, Flags, SetMode, the
//!   │   │   │              error lines
//!   │   │   │                  ──► tokens, token, config, text's reply, key, num,
//!   │   │   │                      memcrab_limits
//!   │   │   ├── tokens.rs  the line split as mcmc splits it (MetaTokens); imports nothing
//!   │   │   ├── key.rs     Key (plain or base64), base64 codec, NotBase64
//!   │   │   │                  ──► memcrab_limits (DECODED_KEY_MAX)
//!   │   │   ├── reply.rs   reply pieces (` c<cas>`, ` k<key>`, ` t<ttl>`)  ──► key
//!   │   │   ├── client.rs  client side: request encoders, reply parser
//!   │   │   │                  ──► text's client (Malformed, data_block), num
//!   │   │   └── tests.rs
//!   │   ├── token.rs       line finding and memcached's tokenize_command (Tokens,
//!   │   │                  MAX_TOKENS, LINE_MAX_NO_NEWLINE, READ_BUFFER_SIZE); imports nothing
//!   │   ├── config.rs      Config, item_size_ok        ──► memcrab_limits
//!   │   ├── reply.rs       reply lines and encoders; imports nothing
//!   │   ├── client.rs      client side: request encoders, reply parser
//!   │   │                                              ──► request (StoreCmd), num
//!   │   └── tests.rs
//!   ├── binary/            frame, decode (Reject), responses, test client; its
//!   │                      files are drawn in its own header ([`binary`])
//!   │                                                  ──► memcrab_limits
//!   └── num.rs             safe_strtoull/strtoul/strtol, NotANumber; a leaf
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
