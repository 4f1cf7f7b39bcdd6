//! A session: memcached and memcrab started fresh with one configuration, each
//! round played to both at once, their replies masked and compared segment by
//! segment.
//!
//! ```text
//!   Session::start ──► memcached + memcrab (servers.rs), a Target each (exec.rs)
//!   Session::step(round) ── thread per server: Target::run_round
//!        └─► per connection, per segment: mask (mask.rs) both ──► compare ──► Difference?
//! ```

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::exec::{ConnReply, End, Target};
use crate::gen::View;
use crate::mask::{mask, Masked, TTL_TOLERANCE};
use crate::plan::{Proto, Request, Round};
use crate::servers::{Config, Release, Server};

/// Where the two servers' binaries are and how long a reply may take.
#[derive(Clone, Debug)]
pub struct Opts {
    pub memcached: PathBuf,
    /// The oracle's release (`memcached -V`).
    pub oracle: Release,
    pub memcrab: PathBuf,
    pub timeout: Duration,
    pub nconns: usize,
}

/// One server's side of a differing segment.
#[derive(Clone, Debug)]
pub struct Side {
    pub end: End,
    pub raw: Vec<u8>,
    pub masked: Masked,
}

/// The first segment whose replies differ.
#[derive(Clone, Debug)]
pub struct Difference {
    /// Index of the round in the played history.
    pub round: usize,
    pub conn: usize,
    pub proto: Proto,
    pub seg: usize,
    pub requests: Vec<Request>,
    pub memcached: Side,
    pub memcrab: Side,
    /// What kind of difference (for shrinking and for telling differences apart).
    pub signature: String,
}

pub struct Session {
    _servers: [Server; 2],
    targets: [Target; 2],
    /// What the generator may know: the servers' common view.
    pub view: View,
    pub bytes_sent: u64,
    /// `me`'s `cls` is compared (see `mask::MASKS`).
    exact_cls: bool,
}

impl Session {
    pub fn start(opts: &Opts, cfg: &Config) -> Result<Session> {
        let mc = Server::start(&opts.memcached, cfg, "memcached")?;
        let mr = Server::start(&opts.memcrab, cfg, "memcrab")?;
        let targets = [
            Target::new(mc.addr, opts.nconns, opts.timeout),
            Target::new(mr.addr, opts.nconns, opts.timeout),
        ];
        Ok(Session {
            _servers: [mc, mr],
            targets,
            view: View {
                open: vec![None; opts.nconns],
                cas_seen: 0,
                cas_keys: Vec::new(),
            },
            bytes_sent: 0,
            exact_cls: !cfg.args.iter().any(|a| a.contains("slab_chunk_max")),
        })
    }

    /// Plays one round to both servers; the first differing segment, if any.
    pub fn step(&mut self, round: &Round, round_no: usize) -> Option<Difference> {
        let [a, b] = &mut self.targets;
        let (ra, rb) = std::thread::scope(|s| {
            let ha = s.spawn(|| a.run_round(round));
            let rb = b.run_round(round);
            (ha.join(), rb)
        });
        let ra = match ra {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        };
        self.bytes_sent += round
            .conns
            .iter()
            .flat_map(|c| c.segments.iter().flatten())
            .map(|r| r.template_len() as u64)
            .sum::<u64>();
        let diff = self.compare(round, round_no, &ra, &rb);
        if diff.is_none() {
            // Every connection round has a segment (gen, shrink): its last sentinel
            // says whether the connection is still open.
            for (cr, rep) in round.conns.iter().zip(&ra) {
                let alive = rep.segs.last().is_some_and(|s| s.end == End::Sentinel);
                self.view.open[cr.conn] = alive.then_some(cr.proto);
            }
        }
        let [a, b] = &mut self.targets;
        let n = a.cas.values().len().min(b.cas.values().len());
        a.cas.truncate(n);
        b.cas.truncate(n);
        self.view.cas_seen = n;
        // While the servers agree, memcached's replies said what memcrab's did.
        self.view.cas_keys = a.cas.keys().to_vec();
        diff
    }

    fn compare(
        &mut self,
        round: &Round,
        round_no: usize,
        ra: &[ConnReply],
        rb: &[ConnReply],
    ) -> Option<Difference> {
        for (ci, cr) in round.conns.iter().enumerate() {
            let (a, b) = (&ra[ci], &rb[ci]);
            for (si, (sa, sb)) in a.segs.iter().zip(&b.segs).enumerate() {
                // Every segment's raw replies, for reading a replayed trace.
                if std::env::var_os("DIFFFUZZ_DEBUG").is_some() {
                    eprintln!(
                        "round {round_no} conn {} seg {si}\n  A {:?}\n  B {:?}",
                        cr.conn,
                        sa.bytes.escape_ascii().to_string(),
                        sb.bytes.escape_ascii().to_string()
                    );
                }
                let ma = mask(
                    &sa.bytes,
                    cr.proto,
                    &mut self.targets[0].cas,
                    self.exact_cls,
                );
                let mb = mask(
                    &sb.bytes,
                    cr.proto,
                    &mut self.targets[1].cas,
                    self.exact_cls,
                );
                let same = match (sa.end, sb.end) {
                    (End::Sentinel, End::Sentinel) | (End::NotRun, End::NotRun) => {
                        same_masked(&ma, &mb)
                    }
                    (End::Closed, End::Closed) => {
                        // Uniques seen only in the longer reply (past the part both
                        // have) are forgotten before anything else is numbered.
                        let n = self.targets[0]
                            .cas
                            .values()
                            .len()
                            .min(self.targets[1].cas.values().len());
                        self.targets[0].cas.truncate(n);
                        self.targets[1].cas.truncate(n);
                        same_prefix(&ma, &mb)
                    }
                    _ => false,
                };
                if same {
                    continue;
                }
                let memcached = Side {
                    end: sa.end,
                    raw: sa.bytes.clone(),
                    masked: ma,
                };
                let memcrab = Side {
                    end: sb.end,
                    raw: sb.bytes.clone(),
                    masked: mb,
                };
                let signature = signature(&memcached, &memcrab);
                return Some(Difference {
                    round: round_no,
                    conn: cr.conn,
                    proto: cr.proto,
                    seg: si,
                    requests: cr.segments[si].clone(),
                    memcached,
                    memcrab,
                    signature,
                });
            }
        }
        None
    }
}

fn same_ttls(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= TTL_TOLERANCE)
}

fn same_masked(a: &Masked, b: &Masked) -> bool {
    a.text == b.text && same_ttls(&a.ttls, &b.ttls)
}

/// Both closed: the replies agree up to the shorter one (see `mask::MASKS`),
/// leaving out a last line or packet that either has only in part (a reset can
/// drop the end of a write).
fn same_prefix(a: &Masked, b: &Masked) -> bool {
    let (ta, tb) = (whole_units(&a.text), whole_units(&b.text));
    let n = ta.len().min(tb.len());
    let ttls = ta[..n].windows(5).filter(|w| w == b"<ttl>").count();
    ta[..n] == tb[..n]
        && same_ttls(
            &a.ttls[..ttls.min(a.ttls.len())],
            &b.ttls[..ttls.min(b.ttls.len())],
        )
}

/// The masked text up to its last newline: a complete line, or (binary) packet.
fn whole_units(t: &[u8]) -> &[u8] {
    let t = match t.iter().rposition(|&c| c == b'\n') {
        Some(i) => &t[..=i],
        None => &[],
    };
    // A binary reply's last line says when its packet was cut short.
    match t[..t.len().saturating_sub(1)]
        .iter()
        .rposition(|&c| c == b'\n')
    {
        Some(i) if t[i + 1..].starts_with(b"partial ") => &t[..=i],
        None if t.starts_with(b"partial ") => &[],
        _ => t,
    }
}

/// The first differing line of the two masked replies (TTLs shown), or `None`
/// when one is a prefix of the other.
pub fn first_differing_line(a: &Masked, b: &Masked) -> (Option<String>, Option<String>) {
    let sa = a.show();
    let sb = b.show();
    let la: Vec<&str> = sa.split_inclusive("\\n").collect();
    let lb: Vec<&str> = sb.split_inclusive("\\n").collect();
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i), lb.get(i));
        if x != y {
            return (x.map(|s| s.to_string()), y.map(|s| s.to_string()));
        }
    }
    (None, None)
}

/// What kind of difference this is: how each side ended and the first differing
/// lines with numbers, opaques and keys blanked (so that it survives shrinking and
/// tells differences apart, not seeds).
fn signature(a: &Side, b: &Side) -> String {
    let (la, lb) = first_differing_line(&a.masked, &b.masked);
    format!(
        "memcached {:?}: {} | memcrab {:?}: {}",
        a.end,
        blank(la),
        b.end,
        blank(lb)
    )
}

/// A line for a signature: each space-separated token holding a digit keeps only
/// what names it (up to an `=`, or a meta flag's letter) and becomes `#`, except a
/// binary packet's opcode and status.
fn blank(line: Option<String>) -> String {
    let s = line.unwrap_or_else(|| "<nothing>".to_string());
    let s: String = s.chars().take(160).collect();
    let toks: Vec<String> = s
        .split(' ')
        .map(|t| {
            if !t.bytes().any(|c| c.is_ascii_digit())
                || t.starts_with("op=")
                || t.starts_with("status=")
            {
                return t.to_string();
            }
            match t.find('=') {
                Some(i) => format!("{}#", &t[..=i]),
                None if t.starts_with(|c: char| c.is_ascii_alphabetic()) && t.len() > 1 => {
                    format!("{}#", &t[..1])
                }
                None => "#".to_string(),
            }
        })
        .collect();
    toks.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str, ttls: &[i64]) -> Masked {
        Masked {
            text: text.as_bytes().to_vec(),
            ttls: ttls.to_vec(),
        }
    }

    #[test]
    fn ttls_compare_within_the_tolerance() {
        assert!(same_masked(
            &m("HD t<ttl>\r\n", &[1000]),
            &m("HD t<ttl>\r\n", &[998])
        ));
        assert!(!same_masked(
            &m("HD t<ttl>\r\n", &[1000]),
            &m("HD t<ttl>\r\n", &[997])
        ));
        assert!(!same_masked(
            &m("HD t<ttl>\r\n", &[1000]),
            &m("HD\r\n", &[])
        ));
    }

    #[test]
    fn closed_segments_compare_up_to_the_shorter_reply() {
        assert!(same_prefix(
            &m("STORED\r\n", &[]),
            &m("STORED\r\nEND\r\n", &[])
        ));
        assert!(same_prefix(&m("", &[]), &m("ERROR\r\n", &[])));
        assert!(!same_prefix(
            &m("STORED\r\n", &[]),
            &m("NOT_STORED\r\n", &[])
        ));
        // A line or packet cut short by a reset is not compared.
        assert!(same_prefix(
            &m("STORED\r\nVALUE a 0 5 <ca", &[]),
            &m("STORED\r\nVALUE a 0 5 <cas#3>\r\n", &[])
        ));
        assert!(same_prefix(
            &m("op=01 status=0000\npartial packet: \"\\x81\"\n", &[]),
            &m("op=01 status=0000\nop=00 status=0001\n", &[])
        ));
    }

    #[test]
    fn signatures_blank_numbers_opaques_and_keys() {
        assert_eq!(
            blank(Some("EX Ohij08a kn42 t<ttl:17>\\r\\n".to_string())),
            "EX O# k# t#"
        );
        assert_eq!(
            blank(Some(
                "op=06 status=0006 dt=00 opaque=fe12c3 cas=0".to_string()
            )),
            "op=06 status=0006 dt=# opaque=# cas=#"
        );
    }

    #[test]
    fn the_first_differing_line_is_found() {
        let (a, b) =
            first_differing_line(&m("END\r\nSTORED\r\n", &[]), &m("END\r\nERROR\r\n", &[]));
        assert_eq!(a.as_deref(), Some("STORED\\r\\n"));
        assert_eq!(b.as_deref(), Some("ERROR\\r\\n"));
    }
}
