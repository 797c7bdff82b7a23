// A Curator 5.4 lock holder or leader-latch participant driven line by line over stdin/stdout, so
// that Rust integration tests can check wire compatibility with Curator's recipes (see
// tests/common/curator.rs).
//
// Usage: java CuratorPeer <connectString> <path> <mutex|read|write|semaphore:N|latch:ID>
// Prints READY once connected. `quit` ends the peer (closing the client) for every kind.
// Lock kinds: commands `acquire`, `acquire <ms>`, `release`;
//   replies `ACQUIRED <node path>`, `TIMEOUT`, `RELEASED`, `ERROR <message>`.
// latch:ID (a LeaderLatch with participant id ID): commands `start`, `close`, `leader`,
//   `hasLeadership`; replies `STARTED <node path>`, `CLOSED`, `LEADER_ID <id or ->`,
//   `HAS_LEADERSHIP <true|false>`, `ERROR <message>`. Independently of commands, the latch's
//   listener prints `LEADER` / `NOT_LEADER` whenever Curator reports gaining / losing leadership.
// atomic (a DistributedAtomicLong at <path>, no retries of its own): commands `get` (reply
//   `ATOMIC <value>`) and `increment <n> <threads>` (n increments over that many threads, each
//   an increment() repeated until it succeeds; reply `INCREMENTED <successes> <failures>`).
// Lock kinds also take `revocable` (makeRevocable, before any acquire; reply `REVOCABLE`, and a
//   `REVOCATION_REQUESTED` line, at any time, whenever Curator's revocation listener fires).
// discovery (a curator-x-discovery ServiceDiscovery<Object> at base path <path>, Curator's
//   default JsonInstanceSerializer): `register <name> <id> <address> <port> <TYPE> <payload>`
//   (payload `-` for none, else a JSON object, registered as a LinkedHashMap; reply
//   `REGISTERED`), `update <name> <id> <address> <port>` (reply `UPDATED`), `unregister <name>
//   <id>` (reply `UNREGISTERED`), `query <name> [<payload class>]` (queryForInstances, by a reader
//   built for that payload class if given; reply `INSTANCES <json>`: an
//   array of {id, address, port, sslPort, serviceType, enabled, payloadClass, payload, uri},
//   sorted by id, or `ERROR` if Curator cannot read the service), `raw <name> <id>` (the node's
//   bytes as Curator wrote them; reply `RAW <json>`), `cache <name>` (a started ServiceCache
//   whose listener prints `EVENT CACHE <id:port,...>` (sorted; `-` for none) at every change; reply `CACHING`).
// Every kind takes `revoke <path>` (Revoker.attemptRevoke on that node; reply `REVOKE_SENT`).
// count:SEED (a SharedCount started with seed SEED once connected): commands `get` (Curator's
//   local, watched value), `set <n>` (setCount), `increment <n> <threads>` (n increments spread
//   over that many threads, each a trySetCount(getVersionedValue(), value + 1) retried until it
//   applies); replies `COUNT <value> <version>`, `SET`, `INCREMENTED <successes> <failures>`,
//   `ERROR <message>`.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.x.discovery.ServiceCache;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.ServiceType;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;
import org.apache.curator.x.discovery.details.ServiceCacheListener;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.zookeeper.data.Stat;

public class CuratorPeer {
    private static CuratorFramework client;
    private static String lockPath;
    private static InterProcessMutex mutex; // mutex, read and write kinds
    private static InterProcessSemaphoreV2 semaphore; // semaphore kind
    private static LeaderLatch latch; // latch kind
    private static SharedCount count; // count kind
    private static DistributedAtomicLong atomicLong; // atomic kind
    private static ServiceDiscovery<Object> discovery; // discovery kind
    private static final Map<String, ServiceInstance<Object>> registered = new HashMap<>();
    private static final List<ServiceCache<Object>> caches = new ArrayList<>();
    private static final ObjectMapper mapper = new ObjectMapper();
    // A semaphore peer may hold several leases; `release` returns the newest.
    private static final Deque<Lease> leases = new ArrayDeque<>();

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            reply("ERROR usage: CuratorPeer <connectString> <path> <mutex|read|write|semaphore:N|latch:ID>");
            System.exit(2);
        }
        lockPath = args[1];
        client = CuratorFrameworkFactory.newClient(args[0], 10000, 10000, new RetryNTimes(20, 200));
        client.start();

        String kind = args[2];
        if (kind.equals("mutex")) {
            mutex = new InterProcessMutex(client, lockPath);
        } else if (kind.equals("read")) {
            mutex = new InterProcessReadWriteLock(client, lockPath).readLock();
        } else if (kind.equals("write")) {
            mutex = new InterProcessReadWriteLock(client, lockPath).writeLock();
        } else if (kind.startsWith("semaphore:")) {
            semaphore = new InterProcessSemaphoreV2(client, lockPath, Integer.parseInt(kind.substring("semaphore:".length())));
        } else if (kind.startsWith("latch:")) {
            // LeaderLatch stores the id as its node's data; close() keeps the default SILENT mode
            // unless told otherwise, so the `close` command asks for NOTIFY_LEADER explicitly.
            latch = new LeaderLatch(client, lockPath, kind.substring("latch:".length()));
            // Curator calls listeners on its event thread, concurrently with command replies;
            // reply() is synchronized, so lines never interleave.
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    reply("LEADER");
                }

                @Override
                public void notLeader() {
                    reply("NOT_LEADER");
                }
            });
        } else if (kind.equals("atomic")) {
            // No retry of its own: a conflict comes back as succeeded() == false, counted below.
            atomicLong = new DistributedAtomicLong(client, lockPath, new RetryNTimes(0, 0));
        } else if (kind.equals("discovery")) {
            discovery = ServiceDiscoveryBuilder.builder(Object.class).client(client).basePath(lockPath)
                    .serializer(new JsonInstanceSerializer<>(Object.class)).build();
        } else if (kind.startsWith("count:")) {
            count = new SharedCount(client, lockPath, Integer.parseInt(kind.substring("count:".length())));
        } else {
            reply("ERROR unknown kind " + kind);
            System.exit(2);
        }

        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            reply("ERROR not connected to " + args[0] + " after 30 s");
            System.exit(1);
        }
        if (discovery != null) {
            discovery.start();
        }
        if (count != null) {
            // Creates the node with the seed if it is missing, then reads and watches it.
            count.start();
        }

        // stdin is read on its own thread so that `quit`, or EOF when the test process dies,
        // ends the JVM even while the main thread is blocked in acquire(); otherwise a killed
        // test run would leave JVMs waiting for a lock forever.
        BlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread stdinReader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("quit")) {
                        break;
                    }
                    commands.add(line.trim());
                }
            } catch (Exception e) {
                // Treated like EOF: nobody is left to talk to.
            }
            // Closing the client ends the session, so ZooKeeper removes our ephemeral lock nodes
            // at once instead of after the session timeout.
            client.close();
            System.exit(0);
        }, "stdin");
        stdinReader.setDaemon(true);
        stdinReader.start();

        reply("READY");
        while (true) {
            String command = commands.take();
            if (command.isEmpty()) {
                continue;
            }
            try {
                handle(command);
            } catch (Exception e) {
                reply("ERROR " + e);
            }
        }
    }

    private static void handle(String command) throws Exception {
        if (command.startsWith("revoke ")) {
            Revoker.attemptRevoke(client, command.substring("revoke ".length()).trim());
            reply("REVOKE_SENT");
            return;
        }
        if (latch != null) {
            handleLatch(command);
            return;
        }
        if (count != null) {
            handleCount(command);
            return;
        }
        if (atomicLong != null) {
            handleAtomic(command);
            return;
        }
        if (discovery != null) {
            handleDiscovery(command);
            return;
        }
        String[] words = command.split("\\s+");
        if (words[0].equals("acquire") && words.length <= 2) {
            // The lock objects are thread-affine (InterProcessMutex is owned by the acquiring
            // thread), which is why every command runs on the main thread.
            Long waitMs = words.length == 2 ? Long.parseLong(words[1]) : null;
            String node;
            if (semaphore != null) {
                Lease lease = waitMs == null ? semaphore.acquire() : semaphore.acquire(waitMs, TimeUnit.MILLISECONDS);
                if (lease == null) {
                    reply("TIMEOUT");
                    return;
                }
                leases.push(lease);
                node = leasePath(lease);
            } else {
                if (waitMs == null) {
                    mutex.acquire();
                } else if (!mutex.acquire(waitMs, TimeUnit.MILLISECONDS)) {
                    reply("TIMEOUT");
                    return;
                }
                node = ownLockNode();
            }
            reply("ACQUIRED " + node);
        } else if (command.equals("revocable") && mutex != null) {
            // Curator calls the listener on its event thread; reply() is synchronized.
            mutex.makeRevocable(lock -> reply("REVOCATION_REQUESTED"));
            reply("REVOCABLE");
        } else if (command.equals("release")) {
            if (semaphore != null) {
                Lease lease = leases.poll();
                if (lease == null) {
                    throw new IllegalStateException("no lease held");
                }
                lease.close();
            } else {
                mutex.release();
            }
            reply("RELEASED");
        } else {
            reply("ERROR unknown command: " + command);
        }
    }

    private static void handleLatch(String command) throws Exception {
        if (command.equals("start")) {
            latch.start();
            // start() returns at once; the node is created in the background (after ensuring
            // the parent path), and getOurPath() stays null until then.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            String path;
            while ((path = latch.getOurPath()) == null) {
                if (System.nanoTime() > deadline) {
                    reply("ERROR latch node not created within 10 s (state " + latch.getState() + ")");
                    return;
                }
                Thread.sleep(10);
            }
            reply("STARTED " + path);
        } else if (command.equals("close")) {
            // The default (SILENT) clears the listeners before dropping leadership, so a leader
            // would close without notLeader(); NOTIFY_LEADER calls notLeader() first.
            latch.close(LeaderLatch.CloseMode.NOTIFY_LEADER);
            reply("CLOSED");
        } else if (command.equals("leader")) {
            // With no participants Curator returns a dummy Participant("", false).
            Participant leader = latch.getLeader();
            reply("LEADER_ID " + (leader.isLeader() ? leader.getId() : "-"));
        } else if (command.equals("hasLeadership")) {
            reply("HAS_LEADERSHIP " + latch.hasLeadership());
        } else {
            reply("ERROR unknown latch command: " + command);
        }
    }

    /** One try of an increment: true when it applied. */
    @FunctionalInterface
    private interface IncrementTry {
        boolean attempt() throws Exception;
    }

    /**
     * Makes {@code n} increments spread over {@code threads} threads, each tried until it
     * applies; replies {@code INCREMENTED <successes> <failed tries>}.
     */
    private static void incrementOnThreads(int n, int threads, IncrementTry once) throws Exception {
        AtomicLong successes = new AtomicLong();
        AtomicLong failures = new AtomicLong();
        AtomicReference<Exception> error = new AtomicReference<>();
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int share = n / threads + (t < n % threads ? 1 : 0);
            workers[t] = new Thread(() -> {
                try {
                    for (int i = 0; i < share; i++) {
                        while (!once.attempt()) {
                            failures.incrementAndGet();
                        }
                        successes.incrementAndGet();
                    }
                } catch (Exception e) {
                    error.compareAndSet(null, e);
                }
            }, "increment-" + t);
            workers[t].start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        if (error.get() != null) {
            throw error.get();
        }
        reply("INCREMENTED " + successes.get() + " " + failures.get());
    }

    private static void handleAtomic(String command) throws Exception {
        String[] words = command.split("\\s+");
        if (words[0].equals("get") && words.length == 1) {
            AtomicValue<Long> seen = atomicLong.get();
            if (!seen.succeeded()) {
                throw new IllegalStateException("get did not succeed");
            }
            reply("ATOMIC " + seen.postValue());
        } else if (words[0].equals("increment") && words.length == 3) {
            incrementOnThreads(Integer.parseInt(words[1]), Integer.parseInt(words[2]), () -> {
                AtomicValue<Long> done = atomicLong.increment();
                if (done.succeeded() && done.postValue() != done.preValue() + 1) {
                    throw new IllegalStateException("pre " + done.preValue() + " post " + done.postValue());
                }
                return done.succeeded();
            });
        } else {
            reply("ERROR unknown atomic command: " + command);
        }
    }

    private static void handleDiscovery(String command) throws Exception {
        String[] words = command.split("\\s+", 7);
        if (words[0].equals("register") && words.length == 7) {
            Object payload = words[6].equals("-") ? null : mapper.readValue(words[6], LinkedHashMap.class);
            ServiceInstance<Object> instance = ServiceInstance.<Object>builder().name(words[1]).id(words[2])
                    .address(words[3]).port(Integer.parseInt(words[4])).serviceType(ServiceType.valueOf(words[5]))
                    .payload(payload).build();
            discovery.registerService(instance);
            registered.put(words[1] + "/" + words[2], instance);
            reply("REGISTERED");
        } else if (words[0].equals("update") && words.length == 5) {
            ServiceInstance<Object> old = registered.get(words[1] + "/" + words[2]);
            ServiceInstance<Object> instance = ServiceInstance.<Object>builder().name(words[1]).id(words[2])
                    .address(words[3]).port(Integer.parseInt(words[4])).serviceType(old.getServiceType())
                    .payload(old.getPayload()).registrationTimeUTC(old.getRegistrationTimeUTC()).build();
            discovery.updateService(instance);
            registered.put(words[1] + "/" + words[2], instance);
            reply("UPDATED");
        } else if (words[0].equals("unregister") && words.length == 3) {
            discovery.unregisterService(registered.remove(words[1] + "/" + words[2]));
            reply("UNREGISTERED");
        } else if (words[0].equals("query") && (words.length == 2 || words.length == 3)) {
            // With a class: a second ServiceDiscovery whose serializer is built for that payload
            // class, as a Java service that knows its payload type reads (Curator checks each
            // payload against it, and fails the whole query on one that is not of it).
            ServiceDiscovery<Object> reader = discovery;
            if (words.length == 3) {
                @SuppressWarnings("unchecked")
                Class<Object> payloadClass = (Class<Object>) Class.forName(words[2]);
                reader = ServiceDiscoveryBuilder.builder(payloadClass).client(client).basePath(lockPath)
                        .serializer(new JsonInstanceSerializer<>(payloadClass)).build();
                reader.start();
            }
            List<Map<String, Object>> described = new ArrayList<>();
            for (ServiceInstance<Object> instance : reader.queryForInstances(words[1])) {
                Map<String, Object> one = new LinkedHashMap<>();
                one.put("id", instance.getId());
                one.put("address", instance.getAddress());
                one.put("port", instance.getPort());
                one.put("sslPort", instance.getSslPort());
                one.put("serviceType", instance.getServiceType().name());
                one.put("enabled", instance.isEnabled());
                one.put("payloadClass", instance.getPayload() == null ? null : instance.getPayload().getClass().getName());
                one.put("payload", instance.getPayload());
                one.put("uri", instance.getUriSpec() == null ? null : instance.buildUriSpec());
                described.add(one);
            }
            described.sort((a, b) -> ((String) a.get("id")).compareTo((String) b.get("id")));
            if (reader != discovery) {
                reader.close();
            }
            reply("INSTANCES " + mapper.writeValueAsString(described));
        } else if (words[0].equals("raw") && words.length == 3) {
            byte[] bytes = client.getData().forPath(lockPath + "/" + words[1] + "/" + words[2]);
            reply("RAW " + new String(bytes, StandardCharsets.UTF_8));
        } else if (words[0].equals("cache") && words.length == 2) {
            ServiceCache<Object> cache = discovery.serviceCacheBuilder().name(words[1]).build();
            cache.addListener(new ServiceCacheListener() {
                @Override
                public void cacheChanged() {
                    List<String> seen = new ArrayList<>();
                    for (ServiceInstance<Object> instance : cache.getInstances()) {
                        seen.add(instance.getId() + ":" + instance.getPort());
                    }
                    java.util.Collections.sort(seen);
                    reply("EVENT CACHE " + (seen.isEmpty() ? "-" : String.join(",", seen)));
                }

                @Override
                public void stateChanged(CuratorFramework changed, ConnectionState state) {}
            });
            cache.start();
            caches.add(cache);
            reply("CACHING");
        } else {
            reply("ERROR unknown discovery command: " + command);
        }
    }

    private static void handleCount(String command) throws Exception {
        String[] words = command.split("\\s+");
        if (words[0].equals("get") && words.length == 1) {
            VersionedValue<Integer> seen = count.getVersionedValue();
            reply("COUNT " + seen.getValue() + " " + seen.getVersion());
        } else if (words[0].equals("set") && words.length == 2) {
            count.setCount(Integer.parseInt(words[1]));
            reply("SET");
        } else if (words[0].equals("increment") && words.length == 3) {
            // The documented pattern: false means someone else wrote first, and Curator has read
            // the node again before returning it.
            incrementOnThreads(Integer.parseInt(words[1]), Integer.parseInt(words[2]), () -> {
                VersionedValue<Integer> seen = count.getVersionedValue();
                return count.trySetCount(seen, seen.getValue() + 1);
            });
        } else {
            reply("ERROR unknown count command: " + command);
        }
    }

    // Curator does not expose the node it created, but lock nodes are ephemeral, so ours is the
    // child of lockPath owned by our session.
    private static String ownLockNode() throws Exception {
        long session = client.getZookeeperClient().getZooKeeper().getSessionId();
        for (String child : client.getChildren().forPath(lockPath)) {
            String path = lockPath + "/" + child;
            Stat stat = client.checkExists().forPath(path);
            if (stat != null && stat.getEphemeralOwner() == session) {
                return path;
            }
        }
        throw new IllegalStateException("acquired, but no child of " + lockPath + " is owned by session 0x" + Long.toHexString(session));
    }

    private static String leasePath(Lease lease) {
        String name = lease.getNodeName();
        return name.startsWith("/") ? name : lockPath + "/leases/" + name;
    }

    // One line per reply, flushed, and never spread over several lines (exception messages may
    // contain newlines), so the Rust side can parse replies line by line.
    private static synchronized void reply(String line) {
        System.out.println(line.replace('\r', ' ').replace('\n', ' '));
        System.out.flush();
    }
}
