"""Speed a person feels, measured in the real browser (Playwright driving Debian's Chromium).

    .venv/bin/python benchmarks/bench_browser.py [--entries 100000] [--runs 5]

Two servers run in the same session: a bare one-widget Streamlit page (the floor: what any
Streamlit app costs) and the console on a sandbox holding ``--entries`` quota entries. It
prints medians and ratios:

* full page load (navigation until Streamlit has settled and the page's content shows),
  console vs the floor — target within 1.3x;
* Resolve: typing a new client id, keystroke to settled page — target under 300 ms;
* Browse: changing a filter on ``--entries`` entries, change to settled page — under 300 ms.

Every server it starts, it stops.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from localkafka import stop_process_group  # noqa: E402

CHROMIUM = "/usr/bin/chromium"

BARE = '''import streamlit as st
st.text_input("Client id", key="x")
st.write("hello")
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(script: Path, env: dict, cwd: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script),
                             "--server.address", "127.0.0.1", "--server.port", str(port),
                             "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                            cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc, url
        except OSError:
            time.sleep(0.2)
    stop_process_group(proc)
    raise SystemExit(f"streamlit did not start for {script}")


def settled(page) -> None:
    """Streamlit shows its running indicator while a script runs: wait for it to go."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)


def timed_load(page, url: str, ready: str) -> float:
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector(ready, timeout=60_000)
    settled(page)
    return (time.perf_counter() - start) * 1000


def timed_rerun(page, action, done_js: str) -> float:
    """From the keystroke until the page shows the new answer (``done_js`` turns true) and
    Streamlit has settled."""
    start = time.perf_counter()
    action()
    page.wait_for_function(done_js, timeout=60_000)
    settled(page)
    return (time.perf_counter() - start) * 1000


def typed_reruns(page, label: str, runs: int, value, param: str) -> list[float]:
    """``runs`` reruns, each timed from typing ``value(i)`` into the box labelled ``label``
    (and Enter) until the URL carries it as ``param``: the page has answered."""
    box = page.get_by_label(label, exact=True)
    return [timed_rerun(page, lambda text=value(i): (box.fill(text), box.press("Enter")),
                        f"() => location.search.includes('{param}={value(i)}')")
            for i in range(runs)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_dashboard import synthetic_quotas  # the same set as the server-side figures
    from quota_core.backends.sandbox import SandboxBackend

    tmp = Path(tempfile.mkdtemp(prefix="bench-browser-"))
    bare = tmp / "bare.py"
    bare.write_text(BARE)
    sandbox = tmp / "quotas.sqlite"
    with SandboxBackend(sandbox) as backend:
        backend.replace_all(synthetic_quotas(args.entries))
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_")}
    env.update(QUOTA_SANDBOX=str(sandbox), QUOTA_CACHE_TTL="3600",
               QUOTA_AUDIT_LOG=str(tmp / "audit.jsonl"))
    servers = []
    try:
        bare_proc, bare_url = serve(bare, env, tmp)
        servers.append(bare_proc)
        app_proc, app_url = serve(REPO / "app.py", env, REPO)
        servers.append(app_proc)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM,
                                        args=["--headless", "--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # Warm both servers (first describe of the big set, imports) before timing.
            timed_load(page, bare_url, "input")
            timed_load(page, f"{app_url}/resolve?user=u1&client_id=c1", ".qc-ladder")
            floor = [timed_load(page, bare_url, "input") for _ in range(args.runs)]
            full = [timed_load(page, f"{app_url}/resolve?user=u1&client_id=c1", ".qc-ladder")
                    for _ in range(args.runs)]
            resolve = typed_reruns(page, "Client id", args.runs, lambda i: f"c{i + 2}",
                                   "client_id")
            timed_load(page, f"{app_url}/browse", "[data-testid=stDataFrame]")
            browse = typed_reruns(page, "Search names", args.runs, lambda i: f"user-{i:04d}", "q")
            browser.close()
    finally:
        for proc in servers:
            stop_process_group(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    print(f"browser figures, {args.entries:,} entries, median of {args.runs} (Chromium, same run)")
    print(f"  bare Streamlit page load (floor):      {med(floor):7.0f} ms")
    print(f"  console page load (Resolve):            {med(full):7.0f} ms   "
          f"ratio {med(full) / med(floor):.2f}x (target <= 1.3x)")
    print(f"  Resolve rerun, new client id typed:     {med(resolve):7.0f} ms   (target < 300 ms)")
    print(f"  Browse rerun, filter changed:           {med(browse):7.0f} ms   (target < 300 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
