"""The dashboard's settings, from environment variables and ``.streamlit/secrets.toml``.

Plain functions over a mapping of env vars and a plain dict of secrets, so they are tested
without Streamlit. Environment variables win over secrets.

==============================  ===================================  ==========================
env var                         secrets.toml                         meaning
==============================  ===================================  ==========================
QUOTA_SANDBOX                   [sandbox] path                       a sandbox file to use
QUOTA_BOOTSTRAP_SERVERS         [kafka] bootstrap_servers            a Kafka cluster
QUOTA_COMMAND_CONFIG            [kafka] command_config               Java client properties file
\u2014                               [kafka.properties]                   client properties inline
QUOTA_CONNECTION_LABEL          [kafka] label                        how the sidebar names it
QUOTA_READ_ONLY=1               [access] read_only = true            hide all editing
QUOTA_EDITORS=alice,bob         [access] editors = [...]             who may edit (else anyone)
QUOTA_USER_HEADER               [access] user_header                 header carrying the user
QUOTA_TRUST_PROXY_HEADER=1      [access] trust_proxy_header = true   trust it (loopback only)
QUOTA_LOCAL_MODE=1              [access] mode = "local"              typed names, not verified
QUOTA_IDENTITY_CLAIM            [access] identity_claim              sign-in claim (default email)
\u2014                               [auth]                               sign-in (OpenID Connect)
QUOTA_AUDIT_LOG                 [audit] path                         the JSON-lines audit log
QUOTA_CACHE_TTL                 [cache] ttl_seconds                  re-describe after (default 60)
QUOTA_KAFKA_TIMEOUT             [kafka] timeout_seconds              wait for a broker (default 10)
QUOTA_METRICS                   [metrics] endpoints = [...]          brokers' Prometheus URLs
QUOTA_HISTORY_DIR               [history] path                       the collector's output folder
QUOTA_ANALYSIS_DIR              [history] analysis                   the Spark job's tables (default <history>/analysis)
==============================  ===================================  ==========================
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["ConnectionSpec", "AccessPolicy", "connections", "access_policy", "audit_path",
           "cache_ttl", "kafka_timeout", "metrics_endpoints", "metrics_template", "history_dir", "analysis_dir", "Places", "redact",
           "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parent.parent
_SECRET_WORDS = ("password", "secret", "jaas", "token", "credential", "private")
_TRUE = {"1", "true", "yes", "on"}


def redact(key: str, value: str) -> str:
    """Client properties as the sidebar may show them: secrets replaced by dots."""
    k = key.lower()
    secret = any(w in k for w in _SECRET_WORDS) or k.endswith(".key")  # ssl.keystore.key (PEM)
    return "••••••" if secret else value


@dataclass(frozen=True)
class ConnectionSpec:
    """Where the quotas live. ``key`` identifies it (including credentials, hashed)."""

    kind: str                      # "kafka" or "sandbox"
    label: str
    source: str                    # "env" or "secrets"
    bootstrap_servers: str | None = None
    command_config: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    sandbox_path: str | None = None
    #: The fleet's name for this cluster (``[clusters.NAME]``); None outside a fleet file.
    cluster: str | None = None

    @property
    def key(self) -> str:
        # A fleet's cluster keeps its own connection, even at the address of another.
        raw = json.dumps([self.kind, self.bootstrap_servers, self.command_config,
                          list(self.properties), self.sandbox_path]
                         + ([self.cluster] if self.cluster is not None else []))
        return f"{self.kind}:{hashlib.sha256(raw.encode()).hexdigest()[:16]}"

    @property
    def location(self) -> str:
        return self.sandbox_path if self.kind == "sandbox" else (self.bootstrap_servers or "")

    def public_properties(self) -> dict[str, str]:
        """The client properties with secret values hidden: safe to display."""
        return {k: redact(k, v) for k, v in self.properties}

    def __repr__(self) -> str:  # never shows passwords, even in tracebacks
        return (f"ConnectionSpec(kind={self.kind!r}, label={self.label!r}, "
                f"location={self.location!r}, properties={self.public_properties()!r})")


def _section(secrets: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = secrets.get(name) if secrets else None
    return value if isinstance(value, Mapping) else {}


def connections(env: Mapping[str, str], secrets: Mapping[str, Any]) -> list[ConnectionSpec]:
    """Every configured connection, the one to use first: env sandbox, env cluster,
    secrets cluster, secrets sandbox."""
    out: list[ConnectionSpec] = []
    if env.get("QUOTA_SANDBOX"):
        out.append(ConnectionSpec("sandbox", env.get("QUOTA_CONNECTION_LABEL") or "Sandbox file",
                                  "env", sandbox_path=str(Path(env["QUOTA_SANDBOX"]).resolve())))
    if env.get("QUOTA_BOOTSTRAP_SERVERS"):
        out.append(ConnectionSpec(
            "kafka", env.get("QUOTA_CONNECTION_LABEL") or "Kafka cluster (environment)", "env",
            bootstrap_servers=env["QUOTA_BOOTSTRAP_SERVERS"].strip(),
            command_config=env.get("QUOTA_COMMAND_CONFIG") or None))
    kafka = _section(secrets, "kafka")
    if kafka.get("bootstrap_servers"):
        props = kafka.get("properties")
        props = props if isinstance(props, Mapping) else {}
        out.append(ConnectionSpec(
            "kafka", str(kafka.get("label") or "Kafka cluster (secrets.toml)"), "secrets",
            bootstrap_servers=str(kafka["bootstrap_servers"]).strip(),
            command_config=str(kafka["command_config"]) if kafka.get("command_config") else None,
            properties=tuple(sorted((str(k), str(v)) for k, v in props.items()))))
    sandbox = _section(secrets, "sandbox")
    if sandbox.get("path"):
        out.append(ConnectionSpec("sandbox", str(sandbox.get("label") or "Sandbox file"),
                                  "secrets", sandbox_path=str(Path(sandbox["path"]).resolve())))
    return out


@dataclass(frozen=True)
class AccessPolicy:
    """Who may edit, as configured. ``ui.identity`` decides from it (pure functions):
    ``editors`` None: anyone identified; read_only: nobody."""

    read_only: bool = False
    editors: frozenset[str] | None = None
    #: A request header set by an authenticating proxy (e.g. X-Forwarded-User).
    user_header: str | None = None
    #: Trust ``user_header`` ([access] trust_proxy_header): honoured only on loopback.
    trust_proxy_header: bool = False
    #: Typed names allowed, not verified ([access] mode = "local" / QUOTA_LOCAL_MODE=1).
    local_mode: bool = False
    #: An ``[auth]`` section is configured: editors sign in (OpenID Connect, ``st.login``).
    signin: bool = False
    #: What the ``[auth]`` section lacks (Streamlit's own required keys).
    signin_problems: tuple[str, ...] = ()
    #: The sign-in claim that names an editor ([access] identity_claim).
    identity_claim: str = "email"
    #: An ``[access] mode`` this console does not know.
    mode_error: str | None = None

    @property
    def editing_enabled(self) -> bool:
        return not self.read_only


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


_AUTH_PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")


def _auth_problems(auth: Mapping[str, Any]) -> tuple[str, ...]:
    """What Streamlit's ``st.login()`` (the default provider) needs and ``auth`` lacks."""
    missing = [f"[auth] {k}" for k in ("redirect_uri", "cookie_secret") if not auth.get(k)]
    provider = auth.get("default") if isinstance(auth.get("default"), Mapping) else auth
    where = "[auth.default]" if provider is not auth else "[auth]"
    missing += [f"{where} {k}" for k in _AUTH_PROVIDER_KEYS if not provider.get(k)]
    return (f"missing {', '.join(missing)}",) if missing else ()


def access_policy(env: Mapping[str, str], secrets: Mapping[str, Any]) -> AccessPolicy:
    access = _section(secrets, "access")
    read_only = _flag(env["QUOTA_READ_ONLY"]) if env.get("QUOTA_READ_ONLY") else \
        _flag(access.get("read_only", False))
    editors: frozenset[str] | None = None
    if env.get("QUOTA_EDITORS"):
        editors = frozenset(n.strip() for n in env["QUOTA_EDITORS"].split(",") if n.strip())
    elif isinstance(access.get("editors"), (list, tuple)):
        editors = frozenset(str(n) for n in access["editors"])
    header = env.get("QUOTA_USER_HEADER") or access.get("user_header") or None
    trust = _flag(env["QUOTA_TRUST_PROXY_HEADER"]) if env.get("QUOTA_TRUST_PROXY_HEADER") \
        else _flag(access.get("trust_proxy_header", False))
    mode = str(access.get("mode") or "").strip().lower()
    mode_error = None
    if mode not in ("", "local"):
        mode_error = (f"Unknown [access] mode {access.get('mode')!r}: the only mode is "
                      f"\"local\" (typed names, not verified); leave it out otherwise.")
    local = _flag(env["QUOTA_LOCAL_MODE"]) if env.get("QUOTA_LOCAL_MODE") else mode == "local"
    auth = _section(secrets, "auth")
    claim = str(env.get("QUOTA_IDENTITY_CLAIM") or access.get("identity_claim") or "email")
    return AccessPolicy(read_only, editors, str(header) if header else None, trust, local,
                        bool(auth), _auth_problems(auth) if auth else (), claim.strip(),
                        mode_error)


def audit_path(env: Mapping[str, str], secrets: Mapping[str, Any]) -> Path:
    """The one audit log the dashboard and the CLI share (quota_core.changes.audit decides)."""
    from quota_core.changes.audit import default_audit_path

    return default_audit_path(env, secrets)


def cache_ttl(env: Mapping[str, str], secrets: Mapping[str, Any]) -> float:
    raw = env.get("QUOTA_CACHE_TTL") or _section(secrets, "cache").get("ttl_seconds") or 60
    try:
        return max(float(raw), 0.0)
    except (TypeError, ValueError):
        return 60.0


def kafka_timeout(env: Mapping[str, str], secrets: Mapping[str, Any]) -> float:
    raw = env.get("QUOTA_KAFKA_TIMEOUT") or _section(secrets, "kafka").get("timeout_seconds") or 10
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return 10.0
    return value if value > 0 else 10.0


def watch_every(env: Mapping[str, str], secrets: Mapping[str, Any]) -> float:
    """Seconds between the background checks that the cluster still answers
    (``QUOTA_WATCH_EVERY``, ``[cache] watch_seconds``; 5)."""
    raw = env.get("QUOTA_WATCH_EVERY") or _section(secrets, "cache").get("watch_seconds") or 5
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return 5.0
    return value if value > 0 else 5.0


def metrics_endpoints(env: Mapping[str, str], secrets: Mapping[str, Any]) -> str | None:
    """The brokers' metrics endpoints as ``URL[,URL...]`` (``LABEL=URL`` allowed), or None."""
    raw = env.get("QUOTA_METRICS") or _section(secrets, "metrics").get("endpoints")
    if isinstance(raw, (list, tuple)):
        raw = ",".join(str(u) for u in raw)
    return str(raw).strip() or None if raw else None


def metrics_template(env: Mapping[str, str], secrets: Mapping[str, Any]) -> str | None:
    """One endpoint per broker of the connected cluster from a template with ``{host}``/``{id}``
    (``QUOTA_METRICS_TEMPLATE`` or ``[metrics] template``), or None. Explicit endpoints win."""
    raw = env.get("QUOTA_METRICS_TEMPLATE") or _section(secrets, "metrics").get("template")
    return str(raw).strip() or None if raw else None


def history_dir(env: Mapping[str, str], secrets: Mapping[str, Any]) -> Path | None:
    """The collector's output folder (usage samples and quota snapshots), or None."""
    raw = env.get("QUOTA_HISTORY_DIR") or _section(secrets, "history").get("path")
    return Path(str(raw)) if raw else None


def analysis_dir(env: Mapping[str, str], secrets: Mapping[str, Any]) -> Path | None:
    """Where the Spark job's tables for that history go (default: ``<history>/analysis``)."""
    raw = env.get("QUOTA_ANALYSIS_DIR") or _section(secrets, "history").get("analysis")
    if raw:
        return Path(str(raw))
    history = history_dir(env, secrets)
    return history / "analysis" if history else None


#: The tables the History page reads from an analysis folder.
ANALYSIS_TABLES = ("windows", "by_client", "by_entry", "sizing")


@dataclass(frozen=True)
class Places:
    """A usage history folder, its rollups and its analysis; the job's log and pid file sit
    beside the analysis."""

    history: Path
    analysis: Path

    @property
    def rollups(self) -> Path:
        """The hourly rollups the analysis keeps (``analyze``'s default ``--rollups``)."""
        return self.history / "rollups"

    @property
    def log(self) -> Path:
        return self.analysis.with_name(self.analysis.name + ".log")

    @property
    def pid(self) -> Path:
        return self.analysis.with_name(self.analysis.name + ".pid")

    @property
    def ready(self) -> bool:
        return all((self.analysis / t).exists() for t in ANALYSIS_TABLES)

    @property
    def version(self) -> float:
        """Changes whenever a new analysis lands (the folder is replaced whole)."""
        return (self.analysis / "windows").stat().st_mtime if self.ready else 0.0


