//! The text and meta request parsers ([`memcrab_proto::text::parse`]).
//!
//! The input is what a client sends on one connection. It is run through a small
//! model of the server's read loop (parse, swallow what a too-large value leaves,
//! stop on a close) with two parser configurations, and:
//! - every parse makes progress and consumes no more than it was given;
//! - every key the parser hands out is 1..=250 bytes (get keys may be longer: the
//!   executor answers those, as memcached does) and holds no space, `\n` or NUL
//!   (memcached's tokenizer splits on spaces only and cuts the line at a NUL, so a
//!   key may hold other control bytes, as in memcached);
//! - a stored value fits `-I`, a too-large one is swallowed whole;
//! - every request re-encoded with the client-side encoders parses back to itself;
//! - the same bytes fed in two pieces give the same requests, except that a line
//!   over 2048 bytes still without its newline may close the connection early (as in
//!   memcached, which closes when it has buffered that much without a newline).

use memcrab_proto::text::meta::{self, Meta};
use memcrab_proto::text::{self, client, Config, Error, Request, KEY_MAX_LEN};

use crate::Step;

/// The `text` fuzz target.
pub fn text(data: &[u8]) {
    stream_checks(data);
}

/// The `meta` fuzz target: the request checks, and the reply parsers and base64.
pub fn meta(data: &[u8]) {
    stream_checks(data);
    reply_parsers(data);
    base64(data);
}

fn configs() -> [Config; 2] {
    [
        Config::default(),
        // A small `-I` and get-line bound, so short inputs reach the too-large and
        // long-line paths.
        Config {
            item_size_max: 1024,
            use_cas: false,
            max_get_line: 4096,
        },
    ]
}

fn stream_checks(data: &[u8]) {
    let split = crate::split_point(data);
    for cfg in configs() {
        let whole = drive(&[data], &cfg);
        let parts = drive(&[&data[..split], &data[split..]], &cfg);
        if whole != parts {
            // The only allowed difference: the split run closed on a long line
            // after serving a prefix of what the whole run served.
            let (last, served) = parts.split_last().expect("the runs differ");
            assert_eq!(
                last, "close: LineTooLong",
                "split at {split} changed the requests:\nwhole: {whole:#?}\nsplit: {parts:#?}"
            );
            assert!(
                whole.starts_with(served),
                "split at {split}: the requests before the close differ"
            );
        }
    }
}

/// The server's read loop, reduced to parsing: feeds `chunks` one after the other
/// and returns what was parsed, each request in a canonical form.
fn drive(chunks: &[&[u8]], cfg: &Config) -> Vec<String> {
    let mut events = Vec::new();
    crate::read_loop(chunks, |buf| {
        let Some((result, used)) = text::parse(buf, cfg) else {
            return Step::Wait;
        };
        assert!(used > 0, "parse made no progress");
        assert!(used <= buf.len(), "consumed {used} of {} bytes", buf.len());
        let mut swallow = 0;
        match &result {
            Ok(req) => {
                check_request(req, cfg);
                round_trip(req, cfg);
                events.push(canon(req));
                swallow = swallow_after(req);
                if matches!(req, Request::Quit) {
                    return Step::Stop;
                }
            }
            Err(e) => {
                events.push(format!("close: {e:?}"));
                if matches!(e, Error::LineTooLong | Error::Http) {
                    return Step::Stop;
                }
                let last = events.last_mut().expect("just pushed");
                *last = format!("error: {e:?}");
            }
        }
        Step::Consume { used, swallow }
    });
    events
}

/// Bytes the server discards after a request (a too-large value's data block).
fn swallow_after(req: &Request<'_>) -> usize {
    match req {
        Request::TooLarge { swallow, .. } => *swallow,
        Request::Meta(Meta::SetTooLarge { swallow, .. }) => *swallow,
        Request::Meta(Meta::Fail { swallow, .. }) => *swallow,
        _ => 0,
    }
}

/// A request as a string; get keys are listed one by one (the parser keeps them as
/// the rest of the line, spaces included).
fn canon(req: &Request<'_>) -> String {
    match req {
        Request::Get { keys, cas, touch } => {
            let keys: Vec<String> = keys
                .clone()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect();
            format!("Get {{ keys: {keys:?}, cas: {cas}, touch: {touch:?} }}")
        }
        other => format!("{other:?}"),
    }
}

/// A key the parser hands to the store: 1..=250 bytes, no separator.
fn check_key(key: &[u8]) {
    assert!(!key.is_empty(), "empty key");
    assert!(key.len() <= KEY_MAX_LEN, "key of {} bytes", key.len());
    check_token(key);
}

/// A token: no space, no line end (a NUL is a byte of it, as memcached 1.6.45's
/// tokenizer reads it).
fn check_token(tok: &[u8]) {
    assert!(
        !tok.iter().any(|b| matches!(b, b' ' | b'\n')),
        "token {tok:?} holds a separator"
    );
}

fn check_meta_key(key: &meta::Key<'_>) {
    check_key(key.raw());
    let mut buf = [0; meta::DECODED_KEY_MAX];
    let decoded = key.decode(&mut buf);
    if key.is_binary() {
        assert!(!decoded.is_empty(), "a base64 key decoded to nothing");
    }
}

fn check_request(req: &Request<'_>, cfg: &Config) {
    match req {
        Request::Get { keys, touch, .. } => {
            let mut n = 0;
            for k in keys.clone() {
                assert!(!k.is_empty(), "empty get key");
                check_token(k);
                n += 1;
            }
            // `gat 0` has no key and memcached answers `END`, as memcrab does
            // (regressions/text/gats_without_keys); get/gets need one.
            assert!(n > 0 || touch.is_some(), "a get without keys");
        }
        Request::Store {
            key, flags, data, ..
        } => {
            check_key(key);
            assert!(
                text::item_size_ok(key.len(), *flags, data.len(), cfg),
                "a value over -I was accepted"
            );
        }
        Request::TooLarge { key, swallow, .. } => {
            check_key(key);
            assert!(*swallow >= 2, "too-large swallow {swallow}");
            assert!(*swallow <= i32::MAX as usize, "swallow {swallow}");
            assert!(!text::item_size_ok(key.len(), 0, swallow - 2, cfg));
        }
        Request::Delete { key, .. } | Request::Arith { key, .. } | Request::Touch { key, .. } => {
            check_key(key)
        }
        Request::Stats { sub, arg } => {
            for t in [sub, arg].into_iter().flatten() {
                check_token(t);
            }
        }
        Request::Meta(m) => check_meta(m, cfg),
        Request::FlushAll { .. }
        | Request::Version
        | Request::Verbosity { .. }
        | Request::Quit
        | Request::Shutdown { .. }
        | Request::CacheMemlimit { .. }
        | Request::RefreshCerts { .. }
        | Request::Admin(_) => {}
    }
}

fn check_meta(m: &Meta<'_>, cfg: &Config) {
    let flags = match m {
        Meta::Get { key, flags } | Meta::Delete { key, flags } | Meta::Arith { key, flags, .. } => {
            check_meta_key(key);
            Some(flags)
        }
        Meta::Set {
            key, flags, data, ..
        } => {
            check_meta_key(key);
            let mut buf = [0; meta::DECODED_KEY_MAX];
            let stored_key = key.decode(&mut buf);
            assert!(
                text::item_size_ok(stored_key.len(), flags.client_flags, data.len(), cfg),
                "an ms value over -I was accepted"
            );
            Some(flags)
        }
        Meta::SetTooLarge { key, swallow, .. } => {
            check_meta_key(key);
            assert!(*swallow >= 2);
            None
        }
        Meta::Debug { key } => {
            check_meta_key(key);
            None
        }
        Meta::Fail { reply, .. } => {
            assert!(reply.ends_with(b"\r\n"), "an error reply without its CRLF");
            None
        }
        Meta::Noop | Meta::SetBadChunk => None,
    };
    if let Some(flags) = flags {
        for t in flags.tokens() {
            assert!(!t.is_empty());
            check_token(t);
        }
    }
}

/// Re-encodes a request with the client-side encoders and parses it back.
fn round_trip(req: &Request<'_>, cfg: &Config) {
    let mut out = Vec::new();
    match req {
        Request::Get { keys, cas, touch } => match touch {
            None => client::encode::get(&mut out, keys.clone(), *cas),
            Some(t) => client::encode::gat(&mut out, i64::from(*t), keys.clone(), *cas),
        },
        Request::Store {
            cmd,
            key,
            flags,
            exptime,
            data,
            cas_unique,
            noreply,
        } => client::encode::store(
            &mut out,
            *cmd,
            key,
            *flags,
            i64::from(*exptime),
            data,
            *cas_unique,
            *noreply,
        ),
        Request::Delete { key, noreply } => client::encode::delete(&mut out, key, *noreply),
        Request::Arith {
            key,
            delta,
            incr,
            noreply,
        } => client::encode::arith(&mut out, key, *incr, *delta, *noreply),
        Request::Touch {
            key,
            exptime,
            noreply,
        } => client::encode::touch(&mut out, key, i64::from(*exptime), *noreply),
        Request::Stats { sub, arg } => {
            let mut args = Vec::new();
            if let Some(s) = sub {
                args.extend_from_slice(s);
                if let Some(a) = arg {
                    args.push(b' ');
                    args.extend_from_slice(a);
                }
            }
            client::encode::stats(&mut out, sub.map(|_| args.as_slice()));
        }
        // `delay: None` is a delay that is no number (answered `CLIENT_ERROR`), which
        // no client encoder writes.
        Request::FlushAll { delay: None, .. } => return,
        Request::FlushAll {
            delay: Some(delay),
            noreply,
        } => client::encode::flush_all(&mut out, Some(i64::from(*delay)), *noreply),
        Request::Version => client::encode::version(&mut out),
        Request::Verbosity { level, noreply } => {
            client::encode::verbosity(&mut out, *level, *noreply)
        }
        Request::Quit => client::encode::quit(&mut out),
        Request::CacheMemlimit { megabytes, noreply } => {
            client::encode::cache_memlimit(&mut out, *megabytes, *noreply)
        }
        Request::Meta(m) => {
            if !encode_meta(m, &mut out) {
                return;
            }
        }
        // No client encoder for these (shutdown, refresh_certs and the
        // `lru_crawler`/`slabs`/`lru` commands are admin commands; a too-large value
        // is not something a client means to send).
        Request::Shutdown { .. }
        | Request::Admin(_)
        | Request::TooLarge { .. }
        | Request::RefreshCerts { .. } => return,
    }
    let Some((back, used)) = text::parse(&out, cfg) else {
        panic!("re-encoded {req:?} is incomplete: {out:?}");
    };
    assert_eq!(used, out.len(), "re-encoded {req:?} parsed short: {out:?}");
    let back = back.unwrap_or_else(|e| panic!("re-encoded {req:?} failed: {e:?}: {out:?}"));
    assert_eq!(canon(&back), canon(req), "round trip changed the request");
}

fn encode_meta(m: &Meta<'_>, out: &mut Vec<u8>) -> bool {
    use memcrab_proto::text::meta::client as mc;
    match m {
        Meta::Get { key, flags } => mc::mg(out, key.raw(), &flags.tokens().collect::<Vec<_>>()),
        Meta::Set {
            key, flags, data, ..
        } => mc::ms(out, key.raw(), data, &flags.tokens().collect::<Vec<_>>()),
        Meta::Delete { key, flags } => mc::md(out, key.raw(), &flags.tokens().collect::<Vec<_>>()),
        Meta::Arith { key, flags, .. } => {
            mc::ma(out, key.raw(), &flags.tokens().collect::<Vec<_>>())
        }
        Meta::Noop => mc::mn(out),
        // memcached 1.6.45 decodes an `me` key only when a token follows the `b`.
        Meta::Debug { key } if key.is_binary() => {
            out.extend_from_slice(b"me ");
            out.extend_from_slice(key.raw());
            out.extend_from_slice(b" b b\r\n");
        }
        Meta::Debug { key } => mc::me(out, key.raw()),
        Meta::SetTooLarge { .. } | Meta::SetBadChunk | Meta::Fail { .. } => return false,
    }
    true
}

/// The client-side reply parsers never panic, make progress and stay in bounds.
fn reply_parsers(data: &[u8]) {
    let mut rest = data;
    while let Ok(Some((reply, used))) = meta::client::parse_reply(rest) {
        assert!(used > 0 && used <= rest.len(), "meta reply used {used}");
        if let meta::client::MetaReply::Status { flags, .. } = reply {
            let _ = reply.cas();
            for f in flags.split(|&b| b == b' ').filter_map(|t| t.first()) {
                let _ = reply.flag(*f);
            }
        }
        rest = &rest[used..];
    }
    let mut rest = data;
    while let Ok(Some((_, used))) = client::parse_reply(rest) {
        assert!(used > 0 && used <= rest.len(), "text reply used {used}");
        rest = &rest[used..];
    }
}

/// memcached's base64: decoding never overruns, and encoding round trips.
fn base64(data: &[u8]) {
    let mut buf = [0; meta::DECODED_KEY_MAX];
    if let Ok(n) = meta::base64_decode(data, &mut buf) {
        assert!(n <= buf.len());
    }
    let src = &data[..data.len().min(meta::DECODED_KEY_MAX)];
    if src.is_empty() {
        return;
    }
    let mut enc = Vec::new();
    meta::base64_encode(src, &mut enc);
    let n = meta::base64_decode(&enc, &mut buf).expect("own encoding decodes");
    assert_eq!(&buf[..n], src, "base64 round trip");
}
