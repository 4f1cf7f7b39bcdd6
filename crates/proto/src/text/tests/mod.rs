//! Unit tests of the text parser: the classic commands here (every proper prefix of
//! a complete input must parse as incomplete), the admin commands in
//! `admin_commands.rs`.

use super::*;

mod admin_commands;

fn cfg() -> Config {
    Config::default()
}

/// Parses `input` completely and checks that every proper prefix is incomplete
/// (or, for errors decided on the line alone, at least never a different request).
fn full(input: &[u8]) -> (Result<Request<'_>, Error>, usize) {
    let c = cfg();
    let got = parse(input, &c).expect("complete");
    for cut in 0..got.1 {
        assert!(
            parse(&input[..cut], &c).is_none(),
            "prefix {cut} of {:?} should be incomplete",
            String::from_utf8_lossy(input)
        );
    }
    got
}

fn keys(r: &Request<'_>) -> Vec<Vec<u8>> {
    match r {
        Request::Get { keys, .. } => keys.clone().map(|k| k.to_vec()).collect(),
        other => panic!("not a get: {other:?}"),
    }
}

/// Input, keys, `gets`?, gat exptime.
type GetCase = (&'static [u8], &'static [&'static [u8]], bool, Option<i32>);

#[test]
fn get_variants() {
    let cases: &[GetCase] = &[
        (b"get a\r\n", &[b"a"], false, None),
        (b"get a b  c\r\n", &[b"a", b"b", b"c"], false, None),
        (b"gets a\n", &[b"a"], true, None),
        (b"gat 10 a b\r\n", &[b"a", b"b"], false, Some(10)),
        (b"gats -1 a\r\n", &[b"a"], true, Some(-1)),
        (b"get   a\tb \r\n", &[b"a\tb"], false, None),
        (b"get a\0b\r\n", &[b"a\0b"], false, None),
    ];
    for (input, want_keys, want_cas, want_touch) in cases {
        let (r, n) = full(input);
        assert_eq!(n, input.len());
        let r = r.expect("ok");
        let got: Vec<Vec<u8>> = keys(&r);
        let want: Vec<Vec<u8>> = want_keys.iter().map(|k| k.to_vec()).collect();
        assert_eq!(got, want, "{:?}", String::from_utf8_lossy(input));
        match r {
            Request::Get { cas, touch, .. } => {
                assert_eq!(cas, *want_cas);
                assert_eq!(touch, *want_touch);
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn get_many_keys_past_token_limit() {
    let mut line = b"get".to_vec();
    for i in 0..100 {
        line.extend_from_slice(format!(" k{i}").as_bytes());
    }
    line.extend_from_slice(b"\r\n");
    let (r, _) = full(&line);
    assert_eq!(keys(&r.expect("ok")).len(), 100);
}

#[test]
fn storage_commands() {
    let (r, n) = full(b"set k 5 10 3\r\nabc\r\n");
    assert_eq!(n, 19);
    assert_eq!(
        r,
        Ok(Request::Store {
            cmd: StoreCmd::Set,
            key: b"k",
            flags: 5,
            exptime: 10,
            data: b"abc",
            cas_unique: 0,
            noreply: false
        })
    );
    let (r, _) = full(b"cas k 0 0 1 99 noreply\r\nx\r\n");
    assert_eq!(
        r,
        Ok(Request::Store {
            cmd: StoreCmd::Cas,
            key: b"k",
            flags: 0,
            exptime: 0,
            data: b"x",
            cas_unique: 99,
            noreply: true
        })
    );
    // Data may contain \r\n; only the declared length counts.
    let (r, n) = full(b"append k 0 0 4\r\n\r\n\r\n\r\nget k\r\n");
    assert_eq!(n, 22);
    assert!(matches!(
        r,
        Ok(Request::Store {
            data: b"\r\n\r\n",
            cmd: StoreCmd::Append,
            ..
        })
    ));
    // A 7th token that is not `noreply` is ignored, as in memcached.
    let (r, _) = full(b"set k 0 0 1 junk\r\nx\r\n");
    assert!(matches!(r, Ok(Request::Store { noreply: false, .. })));
}

#[test]
fn storage_errors() {
    let c = cfg();
    let rows: &[(&[u8], Result<(), Error>, usize)] = &[
        // Refused before the length is known: nothing swallowed, and the error is
        // written even under `noreply`.
        (
            b"set k 0 0\r\n",
            Err(Error::BadFormat { noreply: false }),
            11,
        ),
        (
            b"set k 0 0 -1\r\n",
            Err(Error::BadFormat { noreply: false }),
            14,
        ),
        (
            b"set k 0 0 -1 noreply\r\n",
            Err(Error::BadFormat { noreply: false }),
            22,
        ),
        (
            b"set k 0 0 +1\r\n",
            Err(Error::BadFormat { noreply: false }),
            14,
        ),
        (
            b"set k 0 0 4294967297\r\n",
            Err(Error::BadFormat { noreply: false }),
            22,
        ),
        // Refused once the length is known: the data block is swallowed.
        (
            b"set k x 0 1\r\n",
            Err(Error::BadStoreLine {
                noreply: false,
                swallow: 3,
            }),
            13,
        ),
        (
            b"cas k 0 0 1 x\r\n",
            Err(Error::BadStoreLine {
                noreply: false,
                swallow: 3,
            }),
            15,
        ),
        (
            b"cas k 0 0 1 noreply\r\n",
            Err(Error::BadStoreLine {
                noreply: true,
                swallow: 3,
            }),
            21,
        ),
        (
            b"cas k 0 0 1\r\n",
            Err(Error::BadStoreLine {
                noreply: false,
                swallow: 3,
            }),
            13,
        ),
        (
            b"set k 0 0 1\r\nab\r\n",
            Err(Error::BadDataChunk { noreply: false }),
            16,
        ),
    ];
    for (input, want, n) in rows {
        let (got, used) = parse(input, &c).expect("complete");
        assert_eq!(
            got.map(|_| ()),
            *want,
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert_eq!(used, *n, "{:?}", String::from_utf8_lossy(input));
    }
    let long_key = [b'k'; 251];
    let mut line = b"set ".to_vec();
    line.extend_from_slice(&long_key);
    line.extend_from_slice(b" 0 0 1\r\nx\r\n");
    let (got, used) = parse(&line, &c).expect("complete");
    assert_eq!(
        got,
        Err(Error::BadStoreLine {
            noreply: false,
            swallow: 3
        })
    );
    assert_eq!(
        used,
        line.len() - 3,
        "the data block is left to the swallow"
    );
    // Any number of tokens past the length is accepted (1.6.18: ERROR).
    let (r, _) = full(b"set k 0 0 1 2 3\r\nx\r\n");
    assert!(matches!(r, Ok(Request::Store { noreply: false, .. })));
}

#[test]
fn too_large_is_decided_on_the_line() {
    let c = Config {
        item_size_max: 1024,
        ..cfg()
    };
    let (r, n) = parse(b"set k 0 0 5000\r\n", &c).expect("decided");
    assert_eq!(n, 16);
    assert_eq!(
        r,
        Ok(Request::TooLarge {
            cmd: StoreCmd::Set,
            key: b"k",
            swallow: 5002,
            noreply: false
        })
    );
    // The boundary is memcached's: header 48 + key + 1 + value + 2 + cas 8.
    assert!(item_size_ok(1, 0, 1024 - 60, &c));
    assert!(!item_size_ok(1, 0, 1024 - 59, &c));
    assert!(!item_size_ok(1, 1, 1024 - 60, &c));
}

#[test]
fn other_commands() {
    let rows: &[(&[u8], Result<Request<'static>, Error>)] = &[
        (
            b"delete k\r\n",
            Ok(Request::Delete {
                key: b"k",
                noreply: false,
            }),
        ),
        (
            b"delete k 0\r\n",
            Ok(Request::Delete {
                key: b"k",
                noreply: false,
            }),
        ),
        (
            b"delete k noreply\r\n",
            Ok(Request::Delete {
                key: b"k",
                noreply: true,
            }),
        ),
        (
            b"delete k 0 noreply\r\n",
            Ok(Request::Delete {
                key: b"k",
                noreply: true,
            }),
        ),
        (
            b"delete k 1 x\r\n",
            Ok(Request::Delete {
                key: b"k",
                noreply: false,
            }),
        ),
        (b"delete\r\n", Err(Error::BadFormat { noreply: false })),
        (
            b"incr k 5\r\n",
            Ok(Request::Arith {
                key: b"k",
                delta: 5,
                incr: true,
                noreply: false,
            }),
        ),
        (
            b"decr k 5 noreply\r\n",
            Ok(Request::Arith {
                key: b"k",
                delta: 5,
                incr: false,
                noreply: true,
            }),
        ),
        (
            b"decr k +5 noreply\r\n",
            Err(Error::InvalidDelta { noreply: true }),
        ),
        (
            b"incr k -1\r\n",
            Err(Error::InvalidDelta { noreply: false }),
        ),
        (
            b"incr k noreply\r\n",
            Err(Error::InvalidDelta { noreply: true }),
        ),
        (b"incr k\r\n", Err(Error::BadFormat { noreply: false })),
        (
            b"touch k 10\r\n",
            Ok(Request::Touch {
                key: b"k",
                exptime: 10,
                noreply: false,
            }),
        ),
        (
            b"touch k x\r\n",
            Err(Error::InvalidExptime { noreply: false }),
        ),
        (
            b"flush_all\r\n",
            Ok(Request::FlushAll {
                delay: Some(0),
                noreply: false,
            }),
        ),
        (
            b"flush_all 5\r\n",
            Ok(Request::FlushAll {
                delay: Some(5),
                noreply: false,
            }),
        ),
        (
            b"flush_all noreply\r\n",
            Ok(Request::FlushAll {
                delay: Some(0),
                noreply: true,
            }),
        ),
        (
            b"flush_all 5 noreply\r\n",
            Ok(Request::FlushAll {
                delay: Some(5),
                noreply: true,
            }),
        ),
        (
            b"flush_all x\r\n",
            Ok(Request::FlushAll {
                delay: None,
                noreply: false,
            }),
        ),
        (
            b"flush_all 1 2 3\r\n",
            Ok(Request::FlushAll {
                delay: Some(1),
                noreply: false,
            }),
        ),
        (b"version\r\n", Ok(Request::Version)),
        (b"version junk\r\n", Ok(Request::Version)),
        (
            b"refresh_certs\r\n",
            Ok(Request::RefreshCerts { noreply: false }),
        ),
        (
            b"refresh_certs noreply\r\n",
            Ok(Request::RefreshCerts { noreply: true }),
        ),
        (
            b"refresh_certs x y\r\n",
            Ok(Request::RefreshCerts { noreply: false }),
        ),
        (b"refresh_cert\r\n", Err(Error::UnknownCommand)),
        (b"quit\r\n", Ok(Request::Quit)),
        (
            b"shutdown\r\n",
            Ok(Request::Shutdown {
                mode: ShutdownMode::Now,
                noreply: false,
            }),
        ),
        (
            b"shutdown graceful\r\n",
            Ok(Request::Shutdown {
                mode: ShutdownMode::Graceful,
                noreply: false,
            }),
        ),
        (
            b"shutdown g\r\n",
            Ok(Request::Shutdown {
                mode: ShutdownMode::Graceful,
                noreply: false,
            }),
        ),
        (
            b"shutdown noreply\r\n",
            Ok(Request::Shutdown {
                mode: ShutdownMode::Invalid,
                noreply: true,
            }),
        ),
        (
            b"shutdown now\r\n",
            Ok(Request::Shutdown {
                mode: ShutdownMode::Invalid,
                noreply: false,
            }),
        ),
        (
            b"verbosity 1\r\n",
            Ok(Request::Verbosity {
                level: 1,
                noreply: false,
            }),
        ),
        (b"verbosity\r\n", Err(Error::BadFormat { noreply: false })),
        (
            b" verbosity 1 2\r\n",
            Ok(Request::Verbosity {
                level: 1,
                noreply: false,
            }),
        ),
        (
            b"verbosity x noreply\r\n",
            Err(Error::BadFormat { noreply: true }),
        ),
        (
            b"cache_memlimit 100\r\n",
            Ok(Request::CacheMemlimit {
                megabytes: 100,
                noreply: false,
            }),
        ),
        (
            b"cache_memlimit x\r\n",
            Err(Error::Rejected { noreply: false }),
        ),
        (
            b"stats\r\n",
            Ok(Request::Stats {
                sub: None,
                arg: None,
            }),
        ),
        (
            b"stats items\r\n",
            Ok(Request::Stats {
                sub: Some(b"items"),
                arg: None,
            }),
        ),
        (
            b"stats detail on\r\n",
            Ok(Request::Stats {
                sub: Some(b"detail"),
                arg: Some(b"on"),
            }),
        ),
        (
            b"stats s\r\n",
            Ok(Request::Stats {
                sub: Some(b"settings"),
                arg: None,
            }),
        ),
        (b"bogus\r\n", Err(Error::UnknownCommand)),
        (b"bogus noreply\r\n", Err(Error::Rejected { noreply: true })),
        (b"\r\n", Err(Error::BadFormat { noreply: false })),
        (b"\n", Err(Error::BadFormat { noreply: false })),
        (b"g\r\n", Err(Error::BadFormat { noreply: false })),
        (b"ab\r\n", Err(Error::UnknownCommand)),
        (b"get\r\n", Err(Error::BadFormat { noreply: false })),
        (b" get k\r\n", Err(Error::UnknownCommand)),
        (b"bget k\r\n", Err(Error::UnknownCommand)),
        (b"GET / HTTP/1.1\r\n", Err(Error::Http)),
        (b"gogo HTTP/1.1\r\n", Err(Error::Http)),
        (b"POST HTTP/1.0\r\n", Err(Error::Http)),
        (b"get\0 a\r\n", Err(Error::UnknownCommand)),
    ];
    for (input, want) in rows {
        let (got, n) = full(input);
        assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(input));
        assert_eq!(n, input.len());
    }
}

#[test]
fn long_lines() {
    let c = cfg();
    let junk = vec![b'x'; LINE_MAX_NO_NEWLINE + 1];
    assert_eq!(
        parse(&junk, &c),
        Some((Err(Error::LineTooLong), junk.len()))
    );
    assert!(parse(&junk[..LINE_MAX_NO_NEWLINE], &c).is_none());
    let mut get = b"get ".to_vec();
    get.resize(LINE_MAX_NO_NEWLINE + 100, b'k');
    assert!(parse(&get, &c).is_none(), "a long get keeps waiting");
    let small = Config {
        max_get_line: 4096,
        ..c
    };
    get.resize(5000, b'k');
    assert_eq!(parse(&get, &small), Some((Err(Error::LineTooLong), 5000)));
    // A whole line whose newline lies past memcached's 16 KiB read buffer closes
    // too, however it arrived; one that fits is answered.
    let mut long = vec![b'x'; READ_BUFFER_SIZE];
    long.extend_from_slice(b"\r\n");
    assert_eq!(
        parse(&long, &c),
        Some((Err(Error::LineTooLong), long.len()))
    );
    let fits = &long[2..];
    assert_eq!(
        parse(fits, &c),
        Some((Err(Error::UnknownCommand), fits.len()))
    );
    let mut get = b"get ".to_vec();
    get.resize(READ_BUFFER_SIZE + 10, b'k');
    get.extend_from_slice(b"\r\n");
    assert!(
        matches!(parse(&get, &c), Some((Ok(_), _))),
        "a long get line is read"
    );
}

#[test]
fn error_actions() {
    assert_eq!(
        Error::UnknownCommand.action(),
        Action::Reply(Some(b"ERROR\r\n"))
    );
    assert_eq!(
        Error::BadFormat { noreply: true }.action(),
        Action::Reply(None)
    );
    assert_eq!(Error::LineTooLong.action(), Action::Close);
    assert_eq!(Error::Http.action(), Action::Close);
    assert_eq!(
        Error::BadStoreLine {
            noreply: false,
            swallow: 7
        }
        .action(),
        Action::Swallow(Some(&b"CLIENT_ERROR bad command line format\r\n"[..]), 7)
    );
    assert_eq!(
        Error::BadStoreLine {
            noreply: true,
            swallow: 7
        }
        .action(),
        Action::Swallow(None, 7)
    );
}

#[test]
fn value_reply() {
    let mut out = Vec::new();
    reply::value(&mut out, b"k", 7, b"abc", Some(42));
    reply::value(&mut out, b"k", 0, b"", None);
    assert_eq!(out, b"VALUE k 7 3 42\r\nabc\r\nVALUE k 0 0\r\n\r\n");
}

/// The VALUE line's own number writer against Rust's formatting, at every digit
/// count's edges, with keys up to and past the longest memcached accepts.
#[test]
fn value_head_numbers_and_keys() {
    let mut edges = vec![0u64, 1, u64::from(u32::MAX), u64::MAX, u64::MAX - 1];
    let mut p = 1u64;
    while let Some(next) = p.checked_mul(10) {
        edges.extend([p - 1, p, p + 1, next - 1]);
        p = next;
    }
    for key_len in [1, 16, 250, 251, 400] {
        let key = vec![b'k'; key_len];
        let k = String::from_utf8_lossy(&key).into_owned();
        for &n in &edges {
            let flags = (n & u64::from(u32::MAX)) as u32;
            let mut out = b"prefix".to_vec();
            reply::value_head(&mut out, &key, flags, n as usize, Some(n));
            reply::value_head(&mut out, &key, flags, n as usize, None);
            let want = format!("prefixVALUE {k} {flags} {n} {n}\r\nVALUE {k} {flags} {n}\r\n");
            assert_eq!(String::from_utf8_lossy(&out), want);
        }
    }
}
