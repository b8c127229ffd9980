"""Simulate one grid point and return its sufficient statistics (one ``sim/1`` row)."""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim.engine import MarkovKernel, first_tokens_markov, long_run_iid, long_run_markov
from specsim.grid import Point
from specsim.models import iid_frozen_markov, markov_pair


def equivalence_model(point: Point) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """(P, Q, start state, token of each state) for the equivalence measure.

    Markov models start at token 0 (the seed program's CTX0). The iid stub is frozen into one
    (p, q) pair per position -- enough positions for two rounds -- and run as a Markov model
    whose states carry the position (:func:`specsim.models.iid_frozen_markov`).
    """
    spec = point.spec
    if spec.is_markov:
        p, q = markov_pair(spec, point.temperature, point.alpha)
        return p, q, 0, np.arange(spec.vocab)
    p, q, start = iid_frozen_markov(spec, point.temperature, point.alpha, point.gamma + 2)
    return p, q, start, np.arange(p.shape[0]) % spec.vocab


def simulate_point(point: Point, budget: dict[str, Any], root_seed: int) -> dict[str, Any]:
    """The point's sufficient statistics (one ``sim/1`` row); ``budget`` holds at least the
    keys its measure reads (:func:`specsim.job.budget_keys`)."""
    seed = point.seed(root_seed)
    spec, g = point.spec, point.gamma
    rule = point.rule
    if point.measure == "equivalence":
        trials = int(budget["equivalence_trials"])
        p, q, start, token_of = equivalence_model(point)
        joint = first_tokens_markov(MarkovKernel(p, q), g, rule, seed, trials, start,  # type: ignore[arg-type]
                                    token_of, spec.vocab).ravel()
        return _record(point, seed, np.zeros(0, np.int64), joint, trials=trials)
    chains, rounds, burn_in, batches = (int(budget[k]) for k in
                                        ("chains", "rounds", "burn_in", "batches"))
    if spec.is_markov:
        p, q = markov_pair(spec, point.temperature, point.alpha)
        hist = long_run_markov(MarkovKernel(p, q), g, rule, seed, chains, rounds,  # type: ignore[arg-type]
                               burn_in, batches)
    else:
        hist = long_run_iid(spec, point.temperature, point.alpha, g, rule, seed,  # type: ignore[arg-type]
                            chains, rounds, batches)
        burn_in = 0
    return _record(point, seed, hist, np.zeros(0, np.int64), chains=chains, rounds=rounds,
                   burn_in=burn_in, batches=batches)


def _record(point: Point, seed: np.random.SeedSequence, hist: np.ndarray, joint: np.ndarray,
            *, chains: int = 0, rounds: int = 0, burn_in: int = 0, batches: int = 0,
            trials: int = 0) -> dict[str, Any]:
    return {
        "point_id": point.point_id,
        "measure": point.measure,
        "gamma": point.gamma,
        "vocab": point.spec.vocab,
        "chains": chains,
        "rounds": rounds,
        "burn_in": burn_in,
        "batches": batches,
        "trials": trials,
        "seed_entropy": int(seed.entropy),  # type: ignore[arg-type]
        "seed_key": [int(k) for k in seed.spawn_key],
        "accepted_hist": hist.ravel().tolist(),
        "joint2": joint.tolist(),
    }


