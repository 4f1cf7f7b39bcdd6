//! Opening the memory file and its metadata strictly, as sshd's `StrictModes` opens
//! a user's keys: whoever can write either file writes the server's item memory
//! (it is mapped shared) or forges the next warm restart, so a file that someone
//! other than the server could have written is refused, not used.
//!
//! A file passes when it is a regular file reached without following a symbolic
//! link (`O_NOFOLLOW`: a link planted in place of the file would have the server
//! create, truncate or map whatever it points to), with one name (a hard link to
//! another file is that file), owned by the server's effective user, by root, or by
//! a user the caller trusts (the `-u` user, which writes the metadata at a graceful
//! stop after start-up left root), and writable by its owner only. The checks read
//! the opened descriptor (`fstat`), so what is checked is what is used.
//!
//! Imports: nothing of the engine's.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` with `opts` (which say read/write/create), refusing a symbolic link,
/// then checks the file as the module says. `trusted` are owners allowed besides the
/// effective user and root.
pub fn open(path: &Path, opts: &mut OpenOptions, trusted: &[u32]) -> io::Result<File> {
    let file = opts
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refused(path, "is a symbolic link".to_string())
            } else {
                e
            }
        })?;
    check(path, &file.metadata()?, trusted)?;
    Ok(file)
}

/// Whether an opened file may be trusted (the module's rules).
fn check(path: &Path, m: &Metadata, trusted: &[u32]) -> io::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if !m.file_type().is_file() {
        return Err(refused(path, "is not a regular file".to_string()));
    }
    if m.nlink() > 1 {
        return Err(refused(path, format!("has {} hard links", m.nlink())));
    }
    let owner = m.uid();
    if owner != euid && owner != 0 && !trusted.contains(&owner) {
        return Err(refused(
            path,
            format!("is owned by uid {owner}, not by this server's user (uid {euid}) or root"),
        ));
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(refused(
            path,
            format!("is writable by its group or by others (mode {mode:04o})"),
        ));
    }
    Ok(())
}

fn refused(path: &Path, why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} {why}: refusing it, as anyone who can write it can write the cache",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("memcrab-strict-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("mkdir");
        d
    }

    fn rw() -> OpenOptions {
        let mut o = OpenOptions::new();
        o.read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600);
        o
    }

    #[test]
    fn own_private_file_passes_and_others_are_refused() {
        let d = dir("modes");
        let p = d.join("mem");
        open(&p, &mut rw(), &[]).expect("a new private file");
        for mode in [0o620, 0o602, 0o666] {
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).expect("chmod");
            let e = open(&p, &mut rw(), &[]).expect_err("writable by others");
            assert!(e.to_string().contains("writable"), "{e}");
        }
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).expect("chmod");
        open(&p, &mut rw(), &[]).expect("readable by the group is fine");

        let link = d.join("link");
        std::os::unix::fs::symlink(&p, &link).expect("symlink");
        let e = open(&link, &mut rw(), &[]).expect_err("a symlink");
        assert!(e.to_string().contains("symbolic link"), "{e}");

        let hard = d.join("hard");
        fs::hard_link(&p, &hard).expect("link");
        let e = open(&p, &mut rw(), &[]).expect_err("two names");
        assert!(e.to_string().contains("hard links"), "{e}");
        fs::remove_file(&hard).expect("unlink");

        let e = open(&d, OpenOptions::new().read(true), &[]).expect_err("a directory");
        assert!(e.to_string().contains("regular file"), "{e}");
        let _ = fs::remove_dir_all(&d);
    }
}
