"""Server fixtures for the differential and client-compatibility suites.

Every server is a real process started on a free loopback port (or a unix
socket), in its own process group, and killed on teardown whatever happens:
fixtures wrap the process in try/finally and kill the whole group, so no test
run ever leaves a server behind. Readiness is polled with connect(), never a
fixed sleep.

Binaries:
  memcached (the oracle)  MEMCACHED_BIN, else memcached 1.6.45 at
                          <repo>/../shared/memcached-1.6.45/bin/memcached (the release
                          the suites pin), else `memcached` on PATH (Debian's 1.6.18)
  memcrab                 MEMCRAB_BIN, else <repo>/target/release/memcrab

Validating the suites without memcrab: MEMCRAB_BIN=/usr/bin/memcached runs
memcached against itself; every test must pass that way.

Fixtures:
  server_factory          start(kind, args=(), unix=False) -> Server, for any number
  memcached_server        the oracle with default flags (or request.param as extra args)
  memcrab_server          memcrab with default flags (or request.param as extra args)
  server                  parametrized over both kinds; extra args from
                          @pytest.mark.server_args("-A", ...)
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# The differential tests' shared assertions live in differential.py: rewrite its asserts
# too, so a failure shows the compared values as in a test module.
pytest.register_assert_rewrite("differential")

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_SECS = 10.0
START_ATTEMPTS = 5  # a port picked by binding port 0 can be taken before the server binds it

KINDS = ("memcached", "memcrab")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "server_args(*args): extra command-line flags for the `server` fixture"
    )


SHARED_MEMCACHED = REPO_ROOT.parent / "shared" / "memcached-1.6.45" / "bin" / "memcached"


def memcached_bin() -> str:
    path = (
        os.environ.get("MEMCACHED_BIN")
        or (str(SHARED_MEMCACHED) if os.access(SHARED_MEMCACHED, os.X_OK) else None)
        or shutil.which("memcached")
        or "/usr/bin/memcached"
    )
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"memcached (the oracle) not found at {path}: install Debian's memcached "
            "(apt-get install memcached) or set MEMCACHED_BIN",
            pytrace=False,
        )
    return path


def memcrab_bin() -> str:
    path = os.environ.get("MEMCRAB_BIN") or str(REPO_ROOT / "target" / "release" / "memcrab")
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"memcrab binary not found at {path}: run `cargo build --release` first, or set "
            "MEMCRAB_BIN (MEMCRAB_BIN=/usr/bin/memcached checks the suites against memcached "
            "itself)",
            pytrace=False,
        )
    return path


def binary_for(kind: str) -> str:
    if kind == "memcached":
        return memcached_bin()
    if kind == "memcrab":
        return memcrab_bin()
    raise ValueError(f"unknown server kind {kind!r}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A running server process. `address` is what socket.connect() takes."""

    kind: str
    args: tuple[str, ...]
    proc: subprocess.Popen
    log_path: Path
    port: int | None = None
    unix_path: str | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def family(self) -> int:
        return socket.AF_UNIX if self.unix_path else socket.AF_INET

    @property
    def address(self):
        return self.unix_path if self.unix_path else ("127.0.0.1", self.port)

    @property
    def pymemcache_server(self):
        """The `server` argument pymemcache's clients take."""
        return self.unix_path if self.unix_path else ("127.0.0.1", self.port)

    def connect(self, timeout: float = 5.0) -> socket.socket:
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(self.address)
        if self.family == socket.AF_INET:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def log_tail(self, limit: int = 2000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", "replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Kill the server's whole process group and reap it; safe to call twice.

        SIGKILL, not SIGTERM: memcached takes about a second to exit on SIGTERM,
        and nothing here depends on a graceful exit."""
        if self._stopped:
            return
        self._stopped = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the group is already gone (e.g. after `shutdown`)
        finally:
            self.proc.wait()
            if self.unix_path:
                shutil.rmtree(os.path.dirname(self.unix_path), ignore_errors=True)

    def describe(self) -> str:
        return f"{self.kind} ({' '.join(self.proc.args)})"


def _user_args() -> list[str]:
    # memcached refuses to run as root without -u; memcrab accepts -u for compatibility.
    if os.geteuid() == 0:
        return ["-u", pwd.getpwuid(0).pw_name]
    return []


def listening(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds a listening TCP socket on `port`.

    A port picked by binding port 0 and closing it can be taken by another test
    process's server (the suites run side by side) before this server binds it; a
    connect would then reach that other server. The kernel's socket tables name
    the listener's inode, and the process's descriptors say whose it is."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    # local_address is ADDR:PORT in hex; state 0A is LISTEN.
                    if len(fields) > 9 and fields[3] == "0A" and \
                            int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{fields[9]}]")
        except OSError:
            continue
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue
    return False


def _wait_ready(server: Server) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECS
    while True:
        if not server.alive():
            raise RuntimeError(
                f"{server.describe()} exited with status {server.proc.returncode} before "
                f"accepting connections:\n{server.log_tail()}"
            )
        try:
            if server.port is not None and not listening(server.proc.pid, server.port):
                raise OSError("not listening yet")
            server.connect(timeout=1.0).close()
            if server.alive():
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{server.describe()} did not accept connections within "
                    f"{READY_TIMEOUT_SECS}s:\n{server.log_tail()}"
                ) from None
            time.sleep(0.005)


def start_server(kind: str, args=(), unix: bool = False, workdir: Path | None = None) -> Server:
    """Start `kind` with memcached-style flags, wait until it accepts, return it.

    The caller owns the returned server and must call stop() (the fixtures do)."""
    binary = binary_for(kind)
    args = tuple(str(a) for a in args)
    workdir = Path(workdir or tempfile.mkdtemp(prefix="memcrab-test-"))
    failure = None
    for attempt in range(START_ATTEMPTS):
        log_path = workdir / f"{kind}-{attempt}-{os.getpid()}-{time.monotonic_ns()}.log"
        if unix:
            # sun_path is short (108 bytes): keep the socket under /tmp.
            unix_path = os.path.join(tempfile.mkdtemp(prefix="mc-", dir="/tmp"), "sock")
            listen = ["-s", unix_path, "-a", "700"]
            port = None
        else:
            unix_path = None
            port = free_port()
            listen = ["-p", str(port), "-l", "127.0.0.1"]
        cmd = [binary, "-U", "0", *listen, *_user_args(), *args]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: killpg reaches everything it spawns
            )
        server = Server(kind, args, proc, log_path, port=port, unix_path=unix_path)
        try:
            _wait_ready(server)
        except RuntimeError as exc:
            server.stop()
            failure = str(exc)
        except BaseException:  # KeyboardInterrupt too: never leave the process behind
            server.stop()
            raise
        else:
            return server
        if "in use" not in failure.lower():
            break
    pytest.fail(f"could not start {kind}: {failure}", pytrace=False)


class ServerFactory:
    """Starts servers on demand and stops every one of them on close()."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.servers: list[Server] = []

    def start(self, kind: str, args=(), unix: bool = False) -> Server:
        server = start_server(kind, args, unix=unix, workdir=self.workdir)
        self.servers.append(server)
        return server

    def close(self) -> None:
        errors = []
        for server in reversed(self.servers):
            try:
                server.stop()
            except BaseException as exc:  # keep stopping the others
                errors.append(exc)
        self.servers.clear()
        if errors:
            raise errors[0]


@pytest.fixture
def server_factory(tmp_path):
    factory = ServerFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.close()


def _extra_args(request) -> tuple[str, ...]:
    args = list(getattr(request, "param", None) or ())
    marker = request.node.get_closest_marker("server_args")
    if marker is not None:
        args.extend(marker.args)
    return tuple(args)


@pytest.fixture
def memcached_server(server_factory, request):
    """The oracle. Extra flags: parametrize indirectly, or @pytest.mark.server_args."""
    return server_factory.start("memcached", _extra_args(request))


@pytest.fixture
def memcrab_server(server_factory, request):
    """memcrab. Extra flags: parametrize indirectly, or @pytest.mark.server_args."""
    return server_factory.start("memcrab", _extra_args(request))


@pytest.fixture(params=KINDS)
def server_kind(request):
    return request.param


@pytest.fixture
def server(server_factory, server_kind, request):
    """One server of each kind in turn (the test runs twice); flags from server_args."""
    marker = request.node.get_closest_marker("server_args")
    args = marker.args if marker is not None else ()
    return server_factory.start(server_kind, args)
