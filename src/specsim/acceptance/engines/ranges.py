"""A schedule of best draft lengths by batch size, and the snippet record each engine writes.

``ranges`` is ``[(first_batch, last_batch, best_K), ...]``, ascending and contiguous (what
:func:`specsim.acceptance.schedule.best_by_batch` returns); ``best_K = 0`` means speculation off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Ranges", "Snippet", "check", "from_one", "k_at", "merged", "stops_at"]

Ranges = Sequence[tuple[int, int, int]]


@dataclass(frozen=True)
class Snippet:
    """One engine's configuration: ``code`` to paste (a ``lang`` block) and ``notes`` (prose:
    the version followed, what the engine does with the schedule, what is assumed)."""

    title: str
    lang: str
    code: str
    notes: tuple[str, ...] = ()


def check(ranges: Ranges) -> list[tuple[int, int, int]]:
    """``ranges`` as a list of int triples, or ValueError: empty, first batch < 1, a range
    backwards, a gap or overlap between ranges, a negative K."""
    if not ranges:
        raise ValueError("an empty schedule has no engine configuration")
    out = [(int(lo), int(hi), int(k)) for lo, hi, k in ranges]
    if out[0][0] < 1:
        raise ValueError(f"schedule starts at batch {out[0][0]}: batch sizes start at 1")
    for i, (lo, hi, k) in enumerate(out):
        if hi < lo:
            raise ValueError(f"schedule range {lo}-{hi} runs backwards")
        if k < 0:
            raise ValueError(f"schedule range {lo}-{hi}: draft length {k} < 0")
        if i and lo != out[i - 1][1] + 1:
            raise ValueError(f"schedule ranges {out[i - 1][0]}-{out[i - 1][1]} and {lo}-{hi} "
                             "are not contiguous")
    return out


def merged(ranges: Ranges) -> list[tuple[int, int, int]]:
    """Neighbouring ranges of equal K joined (the same lookup, fewer entries)."""
    out: list[tuple[int, int, int]] = []
    for lo, hi, k in check(ranges):
        if out and out[-1][2] == k:
            out[-1] = (out[-1][0], hi, k)
        else:
            out.append((lo, hi, k))
    return out


def from_one(ranges: Ranges) -> tuple[list[tuple[int, int, int]], str]:
    """The schedule from batch 1 (the engines' schedules must cover every batch size from 1):
    an unmeasured start 1..first-1 takes the first range's K, said in the returned note."""
    out = merged(ranges)
    lo, hi, k = out[0]
    if lo == 1:
        return out, ""
    note = (f"batch sizes 1-{lo - 1} are not in the schedule (not measured, or not asked with "
            f"--batch): they take K = {k} of batch {lo} (an assumption, not a measurement)")
    return [(1, hi, k), *out[1:]], note


def k_at(ranges: Ranges, b: int) -> int:
    """The schedule's K at batch size ``b`` (inside the schedule)."""
    for lo, hi, k in ranges:
        if lo <= b <= hi:
            return k
    raise ValueError(f"batch {b} is outside the schedule {ranges[0][0]}-{ranges[-1][1]}")


def stops_at(ranges: Ranges) -> int | None:
    """The first batch from which K = 0 to the end of the schedule (speculation stops paying),
    or None when it pays at the largest batch measured."""
    out = merged(ranges)
    return out[-1][0] if out[-1][2] == 0 else None
