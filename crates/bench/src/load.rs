//! The load driver: each client thread runs one mio loop over its share of the
//! connections, keeps `pipeline` requests in flight per connection (closed loop) or
//! sends on a schedule (open loop), and records each reply's latency.
//!
//! In open loop a request's latency is measured from when it was *meant* to be sent,
//! so a stalled server shows up as latency instead of silently lowering the offered
//! rate (no coordinated omission).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use memcrab_proto::text::client::{encode, parse_reply, Reply};
use memcrab_proto::text::StoreCmd;
use mio::{Events, Interest, Poll, Token};

use crate::workload::{Gen, Workload};

/// A server to connect to.
#[derive(Clone, Debug)]
pub enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Target {
    /// `host:port`, or a path (anything with a `/`) for a unix socket.
    pub fn parse(s: &str) -> anyhow::Result<Target> {
        use std::net::ToSocketAddrs;
        if s.contains('/') {
            return Ok(Target::Unix(PathBuf::from(s)));
        }
        let addr = s
            .to_socket_addrs()
            .map_err(|e| anyhow::anyhow!("--server {s}: {e}"))?
            .next()
            .ok_or_else(|| anyhow::anyhow!("--server {s}: no address"))?;
        Ok(Target::Tcp(addr))
    }

    fn connect(&self) -> io::Result<Stream> {
        match self {
            Target::Tcp(a) => {
                let s = std::net::TcpStream::connect(a)?;
                s.set_nodelay(true)?;
                s.set_nonblocking(true)?;
                Ok(Stream::Tcp(mio::net::TcpStream::from_std(s)))
            }
            Target::Unix(p) => {
                let s = std::os::unix::net::UnixStream::connect(p)?;
                s.set_nonblocking(true)?;
                Ok(Stream::Unix(mio::net::UnixStream::from_std(s)))
            }
        }
    }

    /// A blocking connection (for the preload).
    fn connect_blocking(&self) -> io::Result<Stream> {
        let s = self.connect()?;
        match &s {
            Stream::Tcp(t) => set_blocking(t)?,
            Stream::Unix(u) => set_blocking(u)?,
        }
        Ok(s)
    }
}

fn set_blocking(fd: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, reading and then setting its flags.
    let rc = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

enum Stream {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
}

impl Stream {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One thread's share of a run.
pub struct Plan {
    pub targets: Vec<Target>,
    pub workload: Workload,
    pub conns: usize,
    pub first_conn: usize,
    /// Requests per second for this thread (open loop), or `None` (closed loop).
    pub rate: Option<f64>,
    pub warmup: Duration,
    pub duration: Duration,
    /// Stop after this many measured requests (closed loop), if set.
    pub requests: Option<u64>,
    /// In `--requests` mode, the index of this thread's first request across all
    /// threads: with sequential keys, each connection walks its own slice of the key
    /// space, so N requests over N keys touch every key exactly once.
    pub first_request: u64,
    /// Measured completions, for the progress line. Each thread adds its own
    /// completions once per read (Relaxed: a display counter).
    pub progress: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub seed: u64,
}

/// What one thread measured in the window.
pub struct Outcome {
    pub requests: u64,
    pub gets: u64,
    pub keys_requested: u64,
    pub hits: u64,
    pub sets: u64,
    pub errors: Errors,
    pub latency_us: Histogram<u64>,
    pub window: Duration,
}

#[derive(Default, Clone, Copy, Debug)]
pub struct Errors {
    pub server_error: u64,
    pub client_error: u64,
    pub error: u64,
    pub unexpected: u64,
    pub disconnects: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.server_error + self.client_error + self.error + self.unexpected + self.disconnects
    }
    pub fn add(&mut self, o: &Errors) {
        self.server_error += o.server_error;
        self.client_error += o.client_error;
        self.error += o.error;
        self.unexpected += o.unexpected;
        self.disconnects += o.disconnects;
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Get { keys: u32 },
    Set,
}

struct Pending {
    at: Instant,
    kind: Kind,
    /// In `--requests` mode: issued inside the window, so it counts when it completes.
    budgeted: bool,
}

struct Conn {
    stream: Stream,
    gen: Gen,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    inflight: VecDeque<Pending>,
    /// Values seen so far for the get at the head of `inflight`.
    values: u32,
    /// Open loop: when the next request is due.
    next_due: Instant,
    /// `--requests` mode: requests this connection may still issue in the window.
    quota: Option<u64>,
    /// Keys of the request being encoded, and their spans.
    scratch: Vec<u8>,
    spans: Vec<(usize, usize)>,
    dead: bool,
}

struct Stats {
    out: Outcome,
    start: Instant,
    end: Instant,
    /// `--requests` mode: requests still to issue inside the window.
    budget: Option<u64>,
    /// `--requests` mode: budgeted requests lost with a dead connection.
    lost: u64,
}

impl Stats {
    /// Whether a reply completing now, to a request with this flag, is measured: in
    /// `--requests` mode exactly the budgeted requests are; otherwise those
    /// completing inside the window.
    fn measured(&self, budgeted: bool, t: Instant) -> bool {
        match self.budget {
            Some(_) => budgeted,
            None => t >= self.start && t < self.end,
        }
    }
}

fn kill(c: &mut Conn, st: &mut Stats) {
    c.dead = true;
    st.out.errors.disconnects += 1;
    st.lost +=
        c.inflight.iter().filter(|p| p.budgeted).count() as u64 + c.quota.take().unwrap_or(0);
    c.inflight.clear();
}

/// Runs one thread's plan to completion.
pub fn run(plan: Plan) -> anyhow::Result<Outcome> {
    let w = &plan.workload;
    let mut poll = Poll::new()?;
    let value = vec![b'v'; w.value_size.max];
    let mut conns = Vec::with_capacity(plan.conns);
    let mut offset = plan.first_request;
    for i in 0..plan.conns {
        let quota = plan
            .requests
            .map(|n| n / plan.conns as u64 + u64::from((i as u64) < n % plan.conns as u64));
        let seq_start = if plan.requests.is_some() {
            offset
        } else {
            ((plan.first_conn + i) as u64).wrapping_mul(7919)
        };
        offset += quota.unwrap_or(0);
        let target = &plan.targets[(plan.first_conn + i) % plan.targets.len()];
        let mut stream = target.connect()?;
        poll.registry().register(
            stream.source(),
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        conns.push(Conn {
            stream,
            gen: Gen::new(
                w,
                plan.seed
                    .wrapping_add((plan.first_conn + i) as u64 * 0x9e37_79b9),
                seq_start,
            ),
            wbuf: Vec::with_capacity(16 * 1024),
            wpos: 0,
            rbuf: vec![0; 64 * 1024],
            rpos: 0,
            rend: 0,
            inflight: VecDeque::new(),
            values: 0,
            next_due: Instant::now(),
            quota,
            scratch: Vec::new(),
            spans: Vec::new(),
            dead: false,
        });
    }
    let interval = plan
        .rate
        .map(|r| Duration::from_secs_f64(plan.conns as f64 / r.max(1e-9)));
    let begin = Instant::now();
    let mut st = Stats {
        out: Outcome {
            requests: 0,
            gets: 0,
            keys_requested: 0,
            hits: 0,
            sets: 0,
            errors: Errors::default(),
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            window: plan.duration,
        },
        start: begin + plan.warmup,
        end: begin + plan.warmup + plan.duration,
        budget: plan.requests,
        lost: 0,
    };
    // Spread open-loop start times over one interval so connections do not fire in step.
    if let Some(iv) = interval {
        for (i, c) in conns.iter_mut().enumerate() {
            c.next_due = begin + iv.mul_f64(i as f64 / plan.conns as f64);
        }
    }
    let mut events = Events::with_capacity(1024);
    let mut published = 0u64;
    loop {
        let now = Instant::now();
        let done = now >= st.end
            || plan
                .requests
                .is_some_and(|n| st.out.requests + st.lost >= n);
        if done {
            if plan.requests.is_some() && now < st.end {
                st.out.window = now.saturating_duration_since(st.start);
            }
            break;
        }
        // Issue what is due.
        for c in conns.iter_mut().filter(|c| !c.dead) {
            issue(c, w, &value, interval, now, &mut st);
            if flush(c).is_err() {
                kill(c, &mut st);
            }
        }
        let timeout = match interval {
            // mio rounds a poll timeout up to whole milliseconds (epoll_wait's unit),
            // so a request due in 30 us would go out up to 1 ms late, and that delay
            // would count as the server's latency (it did: every server's open-loop
            // p50 was about 0.5 ms). Under a millisecond, poll without waiting: the
            // load generator has a core of its own.
            Some(_) => conns
                .iter()
                .filter(|c| !c.dead)
                .map(|c| c.next_due.saturating_duration_since(now))
                .min()
                .map(|d| {
                    if d < Duration::from_millis(1) {
                        Duration::ZERO
                    } else {
                        d.min(Duration::from_millis(10))
                    }
                }),
            None => Some(Duration::from_millis(10)),
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        for ev in events.iter() {
            let Some(c) = conns.get_mut(ev.token().0) else {
                continue;
            };
            if c.dead {
                continue;
            }
            if ev.is_writable() && flush(c).is_err() {
                kill(c, &mut st);
                continue;
            }
            if (ev.is_readable() || ev.is_read_closed()) && receive(c, &mut st).is_err() {
                kill(c, &mut st);
            }
        }
        if conns.iter().all(|c| c.dead) {
            anyhow::bail!("every connection failed");
        }
        if st.out.requests > published {
            plan.progress.fetch_add(
                st.out.requests - published,
                std::sync::atomic::Ordering::Relaxed,
            );
            published = st.out.requests;
        }
    }
    if plan.requests.is_none() {
        st.out.window = st.end - st.start;
    }
    Ok(st.out)
}

fn issue(
    c: &mut Conn,
    w: &Workload,
    value: &[u8],
    interval: Option<Duration>,
    now: Instant,
    st: &mut Stats,
) {
    while c.inflight.len() < w.pipeline {
        let in_window = now >= st.start;
        if in_window && c.quota == Some(0) {
            break;
        }
        let at = match interval {
            None => now,
            Some(iv) => {
                if c.next_due > now {
                    break;
                }
                let due = c.next_due;
                c.next_due += iv;
                due
            }
        };
        if c.gen.is_get() {
            let n = w.multiget.max(1);
            // Keys go through a per-connection scratch buffer: no allocation per request.
            c.scratch.clear();
            c.spans.clear();
            for _ in 0..n {
                let k = c.gen.key_index();
                let start = c.scratch.len();
                c.scratch.extend_from_slice(c.gen.key(k));
                c.spans.push((start, c.scratch.len()));
            }
            let scratch = &c.scratch;
            encode::get(
                &mut c.wbuf,
                c.spans.iter().map(|&(a, b)| &scratch[a..b]),
                false,
            );
            c.inflight.push_back(Pending {
                at,
                kind: Kind::Get { keys: n as u32 },
                budgeted: in_window && st.budget.is_some(),
            });
        } else {
            let k = c.gen.key_index();
            let len = c.gen.value_len();
            let key = c.gen.key(k);
            encode::store(
                &mut c.wbuf,
                StoreCmd::Set,
                key,
                0,
                0,
                &value[..len],
                0,
                false,
            );
            c.inflight.push_back(Pending {
                at,
                kind: Kind::Set,
                budgeted: in_window && st.budget.is_some(),
            });
        }
        if in_window {
            if let Some(q) = c.quota.as_mut() {
                *q -= 1;
            }
        }
    }
}

fn flush(c: &mut Conn) -> io::Result<()> {
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

fn receive(c: &mut Conn, st: &mut Stats) -> io::Result<()> {
    loop {
        if c.rend == c.rbuf.len() {
            if c.rpos > 0 {
                c.rbuf.copy_within(c.rpos..c.rend, 0);
                c.rend -= c.rpos;
                c.rpos = 0;
            } else {
                let n = c.rbuf.len() * 2;
                c.rbuf.resize(n, 0);
            }
        }
        match c.stream.read(&mut c.rbuf[c.rend..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                c.rend += n;
                consume(c, st)?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn consume(c: &mut Conn, st: &mut Stats) -> io::Result<()> {
    loop {
        let parsed = parse_reply(&c.rbuf[c.rpos..c.rend])
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "malformed reply"))?;
        let Some((reply, used)) = parsed else {
            if c.rpos == c.rend {
                c.rpos = 0;
                c.rend = 0;
            }
            return Ok(());
        };
        c.rpos += used;
        let Some(head) = c.inflight.front() else {
            st.out.errors.unexpected += 1;
            continue;
        };
        let (kind, at, budgeted) = (head.kind, head.at, head.budgeted);
        let finished = match (kind, &reply) {
            (Kind::Get { .. }, Reply::Value { .. }) => {
                c.values += 1;
                false
            }
            (_, Reply::ServerError(_)) | (_, Reply::ClientError(_)) | (_, Reply::Error(_)) => true,
            (Kind::Get { .. }, Reply::End) | (Kind::Set, Reply::Stored) => true,
            _ => {
                st.out.errors.unexpected += 1;
                true
            }
        };
        if !finished {
            continue;
        }
        c.inflight.pop_front();
        let now = Instant::now();
        if st.measured(budgeted, now) {
            let o = &mut st.out;
            o.requests += 1;
            match reply {
                Reply::ServerError(_) => o.errors.server_error += 1,
                Reply::ClientError(_) => o.errors.client_error += 1,
                Reply::Error(_) => o.errors.error += 1,
                _ => {}
            }
            match kind {
                Kind::Get { keys } => {
                    o.gets += 1;
                    o.keys_requested += u64::from(keys);
                    o.hits += u64::from(c.values);
                }
                Kind::Set => o.sets += 1,
            }
            let us = now.saturating_duration_since(at).as_micros().max(1) as u64;
            let _ = o.latency_us.record(us.min(60_000_000));
        }
        c.values = 0;
    }
}

/// Stores every key once, pipelined deeply, before a run measures anything.
pub fn preload(
    target: &Target,
    w: &Workload,
    first: u64,
    count: u64,
    seed: u64,
) -> anyhow::Result<()> {
    let mut s = target.connect_blocking()?;
    let mut gen = Gen::new(w, seed, 0);
    let value = vec![b'v'; w.value_size.max];
    let mut out = Vec::with_capacity(1 << 20);
    let (total, batch) = (count, 512u64);
    let mut sent = 0u64;
    let mut rbuf = vec![0u8; 1 << 16];
    let mut pending = Vec::new();
    while sent < total {
        out.clear();
        let n = batch.min(total - sent);
        for i in 0..n {
            let len = gen.value_len();
            let key = gen.key(first + sent + i).to_vec();
            encode::store(&mut out, StoreCmd::Set, &key, 0, 0, &value[..len], 0, false);
        }
        s.write_all(&out)?;
        sent += n;
        // Read the replies to this batch before sending the next (bounded buffers).
        let mut got = 0u64;
        while got < n {
            let r = s.read(&mut rbuf)?;
            if r == 0 {
                anyhow::bail!("preload: server closed the connection");
            }
            pending.extend_from_slice(&rbuf[..r]);
            let mut pos = 0;
            while let Ok(Some((reply, used))) = parse_reply(&pending[pos..]) {
                if reply != Reply::Stored {
                    anyhow::bail!("preload: unexpected reply {reply:?}");
                }
                pos += used;
                got += 1;
            }
            pending.drain(..pos);
        }
    }
    Ok(())
}
