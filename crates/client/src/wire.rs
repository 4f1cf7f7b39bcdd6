//! The plumbing every face of the client writes and reads through: one socket, its
//! read buffer and write buffer, and the "broken" flag that a fatal error sets.
//!
//! [`Connection`](crate::Connection) owns a `Wire`; its `noreply` form and a
//! [`Pipeline`](crate::Pipeline) borrow it. None of them reaches the socket any
//! other way, so the rule "after a fatal error, every call answers
//! [`Error::Broken`] until `reconnect`" is kept here, once.

use std::net::Shutdown;

use crate::addr::{Options, ServerAddr};
use crate::error::{Error, Result};
use crate::reply::{ReadBuf, Response, RETAIN_MAX_BYTES};
use crate::request::Expect;
use crate::stream::Stream;

/// One socket to one server with its buffers.
pub(crate) struct Wire {
    addr: ServerAddr,
    opts: Options,
    pub(crate) stream: Stream,
    pub(crate) rbuf: ReadBuf,
    pub(crate) wbuf: Vec<u8>,
    broken: bool,
}

impl Wire {
    pub(crate) fn open(addr: &ServerAddr, opts: &Options) -> Result<Wire> {
        Ok(Wire {
            stream: Stream::connect(addr, opts)?,
            addr: addr.clone(),
            opts: opts.clone(),
            rbuf: ReadBuf::new(),
            wbuf: Vec::new(),
            broken: false,
        })
    }

    pub(crate) fn addr(&self) -> &ServerAddr {
        &self.addr
    }

    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    /// Drops the current socket and connects again with the same options.
    pub(crate) fn reconnect(&mut self) -> Result<()> {
        self.stream.shutdown(Shutdown::Both);
        self.broken = true;
        self.stream = Stream::connect(&self.addr, &self.opts)?;
        self.rbuf = ReadBuf::new();
        self.wbuf.clear();
        self.broken = false;
        Ok(())
    }

    /// One request, one response.
    pub(crate) fn call(
        &mut self,
        expect: Expect,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<Response> {
        self.send(encode)?;
        self.recv(expect)
    }

    /// Encodes one request into the cleared write buffer and writes it.
    pub(crate) fn send(&mut self, encode: impl FnOnce(&mut Vec<u8>) -> Result<()>) -> Result<()> {
        self.usable()?;
        self.wbuf.clear();
        encode(&mut self.wbuf)?;
        self.write_wbuf()
    }

    /// Writes the whole write buffer.
    pub(crate) fn write_wbuf(&mut self) -> Result<()> {
        let r = self.stream.write_all(&self.wbuf);
        self.reset_wbuf();
        r.map_err(|e| self.fail(Error::from_io(e)))
    }

    /// Empties the write buffer, giving back memory a large value took.
    pub(crate) fn reset_wbuf(&mut self) {
        self.wbuf.clear();
        if self.wbuf.capacity() > RETAIN_MAX_BYTES {
            self.wbuf.shrink_to(RETAIN_MAX_BYTES / 16);
        }
    }

    /// Reads one response of the given shape.
    pub(crate) fn recv(&mut self, expect: Expect) -> Result<Response> {
        match self.rbuf.read_response(&self.stream, expect) {
            Ok(r) => r,
            Err(e) => Err(self.fail(e)),
        }
    }

    pub(crate) fn usable(&self) -> Result<()> {
        if self.broken {
            return Err(Error::Broken);
        }
        Ok(())
    }

    /// Marks the connection broken after a fatal error and closes the socket, so
    /// that no late reply can be taken for another request's.
    pub(crate) fn fail(&mut self, e: Error) -> Error {
        self.broken = true;
        self.stream.shutdown(Shutdown::Both);
        e
    }
}
