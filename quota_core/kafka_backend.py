"""The Kafka backend: client quotas on a real cluster, over kafka-python's connection manager.

DescribeClientQuotas (API key 48) and AlterClientQuotas (49) are sent with kafka-python's
generated protocol classes to one broker (the least loaded one, then kept: see
:meth:`KafkaBackend._send`); in KRaft the broker forwards alters to the controller. Entity
names are sent and read raw (a null name is the default entity), so names with ``=``, ``,``,
``%``, spaces or a literal ``<default>`` survive both ways.

Every kafka-python error is translated here (``raise ... from exc``) into
:mod:`quota_core.errors`; nothing above this module sees a Kafka client exception::

    connection refused, DNS, timeouts, TLS       -> ConnectionFailed
    SASL credentials refused                      -> AuthenticationFailed
    CLUSTER_AUTHORIZATION_FAILED                  -> NotAuthorized (names the ACL to grant)
    broker without API keys 48/49 (Kafka < 2.6)   -> UnsupportedBroker
    a describe filter the broker refuses          -> FilterError (the broker's message)
    any other request-level refusal               -> RequestRejected
    per-entity alter errors                       -> EntityResult(error, error_code)

Every network wait is bounded by ``timeout_s``. Passwords never reach a message, a ``repr`` or
a log line: kafka-python's own loggers get a filter that redacts the live secrets (at DEBUG it
logs request bodies, which for SASL/PLAIN contain the password).
"""
from __future__ import annotations

import logging
import ssl
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .alterations import AlterOutcome, Alteration, EntityResult, Op
from .backend import ClusterInfo, QuotaBackend, QuotaSet
from .entities import Entity
from .errors import (AuthenticationFailed, ConfigError, ConnectionFailed, EntityError,
                     FilterError, NotAuthorized, QuotaError, RequestRejected, UnsupportedBroker)
from .filters import EntityFilter
from .keys import same_value
from .kafka_wire import (AlterClientQuotasRequest, DescribeClientQuotasRequest, Errors,
                         KafkaConnectionManager, MetadataRequest, NetworkSelector)
from .kafka_config import KafkaClientConfig, client_config, load_command_config

__all__ = ["KafkaBackend", "check_quota_apis"]

log = logging.getLogger(__name__)

_CLUSTER_AUTHORIZATION_FAILED = 31
_FILTER_ERRORS = {42, 35}  # INVALID_REQUEST, UNSUPPORTED_VERSION ("Unsupported entity type")
#: Above this many altered entities, the propagation check describes everything at once.
_PER_ENTITY_CHECKS = 20


# -- secrets never reach a log line --------------------------------------------------------
class _SecretRedactor(logging.Filter):
    """Replaces live secrets in kafka-python's log records with ``***``."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: dict[str, int] = {}

    def add(self, secrets: Sequence[str]) -> None:
        with self._lock:
            for s in secrets:
                self._secrets[s] = self._secrets.get(s, 0) + 1

    def remove(self, secrets: Sequence[str]) -> None:
        with self._lock:
            for s in secrets:
                if self._secrets.get(s, 0) <= 1:
                    self._secrets.pop(s, None)
                else:
                    self._secrets[s] -= 1

    def redact(self, text: str) -> str:
        for secret in list(self._secrets):
            for form in _secret_forms(secret):
                text = text.replace(form, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a broken record is logging's problem, not ours
                return True
            redacted = self.redact(message)
            if redacted != message:
                record.msg, record.args = redacted, ()
        return True


def _secret_forms(secret: str) -> set[str]:
    """The secret as text, and as it shows inside a ``repr`` of bytes or str."""
    return {f for f in (secret, repr(secret.encode())[2:-1], repr(secret)[1:-1]) if f}


_REDACTOR = _SecretRedactor()


def _install_redactor() -> None:
    # A logger's filters only see records created on that logger, so every kafka-python
    # logger gets it (they all exist once kafka's modules are imported, as above).
    for name in list(logging.Logger.manager.loggerDict):
        if name == "kafka" or name.startswith("kafka."):
            logger = logging.getLogger(name)
            if _REDACTOR not in logger.filters:
                logger.addFilter(_REDACTOR)


_install_redactor()


# -- pure helpers -------------------------------------------------------------------------
def check_quota_apis(broker_version_data, where: str) -> None:
    """Raise :class:`UnsupportedBroker` unless the broker offers API keys 48 and 49."""
    for request in (DescribeClientQuotasRequest, AlterClientQuotasRequest):
        try:
            broker_version_data.api_version(request)
        except Errors.IncompatibleBrokerVersion as exc:
            version = getattr(broker_version_data, "broker_version_str", "unknown")
            raise UnsupportedBroker(
                f"The broker at {where} does not support the client-quota APIs (Kafka 2.6+ "
                f"needed; it looks like Kafka {version}). Upgrade the cluster, or use "
                f"kafka-configs.sh --zookeeper on such an old cluster.",
                where=where, broker_version=version) from exc


def _entity_key(pairs) -> frozenset:
    return frozenset((p.entity_type, p.entity_name) for p in pairs)


def _visible(ops: Sequence[Op], current: Mapping[str, float]) -> bool:
    """Whether a describe shows the effect of ``ops`` (the last op per key wins)."""
    final = {op.key: op.value for op in ops}
    return all(same_value(current.get(key), value) for key, value in final.items())


class KafkaBackend(QuotaBackend):
    """Client quotas on a Kafka cluster (2.6+; KRaft or ZooKeeper).

    ``client_properties`` are Java client properties (``security.protocol``, ``sasl.*``,
    ``ssl.*``, see :mod:`quota_core.kafka_config`); unknown keys raise ConfigError. Connects
    at construction, so a bad address, password or broker version fails here.
    """

    #: How long an alter waits for describe to show its effect (metadata propagation).
    propagation_timeout_s = 5.0

    def __init__(self, bootstrap_servers: str | None,
                 client_properties: Mapping[str, str] | None = None,
                 timeout_s: float = 15.0, *, config: KafkaClientConfig | None = None) -> None:
        self.config = config if config is not None else client_config(client_properties)
        bootstrap = (bootstrap_servers or self.config.bootstrap_servers or "").strip()
        if not bootstrap:
            raise ConfigError("No bootstrap server given: pass --bootstrap-server HOST:PORT.")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ConfigError(f"The timeout must be a positive number of seconds, not "
                              f"{timeout_s!r}.")
        self.bootstrap_servers = bootstrap
        self.timeout_s = float(timeout_s)
        self._node_id = None
        self._closed = False
        self._started = False
        self._secrets = self.config.secrets
        _install_redactor()  # again: kafka-python may have created loggers since import
        _REDACTOR.add(self._secrets)
        timeout_ms = int(self.timeout_s * 1000)
        request_ms = min(timeout_ms, self.config.request_timeout_ms or timeout_ms)
        self._request_timeout_ms = request_ms
        kwargs = dict(bootstrap_servers=bootstrap, client_id="quota-console",
                      request_timeout_ms=request_ms, reconnect_backoff_ms=50,
                      reconnect_backoff_max_ms=1000,
                      socket_connection_setup_timeout_ms=min(timeout_ms, 10_000),
                      socket_connection_setup_timeout_max_ms=timeout_ms)
        kwargs.update(self.config.kafka_python_kwargs())
        self._net = NetworkSelector(client_id=kwargs["client_id"])
        try:
            self._manager = KafkaConnectionManager(self._net, **kwargs)
        except (Errors.KafkaError, ValueError) as exc:
            self._shutdown()
            raise ConfigError(f"kafka-python refused the connection settings from "
                              f"{self.config.source}: {_REDACTOR.redact(str(exc))}") from exc
        self._net.start()
        self._started = True
        try:
            self._net.run(self._connect, time.monotonic() + self.timeout_s)
        except BaseException:
            self._shutdown()
            raise

    @classmethod
    def from_command_config(cls, bootstrap_servers: str | None, path: str | Path,
                            timeout_s: float = 15.0) -> "KafkaBackend":
        """Connect with the settings of a ``--command-config`` properties file."""
        return cls(bootstrap_servers, timeout_s=timeout_s, config=load_command_config(path))

    def __repr__(self) -> str:
        user = f", user={self.config.username!r}" if self.config.username else ""
        return (f"KafkaBackend({self.bootstrap_servers!r}, "
                f"security_protocol={self.config.security_protocol!r}{user})")

    # -- connecting -----------------------------------------------------------------------
    async def _connect(self, deadline: float) -> None:
        """Reach a bootstrap broker with a reason for every failure, then bootstrap.

        kafka-python's own bootstrap retries until its deadline and only says "Unable to
        bootstrap", so a probe connection comes first: it tells a refused port from a wrong
        password from a TLS problem, and fails at once when retrying cannot help. The probe
        connection is then reused by kafka-python's bootstrap.
        """
        manager = self._manager
        reasons: dict[str, BaseException] = {}
        while time.monotonic() < deadline:
            for broker in manager.cluster.bootstrap_brokers():
                remaining_ms = (deadline - time.monotonic()) * 1000
                if remaining_ms <= 0:
                    break
                where = f"{broker.host}:{broker.port}"
                try:
                    conn = manager.get_connection(broker.node_id, timeout_ms=remaining_ms,
                                                  refresh_metadata_on_err=False)
                except Errors.NodeNotReadyError:
                    continue  # in reconnect backoff
                except Exception as exc:  # noqa: BLE001 - classified below
                    self._raise_if_hopeless(exc, where, "connect", None)
                    reasons[where] = exc
                    continue
                stage = "connect"
                try:
                    await manager.wait_for(conn.init_future, remaining_ms)
                    stage = "first request"
                    remaining_ms = max(1.0, (deadline - time.monotonic()) * 1000)
                    await manager.wait_for(
                        conn.send_request(MetadataRequest(topics=[]),
                                          request_timeout_ms=remaining_ms), remaining_ms)
                except Exception as exc:  # noqa: BLE001 - classified below
                    self._raise_if_hopeless(exc, where, stage, conn)
                    if not (isinstance(exc, Errors.KafkaTimeoutError) and where in reasons):
                        reasons[where] = exc  # a deadline cutting a retry says less
                    conn.close()
                    continue
                remaining_ms = max(1.0, (deadline - time.monotonic()) * 1000)
                try:
                    await manager.wait_for(manager.bootstrap_async(remaining_ms), remaining_ms)
                except Exception as exc:  # noqa: BLE001
                    reasons[where] = exc
                    break
                check_quota_apis(manager.broker_version_data, where)
                return
            await self._net.sleep(max(0.0, min(0.05, deadline - time.monotonic())))
        raise self._unreachable(reasons)

    def _raise_if_hopeless(self, exc: BaseException, where: str, stage: str, conn) -> None:
        """Raise the translated error at once for failures that retrying cannot fix."""
        cfg, text = self.config, _REDACTOR.redact(str(exc))
        # The broker answers a bad password (or an unknown mechanism) and closes the socket;
        # kafka-python 3.0.12 drops an answer that arrives together with the close, so often
        # all it reports is "socket disconnected". After a completed ApiVersions exchange on
        # a SASL connection, that close is the broker refusing to authenticate us.
        closed_in_sasl = (cfg.uses_sasl and stage == "connect" and conn is not None
                          and conn.broker_version_data is not None
                          and isinstance(exc, Errors.KafkaConnectionError)
                          and "disconnected" in text)
        if isinstance(exc, Errors.SaslAuthenticationFailedError) or closed_in_sasl:
            also = (f", and that the broker enables sasl.mechanism={cfg.sasl_mechanism}"
                    if closed_in_sasl else "")
            raise AuthenticationFailed(
                f"Authentication failed for user {cfg.username!r} ({cfg.sasl_mechanism}) at "
                f"{where}: check the username and password in {cfg.source}{also}.",
                user=cfg.username, mechanism=cfg.sasl_mechanism, where=where,
                broker_message=text) from exc
        if isinstance(exc, Errors.IllegalSaslStateError):
            raise ConfigError(
                f"The listener at {where} does not use SASL, but security.protocol="
                f"{cfg.security_protocol} (from {cfg.source}). Use the port of a SASL listener, "
                f"or security.protocol=PLAINTEXT (or SSL) for this one.", where=where) from exc
        if isinstance(exc, Errors.UnsupportedSaslMechanismError):
            raise ConfigError(
                f"The broker at {where} does not enable sasl.mechanism={cfg.sasl_mechanism} "
                f"({text}). Set sasl.mechanism in {cfg.source} to one it enables.",
                where=where) from exc
        if isinstance(exc, ssl.SSLError) and "Handshake failed" not in text:
            raise ConnectionFailed(
                f"Cannot set up TLS with the files from {cfg.source}: {text}. Check "
                f"ssl.ca.location, ssl.certificate.location, ssl.key.location and "
                f"ssl.key.password.", where=where) from exc
        if "Handshake failed" in text:
            raise ConnectionFailed(
                f"The TLS handshake with {where} failed: "
                f"{text.split('Handshake failed:', 1)[-1].strip()}. "
                f"Check ssl.ca.location (the CA that signed the broker's certificate), "
                f"ssl.endpoint.identification.algorithm, and that this listener uses TLS.",
                where=where) from exc
        if isinstance(exc, Errors.InvalidReceiveError) and not cfg.uses_ssl:
            raise ConnectionFailed(
                f"The broker at {where} does not answer in the Kafka protocol over plaintext: "
                f"its listener most likely uses TLS. Set security.protocol=SSL (or SASL_SSL) and "
                f"ssl.ca.location in the client properties.", where=where) from exc
        if stage == "first request" and not cfg.uses_sasl and "disconnected" in text:
            raise AuthenticationFailed(
                f"The broker at {where} closed the connection after the first request: its "
                f"listener most likely requires SASL authentication, but the client connected "
                f"with security.protocol={cfg.security_protocol}. Give --command-config with "
                f"security.protocol, sasl.mechanism and sasl.jaas.config.", where=where) from exc

    def _reason(self, exc: BaseException | None) -> str:
        if exc is None:
            return "no connection could be made"
        text = _REDACTOR.redact(str(exc))
        if "ECONNREFUSED" in text or "Connection refused" in text:
            return "connection refused"
        if "DNS" in text:
            return "the host name does not resolve"
        if "EHOSTUNREACH" in text or "ENETUNREACH" in text:
            return "no route to the host"
        if isinstance(exc, (Errors.KafkaTimeoutError, Errors.RequestTimedOutError)) or \
                "timed out" in text.lower():
            return "no answer (timed out)"
        if "disconnected" in text:
            hint = "" if self.config.uses_ssl else (
                " (if its listener uses TLS or SASL, set security.protocol in the client "
                "properties)")
            return f"the broker closed the connection{hint}"
        return text or type(exc).__name__

    def _unreachable(self, reasons: Mapping[str, BaseException]) -> ConnectionFailed:
        if len(reasons) <= 1:
            reason = self._reason(next(iter(reasons.values()), None))
        else:
            reason = "; ".join(f"{w}: {self._reason(e)}" for w, e in reasons.items())
        return ConnectionFailed(
            f"Cannot reach the Kafka cluster at {self.bootstrap_servers} after "
            f"{self.timeout_s:.1f} s: {reason}. Check the bootstrap address and that the broker "
            f"is running.", bootstrap=self.bootstrap_servers, reason=reason)

    # -- requests -------------------------------------------------------------------------
    def _call(self, make_request: Callable[[], object], action: str):
        if self._closed:
            raise ConnectionFailed(f"This connection to {self.bootstrap_servers} is closed: "
                                   f"open a new KafkaBackend.")
        deadline = time.monotonic() + self.timeout_s
        try:
            return self._net.run(self._send, make_request, deadline, action)
        except QuotaError:
            raise
        except Errors.KafkaError as exc:  # e.g. the IO loop stopped underneath us
            raise ConnectionFailed(f"The Kafka client failed while {action}: "
                                   f"{self._reason(exc)}.") from exc

    async def _send(self, make_request: Callable[[], object], deadline: float, action: str):
        """Send to one broker and keep using it: a describe right after an alter then asks
        the broker whose metadata the alter waited for. Retries on connection errors until
        the deadline (quota alters are idempotent: they set or remove values)."""
        manager, last = self._manager, None
        while True:
            remaining_ms = (deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                raise ConnectionFailed(
                    f"No answer from the Kafka cluster at {self.bootstrap_servers} within "
                    f"{self.timeout_s:.1f} s while {action}: {self._reason(last)}. Check that "
                    f"the brokers are running.", bootstrap=self.bootstrap_servers)
            node = self._node_id if self._node_id is not None else manager.least_loaded_node()
            if node is None:
                await self._net.sleep(min(0.05, remaining_ms / 1000))
                continue
            try:
                response = await manager.wait_for(
                    manager.send(make_request(), node_id=node,
                                 request_timeout_ms=min(remaining_ms, self._request_timeout_ms)),
                    remaining_ms)
            except Errors.IncompatibleBrokerVersion as exc:
                check_quota_apis(manager.broker_version_data, self.bootstrap_servers)
                raise UnsupportedBroker(f"The broker does not support this request: {exc}") \
                    from exc
            except Errors.SaslAuthenticationFailedError as exc:
                self._raise_if_hopeless(exc, self.bootstrap_servers, "connect", None)
            except (Errors.KafkaError, OSError) as exc:
                last, self._node_id = exc, None
                await self._net.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            else:
                self._node_id = node
                return response

    def _not_authorized(self, operation: str, why: str, acl: str) -> NotAuthorized:
        principal = self.config.principal()
        who = f"User {principal!r}" if principal else "The client's TLS principal"
        grant = f"User:{principal}" if principal else "User:<principal of the certificate>"
        return NotAuthorized(
            f"{who} is not allowed to {operation} on the cluster (needed to {why}): grant it "
            f"with kafka-acls.sh --add --allow-principal {grant} --operation {acl} --cluster",
            operation=operation, principal=principal)

    # -- the backend interface -------------------------------------------------------------
    def describe(self, entity_filter: EntityFilter | None = None) -> QuotaSet:
        flt = entity_filter or EntityFilter.all()
        component = DescribeClientQuotasRequest.ComponentData

        def make():
            return DescribeClientQuotasRequest(
                components=[component(entity_type=c.entity_type, match_type=int(c.match_type),
                                      match=c.match) for c in flt.components],
                strict=flt.strict)

        response = self._call(make, "describing quotas")
        if response.error_code:
            error = Errors.for_code(response.error_code)
            message = response.error_message or error.description
            if response.error_code == _CLUSTER_AUTHORIZATION_FAILED:
                raise self._not_authorized("DESCRIBE_CONFIGS", "describe quotas",
                                           "DescribeConfigs")
            if response.error_code in _FILTER_ERRORS:
                raise FilterError(f"The broker refused the filter {flt}: {message}",
                                  broker_error=error.message, broker_message=message)
            raise RequestRejected(f"The broker refused to describe quotas ({error.message}): "
                                  f"{message}", broker_error=error.message)
        quotas: QuotaSet = {}
        for entry in response.entries or ():
            try:
                entity = Entity.from_pairs((e.entity_type, e.entity_name) for e in entry.entity)
            except EntityError as exc:
                raise RequestRejected(f"The broker returned an entity this console cannot "
                                      f"represent: {exc}") from exc
            values = {v.key: float(v.value) for v in entry.values}
            if values:
                quotas[entity] = values
        return quotas

    def alter(self, alterations: Sequence[Alteration],
              validate_only: bool = False) -> AlterOutcome:
        # An entity given twice is sent as it is: the broker applies the first alteration and
        # answers once for the entity, with an error (the sandbox does the same).
        alterations = list(alterations)
        if not alterations:
            return AlterOutcome((), validate_only)
        entry_cls = AlterClientQuotasRequest.EntryData

        def make():
            return AlterClientQuotasRequest(entries=[
                entry_cls(
                    entity=[entry_cls.EntityData(entity_type=t, entity_name=n)
                            for t, n in a.entity.parts],
                    ops=[entry_cls.OpData(key=op.key, value=0.0 if op.value is None
                                          else float(op.value), remove=op.value is None)
                         for op in a.ops])
                for a in alterations], validate_only=validate_only)

        action = "validating quota changes" if validate_only else "altering quotas"
        response = self._call(make, action)
        answers = {_entity_key(entry.entity): entry for entry in response.entries}
        results = []
        for alteration in {a.entity: a for a in alterations}.values():
            entry = answers.get(frozenset(alteration.entity.parts))
            if entry is None:
                results.append(EntityResult(alteration.entity, "The broker did not answer for "
                                            "this entity.", "UNKNOWN_SERVER_ERROR"))
            elif entry.error_code == _CLUSTER_AUTHORIZATION_FAILED:
                raise self._not_authorized("ALTER_CONFIGS", "alter quotas", "AlterConfigs")
            elif entry.error_code:
                error = Errors.for_code(entry.error_code)
                results.append(EntityResult(alteration.entity,
                                            entry.error_message or error.description,
                                            error.message))
            else:
                results.append(EntityResult(alteration.entity))
        if not validate_only:
            distinct = {a.entity: a for a in alterations}.values()
            self._await_propagation([a for a, r in zip(distinct, results) if r.ok and a.ops])
        return AlterOutcome(tuple(results), validate_only)

    def _await_propagation(self, applied: Sequence[Alteration]) -> None:
        """Poll describe until it shows every applied change, for at most
        :attr:`propagation_timeout_s`: brokers answer from their metadata image, which
        lags the controller slightly, and a refresh must not show stale data."""
        pending = list(applied)
        deadline = time.monotonic() + self.propagation_timeout_s
        delay = 0.02
        while pending:
            try:
                if len(pending) <= _PER_ENTITY_CHECKS:
                    current = {a.entity: self.describe_entity(a.entity) for a in pending}
                else:
                    everything = self.describe()
                    current = {a.entity: everything.get(a.entity, {}) for a in pending}
            except QuotaError as exc:  # cannot check (e.g. no DESCRIBE_CONFIGS): not an error
                log.info("not waiting for quota changes to show: %s", exc)
                return
            pending = [a for a in pending if not _visible(a.ops, current[a.entity])]
            if not pending:
                return
            if time.monotonic() + delay > deadline:
                log.warning("after %.1f s, describe does not yet show the change for %s",
                            self.propagation_timeout_s, ", ".join(str(a.entity) for a in pending))
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def info(self) -> ClusterInfo:
        response = self._call(lambda: MetadataRequest(topics=[]), "reading cluster metadata")
        return ClusterInfo("kafka", self.bootstrap_servers, response.cluster_id,
                           len(response.brokers))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._shutdown()

    def _shutdown(self) -> None:
        self._closed = True
        manager = getattr(self, "_manager", None)
        try:
            if manager is not None and self._started:
                self._net.run(manager.close)
        except Exception:  # noqa: BLE001 - closing must not fail; the loop may be gone
            log.debug("closing the Kafka connections failed", exc_info=True)
        try:
            self._net.stop(timeout_ms=int(self.timeout_s * 1000))
            self._net.close()
        except Exception:  # noqa: BLE001
            log.debug("stopping the Kafka IO loop failed", exc_info=True)
        _REDACTOR.remove(self._secrets)
        self._secrets = ()
