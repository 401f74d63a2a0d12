"""The CLI tests' shared steps: the command in-process, and a sandbox store to run it on."""
from __future__ import annotations

from io import StringIO
from pathlib import Path

from quota_core.cli.main import main
from quota_core.backends.sandbox import SandboxBackend


def run(*argv: str) -> tuple[int, str, str]:
    """main() in-process: (exit code, stdout, stderr); never a traceback, whatever happens."""
    out, err = StringIO(), StringIO()
    code = main(list(argv), out=out, err=err)
    assert "Traceback" not in err.getvalue() + out.getvalue()
    return code, out.getvalue(), err.getvalue()


def sandbox_with(path: Path, quotas: dict) -> str:
    """A sandbox store at ``path`` holding exactly ``quotas``; its path as the CLI takes it."""
    with SandboxBackend(path) as backend:
        backend.replace_all(quotas)
    return str(path)


def state(path: str) -> dict:
    """Every entry of the sandbox store at ``path``."""
    with SandboxBackend(path) as backend:
        return backend.describe()
