"""The optional C accelerator of the request path; all other metadata is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and perfkit
runs its pure-Python path (litellm_perfkit/_core/_native.py, docs/overhead.md).
"""

from setuptools import Extension, setup

SOURCES = ("module", "timeline", "stage", "sse", "token", "exchange", "start", "encode", "handoff")

setup(
    ext_modules=[
        Extension(
            "litellm_perfkit._core._speedups",
            sources=[f"litellm_perfkit/_core/csrc/{name}.c" for name in SOURCES],
            depends=["litellm_perfkit/_core/csrc/speedups.h"],
            optional=True,
        )
    ]
)
