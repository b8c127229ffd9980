"""The measures a grid point can be run under, behind one interface (:class:`Measure`).

``long_run`` (:mod:`.long_run`): tokens per target call and acceptance over many rounds;
``equivalence`` (:mod:`.equivalence`): the law of the first two emitted tokens against the
target's; ``scheme`` (:mod:`.scheme`): both, for a verification scheme under a draft-length
policy (``schemes`` studies).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from specsim.errors import ConfigError
from specsim.measures.base import Measure
from specsim.measures.equivalence import Equivalence
from specsim.measures.long_run import LongRun
from specsim.measures.scheme import SchemeMeasure

__all__ = ["MEASURES", "Measure", "for_analysis", "measure_of"]

MEASURES: Final[Mapping[str, Measure]] = MappingProxyType(
    {m.name: m for m in (LongRun(), Equivalence(), SchemeMeasure())})


def measure_of(name: str) -> Measure:
    """The measure a point's ``measure`` value names."""
    try:
        return MEASURES[name]
    except KeyError:
        raise ConfigError(f"unknown measure {name!r}; the measures are {list(MEASURES)}") from None


def for_analysis(analysis: str) -> Measure:
    """The measure a study of ``analysis`` runs its points under: the one that names the
    analysis among its :attr:`Measure.analyses`, else the long run (what every other analysis
    reads)."""
    return next((m for m in MEASURES.values() if analysis in m.analyses), MEASURES["long_run"])
