"""One-line refusals of the command line that are no step's own: an unknown flag is named before
the required arguments it may have pushed aside (exit status 2)."""

from __future__ import annotations

import pytest

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
