//! Number parsing exactly as memcached 1.6 does it (`util.c`, `safe_strto*`).
//!
//! memcached parses with C's `strtoull`/`strtol` on a 64-bit `long` and then checks
//! what follows the digits. That makes it more lenient than protocol.txt suggests:
//! leading whitespace, a `+` sign and trailing whitespace (tab, `\r`, ...) are
//! accepted, and 32-bit outputs are truncated from 64 bits without a range check
//! (`set k 4294967296 0 1` stores flags 0). Clients may rely on any of this, so we
//! reproduce it rather than "fix" it.
//!
//! Each function answers the number or [`NotANumber`] (where memcached's returns
//! `false`); what that means on the wire depends on the token, so the caller picks the
//! reply. A leaf: imports nothing of this crate.

/// The token is not a number `safe_strto*` accepts (no digits, junk after them, out
/// of range, or a `-` where memcached refuses one). The caller answers with the error
/// its command uses for that token (`CLIENT_ERROR bad command line format`,
/// `invalid exptime argument`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotANumber;

/// C's `isspace` in the "C" locale.
#[inline]
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Outcome of C `strtoull`/`strtol` scanning: the magnitude, the sign, where the
/// digits ended, and whether the value overflowed (`errno == ERANGE`).
struct Scan {
    negative: bool,
    magnitude: u64,
    overflow: bool,
    /// Index one past the last digit; 0 when no digits were found (C sets
    /// `endptr = str` then).
    end: usize,
}

fn scan(s: &[u8]) -> Scan {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let digits_start = i;
    let mut magnitude: u64 = 0;
    let mut overflow = false;
    while i < s.len() && s[i].is_ascii_digit() {
        let d = u64::from(s[i] - b'0');
        match magnitude.checked_mul(10).and_then(|m| m.checked_add(d)) {
            Some(m) => magnitude = m,
            None => overflow = true,
        }
        i += 1;
    }
    let end = if i == digits_start { 0 } else { i };
    Scan {
        negative,
        magnitude,
        overflow,
        end,
    }
}

/// The check every `safe_strto*` makes after the scan: digits were found and they
/// are followed by whitespace or the end of the token.
fn tail_ok(s: &[u8], end: usize) -> bool {
    end != 0 && (end == s.len() || is_c_space(s[end]))
}

/// `safe_strtoull`: an unsigned 64-bit number. `-N` wraps as in C unless the result
/// looks negative as a signed number, in which case a `-` anywhere rejects it.
pub fn safe_strtoull(s: &[u8]) -> Result<u64, NotANumber> {
    let sc = scan(s);
    if sc.overflow || !tail_ok(s, sc.end) {
        return Err(NotANumber);
    }
    let v = if sc.negative {
        sc.magnitude.wrapping_neg()
    } else {
        sc.magnitude
    };
    if (v as i64) < 0 && s.contains(&b'-') {
        return Err(NotANumber);
    }
    Ok(v)
}

/// `safe_strtoul`: as [`safe_strtoull`] (C's `unsigned long` is 64-bit here), then
/// truncated to 32 bits without a range check, as memcached does.
pub fn safe_strtoul(s: &[u8]) -> Result<u32, NotANumber> {
    safe_strtoull(s).map(|v| v as u32)
}

/// `safe_strtol`: a signed 64-bit `strtol`, truncated to 32 bits, as memcached does
/// for exptimes and value lengths.
pub fn safe_strtol(s: &[u8]) -> Result<i32, NotANumber> {
    let sc = scan(s);
    if !tail_ok(s, sc.end) {
        return Err(NotANumber);
    }
    let v: i64 = if sc.negative {
        // strtol overflows below i64::MIN; its magnitude may be exactly 2^63.
        if sc.overflow || sc.magnitude > (i64::MAX as u64) + 1 {
            return Err(NotANumber);
        }
        (sc.magnitude as i64).wrapping_neg()
    } else {
        if sc.overflow || sc.magnitude > i64::MAX as u64 {
            return Err(NotANumber);
        }
        sc.magnitude as i64
    };
    Ok(v as i32)
}

/// `safe_strtod`: a decimal floating-point number as C's `strtod` reads one (leading
/// whitespace, a sign, digits with an optional fraction and exponent, or `inf`,
/// `infinity`, `nan`), followed by whitespace or the end. Out of range (`ERANGE`)
/// is [`NotANumber`], as in memcached. Not reproduced: hexadecimal floats
/// (`0x1p3`), `nan(...)`, and glibc's `ERANGE` on underflow to a subnormal.
pub fn safe_strtod(s: &[u8]) -> Result<f64, NotANumber> {
    let start = s.iter().take_while(|&&b| is_c_space(b)).count();
    let rest = &s[start..];
    let mut i = usize::from(matches!(rest.first(), Some(b'+' | b'-')));
    let word = |w: &[u8], at: usize| {
        rest.len() >= at + w.len() && rest[at..at + w.len()].eq_ignore_ascii_case(w)
    };
    let end = if word(b"infinity", i) {
        i + 8
    } else if word(b"inf", i) || word(b"nan", i) {
        i + 3
    } else {
        let digits = |from: usize| {
            rest[from..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let int = digits(i);
        i += int;
        let mut frac = 0;
        if rest.get(i) == Some(&b'.') {
            frac = digits(i + 1);
            if int + frac > 0 {
                i += 1 + frac;
            }
        }
        if int + frac == 0 {
            return Err(NotANumber);
        }
        if matches!(rest.get(i), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(rest.get(i + 1), Some(b'+' | b'-')));
            let exp = digits(i + 1 + sign);
            if exp > 0 {
                i += 1 + sign + exp;
            }
        }
        i
    };
    if end < rest.len() && !is_c_space(rest[end]) {
        return Err(NotANumber);
    }
    let text = std::str::from_utf8(&rest[..end]).map_err(|_| NotANumber)?;
    let v: f64 = text.parse().map_err(|_| NotANumber)?;
    let literal_inf = text.trim_start_matches(['+', '-']).starts_with(['i', 'I']);
    if v.is_infinite() && !literal_inf {
        return Err(NotANumber);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_table() {
        let cases: &[(&[u8], Option<f64>)] = &[
            (b"0.5", Some(0.5)),
            (b"2", Some(2.0)),
            (b" 1.25", Some(1.25)),
            (b"+.5", Some(0.5)),
            (b"5.", Some(5.0)),
            (b"-0.1", Some(-0.1)),
            (b"1e2", Some(100.0)),
            (b"1E-2", Some(0.01)),
            (b"1e", None),
            (b"2\t", Some(2.0)),
            (b"inf", Some(f64::INFINITY)),
            (b"-Infinity", Some(f64::NEG_INFINITY)),
            (b"1e999", None),
            (b".", None),
            (b"", None),
            (b"x", None),
            (b"1.5x", None),
            (b"e5", None),
        ];
        for (input, want) in cases {
            let got = safe_strtod(input).ok();
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(input));
        }
        assert!(safe_strtod(b"nan").is_ok_and(f64::is_nan));
    }

    #[test]
    fn strtoull_table() {
        let cases: &[(&[u8], Result<u64, NotANumber>)] = &[
            (b"0", Ok(0)),
            (b"42", Ok(42)),
            (b"+42", Ok(42)),
            (b" 42", Ok(42)),
            (b"\t42", Ok(42)),
            (b"42\t", Ok(42)),
            (b"42\r", Ok(42)),
            (b"18446744073709551615", Ok(u64::MAX)),
            (b"18446744073709551616", Err(NotANumber)),
            (b"-1", Err(NotANumber)),
            (b"-0", Ok(0)),
            // Small negatives wrap to huge values, which look negative: rejected.
            (b"-5", Err(NotANumber)),
            (b"", Err(NotANumber)),
            (b"+", Err(NotANumber)),
            (b"abc", Err(NotANumber)),
            (b"12abc", Err(NotANumber)),
            (b"0x10", Err(NotANumber)),
        ];
        for (input, want) in cases {
            assert_eq!(
                safe_strtoull(input),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn strtoul_truncates() {
        assert_eq!(safe_strtoul(b"4294967295"), Ok(u32::MAX));
        assert_eq!(safe_strtoul(b"4294967296"), Ok(0));
        assert_eq!(safe_strtoul(b"4294967297"), Ok(1));
        assert_eq!(safe_strtoul(b"-1"), Err(NotANumber));
    }

    #[test]
    fn strtol_table() {
        let cases: &[(&[u8], Result<i32, NotANumber>)] = &[
            (b"0", Ok(0)),
            (b"-1", Ok(-1)),
            (b"+7", Ok(7)),
            (b"2147483647", Ok(i32::MAX)),
            (b"2147483648", Ok(i32::MIN)),
            (b"4294967296", Ok(0)),
            (b"9223372036854775807", Ok(-1)),
            (b"9223372036854775808", Err(NotANumber)),
            (b"-9223372036854775808", Ok(0)),
            (b"-9223372036854775809", Err(NotANumber)),
            (b"1.5", Err(NotANumber)),
            (b"", Err(NotANumber)),
            (b"-", Err(NotANumber)),
        ];
        for (input, want) in cases {
            assert_eq!(
                safe_strtol(input),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
