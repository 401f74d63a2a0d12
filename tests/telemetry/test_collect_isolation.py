"""``collect`` isolates endpoints (issue 16, finding 5), as a real process.

A healthy endpoint beside one that accepts and then never finishes its answer (both real
``http.server`` instances on 127.0.0.1): the healthy one's samples arrive on time, the status
line too, and SIGTERM flushes and exits within 5 s although the slow scrape is still in
flight (its ``--timeout`` is 60 s).
"""
from __future__ import annotations

import http.server
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from quota_core import Entity

from tests import ROOT
from tests.cli_steps import sandbox_with

LINE = b'kafka_quota_byte_rate{quota_type="produce",user="alice",client_id="app"} 1024.0\n'
RELEASE = threading.Event()


class Endpoint(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        if self.server.slow:
            self.wfile.write(b"# a start, then nothing until the test ends\n")
            self.wfile.flush()
            RELEASE.wait(120)
            return
        self.wfile.write(LINE)

    def log_message(self, *args):
        pass


def serve(slow: bool) -> http.server.ThreadingHTTPServer:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    httpd.daemon_threads = True
    httpd.slow = slow
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.fixture
def endpoints():
    healthy, slow = serve(False), serve(True)
    try:
        yield (f"http://127.0.0.1:{healthy.server_address[1]}/metrics",
               f"http://127.0.0.1:{slow.server_address[1]}/metrics")
    finally:
        RELEASE.set()
        for httpd in (healthy, slow):
            httpd.shutdown()
            httpd.server_close()


def usage_rows(out: Path) -> pd.DataFrame:
    try:
        rows = pd.read_parquet(out / "usage")
    except (FileNotFoundError, OSError, ValueError):  # nothing written yet
        rows = None
    return rows if rows is not None and "broker" in rows else pd.DataFrame({"broker": [], "ts": []})


def test_a_slow_endpoint_delays_neither_the_others_nor_sigterm(tmp_path, endpoints):
    healthy, slow = endpoints
    store = sandbox_with(tmp_path / "q.sqlite", {Entity.of(user="alice"): {"producer_byte_rate": 2048.0}})
    out = tmp_path / "history"
    proc = subprocess.Popen(
        [sys.executable, "-m", "quota_core", "collect", "--metrics",
         f"good={healthy},slow={slow}", "--sandbox", store, "--to", str(out), "--every", "0.5",
         "--status-every", "1", "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # today: nothing from either for 70 s
            rows = usage_rows(out)
            if len(set(rows[rows.broker == "good"].ts)) >= 3:
                break
            time.sleep(0.25)
        rows = usage_rows(out)
        assert len(set(rows[rows.broker == "good"].ts)) >= 3, "no samples from the healthy one"
        assert "slow" not in set(rows.broker)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert took < 5, f"SIGTERM took {took:.1f} s"  # today: ignored for over 18 s
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    statuses = re.findall(r"collect: ([\d,]+) samples and [\d,]+ quota snapshots written.*"
                          r"endpoints up (\d)/2", err)
    assert len(statuses) >= 2  # the status line kept coming while the slow scrape hung
    written = int(statuses[-1][0].replace(",", ""))
    assert written == len(usage_rows(out)) > 0  # the last line's count is what is on disk
