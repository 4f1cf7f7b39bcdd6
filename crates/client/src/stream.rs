//! A TCP or unix-domain socket behind one type.
//!
//! Every method takes `&self`: std implements `Read` and `Write` for `&TcpStream`
//! and `&UnixStream`, so a pipeline can write from one thread while it reads from
//! another (see [`crate::Pipeline`]).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;

use crate::addr::{Options, ServerAddr};
use crate::error::{Error, Result};

pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(crate) fn connect(addr: &ServerAddr, opts: &Options) -> Result<Stream> {
        opts.check()?;
        let stream = match addr {
            ServerAddr::Tcp { host, port } => {
                let addrs = (host.as_str(), *port)
                    .to_socket_addrs()
                    .map_err(|_| Error::InvalidAddr(addr.to_string()))?;
                let mut last = Error::InvalidAddr(addr.to_string());
                let mut found = None;
                for a in addrs {
                    let r = match opts.connect_timeout {
                        Some(t) => TcpStream::connect_timeout(&a, t),
                        None => TcpStream::connect(a),
                    };
                    match r {
                        Ok(s) => {
                            found = Some(s);
                            break;
                        }
                        Err(e) => last = Error::from_io(e),
                    }
                }
                let s = found.ok_or(last)?;
                s.set_nodelay(opts.tcp_nodelay).map_err(Error::Io)?;
                Stream::Tcp(s)
            }
            ServerAddr::Unix(path) => Stream::Unix(UnixStream::connect(path).map_err(Error::Io)?),
        };
        stream
            .set_timeouts(opts)
            .map_err(Error::Io)
            .map(|()| stream)
    }

    fn set_timeouts(&self, opts: &Options) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => {
                s.set_read_timeout(opts.read_timeout)?;
                s.set_write_timeout(opts.write_timeout)
            }
            Stream::Unix(s) => {
                s.set_read_timeout(opts.read_timeout)?;
                s.set_write_timeout(opts.write_timeout)
            }
        }
    }

    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).read(buf),
            Stream::Unix(s) => (&*s).read(buf),
        }
    }

    pub(crate) fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => (&*s).write_all(buf),
            Stream::Unix(s) => (&*s).write_all(buf),
        }
    }

    pub(crate) fn shutdown(&self, how: Shutdown) {
        // Only used to unblock or end a connection that is already given up on; an
        // error (not connected any more) changes nothing.
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        };
    }
}
