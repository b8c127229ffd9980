"""The ``llm:`` section of the config (opt-in), and the settings each step of
workflow/rules/stages.smk reads (its tables and figures: their declarations,
:mod:`specsim.outputs.llm`).

Snakemake imports this module every time it parses the workflow, so it imports nothing beyond
the standard library. The section's keys are the fields of :class:`Settings` but ``seed``, which
is the config's root ``seed``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from specsim.stage_settings import StageSettings

N_LAYERS = 30  # SmolLM2-135M's decoder layers: a skip-k draft keeps the first k
#: Where the models run and in what floating-point type (keys ``device`` / ``dtype``).
DEVICES = ("cpu", "cuda", "mps")
DTYPES = ("float32", "bfloat16", "float16")
#: The keys that decide where the models run (every step that loads one reads them).
PLACE_KEYS = ("device", "dtype")
#: The keys that decide which drafts exist (:meth:`Settings.draft_names`).
DRAFT_KEYS = ("ngram_orders", "int8", "skip_layers")


@dataclass(frozen=True)
class Settings(StageSettings):
    """Every knob of the LLM experiment (defaults: the schema's; a full run in ~3 minutes on
    2 quiet cores), read and written by :class:`specsim.stage_settings.StageSettings` (a flat
    section)."""

    NAME: ClassVar[str] = "llm"

    threads: int = 2
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 20221117
    holdout_every: int = 10
    ngram_orders: tuple[int, ...] = (1, 2, 3)
    int8: bool = True
    skip_layers: tuple[int, ...] = (10, 20)
    heldout_windows: int = 4
    heldout_window_tokens: int = 128
    int8_windows: int = 2
    drafts: tuple[str, ...] = ("ngram-3", "int8", "skip-20")  # run in speculative sampling
    gamma: tuple[int, ...] = (1, 2, 4)
    prompts: int = 2
    prompt_tokens: int = 48
    new_tokens: int = 32
    cost_context_tokens: int = 128
    cost_max_positions: int = 17
    cost_repeats: int = 5
    lossless_prompt: str = "The standard library module"
    lossless_draft: str = "ngram-2"
    lossless_gamma: int = 2
    lossless_top: int = 24
    lossless_trials: int = 400_000
    assisted_drafts: tuple[str, ...] = ("int8",)  # also run in transformers' assisted generation
    lossless_assisted_draft: str = "int8"
    lossless_assisted_trials: int = 200
    audit_prompt: str = "The function returns a"  # the lossless audit (llm/audit.py)
    audit_draft: str = "int8"
    audit_trials: int = 200  # assisted generate calls per sampling setting
    audit_bins: int = 8
    audit_power_draws: int = 2000
    matmul_size: int = 2048
    copy_mib: int = 512
    # the pairs traced, predicted and measured (:mod:`.pairs`): one job per pair and step
    trace_pairs: tuple[str, ...] = ("ngram-3", "int8", "skip-20")
    trace_documents: int = 10
    trace_tokens: int = 16
    trace_top_k: int = 64
    trace_batch: int = 1  # documents per forward pass (the trace is the same up to rounding)
    # the batched engine check (:mod:`.engine_check`)
    engine_draft: str = "int8"
    engine_batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    engine_gamma: int = 4
    engine_max_gamma: int = 6
    engine_record_tokens: int = 32
    engine_new_tokens: int = 16
    engine_repeats: int = 3
    engine_latency_repeats: int = 5

    def draft_names(self) -> list[str]:
        return ([f"ngram-{k}" for k in self.ngram_orders] + ["int8"] * self.int8
                + [f"skip-{k}" for k in self.skip_layers])

    def check(self, given: Collection[str] | None = None) -> None:
        """Cross-field checks (the schema checks each key alone); those among the keys
        ``given`` (a step's: the workflow checks the whole section once, when it parses)."""
        keys = set(self.field_names() if given is None else given)

        def about(*names: str) -> bool:
            return set(names) <= keys

        known = set(self.draft_names())
        named = [*(self.drafts if about("drafts", *DRAFT_KEYS) else ()),
                 *(self.assisted_drafts if about("assisted_drafts", *DRAFT_KEYS) else ()),
                 *((self.lossless_draft,) if about("lossless_draft", *DRAFT_KEYS) else ()),
                 *(self.trace_pairs if about("trace_pairs", *DRAFT_KEYS) else ()),
                 *((self.lossless_assisted_draft,)
                   if about("lossless_assisted_draft", *DRAFT_KEYS) else ()),
                 *((self.audit_draft,) if about("audit_draft", *DRAFT_KEYS) else ()),
                 *((self.engine_draft,) if about("engine_draft", *DRAFT_KEYS) else ())]
        bad = [d for d in named if d not in known]
        if bad:
            raise ValueError(f"drafts {bad} are not among the built drafts {sorted(known)}")
        if not self.lossless_draft.startswith("ngram-"):
            raise ValueError("lossless_draft must be an n-gram draft")
        # transformers' assisted generation needs a transformers model as the assistant
        if any(d.startswith("ngram-") for d in (*self.assisted_drafts,
                                                  self.lossless_assisted_draft)):
            raise ValueError("assisted_drafts and lossless_assisted_draft must be model drafts "
                             "(int8 or skip-k): transformers cannot use an n-gram as assistant")
        if self.audit_draft.startswith("ngram-"):
            raise ValueError("audit_draft must be a model draft (int8 or skip-k)")
        if self.engine_draft.startswith("ngram-"):
            raise ValueError("engine_draft must be a model draft (int8 or skip-k): the batched "
                             "loop keeps a KV cache per model")
        if about("device") and self.device not in DEVICES:
            raise ValueError(f"device {self.device!r}: choose one of {', '.join(DEVICES)}")
        if about("dtype") and self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r}: choose one of {', '.join(DTYPES)}")
        if about(*PLACE_KEYS):
            uses = [key for key, names in (
                ("int8", ("int8",) * self.int8), ("drafts", self.drafts),
                ("assisted_drafts", self.assisted_drafts), ("trace_pairs", self.trace_pairs),
                ("lossless_assisted_draft", (self.lossless_assisted_draft,)),
                ("audit_draft", (self.audit_draft,)), ("engine_draft", (self.engine_draft,)))
                if about(key) and "int8" in names]
            problem = int8_problem(self.device, self.dtype)
            if uses and problem:
                raise ValueError(f"{uses[0]}: {problem}")
        if any(not 1 <= k <= 3 for k in self.ngram_orders):
            raise ValueError("n-gram orders must lie in 1..3")
        if any(not 1 <= k < N_LAYERS for k in self.skip_layers):
            raise ValueError(f"skip_layers must lie in 1..{N_LAYERS - 1}")
        if any(g < 1 for g in self.gamma) or self.lossless_gamma < 1:
            raise ValueError("gamma must be >= 1")
        if self.engine_max_gamma < self.engine_gamma:
            raise ValueError("engine_max_gamma must be >= engine_gamma (the counters' K)")


def int8_problem(device: str, dtype: str) -> str | None:
    """Why the int8 draft cannot run on ``device`` in ``dtype`` (torch's dynamic quantisation
    runs on the CPU, from float32 weights), or None."""
    if (device, dtype) == ("cpu", "float32"):
        return None
    return (f"the int8 draft needs device cpu and dtype float32, not {device} {dtype} (torch's "
            f"dynamic quantisation runs on the CPU): drop it, or set int8: false")


#: Step (one Snakemake rule, one ``specsim llm`` sub-command) -> the settings it reads: a rule is
#: passed only those, so only a change to them re-runs it. ``machine`` records them all.
STEPS: dict[str, tuple[str, ...]] = {
    "corpus": ("holdout_every",),
    "device": ("threads", "matmul_size", "copy_mib", "cost_repeats"),
    "alpha": ("threads", *PLACE_KEYS, *DRAFT_KEYS, "heldout_windows", "heldout_window_tokens",
              "int8_windows"),
    "costs": ("threads", *PLACE_KEYS, *DRAFT_KEYS, "cost_context_tokens", "cost_max_positions",
              "cost_repeats"),
    "intensity": ("cost_context_tokens",),
    "speculative": ("threads", *PLACE_KEYS, "seed", *DRAFT_KEYS, "drafts", "gamma", "prompts",
                    "prompt_tokens", "new_tokens"),
    "assisted": ("threads", *PLACE_KEYS, "seed", *DRAFT_KEYS, "assisted_drafts", "gamma",
                 "prompts", "prompt_tokens", "new_tokens"),
    "lossless": ("threads", *PLACE_KEYS, "seed", "lossless_prompt", "lossless_draft",
                 "lossless_gamma", "lossless_top", "lossless_trials", "lossless_assisted_draft",
                 "lossless_assisted_trials"),
    "audit": ("threads", *PLACE_KEYS, "seed", "audit_prompt", "audit_draft", "audit_trials",
              "audit_bins", "audit_power_draws"),
    "figures": (),
    # one job per pair (the pair is the job's wildcard, not a setting): trace, then its runs
    "trace": ("threads", *PLACE_KEYS, "seed", "prompt_tokens", "trace_documents",
              "trace_tokens", "trace_top_k", "trace_batch"),
    "pair": ("threads", *PLACE_KEYS, "seed", "gamma", "prompt_tokens", "trace_documents",
             "trace_tokens"),
    "pairs": ("seed", "trace_pairs"),
    "engine": ("threads", *PLACE_KEYS, "seed", *DRAFT_KEYS, "prompt_tokens", "engine_draft",
               "engine_batches", "engine_gamma", "engine_max_gamma", "engine_record_tokens",
               "engine_new_tokens", "engine_repeats", "engine_latency_repeats"),
    "machine": Settings.field_names(),
}

Settings.STEPS = STEPS  # type: ignore[misc]


def step_settings(section: Mapping[str, Any], seed: int) -> dict[str, str]:
    """Step -> JSON of the settings it reads (``specsim llm --settings``), from the config's
    ``llm:`` section (schema defaults filled in) and its root ``seed``."""
    return Settings.step_settings({**section, "seed": seed})
