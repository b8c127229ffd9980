"""The ``schemes`` analysis' tables, from ``results/points.parquet`` and exact theory (declared,
with their columns, in :mod:`specsim.outputs.schemes`).

``schemes.csv`` -- one row per point of every ``schemes`` study: the model and draft, α, γ,
temperature, the rule and the policy with one column per knob of the registries (empty where the
scheme has no such knob), whether the rule is lossless by design, the lossless check (exact and
simulated TV of the first two tokens with the sampling floor, G-test p-value, verdict, power),
tokens per target call and draft tokens per round (exact, simulated with 95% CIs) and the
speedup at each c of the study, ``speedup_c<c>`` (simulated, ratio of long-run sums with its
CI) and ``speedup_exact_c<c>`` (the stationary limit): a round drafting γ' tokens costs one target
call plus γ' c. ``tokens_exact`` is the exact mean over exactly the simulated rounds (what the
simulation must cover), ``tokens_stationary`` the long-run limit; they differ only while a
chain remembers its start (the heuristic schedule started at γ = 20).

``schemes_policies.csv`` -- the draft-length policies against fixed draft lengths: for every
(study, model, α, temperature) whose study runs a policy other than ``fixed``, one row per
(point of the ``correct`` rule, c) and one ``best_fixed`` row per c, the best fixed γ in
1..``GAMMA_MAX`` by the exact long run of Algorithm 1 (:func:`specsim.exact.long_run`). The
``optimal`` policy's point has its row at its own c only; every row is set against it
(``vs_optimal``: the optimal row of the same model, α, temperature and c with the longest cap,
from any study), and against the best fixed γ up to the row's longest draft.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from specsim import stats
from specsim.costs import BATCHED, DRAFTING, SEQUENTIAL, ConstantCost, RooflineCost, roofline_costs
from specsim.costs import settings as cost_settings
from specsim.families import family_of
from specsim.grid import Grid, Point
from specsim.precision import covers, first_max
from specsim.schemes import POLICIES, optimal
from specsim.schemes.sequoia import best_trees, level_widths
from specsim.schemes.tokenwise import correct_tables
from specsim.tables.points import sort_rows, study_points
from specsim.verify import RULES

__all__ = ["GAMMA_MAX", "KNOB_COLUMNS", "cost_batch", "schemes",
           "schemes_policies"]

GAMMA_MAX = 32  # fixed draft lengths searched for the best one
KNOB_COLUMNS = tuple(dict.fromkeys(
    [k.name for spec in RULES.values() for k in spec.knobs]
    + [k.name for spec in POLICIES.values() for k in spec.knobs]))
KEYS = ["model", "draft", "knob", "alpha", "gamma", "temperature", "rule", *KNOB_COLUMNS,
        "policy"]


def _c_text(c: float) -> str:
    return f"{float(c):g}"


def _points(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    df = study_points(grid, points, "schemes")
    knobs = [json.loads(r) | json.loads(p) for r, p in zip(df["rule_knobs"], df["policy_knobs"],
                                                           strict=True)]
    for name in KNOB_COLUMNS:
        df[name] = [k.get(name, np.nan) for k in knobs]
    df["lossless"] = [RULES[r].lossless for r in df["rule"]]  # type: ignore[index]
    df["tokens_per_call"] = df["tokens_per_round"]
    df["covered"] = covers(df["tokens_ci_low"], df["tokens_ci_high"], df["tokens_exact"])
    return df


def _widths(row: pd.Series) -> tuple[int, ...]:
    """Tokens the row's rule drafts side by side at each depth
    (:meth:`specsim.verify.RuleSpec.draft_widths`)."""
    spec = RULES[row["rule"]]  # type: ignore[index]
    return spec.draft_widths({k.name: row[k.name] for k in spec.knobs}, int(row["gamma"]))


def _width(row: pd.Series) -> float:
    """Mean tokens drafted side by side per depth: k for k drafts, 1 for one sequence."""
    widths = _widths(row)
    return sum(widths) / len(widths)


def _speedup(row: pd.Series, c: float, drafting: str = SEQUENTIAL
             ) -> tuple[float, float, float, float]:
    """(simulated, CI low, CI high, exact) speedup at draft cost c, the drafting charged
    ``drafting`` (:class:`specsim.costs.ConstantCost`)."""
    cost, width = ConstantCost(c), _width(row)
    rounds = np.asarray(row["rounds_batches"], dtype=float)
    calls = cost.total(np.asarray(row["drafted_batches"], dtype=float), width, drafting, rounds)
    est, lo, hi, _ = stats.batch_mean_interval(np.asarray(row["tokens_batches"], float), calls)
    return est, lo, hi, float(row["tokens_stationary"]) / cost.total(
        float(row["drafted_stationary"]), width, drafting)


def schemes(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    df = _points(grid, points)
    cs = sorted({float(c) for cl in df["c_list"] for c in cl})
    for c in cs:
        vals = [_speedup(row, c) if c in [float(x) for x in row["c_list"]]
                else (np.nan,) * 4 for _, row in df.iterrows()]
        batched = [_speedup(row, c, BATCHED) if c in [float(x) for x in row["c_list"]]
                   else (np.nan,) * 4 for _, row in df.iterrows()]
        t = _c_text(c)
        for i, name in enumerate(("speedup", "speedup_ci_low", "speedup_ci_high",
                                  "speedup_exact")):
            df[f"{name}_c{t}"] = [v[i] for v in vals]
            df[f"{name}_batched_c{t}"] = [v[i] for v in batched]
    df["trials_total"] = df["trials_total"].astype("int64")
    cols = ["study", *KEYS, "lossless", "trials_total", "tv_exact", "tv_mc", "tv_floor",
            "g_statistic", "p_value", "verdict", "power", "p_value_vs_exact", "tokens_exact",
            "tokens_per_call", "tokens_ci_low", "tokens_ci_high", "tokens_se", "batches",
            "covered", "tokens_stationary", "drafted_stationary", "drafted_exact",
            "drafted_per_round", "drafted_ci_low", "drafted_ci_high", "exact_method",
            *[f"{n}_c{_c_text(c)}" for c in cs for n in ("speedup", "speedup_ci_low",
                                                          "speedup_ci_high", "speedup_exact")],
            *[f"{n}_batched_c{_c_text(c)}" for c in cs
              for n in ("speedup", "speedup_ci_low", "speedup_ci_high", "speedup_exact")]]
    return sort_rows(df[cols], ["study", *KEYS])


def _fixed_curve(grid: Grid, model: str, alpha: float | None, temperature: float,
                 gammas: np.ndarray) -> np.ndarray:
    """Exact long-run tokens per target call of Algorithm 1 at each fixed γ, by the model
    family's exact curve (:meth:`specsim.families.Family.exact_curve`: the DP over a table
    model's tables, :func:`specsim.exact.long_run`; a trace's positional DP at the recorded α)."""
    spec = grid.model_spec(model)
    point = Point(model, spec, alpha, 1, temperature, "correct", "long_run")
    return family_of(spec).exact_curve(point, gammas, int(grid.config["seed"]),
                                       grid.config["budget"])[0]


def _against_optimal(grid: Grid, out: pd.DataFrame) -> None:
    """``optimal_gamma``, ``optimal_speedup_exact``, ``vs_optimal``: per (model, α,
    temperature, c), from any study, the ``optimal`` policy's row with the longest cap (its
    optimum bounds every policy drafting at most that many tokens); ``optimal_bound_exact``:
    that optimum where the row drafts at most its cap, else the certified bound for the row's
    longest draft (:func:`specsim.schemes.optimal.bound`, from the model's tables; empty for a
    family without one, :attr:`specsim.families.Family.optimal_bound`: a trace)."""
    key = ["model", "alpha", "temperature", "c"]
    optimal_rows = [p in POLICIES and POLICIES[p].plays.cost is not None for p in out["policy"]]
    opt = out[optimal_rows].sort_values("gamma", kind="stable")
    best = opt.groupby(key, dropna=False, sort=False).tail(1)

    def of(r: pd.Series) -> tuple:
        return tuple(None if pd.isna(r[k]) else r[k] for k in key)  # NaN never equals itself

    ref = {of(r): (r["gamma"], r["speedup_exact"]) for _, r in best.iterrows()}
    found = [ref.get(of(r), (np.nan, np.nan)) for _, r in out.iterrows()]
    out["optimal_gamma"] = [g for g, _ in found]
    out["optimal_speedup_exact"] = [v for _, v in found]
    out["vs_optimal"] = out["speedup_exact"] / out["optimal_speedup_exact"]
    past: dict[tuple, tuple[pd.Series, int, set[int]]] = {}  # longest drafts past the cap
    for (_, r), (base, _) in zip(out.iterrows(), found, strict=True):
        if pd.notna(base) and int(r["longest_draft"]) > base and \
                family_of(grid.model_spec(str(r["model"]))).optimal_bound:  # a trace: none
            past.setdefault(of(r), (r, int(base), set()))[2].add(int(r["longest_draft"]))
    bounds: dict[tuple, float] = {}
    for k, (r, base, longest) in past.items():  # one envelope DP per (model, α, T, c)
        spec = grid.model_spec(str(r["model"]))
        alpha = None if pd.isna(r["alpha"]) else float(r["alpha"])
        P, Q = family_of(spec).tables(spec, float(r["temperature"]), alpha)  # type: ignore[misc]
        caps = sorted(longest)
        bounds |= {(*k, g): b for g, b in zip(
            caps, optimal.bound(P, Q, *correct_tables(P, Q), base, float(r["c"]), caps),
            strict=True)}
    values = []
    for (_, r), (base, value) in zip(out.iterrows(), found, strict=True):
        longest = int(r["longest_draft"])
        if pd.isna(base) or longest <= base:
            values.append(value)
        else:
            values.append(bounds.get((*of(r), longest), np.nan))
    out["optimal_bound_exact"] = values


def schemes_policies(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    df = _points(grid, points)
    df = df[df["rule"] == "correct"]
    by_id = {p.point_id: p for p in grid.points}
    rows = []
    group_keys = ["study", "model", "alpha", "temperature"]
    gammas = np.arange(1, GAMMA_MAX + 1)
    curves: dict[tuple[str, float | None, float], np.ndarray] = {}  # studies share models
    for (study, model, alpha, temp), sub in df.groupby(group_keys, dropna=False, sort=True):
        if all(POLICIES[p].plays.fixed for p in sub["policy"]):
            continue
        a = None if pd.isna(alpha) else float(alpha)
        curve_key = (str(model), a, float(temp))
        if curve_key not in curves:
            curves[curve_key] = _fixed_curve(grid, *curve_key, gammas)
        fixed = curves[curve_key]
        base = {"study": study, "model": model, "alpha": alpha, "temperature": temp}
        for c in sub["c_list"].iloc[0]:
            c = float(c)
            speed = fixed / ConstantCost(c).total(gammas, 1, SEQUENTIAL)
            best = first_max(speed)
            rows.append(base | {"c": c, "policy": "best_fixed", "gamma": int(gammas[best]),
                                "scheme": f"best fixed (γ={gammas[best]})",
                                "tokens_exact": fixed[best], "drafted_exact": float(gammas[best]),
                                "speedup_exact": speed[best],
                                "best_fixed_speedup_exact": speed[best],
                                "longest_draft": int(gammas[best]),
                                "best_fixed_capped_speedup_exact": speed[best]})
            for _, row in sub.iterrows():
                scheme = by_id[row["point_id"]].scheme
                assert scheme is not None  # a schemes study's point
                own = scheme.optimal_cost
                if own is not None and not np.isclose(own, c, rtol=1e-12, atol=0):
                    continue  # a policy optimal for another draft cost: its row is at that c
                est, lo, hi, ex = _speedup(row, c)
                longest = max(scheme.draft_lengths(int(row["gamma"])))
                capped = speed[:longest].max()  # the best fixed γ <= this policy's longest draft
                label = POLICIES[scheme.policy].label(int(row["gamma"]),
                                                      dict(scheme.policy_knobs))
                rows.append(base | {"c": c, "policy": row["policy"], "gamma": int(row["gamma"]),
                                    "scheme": label,
                                    "threshold": row["threshold"], "cap": row["cap"],
                                    "tokens_exact": row["tokens_stationary"],
                                    "tokens_per_call": row["tokens_per_call"],
                                    "drafted_exact": row["drafted_stationary"],
                                    "drafted_per_round": row["drafted_per_round"],
                                    "speedup": est, "speedup_ci_low": lo, "speedup_ci_high": hi,
                                    "speedup_exact": ex,
                                    "best_fixed_speedup_exact": speed[best],
                                    "longest_draft": longest,
                                    "best_fixed_capped_speedup_exact": capped})
    cols = ["study", "model", "alpha", "temperature", "c", "policy", "gamma", "threshold", "cap",
            "scheme", "tokens_exact", "tokens_per_call", "drafted_exact", "drafted_per_round",
            "speedup", "speedup_ci_low", "speedup_ci_high", "speedup_exact",
            "best_fixed_speedup_exact", "vs_best_fixed", "longest_draft",
            "best_fixed_capped_speedup_exact", "optimal_gamma", "optimal_speedup_exact",
            "vs_optimal", "optimal_bound_exact"]
    if not rows:  # no study runs a policy other than fixed: the table has no rows
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame(rows)
    out["vs_best_fixed"] = out["speedup_exact"] / out["best_fixed_speedup_exact"]
    _against_optimal(grid, out)
    return sort_rows(out.reindex(columns=cols), ["study", "model", "alpha", "temperature", "c",
                                             "policy", "gamma", "threshold", "cap"])


COST_COLUMNS = [
    "model", "target", "draft_model", "device", "batch", "n_ctx", "c", "gamma_best",
    "tokens_best", "verify_best", "speedup_best", "gamma_constant", "speedup_constant",
    "speedup_at_gamma_constant",
    *[f"kdraft_{d}_{n}" for d in DRAFTING for n in ("rule", "drafts", "gamma", "speedup")],
    "tree_shape", "tree_budget", "tree_tokens", "tree_speedup",
    "sequoia_budget", "sequoia_depth", "sequoia_tokens", "sequoia_speedup"]


def _best(rows: pd.DataFrame, cost: RooflineCost, drafting: str) -> tuple[pd.Series, float]:
    """The row of ``rows`` with the best exact speedup under ``cost`` and ``drafting``."""
    speed = np.asarray([r["tokens_stationary"] / cost.total(_widths(r), drafting)
                        for _, r in rows.iterrows()])
    return rows.iloc[first_max(speed)], float(speed.max())


def _best_kdraft(wide: pd.DataFrame, cost: RooflineCost, drafting: str) -> dict[str, object]:
    """The point of ``wide`` drafting k sequences side by side (the same width at every depth)
    with the best exact speedup under ``cost`` with ``drafting``: its rule, k, γ, speedup."""
    names = [f"kdraft_{drafting}_{n}" for n in ("rule", "drafts", "gamma", "speedup")]
    if wide.empty:
        return dict.fromkeys(names, np.nan)
    r, speed = _best(wide, cost, drafting)
    return dict(zip(names, (r["rule"], _width(r), int(r["gamma"]), speed), strict=True))


def _best_tree(trees: pd.DataFrame, cost: RooflineCost) -> dict[str, object]:
    """The tree point of the model's schemes studies (a rule whose width knob is a shape) with
    the best exact speedup under ``cost``, drafted batched (one draft step per depth over that
    depth's nodes): its shape, node budget, tokens per call and speedup (Sequoia's optimal
    tree of each budget is costed the same way by :func:`_best_sequoia`)."""
    if trees.empty:
        return dict.fromkeys(("tree_shape", "tree_budget", "tree_tokens", "tree_speedup"),
                             np.nan)
    r, speed = _best(trees, cost, BATCHED)
    spec = RULES[r["rule"]]  # type: ignore[index]
    return {"tree_shape": r[str(spec.width_knob)], "tree_budget": sum(_widths(r)),
            "tree_tokens": r["tokens_stationary"], "tree_speedup": speed}


def _sequoia_trees(grid: Grid, model: str, budget_max: int
                   ) -> list[tuple[int, tuple[int, ...], float]]:
    """Sequoia's optimal tree for every node budget n = 1..``budget_max`` on ``model``
    (:func:`specsim.schemes.sequoia.best_tree` from the positional acceptance vector), as
    (n, nodes per depth, the tree rule's exact long-run tokens per call on it), by the family's
    exact rates (:meth:`specsim.families.Family.rates`: Markov tables, a trace's positional
    model); empty for a family without them (the i.i.d. stub's frozen chain)."""
    point = next((p for p in grid.points if p.model == model), None)
    rates = None if point is None or budget_max < 1 else point.family.rates(point)
    if rates is None:
        return []
    budgets = list(range(1, budget_max + 1))
    trees = best_trees(rates.acceptance(budget_max), budgets)
    return [(n, level_widths(parents), rates.tree(parents)) for n, (_, parents) in
            zip(budgets, trees, strict=True)]


def _best_sequoia(trees: list[tuple[int, tuple[int, ...], float]],
                  cost: RooflineCost) -> dict[str, object]:
    """The budget of ``trees`` (:func:`_sequoia_trees`) with the best exact speedup under
    ``cost``, drafted batched (one draft step per depth over that depth's nodes): its budget,
    depth, tokens per call and speedup."""
    names = ("sequoia_budget", "sequoia_depth", "sequoia_tokens", "sequoia_speedup")
    if not trees:
        return dict.fromkeys(names, np.nan)
    speed = np.asarray([rate / cost.total(widths, BATCHED) for _, widths, rate in trees])
    n, widths, rate = trees[first_max(speed)]
    return dict(zip(names, (n, len(widths), rate, float(speed.max())), strict=True))


def _is_shape(row: pd.Series) -> bool:
    spec = RULES[row["rule"]]  # type: ignore[index]
    return any(k.shape for k in spec.knobs if k.name == spec.width_knob)


def cost_batch(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """Per model of the config's ``cost:`` section, (target, draft) pair, device and batch
    size: the best γ of Algorithm 1 by its exact long-run tokens per call (γ = 1..gamma_max,
    the model family's exact curve) at the roofline's round cost
    (:class:`specsim.costs.RooflineCost`), beside the γ the constant model 1 + γ c would pick at
    the same c; the best k-draft point of the model's schemes studies drafting one after
    another and batched, its best tree point, and Sequoia's optimal tree of the best node
    budget up to ``tree_budget_max`` (:func:`_sequoia_trees`), drafted batched."""
    cfg = cost_settings(grid.config)
    if not cfg["models"]:
        return pd.DataFrame(columns=COST_COLUMNS)
    df = _points(grid, points)
    fixed = np.asarray([POLICIES[p].plays.fixed for p in df["policy"]], dtype=bool)
    df = df[fixed & df["alpha"].isna() & (df["temperature"] == 1.0)]
    df = df.loc[np.asarray([_width(r) > 1 and pd.notna(r["tokens_stationary"])
                            for _, r in df.iterrows()], dtype=bool)]
    shaped = np.asarray([_is_shape(r) for _, r in df.iterrows()], dtype=bool)
    # the tree rule's own points (a rule verifying its trees otherwise, ``same_drafts_as``,
    # is schemes_trees.csv's column beside it, not a tree point here)
    own = np.asarray([not RULES[r].same_drafts_as for r in df["rule"]],  # type: ignore[index]
                     dtype=bool)
    gammas = np.arange(1, int(cfg["gamma_max"]) + 1)
    rows = []
    for model in cfg["models"]:
        alg1 = _fixed_curve(grid, model, None, 1.0, gammas)
        sequoia = _sequoia_trees(grid, model, int(cfg["tree_budget_max"]))
        mine = (df["model"] == model).to_numpy()
        wide, trees = (df.loc[mine & sel].drop_duplicates(["rule", *KNOB_COLUMNS, "gamma"])
                       for sel in (~shaped, shaped & own))
        for cost in roofline_costs(cfg):
            speed = alg1 / cost.totals(gammas)
            best = first_max(speed)
            const = alg1 / ConstantCost(cost.c).total(gammas, 1, SEQUENTIAL)
            bc = first_max(const)
            row = {"model": model, "target": cost.target.name,
                   "draft_model": cost.draft_shape.name, "device": cost.device.name,
                   "batch": cost.batch, "n_ctx": cost.n_ctx, "c": cost.c,
                   "gamma_best": int(gammas[best]), "tokens_best": alg1[best],
                   "verify_best": cost.verify(int(gammas[best]) + 1),
                   "speedup_best": speed[best], "gamma_constant": int(gammas[bc]),
                   "speedup_constant": const[bc], "speedup_at_gamma_constant": speed[bc]}
            for drafting in DRAFTING:
                row |= _best_kdraft(wide, cost, drafting)
            rows.append(row | _best_tree(trees, cost) | _best_sequoia(sequoia, cost))
    return pd.DataFrame(rows, columns=COST_COLUMNS)
