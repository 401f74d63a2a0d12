"""lint on the real shared 3-broker cluster: the quota set and every broker's settings read
from the brokers (their threads: 4 io + 2 network in localkafka, not Kafka's 8 + 3)."""
from __future__ import annotations

import json
import time

from quota_core import Entity
from quota_core.domain.alterations import Alteration, Op
from quota_core.backends.kafka import KafkaBackend
from tests.cli_steps import run

E = Entity.of
PROTECTED = "lint-svc-ünï <b>"   # opaque: unicode, a space, HTML


def _set(backend, quotas: dict) -> None:
    backend.alter([Alteration(e, tuple(Op.set(k, v) for k, v in q.items()))
                   for e, q in quotas.items()])


def _clear(backend, quotas: dict) -> None:
    backend.alter([Alteration(e, tuple(Op.remove(k) for k in q)) for e, q in quotas.items()])


def _visible(backend, quotas: dict, within_s: float = 10.0) -> None:
    """Brokers apply quota records a little apart: wait until a describe shows them."""
    deadline = time.monotonic() + within_s
    while any(backend.describe().get(e) != q for e, q in quotas.items()):
        assert time.monotonic() < deadline, "the cluster did not show the quotas set"
        time.sleep(0.1)


def test_lint_on_the_shared_cluster(kafka_cluster):
    mine = {E(user=None): {"producer_byte_rate": 40_000.0},
            E(client_id="lint-heavy"): {"request_percentage": 700.0},
            E(user=PROTECTED, client_id="app"): {"consumer_byte_rate": 5e6}}
    with KafkaBackend(kafka_cluster.bootstrap) as backend:
        _set(backend, mine)
        try:
            _visible(backend, mine)
            code, out, err = run("lint", "--bootstrap-server", kafka_cluster.bootstrap,
                                 "--protected", "lint-svc-*", "--output", "json")
        finally:
            _clear(backend, mine)
    assert code == 2, err
    found = {(f["rule"], json.dumps(f["entity"], ensure_ascii=False), f["key"]): f
             for f in json.loads(out)}
    protected = found[("protected-under-default", '{"user": null}', "producer_byte_rate")]
    assert repr(PROTECTED) in protected["evidence"]
    assert protected["fix"]["entries"] == [{"entity": {"user": PROTECTED},
                                            "quotas": {"producer_byte_rate": 10**18}}]
    # the cluster's own threads (4 + 2): 700 % cannot bind here, though it could on Kafka's
    # defaults (8 + 3 = 1,100 %)
    cannot = found[("cannot-bind", '{"client-id": "lint-heavy"}', "request_percentage")]
    assert "num.io.threads 4 + num.network.threads 2, read from 3 brokers" in cannot["evidence"]
    assert cannot["fix"]["entries"][0]["quotas"] == {"request_percentage": 600}
    small = found[("too-small", '{"user": null}', "producer_byte_rate")]
    assert "read from 3 brokers" in small["evidence"]
    assert not [k for k in found if k[0] == "brokers-disagree"]
    assert "ran brokers-disagree on 3 brokers' settings" in err
