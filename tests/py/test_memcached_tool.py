"""Debian's memcached-tool (a Perl script installed with memcached, at
/usr/share/memcached/scripts/memcached-tool) against memcached and memcrab:
`keys` and `dump` read `lru_crawler metadump all` (and `dump` then gets every
key), `display` joins `stats items` and `stats slabs` per class, `stats` and
`settings` print those replies. Each mode must finish (the tool waits for END, so
a server that answers a dump with ERROR hangs it) and print what the cache holds.

Every test runs against both servers (the `server` fixture); the tool runs with a
timeout, so a hang fails the test instead of stalling the suite. memcrab answers dumps
as memcached 1.6.45 does (an `OK` line first, `flags=` last), so scripts/test runs
this file with MEMCACHED_BIN set to memcached 1.6.45: the tool reads that format too.
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

TOOL = "/usr/share/memcached/scripts/memcached-tool"
TIMEOUT_SECS = 20



@pytest.fixture(autouse=True)
def _tool_installed():
    if not os.path.exists(TOOL):
        pytest.fail(f"{TOOL} not found: it comes with Debian's memcached package", pytrace=False)

# Keys memcached-tool handles (it prints them back uri-decoded; `dump` sends them
# in `get` lines, so no spaces).
SMALL = {f"small:{i}": f"value-{i}".encode() for i in range(100)}
LARGE = {"large:0": b"L" * 300_000}
ODD = {"pct%key": b"p", "slash/key": b"s"}


def tool(server, *mode) -> str:
    out = subprocess.run(
        ["perl", TOOL, f"127.0.0.1:{server.port}", *mode],
        capture_output=True,
        timeout=TIMEOUT_SECS,
        check=True,
    )
    return out.stdout.decode()


def call(sock, req: bytes, end: bytes) -> bytes:
    sock.sendall(req)
    buf = b""
    while not buf.endswith(end):
        chunk = sock.recv(65536)
        assert chunk, f"connection closed; received {buf!r}"
        buf += chunk
    return buf


@pytest.fixture
def filled(server):
    sock = server.connect()
    items = {**SMALL, **LARGE, **ODD}
    for key, value in items.items():
        req = b"set %s 7 0 %d\r\n%s\r\n" % (key.encode(), len(value), value)
        assert call(sock, req, b"\r\n") == b"STORED\r\n"
    # Dead items a dump must not list: expired (negative exptime), deleted.
    assert call(sock, b"set gone:1 0 -1 1\r\nx\r\n", b"\r\n") == b"STORED\r\n"
    assert call(sock, b"set gone:2 0 0 1\r\nx\r\n", b"\r\n") == b"STORED\r\n"
    assert call(sock, b"delete gone:2\r\n", b"\r\n") == b"DELETED\r\n"
    if server.kind == "memcached":
        # memcached's LRU maintainer starts one crawl of every class soon after
        # start-up, and answers a dump BUSY meanwhile (which the tool would wait on
        # for ever); the next comes seconds after it ends. memcrab starts none.
        deadline = time.monotonic() + 10
        while True:
            st = dict(
                line.split(b" ")[1:3]
                for line in call(sock, b"stats\r\n", b"END\r\n").split(b"\r\n")
                if line.startswith(b"STAT ")
            )
            if int(st[b"lru_crawler_starts"]) >= 1 and st[b"lru_crawler_running"] == b"0":
                break
            # Each `stats` reply is the next look: no sleep between them.
            assert time.monotonic() < deadline, "memcached's first crawl did not end"
    sock.close()
    return items


def test_keys(server, filled):
    out = tool(server, "keys")
    keys = set()
    for line in out.splitlines():
        m = re.fullmatch(
            r"key=(\S+) exp=(-?\d+) la=\d+ cas=\d+ fetch=(yes|no) cls=\d+ size=\d+ flags=7 ", line
        )
        assert m, f"unexpected line {line!r}"
        keys.add(re.sub(r"%(..)", lambda h: chr(int(h.group(1), 16)), m.group(1)))
        assert m.group(2) == "-1"
    assert keys == set(filled)


def test_keys_limit(server, filled):
    out = tool(server, "keys", "5")
    # The tool counts 1.6.43's leading OK line towards the limit, so 4 keys.
    assert len(out.splitlines()) == 4


def test_dump(server, filled):
    out = tool(server, "dump").encode()
    got = {}
    pos = 0
    header = re.compile(rb"add (\S+) (\d+) (\d+) (\d+)\r\n")
    while pos < len(out):
        m = header.match(out, pos)
        assert m, f"unexpected output at {pos}: {out[pos:pos + 80]!r}"
        key, flags, exptime, n = m.group(1).decode(), int(m.group(2)), int(m.group(3)), int(m.group(4))
        assert (flags, exptime) == (7, 0)
        got[key] = out[m.end():m.end() + n]
        assert out[m.end() + n:m.end() + n + 2] == b"\r\n"
        pos = m.end() + n + 2
    assert got == filled


def test_display(server, filled):
    out = tool(server, "display")
    lines = out.splitlines()
    assert lines[0].split() == ["#", "Item_Size", "Max_age", "Pages", "Count", "Full?",
                                "Evicted", "Evict_Time", "OOM"]
    counts = [int(line.split()[4]) for line in lines[1:]]
    assert len(counts) >= 2, out  # the small items' class and the large item's
    assert sum(counts) == len(filled) + 1  # the expired item still counts until reclaimed


def test_stats_and_settings(server, filled):
    stats = dict(line.split() for line in tool(server, "stats").splitlines()[1:])
    assert int(stats["curr_items"]) >= len(filled)
    assert int(stats["cmd_set"]) == len(filled) + 2
    settings = dict(line.split(None, 1) for line in tool(server, "settings").splitlines()[1:])
    assert settings["dump_enabled"].strip() == "yes"
    assert settings["lru_crawler"].strip() == "yes"
