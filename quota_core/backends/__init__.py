"""Backends: everything that touches a quota store.

The interface (:mod:`.base`), the Kafka backend (:mod:`.kafka`, over the pinned internals in
:mod:`.kafka_wire`, with its client properties in :mod:`.kafka_config`), the SQLite sandbox
store (:mod:`.sandbox`), opening a backend from the flags a user typed (:mod:`.open`) and
reading the files a user named (:mod:`.files`).

May import: the pure core (domain, throttling, analysis, planning, errors), the stdlib and the Kafka
clients. Never telemetry, changes, cli, ui, pages or pipeline (checked by import-linter).
"""
