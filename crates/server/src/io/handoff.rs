//! The handoff from the acceptor thread to a worker: a new connection travels over
//! the worker's channel, and the worker's waker (polled under [`WAKE`]) says it came.
//! Both sides import this file; neither imports the other.

use std::sync::Arc;

use mio::Token;

use crate::io::net::Stream;
use crate::server::ConnInfo;

/// The token of an event loop's waker (the acceptor's and every worker's).
pub const WAKE: Token = Token(usize::MAX);

/// A connection handed from the acceptor to a worker.
pub struct NewConn {
    pub stream: Stream,
    pub info: Arc<ConnInfo>,
}
