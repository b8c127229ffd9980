"""One ``models:`` entry of config.yaml (:class:`ModelSpec`) and its tables at a grid point.

What each family of ``models:`` entries is -- how its entry is read and checked, how a point
turns it into tables, what enters its identity -- lives in :mod:`specsim.families` (one module
per family behind one interface); this module holds the spec they all fill in and the table
pair of a table model (:func:`table_pair`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from specsim.models.files import check_path, check_table, file_digest, load_table
from specsim.models.maths import (
    argmax_draft,
    blend,
    calibrate,
    one_hot_argmin,
    random_table,
    temper,
)
from specsim.sampling import FloatArray

DraftKind = Literal["blend", "temper", "calibrated", "identical", "uniform", "noise", "file",
                    "recorded"]
#: How the draft proposes its tokens: ``sample`` draws them from q (Leviathan Alg. 1), ``argmax``
#: proposes q's most likely token, verified as the one-hot draft onehot(argmax q)
#: (:func:`specsim.models.maths.argmax_draft`; vLLM's v1 drafters). A study's ``drafting:``
#: list sweeps it.
Drafting = Literal["sample", "argmax"]
DRAFTINGS: tuple[Drafting, ...] = ("sample", "argmax")


@dataclass(frozen=True)
class TableSpec:
    """A ``random_table(seed, sharpness)`` or the special bases ``far`` / ``uniform``."""

    seed: int | None = None
    sharpness: float = 1.0
    special: str | None = None  # "far" or "uniform"

    @classmethod
    def from_dict(cls, d: Any) -> TableSpec:
        if isinstance(d, str):
            return cls(special=d)
        return cls(seed=int(d["seed"]), sharpness=float(d.get("sharpness", 1.0)))

    def to_dict(self) -> Any:
        return self.special if self.special else {"seed": self.seed, "sharpness": self.sharpness}

    def realise(self, target: FloatArray, vocab: int) -> FloatArray:
        if self.special == "far":
            return one_hot_argmin(target)
        if self.special == "uniform":
            return np.full((vocab, vocab), 1.0 / vocab)
        assert self.seed is not None
        return random_table(self.seed, self.sharpness, vocab)


@dataclass(frozen=True)
class ModelSpec:
    """One entry of ``models:`` in config.yaml, read by its family (:mod:`specsim.families`).

    The fields are the union of what the families store; each family reads and describes only
    its own (:meth:`specsim.families.Family.build`, :meth:`~specsim.families.Family.describe`).
    Job descriptions carry every field (:func:`specsim.job.describe`), identities only the
    canonical dict (:func:`specsim.families.model_identity`).
    """

    name: str
    family: str  # a key of specsim.families.FAMILIES
    vocab: int
    draft: DraftKind
    target_seed: int = 1  # markov
    sharpness: float = 2.5  # markov
    weight: float = 1.0  # blend
    draft_temperature: float = 1.0  # temper
    other: TableSpec = TableSpec(special="far")  # blend / calibrated base
    sigma: float = 1.0  # iid
    noise: float = 0.3  # iid
    share: Literal["round", "position"] = "round"  # iid: one (p, q) per round or per position
    seed: int = 0  # iid: seed of the frozen pairs used for the equivalence study
    target_file: str | None = None  # custom: the target table file
    draft_file: str | None = None  # custom: the draft table file (draft kind 'file')
    trace_file: str | None = None  # trace: the user's trace file
    trace_pair: str | None = None  # trace: a pair whose trace the DAG records
    trace_settings: str | None = None  # trace: JSON of the realtext sections that record it
    trace_temperatures: tuple[float, ...] = ()  # trace: temperatures a recorded pair's traces
    #                                             are also recorded at (besides 1.0)
    drafting: Drafting = "sample"  # how the draft proposes (a study's drafting: list)

    @property
    def calibrated(self) -> bool:
        return self.draft == "calibrated"

    def draft_dict(self) -> dict[str, Any]:
        """The draft's canonical description (the same for every family)."""
        draft: dict[str, Any] = {"kind": self.draft}
        if self.drafting != "sample":  # absent for sampled drafting (no mode key)
            draft["mode"] = self.drafting
        if self.draft == "blend":
            draft |= {"weight": self.weight, "other": self.other.to_dict()}
        elif self.draft == "temper":
            draft["temperature"] = self.draft_temperature
        elif self.draft == "calibrated":
            draft["other"] = self.other.to_dict()
        elif self.draft == "file":
            assert self.draft_file is not None
            draft |= {"file": self.draft_file, "sha256": file_digest(check_path(self.draft_file))}
        return draft


def drafted(spec: ModelSpec, q: FloatArray) -> FloatArray:
    """The draft rows ``q`` (last axis) as the spec's drafting mode proposes from them: q itself
    (``sample``) or onehot(argmax q) (``argmax``). Every family applies it where it builds its
    (p, q) at a temperature, after tempering, so each measure's exact law and simulation see
    the drafted rows and no rule knows of the mode."""
    return argmax_draft(q) if spec.drafting == "argmax" else q


def table_pair(
    spec: ModelSpec, base: FloatArray, temperature: float, alpha: float | None
) -> tuple[FloatArray, FloatArray]:
    """Target P and draft Q (both (V, V)) from the untempered target ``base``.

    Drafts are built from the untempered target, then both tables are standardised at the
    temperature (Leviathan §2.2). Calibrated drafts are built *after* tempering, so that the
    per-context acceptance is exactly ``alpha`` at every temperature. Argmax drafting takes the
    tempered draft's argmax (:func:`drafted`).
    """
    target = temper(base, temperature)
    if spec.draft == "calibrated":
        if alpha is None:
            raise ValueError(f"model {spec.name!r} has a calibrated draft and needs an alpha")
        return target, drafted(spec, calibrate(target, calibration_base(spec, target,
                                                                          temperature), alpha))
    return target, drafted(spec, temper(seed_draft(spec, base), temperature))


def calibration_base(spec: ModelSpec, target: FloatArray, temperature: float) -> FloatArray:
    """The 'other' table a calibrated draft blends the (tempered) target with."""
    other = spec.other.realise(target, spec.vocab)
    if spec.other.special is None:
        other = temper(other, temperature)
    return other


def seed_draft(spec: ModelSpec, base: FloatArray) -> FloatArray:
    """A table model's own (uncalibrated) draft from its untempered target ``base``."""
    if spec.draft == "file":
        assert spec.draft_file is not None
        return check_table(load_table(spec.draft_file), spec.name, "draft")
    if spec.draft == "blend":
        return blend(base, spec.other.realise(base, spec.vocab), spec.weight)
    if spec.draft == "temper":
        return temper(base, spec.draft_temperature)
    if spec.draft == "identical":
        return base.copy()
    if spec.draft == "uniform":
        return np.full_like(base, 1.0 / spec.vocab)
    raise ValueError(f"unknown draft kind {spec.draft!r} for model {spec.name!r}")

