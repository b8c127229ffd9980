"""One round of verification on explicit arrays, batched: :func:`verify` (validated, the public
door) and :func:`verify_uniforms` (from given uniforms, for callers that manage their own
streams; :func:`accepted_uniforms`, its accepted count alone), with the input checks
:func:`check_rows` and :func:`check_round`.

Leviathan, Kalman & Matias 2022 (arXiv 2211.17192), Algorithm 1, cited as [L]. The layout is
Hugging Face transformers' ``_speculative_sampling`` (``p`` (batch, γ+1, V), ``q``
(batch, γ, V)) and vLLM's rejection sampler (output tokens (batch, γ+1) padded with -1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, NoReturn, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.sampling import FloatArray, IntArray, inverse_cdf_blocked, sample_rows
from specsim.verify.rules import CLASSIC_RULES, RuleSpec, rule_spec
from specsim.verify.steps import accept, first_rejection, residual

PLACEHOLDER: Final = -1  # the padding of VerifyResult.tokens after the last emitted token
ROW_TOL: Final = 1e-4  # how far from 1 a row of verify()'s inputs may sum before it is refused
BLOCK: Final = 2048  # longer rows are drawn from by blocks (sampling.inverse_cdf_blocked)
_GROUP: Final = 1 << 13  # stop rows drawn from together: about this many entries (64 kB float64)
_LONG_GROUP: Final = 1 << 17  # the same for rows longer than BLOCK (their work buffer is reused)
_CHUNK: Final = 1 << 17  # entries per slice of the input checks (two reads, the second cached)

Rows = NDArray[np.floating]  # probability rows as given: float32 or float64, any strides
Sums = tuple[FloatArray, FloatArray]  # float64 row sums of p (..., γ+1) and q (..., γ)


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


def _draw(prow: Rows, ps: FloatArray | None, qrow: Rows | None, qs: FloatArray | None,
          rejected: NDArray[np.bool_], u: FloatArray, work: FloatArray) -> IntArray:
    """The token drawn at each stop row (G, V): from the residual where ``rejected``, else from p.

    ``ps``/``qs`` are the rows' sums (None: the rows are used as given). Rows up to :data:`BLOCK`
    long are normalised and drawn exactly as :func:`residual` and :func:`sample_rows` do; longer
    rows draw with :func:`inverse_cdf_blocked`, in float64: p's row as it is, the residual as
    ``max(p - (sum p / sum q) q, 0)`` -- sum(p) times max(norm(p) - norm(q), 0), the same law
    -- computed in ``work`` (float64, at least (G, V)), reused from group to group so no fresh
    pages are touched.
    """
    if prow.shape[-1] <= BLOCK:
        pn = prow if ps is None else prow / ps[:, None]
        if qrow is None:
            return sample_rows(cast(FloatArray, pn), u)  # float32 rows too, as given
        qn = qrow if qs is None else qrow / qs[:, None]
        pf, qf = cast(FloatArray, pn), cast(FloatArray, qn)  # float32 rows too, as given
        return sample_rows(np.where(rejected[:, None], residual(pf, qf), pf), u)
    if qrow is None:
        return inverse_cdf_blocked(cast(FloatArray, prow), u, BLOCK)[0]
    weight = 1.0 if ps is None or qs is None else ps / qs
    dist = work[: len(prow)]
    np.multiply(qrow, -np.reshape(weight, (-1, 1)), out=dist)
    dist += prow
    np.maximum(dist, 0.0, out=dist)
    tokens, mass = inverse_cdf_blocked(dist, u, BLOCK)
    empty = ~(mass > 0)
    if empty.any():  # no residual mass (p = q): p itself, as residual() does
        tokens[empty] = inverse_cdf_blocked(cast(FloatArray, prow[empty]), u[empty], BLOCK)[0]
    return tokens


def _final_tokens(p: Rows, q: Rows, sums: Sums | None,
                  n_acc: IntArray, residual_rows: bool, u: FloatArray) -> IntArray:
    """The token each round draws at its stop row ``n_acc`` (...,).

    Only that row of p (and of q) is read, for groups of rounds of about ``_GROUP`` entries
    (``_LONG_GROUP`` at V > :data:`BLOCK`) so the float64 work stays in cache: short rows all
    together, long ones the bonus rows (p only) apart from the rejected ones (the residual),
    one row at a time (views, no copy) at V >= ``_LONG_GROUP``.
    """
    if n_acc.ndim == 0:
        one = None if sums is None else (sums[0][None], sums[1][None])
        return cast(IntArray, _final_tokens(p[None], q[None], one, n_acc[None], residual_rows,
                                            np.asarray(u)[None])[0])
    gamma, v = q.shape[-2], p.shape[-1]
    k_all = n_acc.reshape(-1)
    u_all = np.reshape(u, -1) if np.size(u) == k_all.size else np.broadcast_to(
        u, n_acc.shape).reshape(-1)
    where = ((np.arange(k_all.size),) if n_acc.ndim == 1 else
             np.unravel_index(np.arange(k_all.size), n_acc.shape))
    rejected = k_all < gamma if residual_rows else np.zeros(k_all.size, dtype=bool)
    out = np.empty(k_all.size, dtype=np.intp)
    step = max(1, (_GROUP if v <= BLOCK else _LONG_GROUP) // v)
    work = np.empty((step, v) if v > BLOCK and rejected.any() else (0, 0))
    sets = ([np.arange(k_all.size)] if v <= BLOCK else
            [np.flatnonzero(~rejected), np.flatnonzero(rejected)])
    for rows in sets:
        for g in range(0, rows.size, step):
            r = rows[g : g + step]
            k = k_all[r]
            at: tuple[Any, ...] = (*(i[r] for i in where), k)
            if step == 1:  # one row: basic indexing, a view
                at = tuple(int(i[0]) for i in at)
            kq = (*at[:-1], np.minimum(k, gamma - 1) if step > 1 else min(at[-1], gamma - 1))
            rej = rejected[r]
            qrow = ps = qs = None
            if sums is not None:
                ps = np.reshape(sums[0][at], -1)
                qs = np.reshape(sums[1][kq], -1) if gamma else None
            if rej.any():
                qrow = q[kq].reshape(len(r), v)
            out[r] = _draw(p[at].reshape(len(r), v), ps, qrow, qs, rej, u_all[r], work)
    return out.reshape(n_acc.shape)


def _accepted(p: Rows, q: Rows, x: IntArray, spec: RuleSpec, u_accept: FloatArray,
              sums: Sums | None = None) -> IntArray:
    """The drafts a round accepts before its first rejection (...,), rows as :func:`_round`."""
    gamma = x.shape[-1]
    if spec.accept == "argmax":  # the argmax of p is that of p / sum(p)
        ok = x == p[..., :gamma, :].argmax(axis=-1)
    else:
        at = ((np.arange(x.shape[0])[:, None], np.arange(gamma), x) if x.ndim == 2 else
              (*np.indices(x.shape, sparse=True), x))  # entry x[..., i] of row i
        p_x, q_x = p[at], q[at]
        if sums is not None:  # exactly the entries of the renormalised rows
            p_x, q_x = p_x / sums[0][..., :gamma], q_x / sums[1]
        ok = accept(u_accept, cast(FloatArray, p_x), cast(FloatArray, q_x))
    return first_rejection(ok)


def _round(p: Rows, q: Rows, x: IntArray, spec: RuleSpec,
           u_accept: FloatArray, u_final: FloatArray, sums: Sums | None = None) -> VerifyResult:
    """One round on rows used as given (``sums`` None) or divided by their ``sums`` (sp, sq)."""
    gamma = x.shape[-1]
    n_acc = _accepted(p, q, x, spec, u_accept, sums)
    residual_rows = spec.on_rejection == "residual" and gamma > 0
    final = _final_tokens(p, q, sums, n_acc, residual_rows, u_final)
    tokens, n_emitted = _emitted(x, n_acc, final, spec.keep_drafts)
    return VerifyResult(n_acc, tokens, n_emitted)


def verify_uniforms(p: FloatArray, q: FloatArray, x: IntArray, rule: str,
                    u_accept: FloatArray, u_final: FloatArray) -> VerifyResult:
    """One round of [L] Alg. 1 (or a broken rule) from explicit uniforms, without validation.

    Shapes as :func:`verify`: p (..., γ+1, V), q (..., γ, V), x (..., γ) (any strides: the
    n-gram experiment passes position-major arrays through ``moveaxis``); rows are used as
    given (normalised by the caller). ``u_accept`` (..., γ) tests draft i with
    ``u_accept[..., i]`` (unused by ``greedy``, whose test needs none); ``u_final`` (...,) draws
    the emitted token by inverse CDF. Callers that manage their own uniform streams (the
    engine, the n-gram and LLM experiments) use this directly.
    """
    return _round(p, q, np.asarray(x, dtype=np.intp), rule_spec(rule), u_accept, u_final)


def accepted_uniforms(p: FloatArray, q: FloatArray, x: IntArray, rule: str,
                      u_accept: FloatArray) -> IntArray:
    """``verify_uniforms(p, q, x, rule, u_accept, u_final).accepted`` without drawing the
    emitted token: for a long run that counts accepted drafts only."""
    return _accepted(p, q, np.asarray(x, dtype=np.intp), rule_spec(rule), u_accept)


def _first_bad(mask: NDArray[np.bool_]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


_KINDS = {"U": "text", "S": "bytes", "c": "complex numbers", "O": "Python objects",
          "M": "dates", "m": "time spans", "V": "records"}


def _float_rows(a: ArrayLike, name: str) -> Rows:
    """``a`` as rows of floats: a float32 or float64 array as it is (no copy), else float64.
    Only real numbers are probabilities: strings, complex numbers, objects (and anything else
    numpy would convert, dropping an imaginary part or parsing text) are refused, naming the
    dtype."""
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of probabilities") from None
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"{name} must be an array of real probabilities, got dtype "
                         f"{arr.dtype} ({_KINDS.get(arr.dtype.kind, 'not real numbers')})")
    if arr.dtype != np.float32 and arr.dtype != np.float64:
        arr = np.asarray(arr, dtype=np.float64)
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError(f"{name} must have a non-empty last (vocabulary) axis, "
                         f"got shape {arr.shape}")
    return arr


def _refuse(arr: Rows, total: FloatArray, name: str, row_tol: float) -> NoReturn:
    """The one-line ValueError for the first bad entry or row (non-finite, negative, sum)."""
    bad = ~np.isfinite(arr)
    if bad.any():
        i = _first_bad(bad)
        raise ValueError(f"{name} has a non-finite entry {np.float64(arr[i])} at index {i}")
    if (arr < 0).any():
        i = _first_bad(arr < 0)
        raise ValueError(f"{name} has a negative entry {np.float64(arr[i])} at index {i}")
    i = _first_bad(~(np.abs(total - 1.0) <= row_tol))
    raise ValueError(f"row {i} of {name} sums to {total[i]:.9g}, not 1 (row_tol={row_tol}); "
                     f"pass probabilities, e.g. softmax(logits)")


def _row_sums(arr: Rows, name: str, row_tol: float, check: bool = True,
              exact: bool = False) -> FloatArray:
    """The float64 sums of rows ``arr`` (..., V), validated when ``check``, without a copy.

    One read of the rows per check, in the input's dtype: their sums (numpy's pairwise sum:
    relative rounding ~1e-7 in float32, ~1e-16 in float64; ``exact`` accumulates float32 in
    float64, for the renormalised copies :func:`check_rows` returns) and their minima, slice
    by slice so the second read hits the cache. A row is valid iff its minimum is >= 0 and
    its sum within ``row_tol`` of 1 -- this also refuses NaN and
    infinities (a NaN fails both tests, +inf makes the sum infinite, -inf the minimum
    negative); only then are the entries searched for the first culprit (:func:`_refuse`).
    """
    if not 0.0 <= row_tol < 1.0:
        raise ValueError(f"row_tol must lie in [0, 1), got {row_tol!r}")
    total = np.empty(arr.shape[:-1], dtype=np.float64 if exact else arr.dtype)
    low = np.empty(arr.shape[:-1], dtype=arr.dtype)
    v = arr.shape[-1]
    parts: list[tuple[NDArray[Any], NDArray[Any], NDArray[Any]]] = [(arr, total, low)]
    if arr.size > 4 * _CHUNK and arr.flags.c_contiguous:  # slices of whole rows (views)
        rows, t, lo = arr.reshape(-1, v), total.reshape(-1), low.reshape(-1)
        step = max(1, _CHUNK // v)
        parts = [(rows[i:i + step], t[i:i + step], lo[i:i + step])
                 for i in range(0, len(rows), step)]
    for part, t, lo in parts:
        np.add.reduce(part, axis=-1, out=t, dtype=t.dtype)
        if check:
            np.minimum.reduce(part, axis=-1, out=lo)
    total = np.asarray(total, dtype=np.float64)
    if check and not ((low >= 0).all() and (np.abs(total - 1.0) <= row_tol).all()):
        _refuse(arr, total, name, row_tol)
    return total


def check_rows(a: ArrayLike, name: str, row_tol: float = ROW_TOL) -> FloatArray:
    """Validate probability rows (..., V) and return them as float64, each divided by its sum.

    Entries must be finite and >= 0 and every row must sum to 1 within ``row_tol`` (default
    1e-4: float32 softmax output passes, logits or unnormalised scores do not). Rows within the
    tolerance are renormalised (a row summing to exactly 1 is unchanged, bit for bit). Raises
    ValueError with a one-line message naming ``name`` and the first offending index.
    """
    arr = _float_rows(a, name)
    total = _row_sums(arr, name, row_tol, exact=True)
    return np.asarray(arr / total[..., None], dtype=np.float64)


def _round_rows(p: ArrayLike, q: ArrayLike, row_tol: float, check: bool = True,
                exact: bool = False) -> tuple[Rows, Rows, Sums]:
    """One round's rows as float32/float64 arrays (not copied) and their sums (sp, sq), the
    shapes always checked, the values when ``check`` (:func:`_row_sums`)."""
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
    pa = _float_rows(p, "p")
    p_sums = _row_sums(pa, "p", row_tol, check, exact)
    qa = _float_rows(q, "q")
    return pa, qa, (p_sums, _row_sums(qa, "q", row_tol, check, exact))


def check_round(p: ArrayLike, q: ArrayLike, row_tol: float = ROW_TOL
                ) -> tuple[FloatArray, FloatArray]:
    """Validate one round's rows (:func:`check_rows`) and their shapes: p (..., γ+1, V) and
    q (..., γ, V) with the same leading axes and V. Returns both renormalised, float64."""
    pa, qa, (sp, sq) = _round_rows(p, q, row_tol, exact=True)
    return (np.asarray(pa / sp[..., None], dtype=np.float64),
            np.asarray(qa / sq[..., None], dtype=np.float64))


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
    check: bool = True,
) -> VerifyResult:
    """Verify drafted tokens against given target and draft probabilities ([L] Alg. 1).

    Args:
        p: target probabilities (..., γ+1, V): row i is the target's next-token distribution
            after the prompt and the first i drafts (row γ is the bonus position).
        q: draft probabilities (..., γ, V) the drafts were sampled from.
        draft_tokens: the drafted tokens (..., γ), integers in 0..V-1.
        rule: ``correct`` (default) or one of the deliberately broken rules in
            :data:`CLASSIC_RULES`.
        rng: a numpy Generator, or a seed for ``numpy.random.default_rng``.
        row_tol: rows may sum to 1 within this (then they are renormalised); see
            :func:`check_round`.
        check: ``False`` skips the checks of p's and q's values (finite, >= 0, rows summing
            to 1 within ``row_tol``) for callers who validated them once; shapes, tokens and
            the rule are still checked. With values that would fail a check the result is
            undefined (some tokens in 0..V-1, no error); with valid values it is the same as
            with ``check=True``.

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

    Arithmetic: float32 and float64 inputs are read as they are (never copied); the checks
    are one sum and one minimum per row in the input's dtype, and a row is divided by its sum
    only where it is read -- the drafted tokens' entries and the one stop row of each round.
    The draft at position i is accepted iff ``u_i q_i(x_i)/sum(q_i) < p_i(x_i)/sum(p_i)``
    (float64 division). The emitted token is the inverse-CDF draw of ``u_γ`` from the
    residual (or p) in float64: for V <= :data:`BLOCK` by one cumulative sum
    (:func:`~specsim.sampling.sample_rows`), above by block sums then one block's cumulative
    sum (:func:`~specsim.sampling.inverse_cdf_blocked`, the same law, cells' edges equal up to
    the last bits). float32 rows are divided by their float32 sums (relative rounding ~1e-7,
    below the rounding of the entries themselves).
    """
    spec = rule_spec(rule)
    if spec.accept == "scheme":
        raise ValueError(f"rule {rule!r} is played by specsim.schemes.{spec.scheme}, not by "
                         f"verify(); verify() takes one of {CLASSIC_RULES}")
    pa, qa, sums = _round_rows(p, q, row_tol, check)
    gamma = qa.shape[-2]
    x = _check_tokens(draft_tokens, (*pa.shape[:-2], gamma), pa.shape[-1])
    if rng is None:
        raise ValueError("rng is required: pass a numpy Generator or an integer seed")
    gen = np.random.default_rng(rng)
    u = gen.random((*x.shape[:-1], gamma + 1))
    return _round(pa, qa, x, spec, u[..., :gamma], u[..., gamma], sums)
