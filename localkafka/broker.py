"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) on 127.0.0.1.

Tests, benchmarks and the demo talk to a genuine broker so that quota behaviour
(throttling, authorization of quota APIs) is Kafka's own, not an imitation.
The broker runs from the jars fetched by :func:`localkafka.jars.ensure_jars`;
each start formats fresh storage, so every broker begins with an empty cluster, unless
``start(keep_data=True)`` restarts a broker on the storage (and ports) it had: what a real
broker keeps across a crash (:meth:`LocalBroker.kill` is the crash: SIGKILL, no shutdown).

Every broker loads the console's client-telemetry plugin (``scripts/kafka/telemetry-plugin``:
what clients push under KIP-714 subscriptions) and runs the Prometheus JMX exporter java agent with
``scripts/kafka/jmx-quota-rules.yaml``, serving the client-quota metrics (per-bucket
byte rate, throttle time, ...) at :attr:`LocalBroker.metrics_url` on 127.0.0.1: the live
view reads what a production cluster exports, not a number we compute ourselves.
"""

from __future__ import annotations

import base64
import ctypes
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from .errors import LocalBrokerError
from .jars import (BROKER_LOG4J, FAST_JVM_OPTS, METRICS_RULES, TELEMETRY_PLUGIN_CLASS, ensure_jars,
                   ensure_metrics_agent, ensure_telemetry_plugin, java_bin, tool_argv)

ADMIN = "admin"
#: Users created (as SCRAM-SHA-256 credentials) on a SASL broker; all but ``admin`` are ordinary.
DEFAULT_USERS = ("admin", "alice", "bob", "carol", "svc-reports")
SCRAM_MECHANISM = "SCRAM-SHA-256"
STATE_FILE = "state.json"
HOST = "127.0.0.1"

# Names/passwords end up inside StorageTool's --add-scram syntax and a JAAS string,
# where ',', ']', '"', '=' and whitespace would break parsing: allow a safe set only.
_SAFE = re.compile(r"^[A-Za-z0-9_.@~+-]+$")
_ERROR_LINE = re.compile(r"^\[[^\]]+\] (ERROR|FATAL) ")

log = logging.getLogger(__name__)
_rdkafka_log = logging.getLogger("localkafka.rdkafka")
_rdkafka_log.addHandler(logging.NullHandler())
_rdkafka_log.propagate = False  # librdkafka's connect-retry chatter during startup is expected noise


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the kernel picks it)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding.

    Generated here rather than by ``kafka-storage random-uuid`` to save a JVM start;
    like Kafka's ``Uuid.randomUuid`` it never starts with '-' (confuses CLI parsers).
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # an unreaped zombie still answers kill(0) but is no longer running
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """Ask Linux to SIGTERM the broker when the process that started it dies (even by SIGKILL)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _tail_file(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 256 * lines))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class LocalBroker:
    """One Kafka 4.3 KRaft node (broker+controller) listening on 127.0.0.1 only.

    ``sasl=False``: a PLAINTEXT client listener, no authentication or authorization.
    ``sasl=True``: a SASL_PLAINTEXT/SCRAM-SHA-256 client listener with the
    StandardAuthorizer; ``admin`` is a super user, the other users in :attr:`users`
    get ALL on every topic and group (but nothing on the cluster, so quota
    describe/alter is refused to them). Passwords are random per broker unless given.

    ``detached=True`` is for brokers that must outlive this Python process (the CLI's
    ``up``); otherwise the broker is killed by the kernel if the starting thread dies.

    ``metrics_rules`` is the JMX exporter rules file (default: our client-quota rules);
    another rule set, e.g. the exporter project's Kafka example, shows what those export.
    """

    def __init__(
        self,
        workdir: Path | str,
        sasl: bool = False,
        port: int | None = None,
        *,
        users: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
        detached: bool = False,
        metrics_rules: Path | str | None = None,
        metrics_port: int | None = None,
        node_id: int = 1,
        quorum: str | None = None,
        controller_port: int | None = None,
        cluster_id: str | None = None,
        replication: int = 1,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        #: KRaft node id; a node of a :class:`localkafka.cluster.LocalCluster` also gets the
        #: cluster's ``quorum`` (``controller.quorum.voters``), fixed ports and shared cluster id.
        self.node_id = node_id
        self._quorum = quorum
        self._fixed_cluster_id = cluster_id
        self.replication = replication
        # A fixed metrics port (with a fixed ``port``) lets a restarted broker keep its URLs.
        self._requested_metrics_port = metrics_port
        self.metrics_rules = Path(metrics_rules or METRICS_RULES).resolve()
        #: Port of the metrics agent's HTTP endpoint (127.0.0.1); None until started.
        self.metrics_port: int | None = None
        self.sasl = sasl
        self.detached = detached
        self.overrides: dict[str, str] = dict(overrides or {})
        self._requested_port = port
        self.port: int | None = port
        self._requested_controller_port = controller_port
        self.controller_port: int | None = controller_port
        self.cluster_id: str = cluster_id or new_cluster_id()
        self._kept_metrics_port: int | None = None
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        if not sasl:
            self.users: dict[str, str] = {}
        elif users is not None:
            self.users = dict(users)
        else:
            self.users = {name: secrets.token_urlsafe(12) for name in DEFAULT_USERS}
        if sasl and ADMIN not in self.users:
            raise LocalBrokerError(f"a SASL broker needs an {ADMIN!r} user")
        for name, password in self.users.items():
            if not (_SAFE.match(name) and _SAFE.match(password)):
                raise LocalBrokerError(f"user {name!r}: names/passwords may only use {_SAFE.pattern}")

    # ----------------------------------------------------------------- paths & info
    @property
    def props_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def log_path(self) -> Path:
        """The broker's log4j log (``workdir/broker.log``)."""
        return self.workdir / "broker.log"

    @property
    def out_path(self) -> Path:
        """The JVM's stdout/stderr (crashes, bad JVM flags end up here, not in the log)."""
        return self.workdir / "broker.out"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT`` of the client listener."""
        if self.port is None:
            raise LocalBrokerError("broker has no port yet: call start() first")
        return f"{HOST}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """``http://127.0.0.1:PORT/metrics`` of the JMX exporter agent (Prometheus text format).

        None before :meth:`start`, and for a broker recorded by an older localkafka
        that ran without the agent.
        """
        return None if self.metrics_port is None else f"http://{HOST}:{self.metrics_port}/metrics"

    @property
    def ordinary_users(self) -> list[str]:
        return [u for u in self.users if u != ADMIN]

    def __repr__(self) -> str:  # never shows passwords
        return f"LocalBroker(workdir={str(self.workdir)!r}, sasl={self.sasl}, port={self.port}, pid={self.pid})"

    def redact(self, text: str) -> str:
        """``text`` with every known password replaced, for logs and error messages."""
        for password in self.users.values():
            text = text.replace(password, "***")
        return text

    def log_errors(self, limit: int = 12) -> str:
        """The first ERROR/FATAL lines of the broker log and their ``Caused by:`` lines.

        When startup fails, the log's tail is shutdown chatter; the cause comes earlier.
        """
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        picked = [ln for ln in lines if _ERROR_LINE.match(ln) or ln.startswith("Caused by:")]
        unique = list(dict.fromkeys(picked))  # the same cause is re-logged by each layer
        return self.redact("\n".join(unique[:limit]))

    def log_tail(self, lines: int = 60) -> str:
        """First errors + last lines of the broker log, plus the JVM's own output if any."""
        parts = []
        out = _tail_file(self.out_path, 20)
        if out.strip():
            parts.append(f"--- {self.out_path.name} (JVM stdout/stderr) ---\n{out}")
        errors = self.log_errors()
        if errors:
            parts.append(f"--- first errors in {self.log_path.name} ---\n{errors}")
        parts.append(f"--- last {lines} lines of {self.log_path.name} ---\n{_tail_file(self.log_path, lines)}")
        return self.redact("\n".join(parts))

    # ----------------------------------------------------------------- client settings
    def client_config(self, user: str | None = None) -> dict[str, Any]:
        """confluent-kafka settings to reach this broker as ``user`` (default: admin).

        Typed ``Any`` because confluent-kafka's stubs want ``dict[str, str | int | ...]``.
        """
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        if self.sasl:
            name = user or ADMIN
            if name not in self.users:
                raise LocalBrokerError(f"unknown user {name!r}; known: {sorted(self.users)}")
            conf.update({
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": SCRAM_MECHANISM,
                "sasl.username": name,
                "sasl.password": self.users[name],
            })
        else:
            conf["security.protocol"] = "PLAINTEXT"
        return conf

    def write_command_config(self, path: Path | str, user: str | None = None) -> Path:
        """Write a Java client properties file (for ``--command-config``) for ``user``.

        This is the one place a password is written out; the file is made 0600.
        """
        path = Path(path)
        if self.sasl:
            conf = self.client_config(user)
            jaas = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{conf["sasl.username"]}" password="{conf["sasl.password"]}";'
            )
            text = f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={SCRAM_MECHANISM}\nsasl.jaas.config={jaas}\n"
        else:
            text = "security.protocol=PLAINTEXT\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
        return path

    def admin(self, user: str | None = None, **extra: Any) -> Any:
        """A confluent_kafka ``AdminClient`` connected as ``user`` (default: admin)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({**self.client_config(user), **extra}, logger=_rdkafka_log)

    # ----------------------------------------------------------------- configuration
    def server_properties(self) -> dict[str, str]:
        """The broker config: a KRaft node (broker+controller), fast start. Alone it is a
        one-voter quorum with replication factor 1; in a cluster every node is a voter and
        the internal topics are replicated ``replication`` times."""
        assert self.port is not None and self.controller_port is not None
        client = "SASL_PLAINTEXT" if self.sasl else "PLAINTEXT"
        rf = str(self.replication)
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self._quorum or f"{self.node_id}@{HOST}:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listeners": f"{client}://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"{client}://{HOST}:{self.port}",
            "listener.security.protocol.map": f"{client}:{client},CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": client,
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "default.replication.factor": rf,
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.flush.interval.messages": "9223372036854775807",
            # The console's client-telemetry plugin (KIP-714): what clients push under the
            # CLIENT_METRICS subscriptions, served by the metrics agent (kafka_client_telemetry_*).
            "metric.reporters": TELEMETRY_PLUGIN_CLASS,
        }
        if self.sasl:
            admin_pw = self.users[ADMIN]
            props.update({
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{ADMIN}" password="{admin_pw}";'
                ),
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                # The broker reaches its own controller over the PLAINTEXT controller listener
                # as User:ANONYMOUS; it must be a super user or the node cannot even register.
                # That listener only carries controller APIs and is bound to 127.0.0.1.
                "super.users": f"User:{ADMIN};User:ANONYMOUS",
                "allow.everyone.if.no.acl.found": "false",
            })
        props.update(self.overrides)
        return props

    def _write_properties(self) -> None:
        lines = [f"{k}={v}" for k, v in self.server_properties().items()]
        fd = os.open(self.props_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("# written by localkafka; regenerated on every start\n" + "\n".join(lines) + "\n")

    def _format(self) -> None:
        """Format fresh KRaft storage; SCRAM users must be created here, before the first start."""
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True)
        # The passwords go in a 0600 file read through argparse4j's "@file" (StorageTool's
        # parser has fromFilePrefix "@": one argument per line), never on the command line,
        # which every user can read in `ps` / /proc/PID/cmdline while the tool runs.
        scram_file = self.workdir / ".scram-args"
        scram_file.unlink(missing_ok=True)
        extra = []
        if self.users:
            fd = os.open(scram_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                for name, password in self.users.items():
                    f.write(f"--add-scram\n{SCRAM_MECHANISM}=[name={name},password={password}]\n")
            extra = [f"@{scram_file}"]
        argv = tool_argv("kafka.tools.StorageTool", "format", "--config", str(self.props_path),
                         "--cluster-id", self.cluster_id, *extra)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise LocalBrokerError("kafka-storage format did not finish within 120s") from None
        finally:
            scram_file.unlink(missing_ok=True)
        if proc.returncode != 0:
            raise LocalBrokerError(
                f"kafka-storage format failed (exit {proc.returncode}):\n"
                + self.redact((proc.stdout + proc.stderr)[-4000:])
            )

    # ----------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 60, *, keep_data: bool = False) -> str:
        """Format storage, launch the JVM and wait until the broker answers a metadata request.

        Returns the bootstrap address. Auto-picked ports are retried on a bind clash
        (another process grabbing the port between our probe and the JVM's bind).
        ``keep_data=True`` after a start of this broker: restart it on the storage it has
        (no format: same cluster id, same records) and the same ports.
        """
        if self.running():
            raise LocalBrokerError(f"{self!r} is already running")
        libs = ensure_jars()
        self.workdir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        keep = keep_data and (self.data_dir / "meta.properties").is_file() \
            and self.port is not None and self.controller_port is not None
        attempts = 1 if self._requested_port or keep else 3
        for attempt in range(1, attempts + 1):
            try:
                self.prepare(keep)
                self._launch(libs)
                self._wait_ready(deadline)
                if self.sasl:
                    for user in self.ordinary_users:
                        self.grant_all(user)
            except LocalBrokerError:
                # A clash on the metrics port is reported by the agent on the JVM's stderr.
                clash = "Address already in use" in self.log_errors(limit=50) + _tail_file(self.out_path, 40)
                self.stop()
                if clash and attempt < attempts and time.monotonic() < deadline:
                    log.info("port clash on %s, retrying with new ports", self.port)
                    continue
                raise
            except BaseException:  # Ctrl-C while starting must not leave a JVM behind
                self.stop()
                raise
            break
        self.started()
        return self.bootstrap

    def prepare(self, keep: bool) -> None:
        """Pick the ports (unless fixed or kept), write server.properties and, unless ``keep``,
        format fresh storage: everything before the JVM starts (a cluster runs it per node)."""
        if not keep:
            self.port = self._requested_port or free_port()
            self.controller_port = self._requested_controller_port or self._other_free_port(self.port)
        if keep:
            self.metrics_port = self._requested_metrics_port or self._kept_metrics_port
        else:
            self.metrics_port = self._requested_metrics_port or \
                self._other_free_port(self.port, self.controller_port)
        if not keep:
            self.cluster_id = self._fixed_cluster_id or new_cluster_id()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_properties()
        if not keep:
            self._format()

    def started(self) -> None:
        """Record a started node (ports kept for a restart on its storage, state file)."""
        self._kept_metrics_port = self.metrics_port
        self._write_state()

    def kill(self) -> None:
        """SIGKILL the broker, as a crash would (no controlled shutdown); its storage stays
        for ``start(keep_data=True)``."""
        pid = self._proc.pid if self._proc is not None else self.pid
        if pid is not None and self.running():
            self._signal(pid, signal.SIGKILL)
            if not self._wait_exit(pid, 10):
                raise LocalBrokerError(f"Kafka broker pid {pid} survived SIGKILL")
        self._proc = None
        self.pid = None

    @staticmethod
    def _other_free_port(*taken: int | None) -> int:
        port = free_port()
        while port in taken:
            port = free_port()
        return port

    def metrics_agent_arg(self) -> str:
        """``-javaagent:JAR=127.0.0.1:PORT:RULES``: the agent binds loopback only (its default is 0.0.0.0)."""
        if not self.metrics_rules.is_file():
            raise LocalBrokerError(f"metrics rules file {self.metrics_rules} does not exist")
        return f"-javaagent:{ensure_metrics_agent()}={HOST}:{self.metrics_port}:{self.metrics_rules}"

    def launch(self, libs: Path) -> None:
        """Start the JVM (from the calling thread: the kernel's parent-death signal follows it)."""
        self._launch(libs)

    def wait_ready(self, deadline: float) -> None:
        """Wait until the node answers a metadata request (``deadline``: time.monotonic())."""
        self._wait_ready(deadline)

    def _launch(self, libs: Path) -> None:
        argv = [
            java_bin(), "-Xmx512m", "-Xms64m", *FAST_JVM_OPTS,
            self.metrics_agent_arg(),
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",  # plain AF_INET sockets: `ss` shows 127.0.0.1, not ::ffff:
            f"-Dlog4j2.configurationFile={BROKER_LOG4J}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp", f"{libs}/*{os.pathsep}{ensure_telemetry_plugin()}", "kafka.Kafka", str(self.props_path),
        ]
        for stale in (self.log_path, self.out_path):
            stale.unlink(missing_ok=True)
        with open(self.out_path, "wb") as out:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.workdir, start_new_session=True,  # own process group: Ctrl-C is ours to handle
                preexec_fn=None if self.detached else _die_with_parent,
            )
        self.pid = self._proc.pid
        log.info("started Kafka broker pid %s on %s", self.pid, self.bootstrap)

    def _wait_ready(self, deadline: float) -> None:
        """Poll until a metadata request lists a broker; fail fast if the JVM exits."""
        from confluent_kafka import KafkaException

        admin = None
        last_error = "no TCP connection yet"
        while True:
            if not self.running():
                raise LocalBrokerError(
                    f"Kafka broker exited during startup ({self.workdir}):\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise LocalBrokerError(
                    f"Kafka broker on {self.bootstrap} not ready in time ({last_error}):\n{self.log_tail()}")
            try:
                with socket.create_connection((HOST, self.port or 0), timeout=0.5):
                    pass
                admin = admin or self.admin(**{"socket.connection.setup.timeout.ms": "2000"})
                metadata = admin.list_topics(timeout=max(0.5, min(3.0, deadline - time.monotonic())))
                if metadata.brokers:
                    return
                last_error = "metadata lists no broker yet"
            except OSError as exc:
                last_error = f"TCP: {exc}"
            except KafkaException as exc:
                last_error = self.redact(f"metadata: {exc}")
            time.sleep(0.2)

    def answers(self, timeout: float = 5) -> bool:
        """True if the broker answers a metadata request (as admin on SASL) within ``timeout``."""
        from confluent_kafka import KafkaException

        try:
            with socket.create_connection((HOST, self.port or 0), timeout=min(timeout, 2)):
                pass
            return bool(self.admin().list_topics(timeout=timeout).brokers)
        except (OSError, KafkaException, LocalBrokerError):
            return False

    def grant_all(self, user: str, timeout: float = 15) -> None:
        """As admin, allow ``user`` ALL operations on every topic and every group (LITERAL ``*``).

        Deliberately nothing on the cluster resource: ordinary users must be refused
        DescribeClientQuotas/AlterClientQuotas. Waits until the broker's authorizer
        reports the ACLs, so a test right after this does not race ACL propagation.
        """
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        if not self.sasl:
            raise LocalBrokerError("grant_all needs a SASL broker (PLAINTEXT has no authorizer)")
        bindings = [
            AclBinding(rtype, "*", ResourcePatternType.LITERAL, f"User:{user}", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
            for rtype in (ResourceType.TOPIC, ResourceType.GROUP)
        ]
        from confluent_kafka import KafkaException

        admin = self.admin()
        try:
            for future in admin.create_acls(bindings, request_timeout=timeout).values():
                future.result()
        except KafkaException as exc:
            raise LocalBrokerError(f"creating ACLs for {user!r} failed: {self.redact(str(exc))}") from None
        anything: Any = None  # None = "any" in a filter (the stubs only allow str)
        query = AclBindingFilter(ResourceType.ANY, anything, ResourcePatternType.ANY,
                                 f"User:{user}", anything, AclOperation.ANY, AclPermissionType.ANY)
        end = time.monotonic() + timeout
        while len(admin.describe_acls(query, request_timeout=timeout).result()) < len(bindings):
            if time.monotonic() > end:
                raise LocalBrokerError(f"ACLs for {user!r} not visible after {timeout}s")
            time.sleep(0.1)

    def running(self) -> bool:
        """True while this broker's JVM is alive (checked by pid and command line)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and _pid_alive(self.pid) and self._is_our_jvm(self.pid)

    def _is_our_jvm(self, pid: int) -> bool:
        """Guard against pid reuse: only signal a process running kafka.Kafka on our config."""
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            return False
        return "kafka.Kafka" in argv and str(self.props_path) in argv

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL after ``timeout``; no-op if not running."""
        pid = self._proc.pid if self._proc is not None else self.pid
        if pid is not None and self.running():
            self._signal(pid, signal.SIGTERM)
            if not self._wait_exit(pid, timeout):
                log.warning("Kafka broker pid %s ignored SIGTERM for %ss; killing it", pid, timeout)
                self._signal(pid, signal.SIGKILL)
                if not self._wait_exit(pid, 10):
                    raise LocalBrokerError(f"Kafka broker pid {pid} survived SIGKILL")
        elif self._proc is not None:
            self._proc.wait()  # reap
        self._proc = None
        self.pid = None
        self.metrics_port = None
        state = self.workdir / STATE_FILE
        if state.is_file():
            state.unlink(missing_ok=True)

    @staticmethod
    def _signal(pid: int, sig: int) -> None:
        try:
            if os.getpgid(pid) == pid:  # our own session/group: also catches any children
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        if self._proc is not None:
            try:
                self._proc.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        end = time.monotonic() + timeout
        while _pid_alive(pid):
            if time.monotonic() > end:
                return False
            time.sleep(0.1)
        return True

    # ----------------------------------------------------------------- state file
    def _write_state(self) -> None:
        """Record how to find/reach this broker (0600: it holds the SCRAM passwords)."""
        state = {
            "pid": self.pid, "bootstrap": self.bootstrap, "port": self.port,
            "controller_port": self.controller_port, "cluster_id": self.cluster_id,
            "metrics_port": self.metrics_port, "metrics_url": self.metrics_url,
            "sasl": self.sasl, "workdir": str(self.workdir), "users": self.users,
            "node_id": self.node_id, "quorum": self._quorum, "replication": self.replication,
        }
        path = self.workdir / STATE_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, indent=2)

    @classmethod
    def attach(cls, workdir: Path | str) -> LocalBroker | None:
        """The broker recorded in ``workdir/state.json`` (e.g. by ``python -m localkafka up``).

        Returns None if there is no state file; the result may not be running any more.
        """
        path = Path(workdir).resolve() / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        broker = cls(workdir, sasl=bool(state["sasl"]), port=int(state["port"]),
                     users=state.get("users") or None, detached=True,
                     node_id=int(state.get("node_id", 1)), quorum=state.get("quorum"),
                     replication=int(state.get("replication", 1)))
        broker.controller_port = state.get("controller_port")
        broker.metrics_port = state.get("metrics_port")  # absent: started before the metrics agent
        broker._kept_metrics_port = broker.metrics_port  # a restart on its storage keeps its URL
        broker.cluster_id = state["cluster_id"]
        broker.pid = int(state["pid"])
        return broker

    # ----------------------------------------------------------------- context manager
    def __enter__(self) -> LocalBroker:
        if not self.running():
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
