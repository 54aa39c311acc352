"""The layouts declared once for Python and C: what the generated header names."""

from __future__ import annotations

import re

import pytest

from litellm_perfkit._core._fields import GENERATOR, GeneratorEntry, position_names
from litellm_perfkit._core._layouts import BATCH_HEAD, FRAME_HEAD, RECORD_HEAD, FrameKind, Hooks, Span, c_header
from litellm_perfkit._export._frames import batch_frame
from litellm_perfkit._wire._names import C_CONTENT_TYPES, C_HEADERS


def _defines() -> dict[str, str]:
    return dict(re.findall(r"^#define (PK_\w+) (\S+)", c_header(C_HEADERS, C_CONTENT_TYPES), re.MULTILINE))


def test_c_names_each_span_field_by_its_position() -> None:
    defines = _defines()
    assert [int(defines[f"PK_SPAN_{name.upper()}"]) for name in Span._fields] == list(range(len(Span._fields)))
    assert int(defines["PK_SPAN_SIZE"]) == len(Span._fields)


def test_the_c_offsets_read_a_batch_frame_as_python_writes_it() -> None:
    defines = _defines()
    frame = batch_frame(-7, 3, [b"abc", b"de"])
    assert frame[:1] == FrameKind.BATCH == defines["PK_FRAME_BATCH"].strip("'").encode()
    length_at, anchor_at, dropped_at = (
        int(defines[name]) for name in ("PK_FRAME_LENGTH_AT", "PK_BATCH_ANCHOR_AT", "PK_BATCH_DROPPED_AT")
    )
    assert int.from_bytes(frame[length_at : length_at + 4], "little") == len(frame) - int(defines["PK_FRAME_HEAD_SIZE"])
    assert int.from_bytes(frame[anchor_at : anchor_at + 8], "little", signed=True) == -7
    assert int.from_bytes(frame[dropped_at : dropped_at + 8], "little") == 3
    first = int(defines["PK_BATCH_HEADER_SIZE"])
    assert first == FRAME_HEAD.size + BATCH_HEAD.size
    assert frame[first : first + RECORD_HEAD.size + 3] == RECORD_HEAD.pack(3) + b"abc"


def test_setup_takes_every_hook_by_keyword_with_its_type_check() -> None:
    header = c_header(C_HEADERS, C_CONTENT_TYPES)
    hooks = list(Hooks.__annotations__)
    table = header.split("#define PK_HOOKS(X)", 1)[1].split("/*", 1)[0]
    assert re.findall(r"X\((\w+)\)", table) == hooks
    form = re.search(r'PK_HOOKS_FORMAT "\$([O!]*):setup"', header)
    assert form is not None and form.group(1).count("O") == len(hooks)
    assert "&PyDict_Type, &(h).entry_prefixes" in header and "&PyLong_Type, &(h).step_values" in header


def test_c_spells_each_header_name_and_content_type_as_declared_with_its_length() -> None:
    defines = _defines()
    for key, name in C_HEADERS.items():
        assert defines[f"PK_HEADER_{key}"] == f'"{name}"'
        assert int(defines[f"PK_HEADER_{key}_LEN"]) == len(name.encode())
    for key, content_type in C_CONTENT_TYPES.items():
        assert defines[f"PK_CONTENT_TYPE_{key}"] == f'"{content_type}"'
        assert int(defines[f"PK_CONTENT_TYPE_{key}_LEN"]) == len(content_type.encode())


def test_a_header_name_c_could_not_spell_as_it_is_is_refused() -> None:
    with pytest.raises(ValueError, match="lowercase"):
        c_header({"BAD": 'x-"quoted"'}, C_CONTENT_TYPES)


def test_a_stage_entry_is_named_by_its_positions() -> None:
    assert GENERATOR[GeneratorEntry.SELF_NS] == "self_ns" and len(GENERATOR) == GeneratorEntry.INTERVALS + 1

    class Gap:
        A = 0
        B = 2

    with pytest.raises(ValueError):
        position_names(Gap)
