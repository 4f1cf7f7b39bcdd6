//! Just enough HTTP/1.x for a scraper: read one request head (bounded in size and
//! time), answer it, close. No keep-alive, no bodies in, no chunked encoding.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The longest request head accepted; longer is answered 431.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// How long one connection may take, reading and writing together: a scraper that
/// stalls loses its answer, and the listener goes on to the next.
pub const CONN_DEADLINE: Duration = Duration::from_secs(5);

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// `HEAD`: the same headers, no body.
    pub head_only: bool,
    /// The path without its query string.
    pub path: String,
    pub accept: Option<String>,
}

/// Why a request head is refused, with the status to answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// 400: not an HTTP/1.x request line, or not UTF-8.
    Malformed,
    /// 405: a method other than GET or HEAD.
    Method,
    /// 431: the head passed [`MAX_HEAD_BYTES`].
    TooLarge,
    /// 408: [`CONN_DEADLINE`] passed before the head ended.
    Timeout,
    /// The peer closed first: nothing to answer.
    Closed,
}

impl Refused {
    pub fn status(&self) -> &'static str {
        match self {
            Refused::Malformed | Refused::Closed => "400 Bad Request",
            Refused::Method => "405 Method Not Allowed",
            Refused::TooLarge => "431 Request Header Fields Too Large",
            Refused::Timeout => "408 Request Timeout",
        }
    }
}

/// Parses a complete request head (up to and including the blank line).
pub fn parse_head(head: &[u8]) -> Result<Request, Refused> {
    let text = std::str::from_utf8(head).map_err(|_| Refused::Malformed)?;
    let mut lines = text.split("\r\n").flat_map(|l| l.split('\n'));
    let first = lines.next().unwrap_or("");
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refused::Malformed);
    };
    if !version.starts_with("HTTP/1.") || target.is_empty() {
        return Err(Refused::Malformed);
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Err(Refused::Method),
    };
    let path = target.split(['?', '#']).next().unwrap_or("").to_string();
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.trim().to_string());
    Ok(Request {
        head_only,
        path,
        accept,
    })
}

/// The end of the head in `buf` (one past the blank line), if it has arrived.
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Reads one request head from `stream` before `deadline`.
pub fn read_head(stream: &mut TcpStream, deadline: Instant) -> Result<Request, Refused> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&buf) {
            return parse_head(&buf[..end]);
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(Refused::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(Refused::Timeout);
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(Refused::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Refused::Timeout)
            }
            Err(_) => return Err(Refused::Closed),
        }
    }
}

/// Writes a whole response before `deadline`; gives up (the caller closes) when the
/// peer does not read in time.
pub fn respond(
    stream: &mut TcpStream,
    deadline: Instant,
    status: &str,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    let mut parts: [&[u8]; 2] = [head.as_bytes(), if head_only { &[] } else { body }];
    for part in &mut parts {
        while !part.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || stream.set_write_timeout(Some(left)).is_err() {
                return;
            }
            match stream.write(part) {
                Ok(0) => return,
                Ok(n) => *part = &part[n..],
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

/// Bytes of unread request a closing connection discards, at most.
const LINGER_BYTES: usize = 64 * 1024;
/// How long it waits for them, at most.
const LINGER: Duration = Duration::from_secs(1);

/// Closes after a response as a lingering close does: the write side first, then
/// what the client still sends is read and dropped (bounded in bytes and time), so
/// that closing with unread input does not reset the connection and destroy the
/// response before the client has read it (a 431 to a long head, say).
pub fn close(mut stream: TcpStream, deadline: Instant) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let until = deadline.min(Instant::now() + LINGER);
    let mut chunk = [0u8; 4096];
    let mut left = LINGER_BYTES;
    while left > 0 {
        let t = until.saturating_duration_since(Instant::now());
        if t.is_zero() || stream.set_read_timeout(Some(t)).is_err() {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads() {
        let ok = parse_head(
            b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nACCEPT: application/openmetrics-text\r\n\r\n",
        );
        assert_eq!(
            ok,
            Ok(Request {
                head_only: false,
                path: "/metrics".into(),
                accept: Some("application/openmetrics-text".into()),
            })
        );
        assert_eq!(
            parse_head(b"HEAD / HTTP/1.0\n\n").map(|r| (r.head_only, r.path)),
            Ok((true, "/".to_string()))
        );
        for (head, want) in [
            (&b"POST /metrics HTTP/1.1\r\n\r\n"[..], Refused::Method),
            (b"GET /metrics\r\n\r\n", Refused::Malformed),
            (b"GET  /metrics HTTP/1.1\r\n\r\n", Refused::Malformed),
            (b"GET /metrics HTTP/2\r\n\r\n", Refused::Malformed),
            (b"GET /m HTTP/1.1 x\r\n\r\n", Refused::Malformed),
            (b"\xff\xfe HTTP/1.1\r\n\r\n", Refused::Malformed),
            (b"\r\n\r\n", Refused::Malformed),
        ] {
            assert_eq!(parse_head(head), Err(want), "{}", head.escape_ascii());
        }
    }

    #[test]
    fn head_ends() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn no_panic_on_any_short_input() {
        // Every byte string of up to 3 bytes over a small alphabet, and prefixes of
        // a real head.
        let alphabet = b" \r\n:GET/HP1.\xff";
        let mut inputs: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..3 {
            let next: Vec<Vec<u8>> = inputs
                .iter()
                .flat_map(|s| {
                    alphabet.iter().map(move |&c| {
                        let mut t = s.clone();
                        t.push(c);
                        t
                    })
                })
                .collect();
            inputs.extend(next);
        }
        let real = b"GET /metrics HTTP/1.1\r\nAccept: text/plain\r\n\r\n";
        inputs.extend((0..real.len()).map(|i| real[..i].to_vec()));
        for i in inputs {
            let _ = parse_head(&i);
            let _ = head_end(&i);
        }
        // And 20,000 random heads of up to 300 bytes, biased towards the bytes the
        // parser looks for.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let special = b" \r\n:?#GETHAD/1.";
        for _ in 0..20_000 {
            let len = (next() % 300) as usize;
            let head: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => (next() & 0xff) as u8,
                    _ => special[(next() % special.len() as u64) as usize],
                })
                .collect();
            if let Ok(r) = parse_head(&head) {
                assert!(!r.path.contains(['?', '#']));
            }
            let _ = head_end(&head);
        }
    }
}
