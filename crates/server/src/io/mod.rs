//! The transport: sockets, the connection core that serves a stream's bytes, the
//! two drivers that feed it (epoll and io_uring, side by side), UDP's datagram
//! framing, TLS, and a connection's output.
//!
//! ```text
//!   floor 3   epoll.rs          uring/ (mod.rs loop, ring.rs wire, bufring.rs set-up)
//!               └───────┬───────┘      neither imports the other; `run` chains them
//!   floor 2         worker.rs   what both drivers share: Ctx, open, close, watch
//!                       │       registration, idle test, UDP dispatch
//!   floor 1   net.rs (listeners; Stream: a socket as a Wire)   udp.rs   handoff.rs
//!                       │
//!   floor 0   conn.rs (Conn: bytes in, Out out; Wire; Next)   out.rs   tls.rs
//! ```

pub mod conn;
pub mod epoll;
pub mod handoff;
pub mod net;
pub mod out;
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
