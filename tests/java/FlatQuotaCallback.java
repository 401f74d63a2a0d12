// A custom client.quota.callback.class (KIP-257) for the broker-settings tests: every client
// of a user shares one bucket, and no client is ever limited, whatever AlterClientQuotas
// stores. So the describe output (and the 8-level ladder) does not decide enforcement on a
// broker running it: the console must say so. Compiled at test time
// (tests/test_broker_settings_kafka.py) against the cached Kafka jars, and put on the broker's
// class path as a java agent jar (an agent jar joins the system class path; premain does
// nothing).
import java.lang.instrument.Instrumentation;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.server.quota.ClientQuotaCallback;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaType;

public final class FlatQuotaCallback implements ClientQuotaCallback {

    public static void premain(String args, Instrumentation inst) {
        // Only here so that the jar can be given to -javaagent, which puts it on the class path.
    }

    @Override
    public void configure(Map<String, ?> configs) { }

    @Override
    public Map<String, String> quotaMetricTags(ClientQuotaType quotaType, KafkaPrincipal principal,
                                               String clientId) {
        Map<String, String> tags = new HashMap<>();
        tags.put("user", principal.getName());
        tags.put("client-id", "");
        return tags;
    }

    @Override
    public Double quotaLimit(ClientQuotaType quotaType, Map<String, String> metricTags) {
        return null; // unlimited, whatever is stored
    }

    @Override
    public void updateQuota(ClientQuotaType quotaType, ClientQuotaEntity entity, double newValue) { }

    @Override
    public void removeQuota(ClientQuotaType quotaType, ClientQuotaEntity entity) { }

    @Override
    public boolean quotaResetRequired(ClientQuotaType quotaType) { return false; }

    @Override
    public boolean updateClusterMetadata(Cluster cluster) { return false; }

    @Override
    public void close() { }
}
