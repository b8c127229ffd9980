"""Valid edge inputs pass, with the rounding tolerance stated where a probability is checked:
α = 1 (draft = target), α = 0 (disjoint supports), q = 0 on part of the support, a one-token
vocabulary -- in trace files written elsewhere (read_trace) and in ``specsim.verify``."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specsim import exact, verify
from specsim.traces.format import META_KEY, SUM_TOL, TraceFileError, read_trace
from specsim.traces.positional import acceptance, positional_law


def _foreign(path, support, p, q, alpha, lengths, vocab, dtype=np.float32):
    """A trace file as another tool writes it: no seal, no digest, float32 lists, tails and α
    computed by that tool (rounded as it rounds)."""
    n = len(support)
    doc = np.repeat(np.arange(len(lengths)), lengths).astype(np.int64)
    pos = np.concatenate([np.arange(k) for k in lengths]).astype(np.int64)
    kind = pa.list_(pa.from_numpy_dtype(dtype))
    lst = [pa.array([np.asarray(r, dtype=dtype) for r in rows], type=kind) for rows in (p, q)]
    p_tail = [float(np.float32(1) - np.asarray(r, np.float32).sum()) for r in p]
    q_tail = [float(np.float32(1) - np.asarray(r, np.float32).sum()) for r in q]
    table = pa.table({
        "doc": doc, "pos": pos, "token": np.full(n, -1, dtype=np.int64),
        "support": pa.array([np.asarray(s, np.int64) for s in support], type=pa.list_(pa.int64())),
        "p": lst[0], "q": lst[1], "p_tail": np.asarray(p_tail), "q_tail": np.asarray(q_tail),
        "alpha": np.asarray(alpha, dtype=np.float64)})
    meta = {META_KEY: json.dumps({"vocab": vocab, "documents": len(lengths)}).encode()}
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path


def _rows_summing_above_one(n, v, seed=0):
    """float32 rows whose float32 sum lands above 1 (α = Σ p of a draft equal to its target)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        r = rng.dirichlet(np.ones(v)).astype(np.float32)
        if np.float64(r.astype(np.float64).sum()) > 1.0:
            out.append(r)
    return out


def test_a_draft_equal_to_its_target_reads_with_alpha_one(tmp_path) -> None:
    rows = _rows_summing_above_one(20, 7)
    alpha = [float(r.astype(np.float64).sum()) for r in rows]  # a rounding error above 1
    assert max(alpha) > 1.0 and max(alpha) - 1.0 < SUM_TOL
    path = _foreign(tmp_path / "same.parquet", [np.arange(7)] * 20, rows, rows, alpha,
                    [12, 8], 7)
    t = read_trace(path)
    assert np.all(t.alpha <= 1.0) and np.all(t.alpha >= 1.0 - SUM_TOL)
    assert np.all(t.p <= 1.0) and np.all(t.p_tail >= 0.0)
    # every draft accepted: each round emits γ + 1 tokens but at a document's end (exact law)
    law = positional_law(acceptance(t, "correct"), t.doc_start, 3)
    assert law.tokens_per_call == 4.0  # 12 + 8 positions: 3 + 2 calls of 4 tokens


def test_alpha_outside_the_rounding_tolerance_is_still_refused(tmp_path) -> None:
    rows = _rows_summing_above_one(4, 5)
    alpha = [1.0 + 10 * SUM_TOL] * 4
    path = _foreign(tmp_path / "off.parquet", [np.arange(5)] * 4, rows, rows, alpha, [4], 5)
    with pytest.raises(TraceFileError, match=r"'alpha': not a finite number in \[0, 1\] "
                                              r"\(within 1e-05\)"):
        read_trace(path)


def test_disjoint_supports_and_q_zero_on_part_of_the_support(tmp_path) -> None:
    # position 0: disjoint (α = 0); position 1: q = 0 on tokens 2, 3 (α = 0.5); position 2:
    # a draft that puts no mass where p does but one token
    support = [[0, 1], [0, 1, 2, 3], [0, 1, 2]]
    p = [[1.0, 0.0], [0.25, 0.25, 0.25, 0.25], [0.5, 0.5, 0.0]]
    q = [[0.0, 1.0], [0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0]]
    alpha = [0.0, 0.5, 0.0]
    t = read_trace(_foreign(tmp_path / "edge.parquet", support, p, q, alpha, [3], 4))
    assert np.array_equal(t.alpha, alpha)
    law = positional_law(acceptance(t, "correct"), t.doc_start, 1)
    # γ = 1 on 3 positions: the first call rejects (1 token); the second accepts w.p. 1/2
    # (2 tokens, done: 2 calls) or rejects (then a third call for the last position)
    assert law.calls.sum() == pytest.approx(0.5 * 2 + 0.5 * 3, rel=1e-12)
    assert law.tokens_per_call == pytest.approx(3 / 2.5, rel=1e-12)


def test_a_one_token_vocabulary(tmp_path) -> None:
    t = read_trace(_foreign(tmp_path / "one.parquet", [[0]] * 5, [[1.0]] * 5, [[1.0]] * 5,
                            [1.0] * 5, [5], 1))
    assert t.vocab == 1 and np.array_equal(t.alpha, np.ones(5))
    law = positional_law(acceptance(t, "correct"), t.doc_start, 4)
    assert law.tokens_per_call == pytest.approx(5.0, rel=1e-12)  # one call emits all five
    res = verify(np.ones((2, 5, 1)), np.ones((2, 4, 1)), np.zeros((2, 4), dtype=int), rng=0)
    assert np.array_equal(res.accepted, [4, 4]) and np.array_equal(res.tokens, np.zeros((2, 5)))


def test_verify_takes_rows_a_rounding_error_off_one() -> None:
    """float32 rows of a draft equal to its target, each summing up to a few ulps off 1:
    accepted (row_tol), every draft accepted (α = 1), the bonus token from p."""
    rows = np.stack(_rows_summing_above_one(4, 6, seed=3))  # (4, 6), sums > 1 in float64
    p, q = rows[None], rows[None, :3]
    x = np.array([[0, 1, 2]])
    res = verify(p, q, x, rng=np.random.default_rng(1))
    assert int(res.accepted[0]) == 3 and list(res.tokens[0, :3]) == [0, 1, 2]
    assert exact.expected_tokens(1.0, 3) == 4  # Eq. 1's α = 1 limit: γ + 1
    # disjoint: the first draft rejected, the residual is p itself
    d = verify(np.array([[[1.0, 0.0], [1.0, 0.0]]]), np.array([[[0.0, 1.0]]]),
               np.array([[1]]), rng=0)
    assert int(d.accepted[0]) == 0 and int(d.tokens[0, 0]) == 0
