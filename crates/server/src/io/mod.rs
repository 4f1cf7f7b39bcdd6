//! The transport: sockets, the connection that moves a stream's bytes, the worker
//! loops that drive connections (epoll and io_uring), UDP's datagram framing, TLS, and
//! a connection's output.

pub mod conn;
pub mod handoff;
pub mod net;
pub mod out;
pub mod ringio;
pub mod tls;
pub mod udp;
pub mod uring;
pub mod worker;
