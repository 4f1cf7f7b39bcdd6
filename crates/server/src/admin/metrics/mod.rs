//! The metrics listener (`-o metrics_listen=HOST:PORT`): Prometheus scrapes
//! `GET /metrics` here, with no exporter in between.
//!
//! ```text
//!   main ── bind() before the workers start (a bad address stops startup) ──┐
//!   thread "metrics" ◄── spawn() ───────────────────────────────────────────┘
//!     loop: accept ── read_head (≤ 8 KiB, ≤ 5 s) ── GET /metrics?
//!             │ yes: collect() ── encode(text 0.0.4 | OpenMetrics by Accept) ── 200
//!             │ no:  404 / 405 / 400 / 408 / 431
//!             └ close (one request per connection)
//! ```
//!
//! One thread of its own, never a worker's: a scrape reads `stats` through the same
//! code that answers the text command (collect.rs), which takes the locks `stats`
//! takes, and no request waits on it. Connections are served one at a time, each
//! within [`http::CONN_DEADLINE`], so a stalled scraper delays the next by at most
//! that and cannot hold the thread.
//!
//! Files: `mod.rs` (binding, the accept loop), `http.rs` (request heads and
//! responses), `collect.rs` (the `stats` reports as memcached_exporter's series and
//! memcrab's own), `names.rs` (which `stats` field feeds which series: name, type,
//! help), `expo.rs` (the text and OpenMetrics formats). The exposition is
//! written here rather than with a crate: `prometheus-client` writes OpenMetrics
//! only and `prometheus` the text format only, and both are built around metrics
//! registered once, while these series are made fresh from `stats` on each scrape
//! (docs/monitoring.md).

pub mod collect;
pub mod expo;
pub mod http;
pub mod names;

use std::net::{TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::server::Server;

/// The path served.
pub const PATH: &str = "/metrics";

/// Binds `-o metrics_listen`'s address (`host:port`; port 0 picks one) and returns
/// the listener and the address it bound, as `stats settings` shows it.
pub fn bind(addr: &str) -> Result<(TcpListener, String), String> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| format!("-o metrics_listen={addr}: {e}"))?
        .collect();
    let listener =
        TcpListener::bind(&addrs[..]).map_err(|e| format!("-o metrics_listen={addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| addr.to_string());
    Ok((listener, bound))
}

/// Starts the metrics thread. It runs until the process exits (it holds no state
/// a stop must save).
pub fn spawn(
    listener: TcpListener,
    server: Arc<Server>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if server.shutting_down() {
                    return;
                }
                match stream {
                    Ok(s) => serve(s, &server),
                    // A peer that reset before accept, or no descriptor left
                    // (EMFILE): back off a little rather than spin on the error.
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
}

/// Answers one connection.
fn serve(mut stream: std::net::TcpStream, server: &Server) {
    let deadline = Instant::now() + http::CONN_DEADLINE;
    let text = "text/plain; charset=utf-8";
    let req = match http::read_head(&mut stream, deadline) {
        Ok(r) => r,
        Err(http::Refused::Closed) => return,
        Err(e) => {
            // The answer to a request that took the whole deadline gets a second
            // more to be written.
            let write_by = deadline.max(Instant::now() + Duration::from_secs(1));
            let body = format!("{}\n", e.status());
            let (status, body) = (e.status(), body.as_bytes());
            http::respond(&mut stream, write_by, status, text, body, false);
            // Input left unread (a head past the limit) would reset the
            // connection and lose the answer: read it away first.
            if e != http::Refused::Timeout {
                http::close(stream, write_by);
            }
            return;
        }
    };
    if req.path != PATH {
        let body = b"404 Not Found: memcrab serves /metrics\n";
        let status = "404 Not Found";
        http::respond(&mut stream, deadline, status, text, body, req.head_only);
        return;
    }
    let format = expo::Format::negotiate(req.accept.as_deref());
    let body = expo::encode(&collect::collect(server), format);
    let (status, kind) = ("200 OK", format.content_type());
    http::respond(
        &mut stream,
        deadline,
        status,
        kind,
        body.as_bytes(),
        req.head_only,
    );
}
