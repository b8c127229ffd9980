"""From a validated config to the simulation grid: studies -> de-duplicated points.

A *point* is one (model, draft knob, alpha, gamma, temperature, rule, policy, measure) -- the
rule and the draft-length policy with their knobs (``schemes`` studies). Its identity is
the canonical JSON of those values with the model's full definition (not its name), so a point
shared by several studies is simulated once and its seed -- derived from the root seed and the
identity via ``numpy.random.SeedSequence`` -- never depends on job grouping, ordering or
``--cores``. The draft cost ``c`` is not part of a point: it only enters at aggregation.

Each point is one Snakemake job whose output path names its parameters, Paramspace style
(:attr:`Point.path`, e.g. ``model~calibrated/draft~none/alpha~0.7/gamma~4/temperature~1.0/
rule~correct/policy~fixed/measure~long_run``, or ``rule~multi_draft+drafts=3`` for a rule with
knobs); what decides whether that job reruns is
:func:`specsim.job.describe`, never the rest of the config.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from specsim.costs import check_config as check_cost
from specsim.errors import ConfigError
from specsim.families import Family, family_of, model_identity
from specsim.measures import for_analysis
from specsim.models.spec import DRAFTINGS, ModelSpec
from specsim.schemes import Scheme, schemes_of_study
from specsim.verify import CLASSIC_RULES, rule_spec

__all__ = ["Grid", "Point", "build_grid", "digest", "point_path"]

# A point's output path, Paramspace style: one `key~value` directory level per parameter.
PATH_KEYS = ("model", "draft", "alpha", "gamma", "temperature", "rule", "policy", "measure")
POINT_REGEX = "/".join(f"{key}~[^/~]+" for key in PATH_KEYS)  # Snakemake's {point} wildcard


@dataclass(frozen=True)
class Point:
    """One simulation point. ``alpha`` is None for the seeds' own drafts; ``knob`` overrides
    the draft's blend weight / temperature / logit noise when a study sweeps it."""

    model: str
    spec: ModelSpec
    alpha: float | None
    gamma: int
    temperature: float
    rule: str
    measure: str
    knob: float | None = None
    scheme: Scheme | None = None  # the rule's knobs and the policy, ``scheme`` measure only

    def identity(self) -> dict[str, Any]:
        out = {
            "model": model_identity(self.spec),
            "alpha": self.alpha,
            "gamma": self.gamma,
            "temperature": self.temperature,
            "rule": self.rule,
            "measure": self.measure,
        }
        if self.scheme is not None:  # absent elsewhere: older points keep their identity
            out |= self.scheme.to_dict()  # its rule is the point's
        return out

    @property
    def policy(self) -> str:
        return "fixed" if self.scheme is None else self.scheme.policy

    @cached_property
    def point_id(self) -> str:
        """Computed once per point: the identity hashes user table files, so it reads them."""
        return digest(self.identity())[:16]

    @property
    def family(self) -> Family:
        """The model's family: its tables, simulation and exact reference."""
        return family_of(self.spec)

    def seed(self, root: int) -> np.random.SeedSequence:
        """SeedSequence with entropy ``root`` and spawn key two 32-bit words: the first 16 hex
        digits of :attr:`point_id`, 8 digits a word."""
        words = [int(self.point_id[i : i + 8], 16) for i in range(0, 16, 8)]
        return np.random.SeedSequence(entropy=root, spawn_key=tuple(words))

    @property
    def draft_knob(self) -> float | None:
        """The draft's own knob (blend weight, draft temperature, logit noise), if it has one.

        Derived from the spec, not from the study that named the point first, so a point shared
        by several studies always reports the same value.
        """
        knob = self.family.knob(self.spec.draft)
        return None if knob is None else knob.value(self.spec)

    @cached_property
    def path_params(self) -> dict[str, str]:
        """The point's parameters as they appear in its file path (``none`` for no value)."""
        def fmt(v: float | None) -> str:
            return "none" if v is None else repr(float(v))

        draft = fmt(self.draft_knob)
        if self.spec.drafting != "sample":  # sampled drafting: no suffix
            draft += f"+{self.spec.drafting}"
        return {"model": self.model, "draft": draft, "alpha": fmt(self.alpha),
                "gamma": str(self.gamma), "temperature": fmt(self.temperature),
                "rule": self.rule if self.scheme is None else self.scheme.rule_segment,
                "policy": "fixed" if self.scheme is None else self.scheme.policy_segment,
                "measure": self.measure}

    @property
    def path(self) -> str:
        """Relative path stem under ``results/sim/`` and ``results/exact/``."""
        return point_path(self.path_params)

    def to_record(self) -> dict[str, Any]:
        return {
            "point_id": self.point_id,
            "model": self.model,
            "family": self.spec.family,
            "draft": (self.spec.draft if self.spec.drafting == "sample"
                      else f"{self.spec.draft}+{self.spec.drafting}"),
            "drafting": self.spec.drafting,
            "knob": self.draft_knob,
            "alpha": self.alpha,
            "gamma": self.gamma,
            "temperature": self.temperature,
            "rule": self.rule,
            "rule_knobs": json.dumps(dict(self.scheme.rule_knobs)) if self.scheme else "{}",
            "policy": self.policy,
            "policy_knobs": json.dumps(dict(self.scheme.policy_knobs)) if self.scheme else "{}",
            "measure": self.measure,
            "path": self.path,
            "spec": model_identity(self.spec),
        }


def point_path(params: Any) -> str:
    """``model~m/draft~d/.../measure~x`` from a mapping of :data:`PATH_KEYS` to strings (a
    point's values, Snakemake wildcards, or ``{key}`` placeholders for the rule's pattern)."""
    return "/".join(f"{key}~{params[key]}" for key in PATH_KEYS)


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj``."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Grid:
    config: dict[str, Any]
    points: tuple[Point, ...]  # sorted by point_id, unique
    studies: dict[str, dict[str, Any]]  # study -> {"analysis", "points": [ids], "c": [...]}

    @property
    def config_digest(self) -> str:
        """Digest of the whole validated config: it decides when aggregation (collect, tables,
        figures, checks) reruns, never a point job (see :func:`specsim.job.describe`)."""
        return digest(self.config)[:16]

    @cached_property
    def by_path(self) -> dict[str, Point]:
        """Point by its path stem (:attr:`Point.path`): the Snakemake wildcard lookup."""
        return {p.path: p for p in self.points}

    def model_spec(self, name: str) -> ModelSpec:
        """The spec of the ``models:`` entry ``name`` (its family already checked it)."""
        entry = self.config["models"][name]
        return family_of(entry["family"]).build(name, entry, self.config)

    def point_at(self, path: str) -> Point:
        try:
            return self.by_path[path]
        except KeyError:
            raise ConfigError(f"results/sim/{path}: not a point of this config's grid (its "
                              f"points are listed in results/grid.json)") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "config_digest": self.config_digest,
            "points": [p.to_record() for p in self.points],
            "studies": self.studies,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Grid:
        return build_grid(data["config"])


def _model_specs(config: dict[str, Any]) -> dict[str, ModelSpec]:
    """Each entry read and cross-checked by its family (:meth:`Family.parse`)."""
    specs = {}
    for name, m in config["models"].items():
        try:
            family = family_of(m["family"])
        except ConfigError as err:
            raise ConfigError(f"models.{name}.family: {err}") from None
        specs[name] = family.parse(name, m, config)
    return specs


def _with_knob(spec: ModelSpec, knob: float | None, where: str) -> ModelSpec:
    """The spec with its draft's knob set to a study's ``draft:`` value."""
    if knob is None:
        return spec
    family = family_of(spec)
    k = family.knob(spec.draft)
    if k is None:
        kinds = [d for d in family.drafts if family.knob(d) is not None]
        raise ConfigError(f"{where}: model {spec.name!r} has a {spec.draft!r} draft, which has no "
                          f"knob to sweep; remove 'draft' or use a model whose draft kind is one "
                          f"of {kinds}")
    return k.apply(spec, knob, where)


def _with_drafting(spec: ModelSpec, drafting: str, where: str) -> ModelSpec:
    """The spec with a study's drafting mode (:data:`specsim.models.spec.DRAFTINGS`)."""
    if drafting not in DRAFTINGS:
        raise ConfigError(f"{where}: {drafting!r} is not a drafting mode; choose one of "
                          f"{list(DRAFTINGS)}")
    if drafting != "sample" and spec.calibrated:
        raise ConfigError(f"{where}: model {spec.name!r} has an alpha-calibrated draft, whose "
                          f"alpha {drafting} drafting would not keep; use a model with its own "
                          f"draft")
    return replace(spec, drafting=drafting)  # type: ignore[arg-type]


def build_grid(config: dict[str, Any]) -> Grid:
    """Cross-field checks and the de-duplicated, sorted list of points.

    ``config`` has already passed the JSON schema (with defaults filled in).
    """
    if not isinstance(config, dict):
        raise ConfigError(f"the config must be a mapping, got {type(config).__name__}")
    from specsim.configfile import check_values  # with yaml, which a point job never reads

    check_values(config, "config")
    specs = _model_specs(config)
    budget = config["budget"]
    if budget["batches"] > budget["chains"]:
        raise ConfigError(f"budget.batches: {budget['batches']} exceeds budget.chains "
                          f"{budget['chains']}; batches must be <= chains")
    points: dict[str, Point] = {}
    studies: dict[str, dict[str, Any]] = {}
    for sname, study in config["studies"].items():
        key = f"studies.{sname}"
        measure = for_analysis(study["analysis"])
        schemes = _study_schemes(study, key)
        ids: list[str] = []
        knobs: list[float | None] = list(study.get("draft", [None]))
        draftings: list[str] = list(study.get("drafting", ["sample"]))
        for mname in study["models"]:
            if mname not in specs:
                raise ConfigError(f"{key}.models: {mname!r} is not defined under models: "
                                  f"(defined: {sorted(specs)})")
            base = specs[mname]
            measure.check_model(base, f"{key}.models[{mname}]")
            family_of(base).check_study(base, study, measure.name, key)
            alphas: list[float | None] = list(study["alpha"]) if base.calibrated else [None]
            for knob, drafting in ((k, d) for k in knobs for d in draftings):
                spec = _with_drafting(_with_knob(base, knob, f"{key}.draft"), drafting,
                                      f"{key}.drafting")
                for t in study["temperature"]:
                    for a in alphas:
                        if a is not None:
                            family_of(spec).check_alpha(spec, a, t, f"{key}.alpha")
                        for g in study["gamma"]:
                            for rule, scheme in schemes:
                                if scheme is not None and scheme.depth not in (None, int(g)):
                                    continue  # a tree runs at the γ of its depth only
                                if scheme is not None:
                                    _check_scheme_point(scheme, spec, int(g), key)
                                p = Point(mname, spec, a, int(g), float(t), rule,
                                          measure.name, knob, scheme)
                                points.setdefault(p.point_id, p)
                                ids.append(p.point_id)
        _check_expect_slower(study, specs, key)
        studies[sname] = {"analysis": study["analysis"], "points": ids, "c": list(study["c"])}
    _check_worked_example(config, specs)
    check_cost(config, specs)
    if len(points) > config["max_points"]:
        raise ConfigError(f"the studies define {len(points)} grid points, more than max_points="
                          f"{config['max_points']}; raise max_points to confirm a grid this large")
    ordered = tuple(sorted(points.values(), key=lambda p: p.point_id))
    if len({p.path for p in ordered}) != len(ordered):  # paths name every identity field
        raise ConfigError("two grid points share one output path; rename one of the models")
    return Grid(config=config, points=ordered, studies=studies)


def _study_schemes(study: dict[str, Any], key: str) -> list[tuple[str, Scheme | None]]:
    """(rule, scheme) pairs of a study: every rule and policy at every combination of its own
    knobs' values for a ``schemes`` study; the plain rules (no scheme) elsewhere."""
    if study["analysis"] != "schemes":
        extra = ("knobs" if "knobs" in study
                 else "policy" if study.get("policy", ["fixed"]) != ["fixed"] else None)
        if extra is not None:
            raise ConfigError(f"{key}.{extra}: only a 'schemes' study sweeps rule knobs and "
                              f"draft-length policies")
        for rule in study["rule"]:
            if rule not in CLASSIC_RULES:
                raise ConfigError(f"{key}.rule: {rule!r} runs in a study with analysis: "
                                  f"schemes (the engine of {study['analysis']!r} plays "
                                  f"{list(CLASSIC_RULES)})")
        return [(rule, None) for rule in study["rule"]]
    try:
        found = schemes_of_study(study["rule"], study.get("policy", ["fixed"]),
                                 study.get("knobs", {}), key, study.get("c"))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    gammas = sorted(int(g) for g in study["gamma"])
    for s in found:  # a tree's depth is its draft length: the study must run that γ
        if s.depth is not None and s.depth not in gammas:
            name = next(k.name for k in rule_spec(s.rule).knobs if k.shape)
            raise ConfigError(f"{key}.knobs.{name}: {dict(s.rule_knobs)[name]!r} has depth "
                              f"{s.depth}, which is not one of the study's gamma {gammas} "
                              f"(a tree runs at the gamma of its depth)")
    return [(s.rule, s) for s in found]


def _check_scheme_point(scheme: Scheme, spec: ModelSpec, gamma: int, key: str) -> None:
    try:
        scheme.check_gamma(gamma, f"{key}.gamma",
                           spec.vocab if family_of(spec).stationary_schemes else None)
        scheme.check_vocab(spec.vocab, f"{key}.knobs.drafts")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    family_of(spec).check_scheme(scheme, spec, gamma, key)


def _check_expect_slower(study: dict[str, Any], specs: dict[str, ModelSpec], key: str) -> None:
    """A break_even study's claimed-slower drafts must be among its models, c values and α."""
    claims = study.get("expect_slower", [])
    if claims and study["analysis"] != "break_even":
        raise ConfigError(f"{key}.expect_slower: only break_even studies take it (this study's "
                          f"analysis is {study['analysis']!r})")
    for i, claim in enumerate(claims):
        where = f"{key}.expect_slower[{i}]"
        if claim["model"] not in study["models"]:
            raise ConfigError(f"{where}.model: {claim['model']!r} is not one of the study's "
                              f"models {study['models']}")
        if not any(math.isclose(claim["c"], c) for c in study["c"]):
            raise ConfigError(f"{where}.c: {claim['c']} is not one of the study's c values "
                              f"{study['c']}")
        calibrated = specs[claim["model"]].calibrated
        if "alpha" in claim and not (calibrated and claim["alpha"] in study["alpha"]):
            raise ConfigError(f"{where}.alpha: {claim['alpha']} is not an α of this study's "
                              f"calibrated model {claim['model']!r}")


def worked_example(config: dict[str, Any], specs: dict[str, ModelSpec]) -> dict[str, Any]:
    """The worked example's settings with its defaults resolved: the model the config names,
    else the first (in config order) that needs no α, else the first; for a calibrated draft
    the α the config names, else the first α a study runs that model at."""
    cfg = dict(config.get("worked_example", {}))
    cfg.setdefault("model", next((n for n, s in specs.items() if not s.calibrated),
                                 next(iter(specs))))
    cfg.setdefault("context", 0)
    cfg.setdefault("temperature", 1.0)
    if "alpha" not in cfg and cfg["model"] in specs and specs[cfg["model"]].calibrated:
        cfg["alpha"] = next((a for st in config["studies"].values()
                             if cfg["model"] in st["models"] for a in st.get("alpha", [])), None)
    cfg.setdefault("alpha", None)
    return cfg


def _check_worked_example(config: dict[str, Any], specs: dict[str, ModelSpec]) -> None:
    """The worked example's model must exist, have the context, and reach its α."""
    where = "worked_example"
    cfg = worked_example(config, specs)
    name = cfg["model"]
    if name not in specs:
        raise ConfigError(f"{where}.model: {name!r} is not defined under models: "
                          f"(defined: {sorted(specs)})")
    spec = specs[name]
    if not 0 <= cfg["context"] < spec.vocab:
        raise ConfigError(f"{where}.context: {cfg['context']} is not a token of model {name!r} "
                          f"(vocab {spec.vocab})")
    if spec.calibrated:
        if cfg["alpha"] is None:
            raise ConfigError(f"{where}.alpha: model {name!r} has a calibrated draft and no "
                              f"study runs it at an alpha; give the alpha of the example")
        family_of(spec).check_alpha(spec, cfg["alpha"], float(cfg["temperature"]),
                                    f"{where}.alpha")
