"""Target/draft model tables: the maths every family builds on.

The from-scratch program's order-1 tables (row = current token, row contents = next-token
distribution), built by :func:`random_table` exactly as the program builds them, with drafts
from :func:`blend`, :func:`temper` or the α-calibrated construction :func:`calibrate`.

Sampling temperature follows Leviathan et al. 2022 §2.2: target and draft are both standardised
at the same temperature ``T`` (``T > 0`` divides the logits by ``T``; ``T = 0`` is argmax, one-hot).
"""

from __future__ import annotations

import numpy as np

from specsim.sampling import FloatArray

SEED_VOCAB = 6


def random_table(seed: int, sharpness: float = 1.0, vocab: int = SEED_VOCAB) -> FloatArray:
    """A row-stochastic (vocab, vocab) table, bit for bit the seed program's ``random_table``."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, sharpness, (vocab, vocab))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def blend(target: FloatArray, other: FloatArray, weight: float) -> FloatArray:
    """Draft = weight*target + (1-weight)*other (the seed program's ``blend``)."""
    return weight * target + (1.0 - weight) * other


def temper(table: FloatArray, temperature: float) -> FloatArray:
    """Re-sharpen (T<1) or flatten (T>1) each row; T = 0 gives the one-hot argmax row.

    For T > 0 this is the seed program's ``temper`` verbatim (log of the table clipped at 1e-12,
    divided by T, softmax). T = 1 returns the table unchanged, so seed tables stay bit-exact.
    """
    if temperature < 0 or not np.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if temperature == 0:
        return one_hot_argmax(table)
    if temperature == 1:
        return np.array(table, dtype=np.float64, copy=True)
    logits = np.log(np.clip(table, 1e-12, None)) / temperature
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def one_hot_argmax(table: FloatArray) -> FloatArray:
    """Greedy decoding as a distribution: all mass on the row's argmax (first index on ties)."""
    out = np.zeros_like(table, dtype=np.float64)
    np.put_along_axis(out, table.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return out


#: Argmax drafting's tie tolerance: row entries within this of the row's maximum count as tied
#: (absolute: probabilities lie in [0, 1]), and a tie goes to the lowest token index. Far above
#: the last bits a CPU's SIMD kernels change in a computed row, so the proposed token never
#: depends on the machine; far below any difference a draft's ranking means.
ARGMAX_TIE_TOL = 1e-12


def argmax_draft(q: FloatArray) -> FloatArray:
    """Argmax drafting: the draft row replaced by the one-hot on its argmax (last axis).

    What vLLM's v1 drafters (EAGLE, MTP, n-gram) propose: the draft model's most likely token x,
    verified as a one-hot draft distribution, so Alg. 1 accepts it with min(1, p(x)/1) = p(x)
    and resamples a rejection from norm(max(p - onehot(x), 0)) = p without x, renormalised:
    still lossless. Ties: among the entries within :data:`ARGMAX_TIE_TOL` of the row's
    maximum, the lowest index (on every CPU). Idempotent; T = 0 rows are already one-hot."""
    q = np.asarray(q, dtype=np.float64)
    top = q.max(axis=-1, keepdims=True)
    first = np.argmax(q >= top - ARGMAX_TIE_TOL, axis=-1)
    out = np.zeros_like(q)
    np.put_along_axis(out, first[..., None], 1.0, axis=-1)
    return out


def one_hot_argmin(table: FloatArray) -> FloatArray:
    """All mass on the row's least likely token: the 'far' draft base of :func:`calibrate`."""
    out = np.zeros_like(table, dtype=np.float64)
    np.put_along_axis(out, table.argmin(axis=-1)[..., None], 1.0, axis=-1)
    return out


def softmax(logits: FloatArray, temperature: float = 1.0) -> FloatArray:
    """Softmax over the last axis at a temperature; T = 0 is the one-hot argmax. One new array
    (x / 1 is x exactly: T = 1 divides nothing)."""
    if temperature == 0:
        return one_hot_argmax(logits)
    z = np.asarray(logits)
    if temperature != 1 or z.dtype.kind != "f":
        e = z / temperature
        e -= e.max(axis=-1, keepdims=True)
    else:
        e = z - z.max(axis=-1, keepdims=True)
    np.exp(e, out=e)
    e /= e.sum(axis=-1, keepdims=True)
    return e


def overlap(p: FloatArray, q: FloatArray) -> FloatArray:
    """Per-context acceptance probability beta = sum_x min(p, q) (Leviathan Def. 3.1)."""
    return np.minimum(p, q).sum(axis=-1)


def calibration_weights(target: FloatArray, other: FloatArray, alpha: float) -> FloatArray:
    """Blend weights w per row with sum_x min(p, w p + (1-w) o) = alpha exactly.

    Since min(p, w p + (1-w) o) = w p + (1-w) min(p, o) elementwise for w in [0, 1],
    beta(w) = w + (1-w) beta0 and w = (alpha - beta0) / (1 - beta0).
    """
    return _weights(overlap(target, other), alpha)


def _weights(beta0: FloatArray, alpha: float) -> FloatArray:
    """:func:`calibration_weights` from the base's overlaps beta0 with the target."""
    if not (np.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise ValueError(f"alpha={alpha} must be a number in [0, 1]")
    if np.any(alpha < beta0 - 1e-12):
        worst = float(beta0.max())
        raise ValueError(
            f"alpha={alpha} is below the draft base's own overlap with the target "
            f"(max over contexts {worst:.6f}); reachable alpha is [{worst:.6f}, 1]"
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(beta0 >= 1.0, 1.0, (alpha - beta0) / (1.0 - beta0))
    return np.clip(w, 0.0, 1.0)


def calibrate(target: FloatArray, other: FloatArray, alpha: float) -> FloatArray:
    """α-calibrated draft: every context accepts with probability exactly alpha."""
    w = calibration_weights(target, other, alpha)[..., None]
    return w * target + (1.0 - w) * other


def calibrate_far(target: FloatArray, alpha: float) -> FloatArray:
    """``calibrate(target, one_hot_argmin(target), alpha)``, bit for bit, without the one-hot:
    the base's overlap with p >= 0 is min p (a sum of zeros and min p), and the blend is
    w p everywhere (w p + (1-w) 0) but at the argmin, where it is w p + (1-w)."""
    t = np.asarray(target, dtype=np.float64)
    at = t.argmin(axis=-1)[..., None]
    w = _weights(np.take_along_axis(t, at, axis=-1)[..., 0], alpha)[..., None]
    out = w * t
    np.put_along_axis(out, at, np.take_along_axis(out, at, axis=-1) + (1.0 - w), axis=-1)
    return out
