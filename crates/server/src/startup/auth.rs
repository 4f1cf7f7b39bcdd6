//! Authentication: users and passwords for SASL PLAIN over the binary protocol
//! (`-S`, password file named by `MEMCACHED_SASL_PWDB`, as memcached's built-in
//! sasl pwdb) and for the ASCII auth file (`-Y <file>`, memcached 1.6's authfile).
//!
//! Both files hold one `user:password` entry per line (`\n` or `\r\n`). The user is
//! everything before the first `:`. For `-Y` the password is the rest of the line
//! (as memcached's authfile.c); for the SASL pwdb the password ends at the next `:`
//! (memcached's pwdb allows extra `:`-separated fields, which are ignored). A line
//! without `:` (an empty line too, as memcached) makes the file malformed and stops
//! startup; an empty file has no users.
//! Passwords are compared in constant time (for a given password length).

use std::fmt;

/// Which file format rules apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `-Y`: the password is the rest of the line.
    AuthFile,
    /// `MEMCACHED_SASL_PWDB`: the password ends at `:` or the end of the line.
    SaslPwdb,
}

/// The users of one password file.
#[derive(Clone, Default)]
pub struct Users {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for Users {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print passwords.
        write!(f, "Users({} entries)", self.entries.len())
    }
}

impl Users {
    /// Parses a password file's contents. The error names the offending line.
    pub fn parse(data: &[u8], format: Format) -> Result<Users, String> {
        let mut entries = Vec::new();
        // The text after the last newline (usually nothing) is the last line.
        let data = data.strip_suffix(b"\n").unwrap_or(data);
        if data.is_empty() {
            return Ok(Users { entries });
        }
        for (n, line) in data.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                return Err(format!(
                    "line {} has a malformed entry. Should be 'user:password'",
                    n + 1
                ));
            };
            let user = &line[..colon];
            let mut pass = &line[colon + 1..];
            if format == Format::SaslPwdb {
                if let Some(end) = pass.iter().position(|&b| b == b':') {
                    pass = &pass[..end];
                }
            }
            entries.push((user.to_vec(), pass.to_vec()));
        }
        Ok(Users { entries })
    }

    /// Reads and parses a password file; errors are one line naming the file.
    pub fn load(path: &str, format: Format) -> Result<Users, String> {
        let data = std::fs::read(path)
            .map_err(|e| format!("Could not open authfile [{path}] for reading, error {e}"))?;
        Users::parse(&data, format).map_err(|e| format!("Authfile [{path}] {e}"))
    }

    /// Whether `user` with `pass` is an entry. Every entry is compared, and every
    /// byte of an entry of the same length, so the time taken does not tell which
    /// byte differed.
    pub fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        let mut ok = false;
        for (u, p) in &self.entries {
            let m = ct_eq(u, user) & ct_eq(p, pass);
            ok |= m;
        }
        ok
    }
}

/// Constant-time equality for equal lengths (lengths themselves are not secret).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The SASL mechanisms memcrab offers (memcached lists cyrus SASL's plugins).
pub const SASL_MECHS: &[u8] = b"PLAIN";

/// Checks a SASL PLAIN message (`authzid NUL authcid NUL passwd`, RFC 4616). An
/// authorization id other than empty or the user's own is refused.
pub fn sasl_plain(users: &Users, msg: &[u8]) -> bool {
    let mut parts = msg.splitn(3, |&b| b == 0);
    let (Some(authz), Some(user), Some(pass)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if !authz.is_empty() && authz != user {
        return false;
    }
    if user.is_empty() {
        return false;
    }
    users.check(user, pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert!(Users::parse(b"a:b\n\nc:d\n", Format::AuthFile).is_err());
        assert!(Users::parse(b"", Format::AuthFile).is_ok());
        let u = Users::parse(b"alice:pw:x\r\nbob:secret", Format::SaslPwdb).expect("ok");
        assert!(u.check(b"alice", b"pw"));
        assert!(!u.check(b"alice", b"pw:x"));
        assert!(u.check(b"bob", b"secret"));
        let u = Users::parse(b"alice:pw:x\n", Format::AuthFile).expect("ok");
        assert!(u.check(b"alice", b"pw:x"));
        assert!(!u.check(b"alice", b"pw"));
        let e = Users::parse(b"ok:1\nnocolon\n", Format::AuthFile).expect_err("bad");
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn plain() {
        let u = Users::parse(b"u:p\n", Format::SaslPwdb).expect("ok");
        assert!(sasl_plain(&u, b"\0u\0p"));
        assert!(sasl_plain(&u, b"u\0u\0p"));
        assert!(!sasl_plain(&u, b"x\0u\0p"));
        assert!(!sasl_plain(&u, b"\0u\0q"));
        assert!(!sasl_plain(&u, b"\0u"));
    }
}
