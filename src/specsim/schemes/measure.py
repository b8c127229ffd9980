"""One ``schemes`` grid point, measured: Monte Carlo and exact, long run and lossless check.

A point names a model, α, γ, temperature and a :class:`~specsim.schemes.Scheme` (rule and
policy with their knobs). Its chain is the model family's equivalence chain (the Markov tables
themselves; the i.i.d. stub's frozen position-indexed pairs). Two quantities, each simulated
and exact:

* tokens per target call and draft tokens per round -- for table models the long run (chains
  from the start context, ``burn_in`` rounds discarded; exact: both the mean over exactly the
  simulated rounds, which the simulation must cover, and the stationary limit by renewal-reward
  over the stationary round-start law, :func:`specsim.schemes.law.long_run`), for the frozen
  i.i.d. pairs one round from the start (every pair fresh, as the stub's ``share: position``);
* the joint law of the first two emitted tokens from the start ([L] Thm 3.5's check, the seed
  program's demo 2): counts of ``scheme_trials`` fresh generations vs the scheme's exact law and
  the target's (:func:`specsim.schemes.law.first_two_law`).

Random streams: the point's SeedSequence spawns one child per chunk of at most ``CHUNK`` chains
(long run) and per chunk of generations, after the long run's -- results depend only on the
seed and the budget, never on job grouping or ``--cores``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from specsim import exact
from specsim.reference import collapse, target_first_two
from specsim.schemes.law import RoundLaw, first_two_law, long_run
from specsim.simulate import equivalence_model

if TYPE_CHECKING:
    from specsim.grid import Point

__all__ = ["CHUNK", "exact_scheme", "simulate_scheme"]

CHUNK = 1 << 14


def width(point: Point) -> int:
    """Columns of the tokens-per-round histogram: 0 .. the most tokens a round can emit."""
    assert point.scheme is not None
    cap = dict(point.scheme.policy_knobs).get("cap")
    return (int(cap) if cap is not None else point.gamma) + 2


def simulate_scheme(point: Point, budget: Mapping[str, Any], root_seed: int) -> dict[str, Any]:
    """The point's sufficient statistics (one ``scheme_sim/1`` row)."""
    scheme = point.scheme
    assert scheme is not None
    p, q, start, token_of = equivalence_model(point)
    tables = scheme.tables(p, q)
    chains, rounds, burn_in, batches = (int(budget[k]) for k in
                                        ("chains", "rounds", "burn_in", "batches"))
    stationary = point.family.stationary_schemes
    burn_in = burn_in if stationary else 0
    trials = int(budget["scheme_trials"])
    w = width(point)
    seed = point.seed(root_seed)
    n_long = -(-chains // CHUNK)
    children = seed.spawn(n_long + -(-trials // CHUNK))
    hist = np.zeros(batches * w, dtype=np.int64)
    drafted = np.zeros(batches, dtype=np.int64)
    batch_of = (np.arange(chains) * batches) // chains
    first = scheme.start(start, point.gamma, p.shape[0])
    for lo, child in zip(range(0, chains, CHUNK), children[:n_long], strict=True):
        rng = np.random.default_rng(child)
        n = min(CHUNK, chains - lo)
        b = batch_of[lo : lo + n]
        state = np.full(n, first, dtype=np.intp)
        for r in range(burn_in + rounds):
            if not stationary:
                state[:] = first
            res = scheme.play(p, q, state, point.gamma, rng, tables)
            state = res.next_state
            if r >= burn_in:
                hist += np.bincount(b * w + res.n_emitted, minlength=hist.size)
                drafted += np.bincount(b, weights=res.drafted, minlength=batches).astype(np.int64)
    vocab = point.spec.vocab
    counts = np.zeros(vocab * vocab, dtype=np.int64)
    for lo, child in zip(range(0, trials, CHUNK), children[n_long:], strict=True):
        rng = np.random.default_rng(child)
        n = min(CHUNK, trials - lo)
        one = scheme.play(p, q, np.full(n, first, dtype=np.intp), point.gamma, rng, tables)
        a, b2 = one.tokens[:, 0].copy(), one.tokens[:, 1].copy()
        short = one.n_emitted < 2
        if short.any():
            again = scheme.play(p, q, one.next_state[short], point.gamma, rng, tables)
            b2[short] = again.tokens[:, 0]
        counts += np.bincount(token_of[a] * vocab + token_of[b2], minlength=counts.size)
    return {
        "point_id": point.point_id, "measure": point.measure, "gamma": point.gamma,
        "vocab": vocab, "chains": chains, "rounds": rounds, "burn_in": burn_in,
        "batches": batches, "trials": trials, "seed_entropy": int(seed.entropy),  # type: ignore[arg-type]
        "seed_key": [int(k) for k in seed.spawn_key], "width": w,
        "tokens_hist": hist.tolist(), "drafted": drafted.tolist(), "joint2": counts.tolist(),
    }


def _horizon(law: RoundLaw, first: int, burn_in: int, rounds: int) -> tuple[float, float]:
    """Exact mean tokens and drafted tokens per round over exactly the rounds the simulation
    averages: rounds burn_in .. burn_in + rounds - 1 of chains started in scheme state
    ``first`` (the law of the state after r rounds is e_first K^r). It differs from the
    stationary limit only while a chain remembers its start -- e.g. the heuristic schedule
    started far above its typical draft length."""
    v = np.zeros(law.next_state.shape[0])
    v[first] = 1.0
    tokens = drafted = 0.0
    for r in range(burn_in + rounds):
        if r >= burn_in:
            tokens += float(v @ law.mean_tokens)
            drafted += float(v @ law.drafted)
        v = v @ law.next_state
    return tokens / rounds, drafted / rounds


def exact_scheme(point: Point, budget: Mapping[str, Any]) -> dict[str, Any]:
    """The point's exact reference (one ``scheme_exact/1`` row)."""
    scheme = point.scheme
    assert scheme is not None
    p, q, start, token_of = equivalence_model(point)
    vocab = point.spec.vocab
    target = target_first_two(p, start, token_of, vocab)
    row: dict[str, Any] = {"point_id": point.point_id, "joint_target": target.ravel().tolist()}
    try:
        law = scheme.law(p, q, point.gamma)
    except ValueError as err:  # too large to enumerate: Monte Carlo only, said so
        return row | {"exact_method": f"mc_only ({err})", "tokens_exact": np.nan,
                      "drafted_exact": np.nan, "tokens_stationary": np.nan,
                      "drafted_stationary": np.nan, "tokens_law": [], "joint_exact": [],
                      "tv_exact": np.nan}
    first = scheme.start(start, point.gamma, p.shape[0])
    if point.family.stationary_schemes:
        stat_tokens, stat_drafted, pi = long_run(law)
        tokens, drafted = _horizon(law, first, int(budget["burn_in"]), int(budget["rounds"]))
        dist = pi @ law.tokens
        method = "stationary"
    else:
        tokens, drafted = float(law.mean_tokens[first]), float(law.drafted[first])
        stat_tokens, stat_drafted = tokens, drafted
        dist = law.tokens[first]
        method = "first_round"
    joint = collapse(first_two_law(law, first), token_of, vocab)
    return row | {"exact_method": method, "tokens_exact": tokens, "drafted_exact": drafted,
                  "tokens_stationary": stat_tokens, "drafted_stationary": stat_drafted,
                  "tokens_law": np.asarray(dist, dtype=np.float64).tolist(),
                  "joint_exact": joint.ravel().tolist(), "tv_exact": exact.tv(joint, target)}
