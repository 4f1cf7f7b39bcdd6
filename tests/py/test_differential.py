"""Differential tests: memcrab must answer every conversation here byte for byte
as memcached 1.6.45 does (see differential.py for the harness and the masking).

Each case starts a fresh memcached and a fresh memcrab with the case's flags,
plays the conversation to both at once, and compares the masked replies step
by step. Cases with `expect=` also pin memcached's own reply, so the quirks a
reader may doubt are written down here with their exact bytes.
"""

from __future__ import annotations

import difflib

import pytest

from differential import CLOSED, Case, CasNames, S, assert_same_as_memcached, mask, read_reply, read_until

K250 = b"k" * 250
K251 = b"k" * 251
U64_MAX = b"18446744073709551615"
BAD_FORMAT = b"CLIENT_ERROR bad command line format\r\n"
TOO_LARGE = b"SERVER_ERROR object too large for cache\r\n"
NON_NUMERIC = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
BAD_DELTA = b"CLIENT_ERROR invalid numeric delta argument\r\n"
BAD_EXPTIME = b"CLIENT_ERROR invalid exptime argument\r\n"
# memcached needs slab_chunk_max <= -I below 512k (1.6.45 reads it in kilobytes; 1.6.18
# took 1024 as bytes); memcrab accepts and ignores the option.
SMALL_ITEMS = ("-I", "1k", "-o", "slab_chunk_max=1")


def _b(x) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode()


def store(key: bytes, value: bytes, flags=0, exptime=0, cmd=b"set", extra=b"") -> bytes:
    """A storage command with its data block; `extra` goes after the length (cas, noreply)."""
    line = b"%s %s %s %s %d" % (cmd, key, _b(flags), _b(exptime), len(value))
    return line + (b" " + extra if extra else b"") + b"\r\n" + value + b"\r\n"


def many_keys(prefix: bytes, n: int) -> list[bytes]:
    return [b"%s%02d" % (prefix, i) for i in range(n)]


# Stat names every `stats` must have (values differ between any two servers).
# Explained differences: memcrab has no libevent, so no `libevent` stat; memcached's
# slab mover, LRU maintainer/crawler, extstore and response-object internals have no
# counterpart and are not compared (only the names below are).
GENERAL_STATS = tuple(
    s.encode()
    for s in """pid uptime time version pointer_size rusage_user rusage_system
    max_connections curr_connections total_connections rejected_connections
    connection_structures cmd_get cmd_set cmd_flush cmd_touch get_hits get_misses
    get_expired get_flushed delete_misses delete_hits incr_misses incr_hits decr_misses
    decr_hits cas_misses cas_hits cas_badval touch_hits touch_misses store_too_large
    store_no_memory auth_cmds auth_errors bytes_read bytes_written limit_maxbytes
    accepting_conns listen_disabled_num threads conn_yields hash_power_level hash_bytes
    hash_is_expanding bytes curr_items total_items expired_unfetched evicted_unfetched
    evicted_active evictions reclaimed""".split()
)
# Counters whose values follow from the conversation alone.
COUNTER_STATS = tuple(
    s.encode()
    for s in """cmd_get cmd_set cmd_flush cmd_touch get_hits get_misses get_expired get_flushed
    delete_misses delete_hits incr_misses incr_hits decr_misses decr_hits cas_misses
    cas_hits cas_badval touch_hits touch_misses store_too_large store_no_memory
    curr_items evictions limit_maxbytes max_connections rejected_connections""".split()
)
# Not threads: memcached reports -t; memcrab reports the workers it runs (-t capped at
# the CPUs it may use, README "Command line"); test_pymemcache's test_stats checks it.
# Not total_items: memcached updates incr/decr results in place only while no other
# reference to the item exists (refcount == 2 in do_add_delta); when its background
# LRU threads or a pending reply hold one, it links a new item and counts it.
# Printed by memcached with or without -Z (tests/py/test_tls.py checks them under -Z).
TLS_SETTINGS = tuple(
    s.encode()
    for s in """ssl_enabled ssl_chain_cert ssl_key ssl_verify_mode ssl_keyformat ssl_ciphers
    ssl_ca_cert ssl_wbuf_size ssl_session_cache ssl_kernel_tls ssl_min_version""".split()
)
SETTINGS_STATS = tuple(
    s.encode()
    for s in """maxbytes maxconns tcpport udpport verbosity evictions domain_socket umask
    num_threads cas_enabled item_size_max flush_enabled idle_timeout reqs_per_event
    tcp_backlog binding_protocol chunk_size growth_factor detail_enabled
    auth_enabled_sasl auth_enabled_ascii shutdown_command memory_file""".split()
) + TLS_SETTINGS
# Not binding_protocol's value: it was left out while memcrab spoke only the text
# protocol and said `ascii`; both now say `auto-negotiate` under the default `-B auto`.
SETTINGS_VALUES = tuple(
    s.encode()
    for s in """maxbytes maxconns udpport verbosity evictions domain_socket umask num_threads
    cas_enabled item_size_max flush_enabled idle_timeout reqs_per_event tcp_backlog
    detail_enabled auth_enabled_sasl auth_enabled_ascii shutdown_command memory_file""".split()
) + TLS_SETTINGS
ITEMS_STATS = tuple(
    b"items:1:" + s.encode()
    for s in """number number_hot number_warm number_cold age_hot age_warm age mem_requested
    evicted evicted_nonzero evicted_time outofmemory tailrepairs reclaimed
    expired_unfetched evicted_unfetched evicted_active crawler_reclaimed""".split()
)
SLABS_STATS = tuple(
    s.encode()
    for s in """1:chunk_size 1:chunks_per_page 1:total_pages 1:total_chunks 1:used_chunks
    1:free_chunks 1:free_chunks_end 1:get_hits 1:cmd_set 1:delete_hits 1:incr_hits
    1:decr_hits 1:cas_hits 1:cas_badval 1:touch_hits active_slabs total_malloced""".split()
)
SLABS_VALUES = tuple(
    s.encode()
    for s in """1:get_hits 1:cmd_set 1:delete_hits 1:incr_hits 1:decr_hits 1:cas_hits
    1:cas_badval 1:touch_hits 1:used_chunks active_slabs""".split()
)
CONNS_STATS = (b"<fd>:addr", b"<fd>:listen_addr", b"<fd>:state", b"<fd>:secs_since_last_cmd")


CASES: list[Case] = []


def case(id, *steps, **kw):
    CASES.append(Case(id, tuple(steps), **kw))


# ---------------------------------------------------------------------------
# storage commands
case("set_get", store(b"k", b"abc", flags=5) + b"get k\r\n",
     expect=b"STORED\r\nVALUE k 5 3\r\nabc\r\nEND\r\n")
case("set_overwrite", store(b"k", b"one") + store(b"k", b"second", flags=9) + b"get k\r\n")
case("set_empty_value", store(b"k", b"") + b"get k\r\n")
case("set_binary_value", store(b"k", b"a\r\nb\x00c\r\n\xff") + b"get k\r\n")
case("value_looks_like_reply", store(b"k", b"END\r\nVALUE x 0 1\r\n") + b"get k\r\n")
case("add", store(b"k", b"a", cmd=b"add") + store(b"k", b"b", cmd=b"add") + b"get k\r\n",
     expect=b"STORED\r\nNOT_STORED\r\nVALUE k 0 1\r\na\r\nEND\r\n")
case("replace", store(b"k", b"a", cmd=b"replace") + store(b"k", b"b") + store(b"k", b"c", flags=3, cmd=b"replace") + b"get k\r\n")
case("append_prepend",
     store(b"k", b"x", cmd=b"append") + store(b"k", b"x", cmd=b"prepend")
     + store(b"k", b"mid", flags=7) + store(b"k", b">>", flags=1, exptime=-1, cmd=b"append")
     + store(b"k", b"<<", flags=2, cmd=b"prepend") + b"get k\r\n",
     expect=b"NOT_STORED\r\nNOT_STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\nVALUE k 7 7\r\n<<mid>>\r\nEND\r\n")
case("append_empty", store(b"k", b"") + store(b"k", b"", cmd=b"append") + store(b"k", b"z", cmd=b"append") + b"get k\r\n")
case("cas_hit_badval_miss",
     store(b"k", b"v1") + b"gets k\r\n",
     store(b"k", b"v2", extra=b"<cas#1>", cmd=b"cas") + b"gets k\r\n",
     store(b"k", b"v3", extra=b"<cas#1>", cmd=b"cas") + store(b"nokey", b"v", extra=b"1", cmd=b"cas")
     + b"gets k\r\n",
     expect=b"STORED\r\nVALUE k 0 2 <cas#1>\r\nv1\r\nEND\r\n"
     b"STORED\r\nVALUE k 0 2 <cas#2>\r\nv2\r\nEND\r\n"
     b"EXISTS\r\nNOT_FOUND\r\nVALUE k 0 2 <cas#2>\r\nv2\r\nEND\r\n")
case("cas_noreply",
     store(b"k", b"v1") + b"gets k\r\n",
     store(b"k", b"v2", extra=b"<cas#1> noreply", cmd=b"cas")
     + store(b"k", b"v3", extra=b"<cas#1> noreply", cmd=b"cas")
     + store(b"zz", b"v3", extra=b"5 noreply", cmd=b"cas") + b"gets k zz\r\n")
case("cas_zero_and_max", store(b"k", b"v") + store(b"k", b"w", extra=b"0", cmd=b"cas")
     + store(b"k", b"w", extra=U64_MAX, cmd=b"cas") + b"get k\r\n")
case("cas_bad_unique", store(b"k", b"v") + store(b"k", b"w", extra=b"abc", cmd=b"cas")
     + store(b"k", b"w", extra=b"-1", cmd=b"cas") + store(b"k", b"w", extra=b"18446744073709551616", cmd=b"cas")
     + b"get k\r\n")
case("cas_tokens", b"cas k 0 0 1\r\nx\r\ncas k 0 0 1 1 noreply extra\r\nx\r\ncas\r\n")
case("cas_after_delete", store(b"k", b"v") + b"gets k\r\n",
     b"delete k\r\n" + store(b"k", b"w", extra=b"<cas#1>", cmd=b"cas"))
case("cas_unique_changes",
     store(b"a", b"1") + store(b"b", b"2") + b"gets a b\r\n",
     b"touch a 100\r\ngets a\r\n" + store(b"a", b"x", cmd=b"append") + b"gets a\r\n"
     + b"incr b 5\r\ngets b\r\n" + store(b"b", b"3", cmd=b"replace") + b"gets a b\r\n")
case("cas_disabled", store(b"k", b"v") + b"gets k\r\n" + store(b"k", b"w", extra=b"0", cmd=b"cas")
     + store(b"k", b"w", extra=b"1", cmd=b"cas") + store(b"n", b"5") + b"incr n 1\r\ngets k n\r\n",
     args=("-C",),
     expect=b"STORED\r\nVALUE k 0 1 0\r\nv\r\nEND\r\nEXISTS\r\nEXISTS\r\nSTORED\r\n6\r\n"
     b"VALUE k 0 1 0\r\nv\r\nVALUE n 0 1 0\r\n6\r\nEND\r\n")
case("storage_token_counts",
     b"set k 0 0\r\nset k 0 0 1 noreply extra\r\nx\r\nset\r\n"
     b"add k 0 0\r\nappend k\r\nprepend k 0 0 1 2 3\r\nreplace\r\nget k\r\n")
case("noreply_position_garbage", b"set k 0 0 1 norepl\r\nx\r\nset k 0 0 1 NOREPLY\r\ny\r\nget k\r\n")

# ---------------------------------------------------------------------------
# numbers in storage commands
case("flags_range",
     store(b"a", b"x", flags=b"4294967295") + store(b"b", b"x", flags=b"4294967296")
     + store(b"c", b"x", flags=U64_MAX) + store(b"d", b"x", flags=b"+7") + store(b"e", b"x", flags=b"007")
     + b"get a b c d e\r\n",
     expect=b"STORED\r\n" * 5 + b"VALUE a 4294967295 1\r\nx\r\nVALUE b 0 1\r\nx\r\n"
     b"VALUE c 4294967295 1\r\nx\r\nVALUE d 7 1\r\nx\r\nVALUE e 7 1\r\nx\r\nEND\r\n")
case("flags_invalid",
     store(b"a", b"x", flags=-1) + store(b"a", b"x", flags=b"abc") + store(b"a", b"x", flags=b"1x")
     + store(b"a", b"x", flags=b"0x10") + store(b"a", b"x", flags=b"18446744073709551616") + b"get a\r\n",
     # The data block of a refused line is swallowed (1.6.18 ran it as a command: ERROR).
     expect=BAD_FORMAT * 5 + b"END\r\n")
case("flags_trailing_tab", b"set k 3\t 0 1\r\nx\r\nget k\r\n")
# 1.6.45 reads the length strictly (digits only, within int32); 1.6.18 read it with
# strtol, so 4294967299 wrapped to 3 and +2 was 2. A refused length leaves nothing to
# swallow: the data runs as a command.
case("length_quirks",
     b"set a 0 0 4294967299\r\nabc\r\n" + b"set b 0 0 +2\r\nhi\r\n" + b"set c 0 0 002\r\nhi\r\n" + b"get a b c\r\n",
     expect=(BAD_FORMAT + b"ERROR\r\n") * 2 + b"STORED\r\nVALUE c 0 2\r\nhi\r\nEND\r\n")
case("length_invalid",
     b"set k 0 0 -1\r\nabc\r\nset k 0 0 abc\r\nabc\r\nset k 0 0 4294967295\r\n"
     b"set k 0 0 2147483647\r\nabc\r\nset k 0 0 1x\r\nx\r\nget k\r\n")
case("exptime_invalid", b"set k 0 abc 1\r\nx\r\nset k 0 1.5 1\r\nx\r\nget k\r\n")
case("exptime_negative_and_past",
     store(b"neg", b"x", exptime=-1) + store(b"past", b"x", exptime=b"<now-100>")
     + store(b"abs1", b"x", exptime=2592001) + store(b"live", b"x", exptime=b"<now+1000>")
     + store(b"rel", b"x", exptime=1000) + store(b"d30", b"x", exptime=2592000)
     + b"get neg past abs1 live rel d30\r\n",
     expect=b"STORED\r\n" * 6 + b"VALUE live 0 1\r\nx\r\nVALUE rel 0 1\r\nx\r\nVALUE d30 0 1\r\nx\r\nEND\r\n")

# ---------------------------------------------------------------------------
# bad data blocks
# The 2-byte line left over is too short to be a command (1.6.18: ERROR).
case("data_longer_than_declared", b"set k 0 0 3\r\nabcde\r\nget k\r\n",
     expect=b"CLIENT_ERROR bad data chunk\r\n" + BAD_FORMAT + b"END\r\n")
# The data block is exactly <bytes>+2 bytes, whatever they hold; what follows is a command.
case("data_shorter_than_declared", S(b"set k 0 0 5\r\nabc\r\n", open=True), b"get k\r\n",
     expect=b"CLIENT_ERROR bad data chunk\r\nERROR\r\n")
case("data_much_longer", b"set k 0 0 1\r\nabcdefgh get k\r\nget k\r\n")
case("data_bare_newline", S(b"set k 0 0 1\r\na\n", open=True), b"get k\r\n")
case("data_bad_chunk_noreply", b"set k 0 0 1 noreply\r\nabc\r\nget k\r\n")
case("data_bad_chunk_keeps_old", store(b"k", b"old") + b"set k 0 0 2\r\nnew\r\nget k\r\n")
case("data_split_across_writes", S(b"set k 0 ", b"0 5\r", b"\nhel", b"lo", b"\r", b"\nget", b" k\r\n"))
case("data_crlf_split", S(b"set k 0 0 2\r\nab\r", b"\n"), b"get k\r\n")

# ---------------------------------------------------------------------------
# get family
case("get_multi", store(b"a", b"1") + store(b"c", b"3", flags=3) + b"get a b c a\r\ngets a b\r\nbget c\r\n")
for n in (22, 23, 24, 25, 30):
    keys = many_keys(b"key", n)
    case(f"get_{n}_keys", b"".join(store(k, k * 2) for k in keys[::3]) + b"get " + b" ".join(keys) + b"\r\n"
         + b"gets " + b" ".join(keys) + b"\r\n")
case("get_100_keys_gat", b"".join(store(k, k) for k in many_keys(b"x", 100)[::7])
     + b"gat 100 " + b" ".join(many_keys(b"x", 100)) + b"\r\n")
case("get_no_key", b"get\r\nget \r\ngets\r\nget  \r\nbget\r\n")
case("get_long_line", S(b"get " + b" ".join(many_keys(b"longline", 100)) * 3, b" zz\r\n"),
     store(b"longline07", b"seven") + b"get " + b" ".join(many_keys(b"longline", 100)) * 4 + b"\r\n")
case("get_leading_spaces_long_line", S(b" " * 50 + b"get " + b"a " * 1100, b"b\r\n"))
case("key_250", store(K250, b"v") + b"get " + K250 + b"\r\ngets " + K250 + b"\r\n"
     + b"touch " + K250 + b" 0\r\nincr " + K250 + b" 1\r\ndelete " + K250 + b"\r\n")
case("key_251_set", store(K251, b"v") + b"get a\r\n",
     expect=BAD_FORMAT + b"END\r\n")
case("key_251_get", b"get " + K251 + b"\r\n")
case("key_251_get_after_hits", store(b"a", b"1"), b"get a " + K251 + b" b\r\n")
case("key_251_gets_many", store(b"a", b"1"), b"gets a a a a a a a a a a a a a a a a a a a a a a a a a a a " + K251 + b"\r\n")
case("key_251_other_commands", b"delete " + K251 + b"\r\ntouch " + K251 + b" 0\r\nincr " + K251 + b" 1\r\n"
     + b"decr " + K251 + b" 1\r\n" + store(K251, b"v", cmd=b"append") + b"version\r\n",
     expect=BAD_FORMAT * 5 + b"VERSION <masked>\r\n")
# A get with a too-long key is kept alone in its step: memcached also throws away the
# unsent replies of earlier commands in the same read, which memcrab does not copy.
case("key_251_gat", b"gat 0 " + K251 + b"\r\n", b"gats 0 a " + K251 + b"\r\n", b"bget " + K251 + b"\r\n")
case("gat_gats", store(b"a", b"1", flags=4) + b"gat 100 a b\r\ngats 0 a\r\ngats -1 a\r\nget a\r\n")
# `gat <exptime>` with no key is too short (1.6.18 answered END, and ERROR to `gat`).
case("gat_errors", b"gat\r\ngat 10\r\ngat abc a\r\ngats 1x a\r\n",
     expect=BAD_FORMAT * 2 + BAD_EXPTIME * 2)
case("gat_touches", store(b"a", b"1", exptime=1000) + store(b"b", b"2", exptime=1000)
     + b"gat -1 a\r\ngats 0 b\r\nget a b\r\n")

# ---------------------------------------------------------------------------
# touch, delete
case("touch", store(b"a", b"1") + b"touch a 100\r\ntouch b 100\r\ntouch a 0 noreply\r\ntouch b 0 noreply\r\n"
     b"touch a\r\ntouch a abc\r\ntouch a 1 2 3\r\ntouch a abc noreply\r\ntouch a -1\r\nget a\r\n")
case("delete", store(b"a", b"1") + store(b"b", b"2") + store(b"c", b"3") + store(b"d", b"4")
     + b"delete a\r\ndelete a\r\ndelete b 0\r\ndelete c 0 noreply\r\ndelete d noreply\r\n"
     + b"delete x noreply\r\nget a b c d\r\n",
     expect=b"STORED\r\n" * 4 + b"DELETED\r\nNOT_FOUND\r\nDELETED\r\nEND\r\n")
# 1.6.45 ignores what follows the key (1.6.18 took only `0` there and answered
# "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]" or ERROR).
case("delete_errors", store(b"a", b"1") + b"delete a 1\r\ndelete a 0 0\r\ndelete a x noreply\r\n"
     b"delete a 1 noreply\r\ndelete\r\ndelete a 0 noreply x\r\ndelete a noreply 0\r\nget a\r\n",
     expect=b"STORED\r\nDELETED\r\nNOT_FOUND\r\n" + BAD_FORMAT + b"NOT_FOUND\r\nNOT_FOUND\r\nEND\r\n")

# ---------------------------------------------------------------------------
# incr / decr
case("incr_decr_basic", store(b"n", b"10", flags=6) + b"incr n 5\r\ndecr n 3\r\nincr n 0\r\nincr nokey 1\r\n"
     b"decr nokey 1\r\nget n\r\n")
case("incr_wraps", store(b"n", U64_MAX) + b"incr n 1\r\nget n\r\n" + store(b"m", b"18446744073709551610")
     + b"incr m 10\r\nincr m " + U64_MAX + b"\r\nget m\r\n",
     expect=b"STORED\r\n0\r\nVALUE n 0 20\r\n0                   \r\nEND\r\n"
     b"STORED\r\n4\r\n3\r\nVALUE m 0 20\r\n3                   \r\nEND\r\n")
case("decr_floors_at_zero", store(b"n", b"5") + b"decr n 6\r\ndecr n 1\r\nget n\r\n")
case("decr_shrink_pads", store(b"n", b"10") + b"decr n 1\r\nget n\r\nincr n 1\r\nget n\r\n"
     + store(b"m", b"1000") + b"decr m 999\r\nget m\r\n",
     expect=b"STORED\r\n9\r\nVALUE n 0 2\r\n9 \r\nEND\r\n10\r\nVALUE n 0 2\r\n10\r\nEND\r\n"
     b"STORED\r\n1\r\nVALUE m 0 4\r\n1   \r\nEND\r\n")
case("incr_grows", store(b"n", b"99") + b"incr n 1\r\nget n\r\n" + store(b"m", b"9", flags=42, exptime=1000)
     + b"incr m 18446744073709551606\r\nget m\r\n")
case("incr_non_numeric", store(b"a", b"abc") + store(b"b", b"12abc") + store(b"c", b"") + store(b"d", b"-5")
     + store(b"e", b"18446744073709551616") + store(b"f", b"1.5")
     + b"incr a 1\r\nincr b 1\r\ndecr c 1\r\nincr d 1\r\nincr e 1\r\ndecr f 1\r\n")
case("incr_whitespace_values", store(b"a", b"  7") + store(b"b", b"1 2") + store(b"c", b"+5") + store(b"d", b"007")
     + b"incr a 1\r\nincr b 1\r\nincr c 1\r\nincr d 1\r\nget a b c d\r\n",
     expect=b"STORED\r\n" * 4 + b"8\r\n2\r\n6\r\n8\r\n"
     b"VALUE a 0 3\r\n8  \r\nVALUE b 0 3\r\n2  \r\nVALUE c 0 2\r\n6 \r\nVALUE d 0 3\r\n8  \r\nEND\r\n")
case("incr_delta_forms", store(b"n", b"1") + b"incr n +5\r\nincr n 007\r\nincr n -1\r\nincr n abc\r\n"
     b"incr n 1.5\r\nincr n 18446744073709551616\r\nincr n -0\r\nincr n -9223372036854775809\r\nget n\r\n",
     # 1.6.45 reads the delta strictly: digits only (1.6.18's strtoull took +5, and
     # -0 and -9223372036854775809 as their two's complement).
     expect=b"STORED\r\n" + BAD_DELTA + b"8\r\n" + BAD_DELTA * 6 + b"VALUE n 0 1\r\n8\r\nEND\r\n")
case("incr_near_2_64", store(b"n", b"18446744073709551614") + b"incr n 1\r\nincr n 1\r\ndecr n " + U64_MAX
     + b"\r\nget n\r\n")
case("incr_noreply", store(b"n", b"1") + store(b"s", b"x") + b"incr n 5 noreply\r\ndecr n 2 noreply\r\n"
     b"incr s 1 noreply\r\nincr n abc noreply\r\nincr none 1 noreply\r\nget n\r\n")
case("incr_tokens", b"incr\r\nincr n\r\ndecr n\r\nincr n 1 2 3\r\ndecr n 1 noreply x\r\n")

# ---------------------------------------------------------------------------
# noreply everywhere, errors under noreply
case("noreply_storage", store(b"k", b"1", extra=b"noreply") + store(b"k", b"2", cmd=b"add", extra=b"noreply")
     + store(b"k", b"3", cmd=b"replace", extra=b"noreply") + store(b"k", b"4", cmd=b"append", extra=b"noreply")
     + store(b"k", b"5", cmd=b"prepend", extra=b"noreply") + store(b"m", b"6", cmd=b"replace", extra=b"noreply")
     + store(b"m", b"7", cmd=b"append", extra=b"noreply") + b"get k m\r\n",
     expect=b"VALUE k 0 3\r\n534\r\nEND\r\n")
case("noreply_errors", b"set k 0 0 -1 noreply\r\n" + b"set k abc 0 1 noreply\r\nx\r\n"
     + b"set " + K251 + b" 0 0 1 noreply\r\nx\r\n" + b"touch k abc noreply\r\nflush_all abc noreply\r\n"
     + b"verbosity abc noreply\r\ncache_memlimit abc noreply\r\nget k\r\n")
case("noreply_only", store(b"k", b"1", extra=b"noreply") + b"incr k 1 noreply\r\ntouch k 10 noreply\r\n"
     b"delete k noreply\r\nflush_all noreply\r\nverbosity 0 noreply\r\n", b"get k\r\n")

# ---------------------------------------------------------------------------
# line handling
case("bare_newlines", b"set k 0 0 1\nx\r\nget k\nget k\r\n",
     expect=b"STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\nVALUE k 0 1\r\nx\r\nEND\r\n")
# A lone \r is part of a key; only the \r right before \n is stripped.
case("lone_cr", store(b"a", b"1") + b"get a\rget a\r\nget a\r\r\n",
     expect=b"STORED\r\nVALUE a 0 1\r\n1\r\nEND\r\nEND\r\n")
# Lines under 4 bytes with their newline (1.6.18: ERROR).
case("empty_lines", b"\r\n\n\r\r\n \r\n  \n", expect=BAD_FORMAT * 5)
case("line_split_cr_lf", S(b"get a\r", b"\nversion\r", b"\n"))
case("multiple_spaces", store(b"k", b"v") + b"get   k    k  \r\n" + b"  set  j  0  0  1  \r\nx\r\nget j\r\n"
     + b"delete   k   0   noreply  \r\nget k\r\n")
# Only ' ' separates tokens; a tab is part of the token (numbers may end in one).
case("tabs", store(b"k", b"v") + b"get\tk\r\nget k\tk\r\n" + b"set t\tk 0 0 1\r\nx\r\nget t\tk\r\n"
     + b"incr k\t1\r\n",
     expect=b"STORED\r\nERROR\r\nEND\r\nSTORED\r\nVALUE t\tk 0 1\r\nx\r\nEND\r\n" + BAD_FORMAT)
case("control_chars_in_keys", store(b"\x01\x02", b"a") + store(b"\x7f\xff", b"b") + store(b"caf\xc3\xa9", b"c")
     + store(b"a\x0bb", b"d") + b"get \x01\x02 \x7f\xff caf\xc3\xa9 a\x0bb\r\n")
# A NUL byte is part of the key (1.6.18 tokenized a C string: the NUL ended the line).
case("nul_in_line", store(b"a", b"1") + b"get a\x00b\r\n" + b"set x\x00y 0 0 1\r\nz\r\nget x\r\n",
     expect=b"STORED\r\nEND\r\nSTORED\r\nEND\r\n")
case("unknown_commands", b"foo\r\nGET k\r\ng\r\nx\r\ngetx k\r\nsets k\r\nstat\r\nincrement k 1\r\n"
     b"flush\r\nversions\r\nquitx\r\n")
case("http_get_closes", b"GET / HTTP/1.1\r\n", expect=CLOSED)
case("http_other", b"POST /x HTTP/1.0\r\n")
# The close drops the unsent replies of the same read (1.6.18 sent them first).
case("http_lowercase_get", store(b"k", b"v") + b"get HTTP/1.1\r\nfoo bar HTTP/x\r\n",
     expect=CLOSED)
case("long_line_non_get_closes", S(b"set " + b"a" * 3000, open=True), expect=CLOSED)
case("long_line_junk_closes", S(b"x" * 2100, open=True))
case("long_line_many_spaces_closes", S(b" " * 150 + b"get " + b"a " * 1100, b"b\r\n"))
case("line_just_under_limit", S(b"version" + b" " * 2030, b"\r\n"))

# ---------------------------------------------------------------------------
# too large / out of memory
case("too_large_set_deletes_old", store(b"k", b"old") + store(b"k", b"v" * 2000) + b"get k\r\n",
     args=SMALL_ITEMS, expect=b"STORED\r\n" + TOO_LARGE + b"END\r\n")
case("too_large_other_commands_keep_old",
     store(b"k", b"old") + store(b"k", b"v" * 2000, cmd=b"add") + store(b"k", b"v" * 2000, cmd=b"replace")
     + store(b"k", b"v" * 2000, cmd=b"append") + store(b"k", b"v" * 2000, cmd=b"prepend")
     + store(b"k", b"v" * 2000, cmd=b"cas", extra=b"1") + b"get k\r\n", args=SMALL_ITEMS)
case("too_large_swallows_in_pieces", S(b"set k 0 0 3000\r\n", b"get k\r\n" * 100, b"x" * 2300, b"\r", b"\nget k\r\n"),
     args=SMALL_ITEMS, expect=TOO_LARGE + b"END\r\n")
case("too_large_noreply", store(b"k", b"old") + store(b"k", b"v" * 2000, extra=b"noreply") + b"get k\r\n",
     args=SMALL_ITEMS)
case("append_beyond_item_max", store(b"k", b"x" * 600) + store(b"k", b"y" * 600, cmd=b"append")
     + store(b"k", b"y" * 600, cmd=b"prepend") + b"get k\r\n", args=SMALL_ITEMS)
# memcached counts its item header against -I: with -I 1k, a 1-byte key and flags 0,
# the largest value is 964 bytes (972 with -C).
case("item_max_boundary", store(b"k", b"a" * 964) + store(b"k", b"b" * 965) + b"get k\r\n",
     args=SMALL_ITEMS)
case("item_max_boundary_no_cas", store(b"k", b"a" * 972) + store(b"k", b"b" * 973) + b"get k\r\n",
     args=SMALL_ITEMS + ("-C",))
case("too_large_default_1m", store(b"k", b"old") + store(b"k", b"v" * (1024 * 1024 + 1)) + b"get k\r\n")
case("out_of_memory_no_evictions",
     b"".join(store(b"k%03d" % i, b"v" * 100_000) for i in range(160)),
     b"get k000\r\n" + store(b"k000", b"w" * 100_000) + b"get k000\r\n" + store(b"small", b"x") + b"get small\r\n",
     args=("-m", "8", "-M"), collapse=True)

# ---------------------------------------------------------------------------
# flush_all, version, verbosity, cache_memlimit
case("flush_all", store(b"a", b"1") + b"flush_all\r\nget a\r\n" + store(b"b", b"2") + b"get b\r\n",
     expect=b"STORED\r\nOK\r\nEND\r\nSTORED\r\nVALUE b 0 1\r\n2\r\nEND\r\n")
case("flush_all_variants", store(b"a", b"1") + b"flush_all 0\r\nget a\r\n" + store(b"a", b"1")
     + b"flush_all noreply\r\nget a\r\n" + store(b"a", b"1") + b"flush_all -1\r\nget a\r\n"
     + store(b"a", b"1") + b"flush_all 0 noreply\r\nget a\r\n")
case("flush_all_errors", store(b"a", b"1") + b"flush_all abc\r\nflush_all 1 2 3\r\nflush_all 1.5\r\n"
     b"flush_all abc noreply\r\nflush_all 0 0\r\nget a\r\n",
     # Tokens after the delay are ignored (1.6.18: ERROR to `flush_all 1 2 3`).
     expect=b"STORED\r\n" + BAD_EXPTIME + b"OK\r\n" + BAD_EXPTIME + b"OK\r\nEND\r\n")
# memcached sets oldest_live = now + delay - 1, so a delay of 1 flushes at once.
case("flush_all_1_is_immediate", store(b"a", b"1") + b"flush_all 1\r\nget a\r\n" + store(b"b", b"1")
     + b"flush_all 1 noreply\r\nget b\r\n", expect=b"STORED\r\nOK\r\nEND\r\nSTORED\r\nEND\r\n")
case("flush_all_disabled", store(b"a", b"1") + b"flush_all\r\nflush_all noreply\r\nget a\r\n", args=("-F",))
case("version", b"version\r\nversion extra tokens\r\n", expect=b"VERSION <masked>\r\n" * 2)
case("verbosity", b"verbosity 1\r\nverbosity 0 noreply\r\nverbosity\r\nverbosity abc\r\n"
     b"verbosity 1 2\r\nverbosity 99\r\nverbosity 0\r\nverbosity 1 2 3\r\n",
     # Any token count (1.6.18: ERROR to `verbosity` and `verbosity 1 2 3`).
     expect=b"OK\r\n" + BAD_FORMAT * 2 + b"OK\r\nOK\r\nOK\r\nOK\r\n")
case("cache_memlimit", b"cache_memlimit 100\r\ncache_memlimit 7\r\ncache_memlimit 2000000000\r\n"
     b"cache_memlimit abc\r\ncache_memlimit\r\ncache_memlimit 100 noreply\r\ncache_memlimit 4294967296\r\n"
     b"cache_memlimit 8\r\ncache_memlimit -1\r\ncache_memlimit 1 2 3\r\nstats\r\n",
     stat_values=(b"limit_maxbytes",),
     expect=b"OK\r\nMEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n"
     # The number is read strictly, whatever follows (1.6.18 took 4294967296 as 0 and
     # refused `cache_memlimit 1 2 3` for its token count).
     b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\nERROR\r\nERROR\r\n"
     b"ERROR\r\nOK\r\nERROR\r\nMEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n"
     b"STAT limit_maxbytes 8388608\r\nEND\r\n")

# ---------------------------------------------------------------------------
# stats
case("stats_general", b"stats\r\n", stats=GENERAL_STATS, stat_values=COUNTER_STATS)
# No flush_all here: what curr_items shows right after one differs between releases
# (1.6.18 frees lazily, racing its LRU maintainer; 1.6.25+ unlinks at once, as memcrab
# does; crates/server/tests/today.rs checks that against 1.6.45).
case("stats_counters",
     store(b"a", b"1") + store(b"b", b"22") + b"get a b c\r\ngets a\r\ndelete b\r\ndelete b\r\n"
     + b"incr a 1\r\nincr zz 1\r\ndecr a 1\r\ndecr zz 1\r\ntouch a 0\r\ntouch zz 0\r\ngat 0 a zz\r\n"
     + store(b"a", b"x", cmd=b"cas", extra=b"1") + store(b"zz", b"x", cmd=b"cas", extra=b"1")
     + store(b"a", b"x", cmd=b"add") + b"stats\r\n",
     stats=GENERAL_STATS, stat_values=COUNTER_STATS)
case("stats_counters_cas_hit", store(b"a", b"1") + b"gets a\r\n",
     store(b"a", b"2", cmd=b"cas", extra=b"<cas#1>") + b"stats\r\n", stat_values=COUNTER_STATS)
case("stats_settings", b"stats settings\r\n", stats=SETTINGS_STATS, stat_values=SETTINGS_VALUES)
case("stats_settings_flags", b"stats settings\r\n", stats=SETTINGS_STATS, stat_values=SETTINGS_VALUES,
     args=("-m", "32", "-c", "200", "-t", "2", "-M", "-C", "-A", "-o", "idle_timeout=30", "-R", "7",
           "-b", "64", "-I", "2m", "-F"))
case("stats_items_empty", b"stats items\r\nstats slabs\r\n", stat_values=(b"active_slabs", b"total_malloced"))
# The get's reply is read before the incr: memcached 1.6.45 holds a fetched item until
# its reply is written, and an incr meanwhile links a new item (used_chunks 2).
case("stats_items_slabs", store(b"a", b"1") + store(b"b", b"2") + b"get a\r\n",
     b"incr a 1\r\ndelete b\r\nstats items\r\nstats slabs\r\n",
     stats=ITEMS_STATS + SLABS_STATS, stat_values=SLABS_VALUES + (b"items:1:number",))
# The harness's readiness probe connects and closes just before the case starts; the server
# may still list it for a moment (it did in CI), so wait for it to be reaped before counting.
case("stats_conns", S(b"stats conns\r\n", settle_conns=True), S(b"version\r\n", conn=1), b"stats conns\r\n",
     stats=CONNS_STATS)
case("stats_reset", store(b"a", b"1") + b"get a\r\nget b\r\nstats reset\r\nstats\r\n",
     stats=GENERAL_STATS, stat_values=COUNTER_STATS)
case("stats_bogus", b"stats bogus\r\nstats items extra\r\nstats reset now\r\n",
     expect=b"ERROR\r\nEND\r\nRESET\r\n")
case("stats_sizes", b"stats sizes\r\n", stat_values=(b"sizes_status",))

# ---------------------------------------------------------------------------
# shutdown, quit, connections
case("shutdown_not_enabled", b"shutdown\r\nshutdown graceful\r\nversion\r\n",
     expect=b"SERVER_ERROR: shutdown not enabled\r\n" * 2 + b"VERSION <masked>\r\n")
case("shutdown_bogus", b"shutdown bogus\r\nshutdown graceful now\r\nversion\r\n", args=("-A",),
     expect=b"CLIENT_ERROR invalid shutdown mode\r\n" * 2 + b"VERSION <masked>\r\n")
# That the process then exits is test_shutdown_exits' business (memcached takes up to a
# second, serving new connections meanwhile).
case("shutdown_enabled", b"shutdown\r\n", args=("-A",), expect=CLOSED)
case("shutdown_graceful", b"shutdown graceful\r\n", args=("-A",), expect=CLOSED)
case("quit", store(b"k", b"v") + b"quit\r\n", S(b"get k\r\n", conn=1),
     expect=b"STORED\r\n" + CLOSED + b"VALUE k 0 1\r\nv\r\nEND\r\n")
case("quit_with_args", b"quit now please\r\n")
case("unix_socket", store(b"k", b"v", flags=1) + b"get k\r\ngets k\r\nstats settings\r\n", b"quit\r\n",
     unix=True, stats=(b"domain_socket", b"tcpport"), stat_values=(b"umask", b"udpport"))
case("connections_independent", S(store(b"k", b"v")), S(b"get k\r\n", conn=1), S(b"delete k\r\n", conn=2),
     b"get k\r\n")

# ---------------------------------------------------------------------------
# pipelines
PIPELINE = (
    b"".join(store(b"p%d" % i, b"v%d" % i, flags=i) for i in range(50))
    + b"get " + b" ".join(b"p%d" % i for i in range(0, 60, 2)) + b"\r\n"
    + b"".join(b"incr p%d %d\r\n" % (i, i) for i in range(5))
    + b"delete p1\r\nappend p2 0 0 1\r\nZ\r\nprepend p3 0 0 1 noreply\r\nA\r\n"
    + b"touch p4 100\r\nbogus\r\ngets p1 p2 p3 p4\r\nversion\r\n"
    + b"set p5 0 0 3\r\nbad data\r\nget p5\r\n"
)
case("pipeline_one_write", PIPELINE)
case("pipeline_7_byte_writes", S(*[PIPELINE[i : i + 7] for i in range(0, len(PIPELINE), 7)]))
case("pipeline_then_quit", store(b"a", b"1") + b"get a\r\nquit\r\n")

# ---------------------------------------------------------------------------
# timing: each waits for the server's clock (wait_clock) or for a close, never a fixed
# sleep; all in a few cases to keep the run short
case("expiry_and_touch",
     store(b"e1", b"x", exptime=1) + store(b"e3", b"x", exptime=100) + store(b"t", b"x", exptime=100)
     + store(b"g", b"x", exptime=100) + store(b"gs", b"x", exptime=100)
     + b"touch t 1\r\ngat 1 g\r\ngats 1 gs\r\nget e1 e3 t g gs\r\n",
     S(b"get e1 e3 t g gs\r\nstats\r\n", wait_clock=2),
     # Not get_expired: memcached's LRU crawler may reap an expired item before the get sees it.
     stat_values=(b"curr_items", b"get_hits", b"get_misses"))
case("flush_all_delayed",
     store(b"a", b"1") + b"flush_all 2\r\nget a\r\n",
     S(b"get a\r\nstats\r\n", wait_clock=2), stat_values=(b"cmd_flush", b"get_flushed"))
# memcached closes when now - last_cmd > idle_timeout, checked by a sweeping thread:
# between 2 and 4.5 seconds after the last command for idle_timeout=1. Not sooner than
# the 1 s timeout (<CLOSED EARLY> otherwise), and within the step deadline (10 s).
case("idle_timeout", b"version\r\n", b"version\r\n", S(close_after=1.0),
     args=("-o", "idle_timeout=1"), expect=b"VERSION <masked>\r\n" * 2 + CLOSED)


def _describe(case: Case, oracle: list[bytes], candidate: list[bytes]) -> str:
    lines = [f"case {case.id} (flags: {' '.join(case.args) or 'none'})"]
    for i, (step, a, b) in enumerate(zip(case.normalized_steps(), oracle, candidate)):
        mark = "  " if a == b else "!!"
        lines.append(f"{mark} step {i} conn {step.conn} sent {b''.join(step.chunks)[:300]!r}")
        lines.append(f"{mark}   memcached: {a[:600]!r}")
        lines.append(f"{mark}   memcrab:   {b[:600]!r}")
        if a != b:
            diff = difflib.unified_diff(
                [repr(x) for x in a.splitlines(keepends=True)],
                [repr(x) for x in b.splitlines(keepends=True)],
                "memcached", "memcrab", n=1, lineterm="",
            )
            lines.extend("       " + d[:300] for d in list(diff)[:40])
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conversation(case: Case, server_factory):
    assert_same_as_memcached(case, server_factory, _describe)


def test_case_ids_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


def _connection_outcomes(server, attempts: int) -> list[bytes]:
    """Open `attempts` connections and keep them open; what each one gets for `version`."""
    socks, outcomes = [], []
    try:
        for _ in range(attempts):
            sock = server.connect()
            socks.append(sock)
            sock.sendall(b"version\r\n")
            data, closed = read_reply(sock)
            outcomes.append(mask(data + (CLOSED if closed else b""), CasNames(), (), ()))
    finally:
        for sock in socks:
            sock.close()
    return outcomes


def test_connection_limit(server_factory):
    """-c: connections past the limit get one error line and are closed.

    Where exactly the limit bites is not compared: memcached counts file
    descriptors (listeners, pipes, log files included), not client connections."""
    limit = 50  # memcached cannot even start below about 25 (it needs the fds itself)
    results = {}
    for kind in ("memcached", "memcrab"):
        server = server_factory.start(kind, ("-c", str(limit)))
        outcomes = _connection_outcomes(server, limit + 10)
        assert set(outcomes) == {b"VERSION <masked>\r\n", b"ERROR Too many open connections\r\n" + CLOSED}, (
            kind, outcomes)
        first_refused = outcomes.index(b"ERROR Too many open connections\r\n" + CLOSED)
        # Once refused, every later connection is refused too (the others stay open).
        assert all(o.startswith(b"ERROR") for o in outcomes[first_refused:]), (kind, outcomes)
        results[kind] = first_refused
    assert 0 < results["memcrab"] <= limit, results


@pytest.mark.server_args("-A")
@pytest.mark.parametrize("command", [b"shutdown\r\n", b"shutdown graceful\r\n"])
def test_shutdown_exits(server, command):
    """With -A, `shutdown` closes the connection and the process exits with status 0."""
    sock = server.connect()
    try:
        sock.sendall(command)
        data, closed = read_until(sock, None)
    finally:
        sock.close()
    assert (data, closed) == (b"", True)
    assert server.proc.wait(timeout=5) == 0, server.log_tail()
