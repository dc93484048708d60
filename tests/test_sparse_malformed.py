"""Malformed sparse parts never make lightmod read or write outside an array.

MXNet accepts malformed ``indices``/``indptr`` in ``csr_matrix((data, indices, indptr))`` and
``row_sparse_array((data, indices))`` and reports them only through ``check_format``; its
kernels then read wherever the parts point. lightmod keeps the values dense: a malformed array
holds the entries whose position exists (an ``indptr`` range clipped to the stored entries, a
column or row inside the shape), ``check_format`` names the problem, and every operator works
on those values. Operators that take row ids themselves (``sparse.retain``, the kvstore's
``row_sparse_pull``) check them and raise MXNetError. The LibSVM reader (the one kernel that
produces csr parts) refuses a feature index too large for int64 instead of wrapping it around.
"""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

SHAPE = (3, 4)
DATA = np.array([1.0, 2.0, 3.0, 4.0, 5.0])

# name -> (indices, indptr) over 5 stored values of a 3x4 matrix
MALFORMED_CSR = {
    "negative index": ([0, -1, 2, 3, 1], [0, 2, 4, 5]),
    "index past the columns": ([0, 4, 2, 3, 1], [0, 2, 4, 5]),
    "index far past the columns": ([0, 2 ** 40, 2, 3, 1], [0, 2, 4, 5]),
    "unsorted indices": ([2, 0, 3, 1, 1], [0, 2, 4, 5]),
    "repeated index": ([1, 1, 2, 3, 1], [0, 2, 4, 5]),
    "decreasing indptr": ([0, 1, 2, 3, 1], [0, 4, 2, 5]),
    "indptr past nnz": ([0, 1, 2, 3, 1], [0, 2, 9, 5]),
    "last indptr past nnz": ([0, 1, 2, 3, 1], [0, 2, 4, 7]),
    "negative indptr": ([0, 1, 2, 3, 1], [0, -3, 4, 5]),
    "indptr not starting at 0": ([0, 1, 2, 3, 1], [2, 2, 4, 5]),
    "indptr far past nnz": ([0, 1, 2, 3, 1], [0, 2 ** 62, 4, 5]),
}


def placed(indices, indptr, shape, data):
    """The dense values of csr parts as lightmod keeps them: row r takes the stored entries
    of indptr[r]:indptr[r + 1] (clipped to the entries there are) whose column is in range."""
    dense = np.zeros(shape)
    nnz = len(indices)
    for r in range(shape[0]):
        for j in range(max(0, indptr[r]), min(nnz, indptr[r + 1])):
            if 0 <= indices[j] < shape[1]:
                dense[r, indices[j]] += data[j]
    return dense


@pytest.mark.parametrize("case", sorted(MALFORMED_CSR))
def test_malformed_csr_is_accepted_reported_and_safe_to_use(case):
    indices, indptr = MALFORMED_CSR[case]
    a = mx.nd.sparse.csr_matrix((DATA, np.array(indices), np.array(indptr)), shape=SHAPE)
    expected = placed(indices, indptr, SHAPE, DATA)
    with pytest.raises(MXNetError, match="check_format: csr (indptr|indices)"):
        a.check_format()
    a.check_format(full_check=False)
    np.testing.assert_array_equal(a.asnumpy(), expected)
    rhs = np.arange(8.0).reshape(4, 2)
    np.testing.assert_allclose(mx.nd.dot(a, mx.nd.array(rhs)).asnumpy(), expected @ rhs)
    np.testing.assert_allclose(mx.nd.sparse.dot(a, mx.nd.array(rhs)).asnumpy(), expected @ rhs)
    lhs = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(mx.nd.dot(a, mx.nd.array(lhs), transpose_a=True).asnumpy(),
                               expected.T @ lhs)
    # the parts it reports are the well-formed ones of what it holds
    rows, cols = np.nonzero(expected)
    np.testing.assert_array_equal(a.indices.asnumpy(), cols)
    np.testing.assert_array_equal(a.data.asnumpy(), expected[rows, cols])
    np.testing.assert_array_equal(a.indptr.asnumpy(),
                                  np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=3))]))
    np.testing.assert_array_equal(a[1:3].asnumpy(), expected[1:3])
    np.testing.assert_array_equal((a + a).asnumpy(), 2 * expected)


def test_csr_parts_of_the_wrong_length_are_refused():
    with pytest.raises(MXNetError, match="indptr has 3 entries, shape"):
        mx.nd.sparse.csr_matrix((DATA, np.arange(5) % 4, np.array([0, 2, 5])), shape=SHAPE)
    with pytest.raises(MXNetError, match="5 values but 4 column indices"):
        mx.nd.sparse.csr_matrix((DATA, np.arange(4), np.array([0, 2, 4, 5])), shape=SHAPE)


def test_random_malformed_csr_parts_place_what_exists():
    rng = np.random.default_rng(7)
    for _ in range(200):
        rows, cols, nnz = rng.integers(1, 6), rng.integers(1, 6), rng.integers(0, 12)
        indices = rng.integers(-3, cols + 3, nnz)
        indptr = np.sort(rng.integers(-2, nnz + 3, rows + 1))
        if rng.random() < 0.5:
            indptr = rng.permutation(indptr)
        data = rng.standard_normal(nnz)
        a = mx.nd.sparse.csr_matrix((data, indices, indptr), shape=(rows, cols), dtype="float64")
        np.testing.assert_allclose(a.asnumpy(), placed(indices, indptr, (rows, cols), data),
                                   atol=1e-12)


def test_a_large_unsorted_csr_is_placed_without_a_python_loop():
    """Unsorted column indices are malformed for MXNet (check_format) but common; the
    placement of malformed parts is vectorised (~0.1 s here for a million entries)."""
    rng = np.random.default_rng(0)
    rows, cols, per_row = 20000, 1000, 50
    indices = np.concatenate([rng.permutation(cols)[:per_row] for _ in range(rows)])
    indptr = np.arange(0, rows * per_row + 1, per_row)
    data = rng.standard_normal(rows * per_row).astype(np.float32)
    a = mx.nd.sparse.csr_matrix((data, indices, indptr), shape=(rows, cols))
    with pytest.raises(MXNetError, match="ascending"):
        a.check_format()
    dense = a.asnumpy()
    np.testing.assert_array_equal(dense[np.repeat(np.arange(rows), per_row), indices], data)
    assert np.count_nonzero(dense) == np.count_nonzero(data)


@pytest.mark.parametrize("indices, problem", [
    ([0, -1], "must lie in"), ([0, 3], "must lie in"), ([2 ** 40, 1], "must lie in"),
    ([1, 0], "ascending"), ([1, 1], "ascending")])
def test_malformed_row_sparse_is_accepted_reported_and_safe_to_use(indices, problem):
    data = np.array([[1.0, 2.0], [3.0, 4.0]])
    a = mx.nd.sparse.row_sparse_array((data, np.array(indices)), shape=(3, 2))
    with pytest.raises(MXNetError, match=problem):
        a.check_format()
    expected = np.zeros((3, 2))
    for row, values in zip(indices, data):
        if 0 <= row < 3:
            expected[row] = values
    np.testing.assert_array_equal(a.asnumpy(), expected)
    np.testing.assert_allclose(mx.nd.dot(a, mx.nd.ones((2, 2))).asnumpy(), expected @ np.ones((2, 2)))
    np.testing.assert_array_equal(a.indices.asnumpy(), np.nonzero(expected.any(axis=1))[0])


@pytest.mark.parametrize("row_ids", [[0, 3], [-1, 1], [2 ** 40]])
def test_row_ids_outside_the_rows_are_refused_by_retain_and_row_sparse_pull(row_ids):
    a = mx.nd.sparse.row_sparse_array((np.ones((2, 2)), np.array([0, 2])), shape=(3, 2))
    with pytest.raises(MXNetError, match="_sparse_retain: input 'indices' holds row ids outside"):
        mx.nd.sparse.retain(a, mx.nd.array(row_ids, dtype="int64"))
    kv = mx.kv.create("local")
    kv.init("w", a)
    out = mx.nd.sparse.zeros("row_sparse", (3, 2))
    with pytest.raises(MXNetError, match="row_sparse_pull: row id out of range"):
        kv.row_sparse_pull("w", out=out, row_ids=mx.nd.array(row_ids, dtype="int64"))


@pytest.mark.parametrize("index", ["18446744073709551615", "99999999999999999999"])
def test_a_libsvm_feature_index_too_large_for_int64_is_refused(tmp_path, index):
    """A 19-digit index used to wrap around in the parser: 2**64 - 1 became -1 and its value
    was written into the last column of the next row of the batch."""
    path = tmp_path / "big.svm"
    path.write_text("1 0:1 %s:2\n0 1:3\n" % index)
    with pytest.raises(MXNetError, match="line 1: a feature index is too large"):
        mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(4,), batch_size=2)


def test_libsvm_leading_zeros_and_18_digit_indices_still_parse(tmp_path):
    path = tmp_path / "ok.svm"
    path.write_text("1 0:1 0000000000000000000003:2\n0 1:3 999999999999999999:4\n")
    from lightmod.kernels.dataio import parse_libsvm_bytes
    status, _, _, indptr, indices, _ = parse_libsvm_bytes(path.read_bytes())
    assert status == 0
    assert indptr.tolist() == [0, 2, 4] and indices.tolist() == [0, 3, 1, 999999999999999999]
    with pytest.raises(MXNetError, match="feature index 999999999999999999 in row 2"):
        mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(4,), batch_size=2)


_EVERY_CONSUMER = textwrap.dedent(r"""
    import numpy as np
    import lightmod as mx
    from lightmod.base import MXNetError
    import json, sys
    cases = json.loads(sys.argv[1])
    data = np.arange(1.0, 6.0)
    for indices, indptr in cases:
        a = mx.nd.sparse.csr_matrix((data, np.array(indices), np.array(indptr)), shape=(3, 4))
        for use in (lambda: mx.nd.dot(a, mx.nd.ones((4, 2))),
                    lambda: mx.nd.dot(a, mx.nd.ones((3, 2)), transpose_a=True),
                    lambda: mx.nd.dot(mx.nd.ones((2, 3)), a),
                    lambda: mx.nd.sparse.dot(a, mx.nd.ones((4, 2))),
                    lambda: a.tostype("row_sparse"), lambda: a.tostype("default"),
                    lambda: mx.nd.sum(a, axis=1), lambda: mx.nd.square(a),
                    lambda: mx.nd.sparse.retain(a.tostype("row_sparse"), mx.nd.array([0, 2])),
                    lambda: a.copyto(mx.cpu()), lambda: a[2]):
            try:
                use().wait_to_read()
            except MXNetError:
                pass
        mx.nd.save(sys.argv[2], [a])
        back = mx.nd.load(sys.argv[2])[0]
        assert (back.asnumpy() == a.asnumpy()).all()
    print("done")
""")


def test_every_consumer_of_a_malformed_csr_finishes_in_a_fresh_process(tmp_path):
    """A read outside an array may crash the process rather than raise: run every consumer
    of every malformed case in a child and ask that it exits normally."""
    import json
    cases = json.dumps([list(map(list, MALFORMED_CSR[name])) for name in sorted(MALFORMED_CSR)])
    proc = subprocess.run([sys.executable, "-c", _EVERY_CONSUMER, cases,
                           str(tmp_path / "a.params")], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["done"]
