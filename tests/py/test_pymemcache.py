"""Compatibility through a real client: pymemcache 4.0's whole public API.

Every test runs twice, against memcached and against memcrab (the `server`
fixture is parametrized), and asserts the values the client returns, which are
memcached's: a test that passes on memcached and fails on memcrab is a
compatibility bug in memcrab.

pymemcache 4.0 has no gat/gats/verbosity methods; raw_command covers them.
"""

from __future__ import annotations

import os
import re
import threading
import time

import pytest
from differential import wait_until
from pymemcache.client.base import Client, PooledClient
from pymemcache.client.hash import HashClient
from pymemcache.exceptions import (
    MemcacheClientError,
    MemcacheIllegalInputError,
    MemcacheServerError,
    MemcacheUnknownCommandError,
    MemcacheUnknownError,
)
from pymemcache.serde import (
    FLAG_COMPRESSED,
    FLAG_INTEGER,
    FLAG_PICKLE,
    FLAG_TEXT,
    CompressedSerde,
    pickle_serde,
)

TIMEOUT_SECS = 5


def make_client(server, **kw) -> Client:
    kw.setdefault("connect_timeout", TIMEOUT_SECS)
    kw.setdefault("timeout", TIMEOUT_SECS)
    return Client(server.pymemcache_server, **kw)


@pytest.fixture
def client(server):
    """A client that waits for every reply (default_noreply=False)."""
    c = make_client(server, default_noreply=False)
    try:
        yield c
    finally:
        c.close()


def raw_get(client: Client, key: bytes) -> bytes:
    return client.raw_command(b"get " + key, end_tokens=b"END\r\n")


# ---------------------------------------------------------------------------
# storage


def test_set_get(client):
    assert client.set("k", b"value") is True
    assert client.get("k") == b"value"
    assert client.get(b"k") == b"value"
    assert client.get("missing") is None
    assert client.get("missing", default=b"dflt") == b"dflt"
    # No serde: str and int values go out as their text.
    assert client.set("s", "text") is True
    assert client.set("i", 42) is True
    assert client.get_many(["s", "i"]) == {"s": b"text", "i": b"42"}


def test_set_binary_and_empty_values(client):
    value = bytes(range(256)) + b"\r\nEND\r\n"
    assert client.set("bin", value) is True
    assert client.set("empty", b"") is True
    assert client.get("bin") == value
    assert client.get("empty") == b""


def test_set_noreply_variants(server):
    quiet = make_client(server)  # pymemcache's default: default_noreply=True
    loud = make_client(server, default_noreply=False)
    try:
        assert quiet.set("a", b"1") is True
        assert quiet.set("b", b"2", noreply=False) is True
        assert loud.set("c", b"3") is True
        assert loud.set("d", b"4", noreply=True) is True
        # add/replace/append/prepend answer True under noreply even when not stored.
        assert quiet.add("a", b"x") is True
        assert quiet.replace("nope", b"x") is True
        assert quiet.append("nope", b"x") is True
        assert quiet.prepend("nope", b"x") is True
        assert loud.get_many(["a", "b", "c", "d", "nope"]) == {"a": b"1", "b": b"2", "c": b"3", "d": b"4"}
    finally:
        quiet.close()
        loud.close()


def test_flags_and_expire(client):
    assert client.set("f", b"v", flags=123) is True
    assert raw_get(client, b"f") == b"VALUE f 123 1\r\nv\r\n"
    assert client.set("f32", b"v", flags=2**32 - 1) is True
    assert raw_get(client, b"f32") == b"VALUE f32 4294967295 1\r\nv\r\n"
    assert client.set("gone", b"v", expire=-1) is True
    assert client.get("gone") is None
    assert client.set("later", b"v", expire=1000) is True
    assert client.set("abs", b"v", expire=int(time.time()) + 1000) is True
    assert client.set("past", b"v", expire=int(time.time()) - 1000) is True
    assert client.get_many(["later", "abs", "past"]) == {"later": b"v", "abs": b"v"}


def test_set_many_and_set_multi(client):
    values = {f"key{i}": f"v{i}".encode() for i in range(50)}
    assert client.set_many(values) == []
    assert client.set_multi({"m1": b"x", "m2": b"y"}, expire=1000) == []
    got = client.get_many(list(values) + ["m1", "m2", "absent"])
    assert got == {**values, "m1": b"x", "m2": b"y"}
    assert client.get_multi(["m1", "absent", "m2"]) == {"m1": b"x", "m2": b"y"}


def test_add(client):
    assert client.add("k", b"first") is True
    assert client.add("k", b"second") is False
    assert client.get("k") == b"first"
    assert client.add("k", b"third", noreply=True) is True
    assert client.get("k") == b"first"


def test_replace(client):
    assert client.replace("k", b"x") is False
    assert client.get("k") is None
    client.set("k", b"old", flags=5)
    assert client.replace("k", b"new") is True
    assert raw_get(client, b"k") == b"VALUE k 0 3\r\nnew\r\n"


def test_append_prepend(client):
    assert client.append("k", b"x") is False
    assert client.prepend("k", b"x") is False
    client.set("k", b"mid", flags=7)
    assert client.append("k", b">>") is True
    assert client.prepend("k", b"<<") is True
    # append/prepend keep the item's flags.
    assert raw_get(client, b"k") == b"VALUE k 7 7\r\n<<mid>>\r\n"


def test_gets_and_cas(client):
    assert client.gets("k") == (None, None)
    assert client.gets("k", default=b"d", cas_default=b"c") == (b"d", b"c")
    client.set("k", b"v1")
    value, cas = client.gets("k")
    assert value == b"v1"
    assert re.fullmatch(rb"[1-9][0-9]*", cas)
    assert client.cas("k", b"v2", cas) is True
    value2, cas2 = client.gets("k")
    assert value2 == b"v2" and cas2 != cas
    assert client.cas("k", b"v3", cas) is False  # stale unique: EXISTS
    assert client.get("k") == b"v2"
    assert client.cas("missing", b"v", cas) is None  # NOT_FOUND
    assert client.cas("k", b"v4", cas2, noreply=True) is True
    assert client.get("k") == b"v4"
    assert client.cas("k", b"v5", int(client.gets("k")[1])) is True  # int uniques work too
    assert client.get("k") == b"v5"


def test_cas_disabled_gives_zero(server_factory, server_kind):
    server = server_factory.start(server_kind, ("-C",))
    c = make_client(server, default_noreply=False)
    try:
        c.set("k", b"v")
        assert c.gets("k") == (b"v", b"0")
        assert c.gets_many(["k"]) == {"k": (b"v", b"0")}
    finally:
        c.close()


def test_gets_many(client):
    client.set_many({"a": b"1", "b": b"2"})
    got = client.gets_many(["a", "b", "c"])
    assert set(got) == {"a", "b"}
    assert got["a"][0] == b"1" and got["b"][0] == b"2"
    assert got["a"][1] != got["b"][1]
    assert client.gets_many([]) == {}


def test_large_values(client):
    big = bytes(range(256)) * 4000  # 1,024,000 bytes: fits under the default -I 1m
    assert client.set("big", big) is True
    assert client.get("big") == big
    with pytest.raises(MemcacheServerError, match="object too large for cache"):
        client.set("big", b"x" * (1024 * 1024 + 1))
    # memcached drops the old value when a set is too large.
    assert client.get("big") is None


# ---------------------------------------------------------------------------
# get-side, delete, arithmetic, touch


def test_get_many_duplicates_and_empty(client):
    client.set("a", b"1")
    assert client.get_many([]) == {}
    assert client.get_many(["a", "a", "b"]) == {"a": b"1"}
    keys = [f"many{i}" for i in range(300)]
    client.set_many({k: k.encode() for k in keys[::2]})
    assert client.get_many(keys) == {k: k.encode() for k in keys[::2]}


def test_delete(client):
    client.set_many({"a": b"1", "b": b"2"})
    assert client.delete("a") is True
    assert client.delete("a") is False
    assert client.delete("b", noreply=True) is True
    assert client.delete("never", noreply=True) is True
    assert client.get_many(["a", "b"]) == {}


def test_delete_many_and_multi(client):
    client.set_many({f"d{i}": b"x" for i in range(10)})
    assert client.delete_many([f"d{i}" for i in range(5)]) is True
    assert client.delete_multi(["d5", "d6", "nope"]) is True
    assert client.get_many([f"d{i}" for i in range(10)]) == {f"d{i}": b"x" for i in range(7, 10)}
    assert client.delete_many([]) is True


def test_incr_decr(client):
    assert client.incr("n", 1) is None
    assert client.decr("n", 1) is None
    client.set("n", b"10")
    assert client.incr("n", 5) == 15
    assert client.decr("n", 20) == 0  # decr floors at 0
    assert client.incr("n", 2**64 - 1) == 2**64 - 1
    assert client.incr("n", 2) == 1  # incr wraps at 2**64
    assert client.incr("n", 1, noreply=True) is None
    assert client.get("n") == b"2" + b" " * 19  # shrunk in place, padded with spaces
    client.set("t", b"10")
    assert client.decr("t", 1) == 9
    assert client.get("t") == b"9 "
    assert client.incr("t", 91) == 100
    assert client.get("t") == b"100"


def test_incr_errors(client):
    client.set("s", b"abc")
    with pytest.raises(MemcacheClientError, match="cannot increment or decrement non-numeric value"):
        client.incr("s", 1)
    with pytest.raises(MemcacheClientError, match="cannot increment or decrement non-numeric value"):
        client.decr("s", 1)
    with pytest.raises(MemcacheIllegalInputError):
        client.incr("s", "x")
    # The connection is still usable afterwards.
    assert client.get("s") == b"abc"


def test_touch(client):
    assert client.touch("k", 100) is False
    client.set("k", b"v")
    assert client.touch("k", 100) is True
    assert client.touch("k", 100, noreply=True) is True
    assert client.touch("k", -1) is True
    assert client.get("k") is None


def test_gat_gats_via_raw_command(client):
    client.set("k", b"v", flags=3)
    assert client.raw_command("gat 100 k", end_tokens="END\r\n") == b"VALUE k 3 1\r\nv\r\n"
    line = client.raw_command("gats 100 k nope", end_tokens="END\r\n")
    assert re.fullmatch(rb"VALUE k 3 1 [1-9][0-9]*\r\nv\r\n", line)
    assert client.raw_command("gat -1 k", end_tokens="END\r\n") == b"VALUE k 3 1\r\nv\r\n"
    assert client.get("k") is None


def test_expiry_and_dict_protocol(client):
    client["k"] = b"v"
    assert client["k"] == b"v"
    del client["k"]
    with pytest.raises(KeyError):
        client["k"]
    client.set("short", b"v", expire=1)
    # Gone within 2 s (the clock counts whole seconds); 10 s allowed for a loaded machine.
    wait_until("short to expire", lambda: client.get("short") is None, within=10.0)


# ---------------------------------------------------------------------------
# keys


@pytest.mark.parametrize(
    "key",
    ["has space", "tab\tkey", "new\nline", "k" * 251, "nul\x00key", "ключ", " lead", "trail "],
)
def test_invalid_keys_rejected_by_client(client, key):
    with pytest.raises(MemcacheIllegalInputError):
        client.set(key, b"v")
    with pytest.raises(MemcacheIllegalInputError):
        client.get(key)
    assert client.version()  # nothing half-sent


def test_key_limits_and_bytes(client):
    assert client.set("k" * 250, b"max") is True
    assert client.get("k" * 250) == b"max"
    raw = b"caf\xc3\xa9\x01\x7f\xff"
    assert client.set(raw, b"bytes key") is True
    assert client.get(raw) == b"bytes key"
    assert client.get_many([raw, b"other"]) == {raw: b"bytes key"}


def test_unicode_keys(server):
    c = make_client(server, allow_unicode_keys=True, default_noreply=False)
    try:
        assert c.set("café", b"1") is True
        assert c.set("ключ", b"2") is True
        assert c.get("café") == b"1"
        assert c.get("caf\u00e9".encode("utf8")) == b"1"
        assert c.get_many(["café", "ключ", "nope"]) == {"café": b"1", "ключ": b"2"}
    finally:
        c.close()


def test_key_prefix(server):
    prefixed = make_client(server, key_prefix=b"app:", default_noreply=False)
    plain = make_client(server, default_noreply=False)
    try:
        prefixed.set("k", b"v")
        assert prefixed.get("k") == b"v"
        assert plain.get("app:k") == b"v"
        assert plain.get("k") is None
        assert prefixed.get_many(["k", "x"]) == {"k": b"v"}
        assert prefixed.check_key("k", b"app:") == b"app:k"
    finally:
        prefixed.close()
        plain.close()


# ---------------------------------------------------------------------------
# serde


SERDE_VALUES = {
    "bytes": (b"raw\x00bytes", 0),
    "str": ("unicode ✓ text", FLAG_TEXT),
    "int": (1234567890123, FLAG_INTEGER),
    "neg": (-5, FLAG_INTEGER),
    "dict": ({"a": [1, 2.5, None], "b": ("t",)}, FLAG_PICKLE),
    "list": ([1, "two", b"three"], FLAG_PICKLE),
    "float": (3.25, FLAG_PICKLE),
    "none": (None, FLAG_PICKLE),
    "bool": (True, FLAG_PICKLE),
    "bigint_obj": ({"n": 2**100}, FLAG_PICKLE),
}


def test_pickle_serde(server):
    c = make_client(server, serde=pickle_serde, default_noreply=False)
    plain = make_client(server, default_noreply=False)
    try:
        for key, (value, _flags) in SERDE_VALUES.items():
            assert c.set(key, value) is True
        assert c.get_many(list(SERDE_VALUES)) == {k: v for k, (v, _) in SERDE_VALUES.items()}
        for key, (value, flags) in SERDE_VALUES.items():
            assert c.get(key) == value
            header = raw_get(plain, key.encode()).split(b"\r\n", 1)[0]
            assert header.split(b" ")[2] == str(flags).encode(), (key, header)
        # Integers are stored as text, so incr works on them and the flags survive.
        assert c.set("counter", 41) is True
        assert c.incr("counter", 1) == 42
        assert c.get("counter") == 42
        value, cas = c.gets("dict")
        assert value == SERDE_VALUES["dict"][0]
        assert c.cas("dict", {"replaced": True}, cas) is True
        assert c.get("dict") == {"replaced": True}
        assert c.set_many({"m1": [1], "m2": "two"}) == []
        assert c.gets_many(["m1", "m2"])["m2"][0] == "two"
    finally:
        c.close()
        plain.close()


def test_compressed_serde(server):
    c = make_client(server, serde=CompressedSerde(min_compress_len=10), default_noreply=False)
    plain = make_client(server, default_noreply=False)
    try:
        value = "compressible " * 1000
        assert c.set("z", value) is True
        assert c.get("z") == value
        header = raw_get(plain, b"z").split(b"\r\n", 1)[0]
        _, _, flags, size = header.split(b" ")
        assert int(flags) == FLAG_TEXT | FLAG_COMPRESSED
        assert int(size) < len(value) // 10
    finally:
        c.close()
        plain.close()


# ---------------------------------------------------------------------------
# administrative commands


def test_stats(client, server_kind):
    client.set_many({"a": b"1", "b": b"2"})
    client.get_many(["a", "zz"])
    stats = client.stats()
    assert stats[b"curr_items"] == 2
    assert stats[b"total_items"] == 2
    assert stats[b"cmd_get"] == 2
    assert stats[b"get_hits"] == 1
    assert stats[b"get_misses"] == 1
    assert stats[b"cmd_set"] == 2
    assert stats[b"limit_maxbytes"] == 64 * 1024 * 1024
    # memcached runs -t (4) threads; memcrab reports the workers it runs: -t capped
    # at the CPUs it may use.
    threads = 4 if server_kind == "memcached" else min(4, len(os.sched_getaffinity(0)))
    assert stats[b"threads"] == threads
    assert isinstance(stats[b"pid"], int) and stats[b"pid"] > 0
    assert isinstance(stats[b"uptime"], int)
    assert isinstance(stats[b"rusage_user"], float)
    assert re.match(rb"1\.6\.\d+", stats[b"version"])
    for name in (b"curr_connections", b"total_connections", b"bytes", b"evictions", b"bytes_read"):
        assert isinstance(stats[name], int), name


def test_stats_with_args(client):
    settings = client.stats("settings")
    assert settings[b"maxbytes"] == 64 * 1024 * 1024
    assert settings[b"maxconns"] == 1024
    assert settings[b"item_size_max"] == 1024 * 1024
    assert settings[b"cas_enabled"] == b"yes"  # pymemcache expects 0/1 here and keeps the bytes
    assert settings[b"evictions"] == b"on"
    assert settings[b"num_threads"] == 4
    client.set("a", b"1")
    items = client.stats("items")
    assert items[b"items:1:number"] == 1
    slabs = client.stats("slabs")
    assert slabs[b"active_slabs"] == 1
    assert slabs[b"1:cmd_set"] == 1
    conns = client.stats("conns")
    assert any(k.endswith(b":addr") for k in conns)
    # `stats reset` answers RESET, which pymemcache's stats() does not expect.
    with pytest.raises(MemcacheUnknownError):
        client.stats("reset")
    assert client.stats()[b"cmd_set"] == 0
    with pytest.raises(MemcacheUnknownCommandError):
        client.stats("bogus")


def test_cache_memlimit(client):
    assert client.cache_memlimit(100) is True
    assert client.stats()[b"limit_maxbytes"] == 100 * 1024 * 1024
    assert client.stats("settings")[b"maxbytes"] == 100 * 1024 * 1024
    with pytest.raises(MemcacheUnknownError, match="MEMLIMIT_TOO_SMALL"):
        client.cache_memlimit(7)
    with pytest.raises(MemcacheIllegalInputError):
        client.cache_memlimit("lots")


def test_version(client):
    assert re.match(rb"1\.6\.\d+", client.version())


def test_flush_all(client):
    client.set_many({"a": b"1", "b": b"2"})
    assert client.flush_all() is True
    assert client.get_many(["a", "b"]) == {}
    client.set("c", b"3")
    assert client.flush_all(noreply=True) is True
    assert client.get("c") is None


def test_flush_all_delay(client):
    client.set("a", b"1")
    assert client.flush_all(delay=2) is True
    assert client.get("a") == b"1"
    # Flushed within 2 s (the clock counts whole seconds); 10 s allowed for a loaded
    # machine.
    wait_until("the delayed flush", lambda: client.get("a") is None, within=10.0)


def test_quit_and_close_reconnect(client):
    client.set("k", b"v")
    client.quit()
    assert client.sock is None
    assert client.get("k") == b"v"  # reconnects
    client.close()
    assert client.get("k") == b"v"
    client.disconnect_all()
    assert client.get("k") == b"v"


def test_raw_command(client):
    assert re.match(rb"VERSION 1\.6\.\d+", client.raw_command("version"))
    assert client.raw_command("set k 0 0 1\r\nv") == b"STORED"
    assert client.raw_command(b"get k", end_tokens=b"END\r\n") == b"VALUE k 0 1\r\nv\r\n"
    assert client.raw_command("verbosity 1") == b"OK"
    assert client.raw_command("verbosity 0 noreply\r\nversion").startswith(b"VERSION ")
    # memcached 1.6.45 ignores what follows the key (1.6.18 refused `delete k 1`).
    assert client.raw_command("delete k 1") == b"DELETED"
    with pytest.raises(MemcacheClientError, match="bad command line format"):
        client.raw_command("delete")
    with pytest.raises(MemcacheUnknownCommandError):
        client.raw_command("bogus")


def test_shutdown_not_enabled(client):
    # "SERVER_ERROR: shutdown not enabled" (1.6.18: "ERROR: ...", an unknown command).
    with pytest.raises(MemcacheServerError, match="shutdown not enabled"):
        client.shutdown()
    assert client.get("k") is None  # still serving


@pytest.mark.server_args("-A")
@pytest.mark.parametrize("graceful", [False, True])
def test_shutdown(server, graceful):
    c = make_client(server, default_noreply=False)
    try:
        c.set("k", b"v")
        c.shutdown(graceful=graceful)
        assert server.proc.wait(timeout=5) == 0
    finally:
        c.close()


def test_unix_socket(server_factory, server_kind):
    server = server_factory.start(server_kind, unix=True)
    c = make_client(server, default_noreply=False)
    try:
        assert c.set("k", b"v") is True
        assert c.get("k") == b"v"
        settings = c.stats("settings")
        assert settings[b"domain_socket"] == server.unix_path.encode()
        # memcached reports the default TCP port even though -s turned TCP off.
        assert settings[b"tcpport"] == 11211
    finally:
        c.close()


def test_errors_keep_connection_usable(server_factory, server_kind):
    # slab_chunk_max is in kilobytes in memcached 1.6.45.
    server = server_factory.start(server_kind, ("-I", "1k", "-o", "slab_chunk_max=1"))
    c = make_client(server, default_noreply=False)
    try:
        c.set("k", b"old")
        with pytest.raises(MemcacheServerError, match="object too large for cache"):
            c.set("k", b"x" * 2000)
        assert c.get("k") is None
        c.set("k", b"y" * 600)
        assert c.append("k", b"z" * 600) is False  # would exceed -I: NOT_STORED
        assert c.get("k") == b"y" * 600
    finally:
        c.close()


def test_out_of_memory(server_factory, server_kind):
    server = server_factory.start(server_kind, ("-m", "8", "-M"))
    c = make_client(server, default_noreply=False)
    try:
        stored = 0
        with pytest.raises(MemcacheServerError, match="out of memory storing object"):
            for i in range(200):
                c.set(f"k{i}", b"v" * 100_000)
                stored += 1
        assert 40 <= stored <= 84  # 8 MB of 100 kB values, less the engine's overhead
        assert c.get("k0") == b"v" * 100_000
        assert c.stats()[b"evictions"] == 0
    finally:
        c.close()


# ---------------------------------------------------------------------------
# pooled and hashed clients


def test_pooled_client(server):
    pool = PooledClient(
        server.pymemcache_server, max_pool_size=8, connect_timeout=TIMEOUT_SECS,
        timeout=TIMEOUT_SECS, default_noreply=False, serde=pickle_serde,
    )
    try:
        assert pool.set("counter", 0) is True
        errors = []

        def work():
            try:
                for _ in range(100):
                    pool.incr("counter", 1)
            except Exception as exc:  # surfaced by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert errors == []
        assert pool.get("counter") == 800
        assert pool.add("counter", 1) is False
        assert pool.replace("counter", 5) is True
        assert pool.append("s", b"x") is False
        pool.set("s", "mid")
        assert pool.append("s", "R") is True and pool.prepend("s", "L") is True
        assert pool.get("s") == "LmidR"
        value, cas = pool.gets("s")
        assert pool.cas("s", "new", cas) is True and pool.cas("s", "newer", cas) is False
        assert pool.set_many({"a": 1, "b": [2]}) == []
        assert pool.get_many(["a", "b", "c"]) == {"a": 1, "b": [2]}
        assert set(pool.gets_many(["a", "b"])) == {"a", "b"}
        assert pool.decr("a", 5) == 0
        assert pool.touch("a", 100) is True
        assert pool.delete("a") is True and pool.delete_many(["b", "s"]) is True
        assert pool.get_many(["a", "b", "s"]) == {}
        assert pool.stats()[b"curr_items"] == 1
        assert re.match(rb"1\.6\.\d+", pool.version())
        assert pool.raw_command("version").startswith(b"VERSION ")
        assert pool.flush_all() is True
        assert pool.get("counter") is None
        pool.quit()
        assert pool.get("counter") is None
    finally:
        pool.close()


def test_hash_client_two_servers(server_factory, server_kind):
    servers = [server_factory.start(server_kind), server_factory.start(server_kind)]
    hashed = HashClient(
        [s.pymemcache_server for s in servers], connect_timeout=TIMEOUT_SECS, timeout=TIMEOUT_SECS,
        default_noreply=False, serde=pickle_serde,
    )
    direct = [make_client(s, default_noreply=False) for s in servers]
    try:
        values = {f"key{i}": i for i in range(200)}
        assert hashed.set_many(values) == []
        assert hashed.get_many(list(values) + ["absent"]) == values
        counts = [d.stats()[b"curr_items"] for d in direct]
        assert sum(counts) == 200 and min(counts) > 0, counts  # both servers hold keys
        assert hashed.get("key7") == 7
        assert hashed.incr("key7", 3) == 10
        assert hashed.decr("key7", 20) == 0
        assert hashed.add("key7", 1) is False and hashed.add("new", 1) is True
        assert hashed.replace("new", "x") is True
        assert hashed.append("new", "y") is True and hashed.prepend("new", "w") is True
        assert hashed.get("new") == "wxy"
        value, cas = hashed.gets("new")
        assert value == "wxy"
        assert hashed.cas("new", "z", cas) is True
        assert hashed.cas("new", "zz", cas) is False
        many = hashed.gets_many(["new", "key1"])
        assert many["new"][0] == "z" and many["key1"][0] == 1
        assert hashed.touch("key1", 100) is True and hashed.touch("nope", 100) is False
        assert hashed.delete("key1") is True and hashed.delete("key1") is False
        assert hashed.delete_many([f"key{i}" for i in range(100)]) is True
        assert sum(d.stats()[b"curr_items"] for d in direct) == 101
        hashed.flush_all()
        assert hashed.get_many(list(values) + ["new"]) == {}
    finally:
        hashed.close()
        for d in direct:
            d.close()
