"""[L] Section 3's closed forms (i.i.d. acceptance with rate ``alpha``), numpy-broadcasting."""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.exact.kernels import FloatArray, IntArray, as_output, check_gamma
from specsim.verify import rule_spec

_TIE_RTOL: Final = 1e-12


def _alpha(alpha: ArrayLike) -> FloatArray:
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any((a < 0.0) | (a > 1.0)):
        raise ValueError("alpha must lie in [0, 1]")
    return a


def _gamma(gamma: ArrayLike) -> FloatArray:
    g = np.asarray(gamma, dtype=np.float64)
    if np.any(~np.isfinite(g)) or np.any(g < 0.0):
        raise ValueError("gamma must be finite and >= 0")
    return g


def _geometric_sum(alpha: FloatArray, m: FloatArray) -> FloatArray:
    """Sum_{k<m} alpha^k = (1 - alpha^m)/(1 - alpha), = m at alpha = 1 ([L] Eq. 1 numerator).

    Uses ``-expm1(m log1p(alpha - 1))`` so the value is accurate near ``alpha = 1``.
    """
    a, mm = np.broadcast_arrays(alpha, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_a = np.log1p(a - 1.0)  # -inf at alpha = 0
        num = np.where(a == 0.0, np.where(mm == 0.0, 0.0, 1.0), -np.expm1(mm * log_a))
        den = 1.0 - a
        res = np.where(den == 0.0, mm, num / np.where(den == 0.0, 1.0, den))
    return np.asarray(res, dtype=np.float64)


def expected_tokens(alpha: ArrayLike, gamma: ArrayLike) -> float | FloatArray:
    """[L] Eq. 1: E[#tokens per round] = (1 - alpha^(gamma+1)) / (1 - alpha); gamma+1 at 1."""
    return as_output(_geometric_sum(_alpha(alpha), _gamma(gamma) + 1.0))


def walltime_improvement(alpha: ArrayLike, gamma: ArrayLike, c: ArrayLike) -> float | FloatArray:
    """[L] Thm 3.8: walltime factor (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1))."""
    g = _gamma(gamma)
    cc = np.asarray(c, dtype=np.float64)
    if np.any(cc < 0.0):
        raise ValueError("c must be >= 0")
    return as_output(_geometric_sum(_alpha(alpha), g + 1.0) / (g * cc + 1.0))


def arithmetic_operations(
    alpha: ArrayLike, gamma: ArrayLike, c_hat: ArrayLike
) -> float | FloatArray:
    """[L] Thm 3.11: ops factor (1 - alpha)(gamma c_hat + gamma + 1) / (1 - alpha^(gamma+1))."""
    g = _gamma(gamma)
    ch = np.asarray(c_hat, dtype=np.float64)
    if np.any(ch < 0.0):
        raise ValueError("c_hat must be >= 0")
    return as_output((g * ch + g + 1.0) / _geometric_sum(_alpha(alpha), g + 1.0))


def speedup_exists(alpha: ArrayLike, c: ArrayLike) -> bool | NDArray[np.bool_]:
    """[L] Cor 3.9: some integer gamma >= 1 gives walltime improvement > 1 iff alpha > c."""
    res = np.asarray(_alpha(alpha) > np.asarray(c, dtype=np.float64))
    return bool(res) if res.ndim == 0 else res


def break_even_c(tokens_per_round: ArrayLike, gamma: ArrayLike) -> float | FloatArray:
    """[L] Thm 3.8 rearranged: improvement E/(gamma c + 1) > 1 iff c < (E - 1)/gamma."""
    g = np.asarray(gamma, dtype=np.float64)
    if np.any(g <= 0.0):
        raise ValueError("gamma must be > 0")
    return as_output((np.asarray(tokens_per_round, dtype=np.float64) - 1.0) / g)


def optimal_gamma(
    alpha: ArrayLike, c: ArrayLike, gamma_max: int = 64
) -> tuple[int | IntArray, float | FloatArray]:
    """[L] Sec 3.5 / Fig 3: argmax over integer gamma in 1..gamma_max of Thm 3.8's factor.

    Broadcasts over ``alpha`` and ``c``. Ties (values within a relative 1e-12 of the maximum)
    go to the smallest gamma. Returns ``(gamma_opt, improvement_at_gamma_opt)``.
    """
    gm = check_gamma(gamma_max)
    a, cc = np.broadcast_arrays(_alpha(alpha), np.asarray(c, dtype=np.float64))
    gammas = np.arange(1, gm + 1, dtype=np.float64)
    imp = np.asarray(walltime_improvement(a[..., None], gammas, cc[..., None]))
    best = imp.max(axis=-1, keepdims=True)
    idx = np.argmax(imp >= best * (1.0 - _TIE_RTOL), axis=-1)
    g_opt = (idx + 1).astype(np.int64)
    val = np.take_along_axis(imp, idx[..., None], axis=-1)[..., 0]
    if g_opt.ndim == 0:
        return int(g_opt), float(val)
    return g_opt, val


def round_tokens(gamma: int, rule: str = "correct") -> IntArray:
    """Tokens emitted in a round with k = 0..γ accepted drafts: k + 1 ([L] Alg. 1: the accepted
    drafts and one residual or bonus token), or γ / γ + 1 for a rule that keeps its drafts
    after a rejection (:attr:`specsim.verify.RuleSpec.keep_drafts`)."""
    k = np.arange(gamma + 1)
    if rule_spec(rule).keep_drafts:
        return np.where(k < gamma, gamma, gamma + 1)
    return k + 1


def truncated_geometric_moments(b: ArrayLike, gamma: int,
                                rule: str = "correct") -> dict[str, FloatArray]:
    """Per-round means when every position accepts independently with probability ``b``.

    The accepted count is a geometric truncated at γ ([L] §3.1, the law behind Eq. 1):
    P(k) = b^k (1 - b) for k < γ and b^γ for k = γ. Broadcasts over ``b``; returns the mean
    tokens (:func:`round_tokens`), accepted drafts and accept decisions (min(k + 1, γ)).
    """
    b = np.asarray(b, dtype=np.float64)
    powers = b[..., None] ** np.arange(gamma + 1)  # b^0..b^γ
    law = np.concatenate([powers[..., :gamma] * (1 - b[..., None]), powers[..., gamma:]], -1)
    k = np.arange(gamma + 1)
    return {
        "tokens": law @ round_tokens(gamma, rule),
        "accepted": law @ k,
        "trials": law @ np.minimum(k + 1, gamma),
    }


def table1_rows(
    alphas: ArrayLike, gammas: ArrayLike, c: float = 0.0, c_hat: float = 0.0
) -> dict[str, FloatArray]:
    """[L] Thm 3.8 & 3.11 on an (alpha, gamma) grid: speed and operations factors.

    This is *not* a transcription of [L] Table 1 (which reports measured T5 results); it is the
    analytic grid behind [L] Fig. 4 ("speed" = walltime improvement, "operations" = increase
    in arithmetic operations), by default at the idealised c = c_hat = 0. Returns a dict of
    equal-length 1-D columns ``alpha, gamma, operations, speed`` (alpha-major order).
    """
    a = np.asarray(alphas, dtype=np.float64).ravel()
    g = np.asarray(gammas, dtype=np.float64).ravel()
    A, G = np.meshgrid(a, g, indexing="ij")
    A, G = A.ravel(), G.ravel()
    return {
        "alpha": A,
        "gamma": G,
        "operations": np.asarray(arithmetic_operations(A, G, c_hat), dtype=np.float64),
        "speed": np.asarray(walltime_improvement(A, G, c), dtype=np.float64),
    }
