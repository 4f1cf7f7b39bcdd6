//! The transport: sockets, the connection core that serves a stream's bytes, the
//! two drivers that feed it (epoll and io_uring, side by side), UDP's datagram
//! framing, TLS, and a connection's output.
//!
//! ```text
//!   epoll.rs    the epoll driver        uring/   the io_uring driver (its files:
//!        └── neither imports the other ──┘       uring/mod.rs); a worker thread
//!                                                runs one, and when io_uring gives
//!                                                its worker back, epoll takes it on
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
