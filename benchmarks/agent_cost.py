"""What the export agent spends per request, on records a real LiteLLM proxy made.

The agent's CPU counts in perfkit's cost (issue 18's target includes it),
and whole-proxy runs only give its total. This benchmark replays captured
records (``benchmarks/litellm_recording_cost.py --capture FILE``) through
the agent's own code, in this process: each batch of ``--batch`` records is
decoded, turned into spans and metrics, and its spans encoded as OTLP
protobuf, as the agent does; only the HTTP post is left out. It prints the
CPU per record for the whole and for each part, medians of ``--repeats``:

- ``decode``: ``Timeline.encode`` bytes to ``RequestRecord``;
- ``handle``: metrics, the time split and the spans of each record;
- ``encode``: the spans as an OTLP protobuf request;
- ``snapshot``: the Prometheus snapshot (``perfkit run`` sets
  ``PERFKIT_PROMETHEUS_DIR``), as if a batch came every 200 ms, the
  export's drain interval under load.

``--without-steps`` drops each record's steps first: the agent with step
accounting off. ``--span-forms tuples,protobuf`` alternates the two ways the
agent hands spans to an exporter (a ``Span`` per stage, as the JSON, console
and SDK exporters take them, or the stage spans already encoded, as OTLP
protobuf's do) and prints the ratio of each pair of passes. ``--profile``
prints cProfile's top functions of one pass.

    python -m benchmarks.litellm_recording_cost --version 1.103.0 --workloads json --rounds 20 --capture /tmp/records.bin
    python -m benchmarks.agent_cost /tmp/records.json.bin

or, records of a served proxy (uvicorn, sockets; benchmarks/_gcprobe's capture):

    PERFKIT_BENCH_CAPTURE=/tmp/served python -m benchmarks.litellm_overhead --version 1.103.0 --modes plain,perfkit --pairs 1 --collector
    python -m benchmarks.agent_cost /tmp/served.*
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast, get_args

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from litellm_perfkit._core._timeline import decode  # noqa: E402
from litellm_perfkit._export._frames import read_batch  # noqa: E402
from litellm_perfkit._export._otlp import spans_protobuf  # noqa: E402
from litellm_perfkit._export._processor import Processor  # noqa: E402
from litellm_perfkit._export._prometheus import SnapshotWriter  # noqa: E402
from litellm_perfkit._export._settings import ExportSettings  # noqa: E402
from litellm_perfkit._export._spans import Span, SpanForm  # noqa: E402
from litellm_perfkit.types import RequestRecord  # noqa: E402


class _Encoding:
    """The OTLP/HTTP exporter without its post: spans encoded, then dropped. Its
    span form is the protobuf exporter's (stage spans handed over already
    encoded), or with ``--span-form tuples`` the JSON and SDK exporters' (a
    Span per stage, encoded here)."""

    def __init__(self, settings: ExportSettings, span_form: SpanForm) -> None:
        self._settings = settings
        self.span_form = span_form

    def export_spans(self, spans: Sequence[Span | bytes]) -> bool:
        spans_protobuf(spans, self._settings.service_name, self._settings.resource_attributes)
        return True

    def export_metrics(self, store: Any, start_unix_ns: int, now_unix_ns: int) -> bool:
        return True

    def close(self) -> None:
        pass


def _one_pass(
    batches: list[list[bytes]], without_steps: bool, snapshot_dir: str, span_form: SpanForm
) -> dict[str, float]:
    """CPU seconds of each part over all batches."""
    settings = ExportSettings(prometheus_dir=snapshot_dir)
    processor = Processor(settings, exporter=_Encoding(settings, span_form))
    # Batches come every schedule_delay_s (200 ms) under load: the snapshot's clock says so.
    drains = [0]
    processor._prometheus = SnapshotWriter(snapshot_dir, clock=lambda: drains[0] * settings.schedule_delay_s)
    spent = dict.fromkeys(("decode", "handle", "encode", "snapshot"), 0.0)
    clock = time.process_time
    for batch in batches:
        t0 = clock()
        records: list[RequestRecord] = [decode(encoded) for encoded in batch]
        if without_steps:
            records = [dataclasses.replace(record, steps=[]) for record in records]
        t1 = clock()
        for record in records:
            processor.handle(record, 0)
        t2 = clock()
        processor.flush_spans()
        t3 = clock()
        processor.export_metrics()
        drains[0] += 1
        t4 = clock()
        spent["decode"] += t1 - t0
        spent["handle"] += t2 - t1
        spent["encode"] += t3 - t2
        spent["snapshot"] += t4 - t3
    return spent


def _records(data: bytes) -> list[bytes]:
    """The records of every batch frame in ``data`` (kind byte, u32 length, payload)."""
    records, at = [], 0
    while at < len(data):
        length = int.from_bytes(data[at + 1 : at + 5], "little")
        records += read_batch(data[at + 5 : at + 5 + length])[2]
        at += 5 + length
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "records",
        type=Path,
        help="batch frames: a file written by litellm_recording_cost --capture, "
        "or by the export agent of a proxy that benchmarks/_gcprobe is loaded into, with PERFKIT_BENCH_CAPTURE=FILE",
    )
    parser.add_argument("--batch", type=int, default=16, help="records per batch, as the worker hands them off")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--without-steps", action="store_true", help="drop each record's steps (step accounting off)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of one pass")
    parser.add_argument(
        "--span-forms",
        default="protobuf",
        help="what the exporter is handed, comma-separated: protobuf (OTLP protobuf's exporters: stage spans already "
        "encoded) and tuples (the JSON and SDK exporters': a Span each); with both, passes alternate and the ratio "
        "of each pair is printed",
    )
    args = parser.parse_args()
    forms: list[SpanForm] = []
    for form in args.span_forms.split(","):
        if form not in get_args(SpanForm):
            parser.error(f"--span-forms: {form!r} is not one of {', '.join(get_args(SpanForm))}")
        forms.append(cast(SpanForm, form))
    records = _records(args.records.read_bytes())
    batches = [records[i : i + args.batch] for i in range(0, len(records), args.batch)]
    passes: dict[SpanForm, list[dict[str, float]]] = {form: [] for form in forms}
    with tempfile.TemporaryDirectory() as snapshot_dir:
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            _one_pass(batches, args.without_steps, snapshot_dir, forms[0])
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        for form in forms:
            _one_pass(batches, args.without_steps, snapshot_dir, form)  # warm-up
        for _ in range(args.repeats):
            for form in forms:
                passes[form].append(_one_pass(batches, args.without_steps, snapshot_dir, form))
    print(
        f"{args.records.name}: {len(records)} records in batches of {args.batch}, median of {args.repeats} passes"
        f"{' without steps' if args.without_steps else ''}:"
    )
    for form in forms:
        per_record = {
            part: statistics.median(p[part] for p in passes[form]) / len(records) * 1e6 for part in passes[form][0]
        }
        total = statistics.median(sum(p.values()) for p in passes[form]) / len(records) * 1e6
        parts = ", ".join(f"{part} {us:.1f}" for part, us in per_record.items())
        print(f"  span form {form}: {total:.1f} us CPU per record ({parts})")
    if len(forms) == 2:
        first, second = (passes[form] for form in forms)
        ratios = sorted(sum(b.values()) / sum(a.values()) for a, b in zip(first, second))
        print(
            f"  {forms[1]} / {forms[0]}, median of the {len(ratios)} pairs: {statistics.median(ratios):.3f} (range {ratios[0]:.3f}-{ratios[-1]:.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
