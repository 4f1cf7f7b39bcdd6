//! memcached's binary protocol (deprecated upstream since 1.6, still served by
//! 1.6.45): request framing and validation, response encoders, and client-side
//! request encoders for tests.
//!
//! Requests are parsed in place: [`frame`] looks only at the 24-byte header and
//! waits (`Frame::NeedMore`) until the extras and key are buffered, exactly as
//! memcached's `try_read_command_binary` does; nothing is allocated from a length
//! field. [`decode`] then applies `dispatch_bin_command`'s checks in its order:
//!
//! ```text
//!   magic != 0x80                      -> close, no reply
//!   keylen + extlen > bodylen          -> 0x81 "Unknown command", close after write
//!   bodylen > 1 GiB (BODY_MAX_BYTES)   -> 0x04 "Invalid arguments", close after write
//!   SASL on, not authenticated         -> 0x20 "Auth failure.", close after write
//!   keylen > 250                       -> 0x04 "Invalid arguments", close after write
//!   per-opcode length rules violated   -> 0x04 "Invalid arguments", close after write
//!   unknown opcode (verbosity too)     -> 0x81 "Unknown command", swallow bodylen
//! ```
//!
//! Storage requests carry a value of `bodylen - keylen - extlen` bytes after the
//! key; the caller checks its size before waiting for it (memcached answers
//! "Too large." and swallows the value without buffering it).
//!
//! The files split along the same seams as `text/`: framing, request, reply,
//! client side. What each holds, and what it imports of this crate (`──►`); none
//! imports this file, and every name below is re-exported here, so users write
//! `binary::decode`, `binary::op::GET`, `binary::client::request`.
//!
//! ```text
//!   binary/
//!   ├── mod.rs       this map and the re-exports
//!   ├── frame.rs     HEADER_LEN, REQ_MAGIC, RES_MAGIC, Header, Frame, frame; a leaf
//!   ├── op.rs        opcodes (protocol_binary.h); a leaf
//!   ├── status.rs    response statuses and write_bin_error's texts; a leaf
//!   ├── request.rs   Request, StoreKind, Reject, decode, NO_CREATE,
//!   │                MAX_SASL_MECH_LEN, BODY_MAX_BYTES
//!   │                                           ──► frame, op, status, memcrab_limits
//!   ├── reply.rs     response encoders: header, simple, error, hit, hit_head,
//!   │                miss_with_key, stat        ──► frame, op, status
//!   ├── client.rs    client side: raw, request, store_extras, arith_extras,
//!   │                Response, parse_response   ──► frame
//!   └── tests.rs
//! ```

pub mod client;
mod frame;
pub mod op;
mod reply;
mod request;
pub mod status;

pub use frame::{frame, Frame, Header, HEADER_LEN, REQ_MAGIC, RES_MAGIC};
pub use reply::{error, header, hit, hit_head, miss_with_key, simple, stat};
pub use request::{
    decode, Reject, Request, StoreKind, BODY_MAX_BYTES, MAX_SASL_MECH_LEN, NO_CREATE,
};

#[cfg(test)]
mod tests;
