"""``iid``: the notebook's stub -- fresh target logits N(0, σ²) every step, no context.

Its model is a distribution over (p, q) pairs (:func:`specsim.models.iid.iid_pairs`): one pair per
round (``share: round``, the notebook's ``speculative_step``) or per position
(``share: position``). With no finite state space its exact reference is a labelled Monte Carlo
quadrature over that distribution, reported with its own standard error: per pair the
acceptance β = Σ min(p, q) (Leviathan et al. 2022 Def. 3.1; q(argmax p) for an argmax rule),
then the truncated geometric law of the accepted drafts (the law behind their Eq. 1), averaged
over pairs for ``round`` (where Jensen's gap appears) or taken at the mean β for ``position``.
For the equivalence measure a fixed sequence of pairs drawn from the model's ``seed`` is frozen
into a position-indexed Markov chain (:func:`specsim.models.iid.iid_frozen_markov`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from specsim import exact
from specsim.engine import CHUNK, long_run_iid
from specsim.errors import ConfigError
from specsim.families.base import EquivalenceModel, Family, PairSampler, TablePair
from specsim.models.iid import iid_frozen_markov, iid_pairs
from specsim.models.spec import ModelSpec
from specsim.resources import Footprint
from specsim.sampling import FloatArray
from specsim.verify import rule_spec

if TYPE_CHECKING:
    from specsim.families.base import Point


class IidFamily(Family):
    """The notebook's stub: vocab V, target logits N(0, σ²), draft log p + N(0, noise²)."""

    name = "iid"
    source = "notebook"
    settings = ("sigma", "noise", "share", "seed")
    drafts = ("noise", "temper", "calibrated", "identical", "uniform")
    exact_budget = ("quadrature_pairs",)
    stationary_schemes = False  # the frozen chain's first round: fresh pairs every position

    # ------------------------------------------------------------------ config
    def validate(self, key: str, entry: Mapping[str, Any]) -> None:
        if isinstance(entry["draft"].get("other"), dict):
            raise ConfigError(f"{key}.draft.other: iid drafts take no table base")

    def spec_fields(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {k: float(entry[k]) for k in ("sigma", "noise") if k in entry}
        if "share" in entry:
            out["share"] = entry["share"]
        if "seed" in entry:
            out["seed"] = int(entry["seed"])
        return out

    def describe(self, spec: ModelSpec) -> dict[str, Any]:
        return {"sigma": spec.sigma, "noise": spec.noise, "share": spec.share, "seed": spec.seed}

    def check_alpha(self, spec: ModelSpec, alpha: float, temperature: float,
                    where: str) -> None:
        """The calibrated draft's base is the one-hot on p's least likely token, whose overlap
        with p is min p <= 1/V; every pair reaches α only if α >= 1/V (any α at T = 0)."""
        if alpha < 1.0 / spec.vocab and temperature > 0:
            raise ConfigError(f"{where}: alpha={alpha} cannot be reached by a calibrated iid "
                              f"draft for every step; allowed: [1/vocab = {1 / spec.vocab:.4g}, 1]")

    # ------------------------------------------------------------------ tables
    def tables(self, spec: ModelSpec, temperature: float, alpha: float | None) -> PairSampler:
        """A sampler of fresh (p, q) pairs (:func:`specsim.models.iid.iid_pairs`)."""
        def sample(rng: np.random.Generator,
                   shape: tuple[int, ...]) -> tuple[FloatArray, FloatArray]:
            return iid_pairs(spec, temperature, alpha, rng, shape)

        return sample

    def example_rows(self, spec: ModelSpec, temperature: float, alpha: float | None,
                     context: int) -> TablePair:
        """The first pair drawn from the model's ``seed`` (the stub has no contexts)."""
        p, q = iid_pairs(spec, temperature, alpha, np.random.default_rng(spec.seed), (1,))
        return p[0], q[0]

    def equivalence_model(self, point: Point) -> EquivalenceModel:
        """One frozen pair per position -- enough positions for two rounds -- run as a Markov
        chain whose states carry the position (state ``t*V + x``)."""
        spec = point.spec
        p, q, start = iid_frozen_markov(spec, point.temperature, point.alpha, point.gamma + 2)
        return EquivalenceModel(p, q, start, np.arange(p.shape[0]) % spec.vocab)

    # ------------------------------------------------------------------ measures
    def simulate_long_run(self, point: Point, seed: np.random.SeedSequence,
                          budget: Mapping[str, Any]) -> tuple[np.ndarray, int]:
        """Fresh pairs every round or position; rounds are independent: no burn-in."""
        chains, rounds, batches = (int(budget[k]) for k in ("chains", "rounds", "batches"))
        hist = long_run_iid(point.spec, point.temperature, point.alpha, point.gamma,
                            point.rule, seed, chains, rounds, batches)  # type: ignore[arg-type]
        return hist, 0

    def _acceptance(self, point: Point, root_seed: int, pairs: int) -> FloatArray:
        """β of ``pairs`` (p, q) pairs, drawn from the point's own reference stream."""
        rng = np.random.default_rng(point.seed(root_seed).spawn(1)[0].generate_state(4))
        p, q = iid_pairs(point.spec, point.temperature, point.alpha, rng, (pairs,))
        beta: FloatArray
        if rule_spec(point.rule).accept == "argmax":  # the draft must propose p's argmax
            beta = np.take_along_axis(q, p.argmax(axis=1)[:, None], axis=1)[:, 0]
        else:
            beta = np.minimum(p, q).sum(axis=1)
        return beta

    def _moments(self, b: FloatArray, gamma: int, rule: str,
                 share: str) -> tuple[float, float, float, float]:
        """(tokens, its standard error, accepted, accept decisions) per round from β samples."""
        if share == "round":  # one pair per round: average the per-round law (Jensen)
            m = exact.truncated_geometric_moments(b, gamma, rule)
            return (float(m["tokens"].mean()), float(m["tokens"].std(ddof=1) / np.sqrt(b.size)),
                    float(m["accepted"].mean()), float(m["trials"].mean()))
        # a fresh pair per position: positions independent with the mean acceptance
        mb = exact.truncated_geometric_moments(np.array(b.mean()), gamma, rule)
        # delta method: d tokens / d mean-beta by a central difference, times SE(mean beta)
        h = 1e-6
        up, down = (float(exact.truncated_geometric_moments(np.array(b.mean() + d), gamma,
                                                            rule)["tokens"])
                    for d in (h, -h))
        se = abs(up - down) / (2 * h) * float(b.std(ddof=1) / np.sqrt(b.size))
        return float(mb["tokens"]), se, float(mb["accepted"]), float(mb["trials"])

    def exact_long_run(self, point: Point, root_seed: int,
                       budget: Mapping[str, Any]) -> dict[str, Any]:
        """Monte Carlo quadrature over the stub's (p, q) distribution -- labelled, with its
        error."""
        b = self._acceptance(point, root_seed, int(budget["quadrature_pairs"]))
        tokens, se, acc, trials = self._moments(b, point.gamma, point.rule, point.spec.share)
        return {
            "tokens_exact": tokens,
            "tokens_exact_se": se,
            "accept_rate_exact": acc / trials,
            "accept_fraction_exact": acc / point.gamma,
            "alpha_bar": float(b.mean()),
            "tokens_stationary": tokens,
            "exact_method": f"quadrature_mc(n={b.size})",
        }

    def exact_curve(self, point: Point, gammas: np.ndarray, root_seed: int,
                    budget: Mapping[str, Any]) -> tuple[np.ndarray, str]:
        """The same quadrature (the same β samples as the point's reference) at every γ."""
        b = self._acceptance(point, root_seed, int(budget["quadrature_pairs"]))
        tokens = [self._moments(b, int(g), point.rule, point.spec.share)[0] for g in gammas]
        return np.asarray(tokens, dtype=np.float64), f"quadrature_mc(n={b.size})"

    # ------------------------------------------------------------------ resources
    def chain_size(self, point: Point) -> tuple[int, int]:
        """The frozen chain of γ+2 positions: (γ+2) V + 1 states, V next tokens per row."""
        v = point.spec.vocab
        return (point.gamma + 2) * v + 1, v

    def model_footprint(self, point: Point) -> Footprint:
        """The frozen chain's two (S, S) tables and their temporaries."""
        s = self.chain_size(point)[0]
        return Footprint(4.0 * s * s, 10.0 * s * s, what=f"frozen chain ({s} states)")

    def long_run_footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint:
        """Fresh pairs drawn in blocks of ~2^18 cells (~10 arrays of them) for a chunk of
        chains, then the quadrature's pairs x vocab cells (~6 arrays of them at once)."""
        chains, rounds, burn_in = (int(budget[k]) for k in ("chains", "rounds", "burn_in"))
        n = min(chains, CHUNK)
        sim = Footprint(10.0 * (1 << 18) + (8 * point.gamma + 6) * n,
                        rounds=chains * (rounds + burn_in),
                        what=f"simulation ({n} chains at once)")
        cells = float(budget["quadrature_pairs"]) * point.spec.vocab
        quad = Footprint(6 * cells, 20 * cells, what=f"quadrature ({cells:.3g} cells)")
        return sim.then(quad)
