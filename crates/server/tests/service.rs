//! memcrab as a service, as memcached 1.6 runs under Debian's unit: `-u` (root is
//! refused without it; with it, root is left after binding), `-d`, `-P`, the
//! signals (SIGHUP reloads `-Y`, SIGUSR1 stops gracefully, SIGTERM/SIGINT stop),
//! and Debian's systemd-memcached-wrapper fed a /etc/memcached.conf-style file.
//!
//! Most of this needs root (it is what is tested: leaving it). Run as another user,
//! those tests say so and pass, unless `MEMCRAB_SERVICE_TESTS=require` (scripts/test
//! sets it when it runs as root), which makes every missing piece (root, memcached,
//! the wrapper, the `memcache` user) a failure instead.
//!
//! ```text
//!   test ── spawn memcrab -u nobody -P <dir>/pid ... ──► /proc/<pid>/status: Uid, Gid, Groups
//!     │                                                   <dir>/pid, sockets, exit status
//!     └──── kill -HUP / -USR1 / -TERM / -INT ──────────► replies over real sockets
//! ```

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::{scratch_dir, Client, Stream};

const WAIT: Duration = Duration::from_secs(10);
const WRAPPER: &str = "/usr/share/memcached/scripts/systemd-memcached-wrapper";

/// `$MEMCRAB_BIN` (scripts/test: the release build), else the one cargo built for
/// this test.
fn memcrab() -> PathBuf {
    memcrab_testkit::memcrab_bin()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether a missing prerequisite fails the test (scripts/test as root) or skips it.
fn required() -> bool {
    std::env::var("MEMCRAB_SERVICE_TESTS").is_ok_and(|v| v == "require")
}

/// False (after saying why) when `what` is missing and may be; panics when required.
fn have(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(!required(), "MEMCRAB_SERVICE_TESTS=require, but {what}");
        eprintln!("skipped: {what}");
    }
    ok
}

/// A scratch directory anyone may write in (the `-u` user writes the pid file),
/// removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = scratch_dir(tag);
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).expect("chmod scratch dir");
        Dir(d)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn text(&self, name: &str) -> String {
        self.path(name).to_str().expect("utf-8 path").to_string()
    }

    /// Writes `name` whole (a temporary file renamed into place), readable by all.
    fn write(&self, name: &str, data: &[u8]) -> String {
        let tmp = self.path(&format!("{name}.new"));
        fs::write(&tmp, data).expect("write file");
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o644)).expect("chmod");
        fs::rename(&tmp, self.path(name)).expect("rename file");
        self.text(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A port on 127.0.0.1 that nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

/// A free port below 1024, which only root may bind.
fn free_privileged_port() -> u16 {
    (700..1000)
        .find(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port in 700..1000")
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// `/proc/<pid>/status` as name → value.
fn status(pid: u32) -> Option<std::collections::HashMap<String, String>> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect(),
    )
}

/// Whether `pid` runs (a zombie waiting for its parent does not).
fn running(pid: u32) -> bool {
    status(pid).is_some_and(|s| !s["State"].starts_with('Z'))
}

/// `id -u/-g/-G <user>`: uid, gid and the group list initgroups gives.
fn ids(user: &str) -> Option<(String, String, BTreeSet<String>)> {
    let id = |flag: &str| {
        let out = Command::new("id").args([flag, user]).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    Some((
        id("-u")?,
        id("-g")?,
        id("-G")?.split_whitespace().map(str::to_string).collect(),
    ))
}

/// Asserts that every uid and gid of `pid` (real, effective, saved, filesystem)
/// is `user`'s, its supplementary groups are `user`'s own, and it kept no
/// capability.
fn assert_runs_as(pid: u32, user: &str) {
    let (uid, gid, groups) = ids(user).expect("id of the user");
    let st = status(pid).expect("process status");
    let all = |v: &str| v.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(all(&st["Uid"]), vec![uid.clone(); 4], "Uid of {pid}");
    assert_eq!(all(&st["Gid"]), vec![gid.clone(); 4], "Gid of {pid}");
    let got: BTreeSet<String> = all(&st["Groups"]).into_iter().collect();
    assert_eq!(got, groups, "supplementary groups of {pid}");
    if uid != "0" {
        assert_eq!(st["CapEff"], "0000000000000000", "capabilities of {pid}");
        assert_eq!(st["CapPrm"], "0000000000000000", "capabilities of {pid}");
    }
}

fn tcp_client(port: u16) -> Client {
    let s = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).expect("connect");
    Client::new(Stream::Tcp(s))
}

fn assert_serves(c: &mut Client) {
    c.call(b"set svc 0 0 2\r\nok\r\n", b"STORED\r\n");
    c.call(b"get svc\r\n", b"VALUE svc 0 2\r\nok\r\nEND\r\n");
}

/// The arguments `pid` was started with, less the program.
fn argv_of(pid: u32) -> Vec<String> {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .skip(1)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// A memcrab started by a test, SIGKILLed on drop if still running.
struct Proc {
    child: Child,
    stderr: PathBuf,
    exited: Option<ExitStatus>,
}

impl Proc {
    fn start(cwd: &Path, bin: &Path, args: &[&str]) -> Proc {
        let stderr = cwd.join(format!("stderr-{}", args.len()));
        let child = Command::new(bin)
            .args(args)
            .current_dir(cwd)
            .env_remove("MEMCACHED_PORT_FILENAME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(fs::File::create(&stderr).expect("stderr file")))
            .spawn()
            .expect("spawn memcrab");
        Proc {
            child,
            stderr,
            exited: None,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn wait(&mut self) -> ExitStatus {
        let what = format!(
            "pid {} to exit (stderr: {})",
            self.pid(),
            self.stderr.display()
        );
        let mut status = None;
        wait_until(&what, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        self.exited = status;
        status.expect("exited")
    }

    /// Waits for the server to listen on `port` (or to exit, which fails).
    fn wait_listening(&mut self, port: u16) {
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                panic!("exited ({s}) before listening; stderr: {}", self.stderr());
            }
            assert!(Instant::now() < deadline, "not listening on {port}");
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

fn read_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The `-u` for tests that need not run as root: `nobody` (also checking that the
/// pid and -Y files work as that user), ignored when not root.
const AS_NOBODY: [&str; 2] = ["-u", "nobody"];

/// Root without `-u`: memcached refuses (64, EX_USAGE); memcrab warns with
/// memcached's words and runs as root (a deliberate difference, so that the
/// README's `cargo run --release` works for root). `-u` naming no user: both exit
/// 67 (EX_NOUSER) with memcached's words. Checked against memcached when installed.
#[test]
fn root_needs_a_user_to_switch_to() {
    if !have(is_root(), "not running as root") {
        return;
    }
    let memcached = Path::new("/usr/bin/memcached");
    let mut bins = vec![memcrab()];
    if have(memcached.exists(), "memcached is not installed") {
        bins.push(memcached.to_path_buf());
    }
    for bin in &bins {
        let run = |args: &[&str]| {
            let out = Command::new(bin)
                .args(args)
                .stdin(Stdio::null())
                .output()
                .expect("run");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let port = free_port().to_string();
        let base = ["-U", "0", "-l", "127.0.0.1", "-p", port.as_str()];
        if bin.as_path() == memcached {
            assert_eq!(
                run(&base),
                (
                    Some(64),
                    "can't run as root without the -u switch\n".to_string()
                )
            );
        }
        let mut args = base.to_vec();
        args.extend(["-u", "no-such-memcrab-user"]);
        assert_eq!(
            run(&args),
            (
                Some(67),
                "can't find the user no-such-memcrab-user to switch to\n".to_string()
            ),
            "{}",
            bin.display()
        );
    }
    // memcrab as root without -u: the warning, then it serves as root.
    let dir = Dir::new("svc-root");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut p = Proc::start(&dir.0, &memcrab(), &["-U", "0", "-l", &listen]);
    p.wait_listening(port);
    let uid = status(p.pid()).expect("process status")["Uid"].clone();
    assert_eq!(uid.split_whitespace().next(), Some("0"), "Uid: {uid}");
    assert_serves(&mut tcp_client(port));
    assert!(
        p.stderr()
            .contains("can't run as root without the -u switch; running as root"),
        "stderr: {}",
        p.stderr()
    );
}

/// `-u nobody` as root: the listener is bound first (a port below 1024 works),
/// then every id becomes nobody's and no capability is left; the pid file is
/// written as nobody; the server serves.
#[test]
fn leaves_root_after_binding() {
    if !have(is_root(), "not running as root") {
        return;
    }
    let dir = Dir::new("svc-user");
    let port = free_privileged_port();
    let pid_file = dir.text("pid");
    let listen = format!("127.0.0.1:{port}");
    let mut p = Proc::start(
        &dir.0,
        &memcrab(),
        &["-u", "nobody", "-l", &listen, "-P", &pid_file],
    );
    p.wait_listening(port);
    wait_until("the pid file", || read_pid(Path::new(&pid_file)).is_some());
    assert_eq!(read_pid(Path::new(&pid_file)), Some(p.pid()));
    assert_runs_as(p.pid(), "nobody");
    let (uid, _, _) = ids("nobody").expect("id nobody");
    let owner = fs::metadata(&pid_file).expect("pid file").uid();
    assert_eq!(owner.to_string(), uid, "pid file owner");
    assert_serves(&mut tcp_client(port));
    signal(p.pid(), "TERM");
    assert_eq!(p.wait().code(), Some(0), "{}", p.stderr());
    assert!(!Path::new(&pid_file).exists(), "pid file left behind");
}

/// `-s` with `-u`: the unix socket is made after leaving root, as memcached
/// makes it, so the socket file belongs to the user and `-a` applies to it.
#[test]
fn unix_socket_belongs_to_the_user() {
    if !have(is_root(), "not running as root") {
        return;
    }
    let dir = Dir::new("svc-unix");
    let sock = dir.text("sock");
    let mut p = Proc::start(
        &dir.0,
        &memcrab(),
        &["-u", "nobody", "-s", &sock, "-a", "770"],
    );
    wait_until("the unix socket", || UnixStream::connect(&sock).is_ok());
    let meta = fs::metadata(&sock).expect("socket");
    let (uid, gid, _) = ids("nobody").expect("id nobody");
    assert_eq!((meta.uid().to_string(), meta.gid().to_string()), (uid, gid));
    assert_eq!(meta.mode() & 0o777, 0o770);
    assert_runs_as(p.pid(), "nobody");
    let mut c = Client::new(Stream::Unix(UnixStream::connect(&sock).expect("connect")));
    assert_serves(&mut c);
    signal(p.pid(), "TERM");
    assert_eq!(p.wait().code(), Some(0), "{}", p.stderr());
}

/// `-d -P rel.pid`: the command exits 0 at once; the daemon is a new session
/// leader in `/`, has left root, wrote the pid file where `rel.pid` meant when it
/// was started (memcached would write `/rel.pid`), serves, and removes the pid file
/// when SIGTERM stops it.
#[test]
fn daemonizes_with_a_relative_pid_file() {
    if !have(is_root(), "not running as root") {
        return;
    }
    let dir = Dir::new("svc-daemon");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut p = Proc::start(
        &dir.0,
        &memcrab(),
        &["-d", "-u", "nobody", "-l", &listen, "-P", "rel.pid"],
    );
    assert_eq!(p.wait().code(), Some(0), "-d: {}", p.stderr());
    let pid_file = dir.path("rel.pid");
    wait_until("the daemon's pid file", || read_pid(&pid_file).is_some());
    let pid = read_pid(&pid_file).expect("pid");
    // From here on, the daemon is killed if the test fails.
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
    let guard = Kill(pid);
    assert_ne!(pid, p.pid(), "the daemon is the forked child");
    assert!(running(pid), "daemon {pid} not running");
    assert_eq!(
        fs::read_link(format!("/proc/{pid}/cwd")).expect("cwd"),
        PathBuf::from("/")
    );
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_comm = &stat[stat.rfind(')').expect("comm") + 2..];
    let session: u32 = after_comm
        .split(' ')
        .nth(3)
        .expect("sid")
        .parse()
        .expect("sid");
    assert_eq!(session, pid, "the daemon leads its own session (setsid)");
    assert_runs_as(pid, "nobody");
    assert_serves(&mut tcp_client(port));
    signal(pid, "TERM");
    wait_until("the daemon to exit", || !running(pid));
    std::mem::forget(guard);
    assert!(!pid_file.exists(), "pid file left behind");
}

/// Authenticates on a new connection with the ASCII auth protocol.
fn auth(port: u16, user: &str, pass: &str) -> Result<Client, String> {
    let mut c = tcp_client(port);
    let data = format!("{user} {pass}");
    c.send(format!("set auth 0 0 {}\r\n{data}\r\n", data.len()).as_bytes());
    let line = c.read_line();
    match line.as_slice() {
        b"STORED" => Ok(c),
        other => Err(String::from_utf8_lossy(other).into_owned()),
    }
}

/// SIGHUP re-reads the `-Y` file: the new password works and the old one is
/// refused, with no restart; connections authenticated before stay so (auth is per
/// connection, as in memcached); a malformed file keeps the users as they were;
/// and SIGHUP never stops the server.
#[test]
fn sighup_reloads_the_auth_file() {
    let dir = Dir::new("svc-hup");
    let authfile = dir.write("auth", b"alice:old\n");
    let pid_file = dir.text("pid");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = AS_NOBODY.to_vec();
    args.extend(["-l", &listen, "-Y", &authfile, "-P", &pid_file]);
    let mut p = Proc::start(&dir.0, &memcrab(), &args);
    p.wait_listening(port);
    let mut before = auth(port, "alice", "old").expect("old password before SIGHUP");
    assert_serves(&mut before);

    dir.write("auth", b"alice:new\nbob:second\n");
    signal(p.pid(), "HUP");
    wait_until("the new password to work", || {
        auth(port, "alice", "new").is_ok()
    });
    assert_eq!(
        auth(port, "alice", "old").err().as_deref(),
        Some("CLIENT_ERROR authentication failure")
    );
    assert!(auth(port, "bob", "second").is_ok());
    assert_serves(&mut before);

    // A malformed file: the server says so and keeps the users it has.
    dir.write("auth", b"alice:newer\nno colon here\n");
    signal(p.pid(), "HUP");
    wait_until("the reload error", || {
        p.stderr().contains("keeping the users")
    });
    assert!(auth(port, "alice", "new").is_ok());
    assert!(auth(port, "alice", "newer").is_err());

    // Each SIGHUP is answered (here with the same error) and none stops it.
    for n in 2..=4 {
        signal(p.pid(), "HUP");
        wait_until("the reload", || {
            p.stderr().matches("keeping the users").count() == n
        });
    }
    assert!(
        p.child.try_wait().expect("try_wait").is_none(),
        "SIGHUP stopped it"
    );
    assert_serves(&mut auth(port, "alice", "new").expect("still serving"));
    signal(p.pid(), "TERM");
    assert_eq!(p.wait().code(), Some(0), "{}", p.stderr());
}

/// SIGUSR1 (memcached's graceful stop, which says "Gracefully stopping"), SIGTERM
/// and SIGINT (as before): the server stops accepting, closes its connections once
/// their replies are sent, exits 0 and removes its pid file.
#[test]
fn sigusr1_sigterm_sigint_exit_0_and_remove_the_pid_file() {
    for sig in ["USR1", "TERM", "INT"] {
        let dir = Dir::new("svc-stop");
        let pid_file = dir.text("pid");
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut args = AS_NOBODY.to_vec();
        args.extend(["-l", &listen, "-P", &pid_file]);
        let mut p = Proc::start(&dir.0, &memcrab(), &args);
        p.wait_listening(port);
        wait_until("the pid file", || {
            read_pid(Path::new(&pid_file)) == Some(p.pid())
        });
        let mut c = tcp_client(port);
        assert_serves(&mut c);
        signal(p.pid(), sig);
        assert_eq!(p.wait().code(), Some(0), "SIG{sig}: {}", p.stderr());
        assert_eq!(
            p.stderr().contains("Gracefully stopping"),
            sig == "USR1",
            "SIG{sig}: {}",
            p.stderr()
        );
        assert!(
            !Path::new(&pid_file).exists(),
            "SIG{sig}: pid file left behind"
        );
        assert!(
            c.poll_closed(Duration::from_secs(1)),
            "SIG{sig}: connection left open"
        );
        assert!(
            TcpStream::connect(("127.0.0.1", port)).is_err(),
            "SIG{sig}: still accepting"
        );
    }
}

/// A directory like /run/memcached (Debian's tmpfiles.d) or /run/memcrab
/// (packaging/memcrab.tmpfiles): owned by memcache, who writes the pid file there.
fn memcache_run_dir(dir: &Dir) -> PathBuf {
    let run = dir.path("run");
    fs::create_dir(&run).expect("mkdir run");
    let (uid, gid, _) = ids("memcache").expect("id memcache");
    std::os::unix::fs::chown(&run, uid.parse().ok(), gid.parse().ok()).expect("chown run");
    run
}

/// `text` with `from` replaced by `to`, which must occur exactly once.
fn replace_once(text: &str, from: &str, to: &str, what: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{what}: {from:?} once");
    text.replace(from, to)
}

/// The checks shared by the two ways Debian-style services start memcrab: the
/// started process is memcrab itself (each step execs), with `argv`, as memcache,
/// writes its pid file, serves, takes SIGHUP (`systemctl reload`), and stops
/// cleanly on SIGTERM (`systemctl stop`). Returns `stats settings`.
fn check_service(
    p: &mut Proc,
    port: u16,
    pid_file: &Path,
    argv: &str,
) -> std::collections::HashMap<String, String> {
    p.wait_listening(port);
    wait_until("the pid file", || read_pid(pid_file).is_some());
    assert_eq!(read_pid(pid_file), Some(p.pid()), "{}", p.stderr());
    assert_eq!(
        fs::read_link(format!("/proc/{}/exe", p.pid())).expect("exe"),
        memcrab().canonicalize().expect("memcrab path")
    );
    assert_eq!(
        argv_of(p.pid()),
        argv.split_whitespace().collect::<Vec<_>>(),
        "the command line built from the conf"
    );
    assert_runs_as(p.pid(), "memcache");
    let mut c = tcp_client(port);
    assert_serves(&mut c);
    let settings = c.stats("settings");
    signal(p.pid(), "HUP");
    assert_serves(&mut tcp_client(port));
    signal(p.pid(), "TERM");
    assert_eq!(p.wait().code(), Some(0), "{}", p.stderr());
    assert!(!pid_file.exists(), "pid file left behind");
    settings
}

fn have_debian_service_setup(what: &str, path: &Path) -> bool {
    have(is_root(), "not running as root")
        && have(path.exists(), what)
        && have(ids("memcache").is_some(), "there is no memcache user")
}

/// Debian's /usr/share/memcached/scripts/systemd-memcached-wrapper (what Debian's
/// memcached.service runs) fed a /etc/memcached.conf-style file starts memcrab
/// right. The wrapper execs the hard-coded /usr/bin/memcached, so the test runs a
/// copy of it whose only change is that path, pointing at memcrab (asserted below):
/// the real /usr/bin/memcached, which other tests use, is left alone.
#[test]
fn debian_wrapper_starts_memcrab() {
    if !have_debian_service_setup(
        "Debian's memcached package is not installed",
        Path::new(WRAPPER),
    ) {
        return;
    }
    let dir = Dir::new("svc-wrapper");
    let wrapper = replace_once(
        &fs::read_to_string(WRAPPER).expect("read the wrapper"),
        "my $memcached = \"/usr/bin/memcached\";",
        &format!("my $memcached = \"{}\";", memcrab().display()),
        WRAPPER,
    );
    let copy = dir.write("systemd-memcached-wrapper", wrapper.as_bytes());
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).expect("chmod");
    let pid_file = memcache_run_dir(&dir).join("memcached.pid");
    let port = free_port().to_string();
    // Debian's /etc/memcached.conf, shortened: -d and logfile are there (the
    // wrapper drops both), comments too.
    let conf = format!(
        "# memcached default config file\n\
         -d\n\
         logfile /var/log/memcached.log\n\
         # -v\n\
         -m 64\n\
         -p {port}\n\
         -u memcache\n\
         -l 127.0.0.1\n\
         -c 64   # connection limit\n\
         -P {}\n",
        pid_file.display()
    );
    let conf = dir.write("memcached.conf", conf.as_bytes());
    let mut p = Proc::start(&dir.0, Path::new(&copy), &[&conf]);
    let pid_text = pid_file.display().to_string();
    let settings = check_service(
        &mut p,
        port.parse().expect("port"),
        &pid_file,
        &format!("-m 64 -p {port} -u memcache -l 127.0.0.1 -c 64 -P {pid_text}"),
    );
    assert_eq!(settings["maxconns"], "64");
    assert_eq!(settings["tcpport"], port);
    assert_eq!(settings["maxbytes"], (64u64 << 20).to_string());
}

/// packaging/memcrab.service's ExecStart with packaging/memcrab.conf (its port
/// and pid file moved to scratch ones) starts memcrab right: the conf's lines
/// become the command line, less -d and logfile.
#[test]
fn packaged_unit_and_conf_start_memcrab() {
    let packaging = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging");
    if !have_debian_service_setup("/bin/sh is missing", Path::new("/bin/sh")) {
        return;
    }
    let unit = fs::read_to_string(packaging.join("memcrab.service")).expect("read the unit");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart=/bin/sh -c '"))
        .and_then(|l| l.strip_suffix('\''))
        .expect("ExecStart=/bin/sh -c '...'")
        .replace("$$", "$");
    let dir = Dir::new("svc-unit");
    let pid_file = memcache_run_dir(&dir).join("memcrab.pid");
    let pid_text = pid_file.display().to_string();
    let port = free_port().to_string();
    let conf = fs::read_to_string(packaging.join("memcrab.conf")).expect("read the conf");
    let conf = replace_once(
        &conf,
        "\n-p 11211\n",
        &format!("\n-p {port}\n"),
        "memcrab.conf",
    );
    let conf = replace_once(
        &conf,
        "\n-P /run/memcrab/memcrab.pid\n",
        &format!("\n-P {pid_text}\n"),
        "memcrab.conf",
    );
    let conf = dir.write("memcrab.conf", conf.as_bytes());
    let memcrab_path = memcrab().display().to_string();
    let exec = replace_once(&exec, "/usr/bin/memcrab", &memcrab_path, "ExecStart");
    let exec = replace_once(&exec, "/etc/memcrab.conf", &conf, "ExecStart");
    let mut p = Proc::start(&dir.0, Path::new("/bin/sh"), &["-c", &exec]);
    check_service(
        &mut p,
        port.parse().expect("port"),
        &pid_file,
        &format!("-m 64 -p {port} -u memcache -l 127.0.0.1 -P {pid_text}"),
    );
}

/// packaging/docker-entrypoint.sh, as the official memcached image's: options
/// alone run memcrab with them, and memcrab then listens on every interface
/// (memcached's default, memcrab's is 127.0.0.1) unless the command says where.
#[test]
fn docker_entrypoint_runs_memcrab_on_every_interface() {
    let entrypoint =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/docker-entrypoint.sh");
    let bin_dir = memcrab().parent().expect("bin dir").to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = Dir::new("svc-docker");
    // In the image memcrab runs as memcache; here, as root, it needs a -u.
    for (args, listens) in [
        (vec!["-U", "0", "-u", "nobody", "-p"], vec!["-l", "0.0.0.0"]),
        (vec!["memcrab", "-u", "nobody", "-p"], vec!["-l", "0.0.0.0"]),
        (vec!["-l", "127.0.0.1", "-u", "nobody", "-p"], vec![]),
    ] {
        let port = free_port().to_string();
        let mut args = args.clone();
        args.push(&port);
        let mut child = Command::new("sh");
        child
            .arg(&entrypoint)
            .args(&args)
            .env("PATH", &path)
            .stdin(Stdio::null());
        let mut p = Proc {
            child: child.spawn().expect("spawn the entrypoint"),
            stderr: dir.path("unused"),
            exited: None,
        };
        p.wait_listening(port.parse().expect("port"));
        let mut want: Vec<&str> = listens.clone();
        want.extend(args.iter().copied().filter(|&a| a != "memcrab"));
        assert_eq!(argv_of(p.pid()), want, "entrypoint {args:?}");
        assert_serves(&mut tcp_client(port.parse().expect("port")));
        signal(p.pid(), "TERM");
        assert_eq!(p.wait().code(), Some(0));
    }
}
