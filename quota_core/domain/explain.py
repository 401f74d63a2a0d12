"""Plain-words explanations of a resolution, for the CLI and the dashboard: raw names, as
people wrote them (:meth:`Entity.display`), not the KIP text form."""
from __future__ import annotations

from quota_core.domain.entities import CLIENT_ID, USER
from quota_core.domain.resolution import KeyResolution, Resolution
from quota_core.domain.units import format_quota

__all__ = ["explain_key", "explain"]


def explain_key(resolution: Resolution, key: str, quotas=None, members=None) -> str:
    """One sentence: ``alice's client ids share 1 MiB/s on each broker, set for {user=alice}``.

    With ``quotas`` (the quota set resolved against), a shared bucket names the client ids
    (or users) that an entry of their own takes out of it, as the rest of Resolve does."""
    r: KeyResolution = resolution.keys[key]
    client = resolution.client
    if client.is_ip:
        if r.unlimited:
            return f"No entry sets {key} for ip {client.ip}: unlimited."
        how = "set for this ip" if r.level == 1 else "set by the ip default"
        return (f"Connections from {client.ip} are limited to {format_quota(key, r.value)} "
                f"on each broker, {how} {r.source.display()}.")
    user, cid = client.user, client.client_id
    if r.unlimited:
        skipped = [s.level for s in resolution.ladder if not s.applies and key in s.quotas]
        why = ""
        if skipped:
            where = (f"Level {skipped[0]} sets it" if len(skipped) == 1 else
                     f"Levels {', '.join(map(str, skipped[:-1]))} and {skipped[-1]} set it")
            why = (f" {where}, but Kafka never applies "
                   f"{'that level' if len(skipped) == 1 else 'those levels'} to an empty "
                   f"{'client id' if not cid else 'user'}.")
        return (f"No entry on the ladder sets {key} for user {user!r} with client id {cid!r}: "
                f"unlimited.{why}")
    amount = f"{format_quota(key, r.value)} on each broker"
    tags = dict(r.bucket.tags)
    but = ""
    if quotas is not None and r.bucket.kind in ("user", "client-id"):
        from quota_core.domain.membership import Membership, names_text

        own = (members or Membership(quotas)).excepted(key, (tags[USER] or None,
                                                             tags[CLIENT_ID] or None))
        if own:
            what = "client ids" if r.bucket.kind == "user" else "users"
            but = (f" (except {what} {names_text(own)}, in a bucket of "
                   f"{'its' if len(own) == 1 else 'their'} own)")
    if r.bucket.kind == "user":
        who = f"All client ids of user {tags[USER]!r}{but} share {amount}"
        if r.level == 6:
            who = (f"Each user gets {amount} of their own; all client ids of user "
                   f"{tags[USER]!r}{but} share it")
    elif r.bucket.kind == "client-id":
        who = f"All users of client id {tags[CLIENT_ID]!r}{but} share {amount}"
        if r.level == 8:
            who = (f"Each client id gets {amount} of its own; all users of client id "
                   f"{tags[CLIENT_ID]!r}{but} share it")
    else:
        who = f"Client id {cid!r} of user {user!r} gets {amount} to itself"
    return f"{who}, set for {r.source.display()} (ladder level {r.level})."


def explain(resolution: Resolution) -> list[str]:
    """The assumptions made, then one sentence per key."""
    return resolution.client.assumptions() + [explain_key(resolution, k)
                                              for k in resolution.keys]
