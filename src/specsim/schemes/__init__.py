"""Verification schemes and draft-length policies of the literature and of production.

A grid point of a ``schemes`` study names a rule of :data:`specsim.verify.RULES` with its knobs
and a draft-length policy of :data:`POLICIES` with its knobs; :class:`Scheme` is that pair,
validated, and plays it on an order-1 Markov pair through the scheme of :data:`SCHEMES` its
:class:`~specsim.verify.RuleSpec` names (:mod:`.registry`) -- one module per scheme, each
written from its paper, each giving the exact law of a round and a vectorised round under the
one interface of :mod:`specsim.schemes.base`:

* token-wise rules (one accept probability per drafted token, one law on rejection):
  ``correct`` (Leviathan et al. 2022, Alg. 1), ``lenient`` (:mod:`.lenient`), ``typical``
  (:mod:`.typical`) -- their tables drive :mod:`.tokenwise`, and only they run under the
  policies ``confidence`` (:mod:`.confidence`), ``heuristic`` (:mod:`.heuristic`) and
  ``optimal`` (:mod:`.optimal`);
* ``block`` (:mod:`.block`) verifies a whole draft at once; ``multi_draft`` (:mod:`.multi_draft`,
  SpecInfer), ``spectr`` (:mod:`.spectr`, K-SEQ) and ``multi_draft_optimal``
  (:mod:`.multi_draft_optimal`, the LP bound) verify k i.i.d. drafts depth by depth on the
  shared (context, survivors) chain of :mod:`.survivors`, as does ``multi_draft_wor``
  (:mod:`.multi_draft_wor`, drafts without replacement, RSD-C); ``tree`` (:mod:`.tree`)
  verifies a SpecInfer token tree root to leaf, ``traversal`` (:mod:`.traversal`) the same
  trees leaf to root; all with a fixed draft length (a tree's: its depth).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from specsim.exact import RoundLaw
from specsim.schemes.base import DraftLength, Tables, VerificationScheme, WindowLaw
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample
from specsim.schemes.registry import POLICIES, SCHEME_RULES, SCHEMES, PolicySpec
from specsim.verify import RULES, KnobSpec, rule_spec

__all__ = ["POLICIES", "SCHEMES", "SCHEME_RULES", "PolicySpec", "Scheme", "SchemeOnTables",
           "VerificationScheme", "schemes_of_study"]


def _tokenwise(rule: str) -> bool:
    scheme = rule_spec(rule).scheme if rule in RULES else None
    return scheme is not None and SCHEMES[scheme].tokenwise


def _fixed(policy: str) -> bool:
    """Whether ``policy`` drafts γ every round (:attr:`DraftLength.fixed`)."""
    return policy in POLICIES and POLICIES[policy].plays.fixed


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
        if rule not in SCHEME_RULES:
            raise ValueError(f"{where}.rule: {rule!r} is not a scheme rule; choose one of "
                             f"{list(SCHEME_RULES)}")
        if policy not in POLICIES:
            raise ValueError(f"{where}.policy: {policy!r} is not a policy; choose one of "
                             f"{list(POLICIES)}")
        if not _fixed(policy) and not _tokenwise(rule):
            raise ValueError(f"{where}.policy: {policy!r} needs a token-wise rule "
                             f"({list(filter(_tokenwise, SCHEME_RULES))}); {rule!r} verifies "
                             f"whole drafts of fixed length")
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
        """Refuse a vocabulary beyond the rule's exact limit (its scheme's
        :meth:`~specsim.schemes.base.VerificationScheme.limit`: :mod:`.multi_draft_optimal`)."""
        why = self.verifier.limit(vocab, dict(self.rule_knobs))
        if why is not None:
            raise ValueError(f"{where}: {why}")

    def check_gamma(self, gamma: int, where: str, size: int | None = None) -> None:
        """The heuristic schedule starts at γ and must fit under its cap; with ``size`` (S
        of dense tables) the module's footprint must not refuse γ (``optimal``'s bound)."""
        cap = dict(self.policy_knobs).get("cap")
        if cap is not None and gamma > cap:
            raise ValueError(f"{where}: gamma={gamma} exceeds the heuristic policy's cap="
                             f"{int(cap)}; raise knobs.cap or lower gamma")
        if size is not None and not self.drafting.fixed:
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
    @property
    def verifier(self) -> VerificationScheme:
        """The scheme of :data:`SCHEMES` that plays the rule (its :class:`RuleSpec` names it)."""
        name = rule_spec(self.rule).scheme
        assert name is not None  # build() admits only SCHEME_RULES
        return SCHEMES[name]

    @property
    def tokenwise(self) -> bool:
        """Whether the rule is token-wise (tables, any draft-length policy) rather than one
        verifying whole drafts at a fixed γ."""
        return self.verifier.tokenwise

    @property
    def drafting(self) -> DraftLength:
        """How the policy plays (:class:`~specsim.schemes.base.DraftLength`)."""
        return POLICIES[self.policy].plays

    def on(self, P: FloatArray, Q: FloatArray) -> SchemeOnTables:
        """The scheme on one (P, Q), a token-wise rule's tables built now, once, for every
        :meth:`~SchemeOnTables.law`, :meth:`~SchemeOnTables.play` and
        :meth:`~SchemeOnTables.refusal` on them (P and Q must not change meanwhile)."""
        return SchemeOnTables(self, P, Q, self.tables(P, Q))

    def law(self, P: FloatArray, Q: FloatArray, gamma: int) -> RoundLaw:
        """Exact law of one round from every scheme state (:meth:`on` for several calls on
        the same tables)."""
        return self.verifier.law(P, Q, gamma, self)

    def play(self, P: FloatArray, Q: FloatArray, state: IntArray, gamma: int,
             rng: np.random.Generator) -> RoundSample:
        """One round for every chain."""
        return self.verifier.play(P, Q, state, gamma, self, rng)

    def refusal(self, P: FloatArray, Q: FloatArray, gamma: int) -> str | None:
        """Why :meth:`law` and :meth:`play` would stop on these tables (a policy's declared
        ``refusal``: the optimal policy on a reducible round-start chain), or None."""
        return self.verifier.refusal(P, Q, gamma, self)

    @property
    def refuses(self) -> bool:
        """Whether :meth:`refusal` can say anything but None (the ``optimal`` policy's)."""
        return self.verifier.refuses(self)

    def footprint(self, size: int, support: int, gamma: int, chains: int) -> LawSize:
        """What :meth:`law` and one :meth:`play` of ``chains`` chains cost on ``size``
        contexts whose draft rows reach ``support`` next states
        (:class:`specsim.schemes.law.LawSize`)."""
        return self.verifier.footprint(size, support, gamma, self, chains)

    def tables(self, P: FloatArray, Q: FloatArray) -> Tables | None:
        """A token-wise rule's (accept, reject) tables on (P, Q); None for a whole-draft
        rule."""
        return self.verifier.tables(P, Q, dict(self.rule_knobs))

    # ------------------------------------------------------------------ other models' rows
    def accepts(self, p: FloatArray, q: FloatArray) -> FloatArray | None:
        """A token-wise rule's accept table on rows p, q (..., V) of any shape; None for a
        whole-draft rule."""
        return self.verifier.accepts(p, q, dict(self.rule_knobs))

    def stop_table(self, q: FloatArray) -> FloatArray | None:
        """The policy's stop after drafting x from the row q (..., V), where its stop reads
        the drafted token alone (``confidence``); None: no such stop."""
        return self.drafting.stop_table(q, dict(self.policy_knobs))

    def draft_lengths(self, gamma: int) -> tuple[int, ...]:
        """The draft lengths the policy can be at from a start at γ (1..cap for
        ``heuristic``, (γ,) otherwise)."""
        return self.drafting.lengths(gamma, dict(self.policy_knobs))

    def next_length(self, g: IntArray, all_accepted: IntArray) -> IntArray:
        """The draft length after a round at ``g`` that did (not) accept every draft."""
        return self.drafting.next_length(g, all_accepted, dict(self.policy_knobs))

    @property
    def optimal_cost(self) -> float | None:
        """The draft cost c the policy's stop on π is optimal for (``optimal``), or None."""
        return self.drafting.optimal_cost(dict(self.policy_knobs))

    @property
    def has_window_law(self) -> bool:
        """Whether the rule has a ``window_law`` (:mod:`.base`: a whole-draft rule's round on
        position-indexed rows, e.g. a trace's frozen windows)."""
        return self.verifier.window is not None

    def _window(self) -> WindowLaw:
        window = self.verifier.window
        if window is None:
            raise ValueError(f"rule {self.rule} has no window law")
        return window

    def window_law(self, p: FloatArray, q: FloatArray, gamma: int,
                   at: IntArray | None = None) -> tuple[FloatArray, FloatArray]:
        """The rule's ``window_law`` (:attr:`has_window_law`): the law of tokens emitted
        from n starts of rows p, q (n, γ+1, V) (or rows (R, V) met as ``at`` (n, γ+1) says),
        and the drafted tokens through each depth."""
        return self._window().window_law(p, q, gamma, dict(self.rule_knobs), at)

    def window_cells(self, n: int, vocab: int, gamma: int) -> float:
        """Peak cells of :meth:`window_law` on n starts of ``vocab`` tokens, beyond the rows."""
        return float(self._window().window_cells(n, vocab, gamma, dict(self.rule_knobs)))

    def window_seconds(self, n: int, vocab: int, gamma: int,
                       rows: tuple[FloatArray, FloatArray] | None = None) -> float | None:
        """Estimated seconds of :meth:`window_law` on n starts of ``vocab`` tokens (``rows``:
        the windows of a sample of them, for a rule whose time depends on the rows); None if
        the rule cannot tell without the rows."""
        est = self._window().window_seconds(n, vocab, gamma, dict(self.rule_knobs), rows)
        return None if est is None else float(est)

    def first_two_gamma(self, gamma: int) -> int:
        """The least draft length whose rounds give a generation's first two tokens the law
        γ's rounds give: min(γ, 2) for a token-wise rule under ``fixed`` or ``confidence``,
        γ itself for a whole-draft rule, whose test reads the whole draft, and for the
        ``heuristic`` and ``optimal`` policies, whose states and stops depend on γ
        (:meth:`specsim.schemes.registry.TokenwiseRule.first_two_gamma`)."""
        return self.verifier.first_two_gamma(gamma, self)

    def start(self, context: int, gamma: int, size: int) -> int:
        """The scheme state of a generation's first round from ``context`` (of ``size``)."""
        return self.verifier.start(context, gamma, size, self)


@dataclass(frozen=True, eq=False)  # held arrays: compared by identity
class SchemeOnTables:
    """A scheme on one (P, Q) with a token-wise rule's tables on them (None for a whole-draft
    rule), built once by :meth:`Scheme.on`: its law, rounds and refusal read these tables."""

    scheme: Scheme
    P: FloatArray
    Q: FloatArray
    tables: Tables | None

    def law(self, gamma: int) -> RoundLaw:
        """:meth:`Scheme.law` on these tables."""
        return self.scheme.verifier.law(self.P, self.Q, gamma, self.scheme, tables=self.tables)

    def play(self, state: IntArray, gamma: int, rng: np.random.Generator) -> RoundSample:
        """:meth:`Scheme.play` on these tables."""
        return self.scheme.verifier.play(self.P, self.Q, state, gamma, self.scheme, rng,
                                         tables=self.tables)

    def refusal(self, gamma: int) -> str | None:
        """:meth:`Scheme.refusal` on these tables."""
        return self.scheme.verifier.refusal(self.P, self.Q, gamma, self.scheme,
                                            tables=self.tables)


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
            if not _fixed(policy) and not _tokenwise(rule):
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

