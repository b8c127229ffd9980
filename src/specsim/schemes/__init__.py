"""Verification schemes and draft-length policies of the literature and of production.

A grid point of a ``schemes`` study names a rule of :data:`specsim.verify.RULES` with its knobs
and a draft-length policy of :data:`POLICIES` with its knobs; :class:`Scheme` is that pair,
validated, and plays it on an order-1 Markov pair through the modules here -- one per scheme,
each written from its paper, each giving the exact law of a round and a vectorised round under
the contract of :mod:`specsim.schemes.law`:

* token-wise rules (one accept probability per drafted token, one law on rejection):
  ``correct`` (Leviathan et al. 2022, Alg. 1), ``lenient`` (:mod:`.lenient`), ``typical``
  (:mod:`.typical`) -- their tables drive :mod:`.tokenwise`, and only they run under the
  policies ``confidence`` (:mod:`.confidence`) and ``heuristic`` (:mod:`.heuristic`);
* ``block`` (:mod:`.block`) verifies a whole draft at once; ``multi_draft`` (:mod:`.multi_draft`,
  SpecInfer), ``spectr`` (:mod:`.spectr`, K-SEQ) and ``multi_draft_optimal``
  (:mod:`.multi_draft_optimal`, the LP bound) verify k i.i.d. drafts depth by depth on the
  shared (context, survivors) chain of :mod:`.survivors`, as does ``multi_draft_wor``
  (:mod:`.multi_draft_wor`, drafts without replacement, RSD-C); ``tree`` (:mod:`.tree`)
  verifies a SpecInfer token tree root to leaf, ``traversal`` (:mod:`.traversal`) the same
  trees leaf to root; all with a fixed draft length (a tree's: its depth).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import numpy as np

from specsim.exact import RoundLaw
from specsim.resources import Footprint
from specsim.schemes import lenient, tokenwise, typical
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample
from specsim.verify import RULES, KnobSpec, rule_spec

__all__ = ["POLICIES", "TOKENWISE", "PolicySpec", "Scheme", "schemes_of_study"]


@dataclass(frozen=True)
class PolicySpec:
    """A draft-length policy: how many tokens each round drafts."""

    name: str
    meaning: str
    knobs: tuple[KnobSpec, ...] = ()
    source: str = ""
    study_c: str | None = None  # a knob that takes the study's c values unless knobs list it


POLICIES: Final[Mapping[str, PolicySpec]] = MappingProxyType({
    "fixed": PolicySpec("fixed", "draft gamma tokens every round"),
    "confidence": PolicySpec(
        "confidence", "draft up to gamma tokens; stop after a draft token whose draft "
        "probability is below the threshold",
        (KnobSpec("threshold", "stop when q(x) of the drafted x falls below it", 0.0, 1.0, 0.4,
                  neutral=0.0),),
        "Hugging Face transformers, assistant_confidence_threshold (ConfidenceCriteria)"),
    "heuristic": PolicySpec(
        "heuristic", "start at gamma; +2 after a round accepting every draft, -1 otherwise, "
        "never below 1 nor above cap",
        (KnobSpec("cap", "largest draft length the schedule reaches", 1, 256, 64,
                  integer=True),),
        "Hugging Face transformers, num_assistant_tokens_schedule='heuristic'"),
    "optimal": PolicySpec(
        "optimal", "the exact optimal stopping rule of drafting for draft cost c (at most "
        "gamma drafts): draft on while the probability that every draft so far is accepted "
        "stays above a threshold of the last draft and the drafts left",
        (KnobSpec("c", "the draft cost the policy is optimal for (default: each c of the "
                  "study)", 0.0, 10.0, 0.05, low_open=True),),
        "SpecDec++ (arXiv 2405.19715): draft length as an MDP, solved exactly on tables",
        study_c="c"),
})


# The token-wise rules of this package: (accept[c, x], reject[c, :]) tables from (P, Q, knobs).
TOKENWISE: Final[Mapping[str, Callable[..., tuple[FloatArray, FloatArray]]]] = MappingProxyType({
    "correct": lambda P, Q, knobs: tokenwise.correct_tables(P, Q),
    "lenient": lenient.tables, "typical": typical.tables})
# rules that verify whole drafts (or trees), fixed γ only
WHOLE_DRAFT: Final = ("block", "multi_draft", "spectr", "multi_draft_optimal",
                      "multi_draft_wor", "tree", "traversal")
RULE_NAMES: Final = (*TOKENWISE, *WHOLE_DRAFT)


def _checked(specs: tuple[KnobSpec, ...], given: Mapping[str, Any], owner: str,
             where: str) -> tuple[tuple[str, float], ...]:
    names = {k.name for k in specs}
    for key in given:
        if key not in names:
            has = f"its knobs are {sorted(names)}" if names else "it has none"
            raise ValueError(f"{where}.{key}: not a knob of {owner} ({has})")
    return tuple((k.name, k.check(given.get(k.name, k.default), f"{where}.{k.name}"))
                 for k in specs)


@dataclass(frozen=True)
class Scheme:
    """A rule with its knobs under a draft-length policy with its knobs (all validated)."""

    rule: str
    rule_knobs: tuple[tuple[str, Any], ...] = ()
    policy: str = "fixed"
    policy_knobs: tuple[tuple[str, float], ...] = ()

    @classmethod
    def build(cls, rule: str, rule_knobs: Mapping[str, Any] | None = None,
              policy: str = "fixed", policy_knobs: Mapping[str, Any] | None = None,
              where: str = "scheme") -> Scheme:
        """Validate names and knobs (ValueError naming ``where`` and the key) and build."""
        if rule not in RULE_NAMES:
            raise ValueError(f"{where}.rule: {rule!r} is not a scheme rule; choose one of "
                             f"{list(RULE_NAMES)}")
        if policy not in POLICIES:
            raise ValueError(f"{where}.policy: {policy!r} is not a policy; choose one of "
                             f"{list(POLICIES)}")
        if policy != "fixed" and rule not in TOKENWISE:
            raise ValueError(f"{where}.policy: {policy!r} needs a token-wise rule "
                             f"({list(TOKENWISE)}); {rule!r} verifies whole drafts of fixed "
                             f"length")
        rk = _checked(rule_spec(rule).knobs, rule_knobs or {}, f"rule {rule}", f"{where}.knobs")
        pk = _checked(POLICIES[policy].knobs, policy_knobs or {}, f"policy {policy}",
                      f"{where}.knobs")
        return cls(rule, rk, policy, pk)

    def to_dict(self) -> dict[str, Any]:
        """``rule``, ``rule_knobs``, ``policy``, ``policy_knobs`` (what point identities and job
        descriptions hold); :meth:`from_dict` reads it back."""
        return {"rule": self.rule, "rule_knobs": dict(self.rule_knobs), "policy": self.policy,
                "policy_knobs": dict(self.policy_knobs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Scheme:
        """The scheme :meth:`to_dict` wrote, validated, knobs in the registry's order (a JSON
        round trip with sorted keys may have reordered them)."""
        return cls.build(d["rule"], d["rule_knobs"], d["policy"], d["policy_knobs"])

    @property
    def knobs(self) -> dict[str, Any]:
        return dict(self.rule_knobs) | dict(self.policy_knobs)

    @property
    def depth(self) -> int | None:
        """The draft length the rule's knobs fix (a tree shape's depth), None if any γ runs:
        a study pairs such a scheme with the γ equal to it only."""
        for k in rule_spec(self.rule).knobs:
            if k.shape:
                return len(str(dict(self.rule_knobs)[k.name]).split("x"))
        return None

    def check_vocab(self, vocab: int, where: str) -> None:
        """Refuse a vocabulary beyond the rule's exact limit: a scheme module may define
        ``limit(vocab, knobs) -> str | None`` (why it cannot run; :mod:`.multi_draft_optimal`)."""
        if self.rule not in WHOLE_DRAFT:
            return
        why = getattr(self._module(), "limit", lambda v, k: None)(vocab, dict(self.rule_knobs))
        if why is not None:
            raise ValueError(f"{where}: {why}")

    def check_gamma(self, gamma: int, where: str, size: int | None = None) -> None:
        """The heuristic schedule starts at γ and must fit under its cap; with ``size`` (S
        of dense tables) the module's footprint must not refuse γ (``optimal``'s bound)."""
        cap = dict(self.policy_knobs).get("cap")
        if cap is not None and gamma > cap:
            raise ValueError(f"{where}: gamma={gamma} exceeds the heuristic policy's cap="
                             f"{int(cap)}; raise knobs.cap or lower gamma")
        if size is not None and self.policy != "fixed":
            try:
                self.footprint(size, size, gamma, 1)
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None

    @staticmethod
    def _segment(name: str, knobs: tuple[tuple[str, Any], ...],
                 specs: tuple[KnobSpec, ...]) -> str:
        by = {k.name: k for k in specs}
        return "".join([name] + [f"+{k}={by[k].text(v)}" for k, v in knobs])

    @property
    def rule_segment(self) -> str:
        """The rule and its knobs as a path segment value, e.g. ``multi_draft+drafts=3``."""
        return self._segment(self.rule, self.rule_knobs, rule_spec(self.rule).knobs)

    @property
    def policy_segment(self) -> str:
        """The policy and its knobs, e.g. ``confidence+threshold=0.4``."""
        return self._segment(self.policy, self.policy_knobs, POLICIES[self.policy].knobs)

    @property
    def lossless(self) -> bool:
        return rule_spec(self.rule).lossless

    # ------------------------------------------------------------------ playing
    def _tables(self, P: FloatArray, Q: FloatArray) -> tuple[FloatArray, FloatArray]:
        return TOKENWISE[self.rule](P, Q, dict(self.rule_knobs))

    def _module(self) -> Any:
        name = self.rule if self.rule in WHOLE_DRAFT else (
            "tokenwise" if self.policy == "fixed" else self.policy)
        return importlib.import_module(f"specsim.schemes.{name}")

    def law(self, P: FloatArray, Q: FloatArray, gamma: int) -> RoundLaw:
        """Exact law of one round from every scheme state."""
        mod = self._module()
        if self.rule in WHOLE_DRAFT:
            return mod.law(P, Q, gamma, dict(self.rule_knobs))
        accept, reject = self._tables(P, Q)
        if self.policy == "fixed":
            return mod.law(P, Q, accept, reject, gamma)
        return mod.law(P, Q, accept, reject, gamma, dict(self.policy_knobs))

    def play(self, P: FloatArray, Q: FloatArray, state: IntArray, gamma: int,
             rng: np.random.Generator, tables: tuple[FloatArray, FloatArray] | None = None
             ) -> RoundSample:
        """One round for every chain (``tables``: this rule's tables, computed once)."""
        mod = self._module()
        if self.rule in WHOLE_DRAFT:
            return mod.play(P, Q, state, gamma, dict(self.rule_knobs), rng)
        accept, reject = tables if tables is not None else self._tables(P, Q)
        if self.policy == "fixed":
            return mod.play(P, Q, accept, reject, state, gamma, rng)
        return mod.play(P, Q, accept, reject, state, gamma, dict(self.policy_knobs), rng)

    def refusal(self, P: FloatArray, Q: FloatArray, gamma: int) -> str | None:
        """Why :meth:`law` and :meth:`play` would stop on these tables (a policy module's
        ``table_refusal``: the optimal policy on a reducible round-start chain), or None."""
        mod = self._module()
        if self.rule in WHOLE_DRAFT or self.policy == "fixed" or not hasattr(mod, "table_refusal"):
            return None
        accept, reject = self._tables(P, Q)
        why: str | None = mod.table_refusal(P, Q, accept, reject, gamma, dict(self.policy_knobs))
        return why

    def footprint(self, size: int, support: int, gamma: int, chains: int) -> LawSize:
        """What :meth:`law` and one :meth:`play` of ``chains`` chains cost on ``size``
        contexts whose draft rows reach ``support`` next states (the scheme's module's
        ``footprint``, :class:`specsim.schemes.law.LawSize`), with a token-wise rule's own
        tables (accept, reject and their temporaries), alive throughout."""
        mod = self._module()
        knobs = dict(self.rule_knobs if self.rule in WHOLE_DRAFT else self.policy_knobs)
        out = mod.footprint(size, support, gamma, knobs, chains)
        if self.rule not in TOKENWISE:
            return out
        tables = Footprint(4.0 * size * size)
        return LawSize(out.states, None if out.law is None else out.law.plus(tables),
                       out.play.plus(tables), out.refused)

    def tables(self, P: FloatArray, Q: FloatArray) -> tuple[FloatArray, FloatArray] | None:
        return self._tables(P, Q) if self.rule in TOKENWISE else None

    @property
    def has_window_law(self) -> bool:
        """Whether the rule's module has a ``window_law`` (:mod:`.law`: a whole-draft rule's
        round on position-indexed rows, e.g. a trace's frozen windows)."""
        return self.rule in WHOLE_DRAFT and hasattr(self._module(), "window_law")

    def window_law(self, p: FloatArray, q: FloatArray, gamma: int,
                   at: IntArray | None = None) -> tuple[FloatArray, FloatArray]:
        """The module's ``window_law`` (:attr:`has_window_law`): the law of tokens emitted
        from n starts of rows p, q (n, γ+1, V) (or rows (R, V) met as ``at`` (n, γ+1) says),
        and the drafted tokens through each depth."""
        return self._module().window_law(p, q, gamma, dict(self.rule_knobs), at)

    def window_cells(self, n: int, vocab: int, gamma: int) -> float:
        """Peak cells of :meth:`window_law` on n starts of ``vocab`` tokens, beyond the rows."""
        return float(self._module().window_cells(n, vocab, gamma, dict(self.rule_knobs)))

    def window_seconds(self, n: int, vocab: int, gamma: int,
                       rows: tuple[FloatArray, FloatArray] | None = None) -> float | None:
        """Estimated seconds of :meth:`window_law` on n starts of ``vocab`` tokens (``rows``:
        the windows of a sample of them, for a rule whose time depends on the rows); None if
        the rule cannot tell without the rows."""
        est = self._module().window_seconds(n, vocab, gamma, dict(self.rule_knobs), rows)
        return None if est is None else float(est)

    def first_two_gamma(self, gamma: int) -> int:
        """The least draft length whose rounds give a generation's first two tokens the law
        γ's rounds give: min(γ, 2) for a token-wise rule under ``fixed`` or ``confidence`` (a
        draft's test and stop read its own position alone, so drafts past the second change
        neither of the first two tokens, nor the first token of a round that follows a
        one-token round); γ itself for a whole-draft rule, whose test reads the whole draft,
        and for the ``heuristic`` and ``optimal`` policies, whose states and stops depend on γ.
        """
        if self.rule in TOKENWISE and self.policy in ("fixed", "confidence"):
            return min(gamma, 2)
        return gamma

    def start(self, context: int, gamma: int, size: int) -> int:
        """The scheme state of a generation's first round from ``context`` (of ``size``)."""
        if self.policy == "heuristic":
            return int(self._module().start_state(context, gamma, size))
        return int(context)


def _combos(specs: tuple[KnobSpec, ...], values: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{}]
    for k in specs:
        out = [c | {k.name: v} for c in out for v in values.get(k.name, [k.default])]
    return out


def schemes_of_study(rules: list[str], policies: list[str], knobs: Mapping[str, list[Any]],
                     where: str, c_values: list[float] | None = None) -> list[Scheme]:
    """Every (rule, rule knobs, policy, policy knobs) of a ``schemes`` study: each rule at every
    combination of its own knobs' values, under each policy at every combination of its
    knobs' values (a policy's ``study_c`` knob: the study's ``c_values`` unless ``knobs``
    lists it); whole-draft rules (``block``, ``multi_draft``) under ``fixed`` only. A knob
    no rule or policy of the study has, or a value outside its domain, is refused naming
    ``<where>.knobs.<name>``."""
    owners = {k.name for r in rules if r in RULES for k in rule_spec(r).knobs}
    owners |= {k.name for p in policies if p in POLICIES for k in POLICIES[p].knobs}
    for name, values in knobs.items():
        if name not in owners:
            raise ValueError(f"{where}.knobs.{name}: no rule or policy of this study has a knob "
                             f"{name!r} (its rules' and policies' knobs: {sorted(owners)})")
        if not isinstance(values, list) or not values:
            raise ValueError(f"{where}.knobs.{name}: give a non-empty list of values")
    out: list[Scheme] = []
    for rule in rules:
        for policy in policies:
            if policy != "fixed" and rule in WHOLE_DRAFT:
                continue  # block / multi_draft verify whole drafts of fixed length
            for rk in _combos(rule_spec(rule).knobs if rule in RULES else (), knobs):
                spec = POLICIES.get(policy)
                own = dict(knobs)
                if spec is not None and spec.study_c and spec.study_c not in own and c_values:
                    own[spec.study_c] = list(c_values)
                for pk in _combos(spec.knobs if spec is not None else (), own):
                    out.append(Scheme.build(rule, rk, policy, pk, where))
    if not out:
        raise ValueError(f"{where}.policy: no (rule, policy) pair of this study can run")
    return out


assert set(RULE_NAMES) <= set(RULES)
