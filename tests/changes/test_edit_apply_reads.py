"""Edit's Apply reads the entity exactly twice: one guard read under the write lease, and
one bounded read-back after the alter (the architecture issue's scope).

A counting backend wraps the page's backend (the real sandbox) for the Apply only, and
records every call the apply workflow makes, in order."""
from __future__ import annotations

import contextlib

import quota_core.changes.workflow as workflow
from quota_core import Entity
from quota_core.backends.base import QuotaBackend
from quota_core.backends.sandbox import SandboxBackend
from tests.pages.test_app import env, open_edit, sandbox  # noqa: F401 - the fixtures

MiB = 1024 * 1024


class Counting(QuotaBackend):
    """Every call, in order, then passed on to the real backend."""

    def __init__(self, inner: QuotaBackend, calls: list[str]) -> None:
        self.inner, self.calls = inner, calls
        self.timeout_s = getattr(inner, "timeout_s", 10.0)

    def describe(self, entity_filter=None):
        self.calls.append("describe")
        return self.inner.describe(entity_filter)

    def alter(self, alterations, validate_only=False):
        self.calls.append("validate" if validate_only else "alter")
        return self.inner.alter(alterations, validate_only=validate_only)

    def info(self):
        return self.inner.info()

    @contextlib.contextmanager
    def write_lease(self, holder, wait_s, hold_s=None):
        self.calls.append("lease")
        with self.inner.write_lease(holder, wait_s, hold_s) as lease:
            yield lease
        self.calls.append("released")


def test_edit_apply_does_one_guard_read_and_one_read_back(sandbox, monkeypatch):
    calls: list[str] = []
    real = workflow.apply_change

    def counted(backend, *args, **kwargs):
        return real(Counting(backend, calls), *args, **kwargs)

    monkeypatch.setattr(workflow, "apply_change", counted)
    at = open_edit("alice", "checkout-api")
    at.text_input(key="ed_val_producer_byte_rate").input("3MiB").run()
    at.button(key="ed_preview_btn").click().run()
    at.checkbox(key="ed_confirm").check().run()
    at.button(key="ed_apply").click().run()
    assert not at.exception
    assert any("Applied to" in s.value for s in at.success)
    assert calls == ["lease", "describe", "alter", "describe", "released"]
    assert SandboxBackend(sandbox).describe_entity(
        Entity.of(user="alice", client_id="checkout-api")) == {"producer_byte_rate": 3 * MiB}


def test_a_read_back_conflict_is_one_read_not_a_polling_loop(sandbox, monkeypatch):
    """Another writer changes the entity between the alter and the read-back: the one
    read-back shows it (a conflict at once), with no loop re-describing the entity until a
    timeout (before: about 25 describes over 5 s on the sandbox)."""
    calls: list[str] = []
    real_apply, real_alter = workflow.apply_change, SandboxBackend._alter

    def counted(backend, *args, **kwargs):
        return real_apply(Counting(backend, calls), *args, **kwargs)

    def alter_then_someone_else_writes(self, requests, validate_only):
        outcome = real_alter(self, requests, validate_only)
        if not validate_only:
            self._conn.execute("UPDATE quotas SET value='7.0' WHERE key='producer_byte_rate' "
                               "AND entity LIKE '%alice%'")
            self._cache = None
        return outcome

    monkeypatch.setattr(workflow, "apply_change", counted)
    at = open_edit("alice", "checkout-api")
    at.text_input(key="ed_val_producer_byte_rate").input("3MiB").run()
    at.button(key="ed_preview_btn").click().run()
    at.checkbox(key="ed_confirm").check().run()
    monkeypatch.setattr(SandboxBackend, "_alter", alter_then_someone_else_writes)
    at.button(key="ed_apply").click().run()
    assert not at.exception
    assert any("another writer changed it meanwhile" in e.value for e in at.error)
    assert calls == ["lease", "describe", "alter", "describe", "released"]
