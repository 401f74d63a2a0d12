"""One writer per output folder (issue 28): the analysis job holds a lock on its --out and its
rollups for its whole life and names itself in it; a second job stops with one line naming
the holder (exit 1) before Spark starts, and the History page starts its job through the
CLI's ``analyze`` (the pipeline's own entry point), showing that line instead of starting a
second one."""
from __future__ import annotations

import os
import subprocess

import pytest

from quota_core.telemetry.folder_lock import FolderBusy, holder, holding, lock_path

from tests import ROOT


def test_a_held_folder_names_its_holder_and_refuses_a_second_writer(tmp_path):
    out = tmp_path / "analysis"
    assert holder(out) is None
    with holding(out, ["analyze", "--usage", "h", "--out", str(out), "--follow"]):
        line = holder(out)
        assert line.startswith(f"pid {os.getpid()}, started 20") and "--follow" in line, line
        with pytest.raises(FolderBusy) as caught:
            with holding(out, ["analyze", "--out", str(out)]):
                pass  # pragma: no cover
        message = str(caught.value)
        assert "\n" not in message and f"pid {os.getpid()}" in message
        assert message.startswith(f"{out} is being written by another analysis (")
    assert holder(out) is None and lock_path(out) == tmp_path / ".analysis.lock"
    with holding(out, ["analyze"]):  # free again
        pass


def test_a_lock_left_by_a_killed_job_does_not_block(tmp_path):
    """The kernel drops a flock with its process: a job killed with SIGKILL blocks nobody."""
    out = tmp_path / "analysis"
    code = ("import sys, time; from quota_core.telemetry.folder_lock import holding\n"
            f"with holding({str(out)!r}, ['analyze']):\n"
            "    print('held', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([os.sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        assert proc.stdout.readline().strip() == "held"
        assert holder(out).startswith(f"pid {proc.pid}, ")
    finally:
        proc.kill()
        proc.wait()
    assert holder(out) is None


def test_a_second_analyze_exits_1_with_one_line_naming_the_holder(tmp_path):
    from pipeline.analyze import cli_main

    history, out = tmp_path / "history", tmp_path / "analysis"
    history.mkdir()
    import io

    with holding(history / "rollups", ["analyze", "--usage", str(history), "--follow"]):
        stdout, stderr = io.StringIO(), io.StringIO()
        code = cli_main(["--usage", str(history), "--out", str(out)], stdout, stderr)
    lines = stderr.getvalue().strip().splitlines()
    assert code == 1 and len(lines) == 1, stderr.getvalue()
    assert lines[0].startswith(f"error: {(history / 'rollups').resolve()} is being written by "
                               f"another analysis (pid {os.getpid()}, started ")
    assert "--follow" in lines[0] and "starting Spark" not in stderr.getvalue()


def test_the_history_page_starts_the_clis_analyze_and_not_over_a_running_job(tmp_path,
                                                                             monkeypatch):
    import ui.history as h
    from ui.settings import Places

    started: list[list[str]] = []

    class Popen:
        pid = 4242

        def __init__(self, argv, **kw):
            started.append(argv)

    monkeypatch.setattr(h.subprocess, "Popen", Popen)
    where = Places(tmp_path / "history", tmp_path / "analysis")
    where.history.mkdir()
    with holding(where.analysis, ["analyze", "--follow"]):
        busy = h.start_job(where)
    assert started == [] and "is being written by another analysis (pid" in busy
    assert not where.log.exists()  # the holder's log is not truncated
    assert h.start_job(where) is None
    [argv] = started
    assert argv[1:4] == ["-m", "quota_core", "analyze"] and "pipeline.analyze" not in argv
    assert where.pid.read_text() == "4242"


def test_ui_and_pages_name_no_pipeline_module():
    """The page starts the job through the CLI's subcommand: no module path of the pipeline
    in ui/ or pages/ (an import-linter contract cannot see one)."""
    import re
    from pathlib import Path

    root = ROOT
    named = [f"{p.relative_to(root)}:{n}" for folder in ("ui", "pages")
             for p in sorted((root / folder).rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"""["']pipeline[.:]|-m", "pipeline""", line)]
    assert named == []
