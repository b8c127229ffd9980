"""The verification rules: one table (:data:`RULES`), one :class:`RuleSpec` per rule.

Four rules reproduce the seed program's ``verify_round``: ``correct`` (Leviathan et al. 2022,
arXiv 2211.17192, Alg. 1) and three deliberate breakages kept to show that the lossless checks
have power; four more are the literature's schemes -- ``block``, ``multi_draft``, ``lenient``,
``typical`` -- registered here with their knobs (:class:`KnobSpec`) and played by the scheme
of :data:`specsim.schemes.SCHEMES` that ``scheme`` of their :class:`RuleSpec` names. The engine, the
exact DP, the estimates, the figure legends and the lossless checks all read this table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, Literal, cast, get_args

from specsim.errors import shown

Rule = Literal["correct", "greedy", "no_resample", "continue",
               "block", "multi_draft", "lenient", "typical", "tree", "spectr",
               "multi_draft_optimal", "multi_draft_wor", "traversal"]
RULE_NAMES: Final[tuple[Rule, ...]] = cast("tuple[Rule, ...]", get_args(Rule))


@dataclass(frozen=True)
class KnobSpec:
    """A numeric setting of a rule or policy: its domain [low, high] (``low_open``: low itself
    excluded), integer or real, its default, and the value at which the scheme reduces to
    Algorithm 1 with a fixed draft length (``neutral``, None if it never does).

    ``shape``: the knob is a draft tree's shape instead, a string of integers joined by ``x``
    (``"2x2x1"``: children per node at each depth), each >= ``low``, the tree having at most
    ``high`` nodes in all; its value is that string, canonical, and it is neutral when every
    entry equals ``neutral`` (a chain: all ones)."""

    name: str
    meaning: str
    low: float
    high: float
    default: float | str
    integer: bool = False
    low_open: bool = False
    neutral: float | None = None
    shape: bool = False

    @property
    def domain(self) -> str:
        if self.shape:
            return (f"integers >= {self.low:g} joined by 'x', one per depth (e.g. '2x2x1'), "
                    f"at most {self.high:g} tree nodes")
        low = "(" if self.low_open else "["
        kind = "integer " if self.integer else ""
        return f"{kind}{low}{self.low:g}, {self.high:g}]"

    def text(self, value: Any) -> str:
        """The value as it appears in a point's path segment."""
        if self.shape:
            return str(value)
        return str(int(value)) if self.integer else repr(float(value))

    def is_neutral(self, value: Any) -> bool:
        """Whether ``value`` is the knob's neutral value (every entry of a shape)."""
        if self.neutral is None:
            return False
        if self.shape:
            return isinstance(value, str) and all(
                int(b) == self.neutral for b in value.split("x"))
        return bool(value == self.neutral)

    def _check_shape(self, value: object, where: str) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a depth-1 tree, as YAML reads `3`
        entries = value.split("x") if isinstance(value, str) else []
        ok = bool(entries) and all(e.isdigit() and e.isascii() and len(e) <= 6
                                   for e in entries)
        counts = [int(e) for e in entries] if ok else []
        nodes, width = 0, 1
        for b in counts:  # stopped at 10^18: a long shape's count outgrows any int print
            width *= b
            nodes += width
            if nodes > 10**18:
                break
        if not ok or min(counts) < self.low or nodes > self.high:
            many = "" if not ok or nodes <= self.high else (
                f"; it has {nodes} nodes" if nodes <= 10**18 else
                f"; it has {len(counts)} depths and over 10^18 nodes")
            raise ValueError(f"{where}: {shown(value)} is outside the domain of {self.name}, "
                             f"{self.domain} ({self.meaning}){many}")
        return "x".join(map(str, counts))

    def check(self, value: object, where: str) -> Any:
        """The value as a number of the knob's kind (a shape: its canonical string);
        ValueError naming ``where`` otherwise."""
        if self.shape:
            return self._check_shape(value, where)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        v: Any = value if ok else math.nan  # compared as given: float() of a huge int overflows
        inside = ok and (self.low < v if self.low_open else self.low <= v) and v <= self.high
        if not inside or (self.integer and v != int(v)):
            raise ValueError(f"{where}: {shown(value)} is outside the domain of {self.name}, "
                             f"{self.domain} ({self.meaning})")
        return int(v) if self.integer else float(v)


@dataclass(frozen=True)
class RuleSpec:
    """One verification rule: its accept step and what is emitted on the first rejection.

    ``accept``: ``"ratio"`` accepts a drafted x with probability min(1, p(x)/q(x)) ([L] Alg. 1
    step 'if r < p(x)/q(x)'); ``"argmax"`` accepts iff x is the target's argmax (first index on
    ties), whatever q is. ``on_rejection``: ``"residual"`` samples norm(max(p - q, 0)) ([L]
    Alg. 1, p' of Thm 3.5), ``"target"`` samples p. ``keep_drafts``: after the rejection token
    the remaining drafts are emitted too (γ tokens in all). ``label``: what the rule does in a
    few words, for figure legends (``name (label)``). ``scheme``: the name of the rule's
    entry in :data:`specsim.schemes.SCHEMES`, the scheme that plays it in a ``schemes`` study
    (None: only the Markov engine plays it); the accept step ``"scheme"`` says only that scheme
    plays it (not a per-token table of the Markov engine). ``knobs``: the
    rule's settings; ``source``: the paper it is written from; ``at_least_tokenwise``: why
    the rule never emits fewer tokens per call than Algorithm 1 at the same γ (checked on the
    ``schemes`` table), empty where nobody claims it. ``multi_draft``: the rule
    verifies ``drafts`` i.i.d. drafts (compared with the other such rules at the same k);
    ``bound``: no verification of those drafts accepts more at a step (the checks hold every
    ``multi_draft`` rule at or below it, same model, γ and k). ``width_knob``: the knob saying
    how many tokens a round drafts side by side at each depth (k drafts: k at every depth; a
    tree's shape: the nodes at each depth; None: one sequence); a cost model charges them one
    after another or as one batched step per depth (:mod:`specsim.costs`). ``same_drafts_as``:
    the rule verifies the very drafts (trees) that rule draws, with the same knobs, so tables
    set it beside that rule (``schemes_trees.csv``); ``at_least_same_drafts``: why it never
    emits fewer tokens per call than that rule at the same knobs and γ (checked on the
    ``schemes`` table), empty where nobody claims it.
    """

    name: Rule
    meaning: str
    lossless: bool
    accept: Literal["ratio", "argmax", "scheme"]
    on_rejection: Literal["residual", "target"]
    keep_drafts: bool = False
    label: str = ""
    scheme: str | None = None
    knobs: tuple[KnobSpec, ...] = ()
    source: str = ""
    at_least_tokenwise: str = ""
    multi_draft: bool = False
    bound: bool = False
    width_knob: str | None = None
    same_drafts_as: str | None = None
    at_least_same_drafts: str = ""

    def draft_widths(self, knobs: Mapping[str, Any], gamma: int) -> tuple[int, ...]:
        """Tokens drafted per sequence at each depth 1..γ: the ``width_knob``'s value in
        ``knobs`` (its default when absent) at every depth, or a tree shape's nodes per depth
        (``"2x2"``: 2, 4); 1 at every depth for a rule drafting one sequence."""
        if self.width_knob is None:
            return (1,) * gamma
        knob = next(k for k in self.knobs if k.name == self.width_knob)
        value = knobs.get(knob.name, knob.default)
        if not knob.shape:
            return (int(value),) * gamma
        widths, nodes = [], 1
        for b in str(value).split("x"):
            nodes *= int(b)
            widths.append(nodes)
        return tuple(widths)

    @property
    def legend(self) -> str:
        """``name (label)``: the config's spelling first, then what the rule does."""
        return f"{self.name} ({self.label})" if self.label else self.name


_DRAFTS: Final = KnobSpec("drafts", "independent draft sequences k", 1, 64, 2, integer=True,
                          neutral=1)  # k = 1 is Algorithm 1 exactly
_BRANCHES: Final = KnobSpec("branches", "children per node at each depth; the depth is the "
                            "point's gamma", 1, 4096, "2x1", shape=True, neutral=1)
RULES: Final[Mapping[Rule, RuleSpec]] = MappingProxyType({
    "correct": RuleSpec(
        "correct", "accept x w.p. min(1, p(x)/q(x)); on rejection sample norm(max(p - q, 0)) "
        "(p itself when that residual has no mass)", True, "ratio", "residual",
        label="residual", scheme="correct"),
    "greedy": RuleSpec(
        "greedy", "BREAK: accept iff x is the target's argmax; on rejection sample the residual",
        False, "argmax", "residual", label="argmax"),
    "no_resample": RuleSpec(
        "no_resample", "BREAK: on rejection sample from p instead of the residual",
        False, "ratio", "target", label="resample from p"),
    "continue": RuleSpec(
        "continue", "BREAK: after the residual token keep emitting the rest of the drafted "
        "tokens", False, "ratio", "residual", keep_drafts=True, label="keep later drafts"),
    "block": RuleSpec(
        "block", "block verification: accept the longest prefix whose running likelihood "
        "ratio survives a backward coupling; lossless, never fewer tokens than token-wise",
        True, "scheme", "residual", label="block verification", scheme="block",
        source="Sun, Mendlovic, Leviathan et al. 2024, arXiv 2403.10444, Algorithm 2"),
    "multi_draft": RuleSpec(
        "multi_draft", "k independent drafts verified depth by depth by recursive rejection "
        "sampling over the surviving drafts' tokens; lossless", True, "scheme", "residual",
        label="k drafts", scheme="multi_draft", knobs=(_DRAFTS,),
        source="Miao et al. 2023 (SpecInfer), arXiv 2305.09781, multi-step speculative "
               "sampling", multi_draft=True, width_knob="drafts"),
    "lenient": RuleSpec(
        "lenient", "LOSSY: accept x w.p. min(1, p(x)/(l q(x))), on rejection sample "
        "norm(max(p - l q, 0)); l = 1 is Algorithm 1", False, "scheme", "residual",
        label="lossy: accepts more", scheme="lenient",
        knobs=(KnobSpec("lenience", "lenience l: 1 = exact, smaller accepts more", 0.0, 1.0,
                        0.5, neutral=1.0),),
        source="Leviathan, Kalman & Matias 2022, arXiv 2211.17192, Appendix A.5"),
    "typical": RuleSpec(
        "typical", "LOSSY: accept x iff p(x) > min(epsilon, delta exp(-H(p))); on rejection "
        "sample p", False, "scheme", "target", label="lossy: Medusa", scheme="typical",
        knobs=(KnobSpec("epsilon", "hard probability threshold", 0.0, 1.0, 0.09),
               KnobSpec("delta", "entropy-scaled threshold", 0.0, 1.0, 0.3)),
        source="Cai et al. 2024 (Medusa), arXiv 2401.10774, Sec. 2.3.1"),
    "tree": RuleSpec(
        "tree", "a token tree drafted i.i.d. (branches[d] children per node at depth d) and "
        "verified root to leaf by recursive rejection sampling over the current node's "
        "children; lossless", True, "scheme", "residual", label="token tree",
        scheme="tree", knobs=(_BRANCHES,),
        source="Miao et al. 2023 (SpecInfer), arXiv 2305.09781, token tree verification",
        width_knob="branches",
        at_least_tokenwise="SpecInfer (arXiv 2305.09781): a token tree accepts more than a "
                           "chain of its depth (an observation, checked per table)"),
    "spectr": RuleSpec(
        "spectr", "k independent drafts verified depth by depth by SpecTr's K-SEQ: accept a "
        "survivor's token w.p. min(1, p/(rho q)), rho solving 1 - (1 - beta)^m = rho beta; "
        "lossless", True, "scheme", "residual", label="K-SEQ, k drafts", scheme="spectr",
        knobs=(_DRAFTS,), multi_draft=True, width_knob="drafts",
        source="Sun et al. 2023 (SpecTr), arXiv 2310.15141, K-SEQ draft selection"),
    "multi_draft_optimal": RuleSpec(
        "multi_draft_optimal", "k independent drafts verified depth by depth by an LP-optimal "
        "coupling: the best acceptance any verification of the survivors reaches, "
        "min_H p(H) + 1 - q(H)^m; lossless; exact up to a vocabulary limit", True, "scheme",
        "residual", label="LP optimum, k drafts", scheme="multi_draft_optimal",
        knobs=(KnobSpec("drafts", "independent draft sequences k", 1, 64, 2, integer=True),),
        multi_draft=True, bound=True, width_knob="drafts",
        source="Hu et al. 2025, arXiv 2502.18779; Khisti et al. 2024, arXiv 2410.18234 "
               "(optimal multi-draft acceptance by LP)"),
    "multi_draft_wor": RuleSpec(
        "multi_draft_wor", "k drafts whose tokens are distinct at each depth (sampled without "
        "replacement), recursive rejection sampling without replacement; lossless; not i.i.d., "
        "so outside the i.i.d. LP bound", True, "scheme", "residual",
        label="k drafts w/o replacement", scheme="multi_draft_wor", knobs=(_DRAFTS,),
        width_knob="drafts",
        source="Jeon et al. 2024 (Recursive Speculative Decoding), arXiv 2402.14160, RSD-C"),
    "traversal": RuleSpec(
        "traversal", "the tree rule's token tree (same shape, same i.i.d. drafts) verified leaf "
        "to root: each node, once its children are all rejected, accepts the whole path from "
        "the root to it with a weight carried down the path; lossless; a chain is block "
        "verification", True, "scheme", "residual", label="traversal verification",
        scheme="traversal", width_knob="branches",
        knobs=(replace(_BRANCHES, neutral=None),),  # a chain is block verification, not Alg. 1
        source="Weng et al. 2025 (Traversal Verification), arXiv 2505.12398, reconstructed "
               "from its abstract",
        same_drafts_as="tree",
        at_least_same_drafts="Weng et al. 2025 (arXiv 2505.12398): traversal verification "
                             "accepts at least as much as token-tree verification on the same "
                             "trees (held on every case tried, checked per table)"),
})
assert tuple(RULES) == RULE_NAMES
assert all(s.width_knob in {k.name for k in s.knobs} for s in RULES.values() if s.width_knob)
assert all([k.name for k in RULES[s.same_drafts_as].knobs]  # type: ignore[index]
           == [k.name for k in s.knobs] for s in RULES.values() if s.same_drafts_as)
CLASSIC_RULES: Final[tuple[Rule, ...]] = tuple(n for n, s in RULES.items()
                                               if s.accept != "scheme")
"""The rules the Markov engine and :mod:`specsim.exact` play directly (per-cell tables)."""


def rule_spec(rule: str | RuleSpec) -> RuleSpec:
    """The :class:`RuleSpec` of a rule name (a spec is returned unchanged)."""
    if isinstance(rule, RuleSpec):
        return rule
    try:
        return RULES[rule]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ValueError(f"unknown rule {rule!r}; expected one of {RULE_NAMES}") from None

