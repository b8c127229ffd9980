"""Simulate one grid point and return its sufficient statistics (one ``sim/1`` row).

What the simulation of a model is belongs to its family (:mod:`specsim.families`): the long run
is :meth:`Family.simulate_long_run`, the equivalence measure runs the family's
:meth:`Family.equivalence_model` through the Markov engine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim.engine import MarkovKernel, first_tokens_markov
from specsim.families import EquivalenceModel
from specsim.grid import Point


def equivalence_model(point: Point) -> EquivalenceModel:
    """(P, Q, start state, token of each state) for the equivalence measure."""
    return point.family.equivalence_model(point)


def simulate_point(point: Point, budget: dict[str, Any], root_seed: int) -> dict[str, Any]:
    """The point's sufficient statistics (one ``sim/1`` row); ``budget`` holds at least the
    keys its measure reads (:func:`specsim.job.budget_keys`)."""
    if point.measure == "scheme":  # a schemes study's rule and policy
        from specsim.schemes.measure import simulate_scheme
        return simulate_scheme(point, budget, root_seed)
    seed = point.seed(root_seed)
    if point.measure == "equivalence":
        trials = int(budget["equivalence_trials"])
        p, q, start, token_of = equivalence_model(point)
        joint = first_tokens_markov(MarkovKernel(p, q), point.gamma, point.rule,  # type: ignore[arg-type]
                                    seed, trials, start, token_of, point.spec.vocab).ravel()
        return _record(point, seed, np.zeros(0, np.int64), joint, trials=trials)
    chains, rounds, batches = (int(budget[k]) for k in ("chains", "rounds", "batches"))
    hist, burn_in = point.family.simulate_long_run(point, seed, budget)
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
