//! Traces: a played history as text that people can read and `replay` can play.
//!
//! ```text
//! # comments (the difference, its replies, how it was found)
//! config 0
//! round
//! order 1234
//! conn 0 text fresh
//! segment
//! req text.cas "cas a 0 0 1 " {cas:3} "\r\nx\r\n" cuts=4,9 split
//! conn 2 binary
//! segment
//! req bin.SET "\x80\x01..." {bincas:0} "..." {rep:1048576:61}
//! ```
//!
//! Strings escape `\\ \" \r \n \t` and other bytes outside printable ASCII as
//! `\xNN`. `{cas:N}` is the N-th distinct CAS unique the server returned (decimal),
//! `{bincas:N}` the same as 8 big-endian bytes, `{rep:N:HH}` N bytes of hex HH. Each
//! connection's segments end with a sentinel the player adds (`version`, or a
//! binary NOOP); `order` seeds how the connections' writes interleave.

use std::fmt::Write;

use anyhow::{bail, Context, Result};

use crate::plan::{ConnRound, Piece, Proto, Request, Round};

/// A history and the configuration it is played with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    pub config: usize,
    pub rounds: Vec<Round>,
}

pub fn quote(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() + 2);
    s.push('"');
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s.push('"');
    s
}

pub fn piece_text(p: &Piece) -> String {
    match p {
        Piece::Lit(b) => quote(b),
        Piece::Rep(n, b) => format!("{{rep:{n}:{b:02x}}}"),
        Piece::Cas(i) => format!("{{cas:{i}}}"),
        Piece::BinCas(i) => format!("{{bincas:{i}}}"),
    }
}

/// One request as a `req` line's payload (kind, pieces, cuts).
pub fn request_text(r: &Request) -> String {
    let mut s = r.kind.clone();
    for p in &r.pieces {
        s.push(' ');
        s.push_str(&piece_text(p));
    }
    if !r.cuts.is_empty() {
        let cuts: Vec<String> = r.cuts.iter().map(|c| c.to_string()).collect();
        let _ = write!(s, " cuts={}", cuts.join(","));
    }
    if r.split_after {
        s.push_str(" split");
    }
    s
}

/// The trace as text, after `comments` (each line gets a `# `).
pub fn write(t: &Trace, comments: &str) -> String {
    let mut s = String::new();
    for l in comments.lines() {
        let _ = writeln!(s, "# {l}");
    }
    let _ = writeln!(s, "config {}", t.config);
    for r in &t.rounds {
        let _ = writeln!(s, "round\norder {}", r.order_seed);
        for c in &r.conns {
            let fresh = if c.fresh { " fresh" } else { "" };
            let _ = writeln!(s, "conn {} {}{fresh}", c.conn, c.proto.name());
            for seg in &c.segments {
                s.push_str("segment\n");
                for req in seg {
                    let _ = writeln!(s, "req {}", request_text(req));
                }
            }
        }
    }
    s
}

/// Parses a trace written by [`write`].
pub fn parse(text: &str) -> Result<Trace> {
    let mut t = Trace {
        config: 0,
        rounds: Vec::new(),
    };
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        parse_line(&mut t, line).with_context(|| format!("trace line {}: {line:.120}", n + 1))?;
    }
    Ok(t)
}

fn parse_line(t: &mut Trace, line: &str) -> Result<()> {
    let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
    match word {
        "config" => t.config = rest.trim().parse()?,
        "round" => t.rounds.push(Round {
            conns: Vec::new(),
            order_seed: 0,
        }),
        "order" => last_round(t)?.order_seed = rest.trim().parse()?,
        "conn" => {
            let mut it = rest.split_whitespace();
            let conn = it.next().context("conn number")?.parse()?;
            let proto = match it.next() {
                Some("text") => Proto::Text,
                Some("binary") => Proto::Binary,
                p => bail!("unknown protocol {p:?}"),
            };
            let fresh = it.next() == Some("fresh");
            last_round(t)?.conns.push(ConnRound {
                conn,
                proto,
                fresh,
                segments: Vec::new(),
            });
        }
        "segment" => last_conn(t)?.segments.push(Vec::new()),
        "req" => {
            let req = parse_request(rest)?;
            last_conn(t)?
                .segments
                .last_mut()
                .context("req before segment")?
                .push(req);
        }
        _ => bail!("unknown line"),
    }
    Ok(())
}

fn last_round(t: &mut Trace) -> Result<&mut Round> {
    t.rounds.last_mut().context("no round yet")
}

fn last_conn(t: &mut Trace) -> Result<&mut ConnRound> {
    last_round(t)?.conns.last_mut().context("no conn yet")
}

fn parse_request(s: &str) -> Result<Request> {
    let (kind, mut rest) = s.split_once(' ').unwrap_or((s, ""));
    let mut r = Request::new(kind, Vec::new());
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        if rest.starts_with('"') {
            let (b, after) = unquote(rest)?;
            r.pieces.push(Piece::Lit(b));
            rest = after;
        } else if let Some(body) = rest.strip_prefix('{') {
            let (inner, after) = body.split_once('}').context("unclosed {")?;
            r.pieces.push(parse_placeholder(inner)?);
            rest = after;
        } else {
            let (tok, after) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(c) = tok.strip_prefix("cuts=") {
                r.cuts = c.split(',').map(|x| x.parse()).collect::<Result<_, _>>()?;
            } else if tok == "split" {
                r.split_after = true;
            } else {
                bail!("unknown token {tok:?}");
            }
            rest = after;
        }
    }
    Ok(r)
}

fn parse_placeholder(inner: &str) -> Result<Piece> {
    let mut it = inner.split(':');
    Ok(match (it.next(), it.next(), it.next()) {
        (Some("cas"), Some(n), None) => Piece::Cas(n.parse()?),
        (Some("bincas"), Some(n), None) => Piece::BinCas(n.parse()?),
        (Some("rep"), Some(n), Some(b)) => Piece::Rep(n.parse()?, u8::from_str_radix(b, 16)?),
        _ => bail!("unknown placeholder {{{inner}}}"),
    })
}

/// Reads a quoted string at the start of `s`; returns its bytes and the rest.
fn unquote(s: &str) -> Result<(Vec<u8>, &str)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok((out, &s[i + 1..])),
            b'\\' => {
                let c = *b.get(i + 1).context("dangling \\")?;
                i += 2;
                match c {
                    b'\\' => out.push(b'\\'),
                    b'"' => out.push(b'"'),
                    b'r' => out.push(b'\r'),
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'x' => {
                        let h = s.get(i..i + 2).context("short \\x")?;
                        out.push(u8::from_str_radix(h, 16)?);
                        i += 2;
                    }
                    _ => bail!("unknown escape \\{}", c as char),
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    bail!("unterminated string")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{three_conns, Gen, View};

    #[test]
    fn generated_histories_survive_a_round_trip() {
        let mut g = Gen::new(5, three_conns());
        let view = View {
            open: vec![None; 3],
            cas_seen: 4,
            cas_keys: Vec::new(),
        };
        let t = Trace {
            config: 1,
            rounds: (0..300).map(|_| g.round(&view)).collect(),
        };
        let text = write(&t, "a comment\nover two lines");
        assert!(text.starts_with("# a comment\n# over two lines\nconfig 1\n"));
        assert_eq!(parse(&text).expect("parses"), t);
    }

    #[test]
    fn every_byte_quotes_and_unquotes() {
        let all: Vec<u8> = (0..=255).collect();
        let q = quote(&all);
        let (b, rest) = unquote(&q).expect("unquotes");
        assert_eq!(b, all);
        assert_eq!(rest, "");
    }
}
