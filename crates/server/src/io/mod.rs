//! The transport: the acceptor, sockets, the connection core that serves a
//! stream's bytes, the two drivers that feed it (epoll and io_uring, side by side),
//! UDP's datagram framing, and TLS.
//!
//! ```text
//!   epoll.rs    the epoll driver        uring/   the io_uring driver (its files:
//!        └── neither imports the other ──┘       uring/mod.rs); a worker thread
//!                                                runs one, and when io_uring gives
//!                                                its worker back, epoll takes it on
//!   worker.rs   what both drivers share below the connection: a worker's parts
//!               and Ctx, a new connection's lending floor, poll registration,
//!               noting opened and closed connections, the idle test
//!   stream.rs   a socket (net.rs's Stream) as a connection's Wire
//!   listen.rs   the acceptor thread: listening sockets, -c, TLS wrapping,
//!               hand-off to the workers
//!   handoff.rs  a new connection from the acceptor to a worker
//!   conn.rs     the connection core: bytes in, replies out (Out), through a Wire
//!   wire.rs     the Wire trait: how a connection's bytes reach and leave the peer
//!   net.rs      listeners and sockets (TCP, unix, UDP), the Stream type
//!   udp.rs      UDP: datagram framing around the request step, and a worker's
//!               UDP sockets (Ports), which each driver polls and serves
//!   tls.rs      TLS streams (rustls), over startup/certs.rs's configuration
//! ```

pub mod conn;
pub mod epoll;
pub mod handoff;
pub mod listen;
pub mod net;
pub mod stream;
pub mod tls;
pub mod udp;
pub mod uring;
pub mod wire;
pub mod worker;
