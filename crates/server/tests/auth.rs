//! Authentication over real sockets, exact bytes: SASL PLAIN over the binary
//! protocol (`-S`) and the ASCII auth file (`-Y`), as memcached 1.6.18 answers.
//!
//! Passes against memcached too (`MEMCRAB_TEST_SERVER=/usr/bin/memcached`; the `-S`
//! tests are skipped against a memcached built without SASL). For
//! `-S`, Debian's memcached uses cyrus SASL with its sasldb (it is built without
//! memcached's own `MEMCACHED_SASL_PWDB` support), so against memcached the tests
//! create a sasldb with `saslpasswd2` (package sasl2-bin) and point `SASL_CONF_PATH`
//! at a `memcached.conf` with `mech_list: plain`; memcrab reads the same users from
//! the `user:password` file named by `MEMCACHED_SASL_PWDB`.
//!
//! Deliberate differences, checked per server where they show:
//! - a bad `-S`/`-Y` setup exits 2 with one line naming the flag (memcached: 64 for
//!   flag conflicts, 1 for a malformed auth file);
//! - the version string (only its `1.6.X` form is asserted).

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use common::{against_memcached, run_cli, scratch_dir, Client, Server};
use memcrab_proto::binary::client::{parse_response, raw, request, store_extras};
use memcrab_proto::binary::{op, status};

/// A scratch directory readable by memcached's `nobody`, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = scratch_dir(&format!("auth-{tag}"));
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
        Dir(p)
    }

    fn write(&self, name: &str, data: &[u8]) -> String {
        let f = self.0.join(name);
        fs::write(&f, data).expect("write");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).expect("chmod");
        f.to_str().expect("utf-8").to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Whether the memcached under test was built without SASL (no `--enable-sasl` in
/// its `-h`; it then refuses `-S` at startup): its `-S` tests are skipped, saying
/// so. memcrab always serves `-S`, and Debian's 1.6.18 has SASL.
fn skip_without_sasl() -> bool {
    if !against_memcached() {
        return false;
    }
    let help = run_cli(&["-h"]);
    if String::from_utf8_lossy(&help.stdout).contains("--enable-sasl") {
        return false;
    }
    eprintln!("skipped: this memcached is built without SASL");
    true
}

const USERS: &[(&str, &str)] = &[("user", "pass"), ("bob", "s3cret")];

/// A `-S` server knowing [`USERS`] (see the module docs for memcached's setup).
fn sasl_server(extra: &[&str]) -> (Server, Dir) {
    let dir = Dir::new("sasl");
    let pwdb: String = USERS.iter().map(|(u, p)| format!("{u}:{p}\n")).collect();
    let pwdb = dir.write("pwdb", pwdb.as_bytes());
    let sasldb = dir.0.join("sasldb2");
    let sasldb = sasldb.to_str().expect("utf-8").to_string();
    if against_memcached() {
        for (u, p) in USERS {
            let mut child = Command::new("saslpasswd2")
                .args(["-p", "-c", "-f", &sasldb, "-a", "memcached", u])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .expect("saslpasswd2 (sasl2-bin) is needed against memcached");
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(p.as_bytes())
                .expect("write password");
            assert!(child.wait().expect("wait").success());
        }
        fs::set_permissions(&sasldb, fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    dir.write(
        "memcached.conf",
        format!("mech_list: plain\nsasldb_path: {sasldb}\n").as_bytes(),
    );
    let conf = dir.0.to_str().expect("utf-8").to_string();
    let mut args = vec!["-S"];
    args.extend_from_slice(extra);
    let s = Server::tcp_env(
        &args,
        &[
            ("MEMCACHED_SASL_PWDB", pwdb.as_str()),
            ("SASL_CONF_PATH", conf.as_str()),
        ],
    );
    (s, dir)
}

/// Reads one response: (opcode, status, opaque, cas, extras+key+value).
fn response(c: &mut Client) -> (u8, u16, u32, u64, Vec<u8>) {
    let head = c.read_exact_bytes(24);
    let len = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
    let mut all = head;
    all.extend(c.read_exact_bytes(len));
    let (r, _) = parse_response(&all).expect("response");
    let mut body = r.extras;
    body.extend(r.key);
    body.extend(r.value);
    (r.opcode, r.status, r.opaque, r.cas, body)
}

#[track_caller]
fn expect(c: &mut Client, opcode: u8, st: u16, body: &[u8]) {
    let (o, s, _, _, b) = response(c);
    assert_eq!(
        (o, s, b.as_slice()),
        (opcode, st, body),
        "body {:?}",
        String::from_utf8_lossy(&b)
    );
}

#[track_caller]
fn expect_auth_error(c: &mut Client, opcode: u8) {
    expect(c, opcode, status::AUTH_ERROR, b"Auth failure.");
}

fn plain(authz: &str, user: &str, pass: &str) -> Vec<u8> {
    format!("{authz}\0{user}\0{pass}").into_bytes()
}

fn auth(mech: &[u8], data: &[u8]) -> Vec<u8> {
    request(op::SASL_AUTH, &[], mech, data, 0, 0)
}

fn step(data: &[u8]) -> Vec<u8> {
    request(op::SASL_STEP, &[], b"PLAIN", data, 0, 0)
}

fn noop() -> Vec<u8> {
    request(op::NOOP, &[], &[], &[], 0, 0)
}

/// Authenticates `c` as `user`:`pass` with a one-step PLAIN exchange.
#[track_caller]
fn login(c: &mut Client) {
    c.send(&auth(b"PLAIN", &plain("", "user", "pass")));
    expect(c, op::SASL_AUTH, 0, b"Authenticated");
}

/// Sends a stat request for `group` and returns the bodies (key + value) of the
/// stat packets before the empty terminator.
fn stat_bodies(c: &mut Client, group: &[u8]) -> Vec<Vec<u8>> {
    c.send(&request(op::STAT, &[], group, &[], 0, 0));
    let mut out = Vec::new();
    loop {
        let (_, _, _, _, b) = response(c);
        if b.is_empty() {
            return out;
        }
        out.push(b);
    }
}

/// The stat packets of `group` whose key starts with one of `prefixes`, as
/// key-then-value text, in order.
fn stats_starting(c: &mut Client, group: &[u8], prefixes: &[&str]) -> Vec<String> {
    stat_bodies(c, group)
        .iter()
        .filter(|b| prefixes.iter().any(|p| b.starts_with(p.as_bytes())))
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect()
}

/// The connection is authenticated: a noop succeeds.
#[track_caller]
fn expect_unlocked(c: &mut Client) {
    c.send(&noop());
    expect(c, op::NOOP, 0, b"");
}

/// The connection is not authenticated: a noop is refused, and the server closes.
#[track_caller]
fn expect_locked_out(c: &mut Client) {
    c.send(&noop());
    expect_auth_error(c, op::NOOP);
    c.expect_closed();
}

fn version_ok(c: &mut Client) {
    c.send(&request(op::VERSION, &[], &[], &[], 0, 0));
    let (o, s, _, _, b) = response(c);
    assert_eq!((o, s), (op::VERSION, 0));
    assert!(b.starts_with(b"1.6.") && b.iter().all(|b| b.is_ascii_digit() || *b == b'.'));
}

#[test]
fn sasl_list_mechs_and_version_before_auth() {
    if skip_without_sasl() {
        return;
    }
    let (s, _d) = sasl_server(&[]);
    let mut c = s.connect();
    c.send(&request(op::SASL_LIST_MECHS, &[], &[], &[], 0, 0));
    expect(&mut c, op::SASL_LIST_MECHS, 0, b"PLAIN");
    version_ok(&mut c);
    // Anything else: auth error, then the connection closes.
    c.send(&request(op::GET, &[], b"k", &[], 0, 0));
    expect_auth_error(&mut c, op::GET);
    c.expect_closed();
    let mut c = s.connect();
    expect_locked_out(&mut c);
}

#[test]
fn sasl_plain_success_unlocks_commands() {
    if skip_without_sasl() {
        return;
    }
    let (s, _d) = sasl_server(&[]);
    for (u, p) in USERS {
        let mut c = s.connect();
        c.send(&auth(b"PLAIN", &plain("", u, p)));
        expect(&mut c, op::SASL_AUTH, 0, b"Authenticated");
        c.send(&request(op::SET, &store_extras(1, 0), b"k", b"v", 0, 0));
        expect(&mut c, op::SET, 0, b"");
        c.send(&request(op::GET, &[], b"k", &[], 0, 0));
        expect(&mut c, op::GET, 0, b"\0\0\0\x01v");
    }
    // An authorization id equal to the user is accepted.
    let mut c = s.connect();
    c.send(&auth(b"PLAIN", &plain("user", "user", "pass")));
    expect(&mut c, op::SASL_AUTH, 0, b"Authenticated");
    let mut cmds = None;
    for b in stat_bodies(&mut c, b"") {
        if let Some(v) = b.strip_prefix(b"auth_cmds") {
            cmds = Some(v.to_vec());
        }
    }
    assert_eq!(cmds.as_deref(), Some(&b"3"[..]));
}

#[test]
fn sasl_failures() {
    if skip_without_sasl() {
        return;
    }
    let (s, _d) = sasl_server(&[]);
    // Wrong password, wrong user, foreign authorization id, unknown mechanism,
    // malformed PLAIN message: each an auth error on an open connection.
    let mut c = s.connect();
    for data in [
        plain("", "user", "nope"),
        plain("", "nobody", "pass"),
        plain("bob", "user", "pass"),
        b"userpass".to_vec(),
        plain("", "user", "pas"),
        plain("", "bob", "s3cre"),
    ] {
        c.send(&auth(b"PLAIN", &data));
        expect_auth_error(&mut c, op::SASL_AUTH);
    }
    c.send(&auth(b"CRAM-MD5", &plain("", "user", "pass")));
    expect_auth_error(&mut c, op::SASL_AUTH);
    // A step without a started exchange.
    c.send(&step(&plain("", "user", "pass")));
    expect_auth_error(&mut c, op::SASL_STEP);
    // Still unauthenticated: the next command is refused and closes.
    c.send(&request(op::GET, &[], b"k", &[], 0, 0));
    expect_auth_error(&mut c, op::GET);
    c.expect_closed();

    // A failure, then a success.
    let mut c = s.connect();
    c.send(&auth(b"PLAIN", &plain("", "user", "x")));
    expect_auth_error(&mut c, op::SASL_AUTH);
    login(&mut c);
    expect_unlocked(&mut c);
    // A new failed exchange takes the authentication away again.
    c.send(&auth(b"PLAIN", &plain("", "user", "x")));
    expect_auth_error(&mut c, op::SASL_AUTH);
    expect_locked_out(&mut c);

    let mut t = s.connect();
    login(&mut t);
    let seen = stats_starting(&mut t, b"", &["auth_"]);
    assert_eq!(seen, ["auth_cmds12", "auth_errors10"]);
}

#[test]
fn sasl_auth_then_step() {
    if skip_without_sasl() {
        return;
    }
    let (s, _d) = sasl_server(&[]);
    let mut c = s.connect();
    // PLAIN without an initial response: continue, then the step carries it.
    c.send(&auth(b"PLAIN", b""));
    expect(&mut c, op::SASL_AUTH, status::AUTH_CONTINUE, b"");
    c.send(&step(&plain("", "user", "pass")));
    expect(&mut c, op::SASL_STEP, 0, b"Authenticated");
    expect_unlocked(&mut c);
    // After a completed exchange cyrus SASL refuses every new start or step on the
    // connection, and memcached marks it unauthenticated first.
    c.send(&auth(b"PLAIN", &plain("", "user", "pass")));
    expect_auth_error(&mut c, op::SASL_AUTH);
    expect_locked_out(&mut c);
    let mut c = s.connect();
    login(&mut c);
    c.send(&step(&plain("", "user", "pass")));
    expect_auth_error(&mut c, op::SASL_STEP);
    // A restarted exchange, and a step after a failed start.
    let mut c = s.connect();
    c.send(&auth(b"PLAIN", b""));
    expect(&mut c, op::SASL_AUTH, status::AUTH_CONTINUE, b"");
    login(&mut c);
    let mut c = s.connect();
    c.send(&auth(b"PLAIN", &plain("", "user", "bad")));
    expect_auth_error(&mut c, op::SASL_AUTH);
    c.send(&step(&plain("", "user", "pass")));
    expect_auth_error(&mut c, op::SASL_STEP);
}

#[test]
fn sasl_length_checks() {
    if skip_without_sasl() {
        return;
    }
    let (s, _d) = sasl_server(&[]);
    let mut c = s.connect();
    // A mechanism name over 32 bytes: invalid arguments, the data is swallowed.
    let mut b = auth(&[b'M'; 33], b"data");
    b.extend(request(op::VERSION, &[], &[], &[], 0, 0));
    c.send(&b);
    expect(&mut c, op::SASL_AUTH, status::EINVAL, b"Invalid arguments");
    let (o, st, _, _, v) = response(&mut c);
    assert_eq!((o, st), (op::VERSION, 0));
    assert!(v.starts_with(b"1.6.") && v.iter().all(|b| b.is_ascii_digit() || *b == b'.'));
    // Extras on SASL auth: invalid arguments and close.
    let mut c = s.connect();
    c.send(&request(op::SASL_AUTH, &[0; 4], b"PLAIN", b"x", 0, 0));
    expect(&mut c, op::SASL_AUTH, status::EINVAL, b"Invalid arguments");
    c.expect_closed();
}

#[test]
fn cve_2016_8706_sasl_auth_huge_body() {
    if skip_without_sasl() {
        return;
    }
    let (s, _d) = sasl_server(&[]);
    let mut c = s.connect();
    login(&mut c);
    c.send(&request(
        op::SET,
        &store_extras(0, 0),
        b"keep",
        b"safe",
        0,
        0,
    ));
    expect(&mut c, op::SET, 0, b"");
    // bodylen 0xffffffff with a 5-byte mechanism: over ITEM_SIZE_MAX_UPPER_LIMIT,
    // which 1.6.45's dispatch_bin_command refuses as invalid and closes before
    // anything reads it (1.6.18 refused the allocation, out of memory, and
    // swallowed the rest); the server stays up.
    let mut a = s.connect();
    a.send(&raw(
        op::SASL_AUTH,
        5,
        0,
        u32::MAX,
        0,
        0,
        b"PLAIN\0user\0pass",
    ));
    expect(&mut a, op::SASL_AUTH, status::EINVAL, b"Invalid arguments");
    a.expect_closed();
    // keylen > bodylen: unknown command and close.
    let mut a = s.connect();
    a.send(&raw(op::SASL_AUTH, 0x20, 0, 0x10, 0, 0, &[b'P'; 0x20]));
    expect(
        &mut a,
        op::SASL_AUTH,
        status::UNKNOWN_COMMAND,
        b"Unknown command",
    );
    a.expect_closed();
    c.send(&request(op::GET, &[], b"keep", &[], 0, 0));
    expect(&mut c, op::GET, 0, b"\0\0\0\0safe");
}

#[test]
fn cve_2020_10931_sasl_large_extlen() {
    if skip_without_sasl() {
        return;
    }
    let (s, _d) = sasl_server(&[]);
    let mut c = s.connect();
    c.send(&raw(op::SASL_AUTH, 10, 200, 211, 0, 0, &[0xff; 211]));
    expect(&mut c, op::SASL_AUTH, status::EINVAL, b"Invalid arguments");
    c.expect_closed();
    let mut c = s.connect();
    version_ok(&mut c);
}

#[test]
fn sasl_refuses_text_and_reports_settings() {
    if skip_without_sasl() {
        return;
    }
    let (s, _d) = sasl_server(&[]);
    let mut c = s.connect();
    // -S makes every connection binary: a text line is a bad magic byte.
    c.send(b"get foo\r\nget foo\r\nget foo\r\n");
    c.expect_closed();
    let mut c = s.connect();
    login(&mut c);
    let got = stats_starting(&mut c, b"settings", &["auth_enabled", "binding_protocol"]);
    assert_eq!(
        got,
        [
            "binding_protocolbinary",
            "auth_enabled_saslyes",
            "auth_enabled_asciino"
        ]
    );
}

#[test]
fn sasl_with_ascii_protocol_is_refused() {
    if skip_without_sasl() {
        return;
    }
    let mut args = vec!["-S", "-B", "ascii", "-U", "0", "-p", "0"];
    if against_memcached() {
        args.extend(["-u", "nobody"]);
    }
    let out = run_cli(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("You cannot allow the ASCII protocol while using SASL."),
        "{err}"
    );
    if !against_memcached() {
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

const AUTHFILE: &[u8] = b"user:pass\nbob:sec:ret\n";

fn ascii_auth_server() -> (Server, Dir, String) {
    let dir = Dir::new("ascii");
    let f = dir.write("authfile", AUTHFILE);
    let s = Server::tcp(&["-Y", &f]);
    (s, dir, f)
}

#[test]
fn ascii_auth_refuses_until_authenticated() {
    let (s, _d, f) = ascii_auth_server();
    let mut c = s.connect();
    for line in [
        &b"get foo\r\n"[..],
        b"version\r\n",
        b"set a 0 0\r\n",
        b"set a 0 0 x\r\n",
        b"stats\r\n",
    ] {
        c.call(line, b"CLIENT_ERROR unauthenticated\r\n");
    }
    // memcached 1.6.45 reads the token block's length strictly (1.6.18: strtoul).
    c.call(b"set a 0 0 +5\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    // Only the line's start is checked for `set`.
    let mut c = s.connect();
    c.call(b"setx any 0 0 9\r\nuser pass\r\n", b"STORED\r\n");
    c.call(b"get foo\r\n", b"END\r\n");
    c.call(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    c.call(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
    let st = c.stats("settings");
    assert_eq!(st["auth_enabled_ascii"], f);
    assert_eq!(st["binding_protocol"], "ascii");
    assert_eq!(st["auth_enabled_sasl"], "no");
    // The user is what precedes the first space of the block, the password all
    // that follows it, spaces and colons included (1.6.18 split the block into
    // tokens and ignored the extra ones).
    let mut c = s.connect();
    c.call(b"set  x  1 2  11\r\nbob sec:ret\r\n", b"STORED\r\n");
    let mut c = s.connect();
    c.call(
        b"set x 0 0 14\r\nuser pass more\r\n",
        b"CLIENT_ERROR authentication failure\r\n",
    );
    c.call(
        b"set x 0 0 12\r\n bob sec:ret\r\n",
        b"CLIENT_ERROR authentication failure\r\n",
    );
}

/// memcached 1.6.45's stricter auth line: a line too short to be an auth `set`
/// closes the connection, and a token block over 16 KiB is refused.
#[test]
fn ascii_auth_short_lines_close() {
    let (s, _d, _f) = ascii_auth_server();
    // Under 6 bytes before the newline: an empty line, a short command, or a
    // binary packet (its second byte, 0x0a, ends its first "line"). Fewer than 3
    // bytes in all are waited on.
    let noop = request(op::NOOP, &[], &[], &[], 0, 0);
    for input in [&b"\r\n\r\n"[..], b"stats\n", b"mn\r\n", &noop[..]] {
        let mut c = s.connect();
        c.send(input);
        c.expect_closed();
    }
    // Six bytes is long enough to be answered.
    let mut c = s.connect();
    c.call(b"stats\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.call(
        b"set a 0 0 16385\r\n",
        b"CLIENT_ERROR auth token too long\r\n",
    );
    c.call(
        b"set a 0 0 20\r\nxxxxxxxxxxxxxxxxxxxx\r\n",
        b"CLIENT_ERROR bad authentication token format\r\n",
    );
    // 1.6.45's tokenizer expects the `\r\n` it is not given and drops the last
    // byte of a bare-`\n` line: its length loses a digit.
    c.call(b"set a 0 0 9\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.call(b"set a 0 0 9 \n", b"");
    c.call(b"user pass\r\n", b"STORED\r\n");
}

#[test]
fn ascii_auth_failures() {
    let (s, _d, _f) = ascii_auth_server();
    let mut c = s.connect();
    c.call(
        b"set a 0 0 9\r\nuser nope\r\n",
        b"CLIENT_ERROR authentication failure\r\n",
    );
    c.call(
        b"set a 0 0 4\r\nuser\r\n",
        b"CLIENT_ERROR bad authentication token format\r\n",
    );
    c.call(
        b"set a 0 0 9\r\nuser passXX",
        b"CLIENT_ERROR bad command line termination\r\n",
    );
    c.call(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.call(b"set a 0 0 9\r\nuser pass\r\n", b"STORED\r\n");
    c.call(b"get k\r\n", b"END\r\n");
    let st = c.stats("");
    assert_eq!(
        (st["auth_cmds"].as_str(), st["auth_errors"].as_str()),
        ("2", "1")
    );
    // memcached answers only the last of several auth-mode replies sent in one
    // batch (it reuses one response object until it writes).
    let mut c = s.connect();
    c.call(
        b"set a 0 0 9\r\nuser nope\r\nget foo\r\n",
        b"CLIENT_ERROR unauthenticated\r\n",
    );
    c.call(
        b"get a\r\nset a 0 0 9\r\nuser pass\r\nget a\r\n",
        b"STORED\r\nEND\r\n",
    );
    // No newline within 2048 bytes: closed.
    let mut c = s.connect();
    c.send(&[b'x'; 3000]);
    c.expect_closed();
}

#[test]
fn bad_auth_setups_stop_startup() {
    let dir = Dir::new("bad");
    let malformed = dir.write("bad", b"user:pass\nnocolon\n");
    let blank = dir.write("blank", b"user:pass\n\nbob:x\n");
    let missing = dir.0.join("missing").to_str().expect("utf-8").to_string();
    for f in [&malformed, &blank, &missing] {
        let mut args = vec!["-Y", f.as_str(), "-U", "0", "-p", "0", "-l", "127.0.0.1"];
        if against_memcached() {
            args.extend(["-u", "nobody"]);
        }
        let out = run_cli(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{f}: {err}");
        if against_memcached() {
            assert_eq!(out.status.code(), Some(1), "{err}");
        } else {
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains(f.as_str()), "{err}");
        }
        if f != &missing {
            assert!(
                err.contains("has a malformed entry. Should be 'user:password'"),
                "{err}"
            );
        }
    }
    // -Y with the binary protocol is refused.
    let mut args = vec!["-Y", &malformed, "-B", "binary", "-U", "0", "-p", "0"];
    if against_memcached() {
        args.extend(["-u", "nobody"]);
    }
    let out = run_cli(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "You cannot allow the BINARY protocol while using ascii authentication tokens."
        ),
        "{err}"
    );
    if !against_memcached() {
        // memcrab-only: -S needs its password file.
        let out = run_cli(&["-S"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("MEMCACHED_SASL_PWDB"));
    }
}
