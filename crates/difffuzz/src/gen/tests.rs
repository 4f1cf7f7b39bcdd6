//! Unit tests of the generator: the same seed makes the same rounds, concurrent
//! connections get keys of their own, base64 requests never ask for the key back,
//! and value lengths avoid the ambiguous line lengths.

use super::*;

fn view() -> View {
    View {
        open: vec![None; 3],
        cas_seen: 0,
        cas_keys: Vec::new(),
    }
}

#[test]
fn the_same_seed_makes_the_same_rounds() {
    let cfg = three_conns();
    let mut a = Gen::new(9, cfg);
    let mut b = Gen::new(9, cfg);
    let mut c = Gen::new(10, cfg);
    let ra: Vec<Round> = (0..50).map(|_| a.round(&view())).collect();
    let rb: Vec<Round> = (0..50).map(|_| b.round(&view())).collect();
    let rc: Vec<Round> = (0..50).map(|_| c.round(&view())).collect();
    assert_eq!(ra, rb);
    assert_ne!(ra, rc);
}

#[test]
fn concurrent_rounds_give_each_connection_its_own_keys() {
    let cfg = three_conns();
    let mut g = Gen::new(1, cfg);
    for _ in 0..200 {
        let r = g.round(&view());
        if r.conns.len() < 2 {
            continue;
        }
        // No pool key's spelling may appear on two connections' text lines.
        let mut owners: std::collections::HashMap<Vec<u8>, usize> = Default::default();
        for cr in r.conns.iter().filter(|c| c.proto == Proto::Text) {
            for req in cr.segments.iter().flatten() {
                let mut b = Vec::new();
                req.fill(&[], &mut b);
                let line = b.split(|&c| c == b'\n').next().unwrap_or_default();
                let toks: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
                if toks.len() < 2
                    || !matches!(
                        toks[0],
                        b"set" | b"delete" | b"incr" | b"ms" | b"md" | b"ma"
                    )
                {
                    continue;
                }
                let key = toks[1].strip_suffix(b"\r").unwrap_or(toks[1]).to_vec();
                if text_pool().contains(&key) {
                    let o = owners.entry(key.clone()).or_insert(cr.conn);
                    assert_eq!(
                        *o,
                        cr.conn,
                        "key {:?} on two connections",
                        key.escape_ascii().to_string()
                    );
                }
            }
        }
    }
}

#[test]
fn base64_requests_never_ask_for_the_key() {
    let cfg = three_conns();
    let mut g = Gen::new(2, cfg);
    let mut seen = 0;
    for _ in 0..3000 {
        for cr in g
            .round(&view())
            .conns
            .iter()
            .filter(|c| c.proto == Proto::Text)
        {
            for req in cr.segments.iter().flatten() {
                let mut b = Vec::new();
                req.fill(&[], &mut b);
                let line = b.split(|&c| c == b'\n').next().unwrap_or_default();
                let toks: Vec<&[u8]> = line.split(|&c| c == b' ' || c == b'\r').collect();
                if !matches!(toks[0], b"mg" | b"ms" | b"md" | b"ma" | b"me")
                    || toks.len() < 3
                    || !toks[2..].contains(&&b"b"[..])
                {
                    continue;
                }
                seen += 1;
                assert!(
                    toks[0] != b"me",
                    "me with b: {:?}",
                    line.escape_ascii().to_string()
                );
                assert!(
                    !toks[2..].contains(&&b"k"[..]),
                    "k with b: {:?}",
                    line.escape_ascii().to_string()
                );
            }
        }
    }
    assert!(seen > 100, "only {seen} base64 requests");
}

#[test]
fn value_lengths_avoid_the_ambiguous_line_lengths() {
    let cfg = three_conns();
    let mut g = Gen::new(3, cfg);
    for _ in 0..20_000 {
        let n = g.value_len();
        assert!(!(2001..17_000).contains(&n), "{n}");
    }
}
