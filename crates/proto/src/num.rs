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

/// `safe_strtod`: a floating-point number as C's `strtod` reads one (see
/// [`strtod`]), followed by whitespace or the end. Out of range (`ERANGE`) is
/// [`NotANumber`], as in memcached.
pub fn safe_strtod(s: &[u8]) -> Result<f64, NotANumber> {
    let (v, end, erange) = strtod(s);
    if end == 0 || erange || (end < s.len() && !is_c_space(s[end])) {
        return Err(NotANumber);
    }
    Ok(v)
}

/// C's `atof`, which memcached's `-o` ratios and `-f` use: [`strtod`]'s value, 0
/// where no number starts the text, and what follows the number ignored.
pub fn atof(s: &[u8]) -> f64 {
    strtod(s).0
}

/// C's `strtod` in the "C" locale: leading whitespace, a sign, then decimal digits
/// with an optional fraction and exponent, a hexadecimal float (`0x1.8p-2`: hex
/// digits with an optional fraction, and an optional binary exponent), or `inf`,
/// `infinity`, `nan`. Answers the value, the index one past what was read (0 when
/// no number was read, as C's `endptr == str`), and whether the value overflowed
/// (`ERANGE`). Not reproduced: `nan(...)`, glibc's `ERANGE` on underflow, and a
/// hexadecimal float's rounding past its 16th significant digit (later digits are
/// cut, not rounded).
pub fn strtod(s: &[u8]) -> (f64, usize, bool) {
    let start = s.iter().take_while(|&&b| is_c_space(b)).count();
    let rest = &s[start..];
    let negative = rest.first() == Some(&b'-');
    let i = usize::from(matches!(rest.first(), Some(b'+' | b'-')));
    let word = |w: &[u8], at: usize| {
        rest.len() >= at + w.len() && rest[at..at + w.len()].eq_ignore_ascii_case(w)
    };
    let signed = |v: f64| if negative { -v } else { v };
    if word(b"infinity", i) {
        return (signed(f64::INFINITY), start + i + 8, false);
    }
    if word(b"inf", i) {
        return (signed(f64::INFINITY), start + i + 3, false);
    }
    if word(b"nan", i) {
        return (signed(f64::NAN), start + i + 3, false);
    }
    let (v, end) = if word(b"0x", i) && hex_digits(&rest[i + 2..]).1 > 0 {
        let (v, len) = hex_float(&rest[i + 2..]);
        (v, i + 2 + len)
    } else {
        match decimal_end(rest, i) {
            0 => return (0.0, 0, false),
            end => {
                let text = std::str::from_utf8(&rest[i..end]).unwrap_or("0");
                (text.parse::<f64>().unwrap_or(0.0), end)
            }
        }
    };
    (signed(v), start + end, v.is_infinite())
}

/// Where the decimal number starting at `rest[i]` ends (0: none there).
fn decimal_end(rest: &[u8], mut i: usize) -> usize {
    let digits = |from: usize| {
        rest.get(from..)
            .unwrap_or_default()
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
        return 0;
    }
    if matches!(rest.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(rest.get(i + 1), Some(b'+' | b'-')));
        let exp = digits(i + 1 + sign);
        if exp > 0 {
            i += 1 + sign + exp;
        }
    }
    i
}

/// The hex digits of a hexadecimal float's mantissa (after `0x`): the bytes they
/// span (with one `.`) and how many digits there are.
fn hex_digits(s: &[u8]) -> (usize, usize) {
    let int = s.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if s.get(int) != Some(&b'.') {
        return (int, int);
    }
    let frac = s[int + 1..]
        .iter()
        .take_while(|b| b.is_ascii_hexdigit())
        .count();
    match int + frac {
        0 => (0, 0),
        n => (int + 1 + frac, n),
    }
}

/// A hexadecimal float's magnitude after its `0x` (which has at least one hex
/// digit) and the bytes read: the mantissa's first 16 significant digits, scaled by
/// 2 to the `p` exponent.
fn hex_float(s: &[u8]) -> (f64, usize) {
    let (span, _) = hex_digits(s);
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut significant = 0;
    let mut after_point = false;
    for &b in &s[..span] {
        if b == b'.' {
            after_point = true;
            continue;
        }
        let d = u64::from(char::from(b).to_digit(16).unwrap_or(0));
        if significant < 16 {
            mantissa = mantissa * 16 + d;
            if mantissa > 0 {
                significant += 1;
            }
            if after_point {
                exp -= 4;
            }
        } else if !after_point {
            exp += 4;
        }
    }
    let mut end = span;
    if matches!(s.get(end), Some(b'p' | b'P')) {
        let sign = usize::from(matches!(s.get(end + 1), Some(b'+' | b'-')));
        let digits = s[end + 1 + sign..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits > 0 {
            let mut p: i64 = 0;
            for &b in &s[end + 1 + sign..end + 1 + sign + digits] {
                p = (p * 10 + i64::from(b - b'0')).min(100_000);
            }
            exp += if s[end + 1] == b'-' { -p } else { p };
            end += 1 + sign + digits;
        }
    }
    // Scaled in two steps, so that 2^exp alone neither overflows nor underflows
    // where the product does not.
    let e = exp.clamp(-4000, 4000) as i32;
    let v = mantissa as f64 * 2f64.powi(e / 2) * 2f64.powi(e - e / 2);
    (v, end)
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
    fn strtod_hexadecimal() {
        let cases: &[(&[u8], Option<f64>)] = &[
            (b"0x1p-2", Some(0.25)),
            (b"0X1P1", Some(2.0)),
            (b"-0x1.8p0", Some(-1.5)),
            (b"0x.8", Some(0.5)),
            (b"0xA", Some(10.0)),
            (b"0x1p", None),
            (b"0x", None),
            (b"0x1p99999", None),
            (b"0x0.0000000000000000001p0", Some(2f64.powi(-76))),
            (b"0x1.0000000000000000000000001p0", Some(1.0)),
        ];
        for (input, want) in cases {
            let got = safe_strtod(input).ok();
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(input));
        }
        // What atof reads of a longer text: `0x` alone is the 0 before the x.
        assert_eq!(strtod(b"0x"), (0.0, 1, false));
        assert_eq!(strtod(b"0x1pz"), (1.0, 3, false));
        assert_eq!(strtod(b" 0x1p-1,"), (0.5, 7, false));
        assert_eq!(atof(b"junk"), 0.0);
        assert_eq!(atof(b"0.8x"), 0.8);
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
