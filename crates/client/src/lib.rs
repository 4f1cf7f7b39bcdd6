//! memcrab-client: a blocking client for memcached's classic text protocol, built on
//! memcrab-proto's client codec (the same crate the server parses with).
//!
//! ```text
//!   Connection ──► request::*  check key/args ──► proto encode::* ──► wbuf
//!        │                                                             │ one write_all
//!        │                                                             ▼
//!        │                                                    TCP / unix socket
//!        │                                                             │
//!        └──◄ typed result ◄── reply::ReadBuf ◄── proto parse_reply ◄──┘ rbuf
//!
//!   Pipeline: many requests into the one wbuf, one write, replies read in order.
//!   Cluster:  Ring (libmemcached ketama) picks a Connection per key.
//! ```
//!
//! Goals: every classic command with typed results; no I/O for a request that
//! cannot be sent (bad key); one write per request or per pipeline, and one read
//! buffer and one write buffer per connection; errors that say whether the
//! connection is still usable ([`Error::is_fatal`]); key placement identical to
//! libmemcached's weighted ketama.
//!
//! Non-goals: async I/O, connection pools, failover or replicas, the meta and binary
//! protocols, value compression or serialization (values are bytes, flags are the
//! caller's).
//!
//! Modules: [`conn`] (Connection, `noreply`), [`pipeline`], [`ketama`] (Ring),
//! [`cluster`], [`reply`] (response types and the read buffer), [`addr`] (addresses
//! and options), [`error`].

pub mod addr;
pub mod cluster;
pub mod conn;
pub mod error;
pub mod ketama;
pub mod pipeline;
pub mod reply;
mod request;
mod stream;

pub use addr::{Options, ServerAddr, DEFAULT_PORT, DEFAULT_TIMEOUT};
pub use cluster::Cluster;
pub use conn::{Connection, NoReply};
pub use error::{check_key, Error, KeyError, Result};
pub use ketama::Ring;
pub use pipeline::{Pipeline, PipelineNoReply};
pub use reply::{CasOutcome, Item, Response};
