"""``equivalence``: the law of the first two emitted tokens against the target's.

Every family gives its equivalence chain (:meth:`specsim.families.Family.equivalence_model`:
order-1 tables over states, a start state, the token of each state). The simulation counts the
first two tokens of ``equivalence_trials`` fresh generations on the Markov engine; the exact
reference enumerates the rule's law of those tokens and the target's own law (Leviathan et al.
2022 Thm 3.5 says the correct rule's law is the target's). The estimate is a G-test of the
counts against the target's law, with its power against the rule's exact law.

The checks need that exact law for every rule (``tv_exact``: a lossless rule's distance must be
~0; a broken rule's decides whether a bias exists and the test could see it), so a chain of S
states whose S^3 cells exceed ``budget.max_enumeration`` is refused at config time
(:meth:`Equivalence.refusal`), by the same test the job makes
(:func:`specsim.exact.footprints.enumeration_refusal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from specsim import exact, stats
from specsim.engine import CHUNK, MarkovKernel, first_tokens_markov
from specsim.errors import ConfigError
from specsim.exact.footprints import enumeration_footprint, enumeration_refusal
from specsim.measures.base import EXACT, SIM, Measure, run_record
from specsim.measures.long_run import closed_form
from specsim.resources import Footprint
from specsim.verify import rule_spec

if TYPE_CHECKING:
    from specsim.families.base import Point
    from specsim.models.spec import ModelSpec

__all__ = ["Equivalence", "collapse", "lossless_estimates", "target_first_two"]

TOKENS = 2  # the first two emitted tokens (the seed program's demo 2)
MAX_CELLS = 1_000_000  # count cells (vocab^TOKENS) a point may hold
MAX_ENUMERATION = 1_000_000_000  # the schema's most budget.max_enumeration


def collapse(joint: np.ndarray, token_of: np.ndarray, vocab: int) -> np.ndarray:
    """Sum a joint law over states (S, S) into tokens (V, V)."""
    out = np.zeros((vocab, vocab))
    np.add.at(out, (token_of[:, None], token_of[None, :]), joint)
    return out


def target_first_two(p: np.ndarray, start: int, token_of: np.ndarray, vocab: int) -> np.ndarray:
    """The target's exact joint law of the first two emitted tokens (V, V) ([L] Thm 3.5's
    reference) from ``start`` of an equivalence chain."""
    return collapse(exact.target_joint(p, start, TOKENS), token_of, vocab)


def lossless_estimates(row: Mapping[str, Any], level: float) -> dict[str, Any]:
    """The G-test of the first-two-token counts ``joint2`` against the target's law
    ``joint_target``, their distance, and the power against the rule's law ``joint_exact``."""
    v = int(row["vocab"])
    counts = np.asarray(row["joint2"], dtype=np.int64)
    target = np.asarray(row["joint_target"], dtype=np.float64)
    n = int(counts.sum())
    gof = stats.gof_test(counts, target)
    out = {
        "trials_total": n,
        "tv_mc": exact.tv(counts / n, target),
        "tv_floor": stats.tv_floor(target, n),
        "g_statistic": gof.statistic, "g_df": gof.df,
        "p_value": gof.p_value,
        "verdict": stats.verdict(gof.p_value, level),
        "first_token_mc": (counts.reshape(v, v).sum(axis=1) / n).tolist(),
        "first_token_target": target.reshape(v, v).sum(axis=1).tolist(),
    }
    rule_law = np.asarray(row["joint_exact"], dtype=np.float64)
    # Engine vs theory: the simulated counts must fit the rule's own exact law.
    out["p_value_vs_exact"] = stats.gof_test(counts, rule_law).p_value if rule_law.size else np.nan
    # How likely this sample size was to detect the rule's exact bias (1 - type II error).
    out["power"] = stats.gof_power(rule_law, target, n, level) if rule_law.size else np.nan
    return out


class Equivalence(Measure):
    name = "equivalence"
    budget = ("equivalence_trials", "max_enumeration")
    sim_schema = SIM
    exact_schema = EXACT
    analyses = ("equivalence",)

    def check_model(self, spec: ModelSpec, where: str) -> None:
        """The test needs vocab^2 cells of counts; refuse what would not fit memory."""
        cells = spec.vocab**TOKENS
        if cells > MAX_CELLS:
            raise ConfigError(f"{where}: vocab {spec.vocab} gives {cells} two-token cells; the "
                              f"equivalence study supports vocab <= 1000")

    def simulate(self, point: Point, budget: Mapping[str, Any],
                 root_seed: int) -> dict[str, Any]:
        seed = point.seed(root_seed)
        trials = int(budget["equivalence_trials"])
        p, q, start, token_of = point.family.equivalence_model(point)
        joint = first_tokens_markov(MarkovKernel(p, q), point.gamma, point.rule,  # type: ignore[arg-type]
                                    seed, trials, start, token_of, point.spec.vocab).ravel()
        return run_record(point, seed, trials=trials) | {"accepted_hist": [],
                                                         "joint2": joint.tolist()}

    def exact(self, point: Point, budget: Mapping[str, Any], root_seed: int) -> dict[str, Any]:
        p, q, start, token_of = point.family.equivalence_model(point)
        vocab = point.spec.vocab
        target = target_first_two(p, start, token_of, vocab)
        row: dict[str, Any] = {"point_id": point.point_id,
                               "joint_target": target.ravel().tolist()}
        max_cells = int(budget["max_enumeration"])
        why = enumeration_refusal(p.shape[0], point.gamma, TOKENS, max_cells)
        if why:  # refused at config time (refusal); a job run by hand says so in its row
            return row | {"joint_exact": [], "tv_exact": np.nan,
                          "exact_method": f"mc_only ({why})"} | closed_form(point)
        law = exact.first_tokens_distribution(p, q, start, point.gamma, point.rule, n=TOKENS,
                                              max_cells=max_cells)
        rule_joint = collapse(law, token_of, vocab)
        return row | {"joint_exact": rule_joint.ravel().tolist(),
                      "tv_exact": exact.tv(rule_joint, target),
                      "exact_method": "enumeration"} | closed_form(point)

    def estimate(self, row: Mapping[str, Any], level: float) -> dict[str, Any]:
        return lossless_estimates(row, level)

    def work(self, budget: Mapping[str, Any]) -> int:
        return int(budget["equivalence_trials"])

    def footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint:
        """The equivalence chain (S states), the Markov engine on it
        (:meth:`specsim.engine.MarkovKernel.footprint`, a chunk of generations), then the
        enumerated law of the first two tokens."""
        s, v, g = point.family.chain_size(point)[0], point.spec.vocab, point.gamma
        trials = int(budget["equivalence_trials"])
        held = Footprint(2.0 * s * s + 4.0 * v * v)  # P, Q; counts and laws over tokens
        sim = MarkovKernel.footprint(s).plus(Footprint((8 * g + 6) * min(trials, CHUNK),
                                                       rounds=trials))
        enum = enumeration_footprint(s, g, TOKENS, int(budget["max_enumeration"]),
                                     keep_drafts=rule_spec(point.rule).keep_drafts)
        return point.family.model_footprint(point).then(sim.plus(held),
                                                        (enum or Footprint()).plus(held))

    def refusal(self, point: Point, budget: Mapping[str, Any]) -> str | None:
        """The enumerated law's refusal on the point's equivalence chain (S =
        :meth:`specsim.families.Family.chain_size` states, the job's ``p.shape[0]``)."""
        s = point.family.chain_size(point)[0]
        return enumeration_refusal(s, point.gamma, TOKENS, int(budget["max_enumeration"]))

    def remedy(self, point: Point, budget: Mapping[str, Any]) -> str:
        """The keys that shrink the chain (the vocab; the gamma where the chain holds γ+2
        positions) or raise the limit."""
        s = point.family.chain_size(point)[0]
        knob = "the vocab" if s == point.spec.vocab else "the vocab or gamma"
        more = (f", or raise budget.max_enumeration to {s**(TOKENS + 1)}"
                if s ** (TOKENS + 1) <= MAX_ENUMERATION else "")
        return (f"(the point job would be Monte Carlo only, and the equivalence checks need "
                f"the exact law: tv_exact); lower {knob} (a chain of {s} states){more}")

    def work_done(self, sim: Mapping[str, Any]) -> str:
        return f"{sim['trials']:,} generations"
