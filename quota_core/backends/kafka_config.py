"""Kafka client properties (``--command-config``) for the Kafka backend.

Reads the Java ``.properties`` files that ``kafka-configs.sh --command-config`` takes and turns
the settings that matter for an admin connection into kafka-python keyword arguments.
Pure: no network, no kafka-python import.

What we do with each property:

* used: ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` (username and password
  of the Scram/Plain login module), ``client.id``, ``request.timeout.ms``, ``bootstrap.servers``
  (only when no bootstrap address is given otherwise), ``ssl.endpoint.identification.algorithm``
  and the PEM files: ``ssl.ca.location`` / ``ssl.certificate.location`` / ``ssl.key.location`` /
  ``ssl.key.password`` (librdkafka's names), or the Java keys with ``ssl.truststore.type=PEM`` /
  ``ssl.keystore.type=PEM``.
* refused with an explanation: JKS / PKCS12 trust and key stores (Python's ``ssl`` cannot read
  them; the message says how to export PEM), SASL mechanisms other than PLAIN and SCRAM.
* accepted but ignored (listed in :attr:`KafkaClientConfig.ignored`): Java client tuning keys
  that do not change how an admin connection authenticates (``retries``, ``ssl.protocol``...).
* **unknown keys are an error** (:class:`~quota_core.errors.ConfigError` listing every one of
  them): a typo such as ``sasl.mechansim`` would otherwise connect without authentication and
  fail far from its cause.

Secrets (passwords, the JAAS text) never appear in a message or a ``repr``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from quota_core.errors import ConfigError, InvalidClientConfig

__all__ = [
    "KafkaClientConfig",
    "parse_properties",
    "property_lines",
    "parse_jaas_config",
    "load_command_config",
    "client_config",
    "SECURITY_PROTOCOLS",
    "SASL_MECHANISMS",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_USED = {
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "client.id", "request.timeout.ms",
    # librdkafka's spelling of the credentials, which Python users often have at hand.
    "sasl.username", "sasl.password",
    "bootstrap.servers", "ssl.endpoint.identification.algorithm",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.crl.location",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password",
}
#: Java client settings that do not affect an admin connection's identity or security.
_IGNORED = {
    "retries", "retry.backoff.ms", "retry.backoff.max.ms", "default.api.timeout.ms",
    "connections.max.idle.ms", "metadata.max.age.ms", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "receive.buffer.bytes", "send.buffer.bytes",
    "client.dns.lookup", "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
    "ssl.provider", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms",
    "sasl.client.callback.handler.class", "sasl.login.callback.handler.class",
    "sasl.login.class", "security.providers", "metrics.sample.window.ms",
    "metrics.num.samples", "metrics.recording.level", "metric.reporters",
    "auto.include.jmx.reporter", "enable.metrics.push",
}
_SECRET_KEYS = {"sasl.jaas.config", "sasl.password", "ssl.key.password", "ssl.truststore.password",
                "ssl.keystore.password"}


# -- the .properties format ---------------------------------------------------------------
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Java's LineReader: drop comments and blank lines, join backslash continuations. Each
    logical line comes with the number of the physical line it starts on (1 is the first)."""
    lines, current, continuing, start = [], "", False, 0
    for number, raw in enumerate(re.split(r"\r\n|\r|\n", text), 1):  # Java breaks lines here only
        line = raw.lstrip(" \t\f")
        if not continuing and (not line or line[0] in "#!"):
            continue
        if not continuing:
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes escapes the line break
            current += line[:-1]
            continuing = True
            continue
        current += line
        lines.append((start, current))
        current, continuing = "", False
    if continuing:
        lines.append((start, current))
    return lines


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``key=value``, ``key: value`` or ``key value``,
    ``#``/``!`` comments, backslash continuations and escapes (``\\t``, ``\\uXXXX``...).

    A later duplicate key wins, as in Java.
    """
    return {key: value for _line, key, value in property_lines(text)}


def property_lines(text: str) -> list[tuple[int, str, str]]:
    """:func:`parse_properties` as ``(line number, key, value)`` in file order, duplicates
    kept: for messages that name a line instead of quoting it."""
    out = []
    for number, line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:  # the key ends at the first unescaped '=', ':' or whitespace
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=: \t\f":
                break
            i += 1
        key_end = min(i, n)
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        out.append((number, _unescape(line[:key_end]), _unescape(line[i:])))
    return out


#: What a Java client property name looks like (``sasl.mechanism``, ``ssl.key.password``):
#: lower-case words joined by dots. Only such a key is ever quoted in a message; any other
#: "key" may be a line of a value split over lines (a password), so it is named by its line.
_PROPERTY_NAME = re.compile(r"[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+", re.ASCII)


def _plausible_key(key: str) -> bool:
    return len(key) <= 100 and bool(_PROPERTY_NAME.fullmatch(key))


# -- sasl.jaas.config -----------------------------------------------------------------------
_JAAS_TOKEN = re.compile(
    r'\s*(?:(?P<word>[^\s=;"]+)|(?P<eq>=)|(?P<semi>;)|"(?P<quoted>(?:[^"\\]|\\.)*)")', re.S)


def parse_jaas_config(text: str) -> tuple[str, str, dict[str, str]]:
    """``(login module, control flag, options)`` of a one-module ``sasl.jaas.config``:
    ``Module required key="value" key2=value2;``.

    Raises :class:`ConfigError` without quoting the text (it holds a password)."""
    tokens: list[tuple[str, str]] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise _jaas_error(f"unexpected character at position {pos}")
        pos = m.end()
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value, flags=re.S)
        tokens.append((kind, value))
        if kind == "semi":
            break
    if text[pos:].strip():
        raise _jaas_error("only one login module is supported (text after the first ';')")
    if len(tokens) < 2 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise _jaas_error("expected 'LoginModuleClass required key=\"value\" ...;'")
    module, flag = tokens[0][1], tokens[1][1]
    if flag not in ("required", "requisite", "sufficient", "optional"):
        raise _jaas_error("the control flag after the login module must be 'required'")
    options: dict[str, str] = {}
    rest = tokens[2:]
    if not rest or rest[-1][0] != "semi":
        raise _jaas_error("it must end with ';'")
    rest = rest[:-1]
    if len(rest) % 3:
        raise _jaas_error("expected key=value pairs after the control flag")
    for i in range(0, len(rest), 3):
        (k_kind, key), (e_kind, _), (v_kind, value) = rest[i:i + 3]
        if k_kind != "word" or e_kind != "eq" or v_kind not in ("word", "quoted"):
            raise _jaas_error("expected key=value pairs after the control flag")
        options[key] = value
    return module, flag, options


def _jaas_error(detail: str) -> ConfigError:
    return InvalidClientConfig(f"sasl.jaas.config cannot be parsed: {detail}. (Its text is not shown "
                       f"because it contains the password.)", key="sasl.jaas.config")


# -- the result ---------------------------------------------------------------------------
@dataclass(frozen=True)
class KafkaClientConfig:
    """How to connect and authenticate; secrets are kept out of ``repr``."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_crlfile: str | None = None
    ssl_check_hostname: bool = True
    client_id: str | None = None
    request_timeout_ms: int | None = None
    bootstrap_servers: str | None = None
    #: Where the settings came from, for messages: a file path or "the client properties".
    source: str = "the client properties"
    #: Properties accepted but without effect here (Java tuning keys, unused stores).
    ignored: tuple[str, ...] = ()

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret value, so logs and messages can be checked or redacted."""
        return tuple(s for s in (self.password, self.ssl_password) if s)

    def principal(self) -> str | None:
        """The user name the broker will see, when we know it (SASL, or ANONYMOUS)."""
        if self.uses_sasl:
            return self.username
        return None if self.uses_ssl else "ANONYMOUS"

    def kafka_python_kwargs(self) -> dict[str, object]:
        """Keyword arguments for kafka-python's connection manager."""
        kw: dict[str, object] = {"security_protocol": self.security_protocol}
        if self.client_id:
            kw["client_id"] = self.client_id
        if self.uses_sasl:
            kw.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.username,
                      sasl_plain_password=self.password)
        if self.uses_ssl:
            kw.update(ssl_cafile=self.ssl_cafile, ssl_certfile=self.ssl_certfile,
                      ssl_keyfile=self.ssl_keyfile, ssl_password=self.ssl_password,
                      ssl_crlfile=self.ssl_crlfile, ssl_check_hostname=self.ssl_check_hostname)
        return kw

    def librdkafka_config(self) -> dict[str, object]:
        """The same settings for a confluent-kafka (librdkafka) client."""
        conf: dict[str, object] = {"security.protocol": self.security_protocol.lower()}
        if self.client_id:
            conf["client.id"] = self.client_id
        if self.uses_sasl:
            conf.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                         "sasl.password": self.password})
        if self.uses_ssl:
            for key, value in (("ssl.ca.location", self.ssl_cafile),
                               ("ssl.certificate.location", self.ssl_certfile),
                               ("ssl.key.location", self.ssl_keyfile),
                               ("ssl.key.password", self.ssl_password),
                               ("ssl.crl.location", self.ssl_crlfile)):
                if value:
                    conf[key] = value
            if not self.ssl_check_hostname:
                conf["ssl.endpoint.identification.algorithm"] = "none"
        return conf

    def __repr__(self) -> str:
        who = f", username={self.username!r}" if self.username else ""
        mech = f", sasl_mechanism={self.sasl_mechanism!r}" if self.sasl_mechanism else ""
        return (f"KafkaClientConfig(security_protocol={self.security_protocol!r}{mech}{who}, "
                f"source={self.source!r})")


def _require(choice: str, allowed: tuple[str, ...], key: str) -> str:
    if choice not in allowed:
        raise InvalidClientConfig(f"{key}={choice} is not supported: use one of {', '.join(allowed)}.",
                          key=key)
    return choice


def _store_error(kind: str, key: str, store_type: str, pem_keys: str) -> ConfigError:
    export = ("keytool -exportcert -rfc -alias <alias> -keystore <file> -file ca.pem"
              if kind == "truststore" else
              "openssl pkcs12 -in <file.p12> -nodes -out client.pem (after keytool -importkeystore "
              "-srckeystore <file.jks> -destkeystore <file.p12> -deststoretype PKCS12 for JKS)")
    return InvalidClientConfig(
        f"{key} is a {store_type} {kind}, which Python cannot read. Export it to PEM ({export}) "
        f"and set {pem_keys} instead (or ssl.{kind}.type=PEM with a PEM file).", key=key)


def _lines_text(numbers: list[int]) -> str:
    words = [str(n) for n in sorted(set(numbers))]
    joined = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
    return f"line{'s' if len(words) > 1 else ''} {joined}"


def _unknown_error(props: Mapping[str, str], unknown: list[str], source: str,
                   lines: Mapping[str, int]) -> ConfigError:
    """Unknown keys, named only when they look like property names; any other "key" is named
    by its line (a value split over lines without ``\\`` makes its next line, maybe a
    password, a key of its own: its text is never shown)."""
    shown = [k for k in unknown if _plausible_key(k)]
    hidden = [k for k in unknown if not _plausible_key(k)]
    parts = []
    if shown:
        names = ", ".join(f"{k} (line {lines[k]})" if k in lines else k for k in shown)
        parts.append(f"Unknown Kafka client propert{'y' if len(shown) == 1 else 'ies'} (from "
                     f"{source}): {names}.")
    if hidden:
        where = (_lines_text([lines[k] for k in hidden]) if all(k in lines for k in hidden)
                 else f"{len(hidden)} key{'s' if len(hidden) > 1 else ''}")
        split = ""
        jaas = props.get("sasl.jaas.config")
        if jaas is not None and not jaas.rstrip().endswith(";"):
            at = f" (line {lines['sasl.jaas.config']})" if "sasl.jaas.config" in lines else ""
            split = (f" sasl.jaas.config{at} does not end with ';': if its value goes on over "
                     f"the next lines, end each line but the last with \\.")
        what = ("is not a Kafka client property" if len(hidden) == 1 else
                "are not Kafka client properties")
        parts.append(f"In {source}, {where} {what} (the text is not shown: it may hold a "
                     f"secret).{split}")
    parts.append("Supported: security.protocol, sasl.mechanism, sasl.jaas.config (or "
                 "sasl.username + sasl.password), client.id, request.timeout.ms, "
                 "ssl.ca.location, ssl.certificate.location, ssl.key.location, "
                 "ssl.key.password, ssl.endpoint.identification.algorithm (and Java's "
                 "ssl.truststore.*/ssl.keystore.* with type PEM). Fix the spelling or remove "
                 "them.")
    return InvalidClientConfig(" ".join(parts), unknown=shown, source=source,
                       lines=sorted(lines[k] for k in hidden if k in lines))


def client_config(properties: Mapping[str, str] | None,
                  source: str = "the client properties",
                  lines: Mapping[str, int] | None = None) -> KafkaClientConfig:
    """Check client properties and turn them into a :class:`KafkaClientConfig`.

    Raises :class:`ConfigError` for unknown keys (all of them listed), unsupported choices,
    a JAAS config we cannot use, or Java key stores without a PEM alternative. ``lines``
    (key -> line number, from a file) lets a message name a line instead of quoting a key
    that may be a secret."""
    props = {str(k).strip(): str(v).strip() for k, v in (properties or {}).items()}
    unknown = sorted(k for k in props if k not in _USED and k not in _IGNORED)
    if unknown:
        raise _unknown_error(props, unknown, source, lines or {})
    ignored = [k for k in props if k in _IGNORED]
    protocol = _require(props.get("security.protocol", "PLAINTEXT").upper(),
                        SECURITY_PROTOCOLS, "security.protocol")
    sasl_keys = [k for k in ("sasl.mechanism", "sasl.jaas.config", "sasl.username",
                             "sasl.password") if k in props]
    mechanism = username = password = None
    if protocol.startswith("SASL_"):
        if "sasl.mechanism" not in props:
            raise InvalidClientConfig(
                f"security.protocol={protocol} but sasl.mechanism is not set (Java's default, "
                f"GSSAPI/Kerberos, is not supported here): set sasl.mechanism=SCRAM-SHA-256, "
                f"SCRAM-SHA-512 or PLAIN in {source}.", key="sasl.mechanism")
        mechanism = _require(props["sasl.mechanism"].upper(), SASL_MECHANISMS, "sasl.mechanism")
        plain_keys = [k for k in ("sasl.username", "sasl.password") if k in props]
        if plain_keys and "sasl.jaas.config" in props:
            raise InvalidClientConfig(
                f"{source} gives both sasl.jaas.config and {' and '.join(plain_keys)}: keep one "
                f"way of giving the credentials.", key="sasl.jaas.config")
        if plain_keys:
            if len(plain_keys) < 2:
                missing = ({"sasl.username", "sasl.password"} - set(plain_keys)).pop()
                raise InvalidClientConfig(f"{plain_keys[0]} is set but {missing} is not, in {source}.",
                                  key=missing)
            options = {"username": props["sasl.username"], "password": props["sasl.password"]}
            module = _LOGIN_MODULES[mechanism]
        elif "sasl.jaas.config" not in props:
            raise InvalidClientConfig(
                f"security.protocol={protocol} needs sasl.jaas.config in {source}, e.g. "
                f'sasl.jaas.config={_LOGIN_MODULES[mechanism]} required username="alice" '
                f'password="..."; (or sasl.username and sasl.password)', key="sasl.jaas.config")
        else:
            module, _flag, options = parse_jaas_config(props["sasl.jaas.config"])
        if module != _LOGIN_MODULES[mechanism]:
            raise InvalidClientConfig(
                f"sasl.jaas.config uses the login module {module}, but sasl.mechanism="
                f"{mechanism} needs {_LOGIN_MODULES[mechanism]}.", key="sasl.jaas.config")
        username, password = options.get("username"), options.get("password")
        missing = [k for k, v in (("username", username), ("password", password)) if not v]
        if missing:
            missing = " and ".join(missing)
            raise InvalidClientConfig(f"sasl.jaas.config has no {missing}: give username=\"...\" "
                              f"password=\"...\" in {source}.", key="sasl.jaas.config")
    elif sasl_keys:
        raise InvalidClientConfig(
            f"{' and '.join(sasl_keys)} {'is' if len(sasl_keys) == 1 else 'are'} set but "
            f"security.protocol={protocol}, so no SASL authentication would happen: set "
            f"security.protocol=SASL_PLAINTEXT (or SASL_SSL) in {source}.",
            key="security.protocol")

    ssl_kw: dict[str, object] = {}
    if protocol in ("SSL", "SASL_SSL"):
        cafile = props.get("ssl.ca.location")
        if "ssl.truststore.location" in props and not cafile:
            store_type = props.get("ssl.truststore.type", "JKS").upper()
            if store_type != "PEM":
                raise _store_error("truststore", "ssl.truststore.location", store_type,
                                   "ssl.ca.location=ca.pem")
            cafile = props["ssl.truststore.location"]
        elif "ssl.truststore.location" in props:
            ignored.append("ssl.truststore.location")
        certfile, keyfile = props.get("ssl.certificate.location"), props.get("ssl.key.location")
        if "ssl.keystore.location" in props and not certfile:
            store_type = props.get("ssl.keystore.type", "JKS").upper()
            if store_type != "PEM":
                raise _store_error("keystore", "ssl.keystore.location", store_type,
                                   "ssl.certificate.location and ssl.key.location")
            certfile = props["ssl.keystore.location"]  # PEM: key and certificate chain in one file
        elif "ssl.keystore.location" in props:
            ignored.append("ssl.keystore.location")
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").lower()
        if algorithm not in ("https", ""):
            raise InvalidClientConfig(f"ssl.endpoint.identification.algorithm={algorithm} is not "
                              f"supported: use https (check the host name) or an empty value.",
                              key="ssl.endpoint.identification.algorithm")
        ssl_kw = dict(ssl_cafile=cafile, ssl_certfile=certfile, ssl_keyfile=keyfile,
                      ssl_password=props.get("ssl.key.password") or props.get(
                          "ssl.keystore.password") or None,
                      ssl_crlfile=props.get("ssl.crl.location"),
                      ssl_check_hostname=algorithm == "https")
        for path_key, what in (("ssl_cafile", "CA certificate file"),
                               ("ssl_certfile", "client certificate file"),
                               ("ssl_keyfile", "client key file"), ("ssl_crlfile", "CRL file")):
            path = ssl_kw[path_key]
            if path and not Path(str(path)).is_file():
                raise InvalidClientConfig(f"The {what} {path} (from {source}) does not exist or is not "
                                  f"a file.", key=path_key)
    else:
        ignored += [k for k in props if k.startswith("ssl.")]

    timeout_ms = None
    if "request.timeout.ms" in props:
        try:
            timeout_ms = int(props["request.timeout.ms"])
            if timeout_ms <= 0:
                raise ValueError
        except ValueError:
            raise InvalidClientConfig(f"request.timeout.ms={props['request.timeout.ms']} is not a "
                              f"positive whole number of milliseconds.",
                              key="request.timeout.ms") from None
    return KafkaClientConfig(
        security_protocol=protocol, sasl_mechanism=mechanism, username=username,
        password=password, client_id=props.get("client.id") or None,
        request_timeout_ms=timeout_ms, bootstrap_servers=props.get("bootstrap.servers") or None,
        source=source, ignored=tuple(sorted(set(ignored))), **ssl_kw)  # type: ignore[arg-type]


def load_command_config(path: str | Path) -> KafkaClientConfig:
    """Read and check a ``--command-config`` properties file."""
    from quota_core.errors import UnreadableConfig
    from quota_core.backends.files import PROPERTIES_LIMIT, read_bytes_file

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise UnreadableConfig(f"The --command-config file {path} does not exist.", path=str(path))
    # Bounded, and never a FIFO or /dev/zero: those would hang the CLI.
    raw = read_bytes_file(path, "--command-config file", PROPERTIES_LIMIT, UnreadableConfig)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # Java's Properties.load(InputStream) reads ISO-8859-1
    found = property_lines(text)
    return client_config({k: v for _n, k, v in found}, source=str(path),
                         lines={k.strip(): n for n, k, _v in found})
