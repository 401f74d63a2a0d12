package io.quotaconsole.telemetry;

import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.Gauge;
import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.AggregationTemporality;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A broker-side KIP-714 / KIP-1217 plugin: what each client instance pushed, as JMX MBeans.
 *
 * <p>Loaded through {@code metric.reporters}; the broker hands it every {@code PushTelemetry}
 * payload (OTLP protobuf, already decompressed), decoded here with the OpenTelemetry protobuf
 * classes that kafka-clients ships. The latest value of each number data point is kept in a
 * registry of Kafka's own {@link Metrics} with a {@link JmxReporter} ({@code kafka.client}
 * domain), so the Prometheus JMX exporter agent the broker already runs serves them:
 * <pre>
 * kafka.client:type=telemetry,client_instance_id=..,client_id=..,principal=..,
 *     client_software_name=..,client_software_version=..,metric=M[,destination_node_id=N]  value
 * kafka.client:type=telemetry_push,client_instance_id=..,client_id=..,...                   age_seconds
 * kafka.client:type=telemetry_plugin                          instances, series, rejected
 * </pre>
 * Bounded: at most {@code quota.console.telemetry.max.instances} instances and
 * {@code quota.console.telemetry.max.series.per.instance} series each; only data points whose
 * attributes are none or a node id are kept (per-topic / per-partition points are skipped);
 * an instance that has not pushed for {@code quota.console.telemetry.expiry.intervals} push
 * intervals (at least {@code quota.console.telemetry.min.expiry.ms}) is dropped with its series.
 */
public class ClientTelemetryPlugin implements MetricsReporter, ClientTelemetryExporterProvider, ClientTelemetryExporter {
    private static final Logger LOG = LoggerFactory.getLogger(ClientTelemetryPlugin.class);

    public static final String PREFIX = "quota.console.telemetry.";
    public static final String MAX_INSTANCES = PREFIX + "max.instances";
    public static final String MAX_SERIES = PREFIX + "max.series.per.instance";
    public static final String EXPIRY_INTERVALS = PREFIX + "expiry.intervals";
    public static final String MIN_EXPIRY_MS = PREFIX + "min.expiry.ms";

    static final String DOMAIN = "kafka.client";
    static final String VALUE_GROUP = "telemetry";
    static final String PUSH_GROUP = "telemetry_push";
    static final String PLUGIN_GROUP = "telemetry_plugin";
    /** Longest label value kept; an instance with a longer client id etc. is not exported. */
    static final int MAX_LABEL_CHARS = 1024;
    static final Pattern METRIC_NAME = Pattern.compile("[A-Za-z0-9_.\\-]{1,255}");
    /** Real broker node ids; clients' bootstrap (negative) and coordinator ids are skipped. */
    static final long MAX_NODE_ID = 1L << 30;

    private int maxInstances = 10_000;
    private int maxSeries = 100;
    private int expiryIntervals = 3;
    private long minExpiryMs = 3_000;

    private final Time time;
    private final Map<String, Instance> instances = new ConcurrentHashMap<>();
    private final AtomicLong rejected = new AtomicLong();
    private final AtomicLong seriesCount = new AtomicLong();
    private Metrics registry;
    private ScheduledExecutorService sweeper;

    public ClientTelemetryPlugin() {
        this(Time.SYSTEM);
    }

    ClientTelemetryPlugin(Time time) {
        this.time = time;
    }

    // ------------------------------------------------------------------ MetricsReporter
    @Override
    public synchronized void configure(Map<String, ?> configs) {
        maxInstances = intConfig(configs, MAX_INSTANCES, maxInstances);
        maxSeries = intConfig(configs, MAX_SERIES, maxSeries);
        expiryIntervals = intConfig(configs, EXPIRY_INTERVALS, expiryIntervals);
        minExpiryMs = intConfig(configs, MIN_EXPIRY_MS, (int) minExpiryMs);
        start();
    }

    private static int intConfig(Map<String, ?> configs, String key, int fallback) {
        Object raw = configs.get(key);
        if (raw == null) return fallback;
        try {
            int value = Integer.parseInt(raw.toString().trim());
            if (value <= 0) throw new NumberFormatException();
            return value;
        } catch (NumberFormatException e) {
            throw new org.apache.kafka.common.config.ConfigException(key, raw, "must be a positive integer");
        }
    }

    synchronized void start() {
        if (registry != null) return;
        JmxReporter jmx = new JmxReporter();
        jmx.configure(Map.of());
        registry = new Metrics(new MetricConfig(), List.of(jmx), time, new KafkaMetricsContext(DOMAIN));
        registry.addMetric(registry.metricName("instances", PLUGIN_GROUP,
                "Client instances whose pushes the plugin holds"), (Gauge<Double>) (c, now) -> (double) instances.size());
        registry.addMetric(registry.metricName("series", PLUGIN_GROUP,
                "Series the plugin exports"), (Gauge<Double>) (c, now) -> (double) seriesCount.get());
        registry.addMetric(registry.metricName("rejected", PLUGIN_GROUP,
                "Pushes, instances and series not kept (garbage, over a bound)"), (Gauge<Double>) (c, now) -> (double) rejected.get());
        sweeper = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "client-telemetry-plugin-sweeper");
            t.setDaemon(true);
            return t;
        });
        sweeper.scheduleWithFixedDelay(this::sweep, 1, 1, TimeUnit.SECONDS);
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
    }

    @Override
    public void metricChange(KafkaMetric metric) {
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
    }

    @Override
    public synchronized void close() {
        if (sweeper != null) sweeper.shutdownNow();
        if (registry != null) registry.close();
        instances.clear();
        registry = null;
    }

    // ------------------------------------------------------------------ KIP-1217
    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this;
    }

    @Override
    public void exportMetrics(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        try {
            export(context.authorizableRequestContext(), context.pushIntervalMs(), payload);
        } catch (RuntimeException e) {  // a plugin fault must never fail the client's push
            rejected.incrementAndGet();
            LOG.debug("client telemetry push not kept", e);
        }
    }

    void export(AuthorizableRequestContext request, int pushIntervalMs, ClientTelemetryPayload payload) {
        if (registry == null) start();
        if (payload.clientInstanceId() == null) {
            rejected.incrementAndGet();
            return;
        }
        String instanceId = payload.clientInstanceId().toString();
        ByteBuffer data = payload.data();
        MetricsData decoded;
        try {
            decoded = MetricsData.parseFrom(data == null ? ByteBuffer.allocate(0) : data.duplicate());
        } catch (Exception e) {  // InvalidProtocolBufferException: garbage
            rejected.incrementAndGet();
            return;
        }
        Instance instance = instances.get(instanceId);
        if (instance == null) {
            Map<String, String> tags = instanceTags(instanceId, request);
            if (tags == null || instances.size() >= maxInstances) {
                rejected.incrementAndGet();
                return;
            }
            instance = instances.computeIfAbsent(instanceId, id -> new Instance(tags).registered());
        }
        long now = time.milliseconds();
        synchronized (instance) {
            if (instance.removed) return;  // swept meanwhile: the next push registers it again
            instance.lastPushMs = now;
            instance.expiryMs = Math.max(minExpiryMs, (long) expiryIntervals * Math.max(pushIntervalMs, 0));
            for (ResourceMetrics rm : decoded.getResourceMetricsList()) {
                for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                    for (Metric m : sm.getMetricsList()) {
                        record(instance, m);
                    }
                }
            }
        }
    }

    private void record(Instance instance, Metric m) {
        String name = m.getName();
        if (!METRIC_NAME.matcher(name).matches()) {
            rejected.incrementAndGet();
            return;
        }
        List<NumberDataPoint> points;
        boolean delta = false;
        switch (m.getDataCase()) {
            case GAUGE:
                points = m.getGauge().getDataPointsList();
                break;
            case SUM:
                points = m.getSum().getDataPointsList();
                delta = m.getSum().getAggregationTemporality() == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA;
                break;
            default:
                return;  // histograms and summaries: not exported
        }
        for (NumberDataPoint p : points) {
            String node = null;
            boolean other = false;
            for (KeyValue kv : p.getAttributesList()) {
                String key = kv.getKey();
                if (key.equals("node_id") || key.equals("node.id") || key.equals("node-id")) {
                    node = nodeId(kv);
                    if (node == null) other = true;
                } else {
                    other = true;
                }
            }
            if (other) {  // per-topic/partition points, bootstrap/coordinator nodes
                if (LOG.isTraceEnabled()) LOG.trace("not kept: {} {}", name, p.getAttributesList());
                continue;
            }
            double value;
            if (p.getValueCase() == NumberDataPoint.ValueCase.AS_DOUBLE) value = p.getAsDouble();
            else if (p.getValueCase() == NumberDataPoint.ValueCase.AS_INT) value = p.getAsInt();
            else continue;
            instance.set(name, node, value, delta);
        }
    }

    private static String nodeId(KeyValue kv) {
        String raw;
        switch (kv.getValue().getValueCase()) {
            case INT_VALUE:
                raw = Long.toString(kv.getValue().getIntValue());
                break;
            case STRING_VALUE:
                raw = kv.getValue().getStringValue();
                if (raw.startsWith("node-")) raw = raw.substring(5);
                break;
            default:
                return null;
        }
        try {
            long id = Long.parseLong(raw);
            return id >= 0 && id < MAX_NODE_ID ? Long.toString(id) : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    private static Map<String, String> instanceTags(String instanceId, AuthorizableRequestContext request) {
        Map<String, String> tags = new LinkedHashMap<>();
        tags.put("client_instance_id", instanceId);
        tags.put("client_id", request == null || request.clientId() == null ? "" : request.clientId());
        KafkaPrincipal principal = request == null ? null : request.principal();
        tags.put("principal", principal == null ? "" : principal.toString());
        String software = "", version = "";
        if (request instanceof RequestContext rc && rc.clientInformation != null) {
            software = rc.clientInformation.softwareName();
            version = rc.clientInformation.softwareVersion();
        }
        tags.put("client_software_name", software == null ? "" : software);
        tags.put("client_software_version", version == null ? "" : version);
        for (String v : tags.values()) {
            if (v.length() > MAX_LABEL_CHARS) return null;
        }
        return tags;
    }

    /** Drop every instance that has not pushed for its expiry time. */
    void sweep() {
        long now = time.milliseconds();
        for (Instance instance : new ArrayList<>(instances.values())) {
            synchronized (instance) {
                if (now - instance.lastPushMs > instance.expiryMs) instance.remove();
            }
        }
    }

    int instanceCount() {
        return instances.size();
    }

    long seriesCount() {
        return seriesCount.get();
    }

    long rejectedCount() {
        return rejected.get();
    }

    Metrics registry() {
        return registry;
    }

    // ------------------------------------------------------------------ one client instance
    private final class Instance {
        final Map<String, String> tags;
        final MetricName pushAge;
        final Map<String, Series> series = new LinkedHashMap<>();
        volatile long lastPushMs;
        long expiryMs = minExpiryMs;
        boolean removed;

        Instance(Map<String, String> tags) {
            this.tags = tags;
            this.lastPushMs = time.milliseconds();
            this.pushAge = registry.metricName("age_seconds", PUSH_GROUP, "Seconds since the last push", tags);
        }

        Instance registered() {
            registry.addMetric(pushAge, (Gauge<Double>) (c, now) -> (now - lastPushMs) / 1000.0);
            return this;
        }

        void set(String metric, String node, double value, boolean delta) {
            String key = node == null ? metric : metric + "\u0000" + node;
            Series s = series.get(key);
            if (s == null) {
                if (series.size() >= maxSeries) {
                    rejected.incrementAndGet();
                    return;
                }
                Map<String, String> t = new LinkedHashMap<>(tags);
                t.put("metric", metric);
                if (node != null) t.put("destination_node_id", node);
                s = new Series(registry.metricName("value", VALUE_GROUP, "The last value pushed", t));
                series.put(key, s);
                seriesCount.incrementAndGet();
                final Series fs = s;
                registry.addMetric(s.name, (Gauge<Double>) (c, now) -> fs.value);
            }
            s.value = delta && Double.isFinite(s.value) ? s.value + value : value;
        }

        void remove() {
            removed = true;
            instances.remove(tags.get("client_instance_id"), this);
            registry.removeMetric(pushAge);
            for (Series s : series.values()) {
                registry.removeMetric(s.name);
                seriesCount.decrementAndGet();
            }
            series.clear();
        }
    }

    private static final class Series {
        final MetricName name;
        volatile double value = Double.NaN;

        Series(MetricName name) {
            this.name = name;
        }
    }
}
