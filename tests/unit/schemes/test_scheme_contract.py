"""The one scheme contract, checked on every scheme of the registry (:data:`SCHEMES`).

Each registered rule, through :class:`specsim.schemes.Scheme` and so its
:class:`~specsim.schemes.base.VerificationScheme`: its law's rows are laws and it drafts what
its knobs say; a lossless rule emits the target's first two tokens on tables and on the i.i.d.
stub; at its knobs' neutral values it is Algorithm 1; its rounds, played, match its law
(G-tests); its footprint counts the law's states and grows with the chains. Where a scheme has
its own brute-force reference (in exact rational arithmetic, in its own test module), its law
equals it. A scheme added to the registry without cases here fails the first test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction as Fr
from typing import Any

import numpy as np
import pytest
from multi_draft_reference import (
    P3,
    PAIRS,
    Q3,
    Q3B,
    assert_law_matches,
    assert_play_matches_law,
    assert_rounds_well_formed,
    assert_sequences_match,
    stub,
)
from test_scheme_multi_draft import reference_round as rrs_reference
from test_scheme_multi_draft_optimal import reference_round as optimal_reference
from test_scheme_multi_draft_wor import reference_round as wor_reference
from test_scheme_spectr import reference_round as kseq_reference
from test_scheme_traversal import reference_round as traversal_reference
from test_scheme_tree import reference_round as tree_reference

from specsim.exact import first_two_law, round_law, target_joint, tv
from specsim.schemes import (
    POLICIES,
    SCHEME_RULES,
    SCHEMES,
    Scheme,
    multi_draft,
    multi_draft_optimal,
    multi_draft_wor,
    spectr,
)
from specsim.schemes.tree import parents_of
from specsim.verify import rule_spec

# every registered rule: (knobs, gamma) settings its contract is checked at
CASES: dict[str, list[tuple[dict[str, Any], int]]] = {
    "correct": [({}, 1), ({}, 3)],
    "lenient": [({"lenience": 0.5}, 2)],
    "typical": [({"epsilon": 0.09, "delta": 0.3}, 2)],
    "block": [({}, 1), ({}, 3)],
    "multi_draft": [({"drafts": 2}, 2), ({"drafts": 3}, 3)],
    "spectr": [({"drafts": 2}, 2), ({"drafts": 3}, 3)],
    "multi_draft_optimal": [({"drafts": 2}, 2), ({"drafts": 3}, 2)],
    "multi_draft_wor": [({"drafts": 2}, 2), ({"drafts": 3}, 1)],
    "tree": [({"branches": "2x1"}, 2), ({"branches": "2x2x1"}, 3)],
    "traversal": [({"branches": "2x1"}, 2), ({"branches": "3"}, 1)],
}
SETTINGS = [pytest.param(rule, knobs, gamma, id=f"{rule}-{'-'.join(map(str, knobs.values()))}"
                         f"-g{gamma}")
            for rule in SCHEME_RULES for knobs, gamma in CASES[rule]]
TABLES = ["blend", "sparse", "other", "identical", "cold"]


def _applies(rule: str, pair: str) -> bool:
    """"cold" (draft entries down to ~1e-300, products of two underflow) is the k-draft rules'
    edge case, whose multisets of drafts meet it (p/q overflows there); every other pair is
    every rule's."""
    return pair != "cold" or rule_spec(rule).width_knob == "drafts"


def _with_pairs(settings: list[Any], pairs: list[str]) -> list[Any]:
    """Each setting (a pytest.param whose first value is the rule) on each pair it applies to."""
    return [pytest.param(*s.values, pair, id=f"{s.id}-{pair}") for s in settings
            for pair in pairs if _applies(s.values[0], pair)]


# rules that reduce to Algorithm 1 at some knob values (their own, or the classic rules')
NEUTRAL_RULES = [pytest.param(r, id=r) for r in SCHEME_RULES
                 if rule_spec(r).accept != "scheme"
                 or any(k.neutral is not None for k in rule_spec(r).knobs)]

Reference = Callable[[list[list[Fr]], Mapping[str, Any], int, int], Mapping[tuple[int, ...], Fr]]


def _shape(knobs: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(int(b) for b in str(knobs["branches"]).split("x"))


# the schemes' own brute-force references, each in its own test module:
# (draft Q, knobs, gamma, start) -> {emitted sequence: probability}
REFERENCES: dict[str, Reference] = {
    "multi_draft": lambda q, kn, g, s: rrs_reference(P3, q, kn["drafts"], g, s),
    "spectr": lambda q, kn, g, s: kseq_reference(P3, q, kn["drafts"], g, s),
    "multi_draft_wor": lambda q, kn, g, s: wor_reference(P3, q, kn["drafts"], g, s),
    "multi_draft_optimal": lambda q, kn, g, s: optimal_reference(
        np.array(P3, dtype=float), np.array(q, dtype=float), kn["drafts"], g, s),
    "tree": lambda q, kn, g, s: tree_reference(P3, q, parents_of(_shape(kn)).tolist(), s),
    "traversal": lambda q, kn, g, s: traversal_reference(P3, q, _shape(kn), s),
}
# and the exact law of the whole sequence a round emits, where the module gives one (the LP
# rule's reference walks its floating-point couplings: sequences below 1e-12 may differ)
SEQUENCE_LAWS: dict[str, tuple[Callable[..., tuple[np.ndarray, np.ndarray]], bool]] = {
    "multi_draft": (multi_draft.sequence_law, True), "spectr": (spectr.sequence_law, True),
    "multi_draft_wor": (multi_draft_wor.sequence_law, True),
    "multi_draft_optimal": (multi_draft_optimal.sequence_law, False)}
REFERENCE_CASES: dict[str, list[tuple[dict[str, Any], int]]] = {
    "multi_draft": [({"drafts": 2}, 1), ({"drafts": 2}, 2), ({"drafts": 3}, 1),
                    ({"drafts": 3}, 2)],
    "spectr": [({"drafts": 2}, 1), ({"drafts": 2}, 2), ({"drafts": 3}, 1), ({"drafts": 3}, 2)],
    "multi_draft_wor": [({"drafts": 2}, 1), ({"drafts": 2}, 2), ({"drafts": 3}, 2),
                        ({"drafts": 3}, 3)],
    "multi_draft_optimal": [({"drafts": 2}, 1), ({"drafts": 2}, 2), ({"drafts": 3}, 2)],
    "tree": [({"branches": s}, len(s.split("x"))) for s in ("2x1", "1x2", "2x2")],
    "traversal": [({"branches": s}, len(s.split("x")))
                  for s in ("2", "2x1", "1x2", "3x1", "2x2", "1x1x1", "2x1x1")],
}


def test_every_registered_scheme_has_contract_cases() -> None:
    assert list(CASES) == list(SCHEME_RULES)
    assert set(REFERENCES) == set(REFERENCE_CASES) and set(REFERENCES) <= set(SCHEMES)
    for rule in SCHEME_RULES:
        name = rule_spec(rule).scheme
        assert name is not None and SCHEMES[name].name == name


@pytest.mark.parametrize(("rule", "knobs", "gamma", "pair"), _with_pairs(SETTINGS, TABLES))
def test_law_rows_are_laws_and_it_drafts_what_its_knobs_say(rule: str, knobs: dict[str, Any],
                                                            gamma: int, pair: str) -> None:
    p, q = PAIRS[pair]
    exact = Scheme.build(rule, knobs).law(p, q, gamma)
    np.testing.assert_allclose(exact.tokens.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(exact.next_state.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(exact.single.sum(axis=1) + exact.pair.sum(axis=(1, 2)), 1.0,
                               atol=1e-12)
    np.testing.assert_allclose(exact.single.sum(axis=1), exact.tokens[:, 1], atol=1e-12)
    assert (exact.tokens[:, 0] == 0).all() and (exact.tokens >= 0).all()
    assert exact.tokens.shape[1] == gamma + 2
    np.testing.assert_allclose(exact.drafted, sum(rule_spec(rule).draft_widths(knobs, gamma)),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize(("rule", "knobs", "gamma"), SETTINGS)
def test_a_lossless_rule_emits_the_targets_first_two_tokens(rule: str, knobs: dict[str, Any],
                                                            gamma: int) -> None:
    scheme = Scheme.build(rule, knobs)
    cases = [(*PAIRS[pair], range(PAIRS[pair][0].shape[0])) for pair in TABLES[:-1]]
    if (knobs, gamma) == CASES[rule][0]:  # the i.i.d. stub's frozen chain: the first case
        p, q, start = stub(gamma)
        cases.append((p, q, [start]))
    worst = max(tv(first_two_law(scheme.law(p, q, gamma), s), target_joint(p, s, 2))
                for p, q, starts in cases for s in starts)
    if scheme.lossless:
        assert worst <= 1e-12
    else:  # the lossy rules' loss shows on these tables: the check can fail
        assert worst > 1e-3


@pytest.mark.parametrize(("rule", "pair"), _with_pairs(NEUTRAL_RULES, TABLES))
def test_at_its_knobs_neutral_values_a_rule_is_algorithm_1(rule: str, pair: str) -> None:
    spec = rule_spec(rule)
    neutral = {k.name: (k.neutral if not k.shape else "x".join(["1"] * 2)) for k in spec.knobs}
    p, q = PAIRS[pair]
    for gamma in (1, 2):
        if any(k.shape for k in spec.knobs) and gamma != 2:
            continue
        ours, alg1 = Scheme.build(rule, neutral).law(p, q, gamma), round_law(p, q, gamma,
                                                                             "correct")
        np.testing.assert_allclose(ours.tokens, alg1.tokens, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ours.next_state, alg1.next_state, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("rule", "knobs", "gamma", "pair"),
                         _with_pairs(SETTINGS, ["blend", "sparse", "cold"]))
def test_played_rounds_match_the_law(rule: str, knobs: dict[str, Any], gamma: int,
                                     pair: str) -> None:
    """Rounds played from every context, well formed, against the law by G-tests (tokens,
    next state, first two tokens per start context)."""
    p, q = PAIRS[pair]
    scheme = Scheme.build(rule, knobs)
    state = np.arange(60_000) % p.shape[0]
    seed = sum(map(ord, rule + pair)) + gamma
    sample = scheme.play(p, q, state, gamma, np.random.default_rng(seed))
    assert_rounds_well_formed(sample, sum(rule_spec(rule).draft_widths(knobs, gamma)), gamma,
                              state)
    assert_play_matches_law(sample, scheme.law(p, q, gamma), state, next_state=True)


@pytest.mark.parametrize(("rule", "knobs", "gamma"), SETTINGS)
def test_footprint_counts_the_laws_states_and_grows_with_chains(rule: str,
                                                                knobs: dict[str, Any],
                                                                gamma: int) -> None:
    p, q = PAIRS["blend"]
    scheme = Scheme.build(rule, knobs)
    size = p.shape[0]
    small, more = (scheme.footprint(size, size, gamma, n) for n in (1024, 16384))
    assert small.law is not None and small.law.cells > 0 and small.law.flops > 0
    assert small.states == scheme.law(p, q, gamma).tokens.shape[0]
    assert 0 < small.play.cells < more.play.cells


@pytest.mark.parametrize("draft", [Q3, Q3B], ids=["Q3", "Q3B"])
@pytest.mark.parametrize(("rule", "knobs", "gamma"), [
    pytest.param(rule, knobs, gamma, id=f"{rule}-{'-'.join(map(str, knobs.values()))}-g{gamma}")
    for rule in REFERENCES for knobs, gamma in REFERENCE_CASES[rule]])
def test_law_equals_brute_force_rational_reference(rule: str, knobs: dict[str, Any],
                                                   gamma: int, draft: list[list[Fr]]) -> None:
    """The scheme's law from each start equals its own reference, which enumerates every
    draft of the round in exact rational arithmetic (the LP rule's: through its couplings)."""
    p, q = np.array(P3, dtype=float), np.array(draft, dtype=float)
    exact = Scheme.build(rule, knobs).law(p, q, gamma)
    assert np.array_equal(exact.context, np.arange(3))
    for s in range(3):
        ref = REFERENCES[rule](draft, knobs, gamma, s)
        assert abs(sum(ref.values()) - 1) < Fr(1, 10**12)
        assert_law_matches(exact, s, ref)
        if rule in SEQUENCE_LAWS:
            sequence_law, support = SEQUENCE_LAWS[rule]
            assert_sequences_match(*sequence_law(p, q, gamma, knobs, s), ref, support=support)


def test_policies_declare_their_capabilities_and_whole_draft_rules_run_fixed_only() -> None:
    """What a policy can do beyond its three methods is declared on it, never probed."""
    assert [n for n, s in POLICIES.items() if s.plays.refusal is not None] == ["optimal"]
    assert [n for n, s in POLICIES.items() if s.plays.start is not None] == ["heuristic"]
    assert [n for n, s in POLICIES.items() if s.plays.local] == ["fixed", "confidence"]
    assert Scheme.build("correct", {}, "optimal", {"c": 0.1}).refuses
    assert not Scheme.build("correct", {}, "heuristic", {"cap": 8}).refuses
    for rule in SCHEME_RULES:
        scheme = Scheme.build(rule)
        assert scheme.tokenwise == (scheme.tables(*PAIRS["blend"]) is not None)
        if not scheme.tokenwise:
            with pytest.raises(ValueError, match="needs a token-wise rule"):
                Scheme.build(rule, {}, "confidence", {})
