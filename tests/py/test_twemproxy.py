"""twemproxy (Debian's `nutcracker`) in front of three servers, run from the
example pool config packaging/nutcracker.yml (only its addresses and its request
timeout are changed here), with pymemcache as the clients.

- The example config passes `nutcracker -t` as shipped.
- The text commands twemproxy forwards answer through it as from one server (and
  `version` as one backend's), what it does not speak closes the connection, and
  multi-gets that span the three servers are split and joined.
- Keys spread over all three backends, each on exactly one (read past the proxy).
- One backend is killed with SIGKILL while a second client keeps reading keys on
  the other two: none of those reads fails or stalls; the dead backend's keys
  fail (SERVER_ERROR or a closed connection) until twemproxy ejects it
  (auto_eject_hosts, server_failure_limit), then are misses on a live backend and
  can be stored again; the live keys never move.

Every test runs with memcached backends and with memcrab backends (the `server_kind`
fixture): the assertions are twemproxy's behaviour, and memcrab must give it the
same. Every client call has a socket timeout, every loop a bound in count and time.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

from conftest import REPO_ROOT, free_port

EXAMPLE = REPO_ROOT / "packaging" / "nutcracker.yml"
READY_TIMEOUT_SECS = 10.0
# The example waits 400 ms for a server; two cores running seven suites can
# exceed that for a live server, which would count as its failure and eject it.
TEST_SERVER_TIMEOUT_MS = 2000
CLIENT_TIMEOUT_SECS = 5.0  # > TEST_SERVER_TIMEOUT_MS: twemproxy answers first
KEYS = 90


def nutcracker_bin() -> str:
    path = shutil.which("nutcracker") or "/usr/sbin/nutcracker"
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"nutcracker not found at {path}: apt-get install nutcracker", pytrace=False
        )
    return path


def pool_config(listen_port: int, backend_ports: list[int]) -> str:
    """The example config, listening on `listen_port`, its servers (in order)
    moved to the loopback ports; names, weights and every other key kept."""
    text = EXAMPLE.read_text()
    text, n = re.subn(r"(?m)^(\s*listen:).*$", rf"\g<1> 127.0.0.1:{listen_port}", text)
    assert n == 1, "the example has one pool with one listen line"
    text, n = re.subn(r"(?m)^(\s*timeout:).*$", rf"\g<1> {TEST_SERVER_TIMEOUT_MS}", text)
    assert n == 1
    servers = re.findall(r"(?m)^(\s*- )\S+:\d+:(\d+) (\S+)$", text)
    assert len(servers) == len(backend_ports), servers
    ports = iter(backend_ports)
    text = re.sub(
        r"(?m)^(\s*- )\S+:\d+:(\d+) (\S+)$",
        lambda m: f"{m.group(1)}127.0.0.1:{next(ports)}:{m.group(2)} {m.group(3)}",
        text,
    )
    for needed in ("distribution: ketama", "auto_eject_hosts: true"):
        assert needed in text, f"the example config lost `{needed}`"
    return text


class Proxy:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path):
        self.proc, self.port, self.log = proc, port, log

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def client(self) -> Client:
        return Client(
            ("127.0.0.1", self.port),
            connect_timeout=CLIENT_TIMEOUT_SECS,
            timeout=CLIENT_TIMEOUT_SECS,
        )

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


@pytest.fixture
def backends(server_factory, server_kind):
    return [server_factory.start(server_kind) for _ in range(3)]


@pytest.fixture
def proxy(backends, tmp_path):
    binary = nutcracker_bin()
    for _attempt in range(5):  # a port found free can be taken before nutcracker binds it
        port, stats_port = free_port(), free_port()
        conf = tmp_path / "nutcracker.yml"
        conf.write_text(pool_config(port, [b.port for b in backends]))
        log = tmp_path / f"nutcracker-{port}.log"
        proc = subprocess.Popen(
            [binary, "-c", str(conf), "-s", str(stats_port), "-a", "127.0.0.1", "-o", str(log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        p = Proxy(proc, port, log)
        try:
            deadline = time.monotonic() + READY_TIMEOUT_SECS
            while p.alive():
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail(f"nutcracker did not accept:\n{p.log_tail()}")
                    time.sleep(0.005)
            if p.alive():
                yield p
                assert p.alive(), f"nutcracker died:\n{p.log_tail()}"
                return
            if "in use" not in p.log_tail().lower():
                pytest.fail(f"nutcracker exited at start:\n{p.log_tail()}")
        finally:
            p.stop()
    pytest.fail("nutcracker could not bind a free port in 5 tries")


def direct(server) -> Client:
    return Client(server.pymemcache_server, connect_timeout=5, timeout=5)


def holders(backends, key: str) -> list[int]:
    """Indexes of the live backends that hold `key`, read past the proxy."""
    found = []
    for i, b in enumerate(backends):
        if b.alive():
            c = direct(b)
            try:
                if c.get(key) is not None:
                    found.append(i)
            finally:
                c.close()
    return found


def test_example_config_is_valid():
    out = subprocess.run(
        [nutcracker_bin(), "-t", "-c", str(EXAMPLE)], capture_output=True, timeout=20
    )
    assert out.returncode == 0, out.stderr.decode() + out.stdout.decode()
    assert b"syntax is ok" in out.stderr + out.stdout


def test_commands_through_twemproxy(proxy):
    c = proxy.client()
    try:
        assert c.get("missing") is None
        assert c.set("k", b"v", flags=7)
        assert c.get("k") == b"v"
        assert c.raw_command(b"get k", b"END\r\n") == b"VALUE k 7 1\r\nv\r\n"  # END stripped
        assert c.add("k", b"x", noreply=False) is False
        assert c.add("new", b"x", noreply=False) is True
        assert c.replace("k", b"mid", noreply=False) is True
        assert c.append("k", b">", noreply=False) is True
        assert c.prepend("k", b"<", noreply=False) is True
        value, unique = c.gets("k")
        assert value == b"<mid>"
        assert c.cas("k", b"cas", unique, noreply=False) is True
        assert c.cas("k", b"stale", unique, noreply=False) is False
        assert c.get("k") == b"cas"
        assert c.set("n", b"10")
        assert c.incr("n", 5) == 15
        assert c.decr("n", 100) == 0
        assert c.touch("k", 100, noreply=False) is True
        assert c.delete("k", noreply=False) is True
        assert c.delete("k", noreply=False) is False
        big = bytes(range(256)) * 3900  # ~1 MB, binary-safe
        assert c.set("big", big)
        assert c.get("big") == big
        # A multi-get over keys on all three servers: twemproxy splits it per
        # server and joins the replies in key order.
        many = {f"m:{i}": f"v{i}".encode() for i in range(60)}
        assert c.set_many(many, noreply=False) == []
        assert c.get_many([*many, "absent"]) == many
    finally:
        c.close()


def test_version_forwarded_and_unsupported_commands_closed(proxy, backends):
    # `version` goes to a server: the client reads that server's VERSION line.
    c = proxy.client()
    try:
        versions = set()
        for b in backends:
            d = direct(b)
            try:
                versions.add(d.version())
            finally:
                d.close()
        assert c.version() in versions
    finally:
        c.close()
    # What twemproxy does not speak closes the client's connection (docs/scaling.md).
    binary_noop = bytes([0x80, 0x0A]) + bytes(22)
    for request in [b"mg k v\r\n", b"flush_all\r\n", b"stats\r\n", b"gat 10 k\r\n", binary_noop]:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=CLIENT_TIMEOUT_SECS) as s:
            s.sendall(request)
            assert s.recv(4096) == b"", request


def test_kill_one_backend_under_load(proxy, backends):
    setter = proxy.client()
    keys = {f"key:{i}": f"value:{i}".encode() for i in range(KEYS)}
    try:
        for k, v in keys.items():
            assert setter.set(k, v, noreply=False), k
        assert setter.get_many(list(keys)) == keys
    finally:
        setter.close()
    where = {}
    for k in keys:
        h = holders(backends, k)
        assert len(h) == 1, f"{k} on backends {h}"
        where[k] = h[0]
    counts = [list(where.values()).count(i) for i in range(3)]
    assert min(counts) >= 10, f"ketama spread {counts}"

    victim = 1
    dead_keys = [k for k in keys if where[k] == victim]
    live_keys = [k for k in keys if where[k] != victim]

    # A second client keeps reading the live keys through the kill.
    stop = threading.Event()
    warmed = threading.Event()
    reads = [0]
    failures: list[str] = []

    def steady():
        c = proxy.client()
        deadline = time.monotonic() + 60
        try:
            for n in range(200_000):
                if stop.is_set() or time.monotonic() > deadline:
                    break
                k = live_keys[n % len(live_keys)]
                t0 = time.monotonic()
                try:
                    got = c.get(k)
                except (MemcacheError, OSError) as exc:
                    failures.append(f"{k}: {exc!r}")
                    continue
                if got != keys[k]:
                    failures.append(f"{k}: {got!r}")
                if time.monotonic() - t0 > 1.0:
                    failures.append(f"{k}: {time.monotonic() - t0:.2f} s")
                reads[0] += 1
                if reads[0] == 50:
                    warmed.set()
        finally:
            c.close()
            warmed.set()

    reader = threading.Thread(target=steady, daemon=True)
    reader.start()
    try:
        assert warmed.wait(20), "the reader did not start"
        before_kill = reads[0]
        backends[victim].stop()  # SIGKILL to its process group, then reaped

        # Read the dead backend's keys until twemproxy ejects it and answers
        # them from a live backend (a miss); bounded in rounds and time.
        probe = proxy.client()
        errors, rounds, rerouted, slowest = 0, 0, None, 0.0
        deadline = time.monotonic() + 20
        try:
            while rerouted is None and rounds < 2000 and time.monotonic() < deadline:
                k = dead_keys[rounds % len(dead_keys)]
                rounds += 1
                t0 = time.monotonic()
                try:
                    got = probe.get(k)
                except (MemcacheError, OSError):
                    errors += 1
                    probe.close()  # reconnect: twemproxy may have closed it
                else:
                    assert got is None, f"{k}: the dead backend's value {got!r} was served"
                    rerouted = k
                slowest = max(slowest, time.monotonic() - t0)
            assert rerouted is not None, f"no re-route after {rounds} reads, {errors} errors"
            assert errors >= 1, "the dead backend's keys never failed before ejection"
            assert slowest < TEST_SERVER_TIMEOUT_MS / 1000 + 1, f"a read took {slowest:.2f} s"

            # Ejected: every dead key is a miss on one live backend, and can be
            # stored again there.
            for k in dead_keys:
                assert probe.get(k) is None, k
                assert probe.set(k, b"again:" + keys[k], noreply=False), k
                assert probe.get(k) == b"again:" + keys[k], k
                h = holders(backends, k)
                assert len(h) == 1 and h[0] != victim, f"{k} on {h}"
        finally:
            probe.close()
    finally:
        stop.set()
        reader.join(30)
    assert not reader.is_alive(), "the reader hung"
    assert failures == [], failures[:10]
    assert reads[0] > before_kill, "the reader made no progress after the kill"

    # The live keys never moved and still answer.
    check = proxy.client()
    try:
        assert check.get_many(live_keys) == {k: keys[k] for k in live_keys}
        for k in live_keys:
            assert holders(backends, k) == [where[k]], k
    finally:
        check.close()
    assert proxy.alive(), proxy.log_tail()
