//! Running under a service manager the way memcached 1.6 does: `-u` (leave root),
//! `-r` (core files), `-d` (daemonize) and `-P` (pid file), and SIGHUP's reload
//! ([`reload`]). `main` calls these in memcached's order:
//!
//! ```text
//!   refuse root without -u (exit 64) / unknown -u user (exit 67)
//!   -r: raise RLIMIT_CORE
//!   bind TCP and UDP                  ← as root, so ports below 1024 work
//!   leave root: groups, gid, uid      (exit 71 on failure)
//!   bind the unix socket              ← as the -u user, as memcached, so the
//!                                       socket file belongs to that user
//!   -d: fork, setsid, chdir /, stdio → /dev/null
//!   -P: write the pid file            ← as the -u user, after daemonizing
//!   serve ... exit: remove the pid file
//! ```
//!
//! Differences from memcached, all where memcached's behaviour is an accident:
//! memcached binds TCP/UDP after leaving root (its own comment says before), so it
//! cannot serve a port below 1024; memcrab binds them first. `-d` makes `-P`, `-Y`
//! and `MEMCACHED_SASL_PWDB` paths absolute before the `chdir("/")` (settings/parse.rs),
//! where memcached would write `-P rel.pid` to `/rel.pid`. memcached removes the pid
//! file on exit only with `-d`; memcrab removes it on every clean exit, if it still
//! holds memcrab's pid. memcached ignores SIGHUP under `-d`; memcrab reloads.
//!
//! Errors are [`Failure`]s: memcached's exact message and exit status (sysexits.h),
//! which `main` prints as they are, without the `memcrab:` prefix.

use std::ffi::CString;
use std::fmt;
use std::path::{Path, PathBuf};

use nix::unistd::{self, User};

use crate::server::Server;
use crate::startup::certs;
use crate::startup::settings::Settings;

/// sysexits.h, as memcached exits.
pub const EX_NOUSER: i32 = 67;
pub const EX_OSERR: i32 = 71;

/// A startup failure with memcached's message and exit status.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub msg: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Failure {}

fn fail(code: i32, msg: String) -> Failure {
    Failure { code, msg }
}

/// Whether the process runs as root (real or effective uid 0, as memcached checks).
pub fn is_root() -> bool {
    unistd::getuid().is_root() || unistd::geteuid().is_root()
}

/// The user `-u` names, when there is root to leave; `-u` is ignored when not
/// root, as in memcached.
///
/// Deliberate difference: memcached refuses to run as root without `-u` (exit 64,
/// "can't run as root without the -u switch"); memcrab prints that line as a
/// warning and runs as root, so that `cargo run --release` (the README's first
/// command) starts the server for a root user too. The packaged unit and conf
/// always pass `-u`.
pub fn target_user(s: &Settings) -> Result<Option<User>, Failure> {
    if !is_root() {
        return Ok(None);
    }
    let Some(name) = s.user.as_deref().filter(|u| !u.is_empty()) else {
        eprintln!(
            "memcrab: warning: can't run as root without the -u switch; running as root \
             (memcached would exit 64)"
        );
        return Ok(None);
    };
    match User::from_name(name) {
        Ok(Some(u)) => Ok(Some(u)),
        _ => Err(fail(
            EX_NOUSER,
            format!("can't find the user {name} to switch to"),
        )),
    }
}

/// Leaves root for `user`: supplementary groups (the user's own, from the group
/// database), then the gid, then the uid, so that nothing of root's remains.
/// memcached clears the supplementary groups (`setgroups(0, NULL)`); memcrab gives
/// the user its groups, as `su`, systemd's `User=` and the official image do, so
/// that group-readable files (a TLS key in `ssl-cert`, say) can be shared with it.
/// An EPERM from the group step is tolerated, as in memcached (already unprivileged).
pub fn switch_user(user: &User) -> Result<(), Failure> {
    let identity = || {
        fail(
            EX_OSERR,
            format!("failed to assume identity of user {}", user.name),
        )
    };
    let name = CString::new(user.name.as_str()).map_err(|_| identity())?;
    if let Err(e) = unistd::initgroups(&name, user.gid) {
        let msg = format!("failed to drop supplementary groups: {}", e.desc());
        if e != nix::errno::Errno::EPERM {
            return Err(fail(EX_OSERR, msg));
        }
        eprintln!("{msg}");
    }
    unistd::setgid(user.gid).map_err(|_| identity())?;
    unistd::setuid(user.uid).map_err(|_| identity())?;
    // Leaving root must be for good: were setuid to have kept a saved uid of 0,
    // getting it back would succeed.
    if !user.uid.is_root() && unistd::setuid(unistd::Uid::from_raw(0)).is_ok() {
        return Err(identity());
    }
    Ok(())
}

/// `-r`: raise the core file size limit as far as allowed (memcached's `maxcore`).
pub fn enable_coredumps() -> Result<(), Failure> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};
    let (_, max) = getrlimit(Resource::RLIMIT_CORE)
        .map_err(|_| fail(EX_OSERR, "failed to getrlimit core file size".into()))?;
    if setrlimit(Resource::RLIMIT_CORE, RLIM_INFINITY, RLIM_INFINITY).is_err() {
        let _ = setrlimit(Resource::RLIMIT_CORE, max, max);
    }
    match getrlimit(Resource::RLIMIT_CORE) {
        Ok((cur, _)) if cur != 0 => Ok(()),
        _ => Err(fail(EX_OSERR, "failed to ensure corefile creation".into())),
    }
}

/// `-d`: memcached's daemonize(): fork (the parent exits 0), setsid, `chdir("/")`
/// unless `-r` (a core file then lands in the starting directory), and stdio to
/// /dev/null unless `-v`. Must run while the process has one thread.
pub fn daemonize(nochdir: bool, noclose: bool) -> Result<(), Failure> {
    unistd::daemon(nochdir, noclose)
        .map_err(|_| fail(1, "failed to daemon() in order to daemonize".to_string()))
}

/// `-P`: the pid file, written as memcached's save_pid: a warning if it names a
/// running process, then `<file>.tmp` renamed into place so that a reader never
/// sees it empty. A file that cannot be written is a warning, not a failure (as in
/// memcached; with `-u` it is written as that user, so its directory must be
/// writable by the user, as for memcached).
pub struct PidFile {
    path: PathBuf,
    pid: u32,
}

impl PidFile {
    pub fn write(path: &str) -> Option<PidFile> {
        let path = PathBuf::from(path);
        if let Some(old) = read_pid(&path) {
            if nix::sys::signal::kill(unistd::Pid::from_raw(old), None).is_ok() {
                eprintln!("WARNING: The pid file contained the following (running) pid: {old}");
            }
        }
        let pid = std::process::id();
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        if let Err(e) = std::fs::write(&tmp, format!("{pid}\n")) {
            eprintln!(
                "Could not open the pid file {} for writing: {e}",
                tmp.display()
            );
            return None;
        }
        if let Err(e) = std::fs::rename(&tmp, &path) {
            eprintln!(
                "Could not rename the pid file from {} to {}: {e}",
                tmp.display(),
                path.display()
            );
            let _ = std::fs::remove_file(&tmp);
            return None;
        }
        Some(PidFile { path, pid })
    }

    /// Removes the file at a clean exit, unless another process has since put its
    /// own pid there.
    pub fn remove(self) {
        if read_pid(&self.path).is_some_and(|p| u32::try_from(p) == Ok(self.pid)) {
            if let Err(e) = std::fs::remove_file(&self.path) {
                eprintln!("Could not remove the pid file {}: {e}", self.path.display());
            }
        }
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path)
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&p| p > 0)
}

/// SIGHUP: re-reads everything that can change without a restart. This is the
/// one place for it; each step keeps its old state when its file is bad, and
/// nothing here stops the server. Today: the users of `-Y` / `-S` (memcached
/// reloads its `-Y` file on SIGHUP too), and the TLS certificates (`-Z`; memcached
/// reloads them only on `refresh_certs`).
pub fn reload(server: &Server) {
    let verbose = server.verbosity.load(std::sync::atomic::Ordering::Relaxed) > 0;
    match server.load_users() {
        Ok(()) if verbose && server.settings.users_file.is_some() => {
            eprintln!("memcrab: SIGHUP: reloaded the users");
        }
        Ok(()) => {}
        Err(e) => eprintln!("memcrab: SIGHUP: {e}; keeping the users loaded before"),
    }
    // New TLS connections get the files' certificates from now on; a broken
    // file changes nothing.
    if let Some(tls) = &server.tls {
        if let Err(e) = certs::reload_certs(Some(tls), &server.settings.tls) {
            eprintln!("memcrab: SIGHUP: {e}");
        }
    }
}
