"""Trace files (specsim.traces.format) and the positional model (specsim.traces.positional)."""

from __future__ import annotations

import functools
import itertools

import mc
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from trace_files import dirichlet_trace as make_trace

from specsim import exact
from specsim.traces.format import (
    TraceFileError,
    concat_traces,
    from_full_rows,
    read_trace,
    write_trace,
)
from specsim.traces.positional import (
    acceptance,
    bootstrap_ratio,
    positional_law,
    resampled_sums,
    simulate,
    tokenwise_rounds,
    traverse,
)


# ----------------------------------------------------------------------------- the file
def test_round_trip(tmp_path):
    t = make_trace()
    write_trace(tmp_path / "t.parquet", t)
    r = read_trace(tmp_path / "t.parquet")
    for k in ("doc_start", "token", "offsets", "support", "p", "q", "p_tail", "q_tail", "alpha"):
        assert np.array_equal(getattr(r, k), getattr(t, k)), k  # identity: lossless storage
    assert r.meta["pair"] == "test" and r.n_docs == 3 and r.n_positions == 22


def test_truncation_keeps_full_alpha():
    rng = np.random.default_rng(3)
    P, Q = rng.dirichlet(np.ones(30), size=(2, 50))
    offsets, support, p, _q, pt, _qt, alpha = from_full_rows(P, Q, 4)
    assert np.allclose(alpha, np.minimum(P, Q).sum(axis=1), rtol=0, atol=1e-15)
    row = np.repeat(np.arange(50), np.diff(offsets))
    assert np.allclose(np.bincount(row, weights=p) + pt, 1.0, atol=1e-12)
    # the support holds the top 4 of p and of q
    for i in range(50):
        kept = set(support[offsets[i] : offsets[i + 1]])
        assert set(np.argsort(-P[i])[:4]) <= kept and set(np.argsort(-Q[i])[:4]) <= kept


def test_greedy_acceptance_is_q_at_argmax_p():
    t = make_trace()
    dense_p = np.zeros((t.n_positions, t.vocab))
    dense_q = np.zeros_like(dense_p)
    row = np.repeat(np.arange(t.n_positions), np.diff(t.offsets))
    dense_p[row, t.support] = t.p
    dense_q[row, t.support] = t.q
    assert np.allclose(t.greedy_acceptance(),
                       dense_q[np.arange(t.n_positions), dense_p.argmax(axis=1)], atol=0)


def test_dense_rows_are_distributions():
    t = make_trace()
    p, q = t.dense(np.arange(t.n_positions))
    assert p.shape == (t.n_positions, t.width + 1)
    assert np.allclose(p.sum(axis=1), 1.0, atol=1e-12) and np.allclose(q.sum(axis=1), 1.0,
                                                                         atol=1e-12)


def test_documents_and_concat():
    t = make_trace()
    sub = t.documents([2, 0])
    assert list(sub.doc_lengths) == [12, 7] and sub.meta["documents"] == 2
    both = concat_traces([t, t])
    assert both.n_docs == 6 and np.array_equal(both.alpha[:22], both.alpha[22:])


def _rewrite(src, dst, **changes):
    table = pq.read_table(src)
    meta = dict(table.schema.metadata)
    meta.pop(b"specsim.payload_sha256")  # as a file written elsewhere: no digest
    for name, value in changes.items():
        if name == "meta":
            meta[b"specsim.trace"] = value
        elif value is None:
            table = table.drop_columns([name])
        else:
            table = table.set_column(table.column_names.index(name), name, value)
    pq.write_table(table.replace_schema_metadata(meta), dst)


@pytest.mark.parametrize(("change", "column"), [
    ({"p_tail": pa.array(np.full(22, 0.5))}, "p"),
    ({"alpha": pa.array(np.full(22, 1.5))}, "alpha"),
    ({"alpha": pa.array(np.zeros(22))}, "alpha"),
    ({"q": None}, "q"),
    ({"pos": pa.array(np.zeros(22, dtype=np.int64))}, "pos"),
    ({"doc": pa.array(np.r_[np.zeros(7), np.full(3, 2), np.ones(12)].astype(np.int64))}, "doc"),
    ({"token": pa.array(np.full(22, 99, dtype=np.int64))}, "token"),
    ({"alpha": pa.array(np.full(22, "x"))}, "alpha"),
    ({"meta": b'{"vocab": 9, "documents": 4}'}, "doc"),
])
def test_bad_file_is_refused_naming_file_and_column(tmp_path, change, column):
    good = tmp_path / "good.parquet"
    write_trace(good, make_trace())
    bad = tmp_path / "bad.parquet"
    _rewrite(good, bad, **change)
    with pytest.raises(TraceFileError) as err:
        read_trace(bad)
    msg = str(err.value)
    assert str(bad) in msg and f"'{column}'" in msg and "\n" not in msg


def test_bad_metadata_truncation_and_tamper(tmp_path):
    good = tmp_path / "good.parquet"
    write_trace(good, make_trace())
    data = good.read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    (tmp_path / "nometa.parquet").write_bytes(data)
    _rewrite(good, tmp_path / "nometa.parquet", meta=b"[]")
    for name in ("cut.parquet", "nometa.parquet", "missing.parquet"):
        with pytest.raises(TraceFileError, match=name):
            read_trace(tmp_path / name)
    # a changed value in a file that records its digest is refused even if it is plausible:
    # rewritten without specsim's seal (the digest of the file's own bytes), it has none
    table = pq.read_table(good)
    i = table.column_names.index("token")
    tok = table.column("token").to_numpy().copy()
    tok[0] = (tok[0] + 1) % 9
    pq.write_table(table.set_column(i, "token", pa.array(tok)), tmp_path / "tampered.parquet")
    with pytest.raises(TraceFileError, match=r"tampered\.parquet.*specsim\.file_sha256"):
        read_trace(tmp_path / "tampered.parquet")


# ----------------------------------------------------------------------------- the law
def brute_calls(beta: np.ndarray, gamma: int) -> float:
    """Expected target calls to traverse one document, by recursion over every accept/reject
    pattern of a round (an independent implementation of the positional model)."""
    length = beta.size

    @functools.cache
    def calls(t: int) -> float:
        if t >= length:
            return 0.0
        total = 1.0
        for outcome in itertools.product((0, 1), repeat=gamma):
            prob, accepted = 1.0, 0
            for i, ok in enumerate(outcome):
                b = beta[t + i] if t + i < length else 1.0
                prob *= b if ok else 1.0 - b
            for ok in outcome:  # accepted drafts: the leading run of ones
                if not ok:
                    break
                accepted += 1
            total += prob * calls(min(t + accepted + 1, length))
        return total

    return calls(0)


@pytest.mark.parametrize("gamma", [1, 2, 3, 5])
def test_dp_matches_brute_force(gamma):
    t = make_trace(lengths=(6, 1, 9), seed=gamma)
    beta = acceptance(t, "correct")
    law = positional_law(beta, t.doc_start, gamma)
    want = [brute_calls(beta[a:b], gamma) for a, b in zip(t.doc_start[:-1],
                                                            t.doc_start[1:], strict=True)]
    assert np.allclose(law.calls, want, rtol=1e-12, atol=0)
    # visits: expected rounds per document = expected calls
    per_doc = np.add.reduceat(law.visits, t.doc_start[:-1])
    assert np.allclose(per_doc, law.calls, rtol=1e-12, atol=0)
    assert np.allclose(law.emitted.sum(axis=1), 1.0, atol=1e-12)
    assert law.tokens_per_call == pytest.approx(16 / law.calls.sum(), rel=1e-12)


def test_long_constant_documents_give_eq1():
    beta = np.full(20000, 0.7)
    law = positional_law(beta, np.array([0, 20000]), 4)
    # one round cut at the end in ~5700: within 1e-3 of Eq. 1
    assert law.tokens_per_call == pytest.approx(float(exact.expected_tokens(0.7, 4)), rel=1e-3)
    rate, std, _ = law.accept_by_position()
    assert np.allclose(rate, 0.7, atol=1e-12) and np.allclose(std, 0.0, atol=1e-9)


def test_traverse_refuses_a_round_of_no_tokens():
    bad = np.zeros((3, 3))
    bad[:, 0] = 1.0
    with pytest.raises(ValueError, match="at least one token"):
        traverse(bad, np.array([0, 3]))


def test_monte_carlo_covers_exact():
    t = make_trace(lengths=(40, 25, 60, 5), seed=11)
    for gamma in (1, 3, 6):
        law = positional_law(acceptance(t, "correct"), t.doc_start, gamma)
        hist = simulate(law, np.random.default_rng(gamma), 20000, 40, 100)
        per_batch = (hist * np.arange(1, hist.shape[1] + 1)).sum(axis=1) / hist.sum(axis=1)
        mean, se = per_batch.mean(), per_batch.std(ddof=1) / np.sqrt(per_batch.size)
        # 100 batches, mc.FAIL_PROB over the three: ~5.8 SE; a bias of 8.2 SE fails
        mc.assert_close(mean, se, law.tokens_per_call, dof=99, assertions=3)


def test_greedy_rule_uses_q_at_argmax():
    t = make_trace(seed=5)
    assert np.array_equal(acceptance(t, "greedy"), t.greedy_acceptance())
    assert np.array_equal(acceptance(t, "no_resample"), t.alpha)  # same test, same acceptance


def test_tokenwise_rounds_cut_at_document_end():
    law = tokenwise_rounds(np.full(3, 0.9), np.array([0, 3]), 4)
    # from the last position a round can emit only one token
    assert law[2, 1] == 1.0 and law[1, 3:].sum() == 0.0


def test_bootstrap_ratio_is_seeded_and_brackets():
    num, den = np.arange(1.0, 31.0), np.arange(1.0, 31.0) / 2 + 1
    a = bootstrap_ratio(num, den, seed=4)
    assert a == bootstrap_ratio(num, den, seed=4)  # identity: same seed, same interval
    assert a[0] < num.sum() / den.sum() < a[1]


@pytest.mark.parametrize("docs", [1, 7, 256, 300])
def test_resampled_sums_are_one_draw_per_resample(docs):
    """The block's indices drawn in one call are the stream of one draw per resample (the
    bootstrap each trace table prints depends on it), across a 256-resample block boundary."""
    rng = np.random.default_rng(1)
    cols = [rng.random(docs), rng.integers(0, 9, docs).astype(np.float64)]
    ref = np.random.default_rng(8)
    counts = np.stack([np.bincount(ref.integers(0, docs, docs), minlength=docs)
                       for _ in range(300)]).astype(np.float64)
    want = np.stack([(counts * c).sum(axis=1) for c in cols], axis=1)
    assert np.array_equal(resampled_sums(cols, 8, 300), want)
