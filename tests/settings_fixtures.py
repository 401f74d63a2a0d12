"""The one extra cluster for the broker settings that need a restart (the suite keeps
one, besides the single broker and the 3-broker cluster): a custom
``client.quota.callback.class`` and ``quota.window.num=5``.

The callback is ``tests/java/FlatQuotaCallback.java``, compiled here with ``javac`` against the
cached Kafka jars (as the ConfigCommand harness is) and packed as a jar. The broker's class
path is ``libs/*``; the jar reaches it as a java agent (an agent jar joins the system class
path, and the class's ``premain`` does nothing), given through ``JDK_JAVA_OPTIONS``, which the
``java`` launcher reads, while the brokers start.

Import the fixture into a test module: ``from tests.settings_fixtures import settings_cluster``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localkafka import LocalCluster

from tests import TESTS

CALLBACK_CLASS = "FlatQuotaCallback"
CALLBACK_SOURCE = TESTS / "java" / f"{CALLBACK_CLASS}.java"
#: What the extra cluster's brokers run with (the restart-needing settings).
OVERRIDES = {"client.quota.callback.class": CALLBACK_CLASS, "quota.window.num": "5",
             # KIP-612's broker-wide cap, far above what the tests open
             "max.connection.creation.rate": "1000"}
#: Node 2 differs on a setting no test here depends on: a rolling change half done to name.
NODE_OVERRIDES = {2: {"num.io.threads": "3"}}


def callback_jar(workdir: Path) -> Path:
    """``FlatQuotaCallback`` compiled and packed as an agent jar in ``workdir``."""
    from localkafka import ensure_jars

    javac = shutil.which("javac", path=os.pathsep.join(
        p for p in (os.path.join(os.environ.get("JAVA_HOME", ""), "bin"),
                    os.environ.get("PATH", "")) if p))
    if javac is None:
        pytest.skip("no javac (a JDK 17+) to compile the quota callback")
    classes = workdir / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run([javac, "-d", str(classes), "-cp", f"{ensure_jars()}/*", str(CALLBACK_SOURCE)],
                   check=True, capture_output=True, timeout=120)
    jar = workdir / "flat-quota-callback.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\r\n"
                                           f"Premain-Class: {CALLBACK_CLASS}\r\n\r\n")
        for f in sorted(classes.rglob("*.class")):
            z.write(f, f.relative_to(classes).as_posix())
    return jar


def _start(cluster, jar: Path) -> None:
    """Start with the jar on the brokers' class path (JDK_JAVA_OPTIONS, for these JVMs only)."""
    before = os.environ.get("JDK_JAVA_OPTIONS")
    os.environ["JDK_JAVA_OPTIONS"] = f"-javaagent:{jar}"
    try:
        cluster.start(timeout=float(os.environ.get("LOCALKAFKA_START_TIMEOUT", "120")))
    finally:
        if before is None:
            os.environ.pop("JDK_JAVA_OPTIONS", None)
        else:
            os.environ["JDK_JAVA_OPTIONS"] = before


@pytest.fixture(scope="session")
def settings_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The extra cluster: two nodes (started together), both running the custom callback with
    ``quota.window.num=5``; node 2 has its own ``num.io.threads``."""
    workdir = tmp_path_factory.mktemp("settings_cluster")
    jar = callback_jar(workdir)
    cluster = LocalCluster(workdir / "nodes", brokers=2, overrides=OVERRIDES,
                           node_overrides=NODE_OVERRIDES)
    try:
        _start(cluster, jar)
        yield cluster
    finally:
        cluster.stop()
