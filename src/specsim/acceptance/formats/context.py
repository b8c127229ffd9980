"""What every format reader shares: the caller's options, one read's context (the file, its
refusals and notes) and what a file yields -- acceptance counters per draft length.

A reader returns ``{K: AcceptanceCounts}``: the rounds that drafted K tokens, kept apart per K
where the format can separate them. Where it cannot (a file whose draft tokens fall short of
rounds x K), :meth:`ReadContext.drafted` decides between the two cases the command line names:

- ``--short-drafts``: drafts were *cut short per round* (a confidence threshold, an n-gram miss)
  under one configured K. a_i / N is then exactly the engine's tokens per call as run; the
  cost (fewer than K drafts a round) and the tail beyond K are not what a fixed K would give,
  and the output says so (:attr:`ReadContext.cut_short`).
- otherwise the draft length may have *changed with load* (adaptive steps, per-batch-size K):
  the pooled counts are biased toward no K, so the file is refused, naming the counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from specsim.acceptance.counts import AcceptanceCounts

__all__ = ["SHORT_HINT", "MetricsError", "ReadContext", "ReadOptions"]

#: what to do about draft tokens < rounds x K, written once for every message
SHORT_HINT = ("pass --short-drafts if drafts were cut short per round under one K (tokens per "
              "call stays exact), or collect counts per draft length if K changed with load")


class MetricsError(ValueError):
    """A metrics file refused: ``str(err)`` is one line naming the file and what is wrong."""


@dataclass(frozen=True)
class ReadOptions:
    """The reader's choices, one per command-line flag of ``specsim advise``.

    ``format`` (``--format``), ``labels`` (``--label NAME=VALUE``: choose Prometheus series or
    llama.cpp's ``type``), ``lines`` (``--lines sum|last``: vLLM interval lines),
    ``draft_length`` (``--draft-length K``), ``short_drafts`` (``--short-drafts``),
    ``sum_series`` (``--sum-series``: pool every series of one K).
    """

    format: str = "auto"
    labels: Mapping[str, str] = field(default_factory=dict)
    lines: str = "sum"
    draft_length: int | None = None
    short_drafts: bool = False
    sum_series: bool = False


class ReadContext:
    """One read: the file, its format and the options; makes refusals and collects notes."""

    def __init__(self, path: Path, fmt: str, options: ReadOptions) -> None:
        self.path, self.fmt, self.options = path, fmt, options
        self.labels = {str(k): str(v) for k, v in options.labels.items()}
        self.source = f"{path} ({fmt})"
        self.notes: list[str] = []
        self.cut_short = False

    def error(self, msg: str, lineno: int = 0) -> MetricsError:
        return MetricsError(f"{self.path}:{lineno}: {msg}" if lineno else f"{self.path}: {msg}")

    def note(self, msg: str) -> None:
        self.notes.append(f"{self.path}: {msg}")

    def open(self) -> IO[str]:
        """The file as text lines (streamed: logs and scrapes are read a line at a time)."""
        return self.path.open(encoding="utf-8", newline=None)

    def drafted(self, drafted: float, n: int, k: int, lineno: int = 0, what: str = "",
                tolerance: float = 0.0) -> None:
        """Draft tokens against N rounds x K positions: more is refused; fewer means some
        rounds drafted fewer than K -- taken only with ``--short-drafts`` (module docstring)."""
        if drafted > n * k + tolerance:
            raise self.error(f"{what}{drafted:g} draft tokens exceed {n} rounds x {k} positions",
                             lineno)
        if drafted < n * k - tolerance:
            if not self.options.short_drafts:
                raise self.error(f"{what}{drafted:g} draft tokens < {n} rounds x {k} positions: "
                                 f"some rounds drafted fewer than K={k} tokens and this format "
                                 f"cannot tell which; {SHORT_HINT}", lineno)
            if not self.cut_short:
                self.note(f"{what}{drafted:g} draft tokens < {n} rounds x {k}: taken as drafts "
                          f"cut short per round (--short-drafts)")
            self.cut_short = True

    def counts(self, rounds: int, accepted: tuple[int, ...] | list[int]) -> AcceptanceCounts:
        return AcceptanceCounts(int(rounds), tuple(int(x) for x in accepted), self.source)
