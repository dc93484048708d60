"""mx.nd against values MXNet 1.9.1 produced for the same expressions
(tests/fixtures/make_ndarray_golden.py): dtype rules, indexing shapes, comparisons, integer
arithmetic, reshape codes, sparse views, op-backed methods, random shapes and dtypes."""
import json
import os
import sys

import numpy as np
import pytest

import lightmod as mx

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
sys.path.insert(0, FIX)
from make_ndarray_golden import evaluate  # noqa: E402

with open(os.path.join(FIX, "ndarray_golden.json")) as _f:
    GOLDEN = json.load(_f)["results"]

# methods backed by operators other helpers own: checked when the operator exists
_OPS_NEEDED = {".sum(": "sum", ".mean(": "mean", ".max(": "max", ".min(": "min",
               ".argmax(": "argmax", ".norm(": "norm", ".flatten(": "Flatten",
               ".expand_dims(": "expand_dims", ".squeeze(": "squeeze",
               ".transpose(": "transpose", ".tile(": "tile", ".repeat(": "repeat",
               ".slice_axis(": "slice_axis", ".one_hot(": "one_hot", "concat(": "Concat",
               "stack(": "stack"}


def _check(want, got, expr):
    if "list" in want:
        assert "list" in got and len(got["list"]) == len(want["list"]), expr
        for w, g in zip(want["list"], got["list"]):
            _check(w, g, expr)
        return
    if "error" in want:
        assert got.get("error") == want["error"], (expr, got)
        return
    assert "error" not in got, (expr, got)
    for key in ("type", "shape", "dtype", "stype"):
        assert got.get(key) == want.get(key), (expr, key, got.get(key), want.get(key))
    if "values" in want:
        np.testing.assert_allclose(got["values"], want["values"], rtol=1e-6, atol=1e-6,
                                   err_msg=expr)


@pytest.mark.parametrize("expr", sorted(GOLDEN))
def test_matches_mxnet(expr):
    for marker, op in _OPS_NEEDED.items():
        if marker in expr and mx.operator.find(op) is None:
            pytest.skip("operator %s is not registered" % op)
    _check(GOLDEN[expr], evaluate(mx, [expr])[expr], expr)
