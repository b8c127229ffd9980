"""Printed digits and verdicts that do not hinge on a CPU's last bit (specsim.precision), and
the table comparison that shows it (specsim.tablediff; end to end: tests/portability.sh)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specsim import precision, tablediff
from specsim.io import write_checksum, write_table


def test_round_printed_digits_and_zero_sign() -> None:
    x = np.array([2.806123456789, 123456.789012345, 1.234567891234e-3, 3.3e-17, -4.4e-17,
                  -0.0, np.nan, np.inf, -np.inf, 0.0])
    r = precision.round_printed(x)
    # Exact equality is the claim: a rounded value is the double nearest its decimal (one
    # correctly rounded division of two exact integers), i.e. the literal written here.
    assert r[0] == 2.80612346  # 9 significant digits (8 decimals)
    assert r[1] == 123456.789  # 9 significant digits (3 decimals)
    assert r[2] == 0.0012345679  # capped at 10 decimals
    assert r[3] == 0.0 and r[4] == 0.0 and r[5] == 0.0  # below 5e-11: zero
    assert not np.any(np.signbit(r[3:6]))  # and never -0.0
    assert np.isnan(r[6]) and r[7] == np.inf and r[8] == -np.inf
    assert r[9] == 0.0 and not np.signbit(r[9])


@pytest.mark.parametrize("a,b", [
    (4.999999999999998, 5.0),                  # a lenience-0 exact mean vs its CI
    (3.9999999999999996, 4.0),                 # the block test's drafted mean on AVX-512
    (9.999999999999998, 10.000000000000002),   # the two sides of a power of ten
    (0.09999999999999999, 0.10000000000000002),
    (1e-16, -1e-16),                           # a Jensen gap of zero, either sign
])
def test_ulps_apart_print_the_same(a: float, b: float) -> None:
    # Values a few ulps apart (two CPUs' results for one exact number) print identically away
    # from a rounding boundary; these sit on the boundaries a table actually meets.
    assert precision.round_printed(a) == precision.round_printed(b)
    assert str(precision.round_printed(a)) == str(precision.round_printed(b))


def test_few_values_move_under_an_ulp() -> None:
    # Of 10^5 random values, a 4-ulp perturbation moves a printed value only when the value
    # lies within 4 ulps (~1e-15 relative) of a rounding boundary one step (>= 1e-9 relative)
    # wide: an expected 10^5 * 2e-6 = 0.2 values; more than 5 would mean a wrong rounding.
    rng = np.random.default_rng(1)
    x = rng.lognormal(0.0, 3.0, size=100_000)
    y = x * (1.0 + 4 * np.finfo(float).eps)
    moved = int(np.sum(precision.round_printed(x) != precision.round_printed(y)))
    assert moved <= 5


def test_covers_with_the_exact_values_rounding_error() -> None:
    assert precision.covers(5.0, 5.0, 4.999999999999998)
    assert precision.covers(1.0, 2.0, 2.0 + 1e-12)
    assert not precision.covers(5.0, 5.0, 4.99999)  # a real miss stays a miss
    assert not precision.covers(1.0, 2.0, 2.001)
    assert list(precision.covers(np.array([0.0, 0.0]), np.array([1.0, 1.0]),
                                 np.array([0.5, 1.5]))) == [True, False]


def test_at_least_and_first_max() -> None:
    assert precision.at_least(1e-3 * (1 - 1e-13), 1e-3)
    assert not precision.at_least(0.9e-3, 1e-3)
    # a tie at the last bit goes to the first (smallest γ), wherever the larger bit falls
    assert precision.first_max([2.0, 2.0 + 4e-16, 1.0]) == 0
    assert precision.first_max([2.0 + 4e-16, 2.0, 1.0]) == 0
    assert precision.first_max([1.0, 2.0, 2.5]) == 2
    with pytest.raises(ValueError, match="non-empty"):
        precision.first_max([])


def test_printed_tolerance_covers_one_rounding_step() -> None:
    a, b = 2.80612345, 2.80612346  # one printed step apart: the same exact number, two CPUs
    assert abs(a - b) <= precision.printed_tolerance(a, b)
    assert abs(2.8061 - 2.8062) > precision.printed_tolerance(2.8061)


def test_write_table_prints_rounded_numbers_and_no_negative_zero(tmp_path) -> None:
    df = pd.DataFrame({"x": [-1e-17, 2.80612345678912], "n": [1, 2], "s": ["a", "b"]})
    out = write_table(df, tmp_path / "t.csv")
    text = (tmp_path / "t.csv").read_text()
    assert text == "x,n,s\n0.0,1,a\n2.80612346,2,b\n"
    assert "-0" not in (tmp_path / "t.md").read_text()
    assert out["x"].tolist() == [0.0, 2.80612346]


def test_floats_of_object_columns_are_rounded_too(tmp_path) -> None:
    """A column mixing floats with None (trace models have no α) is object-typed; its floats
    print rounded like any other (found by tests/portability.sh on tests/data/pair.yaml)."""
    df = pd.DataFrame({"alpha": [0.5510673092769057, None, "x", True]})
    assert df["alpha"].dtype == object
    write_table(df, tmp_path / "t.csv")
    text = (tmp_path / "t.csv").read_text()
    assert "0.551067309\n" in text and "0.5510673092769057" not in text and "True" in text


def test_tablediff_names_the_first_differing_cell(tmp_path, capsys) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    head = "study,model,rule,covered,tokens\n"

    def put(path, text: str) -> None:  # a table as the DAG leaves it: with its sidecar
        path.write_text(text)
        write_checksum(path, text.encode())

    put(a / "s.csv", head + "x,m,correct,True,3.0\nx,m,lenient,False,5.0\n")
    put(b / "s.csv", head + "x,m,correct,True,3.0\nx,m,lenient,True,5.0\n")
    put(a / "same.csv", head)
    put(b / "same.csv", head)
    put(a / "only.csv", head)
    assert tablediff.compare_dirs(a, b) == [
        f"only.csv: only in {a}",
        "s.csv: row 2 (study=x, model=m, rule=lenient), column covered: 'False' vs 'True'",
    ]
    assert tablediff.main([str(a), str(b)]) == 1
    assert "s.csv: row 2" in capsys.readouterr().out
    (a / "only.csv").unlink()
    put(b / "s.csv", (a / "s.csv").read_text())
    assert tablediff.main([str(a), str(b)]) == 0
    (b / "s.csv").write_text(head)  # edited, its sidecar not: refused as damage, not compared
    assert "does not match" in tablediff.compare_dirs(a, b)[0]
    assert tablediff.main([str(a)]) == 2
    assert tablediff.first_difference("t.csv", b"a\n1\n", b"a\n1\n2\n") == "t.csv: 1 rows vs 2 rows"
