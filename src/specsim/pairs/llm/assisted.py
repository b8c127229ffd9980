"""transformers' own assisted generation (``model.generate(..., assistant_model=draft)``) beside
specsim's loop (:func:`.generation.speculative_generate`), on the same target / draft pair.

transformers does not report its rounds, so they are counted: a forward hook on the target
records the positions of every target call (one call per round: the prompt plus the first
round's candidates, then the last emitted token plus the round's candidates), a streamer
records the tokens each round emits (``streamer.put(valid_tokens)``), and hooks on the
assistant count its forward calls and time them. Candidates per round, accepted drafts and
tokens per target call follow.

Two draft-length policies of the installed transformers (``num_assistant_tokens``,
``num_assistant_tokens_schedule``, ``assistant_confidence_threshold`` of the assistant's
generation config): its defaults (:func:`default_policy`: 20 tokens, ``"constant"``, and a
confidence threshold of 0.4 that stops drafting when the draft's own probability of its token
falls below it; scikit-learn, which would adapt the threshold, is not installed), and a fixed γ
(``"constant"``, γ tokens, threshold 0). Sampling: ``do_sample=True`` at temperature 1 with
``top_k=0`` (transformers' default top-k of 50 would change the target's law), as specsim's loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from specsim import exact, stats, timing
from specsim.pairs.llm.drafts import ModelDraft
from specsim.pairs.llm.generation import Generation, plain_generate, speculative_generate
from specsim.pairs.llm.lab import Lab
from specsim.pairs.llm.loading import quiet, token_tensor
from specsim.seeds import seed_for

#: The assistant generation-config keys that make the draft-length policy.
POLICY_KEYS = ("num_assistant_tokens", "num_assistant_tokens_schedule",
               "assistant_confidence_threshold")
#: What ``generate`` is asked for beside the assistant: Alg. 1's sampling at temperature 1.
SAMPLING = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}


def default_policy() -> dict[str, Any]:
    """The installed transformers' defaults of the draft-length policy (what an assistant whose
    generation config leaves them unset gets)."""
    from transformers import GenerationConfig

    d = GenerationConfig._get_default_generation_params()
    return {k: d[k] for k in POLICY_KEYS}


def set_policy(assistant: Any, gamma: int | None) -> dict[str, Any]:
    """``gamma`` None: transformers' defaults (the keys unset); else a fixed γ (constant
    schedule, confidence threshold off). Returns the policy in force."""
    gc = assistant.generation_config
    if gamma is None:
        for k in POLICY_KEYS:
            setattr(gc, k, None)
        return default_policy()
    policy = dict(zip(POLICY_KEYS, (int(gamma), "constant", 0.0), strict=True))
    for k, v in policy.items():
        setattr(gc, k, v)
    return policy


def policy_name(policy: dict[str, Any]) -> str:
    n, sched, thr = (policy[k] for k in POLICY_KEYS)
    return f"{sched}, {n} tokens" + (f", confidence >= {thr:g}" if thr else "")


def torch_seed(seed: np.random.SeedSequence) -> int:
    return int(seed.generate_state(1, np.uint64)[0] & np.uint64(2**63 - 1))


@dataclass
class Run:
    """One generation, in rounds (one target call each): drafted candidates and emitted tokens."""

    tokens: list[int]
    seconds: float
    candidates: list[int]  # drafted tokens per round
    emitted: list[int]  # tokens emitted per round (accepted drafts + 1)
    draft_calls: int = 0
    draft_seconds: float = 0.0
    target_seconds: float = 0.0
    positions: list[int] = field(default_factory=list)  # positions per target call

    @property
    def accepted(self) -> int:
        return sum(e - 1 for e in self.emitted)

    @property
    def tested(self) -> int:  # drafts tested: up to and including the first rejection
        return sum(min(e, c) for e, c in zip(self.emitted, self.candidates, strict=True))


def from_generation(gen: Generation, gamma: int) -> Run:
    """specsim's loop (or plain sampling, ``gamma`` 0, whose target time is not recorded) as
    a :class:`Run`."""
    return Run(gen.tokens, gen.seconds, [gamma] * len(gen.per_round), list(gen.per_round),
               draft_calls=gen.draft_steps, draft_seconds=gen.draft_seconds,
               target_seconds=gen.target_seconds if gamma else float("nan"))


class ForwardCounter:
    """Forward hooks on a module: calls, positions per call (``input_ids`` length), seconds."""

    def __init__(self) -> None:
        self.positions: list[int] = []
        self.seconds = 0.0
        self._t0 = 0.0

    def pre(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids")
        if ids is None:
            ids = args[0] if args else kwargs.get("inputs_embeds")
        self.positions.append(int(ids.shape[1]))
        self._t0 = timing.clock()

    def post(self, module: Any, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        self.seconds += timing.clock() - self._t0

    @property
    def calls(self) -> int:
        return len(self.positions)


@contextmanager
def counting(module: Any) -> Iterator[ForwardCounter]:
    counter = ForwardCounter()
    handles = [module.register_forward_pre_hook(counter.pre, with_kwargs=True),
               module.register_forward_hook(counter.post, with_kwargs=True)]
    try:
        yield counter
    finally:
        for h in handles:
            h.remove()


class RoundStreamer:
    """A transformers streamer that records how many tokens each ``put`` brings (the first
    ``put`` is the prompt; then one per round of assisted generation, one per token of plain
    generation)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def put(self, value: Any) -> None:
        self.sizes.append(int(value.shape[-1]))

    def end(self) -> None:
        pass


def hf_generate(model: Any, assistant: Any | None, prompt: Sequence[int], n_new: int,
                seed: int, exact_length: bool = True,
                sampling: Mapping[str, Any] | None = None) -> Run:
    """``model.generate`` (with ``assistant_model=assistant`` unless None) from ``prompt``:
    ``n_new`` new tokens (``exact_length``: EOS suppressed, as specsim's loop ignores it), torch
    seeded with ``seed``; its rounds counted. The assistant's policy is left as it is set.
    ``sampling``: the sampling arguments of ``generate`` (default :data:`SAMPLING`)."""
    import torch

    ids = token_tensor([list(prompt)], model)
    streamer = RoundStreamer()
    kw: dict[str, Any] = {**(SAMPLING if sampling is None else sampling),
                          "max_new_tokens": n_new, "streamer": streamer,
                          "attention_mask": torch.ones_like(ids)}
    if exact_length:
        kw["min_new_tokens"] = n_new
    if assistant is not None:
        kw["assistant_model"] = assistant
    torch.manual_seed(seed)
    with quiet(), torch.inference_mode(), counting(model) as tc:
        if assistant is None:
            t0 = timing.clock()
            out = model.generate(ids, **kw)
            seconds = timing.clock() - t0
            dc = ForwardCounter()
        else:
            with counting(assistant) as dc:
                t0 = timing.clock()
                out = model.generate(ids, **kw)
                seconds = timing.clock() - t0
    tokens = out[0, len(prompt):].tolist()
    emitted = streamer.sizes[1:]
    # target call i verifies the round's candidates after the prompt (call 0) or after the
    # last emitted token (later calls)
    cands = [tc.positions[0] - len(prompt), *(k - 1 for k in tc.positions[1:])]
    if assistant is None:
        cands = [0] * len(cands)
    if len(emitted) != len(cands) or sum(emitted) != len(tokens):
        raise RuntimeError(f"rounds not counted: {len(emitted)} puts, {len(cands)} target "
                           f"calls, {sum(emitted)} vs {len(tokens)} tokens")
    return Run(tokens, seconds, cands, emitted, draft_calls=dc.calls,
               draft_seconds=dc.seconds, target_seconds=tc.seconds, positions=tc.positions)


def predicted(alpha: float, candidates: Sequence[int], c: float,
              verify_ratio: Any = None) -> tuple[float, float]:
    """(tokens per round, speedup) by [L] Eq. 1 / Thm 3.8 at α, over rounds drafting
    ``candidates`` tokens each: Σ E_i / rounds and Σ E_i / Σ (γ_i c + T(γ_i+1)/T(1)), where
    T(k)/T(1) is 1 (Thm 3.8's assumption) unless ``verify_ratio`` (k -> T(k)/T(1)) is given.
    With every γ_i = γ these are Eq. 1 and Thm 3.8 themselves."""
    g = np.asarray(candidates, dtype=np.float64)
    e = np.asarray(exact.expected_tokens(min(alpha, 1 - 1e-12), g), dtype=np.float64)
    t = np.ones_like(g) if verify_ratio is None else np.asarray(verify_ratio(g + 1))
    return float(e.mean()), float(e.sum() / (g * c + t).sum())


LOOPS = ("specsim", "transformers-fixed", "transformers-default")


def assisted_table(lab: Lab, costs: pd.DataFrame) -> pd.DataFrame:
    """specsim's loop and transformers' assisted generation (its default policy and fixed γ)
    per draft, beside plain target sampling by each, from the same prompts.

    Every configuration runs on every prompt, the configurations of one prompt back to back
    (rotated from prompt to prompt), so that a change in the machine's load hits all of them;
    each kind of call is warmed up once first. The speedup of a loop is over plain sampling
    by the same library (specsim's :func:`.generation.plain_generate`, transformers'
    ``generate`` without an assistant); the prediction uses the measured α, the draft cost c
    of the costs table and the rounds' draft lengths (:func:`predicted`).
    """
    s = lab.s
    prompts = lab.prompts()
    tk = costs[costs["model"] == "target"].set_index("positions")["seconds"].sort_index()
    steps = costs[costs["measure"] == "draft_step"].set_index("model")["seconds"]

    def verify_ratio(k: Any) -> Any:  # T(k)/T(1), the largest measured k beyond the table
        return np.interp(k, tk.index.to_numpy(float), (tk / tk.iloc[0]).to_numpy())

    # in the table's order: the target alone, then per draft specsim's loop, transformers'
    # with fixed γ, transformers' default policy (gamma -1 here)
    configs: list[tuple[str, str, int]] = [("specsim", "target alone", 0),
                                           ("transformers", "target alone", 0)]
    for name in s.assisted_drafts:
        configs += [(loop, name, g) for loop in LOOPS[:2] for g in s.gamma]
        configs.append(("transformers-default", name, -1))

    def one(cfg: tuple[str, str, int], prompt: list[int], i: int, n_new: int) -> Run:
        loop, name, g = cfg
        seed = seed_for(s.seed, "llm-assisted", loop, name, g, i)
        if loop == "specsim":
            rng = np.random.default_rng(seed)
            if g == 0:
                return from_generation(plain_generate(lab.target, prompt, n_new, rng), 0)
            return from_generation(speculative_generate(lab.target, lab.draft(name), prompt, g,
                                                        n_new, rng), g)
        if loop == "transformers":
            return hf_generate(lab.model, None, prompt, n_new, torch_seed(seed))
        draft = lab.draft(name)
        assert isinstance(draft, ModelDraft)
        set_policy(draft.lm.model, None if g < 0 else g)
        return hf_generate(lab.model, draft.lm.model, prompt, n_new, torch_seed(seed))

    def call(cfg: tuple[str, str, int]) -> Callable[[int], Run]:
        def run(r: int) -> Run:  # the warm-up: a few tokens from the first prompt
            if r == timing.WARMUP:
                return one(cfg, prompts[0], -1, min(4, s.new_tokens))
            return one(cfg, prompts[r], r, s.new_tokens)
        return run

    # one prompt a repeat, the configurations interleaved (rotated); not re-taken (too costly)
    tm = timing.measure({cfg: call(cfg) for cfg in configs}, len(prompts), min_seconds=0,
                        retries=0)
    runs: dict[tuple[str, str, int], list[Run]] = tm.results

    def per_token(cfg: tuple[str, str, int]) -> np.ndarray:
        return np.asarray(tm[cfg].samples) / [len(r.tokens) for r in runs[cfg]]

    def steady(cfg: tuple[str, str, int]) -> bool:  # seconds per target call agree
        return timing.Timing.of(np.asarray(tm[cfg].samples)
                                / [len(r.candidates) for r in runs[cfg]]).reliable

    plain = {"specsim": ("specsim", "target alone", 0),
             "transformers": ("transformers", "target alone", 0)}
    base = {lib: float(np.median(per_token(cfg))) for lib, cfg in plain.items()}
    rows = []
    for cfg, rs in runs.items():
        loop, name, g = cfg
        lib = "specsim" if loop == "specsim" else "transformers"
        policy = (dict(zip(POLICY_KEYS, (0, "none", 0.0), strict=True)) if g == 0 else
                  dict(zip(POLICY_KEYS, (g, "constant", 0.0), strict=True)) if g > 0 else
                  default_policy())
        tokens = sum(len(r.tokens) for r in rs)
        cands = [c for r in rs for c in r.candidates]
        emitted = [e for r in rs for e in r.emitted]
        acc, tested = sum(r.accepted for r in rs), sum(r.tested for r in rs)
        row: dict[str, Any] = {
            "loop": loop if g else lib, "draft": name,
            "gamma": policy["num_assistant_tokens"], "policy": policy_name(policy) if g
            else "target alone", "prompts": len(rs), "tokens": tokens,
            "target_calls": len(cands), "draft_calls": sum(r.draft_calls for r in rs),
            "gamma_mean": float(np.mean(cands)), "gamma_max": int(max(cands)),
            "tokens_per_call": tokens / len(cands),
            "tokens_per_call_sd": float(np.std(emitted, ddof=1)) if len(emitted) > 1
            else np.nan,
            **timing.columns(seconds=tm[cfg],
                             tokens_per_second=timing.Timing.of(1.0 / per_token(cfg)),
                             speedup_measured=timing.paired_ratio(per_token(plain[lib]),
                                                                  per_token(cfg))),
            "reliable": steady(cfg) and steady(plain[lib]),
            "target_share": sum(r.target_seconds for r in rs) / sum(r.seconds for r in rs),
        }
        if g:
            alpha = acc / tested
            lo, hi = stats.wilson_interval(acc, tested)
            c = float(steps[name] / tk.iloc[0])
            eq1, thm38 = predicted(alpha, cands, c)
            _, cost_model = predicted(alpha, cands, c, verify_ratio)
            row |= {"accept_rate": alpha, "accept_ci_low": lo, "accept_ci_high": hi,
                    "c": c, "c_in_situ": sum(r.draft_seconds for r in rs)
                    / sum(r.draft_calls for r in rs) / base[lib],
                    "tokens_eq1": eq1, "speedup_thm38": thm38,
                    "speedup_cost_model": cost_model}
        rows.append(row)
    df = pd.DataFrame(rows)
    df["threads"] = s.threads
    for key, value in tm.load.columns().items():
        df[key] = value
    return df
