package memcrab;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import net.spy.memcached.BinaryConnectionFactory;
import net.spy.memcached.CASResponse;
import net.spy.memcached.CASValue;
import net.spy.memcached.ConnectionFactory;
import net.spy.memcached.ConnectionFactoryBuilder;
import net.spy.memcached.DefaultConnectionFactory;
import net.spy.memcached.MemcachedClient;
import net.spy.memcached.auth.AuthDescriptor;
import net.spy.memcached.auth.PlainCallbackHandler;
import net.spy.memcached.internal.OperationFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * spymemcached with its text (DefaultConnectionFactory) and binary
 * (BinaryConnectionFactory) connection factories, against memcached and memcrab;
 * plus SASL PLAIN over binary against memcrab -S.
 */
class SpymemcachedTest {
    private Servers.Server server;
    private MemcachedClient client;

    private MemcachedClient open(String kind, String protocol) throws Exception {
        server = Servers.start(kind);
        ConnectionFactory cf =
                protocol.equals("binary") ? new BinaryConnectionFactory() : new DefaultConnectionFactory();
        client = new MemcachedClient(cf, List.of(server.address()));
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
        Object[] values = {"text", 42, 1L << 40, 1.5d, true, (byte) 7, new byte[] {0, 1, 2}, new HashMap<>(Map.of("a", 1))};
        for (Object v : values) {
            assertTrue(c.set("k", 0, v).get());
            Servers.assertSameValue(v, c.get("k"));
        }
    }

    @EachTarget
    void addReplaceAppendPrepend(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertFalse(c.replace("k", 0, "1").get());
        assertTrue(c.add("k", 0, "1").get());
        assertFalse(c.add("k", 0, "2").get());
        assertTrue(c.replace("k", 0, "mid").get());
        assertTrue(c.append(0, "k", ">").get());
        assertTrue(c.prepend(0, "k", "<").get());
        assertEquals("<mid>", c.get("k"));
        assertFalse(c.append(0, "nokey", "x").get());
        assertFalse(c.prepend(0, "nokey", "x").get());
    }

    @EachTarget
    void getsCas(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertNull(c.gets("missing"));
        assertEquals(CASResponse.NOT_FOUND, c.cas("missing", 1, "x"));
        c.set("k", 0, "a").get();
        CASValue<Object> v = c.gets("k");
        assertEquals("a", v.getValue());
        assertEquals(CASResponse.OK, c.cas("k", v.getCas(), "b"));
        assertEquals(CASResponse.EXISTS, c.cas("k", v.getCas(), "c"));
        assertEquals("b", c.get("k"));
    }

    @EachTarget
    void getBulk(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        Map<String, Object> want = Servers.storeNumbered(100, (k, v) -> c.set(k, 0, v));
        assertEquals(want, c.getBulk(Servers.keysAndAbsent(want)));
    }

    @EachTarget
    void delete(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertFalse(c.delete("k").get());
        c.set("k", 0, "v").get();
        assertTrue(c.delete("k").get());
        assertNull(c.get("k"));
    }

    @EachTarget
    void incrDecr(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertEquals(-1, c.incr("n", 1));
        assertEquals(-1, c.decr("n", 1));
        assertEquals(10, c.incr("n", 1, 10)); // created with the default
        assertEquals(15, c.incr("n", 5, 10));
        assertEquals(0, c.decr("n", 100, 10));
        assertEquals(7, c.decr("d", 1, 7, 100));
        c.set("n", 0, "18446744073709551615").get();
        assertEquals(1, c.incr("n", 2));
        c.set("s", 0, "abc").get();
        // binary: status 6; text: CLIENT_ERROR cannot increment or decrement
        // non-numeric value. spymemcached answers -1 for both.
        assertEquals(-1, c.incr("s", 1));
        assertEquals("abc", c.get("s"));
    }

    @EachTarget
    void touchGatExpiry(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        assertFalse(c.touch("missing", 10).get());
        // A TTL of 2: the servers' clocks count whole seconds, so a TTL of 1 can
        // run out before the next request; one of 2 lives 1-2 s.
        c.set("k", 2, "v").get();
        c.set("g", 2, "v").get();
        c.set("gone", 2, "v").get();
        assertTrue(c.touch("k", 100).get());
        if (protocol.equals("text")) {
            assertThrows(UnsupportedOperationException.class, () -> c.getAndTouch("g", 100));
            assertTrue(c.touch("g", 100).get());
            // Gone within 2 s (whole-second clock); 10 s allowed for a loaded machine.
            Servers.waitUntil("gone to expire", 10, () -> c.get("gone") == null);
            assertEquals("v", c.get("k"));
            assertEquals("v", c.get("g"));
            assertNull(c.get("gone"));
            return;
        }
        CASValue<Object> g = c.getAndTouch("g", 100);
        assertNotNull(g);
        assertEquals("v", g.getValue());
        assertNull(c.getAndTouch("missing", 100));
        Servers.waitUntil("gone to expire", 10, () -> c.get("gone") == null);
        assertEquals("v", c.get("k"));
        assertEquals("v", c.get("g"));
        assertNull(c.get("gone"));
    }

    @EachTarget
    void largeValues(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        byte[] big = Servers.randomBytes(1024 * 1024 - 512, 1);
        assertTrue(c.set("big", 0, big).get());
        assertArrayEquals(big, (byte[]) c.get("big"));
        byte[] huge = Servers.randomBytes(1024 * 1024 + 1, 2);
        // spymemcached refuses values over its transcoder's 20 MB limit only; the
        // server must reject this one: binary status 3 (false), text
        // SERVER_ERROR object too large for cache (an exception).
        OperationFuture<Boolean> f = c.set("huge", 0, huge);
        if (protocol.equals("binary")) {
            assertFalse(f.get());
        } else {
            ExecutionException e = assertThrows(ExecutionException.class, f::get);
            assertTrue(e.getMessage().contains("SERVER_ERROR object too large for cache"), e.getMessage());
        }
        assertNull(c.get("huge"));
        assertArrayEquals(big, (byte[]) c.get("big"));
    }

    @EachTarget
    void flushStatsVersion(String kind, String protocol) throws Exception {
        MemcachedClient c = open(kind, protocol);
        c.set("a", 0, "1").get();
        c.get("a");
        Servers.assertOneItemOneHit(c.getStats().values(), c.getVersions().values());
        assertTrue(c.flush().get());
        assertNull(c.get("a"));
    }

    // --- SASL PLAIN over binary (memcrab -S; memcached needs a cyrus sasldb, see
    // crates/server/tests/auth.rs, so it is not started here) ---

    private MemcachedClient saslClient(String password) throws Exception {
        java.io.File pwdb = Servers.tempFile("alice:s3cret\n");
        server = Servers.start("memcrab", Map.of("MEMCACHED_SASL_PWDB", pwdb.getPath()), "-S");
        AuthDescriptor ad = new AuthDescriptor(new String[] {"PLAIN"}, new PlainCallbackHandler("alice", password));
        ConnectionFactory cf = new ConnectionFactoryBuilder()
                .setProtocol(ConnectionFactoryBuilder.Protocol.BINARY)
                .setAuthDescriptor(ad)
                .setOpTimeout(2000)
                .build();
        client = new MemcachedClient(cf, List.of(server.address()));
        return client;
    }

    @Test
    void saslPlainGoodPassword() throws Exception {
        MemcachedClient c = saslClient("s3cret");
        assertTrue(c.set("k", 0, "v").get());
        assertEquals("v", c.get("k"));
    }

    @Test
    void saslPlainBadPassword() throws Exception {
        MemcachedClient c = saslClient("wrong");
        // Authentication fails, so no operation ever completes.
        assertThrows(RuntimeException.class, () -> c.get("k"));
    }
}
