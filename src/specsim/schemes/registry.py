"""The registry of verification schemes and of draft-length policies: one instance each.

:data:`SCHEMES` maps a scheme's name -- what :attr:`specsim.verify.RuleSpec.scheme` says -- to
its :class:`~specsim.schemes.base.VerificationScheme`; :data:`POLICIES` maps a policy's name to
its :class:`PolicySpec` (knobs, meaning, and how it plays, :class:`~specsim.schemes.base.
DraftLength`). Whether a rule is token-wise is its class's :attr:`tokenwise`, and nothing else
records it; callers never branch on a scheme's or a policy's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Final

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw
from specsim.resources import Footprint
from specsim.schemes import (
    block,
    confidence,
    heuristic,
    lenient,
    multi_draft,
    multi_draft_optimal,
    multi_draft_wor,
    optimal,
    spectr,
    tokenwise,
    traversal,
    tree,
    typical,
)
from specsim.schemes.base import (
    DraftLength,
    DraftModule,
    Knobs,
    Schedule,
    Setting,
    Tables,
    VerificationScheme,
    WindowLaw,
)
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample
from specsim.verify import RULES, KnobSpec, acceptance_probability

__all__ = ["POLICIES", "SCHEMES", "SCHEME_RULES", "PolicySpec", "TokenwiseRule",
           "WholeDraftRule"]


class _Fixed:
    """``fixed`` as a policy module: the token-wise round at γ, no stop table."""

    @staticmethod
    def law(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, gamma: int,
            knobs: Knobs | None) -> RoundLaw:
        return tokenwise.law(P, Q, accept, reject, gamma)

    @staticmethod
    def play(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, state: ArrayLike,
             gamma: int, knobs: Knobs | None, rng: np.random.Generator) -> RoundSample:
        return tokenwise.play(P, Q, accept, reject, state, gamma, rng)

    @staticmethod
    def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
                  chains: int) -> LawSize:
        return tokenwise.footprint(size, support, gamma, knobs, chains)


def _heuristic_start(context: int, gamma: int, size: int) -> int:
    return int(heuristic.start_state(context, gamma, size))


class _HeuristicSchedule:
    """``heuristic``'s draft lengths 1..cap and its step (:func:`heuristic.next_length`)."""

    @staticmethod
    def lengths(gamma: int, knobs: Knobs, /) -> tuple[int, ...]:
        return tuple(range(1, heuristic.check(knobs, 1) + 1))

    @staticmethod
    def next_length(g: ArrayLike, all_accepted: ArrayLike, knobs: Knobs, /) -> IntArray:
        return heuristic.next_length(g, all_accepted, heuristic.check(knobs, 1))


_SCHEDULE: Schedule = _HeuristicSchedule()


@dataclass(frozen=True)
class PolicySpec:
    """A draft-length policy: how many tokens each round drafts, and how it plays; ``legend``
    its short label at a start γ with its knobs (default ``<name> γ=<γ>``, :meth:`label`)."""

    name: str
    meaning: str
    plays: DraftLength
    knobs: tuple[KnobSpec, ...] = ()
    source: str = ""
    study_c: str | None = None  # a knob that takes the study's c values unless knobs list it
    legend: Callable[[int, Knobs], str] | None = None

    def label(self, gamma: int, knobs: Knobs) -> str:
        """A legend label: ``fixed γ=20``, ``confidence 0.4, γ≤20``, ``heuristic from γ=5``
        (its cap when not the default), ``optimal, γ≤8``."""
        return f"{self.name} γ={gamma}" if self.legend is None else self.legend(gamma, knobs)


_CAP = KnobSpec("cap", "largest draft length the schedule reaches", 1, 256, 64, integer=True)


def _heuristic_legend(gamma: int, knobs: Knobs) -> str:
    cap = int(knobs["cap"])
    return f"heuristic from γ={gamma}" + ("" if cap == int(_CAP.default) else f", cap {cap}")


POLICIES: Final[Mapping[str, PolicySpec]] = MappingProxyType({
    "fixed": PolicySpec("fixed", "draft gamma tokens every round", DraftLength(
        _Fixed(), local=True)),
    "confidence": PolicySpec(
        "confidence", "draft up to gamma tokens; stop after a draft token whose draft "
        "probability is below the threshold", DraftLength(confidence, local=True,
                                                          stop=confidence.stop),
        (KnobSpec("threshold", "stop when q(x) of the drafted x falls below it", 0.0, 1.0, 0.4,
                  neutral=0.0),),
        "Hugging Face transformers, assistant_confidence_threshold (ConfidenceCriteria)",
        legend=lambda gamma, knobs: f"confidence {knobs['threshold']:g}, γ≤{gamma}"),
    "heuristic": PolicySpec(
        "heuristic", "start at gamma; +2 after a round accepting every draft, -1 otherwise, "
        "never below 1 nor above cap", DraftLength(heuristic, start=_heuristic_start,
                                                    schedule=_SCHEDULE),
        (_CAP,), "Hugging Face transformers, num_assistant_tokens_schedule='heuristic'",
        legend=_heuristic_legend),
    "optimal": PolicySpec(
        "optimal", "the exact optimal stopping rule of drafting for draft cost c (at most "
        "gamma drafts): draft on while the probability that every draft so far is accepted "
        "stays above a threshold of the last draft and the drafts left",
        DraftLength(optimal, refusal=optimal.table_refusal, cost=optimal.draft_cost),
        (KnobSpec("c", "the draft cost the policy is optimal for (default: each c of the "
                  "study)", 0.0, 10.0, 0.05, low_open=True),),
        "SpecDec++ (arXiv 2405.19715): draft length as an MDP, solved exactly on tables",
        study_c="c", legend=lambda gamma, knobs: f"optimal, γ≤{gamma}"),  # one row per c
})


class TokenwiseRule(VerificationScheme):
    """A token-wise rule: its (accept, reject) tables from (P, Q, knobs), played by the
    setting's draft-length policy (:data:`POLICIES`); ``accepts`` builds the accept table
    alone on rows of any shape (default: the tables' first). A caller playing many rounds on
    one (P, Q) passes the tables it built once (``tables=``)."""

    tokenwise: ClassVar[bool] = True

    def __init__(self, name: str,
                 tables: Callable[[FloatArray, FloatArray, Knobs], Tables],
                 accepts: Callable[[FloatArray, FloatArray, Knobs], FloatArray] | None = None
                 ) -> None:
        super().__init__(name)
        self._build = tables
        self._accepts = accepts

    def tables(self, P: ArrayLike, Q: ArrayLike, knobs: Knobs) -> Tables:
        """The rule's tables on (P, Q), built on each call."""
        return self._build(np.asarray(P, dtype=np.float64), np.asarray(Q, dtype=np.float64),
                           knobs)

    def accepts(self, p: ArrayLike, q: ArrayLike, knobs: Knobs) -> FloatArray:
        if self._accepts is None:
            return self.tables(p, q, knobs)[0]
        return self._accepts(np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64),
                             knobs)

    def _of(self, P: ArrayLike, Q: ArrayLike, setting: Setting,
            tables: Tables | None) -> tuple[Tables, DraftLength, Knobs]:
        return (self.tables(P, Q, dict(setting.rule_knobs)) if tables is None else tables,
                POLICIES[setting.policy].plays, dict(setting.policy_knobs))

    def law(self, P: ArrayLike, Q: ArrayLike, gamma: int, setting: Setting, *,
            tables: Tables | None = None) -> RoundLaw:
        (accept, reject), policy, knobs = self._of(P, Q, setting, tables)
        return policy.module.law(P, Q, accept, reject, gamma, knobs)

    def play(self, P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, setting: Setting,
             rng: np.random.Generator, *, tables: Tables | None = None) -> RoundSample:
        (accept, reject), policy, knobs = self._of(P, Q, setting, tables)
        return policy.module.play(P, Q, accept, reject, state, gamma, knobs, rng)

    def footprint(self, size: int, support: int, gamma: int, setting: Setting,
                  chains: int) -> LawSize:
        """The policy's, with the rule's own tables (accept, reject and their temporaries)
        alive throughout."""
        out = POLICIES[setting.policy].plays.module.footprint(
            size, support, gamma, dict(setting.policy_knobs), chains)
        tables = Footprint(4.0 * size * size)
        return LawSize(out.states, None if out.law is None else out.law.plus(tables),
                       out.play.plus(tables), out.refused)

    def refusal(self, P: ArrayLike, Q: ArrayLike, gamma: int, setting: Setting, *,
                tables: Tables | None = None) -> str | None:
        policy = POLICIES[setting.policy].plays
        if policy.refusal is None:
            return None
        (accept, reject), _, knobs = self._of(P, Q, setting, tables)
        return policy.refusal(P, Q, accept, reject, gamma, knobs)

    def refuses(self, setting: Setting) -> bool:
        return POLICIES[setting.policy].plays.refusal is not None

    def start(self, context: int, gamma: int, size: int, setting: Setting) -> int:
        policy = POLICIES[setting.policy].plays
        return int(context) if policy.start is None else policy.start(context, gamma, size)

    def first_two_gamma(self, gamma: int, setting: Setting) -> int:
        """min(γ, 2) under a policy whose stop reads a draft's own position alone (``fixed``,
        ``confidence``): a draft's test and stop then read its own position alone, so drafts
        past the second change neither of the first two tokens, nor the first token of a
        round that follows a one-token round; γ under a policy whose states and stops depend
        on γ."""
        return min(gamma, 2) if POLICIES[setting.policy].plays.local else gamma


class WholeDraftRule(VerificationScheme):
    """A rule verifying whole drafts (or trees) at a fixed γ: its module's three functions on
    the rule's knobs; ``window`` and ``limit`` where the module gives them."""

    tokenwise: ClassVar[bool] = False

    def __init__(self, name: str, module: DraftModule, window: WindowLaw | None = None,
                 limit: Callable[[int, Knobs], str | None] | None = None,
                 numbers: int = 1) -> None:
        super().__init__(name, numbers)
        self.module = module
        self.window = window
        self._limit = limit

    def law(self, P: ArrayLike, Q: ArrayLike, gamma: int, setting: Setting, *,
            tables: Tables | None = None) -> RoundLaw:
        return self.module.law(P, Q, gamma, dict(setting.rule_knobs))

    def play(self, P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, setting: Setting,
             rng: np.random.Generator, *, tables: Tables | None = None) -> RoundSample:
        return self.module.play(P, Q, state, gamma, dict(setting.rule_knobs), rng)

    def footprint(self, size: int, support: int, gamma: int, setting: Setting,
                  chains: int) -> LawSize:
        return self.module.footprint(size, support, gamma, dict(setting.rule_knobs), chains)

    def limit(self, vocab: int, knobs: Knobs) -> str | None:
        return None if self._limit is None else self._limit(vocab, knobs)


def _correct(P: FloatArray, Q: FloatArray, knobs: Knobs) -> Tables:
    return tokenwise.correct_tables(P, Q)


def _correct_accepts(p: FloatArray, q: FloatArray, knobs: Knobs) -> FloatArray:
    """[L] Alg. 1's accept table min(1, p/q) on rows of any shape (:func:`_correct` checks
    square tables first; the numbers are the same)."""
    return acceptance_probability(p, q)


_SCHEMES: dict[str, VerificationScheme] = {
    "correct": TokenwiseRule("correct", _correct, _correct_accepts),
    "lenient": TokenwiseRule("lenient", lenient.tables),
    "typical": TokenwiseRule("typical", typical.tables),
    "block": WholeDraftRule("block", block, window=block),
    "multi_draft": WholeDraftRule("multi_draft", multi_draft, window=multi_draft.RULE),
    "spectr": WholeDraftRule("spectr", spectr, window=spectr.RULE),
    "multi_draft_optimal": WholeDraftRule("multi_draft_optimal", multi_draft_optimal,
                                          window=multi_draft_optimal.RULE,
                                          limit=multi_draft_optimal.limit,
                                          numbers=2),  # 2: the coupling pinned by tie weights
    "multi_draft_wor": WholeDraftRule("multi_draft_wor", multi_draft_wor,
                                      window=multi_draft_wor.RULE, limit=multi_draft_wor.limit),
    "tree": WholeDraftRule("tree", tree, window=tree),
    "traversal": WholeDraftRule("traversal", traversal, window=traversal),
}
SCHEMES: Final[Mapping[str, VerificationScheme]] = MappingProxyType(_SCHEMES)
#: The rules a ``schemes`` study plays: those whose :class:`~specsim.verify.RuleSpec` names a
#: scheme of :data:`SCHEMES`, in the registry's order.
SCHEME_RULES: Final[tuple[str, ...]] = tuple(
    r for name in SCHEMES for r, spec in RULES.items() if spec.scheme == name)

assert all(spec.scheme in SCHEMES for spec in RULES.values() if spec.scheme is not None)
assert all(s.name == name for name, s in SCHEMES.items())
