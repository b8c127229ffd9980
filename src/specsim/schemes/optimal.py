"""Draft-length policy: the exact optimal stopping rule of drafting for a draft cost c.

SpecDec++ (Huang, Guo & Wang 2024, arXiv 2405.19715) casts the choice of draft length as a
Markov decision process: after each draft token the drafter decides to stop or to go on. On an
order-1 Markov pair (P, Q) with a token-wise rule (``accept[u, x]``, ``reject[u, :]``,
:mod:`.tokenwise`) that MDP is finite and is solved here exactly, for one draft cost c, the
longest draft being the point's γ (the cap).

**Objective.** Long-run tokens per unit cost, a round drafting g tokens costing 1 + g c target
calls (the speedup the tables report). Renewal-reward over rounds makes this a semi-Markov
decision process whose optimum over *every* non-anticipating policy -- one that may look at
everything drafted and emitted so far, in this round and before (fixed γ, transformers'
confidence threshold on q(x | prev), its heuristic schedule carrying past outcomes, randomised
rules) -- is attained by a stationary deterministic rule on a sufficient state (finite SMDP).
The ratio policy iteration below assumes every policy it meets has one closed class of round
starts (unichain); where one has several (greedy decoding at T = 0, a near-deterministic
target), the optimum may differ between classes and the problem is a multichain one this
module does not solve: :func:`table_refusal` says so before any job (:class:`Multichain`).

**Information state.** Past rounds: the next round's draws depend on the past only through
its start context s_0 (the last emitted token; P, Q order 1, the rule's randomness fresh).
Within a round, after drafts x_1..x_d (nothing is verified before drafting ends): future draws
depend on x_d alone, and every verification outcome of the round is a function of the drafts
and fresh uniforms, so with π_d = Π_{i<=d} a(x_{i-1}, x_i) (a = accept, x_0 = s_0) the round's
value splits as (fixed part of rejections at positions <= d) + (a part of the future linear in
π_d given the future drafts). Hence (x_d, k = γ - d drafts left, π_d) is sufficient. Writing
tokens = 1 + Σ_{j<=g} π_j (accepted drafts + 1), for a price λ and relative values h of start
contexts, with H_r(u) = Σ_y reject[u, y] h(y), H_b(u) = Σ_y P[u, y] h(y),
β(u) = Σ_x Q[u, x] a(u, x), w(u) = β(u) + (1 - β(u)) H_r(u)::

    V_0(s, π) = π H_b(s)
    V_k(s, π) = max( π H_b(s),                                   stop: bonus from P(.|s)
                     -λc + π w(s) + Σ_x Q[s, x] V_{k-1}(x, π a(s, x)) )   draft one more

(drafting x at depth d+1: cost λc; rejected w.p. π (1 - a): d + 1 tokens, the next round
starting at a token of reject[s]; accepted: +π a tokens and the state (x, k-1, π a)). The round
from s_0 is worth 1 - λ + V_γ(s_0, 1) (a round may draft nothing: then it emits P's token).

**Exactness.** Each V_k(s, .) is convex piecewise linear on [0, 1] (a max of lines; a sum of
convex functions of π a), V_k(s, 0) = 0, and the difference continue - stop is convex and
equals -λc < 0 at π = 0, so where it is >= 0 at some π it stays >= 0 above: the optimal rule is
a *threshold*, draft on iff π >= t_k(s). The envelopes are
computed exactly by backward DP on their breakpoints; the policy's round law exactly by a
forward pass over the reachable (start, x_d, π_d) groups (equal π merged), so :func:`law` and
:func:`play` describe the same policy. The optimal λ* and h come from ratio policy iteration
(evaluate the policy's λ and h by its stationary law, improve by the DP, from the best fixed
γ <= cap; λ never decreases). At the end the DP's value certifies an upper bound for every
non-anticipating policy: for any h, λ* <= λ + max_s (1 - λ + V_γ(s, 1) - h(s)) (costs >= 1),
:attr:`Solution.upper` (equal to the policy's λ to rounding at the fixed point); with the
same (λ, h) and envelopes cut to chords, :func:`bound` certifies a bound for any longer cap.

**Sizes.** The envelope of V_k(s) has at most one breakpoint per path of k drafts and the
forward pass one group per path, so both are bounded by Σ_{d<=γ} S^(d+1); beyond
:data:`MAX_PATHS` the point is refused before any job (:func:`footprint`), and :func:`solve`
stops with a ValueError if the groups it meets exceed it anyway. Knob ``c`` in (0, 10]: the
draft cost the policy is optimal for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw, check_gamma, stationary
from specsim.exact.chains import closed_classes
from specsim.resources import Footprint
from specsim.schemes import tokenwise
from specsim.schemes.base import Knobs
from specsim.schemes.law import FloatArray, LawSize, RoundSample

__all__ = ["BOUND_BREAKPOINTS", "KNOBS", "MAX_PATHS", "Multichain", "Solution", "bound",
           "check", "draft_cost", "footprint", "law", "path_bound", "play", "solve",
           "table_refusal"]

KNOBS: Knobs = {"c": None}  # required: the draft cost it is optimal for

#: Most envelope breakpoints / forward groups the exact solution may meet (~16.8 M); the a
#: priori bound :func:`path_bound` is judged against it before any job.
MAX_PATHS = 2**24
MAX_ITERATIONS = 50


def path_bound(size: int, gamma: int) -> float:
    """Σ_{d=0..γ} S^(d+1): the most breakpoints / groups the solution can meet."""
    return float(sum(float(size) ** (d + 1) for d in range(gamma + 1)))


def draft_cost(knobs: Knobs | None) -> float:
    """The draft cost c of valid ``knobs`` ({"c": c}, 0 < c <= 10), or a one-line
    ValueError: what the policy is optimal for, on tables or on any other model."""
    c = tokenwise.check_knobs("optimal", knobs, KNOBS)["c"]
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not (
            math.isfinite(c) and 0 < c <= 10):
        raise ValueError(f"optimal knob 'c' must be a number in (0, 10], got c={c!r}")
    return float(c)


def check(knobs: Knobs | None, gamma: int, size: int) -> float:
    """The draft cost c of valid ``knobs`` ({"c": c}, 0 < c <= 10) for a cap γ on S =
    ``size`` contexts (dense rows), or a one-line ValueError (also when the exact solution may
    be too large)."""
    c = draft_cost(knobs)
    bound = path_bound(size, check_gamma(gamma))
    if bound > MAX_PATHS:
        raise ValueError(f"gamma={gamma}: the optimal policy's exact solution may meet "
                         f"~{bound:.3g} draft paths (S = {size}: sum of S^(d+1), d <= gamma), "
                         f"more than {MAX_PATHS:.3g}; lower gamma (the cap)")
    return float(c)


@dataclass(frozen=True)
class Solution:
    """The optimal policy: draft on with k drafts left after a draft x iff π >= t[k, x]
    (t[0] = inf: at the cap; row γ is the root, π = 1); its exact long-run tokens per unit
    cost ``gain`` and the certified upper bound ``upper`` on every non-anticipating policy."""

    thresholds: FloatArray  # (γ+1, S)
    gain: float
    upper: float
    h: FloatArray
    iterations: int


def _envelopes(Q: FloatArray, acc: FloatArray, Hr: FloatArray, Hb: FloatArray, lam_c: float,
               gamma: int, limit: int | None = None,
               kept: dict[int, FloatArray] | None = None) -> tuple[FloatArray, FloatArray]:
    """(thresholds t (γ+1, S), V_γ(s, 1) (S,)) by the backward DP on breakpoints (V_k(s, 1)
    of every k that is a key of ``kept`` is stored there). With ``limit``, an envelope of
    more breakpoints is replaced by its chords between ``limit`` equally spaced π in [0, 1]: a
    convex function lies below its chords and the DP is monotone, so the values returned are
    upper bounds of V (the thresholds then mean nothing)."""
    size = Q.shape[0]
    beta = (Q * acc).sum(axis=1)
    w = beta + (1.0 - beta) * Hr
    xs = [np.array([0.0, 1.0]) for _ in range(size)]
    ys = [np.array([0.0, Hb[s]]) for s in range(size)]
    t = np.full((gamma + 1, size), np.inf)
    for k in range(1, gamma + 1):
        nx, ny = [], []
        for s in range(size):
            reach = [x for x in range(size) if Q[s, x] > 0]
            pts = [np.array([0.0, 1.0])] + [xs[x][xs[x] < acc[s, x]] / acc[s, x]
                                             for x in reach if acc[s, x] > 0]
            u = np.unique(np.concatenate(pts))
            if u.size > MAX_PATHS:
                raise ValueError(f"the optimal policy's envelope has {u.size} breakpoints, more "
                                 f"than {MAX_PATHS}")
            C = -lam_c + u * w[s]
            for x in reach:
                C = C + Q[s, x] * np.interp(u * acc[s, x], xs[x], ys[x])
            D = C - u * Hb[s]
            if D[-1] < 0:  # stop whatever π
                nx.append(np.array([0.0, 1.0]))
                ny.append(np.array([0.0, Hb[s]]))
                continue
            i = int(np.argmax(D >= 0))
            if i == 0:  # D(0) = -λc < 0 unless λc <= 0
                t[k, s] = 0.0
                nx.append(u)
                ny.append(C)
                continue
            cut = u[i - 1] - D[i - 1] * (u[i] - u[i - 1]) / (D[i] - D[i - 1])
            t[k, s] = cut
            nx.append(np.concatenate([[0.0, cut], u[i:]]))
            ny.append(np.concatenate([[0.0, cut * Hb[s]], C[i:]]))
        if limit is not None:
            grid = np.linspace(0.0, 1.0, limit)
            for j, u in enumerate(nx):
                if u.size > limit:  # chords between fixed π, not between kept breakpoints:
                    # which breakpoints exist (two a CPU's rounding merges or splits, a cut
                    # where continuing and stopping tie) must not move the bound's digits
                    nx[j], ny[j] = grid, np.interp(grid, u, ny[j])
        xs, ys = nx, ny
        if kept is not None and k in kept:
            kept[k] = np.array([y[-1] for y in ys])
    return t, np.array([y[-1] for y in ys])


@dataclass(frozen=True)
class _Forward:
    tokens: FloatArray
    after: FloatArray  # (S, S) next context
    drafted: FloatArray


def _forward(P: FloatArray, Q: FloatArray, acc: FloatArray, rej: FloatArray, t: FloatArray
             ) -> _Forward:
    """The exact round law of the threshold policy ``t`` from every start, over the reachable
    (start, x_d, π_d) groups (equal π merged)."""
    size, gamma = P.shape[0], t.shape[0] - 1
    rho = (Q * (1.0 - acc)).sum(axis=1)
    tokens, after, drafted = np.zeros((size, gamma + 2)), np.zeros((size, size)), np.zeros(size)
    s0, x = np.arange(size), np.arange(size)
    pi, m = np.ones(size), np.ones(size)
    for d in range(gamma + 1):
        go = pi >= t[gamma - d, x]
        w = m[~go] * pi[~go]  # stop after d drafts, all accepted: d + 1 tokens, bonus token
        np.add.at(tokens[:, d + 1], s0[~go], w)
        np.add.at(after, s0[~go], w[:, None] * P[x[~go]])
        np.add.at(drafted, s0[~go], m[~go] * d)
        if not go.any():
            break
        s0, x, pi, m = s0[go], x[go], pi[go], m[go]
        wr = m * pi * rho[x]  # draft d + 1 and reject it: d + 1 tokens, from reject[x]
        np.add.at(tokens[:, d + 1], s0, wr)
        np.add.at(after, s0, wr[:, None] * rej[x])
        cs0, cx = np.repeat(s0, size), np.repeat(x, size)
        y = np.tile(np.arange(size), x.size)
        cpi, cm = np.repeat(pi, size) * acc[cx, y], np.repeat(m, size) * Q[cx, y]
        keep = cm > 0
        cs0, y, cpi, cm = cs0[keep], y[keep], cpi[keep], cm[keep]
        order = np.lexsort((cpi, y, cs0))
        cs0, y, cpi, cm = cs0[order], y[order], cpi[order], cm[order]
        new = np.ones(cs0.size, dtype=bool)
        new[1:] = (cs0[1:] != cs0[:-1]) | (y[1:] != y[:-1]) | (cpi[1:] != cpi[:-1])
        if int(new.sum()) > MAX_PATHS:
            raise ValueError(f"the optimal policy's round law has {int(new.sum())} groups at "
                             f"depth {d + 1}, more than {MAX_PATHS}")
        s0, x, pi = cs0[new], y[new], cpi[new]
        m = cast(FloatArray, np.bincount(np.cumsum(new) - 1, weights=cm))
    return _Forward(tokens, after, drafted)


class Multichain(ValueError):
    """A policy's round-start chain has several closed classes: no single gain λ."""


def _evaluate(tokens: FloatArray, after: FloatArray, drafted: FloatArray, c: float
              ) -> tuple[float, FloatArray]:
    """(λ, h) of a stationary policy: λ = E_π[tokens] / E_π[cost], h = r - λτ + K h with
    π h = 0."""
    size = after.shape[0]
    r = tokens @ np.arange(tokens.shape[1], dtype=np.float64)
    tau = 1.0 + c * drafted
    classes = closed_classes(after)
    if len(classes) != 1:
        raise Multichain(f"the optimal policy's exact solution needs a round-start chain with "
                         f"one closed class (one long-run gain), and a policy it meets has "
                         f"{len(classes)} (greedy decoding or a near-deterministic target); use "
                         f"the fixed, confidence or heuristic policy, or a temperature > 0")
    ps = stationary(after)
    lam = float(ps @ r / (ps @ tau))
    h = np.linalg.solve(np.eye(size) - after + np.outer(np.ones(size), ps), r - lam * tau)
    return lam, cast(FloatArray, h)


_CACHE: dict[bytes, Solution] = {}


def solve(P: FloatArray, Q: FloatArray, acc: FloatArray, rej: FloatArray, gamma: int,
          c: float) -> Solution:
    """The optimal thresholds for checked tables (:func:`tokenwise.check_tables`) by ratio
    policy iteration from the best fixed γ' <= γ (cached: ``play`` calls it every round)."""
    key = b"".join(np.ascontiguousarray(a).tobytes() for a in (P, Q, acc, rej)) + \
        repr((gamma, c)).encode()
    if key in _CACHE:
        return _CACHE[key]
    best = (-math.inf, np.zeros(0))
    for g in range(1, gamma + 1):  # start: the best fixed draft length
        fixed = tokenwise.law(P, Q, acc, rej, g)
        lam, h = _evaluate(fixed.tokens, fixed.next_state, fixed.drafted, c)
        if lam > best[0]:
            best = (lam, h)
    lam, h = best
    iterations, t = 0, np.zeros(0)
    while iterations < MAX_ITERATIONS:
        iterations += 1
        t_new, _ = _envelopes(Q, acc, rej @ h, P @ h, lam * c, gamma)
        f = _forward(P, Q, acc, rej, t_new)
        lam_new, h_new = _evaluate(f.tokens, f.after, f.drafted, c)
        if t.size and lam_new <= lam * (1 + 1e-14):  # no improvement: t is greedy for its h
            break
        t, lam, h = t_new, lam_new, h_new
    _, value = _envelopes(Q, acc, rej @ h, P @ h, lam * c, gamma)
    upper = lam + max(0.0, float(np.max(1.0 - lam + value - h)))
    out = Solution(t, lam, upper, h, iterations)
    if len(_CACHE) > 16:
        _CACHE.clear()
    _CACHE[key] = out
    return out


#: Breakpoints an envelope keeps in :func:`bound` (chords beyond them).
BOUND_BREAKPOINTS = 4000


def bound(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, base: int,
          c: float, gammas: Sequence[int]) -> list[float]:
    """Certified upper bounds on the long-run tokens per unit cost of every non-anticipating
    policy drafting at most γ tokens, for each γ of ``gammas`` (any, e.g. beyond what
    :func:`solve` can solve exactly; one DP to the largest): the certificate
    λ + max_s (1 - λ + Ṽ_γ(s, 1) - h(s)) with (λ, h) of the exact optimum at cap ``base`` and
    Ṽ >= V the DP's envelopes joined by chords beyond :data:`BOUND_BREAKPOINTS` breakpoints.
    Equal to that optimum when γ = ``base`` and nothing was cut."""
    Pa, Qa, acc, rej, _ = tokenwise.check_tables(P, Q, accept, reject)
    sol = solve(Pa, Qa, acc, rej, base, check({"c": c}, base, Pa.shape[0]))
    kept: dict[int, FloatArray] = {check_gamma(g): np.zeros(0) for g in gammas}
    _envelopes(Qa, acc, rej @ sol.h, Pa @ sol.h, sol.gain * c, max(kept), BOUND_BREAKPOINTS,
               kept)
    return [sol.gain + max(0.0, float(np.max(1.0 - sol.gain + kept[g] - sol.h))) for g in gammas]


def table_refusal(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, gamma: int,
            knobs: Knobs | None) -> str | None:
    """Why :func:`law` and :func:`play` would stop on these tables (:class:`Multichain`), or
    None. Cheap where a certificate holds: if every context accepts some draft (β > 0) and
    some token follows every context under P (a positive column), every round of every policy
    ends with a bonus token from P with positive probability, so every round-start chain
    reaches that token from every state in one round -- one closed class. Else it solves."""
    Pa, Qa, acc, rej, _ = tokenwise.check_tables(P, Q, accept, reject)
    if ((Qa * acc).sum(axis=1) > 0).all() and (Pa > 0).all(axis=0).any():
        return None
    try:
        solve(Pa, Qa, acc, rej, check_gamma(gamma), check(knobs, gamma, Pa.shape[0]))
    except Multichain as err:
        return str(err)
    return None


def law(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, gamma: int,
        knobs: Knobs | None) -> RoundLaw:
    """Exact law of one round of the optimal policy from every context (state = context)."""
    Pa, Qa, acc, rej, _ = tokenwise.check_tables(P, Q, accept, reject)
    c = check(knobs, gamma, Pa.shape[0])
    sol = solve(Pa, Qa, acc, rej, gamma, c)
    f = _forward(Pa, Qa, acc, rej, sol.thresholds)
    t = sol.thresholds
    root = (t[gamma] <= 1.0).astype(np.float64)  # draft at all from s_0
    second = (acc >= t[gamma - 1][None, :]).astype(np.float64)  # draft on after x_1
    rho = (Qa * (1.0 - acc)).sum(axis=1)
    emit = rho[:, None] * rej
    single = (1.0 - root)[:, None] * Pa + root[:, None] * emit
    nxt = second[:, :, None] * (Qa * acc + emit)[None] + (1.0 - second)[:, :, None] * Pa[None]
    pair = root[:, None, None] * (Qa * acc)[:, :, None] * nxt
    return RoundLaw(tokens=f.tokens, next_state=f.after, drafted=f.drafted, single=single,
                    pair=pair, context=np.arange(Pa.shape[0]))


def play(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, state: ArrayLike,
         gamma: int, knobs: Knobs | None, rng: np.random.Generator) -> RoundSample:
    """One round of the optimal policy for n chains from contexts ``state`` (n,), each chain
    carrying its own π; 2γ + 1 uniforms per chain (draft and accept per position; the final
    token)."""
    Pa, Qa, acc, rej, _ = tokenwise.check_tables(P, Q, accept, reject)
    g = check_gamma(gamma)
    t = solve(Pa, Qa, acc, rej, g, check(knobs, g, Pa.shape[0])).thresholds
    ctx = tokenwise.check_states(state, Pa.shape[0])
    n = ctx.shape[0]
    u = rng.random((2, g, n))
    u_final = rng.random((n,))
    draw_q, draw_final = tokenwise.samplers(Pa, Qa, rej)
    size = Pa.shape[0]
    accept_cell = acc.ravel()
    xs = np.empty((g + 1, n), dtype=np.intp)
    xs[0] = ctx
    pi = np.ones(n)
    drafting = pi >= t[g, ctx]
    n_drafted = np.zeros(n, dtype=np.intp)
    n_acc = np.zeros(n, dtype=np.intp)
    leading = np.ones(n, dtype=bool)  # every draft so far accepted
    for i in range(g):
        c = xs[i]
        x = draw_q(c, u[0, i])
        a = accept_cell.take(c * size + x)
        n_drafted += drafting
        leading &= ~drafting | (u[1, i] < a)
        n_acc += drafting & leading
        pi = np.where(drafting, pi * a, pi)
        xs[i + 1] = np.where(drafting, x, c)
        drafting &= pi >= t[g - 1 - i, x]
    last = xs[n_acc, np.arange(n)]
    final = draw_final(last + size * (n_acc < n_drafted), u_final)
    return RoundSample(tokens=tokenwise.emitted_tokens(xs, n_acc, final, g),
                       n_emitted=n_acc + 1, next_state=final, drafted=n_drafted)


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """A priori bounds: the forward pass's deepest children (~8 cells each: start, state,
    π, mass, sort order, masks), at most S^(γ+1) (S starts, ``support`` next states per
    row), and ~40 operations per path of :func:`path_bound` per DP and forward pass, three
    policy iterations (2-4 measured), beside the fixed γ' <= γ laws it starts from; refused
    (ValueError) beyond :data:`MAX_PATHS`. The bound assumes no draft ever stops before the
    cap: the real solution is far smaller (seed_med, γ = 8, c = 0.01: 12,200 breakpoints,
    178,526 groups; the point job peaks at 122 MB in 5 s against 791 MB estimated). A round
    drafts up to γ tokens per chain."""
    check(knobs, gamma, size)
    paths = path_bound(support, gamma) * size / support
    deepest = float(size) * float(support) ** gamma
    dp = tokenwise.law_footprint(size, gamma)
    law_fp = Footprint(dp.cells + 8.0 * deepest, 40.0 * paths * 2 * 3 + gamma * dp.flops,
                       what=f"optimal policy ({paths:.3g} draft paths at most)")
    return LawSize(size, law_fp, tokenwise.play_footprint(size, chains, gamma, gamma)
                   .plus(law_fp))
