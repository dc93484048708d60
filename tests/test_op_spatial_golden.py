"""The sequence, spatial, region and GroupNorm operators against outputs and gradients MXNet
1.9.1 computed (tests/fixtures/make_spatial_golden.py, make_detection_golden.py): the same
inputs, attributes and head gradients, bound as symbols on the CPU."""
import json
import os

import numpy as np
import pytest

import lightmod as mx

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def _load(stem):
    with open(os.path.join(HERE, stem + ".json")) as f:
        meta = json.load(f)
    arrays = np.load(os.path.join(HERE, stem + ".npz"))
    return [(case, arrays) for case in meta["cases"]]


CASES = _load("spatial_golden") + _load("detection_golden")


def _op(name):
    fn = mx.sym
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


@pytest.mark.parametrize("case,arrays", CASES, ids=[c["case"] for c, _ in CASES])
def test_matches_mxnet(case, arrays):
    name = case["case"]
    inputs = case["inputs"]
    attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in case["attrs"].items()}
    sym = _op(case["op"])(*[mx.sym.var(n) for n in inputs], **attrs)
    args = {n: mx.nd.array(arrays["%s/in/%s" % (name, n)]) for n in inputs}
    grads = {n: mx.nd.zeros(args[n].shape) for n in inputs}
    req = dict(zip(inputs, case["grad_req"]))
    exe = sym.bind(mx.cpu(), args, args_grad=grads, grad_req=req)
    outs = exe.forward(is_train=True)
    assert len(outs) == case["outputs"]
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), arrays["%s/out/%d" % (name, i)], rtol=1e-5,
                                   atol=1e-5, err_msg="%s: output %d" % (name, i))
    if not any(r == "write" for r in req.values()):
        return
    exe.backward([mx.nd.array(arrays["%s/head/%d" % (name, i)]) for i in range(len(outs))])
    for n in inputs:
        if req[n] == "write":
            np.testing.assert_allclose(grads[n].asnumpy(), arrays["%s/grad/%s" % (name, n)],
                                       rtol=1e-4, atol=1e-4,
                                       err_msg="%s: gradient of %s" % (name, n))
