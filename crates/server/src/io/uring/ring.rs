//! A stream connection's wire under io_uring: the socket, the reply bytes handed
//! to the ring's send, the SENDMSG's iovecs, and the state of its receive and send
//! operations. Received bytes do not stay here: the driver hands each provided
//! buffer to [`crate::io::conn::Conn::drive`] as it is, and the connection serves
//! the requests that lie whole in it in place, keeping only what is left.
//!
//! ```text
//!   CQE (recv, provided buffer) ──► Conn::drive(fresh) ──► rbuf (only what is left)
//!   Conn's wbuf ──Wire::send (swap, no copy)──► out ──(one Send SQE, or one SendMsg
//!                                   SQE over `vec`'s iovecs when out holds leases)──► socket
//! ```
//!
//! When the output holds values lent by the store ([`crate::out`]), the send is a
//! SENDMSG whose iovec array and msghdr ([`VecSend`]) live here, untouched until its
//! completion; a partial send is resubmitted from where it stopped, and each lease
//! is released once a completion covered its last byte.
//!
//! To the connection it is a [`Wire`]: `read` reports only the end of the input
//! (EOF or an error: the bytes came through `drive`), `send` takes the replies
//! while no send is under way (else nothing, so the connection's output limit and
//! resume work as over epoll), and `holds_output` holds while a send is under way.
//! The driver, not the connection, submits the sends and arms the receives.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use io_uring::{opcode, squeue, types};

use crate::io::wire::{Wire, KEEP_BUFFER_BYTES};
use crate::out::{Out, IOV_MAX};
use crate::server::Ctx;

/// Received bytes held back by a connection that cannot serve them
/// ([`crate::io::conn::Conn::backlog`]) above which the driver cancels its receive
/// until it can (as the epoll driver stops reading while its output is over the
/// limit, a client that never reads its replies cannot grow the server).
pub const BACKLOG_HIGH_WATER: usize = 256 * 1024;

/// The socket under a ring connection.
pub enum Plain {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
}

pub struct Ring {
    sock: Plain,
    /// The peer's EOF was received.
    eof: bool,
    /// A receive or send failed with this errno: the connection is done.
    error: Option<i32>,
    /// The output from stream position `sent` on is what the ring's send has not
    /// sent yet; empty when idle.
    pub out: Out,
    sent: usize,
    /// The iovecs and msghdr of a SENDMSG under way (when `out` holds leases).
    pub vec: VecSend,
    /// A send SQE for `out[sent..]` is submitted and not completed.
    pub sending: bool,
    /// A multishot receive is armed (its final CQE, without `MORE`, not seen).
    pub recv_armed: bool,
    /// An AsyncCancel for the armed receive was submitted (backlog over the limit).
    recv_cancelling: bool,
}

impl Ring {
    pub fn new(sock: Plain) -> Self {
        Ring {
            sock,
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

    /// The receive saw the peer's EOF.
    pub fn end(&mut self) {
        self.eof = true;
    }

    /// A receive or send failed: later reads and sends return this error.
    pub fn fail(&mut self, errno: i32) {
        self.error.get_or_insert(errno);
    }

    /// The multishot receive ended (its last completion came).
    pub fn recv_ended(&mut self) {
        self.recv_armed = false;
        self.recv_cancelling = false;
    }

    /// A send completed having sent `n` bytes.
    pub fn sent_bytes(&mut self, n: usize) {
        self.sending = false;
        self.sent = (self.sent + n).min(self.out.len());
        if self.sent == self.out.len() {
            self.sent = 0;
            self.out.clear();
            self.out.free_buffer_over(KEEP_BUFFER_BYTES);
        } else {
            self.out.release_sent(self.sent);
        }
    }

    /// The operations the connection needs now, for slot `idx` (in the registered
    /// file table if `fixed`) and user data made by `ud(op)`: a send for its output,
    /// and its receive (re)armed, or cancelled while the connection's `backlog` is
    /// over the limit. Returns them and how many of them complete for good only
    /// with a last completion of their own (the send and the receive; a cancel's
    /// completion is not counted).
    pub fn ops(
        &mut self,
        idx: usize,
        fixed: bool,
        backlog: usize,
        bgid: u16,
        ud: impl Fn(Op) -> u64,
    ) -> ([Option<squeue::Entry>; 2], u32) {
        let fd = self.fd();
        let mut sqes: [Option<squeue::Entry>; 2] = [None, None];
        let mut ops = 0;
        let wants_send = !self.sending && self.sent < self.out.len() && self.error.is_none();
        if wants_send && self.out.has_leases() {
            // Lent values: one SENDMSG over iovecs (they and the msghdr stay here
            // until the completion; a close moves them to the slot's grave).
            let msg = self.vec.prepare(&self.out, self.sent);
            let e = if fixed {
                opcode::SendMsg::new(types::Fixed(idx as u32), msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build()
            } else {
                opcode::SendMsg::new(types::Fd(fd), msg)
                    .flags(libc::MSG_NOSIGNAL as u32)
                    .build()
            };
            sqes[0] = Some(e.user_data(ud(Op::Send)));
            self.sending = true;
            ops += 1;
        } else if wants_send {
            let buf = self.out.owned_from(self.sent).unwrap_or_default();
            let (ptr, len) = (buf.as_ptr(), buf.len().min(u32::MAX as usize) as u32);
            let e = if fixed {
                opcode::Send::new(types::Fixed(idx as u32), ptr, len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            } else {
                opcode::Send::new(types::Fd(fd), ptr, len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            };
            sqes[0] = Some(e.user_data(ud(Op::Send)));
            self.sending = true;
            ops += 1;
        }
        let over = backlog >= BACKLOG_HIGH_WATER;
        if self.recv_armed && !self.recv_cancelling && over {
            self.recv_cancelling = true;
            sqes[1] = Some(
                opcode::AsyncCancel::new(ud(Op::Recv))
                    .build()
                    .user_data(ud(Op::Cancel)),
            );
        } else if !self.recv_armed && !self.eof && self.error.is_none() && !over {
            let e = if fixed {
                opcode::RecvMulti::new(types::Fixed(idx as u32), bgid).build()
            } else {
                opcode::RecvMulti::new(types::Fd(fd), bgid).build()
            };
            sqes[1] = Some(e.user_data(ud(Op::Recv)));
            self.recv_armed = true;
            ops += 1;
        }
        (sqes, ops)
    }

    fn err(&self) -> Option<io::Error> {
        self.error.map(io::Error::from_raw_os_error)
    }
}

/// What a completion is for: the low 8 bits of its user data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    Recv = 1,
    Send = 2,
    Cancel = 3,
    Files = 4,
    Epoll = 5,
}

impl Wire for Ring {
    /// The bytes came through `drive`: only the end of the input is read here.
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.err() {
            return Err(e);
        }
        if self.eof {
            return Ok(0);
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// Takes all of `wbuf` while no send is under way or queued, by swapping
    /// buffers instead of copying: the connection gets `out`'s empty allocation
    /// back. Takes nothing while a send is under way.
    fn send(&mut self, wbuf: &mut Out, _wpos: &mut usize, cx: &Ctx<'_>) -> io::Result<()> {
        if let Some(e) = self.err() {
            return Err(e);
        }
        if !self.out.is_empty() {
            return Ok(());
        }
        let n = wbuf.len();
        std::mem::swap(&mut self.out, wbuf);
        // The connection's setting stays with the connection's buffer.
        wbuf.set_lend_min(self.out.lend_min());
        self.sent = 0;
        cx.counters.bytes_written.add(n as u64);
        Ok(())
    }

    /// Whether reply bytes are still to be sent by the ring.
    fn holds_output(&self) -> bool {
        !self.out.is_empty() && self.error.is_none()
    }
}

/// A SENDMSG's iovec array and msghdr, kept where the kernel reads them until the
/// send completes (in the connection's [`Ring`], or in its slot's grave after a
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
