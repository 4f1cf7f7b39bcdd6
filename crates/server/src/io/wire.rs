//! What a connection's bytes travel over: the [`Wire`] a driver lends the
//! connection core ([`crate::io::conn`]). Two wires implement it: a socket
//! (`io/stream.rs`, the epoll driver's and TLS's) and an io_uring connection's
//! send and receive state (`io/uring/ring.rs`).

use std::io;

use crate::out::Out;
use crate::server::Ctx;

/// Buffers larger than this are released when they empty (a connection's read
/// buffer, a wire's own).
pub const KEEP_BUFFER_BYTES: usize = 256 * 1024;

/// How a connection's bytes reach and leave the peer: what a driver lends
/// [`crate::io::conn::Conn::drive`]. Reads are asked for; a driver that receives
/// without asking (io_uring) hands its bytes to `drive` as `fresh` and reports
/// through `read` only the end of its input.
pub trait Wire {
    /// Reads once: Ok(0) at EOF, `WouldBlock` when nothing is there.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Sends `out` from stream position `*wpos` on, as far as the wire takes it
    /// now (a full socket is not an error), moves `*wpos` on (or takes the whole
    /// buffer, leaving `out` empty), and counts what it took in `bytes_written`.
    fn send(&mut self, out: &mut Out, wpos: &mut usize, cx: &Ctx<'_>) -> io::Result<()>;
    /// Whether the wire holds output the peer has not taken yet (TLS records, a
    /// ring's send under way).
    fn holds_output(&self) -> bool;
}
