"""The fleet: every cluster an operator runs, as one TOML file (issue 29).

A cluster is a table ``[clusters.NAME]``::

    [clusters.staging]
    sandbox = "staging.sqlite"            # relative to this file's folder

    [clusters.prod]
    bootstrap_servers = "kafka-1:9092,kafka-2:9092"
    command_config = "/etc/kafka/prod.properties"
    metrics = ["1=http://kafka-1:9404/metrics", "2=http://kafka-2:9404/metrics"]
    read_only = true
    editors = ["alice@example.com"]
    label = "Production (eu-west-1)"

    [clusters.prod.properties]            # inline client properties (Java names)
    "security.protocol" = "SASL_SSL"

Pure: :func:`parse_fleet` reads TOML text (``tomllib.loads``), :func:`fleet_from_mapping`
an already-parsed mapping (the dashboard's ``st.secrets``), :func:`fleet_of_one` today's
single-cluster settings (``[kafka]`` / ``QUOTA_*``). Reading files is
:mod:`quota_core.backends.fleet_config`'s job.
"""
from __future__ import annotations

import difflib
import os
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import UsageError

__all__ = ["ClusterConfig", "Fleet", "parse_fleet", "fleet_from_mapping", "fleet_of_one",
           "CLUSTER_KEYS", "NAME_RULE", "valid_name", "DEFAULT_NAME", "SECRET_MASK",
           "is_secret_property"]

#: The name of the one cluster today's single settings describe.
DEFAULT_NAME = "default"
#: What a cluster NAME must look like.
NAME_RULE = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_NAME = re.compile(NAME_RULE)
#: Every key a ``[clusters.NAME]`` table may hold.
CLUSTER_KEYS = ("bootstrap_servers", "sandbox", "command_config", "properties", "metrics",
                "metrics_template", "read_only", "editors", "label", "history_dir",
                "audit_log")
_STORES = ("bootstrap_servers", "sandbox")
_TOP_KEYS = ("clusters",)
#: How a secret property value is shown.
SECRET_MASK = "••••••"
_SECRET_WORDS = ("password", "secret", "jaas", "token", "credential", "private")
_TRUE = {"1", "true", "yes", "on"}


def valid_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name))


def is_secret_property(key: str) -> bool:
    """Whether a client property holds a secret (a password, a JAAS line, a PEM key)."""
    k = key.lower()
    return any(w in k for w in _SECRET_WORDS) or k.endswith(".key")


class _Hidden(dict):
    """Client properties whose values never show in ``repr``/``str`` (tracebacks, logs)."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: '{SECRET_MASK}'" for k in self) + "}"

    __str__ = __repr__

    def __hash__(self) -> int:  # frozen dataclasses hash their fields
        return hash(tuple(sorted(self.items())))


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster of the fleet: where its quotas live, how to reach them, who may edit."""

    name: str
    bootstrap_servers: str | None = None
    #: An absolute path (relative ones are resolved against the config file's folder).
    sandbox: str | None = None
    command_config: str | None = None
    #: Inline client properties; may hold secrets: ``repr``/``str`` never show values.
    properties: Mapping[str, str] = field(default_factory=_Hidden)
    #: Metrics endpoints: URLs, ``LABEL=URL`` allowed.
    metrics: tuple[str, ...] = ()
    metrics_template: str | None = None
    read_only: bool = False
    #: None: not set (the dashboard's global rule applies).
    editors: tuple[str, ...] | None = None
    label: str | None = None
    history_dir: str | None = None
    audit_log: str | None = None
    #: Where this cluster is configured (the fleet's source), for messages.
    source: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.properties, _Hidden):
            object.__setattr__(self, "properties", _Hidden(self.properties))

    @property
    def display_name(self) -> str:
        return self.label or self.name

    @property
    def kind(self) -> str:
        """``"sandbox"`` or ``"kafka"``."""
        return "sandbox" if self.sandbox else "kafka"

    @property
    def location(self) -> str:
        """The sandbox path or the bootstrap servers: where the quotas live."""
        return (self.sandbox or self.bootstrap_servers) or ""

    def public_properties(self) -> dict[str, str]:
        """The client properties with secret values hidden: safe to display."""
        return {k: (SECRET_MASK if is_secret_property(k) else v)
                for k, v in self.properties.items()}

    @property
    def metrics_arg(self) -> str | None:
        """The metrics endpoints as ``--metrics`` takes them (comma-separated), or None."""
        return ",".join(self.metrics) or None

    def __repr__(self) -> str:  # never shows a property value, even in tracebacks
        return (f"ClusterConfig(name={self.name!r}, kind={self.kind!r}, "
                f"location={self.location!r}, properties={list(self.properties)!r}, "
                f"read_only={self.read_only!r})")

    __str__ = __repr__


@dataclass(frozen=True)
class Fleet:
    """The clusters, in file order, and where they were configured."""

    clusters: Mapping[str, ClusterConfig]
    #: Where the fleet came from: a path, ``"QUOTA_* settings"``, ``"secrets.toml"``.
    source: str

    def names(self) -> list[str]:
        return list(self.clusters)

    def __len__(self) -> int:
        return len(self.clusters)

    def __iter__(self):
        return iter(self.clusters.values())

    def select(self, name: str | None) -> ClusterConfig:
        """The cluster ``name``; with None, the only one. A usage error otherwise."""
        known = ", ".join(self.clusters) or "none"
        if name is None:
            if len(self.clusters) == 1:
                return next(iter(self.clusters.values()))
            if not self.clusters:
                raise UsageError(f"No cluster is configured ({self.source}): give a fleet "
                                 f"file (--config PATH, or QUOTA_CONFIG) with [clusters.NAME] "
                                 f"tables.")
            raise UsageError(f"{self.source} names {len(self.clusters)} clusters: pick one "
                             f"with --cluster NAME (known: {known}), or use --all-clusters "
                             f"where the command allows it.")
        if name in self.clusters:
            return self.clusters[name]
        if not self.clusters:
            raise UsageError(f"unknown cluster '{name}': no cluster is configured "
                             f"({self.source}). Give a fleet file (--config PATH, or "
                             f"QUOTA_CONFIG) with a [clusters.{name}] table.")
        close = difflib.get_close_matches(name, list(self.clusters), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise UsageError(f"unknown cluster '{name}'; known: {known} (in {self.source}).{hint}")


# -- parsing ------------------------------------------------------------------------------
def _suggest(word: str, options: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


def _header_re(name: str) -> re.Pattern[str]:
    quoted = f"(?:{re.escape(name)}|\"{re.escape(name)}\"|'{re.escape(name)}')"
    return re.compile(rf"^\s*\[\s*clusters\s*\.\s*{quoted}\s*(?:\.|\])")


def _line_of(text: str | None, name: str | None, key: str | None = None) -> int | None:
    """The line (1-based) of ``[clusters.NAME]`` or of ``key`` in it: best effort, for
    messages (tomllib gives no positions for a file that parses)."""
    if not text:
        return None
    lines = text.splitlines()
    if name is None:  # a top-level key
        for i, line in enumerate(lines, 1):
            if key and re.match(rf"^\s*\[?\s*{re.escape(key)}\b", line):
                return i
        return None
    header = _header_re(name)
    inside, header_line = False, None
    key_re = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=") if key else None
    for i, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("["):
            inside = bool(header.match(line))
            if inside and header_line is None:
                header_line = i
            continue
        if inside and key_re is not None and key_re.match(line):
            return i
    # a key written dotted (clusters.prod.sandbox = ...) or inline: fall back to the header
    if key is not None:
        dotted = re.compile(rf"^\s*clusters\s*\.\s*[\"']?{re.escape(name)}[\"']?\s*\.\s*"
                            rf"{re.escape(key)}\s*=")
        for i, line in enumerate(lines, 1):
            if dotted.match(line):
                return i
    return header_line


class _Ctx:
    def __init__(self, source: str, text: str | None) -> None:
        self.source, self.text = source, text

    def error(self, message: str, name: str | None = None, key: str | None = None,
              fix: str = "") -> UsageError:
        line = _line_of(self.text, name, key)
        where = f"{self.source}, line {line}" if line else self.source
        return UsageError(f"{where}: {message}{fix}", source=self.source, line=line,
                          cluster=name, key=key)


def _string(ctx: _Ctx, name: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ctx.error(f"[clusters.{name}] {key} must be a string, not "
                        f"{type(value).__name__} ({value!r}).", name, key,
                        f' Write it quoted: {key} = "..."')
    value = value.strip()
    if not value:
        raise ctx.error(f"[clusters.{name}] {key} is empty.", name, key,
                        " Give a value, or leave the key out.")
    return value


def _strings(ctx: _Ctx, name: str, key: str, value: Any, split: bool) -> tuple[str, ...]:
    if isinstance(value, str) and split:
        value = [v for v in value.split(",")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ctx.error(f"[clusters.{name}] {key} must be a list of strings, not "
                        f"{value!r}.", name, key, f' Write it as {key} = ["...", "..."]')
    return tuple(v.strip() for v in value if v.strip())


def _flat(prefix: str, value: Mapping) -> dict[str, str]:
    """TOML reads ``security.protocol = "SSL"`` unquoted as a nested table: flatten it
    back to the Java name."""
    out: dict[str, str] = {}
    for k, v in value.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(_flat(key, v))
        elif isinstance(v, bool):
            out[key] = "true" if v else "false"
        else:
            out[key] = str(v)
    return out


def _path(value: str | None, base_dir: str) -> str | None:
    if value is None:
        return None
    value = os.path.expanduser(value)
    return os.path.normpath(value if os.path.isabs(value) else os.path.join(base_dir, value))


def _cluster(ctx: _Ctx, name: Any, table: Any, base_dir: str) -> ClusterConfig:
    if not isinstance(name, str) or not valid_name(name):
        raise ctx.error(f"the cluster name {name!r} is not allowed: a name is letters, "
                        f"digits, '_', '.' and '-', starting with a letter or digit "
                        f"({NAME_RULE}).", None, "clusters",
                        " Rename the table, e.g. [clusters.prod-eu].")
    if not isinstance(table, Mapping):
        raise ctx.error(f"clusters.{name} must be a table ([clusters.{name}]), not "
                        f"{type(table).__name__}.", name)
    for key in table:
        if key not in CLUSTER_KEYS:
            raise ctx.error(f"[clusters.{name}] has an unknown key '{key}'.", name, str(key),
                            _suggest(str(key), CLUSTER_KEYS)
                            or f" The keys are: {', '.join(CLUSTER_KEYS)}.")
    stores = [k for k in _STORES if table.get(k) not in (None, "")]
    if len(stores) != 1:
        what = "no store" if not stores else "two stores"
        raise ctx.error(f"[clusters.{name}] has {what}: give exactly one of "
                        f"bootstrap_servers or sandbox.", name,
                        stores[-1] if stores else None,
                        " e.g. bootstrap_servers = \"kafka-1:9092\" or sandbox = "
                        "\"quotas.sqlite\".")
    props = table.get("properties", {})
    if not isinstance(props, Mapping):
        raise ctx.error(f"[clusters.{name}] properties must be a table "
                        f"([clusters.{name}.properties]), not {type(props).__name__}.",
                        name, "properties")
    read_only = table.get("read_only", False)
    if not isinstance(read_only, bool):
        raise ctx.error(f"[clusters.{name}] read_only must be true or false, not "
                        f"{read_only!r}.", name, "read_only", " Write read_only = true.")
    editors = table.get("editors")
    return ClusterConfig(
        name=name,
        bootstrap_servers=_string(ctx, name, "bootstrap_servers", table.get("bootstrap_servers")),
        sandbox=_path(_string(ctx, name, "sandbox", table.get("sandbox")), base_dir),
        command_config=_path(_string(ctx, name, "command_config", table.get("command_config")),
                             base_dir),
        properties=_Hidden(_flat("", props)),
        metrics=_strings(ctx, name, "metrics", table.get("metrics", ()), split=True),
        metrics_template=_string(ctx, name, "metrics_template", table.get("metrics_template")),
        read_only=read_only,
        editors=None if editors is None else _strings(ctx, name, "editors", editors,
                                                      split=False),
        label=_string(ctx, name, "label", table.get("label")),
        history_dir=_path(_string(ctx, name, "history_dir", table.get("history_dir")),
                          base_dir),
        audit_log=_path(_string(ctx, name, "audit_log", table.get("audit_log")), base_dir),
        source=ctx.source,
    )


def _fleet(ctx: _Ctx, data: Mapping[str, Any], base_dir: str, strict_top: bool) -> Fleet:
    if strict_top:
        for key in data:
            if key not in _TOP_KEYS:
                raise ctx.error(f"unknown top-level key '{key}': a fleet file holds "
                                f"[clusters.NAME] tables only.", None, str(key),
                                _suggest(str(key), _TOP_KEYS))
    clusters = data.get("clusters")
    if clusters is None:
        raise ctx.error("no [clusters.NAME] table: the file names no cluster.", None, None,
                        " Add one, e.g. [clusters.prod] with bootstrap_servers = "
                        "\"kafka-1:9092\".")
    if not isinstance(clusters, Mapping):
        raise ctx.error("clusters must be tables, one [clusters.NAME] per cluster.", None,
                        "clusters")
    out = {name: _cluster(ctx, name, table, base_dir) for name, table in clusters.items()}
    if not out:
        raise ctx.error("no [clusters.NAME] table: the file names no cluster.", None, None)
    return Fleet(out, ctx.source)


def parse_fleet(text: str, *, source: str, base_dir: str) -> Fleet:
    """The fleet a TOML file's text describes. A :class:`UsageError` naming the line or key
    for malformed TOML, an unknown key, a cluster with no store or two, or a bad name."""
    ctx = _Ctx(source, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message has "(at line L, column C)"
        raise UsageError(f"{source}: not valid TOML: {exc}. Fix the file (TOML syntax: "
                         f"https://toml.io).", source=source) from None
    return _fleet(ctx, data, base_dir, strict_top=True)


def fleet_from_mapping(data: Mapping[str, Any], *, source: str, base_dir: str,
                       strict_top: bool = False) -> Fleet:
    """The fleet of ``[clusters.*]`` in an already-parsed mapping (``st.secrets``, where
    other sections sit beside it: only ``clusters`` is read)."""
    return _fleet(_Ctx(source, None), data, base_dir, strict_top=strict_top)


# -- today's single settings ---------------------------------------------------------------
def _section(secrets: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    value = secrets.get(name) if secrets else None
    return value if isinstance(value, Mapping) else {}


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def fleet_of_one(env: Mapping[str, str], secrets: Mapping[str, Any] | None = None, *,
                 base_dir: str | None = None) -> Fleet:
    """Today's single connection (``QUOTA_*`` variables, else ``[kafka]`` / ``[sandbox]`` in
    the dashboard's secrets) as a fleet of one, in the order the sidebar has always picked
    it: env sandbox, env cluster, secrets cluster, secrets sandbox. The cluster is named
    ``default``, unless its label is itself a valid name. An empty fleet when nothing is
    set. Access (``QUOTA_READ_ONLY`` / ``[access]``), metrics, history and audit settings
    ride along."""
    base = base_dir or os.getcwd()
    kafka, sandbox = _section(secrets, "kafka"), _section(secrets, "sandbox")
    env_label = env.get("QUOTA_CONNECTION_LABEL") or None
    conn: dict[str, Any] | None = None
    source = "QUOTA_* settings"
    if env.get("QUOTA_SANDBOX"):
        conn = {"sandbox": _path(env["QUOTA_SANDBOX"], base), "label": env_label,
                "default_label": "Sandbox file"}
    elif env.get("QUOTA_BOOTSTRAP_SERVERS"):
        conn = {"bootstrap_servers": env["QUOTA_BOOTSTRAP_SERVERS"].strip(),
                "command_config": env.get("QUOTA_COMMAND_CONFIG") or None, "label": env_label,
                "default_label": "Kafka cluster (environment)"}
    elif kafka.get("bootstrap_servers"):
        props = kafka.get("properties")
        conn = {"bootstrap_servers": str(kafka["bootstrap_servers"]).strip(),
                "command_config": str(kafka["command_config"])
                if kafka.get("command_config") else None,
                "properties": _flat("", props) if isinstance(props, Mapping) else {},
                "label": str(kafka["label"]) if kafka.get("label") else None,
                "default_label": "Kafka cluster (secrets.toml)"}
        source = "secrets.toml"
    elif sandbox.get("path"):
        conn = {"sandbox": _path(str(sandbox["path"]), base),
                "label": str(sandbox["label"]) if sandbox.get("label") else None,
                "default_label": "Sandbox file"}
        source = "secrets.toml"
    if conn is None:
        return Fleet({}, source)
    given_label = conn.pop("label")
    default_label = conn.pop("default_label")
    name = given_label if given_label and valid_name(given_label) else DEFAULT_NAME
    access, metrics = _section(secrets, "access"), _section(secrets, "metrics")
    read_only = _flag(env["QUOTA_READ_ONLY"]) if env.get("QUOTA_READ_ONLY") else \
        _flag(access.get("read_only", False))
    editors: tuple[str, ...] | None = None
    if env.get("QUOTA_EDITORS"):
        editors = tuple(n.strip() for n in env["QUOTA_EDITORS"].split(",") if n.strip())
    elif isinstance(access.get("editors"), (list, tuple)):
        editors = tuple(str(n) for n in access["editors"])
    raw_metrics = env.get("QUOTA_METRICS") or metrics.get("endpoints") or ()
    if isinstance(raw_metrics, str):
        raw_metrics = raw_metrics.split(",")
    template = env.get("QUOTA_METRICS_TEMPLATE") or metrics.get("template") or None
    history = env.get("QUOTA_HISTORY_DIR") or _section(secrets, "history").get("path")
    audit = env.get("QUOTA_AUDIT_LOG") or _section(secrets, "audit").get("path")
    cluster = ClusterConfig(
        name=name, metrics=tuple(str(m).strip() for m in raw_metrics if str(m).strip()),
        metrics_template=str(template).strip() or None if template else None,
        read_only=read_only, editors=editors, label=given_label or default_label,
        history_dir=str(history) if history else None,
        audit_log=str(audit) if audit else None, source=source, **conn)
    return Fleet({name: cluster}, source)
