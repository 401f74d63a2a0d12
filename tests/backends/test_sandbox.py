"""The sandbox store behaves like a KRaft broker (ClientQuotaControlManager), on a real file.

Per-entity all-or-nothing, removal semantics, validate_only, duplicates, NaN accepted by the
backend but refused by checked_alter, persistence, and two processes writing at once.
"""
from __future__ import annotations

import math
import multiprocessing
import sqlite3

import pytest

from quota_core import (AlterationError, Alteration, Entity, EntityFilter, FilterComponent,
                        FilterError, Op)
from quota_core.backends.base import checked_alter
from quota_core.errors import ConnectionFailed
from quota_core.backends.sandbox import SandboxBackend
from quota_core.domain.validation import is_ip_literal

E = Entity.of
A = Alteration.of


@pytest.fixture
def sandbox(tmp_path):
    # Name resolution as a broker does it, without depending on this machine's DNS.
    backend = SandboxBackend(tmp_path / "q.sqlite",
                             resolvable=lambda name: is_ip_literal(name) or name == "kafka.local")
    yield backend
    backend.close()


def test_new_store_is_empty_and_says_what_it_is(tmp_path):
    path = tmp_path / "sub" / "dir" / "q.sqlite"  # created on the first write, not on open
    with SandboxBackend(path) as backend:
        assert backend.describe() == {}
        info = backend.info()
        assert (info.kind, info.location, info.broker_count) == ("sandbox", str(path), 1)
        assert info.cluster_id is None and not path.parent.exists()
        assert backend.init()
        assert backend.info().cluster_id.startswith("sandbox-")


def test_set_then_describe(sandbox):
    outcome = sandbox.alter([A(E(user="alice"), {"producer_byte_rate": 1024, "request_percentage": 12.5}),
                             A(E(ip=None), {"connection_creation_rate": 3})])
    assert outcome.ok and not outcome.validate_only
    assert [r.entity for r in outcome.results] == [E(user="alice"), E(ip=None)]
    assert sandbox.describe() == {
        E(user="alice"): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        E(ip=None): {"connection_creation_rate": 3.0}}
    assert sandbox.describe_entity(E(user="alice")) == {"producer_byte_rate": 1024.0,
                                                        "request_percentage": 12.5}
    assert sandbox.describe_entity(E(user="bob")) == {}


def test_all_or_nothing_per_entity_other_entities_still_apply(sandbox):
    sandbox.alter([A(E(user="b"), {"consumer_byte_rate": 10})])
    outcome = sandbox.alter([
        A(E(user="a"), {"producer_byte_rate": 100}),
        # One good op and one bad op: the whole entity is refused, its old value stays.
        A(E(user="b"), {"consumer_byte_rate": 20, "producer_byte_rate": 1.5}),
        A(E(client_id="c"), {"request_percentage": 50}),
    ])
    assert [r.ok for r in outcome.results] == [True, False, True]
    assert not outcome.ok and outcome.failed == (outcome.results[1],)
    assert outcome.for_entity(E(user="b")).error == "producer_byte_rate cannot be a fractional value."
    assert outcome.for_entity(E(user="b")).error_code == "INVALID_REQUEST"
    assert sandbox.describe() == {E(user="a"): {"producer_byte_rate": 100.0},
                                  E(user="b"): {"consumer_byte_rate": 10.0},
                                  E(client_id="c"): {"request_percentage": 50.0}}


# What a KRaft controller answers for one entity's alteration (ClientQuotaControlManager).
BROKER_CASES = [
    (E(user="u"), [Op.set("connection_creation_rate", 5)], "Invalid configuration key connection_creation_rate"),
    (E(ip="10.0.0.1"), [Op.set("producer_byte_rate", 5)], "Invalid configuration key producer_byte_rate"),
    (E(user="u"), [Op.set("bogus_rate", 5)], "Invalid configuration key bogus_rate"),
    (E(user="u"), [Op.set("producer_byte_rate", 0)], "Quota producer_byte_rate must be greater than 0"),
    (E(user="u"), [Op.set("request_percentage", -1)], "Quota request_percentage must be greater than 0"),
    (E(user="u"), [Op.set("request_percentage", -math.inf)], "Quota request_percentage must be greater than 0"),
    (E(user="u"), [Op.set("producer_byte_rate", 2.5)], "producer_byte_rate cannot be a fractional value."),
    (E(ip=None), [Op.set("connection_creation_rate", 0.5)], "connection_creation_rate cannot be a fractional value."),
    (E(user="u"), [Op.set("producer_byte_rate", 1e19)], "Proposed value for producer_byte_rate is too large for a LONG."),
    (E(user="u"), [Op.set("producer_byte_rate", math.inf)], "Proposed value for producer_byte_rate is too large for a LONG."),
    (E(ip=None), [Op.set("connection_creation_rate", 2.0**31)], "Proposed value for connection_creation_rate is too large for an INT."),
    (E(ip="nowhere.invalid"), [Op.set("connection_creation_rate", 5)], "nowhere.invalid is not a valid IP or resolvable host."),
    (E(user="u"), [Op.set("producer_byte_rate", 5), Op.remove("producer_byte_rate")],
     "Ignoring duplicate entity ClientQuotaEntity(entries={user=u})"),
    # Accepted by a broker (our client-side validation is stricter):
    (E(user="u"), [Op.set("request_percentage", math.nan)], None),
    (E(user="u"), [Op.set("producer_byte_rate", math.nan)], None),
    (E(user="u"), [Op.set("request_percentage", math.inf)], None),
    (E(user="u"), [Op.set("request_percentage", 1e6)], None),
    (E(user="u"), [Op.set("producer_byte_rate", 2.0**63)], None),  # Java's (double) Long.MAX_VALUE
    (E(user="u"), [Op.set("producer_byte_rate", 5.0000001)], None),  # within the 1e-6 tolerance
    (E(ip="kafka.local"), [Op.set("connection_creation_rate", 5)], None),  # a resolvable host
    (E(user="u"), [Op.remove("bogus_rate")], None),  # a remove is never validated
    (E(ip=None), [Op.remove("producer_byte_rate")], None),
]


@pytest.mark.parametrize("entity, ops, error", BROKER_CASES)
@pytest.mark.parametrize("validate_only", [False, True])
def test_broker_answers(sandbox, entity, ops, error, validate_only):
    outcome = sandbox.alter([Alteration(entity, tuple(ops))], validate_only=validate_only)
    assert outcome.validate_only is validate_only
    assert [(r.entity, r.error) for r in outcome.results] == [(entity, error)]
    expected_sets = {o.key: o.value for o in ops if o.value is not None}
    stored = sandbox.describe()
    if error is None and expected_sets and not validate_only:
        assert set(stored) == {entity}
        assert {k: repr(v) for k, v in stored[entity].items()} == \
            {k: repr(v) for k, v in expected_sets.items()}
    else:
        assert stored == {}


def test_validate_only_gives_the_same_errors_and_writes_nothing(sandbox):
    sandbox.alter([A(E(user="keep"), {"producer_byte_rate": 1})])
    request = [A(E(user="keep"), remove=["producer_byte_rate"]),
               A(E(user="bad"), {"producer_byte_rate": -1}),
               A(E(user="new"), {"consumer_byte_rate": 5}),
               A(E(user="new"), {"consumer_byte_rate": 6})]
    before = sandbox.describe()
    checked = sandbox.alter(request, validate_only=True)
    assert sandbox.describe() == before
    applied = sandbox.alter(request)
    assert [(r.entity, r.error) for r in checked.results] == \
        [(r.entity, r.error) for r in applied.results]
    assert [r.ok for r in applied.results] == [True, False, False]  # one result per entity
    assert sandbox.describe() == {E(user="new"): {"consumer_byte_rate": 5.0}}


def test_removing_the_last_key_removes_the_entity(sandbox):
    entity = E(user="alice", client_id=None)
    sandbox.alter([A(entity, {"producer_byte_rate": 1, "consumer_byte_rate": 2})])
    assert sandbox.alter([A(entity, remove=["producer_byte_rate"])]).ok
    assert sandbox.describe() == {entity: {"consumer_byte_rate": 2.0}}
    assert sandbox.alter([A(entity, remove=["consumer_byte_rate"])]).ok
    assert sandbox.describe() == {}
    # Not even an empty entry is left for a filter to find.
    assert sandbox.describe(EntityFilter.for_entity(entity)) == {}
    with sqlite3.connect(sandbox.path) as conn:
        assert conn.execute("SELECT count(*) FROM quotas").fetchone() == (0,)


def test_removing_a_key_that_is_not_set_is_accepted(sandbox):
    sandbox.alter([A(E(user="a"), {"producer_byte_rate": 1})])
    outcome = sandbox.alter([A(E(user="a"), remove=["consumer_byte_rate"]),
                             A(E(user="ghost"), remove=["producer_byte_rate"])])
    assert outcome.ok
    assert sandbox.describe() == {E(user="a"): {"producer_byte_rate": 1.0}}


def test_set_and_remove_in_one_request_for_one_entity(sandbox):
    sandbox.alter([A(E(user="a"), {"producer_byte_rate": 1})])
    assert sandbox.alter([A(E(user="a"), {"consumer_byte_rate": 2}, remove=["producer_byte_rate"])]).ok
    assert sandbox.describe() == {E(user="a"): {"consumer_byte_rate": 2.0}}


def test_same_entity_twice_first_applied_second_refused(sandbox):
    # As a Kafka 4.3 broker does: the first alteration is applied, and the entity's one
    # result in the response carries the error.
    outcome = sandbox.alter([A(E(user="a"), {"producer_byte_rate": 1}),
                             A(E(user="b"), {"producer_byte_rate": 9}),
                             A(E(user="a"), {"producer_byte_rate": 2, "consumer_byte_rate": 3})])
    assert [(r.entity, r.ok) for r in outcome.results] == [(E(user="a"), False), (E(user="b"), True)]
    assert outcome.results[0].error == \
        "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})"  # as a broker says it
    assert sandbox.describe() == {E(user="a"): {"producer_byte_rate": 1.0},
                                  E(user="b"): {"producer_byte_rate": 9.0}}


def test_nan_accepted_by_backend_refused_by_checked_alter(sandbox):
    assert sandbox.alter([A(E(user="nan"), {"request_percentage": math.nan})]).ok
    assert math.isnan(sandbox.describe()[E(user="nan")]["request_percentage"])
    with pytest.raises(AlterationError, match="NaN is not a quota") as info:
        checked_alter(sandbox, [A(E(user="ok"), {"request_percentage": 5}),
                                A(E(user="other"), {"request_percentage": math.nan})])
    assert [p.entity for p in info.value.problems] == [E(user="other")]
    # Nothing was sent, not even the valid entity.
    assert set(sandbox.describe()) == {E(user="nan")}
    # checked_alter passes what is valid through to the backend.
    assert checked_alter(sandbox, [A(E(user="ok"), {"request_percentage": 5})]).ok
    assert sandbox.describe_entity(E(user="ok")) == {"request_percentage": 5.0}


def test_persists_across_reopen(tmp_path):
    path = tmp_path / "q.sqlite"
    quotas = {E(user="CN=a,OU=b", client_id=None): {"producer_byte_rate": 4e6},
              E(user="<default>"): {"request_percentage": math.inf},
              E(user=None): {"request_percentage": math.nan},
              E(client_id="名前 \x00 ,="): {"controller_mutation_rate": 0.1},
              E(ip="::1"): {"connection_creation_rate": 7}}
    with SandboxBackend(path) as first:
        assert first.alter([A(e, q) for e, q in quotas.items()]).ok
        cluster_id = first.info().cluster_id
    with SandboxBackend(path) as second:
        stored = second.describe()
        assert {e: {k: repr(v) for k, v in q.items()} for e, q in stored.items()} == \
            {e: {k: repr(float(v)) for k, v in q.items()} for e, q in quotas.items()}
        assert second.info().cluster_id == cluster_id


def test_two_handles_see_each_others_commits(tmp_path):
    """The describe cache is invalidated by commits on another connection."""
    path = tmp_path / "q.sqlite"
    with SandboxBackend(path) as one, SandboxBackend(path) as two:
        assert one.describe() == two.describe() == {}
        one.alter([A(E(user="a"), {"producer_byte_rate": 1})])
        assert two.describe() == {E(user="a"): {"producer_byte_rate": 1.0}}
        two.alter([A(E(user="a"), {"producer_byte_rate": 2})])
        assert one.describe() == {E(user="a"): {"producer_byte_rate": 2.0}}
        one.replace_all({E(user="z"): {"consumer_byte_rate": 3.0}})
        assert two.describe() == one.describe() == {E(user="z"): {"consumer_byte_rate": 3.0}}


def test_replace_all_and_describe_filters(sandbox):
    sandbox.replace_all({E(user="a"): {"producer_byte_rate": 1.0},
                         E(user="a", client_id="c"): {"producer_byte_rate": 2.0},
                         E(user=None, client_id="c"): {"producer_byte_rate": 3.0}})
    assert set(sandbox.describe(EntityFilter.contains([FilterComponent.exact("client-id", "c")]))) \
        == {E(user="a", client_id="c"), E(user=None, client_id="c")}
    assert set(sandbox.describe(EntityFilter.contains_only([FilterComponent.any("user")]))) \
        == {E(user="a")}
    with pytest.raises(FilterError, match="cannot appear more than once"):
        sandbox.describe(EntityFilter.contains([FilterComponent.any("user"),
                                                FilterComponent.default("user")]))


def test_unusable_path_is_a_connection_failure(tmp_path):
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(ConnectionFailed, match="Cannot open the sandbox store"):
        SandboxBackend(tmp_path / "dir.sqlite")


# -- two processes writing at once ---------------------------------------------------------

ROUNDS = 200
SHARED = 10
# Each writer owns one key on the shared entities, so the final state is known exactly.
WRITER_KEY = {0: "producer_byte_rate", 1: "consumer_byte_rate"}
SCRATCH_KEY = {0: "request_percentage", 1: "controller_mutation_rate"}


def _writer(path: str, writer: int, barrier, results) -> None:
    errors: list[str] = []
    try:
        barrier.wait(timeout=60)
        backend = SandboxBackend(path)  # opened at the same moment as the other writer's
        for i in range(ROUNDS):
            own = E(user=f"w{writer}-{i}")
            shared = E(client_id=f"shared-{i % SHARED}")
            outcome = backend.alter([
                A(own, {"producer_byte_rate": 1000 * writer + i + 1}),
                # A scratch key set and removed again: must not survive, nor clobber anything.
                A(shared, {WRITER_KEY[writer]: i + 1, SCRATCH_KEY[writer]: 1.0}),
            ])
            if not outcome.ok:
                errors.append(f"round {i}: {[r.error for r in outcome.failed]}")
            if not backend.alter([A(shared, remove=[SCRATCH_KEY[writer]])]).ok:
                errors.append(f"round {i}: remove refused")
            # Read-your-writes through the describe cache.
            if backend.describe_entity(own) != {"producer_byte_rate": float(1000 * writer + i + 1)}:
                errors.append(f"round {i}: own write not visible")
            if backend.describe_entity(shared).get(WRITER_KEY[writer]) != float(i + 1):
                errors.append(f"round {i}: shared write not visible")
        backend.close()
    except Exception as exc:  # reported to the parent, which fails the test
        errors.append(f"{type(exc).__name__}: {exc}")
    results.put((writer, errors))


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "shared.sqlite")  # a fresh file: both create it concurrently
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    workers = [ctx.Process(target=_writer, args=(path, w, barrier, results)) for w in (0, 1)]
    for p in workers:
        p.start()
    reports = dict(results.get(timeout=240) for _ in workers)
    for p in workers:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert reports == {0: [], 1: []}

    expected = {E(user=f"w{w}-{i}"): {"producer_byte_rate": float(1000 * w + i + 1)}
                for w in (0, 1) for i in range(ROUNDS)}
    last = {j: max(i for i in range(ROUNDS) if i % SHARED == j) + 1 for j in range(SHARED)}
    for j in range(SHARED):
        expected[E(client_id=f"shared-{j}")] = {"producer_byte_rate": float(last[j]),
                                                "consumer_byte_rate": float(last[j])}
    with SandboxBackend(path) as backend:
        assert backend.describe() == expected


def _opener(folder: str, trials: int, barrier, results) -> None:
    errors = []
    for t in range(trials):
        barrier.wait(timeout=60)
        try:
            with SandboxBackend(f"{folder}/fresh-{t}.sqlite") as backend:
                backend.describe()
        except Exception as exc:  # reported to the parent, which fails the test
            errors.append(f"trial {t}: {exc}")
    results.put(errors)


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path):
    """Switching a new file to WAL does not wait for the lock: the open must retry."""
    ctx = multiprocessing.get_context("spawn")
    n, trials = 4, 15
    barrier, results = ctx.Barrier(n), ctx.Queue()
    workers = [ctx.Process(target=_opener, args=(str(tmp_path), trials, barrier, results))
               for _ in range(n)]
    for p in workers:
        p.start()
    errors = [e for _ in workers for e in results.get(timeout=240)]
    for p in workers:
        p.join(timeout=60)
    assert errors == []
