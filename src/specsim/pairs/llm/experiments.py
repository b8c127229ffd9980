"""The LLM experiments: α per draft on held-out text, the measured cost of verifying k positions,
and plain vs speculative generation (one table each; :mod:`.steps` returns them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from specsim import exact, stats, timing
from specsim.ngram import context_ids
from specsim.pairs import speedup
from specsim.pairs.llm.backend import TransformersBackend
from specsim.pairs.llm.drafts import CachedLM, ModelDraft, NGramDraft
from specsim.pairs.llm.generation import Generation, plain_generate, speculative_generate
from specsim.pairs.llm.lab import IntArray, Lab
from specsim.pairs.llm.loading import VOCAB, token_tensor
from specsim.seeds import seed_for


def _stepwise_probs(model: Any, win: IntArray, skip: int) -> Any:
    """Next-token distributions of ``model`` run one token at a time with its KV cache (as a
    draft runs in Alg. 1), rows ``skip..W-2`` of each window: (B, W - skip - 1, V)."""
    import torch

    out = []
    for row in win:
        lm = CachedLM(model)
        steps = [lm.next_logits(row[: i + 1].tolist(), 1)[0] for i in range(skip, row.size - 1)]
        out.append(torch.softmax(torch.stack(steps).cpu().double(), dim=-1))
    return torch.stack(out)


def alpha_table(lab: Lab) -> pd.DataFrame:
    """Per draft: mean per-position Σ min(p, q) and cross-entropy on held-out token windows.

    The target and the float drafts see each window in one batched pass (identical, up to
    rounding, to running them token by token). The int8 draft quantises activations with ONE
    dynamic scale per tensor, so a batched pass over many tokens is a different -- much
    worse -- draft than the one-token steps Alg. 1 runs; its α is measured stepwise with its
    KV cache on the first ``int8_windows`` windows, and the batched value is kept as a
    separate row (``int8 (batched pass)``) to show the difference.
    """
    import torch

    s = lab.s
    win = lab.windows(s.heldout_windows, s.heldout_window_tokens)
    ids = token_tensor(win, lab.model)
    with torch.inference_mode():
        p_logits = lab.model(ids).logits  # (B, W, V): row j predicts token j+1
    skip = 2  # positions with a full order-3 context
    p = torch.softmax(p_logits[:, skip:-1].cpu().double(), dim=-1)
    nxt = torch.tensor(win[:, skip + 1 :])
    nll_target = -torch.log(p.gather(-1, nxt[..., None])).mean().item()
    rows = [{"draft": "target", "kind": "target", "positions": int(nxt.numel()),
             "alpha_heldout": 1.0, "alpha_p10": 1.0, "alpha_median": 1.0, "alpha_p90": 1.0,
             "cross_entropy_nats": nll_target, "perplexity": float(np.exp(nll_target))}]

    def row(name: str, q: Any, b: int) -> dict[str, Any]:
        beta = torch.minimum(p[:b], q).sum(-1).flatten().numpy()
        nll = -torch.log(q.gather(-1, nxt[:b, :, None])).mean().item()
        return {"draft": name, "kind": name.split("-")[0].split(" ")[0],
                "positions": int(beta.size), "alpha_heldout": float(beta.mean()),
                "alpha_p10": float(np.quantile(beta, 0.1)),
                "alpha_median": float(np.median(beta)),
                "alpha_p90": float(np.quantile(beta, 0.9)),
                "cross_entropy_nats": nll, "perplexity": float(np.exp(nll))}

    for name in lab.draft_names():
        d = lab.draft(name)
        with torch.inference_mode():
            if isinstance(d, NGramDraft):  # ids of the skip = 2 tokens before tokens 3..W-1
                ctx = np.stack([context_ids(w, skip, VOCAB)[1:] for w in win])
                q = torch.from_numpy(d.model.probs(ctx, d.order))
            else:
                q = torch.softmax(d.lm.model(ids).logits[:, skip:-1].cpu().double(), dim=-1)
            if name == "int8":
                rows.append(row("int8 (batched pass)", q, len(win)))
                b = min(s.int8_windows, len(win))
                q = _stepwise_probs(d.lm.model, win[:b], skip)
                rows.append(row(name, q, b))
            else:
                rows.append(row(name, q, len(win)))
        del q
    return pd.DataFrame(rows)


def _context(lab: Lab) -> tuple[list[int], list[int]]:
    """A held-out context of cost_context_tokens tokens and the 17 real tokens that follow."""
    s = lab.s
    w = lab.windows(1, s.cost_context_tokens + s.cost_max_positions)[0].tolist()
    return w[: s.cost_context_tokens], w[s.cost_context_tokens :]


def verify_cost_table(lab: Lab) -> pd.DataFrame:
    """T(k): wall time of one KV-cached target call verifying k positions after a real context,
    and of one draft step of every draft (its row there and a token drawn from it): the pair
    backend's callables (:meth:`.backend.TransformersBackend.target_call`, ``draft_step``);
    c = draft step / T(1) of the target. Every call is timed in ONE interleaved measurement
    (:func:`specsim.timing.measure`: medians over ``cost_repeats`` repeats, quartiles, verdict,
    load); ratios to the target's T(1) are paired per repeat."""
    s = lab.s
    ctx, more = _context(lab)
    prompt = [ctx + more[:1]]  # its last token pending: a call on k positions feeds more[:k]
    tokens = np.array([more[1:]], dtype=np.int64)
    ks = list(range(1, s.cost_max_positions + 1))
    target = TransformersBackend(lab.model, ModelDraft("target", lab.model))
    chains = target.chains(prompt, 1)
    fns = {f"target k={k}": target.target_call(chains, tokens[:, : k - 1]) for k in ks}
    for name in lab.draft_names():
        backend = TransformersBackend(lab.model, lab.draft(name))
        fns[name] = backend.draft_step(backend.chains(prompt, 1), np.array([0.5]))
    tm = timing.measure(fns, s.cost_repeats)
    rows: list[dict[str, Any]] = []
    for k in ks:
        rows.append({"model": "target", "measure": "call", "positions": k,
                     **timing.columns(seconds=tm[f"target k={k}"],
                                      ratio=tm.ratio(f"target k={k}", "target k=1"))})
    for name in lab.draft_names():
        rows.append({"model": name, "measure": "draft_step", "positions": 1,
                     **timing.columns(seconds=tm[name], ratio=tm.ratio(name, "target k=1"))})
    df = pd.DataFrame(rows)
    df["threads"] = s.threads
    df["repeats"] = s.cost_repeats
    for key, value in tm.load.columns().items():
        df[key] = value
    return df


def speculative_table(lab: Lab, costs: pd.DataFrame, alphas: pd.DataFrame) -> pd.DataFrame:
    """Plain target sampling vs [L] Alg. 1 per (draft, γ), same prompts and token count.

    Every configuration runs on every prompt, interleaved (:func:`specsim.timing.measure`, one
    prompt a repeat, the order rotated; not re-taken: a generation is too costly). Seconds per
    token and the speedup (plain over speculative seconds per token, paired by prompt) are
    medians over the prompts with their quartiles; ``reliable``: the seconds per target call
    -- the same work on every prompt -- agree across the prompts (plain and this row's)."""
    s = lab.s
    prompts = lab.prompts()
    t_k = costs[(costs["model"] == "target")].set_index("positions")["seconds"]
    steps = costs[costs["measure"] == "draft_step"].set_index("model")["seconds"]
    a_held = alphas.set_index("draft")["alpha_heldout"]

    def config(name: str | None, g: int) -> Callable[[int], Generation]:
        key = ("plain",) if name is None else ("spec", name, g)

        def call(r: int) -> Generation:
            i, n = (0, min(4, s.new_tokens)) if r == timing.WARMUP else (r, s.new_tokens)
            rng = np.random.default_rng(seed_for(s.seed, "llm", *key, i))
            if name is None:
                return plain_generate(lab.target, prompts[i], n, rng)
            return speculative_generate(lab.target, lab.draft(name), prompts[i], g, n, rng)
        return call

    fns = {"plain": config(None, 0)}
    fns |= {f"{name} {g}": config(name, g) for name in s.drafts for g in s.gamma}
    tm = timing.measure(fns, len(prompts), min_seconds=0, retries=0)

    def per_token(key: str) -> np.ndarray:
        return np.asarray(tm[key].samples) / [len(x.tokens) for x in tm.results[key]]

    def per_call(key: str) -> timing.Timing:
        return timing.Timing.of(np.asarray(tm[key].samples)
                                / [x.target_calls for x in tm.results[key]])

    plain = tm.results["plain"]
    t_plain = timing.Timing.of(per_token("plain"))
    base = {"prompts": len(prompts), "new_tokens": s.new_tokens, **tm.load.columns()}
    rows = [base | {"draft": "none (target only)", "gamma": 0,
                    "tokens": sum(len(g.tokens) for g in plain),
                    "target_calls": sum(g.target_calls for g in plain), "tokens_per_call": 1.0,
                    **timing.columns(seconds_per_token=t_plain,
                                     speedup_measured=timing.paired_ratio(per_token("plain"),
                                                                          per_token("plain"))),
                    "reliable": per_call("plain").reliable}]
    for name in s.drafts:
        c = float(steps[name] / t_k[1])
        for g in s.gamma:
            key = f"{name} {g}"
            gens = tm.results[key]
            tokens = sum(len(x.tokens) for x in gens)
            calls = sum(x.target_calls for x in gens)
            acc, tested = sum(x.accepted for x in gens), sum(x.tested for x in gens)
            alpha = acc / tested
            lo, hi = stats.wilson_interval(acc, tested)
            per_round = np.concatenate([x.per_round for x in gens])
            t_verify = float(t_k[g + 1] / t_k[1]) if g + 1 in t_k.index else np.nan
            c_situ = (sum(x.draft_seconds for x in gens) / sum(x.draft_steps for x in gens)
                      ) / t_plain.median
            rows.append(base | {
                "draft": name, "gamma": g, "tokens": tokens, "target_calls": calls,
                "tokens_per_call": tokens / calls,
                "tokens_per_call_sd": float(per_round.std(ddof=1)) if per_round.size > 1
                else np.nan,
                "accept_rate": alpha, "accept_ci_low": lo, "accept_ci_high": hi,
                "alpha_heldout": float(a_held[name]),
                "tokens_eq1": float(exact.expected_tokens(min(alpha, 1 - 1e-12), g)),
                "c": c, "c_in_situ": c_situ, "verify_ratio": t_verify,
                **timing.columns(seconds_per_token=timing.Timing.of(per_token(key)),
                                 speedup_measured=timing.paired_ratio(per_token("plain"),
                                                                      per_token(key))),
                "reliable": per_call("plain").reliable and per_call(key).reliable,
                "speedup_thm38": float(exact.walltime_improvement(min(alpha, 1 - 1e-12), g, c)),
                "speedup_cost_model": float(speedup.cost_model(tokens / calls, g, c, t_verify)),
                "alpha_break_even_thm38": float(speedup.break_even_alpha(g, c)),
                "alpha_break_even_measured": float(speedup.break_even_alpha(g, c, t_verify)),
                "target_share": sum(x.target_seconds for x in gens) / sum(x.seconds for x in gens),
            })
    return pd.DataFrame(rows)
