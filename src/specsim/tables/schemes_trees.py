"""The ``schemes_trees`` table (declared in :mod:`specsim.outputs.schemes`): draft trees against
the best chain and the best k-draft of the same node budget.

One row per point of a ``schemes`` study whose rule drafts a tree (a rule with a shape knob,
:attr:`specsim.schemes.Scheme.depth`), on a model whose family answers exact rates
(:meth:`specsim.families.Family.rates`: Markov tables, stationary; a trace's positional model;
not the i.i.d. stub's frozen pairs): its node budget n is the shape's node count. Beside the
shape's exact tokens per call (the point's value) stand, all exact on the point's model
(:class:`specsim.schemes.rates.Rates`) and all drafting n tokens per round:

* the positional acceptance vector (:func:`specsim.schemes.sequoia.positional_acceptance`,
  over the stationary law of the target; a trace's positions) and what Sequoia's tree model
  predicts for the shape;
* Sequoia's optimal tree for n nodes (:func:`specsim.schemes.sequoia.best_tree`): its
  predicted tokens per call and the tree rule's exact value on that tree
  (:meth:`specsim.schemes.rates.Rates.tree`: :func:`specsim.schemes.tree.tree_law` on tables,
  :func:`specsim.schemes.tree.window_tree_law` on a trace);
* the best chain (Algorithm 1 at γ = n) and the best k-draft (``multi_draft`` with k γ = n,
  2 <= k <= :data:`specsim.outputs.schemes.MAX_DRAFTS`, the best k; more drafts of fewer
  tokens never won on the tables, and on a trace each costs ~k^2 work per position; a k
  whose exact law is refused,
  on a trace beyond :data:`specsim.traces.schemes.MAX_WINDOW_SECONDS`, is left out);
* every rule verifying the same trees (``same_drafts_as`` of :data:`specsim.verify.RULES`:
  ``traversal``), ``<rule>_tokens_exact``: the exact value of its point of the same study,
  model, γ and shape (empty if the study does not run it). Its own points get no row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.grid import Grid
from specsim.outputs.schemes import MAX_DRAFTS
from specsim.precision import first_max
from specsim.schemes import Scheme
from specsim.schemes.rates import Rates
from specsim.schemes.sequoia import best_tree, level_widths, tree_value
from specsim.schemes.tree import parents_of
from specsim.tables.points import sort_rows, study_points
from specsim.verify import RULES

__all__ = ["schemes_trees"]

SAME_TREES = tuple(n for n, spec in RULES.items() if spec.same_drafts_as)
COLUMNS = ["study", "model", "alpha", "temperature", "gamma", "branches", "nodes", "accept_1",
           "tree_tokens_exact", *[f"{n}_tokens_exact" for n in SAME_TREES],
           "tree_tokens_predicted", "sequoia_tree", "sequoia_depth",
           "sequoia_tokens_predicted", "sequoia_tokens_exact", "chain_tokens_exact",
           "best_k", "best_k_gamma", "k_draft_tokens_exact", "best"]


def _row(model: Rates, shape: str) -> dict[str, object]:
    parents = parents_of(tuple(int(b) for b in shape.split("x")))
    n = int(parents.size)
    accept = model.acceptance(n)
    predicted, seq = best_tree(accept, n)
    kd = []
    for k in (k for k in range(2, min(n, MAX_DRAFTS) + 1) if n % k == 0):
        try:
            kd.append((model.scheme(Scheme.build("multi_draft", {"drafts": k}), n // k), k))
        except ValueError:  # its exact law refused (a trace's would take minutes): left out
            continue
    best_kd = kd[first_max([v for v, _ in kd])] if kd else (np.nan, np.nan)
    out = {"nodes": n, "accept_1": float(accept[0]),
           "tree_tokens_predicted": tree_value(accept, parents),
           "sequoia_tree": " ".join(map(str, seq.tolist())),
           "sequoia_depth": len(level_widths(seq)),
           "sequoia_tokens_predicted": predicted,
           "sequoia_tokens_exact": model.tree(seq),
           "chain_tokens_exact": model.scheme(Scheme.build("correct"), n),
           "best_k": best_kd[1], "best_k_gamma": n // best_kd[1] if kd else np.nan,
           "k_draft_tokens_exact": best_kd[0]}
    return out


def schemes_trees(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    df = study_points(grid, points, "schemes")
    by_id = {p.point_id: p for p in grid.points}
    where = ["study", "model", "alpha", "temperature", "gamma"]

    def key(r: pd.Series, rule: str, knobs: tuple) -> tuple:
        return (*(None if pd.isna(r[k]) else r[k] for k in where), rule, knobs)

    same = {}  # every scheme point's exact value, for the rules verifying the same trees
    for _, r in df.iterrows():
        sc = by_id[r["point_id"]].scheme
        if sc is not None:
            same[key(r, sc.rule, sc.rule_knobs)] = float(r["tokens_stationary"])
    rows = []
    for _, r in df.iterrows():
        point = by_id[r["point_id"]]
        scheme = point.scheme
        if scheme is None or scheme.depth is None or RULES[scheme.rule].same_drafts_as:
            continue
        model = point.family.rates(point)
        if model is None:
            continue
        shape = next(str(v) for _, v in scheme.rule_knobs)
        row = {"study": r["study"], "model": r["model"], "alpha": r["alpha"],
               "temperature": r["temperature"], "gamma": int(r["gamma"]), "branches": shape,
               "tree_tokens_exact": float(r["tokens_stationary"])} | _row(model, shape)
        row |= {f"{n}_tokens_exact": same.get(key(r, n, scheme.rule_knobs), np.nan)
                for n in SAME_TREES
                if RULES[n].same_drafts_as == scheme.rule}  # type: ignore[index]
        named = {"tree": row["tree_tokens_exact"], "sequoia": row["sequoia_tokens_exact"],
                 "chain": row["chain_tokens_exact"], "k_draft": row["k_draft_tokens_exact"]}
        values = [-np.inf if np.isnan(v) else v for v in named.values()]
        row["best"] = list(named)[first_max(values)]  # a tie (a chain-shaped Sequoia tree)
        #                                               goes to the first on every CPU
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    return sort_rows(pd.DataFrame(rows).reindex(columns=COLUMNS),
                     ["study", "model", "alpha", "temperature", "nodes", "branches"])
