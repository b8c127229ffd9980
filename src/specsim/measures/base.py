"""The measure interface: what a point job measures, and how its numbers become estimates.

A grid point is a model family's point under one *measure*. The measure decides which budget
keys shape the point's numbers (its job description lists exactly these), the schemas of its two
point files (``results/sim/`` and ``results/exact/``), how it is simulated and what its exact
reference is, what :mod:`specsim.collect` computes from the two rows, and how much simulation it
asks for (:mod:`specsim.work`). :mod:`specsim.job`, :mod:`specsim.collect`,
:mod:`specsim.work` and :mod:`specsim.grid` call these methods and never test a measure's name;
the registry :data:`specsim.measures.MEASURES` maps ``Point.measure`` values to instances.

Adding a measure: one module with a subclass of :class:`Measure`, one line in
``specsim/measures/__init__.py``; the analyses that run under it are its :attr:`Measure.analyses`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from specsim.io import PointSchema
from specsim.resources import Footprint

if TYPE_CHECKING:
    from specsim.families.base import Point
    from specsim.models.spec import ModelSpec

_LIST_I64 = pa.list_(pa.int64())
LIST_F64 = pa.list_(pa.float64())

# What every Monte Carlo point file starts with: its point, its budget and its seed.
RUN_FIELDS = [
    pa.field("point_id", pa.string(), nullable=False),
    pa.field("measure", pa.string(), nullable=False),
    pa.field("gamma", pa.int32(), nullable=False),
    pa.field("vocab", pa.int32(), nullable=False),
    pa.field("chains", pa.int64(), nullable=False),
    pa.field("rounds", pa.int64(), nullable=False),
    pa.field("burn_in", pa.int64(), nullable=False),
    pa.field("batches", pa.int32(), nullable=False),
    pa.field("trials", pa.int64(), nullable=False),
    pa.field("seed_entropy", pa.uint64(), nullable=False),
    pa.field("seed_key", pa.list_(pa.uint32()), nullable=False),
]
# Counts of the first two emitted tokens, flattened (vocab * vocab); empty if unused.
JOINT2 = pa.field("joint2", _LIST_I64, nullable=False)

# The classic point files, shared by the long-run and the equivalence measure.
SIM = PointSchema("sim", pa.schema([
    *RUN_FIELDS,
    # accepted-drafts histogram per batch of chains, flattened (batches * (gamma + 1))
    pa.field("accepted_hist", _LIST_I64, nullable=False),
    JOINT2,
]))
# Exact reference values of one point; a field the point's measure has no value for is null.
EXACT = PointSchema("exact", pa.schema([
    pa.field("point_id", pa.string(), nullable=False),
    pa.field("exact_method", pa.string(), nullable=False),
    pa.field("tokens_exact", pa.float64()),
    pa.field("tokens_exact_se", pa.float64()),
    pa.field("tokens_stationary", pa.float64()),
    pa.field("accept_rate_exact", pa.float64()),
    pa.field("accept_fraction_exact", pa.float64()),
    pa.field("alpha_bar", pa.float64()),
    pa.field("joint_target", LIST_F64),
    pa.field("joint_exact", LIST_F64),
    pa.field("tv_exact", pa.float64()),
    pa.field("tokens_closed_form", pa.float64()),
]))


def run_record(point: Point, seed: np.random.SeedSequence, *, chains: int = 0, rounds: int = 0,
               burn_in: int = 0, batches: int = 0, trials: int = 0) -> dict[str, Any]:
    """The :data:`RUN_FIELDS` of a point's Monte Carlo row."""
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
    }


class Measure(ABC):
    """One measure: its budget, its point files, its simulation, exact reference and estimates.

    Methods take a :class:`~specsim.grid.Point` (the point carries its model's spec and
    family, α, γ, temperature, rule or scheme, and its seed) and the budget of its job
    description (at least the keys :meth:`budget_keys` names).
    """

    name: ClassVar[str]  # the point's ``measure`` value (it appears in point paths)
    budget: ClassVar[tuple[str, ...]]  # budget keys its numbers read
    sim_schema: ClassVar[PointSchema]  # its results/sim/ file
    exact_schema: ClassVar[PointSchema]  # its results/exact/ file
    analyses: ClassVar[tuple[str, ...]] = ()  # study analyses that run under it (grid)

    def budget_keys(self, point: Point) -> tuple[str, ...]:
        """The budget keys that shape this point's numbers (simulation and exact reference)."""
        return self.budget

    def check_model(self, spec: ModelSpec, where: str) -> None:  # noqa: B027 (optional hook)
        """Refuse (ConfigError naming ``where``) a model this measure cannot run; default: none."""

    @abstractmethod
    def simulate(self, point: Point, budget: Mapping[str, Any],
                 root_seed: int) -> dict[str, Any]:
        """The point's Monte Carlo sufficient statistics (one row of :attr:`sim_schema`)."""

    @abstractmethod
    def exact(self, point: Point, budget: Mapping[str, Any], root_seed: int) -> dict[str, Any]:
        """The point's exact reference (one row of :attr:`exact_schema`)."""

    @abstractmethod
    def estimate(self, row: Mapping[str, Any], level: float) -> dict[str, Any]:
        """Estimates with confidence intervals from the joined sim and exact rows (``level``:
        the significance level of the tests)."""

    @abstractmethod
    def work(self, budget: Mapping[str, Any]) -> int:
        """Simulated rounds (each γ drafts and one target call) one point asks for."""

    @abstractmethod
    def footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint:
        """Peak memory and work of the point's job (:meth:`simulate`, then :meth:`exact`),
        from its parameters alone, before anything runs (:mod:`specsim.resources`)."""

    def refusal(self, point: Point, budget: Mapping[str, Any]) -> str | None:
        """Why the point's job would refuse part of its work at run time (an exact law over
        its size limit), from the same estimate :meth:`footprint` makes, or None:
        :mod:`specsim.work` refuses the config first, naming the point."""
        return None

    def impossible(self, point: Point) -> str | None:
        """Why the point's job could not run at all (its model makes the computation
        ill-posed for the method, e.g. the optimal policy on a reducible chain), from the code
        the job would stop in, or None: :mod:`specsim.work` refuses the config first."""
        return None

    def remedy(self, point: Point, budget: Mapping[str, Any]) -> str:
        """What the config's refusal of :meth:`refusal` says after its reason: the outcome
        and the keys to change."""
        return "(the point job would be Monte Carlo only); lower the vocab, cap, drafts or branches"

    def monte_carlo_only(self, point: Point, budget: Mapping[str, Any]) -> str | None:
        """What of the point's exact reference its job will leave to Monte Carlo although
        the study's checks pass without it (a documented outcome, not a refusal), or None:
        the study listing says so before any job runs (:func:`specsim.work.summary`)."""
        return None

    @abstractmethod
    def work_done(self, sim: Mapping[str, Any]) -> str:
        """What a simulation row did, for the job's log (e.g. ``1,000 rounds``)."""
