"""The client-telemetry plugin's bounds, driven as the broker drives it (no broker needed).

``tests/java/TelemetryPluginHarness.java`` (compiled here against the Kafka jars and the plugin
jar ``make jars`` builds) pushes garbage, too many instances and series, per-topic points and an
oversized client id through ``exportMetrics``, then turns its clock past the expiry, and prints
what the plugin holds after each step. The broker itself already caps a payload's bytes
(``telemetry.max.bytes``); these are the plugin's own bounds on memory and series.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from localkafka import ensure_jars, ensure_telemetry_plugin, tool_argv

HARNESS = Path(__file__).parent / "java" / "TelemetryPluginHarness.java"


@pytest.fixture(scope="module")
def steps(tmp_path_factory) -> dict[str, dict[str, int]]:
    javac = shutil.which("javac", path=os.pathsep.join(
        p for p in (os.path.join(os.environ.get("JAVA_HOME", ""), "bin"),
                    os.environ.get("PATH", "")) if p))
    if javac is None:
        pytest.skip("no javac (a JDK 17+) to compile the plugin harness")
    classes = tmp_path_factory.mktemp("plugin-harness")
    classpath = f"{ensure_jars()}/*{os.pathsep}{ensure_telemetry_plugin()}"
    subprocess.run([javac, "-d", str(classes), "-cp", classpath, str(HARNESS)],
                   check=True, capture_output=True, timeout=120)
    argv = tool_argv("io.quotaconsole.telemetry.TelemetryPluginHarness")
    argv[argv.index("-cp") + 1] = f"{classpath}{os.pathsep}{classes}"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    found = {}
    for line in done.stdout.splitlines():
        step, *pairs = line.split()
        found[step] = {k: int(v) for k, v in (p.split("=") for p in pairs)}
    return found


def test_garbage_is_counted_and_kept_out(steps):
    assert steps["garbage"] == {"instances": 0, "series": 0, "rejected": 1, "mbeans": 0}


def test_only_plain_and_per_broker_points_become_series(steps):
    # m0, m1 and the latency to broker 2; the bootstrap pseudo-node and the per-topic point not
    assert steps["one"] == {"instances": 1, "series": 3, "rejected": 1, "mbeans": 3}


def test_series_per_instance_and_instances_are_bounded(steps):
    assert steps["wide"]["series"] == 3 + 4  # max.series.per.instance=4 of its 51
    assert steps["wide"]["rejected"] == 1 + 47
    assert steps["huge-client-id"]["instances"] == 2  # a 5,000-char client id is not exported
    assert steps["huge-client-id"]["rejected"] == 49
    assert steps["many"]["instances"] == 5  # max.instances=5
    assert steps["many"]["series"] == steps["many"]["mbeans"]


def test_instances_that_stop_pushing_are_dropped_after_three_intervals(steps):
    assert steps["after-2s"]["instances"] == 5
    assert steps["after-3.5s"] == {"instances": 0, "series": 0,
                                   "rejected": steps["many"]["rejected"], "mbeans": 0}
