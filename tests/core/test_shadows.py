"""Shadowed and dead entries (quota_core.domain.shadows): a table of cases."""
from __future__ import annotations

import pytest

from quota_core import Entity, resolve
from quota_core.domain.shadows import dead_keys, shadow_notes

E = Entity.of
KiB = 1024


@pytest.mark.parametrize("quotas, dead", [
    # {user=<default>} answers first for every user: {client-id=C}'s same key never binds.
    ({E(client_id="mobile"): {"producer_byte_rate": 512 * KiB, "consumer_byte_rate": 1.0},
      E(user=None): {"producer_byte_rate": 4.0}},
     {(E(client_id="mobile"), "producer_byte_rate"): E(user=None)}),
    # {user=<default>, client-id=C} is consulted for every client of {client-id=C}.
    ({E(client_id="c"): {"request_percentage": 5.0},
      E(user=None, client_id="c"): {"request_percentage": 9.0}},
     {(E(client_id="c"), "request_percentage"): E(user=None, client_id="c")}),
    # ... and {user=<default>, client-id=<default>} for every client of {client-id=<default>}.
    ({E(client_id=None): {"producer_byte_rate": 1.0},
      E(user=None, client_id=None): {"producer_byte_rate": 2.0}},
     {(E(client_id=None), "producer_byte_rate"): E(user=None, client_id=None)}),
    # A client with an empty client id skips the pair levels: {user=U} is not dead.
    ({E(user="u"): {"producer_byte_rate": 1.0},
      E(user="u", client_id=None): {"producer_byte_rate": 2.0}}, {}),
    # A named client-id entry does not cover every client of {client-id=<default>}.
    ({E(client_id=None): {"producer_byte_rate": 1.0},
      E(client_id="c"): {"producer_byte_rate": 2.0}}, {}),
    # {user=U} shadows {user=U, ...}? No: the pair levels come first.
    ({E(user="u", client_id="c"): {"producer_byte_rate": 1.0},
      E(user="u"): {"producer_byte_rate": 2.0}}, {}),
    # A user literally named <default> is an ordinary name, not the default.
    ({E(client_id="m"): {"producer_byte_rate": 1.0},
      E(user="<default>"): {"producer_byte_rate": 2.0}}, {}),
    # ip entities have their own two-level ladder.
    ({E(ip="10.0.0.1"): {"connection_creation_rate": 1.0}}, {}),
])
def test_dead_keys(quotas, dead):
    found = {(d.entity, d.key): d.winner for entries in dead_keys(quotas).values()
             for d in entries}
    assert found == dead


def test_dead_key_reason_names_both_entries_raw():
    quotas = {E(client_id="a,b"): {"producer_byte_rate": 1.0}, E(user=None): {"producer_byte_rate": 2.0}}
    [dead] = dead_keys(quotas)[E(client_id="a,b")]
    assert dead.reason() == (
        'producer_byte_rate of {client-id="a,b"} never applies to any client: '
        "{user=<default>} (level 6) sets producer_byte_rate first for every client this "
        "entry could limit.")


def test_shadow_notes_say_more_or_less_in_plain_words():
    quotas = {E(client_id="mobile-gateway"): {"producer_byte_rate": 512 * KiB},
              E(user=None): {"producer_byte_rate": 1024 * KiB}}
    [note] = shadow_notes(resolve(quotas, "dave", "mobile-gateway"))
    assert note == ("`{client-id=mobile-gateway}` 512 KiB/s never applies to dave: "
                    "`{user=<default>}` at level 6 sets producer_byte_rate first (1 MiB/s), "
                    "so dave gets *more* than this entry's cap.")
