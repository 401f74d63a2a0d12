"""Speed a person feels, measured in the real browser (Playwright driving Debian's Chromium).

    .venv/bin/python benchmarks/bench_browser.py [--entries 100000] [--runs 5]
    .venv/bin/python benchmarks/bench_browser.py --demo [--runs 9]      # the 3-broker demo
    .venv/bin/python benchmarks/bench_browser.py --url http://127.0.0.1:8501  # a running make run

Two servers run in the same session: a bare one-widget Streamlit page (the floor: what any
Streamlit app costs) and the console. The console runs on a sandbox holding ``--entries``
quota entries; with ``--demo``, as ``make run`` runs it: a local 3-broker cluster seeded with
the demo quotas, every broker's metrics endpoint scraped for the live pages, and the demo load
(real clients, some throttled), started by ``scripts/run_dashboard.py`` (without the demo
history and its Spark job: they write into the shared ``.cache``); with ``--url``, whatever
console answers there (``make run`` prints its address). On the demo the Resolve page's live
panel refreshes every 5 s while the reruns are timed. It prints medians and ratios, and the
load average before and after:

* full page load (navigation until Streamlit has settled and the page's content shows),
  console vs the floor; the fixed cost of a page: the Audit page (the smallest) against the
  bare page and against a bare multipage app with the console's menu (st.navigation, each
  page one widget) — target within 1.3x of the multipage app; and how many script runs a
  load takes (a query-parameter write or an ``st.rerun`` on load would double them);
* Resolve: typing a new client id, keystroke to settled page — target under 300 ms;
* Browse: changing a filter on ``--entries`` entries, change to settled page — under 300 ms;
* a rerun of the bare page (typing into its box), for scale: what any rerun costs.

Every server it starts, it stops (the demo's brokers too).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
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
st.query_params["x"] = st.text_input("Client id", key="x")
st.write("hello")
'''
#: The floor a multipage app sets: ``st.navigation`` over the console's menu (the same titles,
#: icons and addresses), each page one widget. Written by :func:`multipage_app`.
MULTIPAGE_PAGE = '''import streamlit as st
st.title({title!r})
st.text_input("Entity contains", key="x")
'''
MULTIPAGE_APP = '''import streamlit as st
st.set_page_config(page_title="Quota console", layout="wide")
pages = [st.Page("start.py", title="Quota console", url_path="start", default=True,
                 visibility="hidden")] + [
    st.Page(f"{{name}}.py", title=title, icon=icon, url_path=name)
    for name, title, icon in {menu!r}]
st.navigation(pages, position="sidebar").run()
'''
#: Script-run counter: every time the app enters the "running" state (set before the page's
#: own scripts run, so the first run of a load counts too).
COUNT_RUNS = """(() => { window.__runs = 0; const seen = new WeakSet();
  const hook = () => { const app = document.querySelector('[data-test-script-state]');
    if (!app || seen.has(app)) return; seen.add(app);
    if (app.getAttribute('data-test-script-state') === 'running') window.__runs++;
    new MutationObserver(() => { if (app.getAttribute('data-test-script-state') === 'running')
      window.__runs++; }).observe(app, {attributes: true,
        attributeFilter: ['data-test-script-state']}); };
  new MutationObserver(hook).observe(document, {childList: true, subtree: true}); })()"""


#: ui.nav.app_pages' menu with editing on: (address, title, icon).
MENU = [("throttled", "Throttled now", ":material/speed:"),
        ("resolve", "Resolve & explain", ":material/troubleshoot:"),
        ("browse", "Browse quotas", ":material/table_view:"),
        ("history", "History", ":material/monitoring:"),
        ("health", "Quota health", ":material/health_and_safety:"),
        ("edit", "Edit quotas", ":material/edit:"),
        ("plan", "Plan from a file", ":material/difference:"),
        ("audit", "Audit log", ":material/history:")]


def multipage_app(folder: Path) -> Path:
    """The multipage floor in ``folder``: the console's menu (:data:`MENU`), every page a
    title and one text box. Returns its entry script."""
    for name, title, _ in MENU + [("start", "Quota console", "")]:
        (folder / f"{name}.py").write_text(MULTIPAGE_PAGE.format(title=title))
    app = folder / "multipage.py"
    app.write_text(MULTIPAGE_APP.format(menu=MENU))
    return app


#: The demo's questions (localkafka.demo): clients of the demo load, and Browse searches.
DEMO_USER = "alice"
DEMO_CLIENTS = ("batch-export", "checkout-api", "app-a", "reports", "ingest")
DEMO_SEARCHES = ("alice", "bob", "svc", "reports", "check")


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


def start_demo(tmp: Path, env: dict) -> tuple[subprocess.Popen, str, Path]:
    """``make run``'s console on a fresh 3-broker cluster in ``tmp`` (run_dashboard.py: the
    demo quotas, the metrics endpoints, the demo load); its history is pointed at an empty
    folder, so no Spark job starts and the shared ``.cache/demo-history`` is left alone."""
    port, brokers = free_port(), tmp / "brokers"
    history = tmp / "history"
    history.mkdir()
    env = dict(env, QUOTA_HISTORY_DIR=str(history), QUOTA_ANALYSIS_DIR=str(tmp / "analysis"))
    log = open(tmp / "run_dashboard.log", "w")
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "run_dashboard.py"),
                             "--brokers", "3", "--port", str(port), "--broker-dir", str(brokers)],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc, url, brokers
        except OSError:
            time.sleep(1)
    stop_demo(proc, brokers)
    raise SystemExit(f"the demo did not start: see {tmp / 'run_dashboard.log'}\n"
                     + (tmp / "run_dashboard.log").read_text()[-2000:])


def stop_demo(proc: subprocess.Popen, brokers: Path) -> None:
    """SIGTERM to run_dashboard.py alone: it stops the console, the demo load and the brokers
    it started (they are not its children). Then whatever is left, and the brokers again."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            pass
    stop_process_group(proc)
    subprocess.run([sys.executable, "-m", "localkafka", "down", "--dir", str(brokers)],
                   cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def wait_for_live(page) -> bool:
    """On the demo: until the live panel has drawn its first chart (the scrape answered)."""
    try:
        page.wait_for_selector(".js-plotly-plot", timeout=60_000)
        return True
    except Exception:  # noqa: BLE001 - a missing chart is reported, the figures still count
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true",
                        help='also one JSON line: {"load_ratio_bare", "load_ratio_multipage", '
                             '"resolve_rerun_ms", "browse_rerun_ms"}')
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--demo", action="store_true",
                       help="on the 3-broker demo with live metrics (as make run)")
    where.add_argument("--url", help="on the console running at this address (e.g. make run's)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="bench-browser-"))
    bare = tmp / "bare.py"
    bare.write_text(BARE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_")}
    env.update(QUOTA_CACHE_TTL="3600", QUOTA_AUDIT_LOG=str(tmp / "audit.jsonl"))
    live = bool(args.demo or args.url)
    if live:
        user, first, clients, searches = DEMO_USER, "checkout-api", DEMO_CLIENTS, DEMO_SEARCHES
        what = "the 3-broker demo" if args.demo else args.url
    else:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from bench_dashboard import synthetic_quotas  # the same set as the server-side figures
        from quota_core.backends.sandbox import SandboxBackend

        sandbox = tmp / "quotas.sqlite"
        with SandboxBackend(sandbox) as backend:
            backend.replace_all(synthetic_quotas(args.entries))
        env["QUOTA_SANDBOX"] = str(sandbox)
        user, first = "u1", "c1"
        clients = [f"c{i + 2}" for i in range(args.runs)]
        searches = [f"user-{i:04d}" for i in range(args.runs)]
        what = f"{args.entries:,} entries (sandbox)"
    load_before = os.getloadavg()
    servers, demo = [], None
    charts = None
    try:
        bare_proc, bare_url = serve(bare, env, tmp)
        servers.append(bare_proc)
        multi_proc, multi_url = serve(multipage_app(tmp), env, tmp)
        servers.append(multi_proc)
        if args.demo:
            demo = start_demo(tmp, env)
            app_url = demo[1]
        elif args.url:
            app_url = args.url.rstrip("/")
        else:
            app_proc, app_url = serve(REPO / "app.py", env, REPO)
            servers.append(app_proc)
        resolve_url = f"{app_url}/resolve?user={user}&client_id={first}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM,
                                        args=["--headless", "--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(COUNT_RUNS)
            # Warm both servers (first describe of the big set, imports) before timing.
            timed_load(page, bare_url, "input")
            timed_load(page, resolve_url, ".qc-ladder")
            if live:
                charts = wait_for_live(page)
            timed_load(page, f"{multi_url}/audit", "h1")
            timed_load(page, f"{app_url}/audit", "h1")
            floor, multi, audit, runs = [], [], [], {}
            for _ in range(args.runs):  # alternating: the three loads see the same load
                multi.append(timed_load(page, f"{multi_url}/audit", "h1"))
                runs["multipage"] = page.evaluate("window.__runs")
                audit.append(timed_load(page, f"{app_url}/audit", "h1"))
                runs["audit"] = page.evaluate("window.__runs")
                floor.append(timed_load(page, bare_url, "input"))
                runs["bare"] = page.evaluate("window.__runs")
            bare_box = page.get_by_label("Client id", exact=True)
            bare_rerun = [timed_rerun(page, lambda i=i: (bare_box.fill(f"b{i}"),
                                                         bare_box.press("Enter")),
                                      f"() => location.search.includes('x=b{i}')")
                          for i in range(args.runs)]
            full = [timed_load(page, resolve_url, ".qc-ladder") for _ in range(args.runs)]
            if live:
                wait_for_live(page)
            resolve = typed_reruns(page, "Client id", args.runs,
                                   lambda i: clients[i % len(clients)], "client_id")
            timed_load(page, f"{app_url}/browse", "[data-testid=stDataFrame]")
            browse = typed_reruns(page, "Search names", args.runs,
                                  lambda i: searches[i % len(searches)], "q")
            browser.close()
    finally:
        for proc in servers:
            stop_process_group(proc)
        if demo is not None:
            stop_demo(demo[0], demo[2])
        shutil.rmtree(tmp, ignore_errors=True)
    load_after = os.getloadavg()
    med = statistics.median
    print(f"browser figures, {what}, median of {args.runs} (Chromium, same run)")
    if live:
        print("  live metrics: " + ("refreshing (the Resolve live panel drew its charts)"
                                    if charts else "NO live chart appeared within 60 s"))
    print(f"  bare Streamlit page load (floor):      {med(floor):7.0f} ms   "
          f"({runs['bare']} script run(s) on load)")
    print(f"  bare multipage app, same menu (/audit): {med(multi):7.0f} ms   "
          f"({runs['multipage']} script run(s) on load)")
    print(f"  console Audit page load (fixed cost):   {med(audit):7.0f} ms   "
          f"ratio {med(audit) / med(floor):.2f}x bare, {med(audit) / med(multi):.2f}x multipage "
          f"(target <= 1.3x multipage; {runs['audit']} script run(s) on load)")
    print(f"  console page load (Resolve):            {med(full):7.0f} ms   "
          f"ratio {med(full) / med(floor):.2f}x bare, {med(full) / med(multi):.2f}x multipage")
    print(f"  Resolve rerun, new client id typed:     {med(resolve):7.0f} ms   (target < 300 ms)")
    print(f"  Browse rerun, filter changed:           {med(browse):7.0f} ms   (target < 300 ms)")
    print(f"  bare Streamlit rerun (for scale):       {med(bare_rerun):7.0f} ms")
    print("  load average (1, 5, 15 min): before " + ", ".join(f"{x:.2f}" for x in load_before)
          + "; after " + ", ".join(f"{x:.2f}" for x in load_after) + f" ({os.cpu_count()} cores)")
    if args.json:
        import json

        print(json.dumps({"load_ratio_bare": round(med(audit) / med(floor), 3),
                          "load_ratio_multipage": round(med(audit) / med(multi), 3),
                          "resolve_rerun_ms": round(med(resolve)),
                          "browse_rerun_ms": round(med(browse))}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
