"""The client × broker view on the pages (AppTest), against three real metrics endpoints (tiny
``http.server``s on 127.0.0.1, one per broker): Throttled now, Resolve's live panel and the
Edit preview at today's rates show each bucket on every broker, brokers without its traffic
included, and the sentence that explains the spread."""
from __future__ import annotations

import time

import pytest

from quota_core.backends.sandbox import SandboxBackend
from tests.app_steps import run_app, texts
from tests.pages.test_app import env, open_edit  # noqa: F401  (fixture)
from tests.cli.test_spread_cli import QUOTAS, endpoints  # noqa: F401  (fixture)

CONC = ("Throttled on broker 2 only: 104% of 1 MiB/s there, throttled 820 ms; brokers 1 and 3 "
        "see none of its traffic.")


@pytest.fixture
def cluster(env, endpoints, tmp_path):
    path = tmp_path / "quotas.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all(QUOTAS)
    env.setenv("QUOTA_SANDBOX", str(path))
    env.setenv("QUOTA_METRICS", endpoints)
    env.setenv("QUOTA_LIVE_EVERY", "0.5")
    return endpoints


def _wait_for(at, what, seconds=20.0):
    deadline = time.monotonic() + seconds
    while True:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if what(at):
            return
        assert time.monotonic() < deadline, texts(at.error)
        time.sleep(0.5)


def grid(at):
    found = [d.value for d in at.dataframe if "broker 1" in d.value.columns]
    return found[0] if found else None


def sentences(at) -> list[str]:
    return [h for h in texts(at.html) if 'data-kind="spread"' in h]


def test_throttled_now_shows_the_bucket_on_every_broker(cluster):
    at = run_app("pages/throttled.py")
    _wait_for(at, lambda a: grid(a) is not None)
    g = grid(at).set_index("bucket")
    # conc is throttled (broker 2); wide runs near its quota on each broker (the page's 80 %),
    # throttled nowhere, although its total is three times the quota.
    assert sorted(g.index) == ["produce {client-id=conc}", "produce {client-id=wide}"]
    conc, wide = g.loc["produce {client-id=conc}"], g.loc["produce {client-id=wide}"]
    assert (conc["broker 1"], conc["broker 3"]) == ("no traffic", "no traffic")
    assert conc["broker 2"] == "104% · 1.04 MiB/s · throttled 820 ms"
    assert conc["quota on each broker"] == "1 MiB/s"
    assert [wide[f"broker {b}"] for b in "123"] == ["95% · 977 KiB/s", "99% · 1016 KiB/s",
                                                     "94% · 967 KiB/s"]
    assert wide["in total"] == "2.89 MiB/s"
    html = "".join(sentences(at))
    assert "produce {client-id=conc}: " + CONC in html
    assert "produce {client-id=wide}: 2.89 MiB/s in total against a 1 MiB/s quota, and not " \
           "throttled" in html


def test_resolve_live_panel_the_spread_client_is_not_throttled(cluster):
    at = run_app("pages/resolve.py", query={"client_id": "wide"})
    _wait_for(at, lambda a: grid(a) is not None)
    row = grid(at).iloc[0]
    assert row["bucket"] == "producer_byte_rate {client-id=wide}"
    assert [row[f"broker {b}"].split(" · ")[0] for b in "123"] == ["95%", "99%", "94%"]
    assert not any("throttled" in row[f"broker {b}"] for b in "123")
    [html] = sentences(at)
    assert "2.89 MiB/s in total against a 1 MiB/s quota, and not throttled: each broker sees " \
           "at most" in html and "enforces on its own" in html
    # Resolve's own status sentence agrees: not throttled.
    assert any("is not throttled on producer_byte_rate" in h for h in texts(at.html))


def test_edit_preview_per_broker_after_the_change(cluster):
    at = open_edit(None)
    at.selectbox(key="ed_user_mode").set_value("none").run()
    at.selectbox(key="ed_client_mode").set_value("name").run()
    at.text_input(key="ed_client").input("conc").run()
    at.text_input(key="ed_val_producer_byte_rate").input("2MiB").run()
    at.button(key="ed_preview_btn").click().run()
    assert not at.exception, [e.value for e in at.exception]
    _wait_for(at, lambda a: grid(a) is not None, 10)
    row = grid(at).iloc[0]
    assert row["bucket"] == "produce {client-id=conc}, 1 MiB/s → 2 MiB/s"
    assert row["broker 2"] == "52% · 1.04 MiB/s" and row["broker 1"] == "no traffic"
    [html] = sentences(at)
    assert "Not throttled: 1.04 MiB/s on broker 2 (52% of 2 MiB/s); brokers 1 and 3 see none" \
           in html


def test_a_broker_that_cannot_be_read_is_a_column_of_its_own_and_named(env, endpoints,
                                                                      tmp_path):
    """Blind is never all-clear: a fourth endpoint that refuses connections is shown as
    "not read" (by host:port) and the sentence says its figures are unknown."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    path = tmp_path / "quotas.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all(QUOTAS)
    env.setenv("QUOTA_SANDBOX", str(path))
    env.setenv("QUOTA_METRICS", f"{endpoints},4=http://127.0.0.1:{closed}/metrics")
    env.setenv("QUOTA_LIVE_EVERY", "0.5")
    at = run_app("pages/throttled.py")
    _wait_for(at, lambda a: grid(a) is not None)
    row = grid(at).set_index("bucket").loc["produce {client-id=wide}"]
    assert row[f"broker 127.0.0.1:{closed}"] == "not read"
    [wide] = [h for h in sentences(at) if "{client-id=wide}" in h]
    assert f"Broker 127.0.0.1:{closed} could not be read: its figures are unknown." in wide
    assert not at.main.success
