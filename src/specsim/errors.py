"""The exception a config that cannot be used raises, from every layer that checks one.

The families check their ``models:`` entries, the grid its studies, :mod:`specsim.config` the
schema and the YAML, :mod:`specsim.work` the work asked for: all raise :class:`ConfigError`, so
it sits below all of them and imports nothing.
"""


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the key, the value and the fix."""


def shown(value: object, limit: int = 60) -> str:
    """``repr`` of a value for a one-line message: cut to ``limit`` characters, and an integer
    too long to print (repr of one over 4300 digits raises) by its length."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        digits = int(value.bit_length() * 0.30103) + 1
        return f"{'a negative' if value < 0 else 'an'} integer of ~{digits} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class InputError(Exception):
    """An input or output path that cannot be used (a file in the way of a directory, a
    recorder already writing the same pair, ...); the message names it and what to do. The
    command line prints it as one line and exits with status 1."""
