"""The dashboard's live-feed thread (ui.live.LiveFeed) at interpreter shutdown.

A fresh-clone CI run printed "Exception in thread quota-live-feed … cannot schedule new
futures after interpreter shutdown" as a pytest worker ended: the thread's next scrape met
a thread pool that takes no more work. Shutdown itself cannot be staged inside a test, so
the pool's own refusal is raised here in its place; any other error still surfaces.
"""
from __future__ import annotations

import threading

import pytest

from quota_core.telemetry.collector import parse_endpoints
from ui import live


def _feed_with(monkeypatch, error: BaseException):
    seen: list = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))

    def refuse(endpoints, timeout):
        raise error

    monkeypatch.setattr("quota_core.telemetry.sweep.scrape_all", refuse)
    feed = live.LiveFeed(parse_endpoints("http://127.0.0.1:9/metrics"), every_s=0.05)
    feed._thread.join(5)
    return feed, seen


def test_the_feed_ends_quietly_when_the_interpreter_is_ending(monkeypatch):
    feed, seen = _feed_with(monkeypatch, RuntimeError(
        "cannot schedule new futures after interpreter shutdown"))
    assert not feed._thread.is_alive() and seen == []


@pytest.mark.parametrize("error", [RuntimeError("something else"), ValueError("a bug")])
def test_any_other_error_is_not_hidden(monkeypatch, error):
    feed, seen = _feed_with(monkeypatch, error)
    assert not feed._thread.is_alive() and seen == [error]
