//! Which binaries: memcrab as built in this workspace, memcached as installed.

use std::path::{Path, PathBuf};

/// Debian's memcached (1.6.18), the reference the suites are checked against.
pub const MEMCACHED_DEBIAN: &str = "/usr/bin/memcached";

/// The memcrab binary: `$MEMCRAB_BIN`, else `memcrab` in the profile directory of
/// the running tool (`<target>/<profile>/<tool>`) or test
/// (`<target>/<profile>/deps/<test>-<hash>`), else `<target>/release/memcrab`. A test in the server crate itself passes
/// `env!("CARGO_BIN_EXE_memcrab")` instead. Panics with the command that builds it
/// when it is missing.
pub fn memcrab_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMCRAB_BIN").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    // A tool's sibling, a test's (one level up from deps/), then the release build.
    let found = [
        exe.parent().map(|d| d.join("memcrab")),
        exe.ancestors().nth(2).map(|d| d.join("memcrab")),
        exe.ancestors()
            .nth(3)
            .map(|d| d.join("release").join("memcrab")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "no memcrab binary near {}: build it with `cargo build --release -p \
             memcrab-server` (or point MEMCRAB_BIN at a memcrab binary)",
            exe.display()
        )
    })
}

/// The memcached binary: `$MEMCRAB_TEST_MEMCACHED`, else `memcached` on `PATH`.
/// `None` when there is none.
pub fn memcached_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMCRAB_TEST_MEMCACHED").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("memcached"))
            .find(|p| p.is_file())
    })
}

/// Whether `bin` is a memcached (its file name starts with `memcached`), which
/// decides the `-u` it gets as root.
pub fn is_memcached(bin: &Path) -> bool {
    bin.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("memcached"))
}

/// Whether this process runs as root (both servers refuse root without `-u`).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
