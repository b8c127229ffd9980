"""An engine's measured runs: output throughput per (batch size or concurrency, draft length).

``specsim advise --runs SPEC ...`` reads each SPEC as one file:

- ``PATH`` -- a CSV, one row per measured (batch, draft length), extra columns ignored::

      batch,gamma,tokens_per_second,tokens_per_second_low,tokens_per_second_high
      1,0,41.2,40.8,41.5
      1,4,63.0,61.9,64.2

  ``batch``: sequences decoding together (the benchmark's concurrency, >= 1); ``gamma``: the
  draft length the engine ran (0 = speculation off); ``tokens_per_second``: output tokens per
  second of the whole batch (> 0); ``tokens_per_second_low``/``_high`` (optional, may be
  empty): a spread of it (say the quartiles over repeats), low <= value <= high.
- ``k=G:PATH`` -- a benchmark's result JSON, measured at draft length G (the file does not say
  it; 0 = speculation off). One JSON object, or JSON Lines (one object a line: what
  ``vllm bench serve --append-result`` and SGLang's ``bench_serving`` append), each object one
  run: its batch size is ``max_concurrency``, its throughput ``output_throughput``, the names
  both benchmarks write:

  * vLLM ``vllm bench serve --save-result [--append-result]``: vllm/benchmarks/serve.py
    (vllm-project/vllm 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): ``main`` sets
    ``result_json["max_concurrency"] = args.max_concurrency`` and ``benchmark``'s result
    ``"output_throughput": metrics.output_throughput`` (output tokens / benchmark duration);
  * SGLang ``python -m sglang.bench_serving --output-file F``: python/sglang/bench_serving.py
    (sgl-project/sglang 0033168f0f58b2bc05aa0273bd475d9c01bafb1c): ``benchmark`` appends
    ``{"max_concurrency": max_concurrency, "output_throughput": ..., ...}`` as one line.

  A run without ``--max-concurrency`` (``max_concurrency`` null) has no batch size and is
  refused; a JSON run carries no spread (give repeats' spread in the CSV).

A file larger than :data:`MAX_BYTES` is refused before it is read. Two rows for one
(batch, gamma), across all the files, are refused naming both; so is a throughput <= 0.
What the runs must cover against the counters (a plain run at every batch size, a draft
length the counters identify) is checked where they meet: :mod:`specsim.acceptance.calibrate`.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from specsim.acceptance.cells import number, whole

__all__ = ["MAX_BYTES", "Run", "RunsError", "read_runs"]

MAX_BYTES: Final = 64 << 20
REQUIRED: Final = ("batch", "gamma", "tokens_per_second")
_SPEC = re.compile(r"k=(\d+):(.+)\Z", re.DOTALL)


class RunsError(ValueError):
    """A runs file that cannot be used: one line naming the file, the row and the problem."""


@dataclass(frozen=True)
class Run:
    """One measured run: output tokens per second of a batch of ``batch`` sequences decoding
    at draft length ``gamma`` (0: speculation off), with its spread; ``where`` names its row."""

    batch: int
    gamma: int
    tokens_per_second: float
    low: float
    high: float
    where: str


def read_runs(specs: Iterable[str]) -> tuple[Run, ...]:
    """Every run of every ``--runs`` SPEC (module docstring), sorted by (batch, gamma)."""
    runs: dict[tuple[int, int], Run] = {}
    for spec in specs:
        m = _SPEC.match(spec)
        path, gamma = (Path(m.group(2)), int(m.group(1))) if m else (Path(spec), None)
        for run in _read_one(path, gamma, spec):
            key = (run.batch, run.gamma)
            if key in runs:
                raise RunsError(f"{run.where}: a second run at batch {run.batch}, gamma "
                                f"{run.gamma} (the first: {runs[key].where}): give one "
                                f"measurement per cell (repeats' median and spread in a CSV)")
            runs[key] = run
    if not runs:
        raise RunsError(f"--runs {' '.join(specs)}: no runs in the file(s)")
    return tuple(runs[k] for k in sorted(runs))


def _read_one(path: Path, gamma: int | None, spec: str) -> list[Run]:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise RunsError(f"{path}: {size} bytes, more than a runs file holds "
                            f"({MAX_BYTES >> 20} MiB)")
        text = path.read_bytes().decode("utf-8-sig")  # a BOM: no column name
    except (OSError, UnicodeDecodeError) as err:
        raise RunsError(f"{path}: cannot read the runs file "
                        f"({getattr(err, 'strerror', None) or err})") from None
    objects = _json_objects(text)
    if objects is None:
        if gamma is not None:
            raise RunsError(f"--runs {spec}: {path} is not a benchmark's result JSON; a CSV "
                            f"names its draft length per row (column gamma): drop 'k={gamma}:'")
        return _csv(path, text)
    if gamma is None:
        raise RunsError(f"{path}: a benchmark's result JSON does not say the draft length it "
                        f"ran: give it as --runs k=G:{path} (G = 0 for speculation off)")
    return [_json_run(path, n, obj, gamma) for n, obj in objects]


def _json_objects(text: str) -> list[tuple[int, Any]] | None:
    """The JSON object(s) of ``text`` with their line numbers (one document, or JSON Lines);
    None when it is not JSON (detected by parsing)."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    else:
        return [(1, x) for x in whole] if isinstance(whole, list) else [(1, whole)]
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except ValueError:
            return None
    return out or None


def _json_run(path: Path, line: int, obj: Any, gamma: int) -> Run:
    where = f"{path}: line {line}"
    if not isinstance(obj, dict):
        raise RunsError(f"{where}: not a benchmark result object (vllm bench serve "
                        f"--save-result, sglang.bench_serving)")
    for key in ("max_concurrency", "output_throughput"):
        if key not in obj:
            raise RunsError(f"{where}: no {key!r}: not a result of vllm bench serve "
                            f"--save-result or sglang.bench_serving")
    if obj["max_concurrency"] is None:
        raise RunsError(f"{where}: max_concurrency is null: the benchmark ran without "
                        f"--max-concurrency, so its batch size is unknown; rerun with "
                        f"--max-concurrency B")
    batch = _count(str(obj["max_concurrency"]), f"{where}: max_concurrency", 1)
    tps = _throughput(str(obj["output_throughput"]), f"{where}: output_throughput")
    return Run(batch, gamma, tps, tps, tps, where)


def _csv(path: Path, text: str) -> list[Run]:
    rows = list(csv.reader(text.splitlines()))
    header = [h.strip() for h in rows[0]] if rows else []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise RunsError(f"{path}: line 1: missing column(s) {', '.join(missing)} (need "
                        f"{','.join(REQUIRED)}[,tokens_per_second_low,tokens_per_second_high])")
    col = {name: header.index(name) for name in header}
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not any(x.strip() for x in row):
            continue
        where = f"{path}: line {n}"
        if len(row) < len(header):
            raise RunsError(f"{where}: {len(row)} fields, the header has {len(header)}")
        value = {name: row[i].strip() for name, i in col.items()}
        batch = _count(value["batch"], f"{where}: column batch", 1)
        gamma = _count(value["gamma"], f"{where}: column gamma", 0)
        tps = _throughput(value["tokens_per_second"], f"{where}: column tokens_per_second")
        low = high = tps
        if value.get("tokens_per_second_low"):
            low = _throughput(value["tokens_per_second_low"],
                              f"{where}: column tokens_per_second_low")
        if value.get("tokens_per_second_high"):
            high = _throughput(value["tokens_per_second_high"],
                               f"{where}: column tokens_per_second_high")
        if not low <= tps <= high:
            raise RunsError(f"{where}: need tokens_per_second_low <= tokens_per_second <= "
                            f"tokens_per_second_high (got {low:g}, {tps:g}, {high:g})")
        out.append(Run(batch, gamma, tps, low, high, where))
    return out


def _count(text: str, where: str, least: int) -> int:
    return whole(text, where, least, RunsError)


def _throughput(text: str, where: str) -> float:
    value = number(text, where, RunsError)
    if not math.isfinite(value) or value <= 0:
        raise RunsError(f"{where}: {text!r}: a throughput must be a finite number > 0 "
                        f"tokens per second")
    return value
