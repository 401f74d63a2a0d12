"""The Fleet page over many clusters, measured in the real browser (Playwright, Chromium).

    .venv/bin/python benchmarks/bench_fleet_page.py [--clusters 20] [--dead 2]
        [--entries 10000] [--timeout 5] [--runs 3] [--json]

A fleet of ``--clusters`` clusters: ``--dead`` of them dead (the first refuses connections, a
closed port; the others accept the connection and never answer, a hung broker, so they cost
the whole timeout), the rest sandboxes of ``--entries`` quota entries each. Two consoles run
side by side: one on the fleet (``QUOTA_CONFIG``), one on a single sandbox of the same size.

Measured, medians over ``--runs`` loads (the first load of each console apart: it opens and
describes every cluster):

* ``fleet_first_table_ms``: navigation to /fleet until its table shows (every cluster listed,
  "checking…" where it has not answered);
* ``fleet_complete_ms``: until every row has answered (the dead ones: "unreachable"), and
  Streamlit has settled;
* ``resolve_ms``: a one-cluster Resolve page load, settled;
* target (issue 29): ``fleet_complete_ms`` within 1.5 × ``resolve_ms`` + the timeout.

Every server and socket it starts, it stops.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_browser import CHROMIUM, serve, settled  # noqa: E402
from localkafka import stop_process_group  # noqa: E402


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def silent_listener() -> socket.socket:
    """A socket that completes TCP handshakes (the kernel's backlog) and never answers: a
    broker that hangs."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s


def write_fleet(tmp: Path, clusters: int, dead: int, entries: int) -> tuple[Path, Path, list]:
    from bench_dashboard import synthetic_quotas
    from quota_core.backends.sandbox import SandboxBackend

    quotas = synthetic_quotas(entries)
    first = tmp / "c00.sqlite"
    with SandboxBackend(first) as backend:
        backend.replace_all(quotas)
    listeners, lines = [], []
    for i in range(clusters):
        name = f"c{i:02d}"
        if i >= clusters - dead:
            if i == clusters - dead:
                where = f"127.0.0.1:{closed_port()}"
            else:
                listeners.append(silent_listener())
                where = f"127.0.0.1:{listeners[-1].getsockname()[1]}"
            lines += [f"[clusters.{name}]", f'bootstrap_servers = "{where}"', ""]
            continue
        path = tmp / f"{name}.sqlite"
        if path != first:
            path.write_bytes(first.read_bytes())  # a copy: the same 10k entries, its own file
        lines += [f"[clusters.{name}]", f'sandbox = "{path}"', ""]
    config = tmp / "fleet.toml"
    config.write_text("\n".join(lines))
    return config, first, listeners


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--dead", type=int, default=2)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp_name:
        tmp = Path(tmp_name)
        config, single, listeners = write_fleet(tmp, args.clusters, args.dead, args.entries)
        base = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_")}
        base.update(QUOTA_KAFKA_TIMEOUT=str(args.timeout), QUOTA_CACHE_TTL="600",
                    QUOTA_READ_ONLY="1", PYTHONPATH=str(REPO))
        (tmp / ".streamlit").mkdir()
        (tmp / ".streamlit" / "secrets.toml").write_text("")
        fleet_proc, fleet_url = serve(REPO / "app.py", dict(base, QUOTA_CONFIG=str(config)),
                                      REPO)
        one_proc, one_url = serve(REPO / "app.py", dict(base, QUOTA_SANDBOX=str(single)), REPO)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM,
                                            args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1500, "height": 1200})

                def fleet_load() -> tuple[float, float]:
                    start = time.perf_counter()
                    page.goto(f"{fleet_url}/fleet")
                    page.wait_for_selector("[data-testid=stTable] tbody tr", timeout=120_000)
                    first = (time.perf_counter() - start) * 1000
                    page.wait_for_function(
                        "() => { const t = document.querySelector('[data-testid=stTable]');"
                        " return t && !t.innerText.includes('checking'); }", timeout=120_000)
                    settled(page)
                    return first, (time.perf_counter() - start) * 1000

                def resolve_load() -> float:
                    start = time.perf_counter()
                    page.goto(f"{one_url}/resolve")
                    page.wait_for_selector(".qc-answers", timeout=120_000)
                    settled(page)
                    return (time.perf_counter() - start) * 1000

                cold_fleet = fleet_load()
                cold_resolve = resolve_load()
                fleets = [fleet_load() for _ in range(args.runs)]
                resolves = [resolve_load() for _ in range(args.runs)]
                page.goto(f"{fleet_url}/fleet")
                page.wait_for_function(
                    "() => { const t = document.querySelector('[data-testid=stTable]');"
                    " return t && !t.innerText.includes('checking'); }", timeout=120_000)
                unreachable = page.locator("[data-testid=stTable] tbody tr",
                                           has_text="unreachable").count()
                browser.close()
        finally:
            stop_process_group(fleet_proc)
            stop_process_group(one_proc)
            for s in listeners:
                s.close()
    first = statistics.median(f for f, _ in fleets)
    complete = statistics.median(c for _, c in fleets)
    resolve = statistics.median(resolves)
    budget = 1.5 * resolve + args.timeout * 1000
    print(f"Fleet page: {args.clusters} clusters ({args.dead} dead, timeout {args.timeout:g} s), "
          f"sandboxes of {args.entries:,} entries; medians of {args.runs} loads")
    print(f"  first load (cold):     fleet table {cold_fleet[0]:7.0f} ms, complete "
          f"{cold_fleet[1]:7.0f} ms; resolve {cold_resolve:7.0f} ms")
    print(f"  fleet table shows      {first:7.0f} ms")
    print(f"  fleet complete         {complete:7.0f} ms ({unreachable} rows unreachable)")
    print(f"  one-cluster Resolve    {resolve:7.0f} ms")
    print(f"  target 1.5 x resolve + timeout = {budget:.0f} ms: "
          f"{'met' if complete <= budget else 'NOT met'} ({complete / budget:.2f} of it)")
    if args.json:
        print(json.dumps({"clusters": args.clusters, "dead": args.dead, "entries": args.entries,
                          "timeout_s": args.timeout, "fleet_first_table_ms": round(first),
                          "fleet_complete_ms": round(complete), "resolve_ms": round(resolve),
                          "cold_fleet_complete_ms": round(cold_fleet[1]),
                          "cold_resolve_ms": round(cold_resolve),
                          "budget_ms": round(budget), "unreachable_rows": unreachable}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
