"""perfkit bench --instances: what each instance answered, from perfkit's
Prometheus page, and the spend logs checked against it (_bench/_instances.py,
_bench/_render_deploy.py)."""

from __future__ import annotations

from typing import Any

from litellm_perfkit._bench._instances import chat_answers
from litellm_perfkit._bench._render_deploy import spend_check

PAGE = """\
# HELP perfkit_requests_total Requests served.
# TYPE perfkit_requests_total counter
perfkit_requests_total{error_type="",http_request_method="POST",http_response_status_code="200",http_route="/v1/chat/completions",perfkit_recorded="true"} 40
perfkit_requests_total{error_type="",http_request_method="POST",http_response_status_code="200",http_route="/v1/chat/completions",perfkit_recorded="false"} 2
perfkit_requests_total{error_type="http_429",http_request_method="POST",http_response_status_code="429",http_route="/v1/chat/completions",perfkit_recorded="true"} 7
perfkit_requests_total{error_type="",http_request_method="POST",http_response_status_code="200",http_route="/key/generate",perfkit_recorded="true"} 1
perfkit_request_duration_seconds_count{http_route="/v1/chat/completions",http_response_status_code="200"} 42
"""


def test_the_chat_requests_an_instance_answered_are_counted_by_status() -> None:
    assert chat_answers(PAGE) == {"200": 42, "429": 7}
    assert chat_answers("") == {}


def _deployment(rows: int, successes: int, answered: int) -> Any:
    return {"spend_log_rows": rows, "spend_log_successes": successes, "answered": answered}


def test_spend_logs_equal_to_the_requests_answered_are_said_so() -> None:
    line = spend_check(_deployment(50, 42, 42))
    assert line is not None and "equal to the 42 chat requests the proxies answered 200" in line
    assert "warning" not in line


def test_spend_logs_that_differ_from_the_requests_answered_are_a_warning() -> None:
    line = spend_check(_deployment(40, 40, 42))
    assert line is not None
    assert "warning: spend logs DIFFER from the requests answered: 40 success rows for 42" in line
    assert "+2 requests without a row" in line


def test_without_a_database_nothing_is_said() -> None:
    assert spend_check({"spend_log_rows": None, "spend_log_successes": None, "answered": None}) is None  # type: ignore[typeddict-item]
