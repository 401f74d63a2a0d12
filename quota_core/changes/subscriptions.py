"""Client-metrics subscriptions (KIP-714) read and written from the console, audited.

The wire is :mod:`quota_core.backends.kafka_client_metrics` (the functions ``telemetry
list | subscribe | unsubscribe`` use); this module adds what a write from the dashboard
needs: the fleet's ``read_only`` refusal, the audit log's intent before sending and its
outcome after (action :data:`~quota_core.domain.client_metrics.SUBSCRIBE_ACTION` /
``UNSUBSCRIBE_ACTION``; ``entity`` empty, ``entity_text`` names the subscription,
``before`` / ``after`` its configs as read), and the read-back.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from quota_core.changes.audit import AuditLog, config_outcome, config_record
from quota_core.changes.workflow import refuse_read_only
from quota_core.domain.client_metrics import (SUBSCRIBE_ACTION, UNSUBSCRIBE_ACTION, Subscription,
                                              check_name, subscription_configs)
from quota_core.domain.fleet import DEFAULT_NAME
from quota_core.errors import OutcomeUnknown, QuotaError, RequestRejected

__all__ = ["Subscriptions", "read_subscriptions", "subscribe", "unsubscribe", "subject_text"]


@dataclass(frozen=True)
class Subscriptions:
    """What the cluster holds: ``kafka`` False for a store without subscriptions (a sandbox),
    ``collected`` whether a broker plugin receives what clients push."""

    kafka: bool
    collected: bool
    subs: tuple[Subscription, ...] = ()


def subject_text(name: str) -> str:
    """How the audit log names a subscription (its ``entity_text``)."""
    return f"client-metrics subscription {name}"


@contextlib.contextmanager
def _wire(backend) -> Iterator[object]:
    """The Kafka backend itself (under the dashboard's connection lock when it has one)."""
    held = getattr(backend, "held", None)
    if held is None:
        yield backend
        return
    with held() as inner:
        yield inner


def _is_kafka(backend) -> bool:
    return getattr(backend.info(), "kind", None) == "kafka"


def read_subscriptions(backend) -> Subscriptions:
    """Every subscription of the cluster, and whether it collects pushes; a sandbox has none."""
    if not _is_kafka(backend):
        return Subscriptions(kafka=False, collected=False)
    from quota_core.backends.kafka_client_metrics import (describe_subscriptions,
                                                          list_subscription_names,
                                                          telemetry_collected)

    with _wire(backend) as kafka:
        collected = telemetry_collected(kafka)
        subs = describe_subscriptions(kafka, list_subscription_names(kafka))
    return Subscriptions(kafka=True, collected=collected, subs=tuple(subs))


def _one(kafka, name: str) -> Subscription | None:
    from quota_core.backends.kafka_client_metrics import (describe_subscriptions,
                                                          list_subscription_names)

    if name not in list_subscription_names(kafka):
        return None
    found = describe_subscriptions(kafka, [name])
    return found[0] if found else None


def _change(backend, name: str, action: str, want: Subscription | None, *, actor: str,
            cluster: Mapping[str, object], audit: AuditLog, target=None) -> Subscription | None:
    refuse_read_only(target)
    # the fleet's name for the cluster, else the fleet of one's, as the quota workflow records
    cluster = ({**cluster, "name": target.name} if target is not None
               else {"name": DEFAULT_NAME, **cluster})
    if not _is_kafka(backend):
        raise RequestRejected(f"{subject_text(name)}: this store has no client-metrics "
                              f"subscriptions (a sandbox has no clients).")
    from quota_core.backends.kafka_client_metrics import alter_subscription, delete_subscription

    audit.ensure_writable()  # never a change unrecorded
    with _wire(backend) as kafka:
        before = _one(kafka, name)
        if want is None and before is None:
            raise RequestRejected(f"unsubscribe {name}: the cluster has no such subscription; "
                                  f"`kafka-client-quotas telemetry list` shows them.")
        intent = config_record(actor=actor, cluster=cluster, subject=subject_text(name),
                               action=action, before=subscription_configs(before),
                               after=subscription_configs(want), extra={"subscription": name})
        audit.append(intent)
        try:
            if want is None:
                delete_subscription(kafka, name)
            else:
                alter_subscription(kafka, want)
        except OutcomeUnknown as exc:
            audit.append(config_outcome(intent, "unknown", subscription_configs(want),
                                        note=f"outcome unknown: {exc}"))
            raise
        except QuotaError as exc:
            audit.append(config_outcome(intent, "refused", subscription_configs(before),
                                        note=str(exc)))
            raise
        after = _one(kafka, name)
    audit.append(config_outcome(intent, "applied", subscription_configs(after)))
    return after


def subscribe(backend, sub: Subscription, **how) -> Subscription | None:
    """Create or replace ``sub`` (audited); the subscription as read back."""
    return _change(backend, sub.name, SUBSCRIBE_ACTION, sub, **how)


def unsubscribe(backend, name: str, **how) -> None:
    """Remove the subscription ``name`` (audited); a name the cluster lacks is refused."""
    _change(backend, check_name(name), UNSUBSCRIBE_ACTION, None, **how)
