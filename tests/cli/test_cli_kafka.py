"""The CLI end to end on a real broker: PLAINTEXT, and SASL through --command-config."""
from __future__ import annotations

import json
import time
import subprocess
import sys

import pytest

from localkafka import free_port

pytestmark = pytest.mark.kafka


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "quota_core", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_alter_describe_resolve_on_plaintext(kafka_broker):
    bs = ["--bootstrap-server", kafka_broker.bootstrap]
    name = "cli e2e=user,1"
    done = cli(*bs, "--alter", "--user", name, "--client-id", "app",
               "--add", "producer_byte_rate=1MiB,consumer_byte_rate=4000000")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = cli(*bs, "--alter", "--names", "user=cli e2e\\=user\\,1", "--add",
               "request_percentage=56.25")
    assert done.returncode == 0, done.stderr
    described = cli(*bs, "--describe", "--user", name)
    assert described.stdout == (
        "{user=cli%20e2e%3Duser%2C1}\n"
        "request_percentage=56.25\n"
        "\n"
        "{user=cli%20e2e%3Duser%2C1, client-id=app}\n"
        "consumer_byte_rate=4000000\n"
        "producer_byte_rate=1048576\n")
    resolved = cli(*bs, "--resolve", "--user", name, "--client-id", "app")
    assert resolved.stdout == (
        "consumer_byte_rate=4000000 {user=cli%20e2e%3Duser%2C1, client-id=app}\n"
        "  level 1, shared by only client id 'app' of user 'cli e2e=user,1' (one allowance "
        "per user and client id)\n"
        "producer_byte_rate=1048576 {user=cli%20e2e%3Duser%2C1, client-id=app}\n"
        "  level 1, shared by only client id 'app' of user 'cli e2e=user,1' (one allowance "
        "per user and client id)\n"
        "request_percentage=56.25 {user=cli%20e2e%3Duser%2C1}\n"
        "  level 3, shared by every client id of user 'cli e2e=user,1' together (one "
        "allowance per user)\n")
    doc = json.loads(cli(*bs, "--resolve", "--user", name, "--client-id", "other",
                         "--output", "json").stdout)
    assert doc["quotas"]["request_percentage"] == {"value": 56.25, "level": 3,
                                                   "source": {"user": name}}
    assert doc["quotas"]["producer_byte_rate"]["value"] is None
    # validate-only: checked by the broker, nothing written
    checked = cli(*bs, "--alter", "--user", name, "--add", "producer_byte_rate=5",
                  "--validate-only")
    assert checked.returncode == 0 and "nothing was changed" in checked.stderr
    assert "producer_byte_rate" not in cli(*bs, "--describe", "--user", name, "--strict").stdout
    # clean up: removing the last keys removes the entities
    for extra in (["--client-id", "app", "--delete", "producer_byte_rate,consumer_byte_rate"],
                  ["--delete", "request_percentage"]):
        assert cli(*bs, "--alter", "--user", name, *extra).returncode == 0
    assert cli(*bs, "--describe", "--user", name).stdout == ""


def test_broker_rejection_exits_1_with_the_reason(kafka_broker):
    done = cli("--bootstrap-server", kafka_broker.bootstrap, "--alter", "--ip",
               "no-such-host.invalid", "--add", "connection_creation_rate=5")
    # refused client-side already, with the reason and the fix
    assert done.returncode == 1 and "is not an IP address" in done.stderr
    assert "Traceback" not in done.stderr


def test_sasl_through_command_config(kafka_sasl_broker, tmp_path):
    props = kafka_sasl_broker.write_command_config(tmp_path / "admin.properties", "admin")
    bs = ["--bootstrap-server", kafka_sasl_broker.bootstrap, "--command-config", str(props)]
    assert cli(*bs, "--alter", "--defaults", "user", "--add",
               "producer_byte_rate=2048").returncode == 0
    assert "producer_byte_rate=2048 {user=<default>}" in cli(
        *bs, "--resolve", "--user", "anyone").stdout
    assert cli(*bs, "--alter", "--defaults", "user", "--delete",
               "producer_byte_rate").returncode == 0


def test_wrong_password_is_one_clear_line(kafka_sasl_broker, tmp_path):
    good = kafka_sasl_broker.users["alice"]
    props = kafka_sasl_broker.write_command_config(tmp_path / "alice.properties", "alice")
    props.write_text(props.read_text().replace(good, "not-the-password"))
    done = cli("--bootstrap-server", kafka_sasl_broker.bootstrap, "--command-config",
               str(props), "--describe")
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Authentication failed" in done.stderr and "alice" in done.stderr
    assert "not-the-password" not in done.stderr + done.stdout


def test_not_authorised_user_is_told_what_is_missing(kafka_sasl_broker, tmp_path):
    props = kafka_sasl_broker.write_command_config(tmp_path / "bob.properties", "bob")
    done = cli("--bootstrap-server", kafka_sasl_broker.bootstrap, "--command-config",
               str(props), "--describe")
    assert done.returncode == 1
    assert "DESCRIBE_CONFIGS" in done.stderr and "bob" in done.stderr
    assert kafka_sasl_broker.users["bob"] not in done.stderr


def test_broker_down_is_one_clear_line():
    port = free_port()  # nothing listens there: refused, so it fails fast, not after --timeout
    started = time.monotonic()
    done = cli("--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "60", "--describe")
    assert time.monotonic() - started < 20
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr
    assert "connection refused" in done.stderr and "tries in" in done.stderr


def test_librdkafka_style_credentials_work_too(kafka_sasl_broker, tmp_path):
    props = tmp_path / "rdkafka-style.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     f"sasl.username=admin\nsasl.password={kafka_sasl_broker.users['admin']}\n")
    done = cli("--bootstrap-server", kafka_sasl_broker.bootstrap, "--command-config",
               str(props), "--describe")
    assert done.returncode == 0, done.stderr
    props.write_text(props.read_text().replace(kafka_sasl_broker.users["admin"], "wrong-one"))
    done = cli("--bootstrap-server", kafka_sasl_broker.bootstrap, "--command-config",
               str(props), "--describe")
    assert done.returncode == 1 and "Authentication failed" in done.stderr
    assert "wrong-one" not in done.stderr
