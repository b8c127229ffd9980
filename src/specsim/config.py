"""Config validation: the JSON schema (with defaults filled in) plus cross-field checks.

One code path for Snakemake (``workflow/rules/common.smk``) and for the tests: a bad config
raises :class:`specsim.grid.ConfigError` naming the key, the value and what is allowed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from specsim.grid import ConfigError, Grid, _check_finite, build_grid


def _with_defaults(cls: Any) -> Any:
    """A validator class that fills in ``default`` values while validating (jsonschema recipe)."""
    validate_properties = cls.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: dict[str, Any], instance: Any,
                     schema: dict[str, Any]) -> Iterator[Any]:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(prop, copy.deepcopy(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": set_defaults})


_Validator = _with_defaults(jsonschema.Draft7Validator)


def _where(path: Any) -> str:
    out = "config"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate_config(config: Any, schema_path: str | Path) -> dict[str, Any]:
    """Validate ``config`` in place (defaults filled in) and return it; raise ConfigError."""
    if not isinstance(config, dict):
        raise ConfigError(f"the config must be a YAML mapping of keys to values, got "
                          f"{type(config).__name__}: {config!r:.80}")
    _check_finite(config, "config")
    schema = yaml.safe_load(Path(schema_path).read_text())
    errors = sorted(_Validator(schema).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        detail = err.message
        if err.validator == "oneOf":  # name what is allowed rather than jsonschema's summary
            detail = f"{err.instance!r} is not a valid {err.schema.get('description', 'value')}"
        raise ConfigError(f"{_where(err.absolute_path)}: {detail}{more}")
    return config


def load_grid(config: Any, schema_path: str | Path) -> Grid:
    """Schema, then cross-field checks: the grid every rule works from."""
    return build_grid(validate_config(config, schema_path))


def read_config(path: str | Path) -> Any:
    """Load a YAML file, naming the file when it is not valid YAML."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({err})") from None
