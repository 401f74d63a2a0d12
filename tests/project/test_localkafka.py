"""localkafka runs a real Kafka 4.3 broker: prove it answers, is loopback-only, and enforces SASL/ACLs."""

from __future__ import annotations

import functools
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from localkafka import LocalBroker, LocalBrokerError, LocalCluster, config_command_argv, ensure_jars, stop_running

from tests import ROOT

REPO = ROOT


def _listening_sockets(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket the process ``pid`` is listening on (v4 and v6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A = LISTEN
                continue
            addr_hex, port_hex = local.split(":")
            assert len(addr_hex) == width
            if width == 8:
                addr = socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr_hex)[::-1])
            else:  # each 32-bit word is little-endian
                raw = b"".join(bytes.fromhex(addr_hex[i:i + 8])[::-1] for i in range(0, 32, 8))
                addr = socket.inet_ntop(socket.AF_INET6, raw)
            found.add((addr, int(port_hex, 16)))
    return found


def _kafka_jvms_in(workdir: Path) -> list[int]:
    """Pids of kafka.Kafka JVMs whose command line mentions ``workdir``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "kafka.Kafka" in argv and str(workdir) in argv:
            pids.append(int(proc.name))
    return pids


def test_ensure_jars_is_cached(monkeypatch) -> None:
    from localkafka import jars

    libs = ensure_jars()

    def no_fetch(*args, **kwargs):
        raise AssertionError(f"mvn run again although the jars are cached: {args}")

    monkeypatch.setattr(jars.subprocess, "run", no_fetch)
    monkeypatch.setattr(jars.subprocess, "Popen", no_fetch)
    assert ensure_jars() == libs
    assert (libs / "kafka_2.13-4.3.1.jar").is_file()
    # the client-telemetry plugin is built once too (scripts/kafka/telemetry-plugin)
    assert jars.ensure_telemetry_plugin().name == "quota-console-client-telemetry-1.0.0.jar"


def test_plaintext_broker_answers_and_is_loopback_only(kafka_broker: LocalBroker) -> None:
    admin = kafka_broker.admin()
    metadata = admin.list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", kafka_broker.port)]
    assert kafka_broker.bootstrap == f"127.0.0.1:{kafka_broker.port}"
    listening = _listening_sockets(kafka_broker.pid or 0)
    assert listening == {("127.0.0.1", kafka_broker.port), ("127.0.0.1", kafka_broker.controller_port),
                         ("127.0.0.1", kafka_broker.metrics_port)}  # the JMX exporter agent too


def test_metrics_endpoint_serves_our_quota_rules(kafka_broker: LocalBroker) -> None:
    from quota_core.telemetry import fetch_text

    assert kafka_broker.metrics_url == f"http://127.0.0.1:{kafka_broker.metrics_port}/metrics"
    text = fetch_text(kafka_broker.metrics_url)
    assert 'jmx_exporter_build_info{name="jmx_prometheus_javaagent",version="1.0.1"} 1' in text
    # Only our rules' names leave the kafka.* MBeans: no generic kafka_server_* dump.
    kafka_names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                   if line.startswith("kafka_")}
    assert kafka_names <= {"kafka_quota_byte_rate", "kafka_quota_throttle_time_ms",
                           "kafka_quota_request_time_percent", "kafka_quota_mutation_rate",
                           "kafka_quota_tokens", "kafka_connection_accept_rate",
                           "kafka_server_app_info_start_time_ms",
                           # the client-telemetry plugin (docs/client-telemetry.md)
                           "kafka_client_telemetry_plugin_instances",
                           "kafka_client_telemetry_plugin_series",
                           "kafka_client_telemetry_plugin_rejected",
                           "kafka_client_telemetry_value",
                           "kafka_client_telemetry_push_age_seconds"}, kafka_names
    assert "kafka_client_telemetry_plugin_instances" in kafka_names  # the plugin is loaded
    # The endpoint says which broker it is: Kafka's app-info MBean carries the node.id.
    assert [ln.split(" ")[0] for ln in text.splitlines()
            if ln.startswith("kafka_server_app_info_start_time_ms")] == [
        'kafka_server_app_info_start_time_ms{node_id="1"}']
    agent = next((ensure_jars().parent / "agent").glob("jmx_prometheus_javaagent-*.jar"))
    assert agent.name == "jmx_prometheus_javaagent-1.0.1.jar"
    assert not list(ensure_jars().glob("jmx_prometheus_javaagent*"))  # not on the broker classpath


def test_config_command_round_trips_a_quota(kafka_broker: LocalBroker) -> None:
    user = f"alice-{uuid.uuid4().hex[:6]}"
    entity = ["--entity-type", "users", "--entity-name", user]
    alter = subprocess.run(config_command_argv(kafka_broker.bootstrap, "--alter", "--add-config",
                                               "producer_byte_rate=1024", *entity),
                           capture_output=True, text=True, timeout=120)
    assert alter.returncode == 0, alter.stderr
    describe = subprocess.run(config_command_argv(kafka_broker.bootstrap, "--describe", *entity),
                              capture_output=True, text=True, timeout=120)
    assert describe.returncode == 0, describe.stderr
    assert f"user-principal '{user}'" in describe.stdout
    assert re.search(r"producer_byte_rate=1024(\.0)?\b", describe.stdout), describe.stdout


def test_start_failure_raises_with_log_tail_and_leaves_no_jvm(tmp_path: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        broker = LocalBroker(tmp_path / "clash", port=taken)
        with pytest.raises(LocalBrokerError, match="Address already in use"):
            broker.start(timeout=60)
    assert not broker.running()
    assert _kafka_jvms_in(tmp_path) == []


def test_sasl_admin_describes_cluster(kafka_sasl_broker: LocalBroker) -> None:
    admin = kafka_sasl_broker.admin("admin")
    cluster = admin.describe_cluster(request_timeout=10).result()
    assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", kafka_sasl_broker.port)]
    assert cluster.cluster_id == kafka_sasl_broker.cluster_id
    assert set(kafka_sasl_broker.users) >= {"admin", "alice", "bob", "carol"}


def test_sasl_wrong_password_fails_authentication(kafka_sasl_broker: LocalBroker) -> None:
    errors: list[KafkaError] = []
    conf = {**kafka_sasl_broker.client_config("alice"), "sasl.password": "not-the-password"}
    admin = AdminClient(conf, error_cb=errors.append)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    admin.poll(1)  # error_cb is delivered from poll()
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_sasl_alice_produces_and_consumes(kafka_sasl_broker: LocalBroker) -> None:
    topic = f"lk-alice-{uuid.uuid4().hex[:6]}"
    alice = kafka_sasl_broker.client_config("alice")
    delivered: list[KafkaError | None] = []
    producer = Producer(alice)
    producer.produce(topic, b"hello from alice", callback=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None]

    consumer = Consumer({**alice, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        value = None
        while value is None and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                value = msg.value()
        assert value == b"hello from alice"
    finally:
        consumer.close()


def test_sasl_ordinary_user_is_refused_quotas_admin_is_not(kafka_sasl_broker: LocalBroker, tmp_path: Path) -> None:
    describe = ["--describe", "--entity-type", "users"]
    alice = kafka_sasl_broker.write_command_config(tmp_path / "alice.properties", "alice")
    assert (alice.stat().st_mode & 0o777) == 0o600
    assert 'username="alice"' in alice.read_text()
    refused = subprocess.run(config_command_argv(kafka_sasl_broker.bootstrap, "--command-config", str(alice),
                                                 *describe), capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "ClusterAuthorizationException" in refused.stderr + refused.stdout

    admin = kafka_sasl_broker.write_command_config(tmp_path / "admin.properties")
    allowed = subprocess.run(config_command_argv(kafka_sasl_broker.bootstrap, "--command-config", str(admin),
                                                 *describe), capture_output=True, text=True, timeout=120)
    assert allowed.returncode == 0, allowed.stderr


def test_sasl_passwords_stay_out_of_logs(kafka_sasl_broker: LocalBroker) -> None:
    log = kafka_sasl_broker.log_path.read_text()
    assert "sasl.jaas.config" in log or "SASL_PLAINTEXT" in log  # the config dump is there...
    for password in kafka_sasl_broker.users.values():
        assert password not in log  # ...but Kafka hides password-typed values
        assert password not in repr(kafka_sasl_broker) + kafka_sasl_broker.log_tail()
        assert kafka_sasl_broker.redact(f"pw={password}") == "pw=***"


def test_cli_up_is_idempotent_and_down_leaves_no_jvm(tmp_path: Path) -> None:
    state_dir = tmp_path / "cli-broker"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "localkafka", *args, "--dir", str(state_dir)],
                              cwd=REPO, capture_output=True, text=True, timeout=180)

    try:
        up = cli("up")
        assert up.returncode == 0, up.stderr
        *_, metrics_line, bootstrap = up.stdout.strip().splitlines()
        assert re.fullmatch(r"127\.0\.0\.1:\d+", bootstrap)
        assert re.fullmatch(r"metrics http://127\.0\.0\.1:\d+/metrics", metrics_line)
        metrics_url = metrics_line.split()[1]
        attached = LocalBroker.attach(state_dir)
        assert attached is not None and attached.metrics_url == metrics_url
        assert "jmx_exporter_build_info" in urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        pids = _kafka_jvms_in(state_dir)
        assert len(pids) == 1

        again = cli("up")
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip().splitlines()[-2:] == [metrics_line, bootstrap]
        assert _kafka_jvms_in(state_dir) == pids

        status = cli("status")
        assert status.returncode == 0 and bootstrap in status.stdout
        assert metrics_line in status.stdout.splitlines()

        conflict = cli("up", "--sasl")
        assert conflict.returncode == 1 and "already running" in conflict.stderr
    finally:
        down = cli("down")
    assert down.returncode == 0, down.stderr
    assert _kafka_jvms_in(state_dir) == []
    assert cli("down").returncode == 0
    assert cli("status").returncode == 3


def _cmdlines() -> dict[int, bytes]:
    """The command line of every process we can see, now."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                found[int(proc.name)] = (proc / "cmdline").read_bytes()
            except OSError:
                continue
    return found


def test_sasl_start_puts_no_password_on_any_command_line(tmp_path: Path) -> None:
    """`ps` shows every process's argv to every user: the SCRAM passwords must never be there
    (kafka-storage format reads them from a 0600 @file, removed afterwards)."""
    import threading

    broker = LocalBroker(tmp_path / "b", sasl=True)
    secrets_ = [p.encode() for p in broker.users.values()]
    leaks: set[tuple[int, bytes]] = set()
    seen = {"samples": 0, "storage": 0}
    done = threading.Event()

    def sample() -> None:  # in a thread: the broker must be started by this (long-lived) one
        while not done.is_set():
            for pid, argv in _cmdlines().items():
                seen["storage"] += b"kafka.tools.StorageTool" in argv
                leaks.update((pid, argv[:300]) for s in secrets_ if s in argv)
            seen["samples"] += 1
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        broker.start(timeout=120)
        assert broker.answers()
    finally:
        done.set()
        sampler.join()
        broker.stop()
    storage_seen, samples = seen["storage"], seen["samples"]
    assert storage_seen > 0 and samples > 50, (storage_seen, samples)  # the sampler saw it run
    assert not leaks, f"passwords on a command line: {sorted(p for p, _ in leaks)}"
    assert not list((tmp_path / "b").glob("*scram*"))  # the @file is gone


def test_cluster_of_three_on_loopback_each_endpoint_names_its_node(kafka_cluster: LocalCluster) -> None:
    from quota_core.telemetry import fetch_text

    admin = kafka_cluster.admin()
    assert sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3]
    assert kafka_cluster.bootstrap == ",".join(f"127.0.0.1:{n.port}" for n in kafka_cluster.nodes)
    for node in kafka_cluster.nodes:
        assert _listening_sockets(node.pid or 0) == {
            ("127.0.0.1", node.port), ("127.0.0.1", node.controller_port), ("127.0.0.1", node.metrics_port)}
        text = fetch_text(node.metrics_url)
        assert f'kafka_server_app_info_start_time_ms{{node_id="{node.node_id}"}}' in text
    assert len({n.cluster_id for n in kafka_cluster.nodes}) == 1


def _running(pid: int) -> bool:
    """Alive and not a zombie (a detached node's parent has exited: whoever reaps it may lag)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_cli_up_status_down_cover_every_node(tmp_path: Path) -> None:
    """`up --brokers 2 --sasl`: one metrics line per broker, the bootstrap list last; SASL works
    on each node; `status` names every node; `down` stops them all."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = functools.partial(subprocess.run, capture_output=True, text=True, env=env, timeout=180)
    lk = [sys.executable, "-m", "localkafka"]
    try:
        up = run([*lk, "up", "--brokers", "2", "--sasl", "--dir", str(tmp_path)])
        assert up.returncode == 0, up.stderr
        lines = up.stdout.splitlines()
        assert [ln.split(" ")[0] for ln in lines[:-1]] == ["metrics", "metrics"]
        cluster = LocalCluster.attach(tmp_path)
        assert cluster is not None and lines[-1] == cluster.bootstrap and lines[-1].count(",") == 1
        for node in cluster.nodes:  # each broker alone authenticates the same SCRAM users
            alone = {**cluster.client_config("alice"), "bootstrap.servers": node.bootstrap}
            assert sorted(AdminClient(alone).list_topics(timeout=15).brokers) == [1, 2]
        # A node of a cluster found again from its state (another process) restarts on its
        # storage, its ports and its metrics URL after a crash.
        url = cluster.node(2).metrics_url
        cluster.kill(2)
        cluster.restart(2)
        assert cluster.node(2).metrics_url == url and cluster.node(2).running()
        status = run([*lk, "status", "--dir", str(tmp_path)])
        assert status.returncode == 0 and status.stdout.count("running") == 2, status.stdout
        conf = run([*lk, "client-config", str(tmp_path / "alice.properties"), "--user", "alice",
                    "--dir", str(tmp_path)])
        assert conf.returncode == 0, conf.stderr
        assert (tmp_path / "alice.properties").stat().st_mode & 0o777 == 0o600
        assert "SASL_PLAINTEXT" in (tmp_path / "alice.properties").read_text()
        for password in cluster.users.values():
            assert password not in up.stdout + up.stderr + status.stdout + status.stderr
        pids = [node.pid for node in cluster.nodes]
        assert run([*lk, "down", "--dir", str(tmp_path)]).returncode == 0
        assert not [pid for pid in pids if pid and _running(pid)]
        assert run([*lk, "status", "--dir", str(tmp_path)]).returncode == 3
    finally:
        stop_running(tmp_path)


def test_a_cluster_stopped_from_an_atexit_hook_stops_every_node(tmp_path: Path) -> None:
    """tests/kafka_fixtures.py stops what is left at exit: there, a thread pool takes no more
    work, and a pool-based stop failed with "cannot schedule new futures" (a CI run's log)."""
    script = (
        "import atexit, pathlib, sys\n"
        "from localkafka import LocalCluster\n"
        "stopped = []\n"
        "cluster = LocalCluster(pathlib.Path(sys.argv[1]), brokers=3)\n"
        "cluster._make_nodes()\n"
        "for node in cluster.nodes:\n"
        "    node.stop = lambda timeout=30, node=node: stopped.append(node.node_id)\n"
        "def report():\n"
        "    print('stopped', sorted(stopped), flush=True)\n"
        "atexit.register(report)\n"  # atexit runs last-registered first: after the stop
        "atexit.register(cluster.stop)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "stopped [1, 2, 3]" in done.stdout, (done.stdout, done.stderr)
