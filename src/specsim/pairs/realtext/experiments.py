"""The deterministic real-text experiments: the models, speculative sampling, lossless.

Each function returns one table (a DataFrame); :mod:`specsim.pairs.realtext.steps` returns them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specsim import exact, stats
from specsim.ngram import (
    Corpus,
    FloatArray,
    IntArray,
    NGramModel,
    V,
    append,
    context_id,
    context_ids,
)
from specsim.pairs.lossless import gtest_columns
from specsim.pairs.realtext.rounds import NGramPair, prompts, spec_round
from specsim.realtext_settings import Settings
from specsim.seeds import seed_for

CHUNK = 1 << 14  # chains advanced together in the lossless check


# ---------------------------------------------------------------------------------------------
# The models (perplexity, beta over held-out contexts)
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
# Speculative sampling over real prompts
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
# Lossless on real distributions
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


#: The lossless table's columns (the G-test's of :mod:`specsim.pairs.lossless` but the cells
#: pooled).
LOSSLESS_COLUMNS = ("context", "draft_order", "gamma", "rule", "trials", "entropy_bits", "tv_mc",
                    "tv_floor", "g_statistic", "df", "p_value", "verdict")


def lossless_table(model: NGramModel, s: Settings, seed: int, significance: float
                   ) -> pd.DataFrame:
    """Per context and rule: the exact law of the next two characters against their Monte
    Carlo counts (:func:`mc_two_chars`), G-tested (:func:`specsim.pairs.lossless.
    gtest_columns`)."""
    pair = NGramPair(model, s.target_order, s.lossless_draft_order)
    rows = []
    for text in s.lossless_contexts:
        ctx = context_id(text, s.target_order - 1)
        law = exact_two_chars(model, ctx, s.target_order).ravel()
        for rule in s.lossless_rules:
            counts = mc_two_chars(pair, ctx, s.lossless_gamma, rule, s.lossless_trials,
                                  seed_for(seed, "lossless", text, rule)).ravel()
            rows.append({
                "context": text, "draft_order": s.lossless_draft_order,
                "gamma": s.lossless_gamma, "rule": rule,
                "entropy_bits": float(-(law[law > 0] * np.log2(law[law > 0])).sum()),
                **gtest_columns(counts, law, significance),
            })
    return pd.DataFrame(rows, columns=list(LOSSLESS_COLUMNS))
