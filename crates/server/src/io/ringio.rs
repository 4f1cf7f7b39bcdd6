//! A stream connection served by io_uring ([`crate::io::uring`]): the socket, the bytes
//! its multishot receive delivered and the connection has not read yet, and the
//! reply bytes handed to the ring's send.
//!
//! ```text
//!   CQE (recv, provided buffer) ──deliver──► inbox ──read──► Conn's rbuf
//!   Conn's wbuf ──write/give──► out ──(uring.rs: one Send SQE, or one SendMsg SQE
//!                                       over `vec`'s iovecs when out holds leases)──► socket
//! ```
//!
//! When the output holds values lent by the store ([`crate::io::out`]), the send is a
//! SENDMSG whose iovec array and msghdr ([`VecSend`]) live here, untouched until its
//! completion; a partial send is resubmitted from where it stopped, and each lease
//! is released once a completion covered its last byte.
//!
//! To [`crate::io::conn::Conn`] it is just another [`crate::io::net::Stream`]: `read`
//! returns what was delivered (or `WouldBlock`), `write` takes replies while no send
//! is under way (else `WouldBlock`, so the connection's output limit and resume work
//! as over epoll), and `has_pending_output` holds while a send is under way. The
//! worker, not the connection, submits the sends and arms the receives.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use crate::io::out::{Out, IOV_MAX};

/// Delivered bytes above which the worker cancels the connection's receive until
/// the connection has read them (as the epoll path stops reading while its output
/// is over the limit, a client that never reads its replies cannot grow the server).
pub const INBOX_HIGH_WATER: usize = 256 * 1024;

/// The socket under a ring connection.
pub enum Plain {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
}

pub struct RingIo {
    pub sock: Plain,
    /// `inbox[inpos..]` was delivered and not yet read.
    inbox: Vec<u8>,
    inpos: usize,
    /// The peer's EOF was delivered (after the bytes in the inbox).
    eof: bool,
    /// A receive or send failed with this errno: the connection is done.
    error: Option<i32>,
    /// The output from stream position `sent` on is what the ring's send has not
    /// sent yet; empty when idle.
    pub out: Out,
    pub sent: usize,
    /// The iovecs and msghdr of a SENDMSG under way (when `out` holds leases).
    pub vec: VecSend,
    /// A send SQE for `out[sent..]` is submitted and not completed.
    pub sending: bool,
    /// A multishot receive is armed (its final CQE, without `MORE`, not seen).
    pub recv_armed: bool,
    /// An AsyncCancel for the armed receive was submitted (inbox over the limit).
    pub recv_cancelling: bool,
}

impl RingIo {
    pub fn new(sock: Plain) -> Self {
        RingIo {
            sock,
            inbox: Vec::new(),
            inpos: 0,
            eof: false,
            error: None,
            out: Out::default(),
            sent: 0,
            vec: VecSend::default(),
            sending: false,
            recv_armed: false,
            recv_cancelling: false,
        }
    }

    pub fn fd(&self) -> RawFd {
        match &self.sock {
            Plain::Tcp(s) => s.as_raw_fd(),
            Plain::Unix(s) => s.as_raw_fd(),
        }
    }

    pub fn source(&mut self) -> &mut dyn mio::event::Source {
        match &mut self.sock {
            Plain::Tcp(s) => s,
            Plain::Unix(s) => s,
        }
    }

    /// Bytes a receive completion delivered.
    pub fn deliver(&mut self, bytes: &[u8]) {
        // Drop the bytes already read once they are at least as many as those
        // still unread (all of them when everything was read): the inbox then
        // holds at most twice what is unread plus one delivery, and each byte is
        // moved at most once on average. Without this, a connection that always
        // left part of a request unread never emptied its inbox, and it grew with
        // everything the client ever sent (42 MiB peak at -m 8 in the memory test).
        if self.inpos > 0 && self.inpos >= self.inbox.len() - self.inpos {
            self.inbox.drain(..self.inpos);
            self.inpos = 0;
        }
        self.inbox.extend_from_slice(bytes);
    }

    /// The receive saw the peer's EOF.
    pub fn deliver_eof(&mut self) {
        self.eof = true;
    }

    /// A receive or send failed: later reads and writes return this error.
    pub fn fail(&mut self, errno: i32) {
        self.error.get_or_insert(errno);
    }

    /// Delivered bytes not yet read.
    pub fn buffered(&self) -> usize {
        self.inbox.len() - self.inpos
    }

    /// Whether the receive should be (re)armed: the peer may send more, nothing
    /// failed, and the inbox is under its limit.
    pub fn wants_recv(&self) -> bool {
        !self.recv_armed && !self.eof && self.error.is_none() && self.buffered() < INBOX_HIGH_WATER
    }

    /// Whether the armed receive should be cancelled: the inbox is over its limit.
    pub fn wants_cancel(&self) -> bool {
        self.recv_armed && !self.recv_cancelling && self.buffered() >= INBOX_HIGH_WATER
    }

    /// Whether `out` holds bytes no send has been submitted for.
    pub fn wants_send(&self) -> bool {
        !self.sending && self.sent < self.out.len() && self.error.is_none()
    }

    /// A send completed having sent `n` bytes.
    pub fn sent_bytes(&mut self, n: usize) {
        self.sending = false;
        self.sent = (self.sent + n).min(self.out.len());
        if self.sent == self.out.len() {
            self.sent = 0;
            self.out.clear();
            self.out.free_buffer_over(INBOX_HIGH_WATER);
        } else {
            self.out.release_sent(self.sent);
        }
    }

    fn err(&self) -> Option<io::Error> {
        self.error.map(io::Error::from_raw_os_error)
    }

    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let avail = &self.inbox[self.inpos..];
        if !avail.is_empty() {
            let n = avail.len().min(buf.len());
            buf[..n].copy_from_slice(&avail[..n]);
            self.inpos += n;
            if self.inpos == self.inbox.len() {
                self.inbox.clear();
                self.inpos = 0;
                if self.inbox.capacity() > INBOX_HIGH_WATER {
                    self.inbox = Vec::new();
                }
            }
            return Ok(n);
        }
        if let Some(e) = self.err() {
            return Err(e);
        }
        if self.eof {
            return Ok(0);
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// Takes all of `buf` while no send is under way or queued; `WouldBlock` else.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(e) = self.err() {
            return Err(e);
        }
        if !self.out.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.out.clear();
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    /// As `write` of all of `wbuf`, by swapping buffers instead of copying: the
    /// connection gets `out`'s empty allocation back. False (nothing taken) when a
    /// send is under way.
    pub fn give(&mut self, wbuf: &mut Out) -> io::Result<bool> {
        if let Some(e) = self.err() {
            return Err(e);
        }
        if !self.out.is_empty() {
            return Ok(false);
        }
        std::mem::swap(&mut self.out, wbuf);
        // The connection's setting stays with the connection's buffer.
        wbuf.set_lend_min(self.out.lend_min());
        self.sent = 0;
        Ok(true)
    }

    /// The msghdr of a SENDMSG of the output from `sent` on (at most `IOV_MAX`
    /// pieces). It and its iovecs stay valid, and must stay untouched, until the
    /// send's completion: the caller submits it and sets `sending`.
    pub fn sendmsg(&mut self) -> *const libc::msghdr {
        self.vec.prepare(&self.out, self.sent)
    }

    /// Whether reply bytes are still to be sent by the ring.
    pub fn has_pending_output(&self) -> bool {
        !self.out.is_empty() && self.error.is_none()
    }
}

/// A SENDMSG's iovec array and msghdr, kept where the kernel reads them until the
/// send completes (in the connection's [`RingIo`], or in its slot's grave after a
/// close with a send under way).
#[derive(Default)]
pub struct VecSend {
    iov: Vec<libc::iovec>,
    msg: Option<Box<libc::msghdr>>,
}

// SAFETY: the raw pointers (the msghdr's to the iovecs, the iovecs' to the bytes of
// the same connection's `out` and its leases) are only handed to the kernel by the
// worker that owns the connection; moving the connection to another thread (the
// worker thread it is built for) moves what they point at along, and nothing
// reads through them here.
unsafe impl Send for VecSend {}

impl VecSend {
    /// Points the iovecs at `out`'s pieces from stream position `from` on, and the
    /// msghdr at the iovecs; returns the msghdr.
    fn prepare(&mut self, out: &Out, from: usize) -> *const libc::msghdr {
        let iov = &mut self.iov;
        iov.clear();
        out.pieces_from(from, |b| {
            iov.push(libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            });
            iov.len() < IOV_MAX
        });
        let msg = self.msg.get_or_insert_with(|| {
            // SAFETY: msghdr is plain C data; all zeroes is a valid empty header.
            Box::new(unsafe { std::mem::zeroed() })
        });
        msg.msg_iov = self.iov.as_mut_ptr();
        msg.msg_iovlen = self.iov.len() as _;
        &**msg
    }
}
