"""Spark's Kafka connector as local jars, fetched once with mvn (like localkafka.ensure_jars).

pyspark's wheel ships Spark but not the Kafka source. ``spark.jars.packages`` would download it
from Ivy on every fresh session, which we cannot allow (no network at run time, reproducible
CI), so the pom in ``scripts/spark`` pins the connector and exactly the jars pyspark lacks, and
the session adds them as plain ``spark.jars``.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from pipeline.errors import PipelineError

__all__ = ["SPARK_VERSION", "POM", "jars_dir", "ensure_spark_jars", "spark_jar_paths"]

SPARK_VERSION = "4.2.0"
REPO_ROOT = Path(__file__).resolve().parent.parent
POM = REPO_ROOT / "scripts" / "spark" / "pom.xml"
#: The jar that proves a copy is usable; the others come with it or the fetch failed.
_CONNECTOR = f"spark-sql-kafka-0-10_2.13-{SPARK_VERSION}.jar"


def jars_dir() -> Path:
    """``PIPELINE_JARS_CACHE`` or ``<repo>/.cache/spark-kafka-<version>``."""
    override = os.environ.get("PIPELINE_JARS_CACHE")
    return Path(override) if override else REPO_ROOT / ".cache" / f"spark-kafka-{SPARK_VERSION}"


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _fresh(marker: Path, want: str) -> bool:
    return marker.is_file() and marker.read_text().strip() == want


def ensure_spark_jars() -> Path:
    """The directory holding the connector jars, fetching them with mvn when needed.

    The marker (the pom's hash) is written only after a complete copy, so an interrupted
    fetch or an edited pom fetches again; a file lock keeps parallel sessions from racing.
    """
    base = jars_dir()
    libs, marker = base / "libs", base / "libs.complete"
    want = hashlib.sha256(POM.read_bytes()).hexdigest()
    if _fresh(marker, want):
        return libs
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _fresh(marker, want):
            return libs  # another process fetched while we waited
        mvn = shutil.which("mvn")
        if mvn is None:
            raise PipelineError("Maven ('mvn') is not on PATH; it is needed once to fetch Spark's "
                                "Kafka connector (or run `make jars` on a machine that has it).",
                                path=str(POM))
        marker.unlink(missing_ok=True)
        shutil.rmtree(libs, ignore_errors=True)
        cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(POM),
               "dependency:copy-dependencies", f"-DoutputDirectory={libs}",
               "-DincludeScope=runtime"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired as exc:
            raise PipelineError(f"mvn timed out fetching Spark's Kafka connector:\n"
                                f"{_tail(str(exc.stdout or ''))}", path=str(POM)) from exc
        if proc.returncode != 0 or not (libs / _CONNECTOR).is_file():
            raise PipelineError(f"mvn failed to fetch Spark's Kafka connector (exit "
                                f"{proc.returncode}): {' '.join(cmd)}\n"
                                f"{_tail(proc.stdout + proc.stderr)}", path=str(POM))
        marker.write_text(want + "\n")
    return libs


def spark_jar_paths() -> list[str]:
    """Every fetched jar, sorted: the value of ``spark.jars`` (comma-joined)."""
    return sorted(str(p) for p in ensure_spark_jars().glob("*.jar"))


if __name__ == "__main__":  # `python -m pipeline.jars`: the --jars value for spark-submit
    print(",".join(spark_jar_paths()))
