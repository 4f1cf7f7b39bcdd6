"""python-binary-memcached (`bmemcached`) against memcrab and memcached: the
binary protocol through a real third-party client, every operation its public
API has (get gets get_multi set set_multi add replace cas delete delete_multi
incr decr flush_all stats), its flags-based transcoding, large values, expiry
and error paths; plus SASL PLAIN (`-S`) against memcrab only (Debian's
memcached needs a cyrus sasldb for `-S`; crates/server/tests/auth.rs covers
that side byte for byte)."""

from __future__ import annotations

import os
import time

import bmemcached
import pytest
from differential import wait_until

BIG = os.urandom(1024 * 1024 - 512)  # incompressible, near the 1 MB item limit


@pytest.fixture
def client(server):
    c = bmemcached.Client([f"127.0.0.1:{server.port}"])
    try:
        yield c
    finally:
        c.disconnect_all()


def test_set_get_miss(client):
    assert client.get("nokey") is None
    assert client.set("k", b"v")
    assert client.get("k") == b"v"


def test_transcoding_flags(client):
    for value in ("text", b"bytes", 42, 1 << 40, 1.5, {"a": [1, 2]}, True):
        assert client.set("t", value)
        assert client.get("t") == value


def test_add_replace(client):
    assert client.replace("k", b"1") is False
    assert client.add("k", b"1")
    assert client.add("k", b"2") is False
    assert client.replace("k", b"3")
    assert client.get("k") == b"3"


def test_gets_cas(client):
    assert client.gets("missing") == (None, None)
    client.set("k", b"a")
    value, cas = client.gets("k")
    assert value == b"a" and cas
    assert client.cas("k", b"b", cas)
    assert client.cas("k", b"c", cas) is False
    assert client.get("k") == b"b"


def test_get_multi_set_multi(client):
    assert client.set_multi({"a": b"1", "b": b"2", "c": 3}) == []  # the keys that failed
    assert client.get_multi(["a", "b", "c", "zz"]) == {"a": b"1", "b": b"2", "c": 3}
    assert client.get_multi([]) == {}


def test_delete(client):
    assert client.delete("k")  # bmemcached counts a missing key (status 1) as deleted
    client.set("k", b"v")
    assert client.delete("k")
    assert client.get("k") is None
    client.set_multi({"x": b"1", "y": b"2"})
    assert client.delete_multi(["x", "y"])
    assert client.get_multi(["x", "y"]) == {}


def test_incr_decr(client):
    # bmemcached sends initial 0, expiration 0: a missing counter is created.
    assert client.incr("n", 5) == 0
    assert client.incr("n", 5) == 5
    assert client.decr("n", 2) == 3
    assert client.decr("n", 10) == 0  # decr floors at zero
    client.set("n", "18446744073709551615")
    assert client.incr("n", 2) == 1  # wraps at 2**64


def test_incr_non_numeric(client):
    client.set("s", b"abc")
    with pytest.raises(bmemcached.exceptions.MemcachedException):
        client.incr("s", 1)


def test_large_value(client):
    assert client.set("big", BIG)
    assert client.get("big") == BIG


def test_too_large_value(client):
    too_big = os.urandom(1024 * 1024 + 1)
    with pytest.raises(bmemcached.exceptions.MemcachedException, match="Too large"):
        client.set("huge", too_big)  # status 3, "Too large."
    assert client.get("huge") is None
    assert client.set("after", b"ok")  # the connection is still usable
    assert client.get("after") == b"ok"


def test_expiry(client):
    # A TTL of 2: the clock counts whole seconds, so a TTL of 1 can run out before
    # the next request; 2 lives 1-2 s. 10 s allowed for a loaded machine.
    assert client.set("e", b"v", time=2)
    assert client.get("e") == b"v"
    wait_until("e to expire", lambda: client.get("e") is None, within=10.0)


def test_flush_all(client):
    client.set("a", b"1")
    assert client.flush_all()
    assert client.get("a") is None


def test_stats(client):
    client.set("a", b"1")
    client.get("a")
    (stats,) = client.stats().values()
    assert int(stats["curr_items"]) == 1
    assert int(stats["get_hits"]) == 1
    assert "version" in stats


# --- SASL PLAIN over binary (memcrab only, see the module docs) ---

USER, PASSWORD = "alice", "s3cret"


@pytest.fixture
def sasl_memcrab(server_factory, tmp_path, monkeypatch):
    """memcrab with `-S`, its users from the file MEMCACHED_SASL_PWDB names."""
    pwdb = tmp_path / "pwdb"
    pwdb.write_text(f"{USER}:{PASSWORD}\n")
    monkeypatch.setenv("MEMCACHED_SASL_PWDB", str(pwdb))
    return server_factory.start("memcrab", ("-S",))


def test_sasl_plain_good_password(sasl_memcrab):
    c = bmemcached.Client([f"127.0.0.1:{sasl_memcrab.port}"], USER, PASSWORD)
    try:
        assert c.set("k", b"v")
        assert c.get("k") == b"v"
        assert c.incr("n", 1) == 0
    finally:
        c.disconnect_all()


def test_sasl_plain_bad_password(sasl_memcrab):
    c = bmemcached.Client([f"127.0.0.1:{sasl_memcrab.port}"], USER, "wrong")
    try:
        with pytest.raises(bmemcached.exceptions.MemcachedException, match="Auth failure"):
            c.set("k", b"v")
    finally:
        c.disconnect_all()
