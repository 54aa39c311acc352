"""The public API is small and deliberate: a change here is a change for users."""

from __future__ import annotations

import litellm_perfkit
import litellm_perfkit.mock
import litellm_perfkit.types

# The surface as users see it, written here as data (not a copy of ``__all__``'s list):
# a name added to or dropped from the package fails this test until it is added here too.
PUBLIC = frozenset(
    "OVERHEAD_HEADER PerfkitMiddleware __version__ configure current_timeline instrument"
    " serve_prometheus shutdown stage uninstrument".split()
)


def test_top_level_api() -> None:
    assert len(set(litellm_perfkit.__all__)) == len(litellm_perfkit.__all__)
    assert set(litellm_perfkit.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(litellm_perfkit, name)


def test_mock_and_types_api() -> None:
    assert sorted(litellm_perfkit.mock.__all__) == sorted(
        ["ConfigError", "Deployment", "MockApp", "MockConfig", "ModelProfile", "load_config", "serve", "start_servers"]
    )
    assert {"HeaderMode", "ExportMode", "RequestRecord", "StageRecord", "StageKind"} <= set(
        litellm_perfkit.types.__all__
    )


def test_importing_perfkit_does_not_import_litellm() -> None:
    import subprocess
    import sys

    code = "import sys, litellm_perfkit; print('litellm' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_profiling_and_locust_api() -> None:
    import subprocess
    import sys

    import litellm_perfkit.profiling

    assert sorted(litellm_perfkit.profiling.__all__) == ["RequestProfileMiddleware", "StageProfiler"]
    # litellm_perfkit.locust imports Locust (gevent monkey-patching): check it in a clean process.
    code = "import litellm_perfkit.locust as m; print(sorted(m.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "['ChatCompletionsUser', 'OVERHEAD_HEADERS']"


def test_importing_perfkit_does_not_import_profilers_or_locust() -> None:
    import subprocess
    import sys

    code = "import sys, litellm_perfkit, litellm_perfkit.profiling; print(sorted(m for m in ('pyinstrument', 'pyroscope', 'locust', 'gevent') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"
