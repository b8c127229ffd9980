"""The exception a config that cannot be used raises, from every layer that checks one.

The families check their ``models:`` entries, the grid its studies, :mod:`specsim.config` the
schema and the YAML, :mod:`specsim.work` the work asked for: all raise :class:`ConfigError`, so
it sits below all of them and imports nothing.
"""


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the key, the value and the fix."""
