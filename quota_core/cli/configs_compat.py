"""``kafka-configs.sh`` compatibility: ConfigCommand's quota command lines, output and errors.

``kafka-client-quotas`` runs in this mode when its command line has a flag that only
``kafka-configs.sh`` knows (:data:`TRIGGERS`: ``--entity-type``, ``--entity-name``,
``--entity-default``, ``--add-config``, ``--delete-config``, ``--client``, ``--user-defaults``,
``--client-defaults``, ``--ip-defaults``, ...). ``--user NAME`` and ``--ip NAME`` alone stay
KIP-546 flags; together with any trigger they are ConfigCommand's shorthands. Examples::

    kafka-client-quotas --bootstrap-server 127.0.0.1:9092 --describe --entity-type users
    kafka-client-quotas --bootstrap-server 127.0.0.1:9092 --alter --user alice --client app \\
        --add-config producer_byte_rate=1048576,request_percentage=50

The rules are Kafka 4.3.1's ``core/src/main/scala/kafka/admin/ConfigCommand.scala`` (jopt-simple
without abbreviations): the same checks in the same order with the same texts and exit codes,
``Quota configs for user-principal 'alice' are producer_byte_rate=1024.0`` (raw names, Java's
``Double.toString``, Java ``HashMap`` order). Deliberately different, each with one clear line:

* where ConfigCommand prints a stack trace (a broker refusal, an unreachable cluster), we print
  its first line and the reason instead; exit 1 as there;
* where it silently does nothing (``--add-config ,``), a note on stderr; exit 0 as there;
* NaN and infinite values are refused (exit 1); ConfigCommand stores NaN;
* SCRAM credentials, topics, brokers, groups, client metrics, ``--bootstrap-controller``:
  not ours (exit 1, use ``kafka-configs.sh``); describe lists no SCRAM credentials;
* ``--sandbox PATH`` may stand in for ``--bootstrap-server``; ``--command-config`` files are
  checked strictly (:mod:`quota_core.backends.kafka_config`);
* ``--alter`` is one of this tool's writers (:func:`quota_core.changes.workflow.apply_changes`): it
  takes the cluster's write lease (waiting up to :data:`LEASE_WAIT_S`, then exit 1 with
  nothing written), refuses if the entity changed since it was read, writes the audit intent
  before sending and reports a read-back that shows another writer's values (exit 1).
"""
from __future__ import annotations

import ipaddress
import math
import os
import re
import socket
from decimal import Decimal
from typing import Callable, Iterable, Sequence, TextIO

from ..alterations import Alteration, Op
from ..changes.audit import AuditLog, default_audit_path, os_user, store_fields
from .output import says_where_audited
from ..backends.base import QuotaBackend

from ..entities import CLIENT_ID, IP, USER, Entity
from ..errors import QuotaError, UnreadableFile
from ..filters import EntityFilter, FilterComponent
from ..backends.files import PROPERTIES_LIMIT, read_bytes_file
from ..backends.kafka_config import load_command_config, parse_properties
from .dialect import TRIGGERS, is_configs_command  # noqa: F401  (part of this module's API)
from .edge import run_command
from .exits import exit_code
from ..java_text import (_COMMA, _EQUALS, _java_trim, _java_split, java_parse_double, java_double,  # moved there
                         _java_hash, _hashmap_order, _properties_order, _scala_set, _scala_buffer)

__all__ = ["TRIGGERS", "is_configs_command", "main", "parse_options", "check_args",
           "parse_configs_to_be_added", "java_double", "java_parse_double", "format_describe",
           "CommandFailed", "Options"]

PROG = "kafka-client-quotas"
#: How long an alter waits for the cluster's write lease (kafka-configs.sh has no --timeout;
#: the backend's own timeout is 30 s too).
LEASE_WAIT_S = 30.0
KAFKA_VERSION = "4.3.1"

_WITH_ARG = {"bootstrap-server", "bootstrap-controller", "command-config", "entity-type",
             "entity-name", "add-config", "add-config-file", "delete-config", "topic", "client",
             "user", "broker", "broker-logger", "ip", "group", "client-metrics", "sandbox",
             "config", "cluster"}
_FLAGS = {"help", "version", "alter", "describe", "all", "entity-default", "client-defaults",
          "user-defaults", "broker-defaults", "ip-defaults"}
_ENTITY_FLAGS = (("topic", "topics"), ("client", "clients"), ("user", "users"),
                 ("broker", "brokers"), ("broker-logger", "broker-loggers"), ("ip", "ips"),
                 ("client-metrics", "client-metrics"), ("group", "groups"))
_DEFAULT_FLAGS = (("client-defaults", "clients"), ("user-defaults", "users"),
                  ("broker-defaults", "brokers"), ("ip-defaults", "ips"))
#: ConfigType.values() then broker-loggers, as ConfigCommand lists them.
_ALLOWED_TYPES = ("topics", "clients", "users", "brokers", "ips", "client-metrics", "groups",
                  "broker-loggers")
_QUOTA_TYPES = {"users": USER, "clients": CLIENT_ID, "ips": IP}
_TYPE_WORDS = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
_CLIENT_KEYS = {"producer_byte_rate", "consumer_byte_rate", "request_percentage",
                "controller_mutation_rate"}
_IP_KEYS = {"connection_creation_rate"}
_SCRAM_KEYS = {"SCRAM-SHA-256", "SCRAM-SHA-512"}


class CommandFailed(Exception):
    """ConfigCommand would stop here with exit 1: ``message`` is its stderr text.

    ``usage``: it also prints its help; ``trace``: it prints a stack trace, for which we
    print its first line and ``message`` as the one clear line."""

    def __init__(self, message: str, usage: bool = False, trace: bool = False) -> None:
        super().__init__(message)
        self.message, self.usage, self.trace = message, usage, trace


class _UnreadableFile(CommandFailed, UnreadableFile):
    """A file the user named (``--add-config-file``) that cannot be read. ConfigCommand
    prints a stack trace (``java.nio.file.NoSuchFileException``) and exits 1: so do we, with
    one clear line (docs/interfaces.md: ``configs`` exits as ConfigCommand for every error)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, trace=True)


def help_text() -> str:
    """ConfigCommand's option table, as ``kafka-configs.sh --help`` prints it after its first
    line (Kafka 4.3.1, jopt-simple's layout, byte for byte: ``configs_help.txt`` is its
    stderr)."""
    from importlib.resources import files

    return files(__package__).joinpath("configs_help.txt").read_text(encoding="utf-8")


#: ``password=...`` inside a SCRAM value (``SCRAM-SHA-256=[password=secret]``): hidden when
#: the command line is echoed (ConfigCommand echoes it as typed; a secret is never printed).
_PASSWORD = re.compile(r"(?i)(password=)[^,\]]*")


def _shown(argv: Sequence[str]) -> str:
    return " ".join(_PASSWORD.sub(r"\1[hidden]", a) for a in argv)


def _fail(message: str) -> CommandFailed:
    return CommandFailed(message)


def _ours(message: str) -> CommandFailed:
    """Where we deliberately stop (or ConfigCommand would print a stack trace)."""
    return CommandFailed(message, trace=True)


# -- the command line (jopt-simple) ---------------------------------------------------------
class Options:
    """What jopt-simple detected: options in order (``specs``) and their values."""

    def __init__(self) -> None:
        self.specs: list[str] = []
        self.values: dict[str, list[str]] = {}

    def add(self, name: str, value: str | None) -> None:
        parts: list[str | None] = [value]
        if name == "delete-config" and value is not None:  # withValuesSeparatedBy(','):
            parts = [t for t in value.split(",") if t] or [value]  # StringTokenizer
        for part in parts:
            self.specs.append(name)
            found = self.values.setdefault(name, [])
            if part is not None:
                found.append(part)

    def has(self, name: str) -> bool:
        return name in self.values

    def value_of(self, name: str) -> str | None:
        found = self.values.get(name, [])
        if len(found) > 1:
            raise _fail(f"Found multiple arguments for option {name}, but you asked for only one")
        return found[0] if found else None

    def values_of(self, name: str) -> list[str]:
        return list(self.values.get(name, []))


def parse_options(argv: Sequence[str]) -> Options:
    """jopt-simple's parse: ``--opt value``, ``--opt=value``, ``-opt``; values may start with
    ``-``; other words are ignored; ``--`` ends the options."""
    opts, i, known = Options(), 0, _WITH_ARG | _FLAGS
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            break
        if token.startswith("--"):
            key, eq, value = token[2:].partition("=")
        elif token.startswith("-") and token != "-":
            key, eq, value = token[1:].partition("=")
            if key not in known:  # a cluster of one-letter options, and we have none
                raise _fail(f"{token[1]} is not a recognized option")
        else:
            continue
        if key not in known:
            raise _fail(f"{key} is not a recognized option")
        if key not in _WITH_ARG:
            opts.add(key, None)
            continue
        if not eq:
            if i >= len(argv):
                raise _fail(f"Option {key} requires an argument")
            value = argv[i]
            i += 1
        opts.add(key, value)
    return opts


def entity_types(opts: Options) -> list[str]:
    return opts.values_of("entity-type") + [t for flag, t in _ENTITY_FLAGS + _DEFAULT_FLAGS
                                            if opts.has(flag)]


def entity_names(opts: Options) -> list[str]:
    """Names in ConfigCommand's order; ``""`` is the default entity."""
    named = iter(opts.values_of("entity-name"))
    names = [next(named) if spec == "entity-name" else "" for spec in opts.specs
             if spec in ("entity-name", "entity-default")]
    names += [opts.value_of(flag) or "" for flag, _ in _ENTITY_FLAGS if opts.has(flag)]
    return names + ["" for flag, _ in _DEFAULT_FLAGS if opts.has(flag)]


def _java_int(text: str) -> bool:
    return bool(re.fullmatch(r"[+-]?\d+", text)) and -2**31 <= int(text) < 2**31


def _ip_entity_ok(name: str) -> bool:
    """InetAddress.getByName: an address (``[v6]`` too) or a resolvable host name."""
    host = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError, ValueError):
        return False


def check_args(opts: Options, resolvable: Callable[[str], bool] = _ip_entity_ok) -> None:
    """ConfigCommandOptions.checkArgs, in its order."""
    if sum(opts.has(a) for a in ("alter", "describe")) != 1:
        raise CommandFailed("Command must include exactly one action: --describe, --alter",
                            usage=True)
    if opts.has("describe"):
        for other in ("alter", "add-config", "delete-config"):
            if opts.has(other):
                raise CommandFailed(f'Option "[describe]" can\'t be used with option '
                                    f'"[{other}]"', usage=True)
    types = entity_types(opts)
    extra = list(types)
    for t in dict.fromkeys(types):
        extra.remove(t)
    if extra:
        raise _fail(f"Duplicate entity type(s) specified: {','.join(extra)}")
    if not (opts.has("bootstrap-server") or opts.has("bootstrap-controller")
            or opts.has("sandbox") or opts.has("cluster") or opts.has("config")):
        raise _fail("Either --bootstrap-server or --bootstrap-controller must be specified.")
    for t in types:
        if t not in _ALLOWED_TYPES:
            raise _fail(f"Invalid entity type {t}, the entity type must be one of "
                        f"{', '.join(_ALLOWED_TYPES)} with a --bootstrap-server or "
                        f"--bootstrap-controller argument")
    if not types:
        raise _fail("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise _fail("Only 'users' and 'clients' entity types may be specified together")
    if (any(opts.has(o) for o in ("entity-name", "entity-type", "entity-default"))
            and any(opts.has(f) for f, _ in _ENTITY_FLAGS + _DEFAULT_FLAGS)):
        raise _fail("--entity-{type,name,default} should not be used in conjunction with "
                    "specific entity flags")
    names = entity_names(opts)
    has_name, has_default = any(names), "" in names
    if opts.has("bootstrap-server") and opts.has("bootstrap-controller"):
        raise _fail("Only one of --bootstrap-server or --bootstrap-controller can be specified")
    if has_name and ("brokers" in types or "broker-loggers" in types):
        for option in ("entity-name", "broker", "broker-logger"):
            if opts.has(option) and not _java_int(value := opts.value_of(option) or ""):
                raise _fail(f"The entity name for {types[0]} must be a valid integer broker "
                            f"id, but it is: {value}")
    if has_name and "ips" in types:
        for option in ("entity-name", "ip"):
            if opts.has(option) and not resolvable(value := opts.value_of(option) or ""):
                raise _fail(f"The entity name for {types[0]} must be a valid IP or resolvable "
                            f"host, but it is: {value}")
    quota_or_broker = any(t in types for t in ("users", "clients", "brokers", "ips"))
    if opts.has("describe"):
        if not quota_or_broker and opts.has("entity-default"):
            raise _fail(f"--entity-default must not be specified with --describe of "
                        f"{','.join(types)}")
        if "broker-loggers" in types and not has_name:
            raise _fail(f"An entity name must be specified with --describe of {','.join(types)}")
    if opts.has("alter"):
        if quota_or_broker and not has_name and not has_default:
            raise _fail("An entity-name or default entity must be specified with --alter of "
                        "users, clients, brokers or ips")
        if not quota_or_broker and not has_name:
            raise _fail(f"An entity name must be specified with --alter of {','.join(types)}")
        if opts.has("add-config") and opts.has("add-config-file"):
            raise _fail("Only one of --add-config or --add-config-file must be specified")
        if not any(opts.has(o) for o in ("add-config", "add-config-file", "delete-config")):
            raise _fail("At least one of --add-config, --add-config-file, or --delete-config "
                        "must be specified with --alter")


# -- --add-config / --delete-config ---------------------------------------------------------
def parse_configs_to_be_added(opts: Options) -> dict[str, str]:
    """ConfigCommand.parseConfigsToBeAdded, in the order its Scala Map iterates them."""
    props: dict[str, str] = {}
    if opts.has("add-config-file"):
        path = opts.value_of("add-config-file") or ""
        try:  # bounded, and never a FIFO or /dev/zero (inputs.py)
            text = read_bytes_file(path, "--add-config-file", PROPERTIES_LIMIT).decode(
                "latin-1")  # Properties.load(InputStream)
        except QuotaError as exc:  # ConfigCommand: a stack trace, exit 1
            raise _UnreadableFile(f"cannot read --add-config-file {path}: "
                                  f"{exc.context['reason']}.") from exc
        props.update(parse_properties(text))
    if opts.has("add-config"):
        pairs = [_java_split(_EQUALS, item, keep_trailing=True)
                 for item in _java_split(_COMMA, opts.value_of("add-config") or "", False)]
        if not all(len(p) == 2 for p in pairs):
            raise _fail('requirement failed: Invalid entity config: all configs to be added must be in the format '
                        '"key=val" or  "key=[val1,val2]" to group values which contain commas.')
        for key, value in pairs:
            props[_java_trim(key)] = _java_trim(value.replace("[", "").replace("]", ""))
    ordered = _properties_order(list(props))
    for key in ordered:
        if not re.fullmatch(r"[$a-zA-Z0-9._-]*", key):
            raise _fail(f"Invalid character found for config key: {key}")
    return {k: props[k] for k in ordered}


# -- describe --------------------------------------------------------------------------------
def _entity_text(entity: Entity) -> str:
    return ", ".join(f"{_TYPE_WORDS[t]} '{n}'" if n is not None else f"the default {_TYPE_WORDS[t]}"
                     for t, n in entity.parts)


def format_describe(quotas: dict[Entity, dict[str, float]]) -> str:
    """ConfigCommand's describe lines, in the order its HashMaps iterate."""
    entities = list(quotas)
    hashes = [(31 + sum(_java_hash(t) ^ _java_hash(n) for t, n in e.parts)) & 0xFFFFFFFF
              for e in entities]
    lines = []
    for i in _hashmap_order(hashes, len(entities)):
        values = quotas[entities[i]]
        keys = list(values)
        order = _hashmap_order([_java_hash(k) for k in keys], len(keys))
        entries = ", ".join(f"{keys[j]}={java_double(values[keys[j]])}" for j in order)
        lines.append(f"Quota configs for {_entity_text(entities[i])} are {entries}\n")
    return "".join(lines)


def _components(types: list[str], names: list[str]) -> list[FilterComponent]:
    if len(names) > len(types):
        raise _fail("More entity names specified than entity types")
    components = []
    for i, t in enumerate(types):
        kind = _QUOTA_TYPES[t]
        if i >= len(names):
            components.append(FilterComponent.any(kind))
        elif names[i] == "":
            components.append(FilterComponent.default(kind))
        else:
            components.append(FilterComponent.exact(kind, names[i]))
    return components


# -- alter -----------------------------------------------------------------------------------
def _check_alter_keys(types: list[str], names: list[str], adds: dict[str, str],
                      deletes: list[str]) -> None:
    head = types[0]
    if head == "ips":
        unknown = [k for k in dict.fromkeys([*adds, *deletes]) if k not in _IP_KEYS]
        if unknown:
            raise _fail(f"Only connection quota configs can be added for 'ips' using "
                        f"--bootstrap-server. Unexpected config names: {','.join(unknown)}")
        return
    unknown_add = [k for k in adds if k not in _SCRAM_KEYS | _CLIENT_KEYS]
    scram_add = [k for k in adds if k in _SCRAM_KEYS]
    unknown_del = [k for k in deletes if k not in _SCRAM_KEYS | _CLIENT_KEYS]
    scram_del = [k for k in deletes if k in _SCRAM_KEYS]
    if head == "clients" or len(types) == 2:
        if unknown_add or scram_add:
            raise _fail(f"Only quota configs can be added for 'clients' using --bootstrap-server. "
                        f"Unexpected config names: {_scala_set(unknown_add + scram_add)}")
        if unknown_del or scram_del:
            raise _fail(f"Only quota configs can be deleted for 'clients' using "
                        f"--bootstrap-server. Unexpected config names: "
                        f"{_scala_buffer(unknown_del + scram_del)}")
        return
    if unknown_add:
        raise _fail(f"Only quota and SCRAM credential configs can be added for 'users' using "
                    f"--bootstrap-server. Unexpected config names: {_scala_set(unknown_add)}")
    if unknown_del:
        raise _fail(f"Only quota and SCRAM credential configs can be deleted for 'users' using "
                    f"--bootstrap-server. Unexpected config names: {_scala_buffer(unknown_del)}")
    if scram_add or scram_del:
        if "" in names:
            raise _fail("The use of --entity-default or --user-defaults is not allowed with User "
                        "SCRAM Credentials using --bootstrap-server.")
        if any(k in _CLIENT_KEYS for k in [*adds, *deletes]):
            raise _fail("Cannot alter both quota and SCRAM credential configs simultaneously for "
                        "'users' using --bootstrap-server.")


def _alter(backend: Callable[[], QuotaBackend], opts: Options, types: list[str],
           names: list[str], err: TextIO) -> None:
    adds = parse_configs_to_be_added(opts)
    deletes = [_java_trim(k) for k in opts.values_of("delete-config")]
    _check_alter_keys(types, names, adds, deletes)
    if types[0] != "ips" and not any(k in _CLIENT_KEYS for k in [*adds, *deletes]):
        if len(names) != 1:  # ConfigCommand: IllegalStateException with a stack trace
            raise _ours("nothing to change: the alteration names no quota key "
                        "(--add-config/--delete-config are empty).")
        if adds or deletes:
            raise _ours(f"SCRAM credentials ({', '.join([*adds, *deletes])}) are not managed "
                        f"by {PROG}: use kafka-configs.sh or kafka-storage.sh for them.")
        err.write(f"{PROG}: note: nothing was changed: --add-config/--delete-config name no "
                  f"key (kafka-configs.sh reports this as done).\n")
        return
    from ..changes.workflow import refuse_read_only

    refuse_read_only(_target(opts))  # a read_only cluster of the fleet: before connecting
    store = backend()
    components = _components(types, names)
    old = next(iter(store.describe(EntityFilter.contains_only(components)).values()), {})
    invalid = [k for k in deletes if k not in old]
    if invalid:
        raise _fail(f"Invalid config(s): {','.join(invalid)}")
    ops = []
    for key, text in adds.items():
        try:
            value = java_parse_double(text)
        except ValueError:
            raise _fail(f"Cannot parse quota configuration value for {key}: {text}") from None
        if not math.isfinite(value):
            raise _ours(f"{key}={text} is not a quota (kafka-configs.sh would store "
                        f"{java_double(value)}). Give a number greater than 0; to remove a "
                        f"quota, use --delete-config {key}.")
        ops.append(Op.set(key, value))
    ops += [Op.remove(k) for k in deletes]
    entity = Entity.from_pairs((_QUOTA_TYPES[t], n or None) for t, n in zip(types, names))
    alteration = Alteration(entity, tuple(ops))
    # Every writer goes through the one guarded workflow (issue 16), this mode too: the
    # cluster's write lease around re-read, alter and read-back, and the audit intent written
    # (fsynced) before anything is sent. kafka-configs.sh has no --actor: the OS user.
    from ..changes.workflow import apply_changes, conflict_message  # describe starts faster without it

    target = _target(opts)
    audit = AuditLog((target and target.audit_log) or default_audit_path(os.environ))
    with says_where_audited(audit, err):  # at a terminal only: scripts see ConfigCommand's text
        done = apply_changes(store, [alteration], {entity: old}, actor=os_user(),
                             cluster=store_fields(store), audit=audit, target=target,
                             extra={"via": "kafka-configs.sh command line"},
                             lease_wait_s=LEASE_WAIT_S, validate=False)
    for result in done.refused:
        raise _ours(f"the broker refused the change of {_entity_text(entity)}: {result.error}")
    if done.conflicts:
        raise _ours(f"conflict: {conflict_message(done.conflicts)}")
    if done.audit_error is not None:
        raise _ours(f"the change of {_entity_text(entity)} was applied, but the audit log "
                    f"could not be written: {done.audit_error}")


# -- the fleet (issue 29): --config PATH / --cluster NAME --------------------------------------
def _where(opts: Options):
    """The store flags as the fleet's :func:`select_cluster` reads them, filled in from the
    cluster ``--cluster NAME`` (or ``--config``) names."""
    import argparse

    from ..backends.fleet_config import select_cluster

    ns = argparse.Namespace(config=opts.value_of("config"), cluster=opts.value_of("cluster"),
                            bootstrap_server=opts.value_of("bootstrap-server"),
                            sandbox=opts.value_of("sandbox"),
                            command_config=opts.value_of("command-config"), timeout=30.0)
    select_cluster(ns)
    return ns


def _target(opts: Options):
    """The cluster of the fleet this command writes to, or None."""
    if not (opts.has("cluster") or opts.has("config")):
        return None
    return getattr(_where(opts), "fleet_cluster", None)


def _open(opts: Options) -> QuotaBackend:
    from ..backends.open import open_backend_from

    return open_backend_from(_where(opts))


# -- the command -----------------------------------------------------------------------------
def _run(opts: Options, backend: Callable[[], QuotaBackend], out: TextIO, err: TextIO) -> None:
    check_args(opts)
    if opts.has("command-config"):
        load_command_config(opts.value_of("command-config") or "")
    if opts.has("bootstrap-controller"):
        raise _ours("--bootstrap-controller is not supported: give --bootstrap-server "
                    "HOST:PORT (quota requests go to brokers).")
    types, names = entity_types(opts), entity_names(opts)
    if opts.has("alter") and len(types) != len(names):
        raise _fail("An entity name must be specified for every entity type")
    if types[0] not in _QUOTA_TYPES:
        raise _ours(f"{PROG} handles client quotas only (--entity-type users, clients or ips); "
                    f"use kafka-configs.sh for {types[0]}.")
    if opts.has("alter"):
        _alter(backend, opts, types, names, err)
        if names[0]:
            out.write(f"Completed updating config for {types[0][:-1]} {names[0]}.\n")
        else:
            out.write(f"Completed updating default config for {types[0]} in the cluster.\n")
        return
    components = _components(types, names)
    out.write(format_describe(backend().describe(EntityFilter.contains_only(components))))


def main(argv: Sequence[str], out: TextIO, err: TextIO,
         backend_factory: Callable[[Options], QuotaBackend] | None = None) -> int:
    """Run a kafka-configs.sh command line; return its exit status (0, or 1 as ConfigCommand).

    Every error, ours or the backend's, becomes stderr text here."""
    argv = list(argv)
    opened: list[QuotaBackend] = []
    opts: Options | None = None

    def backend() -> QuotaBackend:
        if not opened:
            factory = backend_factory or _open
            opened.append(factory(opts))
        return opened[0]

    def run() -> int:
        nonlocal opts
        try:
            opts = parse_options(argv)
            if not argv or opts.has("help"):  # kafka-configs.sh --help: its help, exit 1
                raise CommandFailed("This tool helps to manipulate and describe entity config "
                                    "for a topic, client, user, broker, ip, client-metrics or "
                                    "group", usage=True)
            if opts.has("version"):
                out.write(f"{KAFKA_VERSION}\n")  # the Kafka version whose kafka-configs.sh this is
                return 0
            _run(opts, backend, out, err)
            return 0
        except CommandFailed as exc:  # ConfigCommand's own failures, in its words
            if exc.trace:
                err.write(f"Error while executing config command with args '{_shown(argv)}'\n")
                err.write(f"{PROG}: {exc.message}\n")
            else:  # CommandLineUtils.printUsageAndExit: the message, then the whole help
                err.write(f"{exc.message}\n" + (help_text() if exc.usage else ""))
            return exit_code("configs", exc)
        finally:
            for store in opened:
                store.close()

    # the backend's errors: ConfigCommand prints a stack trace; we print its first line and
    # the one clear line
    return run_command("configs", run, err, lambda exc: (
        f"Error while executing config command with args '{_shown(argv)}'\n{PROG}: {exc}\n"))
