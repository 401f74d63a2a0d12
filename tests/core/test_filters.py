"""Describe-filter semantics as a table (ClientQuotasImage): exact / default / any, strict or not."""
import pytest

from quota_core import Entity, EntityFilter, FilterComponent, FilterError, MatchType, filter_quotas

E = Entity.of
ALICE = E(user="alice")
ALICE_APP = E(user="alice", client_id="app")
ALICE_DEF = E(user="alice", client_id=None)
DEF_USER = E(user=None)
DEF_APP = E(user=None, client_id="app")
LITERAL_DEF = E(user="<default>")
APP = E(client_id="app")
DEF_CLIENT = E(client_id=None)
IP1 = E(ip="10.0.0.1")
IP_DEF = E(ip=None)
ALL = [ALICE, ALICE_APP, ALICE_DEF, DEF_USER, DEF_APP, LITERAL_DEF, APP, DEF_CLIENT, IP1, IP_DEF]
QUOTAS = {e: {"producer_byte_rate": 1.0} if not e.is_ip else {"connection_creation_rate": 1.0}
          for e in ALL}

ex, df, an = FilterComponent.exact, FilterComponent.default, FilterComponent.any


@pytest.mark.parametrize("components, strict, expected", [
    ([], False, ALL),
    ([], True, []),
    ([ex("user", "alice")], False, [ALICE, ALICE_APP, ALICE_DEF]),
    ([ex("user", "alice")], True, [ALICE]),
    ([df("user")], False, [DEF_USER, DEF_APP]),
    ([df("user")], True, [DEF_USER]),
    ([ex("user", "<default>")], False, [LITERAL_DEF]),
    ([an("user")], False, [ALICE, ALICE_APP, ALICE_DEF, DEF_USER, DEF_APP, LITERAL_DEF]),
    ([an("user")], True, [ALICE, DEF_USER, LITERAL_DEF]),
    ([an("user"), an("client-id")], True, [ALICE_APP, ALICE_DEF, DEF_APP]),
    ([an("user"), df("client-id")], False, [ALICE_DEF]),
    ([ex("client-id", "app")], False, [ALICE_APP, DEF_APP, APP]),
    ([ex("client-id", "app")], True, [APP]),
    ([df("user"), ex("client-id", "app")], True, [DEF_APP]),
    ([ex("user", "nobody")], False, []),
    ([an("ip")], False, [IP1, IP_DEF]),
    ([df("ip")], True, [IP_DEF]),
    ([ex("ip", "10.0.0.1")], False, [IP1]),
])
def test_filter_table(components, strict, expected):
    got = filter_quotas(QUOTAS, EntityFilter(tuple(components), strict))
    assert set(got) == set(expected)


@pytest.mark.parametrize("components, message", [
    ([ex("user", "a"), df("user")], "Entity type user cannot appear more than once in the filter."),
    ([an("group")], "Unsupported entity type group: use user, client-id or ip."),
    ([an("")], "Invalid empty entity type in the filter: give user, client-id or ip."),
    ([an("ip"), an("user")], "Invalid entity filter component combination. IP filter component "
                             "should not be used with user or clientId filter component."),
    ([FilterComponent("user", MatchType.EXACT, None)],
     "The exact match for user has no name: give a name, or match the default instead."),
    ([FilterComponent("user", MatchType.ANY, "x")],
     "The any match for user cannot carry a name ('x'): use an exact match to select a name."),
])
def test_filter_rejections(components, message):
    with pytest.raises(FilterError) as info:
        filter_quotas(QUOTAS, EntityFilter(tuple(components)))
    assert str(info.value) == message


def test_for_entity_matches_only_that_entity():
    for entity in ALL:
        assert set(filter_quotas(QUOTAS, EntityFilter.for_entity(entity))) == {entity}


def test_constructors():
    assert EntityFilter.all() == EntityFilter((), False)
    assert EntityFilter.contains([an("user")]).strict is False
    assert EntityFilter.contains_only([an("user")]).strict is True
