"""Model families: one module each behind one interface (:class:`Family`), one registry.

==========  ===========================================  =====================================
family      model                                        exact reference
==========  ===========================================  =====================================
``markov``  the program's ``random_table`` target         DP over the tables (:mod:`.markov`)
``iid``     the notebook's stub, fresh N(0, σ²) logits   labelled quadrature (:mod:`.iid`)
``custom``  the user's .npy/.csv tables                   DP over the tables (:mod:`.custom`)
``trace``   a real pair's recorded (p_t, q_t) along text  positional DP (:mod:`.trace`)
==========  ===========================================  =====================================

The config's ``family:`` value is a key of :data:`FAMILIES`; the schema's ``family`` enum must
list exactly these keys (tests/unit/families/test_families.py holds them in step).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from specsim.errors import ConfigError
from specsim.families.base import (
    COMMON_KEYS,
    KNOBS,
    EquivalenceModel,
    Family,
    Knob,
    PairSampler,
    TablePair,
)
from specsim.families.custom import CustomFamily
from specsim.families.iid import IidFamily
from specsim.families.markov import MarkovFamily, TableFamily
from specsim.families.trace import TraceFamily
from specsim.models.spec import ModelSpec
from specsim.sampling import FloatArray

__all__ = [
    "COMMON_KEYS",
    "FAMILIES",
    "KNOBS",
    "EquivalenceModel",
    "Family",
    "Knob",
    "PairSampler",
    "TableFamily",
    "TablePair",
    "family_of",
    "markov_pair",
    "model_identity",
]

FAMILIES: Mapping[str, Family] = MappingProxyType({
    f.name: f for f in (MarkovFamily(), IidFamily(), CustomFamily(), TraceFamily())
})


def family_of(spec_or_name: ModelSpec | str) -> Family:
    """The family of a spec, or of a config's ``family:`` value."""
    name = spec_or_name if isinstance(spec_or_name, str) else spec_or_name.family
    try:
        return FAMILIES[name]
    except KeyError:
        raise ConfigError(f"family {name!r} is not a model family; known: "
                          f"{sorted(FAMILIES)}") from None


def model_identity(spec: ModelSpec) -> dict[str, Any]:
    """A model's canonical dict: two specs are the same model iff their dicts are equal.

    ``family``, ``vocab``, the draft (:meth:`ModelSpec.draft_dict`), then the family's own
    settings (:meth:`Family.describe`). Point ids and seeds hash this dict, so its output for an
    existing model must never change (tests/unit/families/test_families.py pins it).
    """
    out: dict[str, Any] = {"family": spec.family, "vocab": spec.vocab, "draft": spec.draft_dict()}
    return out | family_of(spec).describe(spec)


def markov_pair(spec: ModelSpec, temperature: float,
                alpha: float | None) -> tuple[FloatArray, FloatArray]:
    """Target P and draft Q (V, V) of a table model at a sampling temperature; ValueError for
    a model of a family without tables (:class:`TableFamily`)."""
    family = family_of(spec)
    if not isinstance(family, TableFamily):
        raise ValueError(f"model {spec.name!r} is not a table model (family {spec.family!r})")
    return family.pair(spec, temperature, alpha)
