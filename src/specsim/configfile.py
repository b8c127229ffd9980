"""Config files read strictly and in bounded work, before anything walks what they hold.

Snakemake loads a config file itself (JSON first, then YAML through YTE) and, where it cannot,
says only "not valid JSON or YAML". :func:`read_config` reads a file the way Snakemake does --
the same bytes, JSON tried first -- but refuses, in one line naming the file and the line:

* what Snakemake refuses with its generic message: invalid YAML (tabs that indent, a ``!tag``,
  a complex key, two documents), bytes that are not UTF-8, an empty file or one whose top level
  is not a mapping (:func:`check_config_files`);
* what Snakemake accepts silently: a key written twice in one mapping (YAML and JSON keep only
  the last value), YTE templates (``__use_yte__``);
* what would make the reader or a later walk run without bound: a file over
  :data:`MAX_CONFIG_BYTES`, nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_NODES`
  values counted with every alias expanded (a 600-byte "billion laughs" block expands to 9^10),
  and an alias inside the node it names (a config that contains itself). The limits are checked
  while the YAML is composed, event by event, before any Python object exists.

:func:`check_values` walks a loaded config iteratively under the same limits: keys are strings,
numbers finite and integers within ±2^53 (every integer a float holds exactly, so no later
``float()`` overflows or rounds), lists at most :data:`MAX_ITEMS` long (the schema's
``uniqueItems`` check is quadratic in a list's length).
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

from specsim.errors import ConfigError, shown

MAX_CONFIG_BYTES = 1 << 20  # config.yaml is ~8 KB
MAX_DEPTH = 32  # config.yaml nests 5 levels deep
MAX_NODES = 100_000  # values with aliases expanded; config.yaml holds ~700
MAX_INTEGER = 1 << 53  # |n| above this: not exactly a float; nothing specsim counts comes near
MAX_ITEMS = 1024  # items of one list: the schema's uniqueItems check is quadratic in it


class _BadFileError(yaml.YAMLError):
    """A file that parses but must not be used (the message says why and where)."""


def _line(mark: Any) -> str:
    return f"line {mark.line + 1}" if mark is not None else "the file"


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate keys and bounds depth and aliases while composing.

    Nesting depth and the number of values (each alias counted as the whole node it names) are
    tallied as events arrive, so a deep or exponential file is refused before it is built.
    Duplicate keys: the check hooks ``flatten_mapping``, which ``construct_mapping`` calls for
    every mapping before constructing it and which also flattens the mappings pulled in by
    merge keys (``<<: *anchor``): it is the one place that sees a mapping's own keys before
    merged keys are spliced in. Keys taken from a merge may be overridden (that is what merge
    keys are for); only the keys written in the mapping itself must be unique.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._flattened: set[int] = set()
        self._count = 0  # values composed so far, aliases expanded
        self._open: list[str | None] = []  # anchors of the nodes being composed, outermost first
        self._heights: list[int] = []  # deepest child so far of each open node
        self._anchor_size: dict[str, tuple[int, int]] = {}  # anchor -> (values, height)

    def _tally(self, values: int, height: int, mark: Any) -> None:
        self._count += values
        if self._count > MAX_NODES:
            raise _BadFileError(f"more than {MAX_NODES} values (aliases expanded) by "
                                f"{_line(mark)}; a config is far smaller -- is an alias "
                                f"repeated to blow it up?")
        if len(self._open) + height > MAX_DEPTH:
            raise _BadFileError(f"nested more than {MAX_DEPTH} levels deep at {_line(mark)} "
                                f"(aliases expanded)")
        if self._heights:
            self._heights[-1] = max(self._heights[-1], height)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                raise _BadFileError(f"alias *{event.anchor} at {_line(event.start_mark)} is "
                                    f"inside the node &{event.anchor} it names (a config "
                                    f"that contains itself)")
            node = super().compose_node(parent, index)  # names an undefined alias itself
            self._tally(*self._anchor_size[event.anchor], event.start_mark)
            return node
        start = self._count
        self._tally(1, 1, event.start_mark)
        self._open.append(event.anchor)
        self._heights.append(0)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._open.pop()
            height = 1 + self._heights.pop()
        if self._heights:
            self._heights[-1] = max(self._heights[-1], height)
        if event.anchor is not None:
            self._anchor_size[event.anchor] = (self._count - start, height)
        return node

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        if id(node) in self._flattened:  # already flattened as the source of a merge key
            return
        own = [key for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"]
        super().flatten_mapping(node)
        self._flattened.add(id(node))
        seen: dict[Any, int] = {}
        for key_node in own:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _BadFileError(f"a {'list' if key_node.id == 'sequence' else 'mapping'} "
                                    f"used as a key at {_line(key_node.start_mark)} (a complex "
                                    f"key); config keys are names")
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                where = (f"twice on line {line}" if seen[key] == line
                         else f"at lines {seen[key]} and {line}")
                raise _BadFileError(f"duplicate key {shown(key)} {where} (YAML keeps only the "
                                    f"last; remove one)")
            seen[key] = line


def _yaml_problem(err: yaml.YAMLError, text: str) -> str:
    """PyYAML's multi-line message as one line: the problem, where it is, and the usual fix."""
    if isinstance(err, yaml.reader.ReaderError):
        line = text.count("\n", 0, err.position) + 1
        return (f"character #x{err.character:04x} at line {line} is not allowed in YAML "
                f"(a control character)")
    if not (isinstance(err, yaml.MarkedYAMLError) and err.problem):
        return " ".join(str(err).split())
    problem, mark = err.problem, err.problem_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    if "another document" in problem:
        return f"a second YAML document starts{where}; a config is one document (one '---' at most)"
    if "constructor for the tag" in problem:
        return f"{problem}{where}; a config takes plain values, no YAML tags"
    if "'\\t'" in problem:
        return f"a tab{where}; YAML is indented with spaces, not tabs"
    if "unhashable" in problem:
        return f"a list or mapping used as a key{where} (a complex key); config keys are names"
    return f"{problem}{where}"


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _BadFileError(f"duplicate key {shown(key)} in one JSON object (JSON keeps "
                                f"only the last; remove one)")
        out[key] = value
    return out


def _read_text(path: str | Path) -> str:
    """The file's text, as Snakemake reads it (UTF-8), refused over MAX_CONFIG_BYTES."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ConfigError(f"{path}: not a regular file; give the config as a file")
            if info.st_size > MAX_CONFIG_BYTES:
                raise ConfigError(f"{path}: {info.st_size} bytes, more than the "
                                  f"{MAX_CONFIG_BYTES} a config may have")
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file ({err.strerror})") from None
    if len(data) > MAX_CONFIG_BYTES:  # it grew while being read
        raise ConfigError(f"{path}: more than the {MAX_CONFIG_BYTES} bytes a config may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}, line {line}, cannot be "
                          f"decoded); save the config as UTF-8") from None


def read_config(path: str | Path) -> Any:
    """Load a config file strictly, in bounded work; ConfigError with one line naming it.

    JSON first, as Snakemake does (so a JSON config means here what it means to Snakemake,
    tab-indented or not), else YAML. Refused: see the module docstring. The values are then
    checked by :func:`check_values` (keys, numbers, size), naming the file and the key.
    """
    text = _read_text(path)
    try:
        try:
            data = json.loads(text, object_pairs_hook=_unique_pairs)
        except ValueError:  # not JSON (or an integer of over 4300 digits): YAML, as Snakemake
            data = yaml.load(text, Loader=_StrictLoader)
    except _BadFileError as err:
        raise ConfigError(f"{path}: {err}") from None
    except RecursionError:  # JSON nested thousands of levels deep
        raise ConfigError(f"{path}: nested more than {MAX_DEPTH} levels deep") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({_yaml_problem(err, text)})") from None
    except ValueError as err:  # a YAML scalar the constructor cannot convert
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    check_values(data, f"{path}: config")
    return data


def check_config_files(paths: list[str]) -> None:
    """Read each config file strictly (see :func:`read_config`); ConfigError on the first bad one.

    Also refused here: a file without keys (empty or only comments) or whose top level is not
    a mapping, and YTE templates. The Snakefile passes ``workflow.configfiles`` here (and
    config.yaml before Snakemake loads it); ``specsim check-config`` runs it before Snakemake.
    """
    for path in paths:
        data = read_config(path)
        if data is None or data == {}:
            raise ConfigError(f"{path}: the config is empty (no keys); it needs at least "
                              f"models: and studies: (see config.yaml)")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level is a {type(data).__name__}, not a mapping "
                              f"of keys to values (models:, studies:, ...)")
        if data.get("__use_yte__"):
            raise ConfigError(f"{path}: __use_yte__: Snakemake has already run this config's "
                              f"YTE template code while loading it; specsim refuses templated "
                              f"configs -- render it yourself (yte) and pass the result")


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isprintable() and key.strip() == key and key else (
        f"{path}[{key!r}]")


def _refuse_key(key: Any, where: str) -> None:
    what = {"config.models": "model names", "config.studies": "study names"}.get(
        where.rpartition(": ")[2], "config keys")
    raise ConfigError(f"{where}: key {shown(key)} is not a string; {what} must be strings "
                      f"(use a name such as 'm1')")


def check_values(obj: Any, where: str = "config") -> None:
    """Walk ``obj`` iteratively in bounded work; ConfigError naming the first bad key path.

    Refused: a non-string mapping key, NaN and infinities, an integer beyond ±2^53, a list of
    more than MAX_ITEMS items, nesting deeper than MAX_DEPTH and more than MAX_NODES values (a
    structure that contains itself is refused by one of the two, whatever built it).
    """
    stack: list[tuple[Any, str, int]] = [(obj, where, 0)]
    count = 0
    while stack:
        node, path, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise ConfigError(f"{where}: more than {MAX_NODES} values; a config is far smaller")
        if depth > MAX_DEPTH:
            raise ConfigError(f"{path}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, dict):
            for key in node:
                if not isinstance(key, str):
                    _refuse_key(key, path)
            stack.extend((v, _key_path(path, k), depth + 1)
                         for k, v in reversed(list(node.items())))
        elif isinstance(node, list | tuple):
            if len(node) > MAX_ITEMS:
                raise ConfigError(f"{path}: {len(node)} items, more than the {MAX_ITEMS} a "
                                  f"config list may hold")
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in reversed(list(enumerate(node))))
        elif isinstance(node, float) and not math.isfinite(node):
            raise ConfigError(f"{path}: {node!r} is not a finite number")
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INTEGER:
            raise ConfigError(f"{path}: {shown(node)} is beyond ±2^53 = {MAX_INTEGER}, the "
                              f"largest integer a config may hold")


def refuse_bad_config_files(paths: list[str]) -> None:
    """For the Snakefile: check the files that exist (:func:`check_config_files`) and exit
    with one line, ``config error: <file>: <problem>``, on the first bad one. A missing file
    is left to Snakemake, which names it with the path it looked at."""
    try:
        check_config_files([p for p in paths if os.path.exists(p)])
    except ConfigError as err:
        sys.exit(f"config error: {err}")
