"""perfkit bench's --headline: which proxy the headline comes from reaches the bench, and is documented."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from litellm_perfkit._bench._options import BenchOptions
from litellm_perfkit._cli._main import main


def _given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> BenchOptions:
    from litellm_perfkit._bench import BenchError

    given: list[BenchOptions] = []

    def bench(options: BenchOptions) -> None:
        given.append(options)
        raise BenchError("stopped before starting anything")

    monkeypatch.setattr("litellm_perfkit._bench.run_bench", bench, raising=False)
    assert main(["bench", *args, "--out", str(tmp_path / "b.json")]) == 2
    return given[0]


def test_the_headline_is_the_plain_proxys_unless_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert _given(monkeypatch, tmp_path).headline == "plain" == BenchOptions().headline
    assert _given(monkeypatch, tmp_path, "--headline", "recorded").headline == "recorded"
    assert BenchOptions(headline="recorded").recorded()["headline"] == "recorded"  # the document's config says which


def test_help_says_what_each_headline_measures() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(out.getvalue().split())
    assert "--headline {plain,recorded}" in text
    assert "a proxy perfkit does not touch" in text and "perfkit's own cost is printed as a row" in text


def test_an_unknown_headline_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--headline", "both"])
    assert exited.value.code == 2 and "invalid choice: 'both'" in capsys.readouterr().err
