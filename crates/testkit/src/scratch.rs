//! Scratch directories: one per server (its port file, socket and stderr), or for a
//! test's own files.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh, empty directory `memcrab-<tag>-<pid>-<n>` under the system temp dir,
/// removed (with what is in it) on drop.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// Creates the directory, world-writable: memcached started as root drops to
    /// `nobody` before it writes its port file or creates its socket.
    pub fn new(tag: &str) -> io::Result<Scratch> {
        let path = Scratch::fresh_path(tag);
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o777))?;
        Ok(Scratch(path))
    }

    /// A path `memcrab-<tag>-<pid>-<n>` under the system temp dir, unique within
    /// this process; nothing is created.
    pub fn fresh_path(tag: &str) -> PathBuf {
        // Relaxed: the counter only has to hand out distinct numbers.
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        std::env::temp_dir().join(format!(
            "memcrab-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
