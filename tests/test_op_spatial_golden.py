"""The sequence, spatial and GroupNorm operators against outputs and gradients MXNet 1.9.1
computed (tests/fixtures/make_spatial_golden.py): the same inputs, attributes and head
gradients, bound as symbols on the CPU."""
import json
import os

import numpy as np
import pytest

import lightmod as mx

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(HERE, "spatial_golden.json")) as _f:
    GOLDEN = json.load(_f)
ARRAYS = np.load(os.path.join(HERE, "spatial_golden.npz"))


def _op(name):
    fn = mx.sym
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: c["case"])
def test_matches_mxnet(case):
    name = case["case"]
    inputs = case["inputs"]
    attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in case["attrs"].items()}
    sym = _op(case["op"])(*[mx.sym.var(n) for n in inputs], **attrs)
    args = {n: mx.nd.array(ARRAYS["%s/in/%s" % (name, n)]) for n in inputs}
    grads = {n: mx.nd.zeros(args[n].shape) for n in inputs}
    req = dict(zip(inputs, case["grad_req"]))
    exe = sym.bind(mx.cpu(), args, args_grad=grads, grad_req=req)
    outs = exe.forward(is_train=True)
    assert len(outs) == case["outputs"]
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), ARRAYS["%s/out/%d" % (name, i)], rtol=1e-5,
                                   atol=1e-6, err_msg="%s: output %d" % (name, i))
    exe.backward([mx.nd.array(ARRAYS["%s/head/%d" % (name, i)]) for i in range(len(outs))])
    for n in inputs:
        if req[n] == "write":
            np.testing.assert_allclose(grads[n].asnumpy(), ARRAYS["%s/grad/%s" % (name, n)],
                                       rtol=1e-4, atol=1e-5,
                                       err_msg="%s: gradient of %s" % (name, n))
