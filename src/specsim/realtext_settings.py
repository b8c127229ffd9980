"""The ``realtext:`` section of config.yaml, and what the workflow needs to list the stage.

Snakemake imports this module every time it parses the workflow (on a cluster, once per job),
so it imports nothing beyond the standard library: workflow/rules/stages.smk takes its
per-step settings from here (its tables and figures from their declarations,
:mod:`specsim.outputs.realtext`), and keeps no list of its own.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from specsim import trace_limits as limits
from specsim.stage_settings import StageSettings

RULES = ("correct", "greedy", "no_resample")  # ``continue`` changes the context bookkeeping

#: Step (one Snakemake rule, one ``specsim realtext`` sub-command) -> the config sections it
#: reads: a rule is passed only those, so only a change to them re-runs it.
STEPS: dict[str, tuple[str, ...]] = {
    "corpus": ("corpus",),
    "model": ("model",),
    "speculative": ("model", "speculative"),
    "lossless": ("model", "lossless"),
    "costs": ("model", "speculative", "costs"),
    "record": ("model", "trace"),
    "pair_accept": ("model", "trace", "speculative", "pair_accept"),
    "pair_optimal": ("model", "trace", "pair_optimal"),
    "pair_costs": ("model", "trace", "pair_optimal"),
    "engine_counters": ("model", "trace", "engine"),
    "engine": ("model", "trace", "engine"),
    "figures": (),
}
#: Where the engine route (:mod:`specsim.pairs.realtext.serving_engine`; its tables and figure are
#: declared in :mod:`specsim.outputs.realtext`) writes its counters, in vLLM's Prometheus
#: format, and the engines' snippets.
ENGINE_COUNTERS = "results/engine/{pair}.prom"
ENGINE_CONFIG = "results/engine/engine_config.md"
#: Config section -> prefix of its keys among the :class:`Settings` fields.
SECTIONS = (("corpus", ""), ("model", ""), ("speculative", ""), ("lossless", "lossless_"),
            ("costs", "cost_"), ("trace", "trace_"), ("pair_accept", "accept_"),
            ("pair_optimal", "optimal_"), ("engine", "engine_"))


@dataclass(frozen=True)
class Settings(StageSettings):
    """Every knob of the real-text experiments; defaults are the schema's (read and written by
    :class:`specsim.stage_settings.StageSettings`)."""

    NAME: ClassVar[str] = "realtext"
    SECTIONS: ClassVar[tuple[tuple[str, str], ...]] = SECTIONS
    STEPS: ClassVar[Mapping[str, tuple[str, ...]]] = STEPS
    ELEMENTS: ClassVar[Mapping[str, type]] = {"trace_temperatures": float}

    holdout_every: int = 10
    target_order: int = 5
    draft_orders: tuple[int, ...] = (1, 2, 3, 4)
    beta_bins: int = 40
    gamma: tuple[int, ...] = (1, 2, 4, 8)
    chains: int = 1024
    rounds: int = 16
    batches: int = 32
    lossless_contexts: tuple[str, ...] = ("the ", "def ", "s of")
    lossless_draft_order: int = 2
    lossless_gamma: int = 2
    lossless_rules: tuple[str, ...] = ("correct", "no_resample")
    lossless_trials: int = 16384
    cost_batch: tuple[int, ...] = (1, 256)
    cost_max_positions: int = 17
    cost_repeats: int = 5
    cost_rounds: int = 4
    cost_gamma: tuple[int, ...] = (1, 2, 4, 8)
    trace_documents: int = 256
    trace_length: int = 128
    trace_top_k: int = 16
    trace_temperatures: tuple[float, ...] = ()
    accept_replicas: int = 4
    optimal_gamma_max: int = 16
    optimal_c: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
    engine_gamma: int = 4
    engine_max_gamma: int = 8
    engine_batch: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    engine_replicas: int = 4
    engine_roofline: tuple[str, ...] = ("Llama-2-70B", "Llama-2-7B", "H100-SXM")
    engine_latency: str = ""

    @classmethod
    def unprefixed(cls, field: str) -> str:
        return _UNPREFIXED.get(field, "speculative")

    @classmethod
    def view(cls, section: Mapping[str, Any], name: str) -> Any:
        """A step is passed every section it reads (empty: the defaults), ``trace`` without
        its ``temperatures`` (each tempered trace's job is told its own temperature)."""
        return _without_temperatures(section, name)

    def check(self, given: Collection[str] | None = None) -> None:
        """Cross-field checks (the schema checks each key alone); one across two sections
        (costs.gamma within speculative.gamma) only when the sections ``given`` (None: all)
        hold both."""
        small = [(f, v) for f, v in _integers(self) if v < 1]
        if small:
            field, value = small[0]
            raise ValueError(f"{self.key(field)} must be at least 1, got {value}")
        if any(t < 0 for t in self.trace_temperatures):
            raise ValueError("trace.temperatures must be at least 0 (0: greedy)")
        if any(c <= 0 for c in self.optimal_c):
            raise ValueError("pair_optimal.c must be above 0")
        positions = self.trace_documents * self.trace_length
        entries = positions * min(2 * self.trace_top_k, TOKENS)
        if positions > limits.MAX_POSITIONS or entries > limits.MAX_ENTRIES:
            raise ValueError(f"trace.documents x trace.length: {self.trace_documents} x "
                             f"{self.trace_length} positions keeping up to "
                             f"{min(2 * self.trace_top_k, TOKENS)} tokens each ({entries} "
                             f"entries) is over the trace limits ({limits.stated()}); lower "
                             f"them")
        if self.trace_top_k > TOKENS:
            raise ValueError(f"trace.top_k must be at most {TOKENS} (the n-gram alphabet), "
                             f"got {self.trace_top_k}")
        if any(not 1 <= k < self.target_order for k in self.draft_orders):
            raise ValueError(f"draft orders {self.draft_orders} must lie in 1..target_order-1")
        if not 1 <= self.lossless_draft_order < self.target_order:
            raise ValueError("lossless.draft_order must lie in 1..target_order-1")
        bad = [c for c in self.lossless_contexts if len(c) < self.target_order - 1]
        if bad:
            raise ValueError(f"lossless contexts {bad} are shorter than target_order-1 characters")
        if any(r not in RULES for r in self.lossless_rules):
            raise ValueError(f"lossless rules must be among {RULES}")
        both = given is None or {"costs", "speculative"} <= set(given)
        if both and not set(self.cost_gamma) <= set(self.gamma):
            raise ValueError("costs.gamma must be a subset of speculative.gamma")
        if self.chains < self.batches:
            raise ValueError("speculative.chains must be at least speculative.batches")
        if len(self.engine_roofline) != 3:
            raise ValueError("engine.roofline must name [target shape, draft shape, device]")
        if self.trace_documents < 2:
            raise ValueError("trace.documents must be at least 2 (the CIs bootstrap documents)")
        if 1.0 in self.trace_temperatures:
            raise ValueError("trace.temperatures: 1.0 is the pairs' own trace (TRACE_PATH), "
                             "recorded always; list only the other temperatures")


def check_section(section: Mapping[str, Any]) -> None:
    """The whole ``realtext:`` section at config time (after the schema): the cross-field
    checks of :class:`Settings`, and ``engine.roofline`` naming a shape, a shape and a device
    of the intensity stage; one-line ValueError naming the key."""
    s = Settings.from_dict(section)
    from specsim.costs import DEVICE_NAMES, SHAPE_NAMES  # numpy: only when a config is checked

    for i, (name, known) in enumerate(zip(s.engine_roofline,
                                          (SHAPE_NAMES, SHAPE_NAMES, DEVICE_NAMES), strict=True)):
        if name not in known:
            kind = "device" if i == 2 else "shape"
            raise ValueError(f"engine.roofline[{i}]: {name!r} is not a {kind} of the intensity "
                             f"stage (one of {sorted(known)})")


#: The recorder's memory (``realtext_record``, one job per temperature): a floor, and bytes per
#: kept support entry of one pair's trace (its blocks read back, combined and written, one pair
#: at a time). Measured (``/usr/bin/time -v specsim record ngram``, order-5 model, top_k 16:
#: ~20-32 kept per position): 2 x 100000 positions peaked at 1076 MB, 10 x 100000 (the most
#: ``trace_limits`` admits at that length) at 3272 MB; this bounds both (1210 and 3652 MB).
RECORD_MB, RECORD_BYTES_PER_ENTRY = 600, 100


def record_memory_mb(section: Mapping[str, Any] | None) -> int:
    """``mem_mb`` of a recording job for a ``realtext:`` section: at least the 1500 MB the
    default needs, more for long traces (:data:`RECORD_BYTES_PER_ENTRY`)."""
    s = Settings.from_dict(section or {}, partial=True)
    entries = s.trace_documents * s.trace_length * min(2 * s.trace_top_k, TOKENS)
    return max(1500, RECORD_MB + -(-entries * RECORD_BYTES_PER_ENTRY // 2**20))


#: Where the DAG records the trace of an n-gram pair (rule ``realtext_record``, one file per
#: pair of :func:`trace_pairs`); a ``trace`` model names such a pair with ``pair:``
#: (:mod:`specsim.families.trace`).
TRACE_PATH = "results/traces/{pair}.parquet"
#: Where the DAG records a pair's trace at another sampling temperature (``trace.temperatures``;
#: rule ``realtext_record_tempered``, one job per temperature): :func:`tempered_trace_path`.
TEMPERED_TRACE_PATH = "results/traces/{pair}_T{temperature}.parquet"
#: The ``realtext:`` sections that shape a recorded trace: a trace model's identity holds them
#: (without ``trace.temperatures``: which other temperatures are recorded shapes no trace; a
#: point's own temperature is in its identity).
TRACE_SECTIONS = ("corpus", "model", "trace")
#: The key of the ``trace`` section that lists the extra temperatures (:data:`TEMPERED_TRACE_PATH`).
TEMPERATURES_KEY = "temperatures"


def tempered_trace_path(pair: str, temperature: float) -> str:
    """The trace file of ``pair`` at a sampling temperature: :data:`TRACE_PATH` at 1.0, else
    :data:`TEMPERED_TRACE_PATH` (the temperature as Python prints the float: ``_T0.5``)."""
    t = float(temperature)
    if t == 1.0:
        return TRACE_PATH.format(pair=pair)
    return TEMPERED_TRACE_PATH.format(pair=pair, temperature=repr(t))


def trace_temperatures(section: Mapping[str, Any] | None) -> tuple[float, ...]:
    """The temperatures besides 1.0 a ``realtext:`` section records its pairs' traces at."""
    trace = (section or {}).get("trace") or {}
    return tuple(float(t) for t in trace.get(TEMPERATURES_KEY, ()))


def _without_temperatures(section: Mapping[str, Any], name: str) -> Any:
    """A config section as the steps and identities read it: ``trace`` without its
    ``temperatures`` list (each tempered trace's job is told its own temperature)."""
    value = section.get(name, {})
    if name == "trace" and isinstance(value, Mapping):
        return {k: v for k, v in value.items() if k != TEMPERATURES_KEY}
    return value


def recorded_pairs(section: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Names of the pairs whose traces the DAG records for a ``realtext:`` section (none
    without one): ``ngram_o<k>`` for each draft order k of ``model.draft_orders``."""
    if section is None:
        return ()
    orders = (section.get("model") or {}).get("draft_orders", Settings.draft_orders)
    return tuple(f"ngram_o{int(k)}" for k in orders)


def trace_pairs(settings: Settings | Mapping[str, Any]) -> list[str]:
    """The n-gram pairs recorded as traces (``ngram_o<k>``, one per draft order, in that
    order), from the settings or the config's ``realtext:`` section (:func:`recorded_pairs`)."""
    if isinstance(settings, Settings):
        settings = {"model": {"draft_orders": list(settings.draft_orders)}}
    return list(recorded_pairs(settings))


def trace_settings(section: Mapping[str, Any]) -> str:
    """JSON of the sections that shape a recorded trace (:data:`TRACE_SECTIONS`)."""
    return json.dumps({s: _without_temperatures(section, s) for s in TRACE_SECTIONS},
                      sort_keys=True)


TOKENS = 96  # specsim.ngram.V: the characters of the alphabet (ngram imports numpy)


_UNPREFIXED = {"holdout_every": "corpus", "target_order": "model", "draft_orders": "model",
               "beta_bins": "model"}






def _integers(s: Settings) -> list[tuple[str, int]]:
    """Every integer field of ``s`` with its value (a list's smallest)."""
    out = []
    for field in s.field_names():
        default, v = getattr(Settings, field), getattr(s, field)
        values = v if isinstance(v, tuple) else (v,)
        integral = isinstance(default, int) or (isinstance(default, tuple) and default
                                                and isinstance(default[0], int))
        if integral and values:
            out.append((field, min(values)))
    return out




def step_settings(section: Mapping[str, Any]) -> dict[str, str]:
    """Step -> JSON of the config sections it reads (``specsim realtext --settings``)."""
    return Settings.step_settings(section)
