"""``quota-console``: serve the dashboard (Streamlit) from wherever this package is installed.

    quota-console                      # http://127.0.0.1:8501
    quota-console --port 8600 --address 0.0.0.0

It runs ``streamlit run <app.py>`` in this process, through Streamlit's own command line,
with ``--server.address`` (default 127.0.0.1), ``--server.port`` (default ``QUOTA_PORT``,
else 8501) and ``--server.headless true``. Everything else the app reads itself, as under
``make run``: the ``QUOTA_*`` environment variables and ``.streamlit/secrets.toml`` (of the
working folder, or ``~/.streamlit/``; see ui/settings.py).

Where the app is: the wheel installs ``app.py``, ``pages/``, ``ui/`` and
``.streamlit/config.toml`` under ``quota_console/`` next to ``quota_core/`` in site-packages
(pyproject.toml's package-dir mapping); in a checkout they sit next to ``quota_core/``. The
main script's folder is what Streamlit puts first on ``sys.path`` (so ``import ui`` finds
the packaged ``ui``), resolves ``st.Page("pages/...")`` against, and reads the product's
``.streamlit/config.toml`` from (its script-level config).

Exit codes as the main command (docs/interfaces.md): 2 for a usage error (a malformed ``--port``,
``--address`` or ``QUOTA_PORT``), 1 for a runtime failure (the port is taken, the address is
not this machine's, the app is missing); otherwise Streamlit's own (0 when stopped).

Streamlit is imported inside :func:`main` only: ``quota_core`` imports no Streamlit at
package level.
"""
from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import re
import socket
import sys
from pathlib import Path
from typing import Sequence, TextIO

from quota_core.errors import QuotaError, UsageError
from quota_core.cli.edge import one_line, run_command

__all__ = ["app_path", "build_parser", "streamlit_args", "check_free", "main", "main_entry"]

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 8501
_HOSTNAME = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


def app_path(base: Path | None = None) -> Path:
    """The dashboard's main script: ``quota_console/app.py`` beside the installed
    ``quota_core``, else ``app.py`` beside it (a checkout). Raises QuotaError if neither."""
    base = base or Path(__file__).resolve().parent.parent.parent
    for candidate in (base / "quota_console" / "app.py", base / "app.py"):
        if candidate.is_file() and (candidate.parent / "pages").is_dir():
            return candidate
    raise QuotaError(f"the dashboard is not installed next to quota_core in {base} (no "
                     f"quota_console/app.py): reinstall the package from its wheel or checkout "
                     f"(pip install --force-reinstall ...)")


def _port(text: str, source: str = "--port") -> int:
    try:
        port = int(text, 10)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        example = "QUOTA_PORT=8501" if source == "QUOTA_PORT" else f"{source} 8501"
        raise UsageError(f"{source}: {text!r} is not a TCP port; give a whole number from 1 "
                         f"to 65535 (e.g. {example})")
    return port


def _address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    if _HOSTNAME.fullmatch(text):
        return text
    raise UsageError(f"--address: {text!r} is neither an IP address nor a host name; give the "
                     f"address to listen on, e.g. --address 127.0.0.1 (the default, this "
                     f"machine only) or --address 0.0.0.0 (every interface)")


def check_free(address: str, port: int) -> None:
    """Raise QuotaError (a runtime failure, exit 1) when the server could not listen on
    ``address``:``port``: the port is taken, or the address is not one of this machine's.
    Streamlit would otherwise stop with a traceback for the latter."""
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise QuotaError(f"--address {address}: cannot resolve it ({exc.strerror or exc}); give "
                         f"an IP address or a host name of this machine") from None
    family, _, _, _, sockaddr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(sockaddr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise QuotaError(f"port {port} on {address} is in use by another program: stop "
                                 f"it, or give another --port") from None
            raise QuotaError(f"cannot listen on {address}:{port} ({exc.strerror or exc}): give "
                             f"--address an address of this machine (127.0.0.1 by default) "
                             f"and a --port you may use") from None


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag raises UsageError (printed once, exit 2) instead of exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see quota-console --help)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="quota-console",
                description="Serve the quota console dashboard (Streamlit) from the installed "
                            "package. It reads the QUOTA_* settings from the environment and "
                            ".streamlit/secrets.toml, as `make run` does.")
    p.add_argument("--port", default=None, metavar="PORT",
                   help=f"TCP port to listen on (default: QUOTA_PORT, else {DEFAULT_PORT})")
    p.add_argument("--address", default=DEFAULT_ADDRESS, metavar="ADDRESS",
                   help=f"address to listen on (default: {DEFAULT_ADDRESS}, this machine only; "
                        f"0.0.0.0 for every interface, behind sign-in or a proxy)")
    return p


def streamlit_args(argv: Sequence[str] | None, env: dict[str, str]) -> list[str]:
    """The ``streamlit`` command line for these arguments (raises UsageError)."""
    args = build_parser().parse_args(argv)
    if args.port is not None:
        port = _port(args.port)
    elif env.get("QUOTA_PORT"):
        port = _port(env["QUOTA_PORT"], "QUOTA_PORT")
    else:
        port = DEFAULT_PORT
    address = _address(args.address)
    return ["run", str(app_path()), "--server.address", address, "--server.port", str(port),
            "--server.headless", "true", "--browser.gatherUsageStats", "false"]


def main(argv: Sequence[str] | None = None, err: TextIO | None = None) -> int:
    err = err or sys.stderr
    # its flags are read by the body: a bad one is a UsageError there, said without "error:"
    return run_command("main", lambda: _serve(argv), err, one_line("quota-console", ()))


def _serve(argv: Sequence[str] | None) -> int:
    cmd = streamlit_args(argv, dict(os.environ))
    opts = dict(zip(cmd[2::2], cmd[3::2]))
    check_free(opts["--server.address"], int(opts["--server.port"]))
    from streamlit.web import cli as streamlit_cli  # the `streamlit` command itself

    try:
        streamlit_cli.main(args=cmd, prog_name="quota-console", standalone_mode=True)
    except SystemExit as stop:  # click's standalone mode ends with sys.exit
        code = stop.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def main_entry() -> None:
    """Console-script entry point: exit with main()'s status."""
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
