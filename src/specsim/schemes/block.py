"""Block verification: Sun, Mendlovic, Leviathan et al. 2024, "Block Verification Accelerates
Speculative Decoding" (arXiv 2403.10444), Algorithm 2, cited as [B].

Token-wise verification ([L] Alg. 1, :mod:`specsim.verify`) stops at the first rejected draft.
[B] judges the drafted block X_1..X_γ (drawn from the draft M_s) jointly. With p_0 = 1:

    p_i = min(p_{i-1} M_b(X_i | X^{i-1}) / M_s(X_i | X^{i-1}), 1)                 i = 1..γ
    h_i = S_i / (S_i + 1 - p_i),  S_i = Σ_x max(p_i M_b(x | X^i) - M_s(x | X^i), 0)  i < γ
    h_γ = p_γ

and with η_i ~ U(0, 1) the round keeps X^τ for the *last* i with η_i < h_i (τ = 0 if none),
then emits Y ~ M_b(.|X^γ) if τ = γ, else Y ~ norm(max(p_τ M_b(.|X^τ) - M_s(.|X^τ), 0)).
So P(τ = i | X^γ) = h_i Π_{j>i} (1 - h_j) with h_0 = 1. At γ = 1 this is [L] Alg. 1.

Here M_b, M_s are the rows P[c], Q[c] of an order-1 Markov pair (row = context state), so
M(.|X^i) = row X_i (X_0 = the round's start context). Two 0/0 cases, as production code:

* h_i with S_i = 0 and p_i = 1 (the rows at X_i agree and nothing was lost so far) is 1, its
  limit along p_i = 1. The choice never matters: then X_{i+1} ~ M_s = M_b gives p_{i+1} = 1 and
  h_{i+1} = 1 (or h_γ = p_γ = 1), so τ > i surely (tests/unit/schemes/test_scheme_block.py checks
  it).
* a residual with no mass (S_τ = 0) falls back to M_b(.|X^τ), as :func:`specsim.verify.residual`;
  a round stops there with probability 0 in exact arithmetic (h_τ = 0, or τ > i as above).

:func:`law` enumerates the draft tree from every context (only Q > 0 branches, one numpy array
per depth, no Python loop over paths); :func:`play` runs n chains at once; :func:`path_law`
gives per draft path the law of τ (to compare with token-wise verification).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.exact import RoundLaw, check_gamma, check_pair
from specsim.models.iid import chain_of_rows
from specsim.resources import Footprint
from specsim.sampling import TableSampler, sample_rows
from specsim.schemes.base import Knobs
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample, checked_windows

__all__ = ["MAX_PATHS", "BlockPaths", "backward_step", "excess", "final_residual", "footprint",
           "hold", "law", "path_law", "play", "ratio", "window_cells", "window_law",
           "window_seconds"]

MAX_PATHS = 2**22  # default budget of draft paths law() / path_law() may enumerate


# ---------------------------------------------------------------------------------------------
# The algorithm's pieces, shared by the exact law and the sampled round
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Compact:
    """P, Q restricted per row to the columns where either is positive (padded with zeros):
    row c's entry k is column ``cols[c, k]``; columns ascend, so inverse-CDF draws on these rows
    return the same token as on the full rows (zero entries have zero width)."""

    P: FloatArray  # (S, K)
    Q: FloatArray  # (S, K)
    cols: IntArray  # (S, K)
    full_P: FloatArray  # (S, S)

    @classmethod
    def of(cls, P: FloatArray, Q: FloatArray) -> _Compact:
        support = (P > 0) | (Q > 0)
        order = np.argsort(~support, axis=1, kind="stable")  # support columns first, ascending
        width = int(support.sum(axis=1).max())
        cols = order[:, :width]
        keep = np.take_along_axis(support, cols, axis=1)
        return cls(np.where(keep, np.take_along_axis(P, cols, axis=1), 0.0),
                   np.where(keep, np.take_along_axis(Q, cols, axis=1), 0.0),
                   np.where(keep, cols, 0).astype(np.intp), P)


def ratio(p_prev: FloatArray, p_x: FloatArray, q_x: FloatArray) -> FloatArray:
    """[B] Alg. 2: p_i = min(p_{i-1} M_b(X_i) / M_s(X_i), 1) (q_x > 0: X_i was drafted)."""
    return np.minimum(p_prev * p_x / q_x, 1.0)


def excess(p: FloatArray, rows_p: FloatArray, rows_q: FloatArray) -> tuple[FloatArray, FloatArray]:
    """max(p M_b - M_s, 0) on rows (..., K) and its mass S (...,) ([B] Alg. 2's S_i)."""
    exc = np.maximum(p[..., None] * rows_p - rows_q, 0.0)
    return exc, exc.sum(axis=-1)


def hold(mass: FloatArray, p: FloatArray) -> FloatArray:
    """[B] Alg. 2: h_i = S_i / (S_i + 1 - p_i), 1 at 0/0 (S_i = 0, p_i = 1; module docstring)."""
    den = mass + (1.0 - p)
    return np.where(den > 0, mass / np.where(den > 0, den, 1.0), 1.0)


def final_residual(exc: FloatArray, mass: FloatArray, rows_p: FloatArray) -> FloatArray:
    """The residual norm(max(p M_b - M_s, 0)); M_b where it has no mass (module docstring)."""
    return np.where(mass[..., None] > 0, exc / np.where(mass > 0, mass, 1.0)[..., None], rows_p)


def backward_step(p: FloatArray, rows_p: FloatArray,
                  rows_q: FloatArray) -> tuple[FloatArray, FloatArray]:
    """[B] Alg. 2's backward step at a node whose draft was rejected: its new weight
    h = :func:`hold` and target row :func:`final_residual` (traversal verification's update of
    a parent when a child is deleted, :mod:`.traversal`)."""
    exc, mass = excess(p, rows_p, rows_q)
    return hold(mass, p), final_residual(exc, mass, rows_p)


# ---------------------------------------------------------------------------------------------
# The draft tree
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Level:
    """The draft prefixes X^i of one depth i, as node arrays (n_i,)."""

    parent: IntArray  # node of depth i-1 it extends
    root: IntArray  # the round's start context X_0
    token: IntArray  # X_i
    q: FloatArray  # M_s(X_i | X^{i-1})
    weight: FloatArray  # P(X^i drafted) = Π_{j<=i} M_s(X_j | X^{j-1})
    p: FloatArray  # p_i
    h: FloatArray  # h_i (h_0 = 1: τ = 0 when no η_i < h_i)


def _validate(P: ArrayLike, Q: ArrayLike, gamma: int,
              knobs: Knobs) -> tuple[FloatArray, FloatArray, int]:
    if knobs:
        raise ValueError(f"block verification takes no knobs, got {sorted(knobs)}")
    Pa, Qa = check_pair(P, Q)
    return Pa, Qa, check_gamma(gamma)


def _tree(c: _Compact, roots: IntArray, gamma: int, max_paths: int) -> list[_Level]:
    """Every draft prefix of length 0..γ from ``roots`` with positive draft probability."""
    drafted = c.Q > 0
    leaves = np.ones(c.P.shape[0])  # leaves[s]: draft paths of the current length from s
    for _ in range(gamma):
        leaves = (drafted * leaves[c.cols]).sum(axis=1)
    n_paths = float(leaves[roots].sum())
    if n_paths > max_paths:
        raise ValueError(f"block verification: {n_paths:.0f} draft paths of length "
                         f"gamma={gamma} from {roots.size} context(s) exceed "
                         f"max_paths={max_paths}; lower gamma or raise max_paths")
    ones = np.ones(roots.size)
    levels = [_Level(np.arange(roots.size), roots, roots, ones, ones, ones, ones)]
    degree = drafted.sum(axis=1)
    slots = np.flatnonzero(drafted)  # (row, k) of every drafted entry, row-major
    first = np.cumsum(degree) - degree
    for i in range(1, gamma + 1):
        up = levels[-1]
        counts = degree[up.token]
        parent = np.repeat(np.arange(up.token.size), counts)
        offset = np.arange(parent.size) - np.repeat(np.cumsum(counts) - counts, counts)
        row, k = np.divmod(slots[first[up.token[parent]] + offset], c.P.shape[1])
        token, q = c.cols[row, k], c.Q[row, k]
        p = ratio(up.p[parent], c.P[row, k], q)
        h = hold(excess(p, c.P[token], c.Q[token])[1], p) if i < gamma else p
        levels.append(_Level(parent, up.root[parent], token, q, up.weight[parent] * q, p, h))
    return levels


def _survive(levels: list[_Level]) -> list[FloatArray]:
    """F_i per node of depth i: E[Π_{j>i} (1 - h_j) | X^i], backwards from F_γ = 1, so that
    P(X^i drafted, τ = i) = weight h_i F_i."""
    out = [np.ones(levels[-1].token.size)]
    for i in range(len(levels) - 1, 0, -1):
        lv = levels[i]
        out.append(cast(FloatArray, np.bincount(lv.parent, lv.q * (1.0 - lv.h) * out[-1],
                                                minlength=levels[i - 1].token.size)))
    return out[::-1]


def _emit(c: _Compact, lv: _Level, mass: FloatArray, key: IntArray, n_keys: int,
          last: bool) -> FloatArray:
    """(n_keys, S): Σ over nodes of ``mass`` × the law of Y when τ stops there, by ``key``."""
    size = c.full_P.shape[0]
    if last:  # τ = γ: Y ~ M_b(.|X^γ)
        by_token = np.bincount(key * size + lv.token, mass, minlength=n_keys * size)
        return np.asarray(by_token.reshape(n_keys, size) @ c.full_P)
    exc, total = excess(lv.p, c.P[lv.token], c.Q[lv.token])
    rows = mass[:, None] * final_residual(exc, total, c.P[lv.token])
    cell = key[:, None] * size + c.cols[lv.token]
    return cast(FloatArray, np.bincount(cell.ravel(), rows.ravel(),
                                        minlength=n_keys * size).reshape(n_keys, size))


def law(P: ArrayLike, Q: ArrayLike, gamma: int, knobs: Knobs, *,
        max_paths: int = MAX_PATHS) -> RoundLaw:
    """Exact law of one [B] Alg. 2 round from every context (N = S), by enumerating the draft
    tree depth by depth (work ~ draft paths × row support; ValueError beyond ``max_paths``)."""
    Pa, Qa, g = _validate(P, Q, gamma, knobs)
    size = Pa.shape[0]
    c = _Compact.of(Pa, Qa)
    levels = _tree(c, np.arange(size), g, max_paths)
    survive = _survive(levels)
    tokens = np.zeros((size, g + 2))
    next_state = np.zeros((size, size))
    pair = np.zeros((size, size, size))
    single = np.zeros((size, size))
    for i, (lv, f) in enumerate(zip(levels, survive, strict=True)):
        stop = lv.weight * lv.h * f  # P(X^i drafted, τ = i)
        tokens[:, i + 1] = np.bincount(lv.root, stop, minlength=size)
        if i == 1:  # τ = 1: the first two tokens are X_1, Y
            pair += _emit(c, lv, stop, lv.root * size + lv.token, size * size,
                          i == g).reshape(size, size, size)
            next_state = next_state + pair.sum(axis=1)
        else:
            next_state = next_state + _emit(c, lv, stop, lv.root, size, i == g)
        if i == 0:
            single = next_state.copy()  # τ = 0: one token, Y, which is the next context
    if g >= 2:  # τ >= 2: the first two are X_1, X_2, and P(τ >= 2 | X^2) = 1 - (1 - h_2) F_2
        lv = levels[2]
        # a probability: clipped to [0, 1] against rounding (1 - (1 - h) F can come out -1e-16)
        kept = lv.weight * np.clip(1.0 - (1.0 - lv.h) * survive[2], 0.0, 1.0)
        cell = (lv.root * size + levels[1].token[lv.parent]) * size + lv.token
        pair += np.bincount(cell, kept, minlength=size**3).reshape(size, size, size)
    return RoundLaw(tokens, next_state, np.full(size, float(g)), single, pair, np.arange(size))


@dataclass(frozen=True)
class BlockPaths:
    """Per draft path X_1..X_γ from one context (m paths): drafts (m, γ), its draft
    probability weight (m,), p[:, i] = p_i and h[:, i] = h_i (m, γ+1; p_0 = h_0 = 1), and
    tau[:, i] = P(τ = i | X^γ) = h_i Π_{j>i} (1 - h_j) (m, γ+1)."""

    drafts: IntArray
    weight: FloatArray
    p: FloatArray
    h: FloatArray
    tau: FloatArray


def path_law(P: ArrayLike, Q: ArrayLike, gamma: int, start: int, *,
             max_paths: int = MAX_PATHS) -> BlockPaths:
    """[B] Alg. 2's per-path law of τ from context ``start`` (only Q > 0 paths)."""
    Pa, Qa, g = _validate(P, Q, gamma, {})
    if not 0 <= start < Pa.shape[0]:
        raise ValueError(f"start={start} out of range for {Pa.shape[0]} states")
    levels = _tree(_Compact.of(Pa, Qa), np.array([start], dtype=np.intp), g, max_paths)
    m = levels[-1].token.size
    node = np.arange(m)
    cols: dict[str, list[NDArray[Any]]] = {"drafts": [], "p": [], "h": []}
    for lv in levels[::-1]:  # walk from the leaves to the root
        cols["drafts"].append(lv.token[node])
        cols["p"].append(lv.p[node])
        cols["h"].append(lv.h[node])
        node = lv.parent[node]
    drafts, p, h = (np.stack(cols[k][::-1], axis=1) for k in ("drafts", "p", "h"))
    later = np.cumprod((1.0 - h)[:, :0:-1], axis=1)[:, ::-1]  # Π_{j>i} (1 - h_j), i < γ
    tau = h * np.concatenate([later, np.ones((m, 1))], axis=1)
    return BlockPaths(drafts[:, 1:], levels[-1].weight, p, h, tau)


def window_law(p: ArrayLike, q: ArrayLike, gamma: int, knobs: Knobs,
               at: ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """The round's law from n starts of position-indexed rows p, q (n, γ+1, V) (or rows met
    as ``at`` says; the ``window_law`` of :mod:`.base`): [B]'s per-path law of τ
    (:func:`path_law`) on each start's window chain (:func:`specsim.models.iid.chain_of_rows`),
    one start at a time -- a path's h_i depends on its tokens, so nothing lumps. Drafted
    tokens: one per depth."""
    _, _, g = _validate(np.eye(1), np.eye(1), gamma, knobs)
    p, q = checked_windows(p, q, g, at)
    out = np.zeros((p.shape[0], g + 2))
    for i in range(p.shape[0]):
        P, Q, first = chain_of_rows(p[i], q[i])
        paths = path_law(P, Q, g, first)
        out[i, 1:] = paths.weight @ paths.tau
    return out, np.arange(g + 1, dtype=np.float64)


def window_cells(n: int, vocab: int, gamma: int, knobs: Knobs) -> float:
    """Peak cells of :func:`window_law`: one start's window chain and its path law at a time
    (:func:`footprint` of the (γ+1)V+1 states), and the law of n starts."""
    size = (gamma + 1) * vocab + 1
    one = footprint(size, vocab, gamma, knobs, 1).law
    return 2.0 * size * size + (one.cells if one is not None else 0.0) + n * (gamma + 2.0)


def window_seconds(n: int, vocab: int, gamma: int, knobs: Knobs,
                   rows: ArrayLike | None = None) -> float:
    """Estimated seconds of :func:`window_law` (measured on one core: ~1.5 ms a start plus
    its draft tree, V^γ paths at ~7e6 per second)."""
    return n * (1.5e-3 + float(vocab) ** gamma / 7e6)


# ---------------------------------------------------------------------------------------------
# One sampled round
# ---------------------------------------------------------------------------------------------
def play(P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
         rng: np.random.Generator) -> RoundSample:
    """One [B] Alg. 2 round for n chains from contexts ``state`` (n,), vectorised over chains.

    Each chain uses 2γ+1 uniforms, rng.random((2γ+1, n)): rows 0..γ-1 draw X_1..X_γ, rows
    γ..2γ-1 are η_1..η_γ (kept iff η_i < h_i, so h = 0 never keeps and h = 1 always does),
    row 2γ draws Y; every draw is by inverse CDF, ``searchsorted(cdf, u, 'right')``: the drafts
    from the compact Q's sampler (:meth:`specsim.sampling.TableSampler.of`), Y from each
    chain's own row (:func:`specsim.sampling.sample_rows`).
    """
    Pa, Qa, g = _validate(P, Q, gamma, knobs)
    s = np.asarray(state)
    if s.ndim != 1 or not np.issubdtype(s.dtype, np.integer) or (
            s.size > 0 and (s.min() < 0 or s.max() >= Pa.shape[0])):
        raise ValueError(f"state must be a 1-D array of context states in [0, {Pa.shape[0]})")
    c = _Compact.of(Pa, Qa)
    draw_q = TableSampler.of(c.Q)
    n = s.size
    u = rng.random((2 * g + 1, n))
    ctx = s.astype(np.intp)
    p = np.ones(n)
    drafts = np.empty((n, g), dtype=np.intp)
    tau, ctx_tau, p_tau = np.zeros(n, dtype=np.intp), ctx.copy(), p.copy()
    for i in range(1, g + 1):
        k = draw_q(ctx, u[i - 1])
        x = c.cols[ctx, k]
        p = ratio(p, c.P[ctx, k], c.Q[ctx, k])
        h = hold(excess(p, c.P[x], c.Q[x])[1], p) if i < g else p
        kept = u[g + i - 1] < h
        tau = np.where(kept, i, tau)
        ctx_tau = np.where(kept, x, ctx_tau)
        p_tau = np.where(kept, p, p_tau)
        drafts[:, i - 1] = ctx = x
    exc, total = excess(p_tau, c.P[ctx_tau], c.Q[ctx_tau])
    rows = np.where((tau == g)[:, None], c.P[ctx_tau], final_residual(exc, total, c.P[ctx_tau]))
    y = c.cols[ctx_tau, sample_rows(rows, u[2 * g])]
    j = np.arange(g + 1)
    padded = np.concatenate([drafts, np.full((n, 1), -1, dtype=np.intp)], axis=1)
    out = np.where(j < tau[:, None], padded, np.where(j == tau[:, None], y[:, None], -1))
    return RoundSample(out, tau + 1, y, np.full(n, g, dtype=np.intp))


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost on S = ``size`` contexts whose draft rows reach
    at most ``support`` tokens: the tree holds S d^i prefixes at depth i (8 numbers each), the
    emission step ~5 d numbers per prefix of a depth, the (S, S, S) pair law three times;
    None beyond :data:`MAX_PATHS` draft paths (S d^γ, where :func:`law` refuses). A round
    gathers ~8 compact rows per chain, beside the compact Q's sampler."""
    d = float(min(support, size))
    levels = [size * d**i for i in range(gamma + 1)]
    law_fp = None
    if levels[-1] <= MAX_PATHS:
        cells = 8 * sum(levels) + 5 * d * max(levels[:-1] or [0.0]) + 3.0 * size**3 \
            + 8.0 * size * size
        law_fp = Footprint(cells, 20 * d * sum(levels) + 4.0 * size**3,
                           what=f"block exact law ({levels[-1]:.3g} draft paths)")
    n = float(chains)
    play = Footprint((2 * gamma + 1) * n + 3 * n * gamma + 8 * n * d + 8.0 * size * size
                     + TableSampler.cells(size, int(d)),
                     10 * (n * gamma * 12 * d + 8.0 * size * size),
                     what=f"simulation ({chains} chains at once)")
    return LawSize(size, law_fp, play)
