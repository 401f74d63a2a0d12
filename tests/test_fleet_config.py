"""The fleet's configuration file (issue 29): parsing (pure), loading, and the fleet of one
that today's single settings make."""
from __future__ import annotations

import os

import pytest

from quota_core.backends.fleet_config import load_fleet, read_fleet_file
from quota_core.errors import UsageError
from quota_core.fleet import ClusterConfig, Fleet, fleet_from_mapping, fleet_of_one, parse_fleet

GOOD = """\
# two clusters
[clusters.staging]
sandbox = "stores/staging.sqlite"
label = "Staging"

[clusters.prod]
bootstrap_servers = "kafka-1:9092,kafka-2:9092"
command_config = "/etc/kafka/prod.properties"
metrics = ["1=http://kafka-1:9404/metrics", "2=http://kafka-2:9404/metrics"]
metrics_template = "http://{host}:9404/metrics"
read_only = true
editors = ["alice@example.com"]
history_dir = "history/prod"
audit_log = "/var/log/quota/prod.jsonl"

[clusters.prod.properties]
security.protocol = "SASL_SSL"
"sasl.jaas.config" = "org.apache.kafka.common.security.plain.PlainLoginModule required username='u' password='hunter2-secret';"
"""


def parse(text: str) -> Fleet:
    return parse_fleet(text, source="fleet.toml", base_dir="/etc/quota")


def error(text: str) -> str:
    with pytest.raises(UsageError) as caught:
        parse(text)
    return str(caught.value)


def test_a_good_file_parses_in_file_order_with_paths_resolved():
    fleet = parse(GOOD)
    assert fleet.names() == ["staging", "prod"]
    assert fleet.source == "fleet.toml"
    staging, prod = fleet.select("staging"), fleet.select("prod")
    assert staging.sandbox == "/etc/quota/stores/staging.sqlite"
    assert staging.bootstrap_servers is None and staging.display_name == "Staging"
    assert staging.editors is None and staging.read_only is False
    assert prod.bootstrap_servers == "kafka-1:9092,kafka-2:9092"
    assert prod.command_config == "/etc/kafka/prod.properties"
    assert prod.metrics == ("1=http://kafka-1:9404/metrics", "2=http://kafka-2:9404/metrics")
    assert prod.metrics_template == "http://{host}:9404/metrics"
    assert prod.read_only is True and prod.editors == ("alice@example.com",)
    assert prod.display_name == "prod" and prod.label is None
    assert prod.history_dir == "/etc/quota/history/prod"
    assert prod.audit_log == "/var/log/quota/prod.jsonl"
    # an unquoted dotted Java name is a nested table to TOML: flattened back
    assert prod.properties["security.protocol"] == "SASL_SSL"
    assert "hunter2-secret" in prod.properties["sasl.jaas.config"]


def test_secrets_never_show_in_repr_or_str():
    fleet = parse(GOOD)
    prod = fleet.select("prod")
    for text in (repr(prod), str(prod), repr(fleet), str(fleet), repr(prod.properties),
                 str(prod.properties), f"{prod}", f"{prod.properties}"):
        assert "hunter2" not in text and "SASL_SSL" not in text
    assert "sasl.jaas.config" in repr(prod)  # the keys do show
    assert prod.public_properties() == {"security.protocol": "SASL_SSL",
                                        "sasl.jaas.config": "••••••"}


@pytest.mark.parametrize("text, words", [
    ("[clusters.a\nsandbox = 'x'\n", ["fleet.toml", "not valid TOML", "line 1"]),
    ("[clusters.a]\nsandbox = 'x'\nsandbox = 'y'\n", ["not valid TOML", "line 3"]),
    ("[clusters.a]\nsandbox = 'x'\n\nbootstrap_server = 'k:1'\n",
     ["line 4", "unknown key 'bootstrap_server'", "Did you mean 'bootstrap_servers'"]),
    ("[clusters.a]\nsandbox = 'x'\nreadonly = true\n",
     ["line 3", "'readonly'", "Did you mean 'read_only'"]),
    ("[clusters.a]\nlabel = 'x'\n", ["line 1", "[clusters.a] has no store", "bootstrap_servers"]),
    ("[clusters.a]\nsandbox = 'x'\nbootstrap_servers = 'k:1'\n",
     ["[clusters.a] has two stores", "exactly one"]),
    ("[clusters.'-a']\nsandbox = 'x'\n", ["'-a' is not allowed", "[A-Za-z0-9][A-Za-z0-9_.-]*"]),
    ("[clusters.'a b']\nsandbox = 'x'\n", ["'a b' is not allowed"]),
    ("cluster = 1\n", ["unknown top-level key 'cluster'", "Did you mean 'clusters'", "line 1"]),
    ("", ["no [clusters.NAME] table"]),
    ("[clusters]\n", ["no [clusters.NAME] table"]),
    ("clusters = 3\n", ["clusters must be tables"]),
    ("[clusters.a]\nsandbox = 'x'\nread_only = 'yes'\n", ["line 3", "read_only must be true or false"]),
    ("[clusters.a]\nsandbox = 'x'\neditors = 'alice'\n", ["line 3", "editors must be a list"]),
    ("[clusters.a]\nsandbox = 'x'\nmetrics = [1, 2]\n", ["metrics must be a list of strings"]),
    ("[clusters.a]\nsandbox = 3\n", ["line 2", "sandbox must be a string"]),
    ("[clusters.a]\nbootstrap_servers = '  '\n", ["line 2", "bootstrap_servers is empty"]),
    ("[clusters.a]\nsandbox = 'x'\nproperties = 'a=b'\n", ["properties must be a table"]),
    ("clusters = { a = 1 }\n", ["clusters.a must be a table"]),
])
def test_every_bad_file_is_a_usage_error_naming_the_place(text, words):
    message = error(text)
    for word in words:
        assert word in message, message
    assert "Traceback" not in message


def test_a_bad_file_never_echoes_a_property_value():
    text = GOOD + "\n[clusters.broken]\nlabel = 'no store'\n"
    assert "hunter2" not in error(text)


def test_select_none_unknown_and_close_match():
    fleet = parse(GOOD)
    with pytest.raises(UsageError, match=r"names 2 clusters.*--cluster NAME.*staging, prod"):
        fleet.select(None)
    with pytest.raises(UsageError) as caught:
        fleet.select("prd")
    assert "unknown cluster 'prd'; known: staging, prod" in str(caught.value)
    assert "Did you mean 'prod'" in str(caught.value)
    assert "Did you mean" not in _message(fleet, "zzzzz")
    one = parse("[clusters.only]\nsandbox = 'x'\n")
    assert one.select(None).name == "only"
    with pytest.raises(UsageError, match="No cluster is configured"):
        Fleet({}, "QUOTA_* settings").select(None)


def _message(fleet: Fleet, name: str) -> str:
    with pytest.raises(UsageError) as caught:
        fleet.select(name)
    return str(caught.value)


def test_metrics_may_be_one_comma_separated_string():
    fleet = parse("[clusters.a]\nsandbox = 'x'\nmetrics = 'http://a/m, b=http://b/m'\n")
    assert fleet.select("a").metrics == ("http://a/m", "b=http://b/m")
    assert fleet.select("a").metrics_arg == "http://a/m,b=http://b/m"


def test_the_fleet_of_one_is_todays_single_setting():
    env = {"QUOTA_BOOTSTRAP_SERVERS": " k:9092 ", "QUOTA_COMMAND_CONFIG": "/c.properties",
           "QUOTA_READ_ONLY": "1", "QUOTA_EDITORS": "alice, bob",
           "QUOTA_METRICS": "http://a/m,http://b/m", "QUOTA_AUDIT_LOG": "/tmp/a.jsonl"}
    fleet = fleet_of_one(env)
    assert fleet.names() == ["default"] and fleet.source == "QUOTA_* settings"
    c = fleet.select(None)
    assert (c.bootstrap_servers, c.command_config, c.read_only, c.editors) == \
        ("k:9092", "/c.properties", True, ("alice", "bob"))
    assert c.metrics == ("http://a/m", "http://b/m") and c.audit_log == "/tmp/a.jsonl"
    assert c.display_name == "Kafka cluster (environment)"
    # the env sandbox wins over the env cluster, as in the sidebar
    env2 = {**env, "QUOTA_SANDBOX": "s.sqlite"}
    c2 = fleet_of_one(env2, base_dir="/work").select(None)
    assert c2.sandbox == "/work/s.sqlite" and c2.bootstrap_servers is None


def test_the_fleet_of_one_from_secrets_takes_its_label_as_name_when_it_is_one():
    secrets = {"kafka": {"bootstrap_servers": "k:1", "label": "prod-eu",
                         "properties": {"sasl.password": "pw-secret"}},
               "access": {"read_only": True, "editors": ["carol"]},
               "metrics": {"endpoints": ["http://a/m"], "template": "http://{host}/m"}}
    fleet = fleet_of_one({}, secrets)
    assert fleet.names() == ["prod-eu"] and fleet.source == "secrets.toml"
    c = fleet.select("prod-eu")
    assert c.properties == {"sasl.password": "pw-secret"}
    assert c.read_only and c.editors == ("carol",) and c.metrics == ("http://a/m",)
    assert c.metrics_template == "http://{host}/m"
    assert "pw-secret" not in repr(fleet)
    spaced = fleet_of_one({}, {"kafka": {"bootstrap_servers": "k:1", "label": "Prod EU"}})
    assert spaced.names() == ["default"] and spaced.select(None).display_name == "Prod EU"
    assert fleet_of_one({}, {}).names() == []


def test_fleet_from_secrets_reads_clusters_beside_other_sections():
    secrets = {"access": {"read_only": True},
               "clusters": {"a": {"sandbox": "a.sqlite"}, "b": {"bootstrap_servers": "k:1"}}}
    fleet = fleet_from_mapping(secrets, source="secrets.toml", base_dir="/srv")
    assert fleet.names() == ["a", "b"] and fleet.select("a").sandbox == "/srv/a.sqlite"
    with pytest.raises(UsageError, match=r"secrets.toml: \[clusters.b\] has an unknown key"):
        fleet_from_mapping({"clusters": {"b": {"sandbox": "x", "labl": "y"}}},
                           source="secrets.toml", base_dir="/srv")


def test_load_fleet_order_config_then_env_then_secrets_then_single(tmp_path):
    a = tmp_path / "a.toml"
    a.write_text("[clusters.from-flag]\nsandbox = 'a.sqlite'\n")
    b = tmp_path / "sub" / "b.toml"
    b.parent.mkdir()
    b.write_text("[clusters.from-env]\nsandbox = 'b.sqlite'\n")
    env = {"QUOTA_CONFIG": str(b), "QUOTA_SANDBOX": "x.sqlite"}
    secrets = {"clusters": {"from-secrets": {"sandbox": "s.sqlite"}}}
    assert load_fleet(str(a), env, secrets).names() == ["from-flag"]
    assert load_fleet(str(a), env).select(None).sandbox == str(tmp_path / "a.sqlite")
    fleet = load_fleet(None, env, secrets)
    assert fleet.names() == ["from-env"] and fleet.source == str(b)
    assert fleet.select(None).sandbox == str(tmp_path / "sub" / "b.sqlite")
    assert load_fleet(None, {"QUOTA_SANDBOX": "x"}, secrets).names() == ["from-secrets"]
    assert load_fleet(None, {"QUOTA_SANDBOX": "x"}, {}).names() == ["default"]


def test_an_unreadable_config_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"--config .*nope.toml: no such file"):
        read_fleet_file(tmp_path / "nope.toml")
    with pytest.raises(UsageError, match="is a folder"):
        load_fleet(None, {"QUOTA_CONFIG": str(tmp_path)})
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"\xff\xfe[clusters]")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_fleet_file(bad)


def test_cluster_config_is_hashable_and_compares_by_value():
    a = ClusterConfig("a", sandbox="/x", properties={"k": "v"})
    b = ClusterConfig("a", sandbox="/x", properties={"k": "v"})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert os.path.isabs(parse("[clusters.a]\nsandbox = '~/x.sqlite'\n").select("a").sandbox)
