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
//
// The protocol is LockbenchDriver's, beside this file.

import com.fasterxml.jackson.databind.JsonNode;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorDriver implements LockbenchDriver.Library {
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
     * A lease lockbench holds: its client and mutex. A lost lease stays until lockbench releases
     * it: the release gives the reentrant mutex back (a mutex never released would let the same
     * thread acquire again at once, without asking ZooKeeper).
     */
    record Held(int client, InterProcessMutex mutex, String path) {}

    final CuratorFramework zk;
    final String namespace;
    final String lostOn;
    final String version = curatorVersion();
    final Map<String, Held> leases = new ConcurrentHashMap<>();
    final Map<Integer, Map<String, InterProcessMutex>> mutexes = new ConcurrentHashMap<>();
    /** Counts connection troubles: a failure across one is not surely a failure. */
    final AtomicLong troubles = new AtomicLong();

    CuratorDriver(JsonNode hello, LockbenchDriver.Lost lost) throws LockbenchDriver.Failure {
        JsonNode opts = hello.path("options");
        CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder();
        int session = b.getSessionTimeoutMs();
        int connection = b.getConnectionTimeoutMs();
        String lostState = "lost";
        for (Iterator<String> it = opts.fieldNames(); it.hasNext(); ) {
            String k = it.next();
            switch (k) {
                case "session_timeout_ms" -> session = opts.get(k).asInt();
                case "connection_timeout_ms" -> connection = opts.get(k).asInt();
                case "lost_on" -> lostState = opts.get(k).asText();
                default -> throw new LockbenchDriver.Failure("options", "curator takes no option " + k + " (it takes: connection_timeout_ms, lost_on, session_timeout_ms)", "none");
            }
        }
        if (!lostState.equals("lost") && !lostState.equals("suspended")) {
            throw new LockbenchDriver.Failure("options", "lost_on: " + lostState + " is neither lost nor suspended", "none");
        }
        this.lostOn = lostState;
        List<String> hosts = new ArrayList<>();
        for (JsonNode s : hello.path("servers")) {
            if (s.path("kind").asText().equals("zookeeper")) {
                hosts.add(s.path("addr").asText());
            }
        }
        if (hosts.isEmpty()) {
            throw new LockbenchDriver.Failure("options", "no zookeeper server in the hello", "none");
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
                    lost.lost(e.getValue().client(), e.getKey(), "connection state " + state);
                }
            }
        });
        zk.start();
        try {
            if (!zk.blockUntilConnected(15, TimeUnit.SECONDS)) {
                throw new LockbenchDriver.Failure("error", "start: no connection to " + hosts + " within 15s", "unknown");
            }
        } catch (InterruptedException e) {
            throw new LockbenchDriver.Failure("error", "start: interrupted", "unknown");
        }
    }

    @Override
    public String library() {
        return "curator";
    }

    @Override
    public String version() {
        return version;
    }

    @Override
    public LockbenchDriver.Abilities abilities() {
        return new LockbenchDriver.Abilities(false, false, true, List.of("wait", "try"), true, true);
    }

    /** Each client reuses one InterProcessMutex per lock path, as Curator's documentation asks. */
    InterProcessMutex mutex(int client, String path) {
        return mutexes.computeIfAbsent(client, c -> new ConcurrentHashMap<>())
                .computeIfAbsent(path, p -> new InterProcessMutex(zk, p));
    }

    @Override
    public LockbenchDriver.Grant acquire(int client, String key, long waitMs) throws LockbenchDriver.Failure {
        String path = "/" + namespace + "/" + key;
        InterProcessMutex m = mutex(client, path);
        long before = troubles.get();
        boolean got;
        try {
            got = m.acquire(Math.max(0, waitMs), TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            throw new LockbenchDriver.Failure("unavailable", e.getClass().getSimpleName() + ": " + e.getMessage(), "unknown");
        }
        if (!got) {
            if (troubles.get() != before || !zk.getZookeeperClient().isConnected()) {
                throw new LockbenchDriver.Failure("unavailable", "not acquired across a connection trouble", "unknown");
            }
            throw new LockbenchDriver.Failure("held", "the lock is held by another client", "none");
        }
        String lease = UUID.randomUUID().toString();
        leases.put(lease, new Held(client, m, path));
        return new LockbenchDriver.Grant(lease, null);
    }

    @Override
    public void release(int client, String lease) throws LockbenchDriver.Failure {
        Held h = leases.remove(lease);
        if (h == null) {
            throw new LockbenchDriver.Failure("bad_request", "no lease " + lease, "none");
        }
        try {
            h.mutex().release();
        } catch (IllegalMonitorStateException e) {
            throw new LockbenchDriver.Failure("not_held", e.getMessage(), "none");
        } catch (Exception e) {
            throw new LockbenchDriver.Failure("unavailable", e.getClass().getSimpleName() + ": " + e.getMessage(), "unknown");
        }
    }

    @Override
    public void close() {
        zk.close();
    }

    public static void main(String[] args) throws Exception {
        LockbenchDriver.serve(CuratorDriver::new);
    }
}
