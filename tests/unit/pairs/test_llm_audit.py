"""The lossless audit of transformers' assisted generation with sampling warpers
(:mod:`specsim.pairs.llm.audit`).

The laws, the bins and the power computation are numpy and tested always; the comparison with
transformers' own warpers and a small audit need the ``llm`` extra (skipped without it).
"""

from __future__ import annotations

import importlib.util

import mc
import numpy as np
import pytest

from specsim import outputs, stats
from specsim.pairs.llm import audit
from specsim.pairs.llm.loading import GGUF_PACKAGE
from specsim.pairs.llm.settings import STEPS, Settings

HAVE_LLM = all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "gguf", "accelerate", GGUF_PACKAGE))
needs_llm = pytest.mark.skipif(not HAVE_LLM, reason="the llm extra is not installed (make llm)")


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


# --- always: no torch needed ------------------------------------------------------------------
def test_warp_by_its_definitions() -> None:
    """Temperature divides the logits; top-k keeps the k largest (ties with the k-th kept);
    top-p keeps the most likely tokens up to and including the first whose cumulative mass
    exceeds p; applied twice, a temperature T acts as T²."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=40)
    p = _softmax(logits)
    assert np.allclose(audit.warp(logits, temperature=0.7), _softmax(logits / 0.7))
    assert np.allclose(audit.warp(logits, temperature=0.7, times=2), _softmax(logits / 0.49))
    k = audit.warp(logits, top_k=5)
    keep = np.argsort(-logits)[:5]
    assert set(np.flatnonzero(k)) == set(keep) and np.allclose(k[keep], p[keep] / p[keep].sum())
    tied = np.array([3.0, 2.0, 2.0, 1.0])
    assert np.count_nonzero(audit.warp(tied, top_k=2)) == 3  # the tie with the 2nd is kept
    for top_p in (0.3, 0.9, 0.999):
        w = audit.warp(logits, top_p=top_p)
        order = np.argsort(-p)
        need = int(np.searchsorted(np.cumsum(p[order]), top_p, side="left")) + 1
        assert set(np.flatnonzero(w)) == set(order[:need]), top_p
    twice = audit.warp(logits, top_p=0.9, times=2)  # top-p cuts the renormalised law again
    assert np.count_nonzero(twice) < np.count_nonzero(audit.warp(logits, top_p=0.9))
    assert np.allclose(audit.warp(logits, top_k=5, times=2), k)  # top-k alone: idempotent


def test_implemented_first_against_the_procedure() -> None:
    """The first-token law of one drafted position, x ~ q_s, kept w.p. min(1, p/q_d), else
    from (p - q_d)+ normalised, against a simulation of exactly that; p itself when the draft
    divides by what it sampled from, not p when it does not (#47932)."""
    rng = np.random.default_rng(1)
    p = audit.warp(rng.normal(size=12), top_k=6)
    q_d = audit.warp(rng.normal(size=12), top_k=6)
    q_s = audit.warp(np.log(q_d + 1e-300), temperature=0.5)  # the draft sharpened
    assert np.allclose(audit.implemented_first(p, q_s), p)
    law = audit.implemented_first(p, q_s, q_d)
    assert 0.5 * np.abs(law - p).sum() > 0.02 and np.isclose(law.sum(), 1.0)
    n = 200_000
    x = rng.choice(12, size=n, p=q_s)
    ok = rng.random(n) < np.minimum(1.0, p[x] / q_d[x])
    resid = np.maximum(p - q_d, 0.0)
    y = np.where(ok, x, rng.choice(12, size=n, p=resid / resid.sum()))
    counts = np.bincount(y, minlength=12)
    assert stats.gof_test(counts, law).p_value > mc.p_floor()
    assert stats.gof_test(counts, p).p_value < 1e-6


def test_bins_count_and_law_agree() -> None:
    """Pairs drawn from the exact law land in bins whose law is the exact binned law: the
    named pairs, a bin per listed first token for its other pairs, the rest."""
    rng = np.random.default_rng(2)
    v, n = 7, 4000
    p1 = _softmax(rng.normal(size=v) * 1.5)
    rows = np.array([_softmax(rng.normal(size=v) * 1.5) for _ in range(v)])
    top = np.argsort(-p1)[:4]
    bins = audit.pair_bins(p1, rows[top], top, n, 6)
    law = bins.law(p1, rows[top], top)
    assert bins.pairs.size <= 6 and law.size == bins.size and np.isclose(law.sum(), 1.0)
    assert (law[:-1] * n >= audit.MIN_EXPECTED).all()
    x1 = rng.choice(v, size=n, p=p1)
    x2 = np.array([rng.choice(v, p=rows[a]) for a in x1])
    counts = bins.counts(list(zip(x1.tolist(), x2.tolist(), strict=True)))
    assert counts.sum() == n and stats.gof_test(counts, law).p_value > mc.p_floor()
    assert bins.counts([(int(top[0]), -1)])[-1] == 1  # stopped after x1: the rest


def test_tv_detectable_has_the_stated_power() -> None:
    """At the detectable TV, the worst alternative (a balanced tilt) is rejected by the G-test
    in ~90% of simulated runs; every other alternative at that TV has at least that power
    (noncentral χ² with 2 n KL >= 4 n TV², Pinsker), and half that TV is mostly missed."""
    rng = np.random.default_rng(3)
    law = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.07])
    n, level = 300, 1e-3
    d = audit.tv_detectable(n, law.size - 1, level)
    assert 0.1 < d < 0.25
    worst = audit.worst_alternative(law, d)
    assert np.isclose(0.5 * np.abs(worst - law).sum(), d)
    power, lo, hi = audit.simulated_power(law, worst, n, level, 1500, rng)
    assert lo <= 0.93 and hi >= 0.87, (power, lo, hi)
    assert stats.gof_power(worst, law, n, level) == pytest.approx(0.9, abs=0.02)
    for _ in range(20):  # random alternatives scaled to TV d: the bound holds
        u = rng.dirichlet(np.ones(law.size))
        alt = law + (u - law) * d / (0.5 * np.abs(u - law).sum())
        if (alt > 0).all():
            assert stats.gof_power(alt, law, n, level) >= 0.9 - 1e-9
    weak, _, _ = audit.simulated_power(law, audit.worst_alternative(law, d / 2), n, level, 500,
                                       rng)
    assert weak < 0.5
    assert audit.tv_detectable(4 * n, law.size - 1, level) == pytest.approx(d / 2, rel=1e-6)


def test_audit_settings() -> None:
    assert {"audit_prompt", "audit_draft", "audit_trials"} <= set(STEPS["audit"])
    with pytest.raises(ValueError, match="model draft"):
        Settings(audit_draft="ngram-2").check()
    with pytest.raises(ValueError, match="drafts"):
        Settings(audit_draft="skip-7").check()
    Settings(audit_draft="skip-10").check()


# --- with the extra: the real model ---------------------------------------------------------
SMALL = Settings(threads=1, ngram_orders=(2,), int8=False, skip_layers=(6,), drafts=("ngram-2",),
                 assisted_drafts=("skip-6",), lossless_assisted_draft="skip-6",
                 audit_draft="skip-6", audit_trials=20, audit_power_draws=100)


@pytest.fixture(scope="module")
def lab():  # type: ignore[no-untyped-def]
    """The target and the skip-6 draft; the audit reads no corpus, so none is tokenised."""
    from specsim.pairs.llm.lab import Lab, TokenCorpus

    empty = np.zeros(0, dtype=np.int64)
    return Lab(SMALL, TokenCorpus(empty, empty, "", 0))


@needs_llm
def test_warp_is_transformers_warpers() -> None:
    """The numpy warpers give transformers' own (its logits processors, float32) on the
    model's real logits, once and applied twice as its assistant does."""
    import torch
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    from specsim.pairs.llm.loading import load_target

    model, tok = load_target(threads=1)
    ids = tok("The function returns a", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[:, -1].float()
    for t, k, p in ((1.0, 50, 1.0), (1.0, 0, 0.9), (1.0, 20, 0.95), (0.7, 50, 1.0)):
        procs = [*([TemperatureLogitsWarper(t)] if t != 1.0 else []),
                 *([TopKLogitsWarper(k)] if k else []), *([TopPLogitsWarper(p)] if p < 1 else [])]
        for times in (1, 2):
            s = logits.clone()
            for _ in range(times):
                for proc in procs:
                    s = proc(torch.tensor([ids]), s)
            want = torch.softmax(s, -1)[0].double().numpy()
            got = audit.warp(logits[0].double().numpy(), t, k, p, times=times)
            assert np.array_equal(want > 0, got > 0), (t, k, p, times)
            assert np.abs(want - got).max() < 1e-5, (t, k, p, times)


@needs_llm
def test_assistant_gets_the_warpers_twice(lab) -> None:  # type: ignore[no-untyped-def]
    """What the audit's rejection columns predict from: transformers' assistant ``generate``
    merges the target's processor list (warpers included) and appends its own warpers."""
    import transformers.generation.utils as gu

    from specsim.pairs.llm import assisted

    draft = lab.draft("skip-6").lm.model  # type: ignore[union-attr]
    seen: list[tuple[bool, list[str]]] = []
    orig = gu.GenerationMixin._get_logits_processor

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = orig(self, *args, **kwargs)
        seen.append((self is draft, [type(p).__name__ for p in out]))
        return out

    gu.GenerationMixin._get_logits_processor = spy
    try:
        assisted.hf_generate(lab.model, draft, [504, 2920], 2, 0, exact_length=False,
                             sampling={"do_sample": True, "temperature": 0.7, "top_p": 0.9})
    finally:
        gu.GenerationMixin._get_logits_processor = orig
    warpers = ["TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper"]
    target = [names for is_draft, names in seen if not is_draft]
    assistant = [names for is_draft, names in seen if is_draft]
    assert target and [n for n in target[0] if n in warpers] == warpers
    assert assistant and [n for n in assistant[0] if n in warpers] == warpers * 2


@needs_llm
def test_audit_table_on_the_real_model(lab) -> None:  # type: ignore[no-untyped-def]
    table = audit.audit_table(lab, warpers=audit.WARPERS[::4])
    assert list(table["setting"]) == ["transformers defaults", "temperature=0.7"]
    assert list(table.columns) == list(outputs.table("llm_lossless_audit").columns)
    assert table["warpers"].iloc[0] == "T=1, top_k=50, top_p=1"  # SmolLM2 sets none of them
    assert (table["trials"] == 20).all() and (table["verdict"] == "lossless").all(), table
    assert (table["tv_implemented"] < 1e-9).all()
    assert ((table["rejections_fraction"] >= 0) & (table["rejections_fraction"] <= 1)).all()
    assert (table["tv_detectable_at_power_0.9"] > table["tv_floor"]).all()
