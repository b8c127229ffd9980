"""The ``schemes`` analysis' claims, checked on ``schemes.csv`` (rows of ``checks.csv``).

What each check expects comes from the registries: whether a rule is lossless and where its
knob is neutral from :data:`specsim.verify.RULES`. Exact claims use the exact columns (enumeration
or DP); simulated ones are judged at :data:`specsim.checks.CHECK_LEVEL` per row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specsim.precision import printed_tolerance
from specsim.stats import student_t_quantile
from specsim.tables.schemes import KNOB_COLUMNS
from specsim.verify import RULES

__all__ = ["cost_claims", "policy_checks", "scheme_checks"]

EXACT_TOL = 1e-12  # a lossless rule's exact TV (printed to 10 decimals: 0 when below 5e-11)
SAME = ["model", "draft", "knob", "alpha", "gamma", "temperature"]


def _knob(v: object) -> str:
    return v if isinstance(v, str) else f"{v:g}"  # a tree's shape is a string


def _label(r: pd.Series) -> str:
    knobs = "".join(f"/{k}={_knob(r[k])}" for k in KNOB_COLUMNS if k in r and pd.notna(r[k]))
    alpha = "" if pd.isna(r["alpha"]) else f"/alpha={r['alpha']:g}"
    return (f"{r['model']}{alpha}/gamma={r['gamma']}/T={r['temperature']:g}/{r['rule']}"
            f"{knobs}/{r['policy']}")


def _neutral(r: pd.Series) -> bool:
    """The rule's knobs all sit at their neutral value (the rule is then Algorithm 1)."""
    knobs = RULES[r["rule"]].knobs  # type: ignore[index]
    return bool(knobs) and all(k.is_neutral(r[k.name]) for k in knobs)


def _fixed(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["policy"] == "fixed"]


def _key(r: pd.Series) -> tuple:
    return tuple(None if pd.isna(r[k]) else r[k] for k in SAME)


def _rows(df: pd.DataFrame, level: float) -> list[tuple[str, str, bool, str, str]]:
    out = []
    for _, r in df.iterrows():
        lab = _label(r)
        lossless = bool(r["lossless"]) or _neutral(r)
        tv = r["tv_exact"]
        # no exact law of the first two tokens (too large to enumerate: exact_method says
        # so): the G-test against the target's law below is the lossless check
        enumerated = not pd.isna(tv)
        if lossless:
            if enumerated:
                out.append((f"scheme_lossless_exact[{lab}]", "registry: lossless scheme",
                            bool(tv <= EXACT_TOL), f"tv_exact={tv:.3g}", f"<= {EXACT_TOL:g}"))
            want, ok = "lossless", r["verdict"] == "lossless"
        else:
            if enumerated:
                out.append((f"scheme_lossy_exact[{lab}]", "registry: lossy scheme",
                            bool(tv > EXACT_TOL), f"tv_exact={tv:.3g}", f"> {EXACT_TOL:g}"))
            want, ok = "biased", r["verdict"] == "biased"
            if r["power"] < 0.99:
                want, ok = f"biased if detected (underpowered: power {r['power']:.2f})", True
        out.append((f"scheme_verdict[{lab}]", "G-test of the first two tokens", bool(ok),
                    f"verdict={r['verdict']} p={r['p_value']:.3g} tv_mc={r['tv_mc']:.4f} "
                    f"floor={r['tv_floor']:.4f}", want))
        if enumerated:
            out.append((f"scheme_sim_matches_exact_law[{lab}]", "simulation vs exact law",
                        bool(r["p_value_vs_exact"] >= level), f"p={r['p_value_vs_exact']:.3g}",
                        f"p >= {level:g} (G-test vs the scheme's exact law)"))
        se = float(r["tokens_se"])
        q = float(student_t_quantile(1 - level / 2, int(r["batches"]) - 1))
        out.append((f"scheme_tokens_within_ci[{lab}]", "Monte Carlo vs exact tokens per call",
                     bool(abs(r["tokens_per_call"] - r["tokens_exact"]) <= q * se),
                     f"mc={r['tokens_per_call']:.4f} exact={r['tokens_exact']:.4f}",
                     f"|diff| <= {q * se:.4f} (level {level:g})"))
    return out


def _relations(df: pd.DataFrame) -> list[tuple[str, str, bool, str, str]]:
    out = []
    fixed = _fixed(df)
    correct = {_key(r): r for _, r in fixed[fixed["rule"] == "correct"].iterrows()}
    for _, r in fixed[fixed["rule"] == "block"].iterrows():
        base = correct.get(_key(r))
        if base is not None:
            out.append((f"block_at_least_tokenwise[{_label(r)}]",
                        "Sun et al. 2024 (arXiv 2403.10444): block >= token-wise",
                        bool(r["tokens_exact"] >= base["tokens_exact"]
                             - printed_tolerance(base["tokens_exact"])),
                        f"block={r['tokens_exact']:.6f}",
                        f">= {base['tokens_exact']:.6f} (to the printed digits)"))
    claims = [n for n, spec in RULES.items() if spec.at_least_tokenwise]
    for _, r in fixed[fixed["rule"].isin(claims)].iterrows():
        base = correct.get(_key(r))
        if base is not None:
            out.append((f"at_least_tokenwise[{_label(r)}]",
                        RULES[r["rule"]].at_least_tokenwise,  # type: ignore[index]
                        bool(r["tokens_exact"] >= base["tokens_exact"]
                             - printed_tolerance(base["tokens_exact"])),
                        f"{r['rule']}={r['tokens_exact']:.6f}",
                        f">= correct at the same gamma, {base['tokens_exact']:.6f} (to the "
                        f"printed digits)"))
    out += _same_drafts(fixed)
    md = fixed[fixed["rule"] == "multi_draft"]
    for _, g in md.groupby(SAME, dropna=False, sort=False):
        series = [(1.0, correct[_key(g.iloc[0])]["tokens_exact"])] \
            if _key(g.iloc[0]) in correct else []
        series += sorted(zip(g["drafts"], g["tokens_exact"], strict=True))
        ks, toks = zip(*series, strict=True)
        ok = bool(np.all(np.diff(toks) >= -printed_tolerance(toks[1:])))
        out.append((f"multi_draft_nondecreasing_in_k[{_label(g.iloc[0])}]",
                    "SpecInfer (arXiv 2305.09781): more drafts never fewer tokens", ok,
                    " ".join(f"k={k:g}:{t:.4f}" for k, t in zip(ks, toks, strict=True)),
                    "non-decreasing in k (k = 1: correct), to the printed digits"))
    out += _bounds(fixed)
    for _, r in fixed[np.array([_neutral(r) for _, r in fixed.iterrows()], dtype=bool)].iterrows():
        base = correct.get(_key(r))
        if base is not None:
            diff = max(abs(r["tokens_exact"] - base["tokens_exact"]),
                       abs(r["tv_exact"] - base["tv_exact"]))
            tol = float(printed_tolerance(r["tokens_exact"], base["tokens_exact"]))
            out.append((f"neutral_knob_equals_correct[{_label(r)}]",
                        "registry: the knob's neutral value is Algorithm 1",
                        bool(diff <= tol), f"max |diff| = {diff:.3g}",
                        f"<= {tol:.2g} (tokens per call and TV, to the printed digits)"))
    return out


def _same_drafts(fixed: pd.DataFrame) -> list[tuple[str, str, bool, str, str]]:
    """Every rule claiming ``at_least_same_drafts`` (:class:`specsim.verify.RuleSpec`) at or
    above the rule whose drafts it verifies (``same_drafts_as``) at the same model, γ,
    temperature and knobs, in exact tokens per target call (to the printed digits; rows
    without an exact value are not judged)."""
    out = []
    for name, spec in RULES.items():
        base_rule = spec.same_drafts_as
        if not spec.at_least_same_drafts or base_rule is None:
            continue
        knobs = [k.name for k in spec.knobs]

        def key(r: pd.Series, knobs: list[str] = knobs) -> tuple:
            return (*_key(r), *(r[k] for k in knobs))

        base = {key(r): r for _, r in fixed[fixed["rule"] == base_rule].iterrows()}
        for _, r in fixed[fixed["rule"] == name].iterrows():
            b = base.get(key(r))
            if b is None or pd.isna(r["tokens_exact"]) or pd.isna(b["tokens_exact"]):
                continue
            out.append((f"{name}_at_least_{base_rule}[{_label(r)}]", spec.at_least_same_drafts,
                        bool(r["tokens_exact"] >= b["tokens_exact"]
                             - printed_tolerance(b["tokens_exact"])),
                        f"{name}={r['tokens_exact']:.6f}",
                        f">= {base_rule} on the same trees, {b['tokens_exact']:.6f} (to the "
                        f"printed digits)"))
    return out


def _bounds(fixed: pd.DataFrame) -> list[tuple[str, str, bool, str, str]]:
    """Every ``bound`` rule of the registry (:attr:`specsim.verify.RuleSpec.bound`) at or above
    every ``multi_draft`` rule at the same model, γ, temperature and k, in exact tokens per
    target call (to the printed digits)."""
    out = []
    spec = {r: RULES[r] for r in set(fixed["rule"])}  # type: ignore[index]
    # boolean masks as arrays: a list selects columns when the frame is empty
    multi = fixed[np.array([spec[r].multi_draft for r in fixed["rule"]], dtype=bool)]
    for _, b in multi[np.array([spec[r].bound for r in multi["rule"]], dtype=bool)].iterrows():
        same = multi[np.array([_key(r) == _key(b) and r["drafts"] == b["drafts"]
                               and r["rule"] != b["rule"] for _, r in multi.iterrows()],
                              dtype=bool)]
        if same.empty:
            continue
        top = float(same["tokens_exact"].max())
        out.append((f"multi_draft_bound[{_label(b)}]",
                    f"{RULES[b['rule']].source}: no verification of k drafts "  # type: ignore[index]
                    f"accepts more", bool(b["tokens_exact"] >= top - printed_tolerance(top)),
                    f"bound={b['tokens_exact']:.6f}; " + " ".join(
                        f"{r['rule']}={r['tokens_exact']:.6f}" for _, r in same.iterrows()),
                    f">= {top:.6f} (to the printed digits)"))
    return out


def cost_claims(df: pd.DataFrame, claims: list[dict[str, Any]]
                ) -> list[tuple[str, str, bool, str, str]]:
    """The config's ``cost.expect`` claims: a point's exact speedup drafting one after another
    (``speedup_exact_c<c>``) and batched (``speedup_exact_batched_c<c>``), each equal to the
    claimed value to its ``decimals`` (within half a unit of the last digit)."""
    out = []
    for claim in claims:
        knobs = claim.get("knobs", {})
        ct = f"{float(claim['c']):g}"
        rows = _fixed(df)
        rows = rows[(rows["model"] == claim["model"]) & (rows["gamma"] == claim["gamma"])
                    & (rows["rule"] == claim["rule"])]
        for k, v in knobs.items():
            rows = rows[rows[k] == v] if k in rows else rows.iloc[:0]
        name = (f"cost_claim[{claim['model']}/gamma={claim['gamma']}/{claim['rule']}"
                + "".join(f"/{k}={v:g}" for k, v in knobs.items()) + f"/c={ct}]")
        decimals = int(claim.get("decimals", 2))
        want = (f"sequential {claim['sequential']:.{decimals}f}, batched "
                f"{claim['batched']:.{decimals}f} (to ±{0.5 * 10 ** -decimals:g})")
        cols = [f"speedup_exact_c{ct}", f"speedup_exact_batched_c{ct}"]
        if rows.empty or not set(cols) <= set(rows.columns):
            out.append((name, claim.get("source", "config"), False,
                        "no such fixed-γ point in schemes.csv", want))
            continue
        seq, bat = (float(rows.iloc[0][c]) for c in cols)
        ok = all(abs(x - float(claim[k])) <= 0.5 * 10 ** -decimals + 1e-12
                 for x, k in ((seq, "sequential"), (bat, "batched")))
        out.append((name, claim.get("source", "config"), ok,
                    f"sequential {seq:.6f}, batched {bat:.6f} (tokens "
                    f"{rows.iloc[0]['tokens_stationary']:.6f})", want))
    return out


def scheme_checks(df: pd.DataFrame, level: float, claims: list[dict[str, Any]] | None = None
                  ) -> list[tuple[str, str, bool, str, str]]:
    """(check, source, passed, observed, expected) rows for ``checks.csv``."""
    return _rows(df, level) + _relations(df) + cost_claims(df, claims or [])


def policy_checks(pol: pd.DataFrame) -> list[tuple[str, str, bool, str, str]]:
    """On ``schemes_policies.csv``: no policy beats the optimal policy's exact speedup (same
    model, α, temperature, c) if it drafts at most its cap, or the certified bound for its
    longest draft otherwise (``optimal_bound_exact``), and the optimal policy is at least the
    best fixed γ up to its cap; to the printed digits (the optimum's certified upper bound is
    within ~1e-15 of its value, :attr:`specsim.schemes.optimal.Solution.upper`). A row past
    the cap of a model without a certified bound (a trace) is not judged."""
    out = []
    for _, r in pol[pol["optimal_speedup_exact"].notna()].iterrows():
        alpha = "" if pd.isna(r["alpha"]) else f"/alpha={r['alpha']:g}"
        where = f"{r['study']}/{r['model']}{alpha}/T={r['temperature']:g}/c={r['c']:g}"
        opt, value = float(r["optimal_speedup_exact"]), float(r["speedup_exact"])
        tol = float(printed_tolerance(opt, value))
        if r["policy"] == "optimal" and r["gamma"] == r["optimal_gamma"]:
            capped = float(r["best_fixed_capped_speedup_exact"])
            out.append((f"optimal_at_least_best_fixed[{where}/gamma<={int(r['gamma'])}]",
                        "SpecDec++ (arXiv 2405.19715): the optimal stopping rule",
                        bool(value >= capped - tol), f"optimal={value:.6f}",
                        f">= best fixed gamma <= {int(r['gamma'])}: {capped:.6f} (to the "
                        f"printed digits)"))
        elif pd.notna(r["optimal_bound_exact"]):  # empty: past the cap with no bound (traces)
            cap, top = int(r["longest_draft"]), float(r["optimal_bound_exact"])
            what = (f"optimal (gamma <= {int(r['optimal_gamma'])})"
                    if cap <= int(r["optimal_gamma"])
                    else f"the certified bound for gamma <= {cap}")
            out.append((f"no_policy_beats_optimal[{where}/{r['scheme']}]",
                        "SpecDec++ (arXiv 2405.19715): the optimal stopping rule",
                        bool(value <= top + float(printed_tolerance(top, value))),
                        f"speedup={value:.6f}", f"<= {what} {top:.6f} (to the printed digits)"))
    return out
