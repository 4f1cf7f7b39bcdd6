//! The transport: sockets, the connection core that serves a stream's bytes, the
//! two drivers that feed it (epoll and io_uring, side by side), UDP's datagram
//! framing, TLS, and a connection's output.
//!
//! ```text
//!   mod.rs      run: a worker on the driver asked for; io_uring hands over to epoll
//!   epoll.rs    the epoll driver        uring/   the io_uring driver (its files:
//!        └── neither imports the other ──┘       uring/mod.rs)
//!   worker.rs   what both drivers share: a worker's parts and Ctx, opening and
//!               closing a connection, poll registration, the idle test, UDP dispatch
//!   stream.rs   a socket (net.rs's Stream) as a connection's Wire
//!   handoff.rs  a new connection from the acceptor to a worker
//!   conn.rs     the connection core: bytes in, replies out (Out), through a Wire
//!   net.rs      listeners and sockets (TCP, unix, UDP), the Stream type
//!   udp.rs      UDP: datagram framing around the request step
//!   tls.rs      TLS (rustls) streams and certificates
//!   out.rs      a connection's output: bytes and values lent by the store
//! ```

pub mod conn;
pub mod epoll;
pub mod handoff;
pub mod net;
pub mod out;
pub mod stream;
pub mod tls;
pub mod udp;
pub mod uring;
pub mod worker;

use crate::startup::settings::IoKind;

/// Runs a worker thread on the driver `io` names. io_uring hands the worker back
/// when its ring cannot be set up or fails at run time (having closed the
/// connections on it); the epoll driver then serves it from there on.
pub fn run(w: worker::Worker, io: IoKind) {
    let w = match io {
        IoKind::Uring => match uring::run(w) {
            Some(w) => w,
            None => return,
        },
        IoKind::Epoll => w,
    };
    epoll::run(w);
}
