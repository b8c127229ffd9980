"""``trace``: a real draft/target pair, as the trace of its next-token distributions along text.

A ``models:`` entry names a trace one of two ways:

* ``{family: trace, file: path/to/trace.parquet}`` -- a trace file of the documented schema
  (:mod:`specsim.traces.format`: written by ``specsim record``, or from logged probabilities
  such as vLLM's logprobs). It is read and checked whole when the config is read, so a bad
  file stops the run before any job, naming the key, the file and the column; its sha256 is in
  the model's identity (editing the file reruns exactly the points that use it).
* ``{family: trace, pair: ngram_o2}`` -- a trace the DAG records itself (rule
  ``realtext_record``, :data:`specsim.realtext_settings.TRACE_PATH`) for a pair of the
  ``realtext:`` stage; its identity is the pair's name and the realtext sections that shape
  the recording (:data:`specsim.realtext_settings.TRACE_SECTIONS`), and a point job lists the
  trace file as its input (:meth:`TraceFamily.inputs`).

The draft is the recorded one (draft kind ``recorded``, no knob to sweep, no calibrated α) and
the distributions are those recorded: at 1.0, and for a pair also at the realtext section's
``trace.temperatures`` (both full rows tempered, :func:`trace_path`). Argmax drafting (study key
``drafting``) makes each q_t one-hot on its argmax when the trace is loaded (:func:`load_trace`,
:mod:`specsim.traces.drafting`), so every analysis below runs it unchanged.
``vocab`` is the number of stand-in tokens the lossless check tells apart (each position's
vocab-1 most likely support tokens by p, and the rest pooled; default :data:`DEFAULT_TOKENS`):
the trace's own vocabulary (its metadata) is not a grid setting.

Every number is exact under the positional model (:mod:`specsim.traces.positional`: a round from
position t meets the pairs t, t+1, ...; documents traversed by a backward DP, tokens per target
call = Σ T_d / Σ E[calls_d]), with Monte Carlo of the same model beside it. Acceptance per
position is the recorded α_t (q_t(argmax p_t) for ``greedy``); ``alpha_bar`` is the plain mean
of that acceptance over the trace's positions (every position of the text once). Schemes and
policies run by :mod:`specsim.traces.schemes`; the equivalence check on the frozen pairs of
document 0's first γ+2 positions (:mod:`specsim.traces.frozen`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from specsim.engine import CHUNK
from specsim.errors import ConfigError
from specsim.families.base import COMMON_KEYS, EquivalenceModel, Family, TablePair
from specsim.models.files import TABLE_PATH, file_digest
from specsim.models.spec import ModelSpec
from specsim.realtext_settings import (
    Settings,
    recorded_pairs,
    tempered_trace_path,
    trace_settings,
    trace_temperatures,
)
from specsim.resources import FLOPS_PER_CORE_SECOND, Footprint
from specsim.traces import optimal as trace_optimal
from specsim.traces import positional
from specsim.traces import schemes as trace_schemes
from specsim.traces.drafting import argmax_drafted
from specsim.traces.format import Trace, TraceFileError, read_trace
from specsim.traces.frozen import dense_rows, slot_ranks, window_chain, window_positions
from specsim.traces.rates import TraceRates
from specsim.verify import rule_spec

if TYPE_CHECKING:
    from specsim.families.base import Point
    from specsim.schemes import Scheme

__all__ = ["DEFAULT_TOKENS", "TraceFamily", "load_trace", "trace_path"]

DEFAULT_TOKENS = 16  # stand-in tokens of the lossless check when the entry sets no vocab
RECORDED_TEMPERATURE = 1.0


def trace_path(spec: ModelSpec, temperature: float = RECORDED_TEMPERATURE) -> str:
    """The trace file of a trace model at a temperature: its ``file:`` (recorded at 1.0), or
    where the DAG records its pair then (:func:`specsim.realtext_settings.tempered_trace_path`)."""
    if spec.trace_file is not None:
        assert float(temperature) == RECORDED_TEMPERATURE, (spec, temperature)
        return spec.trace_file
    assert spec.trace_pair is not None, spec
    return tempered_trace_path(spec.trace_pair, temperature)


@lru_cache(maxsize=4)
def _read(path: str, size: int, mtime_ns: int, drafting: str) -> Trace:
    trace = read_trace(path)
    return argmax_drafted(trace) if drafting == "argmax" else trace


def load_trace(spec: ModelSpec, temperature: float = RECORDED_TEMPERATURE) -> Trace:
    """The model's trace at a temperature as its drafting mode drafts from it (argmax: every
    q_t one-hot on its argmax), read and checked once per (file, size, mtime) in a process."""
    path = trace_path(spec, temperature)
    try:
        st = os.stat(path)
    except OSError:
        raise TraceFileError(f"{path}: no such trace file") from None
    try:
        return _read(str(Path(path).resolve()), st.st_size, st.st_mtime_ns, spec.drafting)
    except ValueError as err:
        raise TraceFileError(f"{path}: {err}") from None


def _check_file(key: str, path: str) -> None:
    """A relative .parquet path inside the working directory, readable as a trace."""
    where = f"{key}.file"
    if not TABLE_PATH.match(path) or ".." in Path(path).parts:
        raise ConfigError(f"{where}: {path!r} is not an allowed path: use a relative path of "
                          f"letters, digits, '_', '-', '.' and '/', without '..'")
    if not path.endswith(".parquet"):
        raise ConfigError(f"{where}: {path!r}: a trace is a .parquet file")
    try:
        read_trace(path)
    except TraceFileError as err:
        raise ConfigError(f"{where}: {err}") from None


@lru_cache(maxsize=8)
def _schedule(spec: ModelSpec, temperature: float, scheme: Scheme,
              gamma: int) -> tuple[Any, Any]:
    """A scheme's per-start laws and exact rates on the model's trace (simulation and exact
    reference of one point job share them)."""
    trace = load_trace(spec, temperature)
    laws = trace_schemes.schedule_laws(trace, scheme, gamma)
    return laws, trace_schemes.rates(laws, trace.doc_start)


def trace_size(spec: ModelSpec) -> tuple[int, int]:
    """(positions N, widest support W) of the model's trace: a user's file is read (the config
    check reads it already); a recorded pair's trace is bounded by the settings that record
    it (documents x length positions, the top-k support of p and of q: at most 2k)."""
    if spec.trace_file is not None:
        trace = load_trace(spec)
        return trace.n_positions, trace.width
    assert spec.trace_settings is not None
    return _recorded_size(spec.trace_settings)


@lru_cache(maxsize=8)
def _recorded_size(settings: str) -> tuple[int, int]:
    s = Settings.from_dict(json.loads(settings), partial=True)
    return s.trace_documents * s.trace_length, 2 * s.trace_top_k


class TraceFamily(Family):
    """A pair's trace (:mod:`specsim.traces`) under the positional model."""

    name = "trace"
    source = "user"
    settings = ("file", "pair")
    drafts = ("recorded",)
    stationary_schemes = False  # its schemes run by its own long run (scheme_exact/simulate)
    optimal_bound = False  # its tables are two positions of document 0, not the trace

    # ------------------------------------------------------------------ config
    def parse(self, name: str, entry: Mapping[str, Any],
              config: Mapping[str, Any] | None = None) -> ModelSpec:
        key = f"models.{name}"
        for k in entry:
            if k not in COMMON_KEYS and k not in self.settings:
                raise ConfigError(f"{key}.{k}: not a setting of a 'trace' model (its settings: "
                                  f"file or pair, vocab, draft)")
        draft = entry.get("draft", {"kind": "recorded"})
        if draft.get("kind") != "recorded" or len(draft) > 1:
            raise ConfigError(f"{key}.draft: a trace model's draft is the recorded one "
                              f"({{kind: recorded}}, no knobs, no calibrated alpha); got {draft}")
        if ("file" in entry) == ("pair" in entry):
            raise ConfigError(f"{key}: a trace model names its trace with exactly one of "
                              f"'file' (a trace file) or 'pair' (a pair the realtext stage "
                              f"records)")
        if "file" in entry:
            _check_file(key, str(entry["file"]))
        else:
            section = (config or {}).get("realtext")
            pairs = recorded_pairs(section)
            if entry["pair"] not in pairs:
                why = (f"the realtext section records {list(pairs)}" if section is not None
                       else "the config has no realtext: section, which records them")
                raise ConfigError(f"{key}.pair: {entry['pair']!r} is not a recorded pair "
                                  f"({why})")
        return self.build(name, entry, config)

    def build(self, name: str, entry: Mapping[str, Any],
              config: Mapping[str, Any] | None = None) -> ModelSpec:
        kw: dict[str, Any] = {"name": name, "family": self.name, "draft": "recorded",
                              "vocab": int(entry.get("vocab", DEFAULT_TOKENS))}
        if "file" in entry:
            kw["trace_file"] = str(entry["file"])
        else:
            section = (config or {}).get("realtext")
            if section is None:
                raise ConfigError(f"models.{name}.pair: needs the config's realtext: section")
            kw |= {"trace_pair": str(entry["pair"]), "trace_settings": trace_settings(section),
                   "trace_temperatures": trace_temperatures(section)}
        return ModelSpec(**kw)

    def spec_fields(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError("trace models are built by TraceFamily.build")

    def describe(self, spec: ModelSpec) -> dict[str, Any]:
        if spec.trace_file is not None:
            return {"trace": {"file": spec.trace_file, "sha256": file_digest(spec.trace_file)}}
        assert spec.trace_settings is not None
        return {"trace": {"pair": spec.trace_pair,
                          "realtext": json.loads(spec.trace_settings)}}

    def inputs(self, spec: ModelSpec, temperature: float = RECORDED_TEMPERATURE) -> tuple[str, ...]:
        return (trace_path(spec, temperature),) if spec.trace_pair is not None else ()

    def check_study(self, spec: ModelSpec, study: Mapping[str, Any], measure: str,
                    key: str) -> None:
        temps = [float(t) for t in study.get("temperature", [RECORDED_TEMPERATURE])]
        recorded = (RECORDED_TEMPERATURE, *spec.trace_temperatures)
        bad = [t for t in temps if t not in recorded]
        if bad:
            how = ("a trace file holds the distributions recorded at temperature 1.0"
                   if spec.trace_file is not None else
                   f"its pair's traces are recorded at {sorted(recorded)} (add others to "
                   f"realtext.trace.temperatures)")
            raise ConfigError(f"{key}.temperature: {spec.name!r} is a trace model: {how}, the "
                              f"only temperatures it runs at (got {bad[0]})")
        if measure == "long_run":
            kept = [r for r in study.get("rule", []) if rule_spec(r).keep_drafts]
            if kept:
                raise ConfigError(f"{key}.rule: {kept[0]!r} keeps drafts after a rejection; the "
                                  f"positional model of trace model {spec.name!r} counts "
                                  f"accepted drafts + 1 per round (run it in an equivalence "
                                  f"study)")

    def check_scheme(self, scheme: Any, spec: ModelSpec, gamma: int, key: str) -> None:
        """Every scheme and policy runs on a trace (:mod:`specsim.traces.schemes`; ``optimal``
        on the positional model, :mod:`specsim.traces.optimal`); a whole-draft rule computes
        every start's exact law on its window (on the W+1 stand-in tokens of its rows), so a
        trace on which that would take more than
        :data:`specsim.traces.schemes.MAX_WINDOW_SECONDS`, or beyond the rule's vocabulary
        limit, is refused (a recorded trace: by the size its settings bound,
        :func:`trace_size`; a rule whose time depends on the rows, traversal, when its point
        job has them)."""
        n, w = trace_size(spec)
        if not trace_schemes.window_laws_of(scheme):  # the lossless check plays it on the
            try:  # equivalence chain: (γ+2)(W+1)+1 states (optimal: its exact solution there
                scheme.footprint((gamma + 2) * (w + 1) + 1, w + 1, gamma, 1)  # must fit)
            except ValueError as err:
                raise ConfigError(f"{key}.gamma: trace model {spec.name!r}: the lossless check "
                                  f"plays the scheme on its {gamma + 2}-position equivalence "
                                  f"chain: {err}") from None
        try:
            scheme.check_vocab(w + 1, "the trace's W+1 stand-in tokens")
            trace_schemes.check_work(n, w, scheme, gamma, None if spec.trace_file is None
                                     else load_trace(spec))  # a file: its rows at hand
        except ValueError as err:
            raise ConfigError(f"{key}.rule: trace model {spec.name!r}: {err}") from None

    def check_alpha(self, spec: ModelSpec, alpha: float, temperature: float,
                    where: str) -> None:
        raise ConfigError(f"{where}: {spec.name!r} is a trace model: its draft is the recorded "
                          f"one, with no calibrated alpha")

    # ------------------------------------------------------------------ tables
    def tables(self, spec: ModelSpec, temperature: float, alpha: float | None) -> TablePair:
        """The frozen pairs of document 0's first two positions as a chain (the trace has no
        table of its own)."""
        P, Q, _ = window_chain(load_trace(spec, temperature), 0, 2)
        return P, Q

    def example_rows(self, spec: ModelSpec, temperature: float, alpha: float | None,
                     context: int) -> TablePair:
        """The pair at position ``context`` of the trace, on the ``vocab`` stand-in tokens
        (support tokens by p, the rest pooled in the last)."""
        trace = load_trace(spec, temperature)
        pos = np.array([min(int(context), trace.n_positions - 1)])
        p, q = dense_rows(trace, pos)
        ranks = slot_ranks(trace, pos, spec.vocab)[0]
        return cast(TablePair, (np.bincount(ranks, weights=p[0], minlength=spec.vocab),
                                np.bincount(ranks, weights=q[0], minlength=spec.vocab)))

    def equivalence_model(self, point: Point) -> EquivalenceModel:
        """The frozen pairs of document 0's first γ+2 positions (two rounds' worth) as a
        position-indexed chain; states map to the ``vocab`` stand-in tokens."""
        trace = load_trace(point.spec, point.temperature)
        length = point.gamma + 2
        P, Q, start = window_chain(trace, 0, length)
        ranks = slot_ranks(trace, window_positions(trace, 0, length), point.spec.vocab)
        return EquivalenceModel(P, Q, start, np.concatenate([ranks.ravel(), [0]]))

    # ------------------------------------------------------------------ measures
    def _law(self, point: Point, gamma: int | None = None) -> positional.PositionalLaw:
        trace = load_trace(point.spec, point.temperature)
        beta = positional.acceptance(trace, point.rule)
        return positional.positional_law(beta, trace.doc_start,
                                         point.gamma if gamma is None else gamma)

    def simulate_long_run(self, point: Point, seed: np.random.SeedSequence,
                          budget: Mapping[str, Any]) -> tuple[np.ndarray, int]:
        """Chains from the stationary law of round starts (no burn-in), rounds drawn from each
        start's exact law (:func:`specsim.traces.positional.simulate`): column k = emitted - 1
        (a round cut at a document's end counts the tokens it emitted)."""
        chains, rounds, batches = (int(budget[k]) for k in ("chains", "rounds", "batches"))
        hist = positional.simulate(self._law(point), np.random.default_rng(seed), chains,
                                   rounds, batches)
        return hist, 0

    def exact_long_run(self, point: Point, root_seed: int,
                       budget: Mapping[str, Any]) -> dict[str, Any]:
        """Exact under the positional model; acceptance counted as the simulation counts it
        (emitted - 1 hits of min(emitted, γ) tests per round, stationary law of starts)."""
        law = self._law(point)
        assert law.beta is not None  # a token-wise rule's law carries its acceptance
        g, k, accepted = point.gamma, np.arange(point.gamma + 1), law.accepted_law()
        hits, trials = float(k @ accepted), float(np.minimum(k + 1, g) @ accepted)
        return {
            "tokens_exact": law.tokens_per_call,
            "tokens_exact_se": 0.0,
            "tokens_stationary": law.tokens_per_call,
            "accept_rate_exact": hits / trials,
            "accept_fraction_exact": hits / g,
            "alpha_bar": float(np.mean(law.beta)),
            "exact_method": "positional_dp",
        }

    def exact_curve(self, point: Point, gammas: np.ndarray, root_seed: int,
                    budget: Mapping[str, Any]) -> tuple[np.ndarray, str]:
        return (np.asarray([self._law(point, int(g)).tokens_per_call for g in gammas],
                           dtype=np.float64), "positional_dp")

    def scheme_exact(self, point: Point, budget: Mapping[str, Any]) -> dict[str, Any]:
        assert point.scheme is not None
        laws, r = _schedule(point.spec, point.temperature, point.scheme, point.gamma)
        how = ("window laws" if laws.rows is None
               else "token-wise" if laws.thresholds is None else "optimal stopping DP")
        return {"tokens_exact": r.tokens_per_call, "drafted_exact": r.drafted_per_round,
                "tokens_stationary": r.tokens_per_call, "drafted_stationary": r.drafted_per_round,
                "tokens_law": r.tokens_law, "exact_method": f"positional_dp ({how})"}

    def scheme_simulate(self, point: Point, budget: Mapping[str, Any],
                        seed: np.random.SeedSequence, width: int
                        ) -> tuple[np.ndarray, np.ndarray, int]:
        assert point.scheme is not None
        laws, r = _schedule(point.spec, point.temperature, point.scheme, point.gamma)
        chains, rounds, batches = (int(budget[k]) for k in ("chains", "rounds", "batches"))
        hist, drafted = trace_schemes.simulate(load_trace(point.spec, point.temperature), laws,
                                               r.visits, seed, chains, rounds, batches, width)
        return hist, drafted, 0

    def rates(self, point: Point) -> TraceRates:
        """The trace's positional model (:class:`specsim.traces.rates.TraceRates`)."""
        return TraceRates(load_trace(point.spec, point.temperature))

    # ------------------------------------------------------------------ resources
    def chain_size(self, point: Point) -> tuple[int, int]:
        """The frozen window of γ+2 positions: (γ+2)(W+1) + 1 states, W+1 per row."""
        w = trace_size(point.spec)[1] + 1
        return (point.gamma + 2) * w + 1, w

    def model_footprint(self, point: Point) -> Footprint:
        """The trace as read (bytes, Arrow's table, arrays: ~11 float64 per N x (W+1) alone,
        ~14 in the parallel test suite; 24 declared), the window chain's tables."""
        n, w = trace_size(point.spec)
        s = self.chain_size(point)[0]
        return Footprint(24.0 * n * (w + 1) + 4.0 * s * s, 10.0 * n * (w + 1),
                         what=f"trace ({n} positions)")

    def long_run_footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint:
        """The positional law (~8 arrays of N x (γ+2)) and chains drawing from it."""
        n = trace_size(point.spec)[0]
        chains, rounds = int(budget["chains"]), int(budget["rounds"])
        law = Footprint(8.0 * n * (point.gamma + 2) + 8.0 * min(chains, CHUNK),
                        20.0 * n * (point.gamma + 2), chains * rounds,
                        what=f"positional law ({n} positions)")
        return law.plus(self.model_footprint(point))

    def scheme_footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint | None:
        """Per-start laws at every draft length the policy reaches (N x (g+2) each) from the
        dense rows (3 of N x (W+1)), or a whole-draft rule's ``window_law`` on chunks of starts
        (their window rows and the rule's own peak, :meth:`specsim.schemes.Scheme.window_cells`;
        its work from the rule's own time estimate),
        or the optimal policy's DP (:func:`specsim.traces.optimal.footprint`)."""
        assert point.scheme is not None
        n, w = trace_size(point.spec)
        chains, rounds = int(budget["chains"]), int(budget["rounds"])
        lengths = point.scheme.draft_lengths(point.gamma)  # as schedule_laws reads them
        laws = Footprint(3.0 * n * (w + 1) + sum(n * (g + 3.0) for g in lengths),
                         20.0 * n * (w + 1) * len(lengths), chains * rounds,
                         what=f"per-start laws ({n} positions)")
        if point.scheme.has_window_law:
            chunk = min(n, trace_schemes.WINDOW_CHUNK)
            rows = 4.0 * chunk * (point.gamma + 1) * (w + 1)  # a chunk's windows p, q
            seconds = point.scheme.window_seconds(n, w + 1, point.gamma)  # None: up to the cap
            seconds = trace_schemes.MAX_WINDOW_SECONDS if seconds is None else seconds
            laws = laws.then(Footprint(
                rows + point.scheme.window_cells(chunk, w + 1, point.gamma),
                seconds * FLOPS_PER_CORE_SECOND, what=f"window laws ({n} starts)"))
        elif point.scheme.optimal_cost is not None:
            laws = laws.then(trace_optimal.footprint(n, w + 1, point.gamma))
        return self.model_footprint(point).plus(laws)
