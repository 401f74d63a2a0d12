"""The CLI's start-up is most of a describe round trip (benchmarks/bench_cli_vs_configs.py):
``--describe`` loads neither the modules of the other commands nor the kafka-python message
classes it never sends. Run in fresh interpreters, so what other tests imported cannot hide
an import."""
from __future__ import annotations

import json
import subprocess
import sys

#: Loaded only by the commands that need them, never by --describe.
NOT_FOR_DESCRIBE = ["quota_core.cli.configs_compat", "quota_core.changes.audit",
                    "quota_core.domain.serialization", "quota_core.throttling.spreads", "quota_core.throttling.story",
                    "quota_core.throttling.live", "yaml"]


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_describe_on_a_sandbox_loads_only_what_it_uses(tmp_path):
    store = tmp_path / "q.sqlite"
    from quota_core.cli.main import main

    assert main(["--sandbox", str(store), "--alter", "--user", "a=b,<default>",
                 "--add", "producer_byte_rate=1024"]) == 0
    loaded = _modules_after(
        "import io\nfrom quota_core.cli.main import main\nout = io.StringIO()\n"
        f"assert main(['--sandbox', {str(store)!r}, '--describe', '--output', 'json'], out) == 0\n"
        "assert '\"a=b,<default>\"' in out.getvalue(), out.getvalue()")
    assert "orjson" in loaded
    assert not loaded & set(NOT_FOR_DESCRIBE), sorted(loaded & set(NOT_FOR_DESCRIBE))


def test_the_kafka_backend_loads_no_unused_message_classes():
    loaded = _modules_after("import quota_core.backends.kafka, quota_core.backends.kafka_brokers")
    unused = {"kafka.protocol.admin.topics", "kafka.protocol.admin.acl",
              "kafka.protocol.admin.transactions", "kafka.protocol.consumer.fetch",
              "kafka.protocol.consumer.offsets", "kafka.consumer", "kafka.admin"}
    assert not loaded & unused, sorted(loaded & unused)
    assert "kafka.protocol.admin.client_quotas" in loaded
