"""One-line refusals of the command line that are no step's own: an unknown flag is named before
the required arguments it may have pushed aside (exit status 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SCHEMA

from specsim import cli


@pytest.mark.parametrize(("argv", "prog"), [
    (["point", "--bogus"], "specsim point"),
    (["record", "ngram", "--bogus", "1"], "specsim record ngram"),
    (["realtext", "record", "--out-dirr=x"], "specsim realtext record"),
    (["collect", "--gird", "g.json"], "specsim collect"),
    (["gate", "--chekcs", "c.csv"], "specsim gate"),
])
def test_an_unknown_flag_is_named_before_missing_arguments(
        argv: list[str], prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    flag = next(w for w in argv if w.startswith("--")).split("=")[0]
    assert err.startswith(f"{prog}: error: unrecognized arguments: {flag}"), err
    assert "required" not in err and len(err.splitlines()) == 1


def test_missing_arguments_alone_are_still_named(capsys: pytest.CaptureFixture[str]) -> None:
    """A flag of the step above (realtext's --seed) is no typo."""
    with pytest.raises(SystemExit) as stop:
        cli.main(["realtext", "--seed", "3", "record", "--temperature", "2"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "required: --corpus, --model, --out-dir" in err


def test_record_hf_without_network_or_cache_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Neither a local directory, nor in the Hub's cache, nor reachable: one line naming the
    model and why, exit 1, before the hub client is asked (it printed a line per retry);
    torch and transformers taken as installed (they are looked for first)."""
    import importlib.util

    from specsim.pairs.llm.hub import unreachable

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: object() if m in (
        "torch", "transformers") else real(m, *a))

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = ["record", "hf", "--target", "org/big", "--draft", "org/small",
            "--out", str(tmp_path / "t.parquet")]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("specsim record hf: error: --target org/big: model 'org/big' is not "
                          "in the local cache") and "HF_HUB_OFFLINE" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "t.parquet").exists()
    # network on, but the Hub's host refuses: the same line, naming the host
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    why = unreachable("--draft", "org/small", timeout=1.0)
    assert why is not None and "127.0.0.1:9 unreachable" in why and "--draft" in why
    # in the cache, or a local directory: nothing to say
    (tmp_path / "hf" / "hub" / "models--org--small").mkdir(parents=True)
    assert unreachable("--draft", "org/small") is None
    assert unreachable("--draft", str(tmp_path)) is None


@pytest.mark.parametrize(("entries", "said"), [
    (["2"] * 100_000, "100000 depths and over 10^18 nodes"),
    (["1"] * 100_000, "it has 100000 nodes"),
    (["9"] * 5_000, "5000 depths and over 10^18 nodes"),
])
def test_a_huge_branches_shape_is_one_line_naming_the_key(
        tmp_path: Path, tiny_config: dict, entries: list[str], said: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The shape's node count is not carried past 10^18 (printing a 30000-digit count hit
    Python's int-conversion limit, whose message names no key)."""
    import yaml

    tiny_config["studies"] = {"t": {"analysis": "schemes", "models": ["seed_good"],
                                    "gamma": [2], "rule": ["tree"],
                                    "knobs": {"branches": ["x".join(entries)]}}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny_config))
    assert cli.main(["check-config", str(path), "--schema", str(SCHEMA)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "studies.t.knobs.branches" in err and said in err, err


def test_an_unusable_output_path_of_any_step_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A file where a step's output directory goes: the OSError is named, not a traceback
    (the corpus step on a small corpus)."""
    from specsim import ngram

    small = ngram.build_corpus(max_files=5)
    monkeypatch.setattr(ngram, "build_corpus", lambda *_a, **_k: small)
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    status = cli.main(["realtext", "corpus", "--out", str(blocker / "c.npz"),
                       "--meta", str(tmp_path / "m.json")])
    err = capsys.readouterr().err.strip()
    assert status == 1 and len(err.splitlines()) == 1
    assert err.startswith("specsim realtext: error: ") and str(blocker) in err
    assert "Traceback" not in err


def test_a_reader_that_leaves_early_is_no_traceback() -> None:
    """`specsim check-config | head -1`: the pipe closes before the summary is printed."""
    import subprocess
    import sys

    from conftest import TINY

    specsim = str(Path(sys.executable).with_name("specsim"))
    out = subprocess.run(f"{specsim} check-config {TINY} --schema {SCHEMA} | head -c 1",
                         shell=True, capture_output=True, text=True, check=False)
    assert out.stdout == "c" and "Traceback" not in out.stderr, out.stderr
