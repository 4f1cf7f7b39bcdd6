//! TLS (`-Z`) on rustls: [`TlsStream`], the encrypted stream that
//! `net::Stream::Tls` wraps, over the configuration `startup/certs.rs` builds from
//! memcached's `ssl_*` options (held in `startup/tls.rs`). Requests never see TLS:
//! the connection's read and write move plaintext, so the request path is the same
//! as for TCP.
//!
//! ```text
//!   socket ──read_tls──► rustls (decrypt) ──reader──► TlsStream::read ──► conn.rs rbuf
//!   conn.rs wbuf ──TlsStream::write──► rustls (encrypt, ≤ ssl_wbuf_size) ──write_tls──► socket
//! ```
//!
//! The socket is non-blocking and mio is edge-triggered, so two rules hold:
//! - `read` drains rustls's decrypted plaintext before it reads the socket, and
//!   returns less than the buffer only once the socket is drained (a short socket
//!   read, or `WouldBlock`) or at EOF: conn.rs takes a short read to mean
//!   "drained" and waits for the next edge.
//! - TLS records rustls holds but the socket did not take (handshake messages,
//!   alerts, encrypted replies) are pending output ([`TlsStream::has_pending_output`]):
//!   the connection stays registered for writable edges and [`TlsStream::flush`]
//!   sends them, and no new plaintext is encrypted while any are left.

use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::ServerConnection;

use crate::startup::tls::Tls;

/// rustls's own default limit on buffered outgoing TLS, kept unless `ssl_wbuf_size`
/// asks for more.
const MIN_BUFFER_LIMIT_BYTES: usize = 64 * 1024;

/// One TLS connection over a non-blocking TCP socket (see the module doc for the
/// two rules it keeps).
pub struct TlsStream {
    tcp: mio::net::TcpStream,
    conn: ServerConnection,
    /// Its configuration's holder, which counts failed handshakes.
    shared: Arc<Tls>,
    /// Plaintext bytes encrypted per write (`ssl_wbuf_size`).
    wbuf_size: usize,
    /// Bytes arrived: a connection closed before sending any (a port probe) is not a
    /// failed handshake.
    got_bytes: bool,
    /// A TLS error ended the connection (no close_notify then).
    failed: bool,
}

impl TlsStream {
    /// Wraps an accepted TCP connection in the configuration new connections get
    /// now; the handshake runs in its first reads.
    pub fn accept(tls: &Arc<Tls>, tcp: mio::net::TcpStream) -> io::Result<TlsStream> {
        let mut conn = ServerConnection::new(tls.config()).map_err(io::Error::other)?;
        let wbuf_size = tls.wbuf_size();
        conn.set_buffer_limit(Some(MIN_BUFFER_LIMIT_BYTES.max(2 * wbuf_size)));
        Ok(TlsStream {
            tcp,
            conn,
            shared: Arc::clone(tls),
            wbuf_size,
            got_bytes: false,
            failed: false,
        })
    }

    pub fn tcp(&self) -> &mio::net::TcpStream {
        &self.tcp
    }

    pub fn tcp_mut(&mut self) -> &mut mio::net::TcpStream {
        &mut self.tcp
    }

    /// Reads plaintext. `Ok(0)` is the end of the stream (close_notify, or the peer
    /// closing the socket); fewer bytes than `buf` holds means the socket is drained.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        // A socket read shorter than asked drained the socket: the next edge says
        // when more comes, so no read just to see `WouldBlock` (conn.rs's rule too),
        // except after a read that gave no plaintext (below).
        let mut drained = false;
        loop {
            // Plaintext rustls decrypted earlier comes first: it is there without
            // any new socket bytes, and no edge would announce it.
            while n < buf.len() {
                match self.conn.reader().read(&mut buf[n..]) {
                    Ok(0) => return Ok(n), // close_notify: the end, after what we have
                    Ok(k) => n += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // The socket closed without close_notify: the end too (memcached
                    // closes the same way). Counted by `read_tls` below if early.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(n),
                    Err(e) => return Err(e),
                }
            }
            if n == buf.len() {
                return Ok(n);
            }
            // A short socket read that gave plaintext ends the read. One that gave
            // none (a partial record) reads again, to see `WouldBlock` or the EOF:
            // the data and the FIN can come in one edge, and a caller told
            // `WouldBlock` waits for an edge that never comes.
            if drained && n > 0 {
                return Ok(n);
            }
            let mut socket = ShortReadProbe {
                tcp: &mut self.tcp,
                short: false,
            };
            let got = self.conn.read_tls(&mut socket);
            drained = socket.short;
            match got {
                Ok(0) => {
                    if self.conn.is_handshaking() && self.got_bytes {
                        self.handshake_failed(&"the peer closed the connection");
                    }
                    // The reader now reports the end (or what is left before it).
                    continue;
                }
                Ok(_) => self.got_bytes = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if n > 0 { Ok(n) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    if self.conn.is_handshaking() && self.got_bytes {
                        self.handshake_failed(&e);
                    }
                    return Err(e);
                }
            }
            if let Err(e) = self.conn.process_new_packets() {
                if self.conn.is_handshaking() {
                    self.handshake_failed(&e);
                }
                self.failed = true;
                // Send the alert rustls queued (best effort), then close.
                let _ = self.conn.write_tls(&mut self.tcp);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // Handshake messages, tickets, alerts and key updates go out now.
            self.flush()?;
        }
    }

    /// Encrypts up to `ssl_wbuf_size` bytes of `buf` and sends what the socket
    /// takes. `WouldBlock` while earlier records are still unsent.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.flush()?;
        if self.conn.wants_write() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self
            .conn
            .writer()
            .write(&buf[..buf.len().min(self.wbuf_size)])?;
        self.flush()?;
        Ok(n)
    }

    /// Sends the TLS records rustls holds, as far as the socket takes them.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.tcp) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// TLS records waiting for the socket: the connection has output pending.
    pub fn has_pending_output(&self) -> bool {
        self.conn.wants_write()
    }

    fn handshake_failed(&mut self, why: &dyn std::fmt::Display) {
        if self.failed {
            return;
        }
        self.failed = true;
        self.shared.handshake_failed(&self.tcp, why);
    }
}

impl Drop for TlsStream {
    fn drop(&mut self) {
        // As memcached's SSL_shutdown on close: a close_notify, best effort.
        if !self.failed && !self.conn.is_handshaking() {
            self.conn.send_close_notify();
            let _ = self.conn.write_tls(&mut self.tcp);
        }
    }
}

/// The socket as rustls reads it, noting whether a read returned less than asked.
struct ShortReadProbe<'a> {
    tcp: &'a mut mio::net::TcpStream,
    short: bool,
}

impl Read for ShortReadProbe<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.tcp.read(buf)?;
        self.short = n > 0 && n < buf.len();
        Ok(n)
    }
}
