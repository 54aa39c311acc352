"""The bench's lines on a deployment: what ran, the keys compared, the spend
logs against the requests answered, the instances and the rate limits."""

from __future__ import annotations

from ..types import BenchDeploymentInfo, BenchKeys, BenchRateLimits, BenchRun

__all__ = ["deployment_lines", "spend_check"]


def spend_check(deployment: BenchDeploymentInfo) -> str | None:
    """One line: the spend logs of answered requests against the requests the proxies answered."""
    rows, successes, answered = (
        deployment["spend_log_rows"],
        deployment.get("spend_log_successes"),
        deployment.get("answered"),
    )
    if rows is None:
        return None
    written = f"spend-log rows written (LiteLLM_SpendLogs): {rows}"
    if successes is None or answered is None:
        return written
    written += f", {successes} of them for answered requests (status success)"
    if successes == answered:
        return f"{written}; equal to the {answered} chat requests the proxies answered 200 (perfkit's tally, warm-ups included)"
    return (
        f"{written}\nwarning: spend logs DIFFER from the requests answered: {successes} success rows for {answered} chat "
        f"requests answered 200 (perfkit's tally, warm-ups included): {answered - successes:+d} requests without a row"
    )


def _keys(keys: BenchKeys) -> list[str]:
    requests = keys["requests"]
    lines = [
        "",
        f"own CPU per request by key, the master key ({requests['master']} requests) against a virtual key "
        f"({requests['virtual']}), interleaved on the same proxy; virtual - master with its bootstrap 95% interval "
        "(perfkit compare's; auth always, other stages when their interval excludes 0):",
        "",
        "| stage | master key ms | virtual key ms | difference ms | 95% interval | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    for row in keys["stages"]:
        interval = "n/a" if row["low_ms"] is None else f"[{row['low_ms']:+.3f}, {row['high_ms']:+.3f}]"
        lines.append(
            f"| {row['stage']} | {row['master_ms']:.3f} | {row['virtual_ms']:.3f} | {row['difference_ms']:+.3f} | {interval} | {row['verdict']} |"
        )
    return lines


def _rate_limits(limits: BenchRateLimits) -> list[str]:
    allowed = limits["deployments"] * limits["rpm_per_deployment"]
    minutes = "; ".join(f"{m['minute']} {m['ok']} ok, {m['rate_limited']} 429" for m in limits["minutes"])
    verdict = "held" if limits["held"] else "EXCEEDED"
    return [
        "",
        f"rate limits: {limits['deployments']} deployments x {limits['rpm_per_deployment']} rpm = {allowed} a minute "
        f"(the router's counts); measured requests by UTC minute: {minutes}; limits {verdict}",
    ]


def _statuses(answered: dict[str, int]) -> str:
    return ", ".join(f"{n} x {status}" for status, n in answered.items())


def deployment_lines(run: BenchRun) -> list[str]:
    lines: list[str] = []
    deployment = run.get("deployment")
    if deployment:
        startup = ", ".join(f"{part} {seconds:.1f} s" for part, seconds in deployment["startup_s"].items())
        lines += ["", f"deployment: {deployment['description']}", f"started: {startup}"]
        check = spend_check(deployment)
        if check:
            lines.append(check)
    instances = run.get("instances")
    if instances and len(instances) > 1:
        served = "; ".join(f"{i['url']} {_statuses(i['answered'])}" for i in instances)
        total: dict[str, int] = {}
        for instance in instances:
            for status, n in instance["answered"].items():
                total[status] = total.get(status, 0) + n
        lines += [
            "",
            f"{len(instances)} instances, the load spread by the driver; chat requests answered: {served}; "
            f"all together {_statuses(dict(sorted(total.items())))}",
        ]
    keys = run.get("keys")
    if keys:
        lines += _keys(keys)
    limits = run.get("rate_limits")
    if limits:
        lines += _rate_limits(limits)
    return lines
