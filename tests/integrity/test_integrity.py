"""Input integrity: strict config files, config key checks, table files, output permissions.

Each bad input is refused with one line that names the file (or the config key) and the fix;
never a traceback, never a silent change of meaning.
"""

from __future__ import annotations

import copy
import os
import stat
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import SCHEMA, TINY

import specsim.io
from specsim.config import _path_order, load_grid, validate_config
from specsim.configfile import check_config_files, read_config
from specsim.errors import ConfigError
from specsim.io import atomic_path, write_table, write_text
from specsim.models.files import TableFileError, check_table, load_table
from specsim.models.maths import random_table

# --------------------------------------------------------------------------------------------
# Config files: duplicate keys, unreadable files, one-line messages.
# --------------------------------------------------------------------------------------------
DUPLICATE_SEED = """\
models:
  m1: {family: iid, vocab: 20, draft: {kind: noise}}
seed: 1
studies:
  s1:
    analysis: accept_curve
    models: [m1]
    gamma: [2]
seed: 2
"""

DUPLICATE_MODEL = """\
models:
  m1: {family: iid, vocab: 20, draft: {kind: noise}}
  m2: {family: iid, vocab: 10, draft: {kind: noise}}
  m1: {family: iid, vocab: 30, draft: {kind: noise}}
"""

DUPLICATE_DEEP = """\
models:
  m1:
    family: iid
    vocab: 20
    draft:
      kind: noise
      kind: uniform
"""


def _one_line_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        read_config(path)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message
    return message


@pytest.mark.parametrize(("text", "expected"), [
    (DUPLICATE_SEED, "duplicate key 'seed' at lines 3 and 9 (YAML keeps only the last; "
                     "remove one)"),
    (DUPLICATE_MODEL, "duplicate key 'm1' at lines 2 and 4"),
    (DUPLICATE_DEEP, "duplicate key 'kind' at lines 6 and 7"),
    ("{a: 1, b: 2, a: 3}\n", "duplicate key 'a' twice on line 1"),
    ("a: 1\n1: x\n1.0: y\n", "duplicate key 1.0 at lines 2 and 3"),  # equal once loaded
], ids=["top_level", "model_name", "nested", "flow_mapping", "equal_numbers"])
def test_duplicate_keys_are_refused_naming_key_and_both_lines(tmp_path: Path, text: str,
                                                              expected: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert f"{path}: {expected}" in _one_line_error(path)


def test_duplicate_keys_in_the_real_configs_would_be_caught(tmp_path: Path) -> None:
    """Appending a second ``seed:``-style key to the tiny config is refused; the original loads."""
    text = TINY.read_text()
    assert read_config(TINY) == yaml.safe_load(text)
    first_key = next(line for line in text.splitlines() if line and line[0].isalpha())
    path = tmp_path / "tiny.yaml"
    path.write_text(text + first_key + "\n")
    assert "duplicate key" in _one_line_error(path)


def test_merge_keys_still_work(tmp_path: Path) -> None:
    """``<<: *anchor`` may be overridden by the mapping's own keys; that is not a duplicate."""
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {x: 1, y: 2}\n"
                    "over: {<<: *b, x: 3}\n"
                    "many: {<<: [*b, {z: 4}], z: 5}\n")
    assert read_config(path) == {"base": {"x": 1, "y": 2}, "over": {"x": 3, "y": 2},
                                 "many": {"x": 1, "y": 2, "z": 5}}


def test_merged_anchor_with_its_own_override_is_not_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text("a: &a {x: 1}\nb: &b {<<: *a, x: 2}\nc: {<<: *b, y: 3}\n")
    loaded = read_config(path)
    assert loaded["b"] == {"x": 2}
    assert loaded["c"]["y"] == 3
    assert loaded == yaml.safe_load(path.read_text())  # exactly what PyYAML itself gives


@pytest.mark.parametrize(("content", "fragment"), [
    (b"a: 1\n  b: [\n", "not valid YAML (mapping values are not allowed here at line 2"),
    (b"a: 1\nb: \xff\n", "not UTF-8 text (byte 8, line 2, cannot be decoded); save the config "
                       "as UTF-8"),
    (b"a: [1, 2\n", "not valid YAML"),
    (b"a: 1\n---\nb: 2\n", "a second YAML document starts at line 2"),
    (b"? [1, 2]\n: x\n", "a list used as a key at line 1 (a complex key)"),
], ids=["bad_indent", "not_utf8", "unclosed_list", "two_documents", "list_key"])
def test_bad_yaml_is_one_line_naming_the_file(tmp_path: Path, content: bytes,
                                              fragment: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    assert fragment in _one_line_error(path)


def test_missing_config_file_is_one_line(tmp_path: Path) -> None:
    assert "cannot read the config file (No such file or directory)" in _one_line_error(
        tmp_path / "nope.yaml")


def test_check_config_files_checks_every_file(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("a: 1\n")
    bad.write_text(DUPLICATE_SEED)
    check_config_files([str(good)])
    check_config_files([])
    with pytest.raises(ConfigError, match=r"bad\.yaml: duplicate key 'seed' at lines 3 and 9"):
        check_config_files([str(good), str(bad)])


# --------------------------------------------------------------------------------------------
# Non-string keys and the order of schema errors.
# --------------------------------------------------------------------------------------------
BASE: dict[str, Any] = yaml.safe_load(TINY.read_text())


def test_integer_model_key_with_a_second_error_is_a_config_error() -> None:
    """Sorting jsonschema errors once compared 1 with 'stub' and raised TypeError."""
    cfg = copy.deepcopy(BASE)
    cfg["models"][1] = copy.deepcopy(cfg["models"]["stub"])
    cfg["models"][1]["vocab"] = 1
    cfg["models"]["stub"]["vocab"] = 1
    with pytest.raises(ConfigError) as info:
        validate_config(cfg, SCHEMA)
    assert str(info.value) == ("config.models: key 1 is not a string; model names must be "
                               "strings (use a name such as 'm1')")


@pytest.mark.parametrize(("where", "key", "expected"), [
    ("studies", True, "config.studies: key True is not a string; study names must be strings"),
    ("budget", 3, "config.budget: key 3 is not a string; config keys must be strings"),
    ("models.stub.draft", None, "config.models.stub.draft: key None is not a string"),
    ("", 2.5, "config: key 2.5 is not a string; config keys must be strings"),
])
def test_non_string_keys_anywhere_are_named(where: str, key: Any, expected: str) -> None:
    cfg = copy.deepcopy(BASE)
    node = cfg
    for part in filter(None, where.split(".")):
        node = node[part]
    node[key] = {}
    with pytest.raises(ConfigError) as info:
        validate_config(cfg, SCHEMA)
    assert expected in str(info.value)


def test_non_string_key_inside_a_list_is_named() -> None:
    cfg = copy.deepcopy(BASE)
    cfg["latency"] = [{1: 2}]
    with pytest.raises(ConfigError, match=r"^config\.latency\[0\]: key 1 is not a string"):
        validate_config(cfg, SCHEMA)


def test_error_paths_sort_with_mixed_parts() -> None:
    paths = [["models", "stub", "vocab"], ["models", 1], ["latency", 3], ["latency", 10],
             ["models", True], ["models", None]]
    ordered = sorted(paths, key=_path_order)
    assert ordered[:2] == [["latency", 3], ["latency", 10]]  # indices numerically
    assert ordered[-1] == ["models", "stub", "vocab"]  # names after indices


# --------------------------------------------------------------------------------------------
# Table files: every fault of the file is a one-line TableFileError naming it.
# --------------------------------------------------------------------------------------------
TABLE = random_table(1, 2.5)


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    load_table.cache_clear()
    (tmp_path / "t").mkdir()
    yield tmp_path / "t"
    load_table.cache_clear()


def _npy_bytes(array: np.ndarray, tmp: Path) -> bytes:
    np.save(tmp / "scratch.npy", array)
    return (tmp / "scratch.npy").read_bytes()


def _with(row: int, col: int, value: float) -> np.ndarray:
    out = TABLE.copy()
    out[row, col] = value
    return out


# name -> (file contents from the scratch dir, fragments of the message after the file name)
NPY_CASES: dict[str, tuple[Callable[[Path], bytes], list[str]]] = {
    "empty": (lambda d: b"", ["is empty (0 bytes)", "numpy.save"]),
    "truncated": (lambda d: _npy_bytes(TABLE, d)[:-16],
                  ["bytes but its header describes", "truncated or corrupt"]),
    "truncated_header": (lambda d: _npy_bytes(TABLE, d)[:20], ["not a readable .npy file"]),
    "padded": (lambda d: _npy_bytes(TABLE, d) + b"\0" * 8, ["truncated or corrupt"]),
    "garbage": (lambda d: b"hello, this is not numpy at all\n", ["not a readable .npy file",
                                                                  "magic string"]),
    "pickle": (lambda d: b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00]\x94.",
               ["not a readable .npy file"]),
    "npz_zip": (lambda d: b"PK\x03\x04" + b"\0" * 60, ["not a readable .npy file"]),
    "complex": (lambda d: _npy_bytes(TABLE + 0.5j, d), ["complex numbers", "table.real"]),
    "complex_zero_imag": (lambda d: _npy_bytes(TABLE.astype(complex), d), ["complex numbers"]),
    "object": (lambda d: _npy_bytes(TABLE.astype(object), d), ["dtype object, not numbers"]),
    "strings": (lambda d: _npy_bytes(TABLE.astype(str), d), ["not numbers"]),
    "bytes": (lambda d: _npy_bytes(TABLE.astype("S8"), d), ["not numbers"]),
    "structured": (lambda d: _npy_bytes(np.zeros(6, dtype=[("p", "f8")]), d), ["not numbers"]),
    "booleans": (lambda d: _npy_bytes(np.eye(6, dtype=bool), d), ["booleans"]),
    "datetime": (lambda d: _npy_bytes(np.zeros((2, 2), dtype="M8[s]"), d), ["not numbers"]),
    "one_d": (lambda d: _npy_bytes(TABLE[0], d), ["shape (6,)", "2-D"]),
    "three_d": (lambda d: _npy_bytes(TABLE[None], d), ["shape (1, 6, 6)", "2-D"]),
    "scalar": (lambda d: _npy_bytes(np.float64(1.0), d), ["shape ()", "2-D"]),
    "nan": (lambda d: _npy_bytes(_with(3, 3, np.nan), d), ["non-finite entry nan at row 3, "
                                                           "column 3"]),
    "inf": (lambda d: _npy_bytes(_with(0, 5, np.inf), d), ["non-finite entry inf at row 0, "
                                                           "column 5"]),
    "negative": (lambda d: _npy_bytes(_with(2, 1, -0.25), d), ["negative entry -0.25 at row 2, "
                                                               "column 1"]),
    "huge_header_shape": (lambda d: _npy_bytes(TABLE, d).replace(b"(6, 6)", b"(9999999, 9)"),
                          ["truncated or corrupt"]),
}

CSV_CASES: dict[str, tuple[bytes, list[str]]] = {
    "empty": (b"", ["holds no numbers"]),
    "only_comments": (b"# nothing here\n\n   \n", ["holds no numbers"]),
    "non_numeric": (b"0.5,0.5\n0.5,half\n", ["line 2, column 2: 'half' is not a number"]),
    "underscore": (b"0.5,0.5\n1_0,0\n", ["line 2, column 1: '1_0' is not a number"]),
    "empty_cell": (b"0.5,\n0.5,0.5\n", ["line 1, column 2: '' is not a number"]),
    "semicolons": (b"0.5;0.5\n0.5;0.5\n", ["line 1, column 1: '0.5;0.5' is not a number"]),
    "nul_byte": (b"0.5,0.5\x00\n0.5,0.5\n", ["line 1, column 2", "is not a number"]),
    "ragged": (b"0.5,0.5\n\n0.2,0.3,0.5\n", ["line 3 has 3 values but line 1 has 2"]),
    "not_utf8": (b"0.5,0.5\n\xff\xfe,0.5\n", ["not UTF-8 text (byte 8 cannot be decoded)"]),
    "utf16": ("0.5,0.5\n0.5,0.5\n".encode("utf-16"), ["not UTF-8 text"]),
    "nan": (b"0.5,0.5\n0.5,NaN\n", ["non-finite entry nan at row 1, column 1"]),
    "inf": (b"0.5,0.5\n-inf,0.5\n", ["non-finite entry -inf at row 1, column 0"]),
    "negative": (b"1.5,-0.5\n0.5,0.5\n", ["negative entry -0.5 at row 0, column 1"]),
}


@pytest.mark.parametrize("name", list(NPY_CASES))
def test_bad_npy_files_are_refused_naming_the_file(tables: Path, name: str) -> None:
    make, fragments = NPY_CASES[name]
    path = tables / f"{name}.npy"
    path.write_bytes(make(tables))
    _assert_refused(f"t/{name}.npy", fragments)


@pytest.mark.parametrize("name", list(CSV_CASES))
def test_bad_csv_files_are_refused_naming_the_file(tables: Path, name: str) -> None:
    content, fragments = CSV_CASES[name]
    (tables / f"{name}.csv").write_bytes(content)
    _assert_refused(f"t/{name}.csv", fragments)


def _assert_refused(rel: str, fragments: list[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. numpy's ComplexWarning must not be the only sign
        with pytest.raises(TableFileError) as info:
            load_table(rel)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{rel!r}"), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_a_single_value_csv_is_refused_as_a_table(tables: Path) -> None:
    (tables / "one.csv").write_text("1\n")  # read as a (1, 1) array
    with pytest.raises(TableFileError, match=r"square \(V, V\) array with V >= 2"):
        check_table(load_table("t/one.csv"), "models.mine", "target")


@pytest.mark.parametrize(("array", "name"), [
    (TABLE, "float64"),
    (TABLE.astype(">f8"), "big_endian"),
    (np.asfortranarray(TABLE), "fortran_order"),
    (np.eye(6, dtype=np.int64), "integers"),
    (np.eye(6, dtype=np.uint8), "unsigned"),
    (TABLE.astype(np.float32), "float32"),
])
def test_good_npy_files_load_exactly(tables: Path, array: np.ndarray, name: str) -> None:
    np.save(tables / f"{name}.npy", array)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_table(f"t/{name}.npy")
    assert loaded.dtype == np.float64
    assert loaded.shape == array.shape
    assert np.array_equal(loaded, array.astype(np.float64))


def test_good_csv_files_load_exactly(tables: Path) -> None:
    np.savetxt(tables / "plain.csv", TABLE, delimiter=",", fmt="%.17g")
    assert np.array_equal(load_table("t/plain.csv"), TABLE)
    text = (tables / "plain.csv").read_text().replace("\n", "\r\n")
    (tables / "crlf.csv").write_bytes(b"\xef\xbb\xbf# rows = contexts\r\n\r\n" + text.encode())
    assert np.array_equal(load_table("t/crlf.csv"), TABLE)
    (tables / "spaces.csv").write_text(" 1 , 0.0 # first\n\n+0.25,.75\n5e-1,5E-1\n")
    assert load_table("t/spaces.csv").tolist() == [[1.0, 0.0], [0.25, 0.75], [0.5, 0.5]]


def test_rows_off_and_empty_rows_are_still_refused_by_check_table() -> None:
    off = TABLE.copy()
    off[2] *= 1 + 1e-8
    with pytest.raises(TableFileError, match=r"row 2 of the draft table sums to .*not 1"):
        check_table(off, "models.mine", "draft")
    within = TABLE.copy()
    within[2] *= 1 + 1e-12
    check_table(within, "models.mine", "draft")
    empty = TABLE.copy()
    empty[4] = 0.0
    with pytest.raises(TableFileError, match=r"row 4 of the draft table has no mass"):
        check_table(empty, "models.mine", "draft")


@pytest.mark.parametrize(("table", "fragment"), [
    (TABLE + 0j, "complex numbers"),
    (TABLE.astype(str), "not numbers"),
    (TABLE.astype(object), "not numbers"),
    (np.eye(6, dtype=bool), "booleans"),
    ([[1.0, 0.0], [0.0, 1.0, 0.0]], "not a rectangular array"),
    ([[0.5, 0.5], [0.5, np.nan]], "non-finite entry nan at row 1, column 1"),
])
def test_check_table_refuses_what_is_not_a_real_table(table: Any, fragment: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TableFileError) as info:
            check_table(table, "models.mine", "draft")
    assert str(info.value).startswith("models.mine: the draft table")
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_a_bad_table_through_the_config_is_a_one_line_config_error(tables: Path) -> None:
    (tables / "draft.npy").write_bytes(b"")
    np.save(tables / "target.npy", TABLE)
    cfg = copy.deepcopy(BASE)
    cfg["models"]["mine"] = {"family": "custom", "vocab": 6, "target_file": "t/target.npy",
                             "draft": {"kind": "file", "file": "t/draft.npy"}}
    with pytest.raises(ConfigError) as info:
        load_grid(cfg, SCHEMA)
    assert str(info.value) == ("models.mine.draft.file: 't/draft.npy' is empty (0 bytes); save "
                               "the table again with numpy.save")


# --------------------------------------------------------------------------------------------
# Outputs: the mode a new file would get under the user's umask, text as UTF-8.
# --------------------------------------------------------------------------------------------
@pytest.fixture(params=[0o022, 0o002, 0o077], ids=["umask022", "umask002", "umask077"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_outputs_get_the_umask_mode(tmp_path: Path, umask: int) -> None:
    expected = 0o666 & ~umask
    write_text(tmp_path / "a" / "note.txt", "hello\n")
    write_table(pd.DataFrame({"x": [1.0, 2.0]}), tmp_path / "a" / "table.csv")
    with atomic_path(tmp_path / "a" / "raw.bin") as tmp:
        tmp.write_bytes(b"\0")
    for name in ("note.txt", "table.csv", "table.md", "raw.bin"):
        assert _mode(tmp_path / "a" / name) == expected, (name, oct(_mode(tmp_path / "a" / name)))
    assert {0o644: umask == 0o022, 0o664: umask == 0o002, 0o600: umask == 0o077}[expected]


def test_rewriting_a_file_resets_its_mode_to_the_umask_mode(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "note.txt"
    path.write_text("old\n")
    path.chmod(0o600)
    write_text(path, "new\n")
    assert _mode(path) == 0o666 & ~umask
    assert path.read_text() == "new\n"


def test_umask_is_read_without_proc_too(tmp_path: Path, umask: int,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert specsim.io.atomic._umask() == umask
    monkeypatch.setattr(specsim.io.atomic, "_PROC_STATUS", tmp_path / "no-such-status")
    assert specsim.io.atomic._umask() == umask
    write_text(tmp_path / "note.txt", "x\n")
    assert _mode(tmp_path / "note.txt") == 0o666 & ~umask
    assert os.umask(umask) == umask  # the fallback restored it


def test_a_failed_write_leaves_neither_file_nor_temporary(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "out.txt") as tmp:
        tmp.write_text("partial")
        raise RuntimeError("writer failed")
    assert list(tmp_path.iterdir()) == []


def test_write_text_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """Under an ASCII locale (no UTF-8 mode, no locale coercion) text is still UTF-8."""
    out = tmp_path / "alpha.md"
    code = ("import sys; from specsim.io import write_text; "
            "write_text(sys.argv[1], '\\u03b1 = 0.8 \\u2014 \\u03b2\\n')")  # ASCII source
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0",
           "PYTHONCOERCECLOCALE": "0"}
    subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True, timeout=120)
    assert out.read_bytes() == "α = 0.8 — β\n".encode()
