use super::*;
use crate::text::{parse as text_parse, Request};

fn meta(input: &[u8]) -> (Meta<'_>, usize) {
    match text_parse(input, &Config::default()) {
        Some((Ok(Request::Meta(m)), n)) => (m, n),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

fn fail(input: &[u8]) -> (&'static [u8], usize) {
    match meta(input).0 {
        Meta::Fail { reply, swallow, .. } => (reply, swallow),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

#[test]
fn base64_round_trip_and_quirks() {
    let mut out = [0u8; 64];
    let n = base64_decode(b"Zm9vYmFy", &mut out).expect("ok");
    assert_eq!(&out[..n], b"foobar");
    let n = base64_decode(b"Zm9vYg==", &mut out).expect("ok");
    assert_eq!(&out[..n], b"foob");
    let n = base64_decode(b"Zm9vYmE=", &mut out).expect("ok");
    assert_eq!(&out[..n], b"fooba");
    // Bytes outside the alphabet are skipped.
    let n = base64_decode(b"Zm9v!YmFy", &mut out).expect("ok");
    assert_eq!(&out[..n], b"foobar");
    // A padded block ends the input.
    let n = base64_decode(b"Zg==Zm9v", &mut out).expect("ok");
    assert_eq!(&out[..n], b"f");
    assert_eq!(base64_decode(b"Zm9", &mut out), Err(NotBase64));
    assert_eq!(base64_decode(b"", &mut out), Err(NotBase64));
    assert_eq!(base64_decode(b"Z===", &mut out), Err(NotBase64));
    assert_eq!(base64_decode(b"Zm9vYmFy", &mut out[..5]), Err(NotBase64));
    for s in [&b""[..], b"f", b"fo", b"foo", b"\x00\xff\x10"] {
        let mut enc = Vec::new();
        base64_encode(s, &mut enc);
        if !s.is_empty() {
            let n = base64_decode(&enc, &mut out).expect("ok");
            assert_eq!(&out[..n], s);
        }
    }
    let mut enc = Vec::new();
    base64_encode(b"foob", &mut enc);
    assert_eq!(enc, b"Zm9vYg==");
}

#[test]
fn commands() {
    let (m, n) = meta(b"mg foo v t c O123 k\r\n");
    assert_eq!(n, 21);
    let Meta::Get { key, flags } = m else {
        panic!()
    };
    assert_eq!(key.decode(&mut [0; DECODED_KEY_MAX]), b"foo");
    assert!(flags.value);
    let toks: Vec<&[u8]> = flags.tokens().collect();
    assert_eq!(toks, [&b"v"[..], b"t", b"c", b"O123", b"k"]);
    let (m, n) = meta(b"ms foo 2 T10 F5 MA\r\nhi\r\nmn\r\n");
    assert_eq!(n, 24);
    let Meta::Set {
        key,
        flags,
        mode,
        data,
    } = m
    else {
        panic!()
    };
    assert_eq!(
        (
            key.decode(&mut [0; DECODED_KEY_MAX]),
            mode,
            data,
            flags.ttl,
            flags.client_flags
        ),
        (&b"foo"[..], SetMode::Append, &b"hi"[..], Some(10), 5)
    );
    assert_eq!(meta(b"mn\r\n").0, Meta::Noop);
    assert_eq!(meta(b"mn extra\r\n").0, Meta::Noop);
    let Meta::Arith { incr, flags, .. } = meta(b"ma k MD D5 J7 N0\r\n").0 else {
        panic!()
    };
    assert_eq!(
        (incr, flags.delta, flags.initial, flags.vivify),
        (false, 5, 7, Some(0))
    );
    // `me` decodes a base64 key only when a fourth token follows the `b`.
    let Meta::Debug { key } = meta(b"me Zm9v b x\r\n").0 else {
        panic!()
    };
    assert_eq!(key.decode(&mut [0; DECODED_KEY_MAX]), b"foo");
    let Meta::Debug { key } = meta(b"me Zm9v b\r\n").0 else {
        panic!()
    };
    assert_eq!(key.decode(&mut [0; DECODED_KEY_MAX]), b"Zm9v");
    let Meta::Get { key, .. } = meta(b"mg Zm9v b k\r\n").0 else {
        panic!()
    };
    assert!(key.is_binary());
    assert_eq!(key.decode(&mut [0; DECODED_KEY_MAX]), b"foo");
    // ms waits for its data block.
    assert!(text_parse(b"ms foo 5\r\nhel", &Config::default()).is_none());
    assert_eq!(meta(b"ms foo 2\r\nhiX\r\n"), (Meta::SetBadChunk, 14));
}

#[test]
fn errors_as_memcached() {
    let cases: &[(&[u8], &[u8], usize)] = &[
        (b"mg foo z\r\n", errors::INVALID_FLAG, 0),
        // 1.6.45: F is a 32-bit number; 1.6.18 wrapped a larger one.
        (b"ms foo 1 F4294967296\r\nx\r\n", errors::BAD_FORMAT, 3),
        (b"mg foo v v\r\n", errors::DUPLICATE_FLAG, 0),
        // md names its flag errors since 1.6.45; ma still does not.
        (b"md foo v v\r\n", errors::DUPLICATE_FLAG, 0),
        (b"md foo Tx\r\n", errors::BAD_TOKEN, 0),
        (b"md Zm9 b\r\n", errors::DECODING_KEY, 0),
        (b"ma foo v v\r\n", errors::INVALID_OR_DUPLICATE_FLAG, 0),
        (b"ma foo z\r\n", errors::INVALID_OR_DUPLICATE_FLAG, 0),
        (b"mg foo Tx\r\n", errors::BAD_TOKEN, 0),
        (b"mg foo Fx\r\n", errors::BAD_FORMAT, 0),
        (b"mg foo Tx Fx\r\n", errors::BAD_TOKEN, 0),
        (b"ms foo 1 M\r\nx\r\n", errors::MS_MODE, 3),
        (b"mg foo Jx\r\n", errors::INITIAL_VALUE, 0),
        (b"mg foo Dx\r\n", errors::DELTA_VALUE, 0),
        (b"mg Zm9 b\r\n", errors::DECODING_KEY, 0),
        (b"ma foo MX\r\n", errors::MA_MODE, 0),
        (b"ms foo 2 MX\r\n", errors::MS_MODE, 4),
        (b"ms foo 2 v v\r\n", errors::DUPLICATE_FLAG, 4),
        (b"ms foo 2 Tx\r\n", errors::BAD_TOKEN, 4),
        (b"ms foo\r\n", errors::BAD_FORMAT, 0),
        (b"ms foo x\r\n", errors::BAD_FORMAT, 0),
        (b"ms foo -1\r\n", errors::BAD_FORMAT, 0),
        (b"me\r\n", errors::BAD_FORMAT, 0),
        (b"me Zm9 b x\r\n", errors::BAD_FORMAT, 0),
        (
            b"md foo O123456789012345678901234567890123\r\n",
            errors::OPAQUE_TOO_LONG,
            0,
        ),
        (
            b"ms foo 1 O123456789012345678901234567890123 MX\r\n",
            errors::MS_MODE,
            3,
        ),
        (
            b"ms foo 1 O123456789012345678901234567890123\r\n",
            errors::OPAQUE_TOO_LONG,
            3,
        ),
        // 21 tokens; 20 are allowed (1.6.18 allowed 19).
        (
            b"mg foo a b c d e f g h i j k l m n o p q r s\r\n",
            errors::TOO_MANY_FLAGS,
            0,
        ),
        (
            b"mg foo a b c d e f g h i j k l m n o p q r\r\n",
            errors::INVALID_FLAG,
            0,
        ),
        (
            b"md foo a b c d e f g h i j k l m n o p q r s\r\n",
            errors::TOO_MANY_FLAGS,
            0,
        ),
        (
            b"ms foo 1 a b c d e f g h i j k l m n o p q r\r\nx\r\n",
            errors::TOO_MANY_FLAGS,
            3,
        ),
        (
            b"ma foo a b c d e f g h i j k l m n o p q r s\r\n",
            errors::INVALID_OR_DUPLICATE_FLAG,
            0,
        ),
        // A flag token must start with a letter or a digit, or the line is refused
        // before anything else (no data block swallowed).
        (b"mg foo v !\r\n", errors::BAD_FORMAT, 0),
        (b"mg foo v \x80\r\n", errors::BAD_FORMAT, 0),
        (b"ms foo 2 T1 -\r\nhi\r\n", errors::BAD_FORMAT, 0),
        (b"md foo {\r\n", errors::BAD_FORMAT, 0),
        (b"me foo !\r\n", errors::BAD_FORMAT, 0),
        // ...but the key is not checked, and `[` to `` ` `` are flags (unknown).
        (b"mg foo [\r\n", errors::INVALID_FLAG, 0),
        (b"mg foo 9\r\n", errors::INVALID_FLAG, 0),
        // No key.
        (b"mg\r\n", errors::BAD_FORMAT, 0),
        (b"md\r\n", errors::BAD_FORMAT, 0),
        (b"ma  \r\n", errors::BAD_FORMAT, 0),
        (b"ms\r\n", errors::BAD_FORMAT, 0),
        // The ms length is read before the key's length and the flags are looked at.
        (b"ms foo 1x v v\r\n", errors::BAD_FORMAT, 0),
        (b"ms foo 2147483646\r\n", errors::BAD_FORMAT, 0),
        (
            b"ms foo 00000000002 v v\r\nhi\r\n",
            errors::DUPLICATE_FLAG,
            4,
        ),
        // The size is checked before the opaque.
        (
            b"ms foo 2 O123456789012345678901234567890123 MX\r\nhi\r\n",
            errors::MS_MODE,
            4,
        ),
    ];
    for (input, reply, swallow) in cases {
        assert_eq!(
            fail(input),
            (*reply, *swallow),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    let long_key = [b"mg ".to_vec(), vec![b'a'; 251], b"\r\n".to_vec()].concat();
    assert_eq!(fail(&long_key), (errors::BAD_FORMAT, 0));
    // An ms key over 250 bytes swallows the data block (1.6.18 did not).
    let long_key = [b"ms ".to_vec(), vec![b'a'; 251], b" 1\r\nx\r\n".to_vec()].concat();
    assert_eq!(fail(&long_key), (errors::BAD_FORMAT, 3));
    for input in [&b"mx foo\r\n"[..], b"mgx foo\r\n"] {
        assert!(
            matches!(
                text_parse(input, &Config::default()),
                Some((Err(crate::text::Error::UnknownCommand), _))
            ),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

/// Random meta-ish lines never panic, and every answer consumes something.
#[test]
fn random_lines_never_panic() {
    let alphabet: &[u8] = b"mgsdane bkvqOTNRCDJMIEFcfhlstu0123456789=+/-\r\n\x00\x80 ";
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let cfg = Config {
        item_size_max: 64,
        ..Config::default()
    };
    for _ in 0..20_000 {
        let len = (next() % 60) as usize;
        let mut line = vec![b'm', alphabet[(next() % 7) as usize], b' '];
        line.extend((0..len).map(|_| alphabet[(next() as usize) % alphabet.len()]));
        line.extend_from_slice(b"\r\n");
        if let Some((_, used)) = text_parse(&line, &cfg) {
            assert!(used > 0 && used <= line.len());
        }
    }
}

#[test]
fn client_round_trip() {
    use super::client::{self, Code, MetaReply};
    let mut out = Vec::new();
    client::ms(&mut out, b"k", b"hi", &[b"T30", b"c"]);
    client::mg(&mut out, b"k", &[b"v", b"c"]);
    client::md(&mut out, b"k", &[b"q"]);
    client::ma(&mut out, b"n", &[b"N0", b"J5"]);
    client::me(&mut out, b"k");
    client::mn(&mut out);
    assert_eq!(
        out,
        b"ms k 2 T30 c\r\nhi\r\nmg k v c\r\nmd k q\r\nma n N0 J5\r\nme k\r\nmn\r\n"
    );
    // What the server parser makes of it.
    let (m, n) = meta(&out);
    assert_eq!(n, 18);
    assert!(matches!(m, Meta::Set { .. }));
    let reply = b"VA 2 c77 t30\r\nhi\r\nHD c78\r\nEN\r\nCLIENT_ERROR bad\r\nMN\r\n";
    let (r, n) = client::parse_reply(reply).expect("ok").expect("complete");
    assert_eq!(
        r,
        MetaReply::Status {
            code: Code::Va,
            flags: b"c77 t30",
            value: Some(b"hi")
        }
    );
    assert_eq!((r.cas(), r.flag(b't')), (Some(77), Some(&b"30"[..])));
    assert_eq!(n, 18);
    let (r, m) = client::parse_reply(&reply[n..])
        .expect("ok")
        .expect("complete");
    assert_eq!(r.cas(), Some(78));
    let rest = &reply[n + m..];
    let (r, k) = client::parse_reply(rest).expect("ok").expect("complete");
    assert!(matches!(r, MetaReply::Status { code: Code::En, .. }));
    let (r, _) = client::parse_reply(&rest[k..])
        .expect("ok")
        .expect("complete");
    assert_eq!(r, MetaReply::Error(b"CLIENT_ERROR bad"));
    assert_eq!(client::parse_reply(b"VA 5\r\nab"), Ok(None));
    assert!(client::parse_reply(b"XX\r\n").is_err());
    assert!(client::parse_reply(b"VA 1\r\nabc").is_err());
}

#[test]
fn too_large_is_swallowed() {
    let cfg = Config {
        item_size_max: 1024,
        ..Config::default()
    };
    let input = b"ms foo 2000 T0\r\n";
    match text_parse(input, &cfg) {
        Some((Ok(Request::Meta(Meta::SetTooLarge { key, swallow, .. })), n)) => {
            assert_eq!(
                (key.decode(&mut [0; DECODED_KEY_MAX]), swallow, n),
                (&b"foo"[..], 2002, input.len())
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn newer_flags_parse() {
    // 1.6.27's `x` on md (accepted, and ignored, by the other commands too).
    match meta(b"md foo x I q\r\n").0 {
        Meta::Delete { flags, .. } => assert!(flags.remove_value && flags.invalidate),
        other => panic!("{other:?}"),
    }
    assert!(matches!(meta(b"ma foo x\r\n").0, Meta::Arith { .. }));
    // The largest 32-bit client flags still parse.
    match meta(b"ms foo 1 F4294967295\r\nx\r\n").0 {
        Meta::Set { flags, .. } => assert_eq!(flags.client_flags, u32::MAX),
        other => panic!("{other:?}"),
    }
}

#[test]
fn flag_numbers_as_mcmc_reads_them() {
    let i32_cases: &[(&[u8], Option<i32>)] = &[
        (b"5", Some(5)),
        (b"-5", Some(-5)),
        (b"-", Some(0)),
        (b"00000000005", Some(5)),
        (b"000000000005", None),
        (b"2147483647", Some(i32::MAX)),
        (b"2147483648", None),
        (b"-2147483648", Some(i32::MIN)),
        (b"+5", None),
        (b"", None),
        (b"1x", None),
        (b" 1", None),
    ];
    for &(arg, want) in i32_cases {
        assert_eq!(
            tok_i32(arg).ok(),
            want,
            "{:?}",
            String::from_utf8_lossy(arg)
        );
    }
    assert_eq!(tok_u64(b"18446744073709551615", 22), Ok(u64::MAX));
    assert_eq!(tok_u64(b"18446744073709551616", 22), Err(NotANumber));
    assert_eq!(tok_u64(b"0000000000000000000001", 22), Ok(1));
    assert_eq!(tok_u64(b"00000000000000000000001", 22), Err(NotANumber));
    assert_eq!(tok_u64(b"-1", 22), Err(NotANumber));
}
