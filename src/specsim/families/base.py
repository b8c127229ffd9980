"""The model-family interface: everything a grid point needs from its model's family.

A family turns one entry of ``models:`` into a :class:`~specsim.models.spec.ModelSpec`, with the
cross-field checks the JSON schema cannot express (:meth:`Family.parse`); names the draft kinds
it offers and the knob a study's ``draft:`` list sweeps for each (:class:`Knob`); checks that a
calibrated α is reachable; and gives a point its tables, its equivalence model, its long-run
simulation and its exact reference. :mod:`specsim.grid`, :mod:`specsim.measures` and
:mod:`specsim.tables` call these methods and never test a family's name; the registry
:data:`specsim.families.FAMILIES` maps ``family:`` values to instances.

Adding a family: one module with a subclass of :class:`Family`, one line in
``specsim/families/__init__.py``, its name (and any new keys) in the schema's ``model``
definition. Fields it stores go on :class:`~specsim.models.spec.ModelSpec` (with defaults, so no
existing identity moves: :meth:`Family.describe` decides what enters the canonical dict).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

import numpy as np

from specsim.errors import ConfigError
from specsim.models.spec import DraftKind, ModelSpec, TableSpec
from specsim.resources import Footprint
from specsim.sampling import FloatArray
from specsim.schemes.rates import Rates, TableRates

if TYPE_CHECKING:
    from specsim.schemes import Scheme

# Keys every models: entry has; any other key must be one of its family's settings.
COMMON_KEYS = ("family", "vocab", "draft")

# A sampler of fresh (p, q) pairs: (rng, leading shape) -> two arrays of shape shape + (V,).
PairSampler = Callable[[np.random.Generator, tuple[int, ...]], tuple[FloatArray, FloatArray]]
TablePair = tuple[FloatArray, FloatArray]


class Point(Protocol):
    """What a family and a measure read of a grid point: :class:`specsim.grid.Point` is one.

    Families and measures sit below the grid (docs/explanation/architecture.md); they take the
    point as this interface, so neither imports the layer above it."""

    @property
    def model(self) -> str: ...
    @property
    def spec(self) -> ModelSpec: ...
    @property
    def alpha(self) -> float | None: ...
    @property
    def gamma(self) -> int: ...
    @property
    def temperature(self) -> float: ...
    @property
    def rule(self) -> str: ...
    @property
    def measure(self) -> str: ...
    @property
    def scheme(self) -> Scheme | None: ...
    @property
    def point_id(self) -> str: ...
    @property
    def family(self) -> Family: ...
    def seed(self, root: int) -> np.random.SeedSequence: ...


class EquivalenceModel(NamedTuple):
    """What the equivalence measure runs: an order-1 chain on states, mapped to tokens.

    ``p``, ``q``: (S, S) target and draft tables over states; ``start``: the state generation
    starts from; ``token_of``: the emitted token of each state (S,). For a table model the
    states are the tokens; a family without a finite state space freezes itself into one.
    """

    p: FloatArray
    q: FloatArray
    start: int
    token_of: np.ndarray


@dataclass(frozen=True)
class Knob:
    """The one number of a draft kind that a study's ``draft:`` list sweeps.

    ``field`` is the :class:`~specsim.models.spec.ModelSpec` field a swept value overrides and
    ``config_key`` where a ``models:`` entry sets it; ``matched_at`` is the value at which the
    draft agrees with the target by construction (a draft temperature of 1), marked on figures.
    """

    draft: DraftKind
    name: str
    field: str
    config_key: str
    axis_label: str
    minimum: float = 0.0
    maximum: float | None = None
    exclusive_minimum: bool = False
    matched_at: float | None = None

    def value(self, spec: ModelSpec) -> float:
        return float(getattr(spec, self.field))

    def check(self, value: float, where: str) -> None:
        """Raise ConfigError naming ``where`` unless ``value`` is an allowed setting."""
        if self.exclusive_minimum and not value > self.minimum:
            raise ConfigError(f"{where}: {self.name} {value} must be > {self.minimum:g}")
        if self.maximum is not None and not self.minimum <= value <= self.maximum:
            raise ConfigError(f"{where}: {self.name} {value} is outside "
                              f"[{self.minimum:g}, {self.maximum:g}]")
        if not value >= self.minimum:
            raise ConfigError(f"{where}: {self.name} {value} must be >= {self.minimum:g}")

    def apply(self, spec: ModelSpec, value: float, where: str) -> ModelSpec:
        """The spec with its knob set to ``value`` (checked)."""
        self.check(value, where)
        changes: dict[str, Any] = {self.field: value}
        return replace(spec, **changes)


# Draft kind -> its knob. Kinds without one (calibrated, identical, uniform, file) take none;
# a family offers the knobs of the draft kinds it offers (Family.knob).
KNOBS: Mapping[str, Knob] = MappingProxyType({
    "blend": Knob("blend", "blend weight", "weight", "draft.weight",
                  "draft quality: blend weight w\n(draft = w·target + (1−w)·other)",
                  minimum=0.0, maximum=1.0),
    "temper": Knob("temper", "draft temperature", "draft_temperature", "draft.temperature",
                   "draft temperature (target at T = 1)", exclusive_minimum=True,
                   matched_at=1.0),
    "noise": Knob("noise", "logit noise", "noise", "noise",
                  "draft logit noise (std of N(0, noise²) on log p)"),
})


class Family(ABC):
    """One model family: its config entry, its draft knobs, its tables and its measures.

    Class attributes describe the family; methods take a :class:`~specsim.models.spec.ModelSpec`
    (config and tables) or a :class:`Point` (measures: the point carries the spec,
    α, γ, temperature, rule and its seed).
    """

    name: ClassVar[str]  # the config's ``family:`` value
    source: ClassVar[str]  # whose models these are: "program", "notebook", "user"
    settings: ClassVar[tuple[str, ...]]  # its own keys of a models: entry (besides COMMON_KEYS)
    drafts: ClassVar[tuple[DraftKind, ...]]  # the draft kinds it offers
    exact_budget: ClassVar[tuple[str, ...]] = ()  # budget keys its exact reference reads beyond
    #                                               the long-run ones (job descriptions list them)
    # schemes: True -- tokens per call is the stationary long run of the equivalence chain
    # (the model's own tables); False -- one round from its start (frozen i.i.d. pairs)
    stationary_schemes: ClassVar[bool] = True
    # its tables certify the optimal policy's bound beyond the policy's cap
    # (:func:`specsim.schemes.optimal.bound`); False: no bound past the cap (a trace)
    optimal_bound: ClassVar[bool] = True

    # ------------------------------------------------------------------ config
    def parse(self, name: str, entry: Mapping[str, Any],
              config: Mapping[str, Any] | None = None) -> ModelSpec:
        """Cross-field checks of a schema-valid ``models:`` entry, then its spec (``config``:
        the whole validated config, for a family whose model is defined by another section).

        Raises :class:`~specsim.errors.ConfigError` naming the key (``models.<name>.<key>``).
        """
        key = f"models.{name}"
        draft = entry["draft"]
        kind = draft["kind"]
        if kind not in self.drafts:
            raise ConfigError(f"{key}.draft.kind: {kind!r} is not available for family "
                              f"{self.name!r}; choose one of {list(self.drafts)}")
        for k in entry:
            if k not in COMMON_KEYS and k not in self.settings:
                raise ConfigError(f"{key}.{k}: not a setting of a {self.name!r} model")
        if "file" in draft and kind != "file":
            raise ConfigError(f"{key}.draft.file: only a 'file' draft reads its table from a "
                              f"file (draft kind here: {kind!r})")
        self.validate(key, entry)
        if kind == "blend" and "weight" not in draft:
            raise ConfigError(f"{key}.draft.weight: a blend draft needs a weight in [0, 1]")
        if kind == "temper" and "temperature" not in draft:
            raise ConfigError(f"{key}.draft.temperature: a temper draft needs a temperature > 0")
        return self.build(name, entry, config)

    def validate(self, key: str, entry: Mapping[str, Any]) -> None:  # noqa: B027 (optional hook)
        """Family-specific cross-field checks (``key`` is ``models.<name>``); default: none."""

    def build(self, name: str, entry: Mapping[str, Any],
              config: Mapping[str, Any] | None = None) -> ModelSpec:
        """The spec of a schema-valid entry: the draft's fields, then the family's own."""
        draft = entry["draft"]
        kw: dict[str, Any] = {"name": name, "family": self.name, "vocab": int(entry["vocab"]),
                              "draft": draft["kind"]}
        if "weight" in draft:
            kw["weight"] = float(draft["weight"])
        if "temperature" in draft:
            kw["draft_temperature"] = float(draft["temperature"])
        if "other" in draft:
            kw["other"] = TableSpec.from_dict(draft["other"])
        if "file" in draft:
            kw["draft_file"] = str(draft["file"])
        return ModelSpec(**(kw | self.spec_fields(entry)))

    @abstractmethod
    def spec_fields(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """The family's :class:`~specsim.models.spec.ModelSpec` fields from its config entry."""

    @abstractmethod
    def describe(self, spec: ModelSpec) -> dict[str, Any]:
        """The family's part of the canonical dict (:func:`specsim.families.model_identity`)."""

    def knob(self, draft: str) -> Knob | None:
        """The knob a study's ``draft:`` list sweeps for this draft kind, if it has one."""
        return KNOBS.get(draft) if draft in self.drafts else None

    def inputs(self, spec: ModelSpec, temperature: float = 1.0) -> tuple[str, ...]:
        """Files a point job of this model at a sampling temperature reads that another job of
        the DAG writes (its Snakemake inputs); default: none."""
        return ()

    def check_study(self, spec: ModelSpec, study: Mapping[str, Any],  # noqa: B027 (a hook)
                    measure: str, key: str) -> None:
        """Refuse (ConfigError naming ``key.<setting>``) a study setting this model cannot run
        under ``measure`` (a temperature, a rule); default: none."""

    def check_scheme(self, scheme: Any, spec: ModelSpec, gamma: int, key: str) -> None:
        """Refuse (ConfigError naming ``key.policy``) a draft-length policy this model cannot
        run: a model without a stationary long run plays one round, so fixed γ only."""
        if not scheme.drafting.fixed and not self.stationary_schemes:
            raise ConfigError(f"{key}.policy: {scheme.policy!r} runs on table models only; "
                              f"{spec.name!r} is a {spec.family!r} model (one frozen round)")

    @abstractmethod
    def check_alpha(self, spec: ModelSpec, alpha: float, temperature: float,
                    where: str) -> None:
        """Raise ConfigError naming ``where`` unless a calibrated draft reaches ``alpha``."""

    # ------------------------------------------------------------------ tables
    @abstractmethod
    def tables(self, spec: ModelSpec, temperature: float,
               alpha: float | None) -> TablePair | PairSampler:
        """The model at a sampling temperature (and calibrated α): a Markov pair (P, Q) of
        (V, V) tables, or a sampler of fresh (p, q) pairs for a family without contexts."""

    @abstractmethod
    def example_rows(self, spec: ModelSpec, temperature: float, alpha: float | None,
                     context: int) -> TablePair:
        """One (p, q) pair of rows (V,) for the worked example: the rows at ``context``."""

    @abstractmethod
    def equivalence_model(self, point: Point) -> EquivalenceModel:
        """The chain the equivalence measure simulates and enumerates (first two tokens)."""

    # ------------------------------------------------------------------ measures
    @abstractmethod
    def simulate_long_run(self, point: Point, seed: np.random.SeedSequence,
                          budget: Mapping[str, Any]) -> tuple[np.ndarray, int]:
        """Histogram (batches, γ+1) of accepted drafts per round, and the burn-in used."""

    @abstractmethod
    def exact_long_run(self, point: Point, root_seed: int,
                       budget: Mapping[str, Any]) -> dict[str, Any]:
        """The long-run exact reference record: ``tokens_exact``, ``tokens_exact_se``,
        ``tokens_stationary``, ``accept_rate_exact``, ``accept_fraction_exact``,
        ``alpha_bar``, ``exact_method`` (:meth:`specsim.measures.Measure.exact`)."""

    def scheme_simulate(self, point: Point, budget: Mapping[str, Any],
                        seed: np.random.SeedSequence, width: int
                        ) -> tuple[np.ndarray, np.ndarray, int] | None:
        """A schemes point's long run simulated the family's own way: (tokens histogram
        (batches, width), drafted per batch (batches,), burn-in), or None -- the scheme
        measure's chains on the equivalence chain (:mod:`specsim.measures.scheme`)."""
        return None

    def scheme_exact(self, point: Point, budget: Mapping[str, Any]) -> dict[str, Any] | None:
        """A schemes point's exact long run the family's own way (``tokens_exact``,
        ``drafted_exact``, ``tokens_stationary``, ``drafted_stationary``, ``tokens_law``,
        ``exact_method``), or None -- the equivalence chain's."""
        return None

    def rates(self, point: Point) -> Rates | None:
        """Exact tokens per target call of other schemes and trees on the point's model (what
        ``schemes_trees`` sets beside a tree point): the equivalence chain's stationary long
        run, or None where that chain is not the model's long run (frozen i.i.d. pairs)."""
        if not self.stationary_schemes:
            return None
        P, Q, start, _ = self.equivalence_model(point)
        return TableRates(P, Q, int(start))

    @abstractmethod
    def exact_curve(self, point: Point, gammas: np.ndarray, root_seed: int,
                    budget: Mapping[str, Any]) -> tuple[np.ndarray, str]:
        """Stationary exact tokens per round of the point's model and rule at each γ in
        ``gammas`` (the point's own γ aside), and how they were obtained."""

    # ------------------------------------------------------------------ resources
    # What the point's computations cost, from its parameters alone (no table is built):
    # :meth:`specsim.measures.Measure.footprint` adds them up, :mod:`specsim.work` checks them.
    @abstractmethod
    def chain_size(self, point: Point) -> tuple[int, int]:
        """(S, d) of :meth:`equivalence_model`'s chain: its states, and the most next states
        a row of its draft table reaches."""

    @abstractmethod
    def model_footprint(self, point: Point) -> Footprint:
        """Building the point's model (:meth:`tables`, :meth:`equivalence_model`) and holding
        it while the point runs."""

    @abstractmethod
    def long_run_footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint:
        """:meth:`simulate_long_run`, then :meth:`exact_long_run`, model included."""

    def scheme_footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint | None:
        """:meth:`scheme_simulate` and :meth:`scheme_exact`, where the family has its own
        (None: the scheme measure's chains on the equivalence chain)."""
        return None
