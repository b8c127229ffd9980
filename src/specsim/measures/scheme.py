"""``scheme``: one ``schemes`` grid point, Monte Carlo and exact, long run and lossless check.

A point names a model, α, γ, temperature and a :class:`~specsim.schemes.Scheme` (rule and
policy with their knobs). Its chain is the model family's equivalence chain (the Markov tables
themselves; the i.i.d. stub's frozen position-indexed pairs). Two quantities, each simulated
and exact:

* tokens per target call and draft tokens per round -- the family's own long run where it has
  one (a trace's positional traversal: :meth:`specsim.families.Family.scheme_exact`,
  :meth:`~specsim.families.Family.scheme_simulate`); else for table models the long run (chains
  from the start context, ``burn_in`` rounds discarded; exact: both the mean over exactly the
  simulated rounds, which the simulation must cover, and the long-run limit by renewal-reward
  over the long-run law of round starts from the start state,
  :func:`specsim.exact.stationary_rates` -- the stationary law, or where the round-start chain
  has several closed classes (greedy decoding, a near-deterministic target) the mixture of
  theirs that chains from the start reach), for the frozen i.i.d. pairs one round from the
  start (every pair fresh, as the stub's ``share: position``);
* the joint law of the first two emitted tokens from the start ([L] Thm 3.5's check, the seed
  program's demo 2): counts of ``scheme_trials`` fresh generations vs the scheme's exact law and
  the target's (:func:`specsim.exact.first_two_law`).

The long run is the engine's loop (:func:`specsim.engine.run_chains`) with the scheme's round.
Random streams: the point's SeedSequence spawns one child per chunk of at most
:data:`specsim.engine.CHUNK` chains (long run) and per chunk of generations, after the long
run's -- results depend only on the seed and the budget, never on job grouping or ``--cores``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from specsim import exact, stats
from specsim.engine import CHUNK, chunks, run_chains
from specsim.exact.footprints import first_two_footprint, rates_footprint
from specsim.io import PointSchema
from specsim.measures.base import JOINT2, LIST_F64, RUN_FIELDS, Measure, run_record
from specsim.measures.equivalence import collapse, lossless_estimates, target_first_two
from specsim.measures.long_run import ROUNDS_BUDGET
from specsim.resources import Footprint
from specsim.sampling import IntArray

if TYPE_CHECKING:
    from specsim.families.base import Point

__all__ = ["SchemeMeasure"]

SCHEME_SIM = PointSchema("scheme_sim", pa.schema([
    *RUN_FIELDS,
    # tokens emitted per round: histogram per batch of chains, flattened (batches * width)
    pa.field("width", pa.int32(), nullable=False),
    pa.field("tokens_hist", pa.list_(pa.int64()), nullable=False),
    # draft tokens proposed, summed per batch (batches,)
    pa.field("drafted", pa.list_(pa.int64()), nullable=False),
    JOINT2,
]))
SCHEME_EXACT = PointSchema("scheme_exact", pa.schema([
    pa.field("point_id", pa.string(), nullable=False),
    pa.field("exact_method", pa.string(), nullable=False),
    pa.field("tokens_exact", pa.float64()),
    pa.field("drafted_exact", pa.float64()),
    pa.field("tokens_stationary", pa.float64()),
    pa.field("drafted_stationary", pa.float64()),
    pa.field("tokens_law", LIST_F64),
    pa.field("joint_target", LIST_F64),
    pa.field("joint_exact", LIST_F64),
    pa.field("tv_exact", pa.float64()),
]))


def width(point: Point) -> int:
    """Columns of the tokens-per-round histogram: 0 .. the most tokens a round can emit."""
    assert point.scheme is not None
    return max(point.scheme.draft_lengths(point.gamma)) + 2


def _lossless_point(point: Point, budget: Mapping[str, Any]) -> Point:
    """The point whose equivalence chain and draft length the scheme's round law and the
    lossless check's generations use. A family computing the long run itself (a trace) needs
    that law for the law of the first two tokens alone, which the first
    :meth:`specsim.schemes.Scheme.first_two_gamma` drafts decide: the point at that γ (a
    chain of γ+2 frozen positions shrinks with it; the caller keeps the point's own seed).
    Otherwise the point itself: its long run plays the same law at its own γ."""
    scheme = point.scheme
    assert scheme is not None
    if point.family.scheme_footprint(point, budget) is None:
        return point
    gamma = scheme.first_two_gamma(point.gamma)
    return point if gamma == point.gamma else dataclasses.replace(point, gamma=gamma)  # type: ignore[type-var]


def _simulate(point: Point, budget: Mapping[str, Any], root_seed: int) -> dict[str, Any]:
    """The point's sufficient statistics (one ``scheme_sim/1`` row)."""
    scheme = point.scheme
    assert scheme is not None
    check = _lossless_point(point, budget)
    p, q, start, token_of = point.family.equivalence_model(check)
    chains, rounds, burn_in, batches = (int(budget[k]) for k in ROUNDS_BUDGET)
    stationary = point.family.stationary_schemes
    burn_in = burn_in if stationary else 0
    trials = int(budget["scheme_trials"])
    w = width(point)
    seed = point.seed(root_seed)
    first = scheme.start(start, check.gamma, p.shape[0])
    on = scheme.on(p, q)  # the rule's tables, once for every round below

    def play(state: IntArray, rng: np.random.Generator) -> tuple[IntArray, IntArray, IntArray]:
        # the frozen i.i.d. pairs play every round from the start
        from_state = state if stationary else np.full_like(state, first)
        res = on.play(from_state, point.gamma, rng)
        return res.n_emitted, res.next_state, res.drafted

    def starts(n: int) -> IntArray:
        return np.full(n, first, dtype=np.intp)

    own = point.family.scheme_simulate(point, budget, seed, w)  # e.g. a trace's positions
    if own is None:
        hist, drafted = run_chains(play, starts, seed, chains, rounds, burn_in, batches, w)
    else:
        hist, drafted, burn_in = own
    vocab = point.spec.vocab
    counts = np.zeros(vocab * vocab, dtype=np.int64)
    for n, rng in chunks(trials, seed):  # the seed's next children, after the chains'
        one = on.play(starts(n), check.gamma, rng)
        a, b2 = one.tokens[:, 0].copy(), one.tokens[:, 1].copy()
        short = one.n_emitted < 2
        if short.any():
            again = on.play(one.next_state[short], check.gamma, rng)
            b2[short] = again.tokens[:, 0]
        counts += np.bincount(token_of[a] * vocab + token_of[b2], minlength=counts.size)
    return run_record(point, seed, chains=chains, rounds=rounds, burn_in=burn_in,
                      batches=batches, trials=trials) | {
        "width": w, "tokens_hist": hist.ravel().tolist(), "drafted": drafted.tolist(),
        "joint2": counts.tolist()}


def _law_refused(point: Point, budget: Mapping[str, Any]) -> str | None:
    """Why :func:`_exact` would find the scheme's exact law on the equivalence chain refused
    (the module's own words where it gives them: :class:`specsim.schemes.law.LawSize`), or
    None."""
    scheme = point.scheme
    assert scheme is not None
    check = _lossless_point(point, budget)
    s, d = point.family.chain_size(check)
    chains, trials = int(budget["chains"]), int(budget["scheme_trials"])
    size = scheme.footprint(s, d, check.gamma, min(max(chains, trials), CHUNK))
    if size.law is not None:
        return None
    return size.refused or f"its exact law on {s} states is beyond what it computes"


def _refusal(point: Point, budget: Mapping[str, Any]) -> str | None:
    """:func:`_law_refused`, where the long run needs that law; a family computing the long
    run itself (a trace) keeps only its lossless check Monte Carlo (:func:`_monte_carlo_only`),
    and is not refused."""
    if point.family.scheme_footprint(point, budget) is not None:
        return None
    return _law_refused(point, budget)


def _monte_carlo_only(point: Point, budget: Mapping[str, Any]) -> str | None:
    """A family's own long run (a trace) beside a refused law on the equivalence chain: the
    lossless check is the G-test alone (``exact_method`` "...; lossless mc_only";
    :mod:`specsim.checks.schemes` reads no exact law there)."""
    if point.family.scheme_footprint(point, budget) is None:
        return None
    why = _law_refused(point, budget)
    return None if why is None else (
        f"the lossless check of model {point.model!r}, rule {point.rule}, gamma "
        f"{point.gamma} is the G-test alone ({why})")


def _footprint(point: Point, budget: Mapping[str, Any]) -> Footprint:
    """What :func:`_simulate` and :func:`_exact` cost: the scheme's rounds on chunks of chains
    (or the family's own long run), then its exact law with the long-run rates over its N
    states and the law of the first two tokens (:meth:`specsim.schemes.Scheme.footprint`)."""
    scheme = point.scheme
    assert scheme is not None
    check = _lossless_point(point, budget)
    s, d = point.family.chain_size(check)
    chains, rounds, burn_in = (int(budget[k]) for k in ("chains", "rounds", "burn_in"))
    trials = int(budget["scheme_trials"])
    size = scheme.footprint(s, d, check.gamma, min(max(chains, trials), CHUNK))
    held = Footprint(2.0 * s * s + 4.0 * point.spec.vocab ** 2)  # P, Q; counts, laws of tokens
    own = point.family.scheme_footprint(point, budget)
    calls, played = 2 * -(-trials // CHUNK), trials  # a generation may take a second round
    if own is None:
        calls += -(-chains // CHUNK) * (rounds + burn_in)
        played += chains * (rounds + burn_in)
    sim = size.play.repeated(calls).plus(held, Footprint(rounds=played))
    exact = Footprint()
    if size.law is not None:
        n = size.states
        rates = (rates_footprint(n, burn_in + rounds)
                 if own is None and point.family.stationary_schemes else Footprint())
        exact = size.law.plus(held).then(
            Footprint(size.law.cells).plus(held, rates.then(first_two_footprint(n, s))))
        exact = exact.named(size.law.what)
    return point.family.model_footprint(point).then(sim, exact, *([own] if own else []))


def _exact(point: Point, budget: Mapping[str, Any]) -> dict[str, Any]:
    """The point's exact reference (one ``scheme_exact/1`` row)."""
    scheme = point.scheme
    assert scheme is not None
    check = _lossless_point(point, budget)
    p, q, start, token_of = point.family.equivalence_model(check)
    vocab = point.spec.vocab
    target = target_first_two(p, start, token_of, vocab)
    row: dict[str, Any] = {"point_id": point.point_id, "joint_target": target.ravel().tolist()}
    own = point.family.scheme_exact(point, budget)  # e.g. a trace's positional traversal
    try:
        law = scheme.law(p, q, check.gamma)
    except ValueError as err:  # too large to enumerate: Monte Carlo only, said so
        if own is not None:  # the long run is the family's own: only the lossless check is MC
            return row | dict(own, tokens_law=list(own["tokens_law"]), joint_exact=[],
                              tv_exact=np.nan,
                              exact_method=f"{own['exact_method']}; lossless mc_only ({err})")
        return row | {"exact_method": f"mc_only ({err})", "tokens_exact": np.nan,
                      "drafted_exact": np.nan, "tokens_stationary": np.nan,
                      "drafted_stationary": np.nan, "tokens_law": [], "joint_exact": [],
                      "tv_exact": np.nan}
    first = scheme.start(start, check.gamma, p.shape[0])
    if own is not None:
        tokens, drafted = own["tokens_exact"], own["drafted_exact"]
        stat_tokens, stat_drafted = own["tokens_stationary"], own["drafted_stationary"]
        dist, method = own["tokens_law"], own["exact_method"]
    elif point.family.stationary_schemes:
        limit = exact.stationary_rates(law, first)  # the long run of chains from `first`
        stat_tokens, stat_drafted = limit.tokens_per_round, limit.drafted_per_round
        # the mean over exactly the simulated rounds, which the simulation must cover: it
        # differs from the limit only while a chain remembers its start (e.g. the heuristic
        # schedule started far above its typical draft length)
        seen = exact.horizon_rates(law, first, int(budget["burn_in"]), int(budget["rounds"]))
        tokens, drafted = seen.tokens_per_round, seen.drafted_per_round
        dist = limit.weights @ law.tokens
        method = "stationary"
    else:
        tokens, drafted = float(law.mean_tokens[first]), float(law.drafted[first])
        stat_tokens, stat_drafted = tokens, drafted
        dist = law.tokens[first]
        method = "first_round"
    joint = collapse(exact.first_two_law(law, first), token_of, vocab)
    return row | {"exact_method": method, "tokens_exact": tokens, "drafted_exact": drafted,
                  "tokens_stationary": stat_tokens, "drafted_stationary": stat_drafted,
                  "tokens_law": np.asarray(dist, dtype=np.float64).tolist(),
                  "joint_exact": joint.ravel().tolist(), "tv_exact": exact.tv(joint, target)}


class SchemeMeasure(Measure):
    name = "scheme"
    budget = (*ROUNDS_BUDGET, "scheme_trials")
    sim_schema = SCHEME_SIM
    exact_schema = SCHEME_EXACT
    analyses = ("schemes",)

    def simulate(self, point: Point, budget: Mapping[str, Any],
                 root_seed: int) -> dict[str, Any]:
        return _simulate(point, budget, root_seed)

    def exact(self, point: Point, budget: Mapping[str, Any], root_seed: int) -> dict[str, Any]:
        return _exact(point, budget)

    def estimate(self, row: Mapping[str, Any], level: float) -> dict[str, Any]:
        """Tokens per target call and draft tokens per round (batch-means CIs over chains),
        and the lossless check of the first two tokens."""
        w = int(row["width"])
        hist = np.asarray(row["tokens_hist"], dtype=np.int64).reshape(int(row["batches"]), w)
        rounds_b = hist.sum(axis=1)
        tokens_b = hist @ np.arange(w)
        tok, tlo, thi, tse = stats.batch_mean_interval(tokens_b, rounds_b)
        dr, dlo, dhi, _ = stats.batch_mean_interval(np.asarray(row["drafted"], dtype=np.int64),
                                                    rounds_b)
        return {"rounds_total": int(rounds_b.sum()), "tokens_per_round": tok,
                "tokens_ci_low": tlo, "tokens_ci_high": thi, "tokens_se": tse,
                "drafted_per_round": dr, "drafted_ci_low": dlo, "drafted_ci_high": dhi,
                "max_tokens_observed": int(np.flatnonzero(hist.sum(axis=0)).max()),
                # per batch, for speedups at any c (tables): ratio of sums with its own CI
                "tokens_batches": tokens_b.tolist(), "rounds_batches": rounds_b.tolist(),
                "drafted_batches": list(row["drafted"]),
                } | lossless_estimates(row, level)

    def work(self, budget: Mapping[str, Any]) -> int:
        return (int(budget["chains"]) * (int(budget["rounds"]) + int(budget["burn_in"]))
                + int(budget["scheme_trials"]))

    def footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint:
        return _footprint(point, budget)

    def refusal(self, point: Point, budget: Mapping[str, Any]) -> str | None:
        return _refusal(point, budget)

    def impossible(self, point: Point) -> str | None:
        """The scheme's own refusal on the point's tables (:meth:`specsim.schemes.Scheme.refusal`)
        where its long run is the equivalence chain's (a table model; a trace's tables are
        written by the DAG, after the dry run)."""
        scheme = point.scheme
        assert scheme is not None
        if not scheme.refuses or not point.family.stationary_schemes:
            return None
        p, q, _, _ = point.family.equivalence_model(point)
        why = scheme.refusal(p, q, point.gamma)
        return None if why is None else f"at temperature {point.temperature:g}: {why}"

    def monte_carlo_only(self, point: Point, budget: Mapping[str, Any]) -> str | None:
        return _monte_carlo_only(point, budget)

    def work_done(self, sim: Mapping[str, Any]) -> str:
        return (f"{sim['chains'] * (sim['rounds'] + sim['burn_in']):,} rounds and "
                f"{sim['trials']:,} generations")
