//! The generator's promises: determinism, and each published figure met within a
//! tolerance on a trace of 400,000 requests.

use super::super::shape::{Op, CLUSTER25, CLUSTER52, SHAPES};
use super::*;

fn params(seed: u64) -> Params {
    Params {
        requests: 400_000,
        keys: 0,
        seed,
        ttl_divisor: 1,
    }
}

#[test]
fn same_seed_same_trace_other_seed_another() {
    let a = Trace::generate(&CLUSTER52, params(7)).expect("generate");
    let b = Trace::generate(&CLUSTER52, params(7)).expect("generate");
    let c = Trace::generate(&CLUSTER52, params(8)).expect("generate");
    assert!(a.reqs == b.reqs);
    assert!(a.reqs != c.reqs);
    assert_eq!(a.meta(12345), b.meta(12345));
    let differ = (0..1000).filter(|&k| a.meta(k) != c.meta(k)).count();
    assert!(
        differ > 900,
        "only {differ} of 1000 keys differ across seeds"
    );
}

#[test]
fn request_count_is_close_to_asked() {
    for shape in SHAPES {
        let t = Trace::generate(shape, params(1)).expect("generate");
        let n = t.reqs.len() as f64;
        assert!((n / 400_000.0 - 1.0).abs() < 0.01, "{}: {n}", shape.name);
    }
}

#[test]
fn one_hit_wonder_share_is_the_published_one() {
    for shape in SHAPES {
        let s = Trace::generate(shape, params(2)).expect("generate").stats();
        let want = shape.one_hit_wonder_share;
        assert!(
            (s.one_hit_wonder_share - want).abs() < 0.005,
            "{}: {} vs {want}",
            shape.name,
            s.one_hit_wonder_share
        );
    }
}

#[test]
fn mean_sizes_are_the_published_ones() {
    for shape in SHAPES {
        let s = Trace::generate(shape, params(3)).expect("generate").stats();
        let k = s.key_bytes_mean / shape.key_bytes_mean;
        let v = s.value_bytes_mean / shape.value_bytes_mean;
        assert!(
            (k - 1.0).abs() < 0.03,
            "{} key mean {}",
            shape.name,
            s.key_bytes_mean
        );
        assert!(
            (v - 1.0).abs() < 0.03,
            "{} value mean {}",
            shape.name,
            s.value_bytes_mean
        );
    }
}

#[test]
fn key_names_are_unique_and_their_length_is_the_meta_length() {
    let t = Trace::generate(&CLUSTER25, params(4)).expect("generate");
    let mut seen = std::collections::HashSet::new();
    let mut buf = Vec::new();
    for k in (0..300_000u64).step_by(7) {
        t.key_name(k, &mut buf);
        assert_eq!(buf.len(), t.meta(k).key_bytes);
        assert!(buf.iter().all(|b| b.is_ascii_graphic()));
        assert!(seen.insert(buf.clone()), "duplicate name for key {k}");
    }
}

/// The Zipf exponent, fitted by least squares to log(count) against log(rank) over
/// ranks 1..=200 of the Zipf part (the head, where counts are large).
fn fitted_alpha(t: &Trace) -> f64 {
    let mut counts = vec![0u64; t.zipf_keys as usize];
    for r in &t.reqs {
        if let Some(c) = counts.get_mut(r.key as usize) {
            *c += 1;
        }
    }
    let pts: Vec<(f64, f64)> = (0..200)
        .map(|i| (((i + 1) as f64).ln(), (counts[i] as f64).ln()))
        .collect();
    let n = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), p| (a + p.0, b + p.1));
    let (mx, my) = (sx / n, sy / n);
    let cov: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let var: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    -cov / var
}

#[test]
fn popularity_follows_the_published_zipf_alpha() {
    for shape in SHAPES {
        let t = Trace::generate(shape, params(5)).expect("generate");
        let a = fitted_alpha(&t);
        assert!(
            (a - shape.zipf_alpha).abs() < 0.06,
            "{}: fitted {a} vs {}",
            shape.name,
            shape.zipf_alpha
        );
    }
}

#[test]
fn ttl_mix_over_keys_is_the_published_one() {
    let t = Trace::generate(&CLUSTER52, params(6)).expect("generate");
    let total: f64 = CLUSTER52.ttl_mix.iter().map(|m| m.1).sum();
    let n = 100_000u64;
    for &(ttl, share) in CLUSTER52.ttl_mix {
        let got = (0..n).filter(|&k| t.meta(k).ttl_secs == ttl).count() as f64 / n as f64;
        assert!(
            (got - share / total).abs() < 0.01,
            "ttl {ttl}: {got} vs {share}"
        );
    }
    let scaled = Trace::generate(
        &CLUSTER52,
        Params {
            ttl_divisor: 3600,
            ..params(6)
        },
    )
    .expect("generate");
    assert_eq!(scaled.meta(99).ttl_secs, t.meta(99).ttl_secs / 3600);
}

#[test]
fn op_mix_is_the_published_one() {
    let t = Trace::generate(&CLUSTER52, params(7)).expect("generate");
    let total: f64 = CLUSTER52.op_mix.iter().map(|m| m.1).sum();
    let n = t.reqs.len() as f64;
    for &(op, share) in CLUSTER52.op_mix {
        let got = t.reqs.iter().filter(|r| r.op == op).count() as f64 / n;
        assert!(
            (got - share / total).abs() < 0.005,
            "{op:?}: {got} vs {share}"
        );
    }
    assert!(t.reqs.iter().any(|r| r.op == Op::Cas));
}

#[test]
fn the_clock_runs_at_the_published_rate() {
    let t = Trace::generate(&CLUSTER25, params(8)).expect("generate");
    let last = t.reqs.last().expect("a request").time_secs as f64;
    let want = t.reqs.len() as f64 / CLUSTER25.requests_per_sec;
    assert!((last - want).abs() <= 1.0, "{last} vs {want}");
}

#[test]
fn the_key_space_leaves_room_for_few_added_wonders() {
    for shape in SHAPES {
        let t = Trace::generate(shape, params(9)).expect("generate");
        let s = t.stats();
        // The Zipf tail supplies nearly all of the share; the added wonders top it up.
        assert!(
            (s.wonders_added as f64) < 0.05 * s.distinct as f64,
            "{}: {} of {} keys added",
            shape.name,
            s.wonders_added,
            s.distinct
        );
        assert!(t.zipf_keys > 1000, "{}: {} keys", shape.name, t.zipf_keys);
    }
}
