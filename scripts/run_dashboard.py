"""Start the dashboard: what ``make run`` calls.

    python scripts/run_dashboard.py                      # configured cluster, else local broker
    python scripts/run_dashboard.py --sandbox demo.sqlite  # a sandbox file instead
    python scripts/run_dashboard.py --port 8600 --broker-dir /tmp/qc-broker
    python scripts/run_dashboard.py --brokers 1            # one broker, whatever the machine
    python scripts/run_dashboard.py --fleet                # two clusters: staging and prod

Which backend:

1. ``--sandbox PATH``: that sandbox file (seeded with the demo quotas when empty).
2. ``QUOTA_BOOTSTRAP_SERVERS`` (+ ``QUOTA_COMMAND_CONFIG``) in the environment, or a
   ``[kafka]`` section in ``.streamlit/secrets.toml``: that cluster, untouched.
3. Otherwise a local Kafka cluster (``localkafka up --sasl --brokers N``, started if none is
   running): three brokers when the machine holds them (``localkafka.demo.demo_brokers``:
   5 GiB of MemAvailable and two cores), else one, said on stderr; ``--brokers`` decides
   instead. It is seeded with the demo quotas when it has none, every broker's metrics
   endpoint is configured for live throttling (labelled by node id), and a bounded demo load
   (``scripts/demo_load.py``: real clients as the demo users, some over quota, some throttled
   on one broker only) stops when the dashboard stops. ``--no-load`` skips the load.

With a demo backend (2 or 3) it also writes a 48-hour demo usage history that ends now, on
the cluster's own node ids and with the quota set it holds (``pipeline.demo_history``), and
analyses it with Spark in the background.

4. ``--fleet``: two local clusters at once, a 1-broker "staging" (in
   ``.cache/local-broker-staging``) and the demo's "prod" (3., with its load), seeded with
   different quota sets (:func:`staging_quotas`), and the fleet file naming both written to
   ``.cache/fleet-demo.toml`` (:func:`fleet_toml`) and given to the app as ``QUOTA_CONFIG``.

Then it runs ``streamlit run app.py`` on 127.0.0.1, passing the choice to the app through
environment variables (see ui/settings.py), and waits. Ctrl-C (or SIGTERM) stops the
dashboard, the demo load, and the local broker if this run started it (a broker that was
already running is left running).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from quota_core.domain.alterations import Alteration  # noqa: E402
from quota_core.backends.base import QuotaBackend, checked_alter  # noqa: E402
from quota_core.backends.open import open_backend  # noqa: E402
from localkafka.demo import (attach_local, demo_brokers, demo_quotas,  # noqa: E402
                             history_clients, hot_node, node_ids_of)
from quota_core.errors import QuotaError  # noqa: E402
from ui.identity import nothing_configured  # noqa: E402
from ui.settings import access_policy, connections  # noqa: E402

LOCAL_LABEL = "Local Kafka broker (make run)"
#: The node ids the demo history uses when there is no cluster (``--sandbox``).
SANDBOX_NODES = (1, 2, 3)


def say(msg: str) -> None:
    print(f"run_dashboard: {msg}", file=sys.stderr, flush=True)


def configured_cluster(env: dict[str, str], secrets_path: Path) -> str | None:
    """Where the configured cluster comes from, or None when there is none.

    The same rules the app uses (ui.settings.connections), so `make run` never starts a
    local broker for a dashboard that would then open another cluster."""
    if env.get("QUOTA_CONFIG"):
        return f"QUOTA_CONFIG={env['QUOTA_CONFIG']}"
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


def mem_available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The kernel's estimate of the memory available for new work (bytes), or None."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def broker_count(requested: int | None, mem: int | None = None,
                 cpus: int | None = None) -> int:
    """How many brokers the demo starts: ``--brokers``, else what the machine holds (``mem``
    and ``cpus`` default to this machine's MemAvailable and cores), said on stderr; falling
    back to one is said with the reason."""
    if requested:
        say(f"{requested} broker{'s' if requested > 1 else ''} (--brokers)")
        return requested
    count, why = demo_brokers(mem if mem is not None else mem_available(),
                              cpus if cpus is not None else os.cpu_count())
    if count == 1:
        say(f"one broker, not three: {why}. Per-broker enforcement needs several brokers to "
            f"show; make run ARGS='--brokers 3' insists")
    else:
        say(f"{count} brokers: {why}")
    return count


def read_up(stdout: str) -> tuple[str, list[str]]:
    """``python -m localkafka up``'s answer: the bootstrap list (its last line) and one
    metrics URL per broker (its ``metrics URL`` lines), in node order."""
    lines = stdout.strip().splitlines()
    return lines[-1], [line.split(" ", 1)[1] for line in lines if line.startswith("metrics ")]


def metrics_setting(urls: list[str]) -> str:
    """QUOTA_METRICS for these endpoints: the URLs alone, no ``LABEL=``, so that the scrape
    names each broker by the node id its endpoint reports ("1", "2", "3"), as the demo
    history does."""
    return ",".join(urls)


def seed_if_empty(backend: QuotaBackend, where: str, quotas=None) -> None:
    """Put the demo quotas (or ``quotas``) in ``backend`` when it holds none."""
    if backend.describe():
        say(f"{where} already holds quotas: not seeding")
        return
    demo = demo_quotas() if quotas is None else quotas
    outcome = checked_alter(backend, [Alteration.of(e, set=q) for e, q in demo.items()])
    if not outcome.ok:
        raise SystemExit("run_dashboard: seeding the demo quotas failed: " + "; ".join(
            f"{r.entity}: {r.error}" for r in outcome.failed))
    say(f"seeded {len(demo)} demo quota entries into {where}")


def subscribe_demo_clients(backend) -> str:
    """When the brokers collect client telemetry (a plugin receives the pushes), write the
    default subscription (``telemetry subscribe --default``: throttle times, request latency,
    connection metrics), at the demo's shorter push interval, so that the demo clients push
    their metrics (KIP-714). One line saying what happened; never fatal (the demo works
    without it)."""
    from dataclasses import replace

    from localkafka.demo import DEMO_PUSH_MS
    from quota_core.backends.kafka_client_metrics import alter_subscription, telemetry_collected
    from quota_core.domain.client_metrics import DEFAULT_SUBSCRIPTION

    try:
        if not telemetry_collected(backend):
            return "client telemetry: the brokers collect none, so clients push nothing"
        sub = replace(DEFAULT_SUBSCRIPTION, interval_ms=DEMO_PUSH_MS)
        alter_subscription(backend, sub)
    except (QuotaError, AttributeError) as exc:
        return f"client telemetry: no subscription made ({exc})"
    return (f"client telemetry: the demo clients push their metrics every "
            f"{DEMO_PUSH_MS / 1000:g} s (subscription {sub.name!r})")


def start_demo_load(backend, broker_dir_arg: Path | None, node_ids: list[int],
                    on: str = "") -> subprocess.Popen:
    """Start ``scripts/demo_load.py`` on the local cluster ``backend`` talks to, after writing
    the demo's telemetry subscription (:func:`subscribe_demo_clients`): a client asks for its
    subscriptions as it starts, so the subscription comes first. Both demo paths (the local
    cluster and ``--fleet``'s prod) start their load here. The load asks the kernel to stop it
    should this process die (PR_SET_PDEATHSIG)."""
    say(subscribe_demo_clients(backend))
    child = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "demo_load.py"),
         *(["--broker-dir", str(broker_dir_arg)] if broker_dir_arg else [])],
        cwd=REPO)
    say(f"demo load started{on}: " + load_story(node_ids))
    return child


def load_story(node_ids: list[int]) -> str:
    """What the demo load shows on this many brokers (one line)."""
    hot = hot_node(node_ids)
    if len(node_ids) == 1:
        return (f"alice, bob and svc-reports over their quotas on broker {hot}, the only one "
                f"(on three brokers svc-reports would be under on each), others under")
    return (f"alice and bob throttled on broker {hot} only, svc-reports over its quota in "
            f"total and under it on each of brokers {', '.join(map(str, sorted(node_ids)))}, "
            f"others under")


def make_history(node_ids: list[int], quotas, now: datetime | None = None, hours: float = 48):
    """The demo's usage history: ``hours`` ending ``now`` (to the minute), on these brokers
    (labelled by node id as a string, as the scrape labels them), under ``quotas`` (the set
    the backend holds: the History page's "now" agrees with the live quota), with the demo
    load's clients where the live load puts them, and 12 background clients."""
    from pipeline.demo_history import Client, HistorySpec, generate

    now = (now or datetime.now(timezone.utc)).replace(second=0, microsecond=0)
    spec = HistorySpec(hours=hours, clients=12, end=now,
                       broker_ids=tuple(str(n) for n in sorted(node_ids)))
    quotas = {entity: dict(values) for entity, values in quotas.items()}
    return generate(spec, quotas=(quotas, quotas),
                    named=[Client(**row) for row in history_clients(node_ids)])


def loopback_spark(env: dict[str, str]) -> None:
    """Keep the demo's Spark jobs on 127.0.0.1. Without SPARK_LOCAL_IP, Spark binds its
    driver and block manager to the host's address and its UI (4040) to every interface
    (seen with ``ss -ltnp`` while the demo history was analysed)."""
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


#: Where the demo's usage history goes (its analysis beside it, or inside it for a fleet).
DEMO_HISTORY = REPO / ".cache" / "demo-history"


def demo_history(env: dict[str, str], node_ids: list[int], quotas,
                 fleet: bool = False) -> list[subprocess.Popen]:
    """The demo usage history for the History page (:func:`make_history`, written afresh on
    every run into .cache/demo-history: it ends now), and its Spark analysis started in the
    background (niced): ``analyze --follow``, which keeps the hourly rollups current until it is
    stopped on exit (SIGTERM). The old analysis is removed first so the page never shows tables
    of another history; the page follows its progress. Returns the process to stop on exit."""
    from pipeline.demo_history import write_history
    from ui.settings import Places

    # a fleet cluster's history_dir holds its analysis in <history_dir>/analysis
    where = Places(DEMO_HISTORY, DEMO_HISTORY / "analysis" if fleet
                   else REPO / ".cache" / "demo-history-analysis")
    env["QUOTA_HISTORY_DIR"], env["QUOTA_ANALYSIS_DIR"] = str(where.history), str(where.analysis)
    loopback_spark(env)  # this job and the History page's "Analyse again"
    for old in (where.history, where.analysis):
        shutil.rmtree(old, ignore_errors=True)
    history = make_history(node_ids, quotas)
    write_history(history, where.history)
    brokers = sorted(set(history.usage["broker"]))
    say(f"demo history: {len(history.usage):,} usage samples over the last 48 h on "
        f"broker{'s' if len(brokers) > 1 else ''} {', '.join(brokers)} in {where.history}")
    with open(where.log, "w") as log:
        # --windows: Edit's what-if reads the per-sample table (History reads the rollups)
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


class LocalRun(NamedTuple):
    """A local cluster this script uses: its bootstrap list, one metrics URL per broker, the
    admin's client properties file, its node ids, and the command that stops it (None when
    it was already running: it is left running)."""

    bootstrap: str
    metrics: list[str]
    admin_config: Path
    node_ids: list[int]
    stop: list[str] | None


def start_local(broker_dir_arg: Path | None, brokers: int | None) -> LocalRun:
    """Start (or attach to) the local cluster in ``broker_dir_arg`` (localkafka's default
    folder when None) with ``brokers`` brokers (None: what the machine holds)."""
    # A separate `localkafka up` process starts the broker and exits, so the broker is
    # nobody's child here: streamlit (exec'd below) would never reap it when it stops.
    dir_args = ["--dir", str(broker_dir_arg)] if broker_dir_arg else []
    broker_dir = (broker_dir_arg or REPO / ".cache" / "local-broker").resolve()
    was_running = subprocess.run([sys.executable, "-m", "localkafka", "status",
                                  *dir_args], cwd=REPO, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL).returncode == 0
    if was_running:  # use it as it is, whatever its size
        count = len(node_ids_of(attach_local(broker_dir)))
        say(f"a local cluster of {count} broker{'s' if count > 1 else ''} is already "
            f"running from {broker_dir}: using it")
    else:
        count = broker_count(brokers)
    up = [sys.executable, "-m", "localkafka", "up", "--sasl", "--brokers", str(count)]
    done = subprocess.run(up + dir_args, stdout=subprocess.PIPE, text=True, cwd=REPO)
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"run_dashboard: could not start the local broker "
                         f"({' '.join(up[1:])} exited {done.returncode}; see above)")
    bootstrap, metrics = read_up(done.stdout)
    local = attach_local(broker_dir)
    node_ids = node_ids_of(local)
    say(f"local {'cluster' if len(node_ids) > 1 else 'broker'} on {bootstrap} "
        f"(node id{'s' if len(node_ids) > 1 else ''} "
        f"{', '.join(map(str, node_ids))}) " + (
            "(Ctrl-C stops it)" if not was_running else
            "(already running: left running on exit; stop it with make kafka-down)"))
    admin_config = broker_dir / "admin.properties"
    # The admin's SCRAM password goes into a 0600 file, never onto a command line.
    local.write_command_config(admin_config)
    return LocalRun(bootstrap, metrics, admin_config, node_ids,
                    None if was_running else [sys.executable, "-m", "localkafka", "down",
                                              *dir_args])


#: Where ``--fleet`` keeps the staging cluster (one broker) and the config file it writes.
STAGING_DIR = REPO / ".cache" / "local-broker-staging"
FLEET_CONFIG = REPO / ".cache" / "fleet-demo.toml"


def staging_quotas():
    """The staging cluster's demo quotas: prod's (``demo_quotas``) with a few changes being
    tried, so the Drift page has something to show and to promote."""
    from quota_core.domain.entities import Entity

    e, quotas = Entity.of, dict(demo_quotas())
    quotas[e(user="alice")] = {**quotas[e(user="alice")], "producer_byte_rate": 4 * 1024 * 1024}
    quotas[e(client_id="mobile-gateway")] = {"producer_byte_rate": 1024 * 1024}
    quotas[e(user="svc-canary")] = {"producer_byte_rate": 1024 * 1024,
                                    "request_percentage": 25.0}
    del quotas[e(user="CN=etl,OU=data")]
    return quotas


def fleet_toml(clusters: dict[str, tuple[str, "LocalRun"]],
               history: dict[str, Path] | None = None) -> str:
    """The fleet file ``--fleet`` writes: one ``[clusters.NAME]`` table per local cluster
    (``NAME -> (label, run)``), with its admin's properties file (never the password
    itself) and its brokers' metrics endpoints."""
    import json

    lines = ["# Written by `make run ARGS=\"--fleet\"` (scripts/run_dashboard.py): the two",
             "# local clusters of the fleet demo. The dashboard reads it through QUOTA_CONFIG;",
             "# the CLI takes it with --config (kafka-client-quotas --config FILE --cluster NAME).",
             ""]
    for name, (label, run) in clusters.items():
        lines += [f"[clusters.{name}]",
                  f"label = {json.dumps(label)}",
                  f"bootstrap_servers = {json.dumps(run.bootstrap)}",
                  f"command_config = {json.dumps(str(run.admin_config))}"]
        if run.metrics:
            lines.append("metrics = [" + ", ".join(json.dumps(u) for u in run.metrics) + "]")
        if history and name in history:  # the demo history is prod's alone
            lines.append(f"history_dir = {json.dumps(str(history[name]))}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandbox", type=Path, help="run on this sandbox file")
    parser.add_argument("--fleet", action="store_true",
                        help="two local clusters, a 1-broker staging and the 3-broker prod "
                             f"demo, with different quotas; the fleet file is written to "
                             f"{FLEET_CONFIG.relative_to(REPO)}")
    parser.add_argument("--port", type=int, default=int(os.environ.get("QUOTA_PORT", "8501")))
    parser.add_argument("--no-seed", action="store_true", help="never seed demo quotas")
    parser.add_argument("--no-load", action="store_true",
                        help="no demo load on the local broker")
    parser.add_argument("--broker-dir", type=Path, default=None,
                        help="state folder of the local broker (default: localkafka's, "
                             ".cache/local-broker)")
    parser.add_argument("--brokers", type=int, choices=range(1, 6), default=None,
                        metavar="N", help="brokers of the local cluster, 1 to 5 (default: 3 "
                        "when the machine holds them, else 1)")
    args = parser.parse_args(argv)
    if args.fleet and args.sandbox:
        parser.error("--fleet starts two local clusters: leave out --sandbox")
    env = dict(os.environ)
    secrets_path = REPO / ".streamlit" / "secrets.toml"
    demo = bool(args.sandbox) or args.fleet or not configured_cluster(env, secrets_path)
    children: list[subprocess.Popen] = []
    stops: list[list[str]] = []
    node_ids: list[int] = list(SANDBOX_NODES)
    quotas: dict = {}

    try:
        if args.sandbox:
            path = args.sandbox.resolve()
            env["QUOTA_SANDBOX"] = str(path)
            env.pop("QUOTA_BOOTSTRAP_SERVERS", None)
            env.setdefault("QUOTA_CONNECTION_LABEL", "Sandbox file (--sandbox)")
            with open_backend(sandbox=path) as backend:
                if not args.no_seed:
                    seed_if_empty(backend, str(path))
                quotas = backend.describe()
        elif args.fleet:
            prod = start_local(args.broker_dir, args.brokers)
            staging = start_local(STAGING_DIR, 1)
            stops += [r.stop for r in (staging, prod) if r.stop]
            for run, name, wanted in ((prod, "prod", demo_quotas()),
                                      (staging, "staging", staging_quotas())):
                with open_backend(bootstrap_servers=run.bootstrap,
                                  command_config=str(run.admin_config)) as backend:
                    if not args.no_seed:
                        seed_if_empty(backend, f"the {name} cluster {run.bootstrap}",
                                      wanted)
                    if name == "prod":
                        quotas = backend.describe()
                        if not args.no_load:
                            children.append(start_demo_load(backend, args.broker_dir,
                                                            prod.node_ids, " on prod"))
            node_ids = prod.node_ids
            FLEET_CONFIG.parent.mkdir(parents=True, exist_ok=True)
            FLEET_CONFIG.write_text(fleet_toml({
                "staging": ("Staging (1 broker)", staging),
                "prod": (f"Prod ({len(prod.node_ids)} broker{'s' if len(prod.node_ids) != 1 else ''})",
                         prod)}, history={"prod": DEMO_HISTORY}))
            for var in ("QUOTA_BOOTSTRAP_SERVERS", "QUOTA_SANDBOX", "QUOTA_COMMAND_CONFIG",
                        "QUOTA_METRICS", "QUOTA_METRICS_TEMPLATE"):
                env.pop(var, None)
            env["QUOTA_CONFIG"] = str(FLEET_CONFIG)
            say(f"fleet of two: staging on {staging.bootstrap}, prod on {prod.bootstrap}; "
                f"the fleet file is {FLEET_CONFIG} (QUOTA_CONFIG)")
        elif (where := configured_cluster(env, REPO / ".streamlit" / "secrets.toml")):
            say(f"using the configured cluster ({where})")
        else:
            local_run = start_local(args.broker_dir, args.brokers)
            bootstrap, metrics, admin_config = (local_run.bootstrap, local_run.metrics,
                                                local_run.admin_config)
            node_ids = local_run.node_ids
            stops += [local_run.stop] if local_run.stop else []
            env["QUOTA_BOOTSTRAP_SERVERS"] = bootstrap
            env["QUOTA_COMMAND_CONFIG"] = str(admin_config)
            env.setdefault("QUOTA_CONNECTION_LABEL", LOCAL_LABEL)
            if metrics:
                env.setdefault("QUOTA_METRICS", metrics_setting(metrics))
                say(f"live throttling from {', '.join(metrics)}")
            with open_backend(bootstrap_servers=bootstrap,
                              command_config=str(admin_config)) as backend:
                if not args.no_seed:
                    seed_if_empty(backend, f"the local broker {bootstrap}")
                quotas = backend.describe()
                if not args.no_load:
                    children.append(start_demo_load(backend, args.broker_dir, node_ids))
    except QuotaError as exc:
        raise SystemExit(f"run_dashboard: {exc}") from exc

    if demo and "QUOTA_HISTORY_DIR" not in env:
        children += demo_history(env, node_ids, quotas, fleet=args.fleet)
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
        for stop in stops:
            say("stopping the local broker this run started")
            subprocess.run(stop, cwd=REPO)


if __name__ == "__main__":
    sys.exit(main())
