"""``kafka-client-quotas diff`` between two sandbox clusters of a fleet file: equal (0),
different (2, every key and one-sided entries, raw unicode names), errors (1)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from quota_core import Entity
from tests.cli_steps import run, sandbox_with

E = Entity.of
MiB = 1024 * 1024


def fleet(tmp_path: Path, staging: dict, prod: dict | None = None, *,
          prod_path: str | None = None) -> str:
    sandbox_with(tmp_path / "staging.sqlite", staging)
    if prod is not None:
        sandbox_with(tmp_path / "prod.sqlite", prod)
    cfg = tmp_path / "fleet.toml"
    cfg.write_text('[clusters.staging]\nsandbox = "staging.sqlite"\n\n'
                   f'[clusters.prod]\nsandbox = "{prod_path or "prod.sqlite"}"\n',
                   encoding="utf-8")
    return str(cfg)


SAME = {E(user="alice"): {"producer_byte_rate": MiB}, E(user=None): {"consumer_byte_rate": 5.0}}


def test_two_equal_clusters_exit_0_with_an_empty_list(tmp_path):
    cfg = fleet(tmp_path, SAME, SAME)
    code, out, err = run("diff", "--config", cfg, "--cluster", "staging", "--against", "prod",
                         "--output", "json")
    assert (code, json.loads(out), err) == (0, [], "")
    code, out, _ = run("diff", "--config", cfg, "--cluster", "staging", "--against", "prod")
    assert code == 0 and out == "staging and prod hold the same quota set (2 entries).\n"


def test_every_difference_with_null_on_the_missing_side(tmp_path):
    staging = {E(user="alice"): {"producer_byte_rate": MiB},
               E(user="ünï 名", client_id="<default>"): {"request_percentage": 12.5},
               E(user=None): {"consumer_byte_rate": 5.0}}
    prod = {E(user="alice"): {"producer_byte_rate": 2 * MiB, "request_percentage": 50.0},
            E(user=None): {"consumer_byte_rate": 5.0},
            E(ip="10.0.0.1"): {"connection_creation_rate": 3}}
    cfg = fleet(tmp_path, staging, prod)
    code, out, err = run("diff", "--config", cfg, "--cluster", "staging", "--against", "prod",
                         "--output", "json")
    assert code == 2, err
    assert json.loads(out) == [
        {"entity": {"user": "alice"}, "key": "producer_byte_rate",
         "values": {"staging": MiB, "prod": 2 * MiB}},
        {"entity": {"user": "alice"}, "key": "request_percentage",
         "values": {"staging": None, "prod": 50}},
        {"entity": {"user": "ünï 名", "client-id": "<default>"}, "key": "request_percentage",
         "values": {"staging": 12.5, "prod": None}},
        {"entity": {"ip": "10.0.0.1"}, "key": "connection_creation_rate",
         "values": {"staging": None, "prod": 3}}]
    # the other way round: the sides swap in every row
    code, out, _ = run("diff", "--config", cfg, "--cluster", "prod", "--against", "staging",
                       "--output", "json")
    assert code == 2 and list(json.loads(out)[0]["values"]) == ["prod", "staging"]


def test_the_text_names_each_entity_once_with_both_sides(tmp_path):
    cfg = fleet(tmp_path, {E(user="ünï 名"): {"producer_byte_rate": MiB}},
                {E(user="ünï 名"): {"producer_byte_rate": 2 * MiB, "request_percentage": 50.0}})
    code, out, _ = run("diff", "--config", cfg, "--cluster", "staging", "--against", "prod",
                       "--output", "plain")
    assert code == 2
    assert out.splitlines() == [
        "{user=ünï 名}",
        "    producer_byte_rate: staging 1048576 (1 MiB/s), prod 2097152 (2 MiB/s)",
        "    request_percentage: staging (not set), prod 50% of a thread",
        "", "staging and prod differ: 2 keys of 1 entity."]


@pytest.mark.parametrize("argv, words", [
    (["--cluster", "staging", "--against", "prd"], "unknown cluster 'prd'; known: staging, prod"),
    (["--cluster", "staging", "--against", "staging"], "compare two different clusters"),
    (["--cluster", "staging"], "the following arguments are required: --against"),
    (["--cluster", "staging", "--against", "prod", "--timeout", "0"], "--timeout 0"),
])
def test_a_usage_error_is_1_not_2(tmp_path, argv, words):
    code, out, err = run("diff", "--config", fleet(tmp_path, SAME, SAME), *argv)
    assert code == 1 and out == "" and words in err


def test_a_cluster_that_cannot_be_read_is_named_and_exits_1(tmp_path):
    cfg = fleet(tmp_path, SAME, prod_path="missing.sqlite")
    code, out, err = run("diff", "--config", cfg, "--cluster", "staging", "--against", "prod")
    assert code == 1 and out == ""
    assert err.startswith("kafka-client-quotas diff: cluster prod: ") and "staging:" not in err
