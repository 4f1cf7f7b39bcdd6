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
//!
//! A failure is reported as memcached 1.6.45's `ssl_read`/`ssl_write` report it: a
//! `type=conntlserr` line in `watch connevents` with OpenSSL's error text
//! ([`openssl_text`]), and a count. memcached counts a failure inside its accept
//! call (`SSL_accept` on a ClientHello already there) in `ssl_handshake_errors`
//! and one in a later read in `ssl_proto_errors`, so for a refused ClientHello the
//! counter is a race there. Here the handshake always runs in the connection's
//! reads, and the rule is fixed: a failure before the server has answered (the
//! ClientHello refused) counts in `ssl_handshake_errors`, every other one (the peer
//! gone mid-handshake, a refused client certificate, a corrupt record) in
//! `ssl_proto_errors`. A socket error is logged, not counted (memcached's
//! `SSL_ERROR_SYSCALL`); the end of the stream after the handshake is no failure.

use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::ServerConnection;

use crate::admin::watch::Hub;
use crate::startup::tls::{ClientAuth, Tls};

/// rustls's own default limit on buffered outgoing TLS, kept unless `ssl_wbuf_size`
/// asks for more.
const MIN_BUFFER_LIMIT_BYTES: usize = 64 * 1024;

/// One TLS connection over a non-blocking TCP socket (see the module doc for the
/// two rules it keeps).
pub struct TlsStream {
    tcp: mio::net::TcpStream,
    conn: ServerConnection,
    /// Its configuration's holder, which counts failures.
    shared: Arc<Tls>,
    /// `watch connevents` hears of failures (`type=conntlserr`).
    watch: Arc<Hub>,
    /// Plaintext bytes encrypted per write (`ssl_wbuf_size`).
    wbuf_size: usize,
    /// The server has sent TLS bytes: a failure before is a refused ClientHello.
    answered: bool,
    /// The first bytes the client sent (an HTTP request is named as such).
    first: [u8; FIRST_BYTES],
    first_len: usize,
    /// A TLS error ended the connection (no close_notify then), reported once.
    failed: bool,
}

/// How many of the client's first bytes are kept to name a request that is not TLS.
const FIRST_BYTES: usize = 5;

impl TlsStream {
    /// Wraps an accepted TCP connection in the configuration new connections of a
    /// listener of kind `auth` get now; the handshake runs in its first reads.
    pub fn accept(
        tls: &Arc<Tls>,
        auth: ClientAuth,
        tcp: mio::net::TcpStream,
        watch: &Arc<Hub>,
    ) -> io::Result<TlsStream> {
        let mut conn = ServerConnection::new(tls.config(auth)).map_err(io::Error::other)?;
        let wbuf_size = tls.wbuf_size();
        conn.set_buffer_limit(Some(MIN_BUFFER_LIMIT_BYTES.max(2 * wbuf_size)));
        Ok(TlsStream {
            tcp,
            conn,
            shared: Arc::clone(tls),
            watch: Arc::clone(watch),
            wbuf_size,
            answered: false,
            first: [0; FIRST_BYTES],
            first_len: 0,
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
                first: &mut self.first,
                first_len: &mut self.first_len,
            };
            let got = self.conn.read_tls(&mut socket);
            drained = socket.short;
            match got {
                Ok(0) => {
                    if self.conn.is_handshaking() {
                        // OpenSSL 3's words for the end of the stream mid-handshake
                        // (a port probe too: memcached 1.6.45 counts it).
                        self.report(Some(false), UNEXPECTED_EOF);
                    }
                    // The reader now reports the end (or what is left before it).
                    continue;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if n > 0 { Ok(n) } else { Err(e) };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.report(None, &os_text(&e));
                    return Err(e);
                }
            }
            if let Err(e) = self.conn.process_new_packets() {
                let refused_hello = self.conn.is_handshaking() && !self.answered;
                let first = &self.first[..self.first_len];
                self.report(Some(refused_hello), &openssl_text(&e, first));
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
                Ok(_) => self.answered = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.report(None, &os_text(&e));
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// TLS records waiting for the socket: the connection has output pending.
    pub fn has_pending_output(&self) -> bool {
        self.conn.wants_write()
    }

    /// Reports the failure that ends this connection, once: the `conntlserr` line,
    /// and the count (`counted`: `Some(true)` a refused ClientHello, `Some(false)`
    /// any other TLS failure, `None` a socket error, which is not counted).
    fn report(&mut self, counted: Option<bool>, msg: &str) {
        if self.failed {
            return;
        }
        self.failed = true;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.tcp);
        self.watch.conn_tls_error(fd, msg);
        if let Some(hello) = counted {
            self.shared.failed(hello, &self.tcp, &msg);
        }
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

/// The socket as rustls reads it, noting whether a read returned less than asked,
/// and keeping the client's first bytes.
struct ShortReadProbe<'a> {
    tcp: &'a mut mio::net::TcpStream,
    short: bool,
    first: &'a mut [u8; FIRST_BYTES],
    first_len: &'a mut usize,
}

impl Read for ShortReadProbe<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.tcp.read(buf)?;
        self.short = n > 0 && n < buf.len();
        let have = *self.first_len;
        let take = (FIRST_BYTES - have).min(n);
        self.first[have..have + take].copy_from_slice(&buf[..take]);
        *self.first_len += take;
        Ok(n)
    }
}

/// OpenSSL 3's `ERR_error_string_n` text for the end of the stream inside the
/// handshake.
const UNEXPECTED_EOF: &str = "error:0A000126:SSL routines::unexpected eof while reading";

/// The text memcached 1.6.45 logs (OpenSSL 3's `ERR_error_string_n`) for the
/// failure rustls reports as `e`, for the failures clients commonly cause (each
/// pinned against memcached); rustls's own words for the rest. `first` is the
/// client's first bytes: OpenSSL names a plain HTTP request.
pub fn openssl_text(e: &rustls::Error, first: &[u8]) -> String {
    use rustls::{Error, InvalidMessage, PeerIncompatible};
    let text = match e {
        Error::InvalidMessage(
            InvalidMessage::InvalidContentType | InvalidMessage::UnknownProtocolVersion,
        ) => {
            let http = [&b"GET "[..], b"POST ", b"HEAD ", b"PUT "];
            if http.iter().any(|m| first.starts_with(m)) {
                "error:0A00009C:SSL routines::http request"
            } else {
                "error:0A00010B:SSL routines::wrong version number"
            }
        }
        Error::InvalidMessage(_)
        | Error::InappropriateMessage { .. }
        | Error::InappropriateHandshakeMessage { .. } => {
            "error:0A0000F4:SSL routines::unexpected message"
        }
        Error::NoCertificatesPresented => {
            "error:0A0000C7:SSL routines::peer did not return a certificate"
        }
        Error::InvalidCertificate(_) => "error:0A000086:SSL routines::certificate verify failed",
        Error::PeerIncompatible(PeerIncompatible::NoCipherSuitesInCommon) => {
            "error:0A0000C1:SSL routines::no shared cipher"
        }
        Error::PeerIncompatible(
            PeerIncompatible::SupportedVersionsExtensionRequired
            | PeerIncompatible::Tls12NotOffered
            | PeerIncompatible::Tls12NotOfferedOrEnabled
            | PeerIncompatible::ServerDoesNotSupportTls12Or13,
        ) => "error:0A000102:SSL routines::unsupported protocol",
        other => return other.to_string(),
    };
    text.to_string()
}

/// A socket error as `strerror` words it ("Connection reset by peer"), which
/// memcached logs for `SSL_ERROR_SYSCALL`: Rust's text without " (os error N)".
fn os_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{CertificateError, Error, InvalidMessage, PeerIncompatible};

    #[test]
    fn openssl_texts() {
        let rows: &[(Error, &[u8], &str)] = &[
            (
                Error::InvalidMessage(InvalidMessage::InvalidContentType),
                b"versi",
                "error:0A00010B:SSL routines::wrong version number",
            ),
            (
                Error::InvalidMessage(InvalidMessage::UnknownProtocolVersion),
                b"GET /",
                "error:0A00009C:SSL routines::http request",
            ),
            (
                Error::InvalidMessage(InvalidMessage::MessageTooShort),
                b"\x16\x03\x01\x00\x05",
                "error:0A0000F4:SSL routines::unexpected message",
            ),
            (
                Error::NoCertificatesPresented,
                b"",
                "error:0A0000C7:SSL routines::peer did not return a certificate",
            ),
            (
                Error::InvalidCertificate(CertificateError::UnknownIssuer),
                b"",
                "error:0A000086:SSL routines::certificate verify failed",
            ),
            (
                Error::PeerIncompatible(PeerIncompatible::SupportedVersionsExtensionRequired),
                b"",
                "error:0A000102:SSL routines::unsupported protocol",
            ),
            (
                Error::PeerIncompatible(PeerIncompatible::NoCipherSuitesInCommon),
                b"",
                "error:0A0000C1:SSL routines::no shared cipher",
            ),
            (Error::DecryptError, b"", "cannot decrypt peer's message"),
        ];
        for (e, first, want) in rows {
            assert_eq!(openssl_text(e, first), *want, "{e:?}");
        }
        let reset = io::Error::from_raw_os_error(104);
        assert_eq!(os_text(&reset), "Connection reset by peer");
    }
}
