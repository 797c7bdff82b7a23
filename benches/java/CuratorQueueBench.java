// The W4 yardstick: Curator 5.4's DistributedQueue on the same server, in the same benchmark
// run. Queues ITEMS items of 100 bytes first, then starts CONSUMERS consumers (one
// CuratorFramework each) and times the drain, from the consumers' start to the last item
// consumed. Mode "lock-safe" (QueueBuilder.lockPath: an item is deleted only after it was
// consumed, Curator's at-least-once) or "plain" (taken, then consumed: at-most-once).
// Prints one JSON line.
//
// Usage: java -cp <classes>:<curator classpath> CuratorQueueBench <connect> <path> <items> <consumers> <mode>

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryNTimes;

public class CuratorQueueBench {
    static final QueueSerializer<byte[]> BYTES = new QueueSerializer<byte[]>() {
        public byte[] serialize(byte[] item) { return item; }
        public byte[] deserialize(byte[] bytes) { return bytes; }
    };

    static CuratorFramework client(String connect) throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10000, 10000, new RetryNTimes(3, 100));
        client.start();
        client.blockUntilConnected();
        return client;
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], mode = args[4];
        int items = Integer.parseInt(args[2]), consumers = Integer.parseInt(args[3]);
        boolean lockSafe = mode.equals("lock-safe");

        CuratorFramework producerClient = client(connect);
        DistributedQueue<byte[]> producer = QueueBuilder.builder(producerClient, null, BYTES, path).buildQueue();
        producer.start();
        long putStart = System.nanoTime();
        for (int i = 0; i < items; i++) {
            producer.put(new byte[100]);
        }
        double putSeconds = (System.nanoTime() - putStart) / 1e9;

        CountDownLatch drained = new CountDownLatch(items);
        List<CuratorFramework> clients = new ArrayList<>();
        List<DistributedQueue<byte[]>> queues = new ArrayList<>();
        long start = System.nanoTime();
        for (int c = 0; c < consumers; c++) {
            CuratorFramework client = client(connect);
            QueueConsumer<byte[]> consumer = new QueueConsumer<byte[]>() {
                public void consumeMessage(byte[] item) { drained.countDown(); }
                public void stateChanged(CuratorFramework client, ConnectionState state) {}
            };
            QueueBuilder<byte[]> builder = QueueBuilder.builder(client, consumer, BYTES, path);
            if (lockSafe) {
                builder = builder.lockPath(path + "-locks");
            }
            DistributedQueue<byte[]> queue = builder.buildQueue();
            queue.start();
            clients.add(client);
            queues.add(queue);
        }
        boolean complete = drained.await(300, TimeUnit.SECONDS);
        double seconds = (System.nanoTime() - start) / 1e9;
        long done = items - drained.getCount();
        System.out.printf(
            "{\"lib\":\"curator\",\"workload\":\"W4-curator\",\"mode\":\"%s\",\"items\":%d,\"consumers\":%d,"
                + "\"items_per_s\":%.1f,\"complete\":%b,\"consumed\":%d,\"put_s\":%.2f}%n",
            lockSafe ? "lock_safe" : "plain", items, consumers, done / seconds, complete, done, putSeconds);
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
