"""One settings mechanism for the stages beside the grid (the real-text stage, the LLM tier).

A stage's settings are a frozen dataclass subclassing :class:`StageSettings`: one field per
key of the stage's config section, its default the schema's. The section is either flat
(``llm:``, a field per key) or made of sub-sections (``realtext:``, :attr:`SECTIONS` maps each
to the prefix of its keys' fields: ``trace.top_k`` is the field ``trace_top_k``). The same code
reads both: unknown names and values of the wrong type are refused naming the key, lists become
tuples, and :meth:`StageSettings.check` runs the cross-field checks -- only those among the
names given, when a step is passed only what it reads (:attr:`STEPS`: step -> the top-level
names of the section it reads, so only their changes re-run it; :meth:`step_settings` writes
each step's JSON for its rule).

Snakemake imports the stages' settings at every parse: this module imports nothing beyond the
standard library.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection, Mapping
from dataclasses import asdict
from typing import Any, ClassVar, TypeVar

S = TypeVar("S", bound="StageSettings")
_SKIP = object()  # a name a step's JSON leaves out


class StageSettings:
    """Base of a stage's settings dataclass (module docstring)."""

    #: The config section's name (``realtext``, ``llm``), for messages.
    NAME: ClassVar[str] = ""
    #: Sub-section -> prefix of its keys' fields; empty: a flat section.
    SECTIONS: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: Step -> the top-level names of the section it reads.
    STEPS: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: The element type of list fields whose default is empty.
    ELEMENTS: ClassVar[Mapping[str, type]] = {}

    @classmethod
    def from_dict(cls: type[S], d: Mapping[str, Any], partial: bool = False,
                  step: str | None = None) -> S:
        """From the config section. ``step``: ``d`` holds the names that step reads
        (:attr:`STEPS`); ``partial``: ``d`` holds some names, the rest being defaults its
        caller does not use. Either way only the cross-field checks among those names run
        (the whole section is checked when the workflow is parsed)."""
        if not isinstance(d, Mapping):
            raise ValueError(f"the {cls.NAME} settings must be a mapping, got "
                             f"{type(d).__name__}")
        flat: dict[str, Any] = {}
        for name, value in d.items():
            for field, key, v in cls._entries(str(name), value):
                flat[field] = _typed(key, v, getattr(cls, field), cls.ELEMENTS.get(field))
        out = cls(**flat)
        out.check(set(cls.STEPS[step]) if step else set(d) if partial else None)
        return out

    @classmethod
    def _entries(cls, name: str, value: Any) -> list[tuple[str, str, Any]]:
        """(field, config key, value) of one top-level name of the section."""
        fields = cls.field_names()
        if not cls.SECTIONS:
            if name not in fields:
                raise ValueError(f"unknown {cls.NAME} setting {name!r}")
            return [(name, name, value)]
        prefixes = dict(cls.SECTIONS)
        if name not in prefixes:
            raise ValueError(f"unknown {cls.NAME} section {name!r}; known: "
                             f"{', '.join(prefixes)}")
        body = value or {}
        if not isinstance(body, Mapping):
            raise ValueError(f"{name}: must be a mapping of keys to values")
        out = []
        for key, v in body.items():
            field = prefixes[name] + str(key)
            if field not in fields:
                raise ValueError(f"unknown {cls.NAME} setting {name}.{key}")
            out.append((field, f"{name}.{key}", v))
        return out

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The settings' fields (the section's keys), in order."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """The config section these settings come from (lists for tuples)."""
        d = {k: list(v) if isinstance(v, tuple) else v
             for k, v in asdict(self).items()}  # type: ignore[call-overload]
        if not self.SECTIONS:
            return d
        out: dict[str, dict[str, Any]] = {section: {} for section, _ in self.SECTIONS}
        for field, value in d.items():
            section, key = self.key(field).split(".", 1)
            out[section][key] = value
        return out

    @classmethod
    def key(cls, field: str) -> str:
        """The config key of a field (``trace_top_k`` -> ``trace.top_k``): the longest
        prefix's section (an unprefixed section holds the fields no prefix claims)."""
        if not cls.SECTIONS:
            return field
        prefixed = [(len(p), s, p) for s, p in cls.SECTIONS if p and field.startswith(p)]
        if prefixed:
            _, section, prefix = max(prefixed)
            return f"{section}.{field[len(prefix):]}"
        return f"{cls.unprefixed(field)}.{field}"

    @classmethod
    def unprefixed(cls, field: str) -> str:
        """The section of a field whose name carries no prefix (a flat section: none)."""
        raise ValueError(f"{field}: no section")

    def check(self, given: Collection[str] | None = None) -> None:
        """Cross-field checks (the schema checks each key alone): only those among the
        top-level names ``given`` (None: all)."""

    @classmethod
    def view(cls, section: Mapping[str, Any], name: str) -> Any:
        """What a step is passed of one top-level name (:data:`_SKIP`: nothing)."""
        return section.get(name, _SKIP)

    @classmethod
    def step_settings(cls, section: Mapping[str, Any]) -> dict[str, str]:
        """Step -> JSON of the names of the section it reads (``--settings`` of its rule)."""
        out = {}
        for step, names in cls.STEPS.items():
            views = {n: cls.view(section, n) for n in names}
            out[step] = json.dumps({n: v for n, v in views.items() if v is not _SKIP},
                                   sort_keys=True)
        return out


def _typed(key: str, value: Any, default: Any, element: type | None = None) -> Any:
    """``value`` as the field whose default is ``default`` holds it, or ValueError naming
    ``key`` (a list becomes a tuple; an integer field takes no float or bool)."""
    listed = isinstance(default, tuple)
    kind = element or (type(default[0]) if listed and default else type(default))
    if listed and not isinstance(value, (list, tuple)):
        raise ValueError(f"{key}: must be a list, got {type(value).__name__}")
    for v in value if listed else [value]:
        ok = (isinstance(v, bool) if kind is bool else
              isinstance(v, int) and not isinstance(v, bool) if kind is int else
              isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
              if kind is float else isinstance(v, kind))
        if not ok:
            what = {int: "an integer", float: "a number", str: "a string",
                    bool: "true or false"}.get(kind, kind.__name__)
            raise ValueError(f"{key}: {str(v)[:40]!r} is not {what}")
    return tuple(value) if listed else value
