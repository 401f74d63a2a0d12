"""A generated sequence of quota alterations and describe filters, for running the same steps
against two backends (the sandbox and a real broker) and comparing every outcome.

Deterministic (a seeded generator) so a failure names a step that can be replayed.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from quota_core import Alteration, Entity, EntityFilter, FilterComponent, Op
from quota_core.domain.entities import CLIENT_ID, IP, USER

USERS = ["alice", "<default>", None, "a b", "CN=x,OU=y", "ü-名前", "100%", "back\\slash",
         "ANONYMOUS"]
CLIENT_IDS = ["app", None, "x=y,z", " lead", "💡"]
IPS = ["10.0.0.1", None, "::1", "localhost", "no-such-host.invalid"]
CLIENT_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage",
               "controller_mutation_rate"]
GOOD = [1024.0, 2048.0, 1.0, 4_000_000.0, 56.0]
GOOD_DOUBLE = [56.25, 0.5, 250.0, 1e6]
BAD = [0.0, -1.0, 1.5, 2.0**64, math.inf, -math.inf]


@dataclass(frozen=True)
class Step:
    kind: str                      # "alter" or "describe"
    alterations: tuple[Alteration, ...] = ()
    validate_only: bool = False
    entity_filter: EntityFilter | None = None

    def __str__(self) -> str:
        if self.kind == "describe":
            return f"describe {self.entity_filter}"
        return ("validate " if self.validate_only else "alter ") + "; ".join(
            f"{a.entity} " + ",".join(f"{o.key}={'DEL' if o.value is None else o.value}"
                                       for o in a.ops) for a in self.alterations)


def _entity(rng: random.Random) -> Entity:
    shape = rng.choice(["u", "uc", "c", "u", "uc", "ip"])
    if shape == "ip":
        return Entity.of(ip=rng.choice(IPS))
    pairs = []
    if "u" in shape:
        pairs.append((USER, rng.choice(USERS)))
    if "c" in shape:
        pairs.append((CLIENT_ID, rng.choice(CLIENT_IDS)))
    return Entity.from_pairs(pairs)


def _ops(rng: random.Random, entity: Entity) -> tuple[Op, ...]:
    keys = ["connection_creation_rate"] if entity.is_ip else CLIENT_KEYS
    ops = []
    for key in rng.sample(keys, k=rng.randint(1, len(keys))):
        roll = rng.random()
        if roll < 0.2:
            ops.append(Op.remove(key))
        elif roll < 0.3:
            ops.append(Op.set(key, rng.choice(BAD)))
        elif key in ("request_percentage", "controller_mutation_rate") and roll < 0.5:
            ops.append(Op.set(key, rng.choice(GOOD_DOUBLE)))
        else:
            ops.append(Op.set(key, rng.choice(GOOD)))
    if rng.random() < 0.08:  # a key the entity type does not take
        ops.append(Op.set(rng.choice(["bogus", "producer_byte_rate" if entity.is_ip
                                      else "connection_creation_rate"]), 5.0))
    if rng.random() < 0.05:  # removal of a key nobody knows: accepted, not validated
        ops.append(Op.remove("no_such_key"))
    return tuple(ops)


def _filter(rng: random.Random) -> EntityFilter:
    if rng.random() < 0.15:
        return EntityFilter((FilterComponent.any(IP),), rng.random() < 0.5)
    components = []
    for entity_type, pool in ((USER, USERS), (CLIENT_ID, CLIENT_IDS)):
        roll = rng.random()
        if roll < 0.3:
            continue
        if roll < 0.55:
            components.append(FilterComponent.any(entity_type))
        elif roll < 0.7:
            components.append(FilterComponent.default(entity_type))
        else:
            name = rng.choice([n for n in pool if n is not None])
            components.append(FilterComponent.exact(entity_type, name))
    return EntityFilter(tuple(components), rng.random() < 0.4)


def fixed_steps() -> list[Step]:
    """The cases that matter most, first, so they are always covered."""
    E = Entity.of
    a = lambda entity, *ops: Alteration(entity, tuple(ops))  # noqa: E731
    s = Op.set
    return [
        Step("alter", (a(E(user=None), s("producer_byte_rate", 1024.0)),
                       a(E(user="<default>"), s("producer_byte_rate", 2048.0)))),
        Step("describe", entity_filter=EntityFilter((FilterComponent.default(USER),), True)),
        Step("describe", entity_filter=EntityFilter((FilterComponent.exact(USER, "<default>"),), True)),
        Step("alter", (a(E(user="alice", client_id="app"), s("producer_byte_rate", 1.5)),
                       a(E(user="alice"), s("consumer_byte_rate", 10.0)))),   # one bad, one good
        Step("alter", (a(E(user="alice"), Op.remove("request_percentage")),)),  # unset key
        Step("alter", (a(E(user="alice"), Op.remove("consumer_byte_rate")),)),  # last key: gone
        Step("alter", (a(E(user="bob"), s("request_percentage", 56.25)),), validate_only=True),
        Step("alter", (a(E(ip="10.0.0.1"), s("connection_creation_rate", 5.0)),
                       a(E(ip=None), s("connection_creation_rate", 50.0)),
                       a(E(ip="no-such-host.invalid"), s("connection_creation_rate", 1.0)))),
        Step("alter", (a(E(ip="10.0.0.1"), s("producer_byte_rate", 5.0)),)),
        Step("alter", (a(E(user="x"), s("producer_byte_rate", 0.0)),
                       a(E(client_id="c"), s("producer_byte_rate", 2.0**63)),
                       a(E(client_id="d"), s("request_percentage", 1e12)))),
        Step("describe", entity_filter=EntityFilter((FilterComponent.any(USER),
                                                     FilterComponent.any(IP)))),  # invalid
        Step("describe", entity_filter=EntityFilter((FilterComponent.any(USER),
                                                     FilterComponent.default(USER)))),  # invalid
        Step("describe", entity_filter=EntityFilter((), True)),
        # A key twice in one entity rejects the entity (the broker's text names the entity).
        Step("alter", (a(E(user="u", client_id=None), s("producer_byte_rate", 1.0),
                         Op.remove("producer_byte_rate")),
                       a(E(user="u"), s("producer_byte_rate", 1.0)))),
        # The same entity twice in one request: the first applied, one result with the error.
        Step("alter", (a(E(user="twice"), s("producer_byte_rate", 1.0)),
                       a(E(client_id="once"), s("producer_byte_rate", 2.0)),
                       a(E(user="twice"), s("consumer_byte_rate", 3.0)))),
        # Brokers accept NaN for every key and +infinity for double keys (we refuse both
        # client-side; the sandbox must still model the broker).
        Step("alter", (a(E(client_id="nan"), s("producer_byte_rate", math.nan),
                         s("request_percentage", math.nan)),
                       a(E(client_id="inf"), s("controller_mutation_rate", math.inf)),
                       a(E(client_id="inf-long"), s("consumer_byte_rate", math.inf)))),
        Step("alter", (a(E(client_id="nan"), Op.remove("producer_byte_rate"),
                         Op.remove("request_percentage")),
                       a(E(client_id="inf"), Op.remove("controller_mutation_rate")))),
    ]


def generated_steps(count: int = 60, seed: int = 546) -> list[Step]:
    rng = random.Random(seed)
    steps = fixed_steps()
    while len(steps) < count:
        if rng.random() < 0.35:
            steps.append(Step("describe", entity_filter=_filter(rng)))
            continue
        entities: list[Entity] = []
        while len(entities) < rng.randint(1, 3):
            e = _entity(rng)
            if e not in entities:
                entities.append(e)
        steps.append(Step("alter", tuple(Alteration(e, _ops(rng, e)) for e in entities),
                          validate_only=rng.random() < 0.15))
    return steps
