"""The one module that reaches into kafka-python's internals (its asyncio-free network layer
and protocol classes), for API keys 48/49, which librdkafka lacks.

kafka-python 3.0.12 is pinned (requirements.txt): these are not its public API, and
tests/backends/test_kafka_wire.py fails loudly, naming what moved, when an upgrade changes them.
:mod:`quota_core.backends.kafka` imports kafka-python only through here.

Start-up matters (a CLI round trip is mostly imports), so the package ``__init__`` of
kafka-python, which imports its consumer, producer and admin client (about 40 % of its import
time, none of it used here), is deferred: ``kafka`` is registered without running it, and the
first use of anything it defines (``from kafka import KafkaProducer`` in other code) runs it
then. So are ``kafka.protocol.admin`` and ``kafka.protocol.consumer``, which build every
admin and consumer message class (the connection code asks them for two). Nothing changes
for code that needs the whole package.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from typing import Mapping

#: The kafka-python release these internals were written against.
KAFKA_PYTHON_VERSION = "3.0.12"

__all__ = ["KAFKA_PYTHON_VERSION", "RECEIVE_MAX_BYTES", "Errors", "KafkaConnectionManager",
           "NetworkSelector", "AlterClientQuotasRequest", "DescribeClientQuotasRequest",
           "MetadataRequest", "RawDescribeClientQuotasRequest", "oversized_frame",
           "request_may_have_left"]

#: The largest answer accepted (``receive_message_max_bytes``). kafka-python's connection
#: manager defaults to 1,000,000 bytes, which a DescribeClientQuotas answer passes at about
#: 20,000 entries: its parser then raises InvalidReceiveError("Invalid frame length: N") and
#: aborts the connection, and a caller that retries on connection errors waits for nothing.
#: The protocol cannot page a describe, so the answer must fit: 100 MB (librdkafka's
#: ``receive.message.max.bytes`` default) is over 500,000 entries with four keys each.
RECEIVE_MAX_BYTES = 100_000_000


def _register_package_lazily(name: str, alone: Mapping[str, str] | None = None) -> bool:
    """Put package ``name`` in sys.modules without running its ``__init__``, which runs on
    the first use of a name it defines. ``alone``: names that one submodule defines, taken
    from that submodule without running the ``__init__`` (it imports every sibling). True
    when it was registered so (False: already imported, or not a package)."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return False  # not installed as a package: the imports below fail with the plain error
    package = importlib.util.module_from_spec(spec)

    def __getattr__(attr: str):
        if alone and attr in alone:
            return getattr(importlib.import_module(f"{name}.{alone[attr]}"), attr)
        # Something outside the network layer needs the package itself: run its __init__.
        if package.__dict__.pop("__getattr__", None) is not None:
            spec.loader.exec_module(package)  # type: ignore[union-attr]
        return getattr(package, attr)

    package.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)
    return True


if _register_package_lazily("kafka"):
    # What kafka/__init__.py does besides imports: keep its log records off stderr.
    logging.getLogger("kafka").addHandler(logging.NullHandler())
# The protocol's admin and consumer packages load every message schema they hold (about a
# quarter of the start-up); the connection code needs two of their classes.
import kafka.protocol  # noqa: E402

_register_package_lazily("kafka.protocol.admin", {"ListGroupsRequest": "groups"})
_register_package_lazily("kafka.protocol.consumer", {"OffsetFetchRequest": "group"})

import kafka.errors as Errors  # noqa: E402
from kafka.net.manager import KafkaConnectionManager  # noqa: E402
from kafka.net.selector import NetworkSelector  # noqa: E402
from kafka.protocol.admin.client_quotas import (  # noqa: E402
    AlterClientQuotasRequest, DescribeClientQuotasRequest, DescribeClientQuotasResponse)
from kafka.protocol.metadata import MetadataRequest  # noqa: E402

from quota_core.backends.kafka_decode import DescribeAnswer, read_answer  # noqa: E402


class _RawAnswerType:
    """Stands in for ``DescribeClientQuotasResponse[version]`` in kafka-python's parser
    (``KafkaProtocol._process_response``: ``parse_header(buf)`` then ``decode(buf)``): the
    header is read by kafka-python, the body is handed over as bytes (:mod:`.kafka_decode`)
    instead of becoming one object per entry, entity part and value."""

    __slots__ = ("_version", "_response")

    def __init__(self, version: int) -> None:
        self._version = version
        self._response = DescribeClientQuotasResponse[version]

    def parse_header(self, buf):
        return self._response.parse_header(buf)

    def decode(self, buf) -> DescribeAnswer:
        return read_answer(buf, buf.tell(), self._version)


class _RawAnswerHeader:
    """A request's header whose response class is :class:`_RawAnswerType`."""

    __slots__ = ("_header",)

    def __init__(self, header) -> None:
        self._header = header

    def __getattr__(self, name: str):
        return getattr(self._header, name)

    def get_response_class(self) -> _RawAnswerType:
        return _RawAnswerType(self._header.request_api_version)


class RawDescribeClientQuotasRequest(DescribeClientQuotasRequest, init=False):
    """DescribeClientQuotasRequest whose answer arrives as a :class:`DescribeAnswer` (the
    bytes and the decoded head), not as kafka-python's objects."""

    @property
    def header(self):
        header = self._header
        return None if header is None else _RawAnswerHeader(header)


def oversized_frame(exc: BaseException) -> int | None:
    """The size of an answer the parser refused as larger than ``receive_message_max_bytes``
    (kafka.protocol.parser: ``InvalidReceiveError('Invalid frame length: %d')``), else None."""
    if isinstance(exc, Errors.InvalidReceiveError):
        text = str(exc)
        if "Invalid frame length:" in text:
            try:
                return int(text.rsplit(":", 1)[1].strip())
            except ValueError:
                return None
    return None


def request_may_have_left(conn) -> bool:
    """Whether a request given to ``conn.send_request`` may have reached the broker: it did
    unless the connection failed before its set-up completed (requests sent while a connection
    initialises are buffered, and written only once its ``init_future`` succeeds)."""
    init = conn.init_future
    return bool(init.is_done and init.succeeded())
