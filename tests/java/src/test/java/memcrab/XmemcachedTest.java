package memcrab;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.rubyeye.xmemcached.GetsResponse;
import net.rubyeye.xmemcached.MemcachedClient;
import net.rubyeye.xmemcached.XMemcachedClientBuilder;
import net.rubyeye.xmemcached.command.BinaryCommandFactory;
import net.rubyeye.xmemcached.command.TextCommandFactory;
import net.rubyeye.xmemcached.exception.MemcachedServerException;
import org.junit.jupiter.api.AfterEach;

/** xmemcached with its text and binary command factories, against memcached and memcrab. */
class XmemcachedTest {
    private Servers.Server server;
    private MemcachedClient client;

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
        Servers.stop(client == null ? null : client::shutdown, server);
    }

    @EachTarget
    void setGetTranscoders(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertNull(c.get("missing"));
        Object[] values = {"text", 42, 1L << 40, 1.5d, true, new byte[] {0, 1, 2}, new HashMap<>(Map.of("a", 1))};
        for (Object v : values) {
            assertTrue(c.set("k", 0, v));
            Servers.assertSameValue(v, c.get("k"));
        }
    }

    @EachTarget
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

    @EachTarget
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

    @EachTarget
    void multiGet(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        Map<String, Object> want = Servers.storeNumbered(100, (k, v) -> c.set(k, 0, v));
        assertEquals(want, c.get(Servers.keysAndAbsent(want)));
    }

    @EachTarget
    void delete(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertFalse(c.delete("k"));
        c.set("k", 0, "v");
        assertTrue(c.delete("k"));
        assertNull(c.get("k"));
    }

    @EachTarget
    void incrDecr(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertEquals(10, c.incr("n", 1, 10)); // created with the initial value
        assertEquals(15, c.incr("n", 5, 10));
        assertEquals(0, c.decr("n", 100, 10));
        assertEquals(7, c.decr("d", 1, 7));
        c.set("w", 0, "18446744073709551615");
        assertEquals(1, c.incr("w", 2));
    }

    @EachTarget
    void touchExpiry(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertFalse(c.touch("missing", 10));
        // A TTL of 2: with whole-second clocks a TTL of 1 can run out before the
        // next request; one of 2 lives 1-2 s.
        c.set("k", 2, "v");
        c.set("gone", 2, "v");
        assertTrue(c.touch("k", 100));
        // Gone within 2 s (whole-second clock); 10 s allowed for a loaded machine.
        Servers.waitUntil("gone to expire", 10, () -> c.get("gone") == null);
        assertEquals("v", c.get("k"));
        assertNull(c.get("gone"));
    }

    @EachTarget
    void largeValues(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        byte[] big = Servers.randomBytes(1024 * 1024 - 512, 1);
        assertTrue(c.set("big", 0, big));
        assertArrayEquals(big, (byte[]) c.<byte[]>get("big"));
        // xmemcached itself refuses values over 1 MB; exactly 1 MB passes it, and the
        // server must refuse it (item header + key + value exceed -I 1m).
        byte[] over = Servers.randomBytes(1024 * 1024 + 1, 3); // incompressible: the transcoder compresses
        Exception tooBig = assertThrows(IllegalArgumentException.class, () -> c.set("huge", 0, over));
        assertTrue(tooBig.getMessage().startsWith("Cannot cache data larger than 1MB"));
        byte[] huge = Servers.randomBytes(1024 * 1024, 2);
        // text: SERVER_ERROR object too large for cache; binary: status 3, which
        // xmemcached reports as "Value is too big."
        MemcachedServerException e = assertThrows(MemcachedServerException.class, () -> c.set("huge", 0, huge));
        assertEquals(protocol.equals("text") ? "object too large for cache,key=huge" : "Value is too big.", e.getMessage());
        assertNull(c.get("huge"));
        assertArrayEquals(big, (byte[]) c.<byte[]>get("big"));
    }

    @EachTarget
    void flushStatsVersion(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        c.set("a", 0, "1");
        c.get("a");
        Servers.assertOneItemOneHit(c.getStats().values(), c.getVersions().values());
        c.flushAll();
        assertNull(c.get("a"));
    }
}
