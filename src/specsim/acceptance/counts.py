"""A serving engine's acceptance counters, and what they identify: tokens per target call.

Engines (vLLM, SGLang, TensorRT-LLM, llama.cpp) verify with prefix acceptance: a round that
drafts K tokens accepts the first J of them, J in 0..K, and emits J + 1 tokens. Their counters
are sufficient for every draft length K' <= K the engine ran:

- ``rounds`` N: rounds that drafted (vLLM ``spec_decode_num_drafts``);
- ``accepted`` (a_1, ..., a_K): a_i rounds accepted at least i drafts (vLLM's
  ``spec_decode_num_accepted_tokens_per_pos{position=i-1}``): non-increasing, a_1 <= N.

So h_j = a_j - a_{j+1} (a_0 = N, a_{K+1} = 0) is the histogram of accepted drafts per round,
and drafting K' <= K instead truncates each round at K' (the first K' verdicts of a round are
the same whatever follows them): tokens per call T(K') = 1 + sum_{i<=K'} a_i / N, exactly the
mean of 1 + min(J, K') over the N rounds (Leviathan et al. 2022, Eq. 1 for i.i.d.
acceptance, T(K') = (1 - alpha^(K'+1)) / (1 - alpha)).

The interval of T(K') is the multinomial one: N i.i.d. rounds with histogram h give
Var(1 + min(J, K')) / N (a normal interval of the mean of a bounded variable, its variance from
the histogram). Engine counters do not say which context each round started in, so rounds are
taken as independent draws from the serving mix; :mod:`specsim.acceptance.shortcut` measures
what that costs against a trace's exact positional model.

K' > K is not identified by the counters. It is extrapolated by the stated model of
:mod:`.tail` (conditional acceptance fitted along the positions, its profile-likelihood
interval; at K = 1 a bracket of slopes from the constant tail down to the steepest decline seen
on real pairs), widened by T(K)'s own interval; rows that use it are flagged ``extrapolated``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specsim.acceptance.tail import tail_mean, tail_share_interval
from specsim.stats import normal_quantile, wilson_interval

__all__ = ["AcceptanceCounts", "TokensPerCall"]


@dataclass(frozen=True)
class TokensPerCall:
    """E[tokens per target call] at one draft length, its interval, and whether the counters
    identify it (``extrapolated`` False) or the tail model gave it."""

    gamma: int
    mean: float
    low: float
    high: float
    extrapolated: bool


@dataclass(frozen=True)
class AcceptanceCounts:
    """Prefix-acceptance counters of N drafting rounds of at most K drafts each.

    ``rounds``: N; ``accepted``: (a_1, ..., a_K), a_i the rounds that accepted at least i drafts;
    ``source``: where they came from, for messages (a file and its format).
    """

    rounds: int
    accepted: tuple[int, ...]
    source: str = ""

    def __post_init__(self) -> None:
        where = f"{self.source}: " if self.source else ""
        if not self.accepted:
            raise ValueError(f"{where}no draft position: the counters hold no acceptance")
        if self.rounds <= 0:
            raise ValueError(f"{where}{self.rounds} drafting rounds: need at least one")
        a = (self.rounds, *self.accepted)
        for i in range(1, len(a)):
            if a[i] < 0:
                raise ValueError(f"{where}position {i}: negative count {a[i]}")
            if a[i] > a[i - 1]:
                what = "rounds" if i == 1 else f"position {i - 1}'s {a[i - 1]}"
                raise ValueError(f"{where}position {i}: {a[i]} accepted exceeds {what} "
                                 f"({'' if i > 1 else f'{self.rounds} '}counts must not "
                                 f"increase along the draft)")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_histogram(cls, histogram: Sequence[int], source: str = "") -> AcceptanceCounts:
        """From h_0..h_K, h_j the rounds that accepted exactly j drafts."""
        h = [int(x) for x in histogram]
        if len(h) < 2:
            raise ValueError(f"{source + ': ' if source else ''}a histogram of accepted drafts "
                             f"needs entries for 0..K, K >= 1 (got {len(h)})")
        if any(x < 0 for x in h):
            raise ValueError(f"{source + ': ' if source else ''}negative count in histogram {h}")
        tail = np.cumsum(h[::-1])[::-1]  # tail[j] = rounds accepting >= j drafts
        return cls(int(tail[0]), tuple(int(x) for x in tail[1:]), source)

    def __add__(self, other: AcceptanceCounts) -> AcceptanceCounts:
        """Counters of two runs pooled; a shorter draft's missing positions count 0 accepted
        only if that run drafted fewer tokens -- refused: pool runs of one draft length."""
        if len(self.accepted) != len(other.accepted):
            raise ValueError(f"{other.source}: {len(other.accepted)} draft positions, but "
                             f"{self.source} has {len(self.accepted)}: pool runs of one draft "
                             f"length")
        src = self.source if self.source == other.source else f"{self.source} + {other.source}"
        return AcceptanceCounts(self.rounds + other.rounds,
                                tuple(x + y for x, y in zip(self.accepted, other.accepted,
                                                                  strict=True)), src)

    # ------------------------------------------------------------------ what they identify
    @property
    def max_gamma(self) -> int:
        """K: the draft length the engine ran."""
        return len(self.accepted)

    @property
    def histogram(self) -> np.ndarray:
        """h_0..h_K: rounds that accepted exactly j drafts."""
        a = np.array((self.rounds, *self.accepted, 0), dtype=np.int64)
        return a[:-1] - a[1:]

    @property
    def per_position(self) -> np.ndarray:
        """a_i / N for i = 1..K: the fraction of rounds whose i-th draft was accepted (vLLM's
        "Per-position acceptance rate")."""
        return np.array(self.accepted, dtype=np.float64) / self.rounds

    @property
    def conditional(self) -> np.ndarray:
        """r_i = a_i / a_{i-1} (a_0 = N): acceptance of draft i given drafts 1..i-1 were
        (nan where a_{i-1} = 0)."""
        a = np.array((self.rounds, *self.accepted), dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(a[:-1] > 0, a[1:] / np.where(a[:-1] > 0, a[:-1], 1), np.nan)

    @property
    def mean_acceptance_length(self) -> float:
        """1 + accepted / N: vLLM's "Mean acceptance length" (tokens per call at K)."""
        return 1.0 + math.fsum(self.accepted) / self.rounds

    def tokens_per_call(self, gamma: int, level: float = 0.95) -> TokensPerCall:
        """T(gamma) with its ``level`` interval: from the counters for gamma <= K, by the
        stated tail model beyond (module docstring)."""
        if gamma < 0:
            raise ValueError(f"draft length {gamma} must be >= 0")
        z = float(normal_quantile(0.5 + 0.5 * level))
        K = self.max_gamma
        if gamma <= K:
            return self._identified(gamma, z)
        base = self._identified(K, z)
        a_k = self.accepted[-1]
        if a_k == 0:  # no round accepted position K: nothing beyond it is accepted either
            return TokensPerCall(gamma, base.mean, base.low, base.high, True)
        s_lo, s_hi = tail_share_interval(self.rounds, self.accepted, gamma - K, level)
        # a_K / N at its own interval's ends: (p_K's Wilson interval over the N rounds)
        p_lo, p_hi = (float(x) for x in wilson_interval(a_k, self.rounds, level))
        mean = tail_mean(self.per_position, gamma)
        low = base.low + p_lo * s_lo
        high = min(base.high + p_hi * s_hi, 1.0 + gamma)
        return TokensPerCall(gamma, mean, min(low, mean), max(high, mean), True)

    def _identified(self, gamma: int, z: float) -> TokensPerCall:
        h = self.histogram
        j = np.minimum(np.arange(h.size), gamma).astype(np.float64)
        n = self.rounds
        mean = 1.0 + math.fsum(self.accepted[:gamma]) / n
        second = math.fsum((h * j * j).tolist()) / n
        var = max(second - (mean - 1.0) ** 2, 0.0)
        half = z * math.sqrt(var / n)
        return TokensPerCall(gamma, mean, max(mean - half, 1.0), min(mean + half, 1.0 + gamma),
                             False)
