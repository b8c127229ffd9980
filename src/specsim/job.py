"""One grid point as a self-contained job: what decides whether it reruns, and running it.

A point job needs nothing but its description (:func:`describe`): the point's identity (the
model's full definition -- including the sha256 of user table files --, α, γ, temperature,
rule, measure), the budget keys its measure reads
(:meth:`specsim.measures.Measure.budget_keys`), the root seed and :data:`NUMBERS_VERSION`.
Snakemake passes the description as the job's only parameter, so its params rerun trigger fires
exactly when one of these changes: adding a point to a study, a draft cost ``c``, the
significance level or a figure setting never touches another point's files. The description's
digest is stamped into both output files; aggregation refuses a file whose digest is not its
point's (:func:`specsim.collect.read_points`), whatever ``--rerun-triggers`` said.

The description travels as JSON on the command line (``specsim point --job ...``); the job
rebuilds the point from it, re-derives the digest -- which re-hashes any table file -- and
refuses to run if a file changed since Snakemake planned the job.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from typing import Any, TextIO

from specsim.errors import ConfigError
from specsim.grid import Grid, Point, digest
from specsim.measures import measure_of
from specsim.models.spec import ModelSpec, TableSpec
from specsim.schemes import Scheme

# Bump when a change to the engine, the models or the exact stage changes any point's numbers:
# every point file then reruns (the version is part of each description and its digest). A
# change that moves one verification scheme's values raises that scheme's own ``numbers``
# (specsim.schemes.base.VerificationScheme) instead: only its points rerun.
NUMBERS_VERSION = 1


# Fields left out of a description while at their default: a point that does not use them
# keeps the description, and so the job parameters (Snakemake's params trigger), of a spec
# without them.
_LATER_FIELDS: dict[str, Any] = {"trace_file": None, "trace_pair": None, "trace_settings": None,
                                 "drafting": "sample"}
# Fields only the config's checks read (which temperatures a recorded pair's traces exist at):
# never in a description, so listing another temperature reruns no existing point.
_CHECK_FIELDS = ("trace_temperatures",)


def _spec_fields(spec: ModelSpec) -> dict[str, Any]:
    out = {f.name: getattr(spec, f.name) for f in fields(spec)
           if f.name not in _CHECK_FIELDS
           and not (f.name in _LATER_FIELDS and getattr(spec, f.name) == _LATER_FIELDS[f.name])}
    out["other"] = {"special": spec.other.special, "seed": spec.other.seed,
                    "sharpness": spec.other.sharpness}
    return out


def describe(grid: Grid, point: Point) -> dict[str, Any]:
    """The job's description and its digest; JSON-serialisable, deterministic."""
    budget = grid.config["budget"]
    desc: dict[str, Any] = {
        "point": {"model": point.model, "spec": _spec_fields(point.spec), "alpha": point.alpha,
                  "gamma": point.gamma, "temperature": point.temperature, "rule": point.rule,
                  "measure": point.measure, "knob": point.knob,
                  "scheme": None if point.scheme is None else point.scheme.to_dict()},
        "budget": {k: budget[k] for k in measure_of(point.measure).budget_keys(point)},
        "seed": int(grid.config["seed"]),
        "numbers_version": NUMBERS_VERSION,
    }
    numbers = _scheme_numbers(point.scheme)
    if numbers != 1:  # a scheme whose values moved: only its points' descriptions change
        desc["scheme_numbers"] = numbers
    return desc | {"digest": _digest(point, desc)}


def _scheme_numbers(scheme: Scheme | None) -> int:
    return 1 if scheme is None else scheme.verifier.numbers


def _digest(point: Point, desc: dict[str, Any]) -> str:
    """What decides reruns: the identity (with table-file hashes), budget, seed, version."""
    versions = {"numbers_version": desc["numbers_version"]}
    if "scheme_numbers" in desc:
        versions["scheme_numbers"] = desc["scheme_numbers"]
    return digest({"identity": point.identity(), "budget": desc["budget"], "seed": desc["seed"],
                   **versions})[:16]


def point_from(desc: dict[str, Any]) -> Point:
    """Rebuild the point; refuse a description whose digest no longer holds (a table file was
    edited after the DAG was planned, or the description was altered)."""
    p = desc["point"]
    kw = dict(p["spec"])
    kw["other"] = TableSpec(**kw["other"])
    sc = p.get("scheme")
    scheme = None if sc is None else Scheme.from_dict(sc)
    point = Point(p["model"], ModelSpec(**kw), p["alpha"], int(p["gamma"]),
                  float(p["temperature"]), p["rule"], p["measure"], p["knob"], scheme)
    if desc.get("numbers_version") != NUMBERS_VERSION:
        raise ConfigError(f"job for {point.path}: planned for numbers version "
                          f"{desc.get('numbers_version')}, this specsim is {NUMBERS_VERSION}; "
                          f"rerun snakemake")
    planned = desc.get("scheme_numbers", 1)
    if planned != _scheme_numbers(scheme):
        raise ConfigError(f"job for {point.path}: planned for its scheme's numbers "
                          f"{planned}, this specsim has {_scheme_numbers(scheme)}; rerun "
                          f"snakemake")
    found = _digest(point, desc)
    if found != desc.get("digest"):
        raise ConfigError(f"job for {point.path}: its identity changed since the DAG was "
                          f"planned (digest {found} != {desc.get('digest')}, e.g. a table file "
                          f"was edited); rerun snakemake")
    return point


def run(desc: dict[str, Any], sim_out: str, exact_out: str, log: TextIO) -> None:
    """Simulate the point and compute its exact reference; write both point files."""
    from specsim.io import write_point_file

    point = point_from(desc)
    budget = desc["budget"]
    measure = measure_of(point.measure)
    print(f"point {point.path} (id {point.point_id}, digest {desc['digest']})", file=log,
          flush=True)
    t0 = time.perf_counter()
    sim = measure.simulate(point, budget, int(desc["seed"]))
    t1 = time.perf_counter()
    ref = measure.exact(point, budget, int(desc["seed"]))
    t2 = time.perf_counter()
    write_point_file(sim_out, measure.sim_schema, sim, desc["digest"])
    write_point_file(exact_out, measure.exact_schema, ref, desc["digest"])
    print(f"done: {point.measure} point, {measure.work_done(sim)} in {t1 - t0:.2f} s; exact "
          f"reference ({ref['exact_method']}) in {t2 - t1:.2f} s", file=log, flush=True)


def to_arg(desc: dict[str, Any]) -> str:
    """Compact JSON for the command line."""
    return json.dumps(desc, sort_keys=True, separators=(",", ":"))
