from __future__ import annotations

import re

from litellm_perfkit._wire._headers import format_ms, format_server_timing, metric_name, parse_traceparent

# W3C Server Timing: server-timing = #server-timing-metric
# server-timing-metric = metric-name *( OWS ";" OWS server-timing-param )
# metric-name = token ; server-timing-param = server-timing-param-name OWS "=" OWS value
TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
PARAM = rf"{TOKEN}[ \t]*=[ \t]*(?:{TOKEN}|\"[^\"]*\")"
METRIC = rf"{TOKEN}(?:[ \t]*;[ \t]*{PARAM})*"
HEADER = re.compile(rf"^{METRIC}(?:[ \t]*,[ \t]*{METRIC})*$")


def parse(value: str) -> dict[str, float]:
    assert HEADER.match(value), value
    out = {}
    for metric in value.split(","):
        name, _, param = metric.strip().partition(";")
        key, _, dur = param.partition("=")
        assert key.strip() == "dur"
        out[name] = float(dur)
    return out


def test_server_timing_matches_the_w3c_grammar() -> None:
    value = format_server_timing([("auth", 410_000), ("hooks.pre_call", 1_000), ("upstream", 61_200_000)]).decode()
    assert parse(value) == {"auth": 0.41, "hooks.pre_call": 0.001, "upstream": 61.2}


def test_milliseconds_have_three_decimals_rounded_half_up() -> None:
    cases = {
        0: "0.000",
        499: "0.000",
        500: "0.001",
        410_000: "0.410",
        61_200_000: "61.200",
        123_456_789: "123.457",
        1_999_999_999: "2000.000",
        -5: "0.000",
    }
    assert {ns: format_ms(ns) for ns in cases} == cases
    for ns in range(0, 3_000_000_000, 7_919_999):
        assert abs(float(format_ms(ns)) - ns / 1e6) <= 0.0005


def test_stage_names_become_tokens() -> None:
    assert metric_name("my stage/δ") == "my_stage__"
    assert HEADER.match(format_server_timing([("a b", 1), ("", 2)]).decode())


def test_traceparent_parsing() -> None:
    good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert parse_traceparent(good) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 1)
    assert parse_traceparent(good.upper()) is not None
    for bad in [
        None,
        "",
        "garbage",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        good + "-extra",
    ]:
        assert parse_traceparent(bad) is None, bad
    # A future version may carry more fields.
    assert parse_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-x") is not None
