"""Simulate one grid point and return its sufficient statistics (one shard row)."""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim.engine import MarkovKernel, first_tokens_markov, long_run_iid, long_run_markov
from specsim.grid import Grid, Point
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
    seed = point.seed(root_seed)
    spec, g = point.spec, point.gamma
    chains, rounds, burn_in, batches = (int(budget[k]) for k in
                                        ("chains", "rounds", "burn_in", "batches"))
    trials = 0
    hist = np.zeros((batches, g + 1), dtype=np.int64)
    joint = np.zeros(0, dtype=np.int64)
    rule = point.rule
    if point.measure == "equivalence":
        trials = int(budget["equivalence_trials"])
        p, q, start, token_of = equivalence_model(point)
        joint = first_tokens_markov(MarkovKernel(p, q), g, rule, seed, trials, start,  # type: ignore[arg-type]
                                    token_of, spec.vocab).ravel()
        chains = rounds = burn_in = 0
    elif spec.is_markov:
        p, q = markov_pair(spec, point.temperature, point.alpha)
        hist = long_run_markov(MarkovKernel(p, q), g, rule, seed, chains, rounds,  # type: ignore[arg-type]
                               burn_in, batches)
    else:
        hist = long_run_iid(spec, point.temperature, point.alpha, g, rule, seed,  # type: ignore[arg-type]
                            chains, rounds, batches)
        burn_in = 0
    return {
        "point_id": point.point_id,
        "measure": point.measure,
        "gamma": g,
        "vocab": spec.vocab,
        "chains": chains,
        "rounds": rounds,
        "burn_in": burn_in,
        "batches": batches if point.measure == "long_run" else 0,
        "trials": trials,
        "seed_entropy": int(seed.entropy),  # type: ignore[arg-type]
        "seed_key": [int(k) for k in seed.spawn_key],
        "accepted_hist": hist.ravel().tolist() if point.measure == "long_run" else [],
        "joint2": joint.tolist(),
    }


def simulate_shard(grid: Grid, shard: str) -> list[dict[str, Any]]:
    budget, root = grid.config["budget"], int(grid.config["seed"])
    return [simulate_point(p, budget, root) for p in grid.shard_points(shard)]
