"""The verification step of speculative decoding, for any draft and target probabilities.

Leviathan, Kalman & Matias 2022, "Fast Inference from Transformers via Speculative Decoding"
(arXiv 2211.17192), Algorithm 1, cited as [L]; Chen et al. 2023, "Accelerating Large Language
Model Decoding with Speculative Sampling" (arXiv 2302.01318), Algorithm 2, cited as [C].

One round, given the target's rows ``p`` at the γ+1 positions, the draft's rows ``q`` at the γ
drafted positions and the γ drafted tokens ``x``:

1. for i = 0, 1, ...: accept ``x_i`` with probability ``min(1, p_i(x_i) / q_i(x_i))``;
2. at the first rejection i, emit one token from the residual ``norm(max(p_i - q_i, 0))`` --
   from ``p_i`` itself when the residual has no mass -- and stop;
3. if all γ drafts are accepted, emit a bonus token from ``p_γ``.

The round emits the accepted drafts and then that one token ([L] Thm 3.5, [C] Thm 1: each
emitted token has the target's law). Everything specsim simulates goes through the pieces
below -- :data:`RULES`, :func:`accept`, :func:`acceptance_probability`, :func:`residual`,
:func:`rejection_distribution` and :func:`first_rejection` -- so the acceptance test and the
residual are written once: the Markov engine tabulates them per (context, token) cell, the
n-gram and LLM experiments and :func:`verify` apply them to explicit rows.

The public entry point is :func:`verify` (re-exported as ``specsim.verify``), batched over
arbitrary leading axes in the layout of Hugging Face transformers' ``_speculative_sampling``
(``p`` (batch, γ+1, V), ``q`` (batch, γ, V)) and vLLM's rejection sampler (output tokens
(batch, γ+1) padded with the placeholder -1). Because ``specsim.verify`` is the function, import
this package's other names with ``from specsim.verify import ...``; they live in

* :mod:`~specsim.verify.rules` -- the one table of rules, :data:`RULES` (:class:`RuleSpec`,
  :class:`KnobSpec`): ``correct`` (Alg. 1), three deliberate breakages of the seed program's
  ``verify_round``, and the literature's schemes played under :mod:`specsim.schemes`;
* :mod:`~specsim.verify.steps` -- the pieces of one step listed above;
* :mod:`~specsim.verify.kernel` -- one batched round: :func:`verify`, :func:`verify_uniforms`
  (:func:`accepted_uniforms`, its accepted count alone) and the input checks.
"""

from specsim.verify.kernel import (
    BLOCK,
    PLACEHOLDER,
    ROW_TOL,
    VerifyResult,
    accepted_uniforms,
    check_round,
    check_rows,
    verify,
    verify_uniforms,
)
from specsim.verify.rules import (
    CLASSIC_RULES,
    RULE_NAMES,
    RULES,
    KnobSpec,
    Rule,
    RuleSpec,
    rule_spec,
)
from specsim.verify.steps import (
    accept,
    acceptance_probability,
    first_rejection,
    rejection_distribution,
    residual,
)

__all__ = [
    "BLOCK",
    "CLASSIC_RULES",
    "PLACEHOLDER",
    "ROW_TOL",
    "RULES",
    "RULE_NAMES",
    "KnobSpec",
    "Rule",
    "RuleSpec",
    "VerifyResult",
    "accept",
    "acceptance_probability",
    "accepted_uniforms",
    "check_round",
    "check_rows",
    "first_rejection",
    "rejection_distribution",
    "residual",
    "rule_spec",
    "verify",
    "verify_uniforms",
]
