"""Speculative sampling with real language models: character n-grams trained on real English.

The target is the order-5 interpolated Witten-Bell model of :mod:`specsim.ngram`, the drafts are
the same family at orders 1-4, all trained on the standard library's own English text. Three
experiments, each a sub-command of ``python -m specsim.realtext`` (one Snakemake rule each):

* ``speculative`` -- Leviathan Alg. 1 over real held-out prompts, vectorised over chains:
  acceptance, tokens per target call with 95% CIs, the per-context beta = sum min(p, q) and
  Eq. 1 at the mean beta beside the observed tokens (Jensen's gap on real data).
* ``lossless`` -- the exact law of the next two characters, p(c1|h) p(c2|h c1) by enumeration,
  against Monte Carlo counts of speculative sampling (G-test, sampling floor, verdict) for the
  correct rule and a broken one.
* ``costs`` -- wall time of a target call verifying k = 1..17 positions and of a draft step,
  hence the measured c and T(k)/T(1), and the measured speedup over plain target sampling
  beside [L] Thm 3.8 with the measured c. Timings are not deterministic: they live in their
  own table and nothing asserts on them.

A round uses the shared pieces: drafts are drawn one position at a time (each draft
distribution depends on the drafted prefix) with the inverse-CDF sampler of
:mod:`specsim.sampling`, the target is called once on all γ+1 contexts, and :func:`verify` hands
acceptance, first rejection and the residual (or bonus) token to the verification core
:func:`specsim.verify.verify_uniforms`, the same code :func:`specsim.engine.iid_round` runs --
the tests check they agree draw for draw.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim import exact, stats
from specsim.engine import RoundResult
from specsim.ngram import (
    Corpus,
    FloatArray,
    IntArray,
    NGramModel,
    V,
    append,
    build_corpus,
    context_id,
    context_ids,
    decode,
    load_corpus,
    save_corpus,
)
from specsim.sampling import sample_rows
from specsim.verify import verify_uniforms

RULES = ("correct", "greedy", "no_resample")  # ``continue`` changes the context bookkeeping
CHUNK = 1 << 14  # chains advanced together in the lossless check


# ---------------------------------------------------------------------------------------------
# Settings (the ``realtext:`` section of config.yaml)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """Every knob of the real-text experiments; defaults are the schema's."""

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

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        """From the nested config section (``corpus``/``model``/``speculative``/...)."""
        flat: dict[str, Any] = {}
        for section, prefix in (("corpus", ""), ("model", ""), ("speculative", ""),
                                ("lossless", "lossless_"), ("costs", "cost_")):
            for key, value in (d.get(section) or {}).items():
                flat[prefix + key] = tuple(value) if isinstance(value, list) else value
        unknown = set(flat) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown realtext settings: {sorted(unknown)}")
        out = cls(**flat)
        out.check()
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            "corpus": {"holdout_every": d["holdout_every"]},
            "model": {k: _listify(d[k]) for k in ("target_order", "draft_orders", "beta_bins")},
            "speculative": {k: _listify(d[k]) for k in ("gamma", "chains", "rounds", "batches")},
            "lossless": {k[9:]: _listify(v) for k, v in d.items() if k.startswith("lossless_")},
            "costs": {k[5:]: _listify(v) for k, v in d.items() if k.startswith("cost_")},
        }

    def check(self) -> None:
        if any(not 1 <= k < self.target_order for k in self.draft_orders):
            raise ValueError(f"draft orders {self.draft_orders} must lie in 1..target_order-1")
        if not 1 <= self.lossless_draft_order < self.target_order:
            raise ValueError("lossless.draft_order must lie in 1..target_order-1")
        bad = [c for c in self.lossless_contexts if len(c) < self.target_order - 1]
        if bad:
            raise ValueError(f"lossless contexts {bad} are shorter than target_order-1 characters")
        if any(r not in RULES for r in self.lossless_rules):
            raise ValueError(f"lossless rules must be among {RULES}")
        if not set(self.cost_gamma) <= set(self.gamma):
            raise ValueError("costs.gamma must be a subset of speculative.gamma")
        if self.chains < self.batches:
            raise ValueError("speculative.chains must be at least speculative.batches")


def _listify(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def seed_for(root: int, *identity: Any) -> np.random.SeedSequence:
    """Seed from the root seed and an experiment's identity (never from order of execution)."""
    h = hashlib.sha256(json.dumps([root, *identity]).encode()).digest()
    return np.random.SeedSequence(root, spawn_key=tuple(int.from_bytes(h[i : i + 4], "little")
                                                        for i in range(0, 16, 4)))


# ---------------------------------------------------------------------------------------------
# One speculative round with n-gram models
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NGramPair:
    """Target = ``model`` at ``target_order``, draft = the same model at ``draft_order``."""

    model: NGramModel
    target_order: int
    draft_order: int

    @property
    def length(self) -> int:
        """Characters of context the state keeps (the target's)."""
        return self.target_order - 1

    def target(self, ctx: IntArray) -> FloatArray:
        return self.model.probs(ctx, self.target_order)

    def draft(self, ctx: IntArray) -> FloatArray:
        return self.model.probs(ctx, self.draft_order)


@dataclass(frozen=True)
class Round:
    """A round's result plus what the experiments read from it."""

    result: RoundResult
    contexts: IntArray  # (γ+1, n): context before each position
    p: FloatArray  # (γ+1, n, V): target rows at every position
    q: FloatArray  # (γ, n, V): draft rows at every drafted position
    next_ctx: IntArray  # (n,)

    def beta(self) -> FloatArray:
        """(γ, n): sum min(p, q) at each drafted position (instrumentation, not the algorithm)."""
        return np.minimum(self.p[:-1], self.q).sum(axis=-1)


def verify(p: FloatArray, q: FloatArray, x: IntArray, rule: str, u: FloatArray) -> RoundResult:
    """Accept/reject γ drafts ``x`` (γ, n) given target rows p (γ+1, n, V) and draft rows
    q (γ, n, V), position-major: :func:`specsim.verify.verify_uniforms` on the chain-major
    views, with the engine's uniforms u[γ:2γ] for acceptance and u[2γ] for the final token."""
    gamma = x.shape[0]
    res = verify_uniforms(np.moveaxis(p, 0, 1), np.moveaxis(q, 0, 1), x.T, rule,
                          u[gamma : 2 * gamma].T, u[2 * gamma])
    return RoundResult(x, res.accepted, res.final)


def spec_round(pair: NGramPair, ctx: IntArray, gamma: int, rule: str, u: FloatArray) -> Round:
    """[L] Alg. 1 for n chains at contexts ``ctx``: γ draft steps, ONE target call on γ+1 contexts.

    ``u`` holds 2γ+1 uniforms per chain, as in the engine: u[i] draws draft i.
    """
    if rule not in RULES:
        raise ValueError(f"rule {rule!r} not supported for n-gram models; use one of {RULES}")
    n = ctx.shape[0]
    ctxs = np.empty((gamma + 1, n), dtype=np.int64)
    ctxs[0] = ctx
    x = np.empty((gamma, n), dtype=np.intp)
    q = np.empty((gamma, n, V))
    for i in range(gamma):  # draft: autoregressive, one cheap call per position
        q[i] = pair.draft(ctxs[i])
        x[i] = sample_rows(q[i], u[i])
        ctxs[i + 1] = append(ctxs[i], x[i], pair.length)
    p = pair.target(ctxs)  # (γ+1, n, V): the single target call verifying γ+1 positions
    res = verify(p, q, x, rule, u)
    stop = ctxs[res.n_accepted, np.arange(n)]
    return Round(res, ctxs, p, q, append(stop, res.final, pair.length))


def plain_step(pair: NGramPair, ctx: IntArray, u: FloatArray) -> IntArray:
    """Plain autoregressive sampling from the target: one call, one character."""
    return append(ctx, sample_rows(pair.target(ctx), u), pair.length)


def prompts(corpus: Corpus, n: int, length: int, seed: np.random.SeedSequence) -> IntArray:
    """Context ids of ``n`` distinct held-out positions (the prompts' last ``length`` chars)."""
    ids = context_ids(corpus.heldout, length)
    rng = np.random.default_rng(seed)
    return ids[np.sort(rng.choice(ids.size, size=n, replace=n > ids.size))]


# ---------------------------------------------------------------------------------------------
# Experiment 0: the models (perplexity, beta over held-out contexts)
# ---------------------------------------------------------------------------------------------
def heldout_beta(model: NGramModel, corpus: Corpus, target_order: int,
                 draft_orders: tuple[int, ...], chunk: int = 1 << 15) -> dict[int, FloatArray]:
    """beta(h) = sum min(p, q) at every held-out context, per draft order."""
    ctx = context_ids(corpus.heldout, model.order - 1)
    out: dict[int, list[FloatArray]] = {k: [] for k in draft_orders}
    for lo in range(0, ctx.size, chunk):
        p = model.probs(ctx[lo : lo + chunk], target_order)
        for k in draft_orders:
            out[k].append(np.minimum(p, model.probs(ctx[lo : lo + chunk], k)).sum(axis=-1))
    return {k: np.concatenate(v) for k, v in out.items()}


def models_tables(model: NGramModel, corpus: Corpus, s: Settings
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per order: contexts, held-out perplexity, beta summary; beta histogram rows)."""
    beta = heldout_beta(model, corpus, s.target_order, s.draft_orders)
    edges = np.linspace(0.0, 1.0, s.beta_bins + 1)
    rows, hist = [], []
    for k in range(1, s.target_order + 1):
        ll = model.log_likelihood(corpus.heldout, k)
        b = beta.get(k, np.ones(1))
        rows.append({
            "order": k, "role": "target" if k == s.target_order else "draft",
            "contexts": model.n_contexts(k), "heldout_chars": int(ll.size),
            "perplexity": float(np.exp(-ll.mean())), "bits_per_char": float(-ll.mean() / np.log(2)),
            "beta_mean": float(b.mean()), "beta_p10": float(np.quantile(b, 0.1)),
            "beta_median": float(np.median(b)), "beta_p90": float(np.quantile(b, 0.9)),
            "corpus_sha256": corpus.sha256,
        })
        if k in beta:
            counts = np.histogram(b, bins=edges)[0]
            for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True):
                hist.append({"draft_order": k, "bin_low": lo, "bin_high": hi, "count": int(c),
                             "density": c / (b.size * (hi - lo))})
    return pd.DataFrame(rows), pd.DataFrame(hist)


# ---------------------------------------------------------------------------------------------
# Experiment 1: speculative sampling over real prompts
# ---------------------------------------------------------------------------------------------
def speculative_point(pair: NGramPair, start: IntArray, gamma: int, rounds: int, batches: int,
                      seed: np.random.SeedSequence, rule: str = "correct") -> dict[str, Any]:
    """Run ``rounds`` rounds on every chain; per-batch sums give the confidence intervals."""
    n = start.size
    batch = (np.arange(n) * batches) // n
    rng = np.random.default_rng(seed)
    tokens = np.zeros(batches)
    accepted = tested = 0
    beta_sum = 0.0
    ctx = start.copy()
    for _ in range(rounds):
        rnd = spec_round(pair, ctx, gamma, rule, rng.random((2 * gamma + 1, n)))
        n_acc = rnd.result.n_accepted
        tokens += np.bincount(batch, weights=n_acc + 1, minlength=batches)
        was_tested = np.arange(gamma)[:, None] <= n_acc[None, :]  # positions 0..min(n_acc, γ-1)
        accepted += int(n_acc.sum())
        tested += int(was_tested.sum())
        beta_sum += float(rnd.beta()[was_tested].sum())
        ctx = rnd.next_ctx
    per_batch_rounds = np.bincount(batch, minlength=batches) * rounds
    est, lo, hi, _ = stats.batch_mean_interval(tokens, per_batch_rounds)
    acc_lo, acc_hi = stats.wilson_interval(accepted, tested)
    beta_mean = beta_sum / tested
    closed = float(exact.expected_tokens(beta_mean, gamma))
    return {
        "draft_order": pair.draft_order, "gamma": gamma, "rule": rule, "chains": n,
        "rounds": rounds, "accept_rate": accepted / tested, "accept_ci_low": acc_lo,
        "accept_ci_high": acc_hi, "beta_mean": beta_mean, "tokens_per_call": est,
        "tokens_ci_low": lo, "tokens_ci_high": hi, "tokens_closed_form": closed,
        "jensen_gap": closed - est,
        "alpha_from_tokens": float(stats.alpha_from_tokens(est, gamma)),
    }


def speculative_table(model: NGramModel, corpus: Corpus, s: Settings, seed: int,
                      models: pd.DataFrame) -> pd.DataFrame:
    """One row per (draft order, γ); ``models`` (the models table) gives beta over held-out text."""
    start = prompts(corpus, s.chains, s.target_order - 1, seed_for(seed, "prompts"))
    alpha_heldout = models.set_index("order")["beta_mean"]
    rows = []
    for k in s.draft_orders:
        pair = NGramPair(model, s.target_order, k)
        for g in s.gamma:
            row = speculative_point(pair, start, g, s.rounds, s.batches,
                                    seed_for(seed, "speculative", k, g))
            row["alpha_heldout"] = float(alpha_heldout[k])
            row["tokens_closed_form_heldout"] = float(
                exact.expected_tokens(row["alpha_heldout"], g))
            rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Experiment 2: lossless on real distributions
# ---------------------------------------------------------------------------------------------
def exact_two_chars(model: NGramModel, ctx: int, order: int) -> FloatArray:
    """Exact law (V, V) of the next two characters: p(c1 | h) p(c2 | h c1), by enumeration."""
    length = order - 1
    p1 = model.probs(np.array([ctx]), order)[0]
    p2 = model.probs(append(np.full(V, ctx), np.arange(V), length), order)
    return p1[:, None] * p2


def mc_two_chars(pair: NGramPair, ctx: int, gamma: int, rule: str, trials: int,
                 seed: np.random.SeedSequence) -> IntArray:
    """Counts (V, V) of the first two emitted characters over ``trials`` fresh generations."""
    counts = np.zeros(V * V, dtype=np.int64)
    chunks = -(-trials // CHUNK)
    for lo, child in zip(range(0, trials, CHUNK), seed.spawn(chunks), strict=True):
        rng = np.random.default_rng(child)
        n = min(CHUNK, trials - lo)
        rnd = spec_round(pair, np.full(n, ctx, dtype=np.int64), gamma, rule,
                         rng.random((2 * gamma + 1, n)))
        first, second = rnd.result.emitted(0), rnd.result.emitted(1)
        short = rnd.result.tokens(rule) < 2
        if short.any():  # one character only: a second round from where it stopped
            again = spec_round(pair, rnd.next_ctx[short], gamma, rule,
                               rng.random((2 * gamma + 1, int(short.sum()))))
            second[short] = again.result.emitted(0)
        counts += np.bincount(first * V + second, minlength=V * V)
    return counts.reshape(V, V)


def lossless_table(model: NGramModel, s: Settings, seed: int, significance: float
                   ) -> pd.DataFrame:
    pair = NGramPair(model, s.target_order, s.lossless_draft_order)
    rows = []
    for text in s.lossless_contexts:
        ctx = context_id(text, s.target_order - 1)
        law = exact_two_chars(model, ctx, s.target_order).ravel()
        for rule in s.lossless_rules:
            counts = mc_two_chars(pair, ctx, s.lossless_gamma, rule, s.lossless_trials,
                                  seed_for(seed, "lossless", text, rule)).ravel()
            g = stats.gof_test(counts, law)
            rows.append({
                "context": text, "draft_order": s.lossless_draft_order,
                "gamma": s.lossless_gamma, "rule": rule, "trials": int(counts.sum()),
                "entropy_bits": float(-(law[law > 0] * np.log2(law[law > 0])).sum()),
                "tv_mc": exact.tv(counts / counts.sum(), law),
                "tv_floor": stats.tv_floor(law, int(counts.sum())),
                "g_statistic": g.statistic, "df": g.df, "p_value": g.p_value,
                "verdict": stats.verdict(g.p_value, significance),
            })
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Experiment 3: measured costs and wall-clock speedup (not deterministic)
# ---------------------------------------------------------------------------------------------
def best_time(fn: Callable[[], object], repeats: int, min_seconds: float = 2e-3) -> float:
    """Seconds per call: best over ``repeats`` of the mean of ``number`` back-to-back calls.

    One untimed warm-up call also sizes ``number`` so that a repeat lasts at least
    ``min_seconds`` (timer resolution and scheduler jitter matter less); time.perf_counter.
    """
    t0 = time.perf_counter()
    fn()
    number = max(1, int(np.ceil(min_seconds / max(time.perf_counter() - t0, 1e-9))))
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return float(best)


def costs_table(model: NGramModel, corpus: Corpus, s: Settings, seed: int,
                speculative: pd.DataFrame) -> pd.DataFrame:
    """Long table, per batch size: target-call times T(k), draft steps (c) and speedups per γ.

    Only wall times are measured here; tokens per round and α come from the speculative
    experiment (``speculative``, the realtext_speculative table), whose estimates are far more
    precise than a few timed rounds could give.
    """
    spec = speculative.set_index(["draft_order", "gamma"])
    missing = {(k, g) for k in s.draft_orders for g in s.cost_gamma} - set(spec.index)
    if missing:
        raise ValueError(f"the speculative table has no rows for (draft_order, gamma) "
                         f"{sorted(missing)}; costs.gamma must be a subset of speculative.gamma")
    return pd.concat([_costs_at_batch(model, corpus, s, seed, b, spec) for b in s.cost_batch],
                     ignore_index=True)


def _costs_at_batch(model: NGramModel, corpus: Corpus, s: Settings, seed: int, b: int,
                    spec: pd.DataFrame) -> pd.DataFrame:
    length = s.target_order - 1
    ids = context_ids(corpus.heldout, length)
    rng = np.random.default_rng(seed_for(seed, "costs", b))
    starts = np.sort(rng.choice(ids.size - s.cost_max_positions, size=b, replace=False))
    u = rng.random(b)
    rows: list[dict[str, Any]] = []
    base = {"batch": b, "repeats": s.cost_repeats}
    t_k = {}
    for k in range(1, s.cost_max_positions + 1):  # k consecutive real contexts per prompt
        block = ids[starts[:, None] + np.arange(k)]
        t_k[k] = best_time(lambda block=block: model.probs(block, s.target_order), s.cost_repeats)
    for k, t in t_k.items():
        rows.append(base | {"measure": "target_call", "positions": k, "seconds": t,
                            "ratio": t / t_k[1]})
    ctx = ids[starts]
    target = NGramPair(model, s.target_order, s.target_order - 1)
    t_plain = best_time(lambda: plain_step(target, ctx, u), s.cost_repeats)
    rows.append(base | {"measure": "plain_step", "positions": 1, "seconds": t_plain,
                        "ratio": t_plain / t_k[1]})
    for order in s.draft_orders:
        pair = NGramPair(model, s.target_order, order)
        t_d = best_time(lambda pair=pair: append(ctx, sample_rows(pair.draft(ctx), u), length),
                        s.cost_repeats)
        c = t_d / t_k[1]
        rows.append(base | {"measure": "draft_step", "draft_order": order, "positions": 1,
                            "seconds": t_d, "ratio": c, "c": c})
        for g in s.cost_gamma:
            u_rounds = np.random.default_rng(seed_for(seed, "costs", b, order, g)).random(
                (s.cost_rounds, 2 * g + 1, b))
            t_round = best_time(lambda pair=pair, g=g, u_rounds=u_rounds: _rounds(
                pair, ctx, g, u_rounds), s.cost_repeats) / s.cost_rounds
            alpha = float(spec.loc[(order, g), "accept_rate"])
            tokens = float(spec.loc[(order, g), "tokens_per_call"])
            t_verify = t_k[g + 1] / t_k[1] if g + 1 in t_k else np.nan
            rows.append(base | {
                "measure": "speculative", "draft_order": order, "gamma": g,
                "positions": g + 1, "seconds": t_round, "ratio": t_round / t_k[1], "c": c,
                "alpha": alpha, "tokens_per_round": tokens,
                "overhead": t_round / t_k[1] - g * c - t_verify,
                "speedup_measured": t_plain * tokens / t_round,
                "speedup_thm38": float(exact.walltime_improvement(alpha, g, c)),
                "speedup_cost_model": tokens / (g * c + t_verify),
            })
    return pd.DataFrame(rows)


def _rounds(pair: NGramPair, ctx: IntArray, gamma: int, u: FloatArray) -> None:
    """``len(u)`` speculative rounds from ``ctx`` (what the costs experiment times)."""
    for ur in u:
        ctx = spec_round(pair, ctx, gamma, "correct", ur).next_ctx


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------
def _orders_legend(ax: Any, **kw: Any) -> None:
    ax.legend(title="draft order", title_fontsize=6.5, **kw)


def _plain(v: float, _pos: Any = None) -> str:
    return f"{v:g}"


def _plain_minor(v: float, _pos: Any = None) -> str:
    """Label the 2s and 5s of a log axis' minor ticks only."""
    return f"{v:g}" if f"{v:g}".lstrip("0.")[:1] in ("2", "5") else ""


def _log2_gamma_axis(ax: Any, gammas: Any) -> None:
    """log2 x axis with the γ values as plain tick labels (no mathtext: faster PDFs)."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(gammas))))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("draft length γ")


def figure_beta(tables_dir: Path) -> Any:
    import matplotlib.pyplot as plt

    hist = pd.read_csv(tables_dir / "realtext_beta.csv")
    models = pd.read_csv(tables_dir / "realtext_models.csv").set_index("order")
    fig, ax = plt.subplots()
    for i, (k, g) in enumerate(hist.groupby("draft_order")):
        colour = f"C{i}"
        ax.stairs(g["density"], np.append(g["bin_low"], g["bin_high"].iloc[-1]), color=colour,
                  label=f"{k} (mean {models.loc[k, 'beta_mean']:.2f})")
        ax.axvline(models.loc[k, "beta_mean"], color=colour, ls=":", lw=0.9)
    ax.set_xlabel("per-context acceptance β(h) = Σ min(p, q)")
    ax.set_ylabel("density over held-out contexts")
    ax.set_xlim(0, 1)
    _orders_legend(ax, loc="upper left")
    return fig


def figure_tokens(tables_dir: Path) -> Any:
    import matplotlib.pyplot as plt

    from specsim.figures import WIDE

    df = pd.read_csv(tables_dir / "realtext_speculative.csv")
    fig, (ax, gap) = plt.subplots(1, 2, figsize=(WIDE, 2.6))
    for i, (k, g) in enumerate(df.groupby("draft_order")):
        mid = g["tokens_per_call"]
        err = [mid - g["tokens_ci_low"], g["tokens_ci_high"] - mid]
        ax.errorbar(g["gamma"], g["tokens_per_call"], yerr=err, fmt="o", color=f"C{i}",
                    label=f"{k}")
        ax.plot(g["gamma"], g["tokens_closed_form"], color=f"C{i}", lw=0.9)
        gap.errorbar(g["gamma"], g["jensen_gap"], yerr=err[::-1], fmt="o-", color=f"C{i}",
                     label=f"{k}")
    _log2_gamma_axis(ax, df["gamma"])
    ax.set_ylabel("characters per target call")
    ax.set_title("observed (95% CI) and Eq. 1 at mean β (lines)")
    _orders_legend(ax, loc="upper left")
    gap.axhline(0, color="0.4", lw=0.6)
    _log2_gamma_axis(gap, df["gamma"])
    gap.set_ylabel("Eq. 1 at mean β − observed")
    gap.set_title("Jensen's gap on real text")
    _orders_legend(gap, loc="upper left")
    return fig


def figure_costs(tables_dir: Path, costs: Path | None = None) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    from specsim.figures import WIDE

    df = pd.read_csv(costs if costs is not None else tables_dir / "realtext_costs.csv")
    batches = sorted(df["batch"].unique())
    fig, axes = plt.subplots(1, 1 + len(batches), figsize=(WIDE, 3.0))
    ax = axes[0]
    kmax = int(df["positions"].max())
    ax.plot([1, kmax], [1, kmax], color="0.6", ls="--", lw=0.8, label="proportional to k")
    for j, (b, g) in enumerate(df[df["measure"] == "target_call"].groupby("batch")):
        ax.plot(g["positions"], g["ratio"], "os"[j % 2] + "-", color="k" if j else "0.45",
                label=f"batch {b}")
    ax.set_xlabel("positions verified in one target call, k")
    ax.set_ylabel("T(k) / T(1)")
    ax.set_title("cost of verifying k positions\n(target call, order 5)")
    ax.legend(loc="upper left")
    spec = df[df["measure"] == "speculative"].astype({"draft_order": int})
    steps = df[df["measure"] == "draft_step"].astype({"draft_order": int})
    for sp, b in zip(axes[1:], batches, strict=True):
        sub = spec[spec["batch"] == b]
        for i, (_, g) in enumerate(sub.groupby("draft_order")):
            colour = f"C{i}"
            sp.plot(g["gamma"], g["speedup_measured"], "o-", color=colour)
            sp.plot(g["gamma"], g["speedup_thm38"], "--", color=colour, lw=0.8)
            sp.plot(g["gamma"], g["speedup_cost_model"], ":", color=colour, lw=1.0)
        sp.axhline(1, color="0.3", lw=0.6)
        _log2_gamma_axis(sp, sub["gamma"])
        sp.set_yscale("log")
        sp.yaxis.set_major_formatter(FuncFormatter(_plain))
        sp.yaxis.set_minor_formatter(FuncFormatter(_plain_minor))
        sp.set_ylabel("speedup over the target alone")
        cs = ", ".join(f"{c:.2f}" for c in steps[steps["batch"] == b].sort_values(
            "draft_order")["c"])
        sp.set_title(f"batch of {b} prompt{'s' if b > 1 else ''}\nc = {cs}")
    orders = sorted(spec["draft_order"].unique())
    handles = [Line2D([], [], color=f"C{i}", marker="o", lw=1.2) for i in range(len(orders))]
    handles += [Line2D([], [], color="0.3", ls=ls, lw=lw) for ls, lw in (("--", 0.8), (":", 1.0))]
    labels = [f"draft order {k}, measured" for k in orders]
    labels += ["Thm 3.8 with measured c (assumes T(γ+1) = T(1))", "with measured c and T(γ+1)"]
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    return fig


FIGURES: dict[str, Callable[[Path], Any]] = {
    "realtext_beta": figure_beta,
    "realtext_tokens": figure_tokens,
    "realtext_costs": figure_costs,
}


def make_figures(tables_dir: str | Path, out_dir: str | Path,
                 costs: str | Path | None = None) -> None:
    """All realtext figures; the measured-costs table may live outside ``tables_dir``."""
    import matplotlib.pyplot as plt

    from specsim.figures import STYLE, _save

    for name, fn in FIGURES.items():
        with plt.rc_context(STYLE):
            if fn is figure_costs:
                fig = figure_costs(Path(tables_dir), Path(costs) if costs else None)
            else:
                fig = fn(Path(tables_dir))
            _save(fig, str(Path(out_dir) / f"{name}.pdf"))
            plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
@dataclass
class _Timer:
    stages: dict[str, float] = field(default_factory=dict)

    def __call__(self, name: str, t0: float) -> None:
        self.stages[name] = round(time.perf_counter() - t0, 3)


def main(argv: list[str] | None = None) -> int:
    from specsim.io import write_json, write_table

    parser = argparse.ArgumentParser(prog="python -m specsim.realtext", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default="{}",
                        help="JSON of config.yaml's realtext section (defaults: the schema's)")
    parser.add_argument("--seed", type=int, default=20221117)
    parser.add_argument("--significance", type=float, default=1e-3)
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus", help="extract the corpus from this interpreter's stdlib")
    c.add_argument("--out", required=True, help="corpus .npz")
    c.add_argument("--meta", required=True, help="corpus .json (sha256, sizes, sources)")
    m = sub.add_parser("model", help="train the model; perplexity and beta tables")
    m.add_argument("--corpus", required=True)
    m.add_argument("--out", required=True, help="model .npz (counts of every order)")
    m.add_argument("--table", required=True)
    m.add_argument("--beta-table", required=True)
    for name in ("speculative", "lossless", "costs"):
        e = sub.add_parser(name, help=f"the {name} experiment")
        e.add_argument("--corpus", required=True)
        e.add_argument("--model", required=True)
        e.add_argument("--out", required=True, help="table .csv (a .md twin is written too)")
        if name == "speculative":
            e.add_argument("--models-table", required=True, help="realtext_models.csv")
        if name == "costs":
            e.add_argument("--speculative-table", required=True,
                           help="realtext_speculative.csv (tokens per round and α)")
    f = sub.add_parser("figures", help="realtext figures (PDF + PNG) from the tables")
    f.add_argument("--tables-dir", required=True)
    f.add_argument("--out-dir", required=True)
    f.add_argument("--costs", default=None, help="the measured-costs table (default: in tables)")
    args = parser.parse_args(argv)
    s = Settings.from_dict(json.loads(args.settings))
    timer = _Timer()
    t0 = time.perf_counter()

    if args.cmd == "corpus":
        corpus = build_corpus(s.holdout_every)
        save_corpus(corpus, args.out)
        timer("corpus", t0)
        write_json(args.meta, {"sha256": corpus.sha256, "n_chars": corpus.n_chars,
                               "python": sys.version.split()[0], **corpus.meta,
                               "sample": decode(corpus.train[:200])})
    elif args.cmd == "figures":
        make_figures(args.tables_dir, args.out_dir, args.costs)
    else:
        corpus = load_corpus(args.corpus)
        if args.cmd == "model":
            model = NGramModel.fit(corpus.train, s.target_order)
            timer("fit", t0)
            model.save(args.out)
            table, hist = models_tables(model, corpus, s)
            write_table(table, args.table)
            write_table(hist, args.beta_table)
        else:
            model = NGramModel.load(args.model)
            if args.cmd == "speculative":
                models = pd.read_csv(args.models_table)
                write_table(speculative_table(model, corpus, s, args.seed, models), args.out)
            elif args.cmd == "lossless":
                write_table(lossless_table(model, s, args.seed, args.significance), args.out)
            else:
                speculative = pd.read_csv(args.speculative_table)
                write_table(costs_table(model, corpus, s, args.seed, speculative), args.out)
    timer(args.cmd, t0)
    print(json.dumps(timer.stages), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
