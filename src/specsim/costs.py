"""What one speculative round costs, in target calls (one single-token target pass = 1).

A round drafts some tokens, then the target verifies them all in one pass. Its cost is

    drafting + verifying the 1 + (drafted) tokens in one target pass,

with the drafting charged one of two ways (:data:`DRAFTING`), named in every table:

* ``sequential`` -- every draft token is its own draft step: a round drafting γ' tokens pays
  γ' draft steps, k drafts of depth γ one after another k γ (what ``schemes.csv``'s
  ``speedup_c<c>`` has always charged);
* ``batched`` -- the drafts (or a tree's width) are drafted side by side, one step per depth:
  k drafts of depth γ pay γ steps, each over k tokens per sequence.

Two cost models share that shape:

* :class:`ConstantCost` -- a draft step costs c target calls whatever it holds, verifying costs
  1 whatever its length (Leviathan et al. 2022, Thm 3.8's model): a round costs 1 + γ' c
  (sequential) or 1 + γ c (batched, γ' = k γ);
* :class:`RooflineCost` -- both from the roofline of :mod:`specsim.intensity` at a batch size b
  (b sequences decoded together, each its own KV cache of n_ctx tokens): verifying n tokens
  per sequence costs T_target(n, b) / T_target(1, b), a draft step over w tokens per sequence
  T_draft(w, b) / T_target(1, b) (:func:`specsim.intensity.batch_roofline_time`). While the
  target's pass is memory-bound the n tokens are nearly free; at large b the pass is
  compute-bound and verifying n tokens costs ~n.

The config's ``cost:`` section (:func:`settings`, checked by :func:`check_config`) names the
models (by default those of the schemes studies), target/draft shapes, devices and batch sizes
of ``cost_batch.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from specsim.errors import ConfigError, shown
from specsim.intensity import DEVICES, SHAPES, Device, TransformerShape, batch_roofline_time

__all__ = ["BATCHED", "DRAFTING", "SEQUENTIAL", "ConstantCost", "RooflineCost",
           "check_config", "roofline_costs", "settings"]

SEQUENTIAL: Final = "sequential"
BATCHED: Final = "batched"
DRAFTING: Final = (SEQUENTIAL, BATCHED)


def _steps(drafted: Any, width: int, drafting: str) -> Any:
    """Draft steps of a round drafting ``drafted`` tokens in ``width`` sequences."""
    if drafting == SEQUENTIAL:
        return drafted
    if drafting == BATCHED:
        return drafted / width if width != 1 else drafted
    raise ValueError(f"drafting is one of {DRAFTING}, not {drafting!r}")


@dataclass(frozen=True)
class ConstantCost:
    """A draft step costs ``c`` target calls, verifying any number of tokens costs 1 (``c`` may
    be an array or a column: one c per row)."""

    c: Any

    def draft(self, drafted: Any, width: int, drafting: str) -> Any:
        """Drafting cost of rounds drafting ``drafted`` tokens (scalars or arrays)."""
        return self.c * _steps(drafted, width, drafting)

    def total(self, drafted: Any, width: int, drafting: str, rounds: Any = 1.0) -> Any:
        """Cost of ``rounds`` rounds drafting ``drafted`` tokens in all: rounds + c steps."""
        return rounds + self.draft(drafted, width, drafting)


@dataclass(frozen=True)
class RooflineCost:
    """Draft and verify costs from the roofline of ``target`` and ``draft`` on ``device`` at
    ``batch`` sequences of ``n_ctx`` cached tokens each."""

    target: TransformerShape
    draft_shape: TransformerShape
    device: Device
    batch: int
    n_ctx: int

    def _time(self, shape: TransformerShape, tokens: int) -> float:
        return batch_roofline_time(shape, self.device, tokens, self.batch, self.n_ctx)

    @property
    def unit(self) -> float:
        """T_target(1, b): seconds of one single-token target pass (one target call)."""
        return self._time(self.target, 1)

    @property
    def c(self) -> float:
        """T_draft(1, b) / T_target(1, b): the draft cost c of a one-token draft step."""
        return self._time(self.draft_shape, 1) / self.unit

    def verify(self, tokens: int) -> float:
        """T_target(tokens, b) / T_target(1, b): one pass verifying ``tokens`` per sequence."""
        return self._time(self.target, int(tokens)) / self.unit

    def step(self, width: int) -> float:
        """T_draft(width, b) / T_target(1, b): one draft step over ``width`` tokens per
        sequence."""
        return self._time(self.draft_shape, int(width)) / self.unit

    def draft(self, widths: Sequence[int], drafting: str) -> float:
        """Drafting cost of a round drafting ``widths[d]`` tokens per sequence at depth d:
        sequential, sum(widths) one-token steps; batched, one step over widths[d] tokens per
        depth."""
        if drafting == SEQUENTIAL:
            return sum(widths) * self.step(1)
        if drafting == BATCHED:
            return sum(self.step(w) for w in widths)
        raise ValueError(f"drafting is one of {DRAFTING}, not {drafting!r}")

    def total(self, widths: Sequence[int], drafting: str) -> float:
        """Cost of one round: drafting + verifying the 1 + sum(widths) tokens in one target
        pass (k drafts are verified as one tree of k γ + 1 tokens: shared prefixes not
        merged)."""
        return self.draft(widths, drafting) + self.verify(1 + sum(widths))

    def totals(self, gammas: np.ndarray) -> np.ndarray:
        """:meth:`total` of Algorithm 1's round (one sequence of γ tokens) at each γ."""
        return np.asarray([self.total((1,) * int(g), SEQUENTIAL) for g in gammas],
                          dtype=float)


# ------------------------------------------------------------------ the config's cost: section
SHAPE_NAMES: Final = {s.name: s for s in SHAPES}
DEVICE_NAMES: Final = {d.name: d for d in DEVICES}
DEFAULTS: Final[Mapping[str, Any]] = {
    "pairs": [[SHAPES[-1].name, SHAPES[0].name]],
    "devices": [d.name for d in DEVICES], "batch": [1, 4, 16, 64, 256], "n_ctx": 512,
    "gamma_max": 16, "tree_budget_max": 32, "expect": []}


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's ``cost:`` section with its defaults; ``models`` by default every model of
    the config's schemes studies whose draft needs no α, in config order."""
    cfg = {**DEFAULTS, **dict(config.get("cost") or {})}
    if cfg.get("models") is None:
        models = config.get("models", {})
        cfg["models"] = list(dict.fromkeys(
            m for st in config.get("studies", {}).values() if st.get("analysis") == "schemes"
            for m in st.get("models", ())
            if models.get(m, {}).get("draft", {}).get("kind") != "calibrated"))
    return cfg


def roofline_costs(cfg: Mapping[str, Any]) -> list[RooflineCost]:
    """One :class:`RooflineCost` per (target, draft) pair, device and batch size of ``cfg``."""
    return [RooflineCost(SHAPE_NAMES[t], SHAPE_NAMES[d], DEVICE_NAMES[dev], int(b),
                         int(cfg["n_ctx"]))
            for t, d in cfg["pairs"] for dev in cfg["devices"] for b in cfg["batch"]]


def check_config(config: Mapping[str, Any], models: Mapping[str, Any]) -> None:
    """Names in the ``cost:`` section must exist (models, shapes, devices); one-line
    :class:`ConfigError` naming the key otherwise. Ranges are the schema's."""
    cfg = settings(config)
    for i, name in enumerate(cfg["models"]):
        if name not in models:
            raise ConfigError(f"cost.models[{i}]: {shown(name)} is not defined under models: "
                              f"(defined: {sorted(models)})")
        if not any(st.get("analysis") == "schemes" and name in st.get("models", ())
                   for st in config.get("studies", {}).values()):
            raise ConfigError(f"cost.models[{i}]: {name!r} runs in no schemes study (its "
                              f"k-draft rows come from one); add it to one or drop it here")
        if getattr(models[name], "calibrated", False):
            raise ConfigError(f"cost.models[{i}]: {name!r} has an α-calibrated draft; the cost "
                              f"study takes a model whose draft needs no α")
    for i, pair in enumerate(cfg["pairs"]):
        for j, shape in enumerate(pair):
            if shape not in SHAPE_NAMES:
                raise ConfigError(f"cost.pairs[{i}][{j}]: {shown(shape)} is not a shape of the "
                                  f"intensity stage (one of {sorted(SHAPE_NAMES)})")
    for i, dev in enumerate(cfg["devices"]):
        if dev not in DEVICE_NAMES:
            raise ConfigError(f"cost.devices[{i}]: {shown(dev)} is not a device of the "
                              f"intensity stage (one of {sorted(DEVICE_NAMES)})")
    for i, claim in enumerate(cfg["expect"]):
        if claim["model"] not in models:
            raise ConfigError(f"cost.expect[{i}].model: {shown(claim['model'])} is not defined "
                              f"under models:")
        if claim["model"] not in cfg["models"]:
            raise ConfigError(f"cost.expect[{i}].model: {claim['model']!r} is not costed "
                              f"(cost.models: {list(cfg['models'])}); add it there or drop "
                              f"the claim")
        for key in ("sequential", "batched"):
            if not math.isfinite(float(claim[key])):
                raise ConfigError(f"cost.expect[{i}].{key}: {shown(claim[key])} is not a "
                                  f"speedup")
        _check_claim_point(config, claim, f"cost.expect[{i}]")


def _check_claim_point(config: Mapping[str, Any], claim: Mapping[str, Any], where: str) -> None:
    """A ``cost.expect`` claim names a rule of the registry, that rule's knobs, and a point a
    schemes study runs (the model, rule, γ, knob values and c of one study, at the fixed
    policy): otherwise its check could never find its row."""
    from specsim.verify.rules import RULES

    rule = claim["rule"]
    if rule not in RULES:
        raise ConfigError(f"{where}.rule: {shown(rule)} is not a rule (one of "
                          f"{', '.join(RULES)})")
    spec = RULES[rule]
    names = [k.name for k in spec.knobs]
    for knob, value in dict(claim.get("knobs") or {}).items():
        if knob not in names:
            raise ConfigError(f"{where}.knobs.{knob}: {rule!r} has no knob {knob!r} (its "
                              f"knobs: {', '.join(names) or 'none'})")
        try:
            next(k for k in spec.knobs if k.name == knob).check(value, f"{where}.knobs.{knob}")
        except ValueError as err:
            raise ConfigError(str(err)) from None

    def runs(study: Mapping[str, Any]) -> bool:
        knobs = study.get("knobs") or {}
        return (study.get("analysis") == "schemes" and claim["model"] in study.get("models", ())
                and rule in study.get("rule", ()) and claim["gamma"] in study.get("gamma", ())
                and "fixed" in study.get("policy", ["fixed"])
                and any(math.isclose(claim["c"], c) for c in study.get("c", ()))
                and all(v in list(knobs.get(k, [v])) for k, v in
                        dict(claim.get("knobs") or {}).items()))

    if not any(runs(st) for st in (config.get("studies") or {}).values()):
        raise ConfigError(f"{where}: no schemes study runs model {claim['model']!r}, rule "
                          f"{rule!r}, gamma {claim['gamma']}, c {claim['c']:g}"
                          + "".join(f", {k} {v:g}" for k, v in
                                    dict(claim.get("knobs") or {}).items())
                          + " at the fixed policy; the claim's row would never exist")
