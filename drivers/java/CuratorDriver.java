// lockbench driver: Apache Curator's InterProcessMutex (Debian
// libcurator-recipes-java), behind the driver protocol (docs/drivers.md).
//
// One CuratorFramework (one ZooKeeper session) serves every client of the
// instance, built as Curator's getting-started guide builds it (an
// ExponentialBackoffRetry(1000, 3)) with Curator's default session and
// connection timeouts unless the scenario sets them. Each client reuses one
// InterProcessMutex per lock path, as its documentation asks, on a thread of
// its own: a mutex is released by the thread that acquired it. Curator's
// documentation asks for a ConnectionStateListener: LOST means the lock is
// surely gone, SUSPENDED that it may be; the driver says `lost` on LOST (or,
// with lost_on: suspended, on SUSPENDED). No fencing token, no extension:
// the session renews itself while connected.
//
// One default is turned off: the ensemble tracker, which would replace the
// connection string with the addresses the servers' configuration names,
// bypassing lockbench's relays (and so its link faults).

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorDriver {
    static final int PROTOCOL = 1;
    static final ObjectMapper JSON = new ObjectMapper();
    static final OutputStream OUT = System.out;

    /**
     * An operation's error answer: a protocol code, and whether the operation surely did not take
     * effect ("none"), was surely never sent ("unsent": nothing of the request left the process, so
     * the servers said nothing; never with held or not_held), or may have ("unknown"). The effect
     * is passed through as given (docs/drivers.md).
     */
    static final class Failure extends Exception {
        static final List<String> EFFECTS = List.of("none", "unknown", "unsent");
        final String code;
        final String effect;

        Failure(String code, String message, String effect) {
            super(message);
            if (!EFFECTS.contains(effect)) {
                throw new IllegalArgumentException("effect " + effect + " is not one of " + EFFECTS);
            }
            this.code = code;
            this.effect = effect;
        }
    }

    /**
     * send writes one line with one write: System.out flushes at a newline
     * written on its own, which would make the line two writes (and two
     * wake-ups of lockbench's reader), the first of them half a line.
     */
    static synchronized void send(ObjectNode msg) {
        try {
            byte[] b = JSON.writeValueAsBytes(msg);
            byte[] line = Arrays.copyOf(b, b.length + 1);
            line[b.length] = '\n';
            OUT.write(line);
            OUT.flush();
        } catch (Exception e) {
            System.err.println("write: " + e);
        }
    }

    static void log(String msg) {
        System.err.println(msg);
        System.err.flush();
    }

    static ObjectNode msg(String type) {
        ObjectNode m = JSON.createObjectNode();
        m.put("type", type);
        return m;
    }

    static String curatorVersion() {
        try (InputStream in = InterProcessMutex.class.getResourceAsStream("/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version");
        } catch (Exception e) {
            return "unknown";
        }
    }

    /**
     * A lease lockbench holds: its client and mutex, and whether lost was
     * said of it. A lost lease stays until lockbench releases it: the
     * release gives the reentrant mutex back (a mutex never released would
     * let the same thread acquire again at once, without asking ZooKeeper).
     */
    record Held(int client, InterProcessMutex mutex, String path, AtomicBoolean lost) {}

    final CuratorFramework zk;
    final String namespace;
    final String lostOn;
    final Map<String, Held> leases = new ConcurrentHashMap<>();
    final Map<Integer, Map<String, InterProcessMutex>> mutexes = new ConcurrentHashMap<>();
    final Map<Integer, ExecutorService> threads = new ConcurrentHashMap<>();
    final ScheduledThreadPoolExecutor deadlines = deadlineWatcher();

    /**
     * deadlineWatcher runs the operations' timeout answers. A cancelled one
     * (the operation answered in time: nearly all) leaves its queue at
     * once, so that the watcher does not wake at every answered
     * operation's deadline to find it cancelled.
     */
    static ScheduledThreadPoolExecutor deadlineWatcher() {
        ScheduledThreadPoolExecutor e = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "deadlines");
            t.setDaemon(true);
            return t;
        });
        e.setRemoveOnCancelPolicy(true);
        return e;
    }
    /** Counts connection troubles: a failure across one is not surely a failure. */
    final AtomicLong troubles = new AtomicLong();

    CuratorDriver(JsonNode hello) throws Failure {
        JsonNode opts = hello.path("options");
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder();
        int session = b.getSessionTimeoutMs();
        int connection = b.getConnectionTimeoutMs();
        String lost = "lost";
        for (Iterator<String> it = opts.fieldNames(); it.hasNext(); ) {
            String k = it.next();
            switch (k) {
                case "session_timeout_ms" -> session = opts.get(k).asInt();
                case "connection_timeout_ms" -> connection = opts.get(k).asInt();
                case "lost_on" -> lost = opts.get(k).asText();
                default -> throw new Failure("options", "curator takes no option " + k + " (it takes: connection_timeout_ms, lost_on, session_timeout_ms)", "none");
            }
        }
        if (!lost.equals("lost") && !lost.equals("suspended")) {
            throw new Failure("options", "lost_on: " + lost + " is neither lost nor suspended", "none");
        }
        this.lostOn = lost;
        List<String> hosts = new ArrayList<>();
        for (JsonNode s : hello.path("servers")) {
            if (s.path("kind").asText().equals("zookeeper")) {
                hosts.add(s.path("addr").asText());
            }
        }
        if (hosts.isEmpty()) {
            throw new Failure("options", "no zookeeper server in the hello", "none");
        }
        this.namespace = hello.path("namespace").asText();
        this.zk = b.connectString(String.join(",", hosts))
                .sessionTimeoutMs(session)
                .connectionTimeoutMs(connection)
                .retryPolicy(new ExponentialBackoffRetry(1000, 3))
                .ensembleTracker(false)
                .build();
        zk.getConnectionStateListenable().addListener((client, state) -> {
            if (state != ConnectionState.CONNECTED && state != ConnectionState.RECONNECTED) {
                troubles.incrementAndGet();
            }
            if (state == ConnectionState.LOST || (state == ConnectionState.SUSPENDED && lostOn.equals("suspended"))) {
                for (Map.Entry<String, Held> e : leases.entrySet()) {
                    if (e.getValue().lost().compareAndSet(false, true)) {
                        ObjectNode m = msg("lost");
                        m.put("client", e.getValue().client());
                        m.put("lease", e.getKey());
                        m.put("message", "connection state " + state);
                        send(m);
                    }
                }
            }
        });
        zk.start();
        try {
            if (!zk.blockUntilConnected(15, TimeUnit.SECONDS)) {
                throw new Failure("error", "start: no connection to " + hosts + " within 15s", "unknown");
            }
        } catch (InterruptedException e) {
            throw new Failure("error", "start: interrupted", "unknown");
        }
    }

    InterProcessMutex mutex(int client, String path) {
        return mutexes.computeIfAbsent(client, c -> new ConcurrentHashMap<>())
                .computeIfAbsent(path, p -> new InterProcessMutex(zk, p));
    }

    /** acquire takes the lock; waitMs &lt; 0 tries once. */
    String acquire(int client, String key, long waitMs) throws Failure {
        String path = "/" + namespace + "/" + key;
        InterProcessMutex m = mutex(client, path);
        long before = troubles.get();
        boolean got;
        try {
            got = m.acquire(Math.max(0, waitMs), TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            throw new Failure("unavailable", e.getClass().getSimpleName() + ": " + e.getMessage(), "unknown");
        }
        if (!got) {
            if (troubles.get() != before || !zk.getZookeeperClient().isConnected()) {
                throw new Failure("unavailable", "not acquired across a connection trouble", "unknown");
            }
            throw new Failure("held", "the lock is held by another client", "none");
        }
        String lease = UUID.randomUUID().toString();
        leases.put(lease, new Held(client, m, path, new AtomicBoolean()));
        return lease;
    }

    void release(int client, String lease) throws Failure {
        Held h = leases.remove(lease);
        if (h == null) {
            throw new Failure("bad_request", "no lease " + lease, "none");
        }
        try {
            h.mutex().release();
        } catch (IllegalMonitorStateException e) {
            throw new Failure("not_held", e.getMessage(), "none");
        } catch (Exception e) {
            throw new Failure("unavailable", e.getClass().getSimpleName() + ": " + e.getMessage(), "unknown");
        }
    }

    ExecutorService thread(int client) {
        return threads.computeIfAbsent(client, c -> Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "client-" + c);
            t.setDaemon(true);
            return t;
        }));
    }

    /** serve answers one request once: with its result, or a timeout. */
    void serve(JsonNode req) {
        long id = req.path("id").asLong();
        int client = req.path("client").asInt();
        String type = req.path("type").asText();
        long timeoutMs = req.path("timeout_ms").asLong(10000);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        AtomicBoolean answered = new AtomicBoolean();
        ScheduledFuture<?> timer = deadlines.schedule(() -> {
            if (answered.compareAndSet(false, true)) {
                ObjectNode m = msg("error");
                m.put("id", id);
                m.put("code", "timeout");
                m.put("effect", "unknown");
                m.put("message", type + " did not return within " + timeoutMs + " ms");
                send(m);
            }
        }, timeoutMs, TimeUnit.MILLISECONDS);
        thread(client).submit(() -> {
            if (answered.get()) {
                return; // its deadline passed while it queued
            }
            ObjectNode m;
            boolean mine = false;
            try {
                switch (type) {
                    case "acquire" -> {
                        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                        // A little less than lockbench's timeout, so that
                        // Curator's own answer comes first.
                        long waitMs = req.path("wait").asBoolean() ? left - Math.max(50, left / 10) : -1;
                        String lease = acquire(client, req.path("key").asText(), waitMs);
                        m = msg("ok");
                        m.put("lease", lease);
                        if (!answered.compareAndSet(false, true)) {
                            log("acquire " + req.path("key").asText() + " returned late: releasing lease " + lease);
                            try {
                                release(client, lease);
                            } catch (Failure f) {
                                log("release of the late lease: " + f.getMessage());
                            }
                            return;
                        }
                        mine = true;
                    }
                    case "release" -> {
                        release(client, req.path("lease").asText());
                        m = msg("ok");
                    }
                    default -> throw new Failure("unsupported", "no operation " + type, "none");
                }
            } catch (Failure f) {
                m = msg("error");
                m.put("code", f.code);
                m.put("message", f.getMessage());
                if (!List.of("held", "not_held", "unsupported", "bad_request").contains(f.code)) {
                    m.put("effect", f.effect);
                }
            } catch (RuntimeException e) {
                m = msg("error");
                m.put("code", "error");
                m.put("effect", "unknown");
                m.put("message", e.toString());
            }
            timer.cancel(false);
            if (mine || answered.compareAndSet(false, true)) {
                m.put("id", id);
                send(m);
            }
        });
    }

    /** bare is Curator's own loop: each thread takes and gives back a lock of its own. */
    void bare(JsonNode shape) throws InterruptedException {
        int clients = shape.path("clients").asInt();
        long stop = System.nanoTime() + (long) (shape.path("seconds").asDouble() * 1e9);
        AtomicLong cycles = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        long start = System.nanoTime();
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            int c = i;
            Thread t = new Thread(() -> {
                InterProcessMutex m = new InterProcessMutex(zk, "/" + namespace + "/bare-" + c);
                while (System.nanoTime() < stop) {
                    try {
                        if (!m.acquire(2, TimeUnit.SECONDS)) {
                            continue;
                        }
                        m.release();
                        cycles.incrementAndGet();
                    } catch (Exception e) {
                        errors.incrementAndGet();
                    }
                }
            });
            t.start();
            ts.add(t);
        }
        for (Thread t : ts) {
            t.join();
        }
        ObjectNode m = msg("bare");
        m.put("cycles", cycles.get());
        m.put("errors", errors.get());
        m.put("seconds", (System.nanoTime() - start) / 1e9);
        send(m);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String first = in.readLine();
        if (first == null) {
            Runtime.getRuntime().halt(0);
        }
        JsonNode hello = JSON.readTree(first);
        if (!hello.path("type").asText().equals("hello") || hello.path("protocol").asInt() != PROTOCOL) {
            ObjectNode m = msg("error");
            m.put("code", "error");
            m.put("message", "want a hello of protocol " + PROTOCOL);
            send(m);
            Runtime.getRuntime().halt(2);
        }
        CuratorDriver d;
        try {
            d = new CuratorDriver(hello);
        } catch (Failure f) {
            ObjectNode m = msg("error");
            m.put("code", f.code);
            m.put("message", f.getMessage());
            send(m);
            Runtime.getRuntime().halt(f.code.equals("options") ? 2 : 1);
            return;
        }
        ObjectNode h = msg("hello");
        h.put("protocol", PROTOCOL);
        h.put("library", "curator");
        h.put("version", curatorVersion());
        h.put("language", "java " + Runtime.version());
        ObjectNode ab = h.putObject("abilities");
        ab.put("token", false);
        ab.put("extend", false);
        ab.put("lost", true);
        ab.putArray("acquire").add("wait").add("try");
        ab.put("concurrent", true);
        ab.put("bare", true);
        send(h);
        if (hello.has("bare")) {
            d.bare(hello.get("bare"));
            Runtime.getRuntime().halt(0);
        }
        String line;
        while ((line = in.readLine()) != null) {
            JsonNode req = JSON.readTree(line);
            if (req.path("type").asText().equals("ping")) {
                ObjectNode m = msg("ok");
                m.put("id", req.path("id").asLong());
                send(m);
                continue;
            }
            d.serve(req);
        }
        // stdin closed: close the session if it goes quickly, then go.
        Thread closer = new Thread(d.zk::close);
        closer.setDaemon(true);
        closer.start();
        closer.join(2000);
        Runtime.getRuntime().halt(0);
    }
}
