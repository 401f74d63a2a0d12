"""kafka-python's internals, used only through quota_core.backends.kafka_wire, are where we expect them.

These are not kafka-python's public API. When an upgrade moves any of them, this fails first,
naming what moved, instead of the backend failing obscurely on a real cluster.
"""
from __future__ import annotations

import importlib.metadata
import inspect
import subprocess
import sys

import pytest

from quota_core.backends import kafka_wire

# Every internal name kafka_backend touches: (object, attribute).
USED = [
    (kafka_wire.KafkaConnectionManager, name) for name in (
        "bootstrap_async", "broker_version_data", "close", "cluster", "get_connection",
        "least_loaded_node", "send", "wait_for")
] + [
    (kafka_wire.NetworkSelector, name) for name in ("call_later", "cancel", "close", "run",
                                                    "sleep", "start", "stop")
] + [
    (kafka_wire.Errors, name) for name in (
        "IncompatibleBrokerVersion", "KafkaConnectionError", "KafkaError", "KafkaTimeoutError",
        "NodeNotReadyError", "RequestTimedOutError", "SaslAuthenticationFailedError",
        "IllegalSaslStateError", "UnsupportedSaslMechanismError", "InvalidReceiveError",
        "for_code")
] + [
    (kafka_wire.DescribeClientQuotasRequest, "ComponentData"),
    (kafka_wire.AlterClientQuotasRequest, "EntryData"),
    # The raw describe answer (kafka_wire._RawAnswerType) stands in for these in the parser.
    (kafka_wire.DescribeClientQuotasResponse, "parse_header"),
    (kafka_wire.DescribeClientQuotasRequest, "with_header"),
    (kafka_wire.DescribeClientQuotasRequest, "header"),
]


def test_the_pinned_kafka_python_is_installed():
    installed = importlib.metadata.version("kafka-python")
    assert installed == kafka_wire.KAFKA_PYTHON_VERSION, (
        f"kafka-python {installed} is installed but quota_core.backends.kafka_wire was written against "
        f"{kafka_wire.KAFKA_PYTHON_VERSION}: re-check every name in tests/backends/test_kafka_wire.py, "
        f"then update KAFKA_PYTHON_VERSION and requirements.txt together.")


@pytest.mark.parametrize("owner, name", USED, ids=[f"{getattr(o, '__name__', o)}.{n}"
                                                   for o, n in USED])
def test_internal_name_exists(owner, name):
    instance_attrs = {"cluster", "broker_version_data"}  # set in __init__
    if name in instance_attrs:
        assert name in inspect.getsource(owner.__init__), f"{owner.__name__}.{name} moved"
    else:
        assert hasattr(owner, name), f"{getattr(owner, '__name__', owner)}.{name} moved"


def test_constructor_keywords_still_accepted():
    params = inspect.signature(kafka_wire.KafkaConnectionManager.__init__).parameters
    assert "net" in params or len(params) >= 2
    selector = inspect.signature(kafka_wire.NetworkSelector.__init__).parameters
    assert "client_id" in selector or any(p.kind is p.VAR_KEYWORD for p in selector.values())


def test_the_package_init_is_deferred_but_still_works():
    code = ("import sys, quota_core.backends.kafka_wire;"
            "print('kafka.consumer' in sys.modules);"
            "from kafka import KafkaProducer;"
            "print(KafkaProducer.__name__, 'kafka.consumer' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["False", "KafkaProducer", "True"]


def test_the_deferred_protocol_packages_still_give_every_class():
    """kafka.protocol.admin and .consumer are registered without their __init__ (which builds
    every admin and consumer message class); the two classes kafka-python's connection code
    asks for come from their own modules, and any other name runs the __init__ then."""
    code = ("import sys, quota_core.backends.kafka_wire;"
            "print('kafka.protocol.admin.topics' in sys.modules,"
            " 'kafka.protocol.consumer.fetch' in sys.modules);"
            "from kafka.protocol.admin import CreateTopicsRequest, ListGroupsRequest;"
            "from kafka.protocol.consumer import FetchRequest, OffsetFetchRequest;"
            "import kafka.protocol.admin as admin;"
            "print(CreateTopicsRequest.__name__, FetchRequest.__name__,"
            " ListGroupsRequest is admin.ListGroupsRequest, len(admin.__all__) > 20)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["False", "False", "CreateTopicsRequest", "FetchRequest", "True", "True"]


def test_the_raw_describe_request_is_a_describe_request():
    """The request whose answer arrives as bytes (RawDescribeClientQuotasRequest) encodes as
    kafka-python's own, and its header asks the parser for the raw answer type."""
    raw = kafka_wire.RawDescribeClientQuotasRequest(components=[], strict=True, version=1)
    plain = kafka_wire.DescribeClientQuotasRequest(components=[], strict=True, version=1)
    for request in (raw, plain):
        request.with_header(correlation_id=5, client_id="t")
    assert raw.encode(header=True, framed=True) == plain.encode(header=True, framed=True)
    assert raw.API_KEY == plain.API_KEY == 48
    assert type(raw.header.get_response_class()).__name__ == "_RawAnswerType"
    assert raw.header.correlation_id == 5
    import kafka.protocol.parser as parser

    # How kafka-python's parser uses what the header names (see kafka_wire._RawAnswerType).
    source = inspect.getsource(parser.KafkaProtocol._process_response)
    for call in ("header.get_response_class()", "response_type.parse_header(read_buffer)",
                 "response_type.decode(read_buffer)", "self.in_flight_requests.popleft()"):
        assert call in source, f"kafka-python's parser no longer does {call}"


def test_the_receive_limit_and_the_oversized_frame_error_are_where_we_expect_them():
    """kafka-python's 1,000,000-byte default dropped DescribeClientQuotas answers of about
    20,000 entries (issue 10); the backend raises the limit and names an oversized answer."""
    import kafka.protocol.parser as parser

    assert "receive_message_max_bytes" in kafka_wire.KafkaConnectionManager.DEFAULT_CONFIG
    assert kafka_wire.KafkaConnectionManager.DEFAULT_CONFIG["receive_message_max_bytes"] \
        < kafka_wire.RECEIVE_MAX_BYTES
    assert "Invalid frame length: %d" in inspect.getsource(parser)
    error = kafka_wire.Errors.InvalidReceiveError("Invalid frame length: 1234567")
    assert kafka_wire.oversized_frame(error) == 1_234_567
    assert kafka_wire.oversized_frame(kafka_wire.Errors.KafkaConnectionError("x")) is None


def test_what_tells_whether_a_request_may_have_left():
    """A request sent while a connection initialises is buffered until its init_future
    succeeds: only then may it have reached the broker (issue 10: outcome unknown)."""
    from kafka.future import Future
    from kafka.net.connection import KafkaConnection

    for name in ("init_future", "send_request", "send_buffered"):
        assert hasattr(KafkaConnection, name), f"KafkaConnection.{name} moved"
    assert "self.initializing" in inspect.getsource(KafkaConnection.__init__)
    assert "_request_buffer.append" in inspect.getsource(KafkaConnection.send_request)

    class Conn:
        def __init__(self, future):
            self.init_future = future

    assert not kafka_wire.request_may_have_left(Conn(Future()))
    assert kafka_wire.request_may_have_left(Conn(Future().success(None)))
    assert not kafka_wire.request_may_have_left(Conn(Future().failure(ValueError("x"))))
