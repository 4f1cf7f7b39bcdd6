//! Starting one server process and learning where it listens.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::net::{Ipv6Addr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::bins::{is_memcached, is_root};
use crate::scratch::Scratch;
use crate::wait::POLL_INTERVAL;

/// How long a server may take to bind, unless [`Launch::startup_timeout`] says.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the server is told to listen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// `-l 127.0.0.1:0` before the other flags; the port comes from the port file.
    Tcp,
    /// The flags name their own `-l`/`-p`; the port comes from the port file, whose
    /// first `TCP INET` line wins, else its first `TCP INET6` (on `::1`).
    AsGiven,
    /// `-s <dir>/sock` before the other flags; started once a connect succeeds.
    Unix,
}

/// The `-u` the server gets (both refuse to run as root without one, and both
/// ignore it otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum User {
    /// None when the flags have their own `-u`; else `-u nobody` for memcached
    /// (which leaves root before it writes the port file or socket) and `-u root`
    /// for memcrab (so that it keeps writing as root).
    Auto,
    /// `-u <name>` when running as root, nothing otherwise.
    AsRoot(String),
    /// No `-u`.
    Never,
}

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("create a scratch dir for {bin}: {err}")]
    Scratch { bin: String, err: io::Error },
    #[error("spawn {bin}: {err}")]
    Spawn { bin: String, err: io::Error },
    #[error("{bin} exited ({status}) before it could {what}; stderr: {stderr}")]
    Exited {
        bin: String,
        status: ExitStatus,
        what: &'static str,
        stderr: String,
    },
    #[error("{bin} did not {what} within {within:?}")]
    Timeout {
        bin: String,
        what: &'static str,
        within: Duration,
    },
    #[error("{bin}: no `TCP INET: <port>` line in its port file: {text:?}")]
    NoPort { bin: String, text: String },
}

/// How to start a server: a builder, then [`Launch::start`].
pub struct Launch {
    bin: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    listen: Listen,
    user: User,
    hook: Option<fn() -> io::Result<()>>,
    die_with_parent: bool,
    startup: Duration,
    tag: String,
}

impl Launch {
    /// `bin` on 127.0.0.1, an ephemeral port, with the automatic `-u`.
    pub fn new(bin: impl Into<PathBuf>) -> Launch {
        Launch {
            bin: bin.into(),
            args: Vec::new(),
            env: Vec::new(),
            listen: Listen::Tcp,
            user: User::Auto,
            hook: None,
            die_with_parent: false,
            startup: STARTUP_TIMEOUT,
            tag: "srv".to_string(),
        }
    }

    /// Appends flags.
    pub fn args<I, S>(mut self, args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the server.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Launch {
        self.env.push((name.into(), value.into()));
        self
    }

    pub fn listen(mut self, listen: Listen) -> Launch {
        self.listen = listen;
        self
    }

    pub fn user(mut self, user: User) -> Launch {
        self.user = user;
        self
    }

    /// Runs `hook` in the child between fork and exec; it must be
    /// async-signal-safe (to install a seccomp filter, say).
    pub fn pre_exec(mut self, hook: fn() -> io::Result<()>) -> Launch {
        self.hook = Some(hook);
        self
    }

    /// Has the kernel kill the server (SIGKILL) when this process dies, so that a
    /// tool killed mid-run leaves no server behind.
    pub fn die_with_parent(mut self) -> Launch {
        self.die_with_parent = true;
        self
    }

    pub fn startup_timeout(mut self, within: Duration) -> Launch {
        self.startup = within;
        self
    }

    /// Names the scratch dir `memcrab-<tag>-<pid>-<n>`.
    pub fn tag(mut self, tag: &str) -> Launch {
        self.tag = tag.to_string();
        self
    }

    /// The `-u` flags [`User`] asks for with these flags.
    pub fn user_args(&self) -> Vec<OsString> {
        let has_u = self.args.iter().any(|a| a == "-u");
        let name = match &self.user {
            User::Never => None,
            User::Auto if has_u => None,
            User::Auto if is_memcached(&self.bin) => Some("nobody"),
            User::Auto => Some("root"),
            User::AsRoot(name) => is_root().then_some(name.as_str()),
        };
        name.map_or_else(Vec::new, |n| vec!["-u".into(), n.into()])
    }

    /// Starts the server and waits until it listens.
    pub fn start(self) -> Result<Server, StartError> {
        let bin_text = self.bin.display().to_string();
        let dir = Scratch::new(&self.tag).map_err(|err| StartError::Scratch {
            bin: bin_text.clone(),
            err,
        })?;
        let port_file = dir.path().join("port");
        let sock = dir.path().join("sock");
        let mut cmd = Command::new(&self.bin);
        cmd.args(self.user_args());
        match self.listen {
            Listen::Tcp => {
                cmd.args(["-l", "127.0.0.1:0"]);
            }
            Listen::Unix => {
                cmd.arg("-s").arg(&sock);
            }
            Listen::AsGiven => {}
        }
        cmd.args(&self.args);
        cmd.env_remove("MEMCACHED_PORT_FILENAME");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if self.listen != Listen::Unix {
            cmd.env("MEMCACHED_PORT_FILENAME", &port_file);
        }
        let stderr =
            fs::File::create(dir.path().join("stderr")).map_err(|err| StartError::Scratch {
                bin: bin_text.clone(),
                err,
            })?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr));
        let (hook, die) = (self.hook, self.die_with_parent);
        if hook.is_some() || die {
            // SAFETY: the closure runs in the child between fork and exec; it calls
            // prctl (async-signal-safe) and the caller's hook, which `pre_exec`
            // requires to be async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    if die {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    }
                    hook.map_or(Ok(()), |h| h())
                });
            }
        }
        let child = cmd.spawn().map_err(|err| StartError::Spawn {
            bin: bin_text.clone(),
            err,
        })?;
        let mut server = Server {
            child,
            bin: bin_text,
            tcp: None,
            udp_port: None,
            unix: None,
            port_text: String::new(),
            exited: None,
            dir,
        };
        let deadline = Instant::now() + self.startup;
        if self.listen == Listen::Unix {
            while UnixStream::connect(&sock).is_err() {
                server.check_startup(deadline, self.startup, "accept on its unix socket")?;
                thread::sleep(POLL_INTERVAL);
            }
            server.unix = Some(sock);
            return Ok(server);
        }
        let text = loop {
            // The server writes `<file>.lck` and renames it, so a file that exists
            // is complete.
            if let Ok(text) = fs::read_to_string(&port_file) {
                break text;
            }
            server.check_startup(deadline, self.startup, "write its port file")?;
            thread::sleep(POLL_INTERVAL);
        };
        let port = |prefix: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .and_then(|p| p.trim().parse::<u16>().ok())
        };
        server.tcp = match (port("TCP INET: "), port("TCP INET6: ")) {
            (Some(p), _) => Some(SocketAddr::from(([127, 0, 0, 1], p))),
            (None, Some(p)) => Some(SocketAddr::from((Ipv6Addr::LOCALHOST, p))),
            _ => {
                return Err(StartError::NoPort {
                    bin: server.bin.clone(),
                    text,
                })
            }
        };
        server.udp_port = port("UDP INET: ");
        server.port_text = text;
        Ok(server)
    }
}

/// A running server process, killed (SIGKILL) on drop if it is still running; its
/// scratch dir goes with it.
pub struct Server {
    child: Child,
    bin: String,
    /// The TCP address from the port file (`None` for [`Listen::Unix`]).
    pub tcp: Option<SocketAddr>,
    /// The UDP port from the port file's `UDP INET: <port>` line (`-U`).
    pub udp_port: Option<u16>,
    /// The unix socket ([`Listen::Unix`]).
    pub unix: Option<PathBuf>,
    /// The port file's text (empty for [`Listen::Unix`]).
    pub port_text: String,
    exited: Option<ExitStatus>,
    dir: Scratch,
}

impl Server {
    fn check_startup(
        &mut self,
        deadline: Instant,
        within: Duration,
        what: &'static str,
    ) -> Result<(), StartError> {
        if let Ok(Some(status)) = self.child.try_wait() {
            self.exited = Some(status);
            return Err(StartError::Exited {
                bin: self.bin.clone(),
                status,
                what,
                stderr: self.stderr(),
            });
        }
        if Instant::now() >= deadline {
            return Err(StartError::Timeout {
                bin: self.bin.clone(),
                what,
                within,
            });
        }
        Ok(())
    }

    /// The TCP port (panics for a unix-socket server).
    pub fn port(&self) -> u16 {
        self.tcp.expect("not a TCP server").port()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's scratch dir (its port file, socket and stderr).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    /// The exit status, if the process has exited.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait()?;
        }
        Ok(self.exited)
    }

    /// Waits for the process to exit; panics if it is still running after `within`.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.try_wait().expect("try_wait") {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "server (pid {}) still running {within:?} later",
                self.pid()
            );
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.try_wait().expect("try_wait").is_none()
    }

    /// Kills the server now (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if self.exited.is_none() {
            if let Ok(None) = self.child.try_wait() {
                let _ = self.child.kill();
            }
            self.exited = self.child.wait().ok();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(bin: &str, args: &[&str], user: User) -> Vec<String> {
        Launch::new(bin)
            .args(args.iter().copied())
            .user(user)
            .user_args()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_user_flag_follows_the_binary_and_the_flags() {
        let root = is_root();
        let as_root = |name: &str| -> Vec<String> {
            if root {
                vec!["-u".into(), name.into()]
            } else {
                Vec::new()
            }
        };
        let cases: &[(&str, &[&str], User, Vec<String>)] = &[
            (
                "/usr/bin/memcached",
                &[],
                User::Auto,
                vec!["-u".into(), "nobody".into()],
            ),
            (
                "/x/memcached-1.6.45/bin/memcached",
                &["-m", "8"],
                User::Auto,
                vec!["-u".into(), "nobody".into()],
            ),
            (
                "/x/target/release/memcrab",
                &[],
                User::Auto,
                vec!["-u".into(), "root".into()],
            ),
            (
                "/usr/bin/memcached",
                &["-u", "memcache"],
                User::Auto,
                Vec::new(),
            ),
            ("/x/memcrab", &["-u", "root"], User::Auto, Vec::new()),
            ("/x/memcrab", &[], User::Never, Vec::new()),
            (
                "/usr/bin/memcached",
                &[],
                User::AsRoot("root".into()),
                as_root("root"),
            ),
        ];
        for (bin, args, u, want) in cases {
            assert_eq!(&user(bin, args, u.clone()), want, "{bin} {args:?} {u:?}");
        }
    }

    #[test]
    fn a_missing_binary_is_a_spawn_error() {
        let err = Launch::new("/nonexistent/memcrab").start().err();
        assert!(
            matches!(err, Some(StartError::Spawn { .. })),
            "{:?}",
            err.map(|e| e.to_string())
        );
    }
}
