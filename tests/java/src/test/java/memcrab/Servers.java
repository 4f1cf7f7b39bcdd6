package memcrab;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.params.provider.Arguments;

/**
 * Starts real servers (memcached, the oracle, or memcrab) on free loopback ports.
 * The caller closes the returned {@link Server}, which kills the process.
 *
 * <p>Binaries: MEMCACHED_BIN (default /usr/bin/memcached) and MEMCRAB_BIN (default
 * ../../target/release/memcrab). MEMCRAB_BIN=/usr/bin/memcached checks the suites
 * against memcached itself.
 */
final class Servers {
    private Servers() {}

    static final List<String> KINDS = List.of("memcached", "memcrab");

    static String binary(String kind) {
        String env = System.getenv(kind.equals("memcached") ? "MEMCACHED_BIN" : "MEMCRAB_BIN");
        if (env != null && !env.isEmpty()) {
            return env;
        }
        return kind.equals("memcached") ? "/usr/bin/memcached" : "../../target/release/memcrab";
    }

    static final class Server implements AutoCloseable {
        final Process process;
        final int port;

        Server(Process process, int port) {
            this.process = process;
            this.port = port;
        }

        InetSocketAddress address() {
            return new InetSocketAddress("127.0.0.1", port);
        }

        String hostPort() {
            return "127.0.0.1:" + port;
        }

        @Override
        public void close() {
            process.destroyForcibly();
            try {
                process.waitFor();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    static Server start(String kind, Map<String, String> env, String... extra) throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        List<String> cmd = new ArrayList<>(List.of(binary(kind), "-U", "0", "-l", "127.0.0.1", "-p", "" + port));
        if ("root".equals(System.getProperty("user.name"))) {
            cmd.add("-u");
            cmd.add("root");
        }
        cmd.addAll(List.of(extra));
        Path log = Files.createTempFile("memcrab-java-", ".log");
        log.toFile().deleteOnExit();
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().putAll(env);
        Process p = pb.start();
        Server server = new Server(p, port);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            if (!p.isAlive()) {
                throw new IllegalStateException(kind + " exited: " + Files.readString(log));
            }
            try (Socket sock = new Socket()) {
                sock.connect(server.address(), 1000);
                return server;
            } catch (IOException e) {
                if (System.nanoTime() > deadline) {
                    server.close();
                    throw new IllegalStateException(kind + " did not accept: " + Files.readString(log));
                }
                Thread.sleep(5);
            }
        }
    }

    static Server start(String kind, String... extra) throws Exception {
        return start(kind, Map.of(), extra);
    }

    /** The client suites' parameters: each server kind, over text and over binary. */
    static Stream<Arguments> targets() {
        return KINDS.stream().flatMap(k -> Stream.of(Arguments.of(k, "text"), Arguments.of(k, "binary")));
    }

    /** After a test: shuts the client down, then kills the server (each when there is one). */
    static void stop(AutoCloseable client, Server server) throws Exception {
        if (client != null) {
            client.close();
        }
        if (server != null) {
            server.close();
        }
    }

    /** Asserts a value read back equals the one stored (byte arrays by content). */
    static void assertSameValue(Object want, Object got) {
        if (want instanceof byte[] bytes) {
            assertArrayEquals(bytes, (byte[]) got);
        } else {
            assertEquals(want, got);
        }
    }

    /** Stores one item through a client. */
    interface Store {
        void set(String key, Object value) throws Exception;
    }

    /** Stores {@code n} items for a multi-get, m0 = v0, m1 = v1, ..., and returns them. */
    static Map<String, Object> storeNumbered(int n, Store store) throws Exception {
        Map<String, Object> items = new HashMap<>();
        for (int i = 0; i < n; i++) {
            items.put("m" + i, "v" + i);
            store.set("m" + i, "v" + i);
        }
        return items;
    }

    /** The keys of {@code items} plus one that is absent. */
    static List<String> keysAndAbsent(Map<String, ?> items) {
        List<String> keys = new ArrayList<>(items.keySet());
        keys.add("absent");
        return keys;
    }

    /** {@code n} bytes from a {@link Random} seeded with {@code seed}. */
    static byte[] randomBytes(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    /**
     * The checks both suites make after one set and one hit of "a": the (only)
     * server's stats count them, and its version is 1.6.x.
     */
    static void assertOneItemOneHit(Collection<Map<String, String>> stats, Collection<String> versions) {
        Map<String, String> s = stats.iterator().next();
        assertEquals("1", s.get("curr_items"));
        assertEquals("1", s.get("get_hits"));
        String version = versions.iterator().next();
        assertTrue(version.startsWith("1.6."), version);
    }

    /** A condition to poll; may throw (a client call). */
    interface Condition {
        boolean holds() throws Exception;
    }

    /**
     * Polls {@code cond} every 10 ms until it holds; fails after {@code seconds}. The
     * expiry tests wait this way, never with a fixed sleep.
     */
    static void waitUntil(String what, double seconds, Condition cond) throws Exception {
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        while (!cond.holds()) {
            assertTrue(System.nanoTime() < deadline, "timed out after " + seconds + " s waiting for " + what);
            Thread.sleep(10);
        }
    }

    static File tempFile(String content) throws IOException {
        Path p = Files.createTempFile("memcrab-pwdb-", "");
        Files.writeString(p, content);
        p.toFile().deleteOnExit();
        return p.toFile();
    }
}
