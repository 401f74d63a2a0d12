"""The pinned Kafka jars and how to run Java programs from them.

Kafka is not installed on the machine: the broker and its tools are plain jars
from Maven Central, fetched once by ``mvn`` (the pom in ``scripts/kafka``) into
``.cache/kafka-<version>/libs`` under the repo root and reused afterwards. The
Prometheus JMX exporter agent every local broker runs with comes the same way
(``scripts/kafka/metrics-agent-pom.xml`` into ``.cache/kafka-<version>/agent``), and the
console's client-telemetry plugin is built from ``scripts/kafka/telemetry-plugin`` with ``mvn
package`` into ``.cache/kafka-<version>/telemetry-plugin`` (:func:`ensure_telemetry_plugin`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from .errors import LocalBrokerError

KAFKA_VERSION = "4.3.1"
REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = REPO_ROOT / "scripts" / "kafka"
POM = SCRIPTS_DIR / "pom.xml"
AGENT_POM = SCRIPTS_DIR / "metrics-agent-pom.xml"
AGENT_PREFIX = "jmx_prometheus_javaagent-"
#: The rules the metrics agent exports with (client-quota MBeans only); see the file itself.
METRICS_RULES = SCRIPTS_DIR / "jmx-quota-rules.yaml"
TOOLS_LOG4J = SCRIPTS_DIR / "log4j2-tools.properties"
#: The console's client-telemetry plugin (KIP-714): sources built with mvn into the cache.
TELEMETRY_PLUGIN_DIR = SCRIPTS_DIR / "telemetry-plugin"
TELEMETRY_PLUGIN_CLASS = "io.quotaconsole.telemetry.ClientTelemetryPlugin"
TELEMETRY_PLUGIN_PREFIX = "quota-console-client-telemetry-"
BROKER_LOG4J = SCRIPTS_DIR / "log4j2-broker.properties"

# Client-side JVMs (format, ConfigCommand) are short-lived: C1 only, serial GC
# and a small heap start noticeably faster on a 2-core machine.
FAST_JVM_OPTS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xshare:auto"]


def cache_dir() -> Path:
    """Where the jars live; ``LOCALKAFKA_CACHE`` overrides ``<repo>/.cache/kafka-<version>``."""
    override = os.environ.get("LOCALKAFKA_CACHE")
    return Path(override) if override else REPO_ROOT / ".cache" / f"kafka-{KAFKA_VERSION}"


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def ensure_jars() -> Path:
    """Return the directory holding the Kafka jars, fetching them with mvn if needed.

    Also fetches the metrics java agent (:func:`ensure_metrics_agent`), so ``make jars``
    leaves everything a broker needs in the cache. A marker file (holding the pom's hash)
    is written only after a complete copy, so an interrupted download or an edited pom is
    fetched again; an exclusive file lock keeps two processes (e.g. parallel test sessions)
    from fetching at once.
    """
    libs = _fetch(POM, "libs", "Kafka jars",
                  lambda jars: any(j.name.startswith("kafka_2.13-") for j in jars))
    ensure_metrics_agent()
    ensure_telemetry_plugin()
    return libs


def ensure_metrics_agent() -> Path:
    """The Prometheus JMX exporter java agent jar, fetched with mvn once (own pom, own dir).

    It lives in ``.cache/kafka-<version>/agent``, not in ``libs``: it is loaded with
    ``-javaagent`` and must not join the broker's classpath.
    """
    agent = _fetch(AGENT_POM, "agent", "the Prometheus JMX exporter agent",
                   lambda jars: any(j.name.startswith(AGENT_PREFIX) for j in jars))
    found = sorted(agent.glob(f"{AGENT_PREFIX}*.jar"))
    if not found:  # the marker is there but someone emptied the directory
        raise LocalBrokerError(f"no {AGENT_PREFIX}*.jar in {agent}; delete {cache_dir()} and run 'make jars'")
    return found[-1]


def _plugin_sources_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted([TELEMETRY_PLUGIN_DIR / "pom.xml", *(TELEMETRY_PLUGIN_DIR / "src").rglob("*.java")]):
        digest.update(str(path.relative_to(TELEMETRY_PLUGIN_DIR)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def ensure_telemetry_plugin() -> Path:
    """The client-telemetry plugin jar (``scripts/kafka/telemetry-plugin``), built with mvn once.

    It is built against the pinned Kafka jars (``provided``: the broker has them) into
    ``.cache/kafka-<version>/telemetry-plugin``, again whenever its pom or sources change (the
    marker holds their hash), under the same lock as the jar fetches.
    """
    base = cache_dir()
    dest, marker = base / "telemetry-plugin", base / "telemetry-plugin.complete"
    want = _plugin_sources_hash()

    def built() -> Path | None:
        found = sorted(dest.glob(f"{TELEMETRY_PLUGIN_PREFIX}*.jar"))
        if found and marker.is_file() and marker.read_text().strip() == want:
            return found[-1]
        return None

    if (jar := built()) is not None:
        return jar
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (jar := built()) is not None:
            return jar
        mvn = shutil.which("mvn")
        if mvn is None:
            raise LocalBrokerError("Maven ('mvn') is not on PATH; it is needed once to build the "
                                   "client-telemetry plugin")
        marker.unlink(missing_ok=True)
        shutil.rmtree(dest, ignore_errors=True)
        work = base / "telemetry-plugin-build"
        shutil.rmtree(work, ignore_errors=True)
        cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(TELEMETRY_PLUGIN_DIR / "pom.xml"),
               f"-Dplugin.build.dir={work}", "package"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired as exc:
            raise LocalBrokerError(f"mvn timed out building the telemetry plugin:\n{_tail(str(exc.stdout or ''))}") from exc
        jars = sorted(work.glob(f"{TELEMETRY_PLUGIN_PREFIX}*.jar"))
        if proc.returncode != 0 or not jars:
            raise LocalBrokerError(f"mvn failed to build the client-telemetry plugin (exit {proc.returncode}): "
                                   f"{' '.join(cmd)}\n{_tail(proc.stdout + proc.stderr)}")
        dest.mkdir(parents=True)
        shutil.copy2(jars[-1], dest / jars[-1].name)
        shutil.rmtree(work, ignore_errors=True)
        marker.write_text(want + "\n")
    return dest / jars[-1].name


def _fetch(pom: Path, name: str, what: str, complete: Callable[[list[Path]], bool]) -> Path:
    """``mvn dependency:copy-dependencies`` of ``pom`` into ``cache_dir()/name``, once per pom hash."""
    base = cache_dir()
    dest, marker = base / name, base / f"{name}.complete"
    want = hashlib.sha256(pom.read_bytes()).hexdigest()
    if marker.is_file() and marker.read_text().strip() == want:
        return dest
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text().strip() == want:
            return dest  # another process finished the fetch while we waited
        mvn = shutil.which("mvn")
        if mvn is None:
            raise LocalBrokerError(f"Maven ('mvn') is not on PATH; it is needed once to fetch {what}")
        marker.unlink(missing_ok=True)
        shutil.rmtree(dest, ignore_errors=True)
        cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom), "dependency:copy-dependencies",
               f"-DoutputDirectory={dest}", "-DincludeScope=runtime"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired as exc:
            raise LocalBrokerError(f"mvn timed out fetching {what}:\n{_tail(str(exc.stdout or ''))}") from exc
        if proc.returncode != 0 or not complete(list(dest.glob("*.jar"))):
            raise LocalBrokerError(
                f"mvn failed to fetch {what} (exit {proc.returncode}): {' '.join(cmd)}\n"
                f"{_tail(proc.stdout + proc.stderr)}"
            )
        marker.write_text(want + "\n")
    return dest


def java_bin() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` if set, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise LocalBrokerError("no 'java' on PATH (a JDK 17+ is needed to run the Kafka broker)")
    return found


def tool_argv(main_class: str, *args: str) -> list[str]:
    """Command line running a Kafka tool class from the cached jars, logging warnings only."""
    return [java_bin(), *FAST_JVM_OPTS, "-Xmx256m", f"-Dlog4j2.configurationFile={TOOLS_LOG4J}",
            "-cp", f"{ensure_jars()}/*", main_class, *args]


def config_command_argv(bootstrap: str, *args: str) -> list[str]:
    """Command line for ``kafka-configs.sh`` (``kafka.admin.ConfigCommand``) against ``bootstrap``.

    Example: ``config_command_argv(bs, "--alter", "--add-config", "producer_byte_rate=1024",
    "--entity-type", "users", "--entity-name", "alice")``; for a SASL broker add
    ``"--command-config", path`` (see ``LocalBroker.write_command_config``).
    """
    return tool_argv("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *args)
