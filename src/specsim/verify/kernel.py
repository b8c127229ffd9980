"""One round of verification on explicit arrays, batched: :func:`verify` (validated, the public
door) and :func:`verify_uniforms` (from given uniforms, for callers that manage their own
streams), with the input checks :func:`check_rows` and :func:`check_round`.

Leviathan, Kalman & Matias 2022 (arXiv 2211.17192), Algorithm 1, cited as [L]. The layout is
Hugging Face transformers' ``_speculative_sampling`` (``p`` (batch, γ+1, V), ``q``
(batch, γ, V)) and vLLM's rejection sampler (output tokens (batch, γ+1) padded with -1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.sampling import FloatArray, IntArray, sample_rows
from specsim.verify.rules import CLASSIC_RULES, rule_spec
from specsim.verify.steps import accept, first_rejection, residual

PLACEHOLDER: Final = -1  # the padding of VerifyResult.tokens after the last emitted token
ROW_TOL: Final = 1e-4  # how far from 1 a row of verify()'s inputs may sum before it is refused


@dataclass(frozen=True)
class VerifyResult:
    """What one round of verification emits, per row of the leading axes.

    ``accepted`` (...,): drafts accepted before the first rejection (γ if none was rejected).
    ``tokens`` (..., γ+1): the emitted tokens in order, then :data:`PLACEHOLDER` (-1) after the
    last one (vLLM's convention). ``n_emitted`` (...,): how many entries of ``tokens`` are real
    -- ``accepted + 1``, or for the ``continue`` rule γ after a rejection.
    """

    accepted: IntArray
    tokens: IntArray
    n_emitted: IntArray

    @property
    def final(self) -> IntArray:
        """The token drawn by the round (residual / p on rejection, bonus otherwise), (...,)."""
        return np.take_along_axis(self.tokens, self.accepted[..., None], axis=-1)[..., 0]


def _position(a: FloatArray, index: IntArray) -> FloatArray:
    """Row ``index`` (...,) of the position axis of ``a`` (..., positions, V): (..., V)."""
    return np.take_along_axis(a, index[..., None, None], axis=-2)[..., 0, :]


def _emitted(x: IntArray, n_acc: IntArray, final: IntArray,
             keep_drafts: bool) -> tuple[IntArray, IntArray]:
    """(tokens (..., γ+1) padded with -1, n_emitted (...,)) of a round."""
    gamma = x.shape[-1]
    j = np.arange(gamma + 1)
    k = n_acc[..., None]
    drafts = np.concatenate([x, np.full((*x.shape[:-1], 1), PLACEHOLDER, dtype=x.dtype)],
                            axis=-1)
    tokens = np.where(j < k, drafts, np.where(j == k, final[..., None], PLACEHOLDER))
    if keep_drafts:  # the drafts after the rejection token (drafts[γ] is the placeholder)
        return np.where(j > k, drafts, tokens), np.where(n_acc < gamma, gamma, gamma + 1)
    return tokens, n_acc + 1


def verify_uniforms(p: FloatArray, q: FloatArray, x: IntArray, rule: str,
                    u_accept: FloatArray, u_final: FloatArray) -> VerifyResult:
    """One round of [L] Alg. 1 (or a broken rule) from explicit uniforms, without validation.

    Shapes as :func:`verify`: p (..., γ+1, V), q (..., γ, V), x (..., γ) (any strides: the
    n-gram experiment passes position-major arrays through ``moveaxis``). ``u_accept`` (..., γ)
    tests draft i with ``u_accept[..., i]`` (unused by ``greedy``, whose test needs none);
    ``u_final`` (...,) draws the emitted token by inverse CDF. Callers that manage their own
    uniform streams (the engine, the n-gram and LLM experiments) use this directly.
    """
    spec = rule_spec(rule)
    x = np.asarray(x, dtype=np.intp)
    gamma = x.shape[-1]
    p_draft = p[..., :gamma, :]
    if spec.accept == "argmax":
        ok = x == p_draft.argmax(axis=-1)
    else:
        p_x = np.take_along_axis(p_draft, x[..., None], axis=-1)[..., 0]
        q_x = np.take_along_axis(q, x[..., None], axis=-1)[..., 0]
        ok = accept(u_accept, p_x, q_x)
    n_acc = first_rejection(ok)
    p_stop = _position(p, n_acc)
    if spec.on_rejection == "target" or gamma == 0:
        dist = p_stop
    else:
        q_stop = _position(q, np.minimum(n_acc, gamma - 1))
        dist = np.where((n_acc < gamma)[..., None], residual(p_stop, q_stop), p_stop)
    final = sample_rows(dist, u_final)
    tokens, n_emitted = _emitted(x, n_acc, final, spec.keep_drafts)
    return VerifyResult(n_acc, tokens, n_emitted)


def _first_bad(mask: NDArray[np.bool_]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def check_rows(a: ArrayLike, name: str, row_tol: float = ROW_TOL) -> FloatArray:
    """Validate probability rows (..., V) and return them as float64, each divided by its sum.

    Entries must be finite and >= 0 and every row must sum to 1 within ``row_tol`` (default
    1e-4: float32 softmax output passes, logits or unnormalised scores do not). Rows within the
    tolerance are renormalised (a row summing to exactly 1 is unchanged, bit for bit). Raises
    ValueError with a one-line message naming ``name`` and the first offending index.
    """
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of probabilities") from None
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError(f"{name} must have a non-empty last (vocabulary) axis, "
                         f"got shape {arr.shape}")
    if not 0.0 <= row_tol < 1.0:
        raise ValueError(f"row_tol must lie in [0, 1), got {row_tol!r}")
    if not np.isfinite(arr).all():
        i = _first_bad(~np.isfinite(arr))
        raise ValueError(f"{name} has a non-finite entry {arr[i]} at index {i}")
    if (arr < 0).any():
        i = _first_bad(arr < 0)
        raise ValueError(f"{name} has a negative entry {arr[i]} at index {i}")
    s = arr.sum(axis=-1, keepdims=True)
    off = np.abs(s[..., 0] - 1.0) > row_tol
    if off.any():
        i = _first_bad(off)
        raise ValueError(f"row {i} of {name} sums to {s[i][0]:.9g}, not 1 (row_tol={row_tol}); "
                         f"pass probabilities, e.g. softmax(logits)")
    return np.asarray(arr / s, dtype=np.float64)


def check_round(p: ArrayLike, q: ArrayLike, row_tol: float = ROW_TOL
                ) -> tuple[FloatArray, FloatArray]:
    """Validate one round's rows (:func:`check_rows`) and their shapes: p (..., γ+1, V) and
    q (..., γ, V) with the same leading axes and V. Returns both renormalised, float64."""
    shapes = []
    for name, a in (("p", p), ("q", q)):
        shape = np.shape(a)
        if len(shape) < 2:
            raise ValueError(f"{name} must have at least 2 axes (..., positions, V), "
                             f"got shape {shape}")
        shapes.append(shape)
    sp, sq = shapes
    if sp[-1] != sq[-1]:
        raise ValueError(f"p and q must share the vocabulary axis: p {sp}, q {sq}")
    if sp[:-2] != sq[:-2] or sp[-2] != sq[-2] + 1:
        raise ValueError(f"p must be (..., γ+1, V) and q (..., γ, V) with the same leading "
                         f"axes: got p {sp}, q {sq}")
    return check_rows(p, "p", row_tol), check_rows(q, "q", row_tol)


def _check_tokens(draft_tokens: ArrayLike, shape: tuple[int, ...], vocab: int) -> IntArray:
    x = np.asarray(draft_tokens)
    if x.dtype == bool or not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"draft_tokens must be integers, got dtype {x.dtype}")
    if x.shape != shape:
        raise ValueError(f"draft_tokens must have shape {shape} (p's leading axes + γ), "
                         f"got {x.shape}")
    bad = (x < 0) | (x >= vocab)
    if bad.any():
        i = _first_bad(bad)
        raise ValueError(f"draft token {int(x[i])} at index {i} is outside 0..{vocab - 1}")
    return x.astype(np.intp)


def verify(
    p: ArrayLike,
    q: ArrayLike,
    draft_tokens: ArrayLike,
    rule: str = "correct",
    *,
    rng: np.random.Generator | np.random.SeedSequence | int,
    row_tol: float = ROW_TOL,
) -> VerifyResult:
    """Verify drafted tokens against given target and draft probabilities ([L] Alg. 1).

    Args:
        p: target probabilities (..., γ+1, V): row i is the target's next-token distribution
            after the prompt and the first i drafts (row γ is the bonus position).
        q: draft probabilities (..., γ, V) the drafts were sampled from.
        draft_tokens: the drafted tokens (..., γ), integers in 0..V-1.
        rule: ``correct`` (default) or one of the deliberately broken rules in :data:`RULES`.
        rng: a numpy Generator, or a seed for ``numpy.random.default_rng``.
        row_tol: rows may sum to 1 within this (then they are renormalised); see
            :func:`check_round`.

    Returns:
        :class:`VerifyResult`: ``accepted`` (...,), ``tokens`` (..., γ+1) padded with -1 after
        the last emitted token, ``n_emitted`` (...,).

    Edge cases (as production implementations; see :func:`accept`): p = q accepts every draft
    and emits the bonus token from p[γ]; disjoint supports reject the first draft and emit
    from the residual, which is then p itself; a residual with no mass falls back to p; a
    draft with q(x) = 0 < p(x) is accepted (Hugging Face's behaviour; vLLM rejects it).

    Random numbers: one call draws ``rng.random(batch_shape + (γ+1,))`` -- for each row of
    the leading axes in C order, γ uniforms testing drafts 0..γ-1, then one drawing the
    emitted token -- and nothing else (``greedy`` draws them too, unused). So a batch gives
    exactly the results of a loop over its rows, in C order, with the same Generator.
    """
    spec = rule_spec(rule)
    if spec.scheme is not None:
        raise ValueError(f"rule {rule!r} is played by specsim.schemes.{spec.scheme}, not by "
                         f"verify(); verify() takes one of {CLASSIC_RULES}")
    pa, qa = check_round(p, q, row_tol)
    gamma = qa.shape[-2]
    x = _check_tokens(draft_tokens, (*pa.shape[:-2], gamma), pa.shape[-1])
    if rng is None:
        raise ValueError("rng is required: pass a numpy Generator or an integer seed")
    gen = np.random.default_rng(rng)
    u = gen.random((*x.shape[:-1], gamma + 1))
    return verify_uniforms(pa, qa, x, spec.name, u[..., :gamma], u[..., gamma])
