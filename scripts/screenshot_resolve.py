"""Take the README's screenshot of Resolve (docs/img/resolve.png): the dashboard on a sandbox
seeded with the demo quotas, in Debian's Chromium, as the browser tests drive it.

    python scripts/screenshot_resolve.py [--out docs/img/resolve.png]
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from localkafka import stop_process_group  # noqa: E402
from localkafka.demo import demo_quotas  # noqa: E402
from quota_core.backends.sandbox import SandboxBackend  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "img" / "resolve.png"))
    args = ap.parse_args()
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Path(tmp) / "demo.sqlite"
        with SandboxBackend(sandbox) as backend:
            backend.replace_all(demo_quotas())
        secrets = Path(tmp) / "secrets.toml"
        secrets.write_text("")
        env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_")}
        env.update(QUOTA_SANDBOX=str(sandbox), QUOTA_CONNECTION_LABEL="Demo sandbox",
                   QUOTA_AUDIT_LOG=str(Path(tmp) / "audit.jsonl"), QUOTA_LOCAL_MODE="1")
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "127.0.0.1",
             "--server.port", str(port), "--server.headless", "true",
             "--browser.gatherUsageStats", "false", "--secrets.files", str(secrets)],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        if r.read().strip() == b"ok":
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    print("streamlit did not start", file=sys.stderr)
                    return 1
                time.sleep(0.3)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    page.goto(f"{url}/resolve?user=alice&client_id=checkout-api")
                    # the whole page drawn: the run finished, no placeholder left, the cards there
                    expect(page.get_by_text("8 MiB/s").first).to_be_visible(timeout=60_000)
                    for test_id in ("stStatusWidget", "stSkeleton"):
                        expect(page.get_by_test_id(test_id)).to_have_count(0, timeout=60_000)
                    page.wait_for_timeout(1500)
                    page.screenshot(path=args.out)
                finally:
                    browser.close()
        finally:
            stop_process_group(proc)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
