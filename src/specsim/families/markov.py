"""``markov``: the from-scratch program's order-1 tables, and what every table family shares.

The target is ``random_table(seed, sharpness)`` exactly as the program builds it; drafts are
blends, tempered copies, the α-calibrated construction, the target itself or uniform
(:func:`specsim.models.spec.table_pair`). Any family whose model is a pair of (V, V) row-stochastic
tables -- the state is the last emitted token -- subclasses :class:`TableFamily` and only says
where its untempered target comes from (:mod:`specsim.families.custom` reads it from a file).

The exact reference is dynamic programming over the tables (:mod:`specsim.exact`): the
finite-horizon average of exactly what the simulation reports, the long-run limit of chains from
the start token (renewal-reward over Leviathan et al. 2022's Alg. 1 rounds), and the
enumerated law of the first two emitted tokens for the equivalence measure.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from specsim import exact
from specsim.engine import CHUNK, MarkovKernel, long_run_markov
from specsim.errors import ConfigError
from specsim.exact.footprints import rates_footprint, round_dp_footprint
from specsim.families.base import EquivalenceModel, Family, TablePair
from specsim.models.maths import calibration_weights, random_table, temper
from specsim.models.spec import ModelSpec, calibration_base, table_pair
from specsim.resources import Footprint
from specsim.sampling import FloatArray
from specsim.verify import rule_spec

if TYPE_CHECKING:
    from specsim.families.base import Point


class TableFamily(Family):
    """A model given by Markov tables (P, Q): the state is the last emitted token."""

    @abstractmethod
    def base_target(self, spec: ModelSpec) -> FloatArray:
        """The untempered target table (V, V)."""

    def pair(self, spec: ModelSpec, temperature: float, alpha: float | None) -> TablePair:
        """Target P and draft Q at a sampling temperature
        (:func:`specsim.models.spec.table_pair`)."""
        return table_pair(spec, self.base_target(spec), temperature, alpha)

    def tables(self, spec: ModelSpec, temperature: float, alpha: float | None) -> TablePair:
        return self.pair(spec, temperature, alpha)

    def example_rows(self, spec: ModelSpec, temperature: float, alpha: float | None,
                     context: int) -> TablePair:
        p, q = self.pair(spec, temperature, alpha)
        return p[context], q[context]

    def check_alpha(self, spec: ModelSpec, alpha: float, temperature: float,
                    where: str) -> None:
        """Every context must reach ``alpha``: α ≥ the base's overlap with the target."""
        target = temper(self.base_target(spec), temperature)
        try:
            calibration_weights(target, calibration_base(spec, target, temperature), alpha)
        except ValueError as err:
            raise ConfigError(f"{where}: model {spec.name!r} at temperature {temperature}: "
                              f"{err}") from None

    def equivalence_model(self, point: Point) -> EquivalenceModel:
        """The tables themselves, from token 0 (the seed program's CTX0)."""
        p, q = self.pair(point.spec, point.temperature, point.alpha)
        return EquivalenceModel(p, q, 0, np.arange(point.spec.vocab))

    def simulate_long_run(self, point: Point, seed: np.random.SeedSequence,
                          budget: Mapping[str, Any]) -> tuple[np.ndarray, int]:
        """Chains from token 0, ``burn_in`` rounds discarded (:func:`engine.long_run_markov`)."""
        chains, rounds, burn_in, batches = (int(budget[k]) for k in
                                            ("chains", "rounds", "burn_in", "batches"))
        p, q = self.pair(point.spec, point.temperature, point.alpha)
        hist = long_run_markov(MarkovKernel(p, q), point.gamma, point.rule,  # type: ignore[arg-type]
                               seed, chains, rounds, burn_in, batches)
        return hist, burn_in

    def exact_long_run(self, point: Point, root_seed: int,
                       budget: Mapping[str, Any]) -> dict[str, Any]:
        """Finite-horizon DP average over exactly the simulated rounds, plus the long-run limit
        of chains from token 0 (the stationary limit; where the round-start chain has several
        closed classes, e.g. greedy decoding, the mixture of theirs that chains from 0 reach)."""
        p, q = self.pair(point.spec, point.temperature, point.alpha)
        h = exact.horizon_average(p, q, point.gamma, point.rule, 0, int(budget["burn_in"]),
                                  int(budget["rounds"]))
        lr = exact.long_run(p, q, point.gamma, point.rule, 0)  # what a long simulation reaches
        stationary_tokens, alpha_bar = lr.tokens_per_round, lr.alpha_bar
        return {
            "tokens_exact": h.tokens_per_round,
            "tokens_exact_se": 0.0,
            "tokens_stationary": stationary_tokens,
            "accept_rate_exact": h.accepted_per_round / h.trials_per_round,
            "accept_fraction_exact": h.accepted_per_round / point.gamma,
            "alpha_bar": alpha_bar,
            "exact_method": "dp_horizon",
        }

    def exact_curve(self, point: Point, gammas: np.ndarray, root_seed: int,
                    budget: Mapping[str, Any]) -> tuple[np.ndarray, str]:
        """Renewal-reward DP (:func:`specsim.exact.long_run`, chains from token 0) at every γ."""
        p, q = self.pair(point.spec, point.temperature, point.alpha)
        out = [exact.long_run(p, q, int(g), point.rule, 0).tokens_per_round for g in gammas]
        return np.asarray(out, dtype=np.float64), "exact DP"

    # ------------------------------------------------------------------ resources
    def chain_size(self, point: Point) -> tuple[int, int]:
        return point.spec.vocab, point.spec.vocab

    def model_footprint(self, point: Point) -> Footprint:
        """The target, its draft (blend, temper or calibration) and their temporaries: ~12
        (V, V) tables."""
        v2 = float(point.spec.vocab) ** 2
        return Footprint(12 * v2, 100 * v2, what=f"model tables (vocab {point.spec.vocab})")

    def long_run_footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint:
        """The Markov engine (:meth:`specsim.engine.MarkovKernel.footprint`: its samplers and
        tables; ~8 γ numbers per chain of a chunk),
        then the round-law DP twice (the horizon average over exactly the simulated rounds,
        the stationary limit)."""
        v, g = point.spec.vocab, point.gamma
        chains, rounds, burn_in = (int(budget[k]) for k in ("chains", "rounds", "burn_in"))
        held = Footprint(2.0 * v * v)  # P and Q, alive throughout
        sim = MarkovKernel.footprint(v).plus(Footprint(
            (8 * g + 6) * min(chains, CHUNK), rounds=chains * (rounds + burn_in)))
        dp = round_dp_footprint(v, g, keep_drafts=rule_spec(point.rule).keep_drafts)
        horizon = dp.plus(rates_footprint(v, burn_in + rounds, stationary=False), held)
        return self.model_footprint(point).then(sim.plus(held), horizon,
                                                dp.plus(rates_footprint(v), held))


class MarkovFamily(TableFamily):
    """The seed program's ``random_table(seed, sharpness)`` target."""

    name = "markov"
    source = "program"
    settings = ("target",)
    drafts = ("blend", "temper", "calibrated", "identical", "uniform")

    def spec_fields(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        t = entry.get("target", {})
        return {"target_seed": int(t.get("seed", 1)), "sharpness": float(t.get("sharpness", 2.5))}

    def describe(self, spec: ModelSpec) -> dict[str, Any]:
        return {"target": {"seed": spec.target_seed, "sharpness": spec.sharpness}}

    def base_target(self, spec: ModelSpec) -> FloatArray:
        return random_table(spec.target_seed, spec.sharpness, spec.vocab)
