"""The configuration reference, written from the schema (``workflow/schemas/config.schema.yaml``).

The schema is the one description of the config: every key's type, bounds, default and meaning.
:func:`keys` walks it (``$ref`` resolved, lists of objects as ``key[].field``, mappings of named
entries as ``key.<name>``) and :func:`markdown` writes the reference page of the documentation
site from it, one table per top-level section (``docs/_tools/hooks.py`` calls it when the site is
built). :func:`undescribed` names every key without a description; a test holds it empty.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Schema = Mapping[str, Any]


@dataclass(frozen=True)
class Key:
    """One key of the config: its dotted path and what the schema says of it."""

    path: str
    type: str
    bounds: str
    default: str
    description: str
    required: bool


def load(path: str | Path) -> dict[str, Any]:
    """The schema file, parsed."""
    import yaml

    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def _resolve(node: Schema, root: Schema) -> dict[str, Any]:
    """``node`` with its ``$ref`` (``#/definitions/<name>``) merged under its own keys."""
    if "$ref" not in node:
        return dict(node)
    target = root
    for part in node["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    merged = _resolve(target, root)
    merged.update({k: v for k, v in node.items() if k != "$ref"})
    return merged


def _type(node: Schema, root: Schema) -> str:
    node = _resolve(node, root)
    if "oneOf" in node:
        return " or ".join(_type(o, root) for o in node["oneOf"])
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type(node.get('items', {}), root)}"
    if kind == "object" and isinstance(node.get("additionalProperties"), Mapping):
        return f"mapping of names to {_type(node['additionalProperties'], root)}"
    if kind is None:
        return "string" if "enum" in node else "any"
    return str(kind)


def _bounds(node: Schema, root: Schema) -> str:
    node = _resolve(node, root)
    out = []
    low = ("≥", node["minimum"]) if "minimum" in node else (
        (">", node["exclusiveMinimum"]) if "exclusiveMinimum" in node else None)
    high = ("≤", node["maximum"]) if "maximum" in node else (
        ("<", node["exclusiveMaximum"]) if "exclusiveMaximum" in node else None)
    for sign, value in (b for b in (low, high) if b):
        out.append(f"{sign} {_number(value)}")
    if "enum" in node:
        out.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    if "pattern" in node:
        out.append(f"matches `{node['pattern']}`")
    for key, text in (("minLength", "at least {} characters"),
                      ("maxLength", "at most {} characters"), ("minItems", "at least {} items"),
                      ("maxItems", "at most {} items"), ("minProperties", "at least {} entries")):
        if key in node:
            out.append(text.format(node[key]))
    if node.get("uniqueItems"):
        out.append("no repeats")
    if node.get("type") == "array" and "items" in node:
        inner = _bounds(node["items"], root)
        if inner:
            out.append(f"each item {inner}")
    if "oneOf" in node:
        parts = [b for o in node["oneOf"] if (b := _bounds(o, root))]
        out += parts
    return "; ".join(out)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e6:
        return f"{value:g}".replace("e+0", "e").replace("e+", "e")
    return str(value)


def _walk(node: Schema, path: str, root: Schema) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(path, resolved node, required) of every key below ``node``."""
    node = _resolve(node, root)
    options = [_resolve(o, root) for o in node.get("oneOf", [])] or [node]
    for option in options:
        required = set(option.get("required", []))
        for name, child in option.get("properties", {}).items():
            sub = f"{path}.{name}" if path else name
            resolved = _resolve(child, root)
            yield sub, resolved, name in required
            yield from _walk(resolved, sub, root)
        extra = option.get("additionalProperties")
        if isinstance(extra, Mapping):
            sub = f"{path}.<{'knob' if path.endswith('knobs') else 'name'}>"
            resolved = _resolve(extra, root)
            yield sub, resolved, False
            yield from _walk(resolved, sub, root)
        if option.get("type") == "array" and isinstance(option.get("items"), Mapping):
            yield from _walk(option["items"], f"{path}[]", root)


def _default(value: Any) -> str:
    if isinstance(value, float):
        return _number(value)
    return json.dumps(value, ensure_ascii=False)


def keys(schema: Schema) -> list[Key]:
    """Every key of the config, in the schema's order."""
    out = []
    for path, node, required in _walk(schema, "", schema):
        default = _default(node["default"]) if "default" in node else ""
        out.append(Key(path, _type(node, schema), _bounds(node, schema), default,
                       " ".join(str(node.get("description", "")).split()), required))
    return out


def undescribed(schema: Schema) -> list[str]:
    """The paths of keys whose schema gives no description."""
    return [k.path for k in keys(schema) if not k.description]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    # pipes inside a code span still split a Markdown table cell unless escaped
    return "`" + text.replace("|", "\\|") + "`"


def markdown(schema: Schema) -> str:
    """The reference: the top-level settings in one table, then one table per section (a
    top-level mapping: its keys and everything below them)."""
    out = [" ".join(str(schema.get("description", "")).split()), ""]
    sections: dict[str, list[Key]] = {"": []}
    for key in keys(schema):
        top = key.path.split(".")[0].split("[")[0]
        section = top if key.type.startswith(("object", "mapping")) or top in sections else ""
        sections.setdefault(section, []).append(key)
    required = set(schema.get("required", []))
    for top, rows in sections.items():
        if top:
            head, rows = rows[0], rows[1:]
            out += [f"## `{top}`", "", _cell(head.description)
                    + (" **Required.**" if top in required else ""), ""]
        else:
            out += ["## Top-level settings", ""]
        out += ["| key | type | bounds | default | description |", "|---|---|---|---|---|"]
        for k in rows:
            default = _code(k.default) if k.default else ""
            req = " (required)" if k.required else ""
            out.append(f"| {_code(k.path)}{req} | {_cell(k.type)} | {_bounds_cell(k.bounds)} | "
                       f"{default} | {_cell(k.description)} |")
        out.append("")
    return "\n".join(out)


def _bounds_cell(bounds: str) -> str:
    # backticked parts (enums, patterns) keep their text; the rest is escaped for HTML
    parts = bounds.split("`")
    return "".join(_code(p) if i % 2 else _cell(p) for i, p in enumerate(parts))
