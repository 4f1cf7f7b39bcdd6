//! The soak cases' shared parts: the probe client whose p99 every case asserts, the
//! RSS sampler, raw connections that misbehave on purpose, and the bounds.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::common::{self, cat, store, value, wait_until, Server};

/// How long one request may take before it counts as a hang.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The probe's pause between requests.
pub const PROBE_PACE: Duration = Duration::from_millis(1);

/// The cases share 2 cores: one at a time.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// A case's duration: `MEMCRAB_SOAK_SECS` if set, else `short_secs`.
pub fn duration(short_secs: u64) -> Duration {
    Duration::from_secs(env_u64("MEMCRAB_SOAK_SECS").unwrap_or(short_secs))
}

pub fn p99_bound() -> Duration {
    Duration::from_millis(env_u64("MEMCRAB_SOAK_P99_MS").unwrap_or(200))
}

/// The README's bound on resident memory: `-m` × 1.25 + 16 MB.
pub fn rss_bound_kib(m: u64) -> u64 {
    (m * 5 / 4 + 16) * 1024
}

/// What the README says each connection adds: a 16 KiB read buffer.
pub const CONN_KIB: u64 = 16;
/// And, for one whose replies go unread, at most about 256 KiB of unsent replies.
pub const UNSENT_KIB: u64 = 256;

/// Prints one line of figures and appends it to `MEMCRAB_SOAK_REPORT` if set.
pub fn report(line: &str) {
    eprintln!("soak: {line}");
    if let Some(path) = std::env::var_os("MEMCRAB_SOAK_REPORT") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Value `tag`: `len` bytes that name it, so a value read back for the wrong key or
/// version, or mixed from two, cannot pass for the right one.
pub fn val(tag: &str, len: usize) -> Vec<u8> {
    let tag = format!("<{tag}>");
    tag.bytes().cycle().take(len).collect()
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

// ---------------------------------------------------------------------------------
// A minimal client that returns I/O errors (the kill -9 case expects them) and
// panics on a wrong reply.

pub struct Raw {
    pub s: TcpStream,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> io::Result<Raw> {
        let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(Raw { s })
    }

    pub fn send(&mut self, b: &[u8]) -> io::Result<()> {
        self.s.write_all(b)
    }

    pub fn read_n(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut v = vec![0; n];
        self.s.read_exact(&mut v)?;
        Ok(v)
    }

    #[track_caller]
    pub fn expect(&mut self, want: &[u8]) -> io::Result<()> {
        let got = self.read_n(want.len())?;
        assert!(
            got == want,
            "reply mismatch\n  expected: {}\n  received: {}",
            common::show(want),
            common::show(&got)
        );
        Ok(())
    }

    #[track_caller]
    pub fn set(&mut self, key: &str, data: &[u8]) -> io::Result<()> {
        self.send(&store("set", key, 0, 0, data))?;
        self.expect(b"STORED\r\n")
    }

    /// `get key`: Ok(true) if it returned exactly `want`, Ok(false) on a miss; panics
    /// on anything else (a hit with no acknowledged value, another value, torn bytes).
    #[track_caller]
    pub fn get_is(&mut self, key: &str, want: Option<&[u8]>) -> io::Result<bool> {
        self.send(format!("get {key}\r\n").as_bytes())?;
        let head = self.read_n(5)?;
        if head == b"END\r\n" {
            return Ok(false);
        }
        let Some(want) = want else {
            let more = self.read_n(60).unwrap_or_default();
            panic!(
                "get {key}: a hit where nothing was acknowledged: {}",
                common::show(&cat(&[&head, &more]))
            );
        };
        let full = cat(&[&value(key, 0, want), b"END\r\n"]);
        assert!(
            full.starts_with(&head),
            "get {key}: expected a miss or {}, received {}",
            common::show(&full),
            common::show(&head)
        );
        self.expect(&full[5..])?;
        Ok(true)
    }

    pub fn stat(&mut self, name: &str) -> u64 {
        self.send(b"stats\r\n").expect("send stats");
        let mut text = Vec::new();
        while !text.ends_with(b"END\r\n") {
            let mut buf = [0u8; 4096];
            let n = self.s.read(&mut buf).expect("read stats");
            assert!(n > 0, "connection closed during stats");
            text.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8(text).expect("utf-8 stats");
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no numeric STAT {name}"))
    }
}

pub fn tcp_addr(s: &Server) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], s.port()))
}

// ---------------------------------------------------------------------------------
// The probe and the RSS sampler.

/// What the probe saw.
pub struct ProbeReport {
    /// Latency of each request answered.
    pub lat: Vec<Duration>,
    /// Requests that failed with a reset or close (only the kill -9 case has any).
    pub errors: u64,
    /// Its keys' last acknowledged values, for the final check.
    pub last: Vec<Option<Vec<u8>>>,
}

impl ProbeReport {
    pub fn pct(&self, p: f64) -> Duration {
        let mut v = self.lat.clone();
        v.sort();
        v.get(((v.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or_default()
    }

    pub fn summary(&self) -> String {
        format!(
            "probe {} requests, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.lat.len(),
            self.pct(0.50).as_secs_f64() * 1e3,
            self.pct(0.99).as_secs_f64() * 1e3,
            self.lat
                .iter()
                .max()
                .copied()
                .unwrap_or_default()
                .as_secs_f64()
                * 1e3
        )
    }

    /// (a): answered throughout, p99 within the bound.
    #[track_caller]
    pub fn assert_responsive(&self, case: &str, min_requests: usize) {
        assert!(
            self.lat.len() >= min_requests,
            "{case}: the probe got only {} replies",
            self.lat.len()
        );
        assert!(
            self.pct(0.99) <= p99_bound(),
            "{case}: probe p99 {:?} over {:?} ({})",
            self.pct(0.99),
            p99_bound(),
            self.summary()
        );
    }

    /// (c) for the probe's keys, on a server that evicted nothing.
    pub fn assert_kept(&self, addr: SocketAddr) {
        let mut c = Raw::connect(addr).expect("connect for the final check");
        for (slot, last) in self.last.iter().enumerate() {
            let hit = c
                .get_is(&format!("probe{slot}"), last.as_deref())
                .expect("final get");
            assert_eq!(hit, last.is_some(), "probe{slot} lost");
        }
    }
}

pub const PROBE_KEYS: usize = 64;

/// The last value acknowledged for each of a client's keys (None: none, or unknown).
pub type LastValues = Vec<Option<Vec<u8>>>;

pub struct Probe {
    pub stop: Arc<AtomicBool>,
    pub handle: JoinHandle<ProbeReport>,
}

impl Probe {
    /// A well-behaved client: one connection, `set probe<n>` then `get probe<n>`
    /// (which must return exactly what was just stored), 1 ms apart. With
    /// `reconnect`, a reset or close is counted and the probe connects again (a
    /// timeout still fails the test).
    pub fn start(port: Arc<AtomicU32>, reconnect: bool) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::spawn(move || {
            let mut rep = ProbeReport {
                lat: Vec::new(),
                errors: 0,
                last: vec![None; PROBE_KEYS],
            };
            let addr = || SocketAddr::from(([127, 0, 0, 1], port.load(Ordering::SeqCst) as u16));
            let hard_stop = Instant::now() + Duration::from_secs(3600);
            let mut conn: Option<Raw> = None;
            let mut n: u64 = 0;
            while !flag.load(Ordering::SeqCst) && Instant::now() < hard_stop {
                let c = match conn.as_mut() {
                    Some(c) => c,
                    None => match Raw::connect(addr()) {
                        Ok(c) => conn.insert(c),
                        Err(e) => {
                            assert!(reconnect, "probe connect: {e}");
                            rep.errors += 1;
                            thread::sleep(PROBE_PACE);
                            continue;
                        }
                    },
                };
                let slot = (n % PROBE_KEYS as u64) as usize;
                let key = format!("probe{slot}");
                let data = val(&format!("probe.{n}"), 16 + (n % 300) as usize);
                let t0 = Instant::now();
                let step = c.set(&key, &data).and_then(|()| {
                    let t1 = Instant::now();
                    rep.lat.push(t1 - t0);
                    rep.last[slot] = Some(data.clone());
                    let hit = c.get_is(&key, Some(&data))?;
                    assert!(hit, "probe: {key} missing right after it was stored");
                    rep.lat.push(t1.elapsed());
                    Ok(())
                });
                if let Err(e) = step {
                    assert!(
                        reconnect && !is_timeout(&e),
                        "probe request failed: {e} ({})",
                        rep.summary()
                    );
                    rep.errors += 1;
                    conn = None;
                }
                n += 1;
                thread::sleep(PROBE_PACE);
            }
            rep
        });
        Probe { stop, handle }
    }

    pub fn finish(self) -> ProbeReport {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().expect("probe thread")
    }
}

/// Samples a process's VmRSS every 10 ms; `finish` returns the peak in KiB.
pub struct RssSampler {
    pub stop: Arc<AtomicBool>,
    pub handle: JoinHandle<u64>,
}

pub fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

impl RssSampler {
    pub fn start(pid: Arc<AtomicU32>) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::spawn(move || {
            let mut peak = 0;
            let hard_stop = Instant::now() + Duration::from_secs(3600);
            while !flag.load(Ordering::SeqCst) && Instant::now() < hard_stop {
                if let Some(r) = rss_of(pid.load(Ordering::SeqCst)) {
                    peak = peak.max(r);
                }
                thread::sleep(Duration::from_millis(10));
            }
            peak
        });
        RssSampler { stop, handle }
    }

    pub fn finish(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().expect("rss thread")
    }
}

/// A server with its probe and RSS sampler running.
pub struct Watched {
    pub server: Server,
    pub pid: Arc<AtomicU32>,
    pub probe: Probe,
    pub rss: RssSampler,
}

impl Watched {
    pub fn start(args: &[&str], reconnect: bool) -> Watched {
        let server = Server::tcp(args);
        let port = Arc::new(AtomicU32::new(u32::from(server.port())));
        let pid = Arc::new(AtomicU32::new(server.pid()));
        let probe = Probe::start(port, reconnect);
        let rss = RssSampler::start(pid.clone());
        Watched {
            server,
            pid,
            probe,
            rss,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        tcp_addr(&self.server)
    }

    /// Stops the probe and the sampler; checks (a) and (b); returns the probe's
    /// report and the peak RSS in KiB.
    #[track_caller]
    pub fn finish(self, case: &str, rss_bound: u64) -> (Server, ProbeReport, u64) {
        let rep = self.probe.finish();
        let peak = self.rss.finish();
        rep.assert_responsive(case, 20);
        assert!(
            peak <= rss_bound,
            "{case}: peak RSS {} KiB over the bound {} KiB",
            peak,
            rss_bound
        );
        (self.server, rep, peak)
    }
}

/// Waits until the server counts at most `n` connections.
pub fn wait_conns_at_most(addr: SocketAddr, n: u64, within: Duration) {
    let mut c = Raw::connect(addr).expect("connect for stats");
    // `curr_connections` counts this connection and the listener.
    wait_until("connections to close", within, || {
        c.stat("curr_connections") <= n + 2
    });
}

pub fn assert_no_evictions(addr: SocketAddr) {
    let mut c = Raw::connect(addr).expect("connect for stats");
    assert_eq!(c.stat("evictions"), 0, "this case must not evict");
}

/// Raises this process's soft fd limit to its hard limit (the server inherits it)
/// and returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write `lim`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}
