"""`make run` decides between a configured cluster and the local broker by the app's own rules."""
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "run_dashboard.py"


@pytest.fixture(scope="module")
def run_dashboard():
    spec = importlib.util.spec_from_file_location("run_dashboard", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("env, toml, expected", [
    ({}, None, None),
    ({"QUOTA_BOOTSTRAP_SERVERS": "h:1"}, None, "QUOTA_BOOTSTRAP_SERVERS=h:1"),
    ({"QUOTA_SANDBOX": "/tmp/x.sqlite"}, None, None),           # a sandbox is not a cluster
    ({}, '[kafka]\nbootstrap_servers = "a:1"\n', "[kafka] in {path}"),
    ({}, '[sandbox]\npath = "/tmp/x.sqlite"\n', None),
])
def test_configured_cluster(run_dashboard, tmp_path, env, toml, expected):
    path = tmp_path / "secrets.toml"
    if toml is not None:
        path.write_text(toml)
    expected = expected and expected.format(path=path)
    assert run_dashboard.configured_cluster(env, path) == expected


def test_unreadable_secrets_stop_with_the_reason(run_dashboard, tmp_path):
    path = tmp_path / "secrets.toml"
    path.write_text("[kafka\n")
    with pytest.raises(SystemExit, match="cannot read"):
        run_dashboard.configured_cluster({}, path)
