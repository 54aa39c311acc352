"""The optional C accelerator of the request path; all other metadata is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and perfkit
runs its pure-Python path (litellm_perfkit/_core/_backend.py, docs/overhead.md).

The accelerator's timeline layout is generated here from its one
declaration, ``types.RequestRecord`` (``_core/_fields.py``), its names for
the span, the agent's frames and setup()'s hooks from ``_core/_layouts.py``,
and the header names it reads from ``_wire/_names.py``, so C and Python
cannot drift apart.
"""

import importlib.util
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCES = (
    "module",
    "freelist",
    "timeline",
    "int64list",
    "stagelist",
    "stage",
    "staged",
    "stagedcall",
    "owntime",
    "delegate",
    "collector",
    "sse",
    "token",
    "exchange",
    "start",
    "encode",
    "handoff",
    "split",
    "timesplit",
    "records",
    "batches",
    "steps",
    "tasks",
    "otlp",
    "spans",
    "histogram",
    "series",
    "tally",
    "passage",
)
PACKAGE = Path(__file__).resolve().parent / "litellm_perfkit"


def _load(name: str, path: Path):  # type: ignore[no-untyped-def]
    """A module of the package by its path (the package itself needs dependencies a build has not got)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class BuildWithFields(build_ext):
    def run(self) -> None:
        fields = _load("_perfkit_build_fields", PACKAGE / "_core" / "_fields.py")
        types = _load("_perfkit_build_types", PACKAGE / "types.py")
        generated = Path(self.build_temp) / "generated"
        generated.mkdir(parents=True, exist_ok=True)
        layouts = _load("_perfkit_build_layouts", PACKAGE / "_core" / "_layouts.py")
        names = _load("_perfkit_build_names", PACKAGE / "_wire" / "_names.py")
        (generated / "perfkit_fields.h").write_text(fields.c_header(fields.layout(types.RequestRecord)))
        (generated / "perfkit_layouts.h").write_text(layouts.c_header(names.C_HEADERS, names.C_CONTENT_TYPES))
        for extension in self.extensions:
            extension.include_dirs.append(str(generated))
        super().run()


setup(
    cmdclass={"build_ext": BuildWithFields},
    ext_modules=[
        Extension(
            "litellm_perfkit._core._speedups",
            sources=[f"litellm_perfkit/_core/csrc/{name}.c" for name in SOURCES],
            depends=[
                "litellm_perfkit/_core/csrc/speedups.h",
                "litellm_perfkit/_core/csrc/protobuf.h",
                "litellm_perfkit/_core/csrc/traffic.h",
                "litellm_perfkit/_core/csrc/steps.h",
                "litellm_perfkit/types.py",
                "litellm_perfkit/_core/_fields.py",
                "litellm_perfkit/_core/_layouts.py",
                "litellm_perfkit/_wire/_names.py",
            ],
            optional=True,
        )
    ],
)
