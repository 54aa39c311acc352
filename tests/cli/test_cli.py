"""Bad input gets one clear line and a non-zero exit code, never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import os
import pathlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from litellm_perfkit._cli._common import fraction
from litellm_perfkit._cli._main import build_parser, command_parsers


def perfkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nope"], "invalid choice"),
        (["mock", "--ttft-ms", "-1"], "not a number >= 0"),
        (["mock", "--config", "/no/such/file.json"], "cannot read mock config"),
        (["load", "--url", "ftp://x"], "is not an http:// URL"),
        (["load", "--url", "http://127.0.0.1:1", "--warmup", "soon"], "--warmup"),
        (["load", "--url", "http://127.0.0.1:1", "--duration", "ten"], "is not a duration"),
        (["load", "--url", "http://127.0.0.1:1", "--out", "a.jsonl", "--out", "b.jsonl"], "give one file of each kind"),
        (["load", "--url", "http://127.0.0.1:1", "--api-key-file", "/no/such/key"], "cannot read --api-key-file"),
        (["load", "--url", "http://127.0.0.1:1", "--api-key", "sk-x"], "unrecognized arguments: --api-key"),
        (["compare", "a.json", "b.json", "--fail-above", "5"], "'5' is not a fraction from 0 to 1: write 0.05 or 5%"),
        (["mock", "--error-500-fraction", "1.5"], "is not a fraction from 0 to 1"),
        (["mock", "--rpm", "-1"], "not a whole number >= 0"),
        (["flamegraph", "--diff", "a", "b", "--out", "x.folded", "--out", "y.folded"], "give one file of each kind"),
        (["flamegraph", "--out", "a.svg", "--out", "b.svg", "--", "true"], "one recording, one --out"),
        (["run", "--exporter", "otlp", "--out", "spans.jsonl", "--", "true"], "--out writes the spans to a file"),
        (["run", "--exporter", "jsonl", "--", "true"], "--exporter jsonl needs --out FILE"),
        (["run", "--sampler", "sometimes", "--", "true"], "invalid choice"),
        (["bench", "--warmup", "-3r"], "--warmup"),
        (["bench", "--direct-duration", "0"], "the baseline needs a duration > 0"),
        (["load", "--url", "http://127.0.0.1:1", "--header", "nocolon"], "NAME:VALUE"),
        (["run"], "give the command to run after --"),
        (["run", "--", "no-such-command-xyz"], "command not found"),
        (["bench", "--workers", "x"], "worker counts"),
        (["bench", "--config", "/no/such.yaml"], "no such file"),
        (["bench", "--proxy-url", "http://x:1", "--litellm-version", "1.103.0"], "do not combine"),
        (["bench", "--provider", "azure", "--config", "/etc/hostname"], "--provider sets the embedded"),
        (["bisect", "--good", "1.0", "--bad", "2.0", "--package", "my-gw"], "needs --proxy-command"),
        (["bisect", "--good", "1.0", "--bad", "2.0", "--min-change", "150%"], "--min-change"),
        (
            ["bisect", "--good", "1.0", "--bad", "2.0", "--min-pairs", "5", "--max-pairs", "2"],
            "is more than --max-pairs",
        ),
        (["run", "--prometheus-port", "http", "--", "true"], "--prometheus-port"),
        (["run", "--record-rate", "0", "--", "true"], "neither 'all' nor a number of requests a second > 0"),
        (["bench", "--record-rate", "5"], "--record-rate sets what --perturbation measures"),
        (["bench", "--model", "gpt-4o"], "the embedded config serves fake-openai-endpoint with the key sk-1234"),
        (["compare", "--live", "1.83.14"], "give two or more"),
        (["bisect", "--good", "1.0", "--bad", "2.0", "--resolution", "0"], "--resolution"),
        (["bisect", "--good", "1.0", "--bad", "2.0", "--repeats", "3"], "unrecognized arguments: --repeats"),
        (["bisect", "--good", "1.0", "--bad", "2.0", "--driver", "locust"], "unrecognized arguments: --driver"),
        (["bisect", "--good", "1.0", "--bad", "2.0", "--stream-concurrency", "4"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line(args: list[str], says: str) -> None:
    result = perfkit(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.stderr


def test_perfkit_run_a_script_whose_interpreter_is_gone_is_one_line(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "gateway"
    script.write_text("#!/no/such/python\n")
    script.chmod(0o755)
    result = perfkit("run", "--record-rate", "all", "--", str(script))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot run {script}" in lines[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("flags", "env", "says"),
    [
        ((), "", "recording about 10 requests a second per worker"),
        (("--record-rate", "2.5"), "", "recording about 2.5 requests a second per worker"),
        ((), "bad", "recording about 10 requests a second per worker"),  # the workers warn, and use the default
        (("--record-rate", "ALL"), "", None),
        ((), "all", None),
    ],
)
def test_perfkit_run_says_how_many_requests_it_records(flags: tuple[str, ...], env: str, says: str | None) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "run", *flags, "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PERFKIT_RECORD_RATE": env},
    )
    assert result.returncode == 0
    assert result.stderr.strip() == (
        ""
        if says is None
        else f"perfkit run: {says}, every request below that "
        "(--record-rate all: every request, at a cost: docs/overhead.md)"
    )


def test_the_command_line_loads_a_command_s_options_only_when_it_runs() -> None:
    code = "import sys, litellm_perfkit._cli._main; print(sorted(m for m in sys.modules if m.startswith(('litellm_perfkit._bench', 'litellm_perfkit._load', 'litellm_perfkit._mock', 'litellm_perfkit._profile'))))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr[-2000:]


def test_every_command_has_help_with_examples() -> None:
    top = perfkit("--help")
    assert top.returncode == 0 and "Traceback" not in top.stderr, top.stderr
    commands = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)][
        0
    ].choices
    assert {"bench", "bisect", "compare", "report", "run", "load", "mock", "flamegraph"} <= set(commands)
    for command in commands:
        result = perfkit(command, "--help")
        assert command in top.stdout
        assert result.returncode == 0 and "examples:" in result.stdout, (command, result.stderr[-500:])


def test_every_flag_of_every_command_has_help() -> None:
    missing = [
        f"perfkit {name} {action.option_strings or action.dest}"
        for name, parser in command_parsers().items()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("text", "seconds"), [("20", 20.0), ("20s", 20.0), ("500ms", 0.5), ("1.5m", 90.0), ("1h", 3600.0), ("0", 0.0)]
)
def test_every_duration_flag_takes_the_same_forms(text: str, seconds: float) -> None:
    from litellm_perfkit._cli._common import duration, warmup

    assert duration(text) == seconds
    assert warmup(text) == (seconds, 0)
    assert warmup("100r") == (0.0, 100)


def test_load_against_nothing_fails_clearly() -> None:
    result = perfkit(
        "load", "--url", "http://127.0.0.1:1", "--requests", "2", "--concurrency", "1", "--progress", "off"
    )
    assert result.returncode == 1
    assert "every request failed: connection refused" in result.stderr


def test_version_names_the_request_path_and_a_bad_speedups_value_is_one_warning() -> None:
    assert "(request path: C accelerator)" in perfkit("--version").stdout
    off = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PERFKIT_SPEEDUPS": "off"},
        timeout=60,
    )
    assert "(request path: pure Python, PERFKIT_SPEEDUPS=off)" in off.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "litellm_perfkit._cli", "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PERFKIT_SPEEDUPS": "fast"},
        timeout=60,
    )
    assert bad.returncode == 0 and "C accelerator" in bad.stdout
    assert bad.stderr.strip() == "perfkit: PERFKIT_SPEEDUPS='fast' is not 'on' or 'off'; using 'on'"


@pytest.mark.parametrize(("text", "value"), [("0.05", 0.05), ("5%", 0.05), ("0", 0.0), ("100%", 1.0), ("1", 1.0)])
def test_every_fraction_flag_takes_a_fraction_or_a_percent(text: str, value: float) -> None:
    assert fraction(text) == pytest.approx(value)
    parser = build_parser()
    fails = parser.parse_args(["compare", "a", "b", "--fail-above", text]).fail_above
    mock = parser.parse_args(["mock", "--timeout-fraction", text]).timeout_fraction
    bisect = parser.parse_args(["bisect", "--good", "1", "--bad", "2", "--min-change", text]).min_change
    ratio = parser.parse_args(["run", "--record-ratio", text]).record_ratio
    assert fails == mock == bisect == ratio == pytest.approx(value)


def test_load_sends_the_key_from_a_file_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from litellm_perfkit._cli._load import build

    def key(*flags: str) -> str | None:
        args = build_parser().parse_args(["load", "--url", "http://127.0.0.1:1", *flags])
        return build(args)[0].api_key

    monkeypatch.delenv("PERFKIT_API_KEY", raising=False)
    assert key() == "sk-1234"
    monkeypatch.setenv("PERFKIT_API_KEY", "sk-from-env")
    assert key() == "sk-from-env"
    (tmp_path / "key").write_text("sk-from-file\n")
    assert key("--api-key-file", str(tmp_path / "key")) == "sk-from-file"
    monkeypatch.setenv("PERFKIT_API_KEY", "")
    assert key() is None  # empty: no Authorization header


def test_load_and_flamegraph_outputs_take_their_kind_from_the_name() -> None:
    from litellm_perfkit._cli._common import outputs
    from litellm_perfkit._cli._flamegraph import DIFF_OUTPUTS
    from litellm_perfkit._cli._load import OUTPUTS

    assert outputs(["run.json", "requests.JSONL"], OUTPUTS, "result") == {
        "result": "run.json",
        "per-request lines": "requests.JSONL",
    }
    assert outputs(["d.speedscope.json", "d.folded"], DIFF_OUTPUTS, "speedscope diff") == {
        "speedscope diff": "d.speedscope.json",
        "folded stacks": "d.folded",
    }
    assert outputs(None, OUTPUTS, "result") == {}


def _defaults(command: str) -> dict[str, object]:
    """Every flag of ``command`` that has a default (a value, not None or a switch's False)."""
    return {
        action.dest: action.default
        for action in command_parsers()[command]._actions
        if not isinstance(action, argparse._HelpAction)
        and action.default is not None
        and action.default is not False
        and action.default != []
        and action.dest != "run"
    }


def test_every_cli_default_is_the_default_of_the_option_it_fills() -> None:
    from litellm_perfkit._bench._bisect import bisect
    from litellm_perfkit._bench._bisect_bench import BISECT_BENCH, METRIC
    from litellm_perfkit._bench._options import BenchOptions
    from litellm_perfkit._load import LoadPlan, Workload, run_load
    from litellm_perfkit._mock import Deployment, MockConfig, ModelProfile
    from litellm_perfkit._profile import FlamegraphOptions

    def signature(function: object, name: str) -> object:
        return inspect.signature(function).parameters[name].default  # type: ignore[arg-type]

    def bench_flags(options: BenchOptions) -> dict[str, object]:
        return {
            "concurrency": options.concurrency,
            "stream_concurrency": options.stream_concurrency,
            "duration": options.duration_s,
            "warmup": (options.warmup_s, options.warmup_requests),
            "prompt_repeats": options.prompt_repeats,
            "driver": options.driver,
            "processes": options.processes,
            "progress": options.progress,
            "ttft_ms": options.ttft_ms,
            "itl_ms": options.itl_ms,
            "chunks": options.chunks,
        }

    bench = BenchOptions()
    plan = LoadPlan()
    profile = ModelProfile()
    expected: dict[str, dict[str, object]] = {
        "bench": {
            **bench_flags(bench),
            "idle": bench.idle_s,
            "direct_duration": bench.direct_duration_s,
            "workers": bench.workers,
            "deployment": bench.deployment,
            "instances": bench.instances,
            "scenario": bench.scenario,
            "rpm": bench.rpm,
            "headline": bench.headline,
            "label": bench.label,
            "flamegraph": bench.flamegraph,
            "out": "perfkit-bench.json",
        },
        "bisect": {
            **{
                name: value
                for name, value in bench_flags(BISECT_BENCH).items()
                if name not in ("stream_concurrency", "driver", "processes", "progress")  # a pair has no use for them
            },
            "min_pairs": signature(bisect, "min_pairs"),
            "max_pairs": signature(bisect, "max_pairs"),
            "resolution": signature(bisect, "target"),
            "min_change": signature(bisect, "min_change"),
            "functions": "profile",
            "metric": METRIC,
            "package": "litellm",  # the CLI's own: no option declares them
            "pip_args": "",
            "out": "perfkit-bisect.json",
        },
        "load": {
            "arrival": plan.arrival,
            "warmup": (plan.warmup_s, plan.warmup_requests),
            "ramp": plan.ramp_s,
            "timeout": plan.timeout_s,
            "prompt_repeats": Workload("http://127.0.0.1:1").prompt_repeats,
            "traceparent": Workload("http://127.0.0.1:1").traceparent,
            **{name: signature(run_load, name) for name in ("repeats", "processes", "driver", "progress")},
        },
        "mock": {
            "host": MockConfig().host,
            "ttft_ms": profile.ttft_ms,
            "itl_ms": profile.itl_ms,
            "distribution": profile.distribution,
            "spread_ms": profile.spread_ms,
            "jitter_ms": profile.jitter_ms,
            "chunks": profile.chunks,
            "tokens_per_chunk": profile.tokens_per_chunk,
            "error_500_fraction": profile.error_500_fraction,
            "error_429_fraction": profile.error_429_fraction,
            "timeout_fraction": profile.timeout_fraction,
            "disconnect_fraction": profile.disconnect_fraction,
            "malformed_fraction": profile.malformed_fraction,
            "rpm": Deployment("d", 1).rpm,
            "tpm": Deployment("d", 1).tpm,
        },
        "flamegraph": {"sample_hz": FlamegraphOptions(output="x").sample_hz},
        "run": {},
        "compare": {},
        "report": {},
    }
    assert {command: _defaults(command) for command in expected} == expected


def test_bench_sends_a_configured_gateway_its_model_and_key_and_never_records_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from litellm_perfkit._bench._options import MASTER_KEY, MODEL, BenchOptions
    from litellm_perfkit._cli._bench import _gateway

    def gateway(*flags: str) -> dict[str, object]:
        return _gateway(build_parser().parse_args(["bench", *flags]))

    monkeypatch.setenv("PERFKIT_API_KEY", "sk-from-env")
    assert gateway() == {}  # the embedded config: its own model and master key
    assert gateway("--proxy-url", "http://127.0.0.1:1") == {"model": MODEL, "api_key": "sk-from-env"}
    (tmp_path / "key").write_text("sk-from-file")
    flags = ("--proxy-url", "http://127.0.0.1:1", "--model", "gpt-4o", "--api-key-file", str(tmp_path / "key"))
    assert gateway(*flags) == {"model": "gpt-4o", "api_key": "sk-from-file"}
    monkeypatch.delenv("PERFKIT_API_KEY")
    assert gateway("--proxy-url", "http://127.0.0.1:1")["api_key"] == MASTER_KEY
    recorded = BenchOptions(api_key="sk-secret", model="gpt-4o").recorded()
    assert recorded["model"] == "gpt-4o" and "api_key" not in recorded and "sk-secret" not in str(recorded)


def test_bench_measures_the_mock_directly_for_direct_duration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from litellm_perfkit._bench import BenchError
    from litellm_perfkit._bench._options import BenchOptions
    from litellm_perfkit._cli._main import main

    given: list[BenchOptions] = []

    def bench(options: BenchOptions) -> None:
        given.append(options)
        raise BenchError("stopped before starting anything")

    monkeypatch.setattr("litellm_perfkit._bench.run_bench", bench, raising=False)
    assert main(["bench", "--direct-duration", "1.5", "--out", str(tmp_path / "b.json")]) == 2
    assert main(["bench", "--out", str(tmp_path / "b.json")]) == 2
    assert [options.direct_duration_s for options in given] == [1.5, BenchOptions().direct_duration_s]


def _documented_commands() -> list[tuple[str, list[str]]]:
    """(file, words) of every whole ``perfkit ...`` line in the docs' bash blocks
    (tests/docs checks every command cited, fragments too, for its flags' names)."""
    from tests.docs.commands import PAGES

    found = []
    for doc in PAGES:
        for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", doc.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"^(\w+=\S*\s+)+", "", line.strip())  # VAR=value perfkit ...
                if line.startswith("perfkit "):
                    found.append((doc.name, shlex.split(re.sub(r"\$\([^)]*\)", "1", line), comments=True)))
    return found


def test_every_whole_perfkit_command_in_the_docs_parses_values_included() -> None:
    commands = _documented_commands()
    assert len(commands) > 20
    wrong = []
    for doc, words in commands:
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                build_parser().parse_args(words[1:])
        except SystemExit as exit:
            if exit.code:
                wrong.append(f"{doc}: {' '.join(words)}: {errors.getvalue().strip()}")
    assert wrong == []
