//! The threat model's claims (docs/security.md, "Threat model") that no other suite
//! tests, against the real binary. Each test names the attacker and the claim; the
//! claims tested elsewhere are listed in docs/security.md with their tests.
//!
//! - a local user and the unix socket: `-a` sets its mode (default 0700, as
//!   memcached's `settings.access`);
//! - a network client without auth: `-Y` refuses every meta command and a binary
//!   packet before authentication, and stores nothing;
//! - a network client: a get line without a newline is buffered up to 1 MiB, no
//!   more (the other per-connection bounds are in commands.rs and server.rs);
//! - a local user and the memory file: the memory file and its `.meta` are created
//!   mode 0600, owned by the server's user, and refused when someone else could
//!   have written them (mode, owner, a symbolic link in their place).

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::{against_memcached, scratch_dir, server_binary, Client, Server, Stream};
use memcrab_testkit::{Launch, Listen};

/// A unix-socket server with extra `args`; returns it and its socket's mode bits.
fn unix_socket_mode(args: &[&str]) -> (memcrab_testkit::Server, u32) {
    let s = Launch::new(server_binary())
        .args(args)
        .listen(Listen::Unix)
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let path = s.unix.clone().expect("a unix socket");
    let mode = fs::metadata(&path).expect("stat the socket").mode() & 0o777;
    (s, mode)
}

/// Local user, unix socket: `-a` is the socket's mode, 0700 when not given, so
/// that only the server's user can connect unless the operator opens it.
#[test]
fn unix_socket_mode_is_dash_a() {
    for (args, want) in [
        (&[][..], 0o700),
        (&["-a", "600"][..], 0o600),
        (&["-a", "770"][..], 0o770),
        (&["-a", "666"][..], 0o666),
    ] {
        let (mut s, mode) = unix_socket_mode(args);
        assert_eq!(mode, want, "{args:?}: socket mode {mode:o}");
        let path = s.unix.clone().expect("a unix socket");
        let stream = std::os::unix::net::UnixStream::connect(&path).expect("connect");
        let mut c = Client::new(Stream::Unix(stream));
        c.call(b"mn\r\n", b"MN\r\n");
        s.kill();
    }
}

fn ascii_auth_server() -> (Server, String) {
    let dir = scratch_dir("threat-ascii-auth");
    let f = dir.join("authfile");
    fs::write(&f, b"user:pass\n").expect("write the auth file");
    let f = f.to_str().expect("utf-8 path").to_string();
    (Server::tcp(&["-Y", &f]), f)
}

/// Network client without auth, `-Y`: every meta command is refused (the text
/// commands are in auth.rs, `ascii_auth_refuses_until_authenticated`), and none of
/// them, nor a binary SET, stores or deletes anything.
#[test]
fn ascii_auth_refuses_meta_and_binary_before_auth() {
    let (s, _f) = ascii_auth_server();
    let mut admin = s.connect();
    admin.call(b"set any 0 0 9\r\nuser pass\r\n", b"STORED\r\n");
    admin.call(b"set kept 0 0 1\r\nv\r\n", b"STORED\r\n");
    for line in [
        &b"mg kept v\r\n"[..],
        // A first line under 6 bytes closes under -Y (1.6.45's
        // try_read_command_asciiauth; auth.rs checks that): mn long enough to be
        // answered.
        b"mn q O12\r\n",
        b"md kept\r\n",
        b"ma kept\r\n",
        b"me kept\r\n",
        b"ms new 2 T0\r\n",
    ] {
        let mut c = s.connect();
        c.call(line, b"CLIENT_ERROR unauthenticated\r\n");
    }
    // A binary SET of key "bin" whose value ends in a newline: the text reader takes
    // it as one line, answered as any other; never a binary reply (magic 0x81).
    let mut c = s.connect();
    let key = b"bin";
    let value = b"binary value\n";
    let mut pkt = vec![0x80, 0x01, 0, key.len() as u8, 8, 0, 0, 0];
    pkt.extend_from_slice(&((8 + key.len() + value.len()) as u32).to_be_bytes());
    pkt.extend_from_slice(&[0; 12]);
    pkt.extend_from_slice(&[0; 8]);
    pkt.extend_from_slice(key);
    pkt.extend_from_slice(value);
    c.call(&pkt, b"CLIENT_ERROR unauthenticated\r\n");
    admin.call(b"mg kept v\r\n", b"VA 1\r\nv\r\n");
    admin.call(b"mg new v\r\n", b"EN\r\n");
    admin.call(b"mg bin v\r\n", b"EN\r\n");
}

/// Network client: a get line still without a newline is waited for up to 1 MiB
/// (memcached's limit for a multi-get line), then the connection closes: a client
/// cannot make the server buffer an unbounded line.
#[test]
fn a_get_line_without_newline_is_bounded() {
    let s = Server::tcp(&[]);
    let mut c = s.connect();
    let mut line = b"get".to_vec();
    while line.len() <= (1 << 20) + 4096 {
        line.extend_from_slice(b" abcdefghijklmnopqrstuvwxyz");
    }
    c.send(&line);
    c.expect_closed();
    // The server is fine: another client is served.
    let mut d = s.connect();
    d.call(b"mn\r\n", b"MN\r\n");
}

/// Local user, memory file: memcrab creates the memory file and, at a graceful
/// stop, its `.meta` with mode 0600, so only the server's user can read the items
/// or forge them for the next start (what a restart does with files that someone
/// did write is the `restart` fuzz target's; see docs/security.md).
#[test]
fn memory_file_and_metadata_are_private() {
    if against_memcached() {
        return;
    }
    let dir = scratch_dir("threat-memfile");
    let mem = dir.join("mem");
    let mem_s = mem.to_str().expect("utf-8 path").to_string();
    let mut s = Server::tcp(&["-m", "8", "-e", &mem_s]);
    let mut c = s.connect();
    c.call(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    assert_private(&mem);
    s.signal("USR1");
    let st = s.wait_exit(Duration::from_secs(60));
    assert!(st.success(), "SIGUSR1 exit {st}: {}", s.stderr());
    assert_private(&mem);
    let mut meta = mem.as_os_str().to_owned();
    meta.push(".meta");
    assert_private(Path::new(&meta));
}

fn assert_private(p: &Path) {
    let m = fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(
        m.permissions().mode() & 0o777,
        0o600,
        "{} has mode {:o}",
        p.display(),
        m.permissions().mode() & 0o777
    );
}

/// Whether a missing prerequisite (root) fails the test (scripts/test as root sets
/// MEMCRAB_SERVICE_TESTS=require) or skips that part.
fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(
            std::env::var("MEMCRAB_SERVICE_TESTS").map_or(true, |v| v != "require"),
            "MEMCRAB_SERVICE_TESTS=require, but not root for {what}"
        );
        eprintln!("skipped (not root): {what}");
    }
    root
}

/// Local user, memory file: a memory file or `.meta` that someone other than the
/// server's user (or root) could have written is refused, as sshd's StrictModes
/// refuses keys: writable by group or others, a symbolic link planted in its place
/// (the file it points to is left untouched), owned by another user. A `.meta`
/// owned by the `-u` user, which writes it at a graceful stop, is trusted.
#[test]
fn memory_file_someone_else_could_write_is_refused() {
    if against_memcached() {
        return;
    }
    let dir = scratch_dir("threat-strict");
    let mem = dir.join("mem");
    let mem_s = mem.to_str().expect("utf-8 path").to_string();
    let refused = |why: &str| {
        let out = common::run_cli(&["-l", "127.0.0.1:0", "-U", "0", "-m", "8", "-e", &mem_s]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "started on a {why} memory file: {err}"
        );
        assert!(err.contains(why) && err.contains("refusing it"), "{err}");
    };
    fs::write(&mem, b"").expect("create");
    fs::set_permissions(&mem, fs::Permissions::from_mode(0o666)).expect("chmod");
    refused("writable by its group or by others");
    fs::set_permissions(&mem, fs::Permissions::from_mode(0o620)).expect("chmod");
    refused("writable by its group or by others");

    fs::remove_file(&mem).expect("rm");
    let victim = dir.join("victim");
    fs::write(&victim, b"precious").expect("write");
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::symlink(&victim, &mem).expect("symlink");
    refused("symbolic link");
    assert_eq!(fs::read(&victim).expect("read"), b"precious");
    fs::remove_file(&mem).expect("rm");

    if !root_or_skip("files owned by another user") {
        return;
    }
    let nobody = nix::unistd::User::from_name("nobody")
        .ok()
        .flatten()
        .expect("a user nobody");
    let uid = nobody.uid.as_raw();
    let mut meta = mem.as_os_str().to_owned();
    meta.push(".meta");
    let meta = std::path::PathBuf::from(meta);
    let saved = |args: &[&str]| {
        let mut s = Server::tcp(args);
        s.connect().call(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
        s.signal("USR1");
        let st = s.wait_exit(Duration::from_secs(60));
        assert!(st.success(), "SIGUSR1 exit {st}: {}", s.stderr());
        std::os::unix::fs::chown(&meta, Some(uid), None).expect("chown .meta");
    };
    let restart_line = |s: &Server| {
        s.stderr()
            .lines()
            .find(|l| l.starts_with("[restart] ") && !l.starts_with("[restart] saved "))
            .unwrap_or_else(|| panic!("no [restart] line: {}", s.stderr()))
            .to_string()
    };
    let args = ["-m", "8", "-e", mem_s.as_str()];
    // A .meta of another user: a cold start that says why, and the .meta is gone.
    saved(&args);
    let s = Server::tcp(&args);
    let line = restart_line(&s);
    assert!(
        line.contains("empty cache") && line.contains(&format!("owned by uid {uid}")),
        "{line}"
    );
    assert!(!meta.exists(), "an untrusted .meta was left");
    s.connect().call(b"get k\r\n", b"END\r\n");
    drop(s);
    // The same .meta, with that user as -u: warm.
    saved(&args);
    let with_u = ["-m", "8", "-e", mem_s.as_str(), "-u", "nobody"];
    let s = Server::tcp(&with_u);
    assert!(
        restart_line(&s).contains("warm restart from"),
        "{}",
        s.stderr()
    );
    s.connect()
        .call(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
    drop(s);
    // The memory file itself owned by another user: refused.
    std::os::unix::fs::chown(&mem, Some(uid), None).expect("chown");
    refused(&format!("owned by uid {uid}"));
    let _ = fs::remove_dir_all(&dir);
}
