"""quota_core.domain.java_text: the one imitation of Java's HashMap order, used by the broker's entity
text (validation) and by the kafka-configs.sh dialect (configs_compat)."""
import pytest

from quota_core.domain.entities import Entity
from quota_core.domain.validation import java_entity_text


@pytest.mark.parametrize("pairs, text", [
    # As a KRaft 4.3.1 broker prints ClientQuotaEntity.toString(): client-id before user.
    ((("user", "alice"), ("client-id", "app")), "{client-id=app, user=alice}"),
    ((("client-id", "app"), ("user", "alice")), "{client-id=app, user=alice}"),
    ((("user", None), ("client-id", None)), "{client-id=null, user=null}"),
    ((("user", "u"),), "{user=u}"),
    ((("client-id", None),), "{client-id=null}"),
    ((("ip", "10.0.0.1"),), "{ip=10.0.0.1}"),
])
def test_entity_text_in_the_brokers_hashmap_order(pairs, text):
    assert java_entity_text(Entity.from_pairs(pairs)) == f"ClientQuotaEntity(entries={text})"
