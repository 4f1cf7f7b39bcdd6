//! The floor: a do-nothing memcached responder. It answers every get key with one
//! fixed 100-byte value, every storage command with `STORED` and anything else with
//! `ERROR`, and stores nothing. Measured with the same workloads, it shows what the
//! machine's kernel and loopback cost per request, so a server's CPU per request can
//! be read as a multiple of that floor.
//!
//! It parses with memcrab-proto like the real server and, like it, answers every
//! request already buffered with one write, so it is the cheapest a server built
//! this way can be.

use std::io::{self, Read, Write};

use memcrab_proto::text::{self, Request};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX);
/// The value every get returns.
const VALUE: &[u8] = &[b'f'; 100];

struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
}

/// Serves on `listener` until killed, on the calling thread.
pub fn serve(listener: std::net::TcpListener) -> anyhow::Result<()> {
    let mut poll = Poll::new()?;
    listener.set_nonblocking(true)?;
    let mut listener = TcpListener::from_std(listener);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let cfg = text::Config::default();
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                while let Ok((mut stream, _)) = listener.accept() {
                    let _ = stream.set_nodelay(true);
                    let idx = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
                    poll.registry().register(
                        &mut stream,
                        Token(idx),
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    conns[idx] = Some(Conn {
                        stream,
                        rbuf: vec![0; 64 * 1024],
                        rend: 0,
                        wbuf: Vec::with_capacity(64 * 1024),
                        wpos: 0,
                    });
                }
                continue;
            }
            let idx = ev.token().0;
            let Some(c) = conns.get_mut(idx).and_then(Option::as_mut) else {
                continue;
            };
            if serve_conn(c, &cfg).is_err() {
                if let Some(mut c) = conns[idx].take() {
                    let _ = poll.registry().deregister(&mut c.stream);
                }
            }
        }
    }
}

/// Answers every complete request at the front of `input` into `out`; returns the
/// bytes used. (Shared with the io_uring floor.)
pub fn answer(input: &[u8], out: &mut Vec<u8>, cfg: &text::Config) -> usize {
    let mut pos = 0;
    while let Some((parsed, used)) = text::parse(&input[pos..], cfg) {
        match parsed {
            Ok(Request::Get { keys, .. }) => {
                for key in keys {
                    text::reply::value(out, key, 0, VALUE, None);
                }
                out.extend_from_slice(text::reply::END);
            }
            Ok(Request::Store { noreply, .. }) => {
                if !noreply {
                    out.extend_from_slice(text::reply::STORED);
                }
            }
            _ => out.extend_from_slice(text::reply::ERROR),
        }
        pos += used;
    }
    pos
}

/// Reads what is there, answers every complete request, writes once.
fn serve_conn(c: &mut Conn, cfg: &text::Config) -> io::Result<()> {
    loop {
        if c.rend == c.rbuf.len() {
            let n = c.rbuf.len() * 2;
            c.rbuf.resize(n, 0);
        }
        let space = c.rbuf.len() - c.rend;
        let n = match c.stream.read(&mut c.rbuf[c.rend..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        c.rend += n;
        let pos = answer(&c.rbuf[..c.rend], &mut c.wbuf, cfg);
        c.rbuf.copy_within(pos..c.rend, 0);
        c.rend -= pos;
        // A short read drained the socket.
        if n < space {
            break;
        }
    }
    while c.wpos < c.wbuf.len() {
        match c.stream.write(&c.wbuf[c.wpos..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => c.wpos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    c.wbuf.clear();
    c.wpos = 0;
    Ok(())
}
