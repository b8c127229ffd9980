"""What a speculative round costs at a batch size: the one interface the schedule reads.

Two cost models implement :class:`CostModel`, and :func:`specsim.acceptance.schedule.schedule`
takes either without knowing which:

- :class:`specsim.acceptance.latency.LatencyProfile` -- forward times: a round of K' drafts
  costs K' T_draft(b, 1) + T_target(b, K' + 1), a plain step T_target(b, 1);
- :class:`specsim.acceptance.calibrate.CalibratedCost` -- the engine's own measured
  throughput: round(b, K') = plain(b) + o(b) + K' c(b) [+ V(b, K'+1) - V(b, 1)].

Both answer :meth:`CostModel.round_cost` with a :class:`RoundCost`: the plain step's and the
round's seconds, and the round's time in plain steps (``ratio``) with its interval, so that
speedup(b, K') = T(K') / ratio(b, K') (module docstring of :mod:`.schedule`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["CostModel", "RoundCost"]


@dataclass(frozen=True)
class RoundCost:
    """One round of ``gamma`` = K' drafts at batch b: seconds, and round / plain step.

    ``draft``: seconds per draft step inside the round; ``verify``: the rest of the round
    (round = K' draft + verify); ``ratio_low``/``ratio_high``: the interval of round / plain
    from the cost model's spreads; ``extrapolated``: the cost at this K' lies beyond the draft
    lengths measured; ``interpolated``: the batch size lies between two measured ones.
    """

    gamma: int
    plain: float
    draft: float
    verify: float
    ratio_low: float
    ratio_high: float
    extrapolated: bool = False
    interpolated: bool = False

    @property
    def round(self) -> float:
        """Seconds of the round."""
        return self.gamma * self.draft + self.verify

    @property
    def ratio(self) -> float:
        """The round's time in plain steps."""
        return self.round / self.plain


class CostModel(Protocol):
    """What the schedule needs of a cost model (module docstring)."""

    @property
    def source(self) -> str:
        """Where the costs come from (the runs' or the profile's files), for messages."""

    def check_covers(self, batches: Sequence[int], max_gamma: int) -> None:
        """Raise (one line naming the file and the first cell missing) unless every batch size
        and K' = 0..max_gamma can be costed."""

    def round_cost(self, batch: int, gamma: int) -> RoundCost:
        """The cost of a round of ``gamma`` drafts at ``batch`` (``gamma`` 0: a plain step)."""

    def describe(self) -> str:
        """The model as an equation, its assumptions and its terms (Markdown, for
        ``schedule.md``: :mod:`specsim.acceptance.model_report`)."""
