package memcrab;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import net.rubyeye.xmemcached.GetsResponse;
import net.rubyeye.xmemcached.MemcachedClient;
import net.rubyeye.xmemcached.XMemcachedClientBuilder;
import net.rubyeye.xmemcached.command.BinaryCommandFactory;
import net.rubyeye.xmemcached.command.TextCommandFactory;
import net.rubyeye.xmemcached.exception.MemcachedServerException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** xmemcached with its text and binary command factories, against memcached and memcrab. */
class XmemcachedTest {
    private Servers.Server server;
    private MemcachedClient client;

    static Stream<Arguments> targets() {
        return Servers.KINDS.stream()
                .flatMap(k -> Stream.of(Arguments.of(k, "text"), Arguments.of(k, "binary")));
    }

    private MemcachedClient open(String kind, String protocol) throws Exception {
        server = Servers.start(kind);
        XMemcachedClientBuilder b = new XMemcachedClientBuilder(List.of(server.address()));
        b.setCommandFactory(protocol.equals("binary") ? new BinaryCommandFactory() : new TextCommandFactory());
        b.setConnectionPoolSize(1);
        client = b.build();
        client.setOpTimeout(5000);
        return client;
    }

    @AfterEach
    void tearDown() throws Exception {
        if (client != null) {
            client.shutdown();
        }
        if (server != null) {
            server.close();
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void setGetTranscoders(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertNull(c.get("missing"));
        Object[] values = {"text", 42, 1L << 40, 1.5d, true, new byte[] {0, 1, 2}, new HashMap<>(Map.of("a", 1))};
        for (Object v : values) {
            assertTrue(c.set("k", 0, v));
            Object got = c.get("k");
            if (v instanceof byte[] bytes) {
                assertArrayEquals(bytes, (byte[]) got);
            } else {
                assertEquals(v, got);
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void addReplaceAppendPrepend(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertFalse(c.replace("k", 0, "1"));
        assertTrue(c.add("k", 0, "1"));
        assertFalse(c.add("k", 0, "2"));
        assertTrue(c.replace("k", 0, "mid"));
        assertTrue(c.append("k", ">"));
        assertTrue(c.prepend("k", "<"));
        assertEquals("<mid>", c.get("k"));
        assertFalse(c.append("nokey", "x"));
        assertFalse(c.prepend("nokey", "x"));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void getsCas(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertNull(c.gets("missing"));
        c.set("k", 0, "a");
        GetsResponse<String> r = c.gets("k");
        assertEquals("a", r.getValue());
        assertTrue(c.cas("k", 0, "b", r.getCas()));
        assertFalse(c.cas("k", 0, "c", r.getCas()));
        assertEquals("b", c.get("k"));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void multiGet(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        Map<String, Object> want = new HashMap<>();
        for (int i = 0; i < 100; i++) {
            c.set("m" + i, 0, "v" + i);
            want.put("m" + i, "v" + i);
        }
        List<String> keys = new ArrayList<>(want.keySet());
        keys.add("absent");
        assertEquals(want, c.get(keys));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void delete(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertFalse(c.delete("k"));
        c.set("k", 0, "v");
        assertTrue(c.delete("k"));
        assertNull(c.get("k"));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void incrDecr(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertEquals(10, c.incr("n", 1, 10)); // created with the initial value
        assertEquals(15, c.incr("n", 5, 10));
        assertEquals(0, c.decr("n", 100, 10));
        assertEquals(7, c.decr("d", 1, 7));
        c.set("w", 0, "18446744073709551615");
        assertEquals(1, c.incr("w", 2));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void touchExpiry(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertFalse(c.touch("missing", 10));
        c.set("k", 1, "v");
        c.set("gone", 1, "v");
        assertTrue(c.touch("k", 100));
        Thread.sleep(2100);
        assertEquals("v", c.get("k"));
        assertNull(c.get("gone"));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void largeValues(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        byte[] big = new byte[1024 * 1024 - 512];
        new Random(1).nextBytes(big);
        assertTrue(c.set("big", 0, big));
        assertArrayEquals(big, (byte[]) c.<byte[]>get("big"));
        // xmemcached itself refuses values over 1 MB; exactly 1 MB passes it, and the
        // server must refuse it (item header + key + value exceed -I 1m).
        byte[] over = new byte[1024 * 1024 + 1];
        new Random(3).nextBytes(over); // incompressible: the transcoder compresses
        Exception tooBig = assertThrows(IllegalArgumentException.class, () -> c.set("huge", 0, over));
        assertTrue(tooBig.getMessage().startsWith("Cannot cache data larger than 1MB"));
        byte[] huge = new byte[1024 * 1024];
        new Random(2).nextBytes(huge);
        // text: SERVER_ERROR object too large for cache; binary: status 3, which
        // xmemcached reports as "Value is too big."
        MemcachedServerException e = assertThrows(MemcachedServerException.class, () -> c.set("huge", 0, huge));
        assertEquals(protocol.equals("text") ? "object too large for cache,key=huge" : "Value is too big.", e.getMessage());
        assertNull(c.get("huge"));
        assertArrayEquals(big, (byte[]) c.<byte[]>get("big"));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("targets")
    void flushStatsVersion(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        c.set("a", 0, "1");
        c.get("a");
        Map<String, String> s = c.getStats().values().iterator().next();
        assertEquals("1", s.get("curr_items"));
        assertEquals("1", s.get("get_hits"));
        String version = c.getVersions().values().iterator().next();
        assertTrue(version.startsWith("1.6."), version);
        c.flushAll();
        assertNull(c.get("a"));
    }
}
