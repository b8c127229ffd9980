"""What a pair backend provides: the one interface the pair stage's measurements run on.

A backend holds a target and a draft over one vocabulary of ``vocab`` tokens and runs *chains*:
independent generations, each at a *context* (everything generated so far, the last token
included). A batch of chains is a numpy array, one entry a chain along axis 0, whose entries
only the backend reads: context ids for the n-grams (int64), chain objects holding a sequence
and its KV caches for transformers (dtype object). The measurements select chains with numpy
indexing (``contexts[active]``) and store a round's ``next_contexts`` back the same way, so a
backend's chains must survive that (an object array holds references: a chain object is
advanced in place and handed back).

One round is [L] Alg. 1 (Leviathan, Kalman & Matias 2022, arXiv 2211.17192) at a rule of
:data:`specsim.verify.RULES`: γ draft steps, ONE target call on the γ+1 positions, and the
verification kernel :func:`specsim.verify.verify_uniforms` on explicit uniforms laid out as in
the engine -- ``u`` (2γ+1, n): ``u[i]`` draws draft i, ``u[γ+i]`` tests it, ``u[2γ]`` draws
the round's final token (residual or bonus) -- so a round is a function of its uniforms and a
measurement is draw-for-draw reproducible on either backend.

Timing: a backend hands out *callables* (one target call verifying k positions, one draft
step) rather than seconds, so that a caller times every callable of an experiment in ONE
interleaved :func:`specsim.timing.measure` (paired ratios, :mod:`specsim.timing`);
:func:`time_calls` is that measurement for one backend alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from specsim import timing

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
#: A batch of chains: one entry per chain along axis 0, read only by its backend.
Contexts = NDArray[Any]


@dataclass(frozen=True)
class RoundCounts:
    """One speculative round over n chains: what the measurements count.

    ``accepted`` (n,): drafts accepted (0..γ), the round emitting them and one more token;
    ``beta`` (γ, n): Σ_v min(p, q) at each drafted position, the acceptance probability of a
    draft there under the ``correct`` rule (instrumentation: the round does not use it);
    ``next_contexts``: the chains after the round.
    """

    gamma: int
    accepted: IntArray
    beta: FloatArray
    next_contexts: Contexts

    @property
    def emitted(self) -> IntArray:
        """(n,): tokens the round emitted, accepted + 1, in 1..γ+1."""
        return self.accepted + 1

    def tested(self) -> BoolArray:
        """(γ, n): draft i was tested (i <= the first rejection, or every draft if none)."""
        return np.arange(self.gamma)[:, None] <= self.accepted[None, :]


@runtime_checkable
class PairBackend(Protocol):
    """A target and a draft that the pair stage measures (module docstring)."""

    #: The pair's name in tables (``ngram_o3``, ``smollm2-135m/skip-6``).
    name: str
    #: Size of the shared vocabulary: every row has this many entries.
    vocab: int

    def chains(self, prompts: Sequence[Any], replicas: int) -> Contexts:
        """``replicas`` fresh chains at each prompt, prompt-major: chain j starts at prompt
        j // replicas (a prompt is a context id for n-grams, a token list for transformers)."""
        ...

    def rows(self, contexts: Contexts) -> tuple[FloatArray, FloatArray]:
        """(p, q), each (n, vocab): the target's and the draft's next-token distributions at
        every chain's context (temperature 1). The chains are left as they were."""
        ...

    def round(self, contexts: Contexts, gamma: int, rule: str, u: FloatArray) -> RoundCounts:
        """One speculative round of every chain with γ = ``gamma`` drafts at ``rule``, on the
        uniforms ``u`` (2γ+1, n) laid out as the module docstring says."""
        ...

    def target_call(self, contexts: Contexts, tokens: IntArray) -> Callable[[int], object]:
        """A callable (its argument: the repeat index of :func:`specsim.timing.measure`) that
        makes ONE target call verifying k = ``tokens.shape[1]`` + 1 positions of every chain:
        the rows after its context and after each prefix of its row of ``tokens`` (n, k-1),
        as a round verifies γ = k-1 drafts. A call leaves the chains as they were."""
        ...

    def draft_step(self, contexts: Contexts, u: FloatArray) -> Callable[[int], object]:
        """A callable making ONE draft step of every chain: its draft row at the chain's
        context and a token drawn from it with the uniform ``u`` (n,). Leaves the chains."""
        ...


def time_calls(backend: PairBackend, contexts: Contexts, tokens: IntArray, u: FloatArray,
               repeats: int) -> dict[str, timing.Timing]:
    """Seconds of one target call verifying k = 1..``tokens.shape[1]`` + 1 positions
    (``"target k=<k>"``) and of one draft step (``"draft"``), measured interleaved in one
    :func:`specsim.timing.measure` (medians over ``repeats``, quartiles, verdict)."""
    positions = range(1, tokens.shape[1] + 2)
    fns: dict[str, Callable[[int], object]] = {
        f"target k={k}": backend.target_call(contexts, tokens[:, : k - 1]) for k in positions}
    fns["draft"] = backend.draft_step(contexts, u)
    tm = timing.measure(fns, repeats)
    return {name: tm[name] for name in fns}
