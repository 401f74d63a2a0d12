"""The Client telemetry page (issue 30): the cluster's client-metrics subscriptions, managed by
editors. Fast: a sandbox collects nothing and shows no form, a read-only fleet cluster refuses,
the form's input is checked by the CLI's own functions (one line, the form's words). One real
case on the session broker (which loads the telemetry plugin): subscribe on the page, read it
back with ``telemetry list``, see it audited, remove it on the page; the CLI's writes are
audited the same way."""
from __future__ import annotations

import io
import json

import pytest

from quota_core.backends.sandbox import SandboxBackend
from quota_core.changes.audit import AuditLog
from quota_core.cli import main as cli
from quota_core.domain import TELEMETRY_NOT_COLLECTED, Subscription
from quota_core.errors import UsageError
from quota_core.throttling.settle import recent_changes
from tests.app_steps import run_app, texts
from tests.pages.test_app import env  # noqa: F401  (fixture)
from tests.pages.test_fleet_app import fleet  # noqa: F401  (fixture)
from ui.subscriptions import form_words, subscription_from_form

PAGE = "pages/telemetry.py"
FORM_KEYS = ("tm_default", "tm_add", "tm_remove")


def _buttons(at) -> set[str]:
    return {b.key for b in at.button}


def test_a_sandbox_says_telemetry_is_not_collected_and_shows_no_form(env, tmp_path):
    path = tmp_path / "q.sqlite"
    with SandboxBackend(path) as backend:
        backend.init()
    env.setenv("QUOTA_SANDBOX", str(path))
    at = run_app(PAGE, operator="jdoe")
    assert at.title[0].value == "Client telemetry"
    assert any(t.startswith(TELEMETRY_NOT_COLLECTED[0].upper() + TELEMETRY_NOT_COLLECTED[1:])
               for t in texts(at.info)), texts(at.info)
    assert not _buttons(at) & set(FORM_KEYS) and not at.dataframe
    assert not [w.key for w in at.text_input if (w.key or "").startswith("tm_")]


def test_a_read_only_fleet_cluster_refuses(fleet):  # noqa: F811
    at = run_app(PAGE, secrets=fleet, query={"cluster": "prod"}, operator="jdoe")
    assert "cluster 'prod' is read-only" in " ".join(texts(at.error))
    assert not _buttons(at) & set(FORM_KEYS)


@pytest.mark.parametrize("fields, said", [
    (("", "org.apache.kafka.", "", ""), "subscription name '': give a name"),
    (("w", "", "", ""), "give Metric prefixes P[,P...]"),
    (("w", "org apache", "", ""), "Metric prefixes prefix 'org apache'"),
    (("w", "*", "client=x", ""), "Match 'client=x': give KEY=REGEX with KEY one of client_id"),
    (("w", "*", "client_id=(", ""), "Match 'client_id=(': not a regular expression"),
    (("w", "*", "", "5"), "Interval (ms) 5: give a whole number of milliseconds from 100"),
    (("w", "*", "", "soon"), "Interval (ms) 'soon': give a whole number"),
])
def test_the_form_is_checked_as_the_cli_checks_it_in_one_line(fields, said):
    with pytest.raises(UsageError) as caught:
        subscription_from_form(*fields)
    message = form_words(str(caught.value))
    assert said in message and "\n" not in message and "--" not in message, message


def test_the_form_reads_prefixes_match_lines_and_interval():
    sub = subscription_from_form(" watch ", "org.apache.kafka.producer., *",
                                 "client_id=batch-.*\n\n client_software_name=librdkafka\n", "")
    assert sub == Subscription("watch", ("org.apache.kafka.producer.", "*"),
                               {"client_id": "batch-.*", "client_software_name": "librdkafka"},
                               300_000)


def test_throttled_now_skips_subscription_changes_in_the_audit_log():
    """A subscription's audit record names no quota entity: 'recently changed' ignores it."""
    record = {"ts": "2026-01-01T00:00:00.000Z", "action": "telemetry-subscribe",
              "outcome": "applied", "entity": {}, "ops": []}
    assert recent_changes([record], now=1767225600.0) == []


def test_the_audit_page_shows_a_subscription_change(env, tmp_path):
    from quota_core.changes.audit import config_outcome, config_record

    env.setenv("QUOTA_SANDBOX", str(tmp_path / "q.sqlite"))
    intent = config_record(actor="jdoe", cluster={}, subject="client-metrics subscription w",
                           action="telemetry-subscribe", before={},
                           after={"metrics": "*", "interval.ms": "1000"}, extra={})
    AuditLog(tmp_path / "audit.jsonl").append_many([intent, config_outcome(
        intent, "applied", {"metrics": "*", "interval.ms": "1000"})])
    at = run_app("pages/audit.py")
    at.toggle(key="au_here").set_value(False).run()
    row = at.dataframe[0].value.iloc[0]
    assert (row["action"], row["outcome"], row["entity"], row["before"], row["after"]) == (
        "telemetry-subscribe", "applied", "client-metrics subscription w", "—",
        "metrics=*, interval.ms=1000")


# -- one real case ---------------------------------------------------------------------------
def _listed(bootstrap: str) -> dict[str, dict]:
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["telemetry", "list", "--bootstrap-server", bootstrap, "--output", "json"],
                    out, err) == 0, err.getvalue()
    return {s["name"]: s for s in json.loads(out.getvalue())}


@pytest.mark.kafka
def test_subscribe_on_the_page_reads_back_in_the_cli_and_is_audited(env, kafka_broker, tmp_path):
    env.setenv("QUOTA_BOOTSTRAP_SERVERS", kafka_broker.bootstrap)
    name = "page <b>watch</b>"  # a name is text, shown and written raw
    at = run_app(PAGE, operator="jdoe")
    assert {"tm_default", "tm_add"} <= _buttons(at), texts(at.error) + texts(at.info)
    at.text_input(key="tm_name").input(name)
    at.text_input(key="tm_metrics").input("org.apache.kafka.producer.")
    at.text_area(key="tm_match").input("client_id=batch-.*")
    at.text_input(key="tm_interval").input("5")
    at.button(key="tm_add").click().run()
    assert any("Interval (ms) 5" in t for t in texts(at.error)), texts(at.error)
    assert name not in _listed(kafka_broker.bootstrap)  # nothing sent
    at.text_input(key="tm_interval").input("10000")
    at.button(key="tm_add").click().run()
    assert not at.exception and not at.error, texts(at.error)
    assert _listed(kafka_broker.bootstrap)[name] == {
        "name": name, "metrics": ["org.apache.kafka.producer."],
        "match": {"client_id": "batch-.*"}, "interval_ms": 10000}
    assert name in list(at.dataframe[0].value["name"])
    change = [r for r in AuditLog(tmp_path / "audit.jsonl").read() if r.entity_text.endswith(name)]
    assert [(r.action, r.actor, r.outcome, r.before, r.after) for r in change] == [
        ("telemetry-subscribe", "jdoe", "applied", {}, {
            "metrics": "org.apache.kafka.producer.", "interval.ms": "10000",
            "match": "client_id=batch-.*"})]
    at.selectbox(key="tm_remove_name").select(name)
    at.button(key="tm_remove").click().run()
    assert not at.exception and not at.error, texts(at.error)
    assert name not in _listed(kafka_broker.bootstrap)
    # the CLI writes through the same audited path
    for args in (("subscribe", "cli-watch", "--metrics", "*"), ("unsubscribe", "cli-watch")):
        out, err = io.StringIO(), io.StringIO()
        assert cli.main(["telemetry", *args, "--bootstrap-server", kafka_broker.bootstrap],
                        out, err) == 0, err.getvalue()
    log = AuditLog(tmp_path / "audit.jsonl").read()
    assert [(r.action, r.entity_text) for r in log] == [
        ("telemetry-subscribe", f"client-metrics subscription {name}"),
        ("telemetry-unsubscribe", f"client-metrics subscription {name}"),
        ("telemetry-subscribe", "client-metrics subscription cli-watch"),
        ("telemetry-unsubscribe", "client-metrics subscription cli-watch")]
    assert log[1].after == {} and log[3].before == {"metrics": "*", "interval.ms": "300000"}
