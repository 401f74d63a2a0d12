package io.quotaconsole.telemetry;

import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.AnyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Gauge;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

/**
 * Drives {@link ClientTelemetryPlugin} as the broker would (tests/test_telemetry_plugin.py),
 * with a hand-turned clock, and prints what it holds after each step as {@code step k=v ...}:
 * garbage payloads, more instances and series than its bounds, per-topic points, an oversized
 * client id, expiry after a few push intervals.
 */
public class TelemetryPluginHarness {
    static final class ManualTime implements Time {
        long now = 1_000_000L;

        public long milliseconds() { return now; }
        public long nanoseconds() { return now * 1_000_000L; }
        public void sleep(long ms) { now += ms; }
        public void waitObject(Object o, Supplier<Boolean> done, long deadline) { }
    }

    static AuthorizableRequestContext request(String clientId) {
        return new AuthorizableRequestContext() {
            public String listenerName() { return "PLAINTEXT"; }
            public SecurityProtocol securityProtocol() { return SecurityProtocol.PLAINTEXT; }
            public KafkaPrincipal principal() { return new KafkaPrincipal("User", "alice"); }
            public InetAddress clientAddress() { return InetAddress.getLoopbackAddress(); }
            public int requestType() { return 72; }
            public int requestVersion() { return 0; }
            public String clientId() { return clientId; }
            public int correlationId() { return 1; }
        };
    }

    static ClientTelemetryPayload payload(Uuid id, byte[] data) {
        return new ClientTelemetryPayload() {
            public Uuid clientInstanceId() { return id; }
            public boolean isTerminating() { return false; }
            public String contentType() { return "application/x-protobuf"; }
            public ByteBuffer data() { return ByteBuffer.wrap(data); }
        };
    }

    static ClientTelemetryContext context(String clientId, int intervalMs) {
        return new ClientTelemetryContext() {
            public int pushIntervalMs() { return intervalMs; }
            public AuthorizableRequestContext authorizableRequestContext() { return request(clientId); }
        };
    }

    static KeyValue attr(String key, String value) {
        return KeyValue.newBuilder().setKey(key).setValue(AnyValue.newBuilder().setStringValue(value)).build();
    }

    /** {@code metrics} gauges, plus per-node and per-topic points of request latency. */
    static byte[] metrics(int metrics) {
        ScopeMetrics.Builder scope = ScopeMetrics.newBuilder();
        for (int i = 0; i < metrics; i++) {
            scope.addMetrics(Metric.newBuilder().setName("org.apache.kafka.producer.m" + i)
                    .setGauge(Gauge.newBuilder().addDataPoints(NumberDataPoint.newBuilder().setAsDouble(i))));
        }
        scope.addMetrics(Metric.newBuilder().setName("org.apache.kafka.producer.node.request.latency.avg")
                .setGauge(Gauge.newBuilder()
                        .addDataPoints(NumberDataPoint.newBuilder().setAsDouble(12.5).addAttributes(attr("node_id", "node-2")))
                        .addDataPoints(NumberDataPoint.newBuilder().setAsDouble(99).addAttributes(attr("node_id", "node--1")))
                        .addDataPoints(NumberDataPoint.newBuilder().setAsDouble(7).addAttributes(attr("topic", "t")))));
        return MetricsData.newBuilder().addResourceMetrics(ResourceMetrics.newBuilder().addScopeMetrics(scope))
                .build().toByteArray();
    }

    static int mbeans() throws Exception {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        return server.queryNames(new ObjectName("kafka.client:type=telemetry,*"), null).size();
    }

    static void report(String step, ClientTelemetryPlugin plugin) throws Exception {
        System.out.println(step + " instances=" + plugin.instanceCount() + " series=" + plugin.seriesCount()
                + " rejected=" + plugin.rejectedCount() + " mbeans=" + mbeans());
    }

    public static void main(String[] args) throws Exception {
        ManualTime time = new ManualTime();
        ClientTelemetryPlugin plugin = new ClientTelemetryPlugin(time);
        Map<String, Object> configs = new HashMap<>();
        configs.put(ClientTelemetryPlugin.MAX_INSTANCES, "5");
        configs.put(ClientTelemetryPlugin.MAX_SERIES, "4");
        configs.put(ClientTelemetryPlugin.MIN_EXPIRY_MS, "1000");
        plugin.configure(configs);

        plugin.exportMetrics(context("garbage", 1000), payload(Uuid.randomUuid(), new byte[]{(byte) 0xff, 1, 2, 3, 4, 5}));
        report("garbage", plugin);

        plugin.exportMetrics(context("app", 1000), payload(Uuid.randomUuid(), metrics(2)));
        report("one", plugin);  // m0, m1, latency{node 2}; bootstrap node and topic point dropped

        plugin.exportMetrics(context("wide", 1000), payload(Uuid.randomUuid(), metrics(50)));
        report("wide", plugin);  // 4 series kept of 51

        plugin.exportMetrics(context("x".repeat(5000), 1000), payload(Uuid.randomUuid(), metrics(1)));
        report("huge-client-id", plugin);

        for (int i = 0; i < 10; i++) {
            plugin.exportMetrics(context("many-" + i, 1000), payload(Uuid.randomUuid(), metrics(1)));
        }
        report("many", plugin);  // 5 instances at most

        time.sleep(2_000);  // within 3 push intervals of 1 s
        plugin.sweep();
        report("after-2s", plugin);
        time.sleep(1_500);  // past 3 intervals
        plugin.sweep();
        report("after-3.5s", plugin);
        plugin.close();
    }
}
