"""The pieces of one verification step, written once: the accept test (:func:`accept`), its
per-token probability (:func:`acceptance_probability`), the residual (:func:`residual`), the
rule's rejection distribution (:func:`rejection_distribution`) and :func:`first_rejection`.

Leviathan, Kalman & Matias 2022 (arXiv 2211.17192), Algorithm 1, cited as [L]; Chen et al. 2023
(arXiv 2302.01318), Algorithm 2, cited as [C]. The Markov engine tabulates them per (context,
token) cell; the n-gram and LLM experiments and :func:`specsim.verify.verify` apply them to
explicit rows.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import NDArray

from specsim.sampling import FloatArray, IntArray
from specsim.verify.rules import rule_spec


def accept(u: FloatArray, p_x: FloatArray, q_x: FloatArray) -> NDArray[np.bool_]:
    """[L] Alg. 1's test on explicit probabilities: accept iff ``u q(x) < p(x)``, u ~ U[0, 1).

    This is ``u < min(1, p(x)/q(x))`` without the division: p(x) >= q(x) always accepts
    (u < 1), p(x) = 0 never does (not even at u = 0), and a draft with q(x) = 0 < p(x) -- which
    a sampler of q never proposes, but logged probabilities can contain -- is accepted, the
    limit p/q -> inf. Hugging Face's ``_speculative_sampling`` does the same (``r <= p/q``
    with p/q = inf); vLLM's rejection sampler instead rejects whenever q(x) = 0.
    """
    return u * q_x < p_x


def acceptance_probability(p: FloatArray, q: FloatArray, rule: str = "correct") -> FloatArray:
    """Per token x of rows (..., V): the probability a drafted x is accepted under ``rule``.

    ``ratio`` rules: min(1, p(x)/q(x)), 1 where q(x) = 0 < p(x), 0 where p(x) = q(x) = 0 (as
    :func:`accept`). ``argmax`` (greedy): 1 on the row's argmax of p, 0 elsewhere. A table of
    this is what the Markov engine looks up: it accepts iff ``u < acceptance_probability``,
    the same test as :func:`accept` (in exact arithmetic; the engine's per-row paths use
    :func:`accept`, its per-cell tables this).
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if rule_spec(rule).accept == "argmax":
        out = np.zeros(np.broadcast_shapes(p.shape, q.shape))
        np.put_along_axis(out, np.broadcast_to(p, out.shape).argmax(axis=-1)[..., None], 1.0,
                          axis=-1)
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.minimum(1.0, p / q)
    return np.where(q > 0, ratio, (p > 0).astype(np.float64))


def residual(p: FloatArray, q: FloatArray) -> FloatArray:
    """norm(max(p - q, 0)) on the last axis; p where that has no mass ([L] Alg. 1, [C] Alg. 2).

    The residual has no mass only where p <= q everywhere, i.e. p = q: then no rejection can
    happen in exact arithmetic, and p is the distribution that keeps the round lossless when
    rounding makes one happen anyway.
    """
    r = np.clip(p - q, 0.0, None)
    s = r.sum(axis=-1, keepdims=True)
    return np.where(s > 0, r / np.where(s > 0, s, 1.0), p)


def rejection_distribution(p: FloatArray, q: FloatArray, rule: str = "correct") -> FloatArray:
    """The law of the token emitted at the first rejection: :func:`residual` or p itself."""
    return residual(p, q) if rule_spec(rule).on_rejection == "residual" else p


def first_rejection(accepted: NDArray[np.bool_], axis: int = -1) -> IntArray:
    """Number of leading accepted positions along ``axis`` (γ when all were accepted)."""
    a = np.asarray(accepted, dtype=bool)
    if a.size <= 4096:  # small (verify's batches): two calls; large (the engine's): row by row
        return cast(IntArray, np.logical_and.accumulate(a, axis=axis).sum(axis=axis,
                                                                           dtype=np.intp))
    a = np.moveaxis(a, axis, 0)
    if a.shape[0] == 0:
        return np.zeros(a.shape[1:], dtype=np.intp)
    # counted in bytes (bool and uint8 share their layout): no casting in the loop
    count = np.uint8 if a.shape[0] < 256 else np.intp
    alive = a[0].astype(count)
    n_acc = alive.copy()
    for row in a[1:]:
        alive &= row.view(np.uint8) if count is np.uint8 else row
        n_acc += alive
    return cast(IntArray, n_acc.astype(np.intp, copy=False))
