"""Character n-gram models on real text (specsim.ngram) and the real-text experiments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ngram_corpus import corpus, model

from specsim import cli, engine, ngram, stats
from specsim import realtext_settings as rt_settings
from specsim.ngram import ALPHABET, NGramModel, V
from specsim.outputs import stage_figures
from specsim.pairs.realtext import experiments, rounds
from specsim.realtext_settings import RULES, Settings
from specsim.sampling import sample_rows
from specsim.seeds import seed_for


def random_contexts(rng: np.random.Generator, n: int, length: int = 4) -> np.ndarray:
    return rng.integers(0, V**length, size=n, dtype=np.int64)


# --- text and corpus -------------------------------------------------------------------------
def test_corpus_is_deterministic() -> None:
    a = ngram.build_corpus(max_files=12)
    b = ngram.build_corpus(max_files=12)
    assert a.sha256 == b.sha256
    assert len(a.sha256) == 64
    assert np.array_equal(a.train, b.train) and np.array_equal(a.heldout, b.heldout)
    assert a.meta == b.meta
    assert a.meta["sources"]["pydoc_topics_chars"] > 400_000  # the real topics text is in


def test_corpus_split_and_save(tmp_path: Path) -> None:
    c = corpus()
    assert c.heldout.size > 10_000 and c.train.size > 5 * c.heldout.size
    ngram.save_corpus(c, tmp_path / "c.npz")
    back = ngram.load_corpus(tmp_path / "c.npz")
    assert back.sha256 == c.sha256 and np.array_equal(back.train, c.train)


def test_stdlib_files_sorted_without_tests() -> None:
    root = ngram.stdlib_root()
    files = ngram.stdlib_files()
    rel = [p.relative_to(root).as_posix() for p in files]
    assert rel == sorted(rel)
    assert not any("/test/" in f"/{r}" or "/tests/" in f"/{r}" for r in rel)
    assert "pydoc_data/topics.py" not in rel


def test_normalise_encode_decode_roundtrip() -> None:
    text = "Tab\there, cr\r\nand ünïcode — gone"
    norm = ngram.normalise(text)
    assert set(norm) <= set(ALPHABET)
    assert norm == "Tab here, cr\nand ncode  gone"
    assert ngram.decode(ngram.encode(norm)) == norm
    with pytest.raises(ValueError, match="alphabet"):
        ngram.encode("é")


def test_context_ids_and_append() -> None:
    codes = ngram.encode("hello world")
    ids = ngram.context_ids(codes, 4)
    assert ids[0] == ngram.context_id("hell", 4)
    assert ids[-1] == ngram.context_id("worl", 4)
    nxt = ngram.append(ids[:-1], codes[4:-1].astype(np.int64), 4)
    assert np.array_equal(nxt, ids[1:])


# --- the model ---------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), order=st.integers(1, 5))
def test_distributions_normalised_for_random_contexts(seed: int, order: int) -> None:
    rng = np.random.default_rng(seed)
    p = model().probs(random_contexts(rng, 64), order)
    assert p.shape == (64, V)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


def test_every_character_has_mass_in_every_context() -> None:
    rng = np.random.default_rng(3)
    ctx = np.concatenate([random_contexts(rng, 200), ngram.context_ids(corpus().heldout, 4)[:500]])
    for order in range(1, 6):
        assert (model().probs(ctx, order) > 0).all()


def test_prob_matches_probs_and_saved_model(tmp_path: Path) -> None:
    m = model()
    ctx = ngram.context_ids(corpus().heldout, 4)[:3000]
    x = corpus().heldout[4:3004].astype(np.int64)
    for order in range(1, 6):
        full = m.probs(ctx, order)[np.arange(ctx.size), x]
        np.testing.assert_allclose(m.prob(ctx, x, order), full, rtol=1e-12)
    m.save(tmp_path / "m.npz")
    back = NGramModel.load(tmp_path / "m.npz")
    # identity is the claim: the saved counts give the same operations in the same order
    assert np.array_equal(back.probs(ctx, 5), m.probs(ctx, 5))


def test_witten_bell_by_hand() -> None:
    """'abab': P2(b|a) = (c(ab) + t(a) P1(b)) / (c(a) + t(a)) with P1 the smoothed unigram."""
    m = NGramModel.fit(ngram.encode("abab"), 2)
    a, b = ngram.encode("ab").astype(np.int64)
    p1_b = (2 + 2 / V) / (4 + 2)  # unigram: c(b)=2, N=4, t=2 distinct characters
    assert m.p1[b] == pytest.approx(p1_b)
    assert m.probs(np.array([a]), 2)[0, b] == pytest.approx((2 + 1 * p1_b) / (2 + 1))
    # an unseen context falls back to the lower order exactly
    assert np.array_equal(m.probs(np.array([b + 1]), 2)[0], m.p1)


def test_heldout_perplexity_falls_with_order() -> None:
    ppl = [model().perplexity(corpus().heldout, k) for k in range(1, 6)]
    assert ppl[4] < ppl[0]
    assert all(np.diff(ppl) < 0), ppl
    assert 1.0 < ppl[4] < 10.0 < ppl[0] < V


def test_overlap_increases_with_draft_order() -> None:
    ctx = ngram.context_ids(corpus().heldout, 4)[::7]
    beta = [ngram.overlap(model(), ctx, 5, k).mean() for k in range(1, 5)]
    assert all(np.diff(beta) > 0), beta
    assert 0.1 < beta[0] < 0.4 and 0.6 < beta[3] < 0.95
    assert ngram.overlap(model(), ctx, 5, 5) == pytest.approx(1.0)


def _witten_bell(tokens: list[int], vocab: int, ctx: list[int], x: int, order: int) -> float:
    """Interpolated Witten-Bell by its definition, with dictionaries (Chen & Goodman, Eq. 17)."""
    from collections import Counter

    uni = Counter(tokens)
    p = (uni[x] + len(uni) / vocab) / (len(tokens) + len(uni))
    for k in range(2, order + 1):
        h = tuple(ctx[len(ctx) - k + 1 :])
        follow = Counter(tokens[i + k - 1] for i in range(len(tokens) - k + 1)
                         if tuple(tokens[i : i + k - 1]) == h)
        c, t = sum(follow.values()), len(follow)
        if c:
            p = (follow[x] + t * p) / (c + t)
    return p


def test_model_over_a_token_vocabulary() -> None:
    """One n-gram model for characters and tokens: over V = 49,152 symbols (the LLM tier's
    tokenizer) NGramModel is the Witten-Bell recursion, computed by definition here."""
    vocab = 49_152
    rng = np.random.default_rng(8)
    alphabet = rng.integers(0, vocab, size=12)
    tokens = alphabet[rng.integers(0, 12, size=600) % rng.integers(1, 13, size=600)].tolist()
    model = NGramModel.fit(np.array(tokens), 3, vocab)
    assert model.unigram_counts.size == vocab
    assert set(model.dense) == {1}  # no precomputed table at this vocabulary
    seqs = [tokens[i : i + 2] for i in range(0, 500, 37)] + [[int(alphabet[0]), 5]]
    ids = np.array([a * vocab + b for a, b in seqs])  # most recent token least significant
    # context_ids numbers the context of position i + 2, tokens[i : i + 2], the same way
    np.testing.assert_array_equal(ids[:-1], ngram.context_ids(np.array(tokens), 2, vocab)[
        np.arange(0, 500, 37)])
    xs = [*alphabet[:5].tolist(), 7]
    for order in (1, 2, 3):
        probs = model.probs(ids, order)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
        want = [[_witten_bell(tokens, vocab, list(h), x, order) for x in xs] for h in seqs]
        np.testing.assert_allclose(probs[:, xs], want, rtol=1e-12)
        np.testing.assert_allclose(model.prob(ids, np.full(ids.size, xs[0]), order),
                                   probs[:, xs[0]], rtol=1e-12)
    with pytest.raises(ValueError, match="2\\^63"):
        NGramModel.fit(np.array(tokens), 5, vocab)


# --- speculative rounds --------------------------------------------------------------------------
@pytest.mark.parametrize("rule", RULES)
def test_verify_equals_engine_iid_round(rule: str) -> None:
    rng = np.random.default_rng(11)
    n, gamma = 300, 4
    p = rng.dirichlet(np.full(V, 0.3), (gamma + 1, n))
    q = rng.dirichlet(np.full(V, 0.3), (gamma, n))
    u = rng.random((2 * gamma + 1, n))
    x = np.stack([sample_rows(q[i], u[i]) for i in range(gamma)])
    ours = engine.verify_round(p, q, x, rule, u)
    padded = np.concatenate([q, q[-1:]]).transpose(1, 0, 2)
    ref = engine.iid_round(p.transpose(1, 0, 2), padded, gamma, rule, u)
    for field in ("x", "n_accepted", "final"):
        assert np.array_equal(getattr(ours, field), getattr(ref, field)), field


@pytest.mark.parametrize("gamma", [1, 3])
def test_spec_round_tokens_and_contexts(gamma: int) -> None:
    pair = rounds.NGramPair(model(), 5, 3)
    rng = np.random.default_rng(5)
    ctx = rounds.prompts(corpus(), 500, 4, np.random.SeedSequence(1))
    rnd = rounds.spec_round(pair, ctx, gamma, "correct", rng.random((2 * gamma + 1, 500)))
    tokens = rnd.result.tokens("correct")
    assert tokens.min() >= 1 and tokens.max() <= gamma + 1
    beta = rnd.beta()
    assert beta.shape == (gamma, 500) and (beta >= 0).all() and (beta <= 1 + 1e-12).all()
    # the next context is the start context followed by every emitted character
    for i in range(20):
        emitted = [rnd.result.emitted(j)[i] for j in range(tokens[i])]
        expect = ctx[i]
        for ch in emitted:
            expect = ngram.append(np.array([expect]), np.array([ch]), 4)[0]
        assert rnd.next_ctx[i] == expect


def test_identical_draft_accepts_everything() -> None:
    pair = rounds.NGramPair(model(), 5, 5)
    ctx = rounds.prompts(corpus(), 256, 4, np.random.SeedSequence(2))
    row = experiments.speculative_point(pair, ctx, 4, 3, 8, np.random.SeedSequence(3))
    # exact: ratios of equal integer counts (< 2^53, summed exactly in float64)
    assert row["accept_rate"] == 1.0 and row["tokens_per_call"] == 5.0
    assert row["beta_mean"] == pytest.approx(1.0)


def test_speculative_point_matches_closed_form_roughly() -> None:
    pair = rounds.NGramPair(model(), 5, 4)
    ctx = rounds.prompts(corpus(), 512, 4, np.random.SeedSequence(4))
    row = experiments.speculative_point(pair, ctx, 2, 8, 16, np.random.SeedSequence(5))
    assert row["tokens_ci_low"] <= row["tokens_per_call"] <= row["tokens_ci_high"]
    assert abs(row["accept_rate"] - row["beta_mean"]) < 0.03  # E[accept | h] = beta(h)
    assert abs(row["jensen_gap"]) < 0.1


# --- lossless -------------------------------------------------------------------------------------
def test_exact_two_chars_is_a_distribution() -> None:
    law = experiments.exact_two_chars(model(), ngram.context_id("the ", 4), 5)
    assert law.shape == (V, V) and law.sum() == pytest.approx(1.0, abs=1e-12)
    p1 = model().probs(np.array([ngram.context_id("the ", 4)]), 5)[0]
    np.testing.assert_allclose(law.sum(axis=1), p1, rtol=1e-12)


@pytest.mark.parametrize(("rule", "expected"), [("correct", "lossless"),
                                                ("no_resample", "biased"),
                                                ("greedy", "biased")])
def test_lossless_check_has_power(rule: str, expected: str) -> None:
    pair = rounds.NGramPair(model(), 5, 2)
    ctx = ngram.context_id("the ", 4)
    law = experiments.exact_two_chars(model(), ctx, 5).ravel()
    counts = experiments.mc_two_chars(pair, ctx, 2, rule, 1 << 14, np.random.SeedSequence(7))
    assert counts.sum() == 1 << 14
    g = stats.gof_test(counts.ravel(), law)
    assert stats.verdict(g.p_value) == expected, g


# --- settings and command line -------------------------------------------------------------------
def test_settings_roundtrip_and_checks() -> None:
    s = Settings()
    assert Settings.from_dict(s.to_dict()) == s
    with pytest.raises(ValueError, match="draft orders"):
        Settings.from_dict({"model": {"draft_orders": [5]}})
    with pytest.raises(ValueError, match="unknown"):
        Settings.from_dict({"speculative": {"chain": 3}})
    with pytest.raises(ValueError, match="shorter"):
        Settings.from_dict({"lossless": {"contexts": ["ab"]}})


def test_settings_module_is_light() -> None:
    """Snakemake imports specsim.realtext_settings at every parse: no pandas/scipy/matplotlib."""
    code = ("import sys, specsim.realtext_settings; heavy = {'pandas', 'scipy', 'matplotlib'} "
            "& set(sys.modules); assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_settings_list_every_step_and_outputs_name_steps_that_exist() -> None:
    from specsim.outputs import stage_figures, stage_tables

    written = {o.step.partition(":")[2] for o in [*stage_tables("realtext"),
                                                   *stage_figures("realtext")]}
    assert written <= {*rt_settings.STEPS, "figures", "pair_costs"}, written
    steps = rt_settings.step_settings(Settings().to_dict())
    assert set(steps) == set(rt_settings.STEPS)
    for step, sections in rt_settings.STEPS.items():
        assert set(json.loads(steps[step])) == set(sections)
        # what a step is passed is enough to rebuild its settings
        Settings.from_dict(json.loads(steps[step]))
    with pytest.raises(SystemExit):  # the steps are the sub-commands of `specsim realtext`
        cli.main(["realtext", "no-such-step"])


def test_seeds_depend_on_identity_only() -> None:
    a = seed_for(1, "speculative", 2, 4).generate_state(2)
    b = seed_for(1, "speculative", 2, 4).generate_state(2)
    c = seed_for(1, "speculative", 4, 2).generate_state(2)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.slow
def test_cli_end_to_end(tmp_path: Path) -> None:
    """Every sub-command on the small corpus with a tiny budget (timings are not asserted)."""
    c = corpus()
    ngram.save_corpus(c, tmp_path / "corpus.npz")
    tiny = {"speculative": {"gamma": [1, 2], "chains": 64, "rounds": 2, "batches": 4},
            "model": {"draft_orders": [1, 3]},
            "lossless": {"contexts": ["the "], "trials": 4000},
            "costs": {"batch": [4], "max_positions": 3, "repeats": 1, "rounds": 1,
                      "gamma": [1, 2]},
            "trace": {"documents": 4, "length": 8, "top_k": 4}, "pair_accept": {"replicas": 1},
            "pair_optimal": {"gamma_max": 2}}
    results = tmp_path / "results"  # the declared paths' layout: tables/, realtext/
    pre = ["realtext", "--settings", json.dumps(tiny), "--seed", "1", "--results-dir",
           str(results)]
    t, costs_csv = results / "tables", str(results / "realtext" / "costs.csv")
    corpus_npz, model_npz = str(tmp_path / "corpus.npz"), str(tmp_path / "model.npz")
    common = ["--corpus", corpus_npz, "--model", model_npz]
    traces = tmp_path / "traces"
    trace_files = [str(traces / f"ngram_o{k}.parquet") for k in (1, 3)]
    steps = [
        ["model", "--corpus", corpus_npz, "--out", model_npz],
        ["speculative", *common, "--models-table", str(t / "realtext_models.csv")],
        ["lossless", *common],
        ["costs", *common, "--speculative-table", str(t / "realtext_speculative.csv")],
        ["record", "--corpus", corpus_npz, "--model", model_npz, "--out-dir", str(traces)],
        ["pair_accept", "--model", model_npz, "--traces", *trace_files],
        ["pair_optimal", "--traces", *trace_files],
        ["pair_costs", "--traces", *trace_files, "--costs", costs_csv],
        ["figures"],
    ]
    for step in steps:
        assert cli.main([*pre, *step]) == 0, step
    spec = pd.read_csv(t / "realtext_speculative.csv")
    assert len(spec) == 4 and set(spec["draft_order"]) == {1, 3}
    loss = pd.read_csv(t / "realtext_lossless.csv")
    assert list(loss["verdict"]) == ["lossless", "biased"]
    assert len(pd.read_csv(t / "pair_accept.csv")) == 4
    pair_costs = pd.read_csv(results / "realtext" / "pair_costs.csv")
    assert len(pair_costs) == 2 * 2  # pairs x gamma (T(3) timed)
    costs = pd.read_csv(costs_csv)
    assert set(costs["measure"]) == {"target_call", "plain_step", "draft_step", "speculative"}
    # one repeat cannot say whether the timings agree: every row is marked, none printed clean
    assert not costs["reliable"].any() and (costs["cpus"] >= 1).all()
    assert {"seconds_q25", "seconds_q75", "ratio_q25", "load_before", "load_after"} <= set(costs)
    assert not pair_costs["costs_reliable"].any()
    for name in (f.name for f in stage_figures("realtext", "figures")):
        assert (results / "figures" / f"{name}.pdf").stat().st_size > 0
        assert (results / "figures" / f"{name}.png").stat().st_size > 0
