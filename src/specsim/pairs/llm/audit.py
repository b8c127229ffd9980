"""Lossless audit of transformers' assisted generation with sampling warpers.

For each sampling setting of :data:`WARPERS` (transformers' defaults, no warper, top-p,
top-k + top-p, temperature), many seeded ``generate(..., assistant_model=draft)`` calls of two
new tokens are tested against the law plain sampling with the same settings has,
p_w(x1 | h) p_w(x2 | h x1), where p_w is the target's next-token distribution after the same
warpers (:func:`warp`, numpy, transformers' semantics: temperature, then top-k keeping ties,
then top-p keeping the smallest top set of mass > top_p). The outcomes are binned (the most
likely pairs, the rest merged: :func:`pair_bins`) and G-tested
(:func:`specsim.pairs.lossless.gtest_columns`); each verdict sits beside the total variation
the test detects with probability 0.9 at its trial count and significance
(:func:`tv_detectable`, checked by simulation: :func:`simulated_power`).

Two new tokens from a prompt of length L: transformers drafts min(γ, L + 2 - L - 1) = 1 token in
the first round, so the first token comes from Alg. 1's first position (accept, or resample from
the residual) and the second from p_w(. | h x1) (the bonus token, or a round without drafts after
a rejection). Only the first position can be wrong, and the law transformers implements is the
first-token law :func:`implemented_first` with the draft distribution it samples from and the
one it divides by (transformers #47932 reports that with top-k they differed) times
p_w(x2 | h x1).

What transformers 5.24 does: the assistant's ``generate`` receives the target's processor list
(which already holds the warpers) *and* a copy of the target's generation config (sampling on),
so it appends the warpers a second time: the draft samples from q warped twice (temperature T
acts as T², top-p cuts twice), and its recorded scores, which ``_speculative_sampling`` divides by,
are those of the same twice-warped q. Lossless, but a sharper draft: the predicted rejection rate
at position 1 uses q warped twice, and the observed rate says which (columns ``rejection_*``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from specsim import exact, stats, timing
from specsim.pairs.llm.assisted import hf_generate, policy_name, set_policy, torch_seed
from specsim.pairs.llm.drafts import ModelDraft
from specsim.pairs.llm.lab import Lab
from specsim.pairs.llm.loading import FloatArray, token_tensor
from specsim.pairs.lossless import gtest_columns
from specsim.precision import covers
from specsim.seeds import seed_for

#: (name, keyword arguments of ``generate`` beside ``do_sample=True``). Keys not given take the
#: target's generation config (SmolLM2's sets no sampling key) or transformers' defaults
#: (temperature 1, top_k 50, top_p 1).
WARPERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("transformers defaults", {}),
    ("no warper", {"top_k": 0}),
    ("top_p=0.9", {"top_k": 0, "top_p": 0.9}),
    ("top_k=20, top_p=0.95", {"top_k": 20, "top_p": 0.95}),
    ("temperature=0.7", {"temperature": 0.7}),
)
SAMPLING_KEYS = ("temperature", "top_k", "top_p")
#: Power the detectable TV is stated at; pair bins need at least this many expected counts.
POWER = 0.9
MIN_EXPECTED = 5.0

# --- the laws (numpy) -------------------------------------------------------------------------
def warp(logits: NDArray[np.floating[Any]], temperature: float = 1.0, top_k: int = 0,
         top_p: float = 1.0, times: int = 1) -> FloatArray:
    """Rows of logits (..., V) -> probabilities after transformers' sampling warpers, applied
    ``times`` times in its order: temperature (if != 1), top-k (if k > 0: every logit below the
    k-th largest removed, ties kept), top-p (if p < 1: sorted ascending, the tokens whose
    cumulative probability is <= 1 - p removed, the most likely always kept)."""
    s = np.array(logits, dtype=np.float64)
    v = s.shape[-1]
    for _ in range(times):
        if temperature != 1.0:
            s = s / temperature
        if top_k:
            k = min(max(int(top_k), 1), v)
            kth = np.partition(s, v - k, axis=-1)[..., v - k : v - k + 1]
            s = np.where(s < kth, -np.inf, s)
        if top_p < 1.0:
            order = np.argsort(s, axis=-1, kind="stable")
            ss = np.take_along_axis(s, order, axis=-1)
            e = np.exp(ss - ss[..., -1:])
            cum = np.cumsum(e / e.sum(axis=-1, keepdims=True), axis=-1)
            drop = cum <= 1.0 - top_p
            drop[..., -1] = False
            np.put_along_axis(s, order, np.where(drop, -np.inf, ss), axis=-1)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def implemented_first(p: FloatArray, q_sampled: FloatArray,
                      q_divided: FloatArray | None = None) -> FloatArray:
    """Law of the first emitted token of one drafted position done as ``_speculative_sampling``
    does it: x ~ q_sampled, kept with probability min(1, p(x) / q_divided(x)), else a draw from
    (p - q_divided)+ normalised. With q_divided = q_sampled (the default) this is p exactly
    (Leviathan Thm 3.5); otherwise not, in general (#47932)."""
    qd = q_sampled if q_divided is None else q_divided
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = np.where(q_sampled > 0, np.minimum(1.0, p / qd), 0.0)
    kept = q_sampled * keep
    resid = np.maximum(p - qd, 0.0)
    mass = resid.sum()
    return kept + (1.0 - kept.sum()) * (resid / mass if mass > 0 else p)


class Bins(NamedTuple):
    """The bins of (x1, x2) outcomes: named pairs (flat ids x1 * V + x2), then one bin per first
    token in ``firsts`` for its other second tokens, then one bin for everything else."""

    pairs: NDArray[np.int64]
    firsts: NDArray[np.int64]
    vocab: int

    @property
    def size(self) -> int:
        return self.pairs.size + self.firsts.size + 1

    def law(self, first: FloatArray, p2: FloatArray, top: NDArray[np.int64]) -> FloatArray:
        """Binned law of x1 ~ ``first``, then x2 ~ row of ``p2`` for x1 (rows: ``top``)."""
        row = {int(t): j for j, t in enumerate(top)}
        x1, x2 = np.divmod(self.pairs, self.vocab)
        named = np.array([first[a] * p2[row[int(a)], b] for a, b in zip(x1, x2, strict=True)])
        rest = np.array([first[a] * (1.0 - p2[row[int(a)], x2[x1 == a]].sum())
                         for a in self.firsts])
        out = np.concatenate([named, rest]).astype(np.float64)
        return np.append(out, max(0.0, 1.0 - out.sum()))

    def counts(self, outcomes: list[tuple[int, int]]) -> NDArray[np.int64]:
        """Counts of observed (x1, x2) (x2 < 0: generation stopped after x1) in the bins."""
        pair = {int(b): j for j, b in enumerate(self.pairs)}
        first = {int(a): self.pairs.size + j for j, a in enumerate(self.firsts)}
        out = np.zeros(self.size, dtype=np.int64)
        for x1, x2 in outcomes:
            j = pair.get(x1 * self.vocab + x2) if x2 >= 0 else None
            if j is None:
                j = first.get(x1, self.size - 1) if x2 >= 0 else self.size - 1
            out[j] += 1
        return out


def pair_bins(p1: FloatArray, p2: FloatArray, top: NDArray[np.int64], n: int,
              max_pairs: int) -> Bins:
    """The most likely (x1, x2) pairs (x1 among ``top``, the rows of ``p2``), at most
    ``max_pairs``, each with >= MIN_EXPECTED expected counts in n trials; then for each x1 of
    ``top`` its other pairs as one bin if that has >= MIN_EXPECTED expected counts; the rest
    merged. A wrong first-token law shows in the per-x1 bins even where x2 is spread out."""
    law = p1[top, None] * p2
    v = p2.shape[1]
    flat = np.argsort(-law, axis=None, kind="stable")[:max_pairs]
    flat = flat[law.ravel()[flat] * n >= MIN_EXPECTED]
    i, x2 = np.divmod(flat, v)
    named = np.zeros(law.shape, dtype=bool)
    named[i, x2] = True
    left = (law * ~named).sum(axis=1)
    return Bins(top[i] * v + x2, top[left * n >= MIN_EXPECTED], v)


# --- power --------------------------------------------------------------------------------------
def tv_detectable(n: int, df: int, level: float, power: float = POWER) -> float:
    """Smallest TV δ (on the bins) that the G-test of n trials with ``df`` degrees of freedom
    at ``level`` detects with probability >= ``power`` whatever the alternative.

    The G statistic under an alternative t is approximately noncentral χ²(df, λ = 2 n KL(t||p));
    by Pinsker KL >= 2 TV², so every alternative at TV δ has λ >= 4 n δ² and power at least
    that of λ = 4 n δ² (power grows with λ). The bound is reached (to second order in δ) by the
    worst alternative, :func:`worst_alternative`. Returns sqrt(λ* / 4n) with λ* solving
    P(χ²(df, λ*) > crit) = power."""
    from scipy import optimize
    from scipy import stats as sps

    crit = stats.chi2_isf(level, df)

    def short(lam: float) -> float:
        return float(sps.ncx2.sf(crit, df, lam)) - power

    hi = 1.0
    while short(hi) < 0:
        hi *= 2.0
    lam = optimize.brentq(short, 1e-9, hi, xtol=1e-10, rtol=1e-12)
    return float(np.sqrt(lam / (4.0 * n)))


def worst_alternative(law: FloatArray, tv: float) -> FloatArray:
    """The alternative at TV ``tv`` hardest for the G-test (least KL, to second order): the
    cells split into two groups of mass as near 1/2 as they allow (largest first), one scaled
    up by (1 + tv / mass), the other down by (1 - tv / mass)."""
    order = np.argsort(-law, kind="stable")
    csum = np.cumsum(law[order])
    k = max(1, int(np.searchsorted(csum, 0.5, side="right")))
    if k < law.size and abs(csum[k] - 0.5) < abs(csum[k - 1] - 0.5):
        k += 1
    up = np.zeros(law.size, dtype=bool)
    up[order[:k]] = True
    a = float(law[up].sum())
    if not 0 < tv < min(a, 1 - a):
        raise ValueError(f"tv {tv} out of reach of a split of mass {a:.3f}")
    return np.where(up, law * (1 + tv / a), law * (1 - tv / (1 - a)))


def simulated_power(law: FloatArray, alt: FloatArray, n: int, level: float, draws: int,
                    rng: np.random.Generator) -> tuple[float, float, float]:
    """Fraction of ``draws`` G-tests of n multinomial(alt) trials against ``law`` that reject at
    ``level``, with its 95% Wilson interval."""
    counts = rng.multinomial(n, alt, size=draws)
    hits = sum(stats.gof_test(c, law).p_value < level for c in counts)
    lo, hi = stats.wilson_interval(hits, draws)
    return hits / draws, lo, hi


def tv_interval(counts: NDArray[np.int64], law: FloatArray, rng: np.random.Generator,
                draws: int = 2000) -> tuple[float, float, float]:
    """TV between the observed bin frequencies and the exact binned law, and a 95% parametric
    bootstrap interval (multinomial resamples of the observed frequencies)."""
    n = int(counts.sum())
    freq = counts / n
    boot = 0.5 * np.abs(rng.multinomial(n, freq, size=draws) / n - law).sum(axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return exact.tv(freq, law), float(lo), float(hi)


# --- the audit (torch) ----------------------------------------------------------------------------
def effective(model: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """temperature, top_k, top_p in force for ``generate(do_sample=True, **overrides)``: the
    override, else the model's generation config, else transformers' default."""
    from transformers import GenerationConfig

    defaults = GenerationConfig._get_default_generation_params()
    gc = model.generation_config
    return {k: overrides[k] if k in overrides else
            getattr(gc, k, None) if getattr(gc, k, None) is not None else defaults[k]
            for k in SAMPLING_KEYS}


def describe(w: Mapping[str, Any]) -> str:
    return f"T={w['temperature']:g}, top_k={w['top_k']}, top_p={w['top_p']:g}"


def audit_table(lab: Lab, significance: float = 1e-3,
                warpers: tuple[tuple[str, dict[str, Any]], ...] = WARPERS) -> pd.DataFrame:
    """One row per setting of :data:`WARPERS`: ``audit_trials`` assisted ``generate`` calls of
    two new tokens from ``audit_prompt`` with ``audit_draft`` as the assistant (transformers'
    default draft-length policy), G-tested against the exact binned law of plain sampling with
    the same warpers, beside the TV detectable at power 0.9 (and its simulated power), the law
    transformers implements, what a #47932-style mismatch would cost, and the rejection rate
    at position 1 against its two predictions (draft warped once, warped twice)."""
    import torch

    s = lab.s
    n = s.audit_trials
    h = lab.tok(s.audit_prompt, add_special_tokens=False)["input_ids"]
    draft = lab.draft(s.audit_draft)
    assert isinstance(draft, ModelDraft)
    assistant = draft.lm.model
    policy = set_policy(assistant, None)
    eos = lab.model.generation_config.eos_token_id
    with torch.inference_mode():  # as generate asks: the last position's logits only (the
        # int8 draft quantises its activations per call, so its logits depend on that)
        l1, lq = (m(token_tensor([h], m), logits_to_keep=1).logits[0, -1].cpu().double().numpy()
                  for m in (lab.model, assistant))
    rows = []
    for name, over in warpers:
        w = effective(lab.model, over)
        p1 = warp(l1, **w)
        top = np.argsort(-p1, kind="stable")[: s.audit_bins + 1]
        top = top[(p1[top] * n >= MIN_EXPECTED) & (top != eos)][: s.audit_bins]
        with torch.inference_mode():
            l2 = lab.model(token_tensor([[*h, int(t)] for t in top], lab.model),
                           logits_to_keep=1).logits[:, -1]
        p2 = warp(l2.cpu().double().numpy(), **w)
        bins = pair_bins(p1, p2, top, n, s.audit_bins)
        law = bins.law(p1, p2, top)
        q_once, q_twice = warp(lq, **w), warp(lq, **w, times=2)
        def trial(i: int, name: str = name, over: dict[str, Any] = over) -> Any:
            if i and i % 50 == 0:
                print(json.dumps({"audit": name, "trials_done": i, "of": n}), file=sys.stderr)
            return hf_generate(lab.model, assistant, h, 2,
                               torch_seed(seed_for(s.seed, "llm-audit", name, i)),
                               exact_length=False, sampling={"do_sample": True, **over})

        # each trial a repeat (the same work: two tokens), timed; never re-taken
        tm = timing.measure({"trial": trial}, n, min_seconds=0, retries=0, warmup=False)
        trials = tm.results["trial"]
        rejected = sum(run.candidates[0] >= 1 and run.emitted[0] == 1 for run in trials)
        outcomes = [(run.tokens[0], run.tokens[1] if len(run.tokens) > 1 else -1)
                    for run in trials]
        counts = bins.counts(outcomes)
        test = gtest_columns(counts, law, significance)
        rng = np.random.default_rng(seed_for(s.seed, "llm-audit-power", name))
        tv_obs, tv_lo, tv_hi = tv_interval(counts, law, rng)
        detect = tv_detectable(n, test["df"], significance) if test["df"] else float("nan")
        try:
            power, pw_lo, pw_hi = simulated_power(law, worst_alternative(law, detect), n,
                                                  significance, s.audit_power_draws, rng)
        except ValueError:  # no alternative of these bins is that far from the law
            power = pw_lo = pw_hi = float("nan")
        impl = implemented_first(p1, q_twice)  # what 5.24 does: samples and divides by q_twice
        bug = implemented_first(p1, q_twice, q_once)  # sampling q_twice, dividing by q_once
        r_lo, r_hi = stats.wilson_interval(rejected, n)
        rows.append({
            "setting": name, "warpers": describe(w), "prompt": s.audit_prompt,
            "draft": s.audit_draft, "policy": policy_name(policy), "trials": n,
            "bins": test["cells_pooled"], "mass_named_bins": float(law[:-1].sum()),
            **{k: test[k] for k in ("g_statistic", "df", "p_value", "verdict")},
            "tv_observed": tv_obs, "tv_ci_low": tv_lo, "tv_ci_high": tv_hi,
            "tv_floor": test["tv_floor"],
            "tv_detectable_at_power_0.9": detect, "power_simulated": power,
            "power_ci_low": pw_lo, "power_ci_high": pw_hi,
            "tv_implemented": exact.tv(impl, p1), "tv_mismatch": exact.tv(bug, p1),
            "tv_mismatch_binned": exact.tv(bins.law(bug, p2, top), law),
            "rejections_fraction": rejected / n, "rejections_ci_low": r_lo,
            "rejections_ci_high": r_hi,
            "rejection_q_twice": 1.0 - float(np.minimum(p1, q_twice).sum()),
            "rejection_q_once": 1.0 - float(np.minimum(p1, q_once).sum()),
            "q_twice_covered": bool(covers(r_lo, r_hi, 1.0 - np.minimum(p1, q_twice).sum())),
            "q_once_covered": bool(covers(r_lo, r_hi, 1.0 - np.minimum(p1, q_once).sum())),
            **timing.columns(seconds_per_trial=tm["trial"]), **tm.load.columns(),
            "significance": significance,
        })
    df = pd.DataFrame(rows)
    df["threads"] = s.threads
    return df
