"""Differential tests of the meta commands (mg ms md ma mn me): memcrab must
answer every conversation here byte for byte as memcached 1.6.45 does (run with
MEMCACHED_BIN pointing at it; several cases pin what changed since 1.6.18, which
answers them differently).

Same harness as test_differential.py (differential.py): fresh servers per case,
the same bytes to both, CAS uniques masked (meta `c<cas>` flags and `me`'s
`cas=` included). A request that sets a TTL and the request that reads it
back (`t`, `me`'s exp/la) always travel in one chunk, so both servers read them
within the same clock second.

Not compared here, because memcrab differs on purpose (crates/server/tests/meta.rs
checks both sides): keys echoed by `k`/`me` for an item stored base64 but fetched
without `b` (memcached remembers the encoding per item, memcrab follows the
request).
"""

from __future__ import annotations

import difflib

import pytest

from differential import Case, S, assert_same_as_memcached

BAD_FORMAT = b"CLIENT_ERROR bad command line format\r\n"
OPAQUE33 = b"O" + b"1" * 32
OPAQUE32 = b"O" + b"1" * 31
K250 = b"k" * 250
K251 = b"k" * 251
U64_MAX = b"18446744073709551615"
# Counters meta commands move, compared by value.
COUNTERS = tuple(
    s.encode()
    for s in """cmd_get cmd_set cmd_touch cmd_meta get_hits get_misses get_expired get_flushed
    delete_misses delete_hits incr_misses incr_hits decr_misses decr_hits cas_misses cas_hits
    cas_badval touch_hits touch_misses store_too_large curr_items""".split()
)


def ms(key: bytes, value: bytes, flags: bytes = b"") -> bytes:
    return b"ms %s %d%s\r\n%s\r\n" % (key, len(value), b" " + flags if flags else b"", value)


CASES: list[Case] = []


def case(id, *steps, **kw):
    CASES.append(Case(id, tuple(steps), **kw))


# ---------------------------------------------------------------------------
# mn, quiet mode, pipelining
case("mn", b"mn\r\nmn extra tokens\r\n", expect=b"MN\r\nMN\r\n")
case("quiet_pipeline",
     b"mg a q\r\nmg a q v k O1\r\n" + ms(b"b", b"1", b"q") + ms(b"b", b"1", b"q ME")
     + b"md b q\r\nmd b q\r\nma n q\r\nmn\r\n",
     expect=b"NS\r\nNF\r\nNF\r\nMN\r\n")
case("quiet_hit_still_answers_mg", ms(b"h", b"v") + b"mg h q\r\nmg h q v k\r\nmn\r\n",
     expect=b"HD\r\nHD\r\nVA 1 kh\r\nv\r\nMN\r\n")
case("quiet_errors_answer", b"mg h q z\r\nms h 1 q MX\r\nz\r\nmn\r\n",
     expect=b"CLIENT_ERROR invalid flag\r\nCLIENT_ERROR invalid mode for ms M token\r\nMN\r\n")
case("pipeline_split_writes",
     S(b"ms p 5 T0", b"\r\nhel", b"lo\r\nmg p v", b" s\r\nmn\r", b"\n"),
     expect=b"HD\r\nVA 5 s5\r\nhello\r\nMN\r\n")
case("mixed_with_classic", b"set c 3 0 1\r\nx\r\nmg c v f\r\n" + ms(b"c", b"yy", b"F7") + b"gets c\r\n",
     expect=b"STORED\r\nVA 1 f3\r\nx\r\nHD\r\nVALUE c 7 2 <cas#1>\r\nyy\r\nEND\r\n")

# ---------------------------------------------------------------------------
# mg
case("mg_flags_order", ms(b"foo", b"hello", b"F42") + b"mg foo s v f k O123 t c\r\nmg foo c f\r\nmg foo\r\n",
     expect=b"HD\r\nVA 5 s5 f42 kfoo O123 t-1 c<cas#1>\r\nhello\r\nHD c<cas#1> f42\r\nHD\r\n")
case("mg_miss_echoes_opaque_and_key", b"mg nope v s t c f h l k Oxy\r\nmg nope\r\n",
     expect=b"EN knope Oxy\r\nEN\r\n")
case("mg_h_l_u", ms(b"k", b"v") + b"mg k h u\r\nmg k h\r\nmg k h l\r\nmg k u h\r\nmg k h l t s\r\n")
case("mg_ttl_and_touch_order",
     ms(b"k", b"v", b"T100") + b"mg k t\r\nmg k t T500\r\nmg k T30 t\r\nmg k T0 t\r\nmg k t\r\n"
     + b"mg k T-1\r\nmg k\r\n")
case("mg_touch_stats", ms(b"k", b"v") + b"mg k T10\r\nmg k T10 v\r\nmg nokey T10\r\nmg k\r\n",
     S(b"stats\r\n"), stat_values=COUNTERS)
case("mg_binary_value", ms(b"bv", b"a\r\nb\x00c\r\nEN\r\n") + b"mg bv v\r\nmg bv s v\r\n")
case("mg_opaque_limits",
     ms(b"k", b"v") + b"mg k " + OPAQUE32 + b"\r\nmg k " + OPAQUE33 + b"\r\nmg nokey " + OPAQUE33
     + b" q\r\nmg k T30 " + OPAQUE33 + b"\r\nmg k t\r\n", S(b"stats\r\n"), stat_values=COUNTERS)

# ---------------------------------------------------------------------------
# ms
case("ms_modes",
     ms(b"k", b"a", b"ME") + ms(b"k", b"b", b"ME") + ms(b"n", b"b", b"MR") + ms(b"n", b"b", b"MA")
     + ms(b"n", b"b", b"MP") + ms(b"k", b">", b"MA F9 T1") + ms(b"k", b"<", b"MP")
     + b"mg k v f t\r\n" + ms(b"k", b"r", b"MR F3") + ms(b"k", b"s", b"MS F4") + b"mg k v f\r\n")
# A three-byte M token (`MSS`) and F over 2^32-1 are answered as 1.6.45 answers them:
# crates/server/tests/today.rs checks those.
case("ms_invalid_modes", ms(b"k", b"zz", b"MX") + ms(b"k", b"zz", b"Ms") + b"mg k\r\n")
case("ms_return_flags", ms(b"k", b"x", b"c k Oq") + ms(b"k", b"x", b"ME c Oq k") + ms(b"k", b"x", b"b c")
     + ms(b"k", b"x", b"k O1 k"))
case("ms_flags_and_ttl", ms(b"k", b"x", b"F4294967295 T100") + b"mg k f t\r\n"
     + ms(b"k", b"x", b"T-1") + b"mg k\r\n")
case("ms_compare_cas",
     ms(b"k", b"v") + b"mg k c\r\n",
     ms(b"k", b"w", b"C<cas#1>9") + ms(b"k", b"w", b"C0") + ms(b"nokey", b"w", b"C5")
     + ms(b"nokey", b"w", b"C5 MR") + ms(b"k", b"+", b"C<cas#1>9 MA") + ms(b"k", b"+", b"C0 MA")
     + ms(b"nokey", b"+", b"C5 MA") + ms(b"new", b"+", b"C<cas#1>9 ME") + b"mg k v c\r\n",
     ms(b"k", b"set", b"C<cas#2> c") + b"mg k v c\r\n",
     S(b"stats\r\n"), stat_values=COUNTERS)
case("ms_empty_value", ms(b"e", b"") + b"mg e v s\r\n")
case("ms_bad_data_chunk", ms(b"k", b"old") + b"ms k 2 q\r\nabc\r\nmg k v\r\n" + b"ms k 1\r\nxy\r\n",
     S(b"stats\r\n"), stat_values=COUNTERS)
case("ms_errors_swallow",
     ms(b"k", b"old") + ms(b"k", b"get k", b"v v") + ms(b"k", b"get k", b"z")
     + ms(b"k", b"get k", b"Tx") + ms(b"k", b"get k", b"Fx") + ms(b"k", b"get k", b"Cx")
     + ms(b"k", b"get k", OPAQUE33) + ms(b"k", b"get k", OPAQUE33 + b" MX")
     + ms(b"Zm9", b"get k", b"b") + b"mg k v\r\n",
     # A refused opaque comes after memcached allocated the item: a set command.
     S(b"stats\r\n"), stat_values=COUNTERS)
case("ms_errors_before_length",
     b"ms k\r\nmn\r\nms k x\r\nmn\r\nms k -1\r\nmn\r\nms k 2147483646\r\nmn\r\n"
     b"ms k 1 a b c d e f g h i j k l m n o p q\r\nmn\r\nms " + K251 + b" 1\r\nmn\r\n")
# Over the default -I (1 MiB): a small -I needs a small slab_chunk_max, which 1.6.18
# reads in bytes and 1.6.45 in kilobytes, so no one setting starts both.
case("ms_too_large", ms(b"k", b"old") + ms(b"k", b"x" * (1024 * 1024 + 100), b"MA q") + b"mg k v\r\n",
     S(b"stats\r\n"), stat_values=COUNTERS)
case("ms_key_250", ms(K250, b"v", b"k") + b"mg " + K250 + b" v\r\n")

# ---------------------------------------------------------------------------
# md
case("md_flags", b"md k\r\nmd k q\r\nmd k k Oab\r\n" + ms(b"k", b"v") + b"mg k c\r\n",
     b"md k C<cas#1>1 Oab k\r\nmd k C0\r\nmd k T30 q\r\nmn\r\nmg k\r\n",
     S(b"stats\r\n"), stat_values=COUNTERS)
case("md_compare_match", ms(b"k", b"v") + b"mg k c\r\n", b"md k C<cas#1> k\r\nmg k\r\n")
# 1.6.27's E: the item takes the unique the client gives (ms, md I, mg N, ma N).
case("explicit_cas",
     ms(b"k", b"v", b"E77 c") + b"mg k c v\r\n" + ms(b"k", b"w", b"C77 E78 c")
     + b"md k I E90\r\nmg k c\r\nmg viv N30 E5 c\r\nma n N0 J1 E6 c\r\nmg k Ex\r\n")
# 1.6.45's md x with I stores the empty item and marks it stale, answering HD even
# when its new TTL has already passed (found by the differential fuzzer).
case("md_x_invalidate_expired",
     ms(b"k", b"v") + b"md k x I T-1\r\nmg k v\r\n" + ms(b"k", b"v") + b"md k x I T-1 q\r\nmn\r\n"
     + ms(b"k", b"v") + b"md k x T-1 k\r\nmg k\r\n")

# ---------------------------------------------------------------------------
# stale-while-revalidate (protocol.txt): md I, W/X/Z, ms I with an older CAS
case("swr_flow",
     ms(b"k", b"old", b"T100") + b"mg k c\r\n",
     b"md k I T30\r\nmg k v t c\r\nmg k v t\r\nmg k\r\n",
     ms(b"k", b"mid", b"C<cas#1> I T999") + b"mg k v t\r\n",
     ms(b"k", b"bad", b"C<cas#1>") + b"mg k c\r\n",
     ms(b"k", b"new", b"C<cas#3>") + b"mg k v\r\nmd k I q\r\nmg k\r\nmg k\r\nmd k I\r\nmg k\r\n",
     S(b"stats\r\n"), stat_values=COUNTERS)
case("swr_two_clients",
     ms(b"k", b"v", b"T100") + b"md k I\r\n",
     S(b"mg k v c\r\n", conn=1),
     S(b"mg k v c\r\n", conn=2),
     S(ms(b"k", b"fresh", b"C<cas#1> c"), conn=1),
     S(b"mg k v\r\n", conn=2))

# ---------------------------------------------------------------------------
# autovivify (protocol.txt): the first miss wins, the others see Z
case("vivify_race",
     b"mg k N30 v t c\r\n",
     S(b"mg k N30 v t\r\nmg k v\r\n", conn=1),
     ms(b"k", b"real", b"C<cas#1> T60"),
     S(b"mg k N30 v\r\n", conn=1),
     S(b"stats\r\n"), stat_values=COUNTERS)
case("vivify_ttl_order", b"mg v2 T60 N30 t\r\nmg v3 N30 T60 t\r\nmg v4 t N30\r\nmg v4 t\r\n")
case("recache",
     ms(b"k", b"v", b"T10") + b"mg k R30\r\nmg k R30\r\nmg k R5 t\r\n" + ms(b"far", b"v", b"T100")
     + b"mg far R30\r\n" + ms(b"never", b"v") + b"mg never R30\r\nmg far T5 R30\r\nmg far R30 T5\r\n")

# ---------------------------------------------------------------------------
# ma
case("ma_basic",
     b"ma n\r\nma n q k\r\nmn\r\nma n N0 J10 v t\r\nma n v\r\nma n MI D9 v\r\nma n M+ v\r\n"
     b"ma n MD D100 v\r\nma n M- v\r\nma n MX\r\nma n q\r\nma m q N0\r\nmn\r\nmg n v\r\nmg m v\r\n",
     S(b"stats\r\n"), stat_values=COUNTERS)
case("ma_pad_and_wrap",
     ms(b"p", b"10") + b"ma p MD v\r\nmg p v\r\n" + ms(b"w", U64_MAX) + b"ma w D2 v\r\nmg w v s\r\n")
case("ma_cas",
     b"ma n N0 J5 c\r\n",
     b"ma n C<cas#1>1 k\r\nma n C0 v c\r\n",
     b"ma n C<cas#2> c v\r\nmg n c\r\n")
case("ma_non_numeric",
     ms(b"s", b"abc") + b"ma s\r\nma s C99999\r\n" + ms(b"e", b"") + b"ma e C99999\r\n"
     + ms(b"big", b"123456789012345678901") + b"ma big\r\n" + ms(b"neg", b"-1") + b"ma neg\r\n")
case("ma_ttl_order",
     b"ma a N100 J5 T7 t v\r\nma b T7 N100 J5 t v\r\nma c t N100\r\nma b t T50\r\nmg b t\r\n")
case("ma_opaque", ms(b"n", b"1") + b"ma n k Oab\r\nma nokey k Oab\r\nma n " + OPAQUE33 + b"\r\nmg n v\r\nma nokey "
     + OPAQUE33 + b"\r\n", S(b"stats\r\n"), stat_values=COUNTERS)

# ---------------------------------------------------------------------------
# base64 keys
case("base64_keys",
     ms(b"Zm9vYmFy", b"hi", b"b k c") + b"mg Zm9vYmFy b k v\r\nmg Zm9v!YmFy b v\r\nget foobar\r\n"
     b"mg Zm9vYmF b\r\nmd Zm9vYmF b\r\nma Zm9vYmF b\r\nme Zm9vYmF b\r\n"
     + ms(b"AAEC", b"bin", b"b") + b"mg AAEC b v k\r\nme AAEC b\r\nma AAEC b k\r\nmd AAEC b k q\r\n"
     b"md AAEC b k\r\nmg AAEC b k\r\nmg Zg==Zm9v b k\r\nmg Z=== b\r\n")

# ---------------------------------------------------------------------------
# me
case("me_debug",
     b"me k\r\nme\r\n" + ms(b"k", b"hello", b"F3") + b"me k\r\nmg k\r\nme k extra\r\n"
     + ms(b"big", b"x" * 100) + b"me big\r\n" + ms(b"t", b"v", b"T100") + b"me t\r\n"
     + ms(b"huge", b"x" * 5000) + b"me huge\r\n",
     S(b"stats\r\n"), stat_values=COUNTERS)

# ---------------------------------------------------------------------------
# errors
# 1.6.45 splits a meta line with mcmc's tokenizer: a flag token that starts with
# neither a letter (A to z, so `[` to `` ` `` too) nor a digit refuses the line, with
# no data block swallowed; 20 tokens are allowed; no key is a bad line, not ERROR.
case("tokenizer",
     b"mg k v !\r\nmg k _\r\nmg k 5\r\nmg k ~\r\nmd k {\r\nma k \x80\r\nme k !\r\n"
     b"ms k 2 T1 -\r\nmn\r\nms k 2 v v\r\nmn\r\nms\r\nmd\r\nma  \r\n mg k\r\nmg\tk\r\n"
     b"mg k v v v v v v v v v v v v v v v v v v\r\nmg k v v v v v v v v v v v v v v v v v\r\n")
case("errors",
     b"mx k\r\nmg\r\nms\r\nmd\r\nma\r\nme\r\n"
     b"mg " + K251 + b"\r\nmd " + K251 + b"\r\nma " + K251 + b"\r\nme " + K251 + b"\r\n"
     # `x` (md's flag since 1.6.27) and `MAB` (1.6.45 reads the byte after M) are
     # answered as 1.6.45 answers them: crates/server/tests/today.rs checks those.
     b"mg k z\r\nmg k v v\r\nmg k \x80\r\nmg k Tx\r\nmg k N\r\nmg k R1x\r\nmg k Cx\r\nmg k Fx\r\n"
     b"mg k Tx Fx\r\nmg k Fx Tx\r\nmg k Jx\r\nmg k Dx\r\nmg k Zg b Tx\r\n"
     b"md k z\r\nmd k Tx\r\nma k q q\r\nma k Dx\r\nmd k " + OPAQUE33 + b"\r\n"
     b"mg k a b c d e f g h i j k l m n o p q r\r\nmd k a b c d e f g h i j k l m n o p q r\r\n"
     b"ma k a b c d e f g h i j k l m n o p q r\r\nmg k a b c d e f g h i j k l m n o p q\r\n"
     b"mg k S5\r\n")

# ---------------------------------------------------------------------------
# -C: no CAS uniques
case("cas_disabled",
     ms(b"k", b"v", b"c") + b"mg k c\r\n" + ms(b"k", b"v", b"C0") + ms(b"k", b"v", b"C5")
     + ms(b"k", b"+", b"C5 MA") + b"ma n N0 c\r\nmd k C0\r\nme n\r\n", args=("-C",))


def _describe(case: Case, oracle: list[bytes], candidate: list[bytes]) -> str:
    lines = [f"case {case.id}: memcrab differs from memcached"]
    for i, (a, b) in enumerate(zip(oracle, candidate)):
        if a != b:
            diff = difflib.unified_diff(
                a.decode("latin-1").splitlines(), b.decode("latin-1").splitlines(),
                "memcached", "memcrab", lineterm="")
            lines.append(f"step {i}:")
            lines.extend(diff)
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_meta_conversation(case: Case, server_factory):
    assert_same_as_memcached(case, server_factory, _describe)


def test_meta_case_ids_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
