//! The command line parser against memcached's flags and getopt's conventions.

use super::parse::*;
use super::*;

fn run(args: &[&str]) -> Result<Settings, String> {
    match parse(args.iter().map(|s| s.to_string()))? {
        Command::Run { settings, .. } => Ok(*settings),
        other => Err(format!("{other:?}")),
    }
}

#[test]
fn defaults() {
    let s = run(&[]).expect("defaults");
    assert_eq!(
        (s.port, s.threads, s.memory_limit_mb, s.max_connections),
        (11211, 4, 64, 1024)
    );
    assert_eq!(s.listen, vec!["127.0.0.1"]);
    assert_eq!(s.item_size_max, 1 << 20);
}

#[test]
fn repeated_listen_adds_addresses() {
    let s = run(&["-l", "127.0.0.1,::1", "-l", "[::1]:5"]).expect("run");
    assert_eq!(s.listen, vec!["127.0.0.1", "::1", "[::1]:5"]);
}

#[test]
fn getopt_forms() {
    let s = run(&[
        "-p1234",
        "-m",
        "128",
        "--threads=2",
        "--conn-limit",
        "10",
        "-vvv",
        "-MC",
    ])
    .expect("ok");
    assert_eq!(
        (s.port, s.memory_limit_mb, s.threads, s.max_connections),
        (1234, 128, 2, 10)
    );
    assert_eq!(s.verbose, 3);
    assert!(s.no_evict && !s.use_cas);
    let s = run(&["-I", "2m", "-o", "idle_timeout=5,hashpower=20,modern"]).expect("ok");
    assert_eq!(
        (s.item_size_max, s.idle_timeout_secs, s.hash_power),
        (2 << 20, 5, 20)
    );
    assert!(s.dump_enabled && !s.track_sizes);
    let s = run(&["-o", "io=uring"]).expect("ok");
    assert_eq!(s.io, IoKind::Uring);
    let s = run(&["-o", "io=uring,io=epoll"]).expect("ok");
    assert_eq!(s.io, IoKind::Epoll);
    assert!(run(&["-o", "io=kqueue"])
        .err()
        .is_some_and(|e| e.contains("unknown transport")));
    assert_eq!(run(&[]).expect("ok").value_lend_min, VALUE_LEND_MIN);
    let s = run(&["-o", "value_lend_min=0"]).expect("ok");
    assert_eq!(s.value_lend_min, 0);
    let s = run(&["-o", "value_lend_min=2048"]).expect("ok");
    assert_eq!(s.value_lend_min, 2048);
    assert!(run(&["-o", "value_lend_min=x"]).is_err());
    let d = run(&[]).expect("ok");
    assert!(d.latency && d.hotkeys && d.slowlog_us == 0 && d.slowlog_len == 128);
    let s = run(&["-o", "latency=off,hotkeys=off,slowlog_us=500,slowlog_len=4"]).expect("ok");
    assert!(!s.latency && !s.hotkeys && s.slowlog_us == 500 && s.slowlog_len == 4);
    assert!(run(&["-o", "latency=on,hotkeys"]).is_ok_and(|s| s.latency && s.hotkeys));
    assert!(run(&["-o", "latency=no"]).is_err());
    assert!(!d.monotonic_clock);
    assert!(run(&["-o", "latency_clock=monotonic"]).is_ok_and(|s| s.monotonic_clock));
    assert!(run(&["-o", "latency_clock=tsc"]).is_ok_and(|s| !s.monotonic_clock));
    for bad in ["latency_clock", "latency_clock=", "latency_clock=hpet"] {
        let err = run(&["-o", bad]).expect_err(bad);
        assert!(err.contains("neither tsc nor monotonic"), "{bad}: {err}");
    }
    assert!(run(&["-o", "slowlog_len=0"]).is_err());
    assert!(run(&["-o", "slowlog_us"]).is_err());
    let s = run(&["-X", "-o", "track_sizes"]).expect("ok");
    assert!(!s.dump_enabled && s.track_sizes);
    let s = run(&["--disable-dumping"]).expect("ok");
    assert!(!s.dump_enabled);
}

#[test]
fn service_flags() {
    let s = run(&["-u", "memcache", "-r", "-d", "-P", "run/x.pid"]).expect("ok");
    assert_eq!(s.user.as_deref(), Some("memcache"));
    assert!(s.enable_coredumps && s.daemonize);
    // -d changes directory to /, so a relative -P means the starting directory.
    let cwd = std::env::current_dir().expect("cwd");
    assert_eq!(
        s.pid_file,
        Some(cwd.join("run/x.pid").display().to_string())
    );
    let s = run(&["-P", "/run/memcrab.pid"]).expect("ok");
    assert_eq!(s.pid_file.as_deref(), Some("/run/memcrab.pid"));
    assert_eq!((s.user, s.enable_coredumps), (None, false));
}

#[test]
fn udp_port() {
    let s = run(&["-U", "5000"]).expect("ok");
    // memcached: -U without -p serves TCP on the UDP port too.
    assert_eq!((s.udp_port, s.port), (5000, 5000));
    let s = run(&["-U", "5000", "-p", "6000"]).expect("ok");
    assert_eq!((s.udp_port, s.port), (5000, 6000));
    let s = run(&["-p", "6000"]).expect("ok");
    assert_eq!((s.udp_port, s.port), (0, 6000));
    let s = run(&["-U", "0"]).expect("ok");
    assert_eq!((s.udp_port, s.port), (0, 11211));
}

#[test]
fn tls_options() {
    let s = run(&[
        "-Z",
        "-o",
        "ssl_chain_cert=c.pem,ssl_key=k.pem,ssl_verify_mode=2,ssl_ca_cert=ca.pem",
        "-o",
        "ssl_wbuf_size=32,ssl_min_version=3,ssl_session_cache,ssl_ciphers=HIGH",
        "-l",
        "127.0.0.1,notls:127.0.0.1:11212",
    ])
    .expect("ok");
    let t = &s.tls;
    assert!(t.enabled && t.session_cache && !t.kernel_tls);
    assert_eq!(
        (
            t.chain_cert.as_deref(),
            t.key.as_deref(),
            t.ca_cert.as_deref()
        ),
        (Some("c.pem"), Some("k.pem"), Some("ca.pem"))
    );
    assert_eq!((t.verify_mode, t.verify_mode_bits()), (2, 3));
    assert_eq!((t.min_version, t.min_version_name()), (3, "tlsv1.3"));
    assert_eq!(
        (t.wbuf_size, t.ciphers.as_deref()),
        (32 * 1024, Some("HIGH"))
    );
    // Without -Z the options are taken (as memcached), TLS stays off.
    let s = run(&["-o", "ssl_verify_mode=1"]).expect("ok");
    assert!(!s.tls.enabled);
    // memcached's messages, word for word.
    let rows: &[(&[&str], &str)] = &[
        (
            &["-o", "ssl_verify_mode=4"],
            "Invalid ssl_verify_mode. Use help to see valid options.",
        ),
        (
            &["-o", "ssl_verify_mode=x"],
            "could not parse argument to ssl_verify_mode",
        ),
        (
            &["-o", "ssl_min_version=tlsv1.2"],
            "could not parse argument to ssl_min_version",
        ),
        (
            &["-o", "ssl_min_version=4"],
            "Invalid ssl_min_version. Use help to see valid options.",
        ),
        (&["-o", "ssl_chain_cert"], "Missing ssl_chain_cert argument"),
        (
            &["-o", "ssl_keyformat=pem"],
            "could not parse argument to ssl_keyformat",
        ),
        (
            &["-o", "ssl_wbuf_size=-1"],
            "could not parse argument to ssl_wbuf_size",
        ),
    ];
    for (args, want) in rows {
        assert_eq!(run(args).expect_err("must fail"), *want, "{args:?}");
    }
    // A listener prefix without -Z parses; binding refuses it (io/net.rs).
    let s = run(&["-l", "notls:127.0.0.1:1"]).expect("ok");
    assert_eq!(s.listen, ["notls:127.0.0.1:1"]);
}

#[test]
fn listen_prefixes() {
    use super::ListenPrefix::{self, Btls, Mtls, NoTls};
    let rows: &[(&str, Option<ListenPrefix>, &str)] = &[
        ("127.0.0.1:11211", None, "127.0.0.1:11211"),
        ("notls:127.0.0.1:1", Some(NoTls), "127.0.0.1:1"),
        ("btls:127.0.0.1", Some(Btls), "127.0.0.1"),
        ("mtls:[::1]:2", Some(Mtls), "[::1]:2"),
        // As memcached: the prefix and any one character after it go.
        ("mtls", Some(Mtls), ""),
        ("btlsx127.0.0.1", Some(Btls), "127.0.0.1"),
        ("tls:127.0.0.1", None, "tls:127.0.0.1"),
    ];
    for (entry, prefix, rest) in rows {
        assert_eq!(ListenPrefix::split(entry), (*prefix, *rest), "{entry}");
    }
    assert_eq!(
        Mtls.without_tls_message(),
        "'otls' option is valid only when SSL is enabled"
    );
}

#[test]
fn errors_name_the_flag() {
    let rows: &[(&[&str], &str)] = &[
        (&["-p", "x"], "-p"),
        (&["-t", "0"], "-t"),
        (&["-I", "512"], "-I"),
        (&["-I", "40m"], "-I"),
        (&["-m", "1024", "-I", "2000m"], "-I"),
        // A limit whose bytes overflow a u64 (it used to wrap, under -I's check too).
        (&["-m", "17592186044416"], "-m: size"),
        (&["-m", "18014398509481984g"], "-m: size"),
        (&["-m", "99999999999999"], "-m: size"),
        (&["-U", "x"], "-U"),
        (&["-U", "70000"], "-U"),
        (&["-o", "bogus"], "Illegal suboption"),
        (&["-o", "hashpower=2"], "hashpower"),
        (&["-Q"], "'Q'"),
        (&["--nope"], "--nope"),
        (&["-p"], "'p'"),
    ];
    for (args, want) in rows {
        let err = run(args).expect_err("must fail");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn memory_limit_up_to_what_bytes_hold() {
    // The largest -m whose byte count fits a u64, in each unit.
    let max = u64::MAX >> 20;
    for (arg, want) in [
        ("17592186044415", max),
        ("17592186044415m", max),
        ("17179869183g", 17179869183 * 1024),
        ("2048k", 2),
    ] {
        assert_eq!(run(&["-m", arg]).expect(arg).memory_limit_mb, want, "{arg}");
    }
}

#[test]
fn ports_take_minus_one_for_ephemeral() {
    let s = run(&["-p", "-1", "-U", "-1"]).expect("ok");
    assert_eq!((s.port, s.udp_port), (-1, -1));
    assert_eq!(super::bind_port(s.port), 0);
    assert_eq!(super::bind_port(11211), 11211);
    // `-U <n>` without `-p` serves TCP on the same port, -1 included.
    assert_eq!(run(&["-U", "-1"]).expect("ok").port, -1);
    for bad in ["-2", "65536", "x", ""] {
        assert_eq!(
            run(&["-p", bad]).expect_err("must fail"),
            format!("-p: invalid number \"{bad}\"")
        );
    }
}

#[test]
fn listen_entries_as_server_sockets() {
    let s = run(&[
        "-l",
        "127.0.0.1;proto[binary]:tag[svc]:[::1]:5",
        "-l",
        "::1",
    ])
    .expect("run");
    assert_eq!(
        s.listen,
        vec!["127.0.0.1", "proto[binary]:tag[svc]:[::1]:5"]
    );
    assert_eq!(s.inter, "127.0.0.1;proto[binary]:tag[svc]:[::1]:5");
    let rows: &[(&str, Option<Protocol>, Option<&str>, &str)] = &[
        (
            "proto[ascii]:127.0.0.1:1",
            Some(Protocol::Ascii),
            None,
            "127.0.0.1:1",
        ),
        (
            "proto[b]:tag_ops_:x",
            Some(Protocol::Binary),
            Some("ops"),
            "x",
        ),
        ("proto[]:h", Some(Protocol::Ascii), None, "h"),
        ("proto[negotiating]:h", Some(Protocol::Auto), None, "h"),
        ("proto[zzz]:h", None, None, "h"),
        (
            "mtls:proto[ascii]:tag[t]:h:9",
            Some(Protocol::Ascii),
            Some("t"),
            "h:9",
        ),
    ];
    for &(entry, protocol, tag, addr) in rows {
        let e = ListenEntry::parse(entry, false, None).expect(entry);
        assert_eq!(
            (e.protocol, e.tag, e.addr),
            (protocol, tag, addr),
            "{entry}"
        );
    }
    let errors: &[(&str, bool, &str)] = &[
        (
            "proto[ascii:h",
            false,
            "Invalid protocol spec: \"[ascii:h\"",
        ),
        (
            "proto[proxy]:h:1",
            false,
            "Server not built with proxy: \"proto[proxy\"",
        ),
        (
            "proto[binary]:h",
            true,
            "Cannot use binary protocol when ascii authentication enabled",
        ),
        (
            "tag[abcdefghi]:h",
            false,
            "Listener tags must be between 1 and 8 characters: \"abcdefghi\"",
        ),
        (
            "tag[]:h",
            false,
            "Listener tags must be between 1 and 8 characters: \"\"",
        ),
        ("tag_ab:h", false, "Invalid tag in socket config: \"_ab:h\""),
    ];
    for &(entry, auth, want) in errors {
        assert_eq!(
            ListenEntry::parse(entry, auth, None),
            Err(want.to_string()),
            "{entry}"
        );
    }
    // A later entry's proxy message prints the first entry as memcached's parse
    // left it: cut at its port's colon.
    let first = ListenEntry::parse("127.0.0.1:0", false, None).expect("first");
    assert_eq!(&"127.0.0.1:0"[..first.cut], "127.0.0.1");
}
