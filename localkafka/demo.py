"""Demo quotas: a small cluster's worth of entries that exercise every ladder rung.

Used by ``make run`` (seeded into the local broker or a sandbox) and by tests that need a
realistic set. Pure data.
"""
from __future__ import annotations

from quota_core.entities import QuotaSet
from quota_core.entities import Entity

__all__ = ["demo_quotas", "DEMO_CLIENTS"]

MiB = 1024 * 1024

#: (user, client id) pairs a demo operator would ask about; None = not given.
DEMO_CLIENTS: tuple[tuple[str | None, str | None], ...] = (
    ("alice", "checkout-api"),
    ("alice", "batch-export"),
    ("bob", "checkout-api"),
    ("carol", "reports"),
    ("svc-reports", "reports"),
    ("dave", "mobile-gateway"),
    (None, "legacy-app"),
    ("<default>", "literal-default-user"),
)


def demo_quotas() -> QuotaSet:
    e = Entity.of
    return {
        e(user="alice", client_id="checkout-api"): {"producer_byte_rate": 8 * MiB},
        e(user="alice", client_id=None): {"consumer_byte_rate": 6 * MiB},
        e(user="alice"): {"producer_byte_rate": 2 * MiB, "consumer_byte_rate": 4 * MiB,
                          "request_percentage": 50.0},
        e(user=None, client_id="reports"): {"consumer_byte_rate": 20 * MiB},
        e(user=None, client_id=None): {"request_percentage": 25.0},
        e(user=None): {"producer_byte_rate": 1 * MiB, "consumer_byte_rate": 2 * MiB,
                       "controller_mutation_rate": 10.0},
        e(client_id="mobile-gateway"): {"producer_byte_rate": 512 * 1024},
        e(client_id=None): {"producer_byte_rate": 256 * 1024, "consumer_byte_rate": 512 * 1024},
        e(user="svc-reports"): {"consumer_byte_rate": 50 * MiB, "request_percentage": 200.0},
        e(user="<default>"): {"producer_byte_rate": 100 * 1024},
        e(user="CN=etl,OU=data"): {"producer_byte_rate": 16 * MiB},
        e(ip="10.0.0.12"): {"connection_creation_rate": 20.0},
        e(ip=None): {"connection_creation_rate": 100.0},
    }
