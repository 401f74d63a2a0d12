"""The Kafka backend: client quotas on a real cluster, over kafka-python's connection manager.

DescribeClientQuotas (API key 48) and AlterClientQuotas (49) are sent with kafka-python's
generated protocol classes to one broker (the least loaded one, then kept, and another one
of the cluster when it dies: see :meth:`KafkaBackend._send`); in KRaft the broker forwards
alters to the controller. Each broker answers describe from its own metadata image, which
lags the controller by a moment, so an alter reads its change back from every broker of the
cluster before it returns (:meth:`KafkaBackend._await_brokers`). Entity
names are sent and read raw (a null name is the default entity), so names with ``=``, ``,``,
``%``, spaces or a literal ``<default>`` survive both ways.

Every kafka-python error is translated here (``raise ... from exc``) into
:mod:`quota_core.errors`; nothing above this module sees a Kafka client exception::

    connection refused, DNS, timeouts, TLS       -> ConnectionFailed
    lost after an alter was sent, not settled     -> OutcomeUnknown (see :meth:`alter`)
    an answer larger than RECEIVE_MAX_BYTES       -> RequestRejected (names the size)
    SASL credentials refused                      -> AuthenticationFailed
    CLUSTER_AUTHORIZATION_FAILED                  -> NotAuthorized (names the ACL to grant)
    broker without API keys 48/49 (Kafka < 2.6)   -> UnsupportedBroker
    a describe filter the broker refuses          -> FilterError (the broker's message)
    any other request-level refusal               -> RequestRejected
    per-entity alter errors                       -> EntityResult(error, error_code)

Every network wait is bounded by ``timeout_s``, except that a connection every bootstrap
address refuses fails after about a second (three refusals each): retrying a closed port for
the whole timeout helps nobody. Large alterations are split into requests a broker accepts
(:func:`quota_core.limits.request_batches`). Passwords never reach a message, a ``repr`` or
a log line: kafka-python's own loggers get a filter that redacts the live secrets (at DEBUG it
logs request bodies, which for SASL/PLAIN contain the password).
"""
from __future__ import annotations

import logging
import ssl
import struct
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..alterations import AlterOutcome, Alteration, EntityResult, Op
from ..entities import ClusterInfo, QuotaSet
from .base import QuotaBackend
from ..entities import Entity
from ..errors import (AuthenticationFailed, ConfigError, ConnectionFailed, EntityError,
                      FilterError, NotAuthorized, OutcomeUnknown, QuotaError, RequestRejected,
                      UnsupportedBroker)
from ..filters import EntityFilter, FilterComponent
from ..keys import same_value
from .kafka_wire import (RECEIVE_MAX_BYTES, AlterClientQuotasRequest, DescribeClientQuotasRequest,
                         Errors, KafkaConnectionManager, MetadataRequest, NetworkSelector,
                         RawDescribeClientQuotasRequest, oversized_frame, request_may_have_left)
from ..limits import MAX_NAME_BYTES, MAX_RECORDS_PER_REQUEST, PER_ENTITY_READS, request_batches
from .kafka_config import KafkaClientConfig, client_config, load_command_config

__all__ = ["KafkaBackend", "check_quota_apis"]

log = logging.getLogger(__name__)

_CLUSTER_AUTHORIZATION_FAILED = 31
_THROTTLING_QUOTA_EXCEEDED = 89
_FILTER_ERRORS = {42, 35}  # INVALID_REQUEST, UNSUPPORTED_VERSION ("Unsupported entity type")
#: Fail fast when every address refuses: this many refusals each, over at least this long.
_REFUSALS = 3
_REFUSED_FOR_S = 1.0
#: Progress (``progress=``) after this long without an answer, then at this interval.
_PROGRESS_AFTER_S = 2.0
_PROGRESS_EVERY_S = 5.0
#: At most this many entities named in one log line or message.
_NAMED = 5


def _some(entities: Sequence, limit: int = _NAMED) -> str:
    """A few entities for a message: ``{user=a}, {user=b} and 998 more``."""
    entities = list(entities)
    named = ", ".join(str(e) for e in entities[:limit])
    return named + (f" and {len(entities) - limit:,} more" if len(entities) > limit else "")


def _refused(exc: BaseException | None) -> bool:
    text = str(exc or "")
    return "ECONNREFUSED" in text or "Connection refused" in text


class _LostAfterSend(Exception):
    """An alter request may have reached the broker, and no answer came back."""

    def __init__(self, cause: BaseException, frame_size: int | None = None) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.frame_size = frame_size


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


def _doubtful(error_code: int) -> bool:
    """Whether a per-entity alter error leaves open whether the change was applied: a
    retriable error (REQUEST_TIMED_OUT, NOT_CONTROLLER, NETWORK_EXCEPTION: the broker that
    forwards alters to the controller lost it, or gave up waiting for it, while the controller
    may have committed the change) or UNKNOWN_SERVER_ERROR. A validation error
    (INVALID_REQUEST, POLICY_VIOLATION, ...) is a refusal: nothing of that entity was written."""
    if error_code == _THROTTLING_QUOTA_EXCEEDED:  # refused before anything was written
        return False
    return error_code == -1 or bool(getattr(Errors.for_code(error_code), "retriable", False))


def _visible(ops: Sequence[Op], current: Mapping[str, float]) -> bool:
    """Whether a describe shows the effect of ``ops`` (the last op per key wins)."""
    final = {op.key: op.value for op in ops}
    return all(same_value(current.get(key), value) for key, value in final.items())


def _shape_filter(entities) -> EntityFilter:
    """One describe filter covering ``entities``: any name of their types, when they all have
    the same types (strict); else everything."""
    shapes = {e.types for e in entities}
    if len(shapes) != 1:
        return EntityFilter.all()
    return EntityFilter(tuple(FilterComponent.any(t) for t in shapes.pop()), True)


def _node_order(node_id: str) -> tuple[int, str]:
    return (int(node_id), node_id) if node_id.isdigit() else (1 << 62, node_id)


class KafkaBackend(QuotaBackend):
    """Client quotas on a Kafka cluster (2.6+; KRaft or ZooKeeper).

    ``client_properties`` are Java client properties (``security.protocol``, ``sasl.*``,
    ``ssl.*``, see :mod:`quota_core.backends.kafka_config`); unknown keys raise ConfigError. Connects
    at construction, so a bad address, password or broker version fails here.
    """

    #: How long an alter waits for describe to show its effect (metadata propagation).
    propagation_timeout_s = 5.0
    #: Fault injection for tests: called (in the IO thread) right after an alter request is
    #: handed to the connection, e.g. to kill the broker before it answers.
    _after_alter_sent: Callable[[], None] | None = None
    #: The broker the last alter request was sent to (node id), for messages and tests.
    alter_node: int | None = None

    def __init__(self, bootstrap_servers: str | None,
                 client_properties: Mapping[str, str] | None = None,
                 timeout_s: float = 15.0, *, config: KafkaClientConfig | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.config = config if config is not None else client_config(client_properties)
        bootstrap = (bootstrap_servers or self.config.bootstrap_servers or "").strip()
        if not bootstrap:
            raise ConfigError("No bootstrap server given: pass --bootstrap-server HOST:PORT.")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ConfigError(f"The timeout must be a positive number of seconds, not "
                              f"{timeout_s!r}.")
        self.bootstrap_servers = bootstrap
        self.timeout_s = float(timeout_s)
        #: Called (from the IO thread) with a line of text while a wait lasts over 2 s.
        self._progress = progress
        self._node_id = None
        #: After an alter: per broker (node id) what the read-back found there.
        self.read_back: dict[int | None, str] = {}
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
                      receive_message_max_bytes=RECEIVE_MAX_BYTES,
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
                            timeout_s: float = 15.0,
                            progress: Callable[[str], None] | None = None) -> "KafkaBackend":
        """Connect with the settings of a ``--command-config`` properties file."""
        return cls(bootstrap_servers, timeout_s=timeout_s, config=load_command_config(path),
                   progress=progress)

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

        When every bootstrap address refuses the connection (nothing listens there), it gives
        up after :data:`_REFUSALS` refusals each and at least :data:`_REFUSED_FOR_S`; slow or
        silent addresses get the whole timeout.
        """
        reasons: dict[str, BaseException] = {}
        refusals: dict[str, int] = {}
        started = time.monotonic()
        ticker = self._start_progress(started, deadline, lambda: (
            f"still trying to reach the Kafka cluster at {self.bootstrap_servers} "
            f"({self._so_far(reasons)})"))
        try:
            await self._connect_loop(deadline, reasons, refusals, started)
        finally:
            self._stop_progress(ticker)

    async def _connect_loop(self, deadline: float, reasons: dict, refusals: dict,
                            started: float) -> None:
        manager = self._manager
        addresses = [f"{b.host}:{b.port}" for b in manager.cluster.bootstrap_brokers()]

        def failed(where: str, exc: BaseException | None) -> None:
            if exc is not None:  # None: a wait in reconnect backoff, not another try
                refusals[where] = refusals.get(where, 0) + 1 if _refused(exc) else 0
            if (time.monotonic() - started >= _REFUSED_FOR_S
                    and all(refusals.get(a, 0) >= _REFUSALS for a in addresses)):
                raise self._refused(reasons, sum(refusals.values()), started)

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
                    failed(where, None)  # in reconnect backoff
                    continue
                except Exception as exc:  # noqa: BLE001 - classified below
                    self._raise_if_hopeless(exc, where, "connect", None)
                    reasons[where] = exc
                    failed(where, exc)
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
                    failed(where, exc)
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

    def _so_far(self, reasons: Mapping[str, BaseException]) -> str:
        if not reasons:
            return "no answer yet"
        return "; ".join(f"{w}: {self._reason(e)}" for w, e in reasons.items()) \
            if len(reasons) > 1 else self._reason(next(iter(reasons.values())))

    def _refused(self, reasons: Mapping[str, BaseException], tries: int,
                 started: float) -> ConnectionFailed:
        where = ", ".join(reasons) or self.bootstrap_servers
        return ConnectionFailed(
            f"Cannot reach the Kafka cluster at {self.bootstrap_servers}: connection refused "
            f"({tries} tries in {time.monotonic() - started:.1f} s; nothing listens at "
            f"{where}). Check the bootstrap address and that the broker is running.",
            bootstrap=self.bootstrap_servers, reason="connection refused")

    # -- progress while waiting -------------------------------------------------------------
    def _start_progress(self, started: float, deadline: float, what: Callable[[], str]):
        """Call ``progress`` after 2 s, then every 5 s, until :meth:`_stop_progress`."""
        if self._progress is None:
            return None
        state: dict[str, object] = {}

        def tick() -> None:
            left = max(0.0, deadline - time.monotonic())
            try:
                self._progress(f"{what()}; waited {time.monotonic() - started:.0f} s, "  # type: ignore[misc]
                               f"giving up in {left:.0f} s")
            except Exception:  # noqa: BLE001 - a broken progress sink must not stop the wait
                log.debug("progress callback failed", exc_info=True)
            if left > _PROGRESS_EVERY_S:
                state["timer"] = self._net.call_later(_PROGRESS_EVERY_S, tick)

        state["timer"] = self._net.call_later(_PROGRESS_AFTER_S, tick)
        return state

    def _stop_progress(self, state) -> None:
        if state is not None and state.get("timer") is not None:
            self._net.cancel(state["timer"])
            state["timer"] = None

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
    def _call(self, make_request: Callable[[], object], action: str, *, resend: bool = True,
              deadline: float | None = None, wait_refused: bool = False,
              node: int | None = None):
        """Send one request and return the answer, within ``timeout_s`` (or ``deadline``).

        ``resend=False`` (alters): once the request may have reached the broker, a lost
        connection raises :class:`_LostAfterSend` instead of sending it again.
        ``wait_refused``: keep retrying refused connections until the deadline (a broker
        restarting), instead of failing after a second. ``node``: send to that broker only
        (a read-back asks each broker in turn); else to the broker in use, or another one of
        the cluster when that one is gone."""
        if self._closed:
            raise ConnectionFailed(f"This connection to {self.bootstrap_servers} is closed: "
                                   f"open a new KafkaBackend.")
        if deadline is None:
            deadline = time.monotonic() + self.timeout_s
        try:
            return self._net.run(self._send, make_request, deadline, action, resend,
                                 wait_refused, node)
        except (QuotaError, _LostAfterSend):
            raise
        except Errors.KafkaError as exc:  # e.g. the IO loop stopped underneath us
            raise ConnectionFailed(f"The Kafka client failed while {action}: "
                                   f"{self._reason(exc)}.") from exc

    async def _send(self, make_request: Callable[[], object], deadline: float, action: str,
                    resend: bool = True, wait_refused: bool = False, only: int | None = None):
        """Send to one broker and keep using it (``only``: to that broker, and no other);
        when it fails, the next try goes to another broker of the cluster, which
        kafka-python knows from the metadata even when the bootstrap list named one. Retries
        on connection errors until the deadline; a request that may have reached the broker
        is only sent again when ``resend`` (describes, metadata, validate-only alters)."""
        started = time.monotonic()
        state: dict[str, BaseException | None] = {"last": None}
        ticker = self._start_progress(started, deadline, lambda: (
            f"still waiting for the Kafka cluster at {self.bootstrap_servers} while {action}"
            + (f" ({self._reason(state['last'])})" if state["last"] is not None else "")))
        try:
            return await self._send_loop(make_request, deadline, action, resend, wait_refused,
                                         started, state, only)
        finally:
            self._stop_progress(ticker)

    async def _send_loop(self, make_request, deadline, action, resend, wait_refused, started,
                         state, only=None):
        manager, refusals = self._manager, 0
        where = self.bootstrap_servers if only is None else f"broker {only}"
        while True:
            last = state["last"]
            remaining_ms = (deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                raise ConnectionFailed(
                    f"No answer from the Kafka cluster at {where} within "
                    f"{deadline - started:.1f} s while {action}: {self._reason(last)}. Check "
                    f"that the brokers are running.", bootstrap=self.bootstrap_servers)
            if (not wait_refused and refusals >= _REFUSALS
                    and time.monotonic() - started >= _REFUSED_FOR_S):
                raise ConnectionFailed(
                    f"Lost the Kafka cluster at {where} while {action}: "
                    f"connection refused ({refusals} tries in "
                    f"{time.monotonic() - started:.1f} s). Check that the brokers are running.",
                    bootstrap=self.bootstrap_servers, reason="connection refused")
            node = only if only is not None else \
                self._node_id if self._node_id is not None else manager.least_loaded_node()
            if node is None:
                await self._net.sleep(min(0.05, remaining_ms / 1000))
                continue
            conn = None
            try:
                conn = manager.get_connection(node)
                if conn.initializing:  # send once connected: a request then leaves at once
                    await manager.wait_for(conn.init_future, remaining_ms)
                    remaining_ms = max(1.0, (deadline - time.monotonic()) * 1000)
                future = conn.send_request(make_request(), request_timeout_ms=min(
                    remaining_ms, self._request_timeout_ms))
                if not resend:
                    self.alter_node = node
                    if self._after_alter_sent is not None:
                        self._after_alter_sent()
                response = await manager.wait_for(future, remaining_ms)
            except Errors.NodeNotReadyError as exc:  # in reconnect backoff: nothing sent
                state["last"] = last or exc
                self._forget(node)
                await self._net.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            except Errors.IncompatibleBrokerVersion as exc:
                check_quota_apis(manager.broker_version_data, self.bootstrap_servers)
                raise UnsupportedBroker(f"The broker does not support this request: {exc}") \
                    from exc
            except Errors.SaslAuthenticationFailedError as exc:
                self._raise_if_hopeless(exc, self.bootstrap_servers, "connect", None)
            except (Errors.KafkaError, OSError) as exc:
                size = oversized_frame(exc)
                left = conn is not None and request_may_have_left(conn)
                if not resend and (left or size is not None):
                    self._forget(node)
                    raise _LostAfterSend(exc, size) from exc
                if size is not None:
                    raise self._too_large(size, action) from exc
                state["last"] = exc
                self._forget(node)
                refusals = refusals + 1 if _refused(exc) else 0
                await self._net.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            else:
                if only is None:
                    self._node_id = node
                return response

    def _forget(self, node) -> None:
        """Stop using ``node`` for requests without a target (it failed): the next one goes to
        another broker of the cluster (kafka-python's least loaded node, from its metadata)."""
        if self._node_id == node:
            self._node_id = None

    def _too_large(self, size: int, action: str) -> RequestRejected:
        return RequestRejected(
            f"The cluster's answer while {action} is {size:,} bytes, more than this client "
            f"reads ({RECEIVE_MAX_BYTES:,} bytes). Describe a part of the quota set with "
            f"entity flags (e.g. --defaults user, --names client-id=NAME).",
            size=size, limit=RECEIVE_MAX_BYTES)

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
        return self._describe(entity_filter)

    def _describe(self, entity_filter: EntityFilter | None = None, *,
                  deadline: float | None = None, wait_refused: bool = False,
                  node: int | None = None) -> QuotaSet:
        flt = entity_filter or EntityFilter.all()
        for c in flt.components:
            if c.match is not None and len(c.match.encode("utf-8", "surrogatepass")) > \
                    MAX_NAME_BYTES:
                # A broker closes the connection on such a request, without an answer.
                raise FilterError(f"The {c.entity_type} name in the filter is longer than a "
                                  f"Kafka broker holds ({MAX_NAME_BYTES:,} bytes of UTF-8): "
                                  f"no entity can match it.")
        component = DescribeClientQuotasRequest.ComponentData

        def make():  # the answer comes as bytes, decoded below (quota_core.backends.kafka_decode)
            return RawDescribeClientQuotasRequest(
                components=[component(entity_type=c.entity_type, match_type=int(c.match_type),
                                      match=c.match) for c in flt.components],
                strict=flt.strict)

        response = self._call(make, "describing quotas" if node is None else
                              f"describing quotas on broker {node}", deadline=deadline,
                              wait_refused=wait_refused, node=node)
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
        try:
            return response.quotas()
        except EntityError as exc:
            raise RequestRejected(f"The broker returned an entity this console cannot "
                                  f"represent: {exc}") from exc
        except (ValueError, IndexError, struct.error) as exc:
            raise RequestRejected(f"The broker's answer to describe could not be read: "
                                  f"{exc}.") from exc

    def alter(self, alterations: Sequence[Alteration],
              validate_only: bool = False) -> AlterOutcome:
        """Apply (or validate) the alterations, one result per entity.

        More than a broker accepts in one request (10,000 changed keys: see
        :mod:`quota_core.limits`) goes in several requests, in order; every alteration of an
        entity stays in one request. When the connection is lost after a request was sent, or
        the broker answers an entity with an error that says nothing about the change itself
        (the controller moved or timed out: :func:`_doubtful`), the alter is not sent again:
        describe (when the cluster answers, within ``timeout_s``) tells which changes were
        applied. If all of them were, the alter returns normally; otherwise
        :class:`OutcomeUnknown` says per entity what is known.

        An applied change is then read back from every broker of the cluster until each shows
        it (:meth:`_await_brokers`, within ``timeout_s``): each broker answers describe, and
        enforces, from its own copy of the metadata, so a describe right after this returns
        sees the change wherever it is asked. A broker still showing other values when the
        time is up is named in an :class:`OutcomeUnknown`.
        """
        # An entity given twice is sent as it is: the broker applies the first alteration and
        # answers once for the entity, with an error (the sandbox does the same).
        alterations = list(alterations)
        if not alterations:
            return AlterOutcome((), validate_only)
        batches = request_batches(alterations)
        results: dict[Entity, EntityResult] = {}
        for index, batch in enumerate(batches):
            action = "validating quota changes" if validate_only else "altering quotas"
            if len(batches) > 1:
                action += f" (request {index + 1} of {len(batches)}, {len(batch):,} entities)"
                log.info("%s", action)
            # the entities of the requests after this one: only for an outcome unknown (made
            # for every request, it was quadratic in the entities: issue 32)
            def later_entities(index=index) -> list[Entity]:
                return [a.entity for b in batches[index + 1:] for a in b]
            doubtful: dict[Entity, EntityResult] = {}
            try:
                answered = self._alter_request(batch, validate_only, action, doubtful)
            except _LostAfterSend as lost:
                results.update(self._settle(batch, self._lost(lost, action), results,
                                            later_entities))
                continue
            except ConnectionFailed as exc:
                if not results:
                    raise  # nothing was sent: a plain connection failure
                sent = {r.entity: r for r in results.values()}
                later = later_entities()
                raise OutcomeUnknown(
                    f"{exc} {len(sent):,} of {len(set(a.entity for a in alterations)):,} "
                    f"entities were sent before ({sum(r.ok for r in sent.values()):,} applied); "
                    f"the other {len(batch) + len(later):,} were not sent.",
                    outcome=AlterOutcome(tuple(sent.values()), validate_only),
                    not_sent=list(dict.fromkeys([a.entity for a in batch] + later))) from exc
            results.update(answered)
            if doubtful and not validate_only:
                first = next(iter(doubtful.values()))
                why = (f"the cluster answered {len(doubtful):,} of the entities with "
                       f"{first.error_code} ({first.error}), which says nothing about whether "
                       f"the change was applied (the controller moved or did not answer in time)")
                results.update(self._settle([a for a in batch if a.entity in doubtful], why,
                                            results, later_entities))
        ordered = [results[e] for e in dict.fromkeys(a.entity for a in alterations)]
        if not validate_only:
            first_of: dict[Entity, Alteration] = {}
            for a in alterations:
                first_of.setdefault(a.entity, a)
            applied = [first_of[r.entity] for r in ordered if r.ok and first_of[r.entity].ops]
            lagging = self._await_brokers(applied)
            if lagging:
                raise self._lagging(ordered, lagging)
        return AlterOutcome(tuple(ordered), validate_only)

    def alter_request(self, alterations: Sequence[Alteration],
                      validate_only: bool = False) -> AlterOutcome:
        """Send the alterations in one AlterClientQuotas request, unsplit: the broker's
        per-request limits apply (over 10,000 changed keys, every entity is refused with
        POLICY_VIOLATION). For checking the sandbox against a broker; use :meth:`alter`."""
        action = "validating quota changes" if validate_only else "altering quotas"
        try:
            results = self._alter_request(list(alterations), validate_only, action)
        except _LostAfterSend as lost:
            raise OutcomeUnknown(f"Outcome unknown: {self._lost(lost, action)}.",
                                 unknown=list(dict.fromkeys(a.entity for a in alterations))
                                 ) from lost.cause
        return AlterOutcome(tuple(results.values()), validate_only)

    def _alter_request(self, batch: Sequence[Alteration], validate_only: bool,
                       action: str, doubtful: dict | None = None
                       ) -> dict[Entity, EntityResult]:
        """One AlterClientQuotas request; the broker's answer per entity. Entities answered
        with an error that does not say the change was refused (:func:`_doubtful`) are also
        put in ``doubtful`` (when given)."""
        entry_cls = AlterClientQuotasRequest.EntryData

        def make():
            return AlterClientQuotasRequest(entries=[
                entry_cls(
                    entity=[entry_cls.EntityData(entity_type=t, entity_name=n)
                            for t, n in a.entity.parts],
                    ops=[entry_cls.OpData(key=op.key, value=0.0 if op.value is None
                                          else float(op.value), remove=op.value is None)
                         for op in a.ops])
                for a in batch], validate_only=validate_only)

        # A validate-only request changes nothing: sending it again is harmless.
        response = self._call(make, action, resend=validate_only)
        answers = {_entity_key(entry.entity): entry for entry in response.entries}
        results: dict[Entity, EntityResult] = {}
        for alteration in batch:
            if alteration.entity in results:
                continue
            entry = answers.get(frozenset(alteration.entity.parts))
            if entry is None:
                results[alteration.entity] = EntityResult(
                    alteration.entity, "The broker did not answer for this entity.",
                    "UNKNOWN_SERVER_ERROR")
                if doubtful is not None:
                    doubtful[alteration.entity] = results[alteration.entity]
            elif entry.error_code == _CLUSTER_AUTHORIZATION_FAILED:
                raise self._not_authorized("ALTER_CONFIGS", "alter quotas", "AlterConfigs")
            elif entry.error_code:
                error = Errors.for_code(entry.error_code)
                results[alteration.entity] = EntityResult(
                    alteration.entity, entry.error_message or error.description, error.message)
                if doubtful is not None and _doubtful(entry.error_code):
                    doubtful[alteration.entity] = results[alteration.entity]
            else:
                results[alteration.entity] = EntityResult(alteration.entity)
        refused = [r for r in results.values() if r.error_code == "POLICY_VIOLATION"]
        if len(refused) > 1 and len(refused) == len(results):
            log.warning("the broker refused a whole request of %d entities (%s): more than %d "
                        "changed keys?", len(results), refused[0].error, MAX_RECORDS_PER_REQUEST)
        return results

    def _lost(self, lost: _LostAfterSend, action: str) -> str:
        if lost.frame_size is not None:
            return (f"the cluster's answer while {action} was {lost.frame_size:,} bytes, more "
                    f"than this client reads ({RECEIVE_MAX_BYTES:,} bytes)")
        reason = self._reason(lost.cause).split(" (if its listener")[0]
        node = f" (broker {self.alter_node})" if self.alter_node is not None else ""
        return (f"the connection to the Kafka cluster at {self.bootstrap_servers}{node} was "
                f"lost while {action}, after the request was sent ({reason})")

    def _settle(self, batch: Sequence[Alteration], why: str,
                earlier: Mapping[Entity, EntityResult],
                later_entities: Callable[[], Sequence[Entity]]
                ) -> dict[Entity, EntityResult]:
        """After a request was sent and its answer lost (or not telling: ``why``): describe
        (when the cluster answers, for at most ``timeout_s``) until every change shows. A
        broker shows only what the controller committed, so a change shown by any broker was
        applied. Returns the batch's results when all of them were applied; raises
        :class:`OutcomeUnknown` otherwise."""
        first: dict[Entity, Alteration] = {}
        repeated: set[Entity] = set()
        for a in batch:
            if a.entity in first:
                repeated.add(a.entity)  # the broker's answer for it would be an error
            first.setdefault(a.entity, a)
        log.warning("%s; describing the %d entities to find out whether it was applied",
                    why, len(first))
        if self._progress is not None:
            self._progress(f"{why}. Describing the {len(first):,} entities when the cluster "
                           f"answers (up to {self.timeout_s:g} s) to find out whether the change "
                           f"was applied.")
        deadline = time.monotonic() + self.timeout_s
        pending = [a for e, a in first.items() if e not in repeated]
        confirmed: list[Entity] = []
        answered_at = None
        delay = 0.05
        while pending:
            try:
                current = self._current(pending, deadline)
            except QuotaError as exc:  # the cluster did not answer in time, or we may not look
                log.info("cannot settle the alter: %s", exc)
                break
            answered_at = answered_at or time.monotonic()
            shown = [a.entity for a in pending if _visible(a.ops, current[a.entity])]
            confirmed += shown
            done = set(shown)  # one set per round, not one per entity (issue 32)
            pending = [a for a in pending if a.entity not in done]
            if (not pending or time.monotonic() - answered_at > self.propagation_timeout_s
                    or time.monotonic() + delay > deadline):
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        if not pending and not repeated:
            log.warning("describe shows all %d changes applied", len(first))
            if self._progress is not None:
                self._progress(f"Describe shows the change applied to all {len(first):,} "
                               f"entities.")
            return {e: EntityResult(e) for e in first}
        later = later_entities()
        unknown = [a.entity for a in pending] + sorted(repeated, key=Entity.sort_key)
        known = [r for e, r in earlier.items() if e not in first] + \
            [EntityResult(e) for e in confirmed]
        shown = answered_at is not None
        state = (f"a describe shows {len(pending):,} of them unchanged so far: "
                 f"{_some(a.entity for a in pending)}" if shown and pending else
                 f"the cluster did not answer again within {self.timeout_s:g} s")
        raise OutcomeUnknown(
            f"Outcome unknown: {why}. Of the {len(first):,} entities in that request, "
            f"{len(confirmed):,} show the change (applied); for {len(unknown):,} it is unknown "
            f"whether it was applied ({state})"
            + (f"; {len(later):,} more were not sent" if later else "") +
            ". Describe them when the cluster answers, or run the same command again (setting "
            "and removing quota keys gives the same result when repeated).",
            outcome=AlterOutcome(tuple(known), False), unknown=unknown,
            not_visible=[a.entity for a in pending] if shown else [],
            not_sent=list(dict.fromkeys(later)))

    def _current(self, alterations: Sequence[Alteration], deadline: float, *,
                 node: int | None = None,
                 wait_refused: bool = True) -> dict[Entity, dict[str, float]]:
        """The quotas of each altered entity now (on ``node``, else on any broker): one
        describe per entity for a few, one describe of their shape (or of everything) for
        many. Waits for a restarting broker unless ``wait_refused`` is false."""
        if len(alterations) <= PER_ENTITY_READS:
            return {a.entity: self._describe(EntityFilter.for_entity(a.entity),
                                             deadline=deadline, wait_refused=wait_refused,
                                             node=node)
                    .get(a.entity, {}) for a in alterations}
        everything = self._describe(_shape_filter(a.entity for a in alterations),
                                    deadline=deadline, wait_refused=wait_refused, node=node)
        return {a.entity: everything.get(a.entity, {}) for a in alterations}

    # -- every broker of the cluster ----------------------------------------------------------
    def _metadata(self, action: str, deadline: float | None = None):
        """One Metadata answer (the cluster id and its brokers: registered and not fenced, in
        KRaft DescribeCluster's list; every broker since 0.10 answers it). kafka-python's view
        of the cluster is updated with it, so a request can go to any of those brokers. The one
        read behind :meth:`info` and :meth:`brokers`."""
        response = self._call(lambda: MetadataRequest(topics=[]), action, deadline=deadline)

        async def update() -> None:  # on the IO thread, which owns the cluster metadata
            self._manager.cluster.update_metadata(response)

        self._net.run(update)
        return response

    def brokers(self, deadline: float | None = None) -> list[tuple[int, str]]:
        """The brokers of the cluster now, ``(node id, "host:port")`` in node-id order."""
        response = self._metadata("listing the cluster's brokers", deadline)
        return sorted((b[0], f"{b[1]}:{b[2]}") for b in response.brokers)

    def _await_brokers(self, applied: Sequence[Alteration]) -> dict[int, list[Entity]]:
        """Read the applied changes back from every broker of the cluster until each shows
        them, for at most ``timeout_s``: in KRaft each broker answers describe (and enforces
        quotas) from its own metadata image, which follows the controller a little later on
        some brokers than on others. Returns the brokers still showing other values when the
        time is up, with those entities (empty: every broker that answered agrees).

        The brokers are asked in turn, round after round. An entity is done when every broker
        shows this change, or when they all agree on other values for longer than
        :attr:`propagation_timeout_s` (another writer changed it since: the caller's read-back
        calls that a conflict). A broker that does not answer (down, restarting) is not waited
        for: it catches up from the metadata log before it answers requests again, so it
        cannot show the old values later. It is named on the progress line, and every
        broker's finding is kept in :attr:`read_back`."""
        self.read_back = {}
        if not applied:
            return {}
        started = time.monotonic()
        deadline = started + self.timeout_s
        try:
            brokers = self.brokers(deadline)
        except QuotaError as exc:  # cannot list them: read back from the broker in use
            log.info("cannot list the brokers for the read-back: %s", exc)
            brokers = [(None, self.bootstrap_servers)]
        asking = dict(brokers)
        pending = {a.entity: a for a in applied}
        shown: dict[int | None, dict[Entity, dict]] = {}
        delay = 0.02
        while pending and asking:
            for node, where in list(asking.items()):
                # every broker gets one try, even when an earlier one used up the time
                ask_until = max(deadline, time.monotonic() + min(2.0, self.timeout_s))
                try:
                    shown[node] = self._current(list(pending.values()), ask_until, node=node,
                                                wait_refused=False)
                except ConnectionFailed as exc:
                    del asking[node]
                    shown.pop(node, None)
                    self.read_back[node] = f"did not answer ({exc})"
                    log.warning("broker %s (%s) did not answer the read-back: %s", node, where,
                                exc)
                    if self._progress is not None:
                        self._progress(
                            f"broker {node} ({where}) did not answer the read-back, so it was not "
                            f"checked: a broker catches up from the metadata log before it "
                            f"answers again.")
                except QuotaError as exc:  # e.g. no DESCRIBE_CONFIGS: not an error
                    log.info("not waiting for quota changes to show: %s", exc)
                    self.read_back[node] = f"not read ({exc})"
                    return {}
            overwritten = time.monotonic() - started > self.propagation_timeout_s
            for entity, a in list(pending.items()):
                views = [shown[n][entity] for n in asking]
                if all(_visible(a.ops, v) for v in views) or (
                        overwritten and all(v == views[0] for v in views)):
                    del pending[entity]
            if not pending or time.monotonic() + delay > deadline:
                break
            time.sleep(delay)
            delay = min(delay * 2, 0.25)
        lagging: dict[int, list[Entity]] = {}
        for node in asking:
            behind = [e for e, a in pending.items() if not _visible(a.ops, shown[node][e])]
            if behind:
                lagging[node] = behind
                self.read_back[node] = f"still shows other values for {len(behind):,}"
                log.warning("after %.1f s, broker %s (%s) does not yet show the change for %s",
                            self.timeout_s, node, asking[node], _some(behind))
            else:
                self.read_back[node] = "shows the change"
        return lagging

    def _lagging(self, ordered: Sequence[EntityResult],
                 lagging: Mapping[int, Sequence[Entity]]) -> OutcomeUnknown:
        """The outcome when the cluster accepted a change but a broker still shows other
        values after ``timeout_s``: that broker enforces what it shows, so whether the change
        is in force there is not known."""
        behind = {e for es in lagging.values() for e in es}
        names = ", ".join(f"broker {n}" for n in sorted(lagging, key=str))
        return OutcomeUnknown(
            f"Outcome unknown: the cluster accepted the change, but {names} still "
            f"show{'s' if len(lagging) == 1 else ''} other values for {len(behind):,} "
            f"entit{'y' if len(behind) == 1 else 'ies'} after {self.timeout_s:g} s "
            f"({_some(sorted(behind, key=Entity.sort_key))}). Each broker enforces the quotas "
            f"it shows, so whether the change is in force there is not known yet. Describe "
            f"again later; a broker that stays behind is not following the metadata log.",
            outcome=AlterOutcome(tuple(r for r in ordered if r.entity not in behind), False),
            unknown=[r.entity for r in ordered if r.entity in behind],
            lagging={n: list(es) for n, es in lagging.items()},
            unknown_label="outcome unknown (accepted by the cluster, not yet shown by "
                          + names + ")")

    def write_lease(self, holder: str, wait_s: float, hold_s: float | None = None):
        """The cluster's write lease (:mod:`quota_core.backends.kafka_lease`), with this backend's
        connection settings, held for ``QUOTA_LEASE_SECONDS`` or ``hold_s``, the longer."""
        from .kafka_lease import hold_seconds, kafka_write_lease

        return kafka_write_lease(self.config.librdkafka_config() | {
            "bootstrap.servers": self.bootstrap_servers}, holder, wait_s,
            principal=self.config.principal(),
            hold_s=None if hold_s is None else max(hold_seconds(), hold_s))

    def info(self) -> ClusterInfo:
        # The cluster id of the Metadata answer is DescribeCluster's (both read it from the
        # broker's metadata image); Metadata is what every broker since 0.10 answers.
        response = self._metadata("reading cluster metadata")
        brokers = sorted(((str(b[0]), str(b[1])) for b in response.brokers),
                         key=lambda b: _node_order(b[0]))
        return ClusterInfo("kafka", self.bootstrap_servers, response.cluster_id,
                           len(response.brokers), tuple(b[0] for b in brokers),
                           tuple(b[1] for b in brokers))

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

    # -- broker settings (the quota window, the callback: quota_core.brokers) -------------
    def broker_settings(self):
        """Every broker's quota settings (DescribeCluster, then DescribeConfigs per broker):
        :func:`quota_core.backends.kafka_brokers.read_broker_settings`."""
        from .kafka_brokers import read_broker_settings

        return read_broker_settings(self)

    def broker_version(self) -> str | None:
        """The Kafka version the brokers' ApiVersions answer looks like (kafka-python's reading
        of it, e.g. ``4.1``: the newest version it knows whose API set matches), as
        :func:`check_quota_apis` says it; None when no broker answered it (the backend
        connects when it is made, so one has)."""
        data = getattr(self._manager, "broker_version_data", None)
        return getattr(data, "broker_version_str", None) if data is not None else None

    def quota_window(self):
        """The quota window most brokers have (each holds its own; they can differ during a
        rolling change: :meth:`quota_core.brokers.ClusterSettings.disagreements`)."""
        return self.broker_settings().window()
