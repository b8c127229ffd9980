"""Lossless on the real model: the exact law of the first two emitted tokens against Monte Carlo
counts of Alg. 1's accept / resample steps on the real target's and draft's distributions, and
against the tokens transformers' own assisted generation emits (many seeded ``generate`` calls
with the same target and a model draft), by the same G-test."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from specsim import timing
from specsim.pairs.llm.assisted import hf_generate, policy_name, set_policy, torch_seed
from specsim.pairs.llm.drafts import ModelDraft, NGramDraft
from specsim.pairs.llm.generation import cache_consistency, speculative_generate
from specsim.pairs.llm.lab import IntArray, Lab
from specsim.pairs.llm.loading import FloatArray, softmax, token_tensor
from specsim.pairs.lossless import gtest_columns
from specsim.sampling import StackedRowSampler
from specsim.seeds import seed_for
from specsim.verify import accept, rejection_distribution, rule_spec


def _alg1_position(p: FloatArray, q: FloatArray, which: IntArray, u: FloatArray,
                   rule: str) -> tuple[IntArray, NDArray[np.bool_]]:
    """One drafted position of [L] Alg. 1 for chains whose contexts are rows ``which`` of
    p, q (m, V): x ~ q, then the verification core's test (:func:`specsim.verify.accept`,
    u1 q(x) < p(x)) and, on rejection, a draw from the rule's rejection distribution
    (:func:`specsim.verify.rejection_distribution`: the residual for ``correct``, p for
    ``no_resample``, a broken rule kept to show the test's power). Rows are gathered by index,
    never copied per chain (V = 49152)."""
    if rule_spec(rule).accept != "ratio":
        raise ValueError(f"rule {rule!r}: one position of Alg. 1 needs a ratio-test rule")
    x = StackedRowSampler(q)(which, u[0])
    ok = accept(u[1], p[which, x], q[which, x])
    fallback = StackedRowSampler(rejection_distribution(p, q, rule))
    return np.where(ok, x, fallback(which, u[2])), ok


def assisted_counts(lab: Lab, assistant: Any, h: list[int], max_new: int, trials: int,
                    slot: IntArray, seed: tuple[Any, ...]) -> tuple[IntArray, IntArray]:
    """Counts of the first token (all V) and of the coarsened first two tokens (t1 among the
    ``slot`` < m top first tokens, then t2; one cell for any other t1) over ``trials`` calls
    of transformers' assisted generation from ``h`` (``max_new`` new tokens at most, EOS
    stopping as usual), each call with its own torch seed. The assistant's draft-length
    policy is used as it is set (:func:`.assisted.set_policy`)."""
    v = slot.size
    m = int(slot.max())
    first = np.zeros(v, dtype=np.int64)
    two = np.zeros(m * v + 1, dtype=np.int64)
    t0 = timing.clock()
    for i in range(trials):
        if i and i % 100 == 0:  # each trial is a real generation: progress to the rule's log
            print(json.dumps({"assisted_trials_done": i, "of": trials, "policy": seed[-1],
                              "seconds": round(timing.clock() - t0, 1)}), file=sys.stderr)
        run = hf_generate(lab.model, assistant, h, max_new,
                          torch_seed(seed_for(lab.s.seed, *seed, i)), exact_length=False)
        t1 = run.tokens[0]
        first[t1] += 1
        if slot[t1] == m:
            two[-1] += 1
        elif len(run.tokens) < 2:
            raise RuntimeError(f"generation stopped after a first token among the top {m}")
        else:
            two[slot[t1] * v + run.tokens[1]] += 1
    return first, two


def _row(loop: str, rule: str, what: str, prompt: str, draft: str, gamma: int,
         test: dict[str, Any], mass: float) -> dict[str, Any]:
    """One G-test row of :func:`lossless_table`: the loop and what was tested, then the test's
    columns (:func:`specsim.pairs.lossless.gtest_columns`)."""
    return {"loop": loop, "rule": rule, "test": what, "prompt": prompt, "draft": draft,
            "gamma": gamma, "trials": test.pop("trials"), "cells_pooled": test.pop("cells_pooled"),
            "mass_tested": float(mass) if "two" in what else 1.0, **test}


def lossless_table(lab: Lab, trials: int | None = None,
                   significance: float = 1e-3) -> pd.DataFrame:
    """Exact law of the first two emitted tokens vs Monte Carlo counts of Alg. 1.

    Exact: p(t1 | h) for all V first tokens, and p(t2 | h t1) for the ``lossless_top`` most
    likely t1 (one batched target call). Outcomes are coarsened to (t1, t2) for t1 among those
    and one cell 'any other t1' -- the exact law of that coarsening is known, so the G-test is
    exact-vs-MC, but tokens after a rare first token are not tested. Monte Carlo: the first
    round's first position at h (draft from the n-gram, accept or resample), then the second
    emitted token: with γ >= 2 after an acceptance the round's next drafted position at h t1,
    with γ = 1 after an acceptance the bonus token from p(. | h t1), after a rejection the first
    position of a new round at h t1 -- Alg. 1's own branches. Also tested: the first token alone
    over all V cells.

    transformers' assisted generation (``lossless_assisted_draft`` as the assistant, sampling
    at temperature 1, no top-k) is tested the same way with ``lossless_assisted_trials`` real
    ``generate`` calls of at most γ+1 new tokens (γ = ``lossless_gamma``, so the first round
    drafts γ tokens), once with transformers' default draft-length policy (its γ capped at the
    γ these calls leave room for) and once with the fixed γ. Far fewer trials than the
    simulated rows (each is a real generation): the same test, much less power.
    """
    import torch

    s = lab.s
    trials = trials or s.lossless_trials
    draft = lab.draft(s.lossless_draft)
    assert isinstance(draft, NGramDraft)
    h = lab.tok(s.lossless_prompt, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        p1 = softmax(lab.model(token_tensor([h], lab.model)).logits[0, -1])
    top = np.argsort(-p1, kind="stable")[: s.lossless_top]
    batch = token_tensor([[*h, int(t)] for t in top], lab.model)
    with torch.inference_mode():
        p2 = softmax(lab.model(batch).logits[:, -1])  # (m, V): p(. | h t) for t in top
    q1 = draft.probs(h)
    q2 = np.stack([draft.probs([*h, int(t)]) for t in top])
    m, v = p2.shape
    law = np.concatenate([(p1[top, None] * p2).ravel(), [1.0 - p1[top].sum()]])
    slot = np.full(v, m, dtype=np.int64)
    slot[top] = np.arange(m)
    rows: list[dict[str, Any]] = []
    floors: dict[int, float] = {}
    loop = "specsim (Alg. 1 steps, simulated)"
    for rule in ("correct", "no_resample"):
        rng = np.random.default_rng(seed_for(s.seed, "llm-lossless", rule))
        counts = np.zeros(m * v + 1, dtype=np.int64)
        first_counts = np.zeros(v, dtype=np.int64)
        for lo in range(0, trials, 1 << 16):
            n = min(1 << 16, trials - lo)
            u = rng.random((7, n))
            t1, acc1 = _alg1_position(p1[None], q1[None], np.zeros(n, np.int64), u[:3], rule)
            first_counts += np.bincount(t1, minlength=v)
            r = slot[t1]
            known = np.flatnonzero(r < m)
            t2, _ = _alg1_position(p2, q2, r[known], u[3:6, known], rule)
            if s.lossless_gamma == 1:  # accepted: the bonus token comes from p(. | h t1)
                bonus = StackedRowSampler(p2)(r[known], u[6, known])
                t2 = np.where(acc1[known], bonus, t2)
            counts += np.bincount(r[known] * v + t2, minlength=m * v + 1)
            counts[-1] += n - known.size
        for what, obs, exp_ in (("first token, all V", first_counts, p1),
                                (f"first two, top-{m} first tokens + other", counts, law)):
            test = gtest_columns(obs, exp_, significance, floors.get(exp_.size))
            floors[exp_.size] = test["tv_floor"]  # the same law and n for both rules
            rows.append(_row(loop, rule, what, s.lossless_prompt, s.lossless_draft,
                             s.lossless_gamma, test, p1[top].sum()))
    n_hf = s.lossless_assisted_trials
    assistant = lab.draft(s.lossless_assisted_draft)
    assert isinstance(assistant, ModelDraft)
    for gamma, which in ((None, "transformers-default"), (s.lossless_gamma, "transformers-fixed")):
        policy = set_policy(assistant.lm.model, gamma)
        first_counts, counts = assisted_counts(lab, assistant.lm.model, h, s.lossless_gamma + 1,
                                               n_hf, slot, ("llm-lossless-assisted", which))
        for what, obs, exp_ in (("first token, all V", first_counts, p1),
                                (f"first two, top-{m} first tokens + other", counts, law)):
            rows.append(_row(f"{which} ({policy_name(policy)})", "correct", what,
                             s.lossless_prompt, s.lossless_assisted_draft, s.lossless_gamma,
                             gtest_columns(obs, exp_, significance), p1[top].sum()))
    # the KV-cached generator verifies against the distributions of a cache-free pass
    gen = speculative_generate(lab.target, draft, h, 4, 24,
                               np.random.default_rng(seed_for(s.seed, "llm-cache")), record=True)
    rows.append({"loop": "specsim", "rule": "correct",
                 "test": "KV cache: max |p_cached - p_full|", "prompt":
                 s.lossless_prompt, "draft": s.lossless_draft, "gamma": 4,
                 "trials": len(gen.per_round), "g_statistic": cache_consistency(
                     lab.model, h, gen)})
    return pd.DataFrame(rows)
