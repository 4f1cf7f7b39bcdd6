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
//!   NoReply:  requests written at once, no reply read.
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
//! One trait, [`Commands`], is the keyed commands' signature on every face that
//! answers them: [`Connection`] and [`Cluster`] answer at once (`Result<T>`), a
//! [`Pipeline`] answers itself so that calls chain (the replies come from
//! `execute`). Code generic over `Commands` issues the same requests to any of
//! them. The `noreply` forms ([`NoReply`], [`PipelineNoReply`]) are not in it: they
//! are a mode of a connection or pipeline, not a face of their own, and have no
//! retrievals (a `get` has no `noreply`). Commands that only one server can answer
//! as a whole (`version`, `stats`, `verbosity`, `cache_memlimit`, `gat_multi`) stay
//! methods of `Connection` and `Pipeline`; a cluster sends them through
//! [`Cluster::connection`].
//!
//! Files, and what each imports of this crate (`──►`); no file imports one that
//! imports it, directly or through others:
//!
//! ```text
//!   lib.rs         this map and the re-exports
//!   cluster.rs     Cluster: ketama routing, lazily opened connections
//!                                  ──► conn, commands, ketama, request, reply, addr, error
//!   conn.rs        Connection: the commands beyond Commands, Commands for it
//!                ──► wire, noreply, pipeline, commands, request, reply, addr, error
//!   pipeline.rs    Pipeline, PipelineNoReply; the writer thread for large batches
//!                                  ──► wire, commands, request, reply, stream, error
//!   noreply.rs     NoReply: the noreply forms   ──► wire, request, error
//!   commands.rs    the Commands trait           ──► reply
//!   wire.rs        Wire: socket, buffers, the broken flag; send, recv, fail
//!                                  ──► stream, reply, request, addr, error
//!   reply.rs       Response, Item, CasOutcome, ReadBuf (reply parsing)
//!                                  ──► request (Expect), stream, error
//!   request.rs     checked request encoding (Expect)   ──► error
//!   stream.rs      Stream: TCP or unix socket          ──► addr, error
//!   ketama.rs      Ring: libmemcached's weighted ketama   ──► addr, error
//!   addr.rs        ServerAddr, Options                    ──► error
//!   error.rs       Error, KeyError, check_key; a leaf
//! ```

pub mod addr;
pub mod cluster;
mod commands;
pub mod conn;
pub mod error;
pub mod ketama;
mod noreply;
pub mod pipeline;
pub mod reply;
mod request;
mod stream;
mod wire;

pub use addr::{Options, ServerAddr, DEFAULT_PORT, DEFAULT_TIMEOUT};
pub use cluster::Cluster;
pub use commands::Commands;
pub use conn::Connection;
pub use error::{check_key, Error, KeyError, Result};
pub use ketama::Ring;
pub use noreply::NoReply;
pub use pipeline::{Pipeline, PipelineNoReply};
pub use reply::{CasOutcome, Item, Response};
