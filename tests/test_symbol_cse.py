"""Common-subexpression elimination when binding: identical operator nodes run once, values and
gradients do not change, and MXNET_ELIMINATE_COMMON_EXPR=0 turns it off."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.symbol import graph


@pytest.fixture
def cse_env(monkeypatch):
    def setting(on):
        monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "1" if on else "0")
    return setting


def _bind(sym, on, cse_env, grad_req="write", dtype="float32", **shapes):
    cse_env(on)
    return sym.simple_bind(mx.cpu(), grad_req=grad_req,
                           type_dict={n: dtype for n in shapes}, **shapes)


def _graphs():
    a, b, c = (mx.sym.var(n) for n in "abc")
    d = a + 1
    return [
        ((a + 1) + (a + 2), 0),                   # different scalars: nothing to merge
        ((a + b) + (a + b), 1),
        ((a * b + c) * (a * b + c), 2),           # a chain collapses from the bottom up
        (mx.sym.Group([a * d, a * d]), 0),        # one product, then a copy for the 2nd output
        (mx.sym.Group([a * d + b, a * d + b]), 1),
        (mx.sym.sin(a) - mx.sym.sin(a) * mx.sym.exp(a), 1),
        (mx.sym.Group([a, a]), -1),               # a repeated output is read through a copy
    ]


@pytest.mark.parametrize("sym, saved", _graphs())
@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_cse_keeps_values_and_gradients(sym, saved, grad_req, cse_env):
    rng = np.random.RandomState(3)
    names = sym.list_arguments()
    values = {n: rng.uniform(0.5, 1.5, (3, 4)).astype(np.float64) for n in names}
    shapes = {n: (3, 4) for n in names}
    plain = _bind(sym, False, cse_env, grad_req, "float64", **shapes)
    merged = _bind(sym, True, cse_env, grad_req, "float64", **shapes)
    assert len(plain.get_optimized_symbol().get_internals()) == len(sym.get_internals())
    assert (len(merged.get_optimized_symbol().get_internals()) + saved
            == len(sym.get_internals()))
    assert merged.get_optimized_symbol().list_arguments() == names
    for ex in (plain, merged):
        for g in ex.grad_arrays:
            g[:] = 0.25
    heads = [mx.nd.array(rng.uniform(-1, 1, (3, 4)), dtype=np.float64)
             for _ in sym.list_outputs()]
    outs = [ex.forward(is_train=True, **{n: mx.nd.array(v, dtype=np.float64)
                                         for n, v in values.items()}) for ex in (plain, merged)]
    for ex in (plain, merged):
        ex.backward(heads)
    for x, y in zip(*outs):
        np.testing.assert_allclose(x.asnumpy(), y.asnumpy(), rtol=1e-12)
    for x, y in zip(plain.grad_arrays, merged.grad_arrays):
        np.testing.assert_allclose(x.asnumpy(), y.asnumpy(), rtol=1e-12)
    # the outputs of a merged executor are separate arrays, even when they hold equal values
    if len(outs[1]) == 2:
        outs[1][0][:] = 7.0
        assert not (outs[1][1].asnumpy() == 7.0).all()


def test_cse_names_the_copies_and_leaves_the_symbol_alone():
    a = mx.sym.var("a")
    sym = mx.sym.Group([mx.sym.exp(a, name="e1"), mx.sym.exp(a, name="e2"),
                        mx.sym.exp(a, name="e3")])
    before = sym.tojson()
    merged = mx.sym.Symbol(graph.eliminate_common_expr(sym._outputs))
    assert merged.list_outputs() == ["e1_output", "e1_0_copy_output", "e1_1_copy_output"]
    assert sym.tojson() == before


def test_random_sampler_nodes_are_not_merged(cse_env):
    draws = mx.sym.Group([mx.sym.random.uniform(shape=(500,)), mx.sym.random.uniform(shape=(500,))])
    ex = _bind(draws, True, cse_env)
    first, second = (o.asnumpy() for o in ex.forward())
    assert len(ex.get_optimized_symbol().get_internals()) == 2
    assert not np.array_equal(first, second)


def test_dropout_nodes_are_not_merged(cse_env):
    a = mx.sym.var("a")
    sym = mx.sym.Dropout(a, p=0.5, mode="always") + mx.sym.Dropout(a, p=0.5, mode="always")
    ex = _bind(sym, True, cse_env, a=(2000,))
    assert len(ex.get_optimized_symbol().get_internals()) == len(sym.get_internals())
    out = ex.forward(a=mx.nd.ones((2000,)))[0].asnumpy()
    # two independent masks: some elements are kept by exactly one of them
    assert set(np.unique(out)) == {0.0, 2.0, 4.0}


def test_nodes_that_update_auxiliary_states_are_not_merged(cse_env):
    data = mx.sym.var("data")
    gamma, beta = mx.sym.var("gamma"), mx.sym.var("beta")
    mean, var = mx.sym.var("mean"), mx.sym.var("var")
    bn1 = mx.sym.BatchNorm(data, gamma, beta, mean, var, name="bn")
    bn2 = mx.sym.BatchNorm(data, gamma, beta, mean, var, name="bn")
    sym = bn1 + bn2
    ex = _bind(sym, True, cse_env, data=(4, 3))
    assert len(ex.get_optimized_symbol().get_internals()) == len(sym.get_internals())


def test_operators_that_draw_random_numbers_are_marked_stateful():
    # any operator that samples must stay out of common-subexpression elimination
    for name, op in mx.operator.all_ops().items():
        if any(word in name.lower() for word in ("_random_", "_sample_", "dropout", "shuffle",
                                                  "multinomial")):
            assert op.stateful, name


def test_cse_off_by_environment(cse_env):
    a = mx.sym.var("a")
    sym = mx.sym.Group([a * 2, a * 2])
    off = _bind(sym, False, cse_env, a=(2,))
    on = _bind(sym, True, cse_env, a=(2,))
    assert len(off.get_optimized_symbol().get_internals()) == 3
    assert len(on.get_optimized_symbol().get_internals()) == 3    # a, the product, its copy
    assert on.get_optimized_symbol().list_outputs() == [sym[0].list_outputs()[0],
                                                        sym[0].name + "_0_copy_output"]
