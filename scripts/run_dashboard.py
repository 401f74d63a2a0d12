"""Start the dashboard: what ``make run`` calls.

    python scripts/run_dashboard.py                      # configured cluster, else local broker
    python scripts/run_dashboard.py --sandbox demo.sqlite  # a sandbox file instead
    python scripts/run_dashboard.py --port 8600 --broker-dir /tmp/qc-broker

Which backend:

1. ``--sandbox PATH``: that sandbox file (seeded with the demo quotas when empty).
2. ``QUOTA_BOOTSTRAP_SERVERS`` (+ ``QUOTA_COMMAND_CONFIG``) in the environment, or a
   ``[kafka]`` section in ``.streamlit/secrets.toml``: that cluster, untouched.
3. Otherwise the local Kafka broker (``localkafka up --sasl``, started if none is running),
   seeded with the demo quotas when it has none, its metrics endpoint configured for live
   throttling, and a bounded demo load (``scripts/demo_load.py``: real clients as the demo
   users, some over quota) that stops when the dashboard stops. ``--no-load`` skips the load.

Then it runs ``streamlit run app.py`` on 127.0.0.1, passing the choice to the app through
environment variables (see ui/settings.py), and waits. Ctrl-C (or SIGTERM) stops the
dashboard, the demo load, and the local broker if this run started it (a broker that was
already running is left running).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from quota_core.alterations import Alteration  # noqa: E402
from quota_core.backends.base import QuotaBackend, checked_alter  # noqa: E402
from quota_core.backends.open import open_backend  # noqa: E402
from localkafka.demo import demo_quotas  # noqa: E402
from quota_core.errors import QuotaError  # noqa: E402
from ui.identity import nothing_configured  # noqa: E402
from ui.settings import access_policy, connections  # noqa: E402

LOCAL_LABEL = "Local Kafka broker (make run)"


def say(msg: str) -> None:
    print(f"run_dashboard: {msg}", file=sys.stderr, flush=True)


def configured_cluster(env: dict[str, str], secrets_path: Path) -> str | None:
    """Where the configured cluster comes from, or None when there is none.

    The same rules the app uses (ui.settings.connections), so `make run` never starts a
    local broker for a dashboard that would then open another cluster."""
    secrets: dict = {}
    if secrets_path.is_file():
        try:
            secrets = tomllib.loads(secrets_path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SystemExit(f"run_dashboard: cannot read {secrets_path}: {exc}") from exc
    for spec in connections(env, secrets):
        if spec.kind == "kafka":
            return (f"QUOTA_BOOTSTRAP_SERVERS={spec.bootstrap_servers}" if spec.source == "env"
                    else f"[kafka] in {secrets_path}")
    return None


def demo_local_mode(env: dict[str, str], secrets_path: Path) -> bool:
    """Whether this run's demo backend (the local broker or --sandbox) should let a person
    type a name (QUOTA_LOCAL_MODE=1, labelled "names are not verified" in the app): only
    when nothing about who may edit is configured, and QUOTA_LOCAL_MODE is not set either
    way. A configured cluster never gets it: editors sign in there ([auth])."""
    if "QUOTA_LOCAL_MODE" in env:
        return False
    try:
        secrets = tomllib.loads(secrets_path.read_text()) if secrets_path.is_file() else {}
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return nothing_configured(access_policy(env, secrets))


def seed_if_empty(backend: QuotaBackend, where: str) -> None:
    """Put the demo quotas in ``backend`` when it holds none."""
    if backend.describe():
        say(f"{where} already holds quotas: not seeding")
        return
    demo = demo_quotas()
    outcome = checked_alter(backend, [Alteration.of(e, set=q) for e, q in demo.items()])
    if not outcome.ok:
        raise SystemExit("run_dashboard: seeding the demo quotas failed: " + "; ".join(
            f"{r.entity}: {r.error}" for r in outcome.failed))
    say(f"seeded {len(demo)} demo quota entries into {where}")


def demo_history(env: dict[str, str]) -> list[subprocess.Popen]:
    """A demo usage history for the History page (generated once into .cache/demo-history),
    and its Spark analysis started in the background (niced): ``analyze --follow``, which
    keeps the hourly rollups current (every 60 s; the tables rewritten when they change)
    until it is stopped on exit (SIGTERM). The page follows its progress. Returns the
    analysis process to stop on exit."""
    from pipeline.demo_history import HistorySpec, generate, write_history
    from ui.settings import Places

    where = Places(REPO / ".cache" / "demo-history", REPO / ".cache" / "demo-history-analysis")
    env["QUOTA_HISTORY_DIR"], env["QUOTA_ANALYSIS_DIR"] = str(where.history), str(where.analysis)
    if not (where.history / "usage").exists():
        history = generate(HistorySpec(hours=48, clients=12))
        write_history(history, where.history)
        say(f"demo history: {len(history.usage):,} usage samples over 48 h in {where.history}")
    with open(where.log, "w") as log:
        # --windows: the History page still reads the per-sample table (its heatmap)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.analyze", "--usage", str(where.history), "--out",
             str(where.analysis), "--overwrite", "--windows", "--follow", "--interval", "60"],
            cwd=REPO, stdout=log,
            stderr=subprocess.STDOUT, env=dict(env, PYSPARK_PYTHON=sys.executable),
            preexec_fn=lambda: os.nice(10))
    where.pid.write_text(str(proc.pid))
    say("analysing the demo history with Spark in the background, kept current (analyze "
        "--follow; the History page shows its progress)")
    return [proc]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandbox", type=Path, help="run on this sandbox file")
    parser.add_argument("--port", type=int, default=int(os.environ.get("QUOTA_PORT", "8501")))
    parser.add_argument("--no-seed", action="store_true", help="never seed demo quotas")
    parser.add_argument("--no-load", action="store_true",
                        help="no demo load on the local broker")
    parser.add_argument("--broker-dir", type=Path, default=None,
                        help="state folder of the local broker (default: localkafka's, "
                             ".cache/local-broker)")
    args = parser.parse_args(argv)
    env = dict(os.environ)
    secrets_path = REPO / ".streamlit" / "secrets.toml"
    demo = bool(args.sandbox) or not configured_cluster(env, secrets_path)
    children: list[subprocess.Popen] = []
    started_broker: list[str] | None = None

    try:
        if args.sandbox:
            path = args.sandbox.resolve()
            env["QUOTA_SANDBOX"] = str(path)
            env.pop("QUOTA_BOOTSTRAP_SERVERS", None)
            env.setdefault("QUOTA_CONNECTION_LABEL", "Sandbox file (--sandbox)")
            with open_backend(sandbox=path) as backend:
                if not args.no_seed:
                    seed_if_empty(backend, str(path))
        elif (where := configured_cluster(env, REPO / ".streamlit" / "secrets.toml")):
            say(f"using the configured cluster ({where})")
        else:
            # A separate `localkafka up` process starts the broker and exits, so the broker is
            # nobody's child here: streamlit (exec'd below) would never reap it when it stops.
            up = [sys.executable, "-m", "localkafka", "up", "--sasl"]
            dir_args = ["--dir", str(args.broker_dir)] if args.broker_dir else []
            was_running = subprocess.run([sys.executable, "-m", "localkafka", "status",
                                          *dir_args], cwd=REPO, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL).returncode == 0
            done = subprocess.run(up + dir_args, stdout=subprocess.PIPE, text=True, cwd=REPO)
            if done.returncode != 0 or not done.stdout.strip():
                raise SystemExit(f"run_dashboard: could not start the local broker "
                                 f"({' '.join(up[1:])} exited {done.returncode}; see above)")
            lines = done.stdout.strip().splitlines()
            bootstrap = lines[-1]
            metrics = next((line.split(" ", 1)[1] for line in lines
                            if line.startswith("metrics ")), None)
            if not was_running:
                started_broker = [sys.executable, "-m", "localkafka", "down", *dir_args]
            say(f"local broker on {bootstrap} " + (
                "(Ctrl-C stops it)" if not was_running else
                "(already running: left running on exit; stop it with make kafka-down)"))
            broker_dir = args.broker_dir or REPO / ".cache" / "local-broker"
            admin_config = broker_dir / "admin.properties"
            # The admin's SCRAM password goes into a 0600 file, never onto a command line.
            subprocess.run([sys.executable, "-m", "localkafka", "client-config",
                            str(admin_config), *dir_args], cwd=REPO, check=True,
                           stdout=subprocess.DEVNULL)
            env["QUOTA_BOOTSTRAP_SERVERS"] = bootstrap
            env["QUOTA_COMMAND_CONFIG"] = str(admin_config)
            env.setdefault("QUOTA_CONNECTION_LABEL", LOCAL_LABEL)
            if metrics:
                env.setdefault("QUOTA_METRICS", f"local={metrics}")
                say(f"live throttling from {metrics}")
            with open_backend(bootstrap_servers=bootstrap,
                              command_config=str(admin_config)) as backend:
                if not args.no_seed:
                    seed_if_empty(backend, f"the local broker {bootstrap}")
            if not args.no_load:
                # It also asks the kernel to stop it should this process die (PR_SET_PDEATHSIG).
                children.append(subprocess.Popen(
                    [sys.executable, str(REPO / "scripts" / "demo_load.py"),
                     *(["--broker-dir", str(args.broker_dir)] if args.broker_dir else [])],
                    cwd=REPO))
                say("demo load started: alice and bob over their quotas, others under")
    except QuotaError as exc:
        raise SystemExit(f"run_dashboard: {exc}") from exc

    if demo and "QUOTA_HISTORY_DIR" not in env:
        children += demo_history(env)
    if demo and demo_local_mode(env, secrets_path):
        env["QUOTA_LOCAL_MODE"] = "1"
        say("local mode: editors type their name, which is not verified (a demo, not security)")
    cmd = [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"),
           "--server.address", "127.0.0.1", "--server.port", str(args.port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    say(f"dashboard on http://127.0.0.1:{args.port} (Ctrl-C stops it)")
    # Ctrl-C reaches every process in the terminal's group; SIGTERM only this one: pass it on.
    app = subprocess.Popen(cmd, env=env, cwd=REPO)
    signal.signal(signal.SIGTERM, lambda *_: app.terminate())
    try:
        while True:
            try:
                return app.wait()
            except KeyboardInterrupt:
                app.send_signal(signal.SIGINT)
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                child.kill()
        if started_broker:
            say("stopping the local broker this run started")
            subprocess.run(started_broker, cwd=REPO)


if __name__ == "__main__":
    sys.exit(main())
