"""Resolve tells one story (issue 15, finding 2), in the page itself (AppTest): the issue's
case on a sandbox with a real metrics endpoint (a tiny HTTP server on 127.0.0.1).

checkout-api has its own 8 MiB/s entry and runs at 11 % of it; alice's other client ids share
a throttled {user=alice}. The page must say checkout-api is not throttled, show {user=alice}
as *another* bucket it is not in, and set back {user=alice} for checkout-api only."""
from __future__ import annotations

import re
import time
from html import unescape

import pytest

from quota_core import Entity
from quota_core.backends.sandbox import SandboxBackend
from tests.app_steps import run_app, texts
from tests.pages.test_app import env  # noqa: F401 - the fixture
from tests.core.test_membership import endpoint  # noqa: F401 - the fixture

MiB = 1024 * 1024
P = "producer_byte_rate"
QUOTAS = {Entity.of(user="alice", client_id="checkout-api"): {P: 8 * MiB},
          Entity.of(user="alice"): {P: 2 * MiB}}


def sentences(at) -> list[str]:
    """Every sentence the page rendered as text (escaped HTML blocks, unescaped here)."""
    found = []
    for html in texts(at.html):
        for part in re.findall(r'<div class="qc-sentence"[^>]*>(.*?)</div>', html, re.S):
            found.append(unescape(part))
        for part in re.findall(r"<li>(.*?)</li>", html, re.S):
            found.append(unescape(re.sub(r"<[^>]+>", "", part)))
    return found


@pytest.fixture
def store(env, tmp_path, endpoint):  # noqa: F811
    path = tmp_path / "quotas.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all(QUOTAS)
    env.setenv("QUOTA_SANDBOX", str(path))
    env.setenv("QUOTA_METRICS", f"b1={endpoint}")
    env.setenv("QUOTA_LIVE_EVERY", "1")
    return path


def test_the_issue_case_tells_one_story(store):
    at = run_app(query={"user": "alice", "client_id": "checkout-api"})
    deadline = time.monotonic() + 30
    while not any("is not throttled" in s for s in sentences(at)):
        assert time.monotonic() < deadline, sentences(at)
        time.sleep(0.5)
        at.run()
    said = sentences(at)
    about_me = [s for s in said if s.startswith("Client id 'checkout-api' of user 'alice' is")
                and P in s]
    assert about_me == ["Client id 'checkout-api' of user 'alice' is not throttled on "
                        "producer_byte_rate: its bucket {user=alice, client-id=checkout-api} "
                        "runs at 922 KiB/s of 8 MiB/s (11%) on b1."]
    # {user=alice} is named as another bucket, throttled, with checkout-api not in it.
    [other] = [s for s in said if s.startswith("For producer_byte_rate, another bucket, {user=alice}")]
    assert "it is throttled" in other and other.endswith(
        "Client id 'checkout-api' of user 'alice' is not in it for producer_byte_rate.")
    # Nothing else says a bucket of user alice makes anyone wait, unless it is that one.
    for s in said:
        if "waits" in s:
            assert " another bucket, " in s, s
    # Set back: per client id, and {user=alice} still applies to alice's other client ids.
    [note] = [s for s in said if s.startswith("{user=alice} 2 MiB/s")]
    assert note.startswith("{user=alice} 2 MiB/s does not apply to client id 'checkout-api' "
                           "of alice:")
    assert "still sets producer_byte_rate for alice's other client ids" in note
    assert not any("never applies to alice" in s and "{user=alice} 2 MiB/s" in s for s in said)
    # Who shares what, and what to change: from the same verdict.
    assert ("It has this allowance to itself: its bucket is {user=alice, "
            "client-id=checkout-api}.") in said
    assert any(s.startswith("To change it, edit {user=alice, client-id=checkout-api}")
               for s in said)


def test_names_are_text_not_markup(env, tmp_path):  # noqa: F811
    name = "<b>x</b>*y*"
    path = tmp_path / "q.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all({Entity.of(user=name): {P: 1 * MiB},
                             Entity.of(user=None): {P: 2 * MiB}})
    env.setenv("QUOTA_SANDBOX", str(path))
    at = run_app(query={"user": name, "client_id": "app"})
    blocks = [h for h in texts(at.html) if "qc-sentence" in h or "qc-notes" in h]
    assert blocks and not any("<b>x</b>" in h for h in blocks)
    assert any("&lt;b&gt;x&lt;/b&gt;*y*" in h for h in blocks)
