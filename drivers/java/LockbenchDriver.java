// The lockbench driver protocol (docs/drivers.md) for Java lock libraries.
//
// A driver is a LockbenchDriver.Library that knows one lock library;
// serve() speaks the protocol around it: the hello, each client on a thread
// of its own (a lock released by the thread that acquired it, as
// java.util.concurrent's and Curator's are), the answer to every operation
// within its timeout, the lost signal, the bare loop of `bench driver perf`,
// and a clean exit when stdin closes.
//
// Use it from outside lockbench's clone: `bench driver build` compiles it
// into the folder `bench driver path` prints (java/classes), which a
// driver's environment names in LOCKBENCH_DRIVERS:
//
//   javac -cp $LOCKBENCH_DRIVERS/java/classes:/usr/share/java/jackson-databind.jar:... MyDriver.java
//   command: [java, -cp, "...", MyDriver]
//
//   public final class MyDriver implements LockbenchDriver.Library {
//       MyDriver(JsonNode hello, LockbenchDriver.Lost lost) throws LockbenchDriver.Failure { ... connect ... }
//       public String library() { return "mylock"; }
//       ...
//       public static void main(String[] args) throws Exception { LockbenchDriver.serve(MyDriver::new); }
//   }
//
// Jackson (Debian's libjackson2-databind-java) reads and writes the lines.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

public final class LockbenchDriver {
    public static final int PROTOCOL = 1;
    static final ObjectMapper JSON = new ObjectMapper();
    static final OutputStream OUT = System.out;

    /**
     * An operation's error answer: a protocol code, and whether the operation surely did not take
     * effect ("none"), was surely never sent ("unsent": nothing of the request left the process, so
     * the servers said nothing; never with held or not_held), or may have ("unknown"). The effect
     * is passed through as given (docs/drivers.md).
     */
    public static final class Failure extends Exception {
        static final List<String> EFFECTS = List.of("none", "unknown", "unsent");
        public final String code;
        public final String effect;

        public Failure(String code, String message, String effect) {
            super(message);
            if (!EFFECTS.contains(effect)) {
                throw new IllegalArgumentException("effect " + effect + " is not one of " + EFFECTS);
            }
            this.code = code;
            this.effect = effect;
        }
    }

    /** What a driver can do, as its hello says (docs/drivers.md). */
    public record Abilities(boolean token, boolean extend, boolean lost, List<String> acquire, boolean concurrent, boolean bare) {}

    /** An acquisition: the lease's handle, and its fencing token (null: none). */
    public record Grant(String lease, Long token) {}

    /** Says that a lease lockbench holds is gone (the library said so). */
    public interface Lost {
        void lost(int client, String lease, String message);
    }

    /** One lock library behind the protocol. Its calls run on the client's own thread. */
    public interface Library {
        String library();

        String version();

        Abilities abilities();

        /** Takes the lock on key, waiting up to waitMs (&lt; 0: one try). */
        Grant acquire(int client, String key, long waitMs) throws Failure;

        void release(int client, String lease) throws Failure;

        default void extend(int client, String lease, long ttlMs) throws Failure {
            throw new Failure("unsupported", library() + " cannot extend", "none");
        }

        /** Called when stdin closes, for at most 2 s. */
        default void close() {}
    }

    /** Makes the library from the hello: its options refused with a Failure of code "options". */
    public interface Factory {
        Library open(JsonNode hello, Lost lost) throws Failure;
    }

    /**
     * send writes one line with one write: System.out flushes at a newline written on its own,
     * which would make the line two writes (and two wake-ups of lockbench's reader), the first of
     * them half a line.
     */
    public static synchronized void send(ObjectNode msg) {
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

    public static void log(String msg) {
        System.err.println(msg);
        System.err.flush();
    }

    static ObjectNode msg(String type) {
        ObjectNode m = JSON.createObjectNode();
        m.put("type", type);
        return m;
    }

    final Library lib;
    /** The leases lockbench holds and lost was not yet said of: "client lease". */
    final Set<String> held = ConcurrentHashMap.newKeySet();
    final Map<Integer, ExecutorService> threads = new ConcurrentHashMap<>();
    final ScheduledThreadPoolExecutor deadlines = deadlineWatcher();

    private LockbenchDriver(Library lib) {
        this.lib = lib;
    }

    void lost(int client, String lease, String message) {
        if (held.remove(client + " " + lease)) {
            ObjectNode m = msg("lost");
            m.put("client", client);
            m.put("lease", lease);
            if (message != null && !message.isEmpty()) {
                m.put("message", message);
            }
            send(m);
        }
    }

    /**
     * deadlineWatcher runs the operations' timeout answers. A cancelled one (the operation answered
     * in time: nearly all) leaves its queue at once, so that the watcher does not wake at every
     * answered operation's deadline to find it cancelled.
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
                        // A little less than lockbench's timeout, so that the
                        // library's own answer comes first.
                        long waitMs = req.path("wait").asBoolean() ? left - Math.max(50, left / 10) : -1;
                        Grant g = lib.acquire(client, req.path("key").asText(), waitMs);
                        held.add(client + " " + g.lease());
                        m = msg("ok");
                        m.put("lease", g.lease());
                        if (g.token() != null) {
                            m.put("token", g.token());
                        }
                        if (!answered.compareAndSet(false, true)) {
                            // Too late: lockbench counted the acquire as
                            // unknown and will not release it.
                            held.remove(client + " " + g.lease());
                            log("acquire " + req.path("key").asText() + " returned late: releasing lease " + g.lease());
                            try {
                                lib.release(client, g.lease());
                            } catch (Failure f) {
                                log("release of the late lease: " + f.getMessage());
                            }
                            return;
                        }
                        mine = true;
                    }
                    case "release" -> {
                        held.remove(client + " " + req.path("lease").asText());
                        lib.release(client, req.path("lease").asText());
                        m = msg("ok");
                    }
                    case "extend" -> {
                        lib.extend(client, req.path("lease").asText(), req.path("ttl_ms").asLong());
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

    /** bare is the library's own loop: each thread takes and gives back a lock of its own. */
    void bare(JsonNode shape) throws InterruptedException {
        int clients = shape.path("clients").asInt();
        long stop = System.nanoTime() + (long) (shape.path("seconds").asDouble() * 1e9);
        boolean wait = lib.abilities().acquire().get(0).equals("wait");
        AtomicLong cycles = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        long start = System.nanoTime();
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            int c = i;
            Thread t = new Thread(() -> {
                while (System.nanoTime() < stop) {
                    Grant g;
                    try {
                        g = lib.acquire(c, "bare-" + c, wait ? 2000 : -1);
                    } catch (Failure f) {
                        if (!f.code.equals("held")) {
                            errors.incrementAndGet();
                        }
                        continue;
                    } catch (RuntimeException e) {
                        errors.incrementAndGet();
                        continue;
                    }
                    try {
                        lib.release(c, g.lease());
                        cycles.incrementAndGet();
                    } catch (Failure | RuntimeException e) {
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

    /** serve runs the library factory makes until stdin closes, then exits at once. */
    public static void serve(Factory factory) throws Exception {
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
        LockbenchDriver[] d = new LockbenchDriver[1];
        Library lib;
        try {
            lib = factory.open(hello, (client, lease, message) -> {
                if (d[0] != null) {
                    d[0].lost(client, lease, message);
                }
            });
        } catch (Failure f) {
            ObjectNode m = msg("error");
            m.put("code", f.code);
            m.put("message", f.getMessage());
            send(m);
            Runtime.getRuntime().halt(f.code.equals("options") ? 2 : 1);
            return;
        }
        d[0] = new LockbenchDriver(lib);
        Abilities a = lib.abilities();
        ObjectNode h = msg("hello");
        h.put("protocol", PROTOCOL);
        h.put("library", lib.library());
        h.put("version", lib.version());
        h.put("language", "java " + Runtime.version());
        ObjectNode ab = h.putObject("abilities");
        ab.put("token", a.token());
        ab.put("extend", a.extend());
        ab.put("lost", a.lost());
        ArrayNode acq = ab.putArray("acquire");
        a.acquire().forEach(acq::add);
        ab.put("concurrent", a.concurrent());
        ab.put("bare", a.bare());
        send(h);
        if (hello.has("bare")) {
            d[0].bare(hello.get("bare"));
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
            d[0].serve(req);
        }
        // stdin closed: close the library if it goes quickly, then go.
        Thread closer = new Thread(lib::close);
        closer.setDaemon(true);
        closer.start();
        closer.join(2000);
        Runtime.getRuntime().halt(0);
    }
}
