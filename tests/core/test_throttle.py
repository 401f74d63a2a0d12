"""Kafka's throttle arithmetic (QuotaUtils.throttleTime, Rate.windowSize)."""
import math

import pytest

from quota_core import estimate_throttle, rate_window_ms, throttle_time_ms
from quota_core.throttling.throttle import mutation_throttle_ms
from quota_core.domain.units import format_bytes, parse_byte_rate


@pytest.mark.parametrize("observed, quota, window, cap, expected", [
    (100.0, 100.0, 10_000, None, 0),         # at quota: not throttled
    (99.0, 100.0, 10_000, None, 0),
    (150.0, 100.0, 10_000, None, 5_000),     # 50 % over a 10 s window
    (300.0, 100.0, 10_000, None, 20_000),    # produce/fetch are not capped
    (300.0, 100.0, 10_000, 1_000, 1_000),    # request/connection are capped at one window
    (100.00001, 100.0, 10_000, None, 0),     # rounds to 0 ms
    (101.0, 100.0, 11_000, None, 110),
    (5.0, math.nan, 10_000, None, 0),        # a NaN quota never throttles
])
def test_throttle_time(observed, quota, window, cap, expected):
    assert throttle_time_ms(observed, quota, window, cap) == expected


@pytest.mark.parametrize("elapsed, expected", [
    (0, 10_000),             # a fresh sensor: padded to (11 - 1) whole windows
    (3_500, 3_500 + 7_000),  # 3 whole windows seen: 7 more added
    (9_999, 9_999 + 1_000),
    (10_500, 10_500),        # enough history: the real elapsed time
    (None, 10_000),
])
def test_rate_window(elapsed, expected):
    assert rate_window_ms(elapsed) == expected


def test_estimate_caps_request_percentage_but_not_byte_rates():
    request = estimate_throttle("request_percentage", 300.0, 100.0)
    assert (request.throttle_ms, request.capped) == (1_000, True)
    produce = estimate_throttle("producer_byte_rate", 3 * 2**20, 2**20)
    assert (produce.throttle_ms, produce.capped, produce.throttled) == (20_000, False, True)
    assert produce.usage_ratio == 3.0
    unlimited = estimate_throttle("consumer_byte_rate", 10.0**9, None)
    assert (unlimited.throttle_ms, unlimited.usage_ratio) == (0, None)


@pytest.mark.parametrize("text, value", [
    ("2048", 2048), ("10MB", 10_000_000), ("1.5MiB", 1_572_864), ("1kb", 1000), ("1KiB", 1024),
    ("2 GiB", 2 * 2**30), ("1e3", 1000), ("512KiB/s", 524288)])
def test_parse_byte_rate(text, value):
    assert parse_byte_rate(text) == value


@pytest.mark.parametrize("text", ["", "ten", "10XB", "1.2.3", "5 MB MB"])
def test_parse_byte_rate_rejects(text):
    from quota_core import ParseError

    with pytest.raises(ParseError, match="is not a byte rate"):
        parse_byte_rate(text)


@pytest.mark.parametrize("value, text", [
    (1048576, "1 MiB"), (1_500_000, "1.5 MB"), (512, "512 B"), (100 * 1024, "100 KiB"),
    (20_000_000, "20 MB"), (1536 * 1024, "1.5 MiB"), (2**40 * 2048, "2252 TB"),
    (19_531_250 * 1024, "20 GB")])
def test_format_bytes(value, text):
    assert format_bytes(value) == text


@pytest.mark.parametrize("text", ["-5MB", "nan", "inf", "-1"])
def test_signed_and_special_byte_rates_parse_so_validation_can_refuse_them(text):
    """One rule, one message, one exit code for every key: parsing passes them on and
    validation refuses them ("must be greater than 0", "NaN is not a quota")."""
    from quota_core import Alteration, Entity, Op, alteration_problems

    value = parse_byte_rate(text)
    problems = alteration_problems(Alteration(Entity.of(user="a"),
                                              (Op("producer_byte_rate", value),)))
    assert len(problems) == 1


@pytest.mark.parametrize("observed, quota, window, expected", [
    (1000.25, 1000.0, 10_000, 3),  # exactly 2.5 ms: Java's Math.round gives 3, Python's round 2
    (1024.375, 1024.0, 4096, 2),   # exactly 1.5 ms → 2 either way
    (1024.5, 1024.0, 9216, 5),     # exactly 4.5 ms → 5 (half up), not 4 (half to even)
])
def test_throttle_rounds_half_up_as_kafka(observed, quota, window, expected):
    assert throttle_time_ms(observed, quota, window) == expected


@pytest.mark.parametrize("tokens, rate, expected", [
    (-5.0, 10.0, 500),      # 5 tokens owed at 10/s: wait 500 ms
    (-0.0025, 1.0, 3),      # exactly 2.5 ms rounds half up
    (0.0, 10.0, 0),         # not negative: no wait
    (3.0, 10.0, 0),
    (float("nan"), 10.0, 0),
])
def test_mutation_throttle_is_a_token_bucket(tokens, rate, expected):
    assert mutation_throttle_ms(tokens, rate) == expected
