"""Counters known only to within the rounding of what an engine printed.

vLLM's interval log line prints a_i / N to 3 decimals: above ~1000 rounds a line, several whole
counts print the same. llama-server prints its ``/metrics`` totals with 6 significant digits
(C++ ``operator<<`` on a double). Such counts are read as a central value and a bound on how
far each a_i (or N) can be from it; :class:`RoundedCounts` carries that bound into every
interval of tokens per call instead of refusing the file.

The bound is carried by *corner* counters: for each split g of the positions, the counts with
positions 1..g raised by their slack and g+1..K lowered (and the mirror), which reach the
extremes of T(g') = 1 + sum_{i<=g'} a_i / N for g' = g while keeping the total accepted (which
the engines print exactly): T(g) can be off by at most min(sum_{i<=g} s_i, sum_{i>g} s_i) / N;
and N at both ends of its printed range. ``tokens_per_call`` is the
union of the central interval and every corner's, so whatever model gives T beyond K (the tail
of :meth:`~specsim.acceptance.counts.AcceptanceCounts.tokens_per_call`) sees the corners too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specsim.acceptance.counts import AcceptanceCounts, TokensPerCall

__all__ = ["RoundedCounts", "pooled", "rounded"]


@dataclass(frozen=True)
class RoundedCounts(AcceptanceCounts):
    """Central counters, each a_i within ``slack[i]`` of the truth, N possibly any of
    ``other_rounds`` too; ``why`` says what was rounded (one line, for the output)."""

    slack: tuple[int, ...] = ()
    other_rounds: tuple[int, ...] = ()
    why: str = ""

    @property
    def corners(self) -> list[AcceptanceCounts]:
        """The counters at the extremes the rounding allows (module docstring)."""
        a, n, s = list(self.accepted), self.rounds, self.slack
        out = [_valid(n, _shift(a, s, g, sign), self.source)
               for g in range(1, len(a)) for sign in (1, -1) if any(s)]
        out += [AcceptanceCounts(m, self.accepted, self.source) for m in self.other_rounds
                if m >= max(a[0], 1)]
        return out

    def tokens_per_call(self, gamma: int, level: float = 0.95) -> TokensPerCall:
        mid = super().tokens_per_call(gamma, level)
        ends = [c.tokens_per_call(gamma, level) for c in self.corners]
        return TokensPerCall(gamma, mid.mean, min([mid.low] + [e.low for e in ends]),
                             max([mid.high] + [e.high for e in ends]), mid.extrapolated)

    def __add__(self, other: AcceptanceCounts) -> AcceptanceCounts:
        return pooled(self, other)


def _slack(c: AcceptanceCounts) -> tuple[int, ...]:
    return c.slack if isinstance(c, RoundedCounts) else (0,) * c.max_gamma


def pooled(x: AcceptanceCounts, y: AcceptanceCounts) -> AcceptanceCounts:
    """Two counters summed, their slacks summed (N ranges widen by each other's)."""
    plain = AcceptanceCounts.__add__(AcceptanceCounts(x.rounds, x.accepted, x.source),
                                     AcceptanceCounts(y.rounds, y.accepted, y.source))
    spans = [c.other_rounds for c in (x, y) if isinstance(c, RoundedCounts)]
    lo = [min((*o, c.rounds)) - c.rounds for c, o in zip((x, y), _rounds(x, y), strict=True)]
    hi = [max((*o, c.rounds)) - c.rounds for c, o in zip((x, y), _rounds(x, y), strict=True)]
    others = (plain.rounds + sum(lo), plain.rounds + sum(hi)) if spans else ()
    why = "; ".join(dict.fromkeys(c.why for c in (x, y) if isinstance(c, RoundedCounts)
                                  and c.why))
    return rounded(plain, _slack(x), _slack(y), why=why, rounds=others)


def _rounds(x: AcceptanceCounts, y: AcceptanceCounts) -> list[tuple[int, ...]]:
    return [c.other_rounds if isinstance(c, RoundedCounts) else () for c in (x, y)]


def rounded(counts: AcceptanceCounts, *slacks: Sequence[int], why: str = "",
            rounds: Sequence[int] = ()) -> AcceptanceCounts:
    """``counts`` with per-position slacks (summed when several) and the other round counts
    N the print allows; the plain counters back when nothing is rounded."""
    k = counts.max_gamma
    s = tuple(sum(int(x[i]) for x in slacks if len(x) == k) for i in range(k))
    others = tuple(sorted({int(n) for n in rounds} - {counts.rounds}))
    plain = AcceptanceCounts(counts.rounds, counts.accepted, counts.source)
    if not any(s) and not others:
        return plain
    return RoundedCounts(counts.rounds, counts.accepted, counts.source, s, others, why)


def _shift(a: list[int], s: tuple[int, ...], g: int, sign: int) -> list[int]:
    """Positions 1..g moved by d = min(their slack, the rest's) one way, g+1..K the other:
    T(g) at its extreme, the total accepted (printed exactly) unchanged."""
    d = min(sum(s[:g]), sum(s[g:]))
    b, left, right = list(a), d, d
    for i in range(g):  # leftmost first keeps the counts non-increasing
        step = min(s[i], left)
        b[i], left = b[i] + sign * step, left - step
    for i in reversed(range(g, len(a))):
        step = min(s[i], right)
        b[i], right = b[i] - sign * step, right - step
    return b


def _valid(n: int, a: list[int], source: str) -> AcceptanceCounts:
    """A corner clipped to a valid counter: 0 <= a_i <= a_{i-1} <= N."""
    out, prev = [], n
    for x in a:
        prev = max(0, min(x, prev))
        out.append(prev)
    return AcceptanceCounts(n, tuple(out), source)
