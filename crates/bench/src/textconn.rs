//! A blocking, pipelining text-protocol connection for the measurements that replay
//! requests and read `stats` (`storage`, `trace`): requests are queued in `out` and
//! go in one write; replies are read a line at a time from a 1 MiB buffer. What a
//! measurement reads beyond stores and `stats` (hits of a batch of gets) is its own,
//! in an `impl TextConn` block beside it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::bail;

pub struct TextConn {
    w: TcpStream,
    /// The reply stream, for values read with `read_exact`.
    pub r: BufReader<TcpStream>,
    /// Requests queued for the next [`TextConn::send`].
    pub out: Vec<u8>,
    /// The last line [`TextConn::read_line`] read, `\r\n` included.
    pub line: Vec<u8>,
    /// Value bytes to store (`v`s), grown to the longest value asked for.
    fill: Vec<u8>,
}

impl TextConn {
    pub fn connect(port: u16) -> anyhow::Result<TextConn> {
        let s = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(TextConn {
            w: s.try_clone()?,
            r: BufReader::with_capacity(1 << 20, s),
            out: Vec::with_capacity(1 << 16),
            line: Vec::new(),
            fill: Vec::new(),
        })
    }

    /// Writes the queued requests.
    pub fn send(&mut self) -> anyhow::Result<()> {
        self.w.write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }

    pub fn read_line(&mut self) -> anyhow::Result<()> {
        self.line.clear();
        if self.r.read_until(b'\n', &mut self.line)? == 0 {
            bail!("server closed the connection");
        }
        Ok(())
    }

    /// Queues `CMD key 0 ttl len noreply` and a value of `len` bytes.
    pub fn store_noreply(&mut self, cmd: &[u8], key: &[u8], ttl_secs: u32, len: usize) {
        self.out.extend_from_slice(cmd);
        self.out.push(b' ');
        self.out.extend_from_slice(key);
        self.out
            .extend_from_slice(format!(" 0 {ttl_secs} {len} noreply\r\n").as_bytes());
        if self.fill.len() < len {
            self.fill.resize(len, b'v');
        }
        self.out.extend_from_slice(&self.fill[..len]);
        self.out.extend_from_slice(b"\r\n");
    }

    /// Sends what is queued and `stats`; returns its fields.
    pub fn stats(&mut self) -> anyhow::Result<HashMap<String, String>> {
        self.out.extend_from_slice(b"stats\r\n");
        self.send()?;
        let mut v = HashMap::new();
        loop {
            self.read_line()?;
            if self.line == b"END\r\n" {
                return Ok(v);
            }
            let text = String::from_utf8_lossy(&self.line).trim_end().to_string();
            let mut it = text.splitn(3, ' ');
            if let (Some("STAT"), Some(n), Some(val)) = (it.next(), it.next(), it.next()) {
                v.insert(n.to_string(), val.to_string());
            }
        }
    }
}

/// A `stats` field as a number (0 if absent).
pub fn stat(s: &HashMap<String, String>, name: &str) -> u64 {
    s.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}
