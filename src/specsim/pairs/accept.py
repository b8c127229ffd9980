"""Predicted vs measured tokens per target call of a real pair: the ``pair_accept`` table.

*Predicted*: the positional law of the pair's trace (:func:`specsim.traces.positional.
positional_law`, rule ``correct``): Σ document lengths / Σ expected target calls to traverse
them, exact on the trace, with a bootstrap CI over its documents. *Measured*: speculative
generation with the same models from the trace's own prompts (one prompt a document), each
chain run until it has emitted its document's length: Σ tokens / Σ target calls, with a
bootstrap CI over prompts. Prompts are shared, so predicted − measured has a *paired* bootstrap
over prompts (one resample draws both ratios); ``covered``: its 95% interval contains 0.

One column schema (:data:`COLUMNS`) whichever backend measured (character n-grams, transformers)
and whichever engine ran the generation (specsim's loop, transformers' assisted generation).

Seed rule: the row's key is ``seed_for(seed, "pair_accept", pair, engine, gamma)``, spawned
into three children, in this order, for the predicted, measured and difference intervals.

Edge rules: Eq. 1 at the trace's mean α is :func:`specsim.exact.expected_tokens`, whose value
at α = 1 is its limit γ + 1 (no clamp); with fewer than two prompts no bootstrap resolves
anything, so every interval and ``difference_se`` are NaN and ``covered`` is False.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim import exact
from specsim.pairs.measure import RULE  # the rule the law predicts and the runs measure
from specsim.precision import covers
from specsim.seeds import seed_for
from specsim.traces.format import Trace
from specsim.traces.positional import (
    PositionalLaw,
    acceptance,
    bootstrap_ratio,
    paired_difference,
    positional_law,
)

#: The seed namespace of the table's intervals (module docstring).
NAMESPACE = "pair_accept"

#: The table's columns, in order (documented in :mod:`specsim.outputs.stage_tables`).
COLUMNS = (
    "pair", "engine", "gamma", "rule", "documents", "replicas", "tokens_per_document",
    "tokens_predicted", "tokens_predicted_ci_low", "tokens_predicted_ci_high",
    "tokens_measured", "tokens_measured_ci_low", "tokens_measured_ci_high",
    "difference", "difference_ci_low", "difference_ci_high", "difference_se",
    "relative_difference", "covered", "alpha_mean", "tokens_eq1_mean_alpha",
    "alpha_tested_predicted", "alpha_tested_measured", "alpha_first_predicted",
    "alpha_first_measured",
)

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Drafts:
    """What the measured runs' drafts did, summed over every prompt and replica: drafts tested
    inside the document, the sum of their β = Σ min(p, q), and the same for each round's first
    draft only. A backend whose runs do not see the drafts' rows passes none."""

    tested: float
    beta: float
    tested_first: float
    beta_first: float


@dataclass(frozen=True)
class Measured:
    """One engine's speculative generation from a trace's prompts at one γ: per prompt (D,),
    the target calls summed over its ``replicas`` chains, each chain run until it emitted its
    document's length."""

    calls: FloatArray
    replicas: int = 1
    drafts: Drafts | None = None


def interval_seeds(seed: int, pair: str, engine: str, gamma: int) -> tuple[int, int, int]:
    """The seed rule (module docstring): (predicted, measured, difference) bootstrap seeds."""
    key = seed_for(seed, NAMESPACE, pair, engine, int(gamma))
    pred, meas, diff = (int(x.generate_state(1)[0]) for x in key.spawn(3))
    return pred, meas, diff


def predicted_alpha(law: PositionalLaw) -> tuple[float, float]:
    """(mean β over the drafts tested, mean β of each round's first draft) under the
    positional law: acceptance by position weighted by the expected tests."""
    rate, _, weight = law.accept_by_position()
    return float((rate * weight).sum() / weight.sum()), float(rate[0])


def accept_row(trace: Trace, pair: str, engine: str, gamma: int, measured: Measured,
               seed: int, law: PositionalLaw | None = None) -> dict[str, Any]:
    """One row of the table (:data:`COLUMNS`): ``trace``'s prediction at ``gamma`` beside the
    measurement ``measured`` of ``engine``. ``law``: the trace's positional law at ``gamma``
    when the caller has it (else computed)."""
    calls = np.asarray(measured.calls, dtype=np.float64)
    if calls.shape != (trace.n_docs,):
        raise ValueError(f"pair {pair}: {calls.size} measured prompts but the trace has "
                         f"{trace.n_docs} documents (one prompt a document: record or run "
                         f"them again)")
    if law is None:
        law = positional_law(acceptance(trace, RULE), trace.doc_start, gamma)
    lengths = trace.doc_lengths.astype(np.float64)
    num = lengths * measured.replicas
    pred = law.tokens_per_call
    meas = float(num.sum() / calls.sum())
    s_pred, s_meas, s_diff = interval_seeds(seed, pair, engine, gamma)
    lo_p, hi_p = law.tokens_ci(s_pred)
    lo_m, hi_m = bootstrap_ratio(num, calls, s_meas)
    if calls.size < 2:
        lo_d = hi_d = se_d = float("nan")
    else:
        lo_d, hi_d, se_d = paired_difference(lengths, law.calls, num, calls, s_diff)
    alpha_mean = float(trace.alpha.mean())
    a_pred, a1_pred = predicted_alpha(law)
    d = measured.drafts
    return {
        "pair": pair, "engine": engine, "gamma": int(gamma), "rule": RULE,
        "documents": int(trace.n_docs), "replicas": int(measured.replicas),
        "tokens_per_document": int(lengths[0]) if np.all(lengths == lengths[0])
        else float(lengths.mean()),
        "tokens_predicted": pred, "tokens_predicted_ci_low": lo_p,
        "tokens_predicted_ci_high": hi_p,
        "tokens_measured": meas, "tokens_measured_ci_low": lo_m,
        "tokens_measured_ci_high": hi_m,
        "difference": pred - meas, "difference_ci_low": lo_d, "difference_ci_high": hi_d,
        "difference_se": se_d, "relative_difference": (pred - meas) / meas,
        "covered": bool(covers(lo_d, hi_d, 0.0)),
        "alpha_mean": alpha_mean,
        "tokens_eq1_mean_alpha": float(exact.expected_tokens(alpha_mean, gamma)),
        "alpha_tested_predicted": a_pred,
        "alpha_tested_measured": _ratio(d.beta, d.tested) if d else float("nan"),
        "alpha_first_predicted": a1_pred,
        "alpha_first_measured": _ratio(d.beta_first, d.tested_first) if d else float("nan"),
    }


def _ratio(num: float, den: float) -> float:
    """num / den, NaN when nothing was counted (no draft tested)."""
    return float(num) / float(den) if den else float("nan")
