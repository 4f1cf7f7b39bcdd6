//! The server as a process: pipelining, connection limits, idle timeouts, shutdown
//! (by command and by SIGTERM), the command line, and memory bounds (backpressure on
//! a client that never reads, `-M` out of memory, eviction under `-m`).

mod common;

use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use common::{cat, run_cli, show, store, value, Server};

const TOO_MANY: &[u8] = b"ERROR Too many open connections\r\n";

/// 1000 requests in one write: every reply comes back, in order, byte for byte.
#[test]
fn pipelining_1000_commands_in_one_write() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.call(&store("set", "ctr", 0, 0, b"0"), b"STORED\r\n");
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..200u32 {
        let k = format!("k{i}");
        let v = format!("value-{i}").repeat(1 + i as usize % 7);
        req.extend_from_slice(&store("set", &k, i, 0, v.as_bytes()));
        want.extend_from_slice(b"STORED\r\n");
        req.extend_from_slice(format!("get {k} nope\r\n").as_bytes());
        want.extend_from_slice(&value(&k, i, v.as_bytes()));
        want.extend_from_slice(b"END\r\n");
        req.extend_from_slice(b"incr ctr 1\r\n");
        want.extend_from_slice(format!("{}\r\n", i + 1).as_bytes());
        if i % 2 == 0 {
            req.extend_from_slice(format!("delete {k}\r\n").as_bytes());
            want.extend_from_slice(b"DELETED\r\n");
        } else {
            req.extend_from_slice(format!("append {k} 0 0 1\r\n!\r\n").as_bytes());
            want.extend_from_slice(b"STORED\r\n");
        }
        req.extend_from_slice(format!("touch {k} 0\r\n").as_bytes());
        want.extend_from_slice(if i % 2 == 0 {
            b"NOT_FOUND\r\n"
        } else {
            b"TOUCHED\r\n"
        });
    }
    // One write, from another thread so that neither side can block the other.
    let mut writer = c.stream.try_clone().expect("clone");
    let w = thread::spawn(move || writer.write_all(&req));
    c.expect(&want);
    w.join().expect("writer thread").expect("write");
    c.sync();
}

/// `-c 3`: a fourth connection gets memcached's error line and is closed; the first
/// three keep working, and a slot freed by a close is reused.
#[test]
fn connection_limit() {
    let s = Server::tcp(&["-c", "3"]);
    let mut conns: Vec<_> = (0..3)
        .map(|_| {
            let mut c = s.connect();
            c.sync();
            c
        })
        .collect();
    let mut fourth = s.connect();
    fourth.expect(TOO_MANY);
    fourth.expect_closed();
    for c in &mut conns {
        c.sync();
    }
    assert_eq!(conns[0].stat("rejected_connections"), 1);
    assert_eq!(conns[0].stat("curr_connections"), 3);
    // Close one: a new connection is accepted once the server has seen the close.
    drop(conns.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = s.connect();
        c.send(common::MARKER);
        let line = c.read_line();
        if line == b"END" {
            c.sync();
            break;
        }
        assert_eq!(line, &TOO_MANY[..TOO_MANY.len() - 2], "unexpected reply");
        assert!(Instant::now() < deadline, "closed slot never reused");
        thread::sleep(Duration::from_millis(10));
    }
    for c in &mut conns {
        c.sync();
    }
}

/// `-o idle_timeout=1`: an idle connection is closed within ~3 s (10 s allowed for a
/// loaded machine), not before 1 s; one that keeps sending commands is not.
#[test]
fn idle_timeout() {
    let s = Server::tcp(&["-o", "idle_timeout=1"]);
    let mut idle = s.connect();
    idle.sync();
    let t0 = Instant::now();
    let mut active = s.connect();
    loop {
        active.sync();
        if idle.poll_closed(Duration::from_millis(100)) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "idle connection still open after {:?}",
            t0.elapsed()
        );
    }
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "closed after {took:?}, before the 1 s idle timeout"
    );
    // The active connection has been busy throughout and survives further idle
    // scans: for 1.5 s it sends a command every 100 ms and is never closed between.
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        active.sync();
        assert!(
            !active.poll_closed(Duration::from_millis(100)),
            "an active connection was closed as idle"
        );
    }
    assert!(active.stat("idle_kicks") >= 1);
}

/// `-A`: `shutdown` closes the connection and the process exits with status 0.
#[test]
fn shutdown_command_exits_zero() {
    for cmd in [&b"shutdown\r\n"[..], b"shutdown graceful\r\n"] {
        let mut s = Server::tcp(&["-A"]);
        let mut c = s.connect();
        c.call(
            b"shutdown now\r\n",
            b"CLIENT_ERROR invalid shutdown mode\r\n",
        );
        c.sync();
        c.send(cmd);
        c.expect_closed();
        let status = s.wait_exit(Duration::from_secs(5));
        assert_eq!(status.code(), Some(0), "{} -> {status}", show(cmd));
    }
}

/// `-A`: requests that arrive in the same packet before `shutdown` are answered
/// before the connection closes, as memcached answers them.
#[test]
fn shutdown_command_answers_what_came_before_it() {
    for cmd in [&b"shutdown\r\n"[..], b"shutdown graceful\r\n"] {
        let mut s = Server::tcp(&["-A"]);
        let mut c = s.connect();
        c.send(&cat(&[b"set a 0 0 1\r\nx\r\nget a\r\n", cmd]));
        c.expect(b"STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
        c.expect_closed();
        let status = s.wait_exit(Duration::from_secs(5));
        assert_eq!(status.code(), Some(0), "{} -> {status}", show(cmd));
    }
}

/// SIGTERM: exit status 0 promptly (within a second when idle; 5 s allowed for a
/// loaded machine), and the replies the server had already produced reach the client
/// whole.
#[test]
fn sigterm_exits_zero_and_delivers_replies() {
    let mut s = Server::tcp(&[]);
    let mut c = s.connect();
    let big = vec![b'v'; 100 * 1024];
    c.call(&store("set", "v", 0, 0, &big), b"STORED\r\n");
    let one = cat(&[&value("v", 0, &big), b"END\r\n"]);
    // 200 replies of 100 KiB (20 MB): more than the socket buffers hold (at most
    // 4 MB to send and 6 MB to receive by default), so the server is still sending
    // when the signal arrives.
    let mut busy = s.connect();
    busy.send(&b"get v\r\n".repeat(200));
    let mut idle = s.connect();
    idle.sync();
    // Wait until at least one whole reply is in the kernel: written by the server
    // and not yet read by us (its socket's send queue plus ours to receive).
    let (here, there) = (
        busy.stream.local_tcp_addr().expect("tcp"),
        busy.stream.peer_tcp_addr().expect("tcp"),
    );
    common::wait_until("a whole reply written", Duration::from_secs(10), || {
        let queued = |a, b| common::tcp_queues(a, b).unwrap_or((0, 0));
        queued(there, here).0 + queued(here, there).1 >= one.len() as u64
    });
    let reader = thread::spawn(move || busy.read_to_close(Duration::from_secs(10)));
    s.signal("TERM");
    let status = s.wait_exit(Duration::from_secs(5));
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
    assert!(
        idle.poll_closed(Duration::from_secs(1)),
        "idle connection not closed"
    );
    let (got, closed) = reader.join().expect("reader thread");
    assert!(closed, "connection not closed after exit");
    let whole = got.len() / one.len();
    assert!(whole >= 1, "no reply delivered ({} bytes)", got.len());
    let bad = got.chunks(one.len()).position(|r| r != one.as_slice());
    assert!(
        bad.is_none() && got.len() % one.len() == 0,
        "replies cut short: {} bytes = {whole} whole replies of {} + {} bytes; reply {:?} \
         differs; tail {}",
        got.len(),
        one.len(),
        got.len() % one.len(),
        bad,
        show(&got[got.len().saturating_sub(60)..])
    );
}

/// Bad command-line values: a non-zero exit and one line on stderr naming the flag.
#[test]
fn cli_rejects_bad_values() {
    let rows: &[(&[&str], &str)] = &[
        (&["-p", "x"], "-p"),
        (&["-p", "70000"], "-p"),
        (&["-I", "512"], "-I"),
        (&["-t", "0"], "-t"),
        (&["-o", "bogus"], "-o"),
        (&["-U", "x"], "-U"),
        (&["-m", "lots"], "-m"),
        (&["-c", "x"], "-c"),
    ];
    for (args, flag) in rows {
        // Listen on port 0, so that a value wrongly accepted cannot take 11211.
        let mut full = vec!["-l", "127.0.0.1:0"];
        full.extend_from_slice(args);
        let out = run_cli(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code().is_some_and(|c| c != 0),
            "{args:?}: exit {}, stderr {err:?}",
            out.status
        );
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: stderr {err:?}");
        assert!(
            lines[0].contains(flag),
            "{args:?}: {err:?} does not name {flag}"
        );
    }
}

#[test]
fn cli_help_and_version() {
    let out = run_cli(&["-h"]);
    assert_eq!(out.status.code(), Some(0), "-h: {}", out.status);
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["-p", "-m", "-c", "-t", "-I", "-s", "-o"] {
        assert!(help.contains(flag), "-h output lacks {flag}: {help}");
    }
    let out = run_cli(&["-V"]);
    assert_eq!(out.status.code(), Some(0), "-V: {}", out.status);
    let v = String::from_utf8_lossy(&out.stdout);
    assert_eq!(v.lines().count(), 1, "-V: {v:?}");
    assert!(v.contains("1.6.45"), "-V: {v:?}");
}

/// A client that pipelines 200k gets of a 100 KiB value and never reads must not
/// make the server buffer 20 GB of replies: RSS stays bounded, and another client is
/// served meanwhile.
#[test]
fn backpressure_bounds_memory() {
    const RSS_LIMIT_KIB: u64 = 200 * 1024;
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let big = vec![b'b'; 100 * 1024];
    c.call(&store("set", "k", 0, 0, &big), b"STORED\r\n");
    let want = cat(&[&value("k", 0, &big), b"END\r\n"]);
    let hog = s.raw_connect().expect("connect");
    hog.set_write_timeout(Some(Duration::from_secs(20)))
        .expect("write timeout");
    let mut hog_writer = hog.try_clone().expect("clone");
    let writer = thread::spawn(move || {
        // Blocks once the server stops reading; ends when the server is killed.
        let _ = hog_writer.write_all(&b"get k\r\n".repeat(200_000));
    });
    let mut max_rss = 0;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let rss = s.rss_kib();
        max_rss = max_rss.max(rss);
        assert!(
            rss < RSS_LIMIT_KIB,
            "server RSS {rss} KiB with a client that does not read"
        );
        c.call(b"get k\r\n", &want);
        thread::sleep(Duration::from_millis(50));
    }
    c.sync();
    drop(s);
    drop(hog);
    writer.join().expect("writer thread");
    assert!(max_rss > 0);
}

/// `-M` with a small `-m`: storing more than fits is refused with memcached's error,
/// and nothing is evicted.
#[test]
fn no_evictions_out_of_memory() {
    let s = Server::tcp(&["-m", "2", "-M"]);
    let mut c = s.connect();
    let v = vec![b'm'; 100 * 1024];
    let mut stored = 0;
    let mut oom = false;
    for i in 0..100 {
        c.send(&store("set", &format!("k{i}"), 0, 0, &v));
        let line = c.read_line();
        if line == b"STORED" {
            stored += 1;
            continue;
        }
        assert_eq!(
            line, b"SERVER_ERROR out of memory storing object",
            "set {i}"
        );
        oom = true;
        break;
    }
    assert!(oom, "100 x 100 KiB all stored under -m 2 -M");
    assert!(stored >= 1, "nothing fit in 2 MB");
    c.sync();
    let st = c.stats("");
    assert_eq!(st["evictions"], "0");
    assert!(st["store_no_memory"].parse::<u64>().expect("number") >= 1);
    // What was stored is still there.
    c.call(b"get k0\r\n", &cat(&[&value("k0", 0, &v), b"END\r\n"]));
}

/// `-m 8`: writing 40 MB evicts, and the cache stays within its limit.
#[test]
fn eviction_bounds_items() {
    const LIMIT: u64 = 8 * 1024 * 1024;
    const VALUE_BYTES: usize = 10 * 1024;
    let s = Server::tcp(&["-m", "8"]);
    let mut c = s.connect();
    let v = vec![b'e'; VALUE_BYTES];
    let batch = 100;
    let total = 4000;
    for start in (0..total).step_by(batch) {
        let mut req = Vec::new();
        for i in start..start + batch {
            req.extend_from_slice(&store("set", &format!("k{i}"), 0, 0, &v));
        }
        c.send(&req);
        c.expect(&b"STORED\r\n".repeat(batch));
    }
    let st = c.stats("");
    let num = |n: &str| -> u64 { st[n].parse().expect("number") };
    assert!(num("evictions") > 0, "no evictions after 40 MB into -m 8");
    assert!(
        num("curr_items") <= LIMIT / VALUE_BYTES as u64,
        "curr_items {} cannot fit in 8 MB",
        num("curr_items")
    );
    assert!(num("bytes") <= LIMIT, "bytes {} over -m 8", num("bytes"));
    assert_eq!(num("limit_maxbytes"), LIMIT);
    assert_eq!(num("total_items"), total as u64);
    // The newest item survives; the oldest was evicted.
    let last = format!("k{}", total - 1);
    c.call(
        format!("get {last} k0\r\n").as_bytes(),
        &cat(&[&value(&last, 0, &v), b"END\r\n"]),
    );
}

/// `-o io=`: the transport asked for is the one that serves (an io_uring instance
/// exists only under `uring`, and none under `epoll`, whatever `MEMCRAB_IO` says),
/// and both serve the same bytes.
#[test]
fn io_transport_option() {
    let rings = |pid: u32| -> usize {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("/proc/PID/fd")
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|l| l.to_string_lossy().contains("io_uring"))
            .count()
    };
    for (io, want_ring) in [("epoll", false), ("uring", true)] {
        let s = Server::tcp(&["-t", "2", "-o", &format!("io={io}")]);
        let mut c = s.connect();
        c.call(&store("set", "k", 7, 0, b"v"), b"STORED\r\n");
        c.call(b"get k\r\n", &cat(&[&value("k", 7, b"v"), b"END\r\n"]));
        let n = rings(s.pid());
        assert_eq!(n > 0, want_ring, "-o io={io}: {n} io_uring instances");
    }
}

/// Where the kernel refuses io_uring (here `io_uring_setup` fails with EPERM under
/// a seccomp filter, as in a container whose profile blocks it), `-o io=uring`
/// says so in one line and serves over epoll.
#[cfg(target_arch = "x86_64")]
#[test]
fn io_uring_refused_falls_back_to_epoll() {
    if common::against_memcached() {
        return; // memcrab's own option
    }
    fn deny_io_uring_setup() -> std::io::Result<()> {
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const RET_K: u16 = 0x06;
        const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
        const NR_IO_URING_SETUP: u32 = 425;
        const RET_ALLOW: u32 = 0x7fff_0000;
        const RET_ERRNO: u32 = 0x0005_0000;
        let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        let prog = [
            // seccomp_data: nr at offset 0, arch at 4.
            ins(LD_W_ABS, 0, 0, 4),
            ins(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
            ins(LD_W_ABS, 0, 0, 0),
            ins(JEQ_K, 0, 1, NR_IO_URING_SETUP),
            ins(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
            ins(RET_K, 0, 0, RET_ALLOW),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr().cast_mut(),
        };
        // SAFETY: prctl with these arguments reads only `fprog` and the program it
        // points at, both alive for the call.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &fprog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
    let s = Server::tcp_pre_exec(&["-o", "io=uring"], deny_io_uring_setup);
    let mut c = s.connect();
    c.call(&store("set", "k", 0, 0, b"v"), b"STORED\r\n");
    c.call(b"get k\r\n", &cat(&[&value("k", 0, b"v"), b"END\r\n"]));
    let err = s.stderr();
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("io_uring")).collect();
    assert_eq!(lines.len(), 1, "stderr: {err:?}");
    assert!(
        lines[0].contains("io_uring unavailable") && lines[0].contains("using epoll"),
        "{err:?}"
    );
    let rings = std::fs::read_dir(format!("/proc/{}/fd", s.pid()))
        .expect("/proc/PID/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().contains("io_uring"))
        .count();
    assert_eq!(rings, 0);
}

/// An io_uring worker whose ring fails at run time (forced here with
/// `MEMCRAB_TEST_RING_FAIL_AFTER`: the worker's 41st `io_uring_enter` fails with
/// EIO) closes the connections it served on the ring, says so in one line, and goes
/// on as an epoll worker: it serves new connections, what was stored before, and
/// UDP. (Before, the worker thread ended, and every connection the acceptor gave
/// it afterwards hung.)
#[test]
fn io_uring_failing_at_run_time_falls_back_to_epoll() {
    use std::io::Read;
    if common::against_memcached() {
        return; // memcrab's own transport
    }
    let s = Server::tcp_env(
        &["-t", "1", "-U", "1", "-o", "io=uring"],
        &[("MEMCRAB_TEST_RING_FAIL_AFTER", "40")],
    );
    let mut c = s.connect();
    c.call(&store("set", "k", 3, 0, b"before"), b"STORED\r\n");
    // Every request and reply takes at least one io_uring_enter, so the ring fails
    // within 40 of them; the connection on it is then closed.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", s.port())).expect("connect");
    raw.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut answered = 0;
    let closed = loop {
        assert!(answered < 1000, "the ring never failed");
        if raw.write_all(b"mn\r\n").is_err() {
            break true;
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        while got.len() < 4 {
            match raw.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        if got.is_empty() {
            break true;
        }
        assert_eq!(got, b"MN\r\n", "{}", show(&got));
        answered += 1;
    };
    assert!(closed);
    assert!(answered < 40, "{answered} answers before the failure");
    // The first connection was on the ring too.
    assert!(
        c.poll_closed(Duration::from_secs(10)),
        "the ring's connection stayed open"
    );

    let mut c2 = s.connect();
    c2.call(b"get k\r\n", &cat(&[&value("k", 3, b"before"), b"END\r\n"]));
    c2.call(&store("set", "k2", 0, 0, b"after"), b"STORED\r\n");
    c2.call(
        b"get k2\r\n",
        &cat(&[&value("k2", 0, b"after"), b"END\r\n"]),
    );

    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    udp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let port = s.udp_port.expect("UDP port");
    let mut dgram = vec![0, 7, 0, 0, 0, 1, 0, 0];
    dgram.extend_from_slice(b"get k2\r\n");
    udp.send_to(&dgram, ("127.0.0.1", port)).expect("send");
    let mut buf = [0u8; 2048];
    let n = udp.recv(&mut buf).expect("a UDP reply after the fallback");
    assert_eq!(&buf[..8], &[0, 7, 0, 0, 0, 1, 0, 0]);
    assert_eq!(
        &buf[8..n],
        cat(&[&value("k2", 0, b"after"), b"END\r\n"]).as_slice()
    );

    let err = s.stderr();
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("io_uring")).collect();
    assert_eq!(lines.len(), 1, "stderr: {err:?}");
    assert!(
        lines[0].contains("io_uring failed at run time")
            && lines[0].contains("serving new ones on epoll"),
        "{err:?}"
    );
}

/// A client that pipelines far more than the server buffers, and reads nothing
/// until the server has stopped reading, gets every reply, in order, once it
/// reads: the server stops taking input while its output is over the limit (over
/// io_uring it cancels the connection's multishot receive once a quarter MiB waits
/// unread, and arms it again as the connection drains) and resumes by itself.
#[test]
fn flood_then_read_gets_every_reply() {
    const N: usize = 300_000; // 2.1 MB of requests, 10.5 MB of replies
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    c.call(&store("set", "k", 0, 0, b"0123456789"), b"STORED\r\n");
    let one = cat(&[&value("k", 0, b"0123456789"), b"END\r\n"]);
    let flood = s.raw_connect().expect("connect");
    let (here, there) = (
        flood.local_tcp_addr().expect("tcp"),
        flood.peer_tcp_addr().expect("tcp"),
    );
    let mut w = flood.try_clone().expect("clone");
    let writer = thread::spawn(move || w.write_all(&b"get k\r\n".repeat(N)));
    // Requests wait unread in the server's socket and unsent in ours: the server
    // has stopped reading. (The server's receive buffer may grow to hold every
    // request (tcp_rmem's maximum can be 32 MB), so a finished writer with requests
    // left unread counts too.)
    common::wait_until(
        "the server to stop reading",
        Duration::from_secs(20),
        || {
            let server_unread = common::tcp_queues(there, here).map_or(0, |q| q.1);
            let client_unsent = common::tcp_queues(here, there).map_or(0, |q| q.0);
            server_unread > 0 && (client_unsent >= 64 * 1024 || writer.is_finished())
        },
    );
    let mut reader = common::Client::new(flood);
    for i in 0..N {
        let got = reader.read_exact_bytes(one.len());
        assert!(got == one, "reply {i} of {N}: {}", show(&got));
    }
    writer
        .join()
        .expect("writer")
        .expect("all requests written");
    c.call(b"get k\r\n", &one);
}
