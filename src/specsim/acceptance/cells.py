"""A CSV cell read as a number, refused in one line naming the cell: the one home of the
parsing the latency profile (:mod:`.latency`) and the runs file (:mod:`.runs`) share."""

from __future__ import annotations

__all__ = ["number", "whole"]


def number(text: str, where: str, error: type[Exception]) -> float:
    """``text`` as a float, else ``error`` naming ``where``."""
    try:
        return float(text)
    except ValueError:
        raise error(f"{where}: {text!r} is not a number") from None


def whole(text: str, where: str, least: int, error: type[Exception]) -> int:
    """``text`` as a whole number >= ``least`` (``3.0`` included), else ``error``."""
    value = number(text, where, error)
    if not value.is_integer() or value < least:
        raise error(f"{where}: {text!r} must be a whole number >= {least}")
    return int(value)
